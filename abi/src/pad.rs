//! The stack pad's entries as tails of constants: what the launcher's and the shim's execs
//! append to an environment ([`crate::settings::pad_entry_len`] says how long), without
//! writing (or faulting in) a page for them. The kernel copies the bytes from here.
//!
//! One short entry (`xxx…LIBSEAL_PAD=`, at most 64 bytes), or a long one whose name comes
//! first (`LIBSEAL_PAD=LIBSEAL_PAD=…`, a tail of 12k+1 bytes of a periodic constant) and a
//! short one for the rest: glibc's loader reads every entry's name up to its `=` byte by byte,
//! and a 60 KiB name cost ~20 µs of every exec.

use crate::settings::{pad_entry_len, LAYOUT_BLOCK};

/// The pad's name and `=`; the end of a short pad entry, the period of a long one.
pub const PAD_TAIL: &[u8] = b"LIBSEAL_PAD=";

/// `xxx…LIBSEAL_PAD=` and its NUL, 64 bytes: a short pad entry of `len` bytes is its last
/// `len` bytes (13 at least).
pub static SHORT_PAD: [u8; 64] = tail_text();

/// `LIBSEAL_PAD=` repeated and a NUL, longer than any pad ([`pad_entry_len`] stays below
/// `LAYOUT_BLOCK + 64`): a long pad entry of `12k + 1` bytes is its last `12k + 1` bytes,
/// whose name ends at its first `=`.
pub static LONG_PAD: [u8; LONG_PAD_LEN] = periodic_text();
const LONG_PAD_LEN: usize = (LAYOUT_BLOCK + 64).div_ceil(12) * 12 + 1;

const fn tail_text<const N: usize>() -> [u8; N] {
    let mut t = [b'x'; N];
    let mut i = 0;
    while i < PAD_TAIL.len() {
        t[N - 1 - PAD_TAIL.len() + i] = PAD_TAIL[i];
        i += 1;
    }
    t[N - 1] = 0;
    t
}

const fn periodic_text<const N: usize>() -> [u8; N] {
    let mut t = [0u8; N];
    let mut i = 0;
    while i + 1 < N {
        t[i] = PAD_TAIL[i % PAD_TAIL.len()];
        i += 1;
    }
    t
}

/// A short pad entry of `len` bytes (`13..=64`), NUL included.
pub fn short_pad(len: usize) -> Option<&'static [u8]> {
    (PAD_TAIL.len() < len && len <= SHORT_PAD.len()).then(|| &SHORT_PAD[SHORT_PAD.len() - len..])
}

/// A long pad entry of `len` bytes (NUL included), when the constant holds one.
pub fn long_pad(len: usize) -> Option<&'static [u8]> {
    (len <= LONG_PAD.len() && len >= 1 && (len - 1).is_multiple_of(PAD_TAIL.len()))
        .then(|| &LONG_PAD[LONG_PAD.len() - len..])
}

/// The pad for an environment: `strings` bytes and `pointers` arguments and entries before it
/// (as [`pad_entry_len`] counts them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pad {
    One(&'static [u8]),
    Two(&'static [u8], &'static [u8]),
    /// A long entry the constant does not hold, to be written (`LIBSEAL_PAD=xxx…`, this many
    /// bytes with its NUL), then the short one.
    Written(usize, &'static [u8]),
}

pub fn plan(strings: usize, pointers: usize) -> Pad {
    let single = pad_entry_len(strings, pointers);
    if let Some(one) = short_pad(single) {
        return Pad::One(one);
    }
    let total = pad_entry_len(strings, pointers + 1);
    let n = PAD_TAIL.len();
    let short_len = n + 1 + (total - n - 2) % n;
    // total - short_len is 12k + 1 by construction: the constant's tail unless past it.
    let short = &SHORT_PAD[SHORT_PAD.len() - short_len..];
    match long_pad(total - short_len) {
        Some(long) => Pad::Two(long, short),
        None => Pad::Written(total - short_len, short),
    }
}

impl Pad {
    /// Bytes the pad adds to the strings, and the entries it adds.
    pub fn size(&self) -> (usize, usize) {
        match self {
            Pad::One(a) => (a.len(), 1),
            Pad::Two(a, b) => (a.len() + b.len(), 2),
            Pad::Written(n, b) => (n + b.len(), 2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plan_makes_one_total() {
        let mut totals = [0usize; 2];
        for (i, strings) in (100..3 * LAYOUT_BLOCK).step_by(97).enumerate() {
            let pointers = 20 + i % 37;
            let p = plan(strings, pointers);
            assert!(!matches!(p, Pad::Written(..)), "{strings}: {p:?}");
            let (bytes, n) = p.size();
            let ptrs = pointers + n;
            let total = strings + bytes + 8 * (ptrs + ptrs % 2);
            assert_eq!((total - 8) % LAYOUT_BLOCK, 0, "{strings} {pointers}: {p:?}");
            match p {
                Pad::One(a) => {
                    assert!(a.ends_with(b"LIBSEAL_PAD=\0"));
                    totals[0] += 1;
                }
                Pad::Two(a, b) => {
                    assert!(a.starts_with(PAD_TAIL) && a.ends_with(b"\0"));
                    assert!(b.ends_with(b"LIBSEAL_PAD=\0"));
                    totals[1] += 1;
                }
                Pad::Written(..) => unreachable!(),
            }
        }
        assert!(totals[0] > 0 && totals[1] > 0, "{totals:?}");
    }
}
