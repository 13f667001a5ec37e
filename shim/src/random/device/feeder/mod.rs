//! The feeder: one small detached process per process image that writes the sealed streams of
//! every device pipe that image (and its fork children) opened, until each pipe's last reader
//! is gone, and exits [`LINGER_MS`] after its last pipe (see the parent module's doc for why it
//! is a process, and how it stays invisible to the program).
//!
//! Handing a pipe over: the opener makes the pipe, sends its write end (`SCM_RIGHTS`) and the
//! stream's key to the feeder's datagram socket, closes its own copy of the write end and waits
//! until the pipe has bytes: the feeder's first write is the acknowledgement. A feeder that
//! exits with the message still queued drops the write end with the queue, so the opener sees
//! end-of-file instead of bytes, moves to the next name, starts a feeder there and tries again:
//! a pipe is never handed out without a writer.
//!
//! The socket's name: an abstract `seal-random-<hex>` whose hex is drawn from the image's
//! `AT_RANDOM` bytes (16 bytes of the kernel's entropy that every exec gets, in memory a fork
//! child inherits and no other user can read) and a generation number. Every fork child of an
//! image knows the name before anyone opened a device, so the first opener binds it (a bind is
//! atomic: a sibling that loses the race finds `EADDRINUSE` and sends to the winner's queue)
//! and all of them share that one feeder. A name is never used again once its feeder dropped
//! a pipe (it exited or was full): the next generation's name cannot be guessed from the old
//! one, which `/proc/net/unix` shows every user.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::EntropyStream;
use crate::core::fd::check;
use crate::core::sys;

/// Bytes per feeder write: `PIPE_BUF`, so a non-blocking write is all or nothing.
const BLOCK: usize = 4096;
/// Blocks written into one pipe before the feeder looks at the others (and its socket).
const BLOCKS_PER_TURN: usize = 16;
/// Pipes one feeder serves; the next open starts another feeder.
const MAX_PIPES: usize = 1000;
/// How long a feeder with no pipe left waits for the next one before it exits.
const LINGER_MS: i64 = 250;
/// How long an opener waits for the feeder's first bytes before trying a new feeder.
const ACK_TIMEOUT_S: i64 = 2;

/// The generation of this image's feeder name (see the module doc): a fork child inherits it.
static GEN: AtomicU64 = AtomicU64::new(0);

/// What an opener sends along with the pipe's write end: the stream's key.
#[repr(C)]
#[derive(Clone, Copy)]
struct Msg {
    seed: u64,
    id: u64,
}

