//! Exported process entry points: pids, signals, waits, process groups, fork/vfork/clone, the
//! exec family, posix_spawn, system/popen, and pthread_create's trampoline.
//!
//! Each: count the call; when not in a sealed run, call the real function; otherwise translate
//! pids in (virtual -> real) and out (real -> virtual) when the `pid` family is sealed, and
//! hand every new image its sealed environment (whatever the family flags).
//!
//! This file: identity, and the calls that take or return a pid (signals, process groups,
//! sessions, affinity, pidfds, priorities, scheduling, limits). `wait.rs`: the wait family.
//! `fork.rs`: fork, vfork, clone, pthread_create. `exec.rs`: the exec family. `spawn.rs`:
//! posix_spawn, system, popen. `path.rs`: `/proc/<vpid>` through the path calls that are not
//! opens.

mod exec;
mod fork;
pub(crate) mod path;
mod spawn;
mod wait;

pub use exec::resolve_early;
pub(crate) use exec::sys_exec;

use libc::{c_int, pid_t};

use super::vpid;
use crate::hook;

/// A pid argument as the kernel knows it: the real pid behind a virtual one when the `pid`
/// family is sealed (also for pids our own spawn handed out).
fn real_pid(pid: pid_t) -> pid_t {
    if vpid::sealed() {
        vpid::to_real(pid)
    } else {
        pid
    }
}

/// A pid result as the program sees it.
fn shown_pid(r: pid_t) -> pid_t {
    if vpid::sealed() {
        vpid::to_virt(r)
    } else {
        r
    }
}

// ---------------------------------------------------------------------------------------------
// Identity

hook! {
    /// # Safety
    /// As `getpid(2)`.
    /// (`__getpid` is glibc's exported alias.)
    fn getpid | __getpid() -> pid_t;
    fid = Getpid;
    || vpid::getpid_value()
}

hook! {
    /// # Safety
    /// As `getppid(2)`.
    fn getppid() -> pid_t;
    fid = Getppid;
    || vpid::getppid_value()
}

hook! {
    /// # Safety
    /// As `gettid(2)`.
    fn gettid() -> pid_t;
    fid = Gettid;
    || vpid::gettid_value()
}

// ---------------------------------------------------------------------------------------------
// Signals, process groups, sessions, affinity, pidfds: virtual pids in, virtual pids out.

hook! {
    /// # Safety
    /// As `kill(2)`.
    fn kill(pid: pid_t, sig: c_int) -> c_int;
    fid = Kill;
    |real| real(if vpid::sealed() { vpid::pid_arg_to_real(pid) } else { pid }, sig)
}

hook! {
    /// # Safety
    /// As `killpg(3)`.
    fn killpg(pgrp: pid_t, sig: c_int) -> c_int;
    fid = Killpg;
    |real| real(real_pid(pgrp), sig)
}

hook! {
    /// # Safety
    /// As `tgkill(2)`.
    fn tgkill(tgid: pid_t, tid: pid_t, sig: c_int) -> c_int;
    fid = Tgkill;
    |real| real(real_pid(tgid), real_pid(tid), sig)
}

hook! {
    /// # Safety
    /// As `getpgid(2)`.
    fn getpgid(pid: pid_t) -> pid_t;
    fid = Getpgid;
    |real| shown_pid(real(real_pid(pid)))
}

hook! {
    /// # Safety
    /// As `getsid(2)`.
    fn getsid(pid: pid_t) -> pid_t;
    fid = Getsid;
    |real| shown_pid(real(real_pid(pid)))
}

hook! {
    /// # Safety
    /// As `getpgrp(2)`.
    fn getpgrp() -> pid_t;
    fid = Getpgrp;
    |real| shown_pid(real())
}

hook! {
    /// # Safety
    /// As `setpgid(2)`.
    fn setpgid(pid: pid_t, pgid: pid_t) -> c_int;
    fid = Setpgid;
    |real| real(real_pid(pid), real_pid(pgid))
}

hook! {
    /// The terminal's foreground process group: a pgid like any other (job-control shells).
    ///
    /// # Safety
    /// As `tcgetpgrp(3)`.
    fn tcgetpgrp(fd: c_int) -> pid_t;
    fid = Tcgetpgrp;
    |real| shown_pid(real(fd))
}

hook! {
    /// # Safety
    /// As `tcsetpgrp(3)`.
    fn tcsetpgrp(fd: c_int, pgrp: pid_t) -> c_int;
    fid = Tcsetpgrp;
    |real| real(fd, real_pid(pgrp))
}

hook! {
    /// # Safety
    /// As `pidfd_open(2)`.
    fn pidfd_open(pid: pid_t, flags: libc::c_uint) -> c_int;
    fid = PidfdOpen;
    |real| real(real_pid(pid), flags)
}

// ---------------------------------------------------------------------------------------------
// Other calls that take a pid: `renice -p`, `prlimit --pid`, `chrt -p`, `sigqueue`.

