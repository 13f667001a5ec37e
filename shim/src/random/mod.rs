//! Randomness: every entropy source returns bytes from a seeded ChaCha20 stream, one stream
//! per thread (ChaCha12, see `chacha::STREAM_ROUNDS`), keyed by the run's seed and the thread's place in the creation tree (so two
//! threads never swap values when the scheduler reorders them).
//!
//! `hooks.rs`: `getrandom`, `getentropy`, `arc4random*`. `device.rs`: reads of
//! `/dev/urandom`, `/dev/random` and the kernel's uuid/boot_id files however they are opened.

pub mod chacha;
pub mod device;
#[cfg(not(test))]
pub(crate) mod hooks;

use core::sync::atomic::Ordering::Relaxed;

use crate::{config, thread};

/// One keyed ChaCha stream, read from front to back.
///
/// Signal-safe for its own thread: a handler may draw from the stream while the thread it
/// interrupted is in the middle of a draw. Each draw first claims its byte range with one
/// non-locked `xadd` on `pos`, then computes exactly those keystream bytes from their position
/// (byte `p` is byte `p % 256` of the four-block batch `p / 256`), so the interrupted draw and
/// the handler's never share a byte. The last batch is cached behind a sequence number: a
/// draw only trusts a copy if no store happened meanwhile.
#[derive(Clone, Copy)]
pub struct EntropyStream {
    /// The lineage this stream was keyed for (0 = never keyed).
    keyed_for: u64,
    key: [u32; 8],
    nonce: [u32; 2],
    /// Bytes of the stream claimed so far.
    pos: u64,
    /// Even when `cached`/`buf` are stable, odd while a store is in progress.
    seq: u64,
    /// Batch index + 1 of the bytes in `buf` (0: nothing cached).
    cached: u64,
    buf: [u8; BATCH],
}

/// Bytes per keystream batch (four 64-byte blocks).
const BATCH: usize = 256;

impl EntropyStream {
    pub const EMPTY: EntropyStream = EntropyStream {
        keyed_for: 0,
        key: [0; 8],
        nonce: [0; 2],
        pos: 0,
        seq: 0,
        cached: 0,
        buf: [0; BATCH],
    };

    /// A stream for `seed` and stream id `id` (a lineage key, or any derived key).
    pub fn new(seed: u64, id: u64) -> EntropyStream {
        let mut s = EntropyStream::EMPTY;
        s.rekey(seed, id);
        s
    }

    fn rekey(&mut self, seed: u64, id: u64) {
        for (i, pair) in self.key.chunks_mut(2).enumerate() {
            let w = seal_abi::mix64(seed ^ (0x6a09_e667_f3bc_c908u64.wrapping_mul(i as u64 + 1)));
            pair[0] = w as u32;
            pair[1] = (w >> 32) as u32;
        }
        self.nonce = [id as u32, (id >> 32) as u32];
        self.pos = 0;
        self.cached = 0;
        self.keyed_for = id;
    }

    /// Claims the next `n` bytes of the stream: returns their first position.
    #[inline(always)]
    fn claim(&mut self, n: u64) -> u64 {
        let mut v = n;
        // SAFETY: one exchange-and-add on this stream's aligned `pos`; no `lock` prefix is
        // needed against a signal handler of the same thread (signals arrive between
        // instructions), and no other thread uses this stream.
        unsafe {
            core::arch::asm!("xadd qword ptr [{p}], {v}", p = in(reg) &mut self.pos, v = inout(reg) v,
                             options(nostack));
        }
        v
    }

