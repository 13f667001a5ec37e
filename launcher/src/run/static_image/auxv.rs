//! The new image at its exec stop: its auxiliary vector (on the stack, above the argument and
//! environment pointers) gets sealed `AT_RANDOM` bytes and, when its clocks are served by the
//! supervisor, loses `AT_SYSINFO_EHDR` (its C library or runtime then finds no vDSO and asks
//! the kernel, where the filter sends the call here).

use super::remote::write as write_remote;

const AT_NULL: u64 = 0;
const AT_IGNORE: u64 = 1;
const AT_PHDR: u64 = 3;
const AT_RANDOM: u64 = 25;
const AT_SYSINFO_EHDR: u64 = 33;

/// The auxiliary vector on the stack of an image stopped at its exec: where its entries
/// that the supervisor changes are, and the vDSO it names.
pub struct Vector {
    /// `AT_RANDOM`'s value: the address of the 16 bytes.
    random: Option<u64>,
    /// Where the `AT_SYSINFO_EHDR` entry is (its type word).
    sysinfo_at: Option<u64>,
    /// `AT_SYSINFO_EHDR`'s value: the vDSO's ELF image.
    pub vdso: Option<u64>,
    /// `AT_PHDR`'s value: where the program's headers are mapped.
    pub phdr: Option<u64>,
}

impl Vector {
    /// Reads the vector of stopped image `pid`, whose stack pointer is `rsp`: at the exec
    /// stop it points at argc; argv, NULL, envp, NULL, then the (type, value) pairs, ended by
    /// `AT_NULL`. Read in one piece (a word per system call cost each image ~0.3 ms), a
    /// larger one when the environment is long.
    pub fn read(pid: i32, rsp: u64) -> Option<Vector> {
        // A page holds them for an environment of up to ~400 variables.
        let mut page = [0u8; 4096];
        let n = super::batch::read_some(pid, rsp, &mut page);
        match Vector::parse(&page[..n], rsp) {
            Err(true) if n == page.len() => {}
            v => return v.ok(),
        }
        let mut len = 64 << 10;
        loop {
            let mut buf = vec![0u8; len];
            let n = super::batch::read_some(pid, rsp, &mut buf);
            match Vector::parse(&buf[..n], rsp) {
                Ok(v) => return Some(v),
                Err(true) if n == len && len < 4 << 20 => len *= 4,
                Err(_) => return None,
            }
        }
    }

    /// The vector in `stack` (the stack's bytes from `rsp` up); `Err(true)` when it runs past
    /// them, `Err(false)` when it is not one.
    fn parse(stack: &[u8], rsp: u64) -> Result<Vector, bool> {
        let word = |i: usize| {
            stack
                .get(8 * i..8 * i + 8)
                .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
                .ok_or(true)
        };
        let argc = word(0)?;
        if argc > 1 << 24 {
            return Err(false);
        }
        let mut i = argc as usize + 2;
        let mut envs = 0;
        while word(i)? != 0 {
            i += 1;
            envs += 1;
            if envs > 1 << 20 {
                return Err(false);
            }
        }
        i += 1;
        let mut v = Vector {
            random: None,
            sysinfo_at: None,
            vdso: None,
            phdr: None,
        };
        for _ in 0..64 {
            let (kind, value) = (word(i)?, word(i + 1)?);
            match kind {
                AT_NULL => return Ok(v),
                AT_RANDOM => v.random = Some(value),
                AT_PHDR => v.phdr = Some(value),
                AT_SYSINFO_EHDR => {
                    v.sysinfo_at = Some(rsp + 8 * i as u64);
                    v.vdso = Some(value).filter(|&b| b != 0);
                }
                _ => {}
            }
            i += 2;
        }
        Err(false)
    }

    /// Gives image `pid` the sealed `AT_RANDOM` bytes and, when `drop_vdso`, hides its vDSO
    /// (`AT_SYSINFO_EHDR` becomes `AT_IGNORE`).
    pub fn fix(&self, pid: i32, at_random: [u8; 16], drop_vdso: bool) {
        if let Some(at) = self.random {
            write_remote(pid, at, &at_random);
        }
        if let (Some(at), true) = (self.sysinfo_at, drop_vdso) {
            write_remote(pid, at, &AT_IGNORE.to_le_bytes());
        }
    }
}

/// The executable mappings of `pid`'s program file (its own code, where its system calls
/// are made), from `/proc/PID/maps`.
pub fn text_ranges(pid: i32) -> Vec<(u64, u64)> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    super::maps::Maps::read(pid).text(exe.as_deref())
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
pub fn notes_say_go(head: &[u8]) -> Option<bool> {
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
    let auxv = super::remote::read_proc(&format!("/proc/{pid}/auxv")).unwrap_or_default();
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
    super::maps::Maps::read(pid).bias(exe.as_deref(), text)
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
