//! `--warp`: time jumps only when nothing in the run can run (docs/waits.md, "`--warp`").
//!
//! Every timed wait under `--warp` registers its logical deadline on the run-wide waiter board
//! ([`seal_abi::WaiterBoard`], in the run table) and asks, at its start and at the end of each
//! real slice it waits (1 ms, doubling up to 20 ms, never past the real deadline): is every
//! thread of every live process of the run blocked, and is my deadline the earliest on the
//! board? If so it returns at once as timed out, `L` moved to its deadline; the next waiter
//! then finds itself earliest, and so on, in deadline order. While anything runs, waits take
//! their real (translated) time: a timeout polled with sleeps no longer expires while a child
//! is still computing.
//!
//! "Blocked" is read from the kernel: a thread in state `S` (or stopped, or a zombie) is
//! blocked; `R`/`D` is running, unless it is a registered waiter between two slices (the
//! shim's bookkeeping, none of the program's work). The processes are the run table's
//! `real_of` (sealed processes, and unsealed children a sealed parent forked: they keep their
//! virtual pid until the run ends); their threads are `/proc/<pid>/task/*/stat`. A check
//! counts only when two scans in a row find the run idle and the board did not change
//! meanwhile: a thread woken during the first scan shows up as running in the second.
//!
//! Everything here is raw system calls on stack buffers and atomics on the shared table:
//! no allocation, no lock, async-signal-safe. The idle check runs at most once per slice.

use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use seal_abi::{WaiterBoard, WaiterSlot, LAUNCHER_VPID, VPID_LIMIT, VPID_MIN, WAITER_SLOTS};

use super::{real_now, Ran, Reached};
use crate::clock;
use crate::core::{sys, table, thread};

/// The first real slice of a wait, and the longest.
const FIRST_SLICE: i64 = 1_000_000;
const MAX_SLICE: i64 = 20_000_000;

crate::thread_cell! {
    /// Waits of this thread in progress (more than one when a signal handler waits).
    static DEPTH: u32 = "seal_tls_warp_depth";
}

/// This thread's registration on the board for one wait.
struct Waiter {
    board: &'static WaiterBoard,
    slot: &'static WaiterSlot,
    tid: i32,
    deadline: i64,
    key: u64,
}

impl Waiter {
    /// Registers a wait until logical `deadline`. `None` without a board (no run table) or
    /// when every slot is taken (then the wait takes its real time; said once).
    fn enter(deadline: i64) -> Option<Waiter> {
        let board = table::waiters()?;
        // Counted before the slot is claimed: a signal handler that waits in between must not
        // take this thread's new slot for a stale one (see `earliest`).
        DEPTH.with(|d| d.set(d.get() + 1));
        let tid = sys::gettid();
        let pid = sys::getpid();
        let start = (seal_abi::mix64(tid as u64) % WAITER_SLOTS as u64) as usize;
        let at = |i: usize| &board.slots[(start + i) % WAITER_SLOTS];
        // Free slots first (no system call), then slots of dead threads.
        let slot = (0..WAITER_SLOTS)
            .map(at)
            .find(|s| s.tid.load(Relaxed) == 0 && claim(s, tid))
            .or_else(|| (0..WAITER_SLOTS).map(at).find(|s| claim(s, tid)));
        let Some(slot) = slot else {
            DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
            board_full();
            return None;
        };
        let key = thread::with(|t| t.lineage);
        slot.pid.store(pid, Relaxed);
        slot.deadline.store(deadline, Relaxed);
        slot.key.store(key, Relaxed);
        slot.phase.store(1, Release);
        board.gen.fetch_add(1, AcqRel);
        Some(Waiter {
            board,
            slot,
            tid,
            deadline,
            key,
        })
    }

    /// Into the real wait (blocked as far as the others can tell by the kernel's state).
    fn waiting(&self) {
        self.slot.phase.store(0, Release);
    }

    /// Back from a slice that timed out: bookkeeping, not the program's work.
    fn between(&self) {
        self.slot.phase.store(1, Release);
    }

    fn leave(self) {
        free(self.board, self.slot, self.tid);
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }

    /// Nothing in the run can run and this deadline is the earliest on the board.
    fn my_turn(&self) -> bool {
        let b = self.board;
        let gen = b.gen.load(Acquire);
        if !self.earliest() {
            return false;
        }
        let Some(t) = table::get() else { return false };
        idle(b, &t, self.tid) && idle(b, &t, self.tid) && b.gen.load(Acquire) == gen
    }

