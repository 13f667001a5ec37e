//! Exported wait and sleep entry points. Each: count the call (detail = the clock the deadline
//! is on, or none for plain relative timeouts), then, when the `time` family is sealed,
//! translate the deadline / account the timeout through `super`; else call the real function.
//!
//! Sync objects are only warped when process-private (a process-shared one can be signalled
//! by another process). The private/shared bits are read from glibc 2.36's x86_64 layouts:
//! condvar `__data.__wrefs` (byte 36: bit 0 process-shared, bit 1 `CLOCK_MONOTONIC`, see
//! nptl/pthread_cond_common.c), mutex `__data.__kind` (byte 16, bit 7 = PSHARED), rwlock
//! `__data.__shared` (byte 28), semaphore `private` (byte 8: 0 = private).

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

use seal_abi::{flags, Fid, NO_DETAIL};

use super::{
    absolute, clock_nanosleep_impl, errno, posix_timer_clock, relative, set_errno, single_threaded,
    sleep_for, timerfd_clock, translate_itimer, Ran, Reached,
};
use crate::{caller, census, clock, config, real};

// ---- glibc internals (2.36, x86_64) -------------------------------------------------------

/// `__data.__wrefs` of a condvar.
///
/// # Safety
/// `cond` points to an initialised `pthread_cond_t`.
unsafe fn cond_wrefs(cond: *const libc::pthread_cond_t) -> u32 {
    // SAFETY: __wrefs is an aligned u32 at byte 36 of the 48-byte pthread_cond_t, read
    // atomically as glibc itself does.
    unsafe { (*((cond as *const u8).add(36) as *const AtomicU32)).load(Relaxed) }
}

/// The clock a condvar's deadlines are on (`pthread_condattr_setclock`).
///
/// # Safety
/// As [`cond_wrefs`].
unsafe fn cond_clock(cond: *const libc::pthread_cond_t) -> libc::clockid_t {
    // SAFETY: forwarded.
    if unsafe { cond_wrefs(cond) } & 2 != 0 {
        libc::CLOCK_MONOTONIC
    } else {
        libc::CLOCK_REALTIME
    }
}

/// # Safety
/// As [`cond_wrefs`].
unsafe fn cond_private(cond: *const libc::pthread_cond_t) -> bool {
    // SAFETY: forwarded.
    (unsafe { cond_wrefs(cond) } & 1) == 0
}

/// # Safety
/// `m` points to an initialised `pthread_mutex_t`.
unsafe fn mutex_private(m: *const libc::pthread_mutex_t) -> bool {
    // SAFETY: __kind is an i32 at byte 16.
    unsafe { *((m as *const u8).add(16) as *const i32) & 128 == 0 }
}

/// # Safety
/// `rw` points to an initialised `pthread_rwlock_t`.
unsafe fn rwlock_private(rw: *const libc::pthread_rwlock_t) -> bool {
    // SAFETY: __shared is a byte at offset 28.
    unsafe { *(rw as *const u8).add(28) == 0 }
}

/// # Safety
/// `s` points to an initialised `sem_t`.
unsafe fn sem_private(s: *const libc::sem_t) -> bool {
    // SAFETY: `private` is an i32 at byte 8 of struct new_sem.
    unsafe { *((s as *const u8).add(8) as *const i32) == 0 }
}

/// An error number from a `-1`-and-errno style result.
fn err_of(r: libc::c_int) -> i32 {
    if r == -1 {
        errno()
    } else {
        0
    }
}

/// Back to `-1`-and-errno.
fn ret_of(err: i32) -> libc::c_int {
    if err == 0 {
        0
    } else {
        set_errno(err);
        -1
    }
}

// ---- condition variables ------------------------------------------------------------------

