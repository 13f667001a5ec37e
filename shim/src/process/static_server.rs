//! The run's supervision server, as the shim reaches it (the launcher's half is
//! `launcher/src/run/static_image/server.rs`; the contract `seal_abi::supervised`).
//!
//! One server per run serves every static image (and cgo Go program) of the run: the shim
//! connects to its socket in the run directory and sends a request; the server forks a
//! supervisor for it, which speaks the same protocol as one started on its own. That costs a
//! `connect` and the server's `fork`, where starting a supervisor costs two forks here and an
//! exec of the `seal` binary (issue 30: ~2.6 ms of each static image's start-up). The first
//! static exec of a run finds no server and starts it: it binds and listens on the socket
//! itself (so every later `connect` queues at once, even before the server runs), then starts
//! `seal __static-server FD` as it would a supervisor ([`spawn`]).
//!
//! In the process about to exec (often a vfork child): raw system calls and stack buffers only.

use libc::c_char;
use seal_abi::supervised::{self, msg};

use crate::core::sys;

/// Tries for a server that is starting (bound, not yet listening) this many times, 1 ms apart.
const TRIES: usize = 10;

/// `struct sockaddr_un` for the server's socket in `run_dir`, and its length; `None` when the
/// path does not fit (a run directory deep in a home directory: each image then gets a
/// supervisor of its own).
fn address(run_dir: &[u8]) -> Option<(libc::sockaddr_un, u32)> {
    let name = supervised::SERVER_SOCKET.as_bytes();
    // SAFETY: sockaddr_un is plain data; zero is valid.
    let mut a: libc::sockaddr_un = unsafe { core::mem::zeroed() };
    let len = run_dir.len() + 1 + name.len();
    if len >= a.sun_path.len() {
        return None;
    }
    a.sun_family = libc::AF_UNIX as u16;
    for (d, s) in a
        .sun_path
        .iter_mut()
        .zip(run_dir.iter().chain(b"/").chain(name))
    {
        *d = *s as c_char;
    }
    Some((a, (2 + len + 1) as u32))
}

fn socket() -> i32 {
    // SAFETY: socket with integer arguments.
    unsafe {
        sys::syscall3(
            libc::SYS_socket,
            libc::AF_UNIX as i64,
            (libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC) as i64,
            0,
        ) as i32
    }
}

/// `connect` or `bind` (`nr`) of a new socket to `a`: the socket, or `-errno`.
fn socket_at(nr: i64, a: &(libc::sockaddr_un, u32)) -> i32 {
    let s = socket();
    if s < 0 {
        return s;
    }
    // SAFETY: an address we own, of the given length.
    let r = unsafe { sys::syscall3(nr, s as i64, &a.0 as *const _ as i64, a.1 as i64) };
    if r < 0 {
        sys::close(s);
        return r as i32;
    }
    s
}

/// A connection to the run's server (started here when there is none yet), or `None`.
/// `exe` is the `seal` binary to start, `env` the new image's `LIBSEAL_*` variables
/// (NULL-terminated).
pub fn connect(run_dir: &[u8], exe: *const c_char, env: &[*const c_char]) -> Option<i32> {
    let a = address(run_dir)?;
    for i in 0..TRIES {
        let s = socket_at(libc::SYS_connect, &a);
        if s >= 0 {
            return Some(s);
        }
        match -s {
            libc::ENOENT if i == 0 => start(&a, exe, env),
            // Bound by another image's shim that has not listened yet (microseconds), or a
            // server that is gone (then each image gets a supervisor of its own).
            libc::ENOENT | libc::ECONNREFUSED => sleep_ms(1),
            _ => return None,
        }
    }
    None
}

/// Binds and listens on the server's socket, and starts the server with it. When another
/// image's shim bound it first, leaves it to that one.
fn start(a: &(libc::sockaddr_un, u32), exe: *const c_char, env: &[*const c_char]) {
    let ls = socket_at(libc::SYS_bind, a);
    if ls < 0 {
        return;
    }
    // SAFETY: listen on our socket.
    unsafe { sys::syscall3(libc::SYS_listen, ls as i64, 128, 0) };
    let mut fd_arg = sys::StackBuf::<24>::new();
    fd_arg.push_i64(ls as i64);
    let arg0 = *b"seal\0";
    let mut role = [0u8; 32];
    role[..supervised::SERVER_ARG.len()].copy_from_slice(supervised::SERVER_ARG.as_bytes());
    let argv: [*const c_char; 4] = [
        arg0.as_ptr().cast(),
        role.as_ptr().cast(),
        fd_arg.as_cstr().as_ptr().cast(),
        core::ptr::null(),
    ];
    spawn(exe, &argv, env, ls);
    sys::close(ls);
}

