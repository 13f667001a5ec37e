//! The first page of a file of the run directory, mapped shared: the run table (the census
//! takes slot numbers in it, the server holds it for the run's life) and a static Go image's
//! clock page.

use std::fs::File;
use std::os::fd::AsRawFd;

/// Bytes of a page (x86_64).
pub const PAGE: usize = 4096;

/// Maps the first page of `file` shared, read-write when `writable`, else read-only (the
/// mapping stays when `file` closes); `None` when it could not be mapped.
pub fn map_shared(file: &File, writable: bool) -> Option<*mut libc::c_void> {
    map_shared_len(file, PAGE, writable)
}

/// [`map_shared`] of the first `len` bytes of `file`.
pub fn map_shared_len(file: &File, len: usize, writable: bool) -> Option<*mut libc::c_void> {
    let prot = if writable {
        libc::PROT_READ | libc::PROT_WRITE
    } else {
        libc::PROT_READ
    };
    // SAFETY: a new shared mapping of an open file, placed by the kernel: nothing of ours is
    // overlaid. The caller owns it (and unmaps it, or keeps it for the process's life).
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p)
}

/// Creates file `path` (which must not exist), for reading and writing: a run directory's
/// file the supervisor shares with an image.
pub fn create_shared_file(path: &std::path::Path) -> Option<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .ok()
}
