//! Writing a file the user named on the command line (`--census FILE`, `probe --report`,
//! `--junit`, `verify --json`, `--patch-targets`) without being led elsewhere by a link.
//!
//! A link at that path is followed only when it is yours or root's: a link another user
//! planted in a directory you both can write (`ln -s ~/victim /shared/c.json`) would otherwise
//! have seal overwrite whatever it points to, with your rights. Linux's `protected_symlinks`
//! guards only sticky world-writable directories; this guards every directory. Devices and
//! FIFOs (`/dev/stdout`, a pipe) are written as they are, never replaced.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Opens `path` for writing (created 0666 less the umask, else truncated), following a link
/// at `path` only when the link belongs to you or root.
pub fn create(path: &Path) -> io::Result<File> {
    let open = |follow: bool| {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_CLOEXEC | if follow { 0 } else { libc::O_NOFOLLOW })
            .open(path)
    };
    match open(false) {
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            let link = fs::symlink_metadata(path)?;
            // SAFETY: geteuid has no preconditions.
            let uid = unsafe { libc::geteuid() };
            if link.file_type().is_symlink() && link.uid() != uid && link.uid() != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "it is a link owned by uid {}, not by you: refusing to write through it",
                        link.uid()
                    ),
                ));
            }
            open(true)
        }
        r => r,
    }
}

/// Writes `bytes` to `path` (see [`create`]).
pub fn write(path: &Path, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    let mut f = create(path)?;
    f.write_all(bytes.as_ref())?;
    f.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_links_are_followed_and_files_written() {
        let (d, target) = crate::files::scratch("t");
        std::os::unix::fs::symlink(&target, d.path().join("l")).unwrap();
        write(&d.path().join("l"), "x").unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "x");
        write(&d.path().join("f"), "yy").unwrap();
        write(&d.path().join("f"), "z").unwrap();
        assert_eq!(fs::read_to_string(d.path().join("f")).unwrap(), "z");
        write(Path::new("/dev/null"), "n").unwrap();
    }

    /// A link another user planted is refused and its target left alone (needs root to make
    /// a link owned by someone else; skipped otherwise).
    #[test]
    fn another_users_link_is_not_written_through() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: needs root to own a link as another user");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        fs::write(&victim, "keep").unwrap();
        let link = d.path().join("c.json");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let c = std::ffi::CString::new(link.to_str().unwrap()).unwrap();
        // SAFETY: lchown on a NUL-terminated path.
        assert_eq!(unsafe { libc::lchown(c.as_ptr(), 65534, 65534) }, 0);
        let e = write(&link, "evil").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
    }
}
