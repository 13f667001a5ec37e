//! The run's program names: what `/proc/self/exe` said for a program, shared by every process
//! of the run, so an image that runs a program the run already ran names it without reading
//! that link.
//!
//! The first access to `/proc/self` in a new process instantiates its `/proc/<pid>` entries:
//! on the hosts measured, the `readlink("/proc/self/exe")` every sealed image made for its
//! census cost 25–30 µs, a tenth of what libseal adds to a process. The exec hooks already
//! open and `fstat` the program they check ([`crate::exec_target`]), so the parent hands the
//! new image a key (the program's device and inode, and the file name the kernel is given,
//! which becomes `AT_EXECFN`) in `LIBSEAL_EXE`. The image looks the key up here; on a miss it
//! reads the link and fills the entry. A key names one file under one name: a program
//! replaced, relinked or reached by another name is another key.
//!
//! Each entry is a seqlock: a reader copies it and keeps the copy only when the sequence was
//! even and unchanged; a writer that finds the entry busy leaves it. A writer killed half-way
//! leaves the entry odd, a miss for the rest of the run.

use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering::*};

/// Entries of the table (all of it sits in the run table's first page).
pub const EXE_NAMES: usize = 15;
/// Longest path an entry holds; a longer one is read from the link every time.
pub const EXE_NAME_BYTES: usize = 232;
const WORDS: usize = EXE_NAME_BYTES / 8;

#[repr(C)]
pub struct ExeName {
    /// Even: stable (0: never written); odd: being written.
    pub seq: AtomicU32,
    pub len: AtomicU32,
    pub key: AtomicU64,
    pub path: [AtomicU64; WORDS],
}

#[repr(C)]
pub struct ExeNames {
    pub entries: [ExeName; EXE_NAMES],
}

/// FNV-1a over `bytes`, finished with [`crate::mix64`]; never 0.
pub fn name_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    crate::mix64(h) | 1
}

/// The key of a program file (`dev`, `ino`) exec'd under the file name whose
/// [`name_hash`] is `name`; never 0 (0 means "no key").
pub fn exe_key(dev: u64, ino: u64, name: u64) -> u64 {
    crate::mix64(dev ^ crate::mix64(ino ^ crate::mix64(name))) | 1
}

impl ExeNames {
    fn entry(&self, key: u64) -> &ExeName {
        &self.entries[(key % EXE_NAMES as u64) as usize]
    }

    /// Copies the path stored for `key` into `out`; its length, or `None` on a miss.
    pub fn lookup(&self, key: u64, out: &mut [u8]) -> Option<usize> {
        let e = self.entry(key);
        let s1 = e.seq.load(Acquire);
        if s1 == 0 || s1 % 2 == 1 || e.key.load(Relaxed) != key {
            return None;
        }
        let len = e.len.load(Relaxed) as usize;
        if len == 0 || len > EXE_NAME_BYTES || len > out.len() {
            return None;
        }
        let mut words = [0u64; WORDS];
        for (w, src) in words.iter_mut().zip(&e.path) {
            *w = src.load(Relaxed);
        }
        let key_again = e.key.load(Relaxed);
        fence(Acquire);
        if e.seq.load(Relaxed) != s1 || key_again != key {
            return None;
        }
        for (i, w) in words.iter().enumerate() {
            let b = w.to_le_bytes();
            let at = i * 8;
            if at >= len {
                break;
            }
            let n = (len - at).min(8);
            out[at..at + n].copy_from_slice(&b[..n]);
        }
        Some(len)
    }

    /// Stores `path` for `key` (skipped when too long, empty, or the entry is being written).
    pub fn insert(&self, key: u64, path: &[u8]) {
        if key == 0 || path.is_empty() || path.len() > EXE_NAME_BYTES {
            return;
        }
        let e = self.entry(key);
        let s = e.seq.load(Relaxed);
        if s % 2 == 1 || e.seq.compare_exchange(s, s + 1, Acquire, Relaxed).is_err() {
            return;
        }
        fence(Release);
        e.key.store(key, Relaxed);
        e.len.store(path.len() as u32, Relaxed);
        for (i, w) in e.path.iter().enumerate() {
            let mut b = [0u8; 8];
            let at = (i * 8).min(path.len());
            let n = (path.len() - at).min(8);
            b[..n].copy_from_slice(&path[at..at + n]);
            w.store(u64::from_le_bytes(b), Relaxed);
        }
        e.seq.store(s + 2, Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> ExeNames {
        // SAFETY: all-zero is a valid ExeNames (atomics of 0): what a fresh run table holds.
        unsafe { core::mem::zeroed() }
    }

    #[test]
    fn a_stored_name_is_found_by_its_key_only() {
        let t = table();
        let key = exe_key(1, 2, name_hash(b"/bin/sh"));
        let mut out = [0u8; 4096];
        assert_eq!(t.lookup(key, &mut out), None);
        t.insert(key, b"/usr/bin/dash");
        assert_eq!(t.lookup(key, &mut out), Some(13));
        assert_eq!(&out[..13], b"/usr/bin/dash");
        // Same slot, other key (another inode, or another name for the same file): a miss.
        let other = (1..)
            .map(|i| exe_key(1, 2 + i, name_hash(b"/bin/sh")))
            .find(|k| k % EXE_NAMES as u64 == key % EXE_NAMES as u64)
            .unwrap();
        assert_eq!(t.lookup(other, &mut out), None);
        assert_ne!(
            exe_key(1, 2, name_hash(b"/bin/sh")),
            exe_key(1, 2, name_hash(b"/usr/bin/sh"))
        );
        // The later writer of a slot wins; the earlier key then misses.
        t.insert(other, b"/x");
        assert_eq!(t.lookup(key, &mut out), None);
        assert_eq!(t.lookup(other, &mut out), Some(2));
    }

    #[test]
    fn long_paths_and_busy_entries_are_not_stored() {
        let t = table();
        let key = exe_key(3, 4, 5);
        let long = [b'a'; EXE_NAME_BYTES + 1];
        t.insert(key, &long);
        let mut out = [0u8; 4096];
        assert_eq!(t.lookup(key, &mut out), None);
        let exact = [b'b'; EXE_NAME_BYTES];
        t.insert(key, &exact);
        assert_eq!(t.lookup(key, &mut out), Some(EXE_NAME_BYTES));
        assert_eq!(&out[..EXE_NAME_BYTES], &exact[..]);
        // A writer mid-way (odd sequence): readers miss, other writers leave it.
        let e = t.entry(key);
        e.seq.fetch_add(1, Relaxed);
        assert_eq!(t.lookup(key, &mut out), None);
        t.insert(key, b"/c");
        e.seq.fetch_add(1, Relaxed);
        assert_eq!(t.lookup(key, &mut out), Some(EXE_NAME_BYTES));
        // A buffer too small for the stored path: a miss, never a cut path.
        assert_eq!(t.lookup(key, &mut [0u8; 16]), None);
    }

    #[test]
    fn fits_the_run_tables_first_page() {
        assert_eq!(core::mem::size_of::<ExeName>(), 16 + EXE_NAME_BYTES);
        assert!(core::mem::offset_of!(crate::RunTable, real_of) <= 4096);
        assert_ne!(name_hash(b""), 0);
    }
}
