//! A Go runtime's own random numbers made one deterministic sequence per process: map
//! iteration starts and hash seeds, `math/rand`'s global source, `os.MkdirTemp` names,
//! `hash/maphash` seeds. They come from one function, drawn per OS thread:
//!
//! - Go 1.22 and later: `runtime.rand` (a per-M ChaCha8 state), called out of line by every
//!   user of it, and by `runtime.mrandinit` when a new M (thread) is made, on the creating
//!   thread, at times that depend on the scheduler;
//! - Go 1.19–1.21: `runtime.fastrand` (32 bits), `runtime.fastrand64` (1.20 on) and
//!   `os.fastrand` (the runtime's body for `os`'s temp names, wyrand inlined), per-M wyrand
//!   state. These are also inlined into the map code (`mapiterinit`, `makemap`), which
//!   this does not reach ([`go_wyrand`] redirects those copies one by one).
//!
//! `select` order comes from another per-thread generator inlined into `runtime.selectgo`
//! (`fastrand` or `cheaprand`), redirected likewise to a sequence of its own ([`go_select`]).
//!
//! The entry of each is overwritten with a `jmp rel32` to code in a private anonymous mapping
//! (two pages: the code, then the counters), which takes the next number of a counter with
//! `lock xadd` and returns `mix64(n * GOLDEN + key)` ([`value`]). The mapping is private, so a
//! forked child continues from a copy of its parent's counter rather than sharing it. The
//! calls `mrandinit` makes to `rand` are pointed at a second sequence of their own, so that
//! the number of threads made, and when, never moves the first.
//!
//! Contract (Go's ABIInternal, no arguments, result in `rax`): the code clobbers `rax`, `rcx`
//! and the flags only, uses no stack beyond its return address, and never touches `rsp`,
//! `rbp`, `r14` (g), `r15` or `x15`. It is not Go code: asynchronous preemption finds no
//! function at its PC and leaves the thread be.

use super::go_select;
use super::go_site::{calls_in, Found};
use super::go_wyrand::{self, MAX_SITES};

/// Bytes of the code page.
pub const CODE_BYTES: usize = 4096;
/// The whole mapping: the code page, then the counters' page.
pub const MAP_BYTES: usize = 8192;
/// Where each piece of code starts in the code page: the 64-bit sequence, the same truncated
/// to 32 bits (Go 1.19–1.21's `fastrand`), and the second sequence (`mrandinit`'s).
pub const MAIN_AT: usize = 0;
pub const MAIN32_AT: usize = 128;
pub const ALT_AT: usize = 256;
/// The counters, in the second page (a cache line apart).
pub const COUNT_AT: usize = 4096;
pub const ALT_COUNT_AT: usize = 4096 + 64;
/// What distinguishes the second sequence's key from the first's.
const ALT_LABEL: u64 = 0x6d72_616e_6469_6e69;
/// And the map code's (Go 1.19–1.21's inlined `fastrand`, [`go_wyrand`]).
const WY_LABEL: u64 = 0x7779_7261_6e64_6d61;
/// And `select`'s ([`go_select`]).
const SELECT_LABEL: u64 = 0x7365_6c65_6374_676f;
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// The census's name of the mapping (its module): the callers of the draws it counts.
pub const MODULE_NAME: &str = "[seal in-image rand]";

/// What the census counts a draw of the main sequence as (the caller: the mapping's first
/// piece of code, [`MODULE_NAME`]): `runtime.rand` (Go 1.22 on) or `fastrand` (1.19–1.21);
/// and the map code's inlined copies' draws ([`go_wyrand`], at the trampolines).
pub const fn census_fids(sites: &Sites) -> [crate::Fid; 2] {
    let main = if sites.maps {
        crate::Fid::GoRuntimeRand
    } else {
        crate::Fid::GoFastrand
    };
    [main, crate::Fid::GoFastrandMaps]
}

