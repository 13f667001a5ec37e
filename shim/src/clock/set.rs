//! Clock setters act on the sealed world, never on the machine's clock.
//!
//! `clock_settime(CLOCK_REALTIME)`, `settimeofday`, `stime`, `adjtime`, and
//! `adjtimex`/`ntp_adjtime`/`clock_adjtime` calls that change the clock move the run's realtime
//! shift (`crate::core::world`): every process of the run reads the new time from then on, as they
//! would after a real `date -s`, and the kernel's clock is untouched. Argument checks and the
//! `CAP_SYS_TIME` check follow the kernel's order, so a sealed program gets the same errors
//! it would get bare. Read-only `adjtimex` calls reach the kernel (they change nothing) and
//! come back with the sealed time in their `time` field. Monotonic clocks are not settable,
//! sealed or not.

use crate::core::world;

use super::{from_timespec, realtime_base};
use crate::core::thread;

/// `ADJ_SETOFFSET`: add `time` to the clock.
pub const ADJ_SETOFFSET: u32 = 0x0100;
/// `ADJ_NANO`: `time.tv_usec` holds nanoseconds.
pub const ADJ_NANO: u32 = 0x2000;
/// `ADJ_OFFSET_SS_READ`: glibc's `adjtime(NULL, &old)` query.
pub const ADJ_OFFSET_SS_READ: u32 = 0xa001;
/// `STA_NANO`: the kernel reports `time.tv_usec` in nanoseconds.
pub const STA_NANO: i32 = 0x2000;
/// Largest settable second count (the kernel's `KTIME_SEC_MAX`).
const SEC_MAX: i64 = i64::MAX / 1_000_000_000;

/// Makes the calling thread's next realtime read return `value_ns`, and every other thread
/// and process of the run follow by the same amount.
pub fn set_realtime(value_ns: i64) {
    let now = realtime_base().wrapping_add(thread::peek());
    world::shift_realtime_by(value_ns.saturating_sub(now));
    // Setting the clock is an event others learn of (a parent that reaps the setter, a
    // reader of its output): it carries the setter's clock, so whoever is causally after it
    // reads at least the time it set (docs/design.md, "Causality").
    thread::mark_causal();
    crate::process::vpid::note_waited();
}

/// `clock_settime(clock, ts)` on the sealed world: `Err(errno)` as the kernel would fail.
pub fn settime(clock: libc::clockid_t, ts: Option<&libc::timespec>) -> Result<(), i32> {
    let ts = ts.ok_or(libc::EFAULT)?;
    if clock == seal_abi::CLOCK_SEAL_ADVANCE || clock == seal_abi::CLOCK_SEAL_SET {
        return control(clock, ts);
    }
    if clock != libc::CLOCK_REALTIME {
        // The kernel lets no other clock be set: CPU clocks say EPERM, the rest EINVAL.
        return Err(match super::domain(clock) {
            super::Domain::Cputime => libc::EPERM,
            _ => libc::EINVAL,
        });
    }
    if !(0..1_000_000_000).contains(&ts.tv_nsec) || !(0..=SEC_MAX).contains(&ts.tv_sec) {
        return Err(libc::EINVAL);
    }
    if !world::may_set_time() {
        return Err(libc::EPERM);
    }
    set_realtime(from_timespec(ts));
    Ok(())
}

/// seal's own clock ids (`seal time advance`/`set`, and programs that use the protocol
/// directly): time under the user's control, so no privilege is asked for.
fn control(clock: libc::clockid_t, ts: &libc::timespec) -> Result<(), i32> {
    if !(0..1_000_000_000).contains(&ts.tv_nsec) || !(0..=SEC_MAX).contains(&ts.tv_sec) {
        return Err(libc::EINVAL);
    }
    let ns = from_timespec(ts);
    if clock == seal_abi::CLOCK_SEAL_ADVANCE {
        world::advance_by(ns);
    } else {
        set_realtime(ns);
    }
    Ok(())
}

/// `settimeofday(tv, tz)` on the sealed world. The time zone argument changes nothing (the
/// kernel's `sys_tz` is machine-wide; sealed programs see UTC).
pub fn settimeofday(tv: Option<&libc::timeval>) -> Result<(), i32> {
    if let Some(tv) = tv {
        if !(0..1_000_000).contains(&tv.tv_usec) || !(0..=SEC_MAX).contains(&tv.tv_sec) {
            return Err(libc::EINVAL);
        }
    }
    if !world::may_set_time() {
        return Err(libc::EPERM);
    }
    if let Some(tv) = tv {
        set_realtime(tv.tv_sec * 1_000_000_000 + tv.tv_usec * 1000);
    }
    Ok(())
}

