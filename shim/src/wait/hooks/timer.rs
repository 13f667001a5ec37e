//! Timers armed with an absolute (`*_ABSTIME`) deadline: translated to the real clock.

use libc::{c_int, itimerspec};
use seal_abi::{flags, Fid, NO_DETAIL};

use crate::clock;
use crate::core::{census, config};
use crate::hook;
use crate::wait::{posix_timer_clock, translate_itimer};

/// One kind of timer armed with an `itimerspec`: its census id, its ABSTIME flag, and what is
/// recorded when its clock is unknown.
struct Kind {
    fid: Fid,
    abstime: c_int,
    unknown: &'static [u8],
}

const TIMERFD: Kind = Kind {
    fid: Fid::TimerfdSettime,
    abstime: libc::TFD_TIMER_ABSTIME,
    unknown: b"timerfd_settime: clock of the timerfd unknown, ABSTIME deadline not translated",
};

const POSIX_TIMER: Kind = Kind {
    fid: Fid::TimerSettime,
    abstime: libc::TIMER_ABSTIME,
    unknown: b"timer_settime: clock of the timer unknown, ABSTIME deadline not translated",
};

/// Arms a timer of `kind` through `set` (the real call, given the deadline to pass): counts
/// it, and translates an ABSTIME deadline to the real clock. Relative, unsealed, or with the
/// timer's clock unknown (recorded: its deadline then reaches the kernel untranslated and the
/// launcher warns), `new` goes through untouched. Returns `set`'s result and the translated
/// deadline, if any.
///
/// # Safety
/// `new` null or valid for reads.
#[inline(always)]
unsafe fn arm(
    kind: &Kind,
    fl: c_int,
    new: *const itimerspec,
    ra: u64,
    clock_of: impl FnOnce() -> Option<libc::clockid_t>,
    set: impl FnOnce(*const itimerspec) -> c_int,
) -> (c_int, Option<itimerspec>) {
    if fl & kind.abstime == 0 || new.is_null() || !config::sealed(flags::WAIT) {
        census::count(kind.fid, NO_DETAIL, ra);
        return (set(new), None);
    }
    let Some(clk) = clock_of() else {
        census::count(kind.fid, NO_DETAIL, ra);
        census::record_unsealed(seal_abi::unsealed::UNSUPPORTED_CALL, kind.unknown);
        return (set(new), None);
    };
    census::count(kind.fid, clock::detail(clk), ra);
    // SAFETY: new non-null and valid per the contract.
    let its = translate_itimer(clk, unsafe { &*new });
    (set(&its), Some(its))
}

hook! {
    /// # Safety
    /// As `timerfd_settime(2)`.
    fn timerfd_settime(fd: c_int, fl: c_int, new: *const itimerspec, old: *mut itimerspec) -> c_int;
    caller = ra;
    // SAFETY: forwarded contract.
    |real| unsafe {
        arm(&TIMERFD, fl, new, ra, || crate::wait::timerfd_clock(fd), |p| real(fd, fl, p, old)).0
    }
}

hook! {
    /// # Safety
    /// As `timer_settime(2)`; `t` from glibc's `timer_create`.
    fn timer_settime(t: libc::timer_t, fl: c_int, new: *const itimerspec, old: *mut itimerspec) -> c_int;
    caller = ra;
    |real| {
        // SAFETY: forwarded contract; t came from timer_create per the contract.
        let (r, its) = unsafe {
            arm(&POSIX_TIMER, fl, new, ra, || posix_timer_clock(t), |p| real(t, fl, p, old))
        };
        if r == 0 && !new.is_null() && crate::wait::warp_on() {
            // SAFETY: new non-null and valid per the contract; t from timer_create.
            unsafe { on_warp_board(t, fl & libc::TIMER_ABSTIME != 0, &*new, its.as_ref()) };
        }
        r
    }
}

/// Puts a timer just armed (or disarmed) on the `--warp` board, so that no wait warps past
/// its expiry (`crate::wait::warp::timer_armed`). `translated` is the real deadline an
/// ABSTIME timer got (`None`: relative, or its clock unknown).
///
/// # Safety
/// `t` came from glibc's `timer_create`.
unsafe fn on_warp_board(
    t: libc::timer_t,
    abs: bool,
    new: &itimerspec,
    translated: Option<&itimerspec>,
) {
    // SAFETY: per the contract.
    let id = unsafe { crate::wait::kernel_timer_id(t) };
    let v = &new.it_value;
    if !abs || (v.tv_sec == 0 && v.tv_nsec == 0) {
        crate::wait::warp::timer_in(id, clock::from_timespec(v));
        return;
    }
    // SAFETY: per the contract.
    let clk = unsafe { crate::wait::posix_timer_clock(t) };
    let (Some(real), Some(clk)) = (translated, clk) else {
        return;
    };
    let target = clock::logical_of(clock::domain(clk), clock::from_timespec(v));
    let left = clock::from_timespec(&real.it_value) - crate::wait::real_now(clk);
    let mono = crate::wait::real_now(libc::CLOCK_MONOTONIC);
    crate::wait::warp::timer_armed(id, target, mono.saturating_add(left.max(1)));
}

/// The id [`crate::wait::warp::timer_armed`] keeps a process's `ITIMER_REAL` under (`alarm`
/// and `setitimer` arm the same timer); POSIX timer ids are small non-negative numbers.
const ITIMER_REAL_ID: i64 = 0xffff_ffff;

/// `ITIMER_REAL` was set to expire in `ns` of real time (0: disarmed): on the `--warp` board.
fn real_itimer_on_warp_board(ns: i64) {
    if crate::wait::warp_on() {
        crate::wait::warp::timer_in(ITIMER_REAL_ID, ns);
    }
}

hook! {
    /// `alarm(2)`: a watchdog in one process must not be warped past by another's wait.
    ///
    /// # Safety
    /// As `alarm(2)`.
    fn alarm(secs: libc::c_uint) -> libc::c_uint;
    fid = Alarm;
    |real| {
        let r = real(secs);
        real_itimer_on_warp_board(i64::from(secs) * 1_000_000_000);
        r
    }
}

hook! {
    /// `setitimer(2)`: `ITIMER_REAL` goes on the `--warp` board (see [`alarm`]).
    ///
    /// # Safety
    /// As `setitimer(2)`.
    fn setitimer(which: c_int, new: *const libc::itimerval, old: *mut libc::itimerval) -> c_int;
    fid = Setitimer;
    |real| {
        let r = real(which, new, old);
        if r == 0 && which == libc::ITIMER_REAL && !new.is_null() {
            // SAFETY: non-null and valid for reads per the contract.
            let v = unsafe { (*new).it_value };
            let ns = v
                .tv_sec
                .saturating_mul(1_000_000_000)
                .saturating_add(v.tv_usec.saturating_mul(1000));
            real_itimer_on_warp_board(ns);
        }
        r
    }
}
