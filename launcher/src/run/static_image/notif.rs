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

/// What to answer one call.
pub enum Answer {
    /// Run it as it is.
    Continue,
    Value(i64),
    Error(i32),
    /// Held: answered later (`Supervisor::release`).
    Held,
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
    }
    // SAFETY: a seccomp_notif_resp we own; an id that is no longer valid fails harmlessly.
    unsafe { libc::ioctl(listener, NOTIF_SEND, &mut resp) == 0 }
}

/// A signal the exec'd process sends naming its own virtual pid `vpid` (a Go runtime's
/// `tgkill(getpid(), tid, SIGURG)` preemption, `raise`): sent by the supervisor to the real
/// ids (`pid`). Any other target runs as it is.
pub fn signal(vpid: i32, pid: i32, nr: i64, a: [u64; 6]) -> Answer {
    let real = |v: u64| {
        if v as i32 == vpid {
            pid as i64
        } else {
            v as i32 as i64
        }
    };
    let (x, y) = (a[0] as i32 == vpid, a[1] as i32 == vpid);
    // SAFETY: kill, tkill and tgkill with integer arguments.
    let r = unsafe {
        match nr {
            libc::SYS_tgkill if x || y => libc::syscall(nr, real(a[0]), real(a[1]), a[2]),
            libc::SYS_kill | libc::SYS_tkill if x => libc::syscall(nr, real(a[0]), a[1]),
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
