//! ChaCha20 (Bernstein's original 64-bit counter / 64-bit nonce layout), four blocks at a time.
//!
//! Written here rather than taken from the `chacha20` crate because the shim keeps per-thread
//! state in `const`-initialised `Copy` thread locals (DESIGN.md's shim rules); the crate's
//! cipher types are neither. Four independent lanes per step let LLVM use SSE2 on every
//! x86_64. Checked against the RFC 8439 §2.3.2 block test vector below.

const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];

type Lanes = [u32; 4];

#[inline(always)]
fn add(a: Lanes, b: Lanes) -> Lanes {
    [
        a[0].wrapping_add(b[0]),
        a[1].wrapping_add(b[1]),
        a[2].wrapping_add(b[2]),
        a[3].wrapping_add(b[3]),
    ]
}
#[inline(always)]
fn xor_rot(a: Lanes, b: Lanes, r: u32) -> Lanes {
    [
        (a[0] ^ b[0]).rotate_left(r),
        (a[1] ^ b[1]).rotate_left(r),
        (a[2] ^ b[2]).rotate_left(r),
        (a[3] ^ b[3]).rotate_left(r),
    ]
}

#[inline(always)]
fn quarter(x: &mut [Lanes; 16], a: usize, b: usize, c: usize, d: usize) {
    x[a] = add(x[a], x[b]);
    x[d] = xor_rot(x[d], x[a], 16);
    x[c] = add(x[c], x[d]);
    x[b] = xor_rot(x[b], x[c], 12);
    x[a] = add(x[a], x[b]);
    x[d] = xor_rot(x[d], x[a], 8);
    x[c] = add(x[c], x[d]);
    x[b] = xor_rot(x[b], x[c], 7);
}

/// Writes the keystream blocks `counter .. counter+4` (256 bytes) into `out`.
/// `words12_15` are state words 12..15 apart from the counter: `[_, _, nonce0, nonce1]`; the
/// 64-bit counter occupies words 12 and 13.
pub fn blocks4(key: &[u32; 8], counter: u64, nonce: [u32; 2], out: &mut [u8; 256]) {
    let mut init = [[0u32; 4]; 16];
    for (i, w) in SIGMA.iter().enumerate() {
        init[i] = [*w; 4];
    }
    for (i, w) in key.iter().enumerate() {
        init[4 + i] = [*w; 4];
    }
    for lane in 0..4 {
        let c = counter.wrapping_add(lane as u64);
        init[12][lane] = c as u32;
        init[13][lane] = (c >> 32) as u32;
    }
    init[14] = [nonce[0]; 4];
    init[15] = [nonce[1]; 4];
    let mut x = init;
    for _ in 0..10 {
        quarter(&mut x, 0, 4, 8, 12);
        quarter(&mut x, 1, 5, 9, 13);
        quarter(&mut x, 2, 6, 10, 14);
        quarter(&mut x, 3, 7, 11, 15);
        quarter(&mut x, 0, 5, 10, 15);
        quarter(&mut x, 1, 6, 11, 12);
        quarter(&mut x, 2, 7, 8, 13);
        quarter(&mut x, 3, 4, 9, 14);
    }
    for (w, (xi, ii)) in x.iter().zip(init.iter()).enumerate() {
        let v = add(*xi, *ii);
        for lane in 0..4 {
            let o = lane * 64 + w * 4;
            out[o..o + 4].copy_from_slice(&v[lane].to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc8439_block_vector() {
        // RFC 8439 §2.3.2: key 00..1f, block count 1, nonce 00:00:00:09:00:00:00:4a:00:00:00:00.
        // Its 32-bit counter + 96-bit nonce lays out as words 12..15 = 1, 0x09000000, 0x4a000000, 0.
        let mut key = [0u32; 8];
        for (i, k) in key.iter_mut().enumerate() {
            let b = (i * 4) as u32;
            *k = u32::from_le_bytes([b as u8, (b + 1) as u8, (b + 2) as u8, (b + 3) as u8]);
        }
        let counter = 1u64 | (0x0900_0000u64 << 32);
        let mut out = [0u8; 256];
        blocks4(&key, counter, [0x4a00_0000, 0], &mut out);
        let expect: [u8; 16] = [
            0x10, 0xf1, 0xe7, 0xe4, 0xd1, 0x3b, 0x59, 0x15, 0x50, 0x0f, 0xdd, 0x1f, 0xa3, 0x20,
            0x71, 0xc4,
        ];
        assert_eq!(&out[..16], &expect);
        let tail: [u8; 8] = [0xb5, 0x12, 0x9c, 0xd1, 0xde, 0x16, 0x4e, 0xb9];
        assert_eq!(&out[48..56], &tail);
    }
}