/// # Safety
/// As `pthread_cond_timedwait(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_timedwait(
    cond: *mut libc::pthread_cond_t,
    mutex: *mut libc::pthread_mutex_t,
    abstime: *const libc::timespec,
) -> libc::c_int {
    let ra = caller!();
    let real = real!(pthread_cond_timedwait: fn(*mut libc::pthread_cond_t, *mut libc::pthread_mutex_t, *const libc::timespec) -> libc::c_int);
    if cond.is_null() {
        census::count(Fid::CondTimedwait, NO_DETAIL, ra);
        // SAFETY: forwarded.
        return unsafe { real(cond, mutex, abstime) };
    }
    // SAFETY: cond is an initialised condvar per the contract.
    let clk = unsafe { cond_clock(cond) };
    census::count(Fid::CondTimedwait, clock::detail(clk), ra);
    // SAFETY: forwarded contract; the closures call the real function with its arguments.
    unsafe {
        absolute(
            clk,
            clk,
            abstime,
            Reached::OnTimedout,
            || cond_private(cond) && single_threaded(),
            |ts| real(cond, mutex, ts),
        )
    }
}

/// # Safety
/// As `pthread_cond_clockwait(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_clockwait(
    cond: *mut libc::pthread_cond_t,
    mutex: *mut libc::pthread_mutex_t,
    clk: libc::clockid_t,
    abstime: *const libc::timespec,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::CondClockwait, clock::detail(clk), ra);
    let real = real!(pthread_cond_clockwait: fn(*mut libc::pthread_cond_t, *mut libc::pthread_mutex_t, libc::clockid_t, *const libc::timespec) -> libc::c_int);
    // SAFETY: forwarded contract.
    unsafe {
        absolute(
            clk,
            clk,
            abstime,
            Reached::OnTimedout,
            || !cond.is_null() && cond_private(cond) && single_threaded(),
            |ts| real(cond, mutex, clk, ts),
        )
    }
}

/// C11 `cnd_timedwait` (glibc calls its condvar internally, so it is hooked itself): a
/// `CLOCK_REALTIME` deadline.
///
/// # Safety
/// As `cnd_timedwait(3)`.
#[no_mangle]
pub unsafe extern "C" fn cnd_timedwait(
    cond: *mut libc::pthread_cond_t,
    mutex: *mut libc::pthread_mutex_t,
    abstime: *const libc::timespec,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::CondTimedwait, clock::detail(libc::CLOCK_REALTIME), ra);
    let real = real!(cnd_timedwait: fn(*mut libc::pthread_cond_t, *mut libc::pthread_mutex_t, *const libc::timespec) -> libc::c_int);
    const THRD_TIMEDOUT: libc::c_int = 4;
    // SAFETY: forwarded contract. thrd_timedout is mapped to ETIMEDOUT and back.
    let r = unsafe {
        absolute(
            libc::CLOCK_REALTIME,
            libc::CLOCK_REALTIME,
            abstime,
            Reached::OnTimedout,
            || false,
            |ts| match real(cond, mutex, ts) {
                THRD_TIMEDOUT => libc::ETIMEDOUT,
                r => r,
            },
        )
    };
    if r == libc::ETIMEDOUT {
        THRD_TIMEDOUT
    } else {
        r
    }
}

/// C11 `mtx_timedlock` (glibc calls its mutex internally): a `CLOCK_REALTIME` deadline.
///
/// # Safety
/// As `mtx_timedlock(3)`.
#[no_mangle]
pub unsafe extern "C" fn mtx_timedlock(
    m: *mut libc::pthread_mutex_t,
    abstime: *const libc::timespec,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::MtxTimedlock, clock::detail(libc::CLOCK_REALTIME), ra);
    let real =
        real!(mtx_timedlock: fn(*mut libc::pthread_mutex_t, *const libc::timespec) -> libc::c_int);
    const THRD_TIMEDOUT: libc::c_int = 4;
    // SAFETY: forwarded contract. thrd_timedout is mapped to ETIMEDOUT and back.
    let r = unsafe {
        absolute(
            libc::CLOCK_REALTIME,
            libc::CLOCK_REALTIME,
            abstime,
            Reached::OnTimedout,
            || !m.is_null() && mutex_private(m) && single_threaded(),
            |ts| match real(m, ts) {
                THRD_TIMEDOUT => libc::ETIMEDOUT,
                r => r,
            },
        )
    };
    if r == libc::ETIMEDOUT {
        THRD_TIMEDOUT
    } else {
        r
    }
}

// ---- message queues (process-shared by nature: never warped) ----------------------------

