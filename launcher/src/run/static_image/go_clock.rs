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
//! Idle means the image's live descendants too: every thread of each is blocked (asleep, not
//! in a call that ends by itself after a time: `nanosleep`, a timed `epoll_wait`, a Go
//! child's own held wait), none ran between the two looks. A Go program that waits for a child (`os/exec`,
//! the `go` command waiting for its compilers and the test binary) sleeps while the child
//! works; counted idle, its timers expired in real time during the child's run, so its clock
//! (and that of the child it started next) moved by how long the child really ran. The child's
//! end wakes it through the kernel (its `wait4` thread, a pipe), not through a timer.
//!
//! An image that never goes idle (a goroutine spinning on the CPU) would keep a timer from
//! firing: the wait is released anyway [`STUCK`] after its real deadline, and the clock moves
//! then (the one place the real schedule shows; limits.md). One that is idle while a
//! descendant computes or sleeps gets it [`TREE_STUCK`] after its real deadline (a child that
//! spins for ever under a `context` deadline is still killed; one blocked for ever, on a pipe
//! or in `select {}`, is killed at the deadline).

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often the image is looked at while a wait is held and it is not yet idle.
pub const CHECK: Duration = Duration::from_micros(500);
/// How long past its real deadline a held wait waits for the image to go idle.
pub const STUCK: Duration = Duration::from_millis(200);
/// How long past its real deadline a held wait waits while the image is idle but one of its
/// descendants runs or waits for a time to pass: a child computing or sleeping for longer
/// than this past the parent's timer moves the parent's clock at a moment its speed decides.
pub const TREE_STUCK: Duration = Duration::from_secs(10);
/// How often the image is looked at again while one of its descendants runs.
pub const TREE_CHECK: Duration = Duration::from_millis(5);
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
    /// Not looked at again before this (a descendant was running).
    pub next: Instant,
    /// The process's live descendants at the last look.
    pub kids: Vec<i32>,
    /// Since when the process has been seen running with no live descendant (looks since the
    /// deadline).
    pub busy_since: Option<Instant>,
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
        use std::os::fd::IntoRawFd;
        let c = super::remote::copy_fd(tgid, fd).map_or(-1, IntoRawFd::into_raw_fd);
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

    /// Forgets the clock read counts of the threads `live` says have gone (a thread given a
    /// gone one's id starts from none).
    pub fn keep_threads(&mut self, live: impl Fn(i32) -> bool) {
        self.reads.retain(|&t, _| live(t));
    }

    /// The processes whose descriptors the supervisor holds copies of.
    pub fn copied(&self) -> impl Iterator<Item = i32> + '_ {
        self.copies.keys().map(|&(g, _)| g)
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
                let at = if warp { h.next } else { h.deadline.max(h.next) };
                if now >= at {
                    CHECK
                } else {
                    (at - now).max(CHECK)
                }
            })
            .min()
    }
}

/// One thread's state as `/proc` shows it: its state letter (`S` sleeping, `T` stopped by a
/// signal, `Z` a zombie; `R`, `D` and `t`, a tracing stop while the supervisor sets an exec up,
/// run), and its context switches so far.
fn thread_state(tgid: i32, tid: &str) -> Option<(u8, u64)> {
    let s = super::remote::read_proc_text(&format!("/proc/{tgid}/task/{tid}/status"))?;
    let mut state = b'?';
    let mut switches = 0u64;
    for l in s.lines() {
        if let Some(v) = l.strip_prefix("State:") {
            state = v.trim_start().as_bytes().first().copied().unwrap_or(b'?');
        } else if let Some(v) = l
            .strip_prefix("voluntary_ctxt_switches:")
            .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
        {
            switches += v.trim().parse::<u64>().unwrap_or(0);
        }
    }
    Some((state, switches))
}

/// Can a thread in `state` not run by itself: asleep, stopped by a signal, or a zombie?
fn asleep(state: u8) -> bool {
    matches!(state, b'S' | b'T' | b'Z')
}

