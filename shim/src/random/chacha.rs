//! ChaCha (Bernstein's original 64-bit counter / 64-bit nonce layout), eight blocks at a time
//! with AVX2 where the CPU has it, else four at a time with SSE2 (every x86_64 CPU has SSE2):
//! the same keystream either way, so which one runs never shows in a byte.
//!
//! Written here rather than taken from the `chacha20` crate because the shim keeps per-thread
//! state in `const`-initialised `Copy` thread locals (docs/design.md's shim rules); the crate's
//! cipher types are neither. The round count is a parameter: the entropy streams use
//! [`STREAM_ROUNDS`]; the RFC 8439 §2.3.2 test vector below checks the 20-round function.

use core::arch::x86_64::*;

/// Rounds of the entropy streams. 12 rounds is what `rand`'s `StdRng` uses: far beyond what
/// statistical quality needs (the best attacks reach 7 rounds), and the streams are for
/// determinism, not secrecy (anyone with the seed can replay them by design). It keeps a
/// sealed `getrandom(16 bytes)` within docs/design.md's 10 ns target.
pub const STREAM_ROUNDS: usize = seal_abi::device_text::STREAM_ROUNDS;

const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

#[inline(always)]
fn rotl<const L: i32, const R: i32>(x: __m128i) -> __m128i {
    // SAFETY: SSE2 is part of the x86_64 baseline.
    unsafe { _mm_or_si128(_mm_slli_epi32::<L>(x), _mm_srli_epi32::<R>(x)) }
}

#[inline(always)]
fn quarter(x: &mut [__m128i; 16], a: usize, b: usize, c: usize, d: usize) {
    // SAFETY: SSE2 is part of the x86_64 baseline.
    unsafe {
        x[a] = _mm_add_epi32(x[a], x[b]);
        x[d] = rotl::<16, 16>(_mm_xor_si128(x[d], x[a]));
        x[c] = _mm_add_epi32(x[c], x[d]);
        x[b] = rotl::<12, 20>(_mm_xor_si128(x[b], x[c]));
        x[a] = _mm_add_epi32(x[a], x[b]);
        x[d] = rotl::<8, 24>(_mm_xor_si128(x[d], x[a]));
        x[c] = _mm_add_epi32(x[c], x[d]);
        x[b] = rotl::<7, 25>(_mm_xor_si128(x[b], x[c]));
    }
}

/// Writes the keystream blocks `counter .. counter+4` (256 bytes) into `out`, with `rounds`
/// rounds (20 for ChaCha20). The 64-bit counter occupies state words 12 and 13, the nonce
/// words 14 and 15.
#[inline]
pub fn blocks4(key: &[u32; 8], counter: u64, nonce: [u32; 2], rounds: usize, out: &mut [u8; 256]) {
    // SAFETY: SSE2 is part of the x86_64 baseline; the unaligned store writes inside `out`.
    unsafe {
        let splat = |w: u32| _mm_set1_epi32(w as i32);
        let c = [
            counter,
            counter.wrapping_add(1),
            counter.wrapping_add(2),
            counter.wrapping_add(3),
        ];
        let init: [__m128i; 16] = [
            splat(SIGMA[0]),
            splat(SIGMA[1]),
            splat(SIGMA[2]),
            splat(SIGMA[3]),
            splat(key[0]),
            splat(key[1]),
            splat(key[2]),
            splat(key[3]),
            splat(key[4]),
            splat(key[5]),
            splat(key[6]),
            splat(key[7]),
            _mm_setr_epi32(c[0] as i32, c[1] as i32, c[2] as i32, c[3] as i32),
            _mm_setr_epi32(
                (c[0] >> 32) as i32,
                (c[1] >> 32) as i32,
                (c[2] >> 32) as i32,
                (c[3] >> 32) as i32,
            ),
            splat(nonce[0]),
            splat(nonce[1]),
        ];
        let mut x = init;
        for _ in 0..rounds / 2 {
            quarter(&mut x, 0, 4, 8, 12);
            quarter(&mut x, 1, 5, 9, 13);
            quarter(&mut x, 2, 6, 10, 14);
            quarter(&mut x, 3, 7, 11, 15);
            quarter(&mut x, 0, 5, 10, 15);
            quarter(&mut x, 1, 6, 11, 12);
            quarter(&mut x, 2, 7, 8, 13);
            quarter(&mut x, 3, 4, 9, 14);
        }
        for i in 0..16 {
            x[i] = _mm_add_epi32(x[i], init[i]);
        }
        // x[w] holds word w of blocks 0..4; transpose 4x4 groups so each block's words are
        // contiguous: block b, words 4g..4g+4 come from lanes b of x[4g..4g+4].
        for g in 0..4 {
            let (a, b, cc, d) = (x[4 * g], x[4 * g + 1], x[4 * g + 2], x[4 * g + 3]);
            let t0 = _mm_unpacklo_epi32(a, b);
            let t1 = _mm_unpacklo_epi32(cc, d);
            let t2 = _mm_unpackhi_epi32(a, b);
            let t3 = _mm_unpackhi_epi32(cc, d);
            let rows = [
                _mm_unpacklo_epi64(t0, t1),
                _mm_unpackhi_epi64(t0, t1),
                _mm_unpacklo_epi64(t2, t3),
                _mm_unpackhi_epi64(t2, t3),
            ];
            for (blk, row) in rows.iter().enumerate() {
                let p = out.as_mut_ptr().add(blk * 64 + g * 16) as *mut __m128i;
                _mm_storeu_si128(p, *row);
            }
        }
    }
}

