//! Which descriptors are sealed device pipes: a bit per descriptor number plus the pipe's
//! inode (so a number closed and reused is told apart), and a run-wide registry for pipes
//! inherited through exec. `read` on one fills the whole buffer, as the device would.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use crate::core::fd::check;
use crate::core::{config, sys};

/// Descriptors (below [`TRACKED`]) that this process opened as a sealed device pipe, and the
/// pipe's inode, so `read` can tell a device pipe from whatever reused the number later.
const TRACKED: usize = 1 << 16;
static DEVICE_FD_BITS: [AtomicU64; TRACKED / 64] = [const { AtomicU64::new(0) }; TRACKED / 64];
static DEVICE_FD_INO: [AtomicU64; TRACKED] = [const { AtomicU64::new(0) }; TRACKED];

pub(super) fn fifo_ino(fd: i32) -> Option<u64> {
    // SAFETY: an all-zero stat is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is a valid out-pointer.
    let r = unsafe { sys::syscall3(libc::SYS_fstat, fd as i64, &mut st as *mut _ as i64, 0) };
    (r == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO).then_some(st.st_ino)
}

fn track_ino(fd: i32, ino: u64) {
    if fd >= 0 && (fd as usize) < TRACKED {
        DEVICE_FD_INO[fd as usize].store(ino, Relaxed);
        DEVICE_FD_BITS[fd as usize / 64].fetch_or(1 << (fd % 64), Relaxed);
    }
}

/// `dup2(old, new)` and friends succeeded: `new` is a device pipe if `old` is.
pub fn on_dup(old: i32, new: i32) {
    if is_device_fd(old) {
        track_ino(new, DEVICE_FD_INO[old as usize].load(Relaxed));
    }
}

/// `<run dir>/devpipe.<inode>`: the run-wide registry of device pipes, so a process that
/// inherited one across exec (`cmd < /dev/urandom`) recognises it at start.
fn registry_path(ino: u64, out: &mut sys::StackBuf<4200>) {
    out.push(config::RUN_DIR.get())
        .push(b"/devpipe.")
        .push_u64(ino);
}

pub(super) fn register(fd: i32) {
    if let Some(ino) = fifo_ino(fd) {
        track_ino(fd, ino);
        crate::core::table::set_run_flag(seal_abi::run_flags::DEVICE_PIPES);
        let mut p = sys::StackBuf::<4200>::new();
        registry_path(ino, &mut p);
        // A marker only: an existing one (an inode number reused) is as good as a new one.
        let f = sys::create_private(p.as_cstr(), libc::O_WRONLY, false);
        if f >= 0 {
            sys::close(f);
        }
    }
}

/// At process start: standard descriptors that are device pipes made earlier in this run
/// (inherited through exec) read full buffers too.
pub fn on_start() {
    // Three `fstat`s that nearly every image would make for nothing.
    if crate::core::table::run_flags() & seal_abi::run_flags::DEVICE_PIPES == 0 {
        return;
    }
    for fd in 0..3 {
        if let Some(ino) = fifo_ino(fd) {
            let mut p = sys::StackBuf::<4200>::new();
            registry_path(ino, &mut p);
            // SAFETY: an all-zero stat is a valid value of this plain C struct.
            let mut st: libc::stat = unsafe { core::mem::zeroed() };
            // SAFETY: NUL-terminated path, valid out-pointer.
            let r = unsafe {
                sys::syscall6(
                    libc::SYS_newfstatat,
                    libc::AT_FDCWD as i64,
                    p.as_cstr().as_ptr() as i64,
                    &mut st as *mut _ as i64,
                    libc::AT_SYMLINK_NOFOLLOW as i64,
                    0,
                    0,
                )
            };
            // Only a marker this user made (a plain file, never a link planted by another).
            if r == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_uid == sys::geteuid() {
                track_ino(fd, ino);
            }
        }
    }
}

/// Is `fd` (still) a device pipe this process opened? One load for every other descriptor.
#[inline(always)]
pub fn is_device_fd(fd: i32) -> bool {
    if fd < 0 || fd as usize >= TRACKED {
        return false;
    }
    if DEVICE_FD_BITS[fd as usize / 64].load(Relaxed) & (1 << (fd % 64)) == 0 {
        return false;
    }
    is_device_fd_slow(fd)
}

