//! The exec'ing side of the protocol, in one place for both processes that speak it: libseal's
//! exec hook (in a process about to exec a static binary, often a vfork child) and the
//! launcher's forked child when the run's root command is static (`seal -- static-prog`, no
//! trampoline). Both run between fork and exec, where only raw system calls on stack buffers
//! are safe: this module makes them itself (x86_64, no libc), so the launcher's copy is the
//! shim's.
//!
//! The steps: [`connect`] to the run's server and send a [`request`]; then [`hand_over`]:
//! wait for ATTACHED, name the supervisor as ptracer, install the [`super::filter`] with a
//! listener, send it (`SCM_RIGHTS`), and (for a process that supervises itself) wait for
//! READY. The caller then execs, and says [`exec_failed`] when that fails.

use super::{msg, SockFilter, FILTER_LEN, REQUEST_HEADER, REQUEST_MAX, SERVER_SOCKET};

/// How long the exec'ing side waits for each answer of the supervisor.
pub const ANSWER_MS: i64 = 5_000;

/// Tries for a server that is starting (bound, not yet listening) this many times, 1 ms apart.
const TRIES: usize = 10;

// x86_64 system call numbers and constants (<asm/unistd_64.h>, <linux/*.h>).
const SYS_OPEN: i64 = 2;
const SYS_CLOSE: i64 = 3;
const SYS_PREAD64: i64 = 17;
const SYS_NANOSLEEP: i64 = 35;
const SYS_SOCKET: i64 = 41;
const SYS_CONNECT: i64 = 42;
const SYS_RECVFROM: i64 = 45;
const SYS_SENDMSG: i64 = 46;
const SYS_BIND: i64 = 49;
const SYS_LISTEN: i64 = 50;
const SYS_PRCTL: i64 = 157;
const SYS_PPOLL: i64 = 271;
const SYS_SECCOMP: i64 = 317;
const SYS_GETRANDOM: i64 = 318;
const AF_UNIX: i64 = 1;
const SOCK_SEQPACKET_CLOEXEC: i64 = 5 | 0o2000000;
const MSG_NOSIGNAL: i64 = 0x4000;
const SOL_SOCKET: u64 = 1;
const SCM_RIGHTS: u64 = 1;
const POLLIN: i16 = 1;
const ENOENT: i64 = 2;
const EACCES: i64 = 13;
const EINVAL: i64 = 22;
const ECONNREFUSED: i64 = 111;
/// `PR_SET_PTRACER`, `PR_SET_NO_NEW_PRIVS`.
pub const PR_SET_PTRACER: i32 = 0x5961_6d61;
const PR_SET_NO_NEW_PRIVS: i32 = 38;

