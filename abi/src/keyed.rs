//! Tables whose entries are claimed by one atomic key word (0 = free), probed linearly: the
//! step of a probe every such table takes (the causal channels and clock slots here, the
//! shim's file-time table).

use core::sync::atomic::{AtomicU64, Ordering::*};

/// What one entry is to a probe for a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// The entry is the key's: found, or claimed just now.
    Mine,
    /// The entry is free and the probe does not claim: no entry holds the key.
    Absent,
    /// Another key holds the entry: the probe goes on.
    Taken,
}

/// Is the entry whose key word is `slot` the one of `key` (never 0)? A free entry is claimed
/// for `key` when `claim`; losing the claim to the same key counts as found.
#[inline]
pub fn probe(slot: &AtomicU64, key: u64, claim: bool) -> Probe {
    let k = slot.load(Acquire);
    if k == key {
        return Probe::Mine;
    }
    if k != 0 {
        return Probe::Taken;
    }
    if !claim {
        return Probe::Absent;
    }
    match slot.compare_exchange(0, key, AcqRel, Acquire) {
        Ok(_) => Probe::Mine,
        Err(k) if k == key => Probe::Mine,
        Err(_) => Probe::Taken,
    }
}
