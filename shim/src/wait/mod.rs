//! Timed waits and sleeps under logical time (docs/design.md, "Logical time").
//!
//! A program computes `deadline = now + timeout` from our logical clock and hands it to glibc
//! or the kernel, which compare it with the real clock. So absolute deadlines are translated
//! (real deadline = real now + (logical deadline − logical now)), relative timeouts wait the
//! same real time, and a wait that runs to its end advances the thread's logical clock `L` to
//! its deadline (by its timeout): a timed-out wait reads the same elapsed time every run. A
//! wait that ends early because another thread signalled leaves `L` alone.
//!
//! `--warp`: a sleep or timed wait returns at once (`L` moved to its deadline) only when
//! nothing in the whole run can run, the earliest deadline first; while anything runs, waits
//! take their real time, in slices (`warp.rs`). docs/waits.md says it for users.
//!
//! Exports are in `hooks/`; this file is the logic of absolute and relative waits.
//! `timer.rs`: the clocks and deadlines of ABSTIME timers. `futex.rs`: the `syscall()` futex
//! and `clock_nanosleep` paths (called by `crate::syscall`).

#[cfg(not(test))]
pub(crate) mod hooks;

use seal_abi::{flags, unsealed};

use crate::clock::{self, Domain};
use crate::core::{census, config, sys, thread};

pub const NS_PER_SEC: i64 = 1_000_000_000;

/// The real deadline that is as far from `real_now` as the logical deadline is from the
/// logical now (never before `real_now`: a past deadline becomes "now").
#[inline]
pub fn real_deadline(real_now: i64, logical_deadline: i64, logical_now: i64) -> i64 {
    let remaining = logical_deadline.saturating_sub(logical_now);
    real_now.saturating_add(clock::real_span(remaining.max(0)))
}

/// A timespec is a valid duration / deadline for the kernel (else the real call reports
/// EINVAL, and we pass it through untouched).
#[inline]
pub fn valid_timespec(ts: &libc::timespec) -> bool {
    ts.tv_sec >= 0 && (0..NS_PER_SEC).contains(&ts.tv_nsec)
}

/// The real clock, in nanoseconds (raw syscall: the vDSO one is ours).
#[inline]
pub fn real_now(clock: libc::clockid_t) -> i64 {
    clock::from_timespec(&sys::clock_gettime(clock))
}

/// The real `CLOCK_MONOTONIC`, for measuring how long an interrupted wait waited.
#[inline]
fn mono_now() -> i64 {
    real_now(libc::CLOCK_MONOTONIC)
}

/// The deadline of the last absolute wait this thread translated, with the real deadline it
/// got. A wait re-issued with the same logical deadline (after `EINTR`, a spurious or a
/// broadcast wakeup that did not satisfy the waiter) keeps its real deadline instead of
/// restarting the whole timeout: otherwise a stream of wakeups could postpone it forever.
#[derive(Clone, Copy)]
struct Anchor {
    /// False (all zeros) = no anchor.
    set: bool,
    /// Target logical clock (`L` at the deadline).
    target: i64,
    clock: libc::clockid_t,
    real: i64,
}

const NO_ANCHOR: Anchor = Anchor {
    set: false,
    target: 0,
    clock: 0,
    real: 0,
};

crate::thread_cell! {
    /// All zeros is [`NO_ANCHOR`].
    static ANCHOR: Anchor = "seal_tls_wait_anchor";
}

fn anchored(target: i64, clock: libc::clockid_t, fresh: i64) -> i64 {
    ANCHOR.with(|a| {
        let cur = a.get();
        if cur.set && cur.target == target && cur.clock == clock {
            return cur.real;
        }
        a.set(Anchor {
            set: true,
            target,
            clock,
            real: fresh,
        });
        fresh
    })
}

fn forget_anchor() {
    ANCHOR.with(|a| a.set(NO_ANCHOR));
}

/// A wait that was ended early turned out to have reached its logical deadline first
/// (`crate::causal::in_time`).
pub fn reached(target: i64) {
    timed_out_at(target);
}

