//! Clocks: reads of the thread's logical clock `L`, which waits move (docs/design.md,
//! "Logical time").
//!
//! Realtime-like clocks read `epoch + L` and do not move it (until a stretch without waits
//! turns into a spin: `LIBSEAL_SPIN_AFTER`); monotonic-like clocks read `MONO_BASE + L +
//! mono` and advance the thread's `mono` one tick; CPU-time clocks read the ticks of the
//! thread's reads. Hooks (the `extern "C"` entry points) are in `hooks.rs`; this file is the logic,
//! unit-tested without preloading. Timed waits and sleeps live in `crate::wait`.

pub mod fast;
#[cfg(not(test))]
pub(crate) mod hooks;
pub mod set;
#[cfg(not(test))]
pub(crate) mod setters;

use seal_abi::NO_DETAIL;

use crate::core::{config, thread};

/// What a sealed `CLOCK_MONOTONIC` reads at `L = 0`: one day of "uptime".
pub const MONO_BASE_NS: i64 = 86_400 * 1_000_000_000;
/// `CLOCK_TAI` runs this far ahead of `CLOCK_REALTIME` (the current leap-second offset).
pub const TAI_OFFSET_NS: i64 = 37 * 1_000_000_000;

/// How a clock id maps onto the logical clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Domain {
    /// `epoch + L + offset`
    Realtime(i64),
    /// `MONO_BASE + L`
    Monotonic,
    /// `L` (process / thread CPU time, and CPU clocks of other threads)
    Cputime,
    /// Not sealed (fd-based dynamic clocks, unknown ids): ask the kernel.
    PassThrough,
}

pub fn domain(clock: libc::clockid_t) -> Domain {
    match clock {
        libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE | libc::CLOCK_REALTIME_ALARM => {
            Domain::Realtime(0)
        }
        libc::CLOCK_TAI => Domain::Realtime(TAI_OFFSET_NS),
        libc::CLOCK_MONOTONIC
        | libc::CLOCK_MONOTONIC_RAW
        | libc::CLOCK_MONOTONIC_COARSE
        | libc::CLOCK_BOOTTIME
        | libc::CLOCK_BOOTTIME_ALARM => Domain::Monotonic,
        libc::CLOCK_PROCESS_CPUTIME_ID | libc::CLOCK_THREAD_CPUTIME_ID => Domain::Cputime,
        // Negative ids encode CPU clocks of other processes/threads (low bits 0..2) or, with low
        // bits 3 (CLOCKFD), a dynamic clock behind a file descriptor.
        c if c < 0 && (c & 7) != 3 => Domain::Cputime,
        _ => Domain::PassThrough,
    }
}

/// The census detail byte for a clock id.
pub const fn detail(clock: libc::clockid_t) -> u8 {
    match clock {
        0..=11 => clock as u8,
        c if c < 0 => 0xfe,
        _ => NO_DETAIL,
    }
}

/// What `CLOCK_REALTIME` reads at `L = 0`: the epoch, moved by whatever the run's setters did
/// (`clock_settime`, `settimeofday`, …; see `crate::core::world`).
#[inline(always)]
pub fn realtime_base() -> i64 {
    config::epoch_ns()
        .saturating_add(crate::core::world::realtime_shift())
        .saturating_add(crate::core::world::advance())
}

/// What `CLOCK_MONOTONIC` reads at `L = 0`: [`MONO_BASE_NS`], moved forward by `seal time
/// advance`.
#[inline(always)]
pub fn monotonic_base() -> i64 {
    MONO_BASE_NS.saturating_add(crate::core::world::advance())
}

/// The value of `clock` in the given domain when the logical clock reads `l`. Saturating: a
/// clock at its cap reads `i64::MAX` nanoseconds, never a wrapped negative time.
#[inline(always)]
pub fn value_at(domain: Domain, l: i64) -> i64 {
    match domain {
        Domain::Realtime(off) => realtime_base().saturating_add(l).saturating_add(off),
        Domain::Monotonic => monotonic_base()
            .saturating_add(l)
            .saturating_add(thread::mono()),
        Domain::Cputime | Domain::PassThrough => l,
    }
}

/// Inverse of [`value_at`]: the logical clock at which `clock` reads `value` (for deadlines).
#[inline]
pub fn logical_of(domain: Domain, value: i64) -> i64 {
    match domain {
        Domain::Realtime(off) => value.saturating_sub(realtime_base()).saturating_sub(off),
        Domain::Monotonic => value
            .saturating_sub(monotonic_base())
            .saturating_sub(thread::mono()),
        Domain::Cputime | Domain::PassThrough => value,
    }
}