/// Writes the keystream blocks `counter .. counter+8` (512 bytes) into `out`, with
/// [`STREAM_ROUNDS`] rounds: one AVX2 pass where the CPU and the kernel support it, else two
/// SSE2 passes of four blocks. Both compute the same function.
#[inline]
pub fn blocks8(key: &[u32; 8], counter: u64, nonce: [u32; 2], out: &mut [u8; 512]) {
    if avx2() {
        // SAFETY: the CPU has AVX2 and the kernel saves its registers (checked by `avx2`).
        unsafe { blocks8_avx2(key, counter, nonce, STREAM_ROUNDS, out) }
    } else {
        blocks8_sse2(key, counter, nonce, STREAM_ROUNDS, out)
    }
}

/// [`blocks8`] as two SSE2 passes.
pub fn blocks8_sse2(
    key: &[u32; 8],
    counter: u64,
    nonce: [u32; 2],
    rounds: usize,
    out: &mut [u8; 512],
) {
    // SAFETY: [u8; 512] and [[u8; 256]; 2] have the same size and alignment.
    let [lo, hi] = unsafe { &mut *(out as *mut [u8; 512] as *mut [[u8; 256]; 2]) };
    blocks4(key, counter, nonce, rounds, lo);
    blocks4(key, counter.wrapping_add(4), nonce, rounds, hi);
}

/// Can this thread run AVX2 code? The CPU must have it (cpuid leaf 7) and the kernel must save
/// the upper halves of the vector registers (OSXSAVE, and XCR0's SSE and AVX bits). Asked once
/// per process image, then one relaxed load. `crate::cpu::cpuid` answers even where `cpuid`
/// faults, and is async-signal-safe; a race only asks twice.
#[inline(always)]
fn avx2() -> bool {
    use core::sync::atomic::{AtomicU8, Ordering::Relaxed};
    /// 0 not asked yet, 1 no, 2 yes.
    #[link_section = ".data.seal_hot"]
    static AVX2: AtomicU8 = AtomicU8::new(0);
    #[cfg(test)]
    if tests::SSE2_ONLY.get() {
        return false;
    }
    match AVX2.load(Relaxed) {
        0 => {
            let yes = detect_avx2();
            AVX2.store(1 + yes as u8, Relaxed);
            yes
        }
        v => v == 2,
    }
}

#[cold]
fn detect_avx2() -> bool {
    let [_, _, ecx1, _] = crate::cpu::cpuid(1, 0);
    let (osxsave, avx) = (ecx1 & (1 << 27) != 0, ecx1 & (1 << 28) != 0);
    if !(osxsave && avx) || crate::cpu::cpuid(0, 0)[0] < 7 {
        return false;
    }
    let ebx7 = crate::cpu::cpuid(7, 0)[1];
    let xcr0_lo: u32;
    // SAFETY: `xgetbv` with ecx 0 reads XCR0; OSXSAVE (checked above) says it is enabled.
    unsafe {
        core::arch::asm!("xgetbv", in("ecx") 0, out("eax") xcr0_lo, out("edx") _,
                         options(nomem, nostack, preserves_flags));
    }
    ebx7 & (1 << 5) != 0 && xcr0_lo & 0b110 == 0b110
}

