//! The new image at its exec stop: its auxiliary vector (on the stack, above the argument and
//! environment pointers) gets sealed `AT_RANDOM` bytes and, when its clocks are served by the
//! supervisor, loses `AT_SYSINFO_EHDR` (its C library or runtime then finds no vDSO and asks
//! the kernel, where the filter sends the call here).

use super::remote::{read as read_remote, write as write_remote};

const AT_NULL: u64 = 0;
const AT_IGNORE: u64 = 1;
const AT_RANDOM: u64 = 25;
const AT_SYSINFO_EHDR: u64 = 33;

/// Fixes the auxiliary vector of `pid`, stopped at its exec. Returns whether it was found.
pub fn fix(pid: i32, at_random: [u8; 16], drop_vdso: bool) -> bool {
    let Some(regs) = super::remote::regs(pid) else {
        return false;
    };
    // At the exec stop the stack pointer is at argc; argv, NULL, envp, NULL, then the
    // auxiliary vector's (type, value) pairs, ended by AT_NULL.
    let mut at = regs.rsp;
    let word = |at: u64| {
        let mut v = 0u64;
        read_remote(pid, at, &mut v).then_some(v)
    };
    let Some(argc) = word(at) else { return false };
    at += 8 * (argc + 2);
    for _ in 0..1 << 16 {
        match word(at) {
            Some(0) => break,
            Some(_) => at += 8,
            None => return false,
        }
    }
    at += 8;
    for _ in 0..64 {
        let (Some(kind), Some(value)) = (word(at), word(at + 8)) else {
            return false;
        };
        match kind {
            AT_NULL => return true,
            AT_RANDOM => {
                write_remote(pid, value, &at_random);
            }
            AT_SYSINFO_EHDR if drop_vdso => {
                write_remote(pid, at, &AT_IGNORE.to_le_bytes());
            }
            _ => {}
        }
        at += 16;
    }
    false
}

/// The executable mappings of `pid`'s program file (its own code, where its system calls
/// are made), from `/proc/PID/maps`.
pub fn text_ranges(pid: i32) -> Vec<(u64, u64)> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    maps.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (range, perms) = (f.next()?, f.next()?);
            let path = f.nth(3);
            let ours = match (&exe, path) {
                (Some(e), Some(p)) => e.as_os_str() == p,
                _ => false,
            };
            if !ours || !perms.contains('x') {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect()
}

/// Does `pid`'s program carry a Go build id note (a Go runtime, cgo or not)? Reads the first
/// 64 KiB, where the program headers and Go's note are (reading a whole Go executable, a few
/// MB, cost each static Go image ~3 ms of CPU at its exec stop); the whole file only when a
/// note lies further.
pub fn is_go(pid: i32) -> bool {
    file_is_go(format!("/proc/{pid}/exe"))
}

/// [`is_go`] for the executable at `path`.
pub fn file_is_go(path: impl AsRef<std::path::Path>) -> bool {
    use std::io::Read;
    let path = path.as_ref();
    let mut head = Vec::with_capacity(64 << 10);
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    if f.take(64 << 10).read_to_end(&mut head).is_err() {
        return false;
    }
    match notes_say_go(&head) {
        Some(go) => go,
        None => std::fs::read(path).is_ok_and(|b| go_note(&b)),
    }
}

/// [`go_note`] from the program headers alone, on the start of an ELF file: `None` when a
/// note segment lies past `head` (or `head` is not a 64-bit little-endian ELF file).
fn notes_say_go(head: &[u8]) -> Option<bool> {
    let u16_at = |b: &[u8], o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |b: &[u8], o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |b: &[u8], o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?));
    if head.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let (phoff, phentsize, phnum) = (
        u64_at(head, 32)? as usize,
        u16_at(head, 54)? as usize,
        u16_at(head, 56)? as usize,
    );
    for i in 0..phnum {
        let ph = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if u32_at(head, ph)? != 4 {
            continue; // not PT_NOTE
        }
        let (off, size) = (
            u64_at(head, ph + 8)? as usize,
            u64_at(head, ph + 32)? as usize,
        );
        let notes = head.get(off..off.checked_add(size)?)?;
        let mut at = 0;
        while at + 12 <= notes.len() {
            let (namesz, descsz, kind) = (
                u32_at(notes, at)? as usize,
                u32_at(notes, at + 4)? as usize,
                u32_at(notes, at + 8)?,
            );
            let name = notes.get(at + 12..at + 12 + namesz)?;
            let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
            if &name[..end] == b"Go" && kind == 4 {
                return Some(true);
            }
            at += 12 + namesz.next_multiple_of(4) + descsz.next_multiple_of(4);
        }
    }
    Some(false)
}

