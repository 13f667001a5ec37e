//! Is the command seal starts itself sealable? The shim checks every exec inside the run; the
//! root command is started by the launcher, so a static or setuid root would otherwise run
//! unsealed without a word (it never loads libseal, so it writes no census).

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use seal_abi::exec_target::{classify, secure_exec, Head, MAX_SCRIPT_DEPTH};
use seal_abi::unsealed;

/// Warning lines (same form as the census's `unsealed_warnings`) for the command `program`.
pub fn root_warnings(program: &OsStr) -> Vec<String> {
    let Some(path) = resolve(program) else {
        return Vec::new();
    };
    match check(&path) {
        Some((kind, prog)) => vec![format!(
            "not sealed ({}): {}",
            unsealed::name(kind),
            prog.display()
        )],
        None => Vec::new(),
    }
}

/// `program` as execvp would find it (absolute, so it dedups with the shim's reports).
pub fn resolve(program: &OsStr) -> Option<PathBuf> {
    let p = Path::new(program);
    if program.as_bytes().contains(&b'/') {
        return std::path::absolute(p).ok();
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    std::env::split_paths(&path).map(|d| d.join(p)).find(|c| {
        c.metadata()
            .map(|m| m.is_file() && m.mode() & 0o111 != 0)
            .unwrap_or(false)
    })
}

fn check(path: &Path) -> Option<(u32, PathBuf)> {
    let mut cur = path.to_path_buf();
    // SAFETY: getuid/getgid have no preconditions.
    let (ruid, rgid) = unsafe { (libc::getuid(), libc::getgid()) };
    for _ in 0..MAX_SCRIPT_DEPTH {
        let mut f = std::fs::File::open(&cur).ok()?;
        let meta = f.metadata().ok()?;
        if secure_exec(meta.mode(), meta.uid(), meta.gid(), ruid, rgid) {
            return Some((unsealed::SETUID, cur));
        }
        let mut head = [0u8; 256];
        let mut n = 0;
        while n < head.len() {
            match f.read(&mut head[n..]) {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k,
            }
        }
        let mut read_at = |off: u64, buf: &mut [u8]| f.read_at(buf, off).unwrap_or(0);
        match classify(&head[..n], &mut read_at) {
            Head::Script(interp) if !interp.is_empty() => {
                cur = PathBuf::from(OsStr::from_bytes(interp));
            }
            Head::Elf(Err(unsealed::STATIC_BINARY)) if is_system_loader(&meta) => return None,
            Head::Elf(Err(kind)) => return Some((kind, cur)),
            _ => return None,
        }
    }
    None
}

/// Is this file the dynamic loader itself (see [`seal_abi::exec_target::SYSTEM_LOADER`])?
fn is_system_loader(meta: &std::fs::Metadata) -> bool {
    std::fs::metadata(seal_abi::exec_target::SYSTEM_LOADER)
        .map(|l| l.dev() == meta.dev() && l.ino() == meta.ino())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_programs_and_scripts_are_fine() {
        assert!(root_warnings(OsStr::new("sh")).is_empty());
        assert!(root_warnings(OsStr::new("/nonexistent/prog")).is_empty());
        let loader = seal_abi::exec_target::SYSTEM_LOADER;
        if Path::new(loader).exists() {
            assert!(root_warnings(OsStr::new(loader)).is_empty());
        }
    }
}
