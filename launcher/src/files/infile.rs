//! Reading the files a user names (`seal.toml`, `--patterns`, `--compare`, goldens, a case's
//! `stdin`, JUnit reports): regular files only, up to a size cap. Anything else is refused
//! before a byte is read: `/dev/zero` would never end, and a FIFO would block until a writer
//! came. Opened with O_NONBLOCK so that opening a FIFO does not wait either, then checked
//! with fstat on the open descriptor (no window between the check and the read).

use std::fs::OpenOptions;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The most a file seal reads may hold: 256 MiB (a golden of millions of lines).
pub const CAP: u64 = 256 << 20;

/// The bytes of the regular file at `path` (a link to one is fine), at most `cap` of them.
pub fn read_capped(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        let t = meta.file_type();
        let what = if t.is_dir() {
            "is a directory"
        } else if t.is_fifo() {
            "is a FIFO, not a regular file"
        } else if t.is_char_device() || t.is_block_device() {
            "is a device, not a regular file"
        } else {
            "is not a regular file"
        };
        return Err(io::Error::new(io::ErrorKind::InvalidInput, what));
    }
    let mut bytes = Vec::new();
    Read::take(&f, cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(too_big(cap));
    }
    Ok(bytes)
}

/// [`read_capped`] with [`CAP`].
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    read_capped(path, CAP)
}

/// [`read`], as UTF-8 text.
pub fn read_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read(path)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "is not valid UTF-8 text"))
}

fn too_big(cap: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("is larger than {} MiB", cap >> 20),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_cap_are_read() {
        let (d, f) = crate::files::scratch("f");
        std::fs::write(&f, "hello").unwrap();
        assert_eq!(read_string(&f).unwrap(), "hello");
        assert_eq!(read_capped(&f, 5).unwrap(), b"hello");
        let e = read_capped(&f, 4).unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        let e = read(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("device"), "{e}");
        let fifo = d.path().join("p");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read(&fifo).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        let e = read(d.path()).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
    }
}