/// The draws a mapping's counters page (its words, from [`COUNT_AT`]) has counted, `[main,
/// map code, select]`: the main counter moves by one a draw, the map code's by wyrand's
/// increment and `select`'s by the increment of its sites' width (32-bit when `narrow`: Go
/// 1.27's `cheaprand`), each odd, so that its inverse modulo 2^64 gives the number back.
/// `mrandinit`'s counter (new threads' seeds, as many as the scheduler makes threads) is left
/// out: it is no draw of the program's.
pub fn draws(counters: &[u8], narrow: bool) -> Option<[u64; 3]> {
    let word = |at: usize| {
        let at = at - COUNT_AT;
        Some(u64::from_le_bytes(
            counters.get(at..at + 8)?.try_into().ok()?,
        ))
    };
    let k = go_wyrand::increment();
    let wy = word(go_wyrand::COUNT_AT)?.wrapping_mul(inverse(k));
    let k = if narrow {
        go_wyrand::WY_ADD32 as u64
    } else {
        k
    };
    let select = word(go_select::COUNT_AT)?.wrapping_mul(inverse(k));
    Some([word(COUNT_AT)?, wy, select])
}

/// The bytes of the counters page [`draws`] reads (from [`COUNT_AT`]).
pub const COUNTERS_BYTES: usize = go_select::COUNT_AT + 8 - COUNT_AT;

/// Where the first of `selectgo`'s trampolines is in the code page: what the census names
/// `select`'s draws after.
pub const SELECT_TRAMPOLINE_AT: usize =
    go_wyrand::TRAMPOLINES_AT + MAX_SITES * go_wyrand::TRAMPOLINE_BYTES;

/// The inverse of odd `k` modulo 2^64 (Newton's iteration: each step doubles the bits).
const fn inverse(k: u64) -> u64 {
    let mut x = k; // right to 3 bits for an odd k
    let mut i = 0;
    while i < 5 {
        x = x.wrapping_mul(2u64.wrapping_sub(k.wrapping_mul(x)));
        i += 1;
    }
    x
}

/// Where a mapping for a program whose lowest address is `low` is placed (256 KiB below it,
/// page-aligned): `None` when there is no room below.
pub const fn place(low: u64) -> Option<u64> {
    match low.checked_sub(256 << 10) {
        Some(h) => Some(h & !0xfff),
        None => None,
    }
}

/// What stayed per thread of a Go image's random numbers, as the census's `go-runtime-random`
/// event says it (the `partly sealed` line says it after "real:"): recorded by whoever set the
/// image up (the supervisor at its exec stop, libseal in a cgo program's constructor), only
/// when more than `select` order stays real. The text names the cause after [`BECAUSE`].
pub mod outcome {
    /// Go 1.19–1.21 whose map code's inlined copies are not in a shape seal knows: the
    /// out-of-line `fastrand` is one sequence, map order is not.
    pub const MAPS: &str = "map order stays per thread: the map code's inlined fastrand \
         copies were not found";
    /// Nothing redirected, for the reason that follows.
    pub const NONE: &str = "map order, math/rand's global source and temp names stay per \
         thread";
    /// Between what stays real and why.
    pub const BECAUSE: &str = ": ";
    /// Reasons for [`NONE`].
    pub const NOT_FOUND: &str = "no runtime.rand or fastrand found to redirect";
    pub const UNREAD: &str = "its executable could not be read";
    pub const UNSEALED: &str = "the random family is unsealed";
    pub const NO_ROOM: &str = "no room below the program for seal's code";
    pub const MMAP: &str = "the mmap of seal's code below the program was refused (something \
         is mapped there)";
    pub const MPROTECT: &str = "seal's code page could not be made executable";
    pub const WRITE_CODE: &str = "seal's code could not be written";
    pub const REWRITE: &str = "the runtime's functions could not be rewritten";
}

/// The `n`-th number (from 0) of the sequence keyed `key`.
pub const fn value(key: u64, n: u64) -> u64 {
    crate::mix64(n.wrapping_mul(GOLDEN).wrapping_add(key))
}

