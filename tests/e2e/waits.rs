//! End-to-end tests: timed waits and sleeps under logical time. Each fixture runs sealed
//! several times (byte-identical stdout, exit 0, a hang is a HANG failure); with `--tick 0`
//! every elapsed value it prints is exactly its timeout, which proves the deadlines were
//! translated and the logical clock advanced to them.
use std::time::Duration;

use crate::util::*;

const RUNS: usize = 5;

/// Lines of `out` whose name (first column) is `name`.
fn line<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(name) || l.starts_with(name))
        .unwrap_or_else(|| panic!("no line {name:?} in\n{out}"))
}

/// Asserts that the line of each of `names` in `out` passes `check` (`want` says what it wants).
fn assert_each_line(out: &str, names: &[&str], want: &str, check: impl Fn(&str) -> bool) {
    for name in names {
        let l = line(out, name);
        assert!(check(l), "{name}: want {want}, got {l:?}\n{out}");
    }
}

/// The C fixture, compiled once per test binary (tests run in parallel: recompiling it while
/// another test runs it fails with ETXTBSY).
fn c_waits() -> String {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| build_c("waits", &[]).to_string_lossy().into_owned())
        .clone()
}

/// Every run of the C fixture that the tests below assert on. The fixture waits in real time
/// (about 5 s a run), so all of them start together, once, on their own threads, and each test
/// checks its own runs; a hang is kept as the run's HANG message and fails each test that
/// uses that run.
struct CWaitRuns {
    /// `seal -- waits`, RUNS times.
    sealed: Vec<Result<Output, String>>,
    /// `seal --tick 0 -- waits`.
    frozen: Result<Output, String>,
    /// `seal --epoch 2031-01-01T00:00:00Z -- waits`.
    future_epoch: Result<Output, String>,
    /// `waits`, unsealed, twice.
    unsealed: Vec<Result<Output, String>>,
    /// `seal --unseal time --census FILE -- waits` and the census it wrote.
    unseal_time: Result<(Output, String), String>,
    /// `seal --census FILE -- waits` and the census it wrote.
    counted: Result<(Output, String), String>,
}

fn c_runs() -> &'static CWaitRuns {
    static RUNS_: std::sync::OnceLock<CWaitRuns> = std::sync::OnceLock::new();
    RUNS_.get_or_init(|| {
        let bin = c_waits();
        let dir = tempfile::tempdir().unwrap();
        let unseal_census = dir.path().join("unseal-time.json");
        let census = dir.path().join("census.json");
        let mut cmds: Vec<std::process::Command> = (0..RUNS).map(|_| seal(["--", &bin])).collect();
        cmds.push(seal(["--tick", "0", "--", &bin]));
        cmds.push(seal(["--epoch", "2031-01-01T00:00:00Z", "--", &bin]));
        cmds.push(command(&bin));
        cmds.push(command(&bin));
        cmds.push(seal([
            "--unseal",
            "time",
            "--census",
            unseal_census.to_str().unwrap(),
            "--",
            &bin,
        ]));
        cmds.push(seal(["--census", census.to_str().unwrap(), "--", &bin]));
        let mut outs = try_run_concurrently(cmds, TIMEOUT).into_iter();
        let mut next = || outs.next().unwrap();
        let with_census = |o: Result<Output, String>, file: &std::path::Path| {
            let o = o?;
            let json = std::fs::read_to_string(file)
                .map_err(|e| format!("no census {}: {e}\n{}", file.display(), o.show()))?;
            Ok((o, json))
        };
        CWaitRuns {
            sealed: (0..RUNS).map(|_| next()).collect(),
            frozen: next(),
            future_epoch: next(),
            unsealed: vec![next(), next()],
            unseal_time: with_census(next(), &unseal_census),
            counted: with_census(next(), &census),
        }
    })
}

/// A shared run's output, or the test fails with the run's HANG message.
fn got<T>(r: &Result<T, String>) -> &T {
    r.as_ref().unwrap_or_else(|e| panic!("{e}"))
}

