//! Where a Go executable's `crypto/rand` makes its system call: the one `call rel32` in
//! `internal/syscall/unix.GetRandom` whose target is `syscall.Syscall`, found in the ELF
//! file's symbol table (`SHT_SYMTAB`), or, in a stripped binary (which has none), through the
//! runtime's own function table (`pclntab`). Shared by the supervisor
//! (a static image, at its exec stop) and libseal (a cgo program, in its constructor), which
//! both point that call at `entropy`'s code. No allocation: the file is a byte slice (a
//! mapping of the executable), every read bounds-checked.

/// The call to rewrite, and where the executable's lowest `PT_LOAD` starts, both as linked
/// (add the load bias of a position-independent executable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    pub call: u64,
    pub low: u64,
    /// `syscall.Syscall`, the call's target.
    pub target: u64,
}

const GET_RANDOM: &[u8] = b"internal/syscall/unix.GetRandom";
const SYSCALL: &[u8] = b"syscall.Syscall";
/// `runtime.cputicks` (`rdtsc`), under its Go name and its assembly (ABI0) name.
const CPUTICKS: [&[u8]; 2] = [b"runtime.cputicks", b"runtime.cputicks.abi0"];
/// The runtime's random numbers (`go_rand`): Go 1.22 on, then Go 1.19–1.21.
const RAND: [&[u8]; 5] = [
    b"runtime.rand",
    b"runtime.mrandinit",
    b"runtime.fastrand",
    b"runtime.fastrand64",
    b"os.fastrand",
];

/// `runtime.usleep` and `runtime.gettid` ([`super::go_sys`]), under their Go names and their
/// assembly (ABI0) names.
const USLEEP: [&[u8]; 2] = [b"runtime.usleep", b"runtime.usleep.abi0"];
const GETTID: [&[u8]; 2] = [b"runtime.gettid", b"runtime.gettid.abi0"];
/// `runtime.clone`, whose new thread's first instruction after the call is its `gettid`.
const CLONE: [&[u8]; 2] = [b"runtime.clone", b"runtime.clone.abi0"];
/// `runtime.sched_getaffinity` (the runtime's processor count).
const AFFINITY: [&[u8]; 2] = [
    b"runtime.sched_getaffinity",
    b"runtime.sched_getaffinity.abi0",
];

/// Where a `select` draws its order ([`super::go_select`]).
const SELECTGO: &[u8] = b"runtime.selectgo";

/// Functions' `(address, size)` as linked, `(0, 0)` for one not there.
pub type Found<const N: usize> = [(u64, u64); N];

/// What libseal rewrites in a cgo program, found in one pass over the symbol table: the
/// entropy call ([`find`]), and `runtime.cputicks` (`(address, size)`, as linked), which
/// seeds each thread's `fastrand` (map order) from `rdtsc`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sites {
    pub random: Option<Site>,
    pub cputicks: Option<(u64, u64)>,
    /// The runtime's random number functions to redirect (`go_rand`).
    pub rand: Option<super::go_rand::Sites>,
    /// The `mov eax, NR; syscall` of `runtime.usleep` and of `runtime.gettid`
    /// ([`super::go_sys`]).
    pub usleep: Option<u64>,
    pub gettid: Option<u64>,
    /// The `mov eax, SYS_gettid; syscall` of `runtime.clone`'s new thread.
    pub clone_gettid: Option<u64>,
    /// The `mov eax, SYS_sched_getaffinity; syscall` of `runtime.sched_getaffinity`.
    pub affinity: Option<u64>,
}

/// Where [`Sites::to_words`] puts `usleep` and `gettid`.
const SYS_WORDS: usize = 16 + 2 * (super::go_wyrand::MAX_SITES + super::go_select::MAX_SITES);
/// How many words [`Sites::to_words`] writes: flags, `random`, `cputicks`, `rand`'s entries,
/// its `mrandinit` calls, its inlined copies (map code, then `select`), `usleep`, `gettid`,
/// `clone_gettid`, `affinity`, `low`.
pub const WORDS: usize = SYS_WORDS + 4 + 1;

