//! Timers armed with an absolute (`*_ABSTIME`) deadline: translated to the real clock.

use libc::{c_int, itimerspec};
use seal_abi::{flags, Fid, NO_DETAIL};

use crate::wait::{posix_timer_clock, translate_itimer};
use crate::{census, clock, config, hook};

/// Counts an ABSTIME timer's arming and translates its deadline: `Some(translated)`, or `None`
/// when the call is to go through untouched (relative, not sealed, or the timer's clock
/// unknown, which is recorded: its deadline then reaches the kernel untranslated and the
/// launcher warns).
///
/// # Safety
/// `new` null or valid for reads.
#[inline(always)]
unsafe fn abstime(
    fid: Fid,
    abs: bool,
    new: *const itimerspec,
    clock_of: impl FnOnce() -> Option<libc::clockid_t>,
    unknown: &[u8],
    ra: u64,
) -> Option<itimerspec> {
    if !abs || new.is_null() || !config::sealed(flags::WAIT) {
        census::count(fid, NO_DETAIL, ra);
        return None;
    }
    let Some(clk) = clock_of() else {
        census::count(fid, NO_DETAIL, ra);
        census::record_unsealed(seal_abi::unsealed::UNSUPPORTED_CALL, unknown);
        return None;
    };
    census::count(fid, clock::detail(clk), ra);
    // SAFETY: new non-null and valid per the contract.
    Some(translate_itimer(clk, unsafe { &*new }))
}

hook! {
    /// # Safety
    /// As `timerfd_settime(2)`.
    fn timerfd_settime(fd: c_int, fl: c_int, new: *const itimerspec, old: *mut itimerspec) -> c_int;
    caller = ra;
    |real| {
        // SAFETY: forwarded contract.
        let its = unsafe {
            abstime(
                Fid::TimerfdSettime,
                fl & libc::TFD_TIMER_ABSTIME != 0,
                new,
                || crate::wait::timerfd_clock(fd),
                b"timerfd_settime: clock of the timerfd unknown, ABSTIME deadline not translated",
                ra,
            )
        };
        match its {
            Some(its) => real(fd, fl, &its, old),
            None => real(fd, fl, new, old),
        }
    }
}

hook! {
    /// # Safety
    /// As `timer_settime(2)`; `t` from glibc's `timer_create`.
    fn timer_settime(t: libc::timer_t, fl: c_int, new: *const itimerspec, old: *mut itimerspec) -> c_int;
    caller = ra;
    |real| {
        // SAFETY: forwarded contract; t came from timer_create per the contract.
        let its = unsafe {
            abstime(
                Fid::TimerSettime,
                fl & libc::TIMER_ABSTIME != 0,
                new,
                || posix_timer_clock(t),
                b"timer_settime: clock of the timer unknown, ABSTIME deadline not translated",
                ra,
            )
        };
        match its {
            Some(its) => real(t, fl, &its, old),
            None => real(t, fl, new, old),
        }
    }
}
