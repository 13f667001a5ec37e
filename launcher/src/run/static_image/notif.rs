//! A seccomp user notification, and the answer to it (<linux/seccomp.h>).

/// `struct seccomp_notif` and `struct seccomp_notif_resp` (<linux/seccomp.h>).
#[repr(C)]
#[derive(Default)]
pub struct Notif {
    pub id: u64,
    pub pid: u32,
    pub flags: u32,
    pub nr: i32,
    pub arch: u32,
    pub ip: u64,
    pub args: [u64; 6],
}
#[repr(C)]
#[derive(Default)]
struct Resp {
    id: u64,
    val: i64,
    error: i32,
    flags: u32,
}
pub const NOTIF_RECV: libc::c_ulong = 0xc050_2100;
const NOTIF_SEND: libc::c_ulong = 0xc018_2101;
const FLAG_CONTINUE: u32 = 1;

/// `SECCOMP_IOCTL_NOTIF_SET_FLAGS`, `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6).
const NOTIF_SET_FLAGS: libc::c_ulong = 0x4008_2104;
const FD_SYNC_WAKE_UP: u64 = 1;

/// Asks the kernel to wake a caller the supervisor answers on the supervisor's own CPU
/// (`complete_on_current_cpu`), not on whichever CPU the scheduler picks: the supervisor goes
/// back to its wait right after the answer, so the caller runs at once where the answer was
/// made, without a wake-up sent to another CPU. Where a CPU's wake-up is an interrupt a
/// hypervisor delivers (this VM: ~20–40 µs), a static image's round of open + read + close
/// took 56 µs more sealed than bare, and takes 10.5. Whether the kernel took the flag (6.6 or
/// later).
pub fn sync_wake_up(listener: i32) -> bool {
    // SAFETY: an ioctl with an integer argument on our own descriptor.
    unsafe { libc::ioctl(listener, NOTIF_SET_FLAGS, FD_SYNC_WAKE_UP) == 0 }
}

/// What to answer one call.
pub enum Answer {
    /// Run it as it is.
    Continue,
    Value(i64),
    Error(i32),
    /// Held: answered later (`Supervisor::release`).
    Held,
    /// A descriptor installed in the caller as the call's result (`O_CLOEXEC` there if
    /// true): a sealed file's contents (`serve/opens.rs`).
    Fd(std::os::fd::OwnedFd, bool),
}

/// Sends the answer to notification `id` (nothing for a held one); false when it is no
/// longer valid (the caller died, or a signal interrupted the call, which is made again).
pub fn respond(listener: i32, id: u64, answer: Answer) -> bool {
    let mut resp = Resp {
        id,
        ..Resp::default()
    };
    match answer {
        Answer::Continue => resp.flags = FLAG_CONTINUE,
        Answer::Value(v) => resp.val = v,
        Answer::Error(e) => resp.error = -e,
        Answer::Held => return true,
        Answer::Fd(fd, cloexec) => return send_fd(listener, id, &fd, cloexec),
    }
    // SAFETY: a seccomp_notif_resp we own; an id that is no longer valid fails harmlessly.
    unsafe { libc::ioctl(listener, NOTIF_SEND, &mut resp) == 0 }
}

/// `struct seccomp_notif_addfd`.
#[repr(C)]
struct AddFd {
    id: u64,
    flags: u32,
    srcfd: u32,
    newfd: u32,
    newfd_flags: u32,
}
/// `SECCOMP_IOCTL_NOTIF_ADDFD`, `SECCOMP_ADDFD_FLAG_SEND`.
const NOTIF_ADDFD: libc::c_ulong = 0x4018_2103;
const ADDFD_FLAG_SEND: u32 = 2;

/// Installs `fd` in the caller of notification `id` at its lowest free number and answers
/// the call with that number, in one step (Linux 5.14). Where the kernel cannot, the call
/// runs as it is (the real file) rather than fail.
fn send_fd(listener: i32, id: u64, fd: &std::os::fd::OwnedFd, cloexec: bool) -> bool {
    use std::os::fd::AsRawFd;
    let mut add = AddFd {
        id,
        flags: ADDFD_FLAG_SEND,
        srcfd: fd.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: a seccomp_notif_addfd we own; an id that is no longer valid fails harmlessly.
    if unsafe { libc::ioctl(listener, NOTIF_ADDFD, &mut add) } >= 0 {
        return true;
    }
    match std::io::Error::last_os_error().raw_os_error() {
        // The call is gone (its caller died, or a signal interrupted it).
        Some(libc::ENOENT) => false,
        Some(libc::EINVAL | libc::ENOTTY | libc::ENOSYS) => respond(listener, id, Answer::Continue),
        // No room in the caller (`EMFILE`): the call fails as the kernel's open would.
        Some(e) => respond(listener, id, Answer::Error(e)),
        None => respond(listener, id, Answer::Error(libc::EIO)),
    }
}

/// A signal a process of the image sends naming virtual pids or tids of the run (a Go
/// runtime's `tgkill(getpid(), gettid(), SIGURG)` preemption, `raise`, a shell's `kill` of
/// its child): sent by the supervisor to the real ones (`real` of each, `None` for a number
/// that is no virtual one). A target that names none runs as it is, and so do process groups
/// and `-1`.
pub fn signal(nr: i64, a: [u64; 6], mut real: impl FnMut(i32) -> Option<i32>) -> Answer {
    let mut real = |v: u64| (v as i32 > 0).then(|| real(v as i32)).flatten();
    let (x, y) = (real(a[0]), real(a[1]));
    let or = |r: Option<i32>, v: u64| r.map_or(v as i32 as i64, |r| r as i64);
    // SAFETY: kill, tkill and tgkill with integer arguments.
    let r = unsafe {
        match nr {
            libc::SYS_tgkill if x.is_some() || y.is_some() => {
                libc::syscall(nr, or(x, a[0]), or(y, a[1]), a[2])
            }
            libc::SYS_kill | libc::SYS_tkill if x.is_some() => libc::syscall(nr, or(x, a[0]), a[1]),
            _ => return Answer::Continue,
        }
    };
    if r == 0 {
        Answer::Value(0)
    } else {
        Answer::Error(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EPERM),
        )
    }
}

#[cfg(test)]
mod tests {
    /// The kernel's release as (major, minor).
    fn release() -> (u32, u32) {
        // SAFETY: uname fills a struct we own.
        let r = unsafe {
            let mut u: libc::utsname = std::mem::zeroed();
            libc::uname(&mut u);
            std::ffi::CStr::from_ptr(u.release.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        let mut it = r.split(|c: char| !c.is_ascii_digit());
        let mut next = || it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
        (next(), next())
    }

    /// The flag is one the kernel knows (6.6 and later take it): a child installs seal's
    /// filter and sets it on its own listener.
    #[test]
    fn a_listener_takes_the_sync_wake_up_flag() {
        // SAFETY: the child makes system calls only and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let listener = seal_abi::supervised::handover::install_filter(false);
            let ok = listener >= 0 && super::sync_wake_up(listener);
            // SAFETY: closes our listener, then ends the child. With the listener open and
            // nobody reading it, the exit itself could wait for ever: with address-space
            // randomisation libc may lie below `IMAGE_IP_LIMIT`, and its `exit_group` is then
            // sent (seen once in CI); closed, a call the filter sends fails instead.
            unsafe {
                if listener >= 0 {
                    libc::close(listener);
                }
                libc::_exit(if ok { 0 } else { 1 })
            };
        }
        let mut status = 0;
        // SAFETY: waits for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        let took = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        if release() >= (6, 6) {
            assert!(took, "kernel {:?} refused the flag", release());
        }
    }
}