/// A wait reached its deadline: `L` moves to it (never backwards).
fn timed_out_at(target: i64) {
    if !owner().moves_clock() {
        return;
    }
    forget_anchor();
    end_streak();
    if target > thread::peek() {
        thread::waited_to(target);
        crate::process::vpid::note_waited();
    }
}

/// Whose timed wait is in progress on this thread (set around a runtime's own waits).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Owner {
    /// The program's: the whole model applies. Zero: a thread's owner until set.
    Program = 0,
    /// CPython's GIL: reaching its deadline moves no clock, and it leaves the program's
    /// anchor and streak alone; the read that computed its deadline is taken back.
    Gil,
    /// HotSpot's parking for the program (`Thread.sleep`, `Object.wait`, `parkNanos`): the
    /// program's time, but out of the streak rule (how often the VM's own waits are woken
    /// early is the scheduler's).
    Jvm,
    /// HotSpot's own waits (a contended monitor's timed rechecks, its internal monitors,
    /// `crate::runtime::jvm_wait`): as the GIL's, they move no clock and leave the program's
    /// anchor and streak alone; the read that computed the deadline was bookkeeping already.
    JvmOwn,
}

impl Owner {
    /// Does reaching this wait's deadline move the thread's clock?
    fn moves_clock(self) -> bool {
        matches!(self, Owner::Program | Owner::Jvm)
    }
}

crate::thread_cell! {
    /// All zeros is [`Owner::Program`].
    static OWNER: Owner = "seal_tls_wait_owner";
}

fn owner() -> Owner {
    OWNER.with(|o| o.get())
}

/// Runs `f`, a timed wait of `owner`'s.
pub fn owned_by<R>(owner: Owner, f: impl FnOnce() -> R) -> R {
    if owner == Owner::Gil
        && crate::core::config::RATE_PPM.load(core::sync::atomic::Ordering::Relaxed) == 0
        && config::sealed(flags::TIME)
    {
        thread::refund_tick();
    }
    OWNER.with(|o| o.set(owner));
    let r = f();
    OWNER.with(|o| o.set(Owner::Program));
    r
}

/// A relative wait ran `ns`: `L` moves forward by it.
fn ran_for(ns: i64) {
    forget_anchor();
    end_streak();
    if ns > 0 {
        thread::waited_by(ns);
        crate::process::vpid::note_waited();
    }
}

pub use crate::core::sys::{errno, set_errno};

/// An error number from a `-1`-and-errno style result (of `int` or `long` type).
pub fn err_of<T: PartialEq + From<i8>>(r: T) -> i32 {
    if r == T::from(-1) {
        errno()
    } else {
        0
    }
}

/// Back to `-1`-and-errno.
pub fn ret_of(err: i32) -> libc::c_int {
    if err == 0 {
        0
    } else {
        set_errno(err);
        -1
    }
}

/// `--warp` is on and the wait family sealed (armed timers aside: see [`warping`]).
#[inline]
pub fn warp_on() -> bool {
    config::flags() & (flags::WARP | flags::WAIT) == flags::WARP | flags::WAIT
}

/// `--warp` is on (and the wait family sealed), and no real-time interval timer is armed.
///
/// `alarm(2)` and `setitimer(ITIMER_REAL)` deliver `SIGALRM` after *real* time: a warped
/// sleep would return before the timer could fire, and the program would take another path
/// than it takes unwarped (`alarm(1); sleep(3)` would never see its alarm; a loop sleeping
/// until a periodic timer has fired n times would race it). While such a timer is armed,
/// waits run their real (translated) time; once it has fired or been cancelled, warping
/// resumes. (`ITIMER_VIRTUAL`/`ITIMER_PROF` count CPU time, which a sleep does not use.)
#[inline]
pub fn warping() -> bool {
    config::flags() & (flags::WARP | flags::WAIT) == flags::WARP | flags::WAIT
        && !real_timer_armed()
}

/// `getitimer(ITIMER_REAL)` (a raw syscall) reports a pending expiry.
fn real_timer_armed() -> bool {
    let mut it = libc::itimerval {
        it_interval: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        it_value: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
    };
    // SAFETY: getitimer writes one itimerval to a valid pointer.
    let r = unsafe {
        sys::syscall3(
            libc::SYS_getitimer,
            i64::from(libc::ITIMER_REAL),
            core::ptr::addr_of_mut!(it) as i64,
            0,
        )
    };
    r == 0 && (it.it_value.tv_sec != 0 || it.it_value.tv_usec != 0)
}