/// One system call with up to six arguments: the result, or `-errno`.
///
/// # Safety
/// The arguments are what system call `n` expects (pointers valid for it).
#[inline(always)]
unsafe fn sys(n: i64, a: [i64; 6]) -> i64 {
    let r: i64;
    // SAFETY: the caller's contract; rcx and r11 are clobbered by `syscall`.
    unsafe {
        core::arch::asm!("syscall", inlateout("rax") n => r, in("rdi") a[0], in("rsi") a[1],
            in("rdx") a[2], in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    r
}

pub fn close(fd: i32) {
    // SAFETY: closing a descriptor the caller owns.
    unsafe { sys(SYS_CLOSE, [fd as i64, 0, 0, 0, 0, 0]) };
}

pub fn prctl(option: i32, arg: i64) {
    // SAFETY: prctl with integer arguments.
    unsafe { sys(SYS_PRCTL, [option as i64, arg, 0, 0, 0, 0]) };
}

fn sleep_ms(ms: i64) {
    let ts = [0i64, ms * 1_000_000];
    // SAFETY: a timespec we own.
    unsafe { sys(SYS_NANOSLEEP, [ts.as_ptr() as i64, 0, 0, 0, 0, 0]) };
}

/// `struct sockaddr_un` for the server's socket in a run directory, and its length.
#[derive(Clone, Copy)]
pub struct ServerAddr {
    /// `sun_family` (2 bytes) then `sun_path` (108).
    raw: [u8; 110],
    len: u32,
}

impl ServerAddr {
    /// The address of [`SERVER_SOCKET`] in `run_dir`; `None` when the path does not fit (a
    /// run directory deep in a home directory: each image then gets a supervisor of its own).
    pub fn of(run_dir: &[u8]) -> Option<ServerAddr> {
        let name = SERVER_SOCKET.as_bytes();
        let len = run_dir.len() + 1 + name.len();
        if len >= 108 {
            return None;
        }
        let mut raw = [0u8; 110];
        raw[..2].copy_from_slice(&(AF_UNIX as u16).to_ne_bytes());
        for (d, s) in raw[2..]
            .iter_mut()
            .zip(run_dir.iter().chain(b"/").chain(name))
        {
            *d = *s;
        }
        Some(ServerAddr {
            raw,
            len: (2 + len + 1) as u32,
        })
    }

    /// A new socket `connect`ed (`bind == false`) or bound to this address: the socket, or
    /// `-errno`.
    pub fn socket(&self, bind: bool) -> i32 {
        // SAFETY: socket with integer arguments.
        let s = unsafe { sys(SYS_SOCKET, [AF_UNIX, SOCK_SEQPACKET_CLOEXEC, 0, 0, 0, 0]) } as i32;
        if s < 0 {
            return s;
        }
        let nr = if bind { SYS_BIND } else { SYS_CONNECT };
        // SAFETY: an address we own, of the given length.
        let r = unsafe {
            sys(
                nr,
                [s as i64, self.raw.as_ptr() as i64, self.len as i64, 0, 0, 0],
            )
        };
        if r < 0 {
            close(s);
            return r as i32;
        }
        s
    }
}

/// `listen` on a bound socket.
pub fn listen(sock: i32) {
    // SAFETY: listen with integer arguments.
    unsafe { sys(SYS_LISTEN, [sock as i64, 128, 0, 0, 0, 0]) };
}

/// A connection to the run's server at `a`, or `None`. `start` is called once when there is
/// no socket yet (libseal starts the server then; the launcher started it already).
pub fn connect(a: &ServerAddr, mut start: impl FnMut(&ServerAddr)) -> Option<i32> {
    for i in 0..TRIES {
        let s = a.socket(false);
        if s >= 0 {
            return Some(s);
        }
        match -(s as i64) {
            ENOENT if i == 0 => start(a),
            // Bound by another image's shim that has not listened yet (microseconds), or a
            // server that is gone (then each image gets a supervisor of its own).
            ENOENT | ECONNREFUSED => sleep_ms(1),
            _ => return None,
        }
    }
    None
}

/// `struct iovec`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Iovec {
    base: *const u8,
    len: usize,
}

/// `struct msghdr`.
#[repr(C)]
struct Msghdr {
    name: *const u8,
    namelen: u32,
    iov: *const Iovec,
    iovlen: usize,
    control: *const u64,
    controllen: usize,
    flags: i32,
}

fn sendmsg(sock: i32, iov: &[Iovec], control: Option<&[u64; 3]>) -> i64 {
    let h = Msghdr {
        name: core::ptr::null(),
        namelen: 0,
        iov: iov.as_ptr(),
        iovlen: iov.len(),
        control: control.map_or(core::ptr::null(), |c| c.as_ptr()),
        controllen: if control.is_some() { 24 } else { 0 },
        flags: 0,
    };
    // SAFETY: sendmsg over buffers that live for the call.
    unsafe {
        sys(
            SYS_SENDMSG,
            [
                sock as i64,
                &h as *const Msghdr as i64,
                MSG_NOSIGNAL,
                0,
                0,
                0,
            ],
        )
    }
}

/// Sends the request for a supervisor of process `pid` (`own`: it supervises itself, with
/// this virtual pid and parent pid) with the new image's `LIBSEAL_*` variables `env` (C
/// strings, up to a null); whether it went.
///
/// # Safety
/// Each entry of `env` before the first null is a NUL-terminated string.
pub unsafe fn request(sock: i32, pid: i32, own: Option<(i32, i32)>, env: &[*const u8]) -> bool {
    let mut head = [0u8; REQUEST_HEADER];
    head[0] = msg::REQUEST;
    head[1..5].copy_from_slice(&(pid as u32).to_le_bytes());
    if let Some((vpid, ppid)) = own {
        head[5] = 1;
        head[6..10].copy_from_slice(&(vpid as u32).to_le_bytes());
        head[10..14].copy_from_slice(&(ppid as u32).to_le_bytes());
    }
    let empty = Iovec {
        base: core::ptr::null(),
        len: 0,
    };
    let mut iov = [empty; 66];
    iov[0] = Iovec {
        base: head.as_ptr(),
        len: head.len(),
    };
    let mut n = 1;
    let mut total = head.len();
    for &v in env.iter().take_while(|v| !v.is_null()).take(iov.len() - 1) {
        let mut len = 0;
        // SAFETY: per the contract, a NUL-terminated string.
        while unsafe { *v.add(len) } != 0 {
            len += 1;
        }
        total += len + 1;
        iov[n] = Iovec {
            base: v,
            len: len + 1,
        };
        n += 1;
    }
    total <= REQUEST_MAX && sendmsg(sock, &iov[..n], None) == total as i64
}

/// Sends a tag and a `u32`, with descriptor `fd` as `SCM_RIGHTS` when `fd >= 0`.
pub fn send(sock: i32, tag: u8, value: u32, fd: i32) {
    let mut m = [0u8; 5];
    m[0] = tag;
    m[1..].copy_from_slice(&value.to_le_bytes());
    let iov = [Iovec {
        base: m.as_ptr(),
        len: m.len(),
    }];
    // One cmsghdr: cmsg_len (usize), cmsg_level (i32), cmsg_type (i32), then the descriptor,
    // padded to 8.
    let control = [16 + 4, SOL_SOCKET | (SCM_RIGHTS << 32), fd as u32 as u64];
    sendmsg(sock, &iov, (fd >= 0).then_some(&control));
}

/// Waits (at most [`ANSWER_MS`]) for one message: its tag and `u32`.
pub fn receive(sock: i32) -> Option<(u8, u32)> {
    // struct pollfd: fd (i32), events (i16), revents (i16).
    let mut pfd = [sock as u32 as u64 | ((POLLIN as u16 as u64) << 32)];
    let limit = [ANSWER_MS / 1000, ANSWER_MS % 1000 * 1_000_000];
    // SAFETY: one pollfd and a timespec we own, alive across the call; no signal mask.
    let r = unsafe {
        sys(
            SYS_PPOLL,
            [pfd.as_mut_ptr() as i64, 1, limit.as_ptr() as i64, 0, 8, 0],
        )
    };
    if r <= 0 {
        return None;
    }
    let mut m = [0u8; 5];
    // SAFETY: recvfrom into a buffer we own; no flags, no sender's address.
    let n = unsafe {
        sys(
            SYS_RECVFROM,
            [sock as i64, m.as_mut_ptr() as i64, m.len() as i64, 0, 0, 0],
        )
    };
    (n == 5).then(|| (m[0], u32::from_le_bytes([m[1], m[2], m[3], m[4]])))
}

/// Installs the filter with a new listener (after `PR_SET_NO_NEW_PRIVS`, which an unprivileged
/// process needs for it); returns the listener or `-errno`.
/// `pie`: the image to be exec'd is a static-pie one ([`super::NO_IP_LIMIT`]).
///
/// With `SECCOMP_FILTER_FLAG_SPEC_ALLOW` (Linux 4.17): the filter only routes calls to the
/// supervisor, it is no sandbox, so it leaves the image's speculation mitigations as they were.
/// Without the flag a kernel booted with the default `spec_store_bypass_disable=seccomp`
/// turns Speculative Store Bypass Disable on for every filtered thread (slower code, and on
/// some CPUs a model-specific register written at each context switch, a trap in a VM). A
/// kernel that does not know the flag (`EINVAL`) gets the filter without it.
pub fn install_filter(pie: bool) -> i32 {
    const SECCOMP_SET_MODE_FILTER: i64 = 1;
    const SECCOMP_FILTER_FLAG_NEW_LISTENER: i64 = 1 << 3;
    const SECCOMP_FILTER_FLAG_SPEC_ALLOW: i64 = 1 << 2;
    static FILTER: [SockFilter; FILTER_LEN] = super::filter();
    static PIE_FILTER: [SockFilter; FILTER_LEN] = super::filter_below(super::NO_IP_LIMIT);
    #[repr(C)]
    struct Prog {
        len: u16,
        filter: *const SockFilter,
    }
    let f = if pie { &PIE_FILTER } else { &FILTER };
    let prog = Prog {
        len: f.len() as u16,
        filter: f.as_ptr(),
    };
    let install = |flags: i64| {
        // SAFETY: seccomp with a sock_fprog that points at a static program.
        unsafe {
            sys(
                SYS_SECCOMP,
                [
                    SECCOMP_SET_MODE_FILTER,
                    flags,
                    &prog as *const Prog as i64,
                    0,
                    0,
                    0,
                ],
            )
        }
    };
    let flags = SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_SPEC_ALLOW;
    let mut r = install(flags);
    if r == -EACCES {
        prctl(PR_SET_NO_NEW_PRIVS, 1);
        r = install(flags);
    }
    if r == -EINVAL {
        r = install(SECCOMP_FILTER_FLAG_NEW_LISTENER);
    }
    r as i32
}

/// How [`hand_over`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handover {
    /// Nothing is installed (no ATTACHED, or the filter could not be): exec unsupervised (or
    /// try another way). The socket is still open and the ptracer still named: the caller
    /// closes the one and resets the other ([`give_up`]).
    Refused,
    /// The supervisor holds the listener: exec now.
    Ready,
    /// The filter is in place and the supervisor did not say READY: every call it covers
    /// would fail with `ENOSYS`. Nothing can take it back; the caller says so loudly.
    Unanswered,
}

