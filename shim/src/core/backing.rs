//! Pages of a sparse shared file backed on first use.
//!
//! The census slots and the run's file-time table are sparse files on a memory file system,
//! mapped `MAP_SHARED`. Reserving them whole (`fallocate`) cost every process image ~0.2 ms
//! of page allocation for tables a short process touches a few pages of. A page of a sparse
//! tmpfs file is allocated at its first touch (a read too), and on a full file system that
//! touch is a SIGBUS. So every access to such a mapping first asks [`Backing::back`]: a bit
//! per page says it is backed; a page that is not is backed now with `MADV_POPULATE_WRITE`,
//! which reports a full file system as an error the caller handles (it drops a record or a
//! count, and says so), never a signal. One bit test on the hot path; no locks, no allocation,
//! async-signal-safe (two threads backing one page both succeed, harmlessly).

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::core::sys;

const PAGE: usize = 4096;

/// One bit per page of a mapping of up to `W * 64` pages (pages past that are backed on every
/// access, correct but slower).
pub struct Backing<const W: usize> {
    bits: [AtomicU64; W],
}

impl<const W: usize> Default for Backing<W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const W: usize> Backing<W> {
    pub const fn new() -> Self {
        Backing {
            bits: [const { AtomicU64::new(0) }; W],
        }
    }

    /// Forgets every page: the next mapping is a different file (a fork child's census).
    pub fn reset(&self) {
        for b in &self.bits {
            b.store(0, Relaxed);
        }
    }

    /// Makes sure bytes `off..off + len` of the mapping at `base` are backed; `false` when the
    /// file system could not back one of their pages (nothing may touch them then).
    #[inline(always)]
    pub fn back(&self, base: *const u8, off: usize, len: usize) -> bool {
        let first = off / PAGE;
        if first == (off + len.max(1) - 1) / PAGE
            && first < W * 64
            && self.bits[first / 64].load(Relaxed) & (1 << (first % 64)) != 0
        {
            return true;
        }
        self.back_slow(base, off, len)
    }

    /// Is the page holding the start of `p` (inside the mapping at `base`) known backed? One
    /// bit test; nothing is backed.
    #[inline(always)]
    pub fn is_backed<T>(&self, base: *const u8, p: &T) -> bool {
        let page = (p as *const T as usize).wrapping_sub(base as usize) / PAGE;
        page < W * 64 && self.bits[page / 64].load(Relaxed) & (1 << (page % 64)) != 0
    }

    /// Makes sure the whole object at `p` (inside the mapping at `base`) is backed.
    #[inline(always)]
    pub fn back_ref<T>(&self, base: *const u8, p: &T) -> bool {
        let off = (p as *const T as usize).wrapping_sub(base as usize);
        self.back(base, off, core::mem::size_of::<T>())
    }

    #[cold]
    #[inline(never)]
    fn back_slow(&self, base: *const u8, off: usize, len: usize) -> bool {
        let known = |page: usize| {
            page < W * 64 && self.bits[page / 64].load(Relaxed) & (1 << (page % 64)) != 0
        };
        let last = (off + len.max(1) - 1) / PAGE;
        let mut page = off / PAGE;
        while page <= last {
            if known(page) {
                page += 1;
                continue;
            }
            // A run of pages not known backed: one system call for all of them (a table's
            // first use backs tens of pages; one call each cost a process ~3 µs a page).
            let start = page;
            while page <= last && !known(page) {
                page += 1;
            }
            let r = sys::populate(base.wrapping_add(start * PAGE), (page - start) * PAGE);
            // EINVAL: a kernel before 5.14 cannot populate; the pages are touched as before.
            if r < 0 && r != -(libc::EINVAL as i64) {
                return false;
            }
            for p in (start..page).filter(|&p| p < W * 64) {
                self.bits[p / 64].fetch_or(1 << (p % 64), Relaxed);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_backed_once_and_remembered() {
        let len = 8 * PAGE;
        let p = sys::mmap_anon(len);
        assert!(!p.is_null());
        let b = Backing::<1>::new();
        assert!(b.back(p, 10, 4));
        assert!(b.back(p, PAGE - 2, 4), "a range across two pages");
        assert_eq!(b.bits[0].load(Relaxed), 0b11);
        assert!(b.back(p, 5 * PAGE, PAGE));
        assert_eq!(b.bits[0].load(Relaxed), 0b10_0011);
        b.reset();
        assert_eq!(b.bits[0].load(Relaxed), 0);
        // Past the bitmap: backed every time, never remembered.
        let small = Backing::<1>::new();
        let far = sys::mmap_anon(70 * PAGE);
        assert!(small.back(far, 65 * PAGE, 8));
        assert_eq!(small.bits[0].load(Relaxed), 0);
        // A run across known and unknown pages, and across the end of the bitmap.
        assert!(b.back(p, 0, 8 * PAGE));
        assert_eq!(b.bits[0].load(Relaxed), 0b1111_1111);
        assert!(small.back(far, 62 * PAGE, 4 * PAGE));
        assert_eq!(small.bits[0].load(Relaxed), 0b11 << 62);
        // SAFETY: our own test mappings.
        unsafe {
            sys::munmap(p, len);
            sys::munmap(far, 70 * PAGE);
        }
    }
}
