//! ChaCha (Bernstein's original 64-bit counter / 64-bit nonce layout), four blocks at a time
//! with SSE2, which every x86_64 CPU has (no run-time detection needed).
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
pub const STREAM_ROUNDS: usize = 12;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