/// How an absolute wait reports that it reached its deadline.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Reached {
    /// A sleep: success (0) means the deadline came.
    OnSuccess,
    /// A timed wait: `ETIMEDOUT` means the deadline came.
    OnTimedout,
}

/// An absolute wait on `abstime` (a value of `clock`, in the domain of the clock the program
/// read). `real_clock` is the clock the real function compares with. `call` runs the real
/// function with a (translated) deadline and returns its result as an error number (0 =
/// success). `sliceable` says whether, under `--warp`, the real function may be called again
/// with a later deadline when an earlier one ran out (see `warp::absolute`).
///
/// # Safety
/// `abstime` is null or valid for reads.
pub unsafe fn absolute(
    clock_id: libc::clockid_t,
    real_clock: libc::clockid_t,
    abstime: *const libc::timespec,
    reached: Reached,
    sliceable: impl FnOnce() -> bool,
    mut call: impl FnMut(*const libc::timespec) -> i32,
) -> i32 {
    let domain = clock::domain(clock_id);
    if !config::sealed(flags::WAIT) || abstime.is_null() || domain == Domain::PassThrough {
        return call(abstime);
    }
    // SAFETY: non-null, valid per the contract.
    let ts = unsafe { *abstime };
    if !(0..NS_PER_SEC).contains(&ts.tv_nsec) {
        return call(abstime);
    }
    let value = clock::from_timespec(&ts);
    let target = clock::logical_of(domain, value);
    let mut now_l = clock::now_logical();
    let rnow = real_now(real_clock);
    if from_real_clock(value, clock::value_at(domain, now_l), rnow) {
        return call(abstime);
    }
    // A timed wait on a sync object can be ended early by another thread, which carries no
    // time (docs/design.md, "Causality"): it takes part in the streak rule, as a `poll` does.
    // The GIL's waits are bookkeeping, and sleeps cannot be ended early.
    let bookkeeping = !owner().moves_clock();
    let eventful = reached == Reached::OnTimedout && owner() == Owner::Program;
    let t0 = if eventful { mono_now() } else { 0 };
    if eventful && target > now_l {
        if let Some(due) = streak_due(t0, target - now_l) {
            end_streak();
            if due > thread::peek() {
                thread::waited_to(due);
                crate::process::vpid::note_waited();
            }
            now_l = clock::now_logical();
        }
    }
    let real = if target <= now_l {
        rnow
    } else if bookkeeping {
        real_deadline(rnow, target, now_l)
    } else {
        anchored(target, real_clock, real_deadline(rnow, target, now_l))
    };
    let err = if target > now_l && warping() {
        warp::absolute(target, real_clock, real, reached, sliceable(), &mut call)
    } else {
        call(&clock::to_timespec(real))
    };
    let done = match reached {
        Reached::OnSuccess => err == 0,
        Reached::OnTimedout => err == libc::ETIMEDOUT,
    };
    if done {
        timed_out_at(target);
    } else if eventful && err == 0 && target > now_l {
        early(t0, now_l, target - now_l, thread::peek() > now_l);
    }
    err
}

/// A future deadline nearer the real clock than the logical one was computed from a clock
/// seal does not see (a raw `syscall` instruction, a vDSO entry found by hand): translating
/// it would turn a 0.1 s wait into months. It is passed through untranslated, and the census
/// says so. (A deadline already past logically, such as `{0, 0}` for "don't block", is
/// simply past.)
pub fn from_real_clock(value: i64, logical_now: i64, real_now: i64) -> bool {
    let logical_gap = value.saturating_sub(logical_now);
    let real_gap = value.saturating_sub(real_now).unsigned_abs();
    if logical_gap <= 0 || real_gap >= logical_gap.unsigned_abs() {
        return false;
    }
    // The launcher warns about unsealed events once, on stderr.
    census::record_unsealed(
        unsealed::UNSUPPORTED_CALL,
        b"a wait's deadline was read from the real clock, not the sealed one; \
          passed through untranslated",
    );
    true
}

