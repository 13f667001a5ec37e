//! Go 1.19–1.21's map order made one sequence per process: the copies of `fastrand` the
//! compiler inlined into the map code (`mapiterinit`'s start bucket and offset, `makemap`'s
//! and `mapclear`'s hash seed), which the redirected out-of-line `fastrand` ([`super::go_rand`])
//! does not reach.
//!
//! Each inlined copy is wyrand on a per-thread state, `m.fastrand`:
//!
//! ```text
//! MOVQ  0x120(Rm), Rs            ; s = getg().m.fastrand           (the load: 7 bytes)
//! MOVQ  $0xa0761d6478bd642f, Rk  ; s += K
//! LEAQ  (Rk)(Rs*1), Rn
//! ...                            ; m.fastrand = s; hi, lo = s * (s ^ K2); hi ^ lo
//! ```
//!
//! So which values a map gets depends on which thread runs its goroutine and what that thread
//! drew before. Here the load is replaced with a `jmp rel32` to a trampoline that gives `Rs`
//! a process-wide state instead: `Rs = K; lock xadd [counter], Rs; Rs += key`, then jumps
//! back to the instruction after the load. The inlined code goes on as compiled (it still
//! stores its new state into `m.fastrand`, which nothing patched reads as a sequence), and
//! every draw of the map code is the next step of one wyrand sequence keyed per process, as
//! Go 1.22's `runtime.rand` is made ([`super::go_rand`]). No stack is used and only `Rs` and
//! the flags are written, which the load and the `LEAQ`/`MULQ` after it write anyway.
//!
//! A site is taken only when the load, the `MOVQ $K` right after it and the `LEAQ` that adds
//! the two are exactly as above, with one `m.fastrand` offset for all of them; anything else
//! leaves the function alone (its map order stays per thread, as said on stderr).

use super::go_site::u32_at;

/// wyrand's increment, the constant each inlined copy adds to its state.
const WY_ADD: u64 = 0xa076_1d64_78bd_642f;
/// How many inlined copies are redirected at most.
pub const MAX_SITES: usize = 24;
/// Where the trampolines start in the code page, and each one's room.
pub const TRAMPOLINES_AT: usize = 1024;
pub const TRAMPOLINE_BYTES: usize = 64;
/// Where the sequence's key is in the code page, followed by `K` (the `ADDQ` shape's).
pub const KEY_AT: usize = 3584;
/// wyrand's increment, as [`KEY_AT`]'s second word holds it.
pub const fn increment() -> u64 {
    WY_ADD
}
/// The sequence's counter, in the counters' page.
pub const COUNT_AT: usize = 4096 + 128;
/// The functions whose inlined copies are redirected: the map code's (the first must have
/// some: iteration order), each other one where its copies are in shape.
pub const FUNCTIONS: [&[u8]; 11] = [
    b"runtime.mapiterinit",
    b"runtime.makemap",
    b"runtime.makemap_small",
    b"runtime.mapclear",
    b"runtime.mapdelete",
    b"runtime.mapdelete_fast32",
    b"runtime.mapdelete_fast64",
    b"runtime.mapdelete_faststr",
    b"runtime.(*hmap).newoverflow",
    b"runtime.f32hash",
    b"runtime.f64hash",
];

/// An inlined copy: the address of its 7-byte state load, and the register it loads (0–15).
pub type Site = (u64, u8);

/// [`Site`]'s register flag for the second shape, `MOVQ $K, Rs; ADDQ disp32(Rm), Rs` (the
/// load folded into the add, `makemap`'s): its site is the `ADDQ`, which leaves `s + K` in
/// `Rs`.
pub const ADDS: u8 = 0x10;
/// [`Site`]'s register flag for a 32-bit state (`MOVL disp32(Rm), Rs`, Go 1.22 and later's
/// `cheaprand`, [`super::go_select`]): the trampoline gives `Rs` the low half of the
/// sequence's state, zero-extended as the `MOVL` would, stepping by [`WY_ADD32`].
pub const NARROW: u8 = 0x20;
/// [`Site`]'s flag for a 6-byte load (no REX prefix): the trampoline returns 6 bytes on.
pub const SHORT: u8 = 0x40;
/// The 32-bit wyrand's increment (Go 1.22 and later's `cheaprand`).
pub const WY_ADD32: u32 = 0x53c5_ca59;

