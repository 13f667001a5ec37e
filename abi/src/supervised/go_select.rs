//! A Go `select`'s order made one sequence per process: the copy of the scheduler's
//! per-thread generator that the compiler inlined into `runtime.selectgo`, which draws the
//! random permutation (`pollorder`) in which a `select` polls its cases, so which of several
//! ready cases it takes.
//!
//! Go 1.19–1.21 inline `fastrandn` (wyrand on the M's 64-bit `m.fastrand`); Go 1.22 and later
//! `cheaprandn` (Go 1.23: the same wyrand on `m.cheaprand`; Go 1.27: a 32-bit wyrand). Checked
//! with `go tool objdump` (esbuild's Go 1.23.12 with `objdump`), each a loop of one copy:
//!
//! ```text
//! Go 1.19.8, 1.21.13 (1.23.12: 0x648)      Go 1.27.3
//! MOVQ 0x30(R14), Rm     ; m = g.m         MOVQ 0x30(R14), Rm
//! MOVQ 0x120(Rm), Rs     ; s = m.fastrand  MOVL 0x668(Rm), Rs  ; s = m.cheaprand
//! MOVQ $0xa0761d6478bd642f, Rk             ADDL $0x53c5ca59, Rs ; s += K32
//! ADDQ Rk, Rs            ; s += K          ...
//! ...                                      MOVL Rx, 0x668(Rm)  ; m.cheaprand = s
//! MOVQ Rs, 0x120(Rm)     ; m.fastrand = s
//! ```
//!
//! The state load (the site) becomes a jump to a trampoline of [`super::go_wyrand`] on a
//! counter and key of its own ([`COUNT_AT`], [`KEY_AT`]): the select draws are one wyrand
//! sequence per process, apart from the map code's, so that a program's map order does not
//! move with the number of selects it made before, nor its select order with its maps.
//!
//! A site is taken only in exactly these shapes: the load of `g.m` right before, a
//! displacement below 4096 from that register, the add of wyrand's increment into the loaded
//! register right after, and a store of a register back to the same field within
//! [`STORE_WITHIN`] bytes. Every increment constant in the function must belong to a site so
//! taken, else the function is left alone (its select order stays per thread, as the
//! `partly sealed` line says).

use super::go_site::u32_at;
use super::go_wyrand::{Site, NARROW, SHORT, WY_ADD32};

/// How many inlined copies of `selectgo` are redirected at most.
pub const MAX_SITES: usize = 2;
/// Where the select sequence's key is in the code page (after the map code's key and `K`).
pub const KEY_AT: usize = super::go_wyrand::KEY_AT + 16;
/// The select sequence's counter, in the counters' page.
pub const COUNT_AT: usize = 4096 + 192;
/// How far after the load the store back into the same field may be.
const STORE_WITHIN: usize = 96;

/// The inlined copies in `selectgo`'s body `body` (linked at `func`): `None` when there are
/// none, more than [`MAX_SITES`], or an increment constant not in a known shape.
pub fn scan(body: &[u8], func: u64) -> Option<[Site; MAX_SITES]> {
    let k64 = super::go_wyrand::increment().to_le_bytes();
    let k32 = WY_ADD32.to_le_bytes();
    let constants = body.windows(8).filter(|w| *w == k64).count()
        + body.windows(4).filter(|w| *w == k32).count();
    let mut out = [(0u64, 0u8); MAX_SITES];
    let mut n = 0;
    for i in 0..body.len().saturating_sub(4) {
        let Some(site) = gm_load(&body[i..]).and_then(|rm| copy_at(&body[i + 4..], rm)) else {
            continue;
        };
        *out.get_mut(n)? = (func + (i + 4) as u64, site);
        n += 1;
    }
    (n > 0 && n == constants).then_some(out)
}

/// `MOVQ 0x30(R14), Rm` (`g.m`, 4 bytes) at the start of `b`: `Rm`.
fn gm_load(b: &[u8]) -> Option<u8> {
    let b = b.get(..4)?;
    let (rex, modrm) = (b[0], b[2]);
    let ok = (rex == 0x49 || rex == 0x4d) && b[1] == 0x8b && modrm & 0xc7 == 0x46 && b[3] == 0x30;
    ok.then_some(((modrm >> 3) & 7) | ((rex & 4) << 1))
}

