//! Causality between sealed threads and processes (docs/design.md, "Causality").
//!
//! Every thread has a causal clock `W` (`crate::core::thread`): its logical clock as it stood after
//! its last wait that moved it or its last adoption. Clock reads alone never move `W`, so two
//! processes that only compute never pull each other's clocks, whatever the scheduler does.
//! Whoever may wake another thread leaves `W` where the woken one will look (Lamport's send):
//!
//! * a write to a pipe, FIFO or connected socket notes `W` with the position of the bytes it
//!   sends in that channel's record in the run table (`seal_abi::causal::Channel`); a read
//!   raises the reader's `L` and `W` to the highest clock the bytes it took carry (Lamport's
//!   receive). Reads that glibc makes internally (stdio buffers) are not seen, nor writes but
//!   a stream's flushes (`stdio`);
//! * a thread that returns leaves its `W` for `pthread_join` (and the timed joins);
//! * a reaped child's wait clock moves its parent (`crate::process::vpid::reaped`).
//!
//! Wakeups through condition variables, semaphores, mutexes and futexes carry nothing: in a
//! thread pool, which worker a wakeup reaches (and which waits it timed out before) is the
//! scheduler's choice, and measured on CPython's `concurrent.futures` pools, carrying them
//! made a run's clocks differ by 10 ms from run to run. Time flows along the data and along
//! ends, which the program orders itself. CPython's GIL waits move no clock at all
//! (`crate::wait::Owner::Gil`).

#[cfg(not(test))]
pub(crate) mod hooks;
mod peer;
mod ready;
mod stdio;

pub use ready::{epoll_ctl_done, epoll_in_time, forget as forget_epoll, select_in_time};
pub use stdio::flushing;

/// Before `fclose` closes stream `f` (registered in [`crate::FD_FCLOSING`]): what it still
/// buffers is flushed as a send (glibc's own flush in `fclose` is internal).
/// (A plain `fn`, as the table's entries are: `f` is valid by fclose's contract.)
#[cfg(not(test))]
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn fclosing(f: *mut libc::FILE) {
    let real = crate::real!(fflush: fn(*mut libc::FILE) -> libc::c_int);
    // SAFETY: a valid stream per fclose's contract.
    unsafe { flushing(f, || real(f)) };
}

use core::sync::atomic::{AtomicU64, AtomicU8, Ordering::*};

use seal_abi::causal::{self, key_of, lookup, publish, ClockSlot};
use seal_abi::flags;

use crate::core::{config, sys, table, thread};

/// Key kinds (the first part of `key_of`).
const PIPE: u64 = 1;
const UNIX: u64 = 2;
const INET: u64 = 3;
const JOIN: u64 = 4;

/// Causality is on: the time family is sealed and the run table is mapped.
#[inline(always)]
fn active() -> bool {
    config::sealed(flags::TIME) && !config::seccomp_strict()
}

// ---- joins (process-private) --------------------------------------------------------------

/// The causal clocks of threads that ended, for their joiners.
static JOINS: [ClockSlot; 1024] = [const { ClockSlot::empty() }; 1024];

/// A join of `id` returned `r` (0: joined). Returns `r`.
#[inline]
pub fn join_done(id: libc::pthread_t, r: i32) -> i32 {
    if r == 0 && active() {
        adopt(lookup(&JOINS, key_of(JOIN, id, 0)));
    }
    r
}

/// A thread started by our trampoline returned: leave its `W` for `pthread_join`.
pub fn thread_done(id: libc::pthread_t) {
    if active() {
        publish(&JOINS, key_of(JOIN, id, 0), thread::causal());
    }
}

/// Lamport's receive of `v` (0: nothing was published).
#[inline]
fn adopt(v: i64) {
    if v > 0 && thread::adopt(v) {
        crate::process::vpid::note_waited();
    }
}

// ---- channels (run-wide) -----------------------------------------------------------------

/// Descriptors below this are cached; others are classified on every use.
const FDS: usize = crate::core::fd::FDS;
/// `fd`'s byte of the descriptor table: 0 not looked at, 1 not a channel, 2 a channel.
#[inline(always)]
fn state(fd: i32) -> Option<&'static AtomicU8> {
    crate::core::fd::mark(fd, crate::FD_MARK_CAUSAL)
}
/// A channel's keys (valid while its state is 2).
static SEND: [AtomicU64; FDS] = [const { AtomicU64::new(0) }; FDS];
static RECV: [AtomicU64; FDS] = [const { AtomicU64::new(0) }; FDS];

/// The channel keys of `fd` (send, receive); `None` when it is no channel.
fn keys(fd: i32) -> Option<(u64, u64)> {
    if fd < 0 {
        return None;
    }
    let i = fd as usize;
    if let Some(st) = state(fd) {
        match st.load(Acquire) {
            1 => return None,
            2 => return Some((SEND[i].load(Relaxed), RECV[i].load(Relaxed))),
            _ => {}
        }
    }
    let k = classify(fd);
    // A vfork child's descriptors are its own; the cache is its parent's.
    if let Some(st) = state(fd).filter(|_| !crate::core::vfork::in_child()) {
        if let Some((s, r)) = k {
            SEND[i].store(s, Relaxed);
            RECV[i].store(r, Relaxed);
        }
        st.store(if k.is_some() { 2 } else { 1 }, Release);
    }
    k
}

