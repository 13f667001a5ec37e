//! End-to-end tests: causality between sealed threads and processes (docs/design.md,
//! "Causality"). A deadline loop whose waits are ended by someone else's waiting reaches its
//! deadline, as in real time; a joiner sees the joined thread's waits; CPU-time clocks do not
//! count waits; a loop fed by an unsealed writer still ends. Each case runs sealed 5 times,
//! and the Python ones 5 more under `--warp` (byte-identical stdout; a hang fails with the
//! harness's HANG message). A few of CPython's own regression tests run sealed and warped.
use crate::util::*;

const RUNS: usize = 5;

/// The fixture's `case`, 5 sealed runs and 5 under `--warp` (where the waits another process
/// or thread does take their real time while anything runs): byte-identical, and the same with
/// and without `--warp`. Returns the output.
fn python_case(case: &str) -> String {
    let f = fixture("python/causal.py");
    let plain = assert_sealed_stable(&["python3", f.to_str().unwrap(), case], RUNS);
    let warp = assert_runs_agree(&format!("--warp {case}"), RUNS, || {
        run_seal(["--warp", "--", "python3", f.to_str().unwrap(), case])
    });
    assert_eq!(warp.stdout, plain, "--warp changed what {case} prints");
    plain
}

#[test]
fn a_chatty_childs_output_brings_communicate_to_its_timeout() {
    require_tools!("python3");
    // 0.5 s (plus poll's rounding up to whole milliseconds), with the three lines written
    // logically before the deadline, never the fourth.
    let out = python_case("communicate");
    assert!(out.starts_with("TimeoutExpired after 0.50"), "{out}");
    assert!(out.ends_with(" read b'1\\n2\\n3\\n'\n"), "{out}");
}

#[test]
fn a_manager_condition_times_out_in_the_managers_wait() {
    require_tools!("python3");
    assert_eq!(python_case("manager"), "wait_for False after 0.200\n");
}

#[test]
fn a_request_reply_deadline_loop_ends_after_the_same_rounds() {
    require_tools!("python3");
    // 1 s of 0.2 s replies: 5 rounds, and 1.0 s (plus the reads' ticks) every run.
    let out = python_case("request_reply");
    assert!(out.starts_with("rounds 5 elapsed 1.00"), "{out}");
}

#[test]
fn cpu_time_does_not_count_waits() {
    require_tools!("python3");
    assert_eq!(
        python_case("cpu_time"),
        "cpu time across 0.15 s of waits: under 100 us True\n\
         monotonic across a 0.1 s sleep 0.100\n"
    );
}

#[test]
fn a_joined_threads_sleep_shows_in_the_joiner() {
    let bin = build_c("causal_join", &[]);
    let out = assert_sealed_stable(&[bin.to_str().unwrap()], RUNS);
    assert!(out.starts_with("joined after 1.000\n"), "{out}");
    // Two clock reads' ticks (1 us each), none of the 0.1 s.
    assert_has(&out, "process cpu across a 0.1 s sleep: 1000 ns\n");
}

/// CPython's `Thread.join` (before 3.13) is a lock the ending thread releases: it carries no
/// time, so a thread pool whose uneven sleeping tasks land on workers as the scheduler
/// decides ends at the same time every run (carried, a pool's shutdown showed which worker
/// ran more: docs/design.md, "Causality").
#[test]
fn a_python_thread_pool_of_uneven_tasks_ends_at_the_same_time_every_run() {
    require_tools!("python3");
    let out = python_case("python_join");
    assert!(
        out.starts_with("ThreadPoolExecutor ended after 0.000\n"),
        "{out}"
    );
}

/// A timed `poll` that finds a descriptor ready takes the clock its next bytes carry, as the
/// read would: a forkserver child's sentinel shows the child's second to a parent that only
/// waits for it (issue 28: CPython's `test_wait_integer` saw 0 s for 3 s, under `--warp`).
#[test]
fn a_polled_forkserver_sentinel_carries_the_childs_time() {
    require_tools!("python3");
    assert_eq!(
        python_case("forkserver_wait"),
        "sentinel ready True after 1.000\njoined after 1.000\n"
    );
}

/// A timed `select` that finds a pipe ready takes the clock its next bytes carry, as a
/// timed `poll` does (issue 28 left `select` out: the parent saw 0.000 for the child's
/// second); a shorter timeout still ends at its deadline.
#[test]
fn a_selected_pipe_carries_the_writers_time() {
    require_tools!("python3");
    assert_eq!(
        python_case("select_ready"),
        "select 20: ready True after 1.000\nselect 0.5: ready False after 0.500\n"
    );
}

/// The same through a level-triggered epoll set registered with the descriptor as its data
/// (CPython's `select.epoll`; it saw 0.000 before).
#[test]
fn an_epolled_pipe_carries_the_writers_time() {
    require_tools!("python3");
    assert_eq!(
        python_case("epoll_ready"),
        "epoll 20: ready True after 1.000\nepoll 0.5: ready False after 0.500\n"
    );
}

