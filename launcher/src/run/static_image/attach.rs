//! One supervisor's start: `seal __static-supervisor FD PID [VPID PPID]`, or a supervisor the
//! run's server forked for a request ([`super::server`]). It attaches to the process (or, for
//! a process that supervises itself, seals its `AT_RANDOM`), takes the seccomp listener the
//! process installs, and serves ([`super::serve`]).

use seal_abi::supervised::{msg, SUPERVISOR_ARG};

use super::{auxv, go_entropy, remote, serve, vdso_clock, world};
use std::ffi::OsString;

/// `seal __static-supervisor FD PID`.
pub fn supervise(args: &[OsString]) -> i32 {
    supervise_in(args, world::World::from_env())
}

/// [`supervise`], with the run's settings and the image's identity `world`.
pub fn supervise_in(args: &[OsString], mut world: world::World) -> i32 {
    let num = |i: usize| args.get(i)?.to_str()?.parse::<i32>().ok();
    let (Some(fd), Some(pid)) = (num(0), num(1)) else {
        eprintln!("seal: {SUPERVISOR_ARG}: FD and PID are needed");
        return 2;
    };
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
        // The clock page libseal made for the runtime's vDSO, taken before READY (libseal
        // looks for the mark then).
        let page = world
            .seal_clocks()
            .then(|| vdso_clock::take(pid, &world, serve::MONO_BASE_NS))
            .flatten();
        // Its entropy mapping, likewise (libseal rewrites `GetRandom`'s call once it sees
        // the mark).
        let entropy = world
            .sealed(seal_abi::flags::RANDOM)
            .then(|| go_entropy::take(pid, &world))
            .flatten();
        send(fd, msg::READY, 0);
        super::spare::taken();
        return serve::run(listener, fd, pid, world, false, page, entropy);
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
    // No READY: the exec'ing side execs once it has sent the listener, and its exec waits in
    // its notification (`handover::hand_over`).
    serve::run(listener, fd, pid, world, true, None, None)
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