impl Sites {
    /// The sites as words, the lowest `PT_LOAD` address (`low`) last: what the supervisor
    /// keeps of an executable for the rest of its run (read back by [`Sites::from_words`]).
    pub fn to_words(&self, low: Option<u64>) -> [u64; WORDS] {
        let mut w = [0u64; WORDS];
        let flag = |on: bool, bit: u32| (on as u64) << bit;
        let rand = self.rand.unwrap_or_default();
        w[0] = flag(self.random.is_some(), 0)
            | flag(self.cputicks.is_some(), 1)
            | flag(self.rand.is_some(), 2)
            | flag(rand.maps, 3)
            | flag(low.is_some(), 4)
            | flag(self.usleep.is_some(), 5)
            | flag(self.gettid.is_some(), 6)
            | flag(self.clone_gettid.is_some(), 7)
            | flag(self.affinity.is_some(), 8);
        if let Some(r) = self.random {
            w[1..4].copy_from_slice(&[r.call, r.low, r.target]);
        }
        if let Some((at, size)) = self.cputicks {
            w[4..6].copy_from_slice(&[at, size]);
        }
        for (i, &(at, piece)) in rand.entries.iter().enumerate() {
            w[6 + 2 * i..8 + 2 * i].copy_from_slice(&[at, piece as u64]);
        }
        w[12..16].copy_from_slice(&rand.init_calls);
        for (i, &(at, b)) in rand.inlined.iter().chain(&rand.select).enumerate() {
            w[16 + 2 * i..18 + 2 * i].copy_from_slice(&[at, b as u64]);
        }
        w[SYS_WORDS] = self.usleep.unwrap_or(0);
        w[SYS_WORDS + 1] = self.gettid.unwrap_or(0);
        w[SYS_WORDS + 2] = self.clone_gettid.unwrap_or(0);
        w[SYS_WORDS + 3] = self.affinity.unwrap_or(0);
        w[WORDS - 1] = low.unwrap_or(0);
        w
    }

    /// What [`Sites::to_words`] wrote: the sites and `low`; `None` for words no sites give.
    pub fn from_words(w: &[u64; WORDS]) -> Option<(Sites, Option<u64>)> {
        if w[0] >> 9 != 0 {
            return None;
        }
        let on = |bit: u32| w[0] >> bit & 1 == 1;
        let mut rand = super::go_rand::Sites {
            maps: on(3),
            ..Default::default()
        };
        for (i, e) in rand.entries.iter_mut().enumerate() {
            *e = (w[6 + 2 * i], usize::try_from(w[7 + 2 * i]).ok()?);
        }
        rand.init_calls.copy_from_slice(&w[12..16]);
        for (i, s) in rand.inlined.iter_mut().chain(&mut rand.select).enumerate() {
            *s = (w[16 + 2 * i], u8::try_from(w[17 + 2 * i]).ok()?);
        }
        let sites = Sites {
            random: on(0).then_some(Site {
                call: w[1],
                low: w[2],
                target: w[3],
            }),
            cputicks: on(1).then_some((w[4], w[5])),
            rand: on(2).then_some(rand),
            usleep: on(5).then_some(w[SYS_WORDS]),
            gettid: on(6).then_some(w[SYS_WORDS + 1]),
            clone_gettid: on(7).then_some(w[SYS_WORDS + 2]),
            affinity: on(8).then_some(w[SYS_WORDS + 3]),
        };
        Some((sites, on(4).then_some(w[WORDS - 1])))
    }
}

/// An executable's identity, as `stat` gives it: the name of the file in which a run's
/// supervisors and libseal (and the user's cache) keep its [`Sites::to_words`]. A rebuilt
/// executable has another (its change time at least), so a kept file never describes another
/// build.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExeIdentity {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
}

/// The longest name [`ExeIdentity::kept_name`] writes.
pub const KEPT_NAME_MAX: usize = 160;