/// The sequence key of a process with run seed `seed` and lineage `lineage`.
pub const fn key(seed: u64, lineage: u64) -> u64 {
    crate::mix64(seed ^ crate::mix64(lineage ^ 0x676f_2d72_616e_6421))
}

/// Writes one piece of code at `out[at..]`: the next number of the counter at `count` in
/// sequence `key`, truncated to 32 bits when `narrow`.
fn piece(out: &mut [u8], at: usize, count: u64, key: u64, narrow: bool) -> Option<usize> {
    let mut code = [0u8; 128];
    let mut n = 0;
    let mut b = |bytes: &[u8]| {
        code[n..n + bytes.len()].copy_from_slice(bytes);
        n += bytes.len();
    };
    b(&[0xb8, 1, 0, 0, 0]); // mov eax, 1
    b(&[0x48, 0xb9]); // movabs rcx, count
    b(&count.to_le_bytes());
    b(&[0xf0, 0x48, 0x0f, 0xc1, 0x01]); // lock xadd [rcx], rax
    b(&[0x48, 0xb9]); // movabs rcx, GOLDEN
    b(&GOLDEN.to_le_bytes());
    b(&[0x48, 0x0f, 0xaf, 0xc1]); // imul rax, rcx
    b(&[0x48, 0xb9]); // movabs rcx, key
    b(&key.to_le_bytes());
    b(&[0x48, 0x01, 0xc8]); // add rax, rcx
                            // mix64: z ^= z >> 30; z *= M1; z ^= z >> 27; z *= M2; z ^= z >> 31.
    for (shift, mul) in [
        (30u8, Some(0xbf58_476d_1ce4_e5b9u64)),
        (27, Some(0x94d0_49bb_1331_11eb)),
        (31, None),
    ] {
        b(&[0x48, 0x89, 0xc1]); // mov rcx, rax
        b(&[0x48, 0xc1, 0xe9, shift]); // shr rcx, shift
        b(&[0x48, 0x31, 0xc8]); // xor rax, rcx
        if let Some(m) = mul {
            b(&[0x48, 0xb9]); // movabs rcx, m
            b(&m.to_le_bytes());
            b(&[0x48, 0x0f, 0xaf, 0xc1]); // imul rax, rcx
        }
    }
    if narrow {
        b(&[0x89, 0xc0]); // mov eax, eax
    }
    b(&[0xc3]); // ret
    out.get_mut(at..at + n)?.copy_from_slice(&code[..n]);
    Some(n)
}

/// Writes the code page into `out` (at least [`CODE_BYTES`]) for a mapping at `base` whose
/// sequences are keyed from `key`, with the trampolines of `sites`' inlined copies (as
/// loaded). `None` when `out` is too short or a trampoline does not reach.
pub fn code(out: &mut [u8], base: u64, key: u64, sites: &Sites) -> Option<()> {
    let out = out.get_mut(..CODE_BYTES)?;
    out.fill(0xcc); // int3 between the pieces
    let (count, alt) = (base + COUNT_AT as u64, base + ALT_COUNT_AT as u64);
    piece(out, MAIN_AT, count, key, false)?;
    piece(out, MAIN32_AT, count, key, true)?;
    piece(out, ALT_AT, alt, crate::mix64(key ^ ALT_LABEL), false)?;
    let wy_key = crate::mix64(key ^ WY_LABEL);
    out.get_mut(go_wyrand::KEY_AT..go_wyrand::KEY_AT + 8)?
        .copy_from_slice(&wy_key.to_le_bytes());
    out.get_mut(go_wyrand::KEY_AT + 8..go_wyrand::KEY_AT + 16)?
        .copy_from_slice(&go_wyrand::increment().to_le_bytes());
    let select_key = crate::mix64(key ^ SELECT_LABEL);
    out.get_mut(go_select::KEY_AT..go_select::KEY_AT + 8)?
        .copy_from_slice(&select_key.to_le_bytes());
    let wy = (go_wyrand::COUNT_AT, go_wyrand::KEY_AT);
    let select = (go_select::COUNT_AT, go_select::KEY_AT);
    let all = sites.inlined.iter().map(|&s| (s, wy));
    let all = all.chain(sites.select.iter().map(|&s| (s, select)));
    for (i, (site, (count, key_at))) in all.enumerate().filter(|s| s.1 .0 .0 != 0) {
        let at = trampoline_at(i);
        go_wyrand::trampoline(
            out.get_mut(at..)?,
            base + at as u64,
            site,
            base + count as u64,
            base + key_at as u64,
        )?;
    }
    Some(())
}

