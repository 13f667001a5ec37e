//! Functions of a Go executable found by name through its `.gopclntab`, the table the Go
//! runtime itself keeps for tracebacks, which a stripped binary (`-ldflags=-s`, nearly every
//! released Go program) still has where its symbol table is gone. Go 1.18–1.19 (magic
//! `0xfffffff0`) and 1.20 and later (`0xfffffff1`) share the layout read here:
//!
//! - header: `magic u32, 0, 0, minLC u8 (1), ptrSize u8 (8)`, then eight words: `nfunc`,
//!   `nfiles`, `textStart`, and the offsets (from the table's start) of the function names,
//!   the compilation units, the file table, the pc tables and the function data;
//! - the function data starts with `nfunc + 1` pairs `(entryOff u32, funcOff u32)`, sorted by
//!   `entryOff` (the last pair's `entryOff` is the text's end); a function's `_func` is at
//!   `funcOff` from the function data and starts `entryOff u32, nameOff i32` (its name, a
//!   NUL-terminated string at `nameOff` from the names).
//!
//! A function's address is `textStart + entryOff` and its size the next entry's start minus
//! its own (alignment padding included). `textStart` is `runtime.text` as linked; in a
//! position-independent executable the file holds 0 there and a `R_X86_64_RELATIVE`
//! relocation's addend holds it. The table is found by its section name (`.gopclntab`, or
//! `.data.rel.ro.gopclntab` in an internally linked PIE); where a host linker merged it away
//! (an externally linked PIE), by its header in the file's read-only, non-executable
//! segments. No allocation; every read bounds-checked.

use super::go_site::{spells, u16_at, u32_at, u64_at};

const MAGICS: [u32; 2] = [0xffff_fff0, 0xffff_fff1];

/// The `(address, size)` (as linked) of each of `names` in the Go executable `f` (`(0, 0)`
/// for a name not there); `None` when it has no table this reads.
pub fn lookup<const N: usize>(f: &[u8], names: [&[u8]; N]) -> Option<[(u64, u64); N]> {
    let (at, vaddr) = table(f)?;
    let t = f.get(at..)?;
    let word = |i: usize| u64_at(t, 8 + 8 * i).map(|w| w as usize);
    let nfunc = word(0)?;
    let text = match u64_at(t, 24)? {
        0 => relative_addend(f, vaddr + 24).or_else(|| module_text(f, t, vaddr))?,
        v => v,
    };
    let (names_at, funcs_at) = (word(3)?, word(7)?);
    let funcs = t.get(funcs_at..)?;
    let mut found = [(0u64, 0u64); N];
    let mut left = N;
    for i in 0..nfunc {
        let entry = u32_at(funcs, 8 * i)?;
        let next = u32_at(funcs, 8 * i + 8)?;
        let func = u32_at(funcs, 8 * i + 4)? as usize;
        let name_off = u32_at(funcs, func.checked_add(4)?)? as i32;
        let name_at = names_at.checked_add(usize::try_from(name_off).ok()?)?;
        let Some(tail) = t.get(name_at..) else {
            continue;
        };
        for (j, want) in names.iter().enumerate() {
            if found[j].0 == 0 && spells(tail, want) {
                found[j] = (text + entry as u64, next.checked_sub(entry)? as u64);
                left -= 1;
            }
        }
        if left == 0 {
            break;
        }
    }
    Some(found)
}

/// Is the header at `t`'s start one this reads (magic, padding, minLC 1, pointers of 8)?
fn header_ok(t: &[u8]) -> bool {
    u32_at(t, 0).is_some_and(|m| MAGICS.contains(&m))
        && t.get(4..8) == Some(&[0, 0, 1, 8])
        && u64_at(t, 8).is_some_and(|n| n > 0 && n < 1 << 24)
        && (3..8).all(|i| u64_at(t, 8 + 8 * i).is_some_and(|o| (o as usize) < t.len()))
}

