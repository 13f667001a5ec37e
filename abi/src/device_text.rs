//! What the sealed random files hold, computed the same by libseal and by the static-image
//! supervisor: a version-4 uuid line, and the run's boot id (one per seed), so a dynamic
//! program and a static one of a run read the same `/proc/sys/kernel/random/boot_id`.
//!
//! The boot id is the first 16 bytes of the entropy stream libseal keys for it (ChaCha12,
//! Bernstein's 64-bit counter and nonce layout, the key from the seed). libseal's streams
//! compute it with SSE2/AVX2, eight blocks at a time; one scalar block here is enough for 16
//! bytes (libseal's unit tests check the two agree).

/// ChaCha's constant words ("expand 32-byte k").
const SIGMA: [u32; 4] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];
/// Rounds of libseal's entropy streams.
pub const STREAM_ROUNDS: usize = 12;
/// Stream id of the run's boot id.
pub const BOOT_ID_STREAM: u64 = 0xb007_1d00_5ea1_0001;

/// The ChaCha key of the entropy streams of `seed`.
pub fn stream_key(seed: u64) -> [u32; 8] {
    let mut key = [0u32; 8];
    let mut i = 0;
    while i < 4 {
        let w = crate::mix64(seed ^ 0x6a09_e667_f3bc_c908u64.wrapping_mul(i as u64 + 1));
        key[2 * i] = w as u32;
        key[2 * i + 1] = (w >> 32) as u32;
        i += 1;
    }
    key
}

/// Keystream block `counter` of (`key`, `nonce`) with `rounds` rounds.
pub fn block(key: &[u32; 8], counter: u64, nonce: [u32; 2], rounds: usize) -> [u8; 64] {
    let init = [
        SIGMA[0],
        SIGMA[1],
        SIGMA[2],
        SIGMA[3],
        key[0],
        key[1],
        key[2],
        key[3],
        key[4],
        key[5],
        key[6],
        key[7],
        counter as u32,
        (counter >> 32) as u32,
        nonce[0],
        nonce[1],
    ];
    let mut x = init;
    let q = |x: &mut [u32; 16], a: usize, b: usize, c: usize, d: usize| {
        x[a] = x[a].wrapping_add(x[b]);
        x[d] = (x[d] ^ x[a]).rotate_left(16);
        x[c] = x[c].wrapping_add(x[d]);
        x[b] = (x[b] ^ x[c]).rotate_left(12);
        x[a] = x[a].wrapping_add(x[b]);
        x[d] = (x[d] ^ x[a]).rotate_left(8);
        x[c] = x[c].wrapping_add(x[d]);
        x[b] = (x[b] ^ x[c]).rotate_left(7);
    };
    for _ in 0..rounds / 2 {
        q(&mut x, 0, 4, 8, 12);
        q(&mut x, 1, 5, 9, 13);
        q(&mut x, 2, 6, 10, 14);
        q(&mut x, 3, 7, 11, 15);
        q(&mut x, 0, 5, 10, 15);
        q(&mut x, 1, 6, 11, 12);
        q(&mut x, 2, 7, 8, 13);
        q(&mut x, 3, 4, 9, 14);
    }
    let mut out = [0u8; 64];
    for i in 0..16 {
        out[4 * i..4 * i + 4].copy_from_slice(&x[i].wrapping_add(init[i]).to_le_bytes());
    }
    out
}

/// Formats 16 random bytes as a version-4 uuid line (`8-4-4-4-12\n`, lowercase).
pub fn uuid_text(mut b: [u8; 16]) -> [u8; 37] {
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let mut out = [0u8; 37];
    let mut o = 0;
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out[o] = b'-';
            o += 1;
        }
        for nib in [byte >> 4, byte & 0xf] {
            out[o] = if nib < 10 {
                b'0' + nib
            } else {
                b'a' + nib - 10
            };
            o += 1;
        }
    }
    out[36] = b'\n';
    out
}

/// The run's boot id (one per seed), as a uuid line.
pub fn boot_id(seed: u64) -> [u8; 37] {
    let id = BOOT_ID_STREAM;
    let b = block(
        &stream_key(seed),
        0,
        [id as u32, (id >> 32) as u32],
        STREAM_ROUNDS,
    );
    let mut first = [0u8; 16];
    first.copy_from_slice(&b[..16]);
    uuid_text(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chacha20_matches_rfc_8439s_block_test_vector() {
        // RFC 8439 §2.3.2 uses a 32-bit counter and 96-bit nonce: counter 1 and nonce
        // 00000009 0000004a 00000000 are, in the 64/64 layout, counter (0x09 << 32 | 1)
        // and nonce [0x4a000000, 0].
        let key: [u32; 8] = core::array::from_fn(|i| {
            u32::from_le_bytes([
                4 * i as u8,
                4 * i as u8 + 1,
                4 * i as u8 + 2,
                4 * i as u8 + 3,
            ])
        });
        let out = block(&key, 1 | (0x0900_0000u64 << 32), [0x4a00_0000, 0], 20);
        assert_eq!(
            &out[..16],
            &[
                0x10, 0xf1, 0xe7, 0xe4, 0xd1, 0x3b, 0x59, 0x15, 0x50, 0x0f, 0xdd, 0x1f, 0xa3, 0x20,
                0x71, 0xc4
            ]
        );
    }

    #[test]
    fn uuid_text_is_v4() {
        assert_eq!(
            &uuid_text([0xff; 16]),
            b"ffffffff-ffff-4fff-bfff-ffffffffffff\n"
        );
        assert_eq!(
            &uuid_text([0; 16]),
            b"00000000-0000-4000-8000-000000000000\n"
        );
    }
}
