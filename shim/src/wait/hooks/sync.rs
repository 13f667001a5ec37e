//! Timed waits on sync objects: an absolute deadline, translated by `wait::absolute`.
//!
//! Under `--warp` a semaphore, mutex, rwlock, message queue or join wait is waited in real
//! slices (called again with a later deadline when a slice runs out: the object keeps its
//! state). A condvar wait is not: a slice that ran out would have to return a spurious wakeup,
//! and callers that compute a fresh relative deadline after one (Python's GIL, `awaitNanos`)
//! would never time out while the run is busy. It waits once, and can only warp at its start.
//! A condvar's clock is read from glibc 2.36's x86_64 layout: `__data.__wrefs` (byte 36:
//! bit 1 `CLOCK_MONOTONIC`, see nptl/pthread_cond_common.c).

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

use libc::{
    c_char, c_int, c_uint, c_void, clockid_t, mqd_t, pthread_cond_t, pthread_mutex_t,
    pthread_rwlock_t, pthread_t, sem_t, size_t, ssize_t, timespec, CLOCK_REALTIME,
};

use crate::clock::detail;
use crate::hook;
use crate::wait::{absolute, err_of, errno, ret_of, set_errno, Reached};

// ---- glibc internals (2.36, x86_64) -------------------------------------------------------

/// `__data.__wrefs` of a condvar.
///
/// # Safety
/// `cond` points to an initialised `pthread_cond_t`.
unsafe fn cond_wrefs(cond: *const pthread_cond_t) -> u32 {
    // SAFETY: __wrefs is an aligned u32 at byte 36 of the 48-byte pthread_cond_t, read
    // atomically as glibc itself does.
    unsafe { (*((cond as *const u8).add(36) as *const AtomicU32)).load(Relaxed) }
}

/// The clock a condvar's deadlines are on (`pthread_condattr_setclock`).
///
/// # Safety
/// As [`cond_wrefs`].
unsafe fn cond_clock(cond: *const pthread_cond_t) -> clockid_t {
    // SAFETY: forwarded.
    if unsafe { cond_wrefs(cond) } & 2 != 0 {
        libc::CLOCK_MONOTONIC
    } else {
        CLOCK_REALTIME
    }
}

/// A timed wait until `abstime` on `clk` (the clock the real function compares with too) that
/// reports reaching it as `ETIMEDOUT`; `call` returns an error number.
///
/// # Safety
/// `abstime` null or valid for reads.
#[inline(always)]
unsafe fn until(
    clk: clockid_t,
    abstime: *const timespec,
    sliceable: impl FnOnce() -> bool,
    call: impl FnMut(*const timespec) -> i32,
) -> i32 {
    // SAFETY: per the contract.
    unsafe { absolute(clk, clk, abstime, Reached::OnTimedout, sliceable, call) }
}

/// C11's `thrd_timedout`: mapped to `ETIMEDOUT` for [`until`], and back.
const THRD_TIMEDOUT: c_int = 4;

fn from_thrd(r: c_int) -> i32 {
    if r == THRD_TIMEDOUT {
        libc::ETIMEDOUT
    } else {
        r
    }
}

fn to_thrd(r: i32) -> c_int {
    if r == libc::ETIMEDOUT {
        THRD_TIMEDOUT
    } else {
        r
    }
}

// ---- condition variables ------------------------------------------------------------------

/// A condvar wait from `ra` (`fp`: the hook's frame pointer): CPython's GIL and HotSpot's own
/// waits are the runtime's bookkeeping (no clock moves), HotSpot's parking for the program
/// stays out of the streak rule (`crate::runtime`), the rest is the program's.
#[inline(always)]
fn runtime_wait(ra: u64, fp: u64, wait: impl FnOnce() -> c_int) -> c_int {
    use crate::wait::{owned_by, Owner};
    if crate::runtime::gil_wait(ra) {
        return owned_by(Owner::Gil, wait);
    }
    match crate::runtime::jvm_wait(ra, fp) {
        Some(true) => owned_by(Owner::Jvm, wait),
        Some(false) => owned_by(Owner::JvmOwn, wait),
        None => wait(),
    }
}

