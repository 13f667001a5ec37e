//! What a process is about to exec, and whether libseal can follow it there: a statically
//! linked ELF (no `PT_INTERP`, so no loader reads `LD_PRELOAD`), a setuid/setgid file that
//! changes the user (the loader ignores preloads with slashes in secure mode), or an ELF for
//! another architecture or class cannot be sealed. Scripts are followed through `#!` to their
//! interpreter, a few levels deep. Raw syscalls only: this runs in fork children.

use seal_abi::unsealed;

use crate::core::config;
use crate::core::sys::{self, StackBuf};

pub type Path = StackBuf<4200>;

/// `$LIBSEAL_RUN_DIR/NAME` (the caller may push more onto it); `None` without a run directory.
pub fn in_run_dir(name: &[u8]) -> Option<Path> {
    let run_dir = config::RUN_DIR.get();
    if run_dir.is_empty() {
        return None;
    }
    let mut p = Path::new();
    p.push(run_dir).push(b"/").push(name);
    Some(p)
}

pub use seal_abi::exec_target::{classify, secure_exec, Head, MAX_SCRIPT_DEPTH as MAX_DEPTH};

/// The program file an exec runs (the last of a `#!` chain), by device and inode; all zero
/// when unknown. The new image looks its name up by it ([`seal_abi::ExeNames`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExeId {
    pub dev: u64,
    pub ino: u64,
}

/// Checks `path` (NUL-terminated): `Err((kind, program))` when it cannot be sealed, else the
/// program file it runs, when known.
// The path travels on the stack by design: this runs in fork children, where boxing is out.
#[allow(clippy::result_large_err)]
pub fn check(path: &[u8]) -> Result<ExeId, (u32, Path)> {
    let mut cur = Path::new();
    let path = &path[..path.len().saturating_sub(1)];
    if !path.starts_with(b"/") {
        // Name the program by its absolute path, so the launcher's one-line-per-program
        // dedup sees `./x` and `/dir/x` as the same program.
        let mut cwd = [0u8; 4096];
        let n = sys::getcwd(&mut cwd);
        if n > 0 {
            cur.push(&cwd[..n]).push(b"/");
        }
    }
    let rel = path.strip_prefix(b"./").unwrap_or(path);
    cur.push(rel);
    for _ in 0..MAX_DEPTH {
        let fd = sys::open(cur.as_cstr(), libc::O_RDONLY | libc::O_CLOEXEC, 0);
        if fd < 0 {
            return Ok(ExeId::default()); // exec will fail (or the file is unreadable)
        }
        // SAFETY: an all-zero stat is a valid out-buffer.
        let mut st: libc::stat = unsafe { core::mem::zeroed() };
        // SAFETY: fd is open, st is writable.
        let r = unsafe { sys::syscall3(libc::SYS_fstat, fd as i64, &mut st as *mut _ as i64, 0) };
        // The real ids only matter for a set-id file (two system calls saved on every exec).
        if r == 0 && st.st_mode & (libc::S_ISUID | libc::S_ISGID) != 0 {
            // SAFETY: no arguments.
            let (ruid, rgid) = unsafe {
                (
                    sys::syscall3(libc::SYS_getuid, 0, 0, 0) as u32,
                    sys::syscall3(libc::SYS_getgid, 0, 0, 0) as u32,
                )
            };
            if secure_exec(st.st_mode, st.st_uid, st.st_gid, ruid, rgid) {
                sys::close(fd);
                return Err((unsealed::SETUID, cur));
            }
        }
        // The ELF header and, in most executables, the program headers right after it: one
        // read serves both.
        let mut head = [0u8; 1024];
        let n = pread(fd, &mut head, 0);
        let head = &head[..n];
        let mut read_at = |off: u64, buf: &mut [u8]| match head.get(off as usize..) {
            Some(have) if have.len() >= buf.len() => {
                buf.copy_from_slice(&have[..buf.len()]);
                buf.len()
            }
            _ => pread(fd, buf, off),
        };
        // A `#!` line is read as the kernel reads it: its first 256 bytes.
        let first = if head.starts_with(b"#!") {
            &head[..n.min(256)]
        } else {
            head
        };
        let id = ExeId {
            dev: st.st_dev,
            ino: st.st_ino,
        };
        let verdict = match classify(first, &mut read_at) {
            Head::Script(interp) => {
                let mut next = Path::new();
                next.push(interp);
                Some(next)
            }
            Head::Elf(Ok(())) if r == 0 => return close_with(fd, Ok(id)),
            Head::Elf(Ok(())) | Head::Other => None,
            Head::Elf(Err(unsealed::STATIC_BINARY)) if r == 0 && is_system_loader(&st) => {
                return close_with(fd, Ok(id))
            }
            Head::Elf(Err(kind)) => return close_with(fd, Err((kind, cur))),
        };
        sys::close(fd);
        match verdict {
            Some(next) if next.len > 0 => cur = next,
            _ => return Ok(ExeId::default()),
        }
    }
    Ok(ExeId::default())
}

