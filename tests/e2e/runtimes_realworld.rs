//! Real programs and their tools under seal (docs/runtimes-realworld.md): pytest, unittest,
//! asyncio, process pools with every start method, subprocess timeouts, signals and timers,
//! Node's event loop, workers and child processes, npm, javac and a JVM with executors, cargo
//! building and testing a crate, a Rust program using std's threads, channels and processes.
//! Each runs several times under `seal` with a hard time limit (a hang fails with HANG) and
//! must print the same thing every run. Tests skip, with a note, when the tool is missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::util::*;

/// Runs `seal ARGS` `n` times (in `cwd` if given); asserts exit 0 and byte-identical stdout;
/// returns it.
fn stable_in(cwd: Option<&Path>, args: &[&str], n: usize) -> String {
    let run = || {
        let mut c = seal(args);
        if let Some(d) = cwd {
            c.current_dir(d);
        }
        run_timeout(c, TIMEOUT)
    };
    assert_runs_agree(&format!("{args:?}"), n, run).stdout
}

fn python_has(module: &str) -> bool {
    have("python3")
        && Command::new("python3")
            .args(["-c", &format!("import {module}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
}

#[test]
fn python_pytest_is_stable() {
    if !python_has("pytest") {
        skip!("pytest not installed");
    }
    let dir = fixture("python/realworld_tests");
    let out = stable_in(
        Some(&dir),
        &[
            "--",
            "python3",
            "-m",
            "pytest",
            "-q",
            "-s",
            "-p",
            "no:cacheprovider",
        ],
        3,
    );
    assert_has(&out, "5 passed");
}

#[test]
fn python_unittest_is_stable() {
    require_tools!("python3");
    let dir = fixture("python/realworld_tests");
    // unittest reports on stderr ("Ran 2 tests in 0.020s"): check that it is stable too.
    let args = [
        "--",
        "python3",
        "-m",
        "unittest",
        "-v",
        "test_unittest_style",
    ];
    let mut errs = Vec::new();
    for _ in 0..3 {
        let mut c = seal(args);
        c.current_dir(&dir);
        let o = run_timeout(c, TIMEOUT);
        o.ok();
        errs.push(o.stderr);
    }
    assert!(errs[0].contains("Ran 2 tests in 0.020s"), "{}", errs[0]);
    assert!(errs.iter().all(|e| *e == errs[0]), "{errs:#?}");
}

#[test]
fn python_stdlib_workloads_are_stable_and_time_out_on_time() {
    require_tools!("python3");
    let f = fixture("python/realworld_stdlib.py");
    // Each run waits ~5 s in real time (subprocess and socket timeouts, pools, queues): the
    // three run at once. They make temp files, whose sealed names are the same in every run,
    // so each gets a private TMPDIR, and its stdout is compared with that directory written
    // as $TMPDIR (the one input that differs between the runs; the names under it must
    // still be byte-identical).
    let tmps: Vec<tempfile::TempDir> = (0..3).map(|_| private_tmpdir()).collect();
    let cmds = tmps
        .iter()
        .map(|t| {
            let mut c = seal(["--", "python3", f.to_str().unwrap()]);
            c.env("TMPDIR", t.path());
            c
        })
        .collect();
    let runs: Vec<Output> = run_concurrently(cmds, TIMEOUT)
        .into_iter()
        .zip(&tmps)
        .map(|(mut o, t)| {
            o.stdout = o.stdout.replace(t.path().to_str().unwrap(), "$TMPDIR");
            o
        })
        .collect();
    let out = assert_same_stdout(
        "python3 realworld_stdlib.py (TMPDIR written as $TMPDIR)",
        &runs,
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("tempfile $TMPDIR/") && l.matches(" $TMPDIR/").count() == 3),
        "the temp names are not under TMPDIR\n{out}"
    );
    // subprocess.run(..., timeout=1) on a 30 s child times out after 1 s (logical and real:
    // the run takes ~5 s in all, far below the 30 s the children would sleep).
    assert_has(&out, "subprocess timeout 1.0\nsubprocess timeout 2.0\n");
    assert_has(&out, "asyncio wait_for timeout after 0.250023");
    assert_has(&out, "asyncio subprocess killed -9");
    for m in ["fork", "spawn", "forkserver"] {
        assert_has(&out, &format!("{m} pool [0, 1, 2, 3, 4, 5]"));
        assert_has(&out, &format!("{m} queue empty after 0.3"));
        assert_has(&out, &format!("{m} terminated -15"));
    }
    // subprocess's timeout loop reads the monotonic clock each round and sleeps what is left:
    // the wall clock, which those reads do not move, ends a millisecond short of 2 s.
    assert_has(&out, "2026-01-01 00:00:01,999 INFO 1999 1000 hello");
}

#[test]
fn python_http_server_serves_and_stops() {
    require_tools!("python3", "bash");
    let script = r#"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 >/dev/null 2>&1 &
pid=$!
for i in $(seq 1 100); do
  python3 -c 'import sys, urllib.request
r = urllib.request.urlopen("http://127.0.0.1:%s/" % sys.argv[1], timeout=2)
print(r.status, r.headers["Date"])' "$port" 2>/dev/null && break
  sleep 0.1
done
kill $pid; wait $pid; echo "server exit $?"
"#;
    let o = run_seal(["--", "bash", "-c", script]);
    o.ok();
    assert!(
        o.stdout.starts_with("200 Thu, 01 Jan 2026 00:00:0")
            && o.stdout.ends_with("server exit 143\n"),
        "{}",
        o.show()
    );
}

#[test]
fn python_alarm_and_itimer_fire_and_warp_keeps_their_outcome() {
    require_tools!("python3");
    let f = fixture("python/realworld_timers.py");
    let f = f.to_str().unwrap();
    let expect = "alarm fired 1 sleep returned at 3.0\n\
                  itimer at least 5: True elapsed 1.0\n\
                  plain sleep after the timers 3.0\n";
    // The three runs wait in real time (the plain one ~4 s) and make no temp files: all at once.
    let mut runs = run_concurrently(
        vec![
            seal(["--", "python3", f]),
            seal(["--warp", "--", "python3", f]),
            seal(["--warp", "--", "python3", f]),
        ],
        TIMEOUT,
    )
    .into_iter();
    let plain = runs.next().unwrap();
    plain.ok();
    assert_eq!(plain.stdout, expect, "{}", plain.show());
    // Under --warp a sleep used to return at once even with SIGALRM armed: the alarm never
    // fired ("alarm fired 0") and the itimer loop's logical time depended on the scheduler.
    for warped in runs {
        warped.ok();
        assert_eq!(warped.stdout, expect, "{}", warped.show());
        // The last sleep (no timer armed any more) is still warped.
        assert!(warped.elapsed < plain.elapsed, "{:?}", warped.elapsed);
    }
}

#[test]
fn node_event_loop_workers_and_children_are_stable() {
    require_tools!("node");
    let f = fixture("node/realworld.js");
    // Default settings: libuv's loop-time reads (one per wakeup) are runtime bookkeeping and
    // do not tick, so every value is stable (docs/runtimes.md).
    let out = stable_in(None, &["--", "node", f.to_str().unwrap()], 3);
    assert!(
        out.starts_with("interval 5 100\nafter timeout 150 150\n"),
        "{out}"
    );
    assert_has(
        &out,
        r#"workers [{"n":2,"t":1767225600160},{"n":4,"t":1767225600170},{"n":6,"t":1767225600180}]"#,
    );
    assert_has(&out, "host seal pid 1000 999");
}

#[test]
fn npm_and_npx_report_their_version() {
    require_tools!("npm", "npx");
    for tool in ["npm", "npx"] {
        let plain = run_plain(tool, ["--version"]);
        plain.ok();
        let out = stable_in(None, &["--", tool, "--version"], 2);
        assert_eq!(out, plain.stdout);
    }
}

/// Compiles fixtures/java/RealWorld.java under seal (twice: the class files must match).
fn java_realworld_classes(base: &Path) -> Option<PathBuf> {
    if !have("java") || !have("javac") {
        // The caller returns at once: the whole test is skipped.
        report_skip(module_path!(), false, "java/javac not on PATH");
        return None;
    }
    let src = fixture("java/RealWorld.java");
    let mut classes = Vec::new();
    for i in 0..2 {
        let out = base.join(format!("classes{i}"));
        let o = run_seal([
            "--",
            "javac",
            "-d",
            out.to_str().unwrap(),
            src.to_str().unwrap(),
        ]);
        o.ok();
        classes.push(std::fs::read(out.join("RealWorld.class")).unwrap());
    }
    assert!(
        classes[0] == classes[1],
        "sealed javac wrote different class files"
    );
    Some(base.join("classes0"))
}

#[test]
fn java_executors_timers_and_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(dir) = java_realworld_classes(tmp.path()) else {
        return;
    };
    let cp = dir.to_str().unwrap();
    let head = "timeout ok 200 ms\nsum 55\nscheduled 5\nsleeps [30, 60, 90, 120]\n\
                date Thu Jan  1 00:00:00 UTC 2026 rc=0\n\
                Jan 01, 2026 12:00:00 AM RealWorld main\nINFO: hello\n";
    // --tick 0: every line stable, the last included.
    let args = sealed_java(&["--tick", "0"], cp, "RealWorld");
    // The 5 + 3 JVMs below are independent and mostly wait (timeouts, sleeps, a child): they
    // all run at once (sealed JVMs start with -XX:-UsePerfData: no shared hsperfdata file).
    let default_tick = sealed_java(&[], cp, "RealWorld");
    let mut cmds: Vec<Command> = (0..5).map(|_| seal(&args)).collect();
    cmds.extend((0..3).map(|_| seal(&default_tick)));
    let mut runs = run_concurrently(cmds, TIMEOUT);
    let default_runs = runs.split_off(5);
    let out = assert_same_stdout(&format!("{args:?}"), &runs);
    assert!(out.starts_with(head), "{out}");
    // Default settings: the JIT's clock reads no longer move anything, so every line but the
    // last is stable. The last (sub-millisecond Instant, new Random()) still moves by a few
    // ticks: Future.get(timeout) and awaitTermination read nanoTime only if their task or pool
    // has not finished yet, which real time decides (docs/runtimes.md).
    // Of the last line, the millisecond clock, the UUID (SecureRandom) and the pid are stable
    // too: only the sub-millisecond Instant and new Random() (seeded from nanoTime) move.
    let last = |o: &str| -> Vec<String> {
        let w: Vec<&str> = o.lines().last().unwrap_or("").split_whitespace().collect();
        ["ms", "uuid", "pid"]
            .iter()
            .map(|k| {
                let at = w.iter().position(|x| x == k).map(|i| i + 1);
                format!("{k} {}", at.and_then(|i| w.get(i)).unwrap_or(&"?"))
            })
            .collect()
    };
    for o in default_runs {
        o.ok();
        assert!(o.stdout.starts_with(head), "{}", o.show());
        assert_eq!(last(&o.stdout), last(&out), "{}", o.show());
    }
}

#[test]
fn cargo_new_build_and_test_a_crate() {
    require_tools!("cargo");
    let tmp = tempfile::tempdir().unwrap();
    let cargo = |args: &[&str], dir: &Path| {
        let mut a = vec!["--", "cargo"];
        a.extend_from_slice(args);
        let mut c = seal(&a);
        c.current_dir(dir).env_remove("CARGO_TARGET_DIR");
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("CARGO_") && k != "CARGO_HOME" {
                c.env_remove(&k);
            }
        }
        let o = run_timeout(c, Duration::from_secs(120));
        o.ok();
        o
    };
    cargo(&["new", "--offline", "--vcs", "none", "hello"], tmp.path());
    let crate_dir = tmp.path().join("hello");
    let main = crate_dir.join("src/main.rs");
    let mut src = std::fs::read_to_string(&main).unwrap();
    src.push_str(
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(2, 1 + 1); }\n    \
         #[test]\n    fn sleeps() { std::thread::sleep(std::time::Duration::from_millis(20)); }\n}\n",
    );
    std::fs::write(&main, src).unwrap();
    let mut bins = Vec::new();
    for _ in 0..2 {
        let _ = std::fs::remove_dir_all(crate_dir.join("target"));
        cargo(&["build", "--offline"], &crate_dir);
        bins.push(std::fs::read(crate_dir.join("target/debug/hello")).unwrap());
    }
    assert!(
        bins[0] == bins[1],
        "sealed cargo build wrote different binaries"
    );
    let t = cargo(&["test", "--offline"], &crate_dir);
    t.stdout_has("2 passed");
    let run = cargo(&["run", "--offline", "-q"], &crate_dir);
    assert_eq!(run.stdout, "Hello, world!\n");
}

#[test]
fn rust_std_threads_channels_and_commands_are_stable() {
    require_tools!("rustc");
    let bin = build_rust("realworld");
    let out = assert_sealed_stable(&[bin.to_str().unwrap()], 5);
    assert!(
        out.starts_with(
            "scoped [1767225600000000, 1767225600010000, 1767225600020000, 1767225600030000]\n\
             recv_timeout Err(Timeout) after 150.005ms\nrecv Ok(7)\n"
        ),
        "{out}"
    );
}