/// The table's file offset and link-time address.
fn table(f: &[u8]) -> Option<(usize, u64)> {
    if let Some((off, addr)) = section(f) {
        return header_ok(f.get(off..)?).then_some((off, addr));
    }
    // Merged away by a host linker: its header, 8-aligned, in a read-only data segment.
    let (ph, n, size) = (u64_at(f, 32)? as usize, u16_at(f, 56)?, u16_at(f, 54)?);
    for i in 0..n as usize {
        let h = ph.checked_add(i.checked_mul(size as usize)?)?;
        let (flags, off, vaddr, len) = (
            u32_at(f, h + 4)?,
            u64_at(f, h + 8)? as usize,
            u64_at(f, h + 16)?,
            u64_at(f, h + 32)? as usize,
        );
        if u32_at(f, h)? != 1 || flags & 3 != 0 {
            continue; // not a PT_LOAD, or executable or writable
        }
        let seg = f.get(off..off.checked_add(len)?)?;
        let mut at = (8 - off % 8) % 8;
        while at + 64 <= seg.len() {
            if MAGICS.contains(&u32_at(seg, at)?) && header_ok(&seg[at..]) {
                return Some((off + at, vaddr + at as u64));
            }
            at += 8;
        }
    }
    None
}

/// `runtime.text` from the module data (`runtime.firstmoduledata`, in a writable segment),
/// where Go 1.26 and later no longer store it in the table's header: the word that points
/// at the table (`pcHeader`), followed by the function names' pointer; its `minpc` (word
/// 20) must be `text` (word 22) plus the first function's offset, and its `maxpc` (word 21)
/// `text` plus the last entry's. In a PIE these are relocations, and this finds nothing.
fn module_text(f: &[u8], t: &[u8], vaddr: u64) -> Option<u64> {
    let names = vaddr.checked_add(u64_at(t, 32)?)?;
    let funcs = t.get(u64_at(t, 64)? as usize..)?;
    let nfunc = u64_at(t, 8)? as usize;
    let (first, last) = (u32_at(funcs, 0)? as u64, u32_at(funcs, 8 * nfunc)? as u64);
    let (ph, n, size) = (u64_at(f, 32)? as usize, u16_at(f, 56)?, u16_at(f, 54)?);
    for i in 0..n as usize {
        let h = ph.checked_add(i.checked_mul(size as usize)?)?;
        let (off, len) = (u64_at(f, h + 8)? as usize, u64_at(f, h + 32)? as usize);
        if u32_at(f, h)? != 1 || u32_at(f, h + 4)? & 2 == 0 {
            continue;
        }
        let seg = f.get(off..off.checked_add(len)?)?;
        let mut at = (8 - off % 8) % 8;
        while at + 184 <= seg.len() {
            if u64_at(seg, at) == Some(vaddr) && u64_at(seg, at + 8) == Some(names) {
                let w = |i: usize| u64_at(seg, at + 8 * i);
                let (min, max, text) = (w(20)?, w(21)?, w(22)?);
                if min == text.checked_add(first)? && max == text.checked_add(last)? {
                    return Some(text);
                }
            }
            at += 8;
        }
    }
    None
}

/// The `.gopclntab` (or `.data.rel.ro.gopclntab`) section's `(file offset, address)`.
fn section(f: &[u8]) -> Option<(usize, u64)> {
    let shoff = u64_at(f, 40)? as usize;
    let (size, num, names) = (
        u16_at(f, 58)? as usize,
        u16_at(f, 60)? as usize,
        u16_at(f, 62)? as usize,
    );
    let sh = |i: usize| shoff.checked_add(i.checked_mul(size)?);
    let strs = u64_at(f, sh(names)? + 24)? as usize;
    for i in 0..num {
        let h = sh(i)?;
        let name = strs.checked_add(u32_at(f, h)? as usize)?;
        let Some(tail) = f.get(name..) else {
            continue;
        };
        for want in [&b".gopclntab\0"[..], b".data.rel.ro.gopclntab\0"] {
            if tail.starts_with(want) {
                return Some((u64_at(f, h + 24)? as usize, u64_at(f, h + 16)?));
            }
        }
    }
    None
}

