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

/// What starting the root command will do.
#[derive(Debug, PartialEq)]
enum Root {
    /// The dynamic loader runs (directly or behind `#!` lines) and loads libseal; `go`: the
    /// program it loads is a Go program (its build id note in its first page), whose libseal
    /// asks the run's server for a supervisor before `main`.
    Loads { go: bool },
    /// It never loads libseal: why (an `unsealed` kind) and which file.
    Unsealable(u32, PathBuf),
    /// Not found, unreadable, or neither ELF nor `#!` script (execvp may still hand it to sh).
    Unknown,
}

/// Warning lines (same form as the census's `unsealed_warnings`) for the command `program`,
/// and whether libseal is sure to load in it (then libseal can tie the root to seal instead
/// of a step between fork and exec: `supervise::spawn`). `supervised`: `program` is known
/// already to be a static root this kernel supervises ([`plan`]; not read again).
pub fn inspect(program: &OsStr, supervised: bool) -> (Vec<String>, bool) {
    if supervised {
        return (Vec::new(), true);
    }
    match resolve(program).map_or(Root::Unknown, |p| check(&p)) {
        Root::Loads { .. } => (Vec::new(), true),
        // Supervised (and reported): set up by the launcher's child, or by libseal in the
        // `seal __exec-static` trampoline where the child cannot (`static_image::RootExec`).
        Root::Unsealable(unsealed::STATIC_BINARY, _) if crate::run::static_image::available() => {
            (Vec::new(), true)
        }
        Root::Unsealable(kind, prog) => (
            vec![format!(
                "not sealed ({}): {}",
                unsealed::name(kind),
                prog.display()
            )],
            false,
        ),
        Root::Unknown => (Vec::new(), false),
    }
}

/// What the launcher prepares for a root command before it makes the run directory.
#[derive(Debug, PartialEq)]
pub enum Plan {
    /// A static binary (or a script whose interpreter is one) this kernel can supervise: the
    /// file to start, and that static binary (what libseal reports).
    Static(PathBuf, PathBuf),
    /// A dynamically linked Go program (a cgo build): its libseal asks the run's server for
    /// a supervisor before `main`, so the launcher starts the server for it
    /// (`static_image::fork_server`), and puts what its libseal looks up in the executable
    /// in the run directory (`static_image::keep_go_root`). Its path.
    DynamicGo(PathBuf),
    Other,
}

/// [`Plan`] for root command `program`: one read of its first page.
pub fn plan(program: &OsStr) -> Plan {
    let Some(path) = resolve(program) else {
        return Plan::Other;
    };
    match check(&path) {
        Root::Unsealable(unsealed::STATIC_BINARY, prog)
            if crate::run::static_image::available() =>
        {
            Plan::Static(path, prog)
        }
        Root::Loads { go: true } => Plan::DynamicGo(path),
        _ => Plan::Other,
    }
}

/// `program` as execvp would find it (absolute, so it dedups with the shim's reports).
pub fn resolve(program: &OsStr) -> Option<PathBuf> {
    // One launcher resolves its command for the pad, the root check and the private /tmp:
    // one PATH search (a `stat` per directory), as seal changes neither PATH nor its cwd.
    thread_local! {
        static LAST: std::cell::RefCell<Option<(std::ffi::OsString, Option<PathBuf>)>> =
            const { std::cell::RefCell::new(None) };
    }
    if let Some(hit) = LAST.with_borrow(|l| {
        l.as_ref()
            .filter(|(prog, _)| prog == program)
            .map(|(_, r)| r.clone())
    }) {
        return hit;
    }
    let r = search(program);
    LAST.set(Some((program.to_os_string(), r.clone())));
    r
}

