//! Randomness: every entropy source returns bytes from a seeded ChaCha20 stream, one stream
//! per thread (ChaCha12, see `chacha::STREAM_ROUNDS`), keyed by the run's seed and the thread's place in the creation tree (so two
//! threads never swap values when the scheduler reorders them).
//!
//! `hooks.rs`: `getrandom`, `getentropy`, `arc4random*`. `device.rs`: reads of
//! `/dev/urandom`, `/dev/random` and the kernel's uuid/boot_id files however they are opened.
//! `openssl.rs`: OpenSSL's `RAND_bytes` family, shared or linked into the program.
//! `uuid.rs`: libuuid's time-based uuids, made from the sealed clock and seed.

pub mod chacha;
pub mod device;
#[cfg(not(test))]
pub(crate) mod hooks;
#[cfg(not(test))]
pub(crate) mod openssl;
pub(crate) mod uuid;

use core::sync::atomic::Ordering::Relaxed;

use crate::core::{config, thread};

/// One keyed ChaCha stream, read from front to back.
///
/// Signal-safe for its own thread: a handler may draw from the stream while the thread it
/// interrupted is in the middle of a draw. Each draw first claims its byte range with one
/// non-locked `xadd` on `pos`, then takes exactly those keystream bytes, computed from their
/// position (byte `p` is byte `p % BATCH` of batch `p / BATCH`, ChaCha blocks `8b .. 8b+8`), so
/// the interrupted draw and the handler's never share a byte.
///
/// The batch generated last is kept in `buf`, named by `held`. A store sets `held` to [`BUSY`]
/// while it writes `buf`, and a handler that finds it busy neither reads nor writes `buf`; so
/// whenever interrupted code resumes, `buf` holds the batch `held` names. A draw trusts bytes
/// it read from `buf` only if `held` named their batch both before and after the read. In
/// between, handlers may have refilled `buf`; but a handler stores only batches its own draws
/// reach, and each handler draws later bytes than every draw before it, so once `held` has
/// named a later batch at one of the reader's instructions, no later handler names the
/// reader's batch again and the second check fails. If it passes, `buf` held that batch at
/// every one of the reader's loads.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct EntropyStream {
    /// The lineage this stream was keyed for (0 = never keyed).
    keyed_for: u64,
    key: [u32; 8],
    nonce: [u32; 2],
    /// Bytes of the stream claimed so far.
    pos: u64,
    /// Batch index + 1 of the bytes in `buf`; 0 nothing; [`BUSY`] while a store is under way.
    held: u64,
    buf: [u8; BATCH],
}

/// Bytes per keystream batch (eight 64-byte blocks: one AVX2 pass of the block function).
const BATCH: usize = 512;

/// `held` while `buf` is being written.
const BUSY: u64 = u64::MAX;

/// Draws up to this many bytes copy through registers, without a `memcpy` call.
const SMALL: usize = 32;

impl EntropyStream {
    pub const EMPTY: EntropyStream = EntropyStream {
        keyed_for: 0,
        key: [0; 8],
        nonce: [0; 2],
        pos: 0,
        held: 0,
        buf: [0; BATCH],
    };

    /// A stream for `seed` and stream id `id` (a lineage key, or any derived key).
    pub fn new(seed: u64, id: u64) -> EntropyStream {
        let mut s = EntropyStream::EMPTY;
        s.rekey(seed, id);
        s
    }

