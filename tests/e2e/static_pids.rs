//! Virtual pids and tids in static images' children and threads: the supervisor answers
//! their `getpid`/`getppid`/`gettid`, traces `fork`/`clone`/`wait4`/`waitid` to their exit so
//! that they return (and take) virtual pids, and registers each child in the run table, so
//! that a dynamic process of the run reaches it by the pid it was shown and the census names
//! it by that pid. glibc `-static`, `musl-gcc -static`, busybox and a `CGO_ENABLED=0` Go
//! program, each run several times under the built `seal`.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::static_images::{build_musl_c, have_static_glibc};
use crate::util::{build_c, have, run_seal, Output};

/// Runs `seal -q -- CMD` `n` times: exit 0 and byte-identical stdout; returns the last run.
fn stable(cmd: &[&str], n: usize) -> Output {
    let mut args = vec!["-q", "--"];
    args.extend_from_slice(cmd);
    alike(n, || run_seal(&args))
}

/// Makes `n` runs with `run`: each exits 0 and prints the same stdout; returns the last.
pub fn alike(n: usize, mut run: impl FnMut() -> Output) -> Output {
    let mut first: Option<Output> = None;
    for _ in 0..n {
        let o = run();
        o.ok();
        if let Some(f) = &first {
            assert_eq!(
                f.stdout,
                o.stdout,
                "runs differ\n{}\n{}",
                f.show(),
                o.show()
            );
        }
        first = Some(o);
    }
    first.unwrap()
}