/// The copies in function body `body` (linked at `func`) appended to `out` from `n`, their
/// `m.fastrand` offset checked against (or, the first, recorded in) `off`: the new count;
/// `None` when a copy is not in either expected shape or there are more than `out` holds.
pub fn scan(
    body: &[u8],
    func: u64,
    out: &mut [Site],
    mut n: usize,
    off: &mut u32,
) -> Option<usize> {
    let k = WY_ADD.to_le_bytes();
    for i in 0..body.len().saturating_sub(17) {
        // MOVQ $K, Rk: REX.W (+B), B8+rk, imm64.
        let (rex, op) = (body[i], body[i + 1]);
        if !(rex == 0x48 || rex == 0x49) || !(0xb8..0xc0).contains(&op) || body[i + 2..i + 10] != k
        {
            continue;
        }
        let rk = (op - 0xb8) | ((rex & 1) << 3);
        let site =
            if let Some((rs, disp)) = i.checked_sub(7).and_then(|l| mem_op(&body[l..i], 0x8b)) {
                // The load before it, and the LEAQ after it: REX.W(+X,+B) 8D 04 SIB(scale 1) over
                // {Rk, Rs}.
                let lea = &body[i + 10..i + 14];
                let (xrex, sib) = (lea[0], lea[3]);
                if xrex & 0xf8 != 0x48 || lea[1] != 0x8d || lea[2] != 0x04 || sib >> 6 != 0 {
                    return None;
                }
                let index = ((sib >> 3) & 7) | ((xrex & 2) << 2);
                let base = (sib & 7) | ((xrex & 1) << 3);
                if !((index == rs && base == rk) || (index == rk && base == rs)) || rs == rk {
                    return None;
                }
                (i - 7, rs, disp)
            } else {
                // The add after it, into the same register.
                let (rs, disp) = mem_op(&body[i + 10..i + 17], 0x03)?;
                if rs != rk {
                    return None;
                }
                (i + 10, rs | ADDS, disp)
            };
        if *off == 0 {
            *off = site.2;
        }
        if site.2 != *off || site.1 & 15 == 4 {
            return None;
        }
        *out.get_mut(n)? = (func + site.0 as u64, site.1);
        n += 1;
    }
    Some(n)
}

/// `op` (`MOVQ` 8B, `ADDQ` 03) of register `Rs` and `disp32(Rm)`, 7 bytes: `(Rs, disp)`.
fn mem_op(b: &[u8], op: u8) -> Option<(u8, u32)> {
    let (rex, modrm) = (*b.first()?, *b.get(2)?);
    if b.len() != 7 || rex & 0xfa != 0x48 || b[1] != op || modrm >> 6 != 2 || modrm & 7 == 4 {
        return None;
    }
    let disp = u32_at(b, 3)?;
    (disp < 0x1000).then_some((((modrm >> 3) & 7) | ((rex & 4) << 1), disp))
}

