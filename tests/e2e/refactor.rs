//! Time that a harmless refactor cannot move: clock reads a program does not print leave the
//! values it prints alone. Monotonic and CPU-time reads never move the wall clock (the
//! default); with `--spin-after N` the first N wall-clock reads after each wait do not move
//! it either. A printed change (a date one day later) still shows.

use std::path::Path;

use crate::util::*;

/// What the Python program prints: wall-clock values, random values, a child's date.
const PY_PRINT: &str =
    "print(datetime.datetime.now(), time.time(), random.random(), uuid.uuid4())\n\
print(subprocess.run(['date', '+%s.%N'], capture_output=True, text=True).stdout.strip())\n\
time.sleep(0.01)\n\
print(datetime.datetime.now().isoformat())\n";

/// Runs `script` (written to `dir/name`) sealed with `flags`, from `dir`.
fn py(dir: &Path, name: &str, script: &str, flags: &[&str]) -> Output {
    std::fs::write(dir.join(name), script).unwrap();
    let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    args.extend(["--", "python3", name].map(String::from));
    let mut cmd = seal(&args);
    cmd.current_dir(dir);
    let out = run_timeout(cmd, TIMEOUT);
    out.ok();
    out
}

const PY_HEAD: &str = "import datetime, random, subprocess, time, uuid\n";