// Every trampoline fits below the keys.
const _: () = assert!(
    go_wyrand::TRAMPOLINES_AT + (MAX_SITES + go_select::MAX_SITES) * go_wyrand::TRAMPOLINE_BYTES
        <= go_wyrand::KEY_AT
);

/// Where the trampoline of inlined copy `i` is in the code page: the map code's
/// ([`Sites::inlined`]), then `selectgo`'s ([`Sites::select`]).
fn trampoline_at(i: usize) -> usize {
    go_wyrand::TRAMPOLINES_AT + i * go_wyrand::TRAMPOLINE_BYTES
}

/// A `jmp rel32` at `site` to `target`, when it reaches (±2 GiB).
pub fn jmp_rel32(site: u64, target: u64) -> Option<[u8; 5]> {
    let mut j = super::entropy::call_rel32(site, target)?;
    j[0] = 0xe9;
    Some(j)
}

/// Which functions to redirect (addresses as linked).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sites {
    /// Entry points, each with the piece of code (offset in the code page) it jumps to; an
    /// address of 0 is none.
    pub entries: [(u64, usize); 3],
    /// `mrandinit`'s `call rel32`s to `rand`, to point at [`ALT_AT`] (0: none).
    pub init_calls: [u64; 4],
    /// Go 1.22 or later: map order follows the sequence too.
    pub maps: bool,
    /// Go 1.19–1.21: the map code's inlined copies of `fastrand` ([`go_wyrand`]; an address
    /// of 0 is none). When there are some, map order follows a sequence too.
    pub inlined: [go_wyrand::Site; MAX_SITES],
    /// `selectgo`'s inlined copies of the scheduler's generator ([`go_select`]; an address of
    /// 0 is none). When there are some, `select` order follows a sequence of its own.
    pub select: [go_wyrand::Site; go_select::MAX_SITES],
}

/// How many `(address, bytes)` [`Sites::patches`] gives.
pub const PATCHES: usize = 7 + MAX_SITES + go_select::MAX_SITES;

impl Sites {
    /// Every `(address, bytes)` to write for a mapping at `base`; `None` when one does not
    /// reach.
    pub fn patches(&self, base: u64) -> Option<[(u64, [u8; 5]); PATCHES]> {
        let mut out = [(0u64, [0u8; 5]); PATCHES];
        for (i, &(at, piece)) in self.entries.iter().enumerate() {
            if at != 0 {
                out[i] = (at, jmp_rel32(at, base + piece as u64)?);
            }
        }
        for (i, &at) in self.init_calls.iter().enumerate() {
            if at != 0 {
                out[3 + i] = (at, super::entropy::call_rel32(at, base + ALT_AT as u64)?);
            }
        }
        let copies = self.inlined.iter().chain(&self.select);
        for (i, &(at, _)) in copies.enumerate() {
            if at != 0 {
                out[7 + i] = (at, jmp_rel32(at, base + trampoline_at(i) as u64)?);
            }
        }
        Some(out)
    }

    /// The same, load bias added.
    pub fn biased(mut self, bias: u64) -> Sites {
        for e in self.entries.iter_mut().filter(|e| e.0 != 0) {
            e.0 += bias;
        }
        for c in self.init_calls.iter_mut().filter(|c| **c != 0) {
            *c += bias;
        }
        let copies = self.inlined.iter_mut().chain(&mut self.select);
        for s in copies.filter(|s| s.0 != 0) {
            s.0 += bias;
        }
        self
    }
}