#[cold]
fn is_device_fd_slow(fd: i32) -> bool {
    if fifo_ino(fd) == Some(DEVICE_FD_INO[fd as usize].load(Relaxed)) {
        return true;
    }
    // Closed and reused for something else: forget it.
    DEVICE_FD_BITS[fd as usize / 64].fetch_and(!(1 << (fd % 64)), Relaxed);
    false
}

/// The `read` hook's answer for a device pipe (registered in [`crate::FD_READ`]): the whole
/// buffer, counted as a device read; `None` for any other descriptor.
///
/// # Safety
/// `buf` is valid for `len` bytes of writes, or null.
#[inline(always)]
pub unsafe fn answer_read(fd: i32, buf: *mut u8, len: usize, ra: u64) -> Option<isize> {
    if !is_device_fd(fd) || buf.is_null() {
        return None;
    }
    crate::core::census::count(seal_abi::Fid::ReadDevice, seal_abi::NO_DETAIL, ra);
    // SAFETY: per the contract.
    Some(unsafe { read_full(fd, buf, len) })
}

/// `read` on a device pipe: like the real device, fill the whole buffer (a pipe hands out at
/// most what the feeder has written so far), and never fail with `EAGAIN` on a non-blocking
/// descriptor. The real device never ends: a pipe that does (its feeder was killed) fails the
/// read with `EIO`, said once per process on stderr, rather than show an end-of-file or a
/// short read. Stops early only on an error after some bytes.
///
/// # Safety
/// `buf` is valid for `len` bytes.
pub unsafe fn read_full(fd: i32, buf: *mut u8, len: usize) -> isize {
    let mut done = 0usize;
    while done < len {
        // SAFETY: the tail of buf is valid per the contract.
        let r = unsafe {
            sys::syscall3(
                libc::SYS_read,
                fd as i64,
                buf.add(done) as i64,
                (len - done) as i64,
            )
        };
        match check(r) {
            Ok(0) => {
                feeder_gone();
                // SAFETY: errno is thread-local.
                unsafe { *libc::__errno_location() = libc::EIO };
                return -1;
            }
            Ok(n) => done += n as usize,
            Err(libc::EINTR) if done == 0 => {
                // SAFETY: errno is thread-local.
                unsafe { *libc::__errno_location() = libc::EINTR };
                return -1;
            }
            Err(libc::EINTR) => {}
            Err(libc::EAGAIN) => {
                // Non-blocking: the real device never says "try again", and the feeder is
                // about to write. Wait for it.
                let _ = sys::wait_readable(fd, None);
            }
            Err(_) if done > 0 => break,
            Err(e) => {
                // SAFETY: errno is thread-local.
                unsafe { *libc::__errno_location() = e };
                return -1;
            }
        }
    }
    done as isize
}

/// A device pipe ended: its feeder is gone. Said once per process (a loop of failing reads
/// would repeat it endlessly).
#[cold]
fn feeder_gone() {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Relaxed) {
        sys::warn(
            b"the feeder of a /dev/urandom descriptor is gone (killed?): its reads fail with EIO",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_full_waits_for_the_writer_and_tracking_follows_the_pipe() {
        let mut fds = [0i32; 2];
        // SAFETY: a valid out-array.
        assert_eq!(
            unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK) },
            0
        );
        let [r, w] = fds;
        assert!(!is_device_fd(r));
        track_ino(r, fifo_ino(r).unwrap());
        assert!(is_device_fd(r));
        let writer = std::thread::spawn(move || {
            for i in 0..3u8 {
                std::thread::sleep(std::time::Duration::from_millis(20));
                // SAFETY: a valid buffer and our pipe.
                unsafe { libc::write(w, [i; 1000].as_ptr() as *const libc::c_void, 1000) };
            }
            // SAFETY: our fd.
            unsafe { libc::close(w) };
        });
        let mut buf = vec![0u8; 3000];
        // SAFETY: buf is valid for its length.
        let n = unsafe { read_full(r, buf.as_mut_ptr(), buf.len()) };
        writer.join().unwrap();
        assert_eq!(n, 3000);
        assert_eq!((buf[0], buf[1500], buf[2999]), (0, 1, 2));
        // The writer is gone: the device never ends, so the next read fails with EIO.
        // SAFETY: buf is valid for its length.
        assert_eq!(unsafe { read_full(r, buf.as_mut_ptr(), 10) }, -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EIO)
        );
        // SAFETY: our fd.
        unsafe { libc::close(r) };
        // The number now names something else (or nothing): no longer a device pipe.
        assert!(!is_device_fd(r));
    }
}
