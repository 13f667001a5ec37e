//! Exported clock entry points. Each: count the call, then answer from the logical clock when
//! the `time` family is sealed, else call the real function.

use seal_abi::{flags, Fid, NO_DETAIL};

use super::fast;
use super::{detail, domain, read, realtime_ns, seal_rusage, to_timespec, value_at, Domain};
use crate::core::{census, config};
use crate::runtime;
use crate::{hook, real};

hook! {
    /// # Safety
    /// As `clock_gettime(2)`: `ts` must be valid for writes.
    fn clock_gettime(clock: libc::clockid_t, ts: *mut libc::timespec) -> libc::c_int;
    caller = ra;
    || {
        // SAFETY (both closures): forwarded contract; `ts` is writable when not null.
        let general = move || unsafe { clock_gettime_general(clock, ts, ra, crate::frame!()) };
        if ts.is_null() {
            return general();
        }
        let put = move |ns| {
            unsafe { *ts = fast::timespec(ns) };
            0
        };
        match clock {
            libc::CLOCK_REALTIME => {
                const D: u8 = super::detail(libc::CLOCK_REALTIME);
                fast::realtime::<{ fast::SITE_CLOCK_GETTIME }, _>(
                    Fid::ClockGettime,
                    D,
                    ra,
                    put,
                    general,
                )
            }
            libc::CLOCK_MONOTONIC => {
                const D: u8 = super::detail(libc::CLOCK_MONOTONIC);
                fast::monotonic::<{ fast::SITE_CLOCK_MONOTONIC }, _>(
                    Fid::ClockGettime,
                    D,
                    ra,
                    put,
                    general,
                )
            }
            _ => general(),
        }
    }
}

/// The general `clock_gettime`, out of line so the hook's fast path stays small.
///
/// # Safety
/// As `clock_gettime(2)`.
#[inline(never)]
unsafe fn clock_gettime_general(
    clock: libc::clockid_t,
    ts: *mut libc::timespec,
    ra: u64,
    fp: u64,
) -> libc::c_int {
    // SAFETY: forwarded contract.
    unsafe { clock_gettime_at(clock, ts, Fid::ClockGettime, ra, fp) }
}

/// Shared by `clock_gettime` and `syscall(SYS_clock_gettime, …)`, counted as `fid`. `fp` is
/// the hook's frame pointer (0: unknown, as for the system call), through which a runtime's
/// bookkeeping reads are told from the program's (`crate::runtime`).
///
/// # Safety
/// As `clock_gettime(2)`.
#[inline(always)]
pub unsafe fn clock_gettime_at(
    clock: libc::clockid_t,
    ts: *mut libc::timespec,
    fid: Fid,
    ra: u64,
    fp: u64,
) -> libc::c_int {
    if config::sealed(flags::TIME) {
        let d = domain(clock);
        if d != Domain::PassThrough && !ts.is_null() {
            let v = if runtime::bookkeeping(ra, fp, matches!(d, Domain::Realtime(_))) {
                census::count(Fid::RuntimeClock, detail(clock), ra);
                if d == Domain::Cputime {
                    crate::core::thread::cpu_peek()
                } else {
                    value_at(d, super::now_logical())
                }
            } else {
                census::count(fid, detail(clock), ra);
                super::read(d)
            };
            // SAFETY: caller guarantees ts is writable.
            unsafe { *ts = to_timespec(v) };
            return 0;
        }
    }
    census::count(fid, detail(clock), ra);
    if crate::cpu::tsc_trapped() {
        // The vDSO would trap on its rdtsc: the system call is ~10x cheaper than the trap.
        // SAFETY: forwarded.
        return crate::core::fd::libc_result(unsafe {
            crate::core::sys::syscall3(libc::SYS_clock_gettime, clock as i64, ts as i64, 0)
        }) as libc::c_int;
    }
    let real = real!(clock_gettime: fn(libc::clockid_t, *mut libc::timespec) -> libc::c_int);
    // SAFETY: forwarded.
    unsafe { real(clock, ts) }
}