    /// No live waiter on the board has an earlier (deadline, key). Slots of dead threads are
    /// freed on the way (a killed process does not hold the board up), and so are slots of
    /// this very tid that no wait of this thread holds (left by an image that `exec`'d while
    /// its main thread waited).
    fn earliest(&self) -> bool {
        let lone = DEPTH.with(|d| d.get()) == 1;
        let mine = (self.deadline, self.key);
        for s in self.board.slots.iter() {
            let t = s.tid.load(Acquire);
            if t == 0 || core::ptr::eq(s, self.slot) {
                continue;
            }
            if t == self.tid {
                if lone {
                    free(self.board, s, t);
                }
                continue;
            }
            let theirs = (s.deadline.load(Acquire), s.key.load(Acquire));
            if theirs < mine {
                if alive(s.pid.load(Acquire), t) {
                    return false;
                }
                free(self.board, s, t);
            }
        }
        // A timer armed anywhere in the run that expires first: it fires in real time, and
        // jumping past it would let this wait end before it, which it never does unwarped.
        // A timer whose process is gone fires for nobody (`timeout 600 make` that ended): its
        // slot is freed.
        if self.board.timers.iter().all(|t| t.until.load(Acquire) == 0) {
            return true; // no timer armed: no clock read
        }
        let now = super::mono_now();
        self.board.timers.iter().all(|t| {
            let until = t.until.load(Acquire);
            if until == -1 {
                return false;
            }
            if until <= now || t.deadline.load(Acquire) >= self.deadline {
                return true;
            }
            let pid = (t.owner.load(Acquire) >> 32) as i32;
            if pid > 0 && alive(pid, pid) {
                return false;
            }
            let _ = t.until.compare_exchange(until, 0, AcqRel, Relaxed);
            true
        })
    }
}

/// A timer of this process (`id`: the kernel's POSIX timer id, or its `ITIMER_REAL`'s) was
/// armed to expire at logical `deadline`, which is real `CLOCK_MONOTONIC` time `until`;
/// `until` 0: it was disarmed. Waits whose deadlines are later do not warp while it is pending
/// ([`Waiter::earliest`]).
pub fn timer_armed(id: i64, deadline: i64, until: i64) {
    let Some(board) = table::waiters() else {
        return;
    };
    let owner = ((sys::getpid() as u64) << 32) | (id as u64 & 0xffff_ffff);
    let now = super::mono_now();
    // Its own slot (a re-arm or a disarm), else (arming) a free or expired one.
    let take = |s: &seal_abi::TimerSlot| {
        let cur = s.until.load(Acquire);
        cur != -1 && s.until.compare_exchange(cur, -1, AcqRel, Acquire).is_ok()
    };
    let mut slots = board.timers.iter();
    let slot = slots
        .find(|s| s.owner.load(Acquire) == owner && take(s))
        .or_else(|| {
            let expired = |s: &&seal_abi::TimerSlot| {
                let u = s.until.load(Acquire);
                u != -1 && u <= now
            };
            (until > 0)
                .then(|| board.timers.iter().filter(expired).find(|s| take(s)))
                .flatten()
        });
    let Some(s) = slot else { return };
    s.owner.store(if until > 0 { owner } else { 0 }, Release);
    s.deadline.store(deadline, Release);
    s.until.store(until.max(0), Release);
    board.gen.fetch_add(1, AcqRel);
}

/// A timer of this process armed to expire in `ns` of real time from now (`ns` ≤ 0: disarmed),
/// for [`timer_armed`]: its logical deadline is this thread's clock plus `ns`.
pub fn timer_in(id: i64, ns: i64) {
    if ns <= 0 {
        timer_armed(id, 0, 0);
        return;
    }
    let mono = super::mono_now();
    timer_armed(
        id,
        thread::peek().saturating_add(ns),
        mono.saturating_add(ns),
    );
}

/// Takes `s` for `tid` if it is free, or held by a dead thread.
fn claim(s: &WaiterSlot, tid: i32) -> bool {
    let cur = s.tid.load(Acquire);
    if cur != 0 && (cur == tid || alive(s.pid.load(Acquire), cur)) {
        return false;
    }
    s.tid.compare_exchange(cur, tid, AcqRel, Relaxed).is_ok()
}

/// Gives `s` back (if `tid` still holds it).
fn free(b: &WaiterBoard, s: &WaiterSlot, tid: i32) {
    s.deadline.store(i64::MAX, Release);
    s.phase.store(0, Release);
    if s.tid.compare_exchange(tid, 0, AcqRel, Relaxed).is_ok() {
        b.gen.fetch_add(1, AcqRel);
    }
}

/// Thread `tid` of process `pid` exists (`tgkill(pid, tid, 0)`) and is no zombie (a killed
/// process no one has reaped yet waits for nothing).
fn alive(pid: i32, tid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    let r = unsafe { sys::syscall3(libc::SYS_tgkill, pid as i64, tid as i64, 0) };
    if r == -(libc::ESRCH as i64) {
        return false;
    }
    let mut path = sys::StackBuf::<64>::new();
    path.push(b"/proc/")
        .push_u64(pid as u64)
        .push(b"/task/")
        .push_u64(tid as u64)
        .push(b"/stat");
    let mut line = [0u8; 96];
    let got = sys::read_file(path.as_cstr(), &mut line);
    !matches!(stat_state(&line[..got]), Some(b'Z' | b'X'))
}

