//! A cgo program's sites (`seal_abi::supervised::go_site`: the entropy call, `cputicks`, the
//! runtime's random functions) kept in the run directory, in the file the run's supervisors
//! keep a static Go image's in (the launcher's `go_exe.rs`), named after the executable's
//! identity ([`ExeIdentity::kept_name`]). Finding them reads the executable's symbol table:
//! ~140 µs of a cgo hello world's start-up, in libseal's constructor. The launcher puts a cgo
//! root command's file there before it starts (from the user's cache); a cgo program the
//! run starts again (a script's loop) reads the file its first start wrote.
//!
//! System calls only, on the stack: this runs in libseal's constructor.

use seal_abi::supervised::go_site::{ExeIdentity, Sites, KEPT_NAME_MAX, WORDS};

use crate::core::sys;
use crate::process::target::{in_run_dir, Path};

/// The kept file's path for the executable open at `fd`.
fn path_of(fd: i32) -> Option<Path> {
    // SAFETY: an all-zero `stat` is a valid value; fstat fills it.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: `st` is a valid out-pointer.
    let r = unsafe { sys::syscall3(libc::SYS_fstat, fd as i64, &mut st as *mut _ as i64, 0) };
    if r != 0 {
        return None;
    }
    let id = ExeIdentity {
        dev: st.st_dev,
        ino: st.st_ino,
        size: st.st_size as u64,
        mtime: (st.st_mtime, st.st_mtime_nsec),
        ctime: (st.st_ctime, st.st_ctime_nsec),
    };
    let mut name = [0u8; KEPT_NAME_MAX];
    let n = id.kept_name(&mut name);
    in_run_dir(&name[..n])
}

/// The sites kept for the executable open at `fd`, as linked, and its lowest load address;
/// `None` when none are kept (or the file is not exactly what [`keep`] writes).
pub fn read(fd: i32) -> Option<(Sites, u64)> {
    let mut path = path_of(fd)?;
    let f = sys::open(
        path.as_cstr(),
        libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        0,
    );
    if f < 0 {
        return None;
    }
    let mut bytes = [0u8; WORDS * 8 + 1];
    let n = sys::read_all(f, &mut bytes);
    sys::close(f);
    if n != WORDS * 8 {
        return None;
    }
    let mut w = [0u64; WORDS];
    for (word, b) in w.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut le = [0u8; 8];
        le.copy_from_slice(b);
        *word = u64::from_le_bytes(le);
    }
    let (sites, low) = Sites::from_words(&w)?;
    Some((sites, low?))
}

/// Keeps `sites` (as linked) and `low` for the executable open at `fd`: written to a file of
/// this process's own, then renamed, so that a reader finds all of it or none.
pub fn keep(fd: i32, sites: &Sites, low: u64) {
    let Some(mut path) = path_of(fd) else {
        return;
    };
    let mut tmp = Path::new();
    let name_at = path
        .as_bytes()
        .iter()
        .rposition(|&c| c == b'/')
        .map_or(0, |i| i + 1);
    let (dir, name) = path.as_bytes().split_at(name_at);
    tmp.push(dir)
        .push(b".")
        .push(name)
        .push(b".")
        .push_i64(sys::getpid() as i64);
    let f = sys::create_private(tmp.as_cstr(), libc::O_WRONLY, true);
    if f < 0 {
        return;
    }
    let mut bytes = [0u8; WORDS * 8];
    for (b, w) in bytes.chunks_exact_mut(8).zip(sites.to_words(Some(low))) {
        b.copy_from_slice(&w.to_le_bytes());
    }
    sys::write_all(f, &bytes);
    sys::close(f);
    // SAFETY: two NUL-terminated paths.
    let r = unsafe {
        sys::syscall3(
            libc::SYS_rename,
            tmp.as_cstr().as_ptr() as i64,
            path.as_cstr().as_ptr() as i64,
            0,
        )
    };
    if r != 0 {
        // SAFETY: a NUL-terminated path.
        unsafe { sys::syscall3(libc::SYS_unlink, tmp.as_cstr().as_ptr() as i64, 0, 0) };
    }
}

/// One of this program's program headers in memory: `(p_type, p_flags, p_vaddr, p_memsz)`.
pub type Phdr = (u32, u32, u64, u64);

/// This program's program headers, as the loader mapped them (`AT_PHDR`, `AT_PHNUM`; at most
/// 64), and where they are.
pub fn memory_phdrs() -> (u64, impl Iterator<Item = Phdr>) {
    // SAFETY: getauxval has no preconditions.
    let (phdr, n) = unsafe {
        (
            libc::getauxval(libc::AT_PHDR),
            libc::getauxval(libc::AT_PHNUM),
        )
    };
    let n = if phdr == 0 { 0 } else { n.min(64) };
    let headers = (0..n).map(move |i| {
        let h = phdr + i * 56;
        // SAFETY: the program's program headers, mapped (AT_PHDR, AT_PHNUM entries of 56
        // bytes): p_type at 0, p_flags at 4, p_vaddr at 16, p_memsz at 40.
        unsafe {
            (
                core::ptr::read_unaligned(h as *const u32),
                core::ptr::read_unaligned((h + 4) as *const u32),
                core::ptr::read_unaligned((h + 16) as *const u64),
                core::ptr::read_unaligned((h + 40) as *const u64),
            )
        }
    });
    (phdr, headers)
}

/// This program's load bias, from its program headers in memory (`AT_PHDR` minus their
/// `PT_PHDR`'s link-time address: 0 for a fixed-address executable); `None` without a
/// `PT_PHDR` (the caller reads the file).
pub fn memory_bias() -> Option<u64> {
    const PT_PHDR: u32 = 6;
    let (phdr, mut headers) = memory_phdrs();
    let (_, _, vaddr, _) = headers.find(|h| h.0 == PT_PHDR)?;
    phdr.checked_sub(vaddr)
}
