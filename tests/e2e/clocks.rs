//! End-to-end tests: clocks and randomness across runtimes (C, Python, Node, Rust, Java).
//! Each fixture prints every nondeterministic value it meets; sealed it must print the same
//! bytes every run (exit 0, within the harness timeout), unsealed two runs must differ (the
//! proof that the seal, not luck, makes the output stable).

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::util::*;

/// Sealed runs per fixture.
const RUNS: usize = 5;

/// Lines of fixtures/c/clocks.c that come from a randomness entry point.
const C_RANDOM: &[&str] = &[
    "getrandom",
    "getentropy",
    "arc4random",
    "arc4random_buf",
    "arc4random_uniform",
    "SYS_getrandom",
    "read(/dev/urandom)",
    "fread(/dev/urandom)",
    "read(/dev/random)",
    "fread(/dev/random)",
];

fn c_clocks() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| build_c("clocks", &[])).clone()
}

/// Every value of every line `KEY VALUE...`.
fn values<'a>(out: &'a str, key: &str) -> Vec<&'a str> {
    let prefix = format!("{key} ");
    out.lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .collect()
}

/// The lines of clocks.c's output that are clock reads (`random == false`) or random bytes.
fn part(out: &str, random: bool) -> String {
    out.lines()
        .filter(|l| {
            let key = l.split(' ').next().unwrap_or("");
            C_RANDOM.contains(&key) == random
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn sealed_c(flags: &[&str], extra: &[&str]) -> Output {
    let bin = c_clocks();
    let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    args.push("--".into());
    args.push(bin.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = run_seal(&args);
    out.ok();
    out
}

/// Asserts that two unsealed runs of `cmd` differ on each of `keys` (values that must change:
/// time, random). Returns the first run.
fn assert_plain_differs(program: &str, args: &[&str], keys: &[&str]) -> String {
    let a = run_plain(program, args);
    a.ok();
    let b = run_plain(program, args);
    b.ok();
    for key in keys {
        assert_ne!(
            value(&a.stdout, key),
            value(&b.stdout, key),
            "unsealed runs agree on `{key}`: the fixture does not exercise it\n{}\n{}",
            a.show(),
            b.show()
        );
    }
    a.stdout
}

#[test]
fn c_clocks_sealed_are_identical_and_exact() {
    let bin = c_clocks();
    let out = assert_sealed_stable(&[bin.to_str().unwrap()], RUNS);
    // Default epoch 2026-01-01T00:00:00Z, tick 1us, and the first clock read is ours. A
    // wall-clock read returns `L` and ticks it; a monotonic or CPU-time read ticks the
    // thread's monotonic count first and returns `L` plus it: so the wall clock counts only
    // its own reads (1, 2, …) and the monotonic clocks count every read.
    for (key, want) in [
        ("CLOCK_REALTIME", "1767225600.000000000"),
        ("CLOCK_MONOTONIC", "86400.000002000"),
        ("CLOCK_MONOTONIC_RAW", "86400.000003000"),
        ("CLOCK_BOOTTIME", "86400.000004000"),
        ("CLOCK_REALTIME_COARSE", "1767225600.000001000"),
        ("CLOCK_MONOTONIC_COARSE", "86400.000006000"),
        ("CLOCK_TAI", "1767225637.000002000"),
        ("CLOCK_PROCESS_CPUTIME_ID", "0.000007000"),
        ("CLOCK_THREAD_CPUTIME_ID", "0.000008000"),
        ("gettimeofday", "1767225600.000003"),
        ("time", "1767225600"),
        ("ftime", "1767225600.000"),
        ("timespec_get", "1767225600.000006000"),
        ("SYS_clock_gettime(REALTIME)", "1767225600.000007000"),
        ("SYS_clock_gettime(MONOTONIC)", "86400.000017000"),
        ("SYS_time", "1767225600"),
    ] {
        assert_eq!(value(&out, key), want, "{key}");
    }
    for key in C_RANDOM {
        assert!(!value(&out, key).is_empty());
    }
}

#[test]
fn c_clocks_differ_unsealed() {
    let bin = c_clocks();
    assert_plain_differs(
        bin.to_str().unwrap(),
        &[],
        &[
            "CLOCK_REALTIME",
            "CLOCK_MONOTONIC",
            "gettimeofday",
            "SYS_clock_gettime(REALTIME)",
            "getrandom",
            "getentropy",
            "arc4random_buf",
            "SYS_getrandom",
            "read(/dev/urandom)",
            "fread(/dev/random)",
        ],
    );
}

#[test]
fn epoch_flag_sets_the_clock() {
    let out = sealed_c(&["--epoch", "@0"], &[]);
    assert_eq!(value(&out.stdout, "CLOCK_REALTIME"), "0.000000000");
    assert_eq!(value(&out.stdout, "time"), "0");
    let out = sealed_c(&["--epoch", "2000-01-01T00:00:00Z"], &[]);
    assert_eq!(value(&out.stdout, "CLOCK_REALTIME"), "946684800.000000000");
}

#[test]
fn tick_zero_freezes_reads() {
    let out = sealed_c(&["--tick", "0"], &["twice"]);
    assert_eq!(
        values(&out.stdout, "CLOCK_REALTIME"),
        ["1767225600.000000000", "1767225600.000000000"]
    );
    assert_eq!(value(&out.stdout, "CLOCK_MONOTONIC"), "86400.000000000");
    assert_eq!(value(&out.stdout, "timespec_get"), "1767225600.000000000");
}

#[test]
fn seed_changes_random_not_time() {
    let one = sealed_c(&["--seed", "1"], &[]);
    let two = sealed_c(&["--seed", "2"], &[]);
    let one_again = sealed_c(&["--seed", "1"], &[]);
    assert_eq!(one.stdout, one_again.stdout);
    assert_eq!(part(&one.stdout, false), part(&two.stdout, false));
    for key in C_RANDOM {
        assert_ne!(
            value(&one.stdout, key),
            value(&two.stdout, key),
            "`{key}` is the same under seeds 1 and 2"
        );
    }
}

#[test]
fn source_date_epoch_sets_the_epoch() {
    let bin = c_clocks();
    let mut cmd = seal(["--".as_ref(), bin.as_os_str()]);
    cmd.env("SOURCE_DATE_EPOCH", "1000000000");
    let out = run_timeout(cmd, TIMEOUT);
    out.ok();
    assert_eq!(value(&out.stdout, "CLOCK_REALTIME"), "1000000000.000000000");
    // A flag still wins over SOURCE_DATE_EPOCH.
    let mut cmd = seal([
        "--epoch".as_ref(),
        "@5".as_ref(),
        "--".as_ref(),
        bin.as_os_str(),
    ]);
    cmd.env("SOURCE_DATE_EPOCH", "1000000000");
    let out = run_timeout(cmd, TIMEOUT);
    out.ok();
    assert_eq!(value(&out.stdout, "CLOCK_REALTIME"), "5.000000000");
}

#[test]
fn unseal_time_lets_clocks_move_and_keeps_random_sealed() {
    let sealed = sealed_c(&[], &[]);
    let a = sealed_c(&["--unseal", "time"], &[]);
    let b = sealed_c(&["--unseal", "time"], &[]);
    assert_ne!(
        value(&a.stdout, "CLOCK_REALTIME"),
        value(&b.stdout, "CLOCK_REALTIME")
    );
    assert_ne!(value(&a.stdout, "CLOCK_REALTIME"), "1767225600.000000000");
    assert_ne!(
        value(&a.stdout, "CLOCK_MONOTONIC"),
        value(&b.stdout, "CLOCK_MONOTONIC")
    );
    assert_eq!(part(&a.stdout, true), part(&sealed.stdout, true));
}

#[test]
fn unseal_random_lets_bytes_move_and_keeps_time_sealed() {
    let sealed = sealed_c(&[], &[]);
    let a = sealed_c(&["--unseal", "random"], &[]);
    let b = sealed_c(&["--unseal", "random"], &[]);
    for key in [
        "getrandom",
        "getentropy",
        "arc4random_buf",
        "SYS_getrandom",
        "read(/dev/urandom)",
    ] {
        assert_ne!(
            value(&a.stdout, key),
            value(&b.stdout, key),
            "`{key}` stayed sealed"
        );
    }
    assert_eq!(part(&a.stdout, false), part(&sealed.stdout, false));
}

/// The stdout, the same in [`RUNS`] sealed runs, of `interpreter` running fixtures/`rel`.
fn sealed_script(interpreter: &str, rel: &str) -> String {
    let script = fixture(rel);
    assert_sealed_stable(&[interpreter, script.to_str().unwrap()], RUNS)
}

/// [`assert_plain_differs`] for `interpreter` running fixtures/`rel`.
fn plain_script_differs(interpreter: &str, rel: &str, keys: &[&str]) {
    let script = fixture(rel);
    assert_plain_differs(interpreter, &[script.to_str().unwrap()], keys);
}

#[test]
fn python_report_sealed_is_identical() {
    require_tools!("python3");
    let out = sealed_script("python3", "python/report.py");
    assert_value_starts(&out, "time.time", "17672256");
    assert_value_starts(&out, "datetime.now", "2026-01-01T00:00:00");
}

#[test]
fn python_report_differs_unsealed() {
    require_tools!("python3");
    plain_script_differs(
        "python3",
        "python/report.py",
        &[
            "time.time",
            "random.random",
            "uuid4",
            "os.urandom",
            "secrets.token_hex",
        ],
    );
}

#[test]
fn node_report_sealed_is_identical() {
    require_tools!("node");
    let out = sealed_script("node", "node/report.js");
    assert_value_starts(&out, "toISOString", "2026-01-01T00:00:00");
    assert_eq!(value(&out, "setTimeout fired after"), ">=100ms");
}

#[test]
fn node_report_differs_unsealed() {
    require_tools!("node");
    let keys = ["Date.now", "Math.random", "randomUUID", "randomBytes"];
    plain_script_differs("node", "node/report.js", &keys);
}

fn rust_report() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| build_rust("report")).clone()
}

#[test]
fn rust_report_sealed_is_identical() {
    let bin = rust_report();
    let out = assert_sealed_stable(&[bin.to_str().unwrap()], RUNS);
    assert_eq!(values(&out, "SystemTime::now")[0], "1767225600.000000000");
    assert_value_starts(&out, "Condvar::wait_timeout", "timed_out=true elapsed 100.");
}

#[test]
fn rust_report_differs_unsealed() {
    let bin = rust_report();
    assert_plain_differs(bin.to_str().unwrap(), &[], &["SystemTime::now"]);
    // HashMap order varies too, but 8 keys can land in the same order by chance: try a few.
    let orders: std::collections::BTreeSet<String> = (0..4)
        .map(|_| {
            let o = run_plain(bin.to_str().unwrap(), Vec::<&str>::new());
            o.ok();
            value(&o.stdout, "HashMap order").to_string()
        })
        .collect();
    assert!(orders.len() > 1, "HashMap order never changed unsealed");
}

/// fixtures/java/Report.java compiled; None (the test skipped) when the JDK is missing.
fn java_classes() -> Option<PathBuf> {
    crate::util::java_classes(module_path!(), "Report")
}

#[test]
fn java_report_sealed_is_identical() {
    let Some(dir) = java_classes() else { return };
    // Default JVM flags: the JIT's and the class loader's own clock reads on the main thread
    // are runtime bookkeeping and do not tick (docs/runtimes.md).
    let out = assert_sealed_stable(&["java", "-cp", dir.to_str().unwrap(), "Report"], RUNS);
    assert_eq!(value(&out, "currentTimeMillis"), "1767225600000");
    assert_value_starts(&out, "Instant.now", "2026-01-01T00:00:00");
    assert_eq!(value(&out, "Thread.sleep(50) slept>=50ms"), "true");
}

#[test]
fn java_report_differs_unsealed() {
    let Some(dir) = java_classes() else { return };
    assert_plain_differs(
        "java",
        &["-cp", dir.to_str().unwrap(), "Report"],
        &[
            "currentTimeMillis",
            "Random.nextInt",
            "UUID.randomUUID",
            "Math.random",
            "Instant.now",
        ],
    );
}

#[test]
fn java_report_frozen_clock_is_identical_without_jvm_flags() {
    let Some(dir) = java_classes() else { return };
    // With --tick 0 the number of clock reads a thread makes does not matter at all.
    let args = sealed_java(&["--tick", "0"], dir.to_str().unwrap(), "Report");
    let first = assert_runs_agree(&format!("{args:?}"), RUNS, || run_seal(&args));
    assert_eq!(value(&first.stdout, "nanoTime delta"), "0");
    assert_eq!(value(&first.stdout, "Instant.now"), "2026-01-01T00:00:00Z");
    assert_eq!(value(&first.stdout, "Thread.sleep(50) slept>=50ms"), "true");
}