#[cold]
fn board_full() {
    use core::sync::atomic::AtomicBool;
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Relaxed) {
        sys::warn(b"--warp: more timed waits at once than the waiter board holds; the rest wait their real time");
    }
}

/// Is thread `tid` of process `pid` a waiter in its bookkeeping between two slices?
fn between_slices(b: &WaiterBoard, pid: i32, tid: i32) -> bool {
    b.slots.iter().any(|s| {
        s.tid.load(Acquire) == tid && s.pid.load(Acquire) == pid && s.phase.load(Acquire) == 1
    })
}

/// A kernel task state that means "can run" (`R` running, `D` in uninterruptible sleep, `t`
/// stopped by a tracer for a moment, `W` paging); sleeping, stopped, dead and zombie tasks
/// cannot.
pub fn runs(state: u8) -> bool {
    matches!(state, b'R' | b'D' | b't' | b'W')
}

/// The state letter of a `/proc/<pid>/stat` line (after the last `)` of the command name).
pub fn stat_state(line: &[u8]) -> Option<u8> {
    let close = line.iter().rposition(|&c| c == b')')?;
    line.get(close + 2).copied()
}

/// Every thread of every live process of the run is blocked (the caller `me` excepted).
fn idle(b: &WaiterBoard, t: &table::Table<'_>, me: i32) -> bool {
    for v in VPID_MIN as usize..VPID_LIMIT {
        let (word, bit) = (&b.settled[v / 64], 1u64 << (v % 64));
        if word.load(Relaxed) & bit != 0 {
            continue;
        }
        let real = t.holder(v as i32);
        if real <= 0 || v as i32 == LAUNCHER_VPID {
            continue;
        }
        match scan(b, t, real, me) {
            Scan::Busy => return false,
            Scan::Settled => {
                word.fetch_or(bit, Relaxed);
            }
            Scan::Blocked => {}
        }
    }
    true
}

enum Scan {
    /// A thread can run.
    Busy,
    /// Every thread is blocked.
    Blocked,
    /// Nothing to look at, now or later: the process is gone, or `real` is a thread whose
    /// process has its own entry.
    Settled,
}

/// The threads of the process (or thread) `real`.
fn scan(b: &WaiterBoard, t: &table::Table<'_>, real: i32, me: i32) -> Scan {
    let mut path = sys::StackBuf::<40>::new();
    path.push(b"/proc/").push_u64(real as u64).push(b"/task");
    let dir = sys::open(
        path.as_cstr(),
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        0,
    );
    if dir == -libc::ENOENT || dir == -libc::ESRCH {
        return Scan::Settled;
    }
    if dir < 0 {
        // Unreadable (no /proc, EMFILE): assume it runs rather than fake a timeout.
        return Scan::Busy;
    }
    let out = scan_dir(b, t, dir, real, me);
    sys::close(dir);
    out
}

fn scan_dir(b: &WaiterBoard, t: &table::Table<'_>, dir: i32, real: i32, me: i32) -> Scan {
    let mut buf = [0u8; 1024];
    let mut first = true;
    let mut leader = real;
    loop {
        let n = sys::fill(libc::SYS_getdents64, dir, &mut buf, [0; 3]);
        if n < 0 {
            return Scan::Busy;
        }
        if n == 0 {
            return Scan::Blocked;
        }
        let mut off = 0usize;
        while off + 19 < n as usize {
            let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
            if reclen == 0 {
                return Scan::Busy;
            }
            let name = &buf[off + 19..(off + reclen).min(n as usize)];
            let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
            off += reclen;
            let Some(tid) = sys::parse_u64(name).map(|v| v as i32) else {
                continue; // "." and ".."
            };
            // The first entry is the thread group leader: a thread's own entry of `real_of`
            // is covered by its process's.
            if core::mem::take(&mut first) {
                if tid != real && t.virt(tid).is_some() {
                    return Scan::Settled;
                }
                leader = tid;
            }
            if tid == me {
                continue;
            }
            let mut stat = sys::StackBuf::<32>::new();
            stat.push(name).push(b"/stat");
            let mut line = [0u8; 96];
            let got = read_at(dir, stat.as_cstr(), &mut line);
            // A thread that ended meanwhile is not running.
            let Some(state) = stat_state(&line[..got]) else {
                continue;
            };
            if runs(state) && !between_slices(b, leader, tid) {
                return Scan::Busy;
            }
        }
    }
}