/// Is this fixture line's deadline one on a monotonic clock (read from it, then waited for)?
fn monotonic_deadline(l: &str) -> bool {
    let name = l.split("rc=").next().unwrap_or(l);
    (name.contains("monotonic") && !name.contains("rel)"))
        || name.contains("syscall(clock_nanosleep, ABS)")
        || name.contains("clock_nanosleep(ABS")
        || name.starts_with("pthread_rwlock_clock")
}

/// Every C timed wait times out at exactly its 100 ms deadline, every run alike.
#[test]
fn c_waits_are_stable_and_end_at_their_deadlines() {
    let runs: Vec<Output> = c_runs().sealed.iter().map(|r| got(r).clone()).collect();
    assert_eq!(runs.len(), RUNS);
    let out = assert_same_stdout("seal -- waits", &runs);
    // Clock read before, 100 ms wait, clock read after: 100 ms and one 1 µs tick.
    let timed_out = [
        "pthread_cond_timedwait(realtime)",
        "pthread_cond_timedwait(monotonic)",
        "pthread_cond_clockwait(monotonic)",
        "pthread_cond_clockwait(realtime)",
        "sem_timedwait",
        "sem_clockwait(monotonic)",
        "pthread_mutex_timedlock",
        "pthread_mutex_clocklock(monotonic)",
        "pthread_rwlock_timedrdlock",
        "pthread_rwlock_timedwrlock",
        "pthread_rwlock_clockrdlock",
        "pthread_rwlock_clockwrlock",
        "pthread_timedjoin_np",
        "pthread_clockjoin_np(monotonic)",
        "futex(WAIT,",
        "futex(WAIT_BITSET, monotonic)",
        "futex(WAIT_BITSET, realtime)",
        "mq_timedreceive",
        "mq_timedsend",
    ];
    // A deadline on a monotonic clock also took a monotonic read, which ticks the thread's
    // monotonic count (not the wall clock): one tick more.
    let want = |l: &str| {
        if monotonic_deadline(l) {
            "elapsed=0.100002000"
        } else {
            "elapsed=0.100001000"
        }
    };
    let deadline = "ETIMEDOUT after exactly 100 ms + 1 tick (2 for a monotonic deadline)";
    assert_each_line(&out, &timed_out, deadline, |l| {
        l.contains("rc=110 ") && l.ends_with(want(l))
    });
    let c11 = ["cnd_timedwait", "mtx_timedlock"];
    assert_each_line(&out, &c11, "thrd_timedout", |l| l.contains("rc=4 "));
    let slept = [
        "cnd_timedwait",
        "mtx_timedlock",
        "clock_nanosleep(monotonic, rel)",
        "clock_nanosleep(monotonic, ABS)",
        "clock_nanosleep(realtime, ABS)",
        "nanosleep",
        "usleep",
        "syscall(clock_nanosleep, ABS)",
        "poll(no fds)",
        "poll(pipe)",
        "ppoll(pipe)",
        "select(no fds)",
        "select(pipe)",
        "pselect(pipe)",
        "epoll_wait",
        "epoll_pwait",
        "epoll_pwait2",
    ];
    assert_each_line(
        &out,
        &slept,
        "exactly 100 ms + 1 tick (2 for a monotonic deadline)",
        |l| l.ends_with(want(l)),
    );
    assert!(
        line(&out, "sleep(1)").ends_with("rc=0    elapsed=1.000001000"),
        "{out}"
    );
    // A deadline from the real clock waits its real 100 ms, without moving the logical clock.
    let l = line(&out, "cond_timedwait(real-clock deadline)");
    assert!(
        l.contains("rc=110 ") && l.ends_with("elapsed=0.000001000"),
        "{out}"
    );
    // A deadline already past does not move the clock back or forward.
    assert!(
        line(&out, "clock_nanosleep(ABS, past)").ends_with("elapsed=0.000002000"),
        "{out}"
    );
    // Timers armed with absolute (monotonic) deadlines fire 100 ms later, not in a day.
    assert!(
        line(&out, "timerfd_settime(ABS) fired").contains("rc=1 "),
        "{out}"
    );
    assert_has(&out, "timer_settime(ABS) armed within 100ms: yes");
    // 55 ms of 10 ms sleeps (each loop also reads the clock once): 6 rounds.
    assert_has(&out, "usleep loop iterations: 6\n");
    // Interrupted every 7 ms by SIGALRM and resumed: still exactly 200 ms in the end.
    let interrupted = ["nanosleep(EINTR", "clock_nanosleep(ABS, EINTR"];
    assert_each_line(
        &out,
        &interrupted,
        "exactly 200 ms + 1 tick (2 for ABS)",
        |l| {
            l.ends_with(if monotonic_deadline(l) {
                "elapsed=0.200002000"
            } else {
                "elapsed=0.200001000"
            })
        },
    );
    assert_has(&out, "interrupted at least once: yes\n");
    // Woken early by another thread: the clock did not jump to the 5 s deadline.
    let l = line(&out, "pthread_cond_timedwait(signalled)");
    assert!(
        l.contains("rc=0 ") && l.ends_with("elapsed=0.000002000"),
        "{out}"
    );
}

