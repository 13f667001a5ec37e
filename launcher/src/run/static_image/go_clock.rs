//! A Go image's clock: one per process, shared by all its threads, still under reads, moved
//! only when the image's netpoller wait for its timer heap expires.
//!
//! The Go runtime waits for its next timer (`time.Sleep`, `time.After`, tickers, `context`
//! deadlines, network deadlines) in one place: the thread that blocks in the netpoller,
//! `epoll_pwait` with a timeout in milliseconds (one thread at a time). The filter sends that
//! call here when its timeout is positive; it is held (the thread stays blocked in the kernel,
//! waiting for the answer) until either
//! - the epoll instance has an event (a pipe, a socket, the runtime's own wake-up eventfd): the
//!   call then runs as it is and returns the events at once, and the clock stays; or
//! - every thread of the image sleeps (seen twice in `/proc`, with the same context-switch
//!   counts: no thread ran in between), and under `--warp` at once, else once the wait's real
//!   length has passed too: the clock moves by the wait's length and the call returns 0 (no
//!   events). Waiting for the whole image to be idle is what makes the moment the clock moves
//!   independent of how the OS schedules the runtime's threads.
//!
//! An image that never goes idle (a goroutine spinning on the CPU) would keep a timer from
//! firing: the wait is released anyway [`STUCK`] after its real deadline, and the clock moves
//! then (the one place the real schedule shows; limits.md).

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often the image is looked at while a wait is held and it is not yet idle.
pub const CHECK: Duration = Duration::from_micros(500);
/// How long past its real deadline a held wait waits for the image to go idle.
pub const STUCK: Duration = Duration::from_millis(200);
/// Clock reads by one thread, with the clock standing still, after which its reads tick (a
/// goroutine spinning on `time.Now()` still reaches its end).
pub const SPIN_READS: u32 = 1_000;

/// A held timed wait.
pub struct Held {
    pub id: u64,
    pub tid: i32,
    pub tgid: i32,
    /// Its length (ns).
    pub len_ns: i64,
    /// When it would have expired in real time.
    pub deadline: Instant,
    /// The supervisor's copy of the image's epoll descriptor (-1: none could be taken).
    pub fd: i32,
}

/// The held waits, and the epoll descriptors taken from the images.
#[derive(Default)]
pub struct Waits {
    pub held: Vec<Held>,
    /// (process, its descriptor) → the supervisor's copy.
    copies: HashMap<(i32, i32), i32>,
    /// Clock reads per thread since its process's clock last moved.
    reads: HashMap<i32, u32>,
}

impl Waits {
    /// The supervisor's copy of descriptor `fd` of process `tgid` (`pidfd_getfd`), or -1.
    pub fn copy_of(&mut self, tgid: i32, fd: i32) -> i32 {
        if let Some(&c) = self.copies.get(&(tgid, fd)) {
            return c;
        }
        // SAFETY: pidfd_open and pidfd_getfd with integer arguments; close of our pidfd.
        let c = unsafe {
            let pidfd = libc::syscall(libc::SYS_pidfd_open, tgid, 0) as i32;
            if pidfd < 0 {
                return -1;
            }
            let c = libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) as i32;
            libc::close(pidfd);
            c
        };
        if c >= 0 {
            self.copies.insert((tgid, fd), c);
        }
        c
    }

    /// Closes the copies of process `tgid`'s descriptors (it exec'd: its numbers now name
    /// other files, or nothing).
    pub fn forget(&mut self, tgid: i32) {
        self.copies.retain(|&(g, _), c| {
            if g == tgid {
                // SAFETY: our own copy, not used again.
                unsafe { libc::close(*c) };
            }
            g != tgid
        });
    }

    /// Holds a wait; a wait the same thread left (interrupted by a signal, the kernel then
    /// cancels its notification and the call is made again) is dropped.
    pub fn hold(&mut self, h: Held) {
        self.held.retain(|o| o.tid != h.tid);
        self.held.push(h);
    }

    /// Counts a clock read by thread `tid`: true when it is past [`SPIN_READS`] (it ticks).
    pub fn spinning(&mut self, tid: i32) -> bool {
        let n = self.reads.entry(tid).or_insert(0);
        *n = n.saturating_add(1);
        *n > SPIN_READS
    }

    /// Process `tgid`'s clock moved: its threads' read counts start again.
    pub fn moved(&mut self, threads: &[i32]) {
        for t in threads {
            self.reads.remove(t);
        }
    }

    /// How long the supervisor may sleep before it must look at the held waits again.
    pub fn timeout(&self, warp: bool) -> Option<Duration> {
        let now = Instant::now();
        self.held
            .iter()
            .map(|h| {
                if warp || now >= h.deadline {
                    CHECK
                } else {
                    (h.deadline - now).max(CHECK)
                }
            })
            .min()
    }
}

/// One thread's state as `/proc` shows it: sleeping, and its context switches so far.
fn thread_state(tgid: i32, tid: &str) -> Option<(bool, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/status")).ok()?;
    let mut sleeping = false;
    let mut switches = 0u64;
    for l in s.lines() {
        if let Some(v) = l.strip_prefix("State:") {
            sleeping = v.trim_start().starts_with('S');
        } else if let Some(v) = l
            .strip_prefix("voluntary_ctxt_switches:")
            .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
        {
            switches += v.trim().parse::<u64>().unwrap_or(0);
        }
    }
    Some((sleeping, switches))
}

/// The threads of process `tgid`, each with its state (`None`: one could not be read).
fn threads(tgid: i32) -> Option<Vec<(String, bool, u64)>> {
    let dir = std::fs::read_dir(format!("/proc/{tgid}/task")).ok()?;
    let mut out = Vec::new();
    for e in dir {
        let name = e.ok()?.file_name().into_string().ok()?;
        let (s, n) = thread_state(tgid, &name)?;
        out.push((name, s, n));
    }
    out.sort();
    Some(out)
}

/// Is every thread of process `tgid` asleep, and did none run between two looks?
pub fn idle(tgid: i32) -> bool {
    let Some(a) = threads(tgid) else {
        return false;
    };
    if !a.iter().all(|t| t.1) {
        return false;
    }
    threads(tgid).is_some_and(|b| a == b)
}

/// The thread ids of process `tgid`.
pub fn thread_ids(tgid: i32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{tgid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Is descriptor `fd` readable (an event on the supervisor's copy of an epoll descriptor, a
/// notification on the listener)?
pub fn ready(fd: i32) -> bool {
    if fd < 0 {
        return false;
    }
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd we own, no waiting.
    unsafe { libc::poll(&mut p, 1, 0) > 0 && p.revents & libc::POLLIN != 0 }
}
