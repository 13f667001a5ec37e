//! JVM and Node sealed with no flags: the runtime's own bookkeeping (JIT compile requests,
//! class-load timers, libuv's loop time, V8's heuristics) must not move what the program sees
//! (docs/design.md "Runtime bookkeeping", docs/runtimes.md). Each program runs 10 times
//! sealed, half of them while a busy loop keeps both cores busy, with default JVM and Node
//! settings and default seal settings.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use crate::util::*;

const RUNS: usize = 10;
const LIMIT: Duration = Duration::from_secs(120);

/// Keeps every core busy while it lives (a process per core, killed on drop).
struct Busy(Vec<Child>);

impl Busy {
    fn start() -> Busy {
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        Busy(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .expect("sh")
                })
                .collect(),
        )
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `seal -- cmd` `RUNS` times (the second half under CPU load); asserts exit 0 and
/// byte-identical stdout, and returns it.
fn stable(cmd: &[&str]) -> String {
    let mut args = vec!["--"];
    args.extend_from_slice(cmd);
    let run = || {
        let o = run_timeout(seal(&args), LIMIT);
        o.ok();
        o
    };
    let first = run();
    let mut busy = None;
    for i in 1..RUNS {
        if i == RUNS / 2 {
            busy = Some(Busy::start());
        }
        let again = run();
        assert_eq!(
            first.stdout,
            again.stdout,
            "sealed run {} of {cmd:?} differs from run 1{}\n=== run 1 ===\n{}\n=== run {} ===\n{}",
            i + 1,
            if busy.is_some() {
                " (under CPU load)"
            } else {
                ""
            },
            first.show(),
            i + 1,
            again.show()
        );
    }
    first.stdout
}

/// fixtures/java/Runtimes.java compiled; None (the test skipped) when the JDK is missing.
fn java_classes() -> Option<PathBuf> {
    crate::util::java_classes(module_path!(), "Runtimes")
}

#[test]
fn java_default_flags_is_identical() {
    let Some(dir) = java_classes() else { return };
    let out = stable(&["java", "-cp", dir.to_str().unwrap(), "Runtimes"]);
    assert_eq!(value(&out, "currentTimeMillis"), "1767225600000", "{out}");
    // Two nanoTime reads in a row: one tick apart, however much the JIT did meanwhile.
    assert_eq!(value(&out, "nanoTime delta"), "1000", "{out}");
    assert!(
        value(&out, "Instant.now").starts_with("2026-01-01T00:00:00.0000"),
        "{out}"
    );
    let slept: i64 = value(&out, "Thread.sleep(50) slept").parse().unwrap();
    assert!((50_000_000..51_000_000).contains(&slept), "{out}");
    assert!(
        value(&out, "executor task").contains(" at 1767225600050 "),
        "{out}"
    );
    assert!(!out.contains("hsperfdata"), "{out}");
}

#[test]
fn java_concurrent_jvms_do_not_collide() {
    let Some(dir) = java_classes() else { return };
    let cp = dir.to_str().unwrap();
    let args = ["--", "java", "-cp", cp, "Runtimes"];
    for _ in 0..2 {
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| run_timeout(seal(args), LIMIT));
            let b = run_timeout(seal(args), LIMIT);
            (a.join().unwrap(), b)
        });
        a.ok();
        b.ok();
        for o in [&a, &b] {
            assert!(
                !o.stdout.contains("hsperfdata") && !o.stderr.contains("hsperfdata"),
                "{}",
                o.show()
            );
        }
        assert_eq!(a.stdout, b.stdout, "{}\n{}", a.show(), b.show());
    }
}

#[test]
fn java_spin_until_nanotime_moves_ends() {
    let Some(dir) = java_classes() else { return };
    let out = stable(&["java", "-cp", dir.to_str().unwrap(), "Runtimes", "spin"]);
    // One tick per read: 1 ms of nanoTime is 1000 reads, whatever the JIT did meanwhile.
    assert_eq!(out, "spin iterations 999\n");
}

/// HotSpot's own timed waits (a contended `synchronized` enter parks 1, then 8 ms at a time
/// while the holder keeps the lock) time out as often as the scheduler decides: they move no
/// clock. The program's timed waits (`Object.wait`, `parkNanos`) still do. Before, the
/// entering thread's clock was 9 ms later here, and the default-flags report above was 1 ms
/// off in one run out of a few hundred under load.
#[test]
fn java_contended_monitor_rechecks_move_no_clock() {
    let Some(dir) = java_classes() else { return };
    let out = stable(&["java", "-cp", dir.to_str().unwrap(), "Runtimes", "contend"]);
    assert_eq!(value(&out, "contended enter delta"), "1000", "{out}");
    assert_eq!(value(&out, "Object.wait(20) waited"), "20001000", "{out}");
    assert_eq!(value(&out, "parkNanos(5 ms) parked"), "5001000", "{out}");
}

#[test]
fn java_rate_does_not_divide_by_zero() {
    let Some(dir) = java_classes() else { return };
    let out = stable(&["java", "-cp", dir.to_str().unwrap(), "Runtimes", "rate"]);
    assert!(out.starts_with("rate "), "{out}");
    assert!(value(&out, "rate").ends_with("(true)"), "{out}");
}

fn node() -> bool {
    if !have("node") {
        eprintln!("note: node not on PATH; skipping the Node runtime tests");
        return false;
    }
    true
}

#[test]
fn node_default_settings_is_identical() {
    if !node() {
        return;
    }
    let f = fixture("node/runtimes.js");
    let out = stable(&["node", f.to_str().unwrap()]);
    assert_eq!(value(&out, "Date.now"), "1767225600000", "{out}");
    assert!(
        value(&out, "execSync").starts_with("Thu Jan  1 00:00:00 UTC 2026 done hrtime delta "),
        "{out}"
    );
    // The setTimeout(20) fired after its 20 ms, once.
    assert_value_starts(&out, "setTimeout after", "20 ms");
    assert_value_starts(&out, "worker", "982 17672256000");
}

#[test]
fn node_spin_until_hrtime_moves_ends() {
    if !node() {
        return;
    }
    let f = fixture("node/runtimes.js");
    let out = stable(&["node", f.to_str().unwrap(), "spin"]);
    assert_eq!(out, "spin iterations 999\n");
}
