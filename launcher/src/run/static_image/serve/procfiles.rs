//! A static image's opens of `/proc/<pid>/…` (`serve/opens.rs` sends them here), sealed as
//! libseal's `open/procfs.rs` seals a dynamic program's:
//!
//! * `stat` and `status` of a process of the run (by `self`, `thread-self`, its virtual pid,
//!   the real pid a listing of `/proc` shows, or `…/task/<tid>/`): the kernel's file of the real pid, read here and rewritten by
//!   [`seal_abi::proc_text`] (the functions libseal uses) into a memfd: virtual pids, and the
//!   sealed times as the supervisor knows them (the caller's own process: its CPU clock as
//!   user time, its start on the sealed boot-time clock; another: no CPU time, started at the
//!   run's start, as libseal shows another process);
//! * any other file of a virtual pid (`/proc/1000/cmdline`, `/proc/1000/fd/`): the real pid's,
//!   opened here with the caller's flags and installed as the call's result, as libseal
//!   rewrites the path.
//!
//! The caller's `/proc/self` is not the supervisor's: every path is opened by the real pid.

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::{FromRawFd, OwnedFd};

use seal_abi::proc_text::{self, ticks, Times};
use seal_abi::{flags, Fid, NO_DETAIL};

use super::sealed_text::{memfd_with, Text};
use super::{Answer, Supervisor, MONO_BASE_NS};

pub(super) use seal_abi::proc_text::Who;

/// A path under `/proc/<who>/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ProcPath {
    pub(super) who: Who,
    pub(super) task: Option<i32>,
    /// What follows the process (and task) directory, no leading slash (may be empty).
    pub(super) rest: Vec<u8>,
}

impl ProcPath {
    /// `stat` or `status` (true for `status`), the files whose pids and times are rewritten.
    fn rewritten(&self) -> Option<bool> {
        match &self.rest[..] {
            b"stat" => Some(false),
            b"status" => Some(true),
            _ => None,
        }
    }
}

/// `norm` (collapsed, absolute) as a path under a process directory of `/proc`.
pub(super) fn classify(norm: &[u8]) -> Option<ProcPath> {
    let p = norm.strip_prefix(b"/proc/")?;
    let seal_abi::proc_text::ProcDir { who, task, rest } = seal_abi::proc_text::proc_dir(p)?;
    let path = ProcPath {
        who,
        task,
        rest: rest.to_vec(),
    };
    // `self` and `thread-self` name the caller already: only their pid files are ours.
    match (who, path.rewritten()) {
        (Who::Pid(_), _) | (_, Some(_)) => Some(path),
        _ => None,
    }
}

impl Supervisor {
    /// An open of `path` by thread `tid` of process `tgid`, read-only (`oflags`).
    pub(super) fn proc_open(
        &mut self,
        tid: i32,
        tgid: i32,
        path: &ProcPath,
        oflags: i32,
        ip: u64,
    ) -> Answer {
        let pid_sealed = self.world.sealed(flags::PID);
        let time_sealed = self.world.sealed(flags::TIME);
        let rewritten = path.rewritten();
        let times_only = time_sealed && rewritten == Some(false);
        if !pid_sealed && !times_only {
            return Answer::Continue;
        }
        let real = |s: &mut Self, v: i32| match pid_sealed {
            true => s.real(v),
            false => Some(v),
        };
        let (target, mut dir) = match path.who {
            Who::Process => (tgid, format!("/proc/{tgid}")),
            Who::Thread => (tgid, format!("/proc/{tgid}/task/{tid}")),
            Who::Pid(v) => match real(self, v) {
                Some(r) => (r, format!("/proc/{r}")),
                // The real pid of one of the run's, as a listing of `/proc` shows it (`ps`):
                // its pid files rewritten, as libseal rewrites them.
                None if pid_sealed && rewritten.is_some() && self.virt(v) != v => {
                    (v, format!("/proc/{v}"))
                }
                // Not one of the run's: the path as it is, as libseal leaves it.
                None => return Answer::Continue,
            },
        };
        if let Some(t) = path.task {
            let Some(rt) = real(self, t) else {
                return Answer::Continue;
            };
            dir = format!("{dir}/task/{rt}");
        }
        let Some(status) = rewritten else {
            return open_real(
                &format!("{dir}/{}", String::from_utf8_lossy(&path.rest)),
                oflags,
            );
        };
        let ip = self.census_ip(tgid, ip);
        if let Some(slot) = self.slot(tgid) {
            slot.count(Fid::ProcStat, NO_DETAIL, ip);
        }
        let file = format!("{dir}/{}", if status { "status" } else { "stat" });
        let src = match std::fs::read(&file) {
            Ok(s) => s,
            // Gone, or not ours to read: the real open says so with its own errno.
            Err(_) => return Answer::Continue,
        };
        let own = target == tgid;
        let times = (time_sealed && !status).then(|| self.stat_times(tid, tgid, own));
        let virt = match pid_sealed {
            true => Some(self.virt_map(&src, status, target, own)),
            false => None,
        };
        let lookup = |v: i64| virt.as_ref().and_then(|m| m.get(&v).copied()).unwrap_or(v);
        let mut out = Text::default();
        let ok = match status {
            true => {
                proc_text::rewrite_status(&src, &lookup, &mut out);
                true
            }
            false => {
                let f: Option<&dyn Fn(i64) -> i64> = virt.as_ref().map(|_| &lookup as _);
                proc_text::rewrite_stat(&src, f, times, &mut out)
            }
        };
        if !ok {
            return Answer::Continue;
        }
        match memfd_with(c"seal-proc", &out.0) {
            Some(fd) => Answer::Fd(fd, oflags & libc::O_CLOEXEC != 0),
            None => Answer::Error(libc::ENFILE),
        }
    }