#[allow(clippy::result_large_err)]
fn close_with(fd: i32, r: Result<ExeId, (u32, Path)>) -> Result<ExeId, (u32, Path)> {
    sys::close(fd);
    r
}

/// Is the file with this `stat` the dynamic loader itself (run as a program, it reads
/// `LD_PRELOAD`; see [`seal_abi::exec_target::SYSTEM_LOADER`])?
fn is_system_loader(st: &libc::stat) -> bool {
    let mut path = StackBuf::<64>::new();
    path.push(seal_abi::exec_target::SYSTEM_LOADER.as_bytes());
    // SAFETY: an all-zero stat is a valid out-buffer.
    let mut l: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: path is NUL-terminated, l is writable.
    let r = unsafe {
        sys::syscall3(
            libc::SYS_stat,
            path.as_cstr().as_ptr() as i64,
            &mut l as *mut _ as i64,
            0,
        )
    };
    r == 0 && l.st_dev == st.st_dev && l.st_ino == st.st_ino
}

fn pread(fd: i32, buf: &mut [u8], off: u64) -> usize {
    sys::fill(libc::SYS_pread64, fd, buf, [off as i64, 0, 0]).max(0) as usize
}

/// The file `execveat(dirfd, rel, …)` runs: `rel` itself when absolute (or relative to the
/// working directory), else through `fd_dir<dirfd>` (`/proc/self/fd/`: a path to check;
/// `/dev/fd/`: the name the kernel gives the new image, `super::kernel_file_name`).
pub fn execveat_path(dirfd: i32, rel: &[u8], fd_dir: &[u8]) -> Path {
    let mut p = Path::new();
    if rel.starts_with(b"/") || (dirfd == libc::AT_FDCWD && !rel.is_empty()) {
        p.push(rel);
    } else {
        p.push(fd_dir).push_i64(dirfd as i64);
        if !rel.is_empty() {
            p.push(b"/").push(rel);
        }
    }
    p
}

/// Resolves `file` the way `execvp` does: as is when it contains a slash, else the first
/// executable regular file in `$PATH` (default `/bin:/usr/bin`). `None` when not found.
pub fn search_path(file: &[u8]) -> Option<Path> {
    let mut out = Path::new();
    if file.is_empty() {
        return None;
    }
    if file.contains(&b'/') {
        out.push(file);
        return Some(out);
    }
    let path = crate::core::config::getenv("PATH").unwrap_or(b"/bin:/usr/bin");
    for dir in path.split(|&c| c == b':') {
        out.len = 0;
        out.push(if dir.is_empty() { b"." } else { dir })
            .push(b"/")
            .push(file);
        if executable_file(out.as_cstr()) {
            return Some(out);
        }
    }
    None
}