hook! {
    /// # Safety
    /// As `gettimeofday(2)`.
    /// (`__gettimeofday` is glibc's exported alias.)
    fn gettimeofday | __gettimeofday(tv: *mut libc::timeval, tz: *mut libc::c_void) -> libc::c_int;
    caller = ra;
    || {
        // SAFETY (both closures): forwarded contract; `tv` is writable when not null.
        let general = move || unsafe { gettimeofday_general(tv, tz, ra, crate::frame!()) };
        if tv.is_null() || !tz.is_null() {
            return general();
        }
        let put = move |ns| {
            unsafe { *tv = fast::timeval(ns) };
            0
        };
        fast::realtime::<{ fast::SITE_GETTIMEOFDAY }, _>(Fid::Gettimeofday, 0, ra, put, general)
    }
}

/// The general `gettimeofday`, out of line so the hook's fast path stays small.
///
/// # Safety
/// As `gettimeofday(2)`.
#[inline(never)]
unsafe fn gettimeofday_general(
    tv: *mut libc::timeval,
    tz: *mut libc::c_void,
    ra: u64,
    fp: u64,
) -> libc::c_int {
    // SAFETY: forwarded contract.
    unsafe { gettimeofday_at(tv, tz, Fid::Gettimeofday, ra, fp) }
}

/// Shared by `gettimeofday` and `syscall(SYS_gettimeofday, …)` (`fp` as for
/// [`clock_gettime_at`]).
///
/// # Safety
/// As `gettimeofday(2)`.
#[inline(always)]
pub unsafe fn gettimeofday_at(
    tv: *mut libc::timeval,
    tz: *mut libc::c_void,
    fid: Fid,
    ra: u64,
    fp: u64,
) -> libc::c_int {
    if config::sealed(flags::TIME) {
        let keep = runtime::bookkeeping(ra, fp, true);
        census::count(if keep { Fid::RuntimeClock } else { fid }, 0, ra);
        // SAFETY: caller guarantees validity of non-null pointers.
        unsafe {
            if !tv.is_null() {
                *tv = if keep {
                    super::to_timeval(value_at(Domain::Realtime(0), super::now_logical()))
                } else {
                    realtime_timeval(1000)
                };
            }
            if !tz.is_null() {
                // struct timezone { int tz_minuteswest; int tz_dsttime; }: UTC, no DST.
                core::ptr::write_bytes(tz as *mut u8, 0, 8);
            }
        }
        return 0;
    }
    census::count(fid, 0, ra);
    if crate::cpu::tsc_trapped() {
        // SAFETY: forwarded.
        return crate::core::fd::libc_result(unsafe {
            crate::core::sys::syscall3(libc::SYS_gettimeofday, tv as i64, tz as i64, 0)
        }) as libc::c_int;
    }
    let real = real!(gettimeofday: fn(*mut libc::timeval, *mut libc::c_void) -> libc::c_int);
    // SAFETY: forwarded.
    unsafe { real(tv, tz) }
}

hook! {
    /// # Safety
    /// As `time(2)`.
    fn time(t: *mut libc::time_t) -> libc::time_t;
    caller = ra;
    || {
        // SAFETY: forwarded contract.
        let general = move || unsafe { time_general(t, ra) };
        let put = move |ns| {
            let s = fast::seconds(ns);
            if !t.is_null() {
                // SAFETY: caller guarantees t is writable when not null.
                unsafe { *t = s };
            }
            s
        };
        fast::realtime::<{ fast::SITE_TIME }, _>(Fid::TimeFn, 0, ra, put, general)
    }
}

/// The general `time`, out of line so the hook's fast path stays small.
///
/// # Safety
/// As `time(2)`.
#[inline(never)]
unsafe fn time_general(t: *mut libc::time_t, ra: u64) -> libc::time_t {
    // SAFETY: forwarded contract.
    unsafe { time_impl(t, Fid::TimeFn, ra) }
}

/// # Safety
/// As `time(2)`.
#[inline(always)]
pub unsafe fn time_impl(t: *mut libc::time_t, fid: Fid, ra: u64) -> libc::time_t {
    census::count(fid, 0, ra);
    if config::sealed(flags::TIME) {
        let s = realtime_ns().div_euclid(1_000_000_000);
        if !t.is_null() {
            // SAFETY: caller guarantees t is writable.
            unsafe { *t = s };
        }
        return s;
    }
    if crate::cpu::tsc_trapped() {
        // SAFETY: forwarded.
        return crate::core::fd::libc_result(unsafe {
            crate::core::sys::syscall3(libc::SYS_time, t as i64, 0, 0)
        });
    }
    let real = real!(time: fn(*mut libc::time_t) -> libc::time_t);
    // SAFETY: forwarded.
    unsafe { real(t) }
}