/// # Safety
/// As `mq_timedreceive(3)`.
#[no_mangle]
pub unsafe extern "C" fn mq_timedreceive(
    q: libc::mqd_t,
    msg: *mut libc::c_char,
    len: libc::size_t,
    prio: *mut libc::c_uint,
    abstime: *const libc::timespec,
) -> libc::ssize_t {
    let ra = caller!();
    census::count(Fid::MqTimedreceive, clock::detail(libc::CLOCK_REALTIME), ra);
    let real = real!(mq_timedreceive: fn(libc::mqd_t, *mut libc::c_char, libc::size_t, *mut libc::c_uint, *const libc::timespec) -> libc::ssize_t);
    let mut got: libc::ssize_t = -1;
    // SAFETY: forwarded contract.
    let err = unsafe {
        absolute(
            libc::CLOCK_REALTIME,
            libc::CLOCK_REALTIME,
            abstime,
            Reached::OnTimedout,
            || false,
            |ts| {
                got = real(q, msg, len, prio, ts);
                if got < 0 {
                    errno()
                } else {
                    0
                }
            },
        )
    };
    if err != 0 {
        set_errno(err);
        return -1;
    }
    got
}

/// # Safety
/// As `mq_timedsend(3)`.
#[no_mangle]
pub unsafe extern "C" fn mq_timedsend(
    q: libc::mqd_t,
    msg: *const libc::c_char,
    len: libc::size_t,
    prio: libc::c_uint,
    abstime: *const libc::timespec,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::MqTimedsend, clock::detail(libc::CLOCK_REALTIME), ra);
    let real = real!(mq_timedsend: fn(libc::mqd_t, *const libc::c_char, libc::size_t, libc::c_uint, *const libc::timespec) -> libc::c_int);
    // SAFETY: forwarded contract.
    ret_of(unsafe {
        absolute(
            libc::CLOCK_REALTIME,
            libc::CLOCK_REALTIME,
            abstime,
            Reached::OnTimedout,
            || false,
            |ts| err_of(real(q, msg, len, prio, ts)),
        )
    })
}

// ---- semaphores ---------------------------------------------------------------------------

/// # Safety
/// As `sem_timedwait(3)`.
#[no_mangle]
pub unsafe extern "C" fn sem_timedwait(
    sem: *mut libc::sem_t,
    abstime: *const libc::timespec,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::SemTimedwait, clock::detail(libc::CLOCK_REALTIME), ra);
    let real = real!(sem_timedwait: fn(*mut libc::sem_t, *const libc::timespec) -> libc::c_int);
    // SAFETY: forwarded contract.
    ret_of(unsafe {
        absolute(
            libc::CLOCK_REALTIME,
            libc::CLOCK_REALTIME,
            abstime,
            Reached::OnTimedout,
            || !sem.is_null() && sem_private(sem) && single_threaded(),
            |ts| err_of(real(sem, ts)),
        )
    })
}

/// # Safety
/// As `sem_clockwait(3)`.
#[no_mangle]
pub unsafe extern "C" fn sem_clockwait(
    sem: *mut libc::sem_t,
    clk: libc::clockid_t,
    abstime: *const libc::timespec,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::SemClockwait, clock::detail(clk), ra);
    let real = real!(sem_clockwait: fn(*mut libc::sem_t, libc::clockid_t, *const libc::timespec) -> libc::c_int);
    // SAFETY: forwarded contract.
    ret_of(unsafe {
        absolute(
            clk,
            clk,
            abstime,
            Reached::OnTimedout,
            || !sem.is_null() && sem_private(sem) && single_threaded(),
            |ts| err_of(real(sem, clk, ts)),
        )
    })
}

// ---- mutexes, rwlocks, joins --------------------------------------------------------------

/// # Safety
/// As `pthread_mutex_timedlock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_timedlock(
    m: *mut libc::pthread_mutex_t,
    abstime: *const libc::timespec,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::MutexTimedlock, clock::detail(libc::CLOCK_REALTIME), ra);
    let real = real!(pthread_mutex_timedlock: fn(*mut libc::pthread_mutex_t, *const libc::timespec) -> libc::c_int);
    // SAFETY: forwarded contract.
    unsafe {
        absolute(
            libc::CLOCK_REALTIME,
            libc::CLOCK_REALTIME,
            abstime,
            Reached::OnTimedout,
            || !m.is_null() && mutex_private(m) && single_threaded(),
            |ts| real(m, ts),
        )
    }
}