hook! {
    /// # Safety
    /// As `pthread_cond_timedwait(3)`.
    fn pthread_cond_timedwait(
        cond: *mut pthread_cond_t,
        mutex: *mut pthread_mutex_t,
        abstime: *const timespec,
    ) -> c_int;
    caller = ra;
    |real| {
        if cond.is_null() {
            crate::core::census::count(seal_abi::Fid::CondTimedwait, seal_abi::NO_DETAIL, ra);
            return real(cond, mutex, abstime);
        }
        // SAFETY: cond is an initialised condvar per the contract.
        let clk = unsafe { cond_clock(cond) };
        crate::core::census::count(seal_abi::Fid::CondTimedwait, detail(clk), ra);
        // SAFETY: forwarded contract; cond is initialised.
        let wait = || unsafe {
            until(clk, abstime, || false, |ts| real(cond, mutex, ts))
        };
        runtime_wait(ra, crate::frame!(), wait)
    }
}

hook! {
    /// # Safety
    /// As `pthread_cond_clockwait(3)`.
    fn pthread_cond_clockwait(
        cond: *mut pthread_cond_t,
        mutex: *mut pthread_mutex_t,
        clk: clockid_t,
        abstime: *const timespec,
    ) -> c_int;
    caller = ra;
    |real| {
        crate::core::census::count(seal_abi::Fid::CondClockwait, detail(clk), ra);
        // SAFETY: forwarded contract.
        let wait = || unsafe { until(clk, abstime, || false, |ts| real(cond, mutex, clk, ts)) };
        runtime_wait(ra, crate::frame!(), wait)
    }
}

hook! {
    /// C11 `cnd_timedwait` (glibc calls its condvar internally, so it is hooked itself): a
    /// `CLOCK_REALTIME` deadline.
    ///
    /// # Safety
    /// As `cnd_timedwait(3)`.
    fn cnd_timedwait(
        cond: *mut pthread_cond_t,
        mutex: *mut pthread_mutex_t,
        abstime: *const timespec,
    ) -> c_int;
    fid = CondTimedwait, detail = detail(CLOCK_REALTIME);
    // SAFETY: forwarded contract.
    |real| to_thrd(unsafe {
        until(CLOCK_REALTIME, abstime, || false, |ts| from_thrd(real(cond, mutex, ts)))
    })
}

hook! {
    /// C11 `mtx_timedlock` (glibc calls its mutex internally): a `CLOCK_REALTIME` deadline.
    ///
    /// # Safety
    /// As `mtx_timedlock(3)`.
    fn mtx_timedlock(m: *mut pthread_mutex_t, abstime: *const timespec) -> c_int;
    fid = MtxTimedlock, detail = detail(CLOCK_REALTIME);
    // SAFETY: forwarded contract.
    |real| to_thrd(unsafe {
        until(CLOCK_REALTIME, abstime, || true, |ts| from_thrd(real(m, ts)))
    })
}

// ---- message queues -----------------------------------------------------------------------

hook! {
    /// # Safety
    /// As `mq_timedreceive(3)`.
    fn mq_timedreceive(
        q: mqd_t,
        msg: *mut c_char,
        len: size_t,
        prio: *mut c_uint,
        abstime: *const timespec,
    ) -> ssize_t;
    fid = MqTimedreceive, detail = detail(CLOCK_REALTIME);
    |real| {
        let mut got: ssize_t = -1;
        // SAFETY: forwarded contract.
        let err = unsafe {
            until(CLOCK_REALTIME, abstime, || true, |ts| {
                got = real(q, msg, len, prio, ts);
                if got < 0 {
                    errno()
                } else {
                    0
                }
            })
        };
        if err != 0 {
            set_errno(err);
            return -1;
        }
        got
    }
}

hook! {
    /// # Safety
    /// As `mq_timedsend(3)`.
    fn mq_timedsend(
        q: mqd_t,
        msg: *const c_char,
        len: size_t,
        prio: c_uint,
        abstime: *const timespec,
    ) -> c_int;
    fid = MqTimedsend, detail = detail(CLOCK_REALTIME);
    // SAFETY: forwarded contract.
    |real| ret_of(unsafe {
        until(CLOCK_REALTIME, abstime, || true, |ts| err_of(real(q, msg, len, prio, ts)))
    })
}

// ---- semaphores ---------------------------------------------------------------------------

hook! {
    /// # Safety
    /// As `sem_timedwait(3)`.
    fn sem_timedwait(sem: *mut sem_t, abstime: *const timespec) -> c_int;
    fid = SemTimedwait, detail = detail(CLOCK_REALTIME);
    // SAFETY: forwarded contract.
    |real| ret_of(unsafe {
        until(CLOCK_REALTIME, abstime, || true, |ts| err_of(real(sem, ts)))
    })
}

