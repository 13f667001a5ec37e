//! Exported clock entry points. Each: count the call, then answer from the logical clock when
//! the `time` family is sealed, else call the real function.

use seal_abi::{flags, Fid, NO_DETAIL};

use super::{detail, domain, read, realtime_ns, seal_rusage, to_timespec, Domain, MONO_BASE_NS};
use crate::{caller, census, config, real, thread};

/// # Safety
/// As `clock_gettime(2)`: `ts` must be valid for writes.
#[no_mangle]
pub unsafe extern "C" fn clock_gettime(
    clock: libc::clockid_t,
    ts: *mut libc::timespec,
) -> libc::c_int {
    let ra = caller!();
    // SAFETY: forwarded contract.
    unsafe { clock_gettime_impl(clock, ts, Fid::ClockGettime, ra) }
}

/// Shared by `clock_gettime` and `syscall(SYS_clock_gettime, …)`.
///
/// # Safety
/// As `clock_gettime(2)`.
#[inline(always)]
pub unsafe fn clock_gettime_impl(
    clock: libc::clockid_t,
    ts: *mut libc::timespec,
    fid: Fid,
    ra: u64,
) -> libc::c_int {
    census::count(fid, detail(clock), ra);
    if config::sealed(flags::TIME) {
        let d = domain(clock);
        if d != Domain::PassThrough && !ts.is_null() {
            // SAFETY: caller guarantees ts is writable.
            unsafe { *ts = to_timespec(read(d)) };
            return 0;
        }
    }
    let real = real!(clock_gettime: fn(libc::clockid_t, *mut libc::timespec) -> libc::c_int);
    // SAFETY: forwarded.
    unsafe { real(clock, ts) }
}

/// # Safety
/// As `gettimeofday(2)`.
#[no_mangle]
pub unsafe extern "C" fn gettimeofday(
    tv: *mut libc::timeval,
    tz: *mut libc::c_void,
) -> libc::c_int {
    let ra = caller!();
    // SAFETY: forwarded contract.
    unsafe { gettimeofday_impl(tv, tz, Fid::Gettimeofday, ra) }
}

/// # Safety
/// As `gettimeofday(2)`.
#[inline(always)]
pub unsafe fn gettimeofday_impl(
    tv: *mut libc::timeval,
    tz: *mut libc::c_void,
    fid: Fid,
    ra: u64,
) -> libc::c_int {
    census::count(fid, 0, ra);
    if config::sealed(flags::TIME) {
        let ns = realtime_ns();
        // SAFETY: caller guarantees validity of non-null pointers.
        unsafe {
            if !tv.is_null() {
                *tv = libc::timeval {
                    tv_sec: ns.div_euclid(1_000_000_000),
                    tv_usec: ns.rem_euclid(1_000_000_000) / 1000,
                };
            }
            if !tz.is_null() {
                // struct timezone { int tz_minuteswest; int tz_dsttime; }: UTC, no DST.
                core::ptr::write_bytes(tz as *mut u8, 0, 8);
            }
        }
        return 0;
    }
    let real = real!(gettimeofday: fn(*mut libc::timeval, *mut libc::c_void) -> libc::c_int);
    // SAFETY: forwarded.
    unsafe { real(tv, tz) }
}

/// # Safety
/// As `time(2)`.
#[no_mangle]
pub unsafe extern "C" fn time(t: *mut libc::time_t) -> libc::time_t {
    let ra = caller!();
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

/// # Safety
/// As `ftime(3)`.
#[no_mangle]
pub unsafe extern "C" fn ftime(tp: *mut Timeb) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::Ftime, 0, ra);
    if config::sealed(flags::TIME) {
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
        return 0;
    }
    let real = real!(ftime: fn(*mut Timeb) -> libc::c_int);
    // SAFETY: forwarded.
    unsafe { real(tp) }
}

/// # Safety
/// As `timespec_get(3)`.
#[no_mangle]
pub unsafe extern "C" fn timespec_get(ts: *mut libc::timespec, base: libc::c_int) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::TimespecGet, 0, ra);
    const TIME_UTC: libc::c_int = 1;
    if base == TIME_UTC && !ts.is_null() && config::sealed(flags::TIME) {
        // SAFETY: caller guarantees ts is writable.
        unsafe { *ts = to_timespec(realtime_ns()) };
        return base;
    }
    let real = real!(timespec_get: fn(*mut libc::timespec, libc::c_int) -> libc::c_int);
    // SAFETY: forwarded.
    unsafe { real(ts, base) }
}

/// # Safety
/// As `clock(3)`.
#[no_mangle]
pub unsafe extern "C" fn clock() -> libc::clock_t {
    let ra = caller!();
    census::count(Fid::Clock, libc::CLOCK_PROCESS_CPUTIME_ID as u8, ra);
    if config::sealed(flags::TIME) {
        // CLOCKS_PER_SEC is 1_000_000 on glibc.
        return read(Domain::Cputime) / 1000;
    }
    let real = real!(clock: fn() -> libc::clock_t);
    // SAFETY: no arguments.
    unsafe { real() }
}

/// # Safety
/// As `times(2)`.
#[no_mangle]
pub unsafe extern "C" fn times(buf: *mut libc::tms) -> libc::clock_t {
    let ra = caller!();
    census::count(Fid::Times, NO_DETAIL, ra);
    if config::sealed(flags::TIME) {
        // Clock ticks of 10 ms (sysconf(_SC_CLK_TCK) == 100 on Linux).
        let l = thread::read_and_tick();
        if !buf.is_null() {
            // SAFETY: caller guarantees buf is writable.
            unsafe {
                *buf = libc::tms {
                    tms_utime: l / 10_000_000,
                    tms_stime: 0,
                    tms_cutime: 0,
                    tms_cstime: 0,
                }
            };
        }
        return (MONO_BASE_NS + l) / 10_000_000;
    }
    let real = real!(times: fn(*mut libc::tms) -> libc::clock_t);
    // SAFETY: forwarded.
    unsafe { real(buf) }
}

/// # Safety
/// As `getrusage(2)`: `usage` must be valid for writes.
#[no_mangle]
pub unsafe extern "C" fn getrusage(who: libc::c_int, usage: *mut libc::rusage) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::Getrusage, NO_DETAIL, ra);
    let real = real!(getrusage: fn(libc::c_int, *mut libc::rusage) -> libc::c_int);
    // SAFETY: forwarded.
    let r = unsafe { real(who, usage) };
    if r == 0 && !usage.is_null() && config::sealed(flags::TIME) {
        let l = if who == libc::RUSAGE_CHILDREN {
            0
        } else {
            thread::read_and_tick()
        };
        // SAFETY: the kernel just filled *usage.
        unsafe { seal_rusage(who, l, usage) };
    }
    r
}