/// `who` of `getpriority`/`setpriority` as the kernel knows it.
fn priority_who(n: libc::c_long, which: c_int, who: libc::id_t) -> libc::id_t {
    if vpid::sealed() {
        super::priority_who_to_real(n, which, who as i32) as libc::id_t
    } else {
        who
    }
}

hook! {
    /// # Safety
    /// As `getpriority(2)`.
    fn getpriority(which: c_int, who: libc::id_t) -> c_int;
    fid = Getpriority;
    |real| real(which, priority_who(libc::SYS_getpriority, which, who))
}

hook! {
    /// # Safety
    /// As `setpriority(2)`.
    fn setpriority(which: c_int, who: libc::id_t, prio: c_int) -> c_int;
    fid = Setpriority;
    |real| real(which, priority_who(libc::SYS_setpriority, which, who), prio)
}

hook! {
    /// # Safety
    /// As `prlimit(2)`.
    fn prlimit(pid: pid_t, resource: c_int, new: *const libc::rlimit, old: *mut libc::rlimit) -> c_int;
    fid = Prlimit;
    |real| real(real_pid(pid), resource, new, old)
}

hook! {
    /// # Safety
    /// As `prlimit64(2)`.
    fn prlimit64(
        pid: pid_t,
        resource: c_int,
        new: *const libc::rlimit64,
        old: *mut libc::rlimit64,
    ) -> c_int;
    fid = Prlimit;
    |real| real(real_pid(pid), resource, new, old)
}

hook! {
    /// # Safety
    /// As `sched_getscheduler(2)`.
    fn sched_getscheduler(pid: pid_t) -> c_int;
    fid = SchedGetscheduler;
    |real| real(real_pid(pid))
}

hook! {
    /// # Safety
    /// As `sched_setscheduler(2)`.
    fn sched_setscheduler(pid: pid_t, policy: c_int, param: *const libc::sched_param) -> c_int;
    fid = SchedSetscheduler;
    |real| real(real_pid(pid), policy, param)
}

hook! {
    /// # Safety
    /// As `sched_getparam(2)`.
    fn sched_getparam(pid: pid_t, param: *mut libc::sched_param) -> c_int;
    fid = SchedGetparam;
    |real| real(real_pid(pid), param)
}

hook! {
    /// # Safety
    /// As `sched_setparam(2)`.
    fn sched_setparam(pid: pid_t, param: *const libc::sched_param) -> c_int;
    fid = SchedSetparam;
    |real| real(real_pid(pid), param)
}

hook! {
    /// # Safety
    /// As `sched_rr_get_interval(2)`.
    fn sched_rr_get_interval(pid: pid_t, tp: *mut libc::timespec) -> c_int;
    fid = SchedRrGetInterval;
    |real| real(real_pid(pid), tp)
}

hook! {
    /// `union sigval` is one pointer-sized integer in a register on x86_64.
    ///
    /// # Safety
    /// As `sigqueue(3)`.
    fn sigqueue(pid: pid_t, sig: c_int, value: usize) -> c_int;
    fid = Sigqueue;
    |real| real(real_pid(pid), sig, value)
}

// ---------------------------------------------------------------------------------------------
// Tracers: gdb and strace attach to, stop, read and resume their tracee by the pid they were
// shown (a virtual one).

/// `PTRACE_GETEVENTMSG` (<sys/ptrace.h>).
const PTRACE_GETEVENTMSG: c_int = 0x4201;

hook! {
    /// glibc's `ptrace` is variadic (`request, ...`); every request passes at most a pid, an
    /// address and a data word, in registers on x86_64, as this fixed signature reads them.
    ///
    /// # Safety
    /// As `ptrace(2)`.
    fn ptrace(request: c_int, pid: pid_t, addr: *mut libc::c_void, data: *mut libc::c_void) -> libc::c_long;
    fid = Ptrace;
    |real| {
        let r = real(request, real_pid(pid), addr, data);
        // The message of a fork, vfork or clone stop is the new process's real pid: shown
        // virtual if it has registered itself, else as it is, and then kept real for this
        // tracer (`vpid::show_raw`). Other stops' messages (an exit status) are left alone
        // unless they happen to be a run process's real pid.
        if r == 0 && request == PTRACE_GETEVENTMSG && !data.is_null() && vpid::sealed() {
            // SAFETY: the kernel just wrote an unsigned long there.
            let msg = unsafe { &mut *(data as *mut libc::c_ulong) };
            if let Ok(p) = pid_t::try_from(*msg) {
                let shown = shown_pid(p);
                if shown == p && p > 0 {
                    vpid::show_raw(p);
                }
                *msg = shown as libc::c_ulong;
            }
        }
        r
    }
}

hook! {
    /// # Safety
    /// As `process_vm_readv(2)` / `process_vm_writev(2)`.
    fn process_vm_readv | process_vm_writev(
        pid: pid_t,
        local: *const libc::iovec,
        nlocal: libc::c_ulong,
        remote: *const libc::iovec,
        nremote: libc::c_ulong,
        flags: libc::c_ulong
    ) -> libc::ssize_t;
    fid = ProcessVm;
    |real| real(real_pid(pid), local, nlocal, remote, nremote, flags)
}