fn executable_file(path: &[u8]) -> bool {
    // SAFETY: path is NUL-terminated.
    let ok = unsafe {
        sys::syscall6(
            libc::SYS_faccessat,
            libc::AT_FDCWD as i64,
            path.as_ptr() as i64,
            libc::X_OK as i64,
            0,
            0,
            0,
        )
    } == 0;
    if !ok {
        return false;
    }
    // SAFETY: as in check().
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: path NUL-terminated, st writable.
    let r = unsafe {
        sys::syscall6(
            libc::SYS_newfstatat,
            libc::AT_FDCWD as i64,
            path.as_ptr() as i64,
            &mut st as *mut _ as i64,
            0,
            0,
            0,
        )
    };
    r == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execveat_paths() {
        let path = |dirfd: i32, rel: &[u8]| {
            let p = execveat_path(dirfd, rel, b"/proc/self/fd/");
            String::from_utf8(p.as_bytes().to_vec()).unwrap()
        };
        assert_eq!(path(3, b"/bin/sh"), "/bin/sh");
        assert_eq!(path(libc::AT_FDCWD, b"run.sh"), "run.sh");
        assert_eq!(path(7, b"run.sh"), "/proc/self/fd/7/run.sh");
        // AT_EMPTY_PATH: the descriptor itself.
        assert_eq!(path(7, b""), "/proc/self/fd/7");
    }

    fn file_check(p: &str) -> Result<ExeId, u32> {
        let mut b = Path::new();
        b.push(p.as_bytes());
        check(b.as_cstr()).map_err(|(k, _)| k)
    }

    fn id_of(p: &str) -> ExeId {
        let m = std::fs::metadata(p).unwrap();
        use std::os::unix::fs::MetadataExt;
        ExeId {
            dev: m.dev(),
            ino: m.ino(),
        }
    }

    #[test]
    fn scripts_name_their_interpreter() {
        let mut none = |_: u64, _: &mut [u8]| 0usize;
        assert_eq!(
            classify(b"#! /usr/bin/env  python3\nx", &mut none),
            Head::Script(b"/usr/bin/env")
        );
        assert_eq!(classify(b"#!/bin/sh", &mut none), Head::Script(b"/bin/sh"));
        assert_eq!(classify(b"hello", &mut none), Head::Other);
    }

    #[test]
    fn elf_class_and_machine() {
        let mut h = [0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 1; // 32-bit
        h[5] = 1;
        h[18] = 3;
        let mut none = |_: u64, _: &mut [u8]| 0usize;
        assert_eq!(
            classify(&h, &mut none),
            Head::Elf(Err(unsealed::FOREIGN_ARCH))
        );
        h[4] = 2;
        h[18] = 62;
        h[54] = 56;
        h[56] = 1;
        assert_eq!(
            classify(&h, &mut none),
            Head::Elf(Err(unsealed::STATIC_BINARY))
        );
        let mut interp = |_: u64, b: &mut [u8]| {
            b[..4].copy_from_slice(&3u32.to_le_bytes());
            b.len()
        };
        assert_eq!(classify(&h, &mut interp), Head::Elf(Ok(())));
    }

    #[test]
    fn real_files() {
        // The program is the file the links lead to; a script's is its interpreter's.
        assert_eq!(file_check("/bin/sh"), Ok(id_of("/bin/sh")));
        assert_ne!(id_of("/bin/sh"), ExeId::default());
        let dir = std::env::temp_dir().join(format!("seal-target-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("s");
        std::fs::write(&script, "#!/bin/sh\necho\n").unwrap();
        assert_eq!(file_check(script.to_str().unwrap()), Ok(id_of("/bin/sh")));
        let text = dir.join("t");
        std::fs::write(&text, "echo\n").unwrap();
        assert_eq!(file_check(text.to_str().unwrap()), Ok(ExeId::default()));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(file_check("/nonexistent/x"), Ok(ExeId::default()));
        assert!(search_path(b"sh").is_some());
        assert!(search_path(b"no-such-program-here").is_none());
    }

    #[test]
    fn secure_mode_rules() {
        assert!(!secure_exec(0o4755, 0, 0, 0, 0), "setuid to ourselves");
        assert!(secure_exec(0o4755, 65534, 0, 0, 0));
        assert!(secure_exec(0o2755, 0, 65534, 0, 0));
        assert!(
            !secure_exec(0o2745, 0, 65534, 0, 0),
            "setgid without group x"
        );
        assert!(!secure_exec(0o755, 65534, 65534, 0, 0));
    }
}
