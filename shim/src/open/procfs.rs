//! `/proc` files that show pids and times: `stat` and `status` of a sealed process (by
//! `self`, `thread-self`, its virtual pid, or the real pid a directory listing of `/proc`
//! shows; also `…/task/<tid>/`), and `/proc/uptime`.
//!
//! The kernel's file is read with raw system calls into a stack buffer, rewritten, and the
//! program gets a memfd holding the result (like the sealed host name file):
//!
//! * pid family: `stat` fields 1 (pid or tid), 4 (ppid), 5 (pgrp), 6 (session) and 8 (tpgid)
//!   and the `status` lines `Pid`, `PPid`, `Tgid`, `TracerPid`, `NStgid`, `NSpid`, `NSpgid`,
//!   `NSsid` show virtual pids where the real pid is a process of the run (others stay real,
//!   as `getpgid` answers);
//! * time family: `stat` fields 14-17 (utime, stime, cutime, cstime) are the sealed CPU clock
//!   as `getrusage` reports it (the caller's own process: its logical clock, all user time;
//!   another process of the run: 0, its clock is not published), 22 (starttime) is the
//!   process's sealed start clock on the sealed `CLOCK_BOOTTIME` (another process: the run's
//!   start), and the fault counters 10-13 and guest times 43-44 are 0, as in a sealed
//!   `getrusage`, and so is 39 (the CPU the process last ran on, which the scheduler picks); `/proc/uptime` is a sealed `CLOCK_BOOTTIME` read (one tick), its idle time
//!   the same number.
//!
//! `cmdline` holds no pid: its `/proc/<vpid>` path is translated like any other (`process`).
//! Processes outside the run (a `ps -e` listing) are not rewritten.

use seal_abi::{flags, unsealed, Fid, NO_DETAIL};

use super::{normalise, Outcome};
use crate::clock::{self, Domain};
use crate::core::{census, config, sys, table};
use crate::process::vpid;

/// Which file of a process directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum File {
    Stat,
    Status,
}

pub use seal_abi::proc_text::Who;

/// A `/proc` path we rewrite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcFile {
    Uptime,
    Pid {
        who: Who,
        task: Option<i32>,
        file: File,
    },
}

/// Classifies `path` (no NUL): `None` for anything but our files.
pub fn classify(path: &[u8]) -> Option<ProcFile> {
    if path.len() < 6 || path[0] != b'/' || !matches!(path[1], b'p' | b'/' | b'.') {
        return None;
    }
    let mut norm = [0u8; 48];
    let n = normalise(path, &mut norm)?;
    let p = norm[..n].strip_prefix(b"/proc/")?;
    if p == b"uptime" {
        return Some(ProcFile::Uptime);
    }
    let seal_abi::proc_text::ProcDir { who, task, rest } = seal_abi::proc_text::proc_dir(p)?;
    let file = match rest {
        b"stat" => File::Stat,
        b"status" => File::Status,
        _ => return None,
    };
    Some(ProcFile::Pid { who, task, file })
}

pub use seal_abi::proc_text::{ticks, Times};

/// Rewrites one `stat` line ([`seal_abi::proc_text::rewrite_stat`]). `false` when the line
/// does not parse or `out` overflows.
pub fn rewrite_stat<const N: usize>(
    src: &[u8],
    virt: Option<&dyn Fn(i64) -> i64>,
    times: Option<Times>,
    out: &mut sys::StackBuf<N>,
) -> bool {
    seal_abi::proc_text::rewrite_stat(src, virt, times, out) && out.len < N - 1
}

/// Rewrites `status` ([`seal_abi::proc_text::rewrite_status`]). `false` when `out`
/// overflows.
pub fn rewrite_status<const N: usize>(
    src: &[u8],
    virt: &dyn Fn(i64) -> i64,
    out: &mut sys::StackBuf<N>,
) -> bool {
    seal_abi::proc_text::rewrite_status(src, virt, out);
    out.len < N - 1
}

/// `/proc/uptime` for a boot time of `boot_ns` ([`seal_abi::proc_text::uptime`]).
pub fn uptime_text<const N: usize>(boot_ns: i64, out: &mut sys::StackBuf<N>) {
    seal_abi::proc_text::uptime(boot_ns, out);
}

