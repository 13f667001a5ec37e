//! Where the shim answers instead of the kernel, it answers as the kernel would: a struct
//! pointer the kernel would refuse (`EFAULT`) is refused the same way, never a crash, although
//! the shim reads those structs itself; a device's clock (`clock_adjtime` on
//! `FD_TO_CLOCKID(fd)`) may be read but not changed by a sealed run; the `syscall()` forms of
//! `times` and `getrusage` are sealed as their libc functions are; a process that shares the
//! shim's memory with its parent (`clone(CLONE_VM)`) changes nothing of the parent's.

use crate::util::{build_c, census_totals, command, run_sealed, run_timeout, TIMEOUT};

/// Each mode answers as bare: `EFAULT`, no signal.
#[test]
fn an_unmapped_struct_is_efault_as_bare() {
    let bin = build_c("badptr", &[]);
    let bin = bin.to_str().unwrap();
    for (mode, want) in [
        ("adjtimex", "-1 errno 14"),
        ("clock_adjtime", "-1 errno 14"),
        ("settime", "-1 errno 14"),
        ("settimeofday", "-1 errno 14"),
        ("nanosleep", "-1 errno 14"),
        // clock_nanosleep returns the error number itself.
        ("clock_nanosleep", "14 errno 0"),
    ] {
        let mut c = command(bin);
        c.arg(mode);
        let bare = run_timeout(c, TIMEOUT);
        bare.ok();
        assert_eq!(
            bare.stdout,
            format!("{mode} {want}\n"),
            "bare: {}",
            bare.show()
        );
        let sealed = run_sealed(&[bin, mode]);
        sealed.ok();
        assert_eq!(sealed.stdout, bare.stdout, "{mode}: {}", sealed.show());
    }
}

/// A change of a dynamic clock is refused (`EPERM`) while time is sealed; a read goes to the
/// kernel (here `EINVAL`: /dev/null is no clock); with time unsealed the change does too.
#[test]
fn a_devices_clock_is_read_but_not_changed() {
    let bin = build_c("badptr", &[]);
    let bin = bin.to_str().unwrap();
    for (mode, want) in [("ptp_set", "-1 errno 1"), ("ptp_read", "-1 errno 22")] {
        let out = run_sealed(&[bin, mode]);
        out.ok();
        assert_eq!(out.stdout, format!("{mode} {want}\n"), "{}", out.show());
    }
    let out = run_timeout(
        crate::util::seal(["--unseal", "time", "-q", "--", bin, "ptp_set"]),
        TIMEOUT,
    );
    out.ok().stdout_is("ptp_set -1 errno 22\n");
}

#[test]
fn a_clone_vm_child_leaves_its_parents_pid_alone() {
    let bin = build_c("clonevm", &[]);
    let out = run_sealed(&[bin.to_str().unwrap()]);
    out.ok()
        .stdout_is("parent before 1000\nchild saw a pid: yes\nparent after 1000\n");
    out.stderr_has("clone() creating a process");
}

#[test]
fn the_syscall_forms_of_times_and_getrusage_are_sealed() {
    let bin = build_c("rawusage", &[]);
    let bin = bin.to_str().unwrap();
    let want = "times 8640000 0 | syscall 8640000 0\ngetrusage 0.000002 | syscall 0.000003\n";
    for _ in 0..2 {
        let out = run_sealed(&[bin]);
        out.ok();
        out.stdout_is(want);
    }
    let (out, totals) = census_totals(&[bin], "time");
    out.ok();
    for sym in [
        "syscall(SYS_times)",
        "syscall(SYS_getrusage)",
        "times",
        "getrusage",
    ] {
        assert!(
            totals.contains(&(sym.to_string(), 1)),
            "{sym} not counted once: {totals:?}"
        );
    }
}

/// `clock_getcpuclockid(getpid())` and `capget` with `getpid()` name the process itself: with
/// the virtual pid untranslated the kernel answered `ESRCH` (and would have named another
/// process had one had the real pid 1000).
#[test]
fn calls_that_name_a_process_by_its_shown_pid_reach_it() {
    let bin = build_c("pidargs", &[]);
    let out = run_sealed(&[bin.to_str().unwrap()]);
    out.ok().stdout_is(
        "clock_getcpuclockid(getpid()) 0, read 0: 0.000000000\ncapget(getpid()) 0 errno 0\n",
    );
}

/// After `prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT)` (or `seccomp(SECCOMP_SET_MODE_STRICT)`)
/// the kernel kills a process for any call but `read`, `write`, `exit` and `sigreturn`: the
/// hooks of `write` and `read` then add nothing (the shim's `fstat` killed it).
#[test]
fn seccomp_strict_mode_survives_sealed_writes_and_reads() {
    let bin = build_c("strict", &[]);
    for how in ["prctl", "seccomp"] {
        // stdin is closed by the harness: the read answers 0 bytes.
        let out = run_sealed(&[bin.to_str().unwrap(), how]);
        out.ok();
        assert_eq!(out.stdout, "strict\nnoread\n", "{how}: {}", out.show());
    }
}