hook! {
    /// # Safety
    /// As `sem_clockwait(3)`.
    fn sem_clockwait(sem: *mut sem_t, clk: clockid_t, abstime: *const timespec) -> c_int;
    caller = ra;
    |real| {
        crate::core::census::count(seal_abi::Fid::SemClockwait, detail(clk), ra);
        python_lock_bookkeeping(ra, true);
        // SAFETY: forwarded contract.
        ret_of(unsafe {
            until(clk, abstime, || true, |ts| err_of(real(sem, clk, ts)))
        })
    }
}

/// CPython's lock code read the clock for this semaphore call's deadline: take its tick back
/// (`crate::runtime::python_lock_read`).
#[inline]
fn python_lock_bookkeeping(ra: u64, timed: bool) {
    if crate::core::config::sealed(seal_abi::flags::TIME)
        && crate::core::config::RATE_PPM.load(core::sync::atomic::Ordering::Relaxed) == 0
        && crate::runtime::python_lock_read(ra, timed)
    {
        crate::core::thread::refund_tick();
    }
}

hook! {
    /// Not timed waits: hooked for CPython's lock bookkeeping only, uncounted.
    ///
    /// # Safety
    /// As `sem_wait(3)` / `sem_trywait(3)`.
    fn sem_wait | sem_trywait(sem: *mut sem_t) -> c_int;
    caller = ra;
    |real| {
        python_lock_bookkeeping(ra, false);
        real(sem)
    }
}

// ---- mutexes, rwlocks, joins --------------------------------------------------------------

/// A lock's two timed forms, waited through [`until`] (sliceable: the lock keeps its state):
/// `timed` with a `CLOCK_REALTIME` deadline, counted as `tfid`, and `clocked` with a deadline
/// on the clock its caller names, counted as `cfid`.
macro_rules! timed_lock {
    ($lock:ty: $timed:ident = $tfid:ident, $clocked:ident = $cfid:ident) => {
        hook! {
            /// # Safety
            #[doc = concat!("As `", stringify!($timed), "(3)`.")]
            fn $timed(l: *mut $lock, abstime: *const timespec) -> c_int;
            fid = $tfid, detail = detail(CLOCK_REALTIME);
            // SAFETY: forwarded contract.
            |real| unsafe { until(CLOCK_REALTIME, abstime, || true, |ts| real(l, ts)) }
        }

        hook! {
            /// # Safety
            #[doc = concat!("As `", stringify!($clocked), "(3)`.")]
            fn $clocked(l: *mut $lock, clk: clockid_t, abstime: *const timespec) -> c_int;
            fid = $cfid, detail = detail(clk);
            // SAFETY: forwarded contract.
            |real| unsafe { until(clk, abstime, || true, |ts| real(l, clk, ts)) }
        }
    };
}

timed_lock!(pthread_mutex_t:
    pthread_mutex_timedlock = MutexTimedlock, pthread_mutex_clocklock = MutexClocklock);
timed_lock!(pthread_rwlock_t:
    pthread_rwlock_timedrdlock = RwlockTimedrdlock, pthread_rwlock_clockrdlock = RwlockClockrdlock);
timed_lock!(pthread_rwlock_t:
    pthread_rwlock_timedwrlock = RwlockTimedwrlock, pthread_rwlock_clockwrlock = RwlockClockwrlock);

hook! {
    /// # Safety
    /// As `pthread_timedjoin_np(3)`.
    fn pthread_timedjoin_np(
        th: pthread_t,
        retval: *mut *mut c_void,
        abstime: *const timespec,
    ) -> c_int;
    fid = TimedjoinNp, detail = detail(CLOCK_REALTIME);
    // SAFETY: forwarded contract.
    |real| crate::causal::join_done(th, unsafe {
        until(CLOCK_REALTIME, abstime, || true, |ts| real(th, retval, ts))
    })
}

hook! {
    /// # Safety
    /// As `pthread_clockjoin_np(3)`.
    fn pthread_clockjoin_np(
        th: pthread_t,
        retval: *mut *mut c_void,
        clk: clockid_t,
        abstime: *const timespec,
    ) -> c_int;
    fid = ClockjoinNp, detail = detail(clk);
    // SAFETY: forwarded contract.
    |real| crate::causal::join_done(th, unsafe {
        until(clk, abstime, || true, |ts| real(th, retval, clk, ts))
    })
}
