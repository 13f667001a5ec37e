//! The clock's setters: while `time` is sealed they change the run's sealed world
//! (`super::set`), never the machine's clock; a device's clock may be read, not changed.

use seal_abi::{flags, Fid, NO_DETAIL};

use super::hooks::realtime_timeval;
use super::{detail, set};
use crate::core::{census, config};
use crate::{hook, real};

/// Ends a setter: 0, or -1 with `errno`.
fn setter_result(r: Result<(), i32>) -> libc::c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            crate::core::sys::set_errno(e);
            -1
        }
    }
}

/// Shared by `clock_settime` and `syscall(SYS_clock_settime, …)`.
///
/// # Safety
/// As `clock_settime(2)`: `ts` null or readable.
unsafe fn clock_settime_impl(clock: libc::clockid_t, ts: *const libc::timespec) -> libc::c_int {
    if config::sealed(flags::TIME) {
        if !ts.is_null() && !crate::core::sys::mapped(ts, core::mem::size_of::<libc::timespec>()) {
            return setter_result(Err(libc::EFAULT));
        }
        // SAFETY: null or readable per the contract (and mapped: checked above).
        return setter_result(set::settime(clock, unsafe { ts.as_ref() }));
    }
    let real = real!(clock_settime: fn(libc::clockid_t, *const libc::timespec) -> libc::c_int);
    // SAFETY: forwarded.
    unsafe { real(clock, ts) }
}

hook! {
    /// # Safety
    /// As `clock_settime(2)`.
    fn clock_settime(clock: libc::clockid_t, ts: *const libc::timespec) -> libc::c_int;
    fid = ClockSettime, detail = detail(clock);
    // SAFETY: forwarded contract.
    || unsafe { clock_settime_impl(clock, ts) }
}

/// Shared by `settimeofday` and `syscall(SYS_settimeofday, …)`.
///
/// # Safety
/// As `settimeofday(2)`: each pointer null or readable.
unsafe fn settimeofday_impl(tv: *const libc::timeval, tz: *const libc::c_void) -> libc::c_int {
    if config::sealed(flags::TIME) {
        if !tv.is_null() && !crate::core::sys::mapped(tv, core::mem::size_of::<libc::timeval>()) {
            return setter_result(Err(libc::EFAULT));
        }
        // SAFETY: null or readable per the contract (and mapped: checked above).
        return setter_result(set::settimeofday(unsafe { tv.as_ref() }));
    }
    let real = real!(settimeofday: fn(*const libc::timeval, *const libc::c_void) -> libc::c_int);
    // SAFETY: forwarded.
    unsafe { real(tv, tz) }
}

hook! {
    /// # Safety
    /// As `settimeofday(2)`.
    fn settimeofday(tv: *const libc::timeval, tz: *const libc::c_void) -> libc::c_int;
    fid = Settimeofday;
    // SAFETY: forwarded contract.
    || unsafe { settimeofday_impl(tv, tz) }
}

hook! {
    /// `stime(2)`: only old binaries link it (glibc keeps it as a compatibility symbol).
    ///
    /// # Safety
    /// As `stime(2)`: `t` null or readable.
    fn stime(t: *const libc::time_t) -> libc::c_int;
    fid = Stime;
    |real| {
        if !config::sealed(flags::TIME) {
            return real(t);
        }
        // SAFETY: null or readable per the contract.
        let tv = unsafe { t.as_ref() }.map(|&s| libc::timeval {
            tv_sec: s,
            tv_usec: 0,
        });
        setter_result(match tv {
            Some(tv) => set::settimeofday(Some(&tv)),
            None => Err(libc::EFAULT),
        })
    }
}

hook! {
    /// # Safety
    /// As `adjtime(3)`: each pointer null or valid.
    fn adjtime(delta: *const libc::timeval, olddelta: *mut libc::timeval) -> libc::c_int;
    fid = Adjtime;
    |real| {
        if !config::sealed(flags::TIME) {
            return real(delta, olddelta);
        }
        // SAFETY: null or readable per the contract.
        let r = set::adjtime(unsafe { delta.as_ref() });
        if r.is_ok() && !olddelta.is_null() {
            // Corrections apply at once in the sealed world: nothing is left to slew.
            // SAFETY: writable per the contract.
            unsafe {
                *olddelta = libc::timeval {
                    tv_sec: 0,
                    tv_usec: 0,
                }
            };
        }
        setter_result(r)
    }
}