    /// Copies `out.len()` bytes at `within` of batch `batch` from the cache, if it holds that
    /// batch and no store (a signal handler's) overlapped the copy.
    #[inline(always)]
    fn copy_cached(&self, batch: u64, within: usize, out: &mut [u8]) -> bool {
        use core::sync::atomic::{compiler_fence, Ordering::SeqCst};
        let seq = core::ptr::addr_of!(self.seq);
        // SAFETY (volatile reads): fields of this live stream.
        let s1 = unsafe { seq.read_volatile() };
        let tag = unsafe { core::ptr::addr_of!(self.cached).read_volatile() };
        if s1 & 1 != 0 || tag != batch + 1 {
            return false;
        }
        compiler_fence(SeqCst);
        out.copy_from_slice(&self.buf[within..within + out.len()]);
        compiler_fence(SeqCst);
        // SAFETY: as above.
        unsafe { seq.read_volatile() == s1 }
    }

    /// Caches `bytes` as batch `batch`, unless this call interrupted another store.
    #[inline(always)]
    fn store_cached(&mut self, batch: u64, bytes: &[u8; BATCH]) {
        use core::sync::atomic::{compiler_fence, Ordering::SeqCst};
        let seq = core::ptr::addr_of_mut!(self.seq);
        // SAFETY (volatile accesses): fields of this live stream.
        let s = unsafe { seq.read_volatile() };
        if s & 1 != 0 {
            return;
        }
        unsafe { seq.write_volatile(s + 1) };
        compiler_fence(SeqCst);
        unsafe { core::ptr::addr_of_mut!(self.cached).write_volatile(batch + 1) };
        self.buf = *bytes;
        compiler_fence(SeqCst);
        unsafe { seq.write_volatile(s + 2) };
    }

    /// Fills `out` with the next bytes of the stream.
    pub fn fill(&mut self, out: &mut [u8]) {
        let start = self.claim(out.len() as u64);
        let mut done = 0;
        while done < out.len() {
            let p = start.wrapping_add(done as u64);
            let batch = p / BATCH as u64;
            let within = (p % BATCH as u64) as usize;
            let n = (out.len() - done).min(BATCH - within);
            let dst = &mut out[done..done + n];
            if !self.copy_cached(batch, within, dst) {
                let mut tmp = [0u8; BATCH];
                chacha::blocks4(
                    &self.key,
                    batch.wrapping_mul(4),
                    self.nonce,
                    chacha::STREAM_ROUNDS,
                    &mut tmp,
                );
                dst.copy_from_slice(&tmp[within..within + n]);
                if within + n < BATCH {
                    // The rest of this batch is what the next draw wants.
                    self.store_cached(batch, &tmp);
                }
            }
            done += n;
        }
    }

    pub fn next_u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        self.fill(&mut b);
        u32::from_le_bytes(b)
    }
}

// This thread's stream. All-zero bytes are a valid, never-keyed stream (`keyed_for` 0):
// `with_stream` keys it before first use, which also empties its buffer.
crate::initial_exec_tls!("seal_entropy_stream", EntropyStream, stream_ptr);

/// Runs `f` on this thread's stream, (re)keying it when the thread's lineage changed (first
/// use, or this thread is now the main thread of a fork child).
#[inline(always)]
pub fn with_stream<R>(f: impl FnOnce(&mut EntropyStream) -> R) -> R {
    let lineage = thread::with(|t| t.lineage);
    // SAFETY: only this thread touches its stream; no caller re-enters while holding it.
    let s = unsafe { &mut *stream_ptr() };
    if s.keyed_for != lineage || lineage == 0 {
        s.rekey(config::SEED.load(Relaxed), lineage);
    }
    f(s)
}

/// Fills `out` from this thread's stream.
#[inline(always)]
pub fn fill(out: &mut [u8]) {
    with_stream(|s| s.fill(out))
}

/// `arc4random_uniform` semantics: uniform in `0..upper` by rejection (0 for upper < 2).
pub fn uniform(s: &mut EntropyStream, upper: u32) -> u32 {
    if upper < 2 {
        return 0;
    }
    let min = upper.wrapping_neg() % upper;
    loop {
        let r = s.next_u32();
        if r >= min {
            return r % upper;
        }
    }
}

#[cfg(test)]
mod tests;
