//! The `syscall()` paths of the wait family: `syscall(SYS_futex, …)` (timed futex waits, as
//! Rust's std and the JVM make them) and `syscall(SYS_clock_nanosleep, …)`, called by
//! `crate::syscall`.

use seal_abi::{flags, Fid};

use super::{
    absolute, clock_nanosleep_impl, err_of, relative, ret_of, valid_timespec, Ran, Reached,
};
use crate::clock;
use crate::core::{census, config};
use crate::real;

const FUTEX_WAIT: libc::c_long = 0;
const FUTEX_LOCK_PI: libc::c_long = 6;
const FUTEX_WAIT_BITSET: libc::c_long = 9;
const FUTEX_WAIT_REQUEUE_PI: libc::c_long = 11;
const FUTEX_LOCK_PI2: libc::c_long = 13;
const FUTEX_PRIVATE_FLAG: libc::c_long = 128;
const FUTEX_CLOCK_REALTIME: libc::c_long = 256;

/// What a futex operation does with its timeout argument.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FutexTimeout {
    /// No timeout, or an op without one: not a timed wait (passed through, not counted).
    None,
    /// `FUTEX_WAIT`: a relative timeout.
    Relative,
    /// An absolute deadline on this clock.
    Absolute(libc::clockid_t),
}

pub fn futex_timeout(op: libc::c_long, has_timeout: bool) -> FutexTimeout {
    if !has_timeout {
        return FutexTimeout::None;
    }
    let rt = op & FUTEX_CLOCK_REALTIME != 0;
    match op & !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME) {
        FUTEX_WAIT => FutexTimeout::Relative,
        FUTEX_WAIT_BITSET | FUTEX_WAIT_REQUEUE_PI | FUTEX_LOCK_PI2 => {
            FutexTimeout::Absolute(if rt {
                libc::CLOCK_REALTIME
            } else {
                libc::CLOCK_MONOTONIC
            })
        }
        FUTEX_LOCK_PI => FutexTimeout::Absolute(libc::CLOCK_REALTIME),
        _ => FutexTimeout::None,
    }
}

type SyscallFn = unsafe extern "C" fn(
    libc::c_long,
    libc::c_long,
    libc::c_long,
    libc::c_long,
    libc::c_long,
    libc::c_long,
    libc::c_long,
) -> libc::c_long;

fn real_syscall() -> SyscallFn {
    real!(syscall: fn(libc::c_long, libc::c_long, libc::c_long, libc::c_long, libc::c_long, libc::c_long, libc::c_long) -> libc::c_long)
}

/// Runs the real `syscall(n, a…)` and returns its outcome as an error number (0 = success).
///
/// # Safety
/// Arguments valid for `n`.
unsafe fn syscall_err(n: libc::c_long, a: [libc::c_long; 6]) -> i32 {
    // SAFETY: forwarded.
    let r = unsafe { real_syscall()(n, a[0], a[1], a[2], a[3], a[4], a[5]) };
    err_of(r)
}

/// The `syscall()` convention for an error number: 0, or -1 with errno set.
fn syscall_ret(err: i32) -> libc::c_long {
    ret_of(err) as libc::c_long
}

