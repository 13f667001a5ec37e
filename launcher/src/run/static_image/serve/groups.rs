//! Process groups and sessions of a static image's processes: `getpgrp`, `getpgid` and
//! `getsid` answer with the run's virtual pids (a process of the run its virtual pid, the
//! launcher 999, anything outside the run its real pid), as libseal's hooks answer a dynamic
//! program; `setpgid` naming virtual pids has them made real at its entry (traced as a
//! `wait4` is, `trace_call.rs`). The supervisor asks the kernel itself for the group or
//! session of the real process (any process may ask of any other). The terminal's foreground
//! group (`tcgetpgrp`, `tcsetpgrp`: `ioctl`s) is translated too, or a job-control shell, which
//! waits until `tcgetpgrp` equals its `getpgrp`, would wait for ever.

use std::os::unix::fs::MetadataExt;

use seal_abi::supervised::{TIOCGPGRP, TIOCSPGRP};

use super::super::pid_state::Call;
use super::super::remote::{read, write};
use super::super::trace_call;
use super::{Answer, Notif, Supervisor};

impl Supervisor {
    /// A call of [`seal_abi::supervised::GROUP_CALLS`] from process `tgid`'s image.
    pub(super) fn group_call(&mut self, n: &Notif, tgid: i32) -> Answer {
        let a = n.args;
        // Its identity first: a static root's registers the launcher as 999.
        self.ident(tgid);
        // A pid argument: 0 the caller, a virtual pid of the run its real one.
        let real = |s: &mut Self, v: u64| match v as i32 {
            0 => tgid,
            v if v < 0 => v,
            v => s.real(v).unwrap_or(v),
        };
        // SAFETY (both): getpgid and getsid take an integer and touch no memory.
        match n.nr as i64 {
            libc::SYS_getpgrp => self.shown(unsafe { libc::getpgid(tgid) }),
            libc::SYS_getpgid => {
                let p = real(self, a[0]);
                self.shown(unsafe { libc::getpgid(p) })
            }
            libc::SYS_getsid => {
                let p = real(self, a[0]);
                self.shown(unsafe { libc::getsid(p) })
            }
            libc::SYS_setpgid => self.setpgid(n, tgid),
            _ => Answer::Continue,
        }
    }

    /// A pid the kernel gave (or its error) as the image is to see it.
    fn shown(&mut self, r: i32) -> Answer {
        if r < 0 {
            let e = std::io::Error::last_os_error().raw_os_error();
            return Answer::Error(e.unwrap_or(libc::ESRCH));
        }
        Answer::Value(self.virt(r) as i64)
    }

    /// `setpgid(pid, pgid)`: runs as it is unless it names a virtual pid of the run, which
    /// becomes the real one at the call's entry (the supervisor cannot make the call for it:
    /// only the process or its parent may).
    fn setpgid(&mut self, n: &Notif, tgid: i32) -> Answer {
        let a = n.args;
        let mut to_real = |v: u64| {
            let v = v as i32;
            (v > 0).then(|| self.real(v)).flatten().filter(|&r| r != v)
        };
        let (pid, pgid) = (to_real(a[0]), to_real(a[1]));
        if (pid, pgid) == (None, None) || !self.pids.can_trace {
            return Answer::Continue;
        }
        let tid = n.pid as i32;
        match trace_call::seize(tid, n.nr as i64, [a[0], a[1], a[2]]) {
            Ok(traced) => {
                let call = Call {
                    traced,
                    tgid,
                    child: None,
                    target: pid,
                    infop: 0,
                    copy: false,
                    group: pgid,
                };
                self.pids.calls.insert(tid, call);
                // The interrupt cancels the notification: nothing to answer.
                Answer::Held
            }
            Err(_) => {
                self.stays_real(
                    tgid,
                    "setpgid naming a virtual pid runs as it is: ptrace refused",
                );
                Answer::Continue
            }
        }
    }

    /// `ioctl(fd, TIOCGPGRP or TIOCSPGRP, &pgrp)` from process `tgid`'s image. Setting: a
    /// virtual pid in `pgrp` is made the real one in place (glibc's and musl's `tcsetpgrp` pass
    /// their own copy), and the call runs. Getting: the supervisor may not ask the terminal
    /// (it has none), so it reads the process's controlling terminal and its foreground group
    /// from `/proc/PID/stat` and, when `fd` is that terminal, answers the virtual group;
    /// anything else runs as it is.
    pub(super) fn tty_group(&mut self, n: &Notif, tgid: i32) -> Answer {
        let (tid, a) = (n.pid as i32, n.args);
        self.ident(tgid);
        let (fd, at) = (a[0] as i32, a[2]);
        let mut v = 0i32;
        match a[1] as u32 {
            TIOCSPGRP => {
                if read(tid, at, &mut v) {
                    if let Some(r) = self.real(v).filter(|&r| r != v) {
                        write(tid, at, &r.to_le_bytes());
                    }
                }
                Answer::Continue
            }
            TIOCGPGRP => {
                let Some((tty, fg)) = terminal(tgid) else {
                    return Answer::Continue;
                };
                let dev = std::fs::metadata(format!("/proc/{tgid}/fd/{fd}")).map(|m| m.rdev());
                // That terminal by its own name or as `/dev/tty` (5, 0), which a shell opens.
                const DEV_TTY: u64 = 5 << 8;
                if fg <= 0 || !matches!(dev, Ok(d) if d == tty || d == DEV_TTY) {
                    return Answer::Continue;
                }
                let shown = self.virt(fg);
                match write(tid, at, &shown.to_le_bytes()) {
                    true => Answer::Value(0),
                    false => Answer::Error(libc::EFAULT),
                }
            }
            _ => Answer::Continue,
        }
    }
}

/// Process `pid`'s controlling terminal (its device number) and that terminal's foreground
/// process group, from `/proc/PID/stat` (fields 7 and 8, after the command's parenthesis).
fn terminal(pid: i32) -> Option<(u64, i32)> {
    let stat = super::super::remote::read_proc_text(&format!("/proc/{pid}/stat"))?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(4);
    let tty: u64 = f.next()?.parse().ok()?;
    let fg: i32 = f.next()?.parse().ok()?;
    (tty != 0).then_some((tty, fg))
}