/// Does the sleeping thread `tid` of process `tgid` go on by itself: does it wait for a
/// supervisor's answer, is it outside any system call (or did it run as the kernel looked),
/// or does it wait for a time to pass: a `nanosleep` or `clock_nanosleep` of more than
/// [`NAP`], or an `epoll_wait`, `poll`, `ppoll` or `select` with a timeout (a Go image's held
/// timer wait, sealed or in a run of its own)?
fn timed(tgid: i32, tid: &str) -> bool {
    // Waiting for a supervisor's answer (an `execve` being followed, any served call, a held
    // wait): the answer comes without the parent (a static child waiting on its `execve`
    // looked blocked, and its parent's timer expired, 1 run in 10).
    let wchan = std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/wchan"));
    if wchan.is_ok_and(|w| w.starts_with("seccomp_do_user_notification")) {
        return true;
    }
    // Unreadable: the thread ran as the kernel looked (it answers `EAGAIN` then), or is gone.
    let Ok(s) = std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/syscall")) else {
        return true;
    };
    let mut f = s.split_whitespace();
    let nr = f.next().and_then(|n| n.parse::<i64>().ok());
    let args: Vec<u64> = f
        .take(6)
        .filter_map(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
        .collect();
    let arg = |i: usize| args.get(i).copied().unwrap_or(0);
    match nr {
        // Asleep outside any system call: on its way out (a child that has finished sleeps in
        // its exit for a moment before its parent can see it end), or in a fault.
        Some(-1) => true,
        Some(libc::SYS_nanosleep) => longer_than_nap(tgid, arg(0)),
        // An absolute deadline (`TIMER_ABSTIME`) is taken as a long sleep.
        Some(libc::SYS_clock_nanosleep) => arg(1) & 1 != 0 || longer_than_nap(tgid, arg(2)),
        Some(libc::SYS_epoll_wait | libc::SYS_epoll_pwait) => (arg(3) as i32) > 0,
        Some(libc::SYS_poll) => (arg(2) as i32) > 0,
        Some(libc::SYS_epoll_pwait2) => arg(3) != 0,
        // A limit given (a dynamic child's libseal waits, with one, for its supervisor's answer
        // as it starts: counted blocked, the parent's timer expired meanwhile).
        Some(libc::SYS_ppoll) => arg(2) != 0,
        Some(libc::SYS_select | libc::SYS_pselect6) => arg(4) != 0,
        _ => false,
    }
}

/// Sleeps this short do not count as waiting for a time: a Go runtime's `sysmon` naps up to
/// 10 ms at a time for as long as a thread is in a blocking system call (its clock stands
/// still, so it never sees the call as long enough to take the thread's processor back), and
/// a child blocked on a pipe must not keep its parent's deadline from expiring.
const NAP: Duration = Duration::from_millis(10);

/// Is the `timespec` at `at` in process `tgid` longer than [`NAP`] (unreadable: no)?
fn longer_than_nap(tgid: i32, at: u64) -> bool {
    use std::os::unix::fs::FileExt;
    let mut b = [0u8; 16];
    let Ok(mem) = std::fs::File::open(format!("/proc/{tgid}/mem")) else {
        return false;
    };
    if at == 0 || mem.read_exact_at(&mut b, at).is_err() {
        return false;
    }
    let sec = i64::from_le_bytes(b[..8].try_into().unwrap_or_default());
    let nsec = i64::from_le_bytes(b[8..].try_into().unwrap_or_default());
    sec > 0 || nsec > NAP.as_nanos() as i64
}

/// One look at a process's threads: each one's name, its state letter, its switches.
type Look = Vec<(String, u8, u64)>;

/// A look at a process's threads.
enum Threads {
    /// The process is gone (its thread list cannot be read).
    Gone,
    /// A thread listed was gone when its status was read: it ran during the look (a child
    /// in its `exit_group`, whose other threads end one by one, looked gone altogether and
    /// so blocking nothing, and its parent's timer expired, 1 run in 100 under load).
    Moving,
    Seen(Look),
}

/// The threads of process `tgid`, each with its state.
fn threads(tgid: i32) -> Threads {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{tgid}/task")) else {
        return Threads::Gone;
    };
    let mut out = Vec::new();
    for e in dir {
        let Some(name) = e.ok().and_then(|e| e.file_name().into_string().ok()) else {
            return Threads::Moving;
        };
        let Some((s, n)) = thread_state(tgid, &name) else {
            return Threads::Moving;
        };
        out.push((name, s, n));
    }
    out.sort();
    Threads::Seen(out)
}

/// A descendant's look: `Some(None)` when it is gone, `None` when one of its threads runs, is
/// on its way out (a zombie: its end wakes its parent) or waits for a time to pass.
fn blocked(tgid: i32) -> Option<Option<Look>> {
    let look = match threads(tgid) {
        Threads::Gone => return Some(None),
        Threads::Moving => return None,
        Threads::Seen(look) => look,
    };
    if look
        .iter()
        .all(|t| matches!(t.1, b'S' | b'T') && !timed(tgid, &t.0))
    {
        Some(Some(look))
    } else {
        None
    }
}

/// The live descendants of process `tgid` (children of each of its threads, theirs in turn),
/// in the order found.
pub fn descendants(tgid: i32) -> Vec<i32> {
    let mut out: Vec<i32> = Vec::new();
    let mut i = 0;
    let mut next = Some(tgid);
    while let Some(p) = next {
        if let Ok(dir) = std::fs::read_dir(format!("/proc/{p}/task")) {
            for e in dir.flatten() {
                let path = e.path().join("children");
                let Ok(list) = std::fs::read_to_string(path) else {
                    continue;
                };
                for c in list.split_whitespace().filter_map(|c| c.parse().ok()) {
                    if c != tgid && !out.contains(&c) {
                        out.push(c);
                    }
                }
            }
        }
        next = out.get(i).copied();
        i += 1;
    }
    out
}

