//! Static images under system-call supervision (the launcher's half; the contract is
//! `seal_abi::supervised`, the shim's half `shim/src/process/static_image.rs`).
//!
//! Two hidden entry points of the `seal` binary, taken before the command line is parsed:
//! - `seal __static-supervisor FD PID`: started by libseal in a process about to exec a static
//!   binary. It attaches to that process with ptrace, takes the seccomp listener the process
//!   installs, fixes the new image's auxiliary vector at the exec stop, detaches, then answers
//!   the image's clock, entropy, pid and host-name system calls until every process that
//!   carries the filter has gone ([`serve`]).
//! - `seal __exec-static PATH ARGV0 ARGS…`: the root command, when it is a static binary. The
//!   launcher starts this instead (libseal loads into it, as into any dynamic root), and it
//!   execs the binary, so that libseal's exec hook sets the supervision up as for any other.

mod auxv;
mod census;
mod exec_child;
mod go_clock;
mod notif;
mod remote;
mod serve;
mod vdso_clock;
mod world;

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use seal_abi::supervised::{msg, SUPERVISOR_ARG};

/// The trampoline's argument (`seal __exec-static PATH ARGV0 ARGS…`).
pub const EXEC_ARG: &str = seal_abi::supervised::EXEC_STATIC_ARG;

/// Runs one of the hidden entry points when `args` names one: returns its exit status.
pub fn entry(args: &[OsString]) -> Option<i32> {
    match args.get(1).and_then(|a| a.to_str()) {
        Some(SUPERVISOR_ARG) => Some(supervise(&args[2..])),
        Some(EXEC_ARG) => Some(exec_static(&args[2..])),
        _ => None,
    }
}

/// The census line for a static binary that ran supervised: what stayed real in it.
pub fn partly_sealed_line(program: &str) -> String {
    let go = std::fs::read(program).is_ok_and(|b| auxv::go_note(&b));
    let (served, real) = if go {
        (
            "clocks (one per process, moved by its timer waits), entropy, pid and host name",
            "map order and the runtime's fastrand (os.MkdirTemp names; seeded by seal, but \
             drawn per thread as the scheduler runs goroutines), ",
        )
    } else {
        ("clocks, entropy, pid and host name", "")
    };
    format!(
        "partly sealed (static-binary-supervised): {program}: {served} are served by seal's \
         supervisor; real: {real}pids of its children and threads, /dev/urandom and /proc \
         files, file times, rdtsc"
    )
}

/// The census line for a dynamically linked Go program under the supervisor.
pub fn go_line(program: &str) -> String {
    format!(
        "partly sealed (go-runtime-supervised): {program}: libseal seals its C library's calls; \
         the Go runtime's clocks (one per process, moved by its timer waits) and raw getpid, \
         getrandom, uname and signal calls are served by seal's supervisor; real: map order and \
         the runtime's fastrand (os.MkdirTemp names; seeded by rdtsc), tids of its other \
         threads, pids of children it starts"
    )
}

/// The link in the run directory that libseal execs as the supervisor.
pub fn link_in(run_dir: &Path) -> PathBuf {
    run_dir.join(seal_abi::supervised::SUPERVISOR_LINK)
}

