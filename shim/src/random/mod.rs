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

#[derive(Clone, Copy)]
pub struct EntropyStream {
    /// The lineage this stream was keyed for (0 = never keyed).
    keyed_for: u64,
    key: [u32; 8],
    nonce: [u32; 2],
    counter: u64,
    buf: [u8; 256],
    pos: usize,
}

impl EntropyStream {
    pub const EMPTY: EntropyStream = EntropyStream {
        keyed_for: 0,
        key: [0; 8],
        nonce: [0; 2],
        counter: 0,
        buf: [0; 256],
        pos: 256,
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
        self.counter = 0;
        self.pos = self.buf.len();
        self.keyed_for = id;
    }

    /// Fills `out` with the next bytes of the stream.
    pub fn fill(&mut self, out: &mut [u8]) {
        let mut done = 0;
        while done < out.len() {
            if self.pos == self.buf.len() {
                chacha::blocks4(
                    &self.key,
                    self.counter,
                    self.nonce,
                    chacha::STREAM_ROUNDS,
                    &mut self.buf,
                );
                self.counter = self.counter.wrapping_add(4);
                self.pos = 0;
            }
            let n = (out.len() - done).min(self.buf.len() - self.pos);
            out[done..done + n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
            self.pos += n;
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
mod tests {
    use super::*;

    #[test]
    fn same_seed_and_id_same_bytes_any_split() {
        let mut a = EntropyStream::new(42, 7);
        let mut b = EntropyStream::new(42, 7);
        let mut x = [0u8; 700];
        a.fill(&mut x);
        let mut y = [0u8; 700];
        let (y1, y2) = y.split_at_mut(13);
        b.fill(y1);
        b.fill(y2);
        assert_eq!(x, y);
    }

    #[test]
    fn different_ids_differ() {
        let mut x = [0u8; 32];
        let mut y = [0u8; 32];
        EntropyStream::new(42, 7).fill(&mut x);
        EntropyStream::new(42, 8).fill(&mut y);
        assert_ne!(x, y);
        EntropyStream::new(43, 7).fill(&mut y);
        assert_ne!(x, y);
    }

    #[test]
    fn uniform_in_range() {
        let mut s = EntropyStream::new(1, 1);
        for upper in [2u32, 3, 10, 1000, u32::MAX] {
            for _ in 0..100 {
                assert!(uniform(&mut s, upper) < upper);
            }
        }
        assert_eq!(uniform(&mut s, 0), 0);
    }
}