/// An open of `path` (no NUL) with `oflags`: `Some` when it is one of our files and we
/// answered (or failed), `None` to go on (the `/proc/<vpid>` translation, the real call).
pub fn open(path: &[u8], oflags: i32, ra: u64) -> Option<Outcome> {
    let target = classify(path)?;
    if !config::in_run() {
        return None;
    }
    let pid_sealed = vpid::sealed();
    let time_sealed = config::sealed(flags::TIME);
    match target {
        ProcFile::Uptime => census::count(Fid::ProcUptime, NO_DETAIL, ra),
        ProcFile::Pid { .. } => census::count(Fid::ProcStat, NO_DETAIL, ra),
    }
    let acc = oflags & libc::O_ACCMODE;
    if acc != libc::O_RDONLY || oflags & (libc::O_PATH | libc::O_DIRECTORY) != 0 {
        return None;
    }
    let cloexec = oflags & libc::O_CLOEXEC != 0;
    let mut out = sys::StackBuf::<4608>::new();
    match target {
        ProcFile::Uptime => {
            if !time_sealed {
                return None;
            }
            uptime_text(clock::read(Domain::Monotonic), &mut out);
        }
        ProcFile::Pid { who, task, file } => {
            if !pid_sealed && !time_sealed {
                return None;
            }
            let me = sys::getpid();
            let real = |v: i32| if pid_sealed { vpid::to_real(v) } else { v };
            let mut p = sys::StackBuf::<96>::new();
            let own = match who {
                Who::Process => {
                    p.push(b"/proc/self");
                    true
                }
                Who::Thread => {
                    p.push(b"/proc/thread-self");
                    true
                }
                Who::Pid(n) => {
                    let r = real(n);
                    let member = r == me || table::get().and_then(|t| t.virt(r)).is_some();
                    if !member {
                        return None;
                    }
                    p.push(b"/proc/").push_i64(r as i64);
                    r == me
                }
            };
            if let Some(t) = task {
                p.push(b"/task/").push_i64(real(t) as i64);
            }
            p.push(match file {
                File::Stat => b"/stat",
                File::Status => b"/status",
            });
            let mut src = [0u8; 4096];
            let fd = sys::open(p.as_cstr(), libc::O_RDONLY | libc::O_CLOEXEC, 0);
            if fd < 0 {
                // Gone, or not ours to read: the real open says so with its own errno.
                return None;
            }
            let n = sys::read_all(fd, &mut src);
            sys::close(fd);
            if n == src.len() {
                return Some(too_big(path));
            }
            let virt = |v: i64| vpid::to_virt(v as i32) as i64;
            let ok = match file {
                File::Stat => {
                    let times = time_sealed.then(|| own_times(own));
                    let v: Option<&dyn Fn(i64) -> i64> =
                        if pid_sealed { Some(&virt) } else { None };
                    rewrite_stat(&src[..n], v, times, &mut out)
                }
                File::Status if pid_sealed => rewrite_status(&src[..n], &virt, &mut out),
                File::Status => return None,
            };
            if !ok {
                return Some(too_big(path));
            }
        }
    }
    Some(
        match crate::core::fd::memfd_with(b"seal-proc\0", out.as_bytes(), cloexec) {
            Ok(fd) => Outcome::Fd(fd),
            Err(e) => Outcome::Err(e),
        },
    )
}

/// The sealed times of a process: the caller's own from its clocks (a read: one tick, as
/// `getrusage`), another's as at the run's start with no CPU time.
fn own_times(own: bool) -> Times {
    let base = clock::monotonic_base();
    if !own {
        return Times {
            utime: 0,
            stime: 0,
            start: ticks(base),
        };
    }
    let (user, system) = clock::rusage_times(libc::RUSAGE_SELF, clock::tick_read());
    let started = config::START_CLOCK.load(core::sync::atomic::Ordering::Relaxed);
    Times {
        utime: ticks(user),
        stime: ticks(system),
        start: ticks(base.saturating_add(started)),
    }
}

/// A file we cannot rewrite in our buffers: say so, and let the program have the real one.
#[cold]
fn too_big(path: &[u8]) -> Outcome {
    let mut m = sys::StackBuf::<160>::new();
    m.push(b"cannot seal ")
        .push(&path[..path.len().min(64)])
        .push(b" (does not fit the shim's buffer); its pids and times are real");
    census::record_unsealed(unsealed::UNSUPPORTED_CALL, m.as_bytes());
    sys::warn(m.as_bytes());
    Outcome::PassThrough
}

#[cfg(test)]
mod tests {
    use super::*;

    fn virt(v: i64) -> i64 {
        match v {
            4242 => 1000,
            4240 => 999,
            777 => 1234,
            v => v,
        }
    }

    #[test]
    fn classifies_pid_files_and_uptime() {
        let pid = |who, task, file| Some(ProcFile::Pid { who, task, file });
        assert_eq!(classify(b"/proc/uptime"), Some(ProcFile::Uptime));
        assert_eq!(
            classify(b"/proc/self/stat"),
            pid(Who::Process, None, File::Stat)
        );
        assert_eq!(
            classify(b"//proc/./self//status"),
            pid(Who::Process, None, File::Status)
        );
        assert_eq!(
            classify(b"/proc/thread-self/stat"),
            pid(Who::Thread, None, File::Stat)
        );
        assert_eq!(
            classify(b"/proc/1000/status"),
            pid(Who::Pid(1000), None, File::Status)
        );
        assert_eq!(
            classify(b"/proc/self/task/1001/stat"),
            pid(Who::Process, Some(1001), File::Stat)
        );
        crate::rejects! { classify =>
            "/proc/self/cmdline" "/proc/self/statm" "/proc/self" "/proc/stat" "/proc/0/stat"
            "/proc/01/stat" "/proc/x1/stat" "/proc/thread-self/task/1/stat"
            "/proc/self/task/stat" "/proc/uptime/" "/etc/uptime"
        }
    }