/// Makes the run directory's link to this `seal` binary.
pub fn make_link(run_dir: &Path) -> std::io::Result<()> {
    let exe = std::env::current_exe()?;
    match std::os::unix::fs::symlink(exe, link_in(run_dir)) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// Can this kernel supervise a static image (seccomp user notifications: Linux 5.0, with
/// `SECCOMP_USER_NOTIF_FLAG_CONTINUE`: 5.5)? Asked once.
pub fn available() -> bool {
    static YES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *YES.get_or_init(|| {
        let mut sizes = [0u16; 3];
        // SAFETY: SECCOMP_GET_NOTIF_SIZES writes three u16 into `sizes`.
        unsafe { libc::syscall(libc::SYS_seccomp, 3, 0, sizes.as_mut_ptr()) == 0 }
    })
}

/// The trampoline: exec PATH with ARGV0 and ARGS (through libc's `execv`, which libseal
/// hooks). Returns only when the exec failed (status 127, as a shell says "not found", or 126).
fn exec_static(args: &[OsString]) -> i32 {
    let (Some(path), Some(_)) = (args.first(), args.get(1)) else {
        eprintln!("seal: {EXEC_ARG}: a program and its argv[0] are needed");
        return 2;
    };
    let c = |s: &OsStr| CString::new(s.as_bytes()).unwrap_or_default();
    let path_c = c(path);
    let argv: Vec<CString> = args[1..].iter().map(|a| c(a)).collect();
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: a NUL-terminated path and argument vector that outlive the call.
    unsafe { libc::execv(path_c.as_ptr(), ptrs.as_ptr()) };
    let err = std::io::Error::last_os_error();
    eprintln!("seal: cannot run {}: {err}", Path::new(path).display());
    if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// `seal __static-supervisor FD PID`.
fn supervise(args: &[OsString]) -> i32 {
    let num = |i: usize| args.get(i)?.to_str()?.parse::<i32>().ok();
    let (Some(fd), Some(pid)) = (num(0), num(1)) else {
        eprintln!("seal: {SUPERVISOR_ARG}: FD and PID are needed");
        return 2;
    };
    let mut world = world::World::from_env();
    if let (Some(vpid), Some(ppid)) = (num(2), num(3)) {
        // A process that supervises itself: nothing to trace.
        world.set_identity(vpid, ppid);
        // SAFETY: getpid has no preconditions.
        send(fd, msg::ATTACHED, unsafe { libc::getpid() } as u32);
        let Some(listener) = receive_listener(fd) else {
            return 1;
        };
        let at_random = world.at_random();
        auxv::seal_at_random(pid, at_random);
        send(fd, msg::READY, 0);
        return serve::run(listener, fd, pid, world, false);
    }
    // SAFETY: PTRACE_SEIZE of the process that started us, with an options word.
    let seized = unsafe {
        libc::ptrace(
            libc::PTRACE_SEIZE,
            pid,
            0,
            libc::PTRACE_O_TRACEEXEC as libc::c_long,
        )
    };
    if seized != 0 {
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        send(fd, msg::REFUSED, e as u32);
        return 1;
    }
    // SAFETY: getpid has no preconditions.
    send(fd, msg::ATTACHED, unsafe { libc::getpid() } as u32);
    // A traced process stops at each signal it is sent (even one it ignores, such as the
    // SIGCHLD of libseal's intermediate child): let it go on while waiting for the listener,
    // or neither side would ever move.
    let listener = wait_traced(fd, pid).then(|| receive_listener(fd)).flatten();
    let Some(listener) = listener else {
        remote::detach_running(pid);
        return 1;
    };
    send(fd, msg::READY, 0);
    serve::run(listener, fd, pid, world, true)
}

/// Waits (at most 10 s) until socket `fd` is readable, resuming traced process `pid` from any
/// signal stop meanwhile (with its signal); false when it is gone or the time ran out.
fn wait_traced(fd: i32, pid: i32) -> bool {
    for _ in 0..1000 {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd we own.
        if unsafe { libc::poll(&mut p, 1, 10) } > 0 {
            return true;
        }
        let mut st = 0;
        // SAFETY: waitpid on our tracee, without blocking.
        let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG | libc::__WALL) };
        if r < 0 || (r == pid && !libc::WIFSTOPPED(st)) {
            return false;
        }
        if r == pid {
            let sig = if st >> 16 == 0 { libc::WSTOPSIG(st) } else { 0 };
            // SAFETY: the tracee is stopped.
            unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, sig as libc::c_long) };
        }
    }
    false
}

/// Sends one message: a tag byte and a `u32`.
fn send(fd: i32, tag: u8, value: u32) {
    let mut m = [0u8; 5];
    m[0] = tag;
    m[1..].copy_from_slice(&value.to_le_bytes());
    // SAFETY: a 5-byte buffer we own.
    unsafe { libc::send(fd, m.as_ptr().cast(), m.len(), libc::MSG_NOSIGNAL) };
}

/// Waits for the shim's `LISTENER` message and takes the descriptor it carries.
fn receive_listener(fd: i32) -> Option<i32> {
    let mut tag = [0u8; 5];
    let mut iov = libc::iovec {
        iov_base: tag.as_mut_ptr().cast(),
        iov_len: tag.len(),
    };
    // Room for one descriptor's control message, aligned as cmsghdr.
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain data; zero is a valid empty header.
    let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
    m.msg_iov = &mut iov;
    m.msg_iovlen = 1;
    m.msg_control = control.as_mut_ptr().cast();
    m.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: a header over buffers we own.
    let n = unsafe { libc::recvmsg(fd, &mut m, libc::MSG_CMSG_CLOEXEC) };
    if n < 1 || tag[0] != msg::LISTENER {
        return None;
    }
    // SAFETY: walking the control messages recvmsg filled in.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&m);
        if c.is_null() || (*c).cmsg_level != libc::SOL_SOCKET || (*c).cmsg_type != libc::SCM_RIGHTS
        {
            return None;
        }
        Some(std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const i32))
    }
}