/// With `--tick 0` a timed-out wait reads exactly its timeout: nothing real leaks in.
#[test]
fn c_waits_read_exactly_their_timeout_with_frozen_reads() {
    let out = got(&c_runs().frozen);
    out.ok();
    for l in out.stdout.lines().filter(|l| l.contains("elapsed=")) {
        let want = if l.starts_with("sleep(1)") {
            "elapsed=1.000000000"
        } else if l.contains("EINTR") {
            "elapsed=0.200000000"
        } else if l.contains("past")
            || l.contains("real-clock")
            || l.contains("signalled")
            || l.contains("timerfd")
        {
            "elapsed=0.000000000"
        } else {
            "elapsed=0.100000000"
        };
        assert!(l.ends_with(want), "want {want} in {l:?}\n{}", out.show());
    }
}

/// Realtime deadlines under an epoch in the future (years ahead of the real clock) are
/// translated like any other: same output, no wait of years.
#[test]
fn c_waits_do_not_care_where_the_epoch_is() {
    let now = got(&c_runs().sealed[0]);
    let future = got(&c_runs().future_epoch);
    now.ok();
    future.ok();
    assert_eq!(
        now.stdout,
        future.stdout,
        "{}\n{}",
        now.show(),
        future.show()
    );
}

/// Unsealed, the same fixture prints real (different) elapsed times: the seal does the work.
#[test]
fn c_waits_differ_unsealed() {
    let a = got(&c_runs().unsealed[0]);
    let b = got(&c_runs().unsealed[1]);
    a.ok();
    b.ok();
    assert_ne!(
        a.stdout, b.stdout,
        "two unsealed runs printed the same times"
    );
    a.stdout_lacks("elapsed=0.100001000\n");
}

/// `--unseal time`: waits pass through to the real functions (real times), still counted.
#[test]
fn unsealed_time_passes_waits_through_and_counts_them() {
    let (out, json) = got(&c_runs().unseal_time);
    out.ok();
    out.stdout_lacks("elapsed=0.100001000\n");
    for sym in [
        "\"pthread_cond_timedwait\"",
        "\"sem_clockwait\"",
        "\"clock_nanosleep\"",
        "\"syscall(SYS_futex)\"",
        "\"epoll_pwait\"",
    ] {
        assert!(json.contains(sym), "census lacks {sym}\n{json}");
    }
}