/// Reads up to `buf.len()` bytes of `path` relative to `dir`.
fn read_at(dir: i32, path: &[u8], buf: &mut [u8]) -> usize {
    // SAFETY: path is NUL-terminated.
    let fd = unsafe {
        sys::syscall6(
            libc::SYS_openat,
            dir as i64,
            path.as_ptr() as i64,
            (libc::O_RDONLY | libc::O_CLOEXEC) as i64,
            0,
            0,
            0,
        )
    } as i32;
    if fd < 0 {
        return 0;
    }
    let got = sys::read_all(fd, buf);
    sys::close(fd);
    got
}

/// An absolute wait under `--warp` until logical `target` (real deadline `real_dl` on `clk`).
/// `sliceable`: the real function can be called again with a later deadline without losing
/// anything (sleeps, semaphores, locks, joins, futexes); else (condvars) it waits once, to its
/// real deadline, and can only warp at its start. Returns the error number of the last call.
pub fn absolute(
    target: i64,
    clk: libc::clockid_t,
    real_dl: i64,
    reached: Reached,
    sliceable: bool,
    call: &mut impl FnMut(*const libc::timespec) -> i32,
) -> i32 {
    let Some(w) = Waiter::enter(target) else {
        return call(&clock::to_timespec(real_dl));
    };
    // The result of a slice that ran to its end.
    let ran_out = match reached {
        Reached::OnSuccess => 0,
        Reached::OnTimedout => libc::ETIMEDOUT,
    };
    let mut slice = FIRST_SLICE;
    let err = loop {
        if w.my_turn() {
            break call(&clock::to_timespec(real_now(clk)));
        }
        let end = if sliceable {
            real_now(clk).saturating_add(slice).min(real_dl)
        } else {
            real_dl
        };
        w.waiting();
        let e = call(&clock::to_timespec(end));
        if e != ran_out || end >= real_dl {
            break e;
        }
        w.between();
        slice = (slice * 2).min(MAX_SLICE);
    };
    w.leave();
    err
}

/// A relative wait of logical `ns` under `--warp`. `sliceable`: `slice(real_ns)` waits at most
/// that long and can be repeated (0: don't wait); else `call` is the whole real wait, and the
/// wait only registers its deadline (the others do not jump past it). A slice that is
/// interrupted reports the logical time of the whole wait so far, or `None`.
pub fn relative<R>(
    ns: i64,
    sliceable: bool,
    mut slice: impl FnMut(i64) -> (R, Ran),
    call: impl FnOnce() -> (R, Ran),
) -> (R, Ran) {
    let Some(w) = Waiter::enter(thread::peek().saturating_add(ns)) else {
        return call();
    };
    if !sliceable {
        w.waiting();
        let out = call();
        w.leave();
        return out;
    }
    let end = super::mono_now().saturating_add(clock::real_span(ns));
    let mut len = FIRST_SLICE;
    let out = loop {
        if w.my_turn() {
            break slice(0);
        }
        let left = end.saturating_sub(super::mono_now());
        let s = len.min(left).max(1);
        w.waiting();
        let (r, ran) = slice(s);
        if ran != Ran::Full || s >= left {
            break (r, ran);
        }
        w.between();
        len = (len * 2).min(MAX_SLICE);
    };
    w.leave();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_states() {
        assert_eq!(stat_state(b"12 (sleep) S 1 12"), Some(b'S'));
        assert_eq!(stat_state(b"12 (a) b) R 1 12"), Some(b'R'));
        assert_eq!(stat_state(b"12 (trunc"), None);
        assert!(runs(b'R') && runs(b'D'));
        assert!(!runs(b'S') && !runs(b'Z') && !runs(b'T') && !runs(b'X') && !runs(b'I'));
    }

    #[test]
    fn this_thread_is_alive_and_a_finished_one_is_not() {
        assert!(alive(sys::getpid(), sys::gettid()));
        let tid = std::thread::spawn(sys::gettid).join().unwrap();
        // join returns once the kernel clears the thread's tid word, which it does early in
        // the thread's exit: the task itself may run on (in `do_exit`) for a moment. It is gone
        // soon after, and the kernel reuses tids only after wrapping around pid_max.
        let gone = (0..1000).any(|_| {
            let dead = !alive(sys::getpid(), tid);
            if !dead {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            dead
        });
        assert!(gone, "thread {tid} still alive a second after join");
    }

    #[test]
    fn a_slot_of_a_dead_thread_is_taken_back() {
        // SAFETY: a WaiterSlot is plain atomics; all zero is a free slot.
        let s: WaiterSlot = unsafe { core::mem::zeroed() };
        assert!(claim(&s, 77_000_001));
        s.pid.store(sys::getpid(), Relaxed);
        // Held by a tid that does not exist in this process: free to take.
        assert!(claim(&s, sys::gettid()));
        // Held by a live thread: not.
        assert!(!claim(&s, 5));
    }
}