/// Starts `exe` with `argv` and `env` as a grandchild that leaves this process's tree at once,
/// in a session of its own, with descriptor `keep` inherited; whether it was started (the
/// intermediate child is reaped here).
pub fn spawn(exe: *const c_char, argv: &[*const c_char], env: &[*const c_char], keep: i32) -> bool {
    // SAFETY: a fork (clone with SIGCHLD); the child only makes system calls.
    let c = unsafe { sys::syscall6(libc::SYS_clone, libc::SIGCHLD as i64, 0, 0, 0, 0, 0) };
    if c == 0 {
        // SAFETY: as above, a second fork; the grandchild execs.
        let s = unsafe { sys::syscall6(libc::SYS_clone, libc::SIGCHLD as i64, 0, 0, 0, 0, 0) };
        if s == 0 {
            // SAFETY: system calls on our descriptors and vectors that live until the exec.
            unsafe {
                sys::syscall3(libc::SYS_setsid, 0, 0, 0);
                sys::syscall3(libc::SYS_fcntl, keep as i64, libc::F_SETFD as i64, 0);
                sys::syscall3(
                    libc::SYS_execve,
                    exe as i64,
                    argv.as_ptr() as i64,
                    env.as_ptr() as i64,
                );
            }
            sys::exit_group(127);
        }
        sys::exit_group(0);
    }
    if c > 0 {
        // SAFETY: reaps the intermediate child, which exits at once.
        unsafe {
            sys::syscall6(libc::SYS_wait4, c, 0, libc::__WALL as i64, 0, 0, 0);
        }
    }
    c > 0
}

/// Sends the request for a supervisor of process `pid` (`own`: it supervises itself, with
/// this virtual pid and parent pid) with the new image's variables `env` (up to a NULL);
/// whether it went.
pub fn request(sock: i32, pid: i32, own: Option<(i32, i32)>, env: &[*const c_char]) -> bool {
    let mut head = [0u8; supervised::REQUEST_HEADER];
    head[0] = msg::REQUEST;
    head[1..5].copy_from_slice(&(pid as u32).to_le_bytes());
    if let Some((vpid, ppid)) = own {
        head[5] = 1;
        head[6..10].copy_from_slice(&(vpid as u32).to_le_bytes());
        head[10..14].copy_from_slice(&(ppid as u32).to_le_bytes());
    }
    let empty = libc::iovec {
        iov_base: core::ptr::null_mut(),
        iov_len: 0,
    };
    let mut iov = [empty; 66];
    iov[0] = libc::iovec {
        iov_base: head.as_mut_ptr().cast(),
        iov_len: head.len(),
    };
    let mut n = 1;
    let mut total = head.len();
    for &v in env.iter().take_while(|v| !v.is_null()).take(iov.len() - 1) {
        // SAFETY: each entry is a NUL-terminated C string.
        let len = unsafe { sys::cstr_len(v) } + 1;
        total += len;
        iov[n] = libc::iovec {
            iov_base: v as *mut _,
            iov_len: len,
        };
        n += 1;
    }
    if total > supervised::REQUEST_MAX {
        return false;
    }
    // SAFETY: msghdr is plain data; zero is a valid empty header.
    let mut h: libc::msghdr = unsafe { core::mem::zeroed() };
    h.msg_iov = iov.as_mut_ptr();
    h.msg_iovlen = n;
    // SAFETY: sendmsg over buffers that live for the call.
    let r = unsafe {
        sys::syscall3(
            libc::SYS_sendmsg,
            sock as i64,
            &h as *const libc::msghdr as i64,
            libc::MSG_NOSIGNAL as i64,
        )
    };
    r == total as i64
}

fn sleep_ms(ms: i64) {
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: ms * 1_000_000,
    };
    // SAFETY: a timespec we own.
    unsafe { sys::syscall3(libc::SYS_nanosleep, &ts as *const _ as i64, 0, 0) };
}
