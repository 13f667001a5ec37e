//! Where a sealed thread leaves its causal clock for whoever it wakes (docs/design.md,
//! "Causality"): [`Channel`]s for byte streams (run-wide, in the run table), [`ClockSlot`]s for
//! sync objects (process-private). A slot is a key (never 0) and the highest clock published
//! to it. Lock-free and allocation-free: a fixed table, linear
//! probing over a short window, `fetch_max` on the clock. A full window evicts its first slot
//! (that channel then carries nothing until published again: the rule degrades to the one
//! without causality, never to a wrong value for another key).

use core::sync::atomic::{AtomicI64, AtomicU64, Ordering::*};

use crate::keyed::{probe, Probe};

/// Slots probed for one key.
const WINDOW: usize = 16;

#[repr(C)]
pub struct ClockSlot {
    pub key: AtomicU64,
    pub clock: AtomicI64,
}

impl ClockSlot {
    pub const fn empty() -> ClockSlot {
        ClockSlot {
            key: AtomicU64::new(0),
            clock: AtomicI64::new(0),
        }
    }
}

/// A 64-bit mix of the parts of a key (never 0: 0 marks a free slot).
pub const fn key_of(kind: u64, a: u64, b: u64) -> u64 {
    let mut h = kind.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ a;
    h = (h ^ (h >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ b;
    h = (h ^ (h >> 29)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 32;
    if h == 0 || h == u64::MAX {
        1
    } else {
        h
    }
}

/// Raises the clock of `key` to at least `clock`.
pub fn publish(slots: &[ClockSlot], key: u64, clock: i64) {
    if slots.is_empty() || key == 0 {
        return;
    }
    let start = (key as usize) % slots.len();
    for i in 0..WINDOW.min(slots.len()) {
        let s = &slots[(start + i) % slots.len()];
        if probe(&s.key, key, true) == Probe::Mine {
            s.clock.fetch_max(clock, AcqRel);
            return;
        }
    }
    // The window is full: evict its first slot. A reader that raced the eviction re-checks
    // the key after reading the clock (see `lookup`).
    let s = &slots[start];
    s.key.store(0, Release);
    s.clock.store(clock, Release);
    s.key.store(key, Release);
}

/// The highest clock published to `key` (0 when none).
pub fn lookup(slots: &[ClockSlot], key: u64) -> i64 {
    if slots.is_empty() || key == 0 {
        return 0;
    }
    let start = (key as usize) % slots.len();
    for i in 0..WINDOW.min(slots.len()) {
        let s = &slots[(start + i) % slots.len()];
        let k = s.key.load(Acquire);
        if k == key {
            let c = s.clock.load(Acquire);
            return if s.key.load(Acquire) == key { c } else { 0 };
        }
        if k == 0 {
            return 0;
        }
    }
    0
}

/// Channels in the run table.
pub const CHANNELS: usize = 1024;
/// Clock records a channel keeps (the most recent changes of its writers' clocks).
pub const RECORDS: usize = 8;
/// An `at` being written.
const WRITING: u64 = u64::MAX;

/// A channel (a pipe, a connected socket's receiving end): the clocks its bytes carry.
/// Writers count the bytes they send and note, whenever theirs has risen, their clock with the
/// position of the first byte that carries it; readers count the bytes they take and adopt the
/// highest clock noted at or before the end of what they took. So a reader adopts the clock of
/// the bytes it read, not of whatever was written since: a slow reader of a chatty writer sees
/// what a fast one sees.
#[repr(C)]
pub struct Channel {
    pub key: AtomicU64,
    pub written: AtomicU64,
    pub read: AtomicU64,
    pub next: AtomicU64,
    pub at: [AtomicU64; RECORDS],
    pub clock: [AtomicI64; RECORDS],
}

impl Channel {
    pub const fn empty() -> Channel {
        Channel {
            key: AtomicU64::new(0),
            written: AtomicU64::new(0),
            read: AtomicU64::new(0),
            next: AtomicU64::new(0),
            at: [const { AtomicU64::new(0) }; RECORDS],
            clock: [const { AtomicI64::new(0) }; RECORDS],
        }
    }
}

/// The channel of `key`, claimed when `claim` (a writer); `None` when absent or when the
/// window is full of channels with bytes in flight (that channel then carries nothing: the
/// rule without causality).
///
/// Channels are never freed when their pipe or socket closes (no process knows it was the
/// last one holding it), so a long run fills the table: CPython's multiprocessing suite makes
/// thousands of pipes, and after about a thousand, new ones carried nothing. A writer whose
/// window is full takes over a *drained* channel in it (every byte written was read): what a
/// drained channel's records say was adopted by the bytes' readers already, so forgetting it
/// loses nothing; if that channel is still in use, its next write claims a slot of its own,
/// counting from 0 on both sides.
fn channel(chans: &[Channel], key: u64, claim: bool) -> Option<&Channel> {
    if chans.is_empty() || key == 0 {
        return None;
    }
    let start = (key as usize) % chans.len();
    for i in 0..WINDOW.min(chans.len()) {
        let c = &chans[(start + i) % chans.len()];
        match probe(&c.key, key, claim) {
            Probe::Mine => return Some(c),
            Probe::Absent => return None,
            Probe::Taken => {}
        }
    }
    if claim {
        for i in 0..WINDOW.min(chans.len()) {
            if let Some(c) = recycle(&chans[(start + i) % chans.len()], key) {
                return Some(c);
            }
        }
    }
    None
}

/// A key word no [`key_of`] gives: a channel being recycled.
const RECYCLING: u64 = u64::MAX;

/// Takes over `c` for `key` if it is drained (and not being recycled by someone else).
fn recycle(c: &Channel, key: u64) -> Option<&Channel> {
    let old = c.key.load(Acquire);
    if old == RECYCLING || c.read.load(Acquire) < c.written.load(Acquire) {
        return None;
    }
    c.key
        .compare_exchange(old, RECYCLING, AcqRel, Acquire)
        .ok()?;
    for i in 0..RECORDS {
        c.at[i].store(0, Release);
        c.clock[i].store(0, Release);
    }
    c.next.store(0, Release);
    c.read.store(0, Release);
    c.written.store(0, Release);
    c.key.store(key, Release);
    Some(c)
}

/// A writer with causal clock `w` is about to send `n` bytes on `key`. Returns the position
/// of its first byte (for [`unsend`]).
pub fn send(chans: &[Channel], key: u64, w: i64, n: u64) -> Option<u64> {
    let c = channel(chans, key, true)?;
    let pos = c.written.fetch_add(n, AcqRel);
    let last = c.next.load(Acquire);
    let newest = if last == 0 {
        0
    } else {
        c.clock[((last - 1) as usize) % RECORDS].load(Acquire)
    };
    if w > newest {
        let i = (c.next.fetch_add(1, AcqRel) as usize) % RECORDS;
        c.at[i].store(WRITING, Release);
        c.clock[i].store(w, Release);
        c.at[i].store(pos, Release);
    }
    Some(pos)
}

/// A send of `asked` bytes wrote only `done` (an error, a short write): the rest was never
/// sent.
pub fn unsend(chans: &[Channel], key: u64, asked: u64, done: u64) {
    if let Some(c) = channel(chans, key, false) {
        c.written.fetch_sub(asked.saturating_sub(done), AcqRel);
    }
}

/// A reader took `n` bytes (0: end of file) from `key`: the highest clock its bytes carry.
pub fn receive(chans: &[Channel], key: u64, n: u64) -> i64 {
    let Some(c) = channel(chans, key, false) else {
        return 0;
    };
    let end = c.read.fetch_add(n, AcqRel) + n;
    // End of file: everything written was read.
    let end = if n == 0 { u64::MAX - 1 } else { end };
    let mut best = 0;
    for i in 0..RECORDS {
        let at = c.at[i].load(Acquire);
        if at != WRITING && at < end {
            best = best.max(c.clock[i].load(Acquire));
        }
    }
    best
}

/// The clock the next unread byte of `key` carries (0 when none is known): what a reader
/// would adopt by reading one byte, without reading it.
pub fn peek(chans: &[Channel], key: u64) -> i64 {
    let Some(c) = channel(chans, key, false) else {
        return 0;
    };
    let next = c.read.load(Acquire);
    let mut best = 0;
    for i in 0..RECORDS {
        let at = c.at[i].load(Acquire);
        if at != WRITING && at <= next {
            best = best.max(c.clock[i].load(Acquire));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> [ClockSlot; 64] {
        [const { ClockSlot::empty() }; 64]
    }

    #[test]
    fn publish_raises_and_lookup_reads_the_maximum() {
        let t = table();
        let (a, b) = (key_of(1, 10, 20), key_of(1, 10, 21));
        assert_ne!(a, b);
        assert_eq!(lookup(&t, a), 0);
        publish(&t, a, 500);
        publish(&t, a, 300);
        publish(&t, b, 7);
        assert_eq!(lookup(&t, a), 500);
        assert_eq!(lookup(&t, b), 7);
        assert_eq!(lookup(&t, key_of(2, 10, 20)), 0);
    }

    #[test]
    fn a_full_window_evicts_instead_of_failing() {
        let t = table();
        // Keys that all start at slot 0 of a 64-slot table.
        let mut keys = [0u64; WINDOW + 1];
        for (i, k) in keys.iter_mut().enumerate() {
            *k = (i as u64 + 1) * 64;
        }
        for (i, &k) in keys.iter().enumerate() {
            publish(&t, k, i as i64 + 1);
        }
        let last = *keys.last().unwrap();
        assert_eq!(lookup(&t, last), WINDOW as i64 + 1);
        // The evicted key reads as unknown, never as another key's clock.
        assert_eq!(lookup(&t, keys[0]), 0);
        assert_eq!(lookup(&t, keys[1]), 2);
    }

    #[test]
    fn a_full_window_of_channels_recycles_a_drained_one() {
        let chans = [const { Channel::empty() }; 64];
        // Keys whose windows all start at channel 0.
        let mut keys = [0u64; WINDOW + 1];
        for (i, k) in keys.iter_mut().enumerate() {
            *k = (i as u64 + 1) * 64;
        }
        for &k in &keys[..WINDOW] {
            send(&chans, k, 5, 10);
        }
        // Every channel has bytes in flight: the next one carries nothing.
        let new = keys[WINDOW];
        assert_eq!(send(&chans, new, 7, 1), None);
        // One is drained: the next one takes it over and counts from 0.
        assert_eq!(receive(&chans, keys[3], 10), 5);
        assert_eq!(send(&chans, new, 700, 4), Some(0));
        assert_eq!(receive(&chans, new, 4), 700);
        // The drained channel's key reads as unknown; the others keep their clocks.
        assert_eq!(receive(&chans, keys[3], 1), 0);
        assert_eq!(receive(&chans, keys[4], 10), 5);
    }

    #[test]
    fn keys_are_never_zero() {
        for k in 0..1000 {
            assert_ne!(key_of(k, k * 3, k * 7), 0);
        }
    }

    #[test]
    fn a_reader_adopts_the_clock_of_the_bytes_it_read() {
        let chans = [const { Channel::empty() }; 8];
        let k = key_of(1, 2, 3);
        assert_eq!(receive(&chans, k, 5), 0, "nothing written: nothing carried");
        let chans = [const { Channel::empty() }; 8];
        send(&chans, k, 100, 10); // bytes 0..10 at 100
        send(&chans, k, 100, 10); // 10..20, same clock: no new record
        send(&chans, k, 300, 10); // 20..30 at 300
        send(&chans, k, 500, 10); // 30..40 at 500
        assert_eq!(peek(&chans, k), 100);
        assert_eq!(receive(&chans, k, 15), 100);
        assert_eq!(receive(&chans, k, 6), 300, "byte 20 is the first at 300");
        assert_eq!(receive(&chans, k, 9), 300);
        assert_eq!(peek(&chans, k), 500, "byte 30 is next");
        assert_eq!(receive(&chans, k, 1), 500);
        assert_eq!(receive(&chans, key_of(1, 2, 4), 1), 0, "another channel");
    }

    #[test]
    fn short_writes_give_back_their_positions_and_eof_takes_all() {
        let chans = [const { Channel::empty() }; 8];
        let k = key_of(9, 9, 9);
        send(&chans, k, 10, 100);
        unsend(&chans, k, 100, 4); // only 4 bytes went out
        send(&chans, k, 20, 4); // bytes 4..8
        assert_eq!(receive(&chans, k, 4), 10);
        assert_eq!(receive(&chans, k, 4), 20);
        send(&chans, k, 30, 4);
        assert_eq!(
            receive(&chans, k, 0),
            30,
            "end of file: every byte was read"
        );
    }
}