fn search(program: &OsStr) -> Option<PathBuf> {
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

fn check(path: &Path) -> Root {
    let mut cur = path.to_path_buf();
    // SAFETY: getuid/getgid have no preconditions.
    let (ruid, rgid) = unsafe { (libc::getuid(), libc::getgid()) };
    for _ in 0..MAX_SCRIPT_DEPTH {
        let Ok(mut f) = std::fs::File::open(&cur) else {
            return Root::Unknown;
        };
        let Ok(meta) = f.metadata() else {
            return Root::Unknown;
        };
        if secure_exec(meta.mode(), meta.uid(), meta.gid(), ruid, rgid) {
            return Root::Unsealable(unsealed::SETUID, cur);
        }
        // The first page: the `#!` line, the ELF header and, for a Go program, its build id
        // note (the Go linker puts it there).
        let mut head = [0u8; 4096];
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
            Head::Elf(Ok(())) => {
                let go = crate::run::static_image::notes_say_go(&head[..n]) == Some(true);
                return Root::Loads { go };
            }
            Head::Elf(Err(unsealed::STATIC_BINARY)) if is_system_loader(&meta) => {
                return Root::Loads { go: false }
            }
            Head::Elf(Err(kind)) => return Root::Unsealable(kind, cur),
            _ => return Root::Unknown,
        }
    }
    Root::Unknown
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

    /// The first page of an x86_64 ELF with an interpreter (when `interp`) and one note
    /// segment holding `notes` (owner, type; the owner written with one NUL, Go's with two).
    fn elf_with(interp: bool, notes: &[(&[u8], u32)]) -> Vec<u8> {
        let mut f = vec![0u8; 4096];
        f[..4].copy_from_slice(b"\x7fELF");
        (f[4], f[5]) = (2, 1);
        f[18..20].copy_from_slice(&62u16.to_le_bytes());
        f[32..40].copy_from_slice(&64u64.to_le_bytes());
        f[54..56].copy_from_slice(&56u16.to_le_bytes());
        f[56..58].copy_from_slice(&2u16.to_le_bytes());
        // Program header 0: PT_INTERP, or PT_LOAD; 1: PT_NOTE at 512.
        f[64..68].copy_from_slice(&(if interp { 3u32 } else { 1 }).to_le_bytes());
        let mut at = 512;
        for (owner, kind) in notes {
            let name_len = owner.len() + if *owner == b"Go" { 2 } else { 1 };
            f[at..at + 4].copy_from_slice(&(name_len as u32).to_le_bytes());
            f[at + 4..at + 8].copy_from_slice(&8u32.to_le_bytes());
            f[at + 8..at + 12].copy_from_slice(&kind.to_le_bytes());
            f[at + 12..at + 12 + owner.len()].copy_from_slice(owner);
            at += 12 + name_len.div_ceil(4) * 4 + 8;
        }
        let ph = 64 + 56;
        f[ph..ph + 4].copy_from_slice(&4u32.to_le_bytes());
        f[ph + 8..ph + 16].copy_from_slice(&512u64.to_le_bytes());
        f[ph + 32..ph + 40].copy_from_slice(&((at - 512) as u64).to_le_bytes());
        f
    }

    /// [`plan`] of a file holding `bytes`.
    fn plan_of(bytes: &[u8]) -> Plan {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("prog");
        std::fs::write(&f, bytes).unwrap();
        plan(f.as_os_str())
    }

    #[test]
    fn a_dynamic_go_program_is_told_by_its_build_id_note() {
        // A GNU build id first, then Go's (as the Go linker of a cgo build lays them out).
        assert!(matches!(
            plan_of(&elf_with(true, &[(b"GNU", 3), (b"Go", 4)])),
            Plan::DynamicGo(p) if p.ends_with("prog")
        ));
        // No Go note, or Go's owner with another type.
        assert_eq!(plan_of(&elf_with(true, &[(b"GNU", 3)])), Plan::Other);
        assert_eq!(plan_of(&elf_with(true, &[(b"Go", 3)])), Plan::Other);
        // A static Go program (no interpreter): its supervisor is the static root's.
        if crate::run::static_image::available() {
            assert!(matches!(
                plan_of(&elf_with(false, &[(b"Go", 4)])),
                Plan::Static(..)
            ));
        }
        assert_eq!(plan(OsStr::new("sh")), Plan::Other);
        assert_eq!(plan(OsStr::new("/nonexistent/prog")), Plan::Other);
    }

    #[test]
    fn dynamic_programs_and_scripts_are_fine() {
        assert!(inspect(OsStr::new("sh"), false).0.is_empty());
        assert!(inspect(OsStr::new("/nonexistent/prog"), false).0.is_empty());
        let loader = seal_abi::exec_target::SYSTEM_LOADER;
        if Path::new(loader).exists() {
            assert!(inspect(OsStr::new(loader), false).0.is_empty());
        }
    }

    #[test]
    fn libseal_is_sure_to_load_only_behind_the_dynamic_loader() {
        assert!(inspect(OsStr::new("sh"), false).1, "a dynamic program");
        let dir = tempfile::tempdir().unwrap();
        let script = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            p
        };
        let with = script("with.sh", "#!/bin/sh\necho hi\n");
        assert!(
            inspect(with.as_os_str(), false).1,
            "a #! script run by a dynamic shell"
        );
        // No #! line: execvp runs it through /bin/sh, which posix_spawn does not.
        let without = script("without.sh", "echo hi\n");
        assert_eq!(inspect(without.as_os_str(), false), (Vec::new(), false));
        assert_eq!(
            inspect(OsStr::new("/nonexistent/prog"), false),
            (Vec::new(), false)
        );
    }
}