/// The sites in executable `f`, from its functions `found` (`runtime.rand`,
/// `runtime.mrandinit`, `runtime.fastrand`, `runtime.fastrand64`, `os.fastrand`), the map
/// functions `maps` ([`go_wyrand::FUNCTIONS`]) and `runtime.selectgo` (`select`). `None` when there is nothing this knows how
/// to redirect safely: no such function, one too short for a jump, or a Go 1.22 `mrandinit`
/// whose calls to `rand` are not one to four `call rel32`s.
pub fn sites(f: &[u8], found: Found<5>, maps: Found<11>, select: (u64, u64)) -> Option<Sites> {
    let [rand, init, fast, fast64, os] = found;
    let long = |(at, size): (u64, u64)| at != 0 && size >= 5;
    let select = super::go_site::body(f, select)
        .and_then(|body| go_select::scan(body, select.0))
        .unwrap_or_default();
    if rand.0 != 0 {
        if !long(rand) || init.0 == 0 {
            return None;
        }
        let mut calls = [0u64; 4];
        let n = calls_in(f, init, rand.0, &mut calls)?;
        if n == 0 {
            return None;
        }
        return Some(Sites {
            entries: [(rand.0, MAIN_AT), (0, 0), (0, 0)],
            init_calls: calls,
            maps: true,
            inlined: [(0, 0); MAX_SITES],
            select,
        });
    }
    let mut s = Sites {
        select,
        ..Sites::default()
    };
    if long(fast) {
        s.inlined = inlined(f, maps);
    }
    if long(fast) {
        s.entries[0] = (fast.0, MAIN32_AT);
    }
    if long(fast64) {
        s.entries[1] = (fast64.0, MAIN_AT);
    }
    if long(os) {
        s.entries[2] = (os.0, MAIN32_AT);
    }
    s.entries.iter().any(|e| e.0 != 0).then_some(s)
}

