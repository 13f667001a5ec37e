//! The common sealed clock read, in a few dozen instructions.
//!
//! A sealed `clock_gettime(CLOCK_REALTIME)`, `gettimeofday` or `time` with nothing unusual
//! going on (no `--rate` or `--spin-after`, no language runtime whose bookkeeping reads must
//! be told apart, no Python frames to capture, no thread glibc does not know of: the one
//! word [`config::SLOW`] says so) does what the general path would do, and nothing else:
//! the census count as one increment of the counter this thread remembers for the call site
//! (`census::bump_hot`), one tick of the thread's logical clock `L`, and `epoch + shift +
//! advance + L` in checked arithmetic. Anything else (a rare mode, an overflow, a negative
//! time, a new call site) goes to the general path, which stays the reference: the fast
//! path is only ever a shortcut to the same value and the same census.

use seal_abi::Fid;

use super::{read, value_at, Domain};
use crate::core::config::{self, slow};
use crate::core::{census, thread, world};

/// Hot sites ([`crate::core::thread::HotSite`] entries): one per entry point with a fast path.
pub const SITE_CLOCK_GETTIME: usize = 0;
pub const SITE_GETTIMEOFDAY: usize = 1;
pub const SITE_TIME: usize = 2;
/// The sealed `getrandom` (`crate::random`).
pub const SITE_GETRANDOM: usize = 3;
pub const SITE_CLOCK_MONOTONIC: usize = 4;
const _: () = assert!(SITE_CLOCK_MONOTONIC < thread::HOT_SITES);

/// One sealed read of `CLOCK_REALTIME`, counted in the census as `fid` with `detail` from
/// `caller`, after which `L` has advanced one tick: `put` turns the nanoseconds into what the
/// hook returns (and stores). `general` is the whole general path, taken (and nothing done
/// here) when a rare mode holds. Every way off the fast path is a cold call that finishes
/// the call (so no value of the hook lives across a call, and the hook saves no register).
#[inline(always)]
pub fn realtime<const SITE: usize, R>(
    fid: Fid,
    detail: u8,
    caller: u64,
    put: impl FnOnce(i64) -> R,
    general: impl FnOnce() -> R,
) -> R {
    counted::<SITE, R, _>(
        fid,
        detail,
        caller,
        Domain::Realtime(0),
        put,
        general,
        |hot, put| {
            let l = hot.read_and_tick();
            if l > thread::TICK_GUARD {
                return cold(move || put(saturated(thread::saturate_after(l))));
            }
            let (shift, advance) = world::realtime_offsets();
            match hot
                .epoch()
                .checked_add(shift)
                .and_then(|v| v.checked_add(advance))
                .and_then(|v| v.checked_add(l))
            {
                Some(ns) if ns >= 0 => put(ns),
                _ => cold(move || put(saturated(l))),
            }
        },
    )
}

/// [`realtime`] for `CLOCK_MONOTONIC`: `MONO_BASE + advance + L + mono`, after which the
/// thread's `mono` has advanced one tick (the wall clock does not move).
#[inline(always)]
pub fn monotonic<const SITE: usize, R>(
    fid: Fid,
    detail: u8,
    caller: u64,
    put: impl FnOnce(i64) -> R,
    general: impl FnOnce() -> R,
) -> R {
    counted::<SITE, R, _>(
        fid,
        detail,
        caller,
        Domain::Monotonic,
        put,
        general,
        |hot, put| {
            let (l, m) = hot.mono_read_and_tick();
            let tick = hot.tick();
            if m > thread::TICK_GUARD {
                return cold(move || put(mono_saturated(l, thread::saturate_mono_after(m), tick)));
            }
            let (_, advance) = world::realtime_offsets();
            match super::MONO_BASE_NS
                .checked_add(advance)
                .and_then(|v| v.checked_add(l))
                .and_then(|v| v.checked_add(m))
                .and_then(|v| v.checked_add(tick))
            {
                Some(ns) if ns >= 0 => put(ns),
                _ => cold(move || put(mono_saturated(l, m, tick))),
            }
        },
    )
}