/// The numbers of `line` (its words that parse as one).
fn numbers(line: &str) -> Vec<i32> {
    line.split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// Is `p` a virtual pid a run gives a child (the root is 1000; its children above)?
fn is_child_vpid(p: i32) -> bool {
    (1001..32768).contains(&p)
}

/// `static_pids` built with glibc and with musl (each skipped, visibly, without its libc).
fn static_pids_builds() -> Vec<PathBuf> {
    static_builds("static_pids")
}

/// `fixtures/c/NAME.c` built with glibc `-static` and with `musl-gcc -static` (each skipped,
/// visibly, without its libc).
pub fn static_builds(name: &str) -> Vec<PathBuf> {
    let mut bins = Vec::new();
    if have_static_glibc() {
        bins.push(build_c(name, &["-static"]));
    } else {
        skip_part!("no static libc (libc.a)");
    }
    if have("musl-gcc") {
        bins.push(build_musl_c(name));
    } else {
        skip_part!("musl-gcc not on PATH (Debian: musl-tools)");
    }
    bins
}

/// What `static_pids` printed: the child's, the second child's and the thread's virtual ids.
fn check_static_pids(o: &Output) -> [i32; 3] {
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", o.show());
    assert_eq!(lines[0], "pid 1000 ppid 999 tid 1000", "{}", o.show());
    let child = numbers(lines[1]);
    let c = child[0];
    assert!(is_child_vpid(c), "{}", o.show());
    assert_eq!(
        lines[1],
        format!("child pid {c} ppid 1000 tid {c}"),
        "{}",
        o.show()
    );
    assert_eq!(
        lines[2],
        format!("fork {c} waitpid {c} status 3"),
        "{}",
        o.show()
    );
    let d = numbers(lines[3])[0];
    assert!(is_child_vpid(d) && d != c, "{}", o.show());
    assert_eq!(
        lines[3],
        format!("fork {d} kill 0 waitid {d} signal 15"),
        "{}",
        o.show()
    );
    let t = numbers(lines[4])[0];
    assert!(is_child_vpid(t) && t != c && t != d, "{}", o.show());
    assert_eq!(lines[4], format!("thread tid {t} pid 1000"), "{}", o.show());
    [c, d, t]
}

/// A static C program (glibc and musl) that forks, waits, kills and starts a thread: `fork`
/// returns the child's virtual pid, which the child's `getpid` and `gettid` give too, its
/// `getppid` is its parent's virtual pid, `waitpid`/`waitid` return the virtual pid and take
/// it, `kill` reaches it, and the thread has a virtual tid; the same in 5 runs. The old build
/// printed real pids (a real parent pid in the child, run-dependent numbers).
#[test]
fn a_static_programs_children_and_threads_have_virtual_pids() {
    for bin in static_pids_builds() {
        let o = stable(&[bin.to_str().unwrap()], 5);
        check_static_pids(&o);
    }
}

/// The census lists each child of a static image under the virtual pid it printed, as a
/// child of the image's, with the exit status its parent's `waitpid`/`waitid` reaped.
#[test]
fn the_census_names_a_static_images_children_by_their_virtual_pids() {
    for bin in static_pids_builds() {
        let (o, v) = crate::util::census_json(&["--", bin.to_str().unwrap()], crate::util::TIMEOUT);
        o.ok();
        let [c, d, _] = check_static_pids(&o);
        let procs = v["processes"].as_array().unwrap();
        // Each under its pid, with the end its parent's wait saw.
        for (child, exit) in [(c, json!({"code": 3})), (d, json!({"signal": 15}))] {
            let p = procs
                .iter()
                .find(|p| p["vpid"] == child)
                .unwrap_or_else(|| panic!("no process {child} in the census\n{v:#}"));
            assert_eq!(p["parent_vpid"], 1000, "{p:#}");
            assert_eq!(p["exit"], exit, "{p:#}");
        }
    }
}

/// busybox's shell (static): `$!` is the background child's virtual pid, `wait $!` reaches it
/// and gives its status, a dynamic process of the run signals it by that pid, and a dynamic
/// child of the shell shows the pid `$!` gave.
#[test]
fn a_busybox_shells_background_pid_is_virtual_and_reachable() {
    let Some(busybox) = crate::static_images::busybox().map(Path::new) else {
        skip!("no busybox (Debian: busybox-static)");
    };
    let bb = busybox.to_str().unwrap();
    let o = stable(&[bb, "sh", "-c", "sleep 0 & echo $!; wait $!; echo $?"], 5);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", o.show());
    let bg: i32 = lines[0].parse().unwrap();
    assert!(is_child_vpid(bg), "{}", o.show());
    assert_eq!(lines[1], "0", "{}", o.show());
    // The dynamic child's line goes through a file, printed after `wait`: written straight
    // to stdout it raced the shell's `echo started` (the child usually lost, by its exec and
    // libseal's start; once, on a loaded machine, it won), and seal orders no two processes'
    // writes.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dynamic");
    let script = format!(
        "(sleep 0.2; exit 4) & p=$!; echo bg $p; /bin/sh -c \"kill -0 $p && echo reached\"; \
         wait $p; echo status $?; /bin/sh -c 'echo dynamic $$ $PPID' > {out} & \
         echo started $!; wait; cat {out}",
        out = out.display()
    );
    let o = stable(&[bb, "sh", "-c", &script], 3);
    let lines: Vec<&str> = o.stdout.lines().collect();
    let bg = numbers(lines[0])[0];
    assert!(is_child_vpid(bg), "{}", o.show());
    assert_eq!(lines[1..3], ["reached", "status 4"], "{}", o.show());
    let started = numbers(
        lines[3..]
            .iter()
            .find(|l| l.starts_with("started"))
            .unwrap(),
    )[0];
    let dynamic = lines.iter().find(|l| l.starts_with("dynamic")).unwrap();
    assert_eq!(*dynamic, format!("dynamic {started} 1000"), "{}", o.show());
}

/// A static Go program starting itself as a child (os/exec: a raw vfork-style `clone`, then
/// `wait4`/`waitid`): `cmd.Process.Pid`, the child's `os.Getpid()` and the pid its wait
/// returned are one virtual pid, the child's `os.Getppid()` the parent's; 5 runs alike.
#[test]
fn a_static_go_programs_child_has_a_virtual_pid() {
    if !have("go") {
        skip!("go not on PATH (Debian: golang-go)");
    }
    let bin = crate::go_images::build_go("pids", false);
    let o = stable(&[bin.to_str().unwrap()], 5);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", o.show());
    assert_eq!(lines[0], "pid 1000 ppid 999", "{}", o.show());
    let c = numbers(lines[1])[0];
    assert!(is_child_vpid(c), "{}", o.show());
    assert_eq!(lines[1], format!("child pid {c} ppid 1000"), "{}", o.show());
    assert_eq!(
        lines[2],
        format!("started {c} waited {c} exit 0"),
        "{}",
        o.show()
    );
}

/// Forks and waits under a storm of signals (a SIGALRM every 300 µs, SIGCHLD, with handlers,
/// without `SA_RESTART` for the first build and with it for the second): the supervisor, tracing
/// each call to its exit, lets each signal through and takes the call again when it is made
/// again; every `waitpid` reaps the child its `fork` returned, and the pids are the same
/// every run. Before, the pids were real (a different sum each run).
#[test]
fn forks_and_waits_cut_short_by_signals_keep_their_virtual_pids() {
    // Without SA_RESTART for the first build, with it for the second.
    for (i, bin) in static_builds("static_fork_signals").iter().enumerate() {
        let mut cmd = vec![bin.to_str().unwrap()];
        if i == 1 {
            cmd.push("restart");
        }
        let o = stable(&cmd, 3);
        assert!(o.stdout.ends_with(" bad 0\n"), "{}", o.show());
    }
}

/// A static program traced by its own child (`PTRACE_SEIZE`) while it forks and waits: the
/// supervisor cannot trace those calls, so they run as they are (real pids, which agree with
/// each other), the program runs on, and seal says why on stderr and in the census. The old
/// build said nothing (its forks were never traced).
#[test]
fn a_static_program_that_cannot_be_traced_keeps_real_pids_and_says_so() {
    let Some(bin) = static_builds("static_traced").pop() else {
        return;
    };
    let (o, v) = crate::util::census_json(&["--", bin.to_str().unwrap()], crate::util::TIMEOUT);
    o.ok();
    assert_eq!(
        o.stdout,
        "traced fork and waitpid agree 1 status 5\n",
        "{}",
        o.show()
    );
    let why = "fork and wait return real pids: ptrace refused";
    says_real_pids(&o, &v, why);
}

/// A static-pie image (glibc `-static-pie`; Rust's musl targets build so) is mapped where
/// shared libraries go, where the filter cannot tell its `fork` and `wait` from a dynamic
/// descendant's libc's by address. Exec'd as the root or by a dynamic process, it gets a
/// filter that sends them from every address: its children have virtual pids, 3 runs alike
/// (the old build returned real pids and said nothing). Exec'd by a non-PIE static image
/// (busybox's shell), it inherits that image's filter: real pids, said on stderr and in the
/// census.
#[test]
fn a_static_pie_images_children_have_virtual_pids_or_say_they_do_not() {
    if !have_static_glibc() {
        skip!("no static libc (libc.a)");
    }
    let bin = build_c("static_pids", &["-static-pie"]);
    let exe = bin.to_str().unwrap();
    let o = stable(&[exe], 3);
    check_static_pids(&o);
    let o = stable(&["/bin/sh", "-c", &format!("{exe}; true")], 3);
    // Its fork's result and what its wait reaped: one virtual pid.
    let fork = numbers(o.stdout.lines().nth(2).unwrap_or(""));
    assert!(
        fork.len() == 3 && is_child_vpid(fork[0]) && fork[0] == fork[1],
        "{}",
        o.show()
    );
    let Some(busybox) = crate::static_images::busybox() else {
        skip!("no busybox (Debian: busybox-static)");
    };
    let (o, v) = crate::util::census_json(
        &["--", busybox, "sh", "-c", &format!("{exe}; true")],
        crate::util::TIMEOUT,
    );
    o.ok();
    let why = "fork and wait return real pids: a static-pie image is loaded among shared \
               libraries, where its calls cannot be told from theirs";
    o.stderr_has(&format!("not sealed (unsupported-call): {why}"));
    let said = (v["processes"].as_array().unwrap().iter())
        .flat_map(|p| p["unsealed"].as_array().cloned().unwrap_or_default())
        .any(|u| u["kind"] == "unsupported-call" && u["detail"] == why);
    assert!(said, "{v:#}");
}

/// The run said `why` (an `unsupported-call`) on stderr and in the root's census.
fn says_real_pids(o: &Output, v: &serde_json::Value, why: &str) {
    o.stderr_has(&format!("not sealed (unsupported-call): {why}"));
    let root = &v["processes"].as_array().unwrap()[0];
    assert_eq!(root["vpid"], 1000, "{v:#}");
    let said = root["unsealed"].as_array().unwrap();
    assert!(
        said.iter()
            .any(|u| u["kind"] == "unsupported-call" && u["detail"] == why),
        "{root:#}"
    );
}