/// Writes the trampoline of `site` (as loaded) at `out[..TRAMPOLINE_BYTES]`, which lies at
/// `at`; the counter at `count`, the key at `key_at` and `K` right after it. `None` when a
/// displacement does not fit. A [`NARROW`] site's trampoline is the same on 32 bits:
/// `mov Rs32, K32; lock xadd [counter], Rs; add Rs32, [key]` (the counter's low half moves
/// by `K32`; the 32-bit add drops the high half, as the `MOVL` it replaces does).
pub fn trampoline(out: &mut [u8], at: u64, (site, r): Site, count: u64, key_at: u64) -> Option<()> {
    let out = out.get_mut(..TRAMPOLINE_BYTES)?;
    let (lo, hi) = (r & 7, (r >> 3) & 1);
    let rel = |next: u64, to: u64| i32::try_from(to.wrapping_sub(next) as i64).ok();
    let mut code = [0xccu8; TRAMPOLINE_BYTES];
    let mut n = 0;
    let mut b = |bytes: &[u8]| {
        code[n..n + bytes.len()].copy_from_slice(bytes);
        n += bytes.len();
        at + n as u64
    };
    let narrow = r & NARROW != 0;
    if narrow {
        // mov Rs32, K32 (the high half zeroed)
        if hi != 0 {
            b(&[0x41]);
        }
        b(&[0xb8 + lo]);
        b(&WY_ADD32.to_le_bytes());
    } else {
        // movabs Rs, K
        b(&[0x48 | hi, 0xb8 + lo]);
        b(&WY_ADD.to_le_bytes());
    }
    // lock xadd [rip+d], Rs: Rs = the counter, which moves by K
    let next = b(&[0xf0, 0x48 | (hi << 2), 0x0f, 0xc1, 0x05 | (lo << 3)]) + 4;
    b(&rel(next, count)?.to_le_bytes());
    // add Rs, [rip+d]: + the key, the state the load would have read (add Rs32: its low
    // half, zero-extended)
    let rex = if narrow { 0x40 } else { 0x48 } | (hi << 2);
    let next = if rex == 0x40 {
        b(&[0x03, 0x05 | (lo << 3)])
    } else {
        b(&[rex, 0x03, 0x05 | (lo << 3)])
    } + 4;
    b(&rel(next, key_at)?.to_le_bytes());
    if r & ADDS != 0 {
        // add Rs, [rip+d]: + K, what the ADDQ left (and the same flags)
        let next = b(&[0x48 | (hi << 2), 0x03, 0x05 | (lo << 3)]) + 4;
        b(&rel(next, key_at + 8)?.to_le_bytes());
    }
    // jmp back past the replaced instruction
    let next = b(&[0xe9]) + 4;
    let len = if r & SHORT != 0 { 6 } else { 7 };
    b(&rel(next, site + len)?.to_le_bytes());
    out.copy_from_slice(&code);
    Some(())
}

