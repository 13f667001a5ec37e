//! End-to-end tests: time under the user's control. `seal time advance`/`set` move the clocks
//! of every process of the sealed run they run in, at a well-defined point, deterministically.
use crate::util::*;

/// A sealed `sh -c SCRIPT` with `$SEAL` naming the built seal.
fn sealed_script(script: &str) -> Output {
    let mut c = seal(["--", "sh", "-c", script]);
    c.env("SEAL", seal_bin());
    run_timeout(c, TIMEOUT)
}

#[test]
fn advancing_a_day_moves_every_later_clock_read_of_the_run_by_exactly_a_day() {
    let script = "date +%s; \"$SEAL\" time advance 1d; date +%s; \
                  python3 -c 'import time; print(int(time.time()))'";
    let first = sealed_script(script);
    first.ok();
    let secs: Vec<i64> = first
        .stdout
        .lines()
        .map(|l| l.parse().unwrap_or_else(|_| panic!("{}", first.show())))
        .collect();
    assert_eq!(secs.len(), 3, "{}", first.show());
    assert_eq!(secs[1] - secs[0], 86_400, "{}", first.show());
    assert_eq!(
        secs[2],
        secs[1],
        "python sees the advanced clock\n{}",
        first.show()
    );
    for _ in 1..5 {
        let again = sealed_script(script);
        again.ok();
        assert_eq!(
            again.stdout,
            first.stdout,
            "not deterministic\n{}",
            again.show()
        );
    }
}

#[test]
fn one_process_advances_and_another_sees_it_after_a_handshake_and_set_moves_the_wall_clock() {
    // The reader reads its clock, says so, and waits on a pipe; the writer advances, then
    // tells it. The
    // reader's monotonic clock moved too; `set` then puts the wall clock at a given time.
    let code = r#"
import os, subprocess, sys, time
r, w = os.pipe()
ready_r, ready_w = os.pipe()
pid = os.fork()
if pid == 0:
    before = time.monotonic()
    os.write(ready_w, b"r")
    os.read(r, 1)
    print("child sees", round(time.monotonic() - before), "s later", flush=True)
    os._exit(0)
os.read(ready_r, 1)
subprocess.run([os.environ["SEAL"], "time", "advance", "2h"], check=True)
os.write(w, b"x")
os.waitpid(pid, 0)
subprocess.run([os.environ["SEAL"], "time", "set", "2030-06-01T12:00:00Z"], check=True)
print("now", time.strftime("%Y-%m-%d %H:%M", time.gmtime()))
# The same protocol without spawning: clock_settime on seal's advance clock id.
time.clock_settime(0x5ea1, 60.0)
print("after the protocol", time.strftime("%H:%M", time.gmtime()))
"#;
    let run = || {
        let mut c = seal(["--", "python3", "-c", code]);
        c.env("SEAL", seal_bin());
        run_timeout(c, TIMEOUT)
    };
    let first = run();
    first.ok();
    assert_eq!(
        first.stdout,
        "child sees 7200 s later\nnow 2030-06-01 12:00\nafter the protocol 12:01\n",
        "{}",
        first.show()
    );
    for _ in 1..5 {
        let again = run();
        assert_eq!(again.stdout, first.stdout, "{}", again.show());
    }
}

#[test]
fn bad_spans_and_use_outside_a_run_are_one_line_usage_errors() {
    let outside = run_seal(["time", "advance", "1d"]);
    outside.code_is(2);
    outside.stderr_has("not inside a sealed run");
    assert_eq!(outside.stderr.lines().count(), 1, "{}", outside.show());
    for (args, want) in [
        (vec!["time", "advance", "+2x"], "expected a span"),
        (vec!["time", "advance", "-1d"], "only moves forward"),
        (vec!["time", "set", "yesterday"], "RFC 3339"),
    ] {
        let script = format!("\"$SEAL\" {}", args.join(" "));
        let out = sealed_script(&script);
        out.code_is(2);
        out.stderr_has(want);
    }
    // With the time family unsealed there is nothing to move: said, not pretended.
    let mut c = seal([
        "--unseal",
        "time",
        "--",
        "sh",
        "-c",
        "\"$SEAL\" time advance 1d",
    ]);
    c.env("SEAL", seal_bin());
    let unsealed = run_timeout(c, TIMEOUT);
    unsealed.code_is(125);
    unsealed.stderr_has("not sealed");
}