/// # Safety
/// As `pthread_mutex_clocklock(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_clocklock(
    m: *mut libc::pthread_mutex_t,
    clk: libc::clockid_t,
    abstime: *const libc::timespec,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::MutexClocklock, clock::detail(clk), ra);
    let real = real!(pthread_mutex_clocklock: fn(*mut libc::pthread_mutex_t, libc::clockid_t, *const libc::timespec) -> libc::c_int);
    // SAFETY: forwarded contract.
    unsafe {
        absolute(
            clk,
            clk,
            abstime,
            Reached::OnTimedout,
            || !m.is_null() && mutex_private(m) && single_threaded(),
            |ts| real(m, clk, ts),
        )
    }
}

/// Generates the four timed rwlock locks (realtime `timed*`, any-clock `clock*`).
macro_rules! rwlock_hooks {
    ($($timed:ident / $clocked:ident : $tfid:ident / $cfid:ident),* $(,)?) => {$(
        /// # Safety
        /// As the glibc function of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $timed(
            rw: *mut libc::pthread_rwlock_t,
            abstime: *const libc::timespec,
        ) -> libc::c_int {
            let ra = caller!();
            census::count(Fid::$tfid, clock::detail(libc::CLOCK_REALTIME), ra);
            let real = real!($timed: fn(*mut libc::pthread_rwlock_t, *const libc::timespec) -> libc::c_int);
            // SAFETY: forwarded contract.
            unsafe {
                absolute(
                    libc::CLOCK_REALTIME,
                    libc::CLOCK_REALTIME,
                    abstime,
                    Reached::OnTimedout,
                    || !rw.is_null() && rwlock_private(rw) && single_threaded(),
                    |ts| real(rw, ts),
                )
            }
        }

        /// # Safety
        /// As the glibc function of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $clocked(
            rw: *mut libc::pthread_rwlock_t,
            clk: libc::clockid_t,
            abstime: *const libc::timespec,
        ) -> libc::c_int {
            let ra = caller!();
            census::count(Fid::$cfid, clock::detail(clk), ra);
            let real = real!($clocked: fn(*mut libc::pthread_rwlock_t, libc::clockid_t, *const libc::timespec) -> libc::c_int);
            // SAFETY: forwarded contract.
            unsafe {
                absolute(
                    clk,
                    clk,
                    abstime,
                    Reached::OnTimedout,
                    || !rw.is_null() && rwlock_private(rw) && single_threaded(),
                    |ts| real(rw, clk, ts),
                )
            }
        }
    )*};
}

rwlock_hooks! {
    pthread_rwlock_timedrdlock / pthread_rwlock_clockrdlock : RwlockTimedrdlock / RwlockClockrdlock,
    pthread_rwlock_timedwrlock / pthread_rwlock_clockwrlock : RwlockTimedwrlock / RwlockClockwrlock,
}

/// # Safety
/// As `pthread_timedjoin_np(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_timedjoin_np(
    th: libc::pthread_t,
    retval: *mut *mut libc::c_void,
    abstime: *const libc::timespec,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::TimedjoinNp, clock::detail(libc::CLOCK_REALTIME), ra);
    let real = real!(pthread_timedjoin_np: fn(libc::pthread_t, *mut *mut libc::c_void, *const libc::timespec) -> libc::c_int);
    // SAFETY: forwarded contract.
    unsafe {
        absolute(
            libc::CLOCK_REALTIME,
            libc::CLOCK_REALTIME,
            abstime,
            Reached::OnTimedout,
            single_threaded,
            |ts| real(th, retval, ts),
        )
    }
}

/// # Safety
/// As `pthread_clockjoin_np(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_clockjoin_np(
    th: libc::pthread_t,
    retval: *mut *mut libc::c_void,
    clk: libc::clockid_t,
    abstime: *const libc::timespec,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::ClockjoinNp, clock::detail(clk), ra);
    let real = real!(pthread_clockjoin_np: fn(libc::pthread_t, *mut *mut libc::c_void, libc::clockid_t, *const libc::timespec) -> libc::c_int);
    // SAFETY: forwarded contract.
    unsafe {
        absolute(
            clk,
            clk,
            abstime,
            Reached::OnTimedout,
            single_threaded,
            |ts| real(th, retval, clk, ts),
        )
    }
}