/// The addend of the `R_X86_64_RELATIVE` relocation of the word at `vaddr` (a PIE's
/// `textStart`), from the file's `SHT_RELA` sections.
fn relative_addend(f: &[u8], vaddr: u64) -> Option<u64> {
    let shoff = u64_at(f, 40)? as usize;
    let (size, num) = (u16_at(f, 58)? as usize, u16_at(f, 60)? as usize);
    for i in 0..num {
        let h = shoff.checked_add(i.checked_mul(size)?)?;
        if u32_at(f, h + 4)? != 4 {
            continue;
        }
        let (off, len) = (u64_at(f, h + 24)? as usize, u64_at(f, h + 32)? as usize);
        let relas = f.get(off..off.checked_add(len)?)?;
        for r in relas.chunks_exact(24) {
            if u64_at(r, 0)? == vaddr && u64_at(r, 8)? & 0xffff_ffff == 8 {
                return u64_at(r, 16);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of three functions `a.b` (at text + 0x10, 0x20 bytes), `c` (+0x30, 0x10) and
    /// `a.bc` (+0x40, 0x40), text at 0x401000, as a Go linker lays it out.
    fn table_bytes(magic: u32) -> [u8; 0x100] {
        let mut t = [0u8; 0x100];
        let mut put = |at: usize, b: &[u8]| t[at..at + b.len()].copy_from_slice(b);
        put(0, &magic.to_le_bytes());
        put(4, &[0, 0, 1, 8]);
        put(8, &3u64.to_le_bytes());
        put(24, &0x401000u64.to_le_bytes());
        put(32, &0x48u64.to_le_bytes()); // names
        for i in [40usize, 48, 56] {
            put(i, &0x60u64.to_le_bytes());
        }
        put(64, &0x60u64.to_le_bytes()); // function data
        put(0x48, b"a.b\0c\0a.bc\0");
        // Pairs, then the three _funcs at 0x20, 0x28, 0x30 from the function data.
        for (i, (entry, func, name)) in [(0x10u32, 0x20u32, 0i32), (0x30, 0x28, 4), (0x40, 0x30, 6)]
            .iter()
            .enumerate()
        {
            put(0x60 + 8 * i, &entry.to_le_bytes());
            put(0x60 + 8 * i + 4, &func.to_le_bytes());
            put(0x60 + *func as usize, &entry.to_le_bytes());
            put(0x60 + *func as usize + 4, &name.to_le_bytes());
        }
        put(0x60 + 24, &0x80u32.to_le_bytes());
        t
    }

    /// An ELF file with no section headers whose one read-only segment holds the table.
    fn elf(magic: u32) -> [u8; 0x300] {
        let mut f = [0u8; 0x300];
        let mut put = |at: usize, b: &[u8]| f[at..at + b.len()].copy_from_slice(b);
        put(0, b"\x7fELF\x02\x01\x01");
        put(16, &2u16.to_le_bytes());
        put(18, &62u16.to_le_bytes());
        put(32, &64u64.to_le_bytes());
        put(54, &56u16.to_le_bytes());
        put(56, &1u16.to_le_bytes());
        put(64, &1u32.to_le_bytes());
        put(68, &4u32.to_le_bytes()); // R
        put(64 + 8, &0x200u64.to_le_bytes());
        put(64 + 16, &0x500200u64.to_le_bytes());
        put(64 + 32, &0x100u64.to_le_bytes());
        put(0x200, &table_bytes(magic));
        f
    }

    #[test]
    fn functions_are_found_by_whole_name_in_both_layouts() {
        for magic in MAGICS {
            let f = elf(magic);
            let got = lookup(&f, [b"a.bc", b"c", b"a.b", b"zz"]).unwrap();
            assert_eq!(
                got,
                [(0x401040, 0x40), (0x401030, 0x10), (0x401010, 0x20), (0, 0)]
            );
        }
        // Go 1.16's layout, or no table at all: nothing.
        assert_eq!(lookup(&elf(0xffff_fffa), [b"c"]), None);
        // Cut short anywhere: refused or still right, never out of bounds.
        let f = elf(MAGICS[1]);
        for n in 0..f.len() {
            let r = lookup(&f[..n], [b"c"]);
            assert!(r.is_none() || r == Some([(0x401030, 0x10)]) || r == Some([(0, 0)]));
        }
    }
}