/// One ChaCha quarter round on the 8-lane state `$x` (AVX2).
macro_rules! quarter8 {
    ($x:ident, $r16:ident, $r8:ident, $a:literal, $b:literal, $c:literal, $d:literal) => {
        $x[$a] = _mm256_add_epi32($x[$a], $x[$b]);
        $x[$d] = _mm256_shuffle_epi8(_mm256_xor_si256($x[$d], $x[$a]), $r16);
        $x[$c] = _mm256_add_epi32($x[$c], $x[$d]);
        let t = _mm256_xor_si256($x[$b], $x[$c]);
        $x[$b] = _mm256_or_si256(_mm256_slli_epi32::<12>(t), _mm256_srli_epi32::<20>(t));
        $x[$a] = _mm256_add_epi32($x[$a], $x[$b]);
        $x[$d] = _mm256_shuffle_epi8(_mm256_xor_si256($x[$d], $x[$a]), $r8);
        $x[$c] = _mm256_add_epi32($x[$c], $x[$d]);
        let t = _mm256_xor_si256($x[$b], $x[$c]);
        $x[$b] = _mm256_or_si256(_mm256_slli_epi32::<7>(t), _mm256_srli_epi32::<25>(t));
    };
}

/// [`blocks8`] in one AVX2 pass: lane `i` of every state vector is block `counter + i`.
///
/// # Safety
/// The CPU must support AVX2 (and the OS its state): see [`avx2`].
#[target_feature(enable = "avx2")]
pub unsafe fn blocks8_avx2(
    key: &[u32; 8],
    counter: u64,
    nonce: [u32; 2],
    rounds: usize,
    out: &mut [u8; 512],
) {
    // SAFETY: AVX2 per the function's contract; the loads read 32 bytes inside `lo`/`hi`, the
    // stores write 32 bytes inside `out`.
    unsafe {
        let mut lo = [0u32; 8];
        let mut hi = [0u32; 8];
        for i in 0..8 {
            let c = counter.wrapping_add(i as u64);
            lo[i] = c as u32;
            hi[i] = (c >> 32) as u32;
        }
        let init: [__m256i; 16] = [
            _mm256_set1_epi32(SIGMA[0] as i32),
            _mm256_set1_epi32(SIGMA[1] as i32),
            _mm256_set1_epi32(SIGMA[2] as i32),
            _mm256_set1_epi32(SIGMA[3] as i32),
            _mm256_set1_epi32(key[0] as i32),
            _mm256_set1_epi32(key[1] as i32),
            _mm256_set1_epi32(key[2] as i32),
            _mm256_set1_epi32(key[3] as i32),
            _mm256_set1_epi32(key[4] as i32),
            _mm256_set1_epi32(key[5] as i32),
            _mm256_set1_epi32(key[6] as i32),
            _mm256_set1_epi32(key[7] as i32),
            _mm256_loadu_si256(lo.as_ptr() as *const __m256i),
            _mm256_loadu_si256(hi.as_ptr() as *const __m256i),
            _mm256_set1_epi32(nonce[0] as i32),
            _mm256_set1_epi32(nonce[1] as i32),
        ];
        // Byte shuffles rotating each 32-bit word left by 16 and by 8.
        let r16 = _mm256_setr_epi8(
            2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11,
            8, 9, 14, 15, 12, 13,
        );
        let r8 = _mm256_setr_epi8(
            3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14, 3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9,
            10, 15, 12, 13, 14,
        );
        let mut x = init;
        for _ in 0..rounds / 2 {
            quarter8!(x, r16, r8, 0, 4, 8, 12);
            quarter8!(x, r16, r8, 1, 5, 9, 13);
            quarter8!(x, r16, r8, 2, 6, 10, 14);
            quarter8!(x, r16, r8, 3, 7, 11, 15);
            quarter8!(x, r16, r8, 0, 5, 10, 15);
            quarter8!(x, r16, r8, 1, 6, 11, 12);
            quarter8!(x, r16, r8, 2, 7, 8, 13);
            quarter8!(x, r16, r8, 3, 4, 9, 14);
        }
        for i in 0..16 {
            x[i] = _mm256_add_epi32(x[i], init[i]);
        }
        // x[w] holds word w of blocks 0..8. Transposing each 4x4 group within each 128-bit half
        // (as blocks4 does) leaves rows[g][r] = block r's words 4g..4g+4 in its low half and block
        // r+4's in its high half; pairing groups g and g+1 gives 32 contiguous bytes of a block.
        let mut rows = [[_mm256_setzero_si256(); 4]; 4];
        for (g, row) in rows.iter_mut().enumerate() {
            let (a, b, c, d) = (x[4 * g], x[4 * g + 1], x[4 * g + 2], x[4 * g + 3]);
            let t0 = _mm256_unpacklo_epi32(a, b);
            let t1 = _mm256_unpacklo_epi32(c, d);
            let t2 = _mm256_unpackhi_epi32(a, b);
            let t3 = _mm256_unpackhi_epi32(c, d);
            *row = [
                _mm256_unpacklo_epi64(t0, t1),
                _mm256_unpackhi_epi64(t0, t1),
                _mm256_unpacklo_epi64(t2, t3),
                _mm256_unpackhi_epi64(t2, t3),
            ];
        }
        for (half, pair) in rows.chunks_exact(2).enumerate() {
            for (r, (&g0, &g1)) in pair[0].iter().zip(&pair[1]).enumerate() {
                let low = _mm256_permute2x128_si256::<0x20>(g0, g1);
                let high = _mm256_permute2x128_si256::<0x31>(g0, g1);
                let p = out.as_mut_ptr().add(r * 64 + half * 32) as *mut __m256i;
                _mm256_storeu_si256(p, low);
                let p = out.as_mut_ptr().add((r + 4) * 64 + half * 32) as *mut __m256i;
                _mm256_storeu_si256(p, high);
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    std::thread_local! {
        /// Makes this thread's [`blocks8`] take the SSE2 path even where AVX2 is available.
        pub static SSE2_ONLY: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    }

    fn rfc_key() -> [u32; 8] {
        let mut key = [0u32; 8];
        for (i, k) in key.iter_mut().enumerate() {
            let b = (i * 4) as u8;
            *k = u32::from_le_bytes([b, b + 1, b + 2, b + 3]);
        }
        key
    }

    #[test]
    fn rfc8439_block_vector() {
        // RFC 8439 §2.3.2: key 00..1f, block count 1, nonce 00:00:00:09:00:00:00:4a:00:00:00:00.
        // Its 32-bit counter + 96-bit nonce lays out as words 12..15 = 1, 0x09000000, 0x4a000000, 0.
        let counter = 1u64 | (0x0900_0000u64 << 32);
        let mut out = [0u8; 256];
        blocks4(&rfc_key(), counter, [0x4a00_0000, 0], 20, &mut out);
        let expect: [u8; 64] = [
            0x10, 0xf1, 0xe7, 0xe4, 0xd1, 0x3b, 0x59, 0x15, 0x50, 0x0f, 0xdd, 0x1f, 0xa3, 0x20,
            0x71, 0xc4, 0xc7, 0xd1, 0xf4, 0xc7, 0x33, 0xc0, 0x68, 0x03, 0x04, 0x22, 0xaa, 0x9a,
            0xc3, 0xd4, 0x6c, 0x4e, 0xd2, 0x82, 0x64, 0x46, 0x07, 0x9f, 0xaa, 0x09, 0x14, 0xc2,
            0xd7, 0x05, 0xd9, 0x8b, 0x02, 0xa2, 0xb5, 0x12, 0x9c, 0xd1, 0xde, 0x16, 0x4e, 0xb9,
            0xcb, 0xd0, 0x83, 0xe8, 0xa2, 0x50, 0x3c, 0x4e,
        ];
        assert_eq!(&out[..64], &expect);
    }

    #[test]
    fn lanes_are_consecutive_blocks() {
        // Block 1 of a batch starting at counter c equals block 0 of a batch starting at c+1.
        let mut a = [0u8; 256];
        let mut b = [0u8; 256];
        blocks4(&rfc_key(), 41, [7, 9], STREAM_ROUNDS, &mut a);
        blocks4(&rfc_key(), 42, [7, 9], STREAM_ROUNDS, &mut b);
        assert_eq!(&a[64..256], &b[..192]);
    }

    #[test]
    fn avx2_and_sse2_give_the_same_blocks() {
        if !avx2() {
            eprintln!("no AVX2 here: only the SSE2 path runs");
            return;
        }
        let mut key = rfc_key();
        for (n, counter) in [0u64, 1, 5, 0xffff_fffc, 0xffff_ffff, u64::MAX - 3, 1 << 40]
            .into_iter()
            .enumerate()
        {
            key[n % 8] ^= 0x9e37_79b9u32.wrapping_mul(n as u32 + 1);
            let nonce = [n as u32 * 77, !(n as u32)];
            for rounds in [STREAM_ROUNDS, 20] {
                let mut a = [0u8; 512];
                let mut b = [1u8; 512];
                blocks8_sse2(&key, counter, nonce, rounds, &mut a);
                // SAFETY: avx2() said yes.
                unsafe { blocks8_avx2(&key, counter, nonce, rounds, &mut b) };
                assert_eq!(a, b, "counter {counter:#x}, {rounds} rounds");
            }
        }
    }
}