/// Two new pages, read-write-execute, for tests that run trampolines.
#[cfg(test)]
pub(super) fn rwx_pages() -> &'static mut [u8] {
    extern "C" {
        fn mmap(a: *mut u8, l: usize, p: i32, f: i32, fd: i32, o: i64) -> *mut u8;
    }
    // SAFETY: a new private anonymous mapping of our own, read-write-execute.
    let base = unsafe { mmap(core::ptr::null_mut(), 8192, 7, 0x22, -1, 0) };
    assert!(!base.is_null() && base as isize != -1);
    // SAFETY: our mapping, never unmapped.
    unsafe { core::slice::from_raw_parts_mut(base, 8192) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `mapiterinit`'s two copies as Go 1.19.8 compiled them (static, amd64).
    const GO119: &[u8] = &[
        0x49, 0x8b, 0x56, 0x30, // MOVQ 0x30(R14), DX
        0x48, 0x8b, 0xb2, 0x20, 0x01, 0x00, 0x00, // MOVQ 0x120(DX), SI
        0x48, 0xbf, 0x2f, 0x64, 0xbd, 0x78, 0x64, 0x1d, 0x76, 0xa0, // MOVQ $K, DI
        0x48, 0x8d, 0x04, 0x37, // LEAQ (DI)(SI*1), AX
        0x48, 0xbe, 0xdb, 0x28, 0xb4, 0xa0, 0xd1, 0x7e, 0x03, 0xe7, // MOVQ $K2, SI
        0x48, 0x8b, 0xbe, 0x20, 0x01, 0x00, 0x00, // MOVQ 0x120(SI), DI
        0x49, 0xb8, 0x2f, 0x64, 0xbd, 0x78, 0x64, 0x1d, 0x76, 0xa0, // MOVQ $K, R8
        0x49, 0x8d, 0x04, 0x38, // LEAQ (R8)(DI*1), AX
        0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
    ];

    #[test]
    fn go_1_19s_inlined_copies_are_found_with_their_registers() {
        let mut out = [(0u64, 0u8); MAX_SITES];
        let mut off = 0;
        let n = scan(GO119, 0x1000, &mut out, 0, &mut off).unwrap();
        assert_eq!(n, 2);
        assert_eq!(off, 0x120);
        assert_eq!(out[0], (0x1004, 6), "SI");
        assert_eq!(out[1], (0x1000 + 35, 7), "DI");
        // makemap's shape: MOVQ $K, DX; ADDQ 0x120(CX), DX.
        let add: &[u8] = &[
            0x49, 0x8b, 0x4e, 0x30, 0x48, 0xba, 0x2f, 0x64, 0xbd, 0x78, 0x64, 0x1d, 0x76, 0xa0,
            0x48, 0x03, 0x91, 0x20, 0x01, 0x00, 0x00, 0x90, 0x90, 0x90, 0x90,
        ];
        assert_eq!(scan(add, 0x2000, &mut out, 2, &mut off), Some(3));
        assert_eq!(out[2], (0x2000 + 14, 2 | ADDS));
        // Another offset in a later function: not taken.
        let mut other = 0x128;
        assert!(scan(GO119, 0x1000, &mut out, 0, &mut other).is_none());
        // A load of another shape (no disp32): the function is left alone.
        let mut odd = GO119.to_vec();
        odd[6] = 0x72;
        assert!(scan(&odd, 0x1000, &mut out, 0, &mut 0).is_none());
    }

    /// A trampoline, run after a load it replaced: each run gives the register the next state
    /// of one sequence, `key + n * K`, and comes back past the load.
    #[test]
    fn the_trampoline_draws_the_shared_state() {
        let page = rwx_pages();
        let base = page.as_mut_ptr();
        let b = base as u64;
        // The "function": at 0, a 7-byte slot then `mov rax, rsi; ret` at 7.
        page[..7].fill(0x90);
        page[7..11].copy_from_slice(&[0x48, 0x89, 0xf0, 0xc3]);
        page[KEY_AT..KEY_AT + 8].copy_from_slice(&5u64.to_le_bytes());
        page[KEY_AT + 8..KEY_AT + 16].copy_from_slice(&WY_ADD.to_le_bytes());
        let t = b + TRAMPOLINES_AT as u64;
        let tr = &mut page[TRAMPOLINES_AT..TRAMPOLINES_AT + TRAMPOLINE_BYTES];
        trampoline(tr, t, (b, 6), b + COUNT_AT as u64, b + KEY_AT as u64).unwrap();
        let jmp = super::super::go_rand::jmp_rel32(b, t).unwrap();
        page[..5].copy_from_slice(&jmp);
        // SAFETY: the code just written: clobbers rsi, rax and the flags, then returns.
        let f = unsafe { core::mem::transmute::<*mut u8, extern "C" fn() -> u64>(base) };
        assert_eq!(f(), 5);
        assert_eq!(f(), 5u64.wrapping_add(WY_ADD));
        assert_eq!(f(), 5u64.wrapping_add(WY_ADD.wrapping_mul(2)));
        // The ADDQ shape on the same counter: the state after the add.
        let t2 = t + TRAMPOLINE_BYTES as u64;
        let tr = &mut page[TRAMPOLINES_AT + TRAMPOLINE_BYTES..][..TRAMPOLINE_BYTES];
        trampoline(
            tr,
            t2,
            (b, 6 | ADDS),
            b + COUNT_AT as u64,
            b + KEY_AT as u64,
        )
        .unwrap();
        page[..5].copy_from_slice(&super::super::go_rand::jmp_rel32(b, t2).unwrap());
        assert_eq!(f(), 5u64.wrapping_add(WY_ADD.wrapping_mul(4)));
    }
}