/// `adjtimex`, `ntp_adjtime` and `clock_adjtime(CLOCK_REALTIME)` in a sealed process: a
/// read-only call asks the kernel (it changes nothing) and gets the sealed time back; one that
/// would change the clock changes the sealed world, then reports the kernel's clock state as
/// a read-only call would. `real_read` makes the read-only kernel call.
///
/// # Safety
/// `buf` null or valid for reads and writes.
unsafe fn adjtimex_sealed(
    buf: *mut libc::timex,
    real_read: impl Fn(*mut libc::timex) -> libc::c_int,
) -> libc::c_int {
    if !crate::core::sys::mapped(buf, core::mem::size_of::<libc::timex>()) {
        // What the kernel answers for a null or unmapped struct.
        crate::core::sys::set_errno(libc::EFAULT);
        return -1;
    }
    // SAFETY: mapped (checked above), and valid per the contract.
    let Some(tx) = (unsafe { buf.as_mut() }) else {
        crate::core::sys::set_errno(libc::EFAULT);
        return -1;
    };
    if !set::adjtimex_reads_only(tx.modes) {
        if let Err(e) = set::adjtimex(tx.modes, &tx.time) {
            crate::core::sys::set_errno(e);
            return -1;
        }
        tx.modes = 0;
    }
    let r = real_read(tx);
    if r >= 0 {
        let unit = if tx.status & set::STA_NANO != 0 {
            1
        } else {
            1000
        };
        tx.time = realtime_timeval(unit);
    }
    r
}

/// Shared by `adjtimex`, `ntp_adjtime` and `syscall(SYS_adjtimex, …)`.
///
/// # Safety
/// As `adjtimex(2)`.
unsafe fn adjtimex_impl(buf: *mut libc::timex) -> libc::c_int {
    let real = real!(adjtimex: fn(*mut libc::timex) -> libc::c_int);
    if config::sealed(flags::TIME) {
        // SAFETY: forwarded contract; the real call only reads (modes is 0 by then).
        return unsafe { adjtimex_sealed(buf, |b| real(b)) };
    }
    // SAFETY: forwarded.
    unsafe { real(buf) }
}

hook! {
    /// # Safety
    /// As `adjtimex(2)` (`ntp_adjtime(3)` is glibc's other name for it).
    fn adjtimex | ntp_adjtime(buf: *mut libc::timex) -> libc::c_int;
    fid = Adjtimex;
    // SAFETY: forwarded contract.
    || unsafe { adjtimex_impl(buf) }
}

/// Shared by `clock_adjtime` and `syscall(SYS_clock_adjtime, …)`. Clocks other than
/// `CLOCK_REALTIME` (dynamic clocks behind a file descriptor) go to the kernel.
///
/// # Safety
/// As `clock_adjtime(2)`.
unsafe fn clock_adjtime_impl(clock: libc::clockid_t, buf: *mut libc::timex) -> libc::c_int {
    let real = real!(clock_adjtime: fn(libc::clockid_t, *mut libc::timex) -> libc::c_int);
    if config::sealed(flags::TIME) && clock == libc::CLOCK_REALTIME {
        // SAFETY: forwarded contract; the real call only reads (modes is 0 by then).
        return unsafe { adjtimex_sealed(buf, |b| real(clock, b)) };
    }
    // A dynamic clock (a PTP device's, `FD_TO_CLOCKID(fd)`) is the machine's: a sealed run may
    // read it but not change it (there is no sealed copy of it to change instead).
    if config::sealed(flags::TIME)
        && clock < 0
        && clock & 7 == 3
        && crate::core::sys::mapped(buf, core::mem::size_of::<libc::timex>())
        // SAFETY: mapped (checked above) and valid per the contract.
        && !set::adjtimex_reads_only(unsafe { (*buf).modes })
    {
        crate::core::sys::set_errno(libc::EPERM);
        return -1;
    }
    // SAFETY: forwarded.
    unsafe { real(clock, buf) }
}

hook! {
    /// # Safety
    /// As `clock_adjtime(2)`.
    fn clock_adjtime(clock: libc::clockid_t, buf: *mut libc::timex) -> libc::c_int;
    fid = ClockAdjtime, detail = detail(clock);
    // SAFETY: forwarded contract.
    || unsafe { clock_adjtime_impl(clock, buf) }
}

/// `syscall(SYS_clock_settime | SYS_settimeofday | SYS_adjtimex | SYS_clock_adjtime)`: the
/// same logic as the hooks, counted as `SysClockSettime` (`crate::syscall`'s route table).
///
/// # Safety
/// As `syscall(2)` for `n` with `a`.
pub unsafe fn sys_set(n: libc::c_long, a: [libc::c_long; 6], ra: u64) -> Option<libc::c_long> {
    let d = match n {
        libc::SYS_clock_settime | libc::SYS_clock_adjtime => detail(a[0] as libc::clockid_t),
        libc::SYS_settimeofday | libc::SYS_adjtimex => NO_DETAIL,
        _ => return None,
    };
    census::count(Fid::SysClockSettime, d, ra);
    // SAFETY (all arms): the caller's arguments, forwarded with the same meaning.
    let r = unsafe {
        match n {
            libc::SYS_clock_settime => {
                clock_settime_impl(a[0] as libc::clockid_t, a[1] as *const libc::timespec)
            }
            libc::SYS_settimeofday => {
                settimeofday_impl(a[0] as *const libc::timeval, a[1] as *const libc::c_void)
            }
            libc::SYS_adjtimex => adjtimex_impl(a[0] as *mut libc::timex),
            _ => clock_adjtime_impl(a[0] as libc::clockid_t, a[1] as *mut libc::timex),
        }
    };
    Some(r as libc::c_long)
}
