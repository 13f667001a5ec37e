//! The sealed random devices: what an open of `/dev/urandom`, `/dev/random`,
//! `/proc/sys/kernel/random/uuid` or `boot_id` gets (the open hooks, in `crate::open`, classify
//! the path and call [`open_stream`], [`open_uuid`] or [`open_boot_id`]), and how reads of
//! those descriptors behave, however they are read.
//!
//! * `/dev/urandom`, `/dev/random`: a **pipe**, fed with the ChaCha stream keyed by (seed,
//!   the opening thread's lineage, that thread's count of device opens) by this process
//!   image's **feeder**: one small detached process (`seal-random`) that writes into every
//!   device pipe the image and its fork children opened, drops a pipe once its last reader is
//!   gone (wherever that reader is: a child after fork and exec, an orphan after the opener
//!   exited), and exits 250 ms after its last pipe. Opening costs no process: the opener sends
//!   the pipe's write end (`SCM_RIGHTS`) and the stream key to the feeder's datagram socket,
//!   and returns once the feeder's first 4 KiB block is in the pipe (that block is the
//!   acknowledgement, and a first read of up to 4 KiB, even `O_NONBLOCK`, never finds the pipe
//!   empty). Only the first open of an image or of any of its fork children, or the first after its
//!   feeder exited, starts a feeder (the socket's name comes from the image's `AT_RANDOM`
//!   bytes, which fork children inherit); an exec starts afresh, while the old feeder keeps
//!   feeding the pipes that crossed the exec. A feeder that dropped the message (it exited
//!   meanwhile, or was full) shows as end-of-file in the new pipe, and the opener tries a new
//!   feeder, so no pipe is handed out without a writer. When none can start (a process
//!   limit) the open fails with `EAGAIN`; a pipe whose feeder was killed fails reads with
//!   `EIO` (`fds.rs`).
//!   The feeder is made with the raw `clone` system call and exit signal 0, twice: an
//!   intermediate process clones the feeder and exits at once, and the opener reaps the
//!   intermediate with `__WALL`. A child with exit signal 0 is a "clone child", invisible to a
//!   program's `wait()`/`waitpid(-1)`/`SIGCHLD`, and the feeder itself ends up reparented to
//!   init (or the nearest subreaper), which reaps it: no zombie stays with the opener. The
//!   feeder shares the opener's memory (`CLONE_VM`, on its own stack and table in a seal-owned
//!   address range far from the program's mappings; a copy-on-write copy when that range is
//!   unusable), so it only makes raw system calls: it blocks every signal (inherited from the
//!   opener, which blocks them around `clone`), starts its own session (no terminal signals),
//!   closes every other descriptor (`close_range`), names itself `seal-random`, and polls.
//!   It touches no thread-local storage and nothing of libc.
//!   Alternatives weighed: a feeder per open (the previous design) cost a process per open,
//!   which piled up against process limits; serving reads in the read hooks misses readers
//!   that are not hooked (static binaries after exec, raw `syscall(SYS_read)`, `splice`,
//!   `sendfile`, glibc's stdio internals) and still needs a writer for descriptors that cross
//!   an exec; a thread feeder dies at exec, which is exactly when `cmd < /dev/urandom` needs
//!   it; a memfd is finite.
//! * `uuid`: a memfd holding a fresh version-4 uuid from the same per-open stream, so two reads
//!   of the file give two different uuids, the same ones every run.
//! * `boot_id`: a memfd holding one uuid per run, derived from the seed alone.
//!
//! `feeder.rs`: the feeder process. `fds.rs`: which descriptors are device pipes (so `read`
//! fills whole buffers, as the device does). `hooks.rs`: `read`, `__read_chk`, `dup*`.

use core::sync::atomic::Ordering::Relaxed;

use super::EntropyStream;
use crate::core::fd::memfd_with;
use crate::core::{config, sys, thread};

mod fds;
mod feeder;

pub use fds::{answer_read, is_device_fd, on_dup, on_start, read_full};

use seal_abi::KIND_DEVICE_OPEN;

crate::thread_cell! {
    /// (lineage the count belongs to, device opens made by this thread so far).
    static OPENS: (u64, u64) = "seal_tls_device_opens";
}

/// The stream id for the next device open on this thread.
fn next_open_id() -> u64 {
    let lineage = thread::with(|t| t.lineage);
    let idx = OPENS.with(|c| {
        let (l, n) = c.get();
        let n = if l == lineage { n } else { 0 };
        c.set((lineage, n + 1));
        n
    });
    seal_abi::child_lineage(lineage, KIND_DEVICE_OPEN, idx)
}

pub use seal_abi::device_text::uuid_text;

/// The run's boot id (one per seed; the static-image supervisor computes the same).
pub fn boot_id() -> [u8; 37] {
    seal_abi::device_text::boot_id(config::SEED.load(Relaxed))
}

/// A sealed `/dev/urandom` or `/dev/random`: a pipe whose read end yields the next per-open
/// stream of this thread forever, fed by this image's feeder (see the module doc). `Ok(fd)` or
/// `Err(errno)`.
pub fn open_stream(cloexec: bool, nonblock: bool) -> Result<i32, i32> {
    let rfd = feeder::open_pipe(config::SEED.load(Relaxed), next_open_id())?;
    // SAFETY (both): fcntl on our own fd with integer arguments.
    unsafe {
        if !cloexec {
            sys::syscall3(libc::SYS_fcntl, rfd as i64, libc::F_SETFD as i64, 0);
        }
        if !nonblock {
            sys::syscall3(libc::SYS_fcntl, rfd as i64, libc::F_SETFL as i64, 0);
        }
    }
    fds::register(rfd);
    Ok(rfd)
}

/// A sealed `/proc/sys/kernel/random/uuid`: a memfd with a fresh uuid from the next per-open
/// stream of this thread.
pub fn open_uuid(cloexec: bool) -> Result<i32, i32> {
    let mut b = [0u8; 16];
    EntropyStream::new(config::SEED.load(Relaxed), next_open_id()).fill(&mut b);
    memfd_with(b"seal-uuid\0", &uuid_text(b), cloexec)
}

/// A sealed `/proc/sys/kernel/random/boot_id`: a memfd with the run's boot id.
pub fn open_boot_id(cloexec: bool) -> Result<i32, i32> {
    memfd_with(b"seal-boot_id\0", &boot_id(), cloexec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boot_id_is_the_first_bytes_of_its_stream() {
        // abi's scalar block (what the static-image supervisor uses) against this process's
        // SIMD stream, for a few seeds.
        for seed in [0, 1, 42, u64::MAX] {
            let mut b = [0u8; 16];
            let id = seal_abi::device_text::BOOT_ID_STREAM;
            EntropyStream::new(seed, id).fill(&mut b);
            assert_eq!(
                uuid_text(b),
                seal_abi::device_text::boot_id(seed),
                "seed {seed}"
            );
        }
    }
}
