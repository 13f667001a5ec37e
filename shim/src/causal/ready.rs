//! `select` and `epoll` readiness judged against a timed wait's logical deadline, as
//! [`super::in_time`] judges `poll`'s: a descriptor whose next bytes carry a clock later than
//! the deadline was not ready in time and is taken out of the answer (when nothing is left,
//! the wait timed out at its deadline), and the ones left carry their next bytes' clocks to
//! the waiter (Lamport's receive, a read's worth early).
//!
//! An epoll event names a descriptor only through the data the program registered with it:
//! `epoll_ctl` notes, per descriptor, the epoll set that registered it with its own number as
//! data (CPython's `select.epoll`, libuv, Java's NIO, most C loops); events of other
//! registrations (a token, a pointer: Tokio, Boost.Asio) carry nothing. A late event is taken
//! out only for a level-triggered registration, which reports it again at the next wait; an
//! edge-triggered or one-shot one would never see it again, so it stays.

use core::sync::atomic::{AtomicI32, Ordering::*};

use seal_abi::causal;

use super::{active, adopt, keys, FDS};
use crate::core::table;

/// The next bytes on `fd` (when it is a channel) carry clock `Some(c)` no later than
/// `deadline` (0: nothing carried); `None` when they were written after it.
fn judge(t: &[causal::Channel], fd: i32, deadline: i64) -> Option<i64> {
    let next = match keys(fd) {
        Some((_, recv)) if recv != 0 => causal::peek(t, recv),
        _ => 0,
    };
    (next <= deadline).then_some(next)
}

/// What's left of a wait that returned `r` ready descriptors after `dropped` were taken out
/// as late and the rest carried `carried`.
fn settle(r: i32, dropped: i32, carried: i64, deadline: i64) -> i32 {
    if dropped > 0 && dropped >= r {
        crate::wait::reached(deadline);
        return 0;
    }
    adopt(carried);
    r - dropped
}

/// A timed `select` with logical deadline `deadline` returned `r`; `rd` is its read set.
/// Returns the count to report (0: it timed out at its deadline).
///
/// # Safety
/// `rd` null or a valid `fd_set`.
pub unsafe fn select_in_time(nfds: i32, rd: *mut libc::fd_set, deadline: i64, r: i32) -> i32 {
    if r <= 0 || rd.is_null() || !active() {
        return r;
    }
    let Some(t) = table::channels() else { return r };
    let n = (nfds.max(0) as usize).min(libc::FD_SETSIZE);
    let words = rd as *mut u64;
    let (mut dropped, mut carried) = (0, 0);
    for w in 0..n.div_ceil(64) {
        // SAFETY: a valid fd_set is FD_SETSIZE bits, 16 u64 words; w < 16.
        let word = unsafe { &mut *words.add(w) };
        let mut bits = *word;
        while bits != 0 {
            let b = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let fd = w * 64 + b;
            if fd >= n {
                break;
            }
            match judge(t, fd as i32, deadline) {
                Some(c) => carried = carried.max(c),
                None => {
                    *word &= !(1u64 << b);
                    dropped += 1;
                }
            }
        }
    }
    settle(r, dropped, carried, deadline)
}

/// Per descriptor: 1 + the epoll set that registered it with its own number as data, and
/// [`LEVEL`] when that registration is level-triggered; 0 none.
static EPOLL_OF: [AtomicI32; FDS] = [const { AtomicI32::new(0) }; FDS];
const LEVEL: i32 = 1 << 30;

/// `epoll_ctl(epfd, op, fd, ev)` returned `r`: note or forget the registration.
///
/// # Safety
/// `ev` null or valid.
pub unsafe fn epoll_ctl_done(epfd: i32, op: i32, fd: i32, ev: *const libc::epoll_event, r: i32) {
    let (Ok(i), true) = (
        usize::try_from(fd),
        r == 0 && (0..LEVEL - 1).contains(&epfd),
    ) else {
        return;
    };
    let Some(slot) = EPOLL_OF.get(i) else { return };
    if op == libc::EPOLL_CTL_DEL || ev.is_null() {
        if slot.load(Relaxed) & !LEVEL == epfd + 1 {
            slot.store(0, Relaxed);
        }
        return;
    }
    // SAFETY: non-null, valid per the contract (the kernel read it).
    let e = unsafe { core::ptr::read_unaligned(ev) };
    let (events, data) = (e.events, e.u64);
    if data as u32 as i32 == fd {
        let once = (libc::EPOLLET | libc::EPOLLONESHOT) as u32;
        let level = if events & once == 0 { LEVEL } else { 0 };
        slot.store((epfd + 1) | level, Relaxed);
    } else if slot.load(Relaxed) & !LEVEL == epfd + 1 {
        slot.store(0, Relaxed);
    }
}

/// Descriptor `fd` was closed: its registrations went with it.
pub fn forget(fd: i32) {
    if let Some(slot) = usize::try_from(fd).ok().and_then(|i| EPOLL_OF.get(i)) {
        if slot.load(Relaxed) != 0 {
            slot.store(0, Relaxed);
        }
    }
}

/// A timed `epoll_wait` on `epfd` with logical deadline `deadline` returned `r` events in
/// `ev`. Returns the count to report (late events of level-triggered registrations removed).
///
/// # Safety
/// `ev` valid for `r` entries (or `r <= 0`).
pub unsafe fn epoll_in_time(epfd: i32, ev: *mut libc::epoll_event, deadline: i64, r: i32) -> i32 {
    if r <= 0 || ev.is_null() || !active() {
        return r;
    }
    let Some(t) = table::channels() else { return r };
    let (mut kept, mut carried) = (0usize, 0);
    for i in 0..r as usize {
        // SAFETY: per the contract; the kernel filled r entries (packed: read unaligned).
        let e = unsafe { core::ptr::read_unaligned(ev.add(i)) };
        let (events, data) = (e.events, e.u64);
        let fd = data as u32 as i32;
        let reg = usize::try_from(fd)
            .ok()
            .and_then(|j| EPOLL_OF.get(j))
            .map_or(0, |s| s.load(Relaxed));
        let mut keep = true;
        if reg & !LEVEL == epfd + 1 && events & libc::EPOLLIN as u32 != 0 {
            // Only an event that says nothing but "readable" can be taken out.
            let only_in = events & !((libc::EPOLLIN | libc::EPOLLRDNORM) as u32) == 0;
            match judge(t, fd, deadline) {
                Some(c) => carried = carried.max(c),
                None => keep = reg & LEVEL == 0 || !only_in,
            }
        }
        if keep {
            if kept != i {
                // SAFETY: both within the r entries.
                unsafe { core::ptr::write_unaligned(ev.add(kept), e) };
            }
            kept += 1;
        }
    }
    settle(r, r - kept as i32, carried, deadline)
}
