//! A spare supervisor's word to the run's server (`server.rs`) that it is taken, so that the
//! server forks the next spare: said once the spare's image runs, not when it accepts.

use std::sync::atomic::{AtomicI32, Ordering::Relaxed};

/// The spare's end of the server's pipe, until it says it is taken.
static TAKEN: AtomicI32 = AtomicI32::new(-1);

/// Keeps `fd`, the server's pipe, for [`taken`] (in a spare that accepted a connection).
pub fn hold(fd: i32) {
    TAKEN.store(fd, Relaxed);
}

/// Tells the server that this supervisor is taken, so that it forks the next spare: once its
/// image runs (detached at its exec stop, or a process that supervises itself), or its exec
/// failed. Not at the connection: the server's fork (~0.25 ms of copying a large process's
/// page tables) then ran beside the image's hand-over and exec stop, on the image's start-up
/// path on a machine of two cores. An image that starts meanwhile takes the server's second
/// spare. Once; nothing in a supervisor the server did not fork.
pub fn taken() {
    let fd = TAKEN.swap(-1, Relaxed);
    if fd >= 0 {
        // SAFETY: our end of the server's pipe, written once (our pid) and closed.
        unsafe {
            let pid = libc::getpid().to_ne_bytes();
            libc::write(fd, pid.as_ptr().cast(), pid.len());
            libc::close(fd);
        }
    }
}