/// What both fast reads share: the general path when a rare mode holds; the census count,
/// by the thread's entry for the call site (or, for a caller it does not remember, the
/// general count and the general read of `domain`, out of line); then `value`, the read.
#[inline(always)]
fn counted<const SITE: usize, R, P: FnOnce(i64) -> R>(
    fid: Fid,
    detail: u8,
    caller: u64,
    domain: Domain,
    put: P,
    general: impl FnOnce() -> R,
    value: impl FnOnce(thread::Hot, P) -> R,
) -> R {
    if !config::fast(slow::CLOCK_READ) {
        return general();
    }
    let hot = thread::hot();
    let (remembered, counter) = hot.entry::<SITE>();
    if remembered != caller {
        return cold(move || {
            census::learn(SITE, fid, detail, caller, slow::CLOCK_READ);
            // Counted; the general read (the same value the fast one gives when its
            // conditions hold).
            put(read(domain))
        });
    }
    // SAFETY: the entry matched its caller.
    unsafe { census::bump_hot(counter) };
    value(hot, put)
}

/// What the general monotonic read returns for `L = l` and `mono` ticked from `m`,
/// saturating (`monotonic_base() + mono_read_and_tick()`).
fn mono_saturated(l: i64, m: i64, tick: i64) -> i64 {
    super::monotonic_base().saturating_add(l.saturating_add(m).saturating_add(tick))
}

/// Runs `f` out of line: a way off the fast path.
#[cold]
#[inline(never)]
fn cold<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// `CLOCK_REALTIME` when the logical clock reads `l`, saturating ([`value_at`]).
fn saturated(l: i64) -> i64 {
    value_at(Domain::Realtime(0), l)
}

/// `ns` as a `timespec`; the division is unsigned for the usual (non-negative) time.
#[inline(always)]
pub fn timespec(ns: i64) -> libc::timespec {
    if ns < 0 {
        return negative_timespec(ns);
    }
    let u = ns as u64;
    libc::timespec {
        tv_sec: (u / 1_000_000_000) as i64,
        tv_nsec: (u % 1_000_000_000) as i64,
    }
}

#[cold]
#[inline(never)]
fn negative_timespec(ns: i64) -> libc::timespec {
    super::to_timespec(ns)
}

/// `ns` as a `timeval` (microseconds, rounded down as the general path does).
#[inline(always)]
pub fn timeval(ns: i64) -> libc::timeval {
    let ts = timespec(ns);
    libc::timeval {
        tv_sec: ts.tv_sec,
        tv_usec: ts.tv_nsec / 1000,
    }
}

/// `ns` in whole seconds, rounded down.
#[inline(always)]
pub fn seconds(ns: i64) -> i64 {
    if ns < 0 {
        return ns.div_euclid(1_000_000_000);
    }
    ((ns as u64) / 1_000_000_000) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_match_the_general_path() {
        for ns in [
            0,
            1,
            999_999_999,
            1_000_000_000,
            1_767_225_600_000_001_000,
            i64::MAX,
            -1,
            -1_000_000_001,
            i64::MIN,
        ] {
            let (a, b) = (timespec(ns), super::super::to_timespec(ns));
            assert_eq!((a.tv_sec, a.tv_nsec), (b.tv_sec, b.tv_nsec), "{ns}");
            assert_eq!(seconds(ns), ns.div_euclid(1_000_000_000), "{ns}");
            let tv = timeval(ns);
            assert_eq!(
                (tv.tv_sec, tv.tv_usec),
                (
                    ns.div_euclid(1_000_000_000),
                    ns.rem_euclid(1_000_000_000) / 1000
                ),
                "{ns}"
            );
        }
    }
}
