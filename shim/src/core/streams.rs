//! Per-stream slot tables: a fixed number of slots, each claimed by one directory stream (a
//! `DIR *` or a descriptor read with `getdents`) with a CAS on an owner word and then used by
//! that stream alone (POSIX does not let two threads read one stream at once), freed when
//! the stream is closed, rewound or its descriptor replaced. No lock, no `malloc`.
//!
//! Two families keep one: `open::listing::sorted` (a `/proc` listing served in virtual pid
//! order) and `machine::dirorder` (any other directory served in name order). The claims
//! ([`Claims`]) and the slots' contents ([`Cells`]) are separate statics, so a table's two
//! counters, which every `close` reads, can sit with the other hot statics while the
//! contents stay where they are.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicUsize, Ordering::*};

/// The key of a `DIR *` stream (aligned: its low bit is clear).
#[inline]
pub fn dir_key(dir: usize) -> usize {
    dir & !1
}

/// The key of a descriptor read with `getdents64` (low bit set).
#[inline]
pub fn fd_key(fd: i32) -> usize {
    ((fd as u32 as usize) << 1) | 1
}

/// Which stream owns each of `N` slots.
pub struct Claims<const N: usize> {
    /// `owner[i]`: the key of the stream slot `i` belongs to (0 free).
    owner: [AtomicUsize; N],
    /// Slots owned at all, and by descriptors: the common case (none) costs one load.
    used: AtomicUsize,
    used_by_fds: AtomicUsize,
}

impl<const N: usize> Claims<N> {
    /// Every slot free.
    pub const fn new() -> Claims<N> {
        Claims {
            owner: [const { AtomicUsize::new(0) }; N],
            used: AtomicUsize::new(0),
            used_by_fds: AtomicUsize::new(0),
        }
    }

    /// Where stream `key`'s search starts (keys spread over the slots).
    #[inline]
    fn home(key: usize) -> usize {
        (seal_abi::mix64(key as u64) as usize) % N
    }

    /// The slot of stream `key`, if it has one.
    #[inline]
    pub fn find(&self, key: usize) -> Option<usize> {
        if self.used.load(Relaxed) == 0 || key == 0 {
            return None;
        }
        let h = Self::home(key);
        (0..N)
            .map(|k| (h + k) % N)
            .find(|&i| self.owner[i].load(Acquire) == key)
    }

    /// Claims a fresh slot for stream `key`; `None` when every slot is taken. The caller
    /// resets the slot's contents: they are its stream's from here on.
    pub fn claim(&self, key: usize) -> Option<usize> {
        if key == 0 {
            return None;
        }
        self.used.fetch_add(1, AcqRel);
        let h = Self::home(key);
        let Some(i) = (0..N).map(|k| (h + k) % N).find(|&i| {
            self.owner[i]
                .compare_exchange(0, key, AcqRel, Relaxed)
                .is_ok()
        }) else {
            self.used.fetch_sub(1, AcqRel);
            return None;
        };
        if key & 1 == 1 {
            self.used_by_fds.fetch_add(1, AcqRel);
        }
        Some(i)
    }

    /// Frees slot `i` (its stream is done with it, and with its contents).
    pub fn free(&self, i: usize) {
        let Some(o) = self.owner.get(i) else { return };
        let key = o.swap(0, AcqRel);
        if key != 0 {
            self.used.fetch_sub(1, AcqRel);
            if key & 1 == 1 {
                self.used_by_fds.fetch_sub(1, AcqRel);
            }
        }
    }

    /// Does a descriptor own a slot? What `close` asks first (one load).
    #[inline]
    pub fn held_by_fds(&self) -> bool {
        self.used_by_fds.load(Relaxed) != 0
    }
}

impl<const N: usize> Default for Claims<N> {
    fn default() -> Claims<N> {
        Claims::new()
    }
}

/// The contents of `N` slots, slot `i` used only by the stream that claimed it.
pub struct Cells<T, const N: usize>(pub [UnsafeCell<T>; N]);

// SAFETY: slot `i` is used only by the stream that owns it (its `Claims`, claimed by CAS),
// one call at a time, as a directory stream is.
unsafe impl<T, const N: usize> Sync for Cells<T, N> {}

impl<T, const N: usize> Cells<T, N> {
    /// The contents of slot `i`.
    ///
    /// # Safety
    /// The caller's stream owns slot `i` (claimed it, or found it by its key), and no other
    /// reference to its contents is live.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub unsafe fn get(&self, i: usize) -> &mut T {
        // SAFETY: per the contract, this stream is the slot's only user.
        unsafe { &mut *self.0[i % N].get() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_claimed_found_and_freed_by_key() {
        let c: Claims<4> = Claims::new();
        assert_eq!(c.find(dir_key(0x1000)), None);
        let a = c.claim(dir_key(0x1000)).unwrap();
        let b = c.claim(fd_key(3)).unwrap();
        assert_ne!(a, b);
        assert_eq!(c.find(dir_key(0x1000)), Some(a));
        assert_eq!(c.find(fd_key(3)), Some(b));
        assert!(c.held_by_fds());
        c.free(b);
        assert!(!c.held_by_fds());
        assert_eq!(c.find(fd_key(3)), None);
        assert!(c.claim(0).is_none());
        for k in 1..4 {
            c.claim(dir_key(0x2000 * k)).unwrap();
        }
        assert!(c.claim(dir_key(0x9000)).is_none(), "every slot taken");
    }
}
