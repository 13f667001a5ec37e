//! poll, select and epoll: relative timeouts. Waits with no descriptor to wait for are sleeps
//! (warpable); the rest wait their real time and account it.

use libc::{c_int, epoll_event, fd_set, nfds_t, pollfd, sigset_t, size_t, timespec, timeval};
use seal_abi::flags;

use crate::clock;
use crate::core::config;
use crate::hook;
use crate::wait::{errno, poll_fd_less, relative, select_fd_less, valid_timespec, Ran, NS_PER_SEC};

/// `poll`'s result as a relative wait's ending.
fn poll_ran(r: c_int) -> Ran {
    match r {
        0 => Ran::Full,
        -1 if errno() == libc::EINTR => Ran::Interrupted(None),
        _ => Ran::Early,
    }
}

/// A relative wait of `ns` through `call(slice)`: `None` waits the caller's own timeout,
/// `Some(ns)` at most that long. Under `--warp` fd-less ones (sleeps in disguise) wait in
/// slices and can warp; the others wait their real time (a descriptor may become ready from
/// outside the run).
fn timed_poll(ns: i64, fd_less: bool, call: impl Fn(Option<i64>) -> c_int) -> c_int {
    relative(
        ns,
        fd_less,
        |slice| {
            let r = call(Some(slice));
            (r, poll_ran(r))
        },
        || {
            let r = call(None);
            (r, poll_ran(r))
        },
    )
}

/// A timed poll of `ns` run by `call`, with its readiness checked against its logical deadline
/// (`crate::causal::in_time`).
fn in_time(fds: *mut pollfd, n: nfds_t, ns: i64, call: impl FnOnce() -> c_int) -> c_int {
    // SAFETY: the caller's array of n entries, just filled by the kernel.
    judged(ns, call, |deadline, r| unsafe {
        crate::causal::in_time(fds, n, deadline, r)
    })
}

/// A timed wait of `ns` run by `call`, whose result `judge(deadline, r)` checks against the
/// wait's logical deadline (`select`'s and epoll's forms of [`in_time`]).
fn judged(ns: i64, call: impl FnOnce() -> c_int, judge: impl FnOnce(i64, c_int) -> c_int) -> c_int {
    let deadline = crate::core::thread::peek().saturating_add(ns);
    let r = call();
    judge(deadline, r)
}

/// `select`'s and `pselect`'s readiness judged against the deadline
/// (`crate::causal::select_in_time`).
///
/// # Safety
/// `rd` null or a valid `fd_set`, just filled by the kernel.
unsafe fn select_judge(nfds: c_int, rd: *mut fd_set) -> impl FnOnce(i64, c_int) -> c_int {
    // SAFETY: per the contract.
    move |deadline, r| unsafe { crate::causal::select_in_time(nfds, rd, deadline, r) }
}

/// Epoll's readiness judged against the deadline (`crate::causal::epoll_in_time`).
///
/// # Safety
/// `ev` valid for as many entries as the wait returns.
unsafe fn epoll_judge(epfd: c_int, ev: *mut epoll_event) -> impl FnOnce(i64, c_int) -> c_int {
    // SAFETY: per the contract.
    move |deadline, r| unsafe { crate::causal::epoll_in_time(epfd, ev, deadline, r) }
}

/// A slice in `poll`'s milliseconds (rounded up: a nonzero slice never polls without waiting).
fn slice_ms(ns: i64) -> c_int {
    ((ns + 999_999) / 1_000_000).min(c_int::MAX as i64) as c_int
}

/// Milliseconds to a relative wait, if it is one (`> 0`; negative waits forever).
fn ms_wait(timeout: c_int) -> Option<i64> {
    (timeout > 0 && config::sealed(flags::WAIT)).then_some(timeout as i64 * 1_000_000)
}

/// A timespec timeout to a relative wait, if it is one (non-null, valid, non-zero).
///
/// # Safety
/// `ts` null or valid.
unsafe fn ts_wait(ts: *const timespec) -> Option<i64> {
    if ts.is_null() || !config::sealed(flags::WAIT) {
        return None;
    }
    // SAFETY: non-null, valid per the contract.
    let t = unsafe { &*ts };
    let ns = clock::from_timespec(t);
    (valid_timespec(t) && ns > 0).then_some(ns)
}

/// A `select` timeout to a relative wait, if it is one (non-null, valid, non-zero).
///
/// # Safety
/// `tv` null or valid.
unsafe fn tv_wait(tv: *const timeval) -> Option<i64> {
    if tv.is_null() || !config::sealed(flags::WAIT) {
        return None;
    }
    // SAFETY: non-null, valid per the contract.
    let t = unsafe { *tv };
    if t.tv_sec < 0 || !(0..1_000_000).contains(&t.tv_usec) {
        return None;
    }
    Some(t.tv_sec.saturating_mul(NS_PER_SEC) + t.tv_usec * 1000).filter(|&ns| ns != 0)
}

