//! The sealed text a static image's open is given, and the memfd that holds it
//! (`serve/opens.rs`, `serve/procfiles.rs`).

use std::os::fd::{FromRawFd, OwnedFd};

use seal_abi::machine_file::Sink;

/// Sealed text, as [`seal_abi::machine_file`] and [`seal_abi::proc_text`] write it.
#[derive(Default)]
pub(super) struct Text(pub(super) Vec<u8>);

impl Sink for Text {
    fn put(&mut self, s: &[u8]) {
        self.0.extend_from_slice(s);
    }
}

/// A memfd holding `bytes`, read from the start.
pub(super) fn memfd_with(name: &std::ffi::CStr, bytes: &[u8]) -> Option<OwnedFd> {
    // SAFETY: a NUL-terminated name; a new descriptor we own.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a descriptor just made, owned from here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let f = std::fs::File::from(fd);
    std::os::unix::fs::FileExt::write_all_at(&f, bytes, 0).ok()?;
    Some(f.into())
}
