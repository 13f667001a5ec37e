//! Can libseal follow an exec into this file? Pure byte-level checks shared by the shim (before
//! every exec) and the launcher (for the command it starts itself).

use super::unsealed;

/// What the first bytes of a file say.
#[derive(Debug, PartialEq, Eq)]
pub enum Head<'a> {
    /// `#!interpreter` (the interpreter path).
    Script(&'a [u8]),
    /// An ELF file: `Ok(())` loadable with libseal, `Err(kind)` not (an [`unsealed`] kind).
    Elf(Result<(), u32>),
    /// Neither (the exec fails, or a shell runs it: nothing to report).
    Other,
}

/// Classifies a file from its first bytes (`head`, at least the 64-byte ELF header) and a
/// reader `read_at(offset, buf) -> bytes read` for its program headers.
pub fn classify<'a>(head: &'a [u8], read_at: &mut dyn FnMut(u64, &mut [u8]) -> usize) -> Head<'a> {
    if head.starts_with(b"#!") {
        let rest = &head[2..];
        let line = rest.split(|&c| c == b'\n').next().unwrap_or(rest);
        let start = line
            .iter()
            .position(|&c| c != b' ' && c != b'\t')
            .unwrap_or(line.len());
        let line = &line[start..];
        let end = line
            .iter()
            .position(|&c| c == b' ' || c == b'\t' || c == b'\r')
            .unwrap_or(line.len());
        return Head::Script(&line[..end]);
    }
    if !head.starts_with(b"\x7fELF") || head.len() < 64 {
        return Head::Other;
    }
    let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]);
    // EI_CLASS 2 = 64-bit, EI_DATA 1 = little endian, e_machine 62 = x86_64.
    if head[4] != 2 || head[5] != 1 || u16_at(18) != 62 {
        return Head::Elf(Err(unsealed::FOREIGN_ARCH));
    }
    let mut off = [0u8; 8];
    off.copy_from_slice(&head[32..40]);
    let phoff = u64::from_le_bytes(off);
    let phentsize = u16_at(54) as usize;
    let phnum = u16_at(56) as usize;
    if phentsize < 56 || phnum == 0 {
        return Head::Elf(Err(unsealed::STATIC_BINARY));
    }
    let mut buf = [0u8; 4096];
    let want = (phentsize * phnum).min(buf.len());
    let got = read_at(phoff, &mut buf[..want]);
    for i in 0..got / phentsize {
        let b = &buf[i * phentsize..];
        // PT_INTERP (3): the dynamic loader runs and reads LD_PRELOAD.
        if u32::from_le_bytes([b[0], b[1], b[2], b[3]]) == 3 {
            return Head::Elf(Ok(()));
        }
    }
    Head::Elf(Err(unsealed::STATIC_BINARY))
}

/// Would the loader run in secure mode (ignoring `LD_PRELOAD` paths) when a process with
/// real ids `ruid`/`rgid` execs a file with this mode and owner? Setuid to another user, or
/// setgid (with group execute) to another group.
pub fn secure_exec(mode: u32, uid: u32, gid: u32, ruid: u32, rgid: u32) -> bool {
    const S_ISUID: u32 = 0o4000;
    const S_ISGID: u32 = 0o2000;
    const S_IXGRP: u32 = 0o010;
    let setuid = mode & S_ISUID != 0 && uid != ruid;
    let setgid = mode & S_ISGID != 0 && mode & S_IXGRP != 0 && gid != rgid;
    setuid || setgid
}

/// Levels of `#!` followed (the kernel allows 4).
pub const MAX_SCRIPT_DEPTH: usize = 4;

/// The x86_64 dynamic loader. It has no `PT_INTERP` (it is one), but run as a program
/// (`ldd`, `ld.so /path/prog`) it honours `LD_PRELOAD` like any loaded program: a file
/// that is this one (same device and inode) is not a static binary.
pub const SYSTEM_LOADER: &str = "/lib64/ld-linux-x86-64.so.2";
