//! End-to-end tests: `--warp` skips idle time only. A sleep or timed wait returns at once
//! only when nothing in the run can run, the earliest deadline first; while a thread or a
//! process computes, or waits for something real, waits take their real time (docs/waits.md).
use std::process::Command;
use std::time::Duration;

use crate::util::*;

const RUNS: usize = 5;
/// Harness limit of one run (the programs below sleep 30 to 100 logical seconds, or compute
/// for about a second).
const LIMIT: Duration = Duration::from_secs(60);
/// A sleep-only program must finish in well under this, whatever the machine's load (they
/// take about 0.03 to 0.7 s; unwarped, 30 to 100 s).
const QUICK: Duration = Duration::from_secs(15);

fn c_warp() -> String {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| build_c("warp", &[]).to_string_lossy().into_owned())
        .clone()
}

fn warped(n: usize, args: &[&str]) -> Vec<Command> {
    (0..n)
        .map(|_| seal(["--warp", "--"].iter().chain(args)))
        .collect()
}

fn assert_quick(runs: &[Output]) {
    for r in runs {
        assert!(r.elapsed < QUICK, "took {:?}\n{}", r.elapsed, r.show());
    }
}

/// `Popen(child).wait(timeout=60)` polls the child with sleeps. It used to warp those sleeps
/// while the child computed, and raised TimeoutExpired at logical +60 s one real second in;
/// now the sleeps take real time while the child runs.
#[test]
fn popen_wait_with_a_timeout_sees_a_cpu_bound_child_finish() {
    require_tools!("python3");
    let py = fixture("python/warp_popen.py");
    let runs = run_concurrently(warped(2, &["python3", py.to_str().unwrap()]), LIMIT);
    for r in &runs {
        r.ok();
        assert_eq!(
            r.stdout,
            "child computed 0\nstatus 0\n",
            "the parent gave up on a running child\n{}",
            r.show()
        );
    }
}

/// A main thread that polls a worker with 10 ms sleeps (and gives up after 60 logical
/// seconds) sees the worker finish: a CPU-bound worker, and a worker in a real 300 ms
/// `poll()` on a pipe (a wait with a descriptor is never warped; the main thread's sleeps do
/// not jump past its deadline).
#[test]
fn a_polling_main_thread_sees_its_worker_finish() {
    let bin = c_warp();
    let mut cmds = warped(2, &[&bin, "cpu"]);
    cmds.extend(warped(RUNS, &[&bin, "realwait"]));
    let mut runs = run_concurrently(cmds, LIMIT);
    let real = runs.split_off(2);
    for r in &runs {
        r.ok();
        assert_eq!(r.stdout, "worker finished\n", "{}", r.show());
    }
    let out = assert_same_stdout("warp realwait", &real);
    assert_eq!(out, "worker poll returned 0\nworker finished\n");
}

/// Programs that only sleep still finish at once, with the exact logical time, the same every
/// run: 20 × `sleep 5` in a bash loop (each a process of its own), and a Python thread and
/// main thread sleeping in turns.
#[test]
fn sleep_only_programs_still_finish_at_once() {
    require_tools!("bash", "sleep", "date");
    let script = "start=$(date +%s); for i in $(seq 20); do sleep 5; done; \
                  echo $(( $(date +%s) - start )) $SECONDS";
    let runs = run_concurrently(warped(RUNS, &["bash", "-c", script]), LIMIT);
    assert_eq!(assert_same_stdout("bash sleep loop", &runs), "100 100\n");
    assert_quick(&runs);

    if !have("python3") {
        skip!("python3 not on PATH");
    }
    let py = fixture("python/warp_threads.py");
    let runs = run_concurrently(warped(RUNS, &["python3", py.to_str().unwrap()]), LIMIT);
    assert_eq!(
        assert_same_stdout("python thread + sleeps", &runs),
        "worker 1 20.000\nmain 1 35.000\nworker 2 40.000\nworker 3 60.000\nmain 2 70.000\n\
         end 70.000\n"
    );
    assert_quick(&runs);
}

/// Two threads sleeping 20 s and 25 s in turns wake in deadline order, at their exact
/// logical times; with equal deadlines (`--tick 0`, both 10 s) the tie is broken the same way
/// every run.
#[test]
fn threads_sleeping_in_turns_wake_in_deadline_order() {
    let bin = c_warp();
    let mut cmds = warped(RUNS, &[&bin, "alternate"]);
    cmds.extend((0..RUNS).map(|_| seal(["--warp", "--tick", "0", "--", &bin, "ties"])));
    let mut runs = run_concurrently(cmds, LIMIT);
    let ties = runs.split_off(RUNS);
    assert_eq!(
        assert_same_stdout("warp alternate", &runs),
        "A 1 at 20000 ms\nB 1 at 25000 ms\nA 2 at 40000 ms\nB 2 at 50000 ms\n\
         A 3 at 60000 ms\nB 3 at 75000 ms\nA 4 at 80000 ms\n"
    );
    assert_quick(&runs);
    let out = assert_same_stdout("warp ties", &ties);
    for round in 1..=3 {
        for who in ["A", "B"] {
            let want = format!("{who} {round} at {round}0000 ms\n");
            assert!(out.contains(&want), "no {want:?} in\n{out}");
        }
    }
    assert_quick(&ties);
}

/// A child killed in the middle of a sleep, left a zombie, with the earliest deadline on the
/// waiter board, does not hold the others up: the parent's `sleep(60)` still warps (it
/// waited its real 60 s while a zombie thread's slot counted).
#[test]
fn a_killed_waiter_does_not_hold_the_board_up() {
    require_tools!("python3", "sleep");
    let py = fixture("python/warp_killed.py");
    let runs = run_concurrently(warped(2, &["python3", py.to_str().unwrap()]), LIMIT);
    for r in &runs {
        r.ok();
        assert_eq!(r.stdout, "slept 60.000\nchild -9\n", "{}", r.show());
    }
    assert_quick(&runs);
}

/// A watchdog's timer in another process is on the board: `timeout 1 sleep 5` ends the way it
/// does unwarped (the timer fires after 1 s of real time, `timeout` exits 124), while a sleep
/// that ends before the timer still warps (`timeout 60 sleep 30` exits 0 at once). Before,
/// the child's sleep warped past `timeout`'s POSIX timer and the run exited 0; a Python
/// parent's `signal.alarm(1)` around `sleep 5` printed "child finished".
#[test]
fn a_watchdog_timer_in_another_process_is_not_warped_past() {
    require_tools!("timeout", "sleep");
    let fired = run_concurrently(warped(2, &["timeout", "1", "sleep", "5"]), LIMIT);
    for r in &fired {
        r.code_is(124);
    }
    let before = run_concurrently(warped(2, &["timeout", "60", "sleep", "30"]), LIMIT);
    for r in &before {
        r.ok();
    }
    assert_quick(&before);
    // A timer whose process ended holds nothing up: `timeout` exits with its timer armed.
    let after = run_concurrently(
        warped(2, &["sh", "-c", "timeout 600 true; sleep 700; echo slept"]),
        LIMIT,
    );
    assert_eq!(assert_same_stdout("after timeout", &after), "slept\n");
    assert_quick(&after);
    // The same with alarm() in a Python parent (setitimer underneath).
    if !have("python3") {
        skip!("python3 not on PATH");
    }
    let py = fixture("python/warp_alarm.py");
    for how in ["alarm", "setitimer"] {
        let runs = run_concurrently(warped(2, &["python3", py.to_str().unwrap(), how]), LIMIT);
        assert_eq!(assert_same_stdout(how, &runs), "watchdog fired\n");
    }
}