    /// The virtual pid of each number a pid field of `src` holds, for process `target`'s file:
    /// its real parent shows the parent it was given, as `getppid` answers.
    fn virt_map(&mut self, src: &[u8], status: bool, target: i32, own: bool) -> HashMap<i64, i64> {
        let seen = RefCell::new(Vec::new());
        let note = |v: i64| {
            seen.borrow_mut().push(v);
            v
        };
        let mut sink = Text::default();
        match status {
            true => proc_text::rewrite_status(src, &note, &mut sink),
            false => {
                proc_text::rewrite_stat(src, Some(&note), None, &mut sink);
            }
        }
        let ident = match own || self.pids.idents.contains_key(&target) {
            true => Some(self.ident(target)),
            false => None,
        };
        let mut map = HashMap::new();
        for v in seen.into_inner() {
            let r = v as i32;
            let to = match ident {
                Some(i) if r == i.real_parent => i.ppid,
                Some(i) if r == target => i.vpid,
                _ if r <= 0 => r,
                _ => self.virt(r),
            };
            map.insert(v, to as i64);
        }
        map
    }

    /// The sealed times of a `stat` line, as libseal computes them: the caller's own process
    /// its CPU clock (a read) and its start; another no CPU time, started at the run's start.
    fn stat_times(&mut self, tid: i32, tgid: i32, own: bool) -> Times {
        if !own {
            return Times {
                utime: 0,
                stime: 0,
                start: ticks(MONO_BASE_NS),
            };
        }
        self.ensure(tgid);
        let cpu = self
            .clock(tid, tgid, libc::CLOCK_PROCESS_CPUTIME_ID)
            .unwrap_or(0);
        let start = self.procs.get(&tgid).map_or(0, |p| p.start);
        Times {
            utime: ticks(cpu),
            stime: 0,
            start: ticks(MONO_BASE_NS.saturating_add(start)),
        }
    }
}

/// The real file `path` opened with the caller's `oflags` (its descriptor to install), or the
/// kernel's error.
fn open_real(path: &str, oflags: i32) -> Answer {
    let Ok(c) = std::ffi::CString::new(path) else {
        return Answer::Continue;
    };
    // SAFETY: a NUL-terminated path; a new descriptor we own. The caller's flags are a
    // read-only open's (checked by the caller); `O_CLOEXEC` here keeps it out of our children.
    let fd = unsafe { libc::open(c.as_ptr(), oflags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Answer::Error(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        );
    }
    // SAFETY: a descriptor just made, owned from here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    Answer::Fd(fd, oflags & libc::O_CLOEXEC != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_paths_are_told_as_libseal_tells_them() {
        let p = |who, task, rest: &[u8]| {
            Some(ProcPath {
                who,
                task,
                rest: rest.to_vec(),
            })
        };
        assert_eq!(classify(b"/proc/self/stat"), p(Who::Process, None, b"stat"));
        assert_eq!(
            classify(b"/proc/thread-self/status"),
            p(Who::Thread, None, b"status")
        );
        assert_eq!(
            classify(b"/proc/1000/task/1001/stat"),
            p(Who::Pid(1000), Some(1001), b"stat")
        );
        assert_eq!(
            classify(b"/proc/1000/cmdline"),
            p(Who::Pid(1000), None, b"cmdline")
        );
        assert_eq!(classify(b"/proc/1000"), p(Who::Pid(1000), None, b""));
        assert_eq!(classify(b"/proc/self/cmdline"), None);
        assert_eq!(classify(b"/proc/01/stat"), None);
        assert_eq!(classify(b"/proc/stat"), None);
        assert_eq!(classify(b"/proc/self/task/x/stat"), None);
    }
}