// ---- sleeps -------------------------------------------------------------------------------

/// # Safety
/// As `clock_nanosleep(2)`.
#[no_mangle]
pub unsafe extern "C" fn clock_nanosleep(
    clk: libc::clockid_t,
    fl: libc::c_int,
    req: *const libc::timespec,
    rem: *mut libc::timespec,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::ClockNanosleep, clock::detail(clk), ra);
    let real = real!(clock_nanosleep: fn(libc::clockid_t, libc::c_int, *const libc::timespec, *mut libc::timespec) -> libc::c_int);
    if !config::sealed(flags::WAIT) {
        // SAFETY: forwarded.
        return unsafe { real(clk, fl, req, rem) };
    }
    // SAFETY: forwarded contract; clock_nanosleep returns an error number itself.
    unsafe { clock_nanosleep_impl(clk, fl, req, rem, |c, f, q, m| real(c, f, q, m)) }
}

/// The real `nanosleep` as an error-number function.
fn real_nanosleep(req: *const libc::timespec, rem: *mut libc::timespec) -> i32 {
    let real = real!(nanosleep: fn(*const libc::timespec, *mut libc::timespec) -> libc::c_int);
    // SAFETY: the pointers come from our callers' contracts.
    err_of(unsafe { real(req, rem) })
}

/// # Safety
/// As `nanosleep(2)`.
#[no_mangle]
pub unsafe extern "C" fn nanosleep(
    req: *const libc::timespec,
    rem: *mut libc::timespec,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::Nanosleep, NO_DETAIL, ra);
    if req.is_null() || !config::sealed(flags::WAIT) {
        return ret_of(real_nanosleep(req, rem));
    }
    // SAFETY: req non-null and valid, rem null or valid, per the contract.
    ret_of(unsafe { sleep_for(req, rem, real_nanosleep) })
}

/// glibc's `usleep` calls its internal nanosleep, so it is hooked itself.
///
/// # Safety
/// As `usleep(3)`.
#[no_mangle]
pub unsafe extern "C" fn usleep(us: libc::useconds_t) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::Usleep, NO_DETAIL, ra);
    let req = libc::timespec {
        tv_sec: (us / 1_000_000) as libc::time_t,
        tv_nsec: (us % 1_000_000) as libc::c_long * 1000,
    };
    // SAFETY: req is a valid timespec; no rem.
    ret_of(unsafe { sleep_for(&req, core::ptr::null_mut(), real_nanosleep) })
}

/// glibc's `sleep` calls its internal nanosleep, so it is hooked itself. Returns the unslept
/// seconds when interrupted, as glibc does.
///
/// # Safety
/// As `sleep(3)`.
#[no_mangle]
pub unsafe extern "C" fn sleep(secs: libc::c_uint) -> libc::c_uint {
    let ra = caller!();
    census::count(Fid::Sleep, NO_DETAIL, ra);
    let saved = errno();
    let req = libc::timespec {
        tv_sec: secs as libc::time_t,
        tv_nsec: 0,
    };
    let mut rem = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespecs.
    let err = unsafe { sleep_for(&req, &mut rem, real_nanosleep) };
    if err != 0 {
        set_errno(err);
        return rem.tv_sec as libc::c_uint;
    }
    set_errno(saved);
    0
}

// ---- poll, select, epoll ------------------------------------------------------------------

/// `poll`'s result as a relative wait's ending.
fn poll_ran(r: libc::c_int) -> Ran {
    match r {
        0 => Ran::Full,
        -1 if errno() == libc::EINTR => Ran::Interrupted(None),
        _ => Ran::Early,
    }
}

/// No descriptor to wait for: a `poll` used as a sleep.
///
/// # Safety
/// `fds` valid for `n` entries (or `n` == 0).
unsafe fn poll_fd_less(fds: *const libc::pollfd, n: libc::nfds_t) -> bool {
    // SAFETY: per the contract.
    n == 0 || fds.is_null() || (0..n as usize).all(|i| unsafe { (*fds.add(i)).fd } < 0)
}

/// A relative wait of `ns` through `call(timeout_zero)`; fd-less ones are warpable.
fn timed_poll(ns: i64, fd_less: bool, call: impl Fn(bool) -> libc::c_int) -> libc::c_int {
    relative(
        ns,
        fd_less,
        || {
            let r = call(true);
            (r, poll_ran(r))
        },
        || {
            let r = call(false);
            (r, poll_ran(r))
        },
    )
}