// ---------------------------------------------------------------------------------------------
// Calls that name a process in a struct or for a clock id.

hook! {
    /// The CPU clock of a process: its own (the virtual pid it is shown, or 0) is the clock
    /// of pid 0, "the caller", as the kernel reads it (a clock id built from a virtual pid
    /// would name no process, or another one); another process of the run by its real pid.
    ///
    /// # Safety
    /// As `clock_getcpuclockid(3)`.
    fn clock_getcpuclockid(pid: pid_t, clock: *mut libc::clockid_t) -> c_int;
    fid = ClockGetcpuclockid;
    |real| {
        if !vpid::sealed() || pid <= 0 {
            return real(pid, clock);
        }
        let own = pid == vpid::current();
        real(if own { 0 } else { vpid::to_real(pid) }, clock)
    }
}

/// `struct __user_cap_header_struct`: the version and the pid whose capabilities are meant.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

/// `capget`/`capset` with the header's pid made the kernel's (0, "the caller", for the
/// caller's own virtual pid); the version the kernel writes back on a mismatch is copied back.
///
/// # Safety
/// `hdr` null or a valid header; `real` the real call.
unsafe fn with_real_cap_pid(
    hdr: *mut CapHeader,
    real: impl FnOnce(*mut CapHeader) -> c_int,
) -> c_int {
    if !vpid::sealed() || hdr.is_null() || !crate::core::sys::mapped(hdr, 8) {
        return real(hdr);
    }
    // SAFETY: mapped (checked) and valid per the contract.
    let h = unsafe { &mut *hdr };
    if h.pid <= 0 {
        return real(hdr);
    }
    let mut copy = CapHeader {
        version: h.version,
        pid: if h.pid == vpid::current() {
            0
        } else {
            vpid::to_real(h.pid)
        },
    };
    let r = real(&mut copy);
    h.version = copy.version;
    r
}

hook! {
    /// # Safety
    /// As `capget(2)`.
    fn capget(hdr: *mut libc::c_void, data: *mut libc::c_void) -> c_int;
    fid = Capget;
    // SAFETY: forwarded contract.
    |real| unsafe { with_real_cap_pid(hdr as *mut CapHeader, |h| real(h as *mut libc::c_void, data)) }
}

hook! {
    /// # Safety
    /// As `capset(2)`.
    fn capset(hdr: *mut libc::c_void, data: *const libc::c_void) -> c_int;
    fid = Capget;
    // SAFETY: forwarded contract.
    |real| unsafe { with_real_cap_pid(hdr as *mut CapHeader, |h| real(h as *mut libc::c_void, data)) }
}

// ---------------------------------------------------------------------------------------------
// seccomp's strict mode: once in it, hooks add no system call of their own.

/// `prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT)` and `seccomp(SECCOMP_SET_MODE_STRICT, …)`.
const PR_SET_SECCOMP: c_int = 22;
const SECCOMP_MODE_STRICT: libc::c_ulong = 1;
const SECCOMP_SET_MODE_STRICT: libc::c_ulong = 0;

/// Notes that the process entered strict mode (after the kernel said yes).
fn entered_strict(r: libc::c_long) {
    if r == 0 {
        crate::core::config::slow_set(crate::core::config::slow::STRICT);
    }
}

hook! {
    /// `prctl(option, ...)`: variadic in C; on x86_64 the four further arguments arrive in
    /// registers whatever the caller passed, so the hook declares them all.
    ///
    /// # Safety
    /// As `prctl(2)`.
    fn prctl(
        option: c_int,
        a2: libc::c_ulong,
        a3: libc::c_ulong,
        a4: libc::c_ulong,
        a5: libc::c_ulong,
    ) -> c_int;
    uncounted;
    |real| {
        let r = real(option, a2, a3, a4, a5);
        if option == PR_SET_SECCOMP && a2 == SECCOMP_MODE_STRICT {
            entered_strict(r as libc::c_long);
        }
        r
    }
}

/// `syscall(SYS_prctl | SYS_seccomp, …)` into strict mode: made by the hook, then noted.
///
/// # Safety
/// As the system calls.
pub unsafe fn sys_strict(n: libc::c_long, a: [libc::c_long; 6], _ra: u64) -> Option<libc::c_long> {
    let strict = match n {
        libc::SYS_prctl => {
            a[0] == PR_SET_SECCOMP as libc::c_long && a[1] as libc::c_ulong == SECCOMP_MODE_STRICT
        }
        libc::SYS_seccomp => a[0] as libc::c_ulong == SECCOMP_SET_MODE_STRICT,
        _ => false,
    };
    if !strict {
        return None;
    }
    // SAFETY: the caller's own system call, forwarded.
    let r = unsafe { crate::core::sys::syscall6(n, a[0], a[1], a[2], a[3], a[4], a[5]) };
    entered_strict(r);
    Some(crate::core::fd::libc_result(r))
}