impl ExeIdentity {
    /// `go-exe-DEV-INO-SIZE-MTIME.NS-CTIME.NS` (the first three in hex) into `out`: its
    /// length.
    pub fn kept_name(&self, out: &mut [u8; KEPT_NAME_MAX]) -> usize {
        let mut n = 0;
        let mut put = |b: &[u8]| {
            out[n..n + b.len()].copy_from_slice(b);
            n += b.len();
        };
        let digits = |mut v: u64, base: u64, buf: &mut [u8; 20]| -> usize {
            let mut i = buf.len();
            loop {
                i -= 1;
                let d = (v % base) as u8;
                buf[i] = if d < 10 { b'0' + d } else { b'a' + d - 10 };
                v /= base;
                if v == 0 {
                    return i;
                }
            }
        };
        let mut buf = [0u8; 20];
        put(b"go-exe-");
        for (i, v) in [self.dev, self.ino, self.size].into_iter().enumerate() {
            if i > 0 {
                put(b"-");
            }
            let at = digits(v, 16, &mut buf);
            put(&buf[at..]);
        }
        for (s, ns) in [self.mtime, self.ctime] {
            put(b"-");
            if s < 0 {
                put(b"-");
            }
            let at = digits(s.unsigned_abs(), 10, &mut buf);
            put(&buf[at..]);
            put(b".");
            if ns < 0 {
                put(b"-");
            }
            let at = digits(ns.unsigned_abs(), 10, &mut buf);
            put(&buf[at..]);
        }
        n
    }
}

