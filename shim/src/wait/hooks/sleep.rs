//! The sleeps: `clock_nanosleep`, `nanosleep`, and glibc's `usleep`/`sleep` (which call its
//! internal nanosleep, so they are hooked themselves).

use libc::{c_int, c_uint, clockid_t, timespec};
use seal_abi::flags;

use crate::clock;
use crate::core::config;
use crate::wait::{clock_nanosleep_impl, err_of, errno, ret_of, set_errno, sleep_for};
use crate::{hook, real};

hook! {
    /// # Safety
    /// As `clock_nanosleep(2)`.
    fn clock_nanosleep(clk: clockid_t, fl: c_int, req: *const timespec, rem: *mut timespec) -> c_int;
    fid = ClockNanosleep, detail = clock::detail(clk);
    |real| {
        if !config::sealed(flags::WAIT) {
            return real(clk, fl, req, rem);
        }
        // SAFETY: forwarded contract; clock_nanosleep returns an error number itself.
        unsafe { clock_nanosleep_impl(clk, fl, req, rem, real) }
    }
}

/// The real `nanosleep` as an error-number function.
fn real_nanosleep(req: *const timespec, rem: *mut timespec) -> i32 {
    let real = real!(nanosleep: fn(*const timespec, *mut timespec) -> c_int);
    // SAFETY: the pointers come from our callers' contracts.
    err_of(unsafe { real(req, rem) })
}

hook! {
    /// # Safety
    /// As `nanosleep(2)`.
    fn nanosleep(req: *const timespec, rem: *mut timespec) -> c_int;
    fid = Nanosleep;
    || {
        // A null or unmapped request goes to the kernel, which answers EFAULT.
        if req.is_null()
            || !crate::core::sys::mapped(req, core::mem::size_of::<timespec>())
            || !config::sealed(flags::WAIT)
        {
            return ret_of(real_nanosleep(req, rem));
        }
        // SAFETY: req non-null and valid, rem null or valid, per the contract.
        ret_of(unsafe { sleep_for(req, rem, real_nanosleep) })
    }
}

hook! {
    /// glibc's `usleep` calls its internal nanosleep, so it is hooked itself.
    ///
    /// # Safety
    /// As `usleep(3)`.
    fn usleep(us: libc::useconds_t) -> c_int;
    fid = Usleep;
    || {
        let req = timespec {
            tv_sec: (us / 1_000_000) as libc::time_t,
            tv_nsec: (us % 1_000_000) as libc::c_long * 1000,
        };
        // SAFETY: req is a valid timespec; no rem.
        ret_of(unsafe { sleep_for(&req, core::ptr::null_mut(), real_nanosleep) })
    }
}

hook! {
    /// glibc's `sleep` calls its internal nanosleep, so it is hooked itself. Returns the
    /// unslept seconds when interrupted, as glibc does.
    ///
    /// # Safety
    /// As `sleep(3)`.
    fn sleep(secs: c_uint) -> c_uint;
    fid = Sleep;
    || {
        let saved = errno();
        let req = timespec {
            tv_sec: secs as libc::time_t,
            tv_nsec: 0,
        };
        let mut rem = timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid timespecs.
        let err = unsafe { sleep_for(&req, &mut rem, real_nanosleep) };
        if err != 0 {
            set_errno(err);
            return rem.tv_sec as c_uint;
        }
        set_errno(saved);
        0
    }
}