#[inline(always)]
pub fn to_timespec(ns: i64) -> libc::timespec {
    libc::timespec {
        tv_sec: ns.div_euclid(1_000_000_000),
        tv_nsec: ns.rem_euclid(1_000_000_000),
    }
}

#[inline(always)]
pub fn from_timespec(ts: &libc::timespec) -> i64 {
    ts.tv_sec
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec)
}

/// One sealed read of `domain`: the value, after which `L` has advanced one tick.
#[inline(always)]
pub fn read(domain: Domain) -> i64 {
    match domain {
        Domain::Cputime => cpu_read(),
        Domain::Monotonic if config::RATE_PPM.load(core::sync::atomic::Ordering::Relaxed) == 0 => {
            monotonic_base().saturating_add(thread::mono_read_and_tick())
        }
        _ => value_at(domain, tick_read()),
    }
}

/// One sealed read of a CPU-time clock: the thread's CPU clock, which counts its reads and
/// never its waits (a `process_time()` taken across a sleep grows by the reads alone).
#[inline(always)]
pub fn cpu_read() -> i64 {
    if config::RATE_PPM.load(core::sync::atomic::Ordering::Relaxed) != 0 {
        // Under --rate, `L` follows real time: so does the CPU clock, waits left out.
        tick_read();
        return thread::cpu_peek();
    }
    thread::cpu_read_and_tick()
}

/// The logical clock a read returns (after which it has advanced one tick); under `--rate`,
/// caught up with real time first.
#[inline(always)]
pub fn tick_read() -> i64 {
    let ppm = config::RATE_PPM.load(core::sync::atomic::Ordering::Relaxed);
    if ppm == 0 {
        return thread::read_and_tick();
    }
    // Under --rate, time is the real time's: a read moves the clock by one nanosecond, not a
    // tick, so a loop that reads a million times does not run ahead of real time.
    thread::advance_to(rate_elapsed(ppm));
    let l = thread::peek();
    thread::advance_to(l.saturating_add(1));
    l
}

/// The thread's logical clock now (for deadlines), without a tick.
#[inline]
pub fn now_logical() -> i64 {
    follow_real_time();
    thread::peek()
}

/// Under `--rate`, moves the thread's clock up to the real time since launch times the rate
/// (never back): time passes with work. Without it (the default), nothing.
#[inline(always)]
fn follow_real_time() {
    let ppm = config::RATE_PPM.load(core::sync::atomic::Ordering::Relaxed);
    if ppm != 0 {
        thread::advance_to(rate_elapsed(ppm));
    }
}

#[cold]
fn rate_elapsed(ppm: u64) -> i64 {
    let ts = if crate::cpu::tsc_trapped() {
        // The vDSO's rdtsc would trap.
        crate::core::sys::clock_gettime(libc::CLOCK_MONOTONIC)
    } else {
        let real =
            crate::real!(clock_gettime: fn(libc::clockid_t, *mut libc::timespec) -> libc::c_int);
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid timespec to fill.
        unsafe { real(libc::CLOCK_MONOTONIC, &mut ts) };
        ts
    };
    let start = config::REAL_START.load(core::sync::atomic::Ordering::Relaxed);
    let real_elapsed = from_timespec(&ts).saturating_sub(start).max(0);
    scale(real_elapsed, ppm as i128, 1_000_000)
}