/// How a relative wait ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ran {
    /// It ran its whole timeout.
    Full,
    /// A signal interrupted it after this many (real) nanoseconds, if known.
    Interrupted(Option<i64>),
    /// Something it waited for happened (an fd, a wakeup): `L` stays.
    Early,
}

/// A relative wait of `ns` (> 0) nanoseconds. `call` is the real wait; `slice(real_ns)` the
/// same wait bounded to `real_ns` (0: don't wait), which `--warp` uses when `sliceable`; both
/// say how they ended.
///
/// A wait interrupted by a signal advances `L` by the real time it waited (capped at the
/// timeout): a retry loop under a periodic signal (a profiler's timer) still ends, and the
/// logical time of interrupted-and-resumed sleeps adds up to the whole sleep.
pub fn relative<R>(
    ns: i64,
    sliceable: bool,
    mut slice: impl FnMut(i64) -> (R, Ran),
    call: impl FnOnce() -> (R, Ran),
) -> R {
    let t0 = mono_now();
    // Sleeps (sliceable waits) are never ended early by an event: only waits that something
    // else can end (a descriptor) take part in a streak.
    let eventful = !sliceable;
    if eventful {
        if let Some(due) = streak_due(t0, ns) {
            // The streak's shortest timeout has passed in real time: it ends here, with `L`
            // at its deadline, and this wait only collects what is ready.
            end_streak();
            if due > thread::peek() {
                thread::waited_to(due);
                crate::process::vpid::note_waited();
            }
            return slice(0).0;
        }
    }
    let l0 = thread::peek();
    let (r, ran) = if warping() {
        warp::relative(ns, sliceable, slice, call)
    } else {
        call()
    };
    match ran {
        Ran::Full => ran_for(ns),
        Ran::Interrupted(Some(e)) => ran_for(e.clamp(0, ns)),
        Ran::Interrupted(None) => ran_for((mono_now() - t0).clamp(0, ns)),
        Ran::Early if eventful => early(t0, l0, ns, thread::peek() > l0),
        Ran::Early => {}
    }
    r
}

/// A relative sleep of `req` through a nanosleep-like `call(req, rem)` returning an error
/// number. `rem` (may be null) gets the kernel's remaining time on `EINTR`.
///
/// # Safety
/// `req` is valid for reads; `rem` is null or valid for writes (it may alias `req`).
pub unsafe fn sleep_for(
    req: *const libc::timespec,
    rem: *mut libc::timespec,
    call: impl Fn(*const libc::timespec, *mut libc::timespec) -> i32,
) -> i32 {
    // SAFETY: valid per the contract; copied, since `rem` may point to the same timespec.
    let asked = unsafe { *req };
    let ns = clock::from_timespec(&asked);
    if !config::sealed(flags::WAIT) || !valid_timespec(&asked) || ns == 0 {
        return call(req, rem);
    }
    // Under --warp, the logical time of the slices slept so far.
    let mut slept = 0i64;
    relative(
        ns,
        true,
        |real_ns| {
            if real_ns == 0 {
                return (0, Ran::Full);
            }
            let mut left = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            let err = call(&clock::to_timespec(real_ns), &mut left);
            let done = slept + clock::logical_span(real_ns - clock::from_timespec(&left));
            match err {
                0 => {
                    slept += clock::logical_span(real_ns);
                    (0, Ran::Full)
                }
                libc::EINTR => {
                    if !rem.is_null() {
                        // SAFETY: rem valid per the contract.
                        unsafe { *rem = clock::to_timespec((ns - done).max(0)) };
                    }
                    (err, Ran::Interrupted(Some(done)))
                }
                _ => (err, Ran::Early),
            }
        },
        || {
            let mut left = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // Under --rate the real sleep is shorter (or longer) than the logical one.
            let real_req = clock::to_timespec(clock::real_span(ns));
            let err = call(&real_req, &mut left);
            let left_ns = clock::logical_span(clock::from_timespec(&left));
            if err == libc::EINTR && !rem.is_null() {
                // SAFETY: rem valid per the contract.
                unsafe { *rem = clock::to_timespec(left_ns) };
            }
            let ran = match err {
                0 => Ran::Full,
                libc::EINTR => Ran::Interrupted(Some(ns - left_ns)),
                _ => Ran::Early,
            };
            (err, ran)
        },
    )
}

