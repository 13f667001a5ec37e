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
use seal_abi::supervised::{self, handover};

use crate::core::sys;

/// A connection to the run's server (started here when there is none yet), or `None`.
/// `exe` is the `seal` binary to start, `env` the new image's `LIBSEAL_*` variables
/// (NULL-terminated).
pub fn connect(run_dir: &[u8], exe: *const c_char, env: &[*const c_char]) -> Option<i32> {
    let a = handover::ServerAddr::of(run_dir)?;
    handover::connect(&a, |a| start(a, exe, env))
}

/// Binds and listens on the server's socket, and starts the server with it. When another
/// image's shim bound it first, leaves it to that one.
fn start(a: &handover::ServerAddr, exe: *const c_char, env: &[*const c_char]) {
    let ls = a.socket(true);
    if ls < 0 {
        return;
    }
    handover::listen(ls);
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