/// What keeps a held wait of process `tgid` from expiring.
#[derive(Debug, PartialEq, Eq)]
pub enum Idle {
    /// Every thread of the process sleeps, none ran in between, and every live descendant is
    /// blocked: none runs or waits for a time to pass.
    Yes,
    /// A thread of the process itself runs.
    Busy,
    /// The process sleeps, a descendant runs (a child computing, or being set up) or waits
    /// for a time to pass (a sleep, a timer of its own): it goes on by itself.
    Descendant,
}

/// Is every thread of process `tgid` asleep, did none run between two looks, and is every
/// live descendant blocked (not running nor waiting for a time, none ran meanwhile)? A
/// descendant that has gone meanwhile does not count.
pub fn idle(tgid: i32, kids: &[i32]) -> Idle {
    let Threads::Seen(a) = threads(tgid) else {
        return Idle::Busy;
    };
    if !a.iter().all(|t| asleep(t.1)) {
        return Idle::Busy;
    }
    let mut first = Vec::with_capacity(kids.len());
    for &k in kids {
        let Some(look) = blocked(k) else {
            return Idle::Descendant;
        };
        first.push(look);
    }
    if !matches!(threads(tgid), Threads::Seen(b) if a == b) {
        return Idle::Busy;
    }
    // A descendant that ran between the looks, or was born meanwhile, runs.
    let same = kids
        .iter()
        .zip(&first)
        .all(|(&k, l)| match (l, threads(k)) {
            (Some(a), Threads::Seen(b)) => *a == b,
            (Some(_), Threads::Moving) => false,
            _ => true,
        });
    if !same || descendants(tgid) != *kids {
        return Idle::Descendant;
    }
    Idle::Yes
}

/// Has held wait `h` expired? Under `--warp` once its process (and every live descendant) is
/// idle, else once its real deadline has passed too, and no thread waits for an answer on
/// `listener` (a thread waiting for its clock read sleeps too). Late anyway: once the process
/// has run with no live descendant for [`STUCK`] past its deadline, or [`TREE_STUCK`] past it
/// while it has one and either runs (looked at every [`TREE_CHECK`] meanwhile).
pub fn expired(h: &mut Held, now: Instant, warp: bool, listener: i32) -> bool {
    if now < h.next || !(warp || now >= h.deadline) {
        return false;
    }
    let kids = descendants(h.tgid);
    // A child that has just ended (reaped, or on its way out) wakes its parent: the parent's
    // threads may still look asleep for a moment. Idle counts once the descendants seen are
    // the same as at the previous look, [`TREE_CHECK`] before (a cgo parent's timer expired
    // in 1 run of 6 between its child's end and its own wake-up).
    let settled = kids == h.kids;
    h.kids = kids;
    let state = idle(h.tgid, &h.kids);
    // The 200 ms a running process is given count from when it was first seen running alone:
    // counted from the deadline, a parent that had waited that long for its child got its
    // timer the moment the child ended, before it printed what followed (1 run in 10).
    let busy = state == Idle::Busy && h.kids.is_empty();
    let since = *h.busy_since.get_or_insert(now);
    if !busy {
        h.busy_since = None;
    }
    match state {
        Idle::Yes if !settled => {
            h.next = now + TREE_CHECK;
            false
        }
        Idle::Yes => !ready(listener) || now >= h.deadline + TREE_STUCK,
        // A process that runs beside its children waits for them as one that sleeps does.
        Idle::Busy if busy => {
            h.next = now + CHECK;
            now >= since + STUCK
        }
        Idle::Busy | Idle::Descendant => {
            h.next = now + TREE_CHECK;
            now >= h.deadline + TREE_STUCK
        }
    }
}

/// A Go image's timed futex wait held by the supervisor (`serve/futexes.rs`).
pub struct HeldFutex {
    pub id: u64,
    pub tid: i32,
    pub tgid: i32,
    /// The futex word's address, and the value the call waits while it holds.
    pub addr: u64,
    pub val: u32,
    pub deadline: Instant,
    pub len_ns: i64,
}

/// The threads of process `tgid` other than `tid` that run (or wait for a processor).
pub fn others_running(tgid: i32, tid: i32) -> Vec<i32> {
    thread_ids(tgid)
        .into_iter()
        .filter(|&t| t != tid)
        .filter(|&t| thread_state(tgid, &t.to_string()).is_some_and(|(s, _)| !asleep(s)))
        .collect()
}

/// The processor time, in ns, process `tgid` has run so far (its CPU clock, which counts a
/// running thread's time up to now: `/proc/…/schedstat` moves only at the scheduler's tick);
/// 0 when it cannot be read.
pub fn process_cpu_ns(tgid: i32) -> u64 {
    let mut clk: libc::clockid_t = 0;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: out-parameters we own.
    let ok = unsafe {
        libc::clock_getcpuclockid(tgid, &mut clk) == 0 && libc::clock_gettime(clk, &mut ts) == 0
    };
    match ok {
        true => (ts.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec as u64),
        false => 0,
    }
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