/// `clock_nanosleep` logic, shared by the libc function and `syscall(SYS_clock_nanosleep)`.
/// Returns an error number.
///
/// # Safety
/// As `clock_nanosleep(2)`.
pub unsafe fn clock_nanosleep_impl(
    clock_id: libc::clockid_t,
    fl: libc::c_int,
    req: *const libc::timespec,
    rem: *mut libc::timespec,
    call: impl Fn(libc::clockid_t, libc::c_int, *const libc::timespec, *mut libc::timespec) -> i32,
) -> i32 {
    // A null or unmapped request goes to the kernel, which answers EFAULT.
    if req.is_null()
        || !crate::core::sys::mapped(req, core::mem::size_of::<libc::timespec>())
        || clock::domain(clock_id) == Domain::PassThrough
    {
        return call(clock_id, fl, req, rem);
    }
    if fl & libc::TIMER_ABSTIME != 0 {
        // SAFETY: req valid per the contract.
        unsafe {
            absolute(
                clock_id,
                clock_id,
                req,
                Reached::OnSuccess,
                || true,
                |ts| call(clock_id, fl, ts, rem),
            )
        }
    } else {
        // SAFETY: req non-null and valid, rem null or valid, per the contract.
        unsafe { sleep_for(req, rem, |q, m| call(clock_id, fl, q, m)) }
    }
}

/// No descriptor to wait for: a `poll` used as a sleep.
///
/// # Safety
/// `fds` valid for `n` entries (or `n` == 0).
pub unsafe fn poll_fd_less(fds: *const libc::pollfd, n: libc::nfds_t) -> bool {
    // SAFETY: per the contract.
    n == 0 || fds.is_null() || (0..n as usize).all(|i| unsafe { (*fds.add(i)).fd } < 0)
}

/// No descriptor in any of the sets: a `select` used as a sleep.
///
/// # Safety
/// Each set null or a valid `fd_set`.
pub unsafe fn select_fd_less(nfds: libc::c_int, sets: [*const libc::fd_set; 3]) -> bool {
    if nfds <= 0 {
        return true;
    }
    let words = ((nfds as usize).min(libc::FD_SETSIZE)).div_ceil(64);
    sets.iter().all(|&s| {
        s.is_null()
            // SAFETY: a valid fd_set is 16 u64 words; we read at most that.
            || (0..words).all(|w| unsafe { *(s as *const u64).add(w) } == 0)
    }) && nfds as usize <= libc::FD_SETSIZE
}

/// Number of threads of this process (from `/proc/self/stat`), if readable.
pub fn thread_count() -> Option<u64> {
    let mut buf = [0u8; 1024];
    let n = sys::read_file(b"/proc/self/stat\0", &mut buf);
    parse_stat_threads(&buf[..n])
}

/// The process has one thread: no other thread can signal a private sync object.
pub fn single_threaded() -> bool {
    thread_count() == Some(1)
}

/// `num_threads` (field 20) of a `/proc/<pid>/stat` line.
pub fn parse_stat_threads(s: &[u8]) -> Option<u64> {
    let close = s.iter().rposition(|&c| c == b')')?;
    s[close + 1..]
        .split(|&c| c == b' ' || c == b'\n')
        .filter(|f| !f.is_empty())
        .nth(17)
        .and_then(sys::parse_u64)
}

mod futex;
mod streak;
mod timer;

use streak::{early, end_streak, streak_due};
pub mod warp;