/// `syscall(SYS_futex, …)`: `Some(result)` when handled here, `None` to pass through. Timed
/// waits are counted and translated (Rust's std: `Condvar::wait_timeout`, thread parking and
/// `mpsc::recv_timeout` use `FUTEX_WAIT_BITSET` on `CLOCK_MONOTONIC`); other futex ops
/// (wakes, untimed waits) pass through uncounted: they carry no time.
///
/// # Safety
/// Arguments as the futex system call takes them.
pub unsafe fn sys_futex(_n: libc::c_long, a: [libc::c_long; 6], ra: u64) -> Option<libc::c_long> {
    let op = a[1];
    let ts = a[3] as *const libc::timespec;
    let kind = futex_timeout(op, !ts.is_null());
    let clock_detail = match kind {
        FutexTimeout::None => return None,
        FutexTimeout::Relative => clock::detail(if op & FUTEX_CLOCK_REALTIME != 0 {
            libc::CLOCK_REALTIME
        } else {
            libc::CLOCK_MONOTONIC
        }),
        FutexTimeout::Absolute(c) => clock::detail(c),
    };
    census::count(Fid::SysFutex, clock_detail, ra);
    if !config::sealed(flags::WAIT) {
        return None;
    }
    let with_ts = |t: *const libc::timespec| {
        let mut b = a;
        b[3] = t as libc::c_long;
        // SAFETY: the caller's arguments with an equivalent timeout.
        unsafe { syscall_err(libc::SYS_futex, b) }
    };
    match kind {
        FutexTimeout::None => None,
        FutexTimeout::Relative => {
            // SAFETY: non-null, valid per the contract.
            let rel = unsafe { *ts };
            let ns = clock::from_timespec(&rel);
            if !valid_timespec(&rel) || ns == 0 {
                return None;
            }
            let classify = |err: i32| match err {
                libc::ETIMEDOUT => Ran::Full,
                libc::EINTR => Ran::Interrupted(None),
                _ => Ran::Early,
            };
            // Under --warp, waited again with the same expected value after a slice: a wake
            // in between changed the word, and the next slice returns EAGAIN at once.
            let err = relative(
                ns,
                true,
                |slice| {
                    let e = with_ts(&clock::to_timespec(slice));
                    (e, classify(e))
                },
                || {
                    let e = with_ts(ts);
                    (e, classify(e))
                },
            );
            Some(syscall_ret(err))
        }
        FutexTimeout::Absolute(c) => {
            // Under --warp, waited again with a later deadline after a slice, except a
            // requeue-PI wait (paired with a condvar's requeue: a timeout is final).
            let sliceable =
                || op & !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME) != FUTEX_WAIT_REQUEUE_PI;
            // SAFETY: ts valid per the contract.
            let err = unsafe { absolute(c, c, ts, Reached::OnTimedout, sliceable, with_ts) };
            Some(syscall_ret(err))
        }
    }
}

/// `syscall(SYS_clock_nanosleep, …)`: as `clock_nanosleep`, with the `syscall()` convention.
///
/// # Safety
/// Arguments as the system call takes them.
pub unsafe fn sys_clock_nanosleep(
    _n: libc::c_long,
    a: [libc::c_long; 6],
    ra: u64,
) -> Option<libc::c_long> {
    let clock_id = a[0] as libc::clockid_t;
    census::count(Fid::SysNanosleep, clock::detail(clock_id), ra);
    if !config::sealed(flags::WAIT) {
        return None;
    }
    let call =
        |c: libc::clockid_t, f: libc::c_int, q: *const libc::timespec, m: *mut libc::timespec| {
            let mut b = a;
            b[0] = c as libc::c_long;
            b[1] = f as libc::c_long;
            b[2] = q as libc::c_long;
            b[3] = m as libc::c_long;
            // SAFETY: the caller's arguments with an equivalent request.
            unsafe { syscall_err(libc::SYS_clock_nanosleep, b) }
        };
    // SAFETY: forwarded contract.
    let err = unsafe {
        clock_nanosleep_impl(
            clock_id,
            a[1] as libc::c_int,
            a[2] as *const libc::timespec,
            a[3] as *mut libc::timespec,
            call,
        )
    };
    Some(syscall_ret(err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn futex_ops() {
        assert_eq!(
            futex_timeout(FUTEX_WAIT | FUTEX_PRIVATE_FLAG, true),
            FutexTimeout::Relative
        );
        assert_eq!(
            futex_timeout(FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, true),
            FutexTimeout::Absolute(libc::CLOCK_MONOTONIC)
        );
        assert_eq!(
            futex_timeout(FUTEX_WAIT_BITSET | FUTEX_CLOCK_REALTIME, true),
            FutexTimeout::Absolute(libc::CLOCK_REALTIME)
        );
        assert_eq!(
            futex_timeout(FUTEX_LOCK_PI, true),
            FutexTimeout::Absolute(libc::CLOCK_REALTIME)
        );
        assert_eq!(futex_timeout(FUTEX_WAIT_BITSET, false), FutexTimeout::None);
        assert_eq!(futex_timeout(1 /* WAKE */, true), FutexTimeout::None);
    }
}
