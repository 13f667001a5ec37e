//! End-to-end tests: setters of sealed values (`clock_settime`, `settimeofday`, `adjtime`,
//! `adjtimex`, `sethostname`, `setdomainname`, their `syscall()` forms, a write to the kernel's
//! host name file) act on the run's sealed world and never on the machine.
//!
//! The fixture runs in private user, mount and UTS namespaces (`unshare -Urm --uts`): there it
//! holds every capability of its namespace, so the sealed setters succeed, while a call that
//! leaked to the kernel could change nothing real: setting the clock needs CAP_SYS_TIME of the
//! machine's namespace, so it fails with EPERM; a host name change stays in the private UTS
//! namespace; and the kernel's host name file is a bind mount of a scratch file (a write to
//! the real one renames the machine from any namespace, as root, capabilities or not). The
//! test then reads all three back, unsealed.
use std::process::Command;

use crate::util::*;

const RUNS: usize = 5;

/// Can this machine make a private user + UTS namespace? Says so when it cannot.
fn namespaces() -> bool {
    let ok = Command::new("unshare")
        .args(["-Urm", "--uts", "true"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        // The caller returns at once: the whole test is skipped.
        report_skip(
            module_path!(),
            false,
            "unshare -Ur --uts is not available (no user namespaces)",
        );
    }
    ok
}

/// `unshare -Urm --uts sh -c 'seal -- PROG; echo REAL …'`: the sealed run, then what the
/// (private) machine says afterwards, unsealed.
fn in_namespace(script: &str) -> Output {
    let dir = build_dir().join("setters-ns");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("kernel-hostname");
    std::fs::write(&file, "untouched\n").unwrap();
    let mut c = command("unshare");
    c.args(["-Urm", "--uts", "sh", "-c"])
        .arg(format!(
            "mount --bind \"$HOSTFILE\" /proc/sys/kernel/hostname || exit 99; {script}"
        ))
        .env("SEAL", seal_bin())
        .env("HOSTFILE", &file);
    run_timeout(c, TIMEOUT)
}

#[test]
fn clock_and_name_setters_change_the_sealed_world_not_the_machine() {
    if !namespaces() {
        return;
    }
    let prog = build_c("setters", &[]);
    let script = format!(
        "\"$SEAL\" -- {} proc; echo \"REAL $(hostname) $(date -u +%Y) $(cat /proc/sys/kernel/hostname)\"",
        prog.display()
    );
    let what = "the setters fixture in private namespaces";
    let first = assert_runs_agree(what, RUNS, || in_namespace(&script));
    let out = &first.stdout;
    for want in [
        "clock_settime(now) 0 ok\n",
        "clock_settime(2030) 0 ok\n  after clock_settime: realtime 1893456000\n",
        "settimeofday(2031) 0 ok\n  after settimeofday: realtime 1924992000\n",
        "adjtime(+60s) 0 ok\n  olddelta 0.000000\n  after adjtime: realtime 1924992060\n",
        "adjtimex(ADJ_SETOFFSET +1d) 0 ok\n  after adjtimex: realtime 1925078460\n",
        "adjtimex(read) 0 ok\n  adjtimex time 1925078460\n",
        "syscall(clock_settime 2032) 0 ok\n  after syscall: realtime 1956528000\n",
        // What the kernel refuses, sealed or not.
        "clock_settime(MONOTONIC) -1 Invalid argument\n",
        "clock_settime(bad nsec) -1 Invalid argument\n",
        "sethostname(80 bytes) -1 Invalid argument\n",
        "after sethostname: gethostname renamed uname renamed domain (none)\n",
        "after syscall+setdomainname: gethostname via-syscall uname via-syscall domain example\n",
        // The write to the kernel's file went nowhere; the sealed name stays.
        "after proc write: gethostname via-syscall uname via-syscall domain example\n",
        // Another process of the run sees the same sealed world.
        "  child: 2032 via-syscall via-syscall\n",
        "write(/proc/sys/kernel/hostname) 13 ok\n",
    ] {
        assert!(out.contains(want), "missing {want:?}\n{}", first.show());
    }
    // The (private) machine kept its name and its clock.
    let real_host = run_plain("hostname", Vec::<&str>::new());
    let year = run_plain("date", ["-u", "+%Y"]);
    let expect = format!(
        "REAL {} {} untouched\n",
        real_host.stdout.trim(),
        year.stdout.trim(),
    );
    assert!(
        out.ends_with(&expect),
        "the machine changed\n{}",
        first.show()
    );
    assert!(
        first
            .stderr
            .contains("a write to /proc/sys/kernel/hostname is dropped"),
        "the dropped write was not reported\n{}",
        first.show()
    );
}

#[test]
fn without_the_capability_a_sealed_setter_fails_as_it_would_bare() {
    require_tools!("setpriv");
    let prog = build_c("setters", &[]);
    let drop_caps = |sealed: bool| {
        let mut c = command("setpriv");
        c.args([
            "--inh-caps=-sys_time,-sys_admin",
            "--bounding-set=-sys_time,-sys_admin",
            "--",
        ]);
        if sealed {
            c.arg(seal_bin()).arg("--");
        }
        c.arg(&prog);
        run_timeout(c, TIMEOUT)
    };
    let sealed = drop_caps(true);
    let bare = drop_caps(false);
    let results = |o: &Output| -> Vec<String> {
        o.stdout
            .lines()
            .filter(|l| !l.starts_with(' '))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        results(&sealed),
        results(&bare),
        "sealed setters answer differently from bare ones without privilege\n{}\n{}",
        sealed.show(),
        bare.show()
    );
    sealed.stdout_has("clock_settime(2030) -1 Operation not permitted");
    sealed.stdout_has("sethostname(renamed) -1 Operation not permitted");
    // Nothing moved: the sealed clock still reads the epoch's year.
    sealed.stdout_has("  child: 2026 seal seal\n");
}

#[test]
fn posix_spawn_into_the_callers_own_process_group_works_sealed() {
    // CPython's test_posix: setpgroup=os.getpgrp() from a group leader. getpgrp() shows the
    // virtual pid; the spawn attribute must be translated back (it failed with EPERM).
    let code = "import os\n\
                os.setpgid(0, 0)\n\
                pid = os.posix_spawn('/bin/sh', ['sh', '-c', 'exit 7'], os.environ, setpgroup=os.getpgrp())\n\
                print('status', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n\
                pid = os.posix_spawn('/bin/sh', ['sh', '-c', 'ps -o pgid= -p $$ >/dev/null; exit 0'], os.environ, setpgroup=0)\n\
                print('own group', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n";
    let out = assert_sealed_stable(&["python3", "-c", code], 3);
    assert_eq!(out, "status 7\nown group 0\n");
}