hook! {
    /// # Safety
    /// As `poll(2)`.
    fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int;
    fid = Poll;
    |real| match ms_wait(timeout) {
        // SAFETY: forwarded contract (the fd-less check reads the caller's array).
        Some(ns) => in_time(fds, n, ns, || timed_poll(ns, unsafe { poll_fd_less(fds, n) }, |s| {
            real(fds, n, s.map_or(timeout, slice_ms))
        })),
        None => real(fds, n, timeout),
    }
}

hook! {
    /// `poll` under `_FORTIFY_SOURCE` (glibc calls its internal poll from it).
    ///
    /// # Safety
    /// As `__poll_chk`.
    fn __poll_chk(fds: *mut pollfd, n: nfds_t, timeout: c_int, fdslen: size_t) -> c_int;
    fid = Poll;
    |real| match ms_wait(timeout) {
        // SAFETY: forwarded contract.
        Some(ns) => in_time(fds, n, ns, || timed_poll(ns, unsafe { poll_fd_less(fds, n) }, |s| {
            real(fds, n, s.map_or(timeout, slice_ms), fdslen)
        })),
        None => real(fds, n, timeout, fdslen),
    }
}

/// `ppoll` and `__ppoll_chk`: `call(timeout, mask)` is the real one.
///
/// # Safety
/// As `ppoll(2)`.
unsafe fn ppoll_impl(
    fds: *mut pollfd,
    n: nfds_t,
    ts: *const timespec,
    mask: *const sigset_t,
    call: impl Fn(*const timespec, *const sigset_t) -> c_int,
) -> c_int {
    let mut copy = core::mem::MaybeUninit::uninit();
    // SAFETY: the mask is null or valid per the contract.
    let mask = unsafe { crate::cpu::signals::wait_mask(mask, &mut copy) };
    // SAFETY: forwarded contract.
    match unsafe { ts_wait(ts) } {
        // SAFETY: forwarded contract.
        Some(ns) => in_time(fds, n, ns, || {
            timed_poll(ns, unsafe { poll_fd_less(fds, n) }, |s| {
                let t = s.map(clock::to_timespec);
                call(t.as_ref().map_or(ts, |t| t as *const timespec), mask)
            })
        }),
        None => call(ts, mask),
    }
}

hook! {
    /// # Safety
    /// As `ppoll(2)`.
    fn ppoll(fds: *mut pollfd, n: nfds_t, ts: *const timespec, mask: *const sigset_t) -> c_int;
    fid = Ppoll;
    // SAFETY: forwarded contract.
    |real| unsafe { ppoll_impl(fds, n, ts, mask, |t, m| real(fds, n, t, m)) }
}

hook! {
    /// # Safety
    /// As `__ppoll_chk`.
    fn __ppoll_chk(
        fds: *mut pollfd,
        n: nfds_t,
        ts: *const timespec,
        mask: *const sigset_t,
        fdslen: size_t,
    ) -> c_int;
    fid = Ppoll;
    // SAFETY: forwarded contract.
    |real| unsafe { ppoll_impl(fds, n, ts, mask, |t, m| real(fds, n, t, m, fdslen)) }
}

hook! {
    /// # Safety
    /// As `select(2)`.
    fn select(
        nfds: c_int,
        r: *mut fd_set,
        w: *mut fd_set,
        e: *mut fd_set,
        tv: *mut timeval,
    ) -> c_int;
    fid = Select;
    // SAFETY: forwarded contract.
    |real| match unsafe { tv_wait(tv) } {
        // SAFETY: the sets are null or valid per the contract.
        Some(ns) => judged(ns, || timed_poll(ns, unsafe { select_fd_less(nfds, [r, w, e]) }, |s| {
            let Some(s) = s else { return real(nfds, r, w, e, tv) };
            let us = (s + 999) / 1000;
            let mut t = timeval {
                tv_sec: us / 1_000_000,
                tv_usec: us % 1_000_000,
            };
            let got = real(nfds, r, w, e, &mut t);
            // The kernel leaves a timed-out select's timeout at zero (the caller's is left
            // alone until then: a select interrupted between slices reports it unchanged).
            if got == 0 {
                // SAFETY: tv non-null, valid.
                unsafe { *tv = t };
            }
            got
        }), |deadline, got| {
            // SAFETY: the read set is null or valid per the contract.
            let left = unsafe { select_judge(nfds, r) }(deadline, got);
            if left == 0 && got > 0 {
                // Timed out at its deadline after all: the kernel's remaining time is zero.
                // SAFETY: tv non-null, valid.
                unsafe { *tv = timeval { tv_sec: 0, tv_usec: 0 } };
            }
            left
        }),
        None => real(nfds, r, w, e, tv),
    }
}