/// Milliseconds to a relative wait, if it is one (`> 0`; negative waits forever).
fn ms_wait(timeout: libc::c_int) -> Option<i64> {
    (timeout > 0 && config::sealed(flags::WAIT)).then_some(timeout as i64 * 1_000_000)
}

/// A timespec timeout to a relative wait, if it is one (non-null, valid, non-zero).
///
/// # Safety
/// `ts` null or valid.
unsafe fn ts_wait(ts: *const libc::timespec) -> Option<i64> {
    if ts.is_null() || !config::sealed(flags::WAIT) {
        return None;
    }
    // SAFETY: non-null, valid per the contract.
    let t = unsafe { &*ts };
    let ns = clock::from_timespec(t);
    (super::valid_timespec(t) && ns > 0).then_some(ns)
}

const ZERO_TS: libc::timespec = libc::timespec {
    tv_sec: 0,
    tv_nsec: 0,
};

/// # Safety
/// As `poll(2)`.
#[no_mangle]
pub unsafe extern "C" fn poll(
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    timeout: libc::c_int,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::Poll, NO_DETAIL, ra);
    let real = real!(poll: fn(*mut libc::pollfd, libc::nfds_t, libc::c_int) -> libc::c_int);
    match ms_wait(timeout) {
        // SAFETY: forwarded contract (the fd-less check reads the caller's array).
        Some(ns) => timed_poll(ns, unsafe { poll_fd_less(fds, n) }, |zero| unsafe {
            real(fds, n, if zero { 0 } else { timeout })
        }),
        // SAFETY: forwarded.
        None => unsafe { real(fds, n, timeout) },
    }
}

/// `poll` under `_FORTIFY_SOURCE` (glibc calls its internal poll from it).
///
/// # Safety
/// As `__poll_chk`.
#[no_mangle]
pub unsafe extern "C" fn __poll_chk(
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    timeout: libc::c_int,
    fdslen: libc::size_t,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::Poll, NO_DETAIL, ra);
    let real = real!(__poll_chk: fn(*mut libc::pollfd, libc::nfds_t, libc::c_int, libc::size_t) -> libc::c_int);
    match ms_wait(timeout) {
        // SAFETY: forwarded contract.
        Some(ns) => timed_poll(ns, unsafe { poll_fd_less(fds, n) }, |zero| unsafe {
            real(fds, n, if zero { 0 } else { timeout }, fdslen)
        }),
        // SAFETY: forwarded.
        None => unsafe { real(fds, n, timeout, fdslen) },
    }
}

/// # Safety
/// As `ppoll(2)`.
#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    ts: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::Ppoll, NO_DETAIL, ra);
    let real = real!(ppoll: fn(*mut libc::pollfd, libc::nfds_t, *const libc::timespec, *const libc::sigset_t) -> libc::c_int);
    // SAFETY: forwarded contract.
    match unsafe { ts_wait(ts) } {
        // SAFETY: forwarded contract.
        Some(ns) => timed_poll(ns, unsafe { poll_fd_less(fds, n) }, |zero| unsafe {
            real(fds, n, if zero { &ZERO_TS } else { ts }, mask)
        }),
        // SAFETY: forwarded.
        None => unsafe { real(fds, n, ts, mask) },
    }
}

/// # Safety
/// As `__ppoll_chk`.
#[no_mangle]
pub unsafe extern "C" fn __ppoll_chk(
    fds: *mut libc::pollfd,
    n: libc::nfds_t,
    ts: *const libc::timespec,
    mask: *const libc::sigset_t,
    fdslen: libc::size_t,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::Ppoll, NO_DETAIL, ra);
    let real = real!(__ppoll_chk: fn(*mut libc::pollfd, libc::nfds_t, *const libc::timespec, *const libc::sigset_t, libc::size_t) -> libc::c_int);
    // SAFETY: forwarded contract.
    match unsafe { ts_wait(ts) } {
        // SAFETY: forwarded contract.
        Some(ns) => timed_poll(ns, unsafe { poll_fd_less(fds, n) }, |zero| unsafe {
            real(fds, n, if zero { &ZERO_TS } else { ts }, mask, fdslen)
        }),
        // SAFETY: forwarded.
        None => unsafe { real(fds, n, ts, mask, fdslen) },
    }
}