    #[test]
    fn stat_shows_virtual_pids_and_sealed_times() {
        let src = b"4242 (my (odd) cmd) S 4240 4240 4240 34816 4242 4194560 163 9 1 2 \
                    31 7 5 6 20 0 1 0 497979 7770112 578 18446744073709551615 1 2 3 \
                    4 5 6 7 8 9 10 11 12 17 0 0 0 0 8 9 13 14 15 16 17 18 19 0\n";
        let mut out = sys::StackBuf::<1024>::new();
        let t = Times {
            utime: 12,
            stime: 0,
            start: 8_640_003,
        };
        assert!(rewrite_stat(src, Some(&virt), Some(t), &mut out));
        assert_eq!(
            std::str::from_utf8(out.as_bytes()).unwrap(),
            "1000 (my (odd) cmd) S 999 999 999 34816 1000 4194560 0 0 0 0 \
             12 0 0 0 20 0 1 0 8640003 7770112 578 18446744073709551615 1 2 3 \
             4 5 6 7 8 9 10 11 12 17 0 0 0 0 0 0 13 14 15 16 17 18 19 0\n"
        );
        // Pids only (time unsealed), and a terminal-less tpgid of -1.
        let src = b"4242 (sh) R 4240 1 1 0 -1 0 3 0 0 0 31 7 0 0 20 0 1 0 5 6\n";
        let mut out = sys::StackBuf::<1024>::new();
        assert!(rewrite_stat(src, Some(&virt), None, &mut out));
        assert_eq!(
            std::str::from_utf8(out.as_bytes()).unwrap(),
            "1000 (sh) R 999 1 1 0 -1 0 3 0 0 0 31 7 0 0 20 0 1 0 5 6\n"
        );
        // Times only (pids unsealed).
        let mut out = sys::StackBuf::<1024>::new();
        let t = Times {
            utime: 1,
            stime: 2,
            start: 3,
        };
        assert!(rewrite_stat(src, None, Some(t), &mut out));
        assert_eq!(
            std::str::from_utf8(out.as_bytes()).unwrap(),
            "4242 (sh) R 4240 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 3 6\n"
        );
    }

    #[test]
    fn unparsable_or_oversized_stat_is_refused() {
        let mut out = sys::StackBuf::<1024>::new();
        assert!(!rewrite_stat(b"garbage", Some(&virt), None, &mut out));
        let mut small = sys::StackBuf::<16>::new();
        assert!(!rewrite_stat(
            b"4242 (sh) R 4240 1 1 0 -1 0 3 0 0 0 31 7 0 0\n",
            Some(&virt),
            None,
            &mut small
        ));
    }

    #[test]
    fn status_shows_virtual_pids() {
        let src = b"Name:\tsh\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nNgid:\t0\n\
                    Pid:\t4242\nPPid:\t4240\nTracerPid:\t0\nUid:\t0\t0\t0\t0\n\
                    NStgid:\t4242\nNSpid:\t4242\nNSpgid:\t4240\nNSsid:\t17\nVmPeak:\t 4242 kB\n";
        let mut out = sys::StackBuf::<1024>::new();
        assert!(rewrite_status(src, &virt, &mut out));
        assert_eq!(
            std::str::from_utf8(out.as_bytes()).unwrap(),
            "Name:\tsh\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t1000\nNgid:\t0\n\
             Pid:\t1000\nPPid:\t999\nTracerPid:\t0\nUid:\t0\t0\t0\t0\n\
             NStgid:\t1000\nNSpid:\t1000\nNSpgid:\t999\nNSsid:\t17\nVmPeak:\t 4242 kB\n"
        );
    }

    #[test]
    fn uptime_has_two_decimals() {
        let mut out = sys::StackBuf::<64>::new();
        uptime_text(86_400_000_000_000 + 50_123_456, &mut out);
        assert_eq!(out.as_bytes(), b"86400.05 86400.05\n");
        let mut out = sys::StackBuf::<64>::new();
        uptime_text(1_230_000_000, &mut out);
        assert_eq!(out.as_bytes(), b"1.23 1.23\n");
        assert_eq!(ticks(86_400 * 1_000_000_000), 8_640_000);
        assert_eq!(ticks(-5), 0);
    }
}