/// `v * num / den`, saturating.
fn scale(v: i64, num: i128, den: i128) -> i64 {
    (v as i128 * num / den).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// How long, in real time, a wait of `logical` nanoseconds takes (shorter under `--rate` > 1).
#[inline]
pub fn real_span(logical: i64) -> i64 {
    match config::RATE_PPM.load(core::sync::atomic::Ordering::Relaxed) {
        0 => logical,
        ppm => scale(logical, 1_000_000, ppm as i128),
    }
}

/// The logical time a real wait of `real` nanoseconds stands for (the inverse of
/// [`real_span`]).
#[inline]
pub fn logical_span(real: i64) -> i64 {
    match config::RATE_PPM.load(core::sync::atomic::Ordering::Relaxed) {
        0 => real,
        ppm => scale(real, ppm as i128, 1_000_000),
    }
}

/// The sealed CPU times of a `getrusage`/`wait4` answer: `(user, system)` in nanoseconds.
/// The caller's own usage is its logical clock (like `CLOCK_PROCESS_CPUTIME_ID`), all of it
/// user time; children's usage is zero (like `times()`'s `tms_cutime`), so `time cmd` and
/// `times` in a shell print the same every run.
pub fn rusage_times(who: i32, l: i64) -> (i64, i64) {
    if who == libc::RUSAGE_SELF || who == libc::RUSAGE_THREAD {
        (l, 0)
    } else {
        (0, 0)
    }
}

/// A nanosecond count as a `timeval`.
pub fn to_timeval(ns: i64) -> libc::timeval {
    libc::timeval {
        tv_sec: ns.div_euclid(1_000_000_000),
        tv_usec: ns.rem_euclid(1_000_000_000) / 1000,
    }
}

/// Replaces a resource usage the kernel filled: CPU times from [`rusage_times`], every other
/// counter (max RSS, page faults, context switches, block I/O) zero. They differ every run,
/// and RNGs mix the whole struct into their pools (libgcrypt's fast poll does).
///
/// # Safety
/// `usage` must be valid for writes.
pub unsafe fn seal_rusage(who: libc::c_int, l: i64, usage: *mut libc::rusage) {
    let (user, system) = rusage_times(who, l);
    // SAFETY: caller's contract; rusage is plain data, all-zero is a valid value.
    unsafe {
        *usage = core::mem::zeroed();
        (*usage).ru_utime = to_timeval(user);
        (*usage).ru_stime = to_timeval(system);
    }
}

/// Realtime now, in nanoseconds, as one sealed read.
#[inline(always)]
pub fn realtime_ns() -> i64 {
    read(Domain::Realtime(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rusage_cpu_times_follow_the_logical_clock() {
        assert_eq!(rusage_times(libc::RUSAGE_SELF, 1_500_000), (1_500_000, 0));
        assert_eq!(rusage_times(libc::RUSAGE_THREAD, 7), (7, 0));
        assert_eq!(rusage_times(libc::RUSAGE_CHILDREN, 99), (0, 0));
        let tv = to_timeval(2_345_678_999);
        assert_eq!((tv.tv_sec, tv.tv_usec), (2, 345_678));
        // SAFETY: rusage is plain data.
        let mut u: libc::rusage = unsafe { core::mem::zeroed() };
        u.ru_maxrss = 5;
        u.ru_stime.tv_sec = 3;
        // SAFETY: u is a local rusage.
        unsafe { seal_rusage(libc::RUSAGE_SELF, 1_000_000_000, &mut u) };
        assert_eq!(
            (u.ru_utime.tv_sec, u.ru_stime.tv_sec, u.ru_maxrss),
            (1, 0, 0)
        );
    }

    #[test]
    fn domains() {
        assert_eq!(domain(libc::CLOCK_REALTIME), Domain::Realtime(0));
        assert_eq!(domain(libc::CLOCK_BOOTTIME), Domain::Monotonic);
        assert_eq!(domain(libc::CLOCK_THREAD_CPUTIME_ID), Domain::Cputime);
        // pthread_getcpuclockid-style id (per-thread sched clock) and an fd clock.
        assert_eq!(domain(((!1234) << 3) | 6), Domain::Cputime);
        assert_eq!(domain(((!3) << 3) | 3), Domain::PassThrough);
    }

    #[test]
    fn value_and_logical_are_inverse() {
        for d in [
            Domain::Realtime(0),
            Domain::Realtime(TAI_OFFSET_NS),
            Domain::Monotonic,
            Domain::Cputime,
        ] {
            assert_eq!(logical_of(d, value_at(d, 123_456_789)), 123_456_789);
        }
    }

    #[test]
    fn values_saturate_at_the_cap() {
        assert_eq!(value_at(Domain::Monotonic, i64::MAX - 5), i64::MAX);
        assert_eq!(
            value_at(Domain::Realtime(TAI_OFFSET_NS), i64::MAX),
            i64::MAX
        );
        assert_eq!(value_at(Domain::Cputime, i64::MAX), i64::MAX);
    }

    #[test]
    fn timespec_round_trip() {
        let ts = to_timespec(-1);
        assert_eq!((ts.tv_sec, ts.tv_nsec), (-1, 999_999_999));
        assert_eq!(from_timespec(&to_timespec(5_000_000_123)), 5_000_000_123);
    }
}