/// No descriptor in any of the sets: a `select` used as a sleep.
///
/// # Safety
/// Each set null or a valid `fd_set`.
unsafe fn select_fd_less(nfds: libc::c_int, sets: [*const libc::fd_set; 3]) -> bool {
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

/// # Safety
/// As `select(2)`.
#[no_mangle]
pub unsafe extern "C" fn select(
    nfds: libc::c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    tv: *mut libc::timeval,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::Select, NO_DETAIL, ra);
    let real = real!(select: fn(libc::c_int, *mut libc::fd_set, *mut libc::fd_set, *mut libc::fd_set, *mut libc::timeval) -> libc::c_int);
    let ns = if tv.is_null() || !config::sealed(flags::WAIT) {
        0
    } else {
        // SAFETY: non-null, valid per the contract.
        let t = unsafe { *tv };
        if t.tv_sec < 0 || !(0..1_000_000).contains(&t.tv_usec) {
            0
        } else {
            t.tv_sec.saturating_mul(super::NS_PER_SEC) + t.tv_usec * 1000
        }
    };
    if ns == 0 {
        // SAFETY: forwarded.
        return unsafe { real(nfds, r, w, e, tv) };
    }
    // SAFETY: the sets are null or valid per the contract.
    let fd_less = unsafe { select_fd_less(nfds, [r, w, e]) };
    timed_poll(ns, fd_less, |zero| {
        if zero {
            // The kernel leaves a timed-out select's timeout at zero.
            // SAFETY: tv non-null, valid.
            unsafe {
                *tv = libc::timeval {
                    tv_sec: 0,
                    tv_usec: 0,
                }
            };
        }
        // SAFETY: forwarded.
        unsafe { real(nfds, r, w, e, tv) }
    })
}

/// # Safety
/// As `pselect(2)`.
#[no_mangle]
pub unsafe extern "C" fn pselect(
    nfds: libc::c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    ts: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::Pselect, NO_DETAIL, ra);
    let real = real!(pselect: fn(libc::c_int, *mut libc::fd_set, *mut libc::fd_set, *mut libc::fd_set, *const libc::timespec, *const libc::sigset_t) -> libc::c_int);
    // SAFETY: forwarded contract.
    match unsafe { ts_wait(ts) } {
        // SAFETY: the sets are null or valid; forwarded contract.
        Some(ns) => timed_poll(
            ns,
            unsafe { select_fd_less(nfds, [r, w, e]) },
            |zero| unsafe { real(nfds, r, w, e, if zero { &ZERO_TS } else { ts }, mask) },
        ),
        // SAFETY: forwarded.
        None => unsafe { real(nfds, r, w, e, ts, mask) },
    }
}

/// # Safety
/// As `epoll_wait(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_wait(
    epfd: libc::c_int,
    ev: *mut libc::epoll_event,
    max: libc::c_int,
    timeout: libc::c_int,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::EpollWait, NO_DETAIL, ra);
    let real = real!(epoll_wait: fn(libc::c_int, *mut libc::epoll_event, libc::c_int, libc::c_int) -> libc::c_int);
    match ms_wait(timeout) {
        // SAFETY: forwarded. An epoll set is never treated as fd-less.
        Some(ns) => timed_poll(ns, false, |_| unsafe { real(epfd, ev, max, timeout) }),
        // SAFETY: forwarded.
        None => unsafe { real(epfd, ev, max, timeout) },
    }
}

/// # Safety
/// As `epoll_pwait(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: libc::c_int,
    ev: *mut libc::epoll_event,
    max: libc::c_int,
    timeout: libc::c_int,
    mask: *const libc::sigset_t,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::EpollPwait, NO_DETAIL, ra);
    let real = real!(epoll_pwait: fn(libc::c_int, *mut libc::epoll_event, libc::c_int, libc::c_int, *const libc::sigset_t) -> libc::c_int);
    match ms_wait(timeout) {
        // SAFETY: forwarded.
        Some(ns) => timed_poll(ns, false, |_| unsafe { real(epfd, ev, max, timeout, mask) }),
        // SAFETY: forwarded.
        None => unsafe { real(epfd, ev, max, timeout, mask) },
    }
}