/// After the request: ATTACHED, the supervisor named as ptracer, the filter installed (for a
/// static-pie image when `pie`: [`is_static_pie`]), the listener sent, READY when `ready`.
///
/// Without `ready` (an exec follows) it returns once the listener is sent: the exec is sent
/// to the supervisor, and waits until the supervisor holds the listener and lets it run
/// (one wake-up less on every static image's start). Were the supervisor to die first, the
/// kernel fails the exec with `ENOSYS` ([`NO_SUPERVISOR`]). A process that supervises itself
/// waits: its supervisor takes its pages before READY.
pub fn hand_over(sock: i32, pie: bool, ready: bool) -> Handover {
    let Some((msg::ATTACHED, supervisor)) = receive(sock) else {
        return Handover::Refused;
    };
    prctl(PR_SET_PTRACER, supervisor as i64);
    let listener = install_filter(pie);
    if listener < 0 {
        send(sock, msg::EXEC_FAILED, (-listener) as u32, -1);
        return Handover::Refused;
    }
    send(sock, msg::LISTENER, 0, listener);
    if !ready {
        close(listener);
        return Handover::Ready;
    }
    let ready = receive(sock);
    close(listener);
    match ready {
        Some((msg::READY, _)) => Handover::Ready,
        _ => Handover::Unanswered,
    }
}