#[test]
fn only_and_skip_seal_the_matching_programs_and_pass_the_seal_on() {
    let script = "date +%s; python3 -c 'import time; print(int(time.time()))'";
    let epoch = "1767225600";
    let dir = build_dir().join("scope");
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("census.json");
    let only = run_seal([
        "--only",
        "python3*",
        "--census",
        json.to_str().unwrap(),
        "--",
        "bash",
        "-c",
        script,
    ]);
    only.ok();
    let lines: Vec<&str> = only.stdout.lines().collect();
    assert_ne!(lines[0], epoch, "date was sealed\n{}", only.show());
    assert_eq!(lines[1], epoch, "python was not sealed\n{}", only.show());
    let census: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let text = census.to_string();
    assert!(text.contains("scoped-out"), "no scoped-out event:\n{text}");
    // --skip is the mirror image; from seal.toml too.
    let skip = run_seal(["--skip", "python3*", "--", "bash", "-c", script]);
    skip.ok();
    let lines: Vec<&str> = skip.stdout.lines().collect();
    assert_eq!(lines[0], epoch, "{}", skip.show());
    assert_ne!(lines[1], epoch, "{}", skip.show());
    std::fs::write(dir.join("seal.toml"), "[seal]\nonly = [\"python3*\"]\n").unwrap();
    let mut c = seal(["--", "bash", "-c", script]);
    c.current_dir(&dir);
    let from_file = run_timeout(c, TIMEOUT);
    from_file.ok();
    let lines: Vec<&str> = from_file.stdout.lines().collect();
    assert_ne!(lines[0], epoch, "{}", from_file.show());
    assert_eq!(lines[1], epoch, "{}", from_file.show());
}

#[test]
fn a_relative_epoch_is_resolved_once_at_launch_and_said() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let out = run_seal(["--epoch", "now+1d", "--", "date", "+%s"]);
    out.ok();
    let shown: i64 = out.stdout.trim().parse().unwrap();
    assert!(
        (shown - now - 86_400).abs() <= 5,
        "now+1d printed {shown}, now is {now}\n{}",
        out.show()
    );
    out.stderr_has("not reproducible across days");
    // The note names the absolute epoch that repeats the run exactly.
    let repeat = out
        .stderr
        .split("--epoch ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no --epoch in the note\n{}", out.show()))
        .to_string();
    let again = run_seal(["--epoch", &repeat, "--", "date", "+%s"]);
    assert_eq!(again.stdout, out.stdout, "{}", again.show());
    let quiet = run_seal(["-q", "--epoch", "-15d", "--", "true"]);
    quiet.ok();
    assert_eq!(quiet.stderr, "", "{}", quiet.show());
    let bad = run_seal(["--epoch", "now+2x", "--", "true"]);
    bad.code_is(2);
    bad.stderr_has("expected a span");
}

#[test]
fn a_rate_makes_clocks_follow_real_time_sped_up_or_slowed_down() {
    // A 1 s sleep and a loop that spins until the clock moved 1 s: 2 s of real time at
    // `--rate 1`, 0.2 s at `--rate 10`. The margins are wide (a loaded CI machine wakes a
    // sleeper late and starts Python slowly), the difference between the rates wider.
    let code = "import time\n\
                t0 = time.monotonic(); time.sleep(1.0); t1 = time.monotonic()\n\
                while time.monotonic() - t1 < 1.0: pass\n\
                t2 = time.monotonic()\n\
                print(f'{t1 - t0:.3f} {t2 - t1:.3f}')\n";
    let timed = |rate: &str| {
        let out = run_seal(["--rate", rate, "--", "python3", "-c", code]);
        out.ok();
        let v: Vec<f64> = out
            .stdout
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        assert!(
            (0.999..1.6).contains(&v[0]) && (1.0..1.6).contains(&v[1]),
            "--rate {rate}: the sleep and the loop should each read about 1 s\n{}",
            out.show()
        );
        out.elapsed.as_secs_f64()
    };
    let real_speed = timed("1");
    let ten_times = timed("10");
    assert!(
        real_speed >= 1.9,
        "--rate 1 took {real_speed:.2} s for 2 s of clock time"
    );
    assert!(
        ten_times + 1.0 < real_speed,
        "--rate 10 took {ten_times:.2} s, --rate 1 {real_speed:.2} s"
    );
    for bad in ["-1", "0", "fast"] {
        let out = run_seal(["--rate", bad, "--", "true"]);
        out.code_is(2);
        out.stderr_has("rate");
    }
    let verify = run_seal(["verify", "-n", "2", "--rate", "1", "--", "true"]);
    verify.stderr_has("not expected to be byte-identical");
}