/// `struct timeb` of `<sys/timeb.h>`.
#[repr(C)]
pub struct Timeb {
    time: libc::time_t,
    millitm: libc::c_ushort,
    timezone: libc::c_short,
    dstflag: libc::c_short,
}

/// The sealed realtime as a `timeval` whose second field counts units of `unit_ns`
/// (1000: microseconds, as `timeval` says; 1: nanoseconds, for `adjtimex`'s `STA_NANO`).
pub(super) fn realtime_timeval(unit_ns: i64) -> libc::timeval {
    let ns = realtime_ns();
    libc::timeval {
        tv_sec: ns.div_euclid(1_000_000_000),
        tv_usec: ns.rem_euclid(1_000_000_000) / unit_ns,
    }
}

hook! {
    /// # Safety
    /// As `ftime(3)`.
    fn ftime(tp: *mut Timeb) -> libc::c_int;
    fid = Ftime, detail = 0;
    |real| {
        if !config::sealed(flags::TIME) {
            return real(tp);
        }
        let ns = realtime_ns();
        if !tp.is_null() {
            // SAFETY: caller guarantees tp is writable.
            unsafe {
                *tp = Timeb {
                    time: ns.div_euclid(1_000_000_000),
                    millitm: (ns.rem_euclid(1_000_000_000) / 1_000_000) as u16,
                    timezone: 0,
                    dstflag: 0,
                }
            };
        }
        0
    }
}

hook! {
    /// # Safety
    /// As `timespec_get(3)`.
    fn timespec_get(ts: *mut libc::timespec, base: libc::c_int) -> libc::c_int;
    fid = TimespecGet, detail = 0;
    |real| {
        const TIME_UTC: libc::c_int = 1;
        if base == TIME_UTC && !ts.is_null() && config::sealed(flags::TIME) {
            // SAFETY: caller guarantees ts is writable.
            unsafe { *ts = to_timespec(realtime_ns()) };
            return base;
        }
        real(ts, base)
    }
}

hook! {
    /// # Safety
    /// As `clock(3)`.
    fn clock() -> libc::clock_t;
    fid = Clock, detail = libc::CLOCK_PROCESS_CPUTIME_ID as u8;
    // CLOCKS_PER_SEC is 1_000_000 on glibc.
    |real| if config::sealed(flags::TIME) { read(Domain::Cputime) / 1000 } else { real() }
}

hook! {
    /// # Safety
    /// As `times(2)`.
    fn times(buf: *mut libc::tms) -> libc::clock_t;
    fid = Times;
    // SAFETY: forwarded contract.
    |real| unsafe { times_impl(buf, real) }
}

/// `times`, shared with `syscall(SYS_times, …)`: `real` is the unsealed call.
///
/// # Safety
/// As `times(2)`.
unsafe fn times_impl(
    buf: *mut libc::tms,
    real: impl FnOnce(*mut libc::tms) -> libc::clock_t,
) -> libc::clock_t {
    if !config::sealed(flags::TIME) {
        return real(buf);
    }
    if !buf.is_null() && !crate::core::sys::mapped(buf, core::mem::size_of::<libc::tms>()) {
        crate::core::sys::set_errno(libc::EFAULT);
        return -1;
    }
    // Clock ticks of 10 ms (sysconf(_SC_CLK_TCK) == 100 on Linux). The CPU time is the
    // thread's CPU clock; the return value is elapsed (monotonic) time.
    let cpu = super::cpu_read();
    let l = crate::core::thread::peek();
    if !buf.is_null() {
        // SAFETY: caller guarantees buf is writable.
        unsafe {
            *buf = libc::tms {
                tms_utime: cpu / 10_000_000,
                tms_stime: 0,
                tms_cutime: 0,
                tms_cstime: 0,
            }
        };
    }
    (super::monotonic_base() + l) / 10_000_000
}

hook! {
    /// # Safety
    /// As `getrusage(2)`: `usage` must be valid for writes.
    fn getrusage(who: libc::c_int, usage: *mut libc::rusage) -> libc::c_int;
    fid = Getrusage;
    // SAFETY: forwarded contract.
    |real| unsafe { getrusage_impl(who, usage, real(who, usage)) }
}

