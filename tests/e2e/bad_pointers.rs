//! A struct pointer the kernel would refuse (`EFAULT`) is refused the same way under seal,
//! never a crash, although the shim reads those structs itself; and a device's clock
//! (`clock_adjtime` on `FD_TO_CLOCKID(fd)`) may be read but not changed by a sealed run.

use crate::util::{build_c, command, run_sealed, run_timeout, TIMEOUT};

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
    out.ok();
    assert_eq!(out.stdout, "ptp_set -1 errno 22\n", "{}", out.show());
}