    fn rekey(&mut self, seed: u64, id: u64) {
        self.key = seal_abi::device_text::stream_key(seed);
        self.nonce = [id as u32, (id >> 32) as u32];
        self.pos = 0;
        self.held = 0;
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

    /// `held`, read as a handler may have left it.
    #[inline(always)]
    fn held(&self) -> u64 {
        // SAFETY: a field of this live stream.
        unsafe { core::ptr::addr_of!(self.held).read_volatile() }
    }

    /// Fills `out` with the next bytes of the stream.
    #[inline(always)]
    pub fn fill(&mut self, out: &mut [u8]) {
        let n = out.len();
        let start = self.claim(n as u64);
        interrupt_point();
        let within = (start % BATCH as u64) as usize;
        if n <= SMALL && within + n <= BATCH && self.copy_small(start / BATCH as u64, within, out) {
            return;
        }
        self.fill_slow(start, out);
    }

    /// The common draw: up to [`SMALL`] bytes inside the held batch, read into registers by at
    /// most two (overlapping) loads and stored once `held` is confirmed. False (nothing
    /// written) when `buf` does not hold `batch`, or stopped holding it during the read.
    #[inline(always)]
    fn copy_small(&self, batch: u64, within: usize, out: &mut [u8]) -> bool {
        use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};
        use core::ptr::{read_unaligned as rd, write_unaligned as wr};
        use core::sync::atomic::{compiler_fence, Ordering::SeqCst};
        let tag = batch + 1;
        if self.held() != tag {
            return false;
        }
        interrupt_point();
        compiler_fence(SeqCst);
        let n = out.len();
        let src = self.buf[within..].as_ptr();
        let dst = out.as_mut_ptr();
        // SAFETY: `within + n <= BATCH` (the caller) and `out` has `n` bytes: every load is
        // inside `buf[within..within + n]`, every store inside `out`; SSE2 is baseline.
        unsafe {
            macro_rules! two {
                ($t:ty, $load:expr, $store:expr) => {{
                    let (a, b) = (
                        $load(src as *const $t),
                        $load(src.add(n - size_of::<$t>()) as *const $t),
                    );
                    interrupt_point();
                    compiler_fence(SeqCst);
                    if self.held() != tag {
                        return false;
                    }
                    $store(dst as *mut $t, a);
                    $store(dst.add(n - size_of::<$t>()) as *mut $t, b);
                }};
            }
            if n >= 16 {
                two!(__m128i, _mm_loadu_si128, _mm_storeu_si128);
            } else if n >= 8 {
                two!(u64, rd, wr);
            } else if n >= 4 {
                two!(u32, rd, wr);
            } else if n > 0 {
                // First, middle and last byte cover 1, 2 and 3 bytes.
                let (a, b, c) = (*src, *src.add(n / 2), *src.add(n - 1));
                interrupt_point();
                compiler_fence(SeqCst);
                if self.held() != tag {
                    return false;
                }
                *dst = a;
                *dst.add(n / 2) = b;
                *dst.add(n - 1) = c;
            }
        }
        true
    }

    /// Every other draw (large, across a batch boundary, or its batch not held), one batch's
    /// stretch at a time: copied from `buf` when it holds the batch, else generated; a whole
    /// batch straight into `out`; a batch whose rest the next draw wants into `buf`.
    #[cold]
    #[inline(never)]
    fn fill_slow(&mut self, start: u64, out: &mut [u8]) {
        let mut done = 0;
        while done < out.len() {
            let p = start.wrapping_add(done as u64);
            let batch = p / BATCH as u64;
            let within = (p % BATCH as u64) as usize;
            let n = (out.len() - done).min(BATCH - within);
            let dst = &mut out[done..done + n];
            done += n;
            if self.copy_held(batch, within, dst) {
                continue;
            }
            interrupt_point();
            if let Ok(whole) = <&mut [u8; BATCH]>::try_from(&mut *dst) {
                generate(&self.key, self.nonce, batch, whole);
            } else if within + n < BATCH && self.begin_store() {
                // The rest of this batch is what the next draw wants.
                interrupt_point();
                generate(&self.key, self.nonce, batch, &mut self.buf);
                interrupt_point();
                dst.copy_from_slice(&self.buf[within..within + n]);
                self.end_store(batch);
                interrupt_point();
            } else {
                let mut tmp = [0u8; BATCH];
                generate(&self.key, self.nonce, batch, &mut tmp);
                dst.copy_from_slice(&tmp[within..within + n]);
            }
        }
    }

    /// Copies `out.len()` bytes at `within` of batch `batch` from `buf`, if it holds that batch
    /// before and after the copy.
    #[inline(always)]
    fn copy_held(&self, batch: u64, within: usize, out: &mut [u8]) -> bool {
        use core::sync::atomic::{compiler_fence, Ordering::SeqCst};
        if self.held() != batch + 1 {
            return false;
        }
        interrupt_point();
        compiler_fence(SeqCst);
        out.copy_from_slice(&self.buf[within..within + out.len()]);
        interrupt_point();
        compiler_fence(SeqCst);
        self.held() == batch + 1
    }