/// The error of an exec whose supervisor died before it held the listener
/// ([`hand_over`] without READY): every call the filter sends fails so.
pub const NO_SUPERVISOR: i32 = 38; // ENOSYS

/// Undoes what a [`Handover::Refused`] left: the socket closed, no ptracer named.
pub fn give_up(sock: i32) {
    close(sock);
    prctl(PR_SET_PTRACER, 0);
}

/// Tells the supervisor that the exec failed (it detaches), and closes the socket.
pub fn exec_failed(sock: i32, errno: i32) {
    send(sock, msg::EXEC_FAILED, errno as u32, -1);
    close(sock);
}

/// `getrandom`'s flags of [`under_supervisor`]'s probe: no flags the kernel knows (it fails
/// the call with `EINVAL`), so only a supervisor that holds the caller's filter answers it.
pub const PROBE_FLAGS: u64 = 0x5ea1_0000;
/// What a supervisor answers [`PROBE_FLAGS`] with.
pub const PROBE_ANSWER: i64 = 0x5ea1;

/// Does a supervisor of this process's run (the run directory at NUL-terminated `run_dir`)
/// hold the listener of a filter this process carries (it descends from a supervised static
/// image)? Then no other listener can be installed (the kernel allows one in a filter chain),
/// and that supervisor follows the process's next exec of a static image itself. One
/// `getrandom(run_dir, 0, PROBE_FLAGS)`: the supervisor answers [`PROBE_ANSWER`] when the run
/// directory is its own (another run's, a nested seal's outer one, lets the kernel fail it).
///
/// # Safety
/// `run_dir` is a NUL-terminated string.
pub unsafe fn under_supervisor(run_dir: *const u8) -> bool {
    // SAFETY: no buffer is written (length 0); the supervisor only reads the string.
    unsafe {
        sys(
            SYS_GETRANDOM,
            [run_dir as i64, 0, PROBE_FLAGS as i64, 0, 0, 0],
        ) == PROBE_ANSWER
    }
}

/// Is the file at NUL-terminated `path` a position-independent executable (`ET_DYN`)? For a
/// static target, a static-pie one. System calls only.
///
/// # Safety
/// `path` is a NUL-terminated string.
pub unsafe fn is_static_pie(path: *const u8) -> bool {
    // SAFETY: per the contract; O_RDONLY | O_CLOEXEC.
    let fd = unsafe { sys(SYS_OPEN, [path as i64, 0o2000000, 0, 0, 0, 0]) };
    if fd < 0 {
        return false;
    }
    let mut head = [0u8; 18];
    // SAFETY: reads into our buffer.
    let n = unsafe { sys(SYS_PREAD64, [fd, head.as_mut_ptr() as i64, 18, 0, 0, 0]) };
    close(fd as i32);
    n == 18 && head.starts_with(b"\x7fELF") && u16::from_le_bytes([head[16], head[17]]) == 3
}