/// A `MOV` (`op` 8B: a load into `reg`; 89: a store from it) of `disp32(Rm)` at the start of
/// `b`, 64-bit when `wide` (REX.W), else 32-bit (a REX prefix only where a register needs
/// one): `(length, reg, disp)`.
fn mov_mem(b: &[u8], op: u8, rm: u8, wide: bool) -> Option<(usize, u8, u32)> {
    let (rex, at) = match *b.first()? {
        r if r & 0xf0 == 0x40 => (r, 1),
        _ => (0, 0),
    };
    let modrm = *b.get(at + 1)?;
    let ok = rex & 2 == 0
        && (rex & 8 != 0) == wide
        && b[at] == op
        && modrm >> 6 == 2
        && (modrm & 7) | ((rex & 1) << 3) == rm;
    let reg = ((modrm >> 3) & 7) | ((rex & 4) << 1);
    ok.then_some((at + 6, reg, u32_at(b, at + 2)?))
}

/// The inlined copy whose state load starts `b`, its M in `Rm`: the [`Site`] register and
/// flags.
fn copy_at(b: &[u8], rm: u8) -> Option<u8> {
    if rm & 7 == 4 {
        return None;
    }
    let wide = b.first()? & 0xf8 == 0x48;
    let (len, rs, disp) = mov_mem(b, 0x8b, rm, wide)?;
    if disp >= 0x1000 || rs == rm || rs == 4 {
        return None;
    }
    let rest = &b[len..];
    let add = if wide {
        // MOVQ $K, Rk; ADDQ Rk, Rs.
        let k = super::go_wyrand::increment().to_le_bytes();
        let (krex, op) = (*rest.first()?, *rest.get(1)?);
        let rk = op.wrapping_sub(0xb8) | ((krex & 1) << 3);
        let addq = [
            0x48 | ((rk >> 3) << 2) | (rs >> 3),
            0x01,
            0xc0 | ((rk & 7) << 3) | (rs & 7),
        ];
        let ok = (krex == 0x48 || krex == 0x49)
            && (0xb8..0xc0).contains(&op)
            && rest.get(2..10)? == k
            && rk != rs
            && rest.get(10..13)? == addq;
        ok.then_some(13)?
    } else {
        // ADDL $K32, Rs.
        let at = usize::from(rs >= 8);
        let ok = (rs < 8 || rest.first() == Some(&0x41))
            && rest.get(at..at + 2)? == [0x81, 0xc0 | (rs & 7)]
            && rest.get(at + 2..at + 6)? == WY_ADD32.to_le_bytes();
        ok.then_some(at + 6)?
    };
    // The store back into the same field.
    let after = rest.get(add..)?;
    let stored = (0..after.len().min(STORE_WITHIN))
        .any(|j| mov_mem(&after[j..], 0x89, rm, wide).is_some_and(|m| m.2 == disp));
    let flags = if wide { 0 } else { NARROW } | if len == 6 { SHORT } else { 0 };
    stored.then_some(rs | flags)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    use super::super::go_wyrand::{rwx_pages, trampoline, TRAMPOLINES_AT, TRAMPOLINE_BYTES};
    use super::*;

    /// `selectgo`'s copy as Go 1.19.8 compiled it (static, amd64), from the `g.m` load to the
    /// store back.
    const GO119: &[u8] = &[
        0x4d, 0x8b, 0x56, 0x30, // MOVQ 0x30(R14), R10
        0x4d, 0x8b, 0xaa, 0x20, 0x01, 0x00, 0x00, // MOVQ 0x120(R10), R13
        0x49, 0xbf, 0x2f, 0x64, 0xbd, 0x78, 0x64, 0x1d, 0x76, 0xa0, // MOVQ $K, R15
        0x4d, 0x01, 0xfd, // ADDQ R15, R13
        0x49, 0xb9, 0xdb, 0x28, 0xb4, 0xa0, 0xd1, 0x7e, 0x03, 0xe7, // MOVQ $K2, R9
        0x4d, 0x31, 0xe9, // XORQ R13, R9
        0x4c, 0x89, 0xe8, // MOVQ R13, AX
        0x49, 0xf7, 0xe1, // MULQ R9
        0x4d, 0x89, 0xaa, 0x20, 0x01, 0x00, 0x00, // MOVQ R13, 0x120(R10)
    ];

    /// Go 1.21.13's (static and cgo alike).
    const GO121: &[u8] = &[
        0x4d, 0x8b, 0x7e, 0x30, // MOVQ 0x30(R14), R15
        0x49, 0x8b, 0xb7, 0x20, 0x01, 0x00, 0x00, // MOVQ 0x120(R15), SI
        0x49, 0xb9, 0x2f, 0x64, 0xbd, 0x78, 0x64, 0x1d, 0x76, 0xa0, // MOVQ $K, R9
        0x4c, 0x01, 0xce, // ADDQ R9, SI
        0x49, 0xb9, 0xdb, 0x28, 0xb4, 0xa0, 0xd1, 0x7e, 0x03, 0xe7, // MOVQ $K2, R9
        0x49, 0x31, 0xf1, // XORQ SI, R9
        0x48, 0x89, 0xf0, // MOVQ SI, AX
        0x49, 0xf7, 0xe1, // MULQ R9
        0x48, 0x31, 0xd0, // XORQ DX, AX
        0x89, 0xc0, // MOVL AX, AX
        0x49, 0x0f, 0xaf, 0xc5, // IMULQ R13, AX
        0x48, 0xc1, 0xe8, 0x20, // SHRQ $0x20, AX
        0x49, 0x89, 0xb7, 0x20, 0x01, 0x00, 0x00, // MOVQ SI, 0x120(R15)
    ];

    /// Go 1.23.12's, from esbuild 0.25.12 (stripped, from npm): Go 1.21's shape, on
    /// `m.cheaprand`.
    const GO123: &[u8] = &[
        0x4d, 0x8b, 0x7e, 0x30, // MOVQ 0x30(R14), R15
        0x49, 0x8b, 0xb7, 0x48, 0x06, 0x00, 0x00, // MOVQ 0x648(R15), SI
        0x49, 0xb9, 0x2f, 0x64, 0xbd, 0x78, 0x64, 0x1d, 0x76, 0xa0, // MOVQ $K, R9
        0x4c, 0x01, 0xce, // ADDQ R9, SI
        0x49, 0xb9, 0xdb, 0x28, 0xb4, 0xa0, 0xd1, 0x7e, 0x03, 0xe7, // MOVQ $K2, R9
        0x49, 0x31, 0xf1, // XORQ SI, R9
        0x48, 0x89, 0xf0, // MOVQ SI, AX
        0x49, 0xf7, 0xe1, // MULQ R9
        0x48, 0x31, 0xd0, // XORQ DX, AX
        0x89, 0xc0, // MOVL AX, AX
        0x49, 0x0f, 0xaf, 0xc5, // IMULQ R13, AX
        0x48, 0xc1, 0xe8, 0x20, // SHRQ $0x20, AX
        0x49, 0x89, 0xb7, 0x48, 0x06, 0x00, 0x00, // MOVQ SI, 0x648(R15)
    ];

    /// Go 1.27.3's (`cheaprandn`: 32-bit wyrand on `m.cheaprand`).
    const GO127: &[u8] = &[
        0x4d, 0x8b, 0x7e, 0x30, // MOVQ 0x30(R14), R15
        0x41, 0x8b, 0xb7, 0x68, 0x06, 0x00, 0x00, // MOVL 0x668(R15), SI
        0x81, 0xc6, 0x59, 0xca, 0xc5, 0x53, // ADDL $0x53c5ca59, SI
        0x89, 0x74, 0x24, 0x3c, // MOVL SI, 0x3c(SP)
        0x81, 0xf6, 0x1b, 0x3c, 0x74, 0x74, // XORL $0x74743c1b, SI
        0x8b, 0x54, 0x24, 0x3c, // MOVL 0x3c(SP), DX
        0x48, 0x0f, 0xaf, 0xf2, // IMULQ DX, SI
        0x48, 0x89, 0x74, 0x24, 0x40, // MOVQ SI, 0x40(SP)
        0x48, 0xc1, 0xee, 0x20, // SHRQ $0x20, SI
        0x4c, 0x8b, 0x4c, 0x24, 0x40, // MOVQ 0x40(SP), R9
        0x44, 0x31, 0xce, // XORL R9, SI
        0x4c, 0x0f, 0xaf, 0xee, // IMULQ SI, R13
        0x49, 0xc1, 0xed, 0x20, // SHRQ $0x20, R13
        0x41, 0x89, 0x97, 0x68, 0x06, 0x00, 0x00, // MOVL DX, 0x668(R15)
    ];

    /// Some code around `copy`, as a function body would have it.
    fn body(copy: &[u8]) -> Vec<u8> {
        let mut b = vec![0x90; 16];
        b.extend_from_slice(copy);
        b.extend_from_slice(&[0x90; 16]);
        b
    }

    #[test]
    fn each_versions_copy_is_found_with_its_register() {
        let one = |r| [(0x1000 + 16 + 4, r), (0, 0)];
        assert_eq!(scan(&body(GO119), 0x1000), Some(one(13)), "R13");
        assert_eq!(scan(&body(GO121), 0x1000), Some(one(6)), "SI");
        assert_eq!(scan(&body(GO123), 0x1000), Some(one(6)), "SI, cheaprand");
        assert_eq!(
            scan(&body(GO127), 0x1000),
            Some(one(6 | NARROW)),
            "SI, 32-bit"
        );
        // Two copies (an unrolled loop) are both taken; a third is more than this takes.
        let two = body(&[GO127, GO127].concat());
        let at2 = 0x1000 + 16 + GO127.len() as u64 + 4;
        assert_eq!(scan(&two, 0x1000).unwrap()[1], (at2, 6 | NARROW));
        assert_eq!(scan(&body(&[GO121; 3].concat()), 0x1000), None);
    }

    #[test]
    fn a_copy_in_any_other_shape_leaves_the_function_alone() {
        assert_eq!(scan(&body(&[]), 0x1000), None, "no copy");
        // The increment again, elsewhere: a copy of a shape not known.
        let mut extra = body(GO121);
        extra.extend_from_slice(&GO121[13..21]);
        assert_eq!(scan(&extra, 0x1000), None);
        let changed = |at: usize, v: u8| {
            let mut c = GO127.to_vec();
            c[at] = v;
            scan(&body(&c), 0x1000)
        };
        // No g.m load before (0x38(R14) is not g.m).
        assert_eq!(changed(3, 0x38), None);
        // A load through another register than g.m's.
        assert_eq!(changed(6, 0xb6), None);
        // Another increment.
        assert_eq!(changed(13, 0x5a), None);
        // The add into another register than the load's.
        assert_eq!(changed(12, 0xc7), None);
        // The store back into another field.
        let n = GO127.len();
        assert_eq!(changed(n - 4, 0x07), None);
        // Into the same field through another register.
        assert_eq!(changed(n - 5, 0x96), None);
        // The same for the 64-bit shape: the ADDQ into another register, the store elsewhere.
        let mut c = GO121.to_vec();
        c[23] = 0xcf;
        assert_eq!(scan(&body(&c), 0x1000), None);
        let mut c = GO121.to_vec();
        let n = c.len();
        c[n - 3] = 0x02;
        assert_eq!(scan(&body(&c), 0x1000), None);
        // A load of the g itself, 64-bit into a 32-bit state's shape: no.
        let mut c = GO127.to_vec();
        c[4] = 0x49;
        assert_eq!(scan(&body(&c), 0x1000), None);
    }

    /// 32-bit trampolines, run after the load each replaced (7 bytes into R9, 6 into ESI):
    /// each gives the register the next state of the sequence, zero-extended, and comes
    /// back past the load.
    #[test]
    fn a_narrow_trampoline_draws_the_shared_state_on_32_bits() {
        let page = rwx_pages();
        let base = page.as_mut_ptr();
        let b = base as u64;
        // Two "functions": at 0, `mov r9, -1`, a 7-byte slot, `mov rax, r9; ret`; at 64,
        // `mov rsi, -1`, a 6-byte slot, `mov rax, rsi; ret`.
        page[..7].copy_from_slice(&[0x49, 0xc7, 0xc1, 0xff, 0xff, 0xff, 0xff]);
        page[7..14].fill(0x90);
        page[14..18].copy_from_slice(&[0x4c, 0x89, 0xc8, 0xc3]);
        page[64..71].copy_from_slice(&[0x48, 0xc7, 0xc6, 0xff, 0xff, 0xff, 0xff]);
        page[71..77].fill(0x90);
        page[77..81].copy_from_slice(&[0x48, 0x89, 0xf0, 0xc3]);
        let key = 0xdead_beef_0000_0005u64;
        page[KEY_AT..KEY_AT + 8].copy_from_slice(&key.to_le_bytes());
        let (count, key_at) = (b + COUNT_AT as u64, b + KEY_AT as u64);
        for (i, site) in [(b + 7, 9 | NARROW), (b + 71, 6 | NARROW | SHORT)]
            .into_iter()
            .enumerate()
        {
            let at = TRAMPOLINES_AT + i * TRAMPOLINE_BYTES;
            let t = b + at as u64;
            trampoline(&mut page[at..], t, site, count, key_at).unwrap();
            let jmp = super::super::go_rand::jmp_rel32(site.0, t).unwrap();
            let s = (site.0 - b) as usize;
            page[s..s + 5].copy_from_slice(&jmp);
        }
        let f = |at: usize| {
            // SAFETY: the code just written: clobbers r9 or rsi, rax and the flags, then
            // returns.
            unsafe { core::mem::transmute::<*mut u8, extern "C" fn() -> u64>(base.add(at))() }
        };
        let nth = |n: u32| u64::from(5u32.wrapping_add(WY_ADD32.wrapping_mul(n)));
        assert_eq!(f(0), nth(0));
        assert_eq!(f(64), nth(1));
        assert_eq!(f(0), nth(2));
        assert_eq!(f(64), nth(3));
    }
}