/// The abstract socket address `\0seal-random-<nonce in hex>` and its length.
fn address(nonce: u64) -> (libc::sockaddr_un, u32) {
    // SAFETY: an all-zero sockaddr_un is a valid value of this plain C struct.
    let mut a: libc::sockaddr_un = unsafe { core::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let mut name = sys::StackBuf::<40>::new();
    name.push(b"seal-random-").push_hex(nonce);
    for (i, b) in name.as_bytes().iter().enumerate() {
        a.sun_path[i + 1] = *b as libc::c_char;
    }
    let len = core::mem::size_of::<libc::sa_family_t>() + 1 + name.as_bytes().len();
    (a, len as u32)
}

/// A new pipe whose read end (returned, `O_CLOEXEC|O_NONBLOCK`) yields the stream (`seed`,
/// `id`) forever, fed by this image's feeder (started if there is none). `Err(errno)` when no
/// feeder could take it (`EAGAIN` when none could start: a process limit).
pub(super) fn open_pipe(seed: u64, id: u64) -> Result<i32, i32> {
    let msg = Msg { seed, id };
    for _ in 0..4 {
        let mut fds = [0i32; 2];
        // SAFETY: fds is a valid out-array of two ints.
        check(unsafe {
            sys::syscall3(
                libc::SYS_pipe2,
                fds.as_mut_ptr() as i64,
                (libc::O_CLOEXEC | libc::O_NONBLOCK) as i64,
                0,
            )
        })?;
        let [rfd, wfd] = fds;
        let sent = hand_over(wfd, &msg);
        sys::close(wfd);
        match sent {
            Err(e) => {
                sys::close(rfd);
                return Err(e);
            }
            Ok(generation) => {
                if first_bytes_arrive(rfd) {
                    return Ok(rfd);
                }
                // The feeder exited with our message queued, or was full: never its name again.
                sys::close(rfd);
                let _ = GEN.compare_exchange(generation, generation + 1, Relaxed, Relaxed);
            }
        }
    }
    Err(libc::EAGAIN)
}

/// The name's hex for `generation`: a keyed hash of the image's `AT_RANDOM` bytes (the
/// kernel's, at this image's exec; fork children share them), never 0.
fn nonce(generation: u64) -> u64 {
    // SAFETY: getauxval has no preconditions; AT_RANDOM points at 16 bytes (or is 0).
    let at = unsafe { libc::getauxval(libc::AT_RANDOM) } as *const [u64; 2];
    let (k0, k1) = if at.is_null() {
        (0, 0)
    } else {
        // SAFETY: the 16 bytes the kernel placed on the initial stack, never freed.
        let [a, b] = unsafe { at.read_unaligned() };
        (a, b)
    };
    let mut out = [0u8; 8];
    EntropyStream::new(
        k0 ^ 0x5ea1_fee0,
        k1 ^ generation.wrapping_mul(0x9e37_79b9_7f4a_7c15),
    )
    .fill(&mut out);
    u64::from_le_bytes(out) | 1
}

/// A new close-on-exec Unix datagram socket.
fn datagram_socket() -> Result<i32, i32> {
    // SAFETY: plain integer arguments.
    check(unsafe {
        sys::syscall3(
            libc::SYS_socket,
            libc::AF_UNIX as i64,
            (libc::SOCK_DGRAM | libc::SOCK_CLOEXEC) as i64,
            0,
        )
    })
    .map(|fd| fd as i32)
}

/// Sends `wfd` and `msg` to this image's feeder, starting one when nobody holds the name.
/// `Ok(the name's generation)`.
fn hand_over(wfd: i32, msg: &Msg) -> Result<u64, i32> {
    let sock = datagram_socket()?;
    let mut result = Err(libc::EAGAIN);
    for _ in 0..4 {
        let generation = GEN.load(Relaxed);
        let name = nonce(generation);
        match send(sock, name, wfd, msg) {
            Ok(()) => {
                result = Ok(generation);
                break;
            }
            // Nobody bound to that name (no feeder yet, or it exited after lingering): start
            // one there. A fork sibling that bound it first is as good.
            Err(libc::ECONNREFUSED) | Err(libc::ENOENT) => match spawn(name) {
                Ok(()) | Err(libc::EADDRINUSE) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            },
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    sys::close(sock);
    result
}

/// One datagram with the message and the write end to the feeder named by `nonce`.
fn send(sock: i32, nonce: u64, wfd: i32, msg: &Msg) -> Result<(), i32> {
    let (mut addr, addr_len) = address(nonce);
    let mut iov = libc::iovec {
        iov_base: msg as *const Msg as *mut libc::c_void,
        iov_len: core::mem::size_of::<Msg>(),
    };
    let mut control = [0u64; 4];
    // SAFETY: an all-zero msghdr is a valid value of this plain C struct.
    let mut mh: libc::msghdr = unsafe { core::mem::zeroed() };
    mh.msg_name = &mut addr as *mut _ as *mut libc::c_void;
    mh.msg_namelen = addr_len;
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    // SAFETY: CMSG_SPACE is pure arithmetic.
    mh.msg_controllen = unsafe { libc::CMSG_SPACE(4) } as usize;
    // SAFETY: the control buffer (32 bytes) holds one header with one int.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&mh);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(4) as usize;
        (libc::CMSG_DATA(c) as *mut i32).write_unaligned(wfd);
    }
    loop {
        // SAFETY: mh and everything it points to live until the call returns.
        let r = unsafe {
            sys::syscall3(
                libc::SYS_sendmsg,
                sock as i64,
                &mh as *const _ as i64,
                libc::MSG_NOSIGNAL as i64,
            )
        };
        match check(r) {
            Ok(_) => return Ok(()),
            Err(libc::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Waits until `rfd` has bytes (the feeder took the pipe) or ends (the feeder dropped it).
fn first_bytes_arrive(rfd: i32) -> bool {
    for _ in 0..1000 {
        match sys::wait_readable(rfd, Some(ACK_TIMEOUT_S * 1000)) {
            Ok(revents) => return revents & libc::POLLIN != 0,
            Err(libc::EINTR) => {}
            Err(_) => return false,
        }
    }
    false
}

/// Binds the name `nonce` and starts a feeder listening on it. `Err(EADDRINUSE)`: another
/// process (a fork sibling) holds the name.
fn spawn(nonce: u64) -> Result<(), i32> {
    let sock = datagram_socket()?;
    let (addr, len) = address(nonce);
    let one: i32 = 1;
    // SAFETY (both): valid option value and address of the given lengths.
    let r = unsafe {
        sys::syscall6(
            libc::SYS_setsockopt,
            sock as i64,
            libc::SOL_SOCKET as i64,
            libc::SO_PASSCRED as i64,
            &one as *const i32 as i64,
            4,
            0,
        )
    };
    let r = check(r).and_then(|_| {
        check(unsafe {
            sys::syscall3(
                libc::SYS_bind,
                sock as i64,
                &addr as *const _ as i64,
                len as i64,
            )
        })
    });
    let r = r.and_then(|_| start(sock));
    // The feeder has its own copy of the socket (or there is no feeder).
    sys::close(sock);
    r
}

/// Starts the feeder process for the bound socket `sock`: on its own stack in a seal-owned
/// address range when it can (no copy of the opener's page tables), else as a copy-on-write
/// copy of the opener. Either way through an intermediate that exits at once, so the feeder is
/// reparented to init (or the nearest subreaper), which reaps it: no zombie is left behind
/// with the opener, however long the opener lives.
fn start(sock: i32) -> Result<(), i32> {
    // Block every signal around clone: the children start with all signals blocked, so no
    // handler of the program ever runs in them.
    let all: u64 = !0;
    let mut old: u64 = 0;
    // SAFETY: valid sigset pointers of the kernel's size (8 bytes).
    unsafe {
        sys::syscall6(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK as i64,
            &all as *const u64 as i64,
            &mut old as *mut u64 as i64,
            8,
            0,
            0,
        )
    };
    let mut tries = 0;
    let r = loop {
        let r = match shared::spawn(sock) {
            Some(r) => r,
            // SAFETY: the children only make raw system calls.
            None => unsafe { spawn_copy(sock) },
        };
        // Under a process limit (cgroup pids.max, RLIMIT_NPROC) processes that exited a moment
        // ago may still count: try again for a little while.
        if r != -(libc::EAGAIN as i64) || tries == 50 {
            break r;
        }
        tries += 1;
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 2_000_000,
        };
        // SAFETY: a valid timespec, no remainder wanted.
        unsafe { sys::syscall3(libc::SYS_nanosleep, &pause as *const _ as i64, 0, 0) };
    };
    // SAFETY: restoring the mask saved above.
    unsafe {
        sys::syscall6(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK as i64,
            &old as *const u64 as i64,
            0,
            8,
            0,
            0,
        )
    };
    check(r).map(|_| ())
}

/// Reaps the intermediate `pid` (exit signal 0: only `__WALL` sees it); its exit status.
fn reap(pid: i64) -> i32 {
    let mut status = 0i32;
    loop {
        // SAFETY: reaping our own intermediate child into a valid int.
        let r = unsafe {
            sys::syscall6(
                libc::SYS_wait4,
                pid,
                &mut status as *mut i32 as i64,
                libc::__WALL as i64,
                0,
                0,
                0,
            )
        };
        if r != -(libc::EINTR as i64) {
            return status;
        }
    }
}

/// Raw `clone` with no flags and exit signal 0: a copy-on-write copy of this process (like
/// `fork`, without glibc's fork handlers) that is a "clone child" for `wait`.
///
/// # Safety
/// In the child only raw system calls may follow (no libc, no locks, no TLS).
unsafe fn raw_fork_silent() -> i64 {
    // SAFETY: flags 0 = no sharing, exit signal 0; stack 0 = the (copied) current stack.
    unsafe { sys::syscall6(libc::SYS_clone, 0, 0, 0, 0, 0, 0) }
}

/// The fallback: the intermediate and the feeder are copy-on-write copies of the opener
/// (`fork` without glibc's handlers); the feeder maps its table in its own address space.
/// `0` or `-errno`.
///
/// # Safety
/// Signals must be blocked; the children only make raw system calls.
unsafe fn spawn_copy(sock: i32) -> i64 {
    // SAFETY: the child branch below only makes raw system calls.
    let pid = unsafe { raw_fork_silent() };
    if pid == 0 {
        // The intermediate: fork the feeder and leave at once, so the feeder is reparented;
        // its exit status says whether the feeder started.
        // SAFETY: as above.
        let p2 = unsafe { raw_fork_silent() };
        if p2 == 0 {
            feeder_setup(sock);
            let table = sys::mmap_anon(core::mem::size_of::<Table>()) as *mut Table;
            if !table.is_null() {
                // SAFETY: a fresh zeroed mapping of the table's size; all-zero is empty.
                serve(sock, unsafe { &mut *table });
            }
            sys::exit_group(0);
        }
        sys::exit_group(if p2 < 0 { 1 } else { 0 });
    }
    if pid < 0 {
        return pid;
    }
    if reap(pid) != 0 {
        return -(libc::EAGAIN as i64);
    }
    0
}

mod serve;
mod shared;

use serve::{feeder_setup, serve, Table};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_names_are_abstract_and_distinct() {
        let (a, la) = address(0x1234);
        let (b, lb) = address(0x1235);
        assert_eq!(a.sun_path[0], 0);
        assert_eq!(la, lb);
        assert_ne!(a.sun_path[..la as usize - 2], b.sun_path[..lb as usize - 2]);
    }
}
