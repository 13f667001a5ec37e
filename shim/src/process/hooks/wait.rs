//! Waits: virtual pid arguments, virtual pids returned, reaped statuses recorded for the
//! census.

use libc::{c_int, pid_t};

use super::shown_pid;
use crate::core::config;
use crate::process::{reaped, vpid, wait_status};
use crate::{hook, real};

hook! {
    /// # Safety
    /// As `wait4(2)`.
    fn wait4(pid: pid_t, status: *mut c_int, options: c_int, rusage: *mut libc::rusage) -> pid_t;
    fid = Wait4;
    // SAFETY: forwarded.
    || unsafe { wait4_impl(pid, status, options, rusage) }
}

/// # Safety
/// As `wait4(2)`.
unsafe fn wait4_impl(
    pid: pid_t,
    status: *mut c_int,
    options: c_int,
    rusage: *mut libc::rusage,
) -> pid_t {
    let real = real!(wait4: fn(pid_t, *mut c_int, c_int, *mut libc::rusage) -> pid_t);
    if !config::in_run() {
        // SAFETY: forwarded.
        return unsafe { real(pid, status, options, rusage) };
    }
    let pid = if vpid::sealed() {
        vpid::pid_arg_to_real(pid)
    } else {
        pid
    };
    let mut st: c_int = 0;
    // SAFETY: forwarded, with our own status word.
    let r = unsafe { real(pid, &mut st, options, rusage) };
    if r <= 0 {
        return r;
    }
    if !status.is_null() {
        // SAFETY: the caller's status pointer.
        unsafe { *status = st };
    }
    if !rusage.is_null() && config::sealed(seal_abi::flags::TIME) {
        // SAFETY: the kernel just filled the caller's rusage.
        unsafe { crate::clock::seal_rusage(libc::RUSAGE_CHILDREN, 0, rusage) };
    }
    reaped(r, st)
}

hook! {
    /// # Safety
    /// As `waitpid(2)`.
    fn waitpid(pid: pid_t, status: *mut c_int, options: c_int) -> pid_t;
    fid = Waitpid;
    // SAFETY: forwarded.
    || unsafe { wait4_impl(pid, status, options, core::ptr::null_mut()) }
}

hook! {
    /// # Safety
    /// As `wait(2)`.
    fn wait(status: *mut c_int) -> pid_t;
    fid = WaitFn;
    // SAFETY: forwarded.
    || unsafe { wait4_impl(-1, status, 0, core::ptr::null_mut()) }
}

hook! {
    /// # Safety
    /// As `wait3(2)`.
    fn wait3(status: *mut c_int, options: c_int, rusage: *mut libc::rusage) -> pid_t;
    fid = Wait4;
    // SAFETY: forwarded.
    || unsafe { wait4_impl(-1, status, options, rusage) }
}

hook! {
    /// # Safety
    /// As `waitid(2)`.
    fn waitid(
        idtype: libc::idtype_t,
        id: libc::id_t,
        infop: *mut libc::siginfo_t,
        options: c_int,
    ) -> c_int;
    fid = Waitid;
    |real| {
        if !config::in_run() {
            return real(idtype, id, infop, options);
        }
        let id = if vpid::sealed() && (idtype == libc::P_PID || idtype == libc::P_PGID) {
            vpid::to_real(id as pid_t) as libc::id_t
        } else {
            id
        };
        let r = real(idtype, id, infop, options);
        if r != 0 || infop.is_null() {
            return r;
        }
        // siginfo_t for SIGCHLD: si_code at 8, si_pid at 16, si_status at 24.
        let base = infop as *mut u8;
        // SAFETY: infop points to a siginfo_t the kernel just filled.
        unsafe {
            let code = *(base.add(8) as *const c_int);
            let pid_p = base.add(16) as *mut pid_t;
            let st = *(base.add(24) as *const c_int);
            if *pid_p > 0 {
                *pid_p = match wait_status(code, st) {
                    Some(ws) if options & libc::WNOWAIT == 0 => reaped(*pid_p, ws),
                    _ => shown_pid(*pid_p),
                };
            }
        }
        r
    }
}