/// `getrusage` after the real call returned `r`, shared with `syscall(SYS_getrusage, …)`.
///
/// # Safety
/// As `getrusage(2)`.
unsafe fn getrusage_impl(
    who: libc::c_int,
    usage: *mut libc::rusage,
    r: libc::c_int,
) -> libc::c_int {
    if r == 0 && !usage.is_null() && config::sealed(flags::TIME) {
        let l = if who == libc::RUSAGE_CHILDREN {
            0
        } else {
            super::cpu_read()
        };
        // SAFETY: the kernel just filled *usage.
        unsafe { seal_rusage(who, l, usage) };
    }
    r
}

/// `syscall(SYS_times | SYS_getrusage, …)`: as `times` and `getrusage`.
///
/// # Safety
/// As the system calls.
pub unsafe fn sys_usage(n: libc::c_long, a: [libc::c_long; 6], ra: u64) -> Option<libc::c_long> {
    let raw = |n: libc::c_long| {
        // SAFETY: the caller's own system call, forwarded.
        crate::core::fd::libc_result(unsafe { crate::core::sys::syscall3(n, a[0], a[1], 0) })
    };
    // SAFETY (both arms): the caller's arguments, forwarded with the same meaning.
    unsafe {
        match n {
            libc::SYS_times => {
                census::count(Fid::SysTimes, NO_DETAIL, ra);
                Some(times_impl(a[0] as *mut libc::tms, |_| raw(n)) as libc::c_long)
            }
            libc::SYS_getrusage => {
                census::count(Fid::SysGetrusage, NO_DETAIL, ra);
                let (who, usage) = (a[0] as libc::c_int, a[1] as *mut libc::rusage);
                Some(getrusage_impl(who, usage, raw(n) as libc::c_int) as libc::c_long)
            }
            _ => None,
        }
    }
}

/// `ntp_gettime`/`ntp_gettimex`: the kernel's NTP state with the sealed time. Both structs
/// start with a `timeval` in microseconds.
///
/// # Safety
/// `buf` points to a writable `ntptimeval` of either layout.
unsafe fn ntp_gettime_sealed(buf: *mut libc::timeval, r: libc::c_int) -> libc::c_int {
    if r >= 0 && !buf.is_null() && config::sealed(flags::TIME) {
        // SAFETY: the struct's first member, writable per the contract.
        unsafe { *buf = realtime_timeval(1000) };
    }
    r
}

hook! {
    /// # Safety
    /// As `ntp_gettime(3)`.
    fn ntp_gettime(buf: *mut libc::ntptimeval) -> libc::c_int;
    fid = NtpGettime;
    // SAFETY: forwarded, then the leading timeval replaced.
    |real| unsafe { ntp_gettime_sealed(buf as *mut libc::timeval, real(buf)) }
}

hook! {
    /// # Safety
    /// As `ntp_gettimex(3)`.
    fn ntp_gettimex(buf: *mut libc::c_void) -> libc::c_int;
    fid = NtpGettime;
    // SAFETY: forwarded, then the leading timeval replaced.
    |real| unsafe { ntp_gettime_sealed(buf as *mut libc::timeval, real(buf)) }
}

/// `syscall(SYS_clock_gettime | SYS_gettimeofday | SYS_time)`: the same logic as the hooks,
/// counted with the `Sys*` ids (`crate::syscall`'s route table; the setters' route is
/// `super::setters::sys_set`).
///
/// # Safety
/// As `syscall(2)` for `n` with `a`.
pub unsafe fn sys_clock(n: libc::c_long, a: [libc::c_long; 6], ra: u64) -> Option<libc::c_long> {
    // SAFETY (all arms): the caller's arguments, forwarded with the same meaning.
    let r = unsafe {
        match n {
            libc::SYS_clock_gettime => clock_gettime_at(
                a[0] as libc::clockid_t,
                a[1] as *mut libc::timespec,
                Fid::SysClockGettime,
                ra,
                0,
            ) as libc::c_long,
            libc::SYS_gettimeofday => gettimeofday_at(
                a[0] as *mut libc::timeval,
                a[1] as *mut libc::c_void,
                Fid::SysGettimeofday,
                ra,
                0,
            ) as libc::c_long,
            libc::SYS_time => {
                time_impl(a[0] as *mut libc::time_t, Fid::SysTime, ra) as libc::c_long
            }
            _ => return None,
        }
    };
    Some(r)
}
