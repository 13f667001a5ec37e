//! An image's executable, mapped read-only: symbol look-ups at the exec stop touch only the
//! pages they read (reading a 2 MB Go binary whole cost each static Go image ~1.5 ms of its
//! start-up, twice: `runtime.cputicks` and `GetRandom`).

/// A read-only private mapping of a whole file, unmapped on drop.
pub struct ExeMap {
    at: *mut libc::c_void,
    len: usize,
}

impl ExeMap {
    /// Maps the first `len` bytes of open file `f` (its size); `None` when it cannot.
    pub fn of_file(f: &std::fs::File, len: usize) -> Option<ExeMap> {
        use std::os::fd::AsRawFd;
        if len == 0 {
            return None;
        }
        // SAFETY: a new read-only private mapping of an open file, placed by the kernel;
        // unmapped in drop.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                f.as_raw_fd(),
                0,
            )
        };
        (at != libc::MAP_FAILED).then_some(ExeMap { at, len })
    }
}

impl std::ops::Deref for ExeMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` readable bytes, mapped for our life. An executable is not written
        // while it runs (the kernel refuses with ETXTBSY).
        unsafe { std::slice::from_raw_parts(self.at.cast(), self.len) }
    }
}

impl Drop for ExeMap {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.at, self.len) };
    }
}