    /// Marks `buf` busy, unless this call interrupted another store (then false: leave it).
    #[inline(always)]
    fn begin_store(&mut self) -> bool {
        if self.held() == BUSY {
            return false;
        }
        // SAFETY: a field of this live stream.
        unsafe { core::ptr::addr_of_mut!(self.held).write_volatile(BUSY) };
        core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
        true
    }

    /// `buf` now holds `batch`.
    #[inline(always)]
    fn end_store(&mut self, batch: u64) {
        core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
        // SAFETY: a field of this live stream.
        unsafe { core::ptr::addr_of_mut!(self.held).write_volatile(batch + 1) };
    }

    pub fn next_u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        self.fill(&mut b);
        u32::from_le_bytes(b)
    }
}

/// A place where a signal handler's draw may land in the middle of a draw: test builds draw
/// there (tests.rs), other builds compile it away.
#[cfg(not(test))]
#[inline(always)]
fn interrupt_point() {}
#[cfg(test)]
use tests::interrupt_point;

/// Writes batch `batch` of the keystream of (`key`, `nonce`) into `out`.
#[inline(always)]
fn generate(key: &[u32; 8], nonce: [u32; 2], batch: u64, out: &mut [u8; BATCH]) {
    chacha::blocks8(key, batch.wrapping_mul(8), nonce, out);
}

// This thread's stream. All-zero bytes are a valid, never-keyed stream (`keyed_for` 0):
// `with_stream` keys it before first use, which also empties its buffer.
crate::initial_exec_tls!("seal_entropy_stream", EntropyStream, stream_ptr);

/// Where this thread's stream stands: a vfork parent puts it back after its child (which runs
/// on this thread's memory) drew from a stream of its own (`crate::process::vfork`).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct StreamMark {
    keyed_for: u64,
    pos: u64,
}

/// This thread's stream position.
pub fn mark() -> StreamMark {
    // SAFETY: only this thread touches its stream.
    let s = unsafe { &*stream_ptr() };
    StreamMark {
        keyed_for: s.keyed_for,
        pos: s.pos,
    }
}

/// Puts this thread's stream back where [`mark`] found it (the bytes after it regenerated on
/// the next draw).
pub fn restore(m: &StreamMark) {
    // SAFETY: only this thread touches its stream; the caller has signals blocked.
    let s = unsafe { &mut *stream_ptr() };
    if m.keyed_for == 0 {
        s.keyed_for = 0;
        s.held = 0;
        return;
    }
    s.rekey(config::SEED.load(Relaxed), m.keyed_for);
    s.pos = m.pos;
}

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

/// The most bytes the fast path (`getrandom`'s hook) draws: [`SMALL`], copied through
/// registers.
pub const FAST_MAX: usize = SMALL;

/// [`fill`] of `len` (1..=[`FAST_MAX`]) bytes at `buf` on the fast path (`hot`'s entry
/// matched, so the thread is set up): the stream is found through the thread's lineage
/// without a second look at the thread's state, and every way off the common draw is a cold
/// call that finishes it. Returns `len`.
///
/// # Safety
/// `buf` is writable for `len` bytes.
#[inline(always)]
pub unsafe fn draw_hot(hot: thread::Hot, buf: *mut u8, len: usize) -> isize {
    let lineage = hot.lineage();
    // SAFETY: only this thread touches its stream; no caller re-enters while holding it.
    let s = unsafe { &mut *stream_ptr() };
    // SAFETY: per the contract.
    let out = unsafe { core::slice::from_raw_parts_mut(buf, len) };
    if s.keyed_for != lineage || lineage == 0 {
        return rekey_and_fill(s, lineage, out);
    }
    let start = s.claim(len as u64);
    interrupt_point();
    let within = (start % BATCH as u64) as usize;
    if len <= SMALL && within + len <= BATCH && s.copy_small(start / BATCH as u64, within, out) {
        return len as isize;
    }
    fill_slow_then(s, start, out)
}

#[cold]
#[inline(never)]
fn rekey_and_fill(s: &mut EntropyStream, lineage: u64, out: &mut [u8]) -> isize {
    s.rekey(config::SEED.load(Relaxed), lineage);
    s.fill(out);
    out.len() as isize
}

#[cold]
#[inline(never)]
fn fill_slow_then(s: &mut EntropyStream, start: u64, out: &mut [u8]) -> isize {
    s.fill_slow(start, out);
    out.len() as isize
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