pub use futex::{futex_timeout, sys_clock_nanosleep, sys_futex, FutexTimeout};
pub use timer::{
    kernel_timer_id, parse_key_i64, parse_timer_clock, posix_timer_clock, timerfd_clock,
    translate_itimer,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_and_selects_without_descriptors_are_sleeps() {
        let fds = [
            libc::pollfd {
                fd: -1,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: 0,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY (all): valid arrays and sets of the given sizes.
        unsafe {
            assert!(poll_fd_less(fds.as_ptr(), 0));
            assert!(poll_fd_less(core::ptr::null(), 2));
            assert!(poll_fd_less(fds.as_ptr(), 1));
            assert!(!poll_fd_less(fds.as_ptr(), 2));
            let empty: libc::fd_set = core::mem::zeroed();
            let mut one: libc::fd_set = core::mem::zeroed();
            libc::FD_SET(5, &mut one);
            let null = core::ptr::null();
            assert!(select_fd_less(0, [null, null, null]));
            assert!(select_fd_less(8, [&empty, null, &empty]));
            assert!(!select_fd_less(8, [null, &one, null]));
            // Whole words are looked at: a bit past nfds in the same word still counts (the
            // conservative side: the select waits its real time).
            assert!(!select_fd_less(3, [&one, null, null]));
            assert!(!select_fd_less(
                libc::FD_SETSIZE as i32 + 1,
                [null, null, null]
            ));
        }
    }

    #[test]
    fn an_armed_real_timer_is_seen_until_cancelled() {
        // ITIMER_REAL is per process: this test arms it (far in the future, so it never
        // fires) and cancels it again at once.
        let set = |secs: i64| {
            let it = libc::itimerval {
                it_interval: libc::timeval {
                    tv_sec: 0,
                    tv_usec: 0,
                },
                it_value: libc::timeval {
                    tv_sec: secs,
                    tv_usec: 0,
                },
            };
            // SAFETY: a valid itimerval; the old value is not asked for.
            unsafe { libc::setitimer(libc::ITIMER_REAL, &it, core::ptr::null_mut()) };
        };
        assert!(!real_timer_armed());
        set(3600);
        assert!(real_timer_armed());
        set(0);
        assert!(!real_timer_armed());
    }

    #[test]
    fn deadlines_translate_by_the_logical_distance() {
        // 0.2 s ahead logically -> 0.2 s ahead of the real now.
        assert_eq!(
            real_deadline(1_000, 5_200_000_000, 5_000_000_000),
            200_001_000
        );
        // Already past: "now", never earlier.
        assert_eq!(real_deadline(1_000, 4, 5), 1_000);
        // Far future saturates instead of wrapping.
        assert_eq!(real_deadline(1_000, i64::MAX, i64::MIN + 1), i64::MAX);
    }

    #[test]
    fn deadlines_from_the_real_clock_are_recognised() {
        let day = 86_400 * NS_PER_SEC;
        // Logical monotonic 1 day + 5 s, real uptime 10 days.
        assert!(!from_real_clock(
            day + 5_100_000_000,
            day + 5 * NS_PER_SEC,
            10 * day
        ));
        assert!(from_real_clock(
            10 * day + 100_000_000,
            day + 5 * NS_PER_SEC,
            10 * day
        ));
        // Real uptime of 30 minutes: a logical deadline is still taken as logical.
        assert!(!from_real_clock(day + 100_000_000, day, 1_800 * NS_PER_SEC));
        // "Don't block" deadlines in the past are just past.
        assert!(!from_real_clock(0, day, 1_800 * NS_PER_SEC));
    }

    #[test]
    fn num_threads_from_stat() {
        let line = b"1234 (my (odd) prog) S 1 1234 1234 0 -1 4194304 100 0 0 0 1 2 0 0 20 0 7 0 \
                     12345 1000000 300 18446744073709551615\n";
        assert_eq!(parse_stat_threads(line), Some(7));
        assert_eq!(parse_stat_threads(b"garbage"), None);
    }

    #[test]
    fn anchor_keeps_the_first_real_deadline() {
        forget_anchor();
        assert_eq!(anchored(100, 1, 5_000), 5_000);
        // Re-issued with the same logical deadline: the first real deadline holds.
        assert_eq!(anchored(100, 1, 9_000), 5_000);
        // Another deadline, or another clock: fresh.
        assert_eq!(anchored(100, 0, 9_000), 9_000);
        assert_eq!(anchored(200, 0, 7_000), 7_000);
        forget_anchor();
        assert_eq!(anchored(200, 0, 8_000), 8_000);
    }
}
