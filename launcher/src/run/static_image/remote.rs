//! Another process's memory, read and written with `process_vm_readv`/`process_vm_writev`
//! (the supervisor has ptrace access to the processes it serves), its `/proc` fields, and the
//! supervisor's view of its stops.

/// Copies `data` into thread `tid`'s memory at `addr`.
pub fn write(tid: i32, addr: u64, data: &[u8]) -> bool {
    let local = libc::iovec {
        iov_base: data.as_ptr() as *mut _,
        iov_len: data.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut _,
        iov_len: data.len(),
    };
    // SAFETY: one local buffer we own; the remote side is checked by the kernel.
    let n = unsafe { libc::process_vm_writev(tid, &local, 1, &remote, 1, 0) };
    n == data.len() as isize
}

/// Copies path `p` into thread `tid`'s memory at `addr` as a C string (NUL-terminated), when
/// it is at most 2,048 bytes so.
pub fn write_path(tid: i32, addr: u64, p: &std::path::Path) -> bool {
    let mut b = p.as_os_str().as_encoded_bytes().to_vec();
    b.push(0);
    b.len() <= 2048 && write(tid, addr, &b)
}

/// A copy of process `tgid`'s descriptor `fd` (`pidfd_open`, `pidfd_getfd`: the same open
/// file), or the errno that refused it.
pub fn copy_fd(tgid: i32, fd: i32) -> Result<std::os::fd::OwnedFd, i32> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let errno = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    // SAFETY: pidfd_open of a process; the descriptor is ours.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, tgid, 0) } as i32;
    if pidfd < 0 {
        return Err(errno());
    }
    // SAFETY: ours, closed when dropped.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    // SAFETY: pidfd_getfd of the process's descriptor (the supervisor may ptrace it).
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) } as i32;
    if got < 0 {
        return Err(errno());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(got) })
}

/// The registers of tracee `pid`, in a ptrace stop.
pub fn regs(pid: i32) -> Option<libc::user_regs_struct> {
    // SAFETY: user_regs_struct is plain data; PTRACE_GETREGS fills it for our stopped tracee.
    let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    (unsafe { libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut r) } == 0).then_some(r)
}

/// Reads `out` from thread `tid`'s memory at `addr`.
pub fn read<T: Copy>(tid: i32, addr: u64, out: &mut T) -> bool {
    let len = std::mem::size_of::<T>();
    let local = libc::iovec {
        iov_base: (out as *mut T).cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut _,
        iov_len: len,
    };
    // SAFETY: one local buffer we own of `len` bytes; the remote side is checked.
    let n = unsafe { libc::process_vm_readv(tid, &local, 1, &remote, 1, 0) };
    n == len as isize
}

/// Detaches from a tracee that is running (not in a ptrace stop): interrupt, wait, detach.
pub fn detach_running(pid: i32) {
    // SAFETY: ptrace requests on our tracee; waitpid on it.
    unsafe {
        libc::ptrace(libc::PTRACE_INTERRUPT, pid, 0, 0);
        let mut st = 0;
        libc::waitpid(pid, &mut st, libc::__WALL);
        libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0);
    }
}

/// A signalfd for `SIGCHLD` (blocked first), or -1.
pub fn child_signals() -> i32 {
    // SAFETY: a signal set we own; blocking SIGCHLD in this one-threaded process.
    unsafe {
        // Stops are reported only while SIGCHLD is not ignored (an ignored disposition
        // survives the exec that started the supervisor).
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return -1;
        }
        libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK)
    }
}

/// Reads what is pending on signalfd `fd` (the stops themselves are taken by waitpid).
pub fn drain(fd: i32) {
    let mut info = [0u8; 128];
    // SAFETY: reads into a buffer we own, non-blocking.
    while unsafe { libc::read(fd, info.as_mut_ptr().cast(), info.len()) } > 0 {}
}

/// Does process `pid` still exist (a zombie does: its parent has not reaped it)?
pub fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// A file of `/proc` read whole. `std::fs::read` reads a file the kernel gives no size (all
/// of `/proc`) in reads of 32, 32, 64, 128… bytes: 9 system calls for a `status`, on an
/// image's start-up path; from 4 KiB up, one or two.
pub fn read_proc(path: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(4096);
    std::fs::File::open(path)?.read_to_end(&mut buf)?;
    Ok(buf)
}

/// [`read_proc`], as text (`None`: unreadable, or not UTF-8).
pub fn read_proc_text(path: &str) -> Option<String> {
    String::from_utf8(read_proc(path).ok()?).ok()
}

/// The process thread `tid` belongs to: itself when it leads its thread group (a `tgkill` of
/// signal 0 to `(tid, tid)` says so in one system call, where reading its `/proc` status took
/// ~10–18 µs on a static image's first call, from its main thread most often), else its
/// status's `Tgid:` field.
pub fn tgid_of(tid: i32) -> Option<i32> {
    // SAFETY: signal 0 is sent to nobody: only whether thread `tid` of group `tid` exists.
    if unsafe { libc::syscall(libc::SYS_tgkill, tid, tid, 0) } == 0 {
        return Some(tid);
    }
    proc_status_field(tid, "Tgid:")
}

/// A number field of `/proc/PID/status`.
pub fn proc_status_field(pid: i32, field: &str) -> Option<i32> {
    let s = read_proc_text(&format!("/proc/{pid}/status"))?;
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().parse().ok())
}