/// The census names every wait entry point the fixture used, with its clock.
#[test]
fn sealed_waits_are_counted_with_their_clock() {
    let (out, json) = got(&c_runs().counted);
    out.ok();
    let json: serde_json::Value = serde_json::from_str(json).unwrap();
    let calls = json["processes"][0]["calls"].as_array().unwrap();
    let count = |sym: &str, detail: Option<&str>| -> u64 {
        calls
            .iter()
            .filter(|c| c["symbol"] == sym && c["detail"].as_str() == detail)
            .map(|c| c["count"].as_u64().unwrap())
            .sum()
    };
    let rt = Some("CLOCK_REALTIME");
    let mono = Some("CLOCK_MONOTONIC");
    assert_eq!(count("pthread_cond_timedwait", mono), 2, "{json:#}"); // + real-clock deadline
    assert!(count("pthread_cond_timedwait", rt) >= 3, "{json:#}"); // + cnd + signalled loop
    assert_eq!(count("syscall(SYS_futex)", mono), 2, "{json:#}");
    // Three sleeps, then one retried on every SIGALRM (how often is up to the signal).
    assert!(count("clock_nanosleep", mono) >= 4, "{json:#}");
    // epoll_pwait + epoll_pwait2
    assert_eq!(count("epoll_pwait", None), 2, "{json:#}");
    // Each of these once, with the clock it names.
    let called_once = |clock: Option<&str>, syms: &[&str]| {
        for sym in syms {
            assert_eq!(count(sym, clock), 1, "{sym} {clock:?}\n{json:#}");
        }
    };
    called_once(
        rt,
        &[
            "sem_timedwait",
            "pthread_mutex_timedlock",
            "pthread_timedjoin_np",
            "syscall(SYS_futex)",
            "mtx_timedlock",
            "mq_timedreceive",
            "mq_timedsend",
        ],
    );
    called_once(
        mono,
        &[
            "pthread_cond_clockwait",
            "sem_clockwait",
            "pthread_rwlock_clockwrlock",
            "syscall(SYS_clock_nanosleep)",
            "timerfd_settime",
            "timer_settime",
        ],
    );
    called_once(None, &["sleep"]);
}

/// `--warp`: 30 s of sleeps return at once (well inside a 20 s limit) and still move the
/// clock 30 s; a single-threaded condvar wait is warped; a wait another thread signals is not
/// turned into a timeout.
#[test]
fn warp_returns_sleeps_at_once() {
    let bin = c_waits();
    let out = run_timeout(
        seal(["--warp", "--", &bin, "warp"]),
        Duration::from_secs(20),
    );
    out.ok();
    let s = &out.stdout;
    assert!(
        line(s, "sleep(10)").ends_with("elapsed=10.000001000"),
        "{}",
        out.show()
    );
    for (name, want) in [
        ("nanosleep(5s)", "elapsed=5.000001000"),
        ("usleep(5s)", "elapsed=5.000001000"),
        // Monotonic deadlines: their own read ticked once more.
        ("clock_nanosleep(ABS,", "elapsed=5.000002000"),
        ("poll(no", "elapsed=5.000001000"),
    ] {
        assert!(line(s, name).ends_with(want), "{}", out.show());
    }
    let l = line(s, "cond_timedwait(alone, 5s)");
    assert!(
        l.contains("rc=110") && l.ends_with("elapsed=5.000002000"),
        "{}",
        out.show()
    );
    let l = line(s, "cond_timedwait(signalled)");
    assert!(
        l.contains("rc=0 ") && l.ends_with("elapsed=0.000002000"),
        "{}",
        out.show()
    );

    let py = fixture("python/waits.py");
    let out = run_timeout(
        seal(["--warp", "--", "python3", py.to_str().unwrap(), "warp"]),
        Duration::from_secs(20),
    );
    out.ok();
    assert!(out.stdout.starts_with("warped 30.0000"), "{}", out.show());
}