hook! {
    /// # Safety
    /// As `pselect(2)`.
    fn pselect(
        nfds: c_int,
        r: *mut fd_set,
        w: *mut fd_set,
        e: *mut fd_set,
        ts: *const timespec,
        mask: *const sigset_t,
    ) -> c_int;
    fid = Pselect;
    // SAFETY: forwarded contract; the sets are null or valid per it.
    |real| unsafe {
        ts_masked_wait(
            ts,
            mask,
            || select_fd_less(nfds, [r, w, e]),
            |t, m| real(nfds, r, w, e, t, m),
            select_judge(nfds, r),
        )
    }
}

hook! {
    /// # Safety
    /// As `epoll_wait(2)`.
    fn epoll_wait(epfd: c_int, ev: *mut epoll_event, max: c_int, timeout: c_int) -> c_int;
    fid = EpollWait;
    // An epoll set is never treated as fd-less.
    |real| match ms_wait(timeout) {
        // A slice is only asked for to collect what is ready (see `wait::relative`).
        Some(ns) => judged(
            ns,
            || timed_poll(ns, false, |s| real(epfd, ev, max, s.map_or(timeout, slice_ms))),
            // SAFETY: the caller's array of max entries, filled by the kernel.
            unsafe { epoll_judge(epfd, ev) },
        ),
        None => real(epfd, ev, max, timeout),
    }
}

hook! {
    /// # Safety
    /// As `epoll_pwait(2)`.
    fn epoll_pwait(
        epfd: c_int,
        ev: *mut epoll_event,
        max: c_int,
        timeout: c_int,
        mask: *const sigset_t,
    ) -> c_int;
    fid = EpollPwait;
    |real| {
        let mut copy = core::mem::MaybeUninit::uninit();
        // SAFETY: the mask is null or valid per the contract.
        let mask = unsafe { crate::cpu::signals::wait_mask(mask, &mut copy) };
        match ms_wait(timeout) {
            Some(ns) => judged(
                ns,
                || timed_poll(ns, false, |s| real(epfd, ev, max, s.map_or(timeout, slice_ms), mask)),
                // SAFETY: the caller's array of max entries, filled by the kernel.
                unsafe { epoll_judge(epfd, ev) },
            ),
            None => real(epfd, ev, max, timeout, mask),
        }
    }
}

hook! {
    /// Counted as `epoll_pwait` (same family, nanosecond timeout).
    ///
    /// # Safety
    /// As `epoll_pwait2(2)`.
    fn epoll_pwait2(
        epfd: c_int,
        ev: *mut epoll_event,
        max: c_int,
        ts: *const timespec,
        mask: *const sigset_t,
    ) -> c_int;
    fid = EpollPwait;
    // SAFETY: forwarded contract.
    |real| unsafe {
        ts_masked_wait(ts, mask, || false, |t, m| real(epfd, ev, max, t, m), epoll_judge(epfd, ev))
    }
}

/// A wait with a `timespec` timeout and a signal mask (`pselect`, `epoll_pwait2`): the mask
/// as [`crate::cpu::signals::wait_mask`] makes it, the timeout translated (`fd_less` as
/// [`timed_poll`] takes it, asked only for a timed wait); `call` makes the real call, and a
/// timed one's result goes through `judge` ([`judged`]).
///
/// # Safety
/// `ts` and `mask` are null or valid, and so is what `fd_less` reads.
unsafe fn ts_masked_wait(
    ts: *const timespec,
    mask: *const sigset_t,
    fd_less: impl FnOnce() -> bool,
    call: impl Fn(*const timespec, *const sigset_t) -> c_int,
    judge: impl FnOnce(i64, c_int) -> c_int,
) -> c_int {
    let mut copy = core::mem::MaybeUninit::uninit();
    // SAFETY: the mask is null or valid per the contract.
    let mask = unsafe { crate::cpu::signals::wait_mask(mask, &mut copy) };
    // SAFETY: forwarded contract.
    match unsafe { ts_wait(ts) } {
        Some(ns) => {
            let fd_less = fd_less();
            let wait = || {
                timed_poll(ns, fd_less, |s| {
                    let t = s.map(clock::to_timespec);
                    call(t.as_ref().map_or(ts, |t| t as *const timespec), mask)
                })
            };
            judged(ns, wait, judge)
        }
        None => call(ts, mask),
    }
}