/// What `fd` is: a pipe or FIFO (one key for both ends), a connected UNIX socket (its own
/// inode to receive, its peer's to send), a connected IP socket (the address pair, in each
/// direction), or nothing that carries time.
fn classify(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: an all-zero stat is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is a valid out-pointer; a bad fd only fails.
    let r = unsafe { sys::syscall3(libc::SYS_fstat, fd as i64, &mut st as *mut _ as i64, 0) };
    if r != 0 {
        return None;
    }
    match st.st_mode & libc::S_IFMT {
        libc::S_IFIFO => {
            let k = key_of(PIPE, st.st_dev, st.st_ino);
            Some((k, k))
        }
        libc::S_IFSOCK => match peer::domain(fd)? {
            libc::AF_UNIX => {
                let recv = key_of(UNIX, st.st_ino, 0);
                let send = peer::unix_peer(st.st_ino).map_or(0, |p| key_of(UNIX, p, 0));
                Some((send, recv))
            }
            libc::AF_INET | libc::AF_INET6 => {
                let (local, remote) = peer::inet_pair(fd)?;
                Some((key_of(INET, remote, local), key_of(INET, local, remote)))
            }
            _ => None,
        },
        _ => None,
    }
}

/// A write-like call of `n` bytes on `fd`, run by `call` (returning bytes written or -1): a
/// channel records this thread's `W` for the bytes it carries.
#[inline]
pub fn send(fd: i32, n: usize, call: impl FnOnce() -> isize) -> isize {
    if !active() || state(fd).is_some_and(|s| s.load(Acquire) == 1) {
        return call();
    }
    let Some((key, t)) = send_key(fd) else {
        return call();
    };
    causal::send(t, key, thread::causal(), n as u64);
    let r = call();
    if r < n as isize {
        causal::unsend(t, key, n as u64, r.max(0) as u64);
    }
    r
}

#[cold]
fn send_key(fd: i32) -> Option<(u64, &'static [causal::Channel])> {
    let (send, _) = keys(fd)?;
    (send != 0).then_some(())?;
    Some((send, table::channels()?))
}

/// A timed `poll` with logical deadline `deadline` returned `r`: a descriptor whose next byte
/// carries a clock later than the deadline was not ready in time (logically, the wait timed
/// out before that byte was written), so it is reported not ready; when nothing is left, the
/// poll timed out, at its deadline. So whether a timeout or a sealed writer's late line ends
/// the wait is decided by their clocks, not by which came first in real time.
///
/// The descriptors left ready carry their next bytes' clocks to the poller (Lamport's
/// receive, a read's worth early): a program that polls a process's sentinel and does not
/// read it (`multiprocessing.connection.wait`, CPython's `test_wait_integer`) sees the time
/// the child took; one that reads next adopts the same clock at its read anyway.
///
/// # Safety
/// `fds` valid for `n` entries (or `r <= 0`).
pub unsafe fn in_time(fds: *mut libc::pollfd, n: libc::nfds_t, deadline: i64, r: i32) -> i32 {
    if r <= 0 || fds.is_null() || !active() {
        return r;
    }
    let Some(t) = table::channels() else { return r };
    let (mut left, mut late, mut carried) = (0, false, 0);
    for i in 0..n as usize {
        // SAFETY: per the contract.
        let p = unsafe { &mut *fds.add(i) };
        if p.revents == 0 {
            continue;
        }
        let next = match keys(p.fd) {
            Some((_, recv)) if recv != 0 && p.revents & libc::POLLIN != 0 => causal::peek(t, recv),
            _ => 0,
        };
        if next > deadline {
            p.revents = 0;
            late = true;
        } else {
            left += 1;
            carried = carried.max(next);
        }
    }
    if late && left == 0 {
        crate::wait::reached(deadline);
        return 0;
    }
    adopt(carried);
    if late {
        left
    } else {
        r
    }
}

/// A read-like call on `fd` returned `r`: `r` bytes (0: end of file) were received, and the
/// reader adopts the clock they carry.
#[inline]
pub fn received(fd: i32, r: isize) {
    if r < 0 || !active() {
        return;
    }
    if state(fd).is_some_and(|s| s.load(Acquire) == 1) {
        return;
    }
    receive_slow(fd, r as u64);
}

#[cold]
fn receive_slow(fd: i32, n: u64) {
    let Some((_, recv)) = keys(fd) else { return };
    if recv == 0 {
        return;
    }
    if let Some(t) = table::channels() {
        adopt(causal::receive(t, recv, n));
    }
}
