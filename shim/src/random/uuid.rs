//! libuuid's time-based uuids (`uuid_generate_time`, `uuid_generate_time_safe`: `uuidgen -t`,
//! Python's `uuid.uuid1()` and `uuid.getnode()`), made here while `time` and `random` are
//! sealed.
//!
//! Why: libuuid keeps the last timestamp and clock sequence it gave in a machine-wide file
//! (`/var/lib/libuuid/clock.txt`, or the `uuidd` daemon's memory). A sealed run's clock starts
//! at the same epoch every time, so each run found its own time (or a later, real one) already
//! there and bumped the clock sequence or the adjustment: every run differed from the one
//! before, and the node was the machine's MAC address, so a golden did not travel either.
//!
//! Here a uuid is version 1 as RFC 4122 lays it out, from:
//! * **the timestamp**: one sealed `CLOCK_REALTIME` read in 100 ns units since 1582-10-15,
//!   strictly increasing within the process (a read that is not later than the last uuid's
//!   takes the next unit, as libuuid's adjustment does);
//! * **the clock sequence**: 14 bits from the seed and the process's virtual pid, so two
//!   processes of a run that read the same clock still differ (libuuid shares one sequence
//!   through its file);
//! * **the node**: 48 bits from the seed with the multicast bit set, one for the whole run,
//!   as libuuid makes it on a machine without a network card.
//!
//! A process forked after its parent made uuids starts its own sequence (its pid changed).
//! With `time` or `random` unsealed, libuuid's own functions answer.

#![cfg_attr(test, allow(dead_code))]

use core::sync::atomic::{AtomicI32, AtomicU64, Ordering::*};

use seal_abi::{flags, mix64};

use crate::core::config;

/// 100 ns units from 1582-10-15 (the Gregorian reform, uuid's epoch) to 1970-01-01.
const GREGORIAN_OFFSET: u64 = 0x01B2_1DD2_1381_4000;

/// The last timestamp this process put in a uuid (0: none yet).
static LAST: AtomicU64 = AtomicU64::new(0);
/// The virtual pid [`LAST`] belongs to: a fork child starts afresh.
static OWNER: AtomicI32 = AtomicI32::new(0);

/// Whether uuids are made here: both families they come from are sealed.
fn sealed() -> bool {
    config::sealed(flags::TIME) && config::sealed(flags::RANDOM)
}

/// The next timestamp after `last` for a clock reading `now` (both in 100 ns units).
pub fn next_stamp(last: u64, now: u64) -> u64 {
    if now > last {
        now
    } else {
        last.wrapping_add(1)
    }
}

/// The 16 bytes of a version 1, variant 1 uuid.
pub fn pack(stamp: u64, clock_seq: u16, node: u64) -> [u8; 16] {
    let mut u = [0u8; 16];
    u[0..4].copy_from_slice(&(stamp as u32).to_be_bytes());
    u[4..6].copy_from_slice(&((stamp >> 32) as u16).to_be_bytes());
    u[6..8].copy_from_slice(&((((stamp >> 48) as u16) & 0x0FFF) | 0x1000).to_be_bytes());
    u[8..10].copy_from_slice(&((clock_seq & 0x3FFF) | 0x8000).to_be_bytes());
    u[10..16].copy_from_slice(&node.to_be_bytes()[2..8]);
    u
}

/// The run's node: 48 bits from the seed, multicast bit (the first byte's lowest) set.
pub fn node_of(seed: u64) -> u64 {
    (mix64(seed ^ 0x7575_6964_6e6f_6465) & 0xFFFF_FFFF_FFFF) | (1 << 40)
}

/// A process's clock sequence: from the seed and its virtual pid.
pub fn clock_seq_of(seed: u64, vpid: i32) -> u16 {
    (mix64(seed ^ 0x7575_6964_7365_7121).wrapping_add(vpid as u32 as u64) & 0x3FFF) as u16
}