/// Counted as `epoll_pwait` (same family, nanosecond timeout).
///
/// # Safety
/// As `epoll_pwait2(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait2(
    epfd: libc::c_int,
    ev: *mut libc::epoll_event,
    max: libc::c_int,
    ts: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::EpollPwait, NO_DETAIL, ra);
    let real = real!(epoll_pwait2: fn(libc::c_int, *mut libc::epoll_event, libc::c_int, *const libc::timespec, *const libc::sigset_t) -> libc::c_int);
    // SAFETY: forwarded contract.
    match unsafe { ts_wait(ts) } {
        // SAFETY: forwarded.
        Some(ns) => timed_poll(ns, false, |_| unsafe { real(epfd, ev, max, ts, mask) }),
        // SAFETY: forwarded.
        None => unsafe { real(epfd, ev, max, ts, mask) },
    }
}

// ---- timers -------------------------------------------------------------------------------

/// Records that a timer's clock could not be found (its ABSTIME deadline then reaches the
/// kernel untranslated); the launcher warns.
fn timer_clock_unknown(what: &[u8]) {
    census::record_unsealed(seal_abi::unsealed::UNSUPPORTED_CALL, what);
}

/// # Safety
/// As `timerfd_settime(2)`.
#[no_mangle]
pub unsafe extern "C" fn timerfd_settime(
    fd: libc::c_int,
    fl: libc::c_int,
    new: *const libc::itimerspec,
    old: *mut libc::itimerspec,
) -> libc::c_int {
    let ra = caller!();
    let real = real!(timerfd_settime: fn(libc::c_int, libc::c_int, *const libc::itimerspec, *mut libc::itimerspec) -> libc::c_int);
    if fl & libc::TFD_TIMER_ABSTIME == 0 || new.is_null() || !config::sealed(flags::WAIT) {
        census::count(Fid::TimerfdSettime, NO_DETAIL, ra);
        // SAFETY: forwarded.
        return unsafe { real(fd, fl, new, old) };
    }
    let Some(clk) = timerfd_clock(fd) else {
        census::count(Fid::TimerfdSettime, NO_DETAIL, ra);
        timer_clock_unknown(
            b"timerfd_settime: clock of the timerfd unknown, ABSTIME deadline not translated",
        );
        // SAFETY: forwarded.
        return unsafe { real(fd, fl, new, old) };
    };
    census::count(Fid::TimerfdSettime, clock::detail(clk), ra);
    // SAFETY: new non-null and valid per the contract.
    let its = translate_itimer(clk, unsafe { &*new });
    // SAFETY: forwarded with the translated deadline.
    unsafe { real(fd, fl, &its, old) }
}

/// # Safety
/// As `timer_settime(2)`; `t` from glibc's `timer_create`.
#[no_mangle]
pub unsafe extern "C" fn timer_settime(
    t: libc::timer_t,
    fl: libc::c_int,
    new: *const libc::itimerspec,
    old: *mut libc::itimerspec,
) -> libc::c_int {
    let ra = caller!();
    let real = real!(timer_settime: fn(libc::timer_t, libc::c_int, *const libc::itimerspec, *mut libc::itimerspec) -> libc::c_int);
    if fl & libc::TIMER_ABSTIME == 0 || new.is_null() || !config::sealed(flags::WAIT) {
        census::count(Fid::TimerSettime, NO_DETAIL, ra);
        // SAFETY: forwarded.
        return unsafe { real(t, fl, new, old) };
    }
    // SAFETY: t came from timer_create per the contract.
    let Some(clk) = (unsafe { posix_timer_clock(t) }) else {
        census::count(Fid::TimerSettime, NO_DETAIL, ra);
        timer_clock_unknown(
            b"timer_settime: clock of the timer unknown, ABSTIME deadline not translated",
        );
        // SAFETY: forwarded.
        return unsafe { real(t, fl, new, old) };
    };
    census::count(Fid::TimerSettime, clock::detail(clk), ra);
    // SAFETY: new non-null and valid per the contract.
    let its = translate_itimer(clk, unsafe { &*new });
    // SAFETY: forwarded with the translated deadline.
    unsafe { real(t, fl, &its, old) }
}