/// A C child's `printf` output carries its clock to the reader of its pipe: a line it
/// flushes with `fflush` after 1 s, and one `exit` flushes after another (field sweep: stdio's
/// flushes are glibc-internal writes, and the reader saw 0.000 for both).
#[test]
fn stdio_output_carries_the_writers_time() {
    let bin = build_c("causal_stdio", &[]);
    let out = assert_sealed_stable(&[bin.to_str().unwrap()], RUNS);
    assert_eq!(out, "line a after 1.000\nline b after 2.000\n");
}

/// The run's channel table does not fill up: after 3000 pipes a child's bytes still carry
/// its sleep (issue 28: late in CPython's multiprocessing suite, pool results carried no
/// time, and `test_map_no_failfast` saw 0.5 s of 1 s).
#[test]
fn bytes_carry_time_after_thousands_of_pipes() {
    require_tools!("python3");
    assert_eq!(python_case("many_pipes"), "read after 0.500\n");
}

#[test]
fn a_loop_fed_by_an_unsealed_writer_still_reaches_its_deadline() {
    require_tools!("python3", "sh");
    let f = fixture("python/causal.py");
    // The shell is left out of the seal: its bytes carry no clock.
    let dash = std::fs::canonicalize("/bin/sh").unwrap();
    let name = dash.file_name().unwrap().to_str().unwrap().to_string();
    let out = run_seal([
        "--skip",
        name.as_str(),
        "--",
        "python3",
        f.to_str().unwrap(),
        "unsealed_writer",
    ]);
    out.code_is(0);
    assert_eq!(
        out.stdout, "TimeoutExpired after at least 0.3: True\n",
        "{out:?}"
    );
}

#[test]
fn a_queue_deadline_loop_fed_by_a_computing_thread_still_ends() {
    require_tools!("python3");
    // Without the streak rule this loop reads the clock about a million times, each wait
    // ended by the producer a few ms later: hours.
    let f = fixture("python/causal.py");
    let out = run_sealed(&["python3", f.to_str().unwrap(), "queue_loop"]);
    out.code_is(0);
    assert_eq!(
        out.stdout, "queue loop ended at its deadline: True\n",
        "{out:?}"
    );
}

#[test]
fn unsealed_time_carries_nothing() {
    require_tools!("python3");
    // With the time family off, nothing is adopted and the real clock answers.
    let f = fixture("python/causal.py");
    let out = run_seal([
        "--unseal",
        "time",
        "--",
        "python3",
        f.to_str().unwrap(),
        "request_reply",
    ]);
    out.code_is(0);
    assert!(out.stdout.starts_with("rounds "), "{out:?}");
}

/// CPython's own regression tests for queues, the scheduler, subprocesses and asyncio locks:
/// bare, sealed and sealed with `--warp`, each must pass (about 25 s of the three together;
/// they run at once).
#[test]
fn cpython_regression_tests_pass_sealed_and_warped() {
    require_tools!("python3");
    let probe = run_plain("python3", ["-c", "import test.libregrtest"]);
    if probe.code != Some(0) {
        skip!("python3 has no test package");
    }
    let tests = [
        "test_queue",
        "test_sched",
        "test_subprocess",
        "test_asyncio.test_locks",
    ];
    let args = |pre: &[&str]| {
        let mut a: Vec<String> = pre.iter().map(|s| s.to_string()).collect();
        a.extend(["python3", "-m", "test"].map(String::from));
        a.extend(tests.map(String::from));
        a
    };
    let mut bare = command("python3");
    bare.args(&args(&[])[1..]);
    let mut cmds = vec![bare, seal(args(&["--"])), seal(args(&["--warp", "--"]))];
    // regrtest works in $TMPDIR/test_python_<pid>: both sealed runs are pid 1000, so each
    // gets its own TMPDIR (virtual pids repeat across runs, by design).
    let tmps: Vec<tempfile::TempDir> = (0..cmds.len()).map(|_| private_tmpdir()).collect();
    for (c, t) in cmds.iter_mut().zip(&tmps) {
        c.env("TMPDIR", t.path());
    }
    let runs = run_concurrently(cmds, std::time::Duration::from_secs(300));
    for (what, out) in ["bare", "sealed", "--warp"].iter().zip(&runs) {
        assert!(
            out.code == Some(0) && out.stdout.contains("Result: SUCCESS"),
            "{what}: {}",
            out.show()
        );
    }
}

/// Threads that contend for the GIL print the same microseconds every run, on every CPython
/// on the machine (the GIL's waits and the reads that compute their deadlines are the
/// interpreter's bookkeeping).
#[test]
fn threads_contending_for_the_gil_print_the_same_microseconds() {
    require_tools!("python3");
    let f = fixture("python/gil_threads.py");
    let mut pythons = vec!["python3".to_string()];
    if let Ok(dir) = std::fs::read_dir(format!("{}/.pyenv/versions", env!("HOME"))) {
        for e in dir.flatten() {
            let p = e.path().join("bin/python3");
            let v = e.file_name().to_string_lossy().into_owned();
            if p.exists()
                && ["3.8", "3.9", "3.10", "3.12"]
                    .iter()
                    .any(|m| v.starts_with(&format!("{m}.")))
            {
                pythons.push(p.to_string_lossy().into_owned());
            }
        }
    }
    for py in &pythons {
        let out = assert_sealed_stable(&[py.as_str(), f.to_str().unwrap()], 3);
        assert!(out.contains("sleeper 1767225600.05"), "{py}: {out}");
    }
}