/// One sealed time-based uuid into `out`.
fn generate(out: &mut [u8; 16]) {
    let vpid = crate::process::vpid::current();
    if OWNER.load(Acquire) != vpid {
        // First uuid of this process (or of a fork child): no timestamp of its own yet.
        LAST.store(0, Relaxed);
        OWNER.store(vpid, Release);
    }
    let ns = crate::clock::realtime_ns().max(0) as u64;
    let now = (ns / 100).wrapping_add(GREGORIAN_OFFSET);
    let mut last = LAST.load(Relaxed);
    let stamp = loop {
        let next = next_stamp(last, now);
        match LAST.compare_exchange_weak(last, next, AcqRel, Relaxed) {
            Ok(_) => break next,
            Err(seen) => last = seen,
        }
    };
    let seed = config::SEED.load(Relaxed);
    *out = pack(stamp, clock_seq_of(seed, vpid), node_of(seed));
}

/// The exported entry points (not in unit tests, whose process is not sealed).
#[cfg(not(test))]
mod hooks {
    use super::*;
    use crate::hook;

    hook! {
        /// # Safety
        /// As libuuid's `uuid_generate_time(3)`: `out` is writable for 16 bytes.
        fn uuid_generate_time(out: *mut [u8; 16]) -> ();
        fid = UuidGenerateTime;
        |real| if sealed() && !out.is_null() {
            // SAFETY: the caller's 16-byte uuid_t.
            generate(unsafe { &mut *out })
        } else {
            real(out)
        }
    }

    hook! {
        /// # Safety
        /// As libuuid's `uuid_generate_time_safe(3)`: `out` is writable for 16 bytes. Returns 0
        /// (made safely: unique within the run) when sealed.
        fn uuid_generate_time_safe(out: *mut [u8; 16]) -> libc::c_int;
        fid = UuidGenerateTime;
        |real| if sealed() && !out.is_null() {
            // SAFETY: the caller's 16-byte uuid_t.
            generate(unsafe { &mut *out });
            0
        } else {
            real(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uuid_is_version_1_variant_1_with_its_fields_in_place() {
        // 2026-01-01T00:00:00Z as uuid time, as `uuidgen -t` lays it out.
        let stamp = 1_767_225_600u64 * 10_000_000 + GREGORIAN_OFFSET;
        let u = pack(stamp, 0x1234, 0x0102_0304_0506);
        let hex: String = u.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(&hex[12..13], "1", "version 1: {hex}");
        assert_eq!(&hex[16..20], "9234", "variant and 14-bit sequence: {hex}");
        assert_eq!(&hex[20..], "010203040506");
        // Time fields: low 32 bits first, then the middle 16, then the top 12.
        assert_eq!(
            u32::from_be_bytes(u[0..4].try_into().unwrap()),
            stamp as u32
        );
        assert_eq!(
            u16::from_be_bytes(u[4..6].try_into().unwrap()),
            (stamp >> 32) as u16
        );
        assert_eq!(
            u16::from_be_bytes(u[6..8].try_into().unwrap()) & 0x0FFF,
            (stamp >> 48) as u16
        );
    }

    #[test]
    fn timestamps_only_go_up() {
        assert_eq!(next_stamp(0, 5), 5);
        assert_eq!(next_stamp(5, 9), 9);
        assert_eq!(next_stamp(9, 9), 10);
        assert_eq!(next_stamp(10, 3), 11);
    }

    #[test]
    fn the_node_is_multicast_and_the_sequence_follows_the_pid() {
        for seed in [0u64, 1, 7, u64::MAX] {
            let n = node_of(seed);
            assert_eq!(n >> 48, 0);
            assert_eq!((n >> 40) & 1, 1, "multicast bit");
            assert_ne!(clock_seq_of(seed, 1000), clock_seq_of(seed, 1001));
            assert!(clock_seq_of(seed, 1000) <= 0x3FFF);
        }
        assert_ne!(node_of(0), node_of(1));
    }
}