/// The inlined copies of `fastrand` in the map functions `maps` of `f`, each function's where
/// all its copies are in shape ([`go_wyrand::scan`]) with one `m.fastrand` offset; none
/// unless `mapiterinit`'s are.
fn inlined(f: &[u8], maps: Found<11>) -> [go_wyrand::Site; MAX_SITES] {
    let mut out = [(0, 0); MAX_SITES];
    let (mut n, mut off) = (0, 0);
    for (i, func) in maps.into_iter().enumerate() {
        let scanned = super::go_site::body(f, func)
            .and_then(|body| go_wyrand::scan(body, func.0, &mut out, n, &mut off));
        match scanned {
            Some(m) if i > 0 || m > 0 => n = m,
            _ if i == 0 => return [(0, 0); MAX_SITES],
            // Partly written: what it wrote past `n` is cleared.
            _ => out[n..].fill((0, 0)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counters_give_the_draws_back() {
        let k = go_wyrand::increment();
        assert_eq!(inverse(k).wrapping_mul(k), 1);
        let mut page = [0u8; COUNTERS_BYTES];
        page[..8].copy_from_slice(&12u64.to_le_bytes());
        let wy = go_wyrand::COUNT_AT - COUNT_AT;
        page[wy..wy + 8].copy_from_slice(&k.wrapping_mul(1001).to_le_bytes());
        let select = go_select::COUNT_AT - COUNT_AT;
        page[select..select + 8].copy_from_slice(&k.wrapping_mul(1600).to_le_bytes());
        assert_eq!(draws(&page, false), Some([12, 1001, 1600]));
        let k32 = go_wyrand::WY_ADD32 as u64;
        page[select..select + 8].copy_from_slice(&k32.wrapping_mul(400).to_le_bytes());
        assert_eq!(draws(&page, true), Some([12, 1001, 400]));
        assert_eq!(draws(&page[..8], false), None);
        assert_eq!(trampoline_at(MAX_SITES), SELECT_TRAMPOLINE_AT);
        assert_eq!(place(0x400000), Some(0x3c0000));
        assert_eq!(place(0x30000), None);
    }

    #[test]
    fn a_jump_reaches_two_gib_and_patches_point_at_their_pieces() {
        assert_eq!(jmp_rel32(0x1000, 0x1005), Some([0xe9, 0, 0, 0, 0]));
        assert!(jmp_rel32(0x400000, 0x400000 + (1 << 31) + 10).is_none());
        let mut s = Sites {
            entries: [(0x401000, MAIN_AT), (0, 0), (0, 0)],
            init_calls: [0x402000, 0, 0, 0],
            maps: true,
            inlined: [(0, 0); MAX_SITES],
            select: [(0x404000, 6 | go_wyrand::NARROW), (0, 0)],
        };
        s.inlined[1] = (0x403000, 6);
        let t = 0x300000 + (go_wyrand::TRAMPOLINES_AT + go_wyrand::TRAMPOLINE_BYTES) as u64;
        assert_eq!(
            s.patches(0x300000).unwrap()[8],
            (0x403000, jmp_rel32(0x403000, t).unwrap())
        );
        let p = s.patches(0x300000).unwrap();
        assert_eq!(p[0].1, jmp_rel32(0x401000, 0x300000).unwrap());
        assert_eq!(p[3].1[0], 0xe8);
        let d = i32::from_le_bytes(p[3].1[1..].try_into().unwrap());
        assert_eq!((0x402005 + d as i64) as u64, 0x300000 + ALT_AT as u64);
        assert_eq!(p[1].0, 0);
        // selectgo's copy: its trampoline after the map code's.
        let t = 0x300000 + trampoline_at(MAX_SITES) as u64;
        assert_eq!(
            p[7 + MAX_SITES],
            (0x404000, jmp_rel32(0x404000, t).unwrap())
        );
        assert_eq!(s.biased(0x1000).entries[0].0, 0x402000);
        assert_eq!(s.biased(0x1000).select[0].0, 0x405000);
    }

    /// The code, run: each call returns the next number of its sequence.
    #[test]
    fn the_code_returns_its_sequence_when_run() {
        extern "C" {
            fn mmap(a: *mut u8, l: usize, p: i32, f: i32, fd: i32, o: i64) -> *mut u8;
            fn mprotect(a: *mut u8, l: usize, p: i32) -> i32;
        }
        // SAFETY: a new private anonymous mapping of our own, read-write.
        let base = unsafe { mmap(core::ptr::null_mut(), MAP_BYTES, 3, 0x22, -1, 0) };
        assert!(!base.is_null() && base as isize != -1);
        // SAFETY: the mapping's code page.
        let page = unsafe { core::slice::from_raw_parts_mut(base, CODE_BYTES) };
        let key = key(42, 7);
        code(page, base as u64, key, &Sites::default()).unwrap();
        // SAFETY: the code page, made read and execute.
        assert_eq!(unsafe { mprotect(base, CODE_BYTES, 5) }, 0);
        let f = |at: usize| {
            // SAFETY: a piece of our code: no arguments, result in rax, clobbers rax, rcx and
            // the flags only (all caller-saved in the C ABI).
            unsafe { core::mem::transmute::<*mut u8, extern "C" fn() -> u64>(base.add(at))() }
        };
        assert_eq!(f(MAIN_AT), value(key, 0));
        assert_eq!(f(MAIN_AT), value(key, 1));
        assert_eq!(f(MAIN32_AT), value(key, 2) & 0xffff_ffff);
        let alt = crate::mix64(key ^ ALT_LABEL);
        assert_eq!(f(ALT_AT), value(alt, 0));
        assert_eq!(f(MAIN_AT), value(key, 3));
        assert_ne!(value(key, 0), value(key ^ 1, 0));
    }
}