pub(super) fn u16_at(f: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        f.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// Does `tail` (a string table from one entry on) hold the NUL-terminated name `want`?
pub(super) fn spells(tail: &[u8], want: &[u8]) -> bool {
    tail.len() > want.len() && tail.starts_with(want) && tail[want.len()] == 0
}

pub(super) fn u32_at(f: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        f.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}
pub(super) fn u64_at(f: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        f.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// A 64-bit little-endian x86-64 ELF file's program headers: `(offset, count, size)`.
fn phdrs(f: &[u8]) -> Option<(usize, usize, usize)> {
    if f.get(..6)? != b"\x7fELF\x02\x01" || u16_at(f, 18)? != 62 {
        return None;
    }
    Some((
        u64_at(f, 32)? as usize,
        u16_at(f, 56)? as usize,
        u16_at(f, 54)? as usize,
    ))
}

/// Each `PT_LOAD`'s `(p_offset, p_vaddr, p_filesz)`.
fn loads(f: &[u8]) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
    let (off, n, size) = phdrs(f).unwrap_or((0, 0, 0));
    (0..n).filter_map(move |i| {
        let h = off.checked_add(i.checked_mul(size)?)?;
        (u32_at(f, h)? == 1).then_some(())?;
        Some((u64_at(f, h + 8)?, u64_at(f, h + 16)?, u64_at(f, h + 32)?))
    })
}

/// The lowest address a `PT_LOAD` of the file is linked at.
pub fn low(f: &[u8]) -> Option<u64> {
    loads(f).map(|(_, v, _)| v).min()
}

/// The link-time address at which the program headers are mapped (`PT_PHDR`, else the
/// `PT_LOAD` that holds them): `AT_PHDR` minus this is the load bias.
pub fn phdr_vaddr(f: &[u8]) -> Option<u64> {
    let (off, n, size) = phdrs(f)?;
    for i in 0..n {
        let h = off.checked_add(i.checked_mul(size)?)?;
        if u32_at(f, h)? == 6 {
            return u64_at(f, h + 16);
        }
    }
    let off = off as u64;
    loads(f)
        .find(|&(o, _, len)| o <= off && off < o + len)
        .map(|(o, v, _)| v + (off - o))
}

/// Is the file position-independent (`ET_DYN`)?
pub fn is_pie(f: &[u8]) -> bool {
    u16_at(f, 16) == Some(3)
}

/// The `(value, size)` of each of `names`' symbols in the file's `SHT_SYMTAB` (`(0, 0)` for a
/// name not there); `None` when the file has no symbol table (stripped) or is cut short.
fn symbols<const N: usize>(f: &[u8], names: [&[u8]; N]) -> Option<[(u64, u64); N]> {
    let shoff = u64_at(f, 40)? as usize;
    let (shsize, shnum) = (u16_at(f, 58)? as usize, u16_at(f, 60)? as usize);
    let sh = |i: usize| shoff.checked_add(i.checked_mul(shsize)?);
    let mut found = [(0u64, 0u64); N];
    let mut left = N;
    for i in 0..shnum {
        let h = sh(i)?;
        if u32_at(f, h + 4)? != 2 {
            continue;
        }
        let (off, len) = (u64_at(f, h + 24)? as usize, u64_at(f, h + 32)? as usize);
        let ent = (u64_at(f, h + 56)? as usize).max(1);
        let strs = sh(u32_at(f, h + 40)? as usize)?;
        let (str_off, str_len) = (u64_at(f, strs + 24)? as usize, u64_at(f, strs + 32)?);
        let strtab = f.get(str_off..str_off.checked_add(str_len as usize)?)?;
        let syms = f.get(off..off.checked_add(len)?)?;
        for s in syms.chunks_exact(ent) {
            let name = u32_at(s, 0)? as usize;
            let Some(tail) = strtab.get(name..) else {
                continue;
            };
            for (j, want) in names.iter().enumerate() {
                if found[j].0 == 0 && spells(tail, want) {
                    found[j] = (u64_at(s, 8)?, u64_at(s, 16)?);
                    left -= 1;
                }
            }
            if left == 0 {
                return Some(found);
            }
        }
        return Some(found);
    }
    None
}

/// `names`' functions in `f`: from its symbol table, else from its `pclntab` (stripped).
fn functions<const N: usize>(f: &[u8], names: [&[u8]; N]) -> Option<Found<N>> {
    symbols(f, names).or_else(|| super::pclntab::lookup(f, names))
}

/// Finds `GetRandom`'s one call to `syscall.Syscall` in the executable file `f`. `None` when
/// neither table names them, or when there is not exactly one such call.
pub fn find(f: &[u8]) -> Option<Site> {
    phdrs(f)?;
    let [random, syscall] = functions(f, [GET_RANDOM, SYSCALL])?;
    call_in(f, random, syscall)
}

/// [`Sites`] of the executable file `f` (all `None` when neither table names them).
pub fn find_all(f: &[u8]) -> Sites {
    let Some(_) = phdrs(f) else {
        return Sites::default();
    };
    let (n, r) = (GET_RANDOM, RAND);
    let m = super::go_wyrand::FUNCTIONS;
    let names = [
        SELECTGO,
        n,
        SYSCALL,
        CPUTICKS[0],
        CPUTICKS[1],
        r[0],
        r[1],
        r[2],
        r[3],
        r[4],
        m[0],
        m[1],
        m[2],
        m[3],
        m[4],
        m[5],
        m[6],
        m[7],
        m[8],
        m[9],
        m[10],
        USLEEP[0],
        USLEEP[1],
        GETTID[0],
        GETTID[1],
        CLONE[0],
        CLONE[1],
        AFFINITY[0],
        AFFINITY[1],
    ];
    let Some(found) = functions(f, names) else {
        return Sites::default();
    };
    let [select, random, syscall, ticks, ticks0, r0, r1, r2, r3, r4, rest @ ..] = found;
    let [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, u0, u1, g0, g1, c0, c1, a0, a1] = rest;
    let maps = [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10];
    // The one `mov eax, NR; syscall` of the function, under either name.
    let sys = |fs: [(u64, u64); 2], nr: u32| {
        fs.into_iter().find_map(|func| {
            let at = super::go_sys::find(body(f, func)?, nr)?;
            Some(func.0 + at as u64)
        })
    };
    Sites {
        random: call_in(f, random, syscall),
        // Checked to be `rdtsc`'s: a name read from the wrong table would be some other code.
        cputicks: [ticks, ticks0].into_iter().find(|&t| {
            body(f, t).is_some_and(|b| b.windows(2).any(|w| w == [0x0f, 0x31] || w == [0x0f, 0x01]))
        }),
        rand: super::go_rand::sites(f, [r0, r1, r2, r3, r4], maps, select),
        usleep: sys([u0, u1], 35),
        gettid: sys([g0, g1], 186),
        clone_gettid: sys([c0, c1], 186),
        affinity: sys([a0, a1], 204),
    }
}

/// The `call rel32`s in function `(func, size)` of `f` to `target`, into `out`: how many;
/// `None` when there are more than `out` holds or the function is not in the file.
pub fn calls_in(f: &[u8], (func, size): (u64, u64), target: u64, out: &mut [u64]) -> Option<usize> {
    let body = body(f, (func, size))?;
    let mut n = 0;
    for i in 0..body.len().saturating_sub(4) {
        if body[i] != 0xe8 {
            continue;
        }
        let d = u32_at(body, i + 1)? as i32;
        let at = func + i as u64;
        if (at as i64).wrapping_add(5 + d as i64) as u64 == target {
            *out.get_mut(n)? = at;
            n += 1;
        }
    }
    Some(n)
}

/// The bytes of function `(func, size)` in the file.
pub(super) fn body(f: &[u8], (func, size): (u64, u64)) -> Option<&[u8]> {
    if func == 0 {
        return None;
    }
    let (o, v, _) = loads(f).find(|&(_, v, len)| v <= func && func + size <= v + len)?;
    let start = (o + (func - v)) as usize;
    f.get(start..start.checked_add(size as usize)?)
}

/// The one call in function `(func, size)` to `target` (`syscall.Syscall`).
fn call_in(f: &[u8], (func, size): (u64, u64), (target, _): (u64, u64)) -> Option<Site> {
    if func == 0 || target == 0 {
        return None;
    }
    let mut call = [0u64; 1];
    if calls_in(f, (func, size), target, &mut call)? != 1 {
        return None;
    }
    let low = loads(f).map(|(_, v, _)| v).min()?;
    Some(Site {
        call: call[0],
        low,
        target,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_name_is_the_identity_in_hex_and_decimal() {
        let id = ExeIdentity {
            dev: 0x803,
            ino: 0x1a2b3c,
            size: 1830608,
            mtime: (1764892140, 123456789),
            ctime: (-5, 0),
        };
        let mut out = [0u8; KEPT_NAME_MAX];
        let n = id.kept_name(&mut out);
        assert_eq!(
            &out[..n],
            b"go-exe-803-1a2b3c-1beed0-1764892140.123456789--5.0"
        );
        let most = ExeIdentity {
            dev: u64::MAX,
            ino: u64::MAX,
            size: u64::MAX,
            mtime: (i64::MIN, i64::MIN),
            ctime: (i64::MIN, i64::MIN),
        };
        assert!(most.kept_name(&mut out) <= KEPT_NAME_MAX);
    }

    /// A minimal ELF file: one `PT_LOAD` (file offset 0 at `0x400000`) holding a `GetRandom`
    /// of 32 bytes at offset 0x200 whose calls (`call rel32` at the offsets given) go to
    /// `syscall.Syscall` at offset 0x300, and a symbol table naming both (`pie`: `ET_DYN`).
    fn elf(calls: &[usize], pie: bool) -> [u8; 0x600] {
        let mut f = [0u8; 0x600];
        let mut put = |at: usize, b: &[u8]| f[at..at + b.len()].copy_from_slice(b);
        put(0, b"\x7fELF\x02\x01\x01");
        put(16, &(if pie { 3u16 } else { 2 }).to_le_bytes());
        put(18, &62u16.to_le_bytes());
        put(32, &64u64.to_le_bytes()); // e_phoff
        put(40, &0x500u64.to_le_bytes()); // e_shoff
        put(54, &56u16.to_le_bytes());
        put(56, &1u16.to_le_bytes());
        put(58, &64u16.to_le_bytes());
        put(60, &3u16.to_le_bytes());
        // PT_LOAD R+X of the whole file at 0x400000.
        put(64, &1u32.to_le_bytes());
        put(68, &5u32.to_le_bytes());
        put(64 + 16, &0x400000u64.to_le_bytes());
        put(64 + 32, &0x600u64.to_le_bytes());
        // Section 1: the symbol table (three entries) at 0x380, its strings (section 2) at 0x400.
        let sh = 0x500 + 64;
        put(sh + 4, &2u32.to_le_bytes());
        put(sh + 24, &0x380u64.to_le_bytes());
        put(sh + 32, &72u64.to_le_bytes());
        put(sh + 40, &2u32.to_le_bytes());
        put(sh + 56, &24u64.to_le_bytes());
        let strs = b"\0internal/syscall/unix.GetRandom\0syscall.Syscall\0";
        put(0x500 + 128 + 4, &3u32.to_le_bytes());
        put(0x500 + 128 + 24, &0x400u64.to_le_bytes());
        put(0x500 + 128 + 32, &(strs.len() as u64).to_le_bytes());
        put(0x400, strs);
        for (i, (name, at, size)) in [(1u32, 0x200u64, 32u64), (33, 0x300, 8)].iter().enumerate() {
            let s = 0x380 + 24 * (i + 1);
            put(s, &name.to_le_bytes());
            put(s + 8, &(0x400000 + at).to_le_bytes());
            put(s + 16, &size.to_le_bytes());
        }
        for &c in calls {
            let d = 0x300i32 - (0x200 + c as i32 + 5);
            put(0x200 + c, &[0xe8]);
            put(0x200 + c + 1, &d.to_le_bytes());
        }
        f
    }

    #[test]
    fn the_one_call_to_syscall_is_found_and_two_are_refused() {
        let want = Site {
            call: 0x400000 + 0x200 + 7,
            low: 0x400000,
            target: 0x400300,
        };
        assert_eq!(find(&elf(&[7], false)), Some(want));
        assert_eq!(find(&elf(&[7], true)), Some(want));
        // No `runtime.cputicks` in this file: found in the same pass, or not.
        let all = find_all(&elf(&[7], false));
        assert_eq!(
            (all.random, all.cputicks, all.rand),
            (Some(want), None, None)
        );
        assert!(is_pie(&elf(&[7], true)) && !is_pie(&elf(&[7], false)));
        assert_eq!(find(&elf(&[7, 19], false)), None);
        assert_eq!(find(&elf(&[], false)), None);
        // The program headers sit at offset 64 of the segment mapped at 0x400000.
        assert_eq!(phdr_vaddr(&elf(&[7], false)), Some(0x400040));
        // Cut short anywhere, the file is refused, never read out of bounds.
        let f = elf(&[7], false);
        for n in (0..f.len()).step_by(37) {
            assert!(find(&f[..n]).is_none_or(|s| s == want));
        }
    }

    #[test]
    fn sites_read_back_from_their_words_are_the_same() {
        let mut rand = super::super::go_rand::Sites {
            entries: [(0x401000, 0), (0x402000, 64), (0, 0)],
            init_calls: [0x403000, 0x403010, 0, 0],
            maps: true,
            ..Default::default()
        };
        rand.inlined[0] = (0x404000, 3);
        rand.inlined[super::super::go_wyrand::MAX_SITES - 1] = (0x405000, 255);
        rand.select[1] = (0x406000, 7);
        let all = Sites {
            random: Some(Site {
                call: 0x407000,
                low: 0x400000,
                target: 0x408000,
            }),
            cputicks: Some((0x409000, 20)),
            rand: Some(rand),
            usleep: Some(0x40a000),
            gettid: Some(0x40b000),
            clone_gettid: Some(0x40c000),
            affinity: Some(0x40d000),
        };
        for (sites, low) in [
            (all, Some(0x400000)),
            (Sites::default(), None),
            (find_all(&elf(&[7], false)), Some(0x400000)),
        ] {
            assert_eq!(Sites::from_words(&sites.to_words(low)), Some((sites, low)));
        }
        // Words no sites give are refused.
        let mut w = all.to_words(None);
        w[0] |= 1 << 9;
        assert_eq!(Sites::from_words(&w), None);
        let mut w = all.to_words(None);
        w[17] = 256;
        assert_eq!(Sites::from_words(&w), None);
    }

    #[test]
    fn a_file_that_is_not_elf_has_no_site() {
        assert_eq!(
            find(b"not an ELF file at all, not even close to one......"),
            None
        );
        assert_eq!(find(&[]), None);
        assert_eq!(phdr_vaddr(&[0x7f, b'E']), None);
    }
}
