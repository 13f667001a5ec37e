//! The affinity mask a thread set itself, as it reads it back.
//!
//! Sealed, every affinity mask a program reads holds all `N` CPUs, whatever mask the kernel
//! keeps, so that `taskset` around a run changes nothing in it. A program that sets its own
//! mask and reads it back (CPython's `test_posix.test_sched_setaffinity`: it drops CPU 0 and
//! expects to see that) then saw all `N` again. So a successful `sched_setaffinity` of the
//! calling thread is recorded here, keyed by the thread's real tid: the sealed CPUs it asked
//! for, and a fingerprint of the mask the kernel kept. A read of the thread's own mask whose
//! kernel mask still has that fingerprint answers the recorded CPUs; any other (a new thread,
//! a fork child, an image after exec, a mask `taskset -p` changed from outside) answers all
//! `N`, as before. Up to [`SLOTS`] threads at once, with `N` up to 64; past that, all `N`.

use core::sync::atomic::{AtomicI32, AtomicU64, Ordering::*};

use crate::core::sys;

/// Threads with a recorded mask at once.
pub const SLOTS: usize = 64;
/// Bytes of the kernel mask read back (1024 CPUs).
const MASK_BYTES: usize = 128;

static TID: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
static SEALED: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
static REAL: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];

/// The sealed CPUs (bits `0..n`) among the first `size` bytes of `mask`.
///
/// # Safety
/// `mask` is valid for `size` bytes.
pub unsafe fn sealed_bits(n: u32, size: usize, mask: *const u8) -> u64 {
    let mut bits = 0u64;
    for i in 0..size.min(8) {
        // SAFETY: `i < size`.
        bits |= (unsafe { *mask.add(i) } as u64) << (i * 8);
    }
    if n >= 64 {
        bits
    } else {
        bits & ((1u64 << n) - 1)
    }
}

/// A fingerprint of the calling thread's kernel mask (0 when it cannot be read).
fn real_fingerprint() -> u64 {
    let mut buf = [0u64; MASK_BYTES / 8];
    // SAFETY: a valid buffer of MASK_BYTES bytes.
    let r = unsafe {
        sys::syscall3(
            libc::SYS_sched_getaffinity,
            0,
            MASK_BYTES as i64,
            buf.as_mut_ptr() as i64,
        )
    };
    if r <= 0 {
        return 0;
    }
    buf.iter()
        .take(r as usize / 8)
        .fold(0x6166_6669_6e69_7479, |h, &w| seal_abi::mix64(h ^ w))
        | 1
}

/// After the calling thread set its mask to `bits` (sealed CPUs, non-zero): records it.
pub fn record(bits: u64) {
    let tid = sys::gettid();
    let fp = real_fingerprint();
    if bits == 0 || fp == 0 {
        forget(tid);
        return;
    }
    let slot = (0..SLOTS)
        .find(|&i| TID[i].load(Acquire) == tid)
        .or_else(|| (0..SLOTS).find(|&i| TID[i].compare_exchange(0, tid, AcqRel, Relaxed).is_ok()));
    if let Some(i) = slot {
        SEALED[i].store(bits, Relaxed);
        REAL[i].store(fp, Release);
    }
}

/// Drops the calling thread's record (`tid`).
fn forget(tid: i32) {
    for i in 0..SLOTS {
        if TID[i].load(Acquire) == tid {
            REAL[i].store(0, Relaxed);
            TID[i].store(0, Release);
        }
    }
}

/// The calling thread's recorded CPUs, if its kernel mask is still the one it set.
pub fn lookup() -> Option<u64> {
    let tid = sys::gettid();
    let i = (0..SLOTS).find(|&i| TID[i].load(Acquire) == tid)?;
    let want = REAL[i].load(Acquire);
    (want != 0 && want == real_fingerprint()).then(|| SEALED[i].load(Relaxed))
}

/// Writes `bits` as a kernel mask into `mask` (`size` bytes, room for `n` CPUs checked by the
/// caller): the bytes written.
///
/// # Safety
/// `mask` is valid for `size` bytes.
pub unsafe fn fill_bits(n: u32, bits: u64, size: usize, mask: *mut u8) -> usize {
    let len = super::mask_bytes(n).min(size);
    for i in 0..len {
        let b = if i < 8 { (bits >> (i * 8)) as u8 } else { 0 };
        // SAFETY: `i < len <= size`.
        unsafe { *mask.add(i) = b };
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sealed_cpus_are_kept() {
        let m = [0b1110_0110u8, 0xff, 0, 0, 0, 0, 0, 0];
        // SAFETY: an 8-byte mask.
        assert_eq!(unsafe { sealed_bits(4, 8, m.as_ptr()) }, 0b0110);
        // SAFETY: as above.
        assert_eq!(unsafe { sealed_bits(64, 8, m.as_ptr()) }, 0xffe6);
        let mut out = [0xaau8; 16];
        // SAFETY: a 16-byte mask.
        assert_eq!(unsafe { fill_bits(4, 0b0110, 16, out.as_mut_ptr()) }, 8);
        assert_eq!(out[..9], [0b0110, 0, 0, 0, 0, 0, 0, 0, 0xaa]);
    }

    #[test]
    fn a_thread_reads_back_what_it_set_until_the_kernel_mask_changes() {
        assert_eq!(lookup(), None);
        record(0b10);
        assert_eq!(lookup(), Some(0b10));
        record(0);
        assert_eq!(lookup(), None);
    }
}