/// Python: Event.wait, Queue.get, time.sleep, a deadline loop and threading.Timer.
#[test]
fn python_waits_are_stable_and_exact() {
    require_tools!("python3");
    let py = fixture("python/waits.py");
    let py = py.to_str().unwrap();
    // The RUNS runs and the --tick 0 run wait in real time: all at once.
    let mut cmds = sealed_n(&["python3", py], RUNS);
    cmds.push(seal(["--tick", "0", "--", "python3", py]));
    let mut runs = run_concurrently(cmds, TIMEOUT);
    let exact = runs.pop().unwrap();
    let out = assert_same_stdout(&format!("python3 {py}"), &runs);
    assert_has(&out, "sleep loop iterations 5\n");
    assert_has(&out, "threading.Timer fired True\n");
    exact.ok().stdout_is(
        "Event().wait(0.2) False 0.200000\n\
         Queue().get(timeout=0.2) Empty 0.200000\n\
         time.sleep(0.1) 0.100000\n\
         sleep loop iterations 5\n\
         threading.Timer fired True\n\
         Lock().acquire(timeout=0.1) False 0.100000\n",
    );
}

/// Rust's std: Condvar::wait_timeout, thread::sleep, park_timeout, mpsc::recv_timeout.
#[test]
fn rust_waits_are_stable_and_exact() {
    let bin = build_rust("waits");
    let bin = bin.to_str().unwrap();
    // The RUNS runs and the --tick 0 run wait in real time: all at once.
    let mut cmds = sealed_n(&[bin], RUNS);
    cmds.push(seal(["--tick", "0", "--", bin]));
    let mut runs = run_concurrently(cmds, TIMEOUT);
    let exact = runs.pop().unwrap();
    let out = assert_same_stdout(bin, &runs);
    assert!(
        // std's Condvar takes its deadline from the monotonic clock: a read of the deadline
        // and one of each end, each a tick.
        out.contains("Condvar::wait_timeout timed_out=true elapsed=100.002ms\n"),
        "{out}"
    );
    assert_has(&out, "Ok(7)");
    exact.ok().stdout_is(
        "Condvar::wait_timeout timed_out=true elapsed=100ms\n\
         thread::sleep elapsed=100ms\n\
         mpsc::recv_timeout Err(Timeout) elapsed=100ms\n\
         thread::park_timeout elapsed=100ms\n\
         mpsc::recv_timeout(signalled) Ok(7) elapsed=0ns\n\
         sleep loop iterations 6\n",
    );
}

/// The JVM parks on monotonic condvars: `java -version`, Thread.sleep and Object.wait must
/// return (no hang; output determinism is the Java fixture owner's).
#[test]
fn java_waits_do_not_hang() {
    require_tools!("java", "javac");
    let out = run_seal(["--", "java", "-version"]);
    out.ok();
    let classes = build_java("Waits");
    let out = run_seal(["--", "java", "-cp", classes.to_str().unwrap(), "Waits"]);
    out.ok().stdout_is("java waits done\n");
}

/// libuv waits in epoll_pwait with a timeout from the sealed clock: setTimeout fires.
#[test]
fn node_set_timeout_does_not_hang() {
    require_tools!("node");
    let js = fixture("node/waits.js");
    let out = run_seal(["--", "node", js.to_str().unwrap()]);
    out.ok().stdout_is("node timeout fired\n");
}

/// A streak of early-ended waits belongs to its loop: a longer wait after it (a 5 s `select`
/// that a thread's write ends after 0.2 s; an `accept` with a 5 s timeout that a 1 s alarm
/// interrupts) waits for what it waits for, instead of timing out at the short wait's
/// deadline (issue 28: CPython's `testInterruptedTimeout` and `test_create_ssl_connection`).
/// Three sealed runs of each and one under `--warp`, at once.
#[test]
fn a_streak_does_not_cut_a_longer_wait_short() {
    require_tools!("python3");
    let py = fixture("python/streak_scope.py");
    let py = py.to_str().unwrap();
    for (case, want) in [
        ("writer", "select: ready after 0.200\n"),
        ("alarm", "Alarm interrupted accept\n"),
    ] {
        let mut cmds = sealed_n(&["python3", py, case], 3);
        cmds.push(seal(["--warp", "--", "python3", py, case]));
        let runs = run_concurrently(cmds, TIMEOUT);
        for r in &runs {
            assert_eq!(r.stdout, want, "{case}: {}", r.show());
        }
    }
}