/// `adjtime(delta, …)` on the sealed world: the correction is applied at once (the kernel
/// would slew it in over time), so nothing is ever pending.
pub fn adjtime(delta: Option<&libc::timeval>) -> Result<(), i32> {
    let Some(d) = delta else { return Ok(()) };
    let ns = (d.tv_sec as i128) * 1_000_000_000 + (d.tv_usec as i128) * 1000;
    // glibc refuses deltas whose microseconds do not fit a long (about ±2^63 µs / 1e6 s).
    if ns.unsigned_abs() > (i64::MAX as u128) {
        return Err(libc::EINVAL);
    }
    if !world::may_set_time() {
        return Err(libc::EPERM);
    }
    world::shift_realtime_by(ns as i64);
    Ok(())
}

/// Does an `adjtimex` with these `modes` only read?
pub fn adjtimex_reads_only(modes: u32) -> bool {
    modes == 0 || modes == ADJ_OFFSET_SS_READ
}

/// The clock change an `adjtimex` with these `modes` and `time` makes on the sealed world;
/// every other mode (frequency, status, offset slewing) is accepted and dropped.
pub fn adjtimex(modes: u32, time: &libc::timeval) -> Result<(), i32> {
    if modes & ADJ_SETOFFSET != 0 {
        let unit = if modes & ADJ_NANO != 0 { 1 } else { 1000 };
        if !(0..1_000_000_000 / unit).contains(&time.tv_usec) {
            return Err(libc::EINVAL);
        }
    }
    if !world::may_set_time() {
        return Err(libc::EPERM);
    }
    if modes & ADJ_SETOFFSET != 0 {
        let unit = if modes & ADJ_NANO != 0 { 1 } else { 1000 };
        world::shift_realtime_by(
            time.tv_sec
                .saturating_mul(1_000_000_000)
                .saturating_add(time.tv_usec * unit),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests that move this process's (local) sealed world take turns.
    static WORLD: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn ts(sec: i64, nsec: i64) -> libc::timespec {
        libc::timespec {
            tv_sec: sec,
            tv_nsec: nsec,
        }
    }

    #[test]
    fn only_the_realtime_clock_is_settable_and_bad_values_fail_first() {
        assert_eq!(
            settime(libc::CLOCK_MONOTONIC, Some(&ts(1, 0))),
            Err(libc::EINVAL)
        );
        assert_eq!(
            settime(libc::CLOCK_PROCESS_CPUTIME_ID, Some(&ts(1, 0))),
            Err(libc::EPERM)
        );
        assert_eq!(
            settime(libc::CLOCK_REALTIME, Some(&ts(1, 1_000_000_000))),
            Err(libc::EINVAL)
        );
        assert_eq!(
            settime(libc::CLOCK_REALTIME, Some(&ts(-1, 0))),
            Err(libc::EINVAL)
        );
        assert_eq!(settime(libc::CLOCK_REALTIME, None), Err(libc::EFAULT));
        let bad = libc::timeval {
            tv_sec: 0,
            tv_usec: 1_000_000,
        };
        assert_eq!(settimeofday(Some(&bad)), Err(libc::EINVAL));
        assert_eq!(adjtimex(ADJ_SETOFFSET, &bad), Err(libc::EINVAL));
    }

    #[test]
    fn read_only_adjtimex_modes() {
        assert!(adjtimex_reads_only(0));
        assert!(adjtimex_reads_only(ADJ_OFFSET_SS_READ));
        assert!(!adjtimex_reads_only(ADJ_SETOFFSET));
        assert!(!adjtimex_reads_only(0x0001));
    }

    #[test]
    fn setting_the_clock_moves_what_the_next_read_returns() {
        let _turn = WORLD.lock().unwrap();
        // Only where the test may set the clock (root): the change stays in this process's
        // local world (no run table is mapped in unit tests); the machine is never touched.
        if !world::may_set_time() {
            eprintln!("skipped: needs CAP_SYS_TIME for the sealed permission check");
            return;
        }
        let target = 1_900_000_000_123_456_789;
        settime(libc::CLOCK_REALTIME, Some(&ts(1_900_000_000, 123_456_789))).unwrap();
        assert_eq!(realtime_base() + thread::peek(), target);
        adjtime(Some(&libc::timeval {
            tv_sec: -1,
            tv_usec: 0,
        }))
        .unwrap();
        assert_eq!(realtime_base() + thread::peek(), target - 1_000_000_000);
        world::shift_realtime_by(-world::realtime_shift());
    }

    #[test]
    fn advancing_moves_realtime_and_monotonic_alike_without_privilege() {
        let _turn = WORLD.lock().unwrap();
        let (rt, mono) = (realtime_base(), super::super::monotonic_base());
        let day = ts(86_400, 0);
        settime(seal_abi::CLOCK_SEAL_ADVANCE, Some(&day)).unwrap();
        assert_eq!(realtime_base() - rt, 86_400_000_000_000);
        assert_eq!(super::super::monotonic_base() - mono, 86_400_000_000_000);
        assert_eq!(
            settime(seal_abi::CLOCK_SEAL_ADVANCE, Some(&ts(-1, 0))),
            Err(libc::EINVAL),
            "time only moves forward"
        );
        world::advance_by(-86_400_000_000_000);
    }
}