#[test]
fn unprinted_monotonic_and_cpu_reads_move_no_printed_value_in_python() {
    let d = private_tmpdir();
    let base = py(d.path(), "a.py", &format!("{PY_HEAD}{PY_PRINT}"), &[]).stdout;
    // Timing code added around the work, a helper moved to another module, an extra import.
    std::fs::write(
        d.path().join("helpers.py"),
        "import time\ndef timed(f):\n    t = time.perf_counter()\n    f()\n    \
         return time.perf_counter() - t\n",
    )
    .unwrap();
    let refactored = format!(
        "import datetime, random, subprocess, time, uuid\nimport json, helpers\n\
         t0 = time.perf_counter(); c0 = time.process_time(); m0 = time.monotonic_ns()\n\
         helpers.timed(lambda: sum(range(1000)))\n{PY_PRINT}\
         elapsed = time.perf_counter() - t0\n"
    );
    let after = py(d.path(), "b.py", &refactored, &[]).stdout;
    assert_eq!(
        after, base,
        "an unprinted perf_counter moved a printed value"
    );
    // A printed change shows.
    let changed = PY_PRINT.replacen(
        "print(datetime.datetime.now().isoformat())",
        "print((datetime.datetime.now() + datetime.timedelta(days=1)).isoformat())",
        1,
    );
    let moved = py(d.path(), "c.py", &format!("{PY_HEAD}{changed}"), &[]).stdout;
    assert_ne!(moved, base);
    let diff: Vec<_> = base
        .lines()
        .zip(moved.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(diff.len(), 1, "only the printed date moves: {diff:?}");
    assert!(diff[0].1.starts_with("2026-01-02T"), "{diff:?}");
}

#[test]
fn with_spin_after_unprinted_wall_clock_reads_move_nothing_either() {
    let d = private_tmpdir();
    let flags = ["--spin-after", "1000"];
    let base = py(d.path(), "a.py", &format!("{PY_HEAD}{PY_PRINT}"), &flags).stdout;
    let refactored = format!(
        "{PY_HEAD}start = time.time(); stamp = datetime.datetime.now()\n{PY_PRINT}\
         took = time.time() - start\n"
    );
    assert_eq!(
        py(d.path(), "b.py", &refactored, &flags).stdout,
        base,
        "an unprinted time.time() moved a printed value under --spin-after"
    );
    // Without it, each wall-clock read ticks: the same refactor moves the first line (the
    // documented default, chosen so that a duration measured on the wall clock is never 0).
    let default = py(d.path(), "a.py", &format!("{PY_HEAD}{PY_PRINT}"), &[]).stdout;
    let moved = py(d.path(), "b.py", &refactored, &[]).stdout;
    assert_ne!(moved.lines().next(), default.lines().next());
    // A loop that spins on the wall clock still ends, at its deadline.
    let spin = "import time\nd = time.time() + 0.5\nn = 0\nwhile time.time() < d:\n    n += 1\n\
                print(n, round(time.time() - d, 6))\n";
    let out = py(d.path(), "spin.py", spin, &flags).stdout;
    assert_eq!(
        out, "500998 1e-06\n",
        "the spin loop under --spin-after 1000"
    );
}

#[test]
fn unprinted_monotonic_reads_move_no_printed_value_in_node() {
    if !have("node") {
        skip!("node not on PATH");
    }
    let d = private_tmpdir();
    // Math.random is left out: V8 draws it from the generator that also gives objects their
    // hash codes, so code that only names `performance` moves the draws (docs/limits.md).
    let print = "console.log(new Date().toISOString(), Date.now(), String(new Date()));\n\
                 setTimeout(() => console.log(new Date().toISOString()), 20);\n";
    let run = |name: &str, body: &str| {
        std::fs::write(d.path().join(name), body).unwrap();
        let mut cmd = seal(["--", "node", name]);
        cmd.current_dir(d.path());
        let out = run_timeout(cmd, TIMEOUT);
        out.ok();
        out.stdout
    };
    let base = run("a.js", print);
    let refactored = format!(
        "const t0 = performance.now(); const h = process.hrtime.bigint();\n{print}\
         const took = performance.now() - t0; process.hrtime(); process.cpuUsage();\n"
    );
    assert_eq!(run("b.js", &refactored), base);
    assert!(
        base.starts_with("2026-01-01T00:00:00.000Z 1767225600000 "),
        "{base}"
    );
    assert!(base.ends_with("\n2026-01-01T00:00:00.020Z\n"), "{base}");
}

#[test]
fn unprinted_monotonic_and_cpu_reads_move_no_printed_value_in_c() {
    let base = build_c("refactor_clock", &[]);
    let refactored = build_c("refactor_clock", &["-DTIMING"]);
    let a = assert_sealed_stable(&[base.to_str().unwrap()], 2);
    let b = assert_sealed_stable(&[refactored.to_str().unwrap()], 2);
    assert_eq!(a, b, "the refactored C program printed other values");
    assert!(a.starts_with("wall 1767225600.000000000\n"), "{a}");
    // The refactor really read the clocks: the census counts its reads.
    let (_, base_counts) = census_totals(&[base.to_str().unwrap()], "time");
    let (_, more) = census_totals(&[refactored.to_str().unwrap()], "time");
    let total = |v: &[(String, u64)]| v.iter().map(|(_, n)| n).sum::<u64>();
    assert!(
        total(&more) > total(&base_counts),
        "{base_counts:?} {more:?}"
    );
}

/// A program that divides by the wall-clock duration of its own work, as a throughput line
/// does: with the wall clock still between waits the duration is 0.
const RATE_PY: &str = "import time\nt = time.time()\nn = sum(range(10000))\n\
print('rate', n / (time.time() - t) > 0)\n";

/// `seal golden ARGS` in `dir`.
fn golden_in(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = seal(["golden"].iter().chain(args));
    cmd.current_dir(dir);
    run_timeout(cmd, TIMEOUT)
}

fn recorded(dir: &Path, case: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join(format!("golden/{case}.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Golden mode's own default: a new case is recorded with `spin_after = 1000` (written in its
/// golden's settings record, which `seal --spin-after 1000 -- CMD` reproduces), so unprinted
/// `time.time()` reads a refactor adds leave every printed value alone, while a printed time
/// that changes still fails. A case that fails with the clock still (a rate over a zero
/// duration) is recorded with every read ticking, and says so. A golden recorded with 0 keeps
/// checking with 0.
#[test]
fn golden_mode_keeps_printed_times_when_unprinted_wall_clock_reads_are_added() {
    require_tools!("python3");
    let d = private_tmpdir();
    let dir = d.path();
    let toml = "[[case]]\nname = \"report\"\ncmd = [\"python3\", \"report.py\"]\n\n\
                [[case]]\nname = \"rate\"\ncmd = [\"python3\", \"rate.py\"]\n";
    std::fs::write(dir.join("seal.toml"), toml).unwrap();
    let script = format!("{PY_HEAD}{PY_PRINT}");
    std::fs::write(dir.join("report.py"), &script).unwrap();
    std::fs::write(dir.join("rate.py"), RATE_PY).unwrap();
    let rec = golden_in(dir, &["record"]);
    rec.ok()
        .stderr_has("case rate: with spin_after = 1000 it exits 1, with every read ticking 0");
    let report = recorded(dir, "report");
    assert_eq!(report["seal"]["spin_after"], 1000, "{report:#}");
    assert_eq!(recorded(dir, "rate")["seal"]["spin_after"], 0);
    // The settings record reproduces the golden outside golden mode.
    let cmd = seal_in(dir, &["--spin-after", "1000"], &["python3", "report.py"]);
    run_timeout(cmd, TIMEOUT)
        .ok()
        .stdout_is(&golden_stdout(&report));

    // Unprinted wall-clock reads added before, between and after the printed ones.
    let refactored = script
        .replace(PY_HEAD, &format!("{PY_HEAD}t0 = time.time()\n"))
        .replace(
            "time.sleep(0.01)\n",
            "t = time.time()\ntime.sleep(0.01)\nw = time.time() - t, time.time() - t0\n",
        );
    std::fs::write(dir.join("report.py"), &refactored).unwrap();
    golden_in(dir, &["check"]).ok();

    // A printed time that changes still fails, with its diff.
    let changed = refactored.replace(
        "print(datetime.datetime.now().isoformat())",
        "print((datetime.datetime.now() + datetime.timedelta(days=1)).isoformat())",
    );
    std::fs::write(dir.join("report.py"), changed).unwrap();
    golden_in(dir, &["check", "report"])
        .code_is(1)
        .stdout_has("+2026-01-02T");

    // A golden recorded with every read ticking keeps checking so, once the key is gone.
    std::fs::write(dir.join("report.py"), &script).unwrap();
    std::fs::write(
        dir.join("seal.toml"),
        toml.replace("\"report.py\"]\n", "\"report.py\"]\nspin_after = 0\n"),
    )
    .unwrap();
    golden_in(dir, &["record", "report"]).ok();
    assert_eq!(recorded(dir, "report")["seal"]["spin_after"], 0);
    std::fs::write(dir.join("seal.toml"), toml).unwrap();
    golden_in(dir, &["check"]).ok();
}