/// Is there a note of owner "Go", type 4 (the Go build id), in the ELF file `elf`?
pub fn go_note(elf: &[u8]) -> bool {
    use object::read::elf::{ElfFile64, ProgramHeader};
    use object::Endianness;
    let Ok(file) = ElfFile64::<Endianness>::parse(elf) else {
        return false;
    };
    let endian = file.endian();
    file.elf_program_headers().iter().any(|ph| {
        let Ok(Some(mut notes)) = ph.notes(endian, elf) else {
            return false;
        };
        while let Ok(Some(n)) = notes.next() {
            if n.name() == b"Go" && n.n_type(endian) == 4 {
                return true;
            }
        }
        false
    })
}

/// Does the ELF file at `path` have a symbol table (`SHT_SYMTAB`; a stripped one has not)?
/// Reads the header and the section headers only.
pub fn has_symtab(path: impl AsRef<std::path::Path>) -> bool {
    use std::os::unix::fs::FileExt;
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    let mut h = [0u8; 64];
    if f.read_exact_at(&mut h, 0).is_err() || &h[..6] != b"\x7fELF\x02\x01" {
        return false;
    }
    let shoff = u64::from_le_bytes(h[40..48].try_into().unwrap_or_default());
    let entsize = u16::from_le_bytes([h[58], h[59]]) as usize;
    let num = u16::from_le_bytes([h[60], h[61]]) as usize;
    if entsize < 8 || num > 4096 {
        return false;
    }
    let mut sh = vec![0u8; entsize * num];
    if f.read_exact_at(&mut sh, shoff).is_err() {
        return false;
    }
    const SHT_SYMTAB: u32 = 2;
    sh.chunks_exact(entsize)
        .any(|s| u32::from_le_bytes([s[4], s[5], s[6], s[7]]) == SHT_SYMTAB)
}

/// Writes the 16 `AT_RANDOM` bytes of running process `pid` (its address from
/// `/proc/PID/auxv`), before its runtime reads them.
pub fn seal_at_random(pid: i32, at_random: [u8; 16]) -> bool {
    let auxv = std::fs::read(format!("/proc/{pid}/auxv")).unwrap_or_default();
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
    auxv.chunks_exact(16)
        .find(|p| word(&p[..8]) == AT_RANDOM)
        .is_some_and(|p| write_remote(pid, word(&p[8..]), &at_random))
}

/// The load bias of `pid`'s program, whose executable mappings are `text`: 0 for a
/// fixed-address executable (`ET_EXEC`), else where its first page was mapped.
pub fn load_bias(pid: i32, text: &[(u64, u64)]) -> u64 {
    let mut head = [0u8; 18];
    let ok = std::fs::File::open(format!("/proc/{pid}/exe"))
        .and_then(|f| std::os::unix::fs::FileExt::read_exact_at(&f, &mut head, 0))
        .is_ok();
    const ET_DYN: u16 = 3;
    if !ok || u16::from_le_bytes([head[16], head[17]]) != ET_DYN {
        return 0;
    }
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    maps.lines()
        .find(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 6
                && f[2] == "00000000"
                && exe.as_ref().is_some_and(|e| e.as_os_str() == f[5])
        })
        .and_then(|l| u64::from_str_radix(l.split('-').next()?, 16).ok())
        .unwrap_or_else(|| text.iter().map(|r| r.0).min().unwrap_or(0))
}

/// Where `pid`'s vDSO is mapped (its `AT_SYSINFO_EHDR`, from `/proc/PID/auxv`).
pub fn vdso_base(pid: i32) -> Option<u64> {
    let auxv = std::fs::read(format!("/proc/{pid}/auxv")).ok()?;
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
    auxv.chunks_exact(16)
        .find(|p| word(&p[..8]) == AT_SYSINFO_EHDR)
        .map(|p| word(&p[8..]))
        .filter(|&b| b != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The headers' answer agrees with the whole file's, for the programs at hand.
    #[test]
    fn the_go_note_is_found_from_the_first_64_kib() {
        for p in ["/bin/sh", "/bin/true", "/usr/bin/go", "/usr/lib/go/bin/go"] {
            let Ok(b) = std::fs::read(p) else { continue };
            let head = &b[..b.len().min(64 << 10)];
            assert_eq!(notes_say_go(head), Some(go_note(&b)), "{p}");
        }
        assert_eq!(notes_say_go(b"#!/bin/sh\n"), None);
    }

    /// A stripped file has no symbol table; the test binary (built with symbols) has one.
    #[test]
    fn a_stripped_file_is_told_apart() {
        let me = std::env::current_exe().unwrap();
        assert!(has_symtab(&me));
        let dir = tempfile::tempdir().unwrap();
        let stripped = dir.path().join("s");
        let st = std::process::Command::new("strip")
            .arg("-o")
            .arg(&stripped)
            .arg(&me)
            .status();
        if st.is_ok_and(|s| s.success()) {
            assert!(!has_symtab(&stripped));
        }
        assert!(!has_symtab("/nonexistent"));
    }
}
