//! Exported process entry points: pids, signals, waits, process groups, fork/vfork/clone, the
//! exec family, posix_spawn, system/popen, and pthread_create's trampoline.
//!
//! Each: count the call; when not in a sealed run, call the real function; otherwise translate
//! pids in (virtual -> real) and out (real -> virtual) when the `pid` family is sealed, and
//! hand every new image its sealed environment (whatever the family flags).

use core::sync::atomic::{AtomicI32, AtomicPtr, Ordering::*};

use libc::{c_char, c_int, c_void, pid_t};
use seal_abi::{unsealed, Fid, NO_DETAIL};

use super::{check_search, check_target, exec_env, reaped, spawn_env, target, vpid};
use crate::{caller, census, config, real, sys, thread};

type Argv = *const *const c_char;

use crate::sys::{errno, set_errno};

// ---------------------------------------------------------------------------------------------
// Identity

/// # Safety
/// As `getpid(2)`.
#[no_mangle]
pub unsafe extern "C" fn getpid() -> pid_t {
    let ra = caller!();
    census::count(Fid::Getpid, NO_DETAIL, ra);
    vpid::getpid_value()
}

/// # Safety
/// As `getppid(2)`.
#[no_mangle]
pub unsafe extern "C" fn getppid() -> pid_t {
    let ra = caller!();
    census::count(Fid::Getppid, NO_DETAIL, ra);
    vpid::getppid_value()
}

/// # Safety
/// As `gettid(2)`.
#[no_mangle]
pub unsafe extern "C" fn gettid() -> pid_t {
    let ra = caller!();
    census::count(Fid::Gettid, NO_DETAIL, ra);
    vpid::gettid_value()
}

// ---------------------------------------------------------------------------------------------
// Signals, process groups, sessions, affinity, pidfds: virtual pids in, virtual pids out.

/// # Safety
/// As `kill(2)`.
#[no_mangle]
pub unsafe extern "C" fn kill(pid: pid_t, sig: c_int) -> c_int {
    let ra = caller!();
    census::count(Fid::Kill, NO_DETAIL, ra);
    let real = real!(kill: fn(pid_t, c_int) -> c_int);
    let pid = if vpid::sealed() {
        vpid::pid_arg_to_real(pid)
    } else {
        pid
    };
    // SAFETY: forwarded.
    unsafe { real(pid, sig) }
}

/// # Safety
/// As `killpg(3)`.
#[no_mangle]
pub unsafe extern "C" fn killpg(pgrp: pid_t, sig: c_int) -> c_int {
    let ra = caller!();
    census::count(Fid::Killpg, NO_DETAIL, ra);
    let real = real!(killpg: fn(pid_t, c_int) -> c_int);
    let pgrp = if vpid::sealed() {
        vpid::to_real(pgrp)
    } else {
        pgrp
    };
    // SAFETY: forwarded.
    unsafe { real(pgrp, sig) }
}

/// # Safety
/// As `tgkill(2)`.
#[no_mangle]
pub unsafe extern "C" fn tgkill(tgid: pid_t, tid: pid_t, sig: c_int) -> c_int {
    let ra = caller!();
    census::count(Fid::Tgkill, NO_DETAIL, ra);
    let real = real!(tgkill: fn(pid_t, pid_t, c_int) -> c_int);
    let (tgid, tid) = if vpid::sealed() {
        (vpid::to_real(tgid), vpid::to_real(tid))
    } else {
        (tgid, tid)
    };
    // SAFETY: forwarded.
    unsafe { real(tgid, tid, sig) }
}

macro_rules! pid_in_pid_out {
    ($name:ident, $fid:ident) => {
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(pid: pid_t) -> pid_t {
            let ra = caller!();
            census::count(Fid::$fid, NO_DETAIL, ra);
            let real = real!($name: fn(pid_t) -> pid_t);
            if !vpid::sealed() {
                // SAFETY: forwarded.
                return unsafe { real(pid) };
            }
            // SAFETY: forwarded with the real pid.
            let r = unsafe { real(vpid::to_real(pid)) };
            vpid::to_virt(r)
        }
    };
}

pid_in_pid_out!(getpgid, Getpgid);
pid_in_pid_out!(getsid, Getsid);

/// # Safety
/// As `getpgrp(2)`.
#[no_mangle]
pub unsafe extern "C" fn getpgrp() -> pid_t {
    let ra = caller!();
    census::count(Fid::Getpgrp, NO_DETAIL, ra);
    let real = real!(getpgrp: fn() -> pid_t);
    // SAFETY: no arguments.
    let r = unsafe { real() };
    if vpid::sealed() {
        vpid::to_virt(r)
    } else {
        r
    }
}

/// # Safety
/// As `setpgid(2)`.
#[no_mangle]
pub unsafe extern "C" fn setpgid(pid: pid_t, pgid: pid_t) -> c_int {
    let ra = caller!();
    census::count(Fid::Setpgid, NO_DETAIL, ra);
    let real = real!(setpgid: fn(pid_t, pid_t) -> c_int);
    let (pid, pgid) = if vpid::sealed() {
        (vpid::to_real(pid), vpid::to_real(pgid))
    } else {
        (pid, pgid)
    };
    // SAFETY: forwarded.
    unsafe { real(pid, pgid) }
}

/// The terminal's foreground process group: a pgid like any other (job-control shells).
///
/// # Safety
/// As `tcgetpgrp(3)`.
#[no_mangle]
pub unsafe extern "C" fn tcgetpgrp(fd: c_int) -> pid_t {
    let ra = caller!();
    census::count(Fid::Tcgetpgrp, NO_DETAIL, ra);
    let real = real!(tcgetpgrp: fn(c_int) -> pid_t);
    // SAFETY: forwarded.
    let r = unsafe { real(fd) };
    if vpid::sealed() {
        vpid::to_virt(r)
    } else {
        r
    }
}

/// # Safety
/// As `tcsetpgrp(3)`.
#[no_mangle]
pub unsafe extern "C" fn tcsetpgrp(fd: c_int, pgrp: pid_t) -> c_int {
    let ra = caller!();
    census::count(Fid::Tcsetpgrp, NO_DETAIL, ra);
    let real = real!(tcsetpgrp: fn(c_int, pid_t) -> c_int);
    let pgrp = if vpid::sealed() {
        vpid::to_real(pgrp)
    } else {
        pgrp
    };
    // SAFETY: forwarded.
    unsafe { real(fd, pgrp) }
}

/// # Safety
/// As `pidfd_open(2)`.
#[no_mangle]
pub unsafe extern "C" fn pidfd_open(pid: pid_t, flags: libc::c_uint) -> c_int {
    let ra = caller!();
    census::count(Fid::PidfdOpen, NO_DETAIL, ra);
    let real = real!(pidfd_open: fn(pid_t, libc::c_uint) -> c_int);
    let pid = if vpid::sealed() {
        vpid::to_real(pid)
    } else {
        pid
    };
    // SAFETY: forwarded.
    unsafe { real(pid, flags) }
}

macro_rules! affinity {
    ($name:ident, $fid:ident, $ptr:ty) => {
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(pid: pid_t, size: libc::size_t, mask: $ptr) -> c_int {
            let ra = caller!();
            census::count(Fid::$fid, NO_DETAIL, ra);
            let real = real!($name: fn(pid_t, libc::size_t, $ptr) -> c_int);
            let pid = if vpid::sealed() {
                vpid::to_real(pid)
            } else {
                pid
            };
            // SAFETY: forwarded.
            unsafe { real(pid, size, mask) }
        }
    };
}

affinity!(sched_setaffinity, SchedSetaffinity, *const libc::cpu_set_t);
affinity!(sched_getaffinity, SchedGetaffinity, *mut libc::cpu_set_t);

// ---------------------------------------------------------------------------------------------
// Waits: virtual pid arguments, virtual pids returned, reaped statuses recorded for the census.

/// # Safety
/// As `wait4(2)`.
#[no_mangle]
pub unsafe extern "C" fn wait4(
    pid: pid_t,
    status: *mut c_int,
    options: c_int,
    rusage: *mut libc::rusage,
) -> pid_t {
    let ra = caller!();
    census::count(Fid::Wait4, NO_DETAIL, ra);
    // SAFETY: forwarded.
    unsafe { wait4_impl(pid, status, options, rusage) }
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

/// # Safety
/// As `waitpid(2)`.
#[no_mangle]
pub unsafe extern "C" fn waitpid(pid: pid_t, status: *mut c_int, options: c_int) -> pid_t {
    let ra = caller!();
    census::count(Fid::Waitpid, NO_DETAIL, ra);
    // SAFETY: forwarded.
    unsafe { wait4_impl(pid, status, options, core::ptr::null_mut()) }
}

/// # Safety
/// As `wait(2)`.
#[no_mangle]
pub unsafe extern "C" fn wait(status: *mut c_int) -> pid_t {
    let ra = caller!();
    census::count(Fid::WaitFn, NO_DETAIL, ra);
    // SAFETY: forwarded.
    unsafe { wait4_impl(-1, status, 0, core::ptr::null_mut()) }
}

/// # Safety
/// As `wait3(2)`.
#[no_mangle]
pub unsafe extern "C" fn wait3(
    status: *mut c_int,
    options: c_int,
    rusage: *mut libc::rusage,
) -> pid_t {
    let ra = caller!();
    census::count(Fid::Wait4, NO_DETAIL, ra);
    // SAFETY: forwarded.
    unsafe { wait4_impl(-1, status, options, rusage) }
}

/// # Safety
/// As `waitid(2)`.
#[no_mangle]
pub unsafe extern "C" fn waitid(
    idtype: libc::idtype_t,
    id: libc::id_t,
    infop: *mut libc::siginfo_t,
    options: c_int,
) -> c_int {
    let ra = caller!();
    census::count(Fid::Waitid, NO_DETAIL, ra);
    let real = real!(waitid: fn(libc::idtype_t, libc::id_t, *mut libc::siginfo_t, c_int) -> c_int);
    if !config::in_run() {
        // SAFETY: forwarded.
        return unsafe { real(idtype, id, infop, options) };
    }
    let id = if vpid::sealed() && (idtype == libc::P_PID || idtype == libc::P_PGID) {
        vpid::to_real(id as pid_t) as libc::id_t
    } else {
        id
    };
    // SAFETY: forwarded.
    let r = unsafe { real(idtype, id, infop, options) };
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
            let status = match code {
                libc::CLD_EXITED => Some((st & 0xff) << 8),
                libc::CLD_KILLED => Some(st & 0x7f),
                libc::CLD_DUMPED => Some((st & 0x7f) | 0x80),
                _ => None,
            };
            let shown = match status {
                Some(ws) if options & libc::WNOWAIT == 0 => reaped(*pid_p, ws),
                _ if vpid::sealed() => vpid::to_virt(*pid_p),
                _ => *pid_p,
            };
            *pid_p = shown;
        }
    }
    r
}

// ---------------------------------------------------------------------------------------------
// fork, vfork, _Fork, clone

/// Creates a child with `f` (a real fork-like function): allocates its identity first, sets
/// it up in the child, registers it in the parent.
///
/// # Safety
/// `f` is a fork-like function (returns 0 in the child, the real pid in the parent).
unsafe fn fork_with(f: unsafe extern "C" fn() -> pid_t) -> pid_t {
    if !config::in_run() {
        // SAFETY: forwarded.
        return unsafe { f() };
    }
    let p = vpid::next_child();
    vpid::set_pending(Some(p));
    // SAFETY: forwarded.
    let r = unsafe { f() };
    if r == 0 {
        vpid::become_child(p);
        return 0;
    }
    let e = errno();
    vpid::set_pending(None);
    let shown = vpid::parent_done(&p, r);
    set_errno(e);
    shown
}

/// # Safety
/// As `fork(2)`.
#[no_mangle]
pub unsafe extern "C" fn fork() -> pid_t {
    let ra = caller!();
    census::count(Fid::Fork, NO_DETAIL, ra);
    let real = real!(fork: fn() -> pid_t);
    // SAFETY: fork is fork-like.
    unsafe { fork_with(real) }
}

/// `vfork` is implemented as a fork without atfork handlers (`_Fork`): a vfork child shares
/// its parent's memory and stack, so no wrapper function can return into it safely (our own
/// frame would be clobbered by the child before the parent resumes). Programs use vfork only
/// to exec or `_exit` at once, which a fork child does just as well.
///
/// # Safety
/// As `vfork(2)`, with fork's (stronger) guarantees.
#[no_mangle]
pub unsafe extern "C" fn vfork() -> pid_t {
    let ra = caller!();
    census::count(Fid::Vfork, NO_DETAIL, ra);
    let real = real!(_Fork: fn() -> pid_t);
    // SAFETY: _Fork is fork-like.
    unsafe { fork_with(real) }
}

/// # Safety
/// As `_Fork(3)`.
#[no_mangle]
pub unsafe extern "C" fn _Fork() -> pid_t {
    let ra = caller!();
    census::count(Fid::Fork, NO_DETAIL, ra);
    let real = real!(_Fork: fn() -> pid_t);
    // SAFETY: _Fork is fork-like.
    unsafe { fork_with(real) }
}

/// `clone(fn, stack, flags, arg, ptid, tls, ctid)`: variadic in C; on x86_64 the first six
/// arguments arrive in registers and `ctid` on the stack at `[rbp+16]` (the shim keeps frame
/// pointers, see `caller!`). Threads pass through (they get a virtual tid lazily). A new
/// process created this way keeps its real pid in the parent's view: reported, not hidden.
///
/// # Safety
/// As `clone(2)`.
#[no_mangle]
pub unsafe extern "C" fn clone(
    func: *mut c_void,
    stack: *mut c_void,
    flags: c_int,
    arg: *mut c_void,
    ptid: *mut pid_t,
    tls: *mut c_void,
) -> c_int {
    let ra = caller!();
    let ctid: *mut pid_t;
    // SAFETY: with frame pointers, [rbp+16] is the first stack-passed argument (ctid); the
    // slot exists in the caller's frame even when the caller passed fewer arguments.
    unsafe {
        core::arch::asm!("mov {}, [rbp + 16]", out(reg) ctid, options(nostack, readonly));
    }
    census::count(Fid::Clone, NO_DETAIL, ra);
    if flags & libc::CLONE_THREAD == 0 && config::in_run() {
        census::record_unsealed(
            unsealed::UNSUPPORTED_CALL,
            b"clone() creating a process: the parent sees its real pid",
        );
    }
    let real = real!(clone: fn(*mut c_void, *mut c_void, c_int, *mut c_void, *mut pid_t, *mut c_void, *mut pid_t) -> c_int);
    // SAFETY: forwarded.
    unsafe { real(func, stack, flags, arg, ptid, tls, ctid) }
}

// ---------------------------------------------------------------------------------------------
// pthread_create: the new thread starts at its creator's logical clock, with its own lineage.

struct Start {
    func: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
    state: thread::ThreadState,
}

extern "C" fn trampoline(p: *mut c_void) -> *mut c_void {
    // SAFETY: p is the Box we leaked in pthread_create, handed to exactly this thread.
    let s = unsafe { Box::from_raw(p as *mut Start) };
    thread::install(s.state);
    let (func, arg) = (s.func, s.arg);
    drop(s);
    func(arg)
}

/// # Safety
/// As `pthread_create(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    th: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    func: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
) -> c_int {
    let ra = caller!();
    census::count(Fid::PthreadCreate, NO_DETAIL, ra);
    let real = real!(pthread_create: fn(*mut libc::pthread_t, *const libc::pthread_attr_t, extern "C" fn(*mut c_void) -> *mut c_void, *mut c_void) -> c_int);
    if !config::in_run() {
        // SAFETY: forwarded.
        return unsafe { real(th, attr, func, arg) };
    }
    let start = Box::into_raw(Box::new(Start {
        func,
        arg,
        state: thread::spawn_child_state(),
    }));
    // SAFETY: forwarded with our trampoline; it owns `start` once the thread runs.
    let r = unsafe { real(th, attr, trampoline, start as *mut c_void) };
    if r != 0 {
        // SAFETY: no thread was created, so the Box is still ours.
        drop(unsafe { Box::from_raw(start) });
    }
    r
}

// ---------------------------------------------------------------------------------------------
// The exec family: the new image gets the sealed environment; unsealable targets are reported.

// One call site per real exec function, so [`resolve_early`] can resolve them in the parent:
// exec hooks mostly run in fork children, where `dlsym` could wait forever on a loader lock
// held by a thread of the parent that does not exist in the child.
fn real_execve() -> unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int {
    real!(execve: fn(*const c_char, Argv, Argv) -> c_int)
}
fn real_execvpe() -> unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int {
    real!(execvpe: fn(*const c_char, Argv, Argv) -> c_int)
}
fn real_fexecve() -> unsafe extern "C" fn(c_int, Argv, Argv) -> c_int {
    real!(fexecve: fn(c_int, Argv, Argv) -> c_int)
}
fn real_execveat() -> unsafe extern "C" fn(c_int, *const c_char, Argv, Argv, c_int) -> c_int {
    real!(execveat: fn(c_int, *const c_char, Argv, Argv, c_int) -> c_int)
}

/// Resolves the real functions a fork child may need (called once per image at start).
pub fn resolve_early() {
    real_execve();
    real_execvpe();
    real_fexecve();
    real_execveat();
}

/// The environment to pass: ours when built, else the caller's.
macro_rules! env_or {
    ($block:expr, $envp:expr) => {
        $block.as_ref().map(|b| b.envp()).unwrap_or($envp)
    };
}

/// # Safety
/// As `execve(2)`.
#[no_mangle]
pub unsafe extern "C" fn execve(path: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let ra = caller!();
    census::count(Fid::Execve, NO_DETAIL, ra);
    // SAFETY: per the contract.
    unsafe { execve_impl(path, argv, envp) }
}

/// # Safety
/// As `execve(2)`.
unsafe fn execve_impl(path: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let real = real_execve();
    if config::in_run() && !path.is_null() {
        // SAFETY: path is a C string.
        check_target(Some(unsafe { sys::cstr(path) }));
    }
    // SAFETY: envp per the contract.
    let block = unsafe { exec_env(envp) };
    // SAFETY: forwarded.
    unsafe { real(path, argv, env_or!(block, envp)) }
}

/// # Safety
/// As `execvpe(3)`.
unsafe fn execvpe_impl(file: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let real = real_execvpe();
    if config::in_run() && !file.is_null() {
        // SAFETY: file is a C string.
        check_search(unsafe { sys::cstr(file) });
    }
    // SAFETY: envp per the contract.
    let block = unsafe { exec_env(envp) };
    // SAFETY: forwarded.
    unsafe { real(file, argv, env_or!(block, envp)) }
}

extern "C" {
    static environ: Argv;
}

fn current_environ() -> Argv {
    // SAFETY: reading libc's environ pointer.
    unsafe { environ }
}

/// # Safety
/// As `execv(3)`.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: Argv) -> c_int {
    let ra = caller!();
    census::count(Fid::Execv, NO_DETAIL, ra);
    // SAFETY: per the contract.
    unsafe { execve_impl(path, argv, current_environ()) }
}

/// # Safety
/// As `execvp(3)`.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: Argv) -> c_int {
    let ra = caller!();
    census::count(Fid::Execvp, NO_DETAIL, ra);
    // SAFETY: per the contract.
    unsafe { execvpe_impl(file, argv, current_environ()) }
}

/// # Safety
/// As `execvpe(3)`.
#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let ra = caller!();
    census::count(Fid::Execvpe, NO_DETAIL, ra);
    // SAFETY: per the contract.
    unsafe { execvpe_impl(file, argv, envp) }
}

/// # Safety
/// As `fexecve(3)`.
#[no_mangle]
pub unsafe extern "C" fn fexecve(fd: c_int, argv: Argv, envp: Argv) -> c_int {
    let ra = caller!();
    census::count(Fid::Fexecve, NO_DETAIL, ra);
    let real = real_fexecve();
    if config::in_run() {
        let mut p = target::Path::new();
        p.push(b"/proc/self/fd/").push_i64(fd as i64);
        check_target(Some(p.as_bytes()));
    }
    // SAFETY: envp per the contract.
    let block = unsafe { exec_env(envp) };
    // SAFETY: forwarded.
    unsafe { real(fd, argv, env_or!(block, envp)) }
}

/// # Safety
/// As `execveat(2)`.
#[no_mangle]
pub unsafe extern "C" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: Argv,
    envp: Argv,
    flags: c_int,
) -> c_int {
    let ra = caller!();
    census::count(Fid::Execveat, NO_DETAIL, ra);
    let real = real_execveat();
    if config::in_run() {
        // SAFETY: path is null or a C string.
        let rel = unsafe { sys::cstr(path) };
        let mut p = target::Path::new();
        if rel.starts_with(b"/") || (dirfd == libc::AT_FDCWD && !rel.is_empty()) {
            p.push(rel);
        } else {
            p.push(b"/proc/self/fd/").push_i64(dirfd as i64);
            if !rel.is_empty() {
                p.push(b"/").push(rel);
            }
        }
        check_target(Some(p.as_bytes()));
    }
    // SAFETY: envp per the contract.
    let block = unsafe { exec_env(envp) };
    // SAFETY: forwarded.
    unsafe { real(dirfd, path, argv, env_or!(block, envp), flags) }
}

/// The list variants' variadic arguments after `arg0`: four in registers (rdx, rcx, r8, r9),
/// the rest on the caller's stack.
struct VarArgs {
    regs: [usize; 4],
    stack: *const usize,
}

impl VarArgs {
    fn get(&self, i: usize) -> usize {
        if i < self.regs.len() {
            self.regs[i]
        } else {
            // SAFETY: the caller passed a NULL-terminated list; we only read up to its NULL
            // (and one slot more for execle's envp).
            unsafe { *self.stack.add(i - self.regs.len()) }
        }
    }

    /// Copies `first` and the arguments up to the NULL into a fresh argv in anonymous memory:
    /// `(argv, number of arguments, mapping, mapping size)`. The slot after the NULL is
    /// `get(n)` (execle's envp).
    fn collect(&self, first: *const c_char) -> Option<(Argv, usize, *mut u8, usize)> {
        let mut n = 0;
        if !first.is_null() {
            n = 1;
            while self.get(n - 1) != 0 {
                n += 1;
            }
        }
        let size = ((n + 1) * 8 + 4095) & !4095;
        let mem = sys::mmap_anon(size);
        if mem.is_null() {
            return None;
        }
        let v = mem as *mut *const c_char;
        // SAFETY: mem has room for n + 1 pointers.
        unsafe {
            for i in 0..n {
                *v.add(i) = if i == 0 {
                    first
                } else {
                    self.get(i - 1) as *const c_char
                };
            }
            *v.add(n) = core::ptr::null();
        }
        Some((v as Argv, n, mem, size))
    }
}

/// `execl`-style hooks: on x86_64 a variadic call passes its first six integer arguments in
/// registers (path, arg0 and four more) and the rest on the stack, which with frame pointers
/// starts at `[rbp+16]` in the callee. Stable Rust cannot define a C-variadic function, but it
/// can read that ABI directly.
macro_rules! list_exec {
    ($name:ident, $fid:ident, |$path:ident, $argv:ident, $va:ident, $n:ident| $body:expr) => {
        /// # Safety
        /// As the libc function of the same name: a NULL-terminated argument list.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            $path: *const c_char,
            arg0: *const c_char,
            a1: usize,
            a2: usize,
            a3: usize,
            a4: usize,
        ) -> c_int {
            let ra = caller!();
            let stack: *const usize;
            // SAFETY: with frame pointers, [rbp+16] is where the caller's stack-passed
            // arguments start; we read only as far as the NULL-terminated list goes.
            unsafe {
                core::arch::asm!("lea {}, [rbp + 16]", out(reg) stack,
                                 options(nostack, nomem, preserves_flags));
            }
            census::count(Fid::$fid, NO_DETAIL, ra);
            let $va = VarArgs {
                regs: [a1, a2, a3, a4],
                stack,
            };
            let Some(($argv, $n, mem, size)) = $va.collect(arg0) else {
                set_errno(libc::ENOMEM);
                return -1;
            };
            let r = $body;
            let e = errno();
            // SAFETY: our own mapping; exec failed, so nothing references it any more.
            unsafe { sys::munmap(mem, size) };
            set_errno(e);
            r
        }
    };
}

list_exec!(execl, Execl, |path, argv, _va, _n| {
    // SAFETY: argv built above, environ is libc's.
    unsafe { execve_impl(path, argv, current_environ()) }
});

list_exec!(execlp, Execlp, |path, argv, _va, _n| {
    // SAFETY: as execl.
    unsafe { execvpe_impl(path, argv, current_environ()) }
});

list_exec!(execle, Execle, |path, argv, va, n| {
    // envp follows the NULL that ends the list: argument index n (arg0 is index 0).
    let envp = va.get(n) as Argv;
    // SAFETY: as execl, with the caller's envp.
    unsafe { execve_impl(path, argv, envp) }
});

// ---------------------------------------------------------------------------------------------
// posix_spawn[p]: glibc execs inside (no PLT), so the child's environment is built here.

type SpawnFn = unsafe extern "C" fn(
    *mut pid_t,
    *const c_char,
    *const libc::posix_spawn_file_actions_t,
    *const libc::posix_spawnattr_t,
    Argv,
    Argv,
) -> c_int;

/// Spawns with `f`, giving the child its identity and sealed environment.
///
/// # Safety
/// As `posix_spawn(3)`.
unsafe fn spawn_with(
    f: SpawnFn,
    pid: *mut pid_t,
    path: *const c_char,
    fa: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: Argv,
    envp: Argv,
) -> c_int {
    if !config::in_run() {
        // SAFETY: forwarded.
        return unsafe { f(pid, path, fa, attr, argv, envp) };
    }
    // A process group named in the attributes is a virtual pid (what getpgrp() showed):
    // spawn with a copy that names the real one. glibc's posix_spawnattr_t is plain data.
    let mut real_attr: libc::posix_spawnattr_t;
    let mut attr = attr;
    if vpid::sealed() && !attr.is_null() {
        // SAFETY: a valid, initialised attribute object per the contract; copying it is what
        // glibc's own posix_spawn does with it.
        unsafe {
            let mut fl: libc::c_short = 0;
            let mut pg: pid_t = 0;
            libc::posix_spawnattr_getflags(attr, &mut fl);
            libc::posix_spawnattr_getpgroup(attr, &mut pg);
            if fl as c_int & libc::POSIX_SPAWN_SETPGROUP != 0 && pg > 0 {
                real_attr = core::ptr::read(attr);
                libc::posix_spawnattr_setpgroup(&mut real_attr, vpid::to_real(pg));
                attr = &real_attr;
            }
        }
    }
    let p = vpid::next_child();
    // SAFETY: envp per the contract.
    let block = unsafe { spawn_env(envp, &p) };
    let mut real_pid: pid_t = 0;
    // SAFETY: forwarded with our pid slot and environment.
    let r = unsafe { f(&mut real_pid, path, fa, attr, argv, env_or!(block, envp)) };
    drop(block);
    let shown = vpid::parent_done(&p, if r == 0 { real_pid } else { -1 });
    if r == 0 && !pid.is_null() {
        // SAFETY: the caller's pid slot.
        unsafe { *pid = shown };
    }
    r
}

/// # Safety
/// As `posix_spawn(3)`.
#[no_mangle]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut pid_t,
    path: *const c_char,
    fa: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: Argv,
    envp: Argv,
) -> c_int {
    let ra = caller!();
    census::count(Fid::PosixSpawn, NO_DETAIL, ra);
    let real = real!(posix_spawn: fn(*mut pid_t, *const c_char, *const libc::posix_spawn_file_actions_t, *const libc::posix_spawnattr_t, Argv, Argv) -> c_int);
    if config::in_run() && !path.is_null() {
        // SAFETY: path is a C string.
        check_target(Some(unsafe { sys::cstr(path) }));
    }
    // SAFETY: forwarded.
    unsafe { spawn_with(real, pid, path, fa, attr, argv, envp) }
}

/// # Safety
/// As `posix_spawnp(3)`.
#[no_mangle]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut pid_t,
    file: *const c_char,
    fa: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
    argv: Argv,
    envp: Argv,
) -> c_int {
    let ra = caller!();
    census::count(Fid::PosixSpawnp, NO_DETAIL, ra);
    let real = real!(posix_spawnp: fn(*mut pid_t, *const c_char, *const libc::posix_spawn_file_actions_t, *const libc::posix_spawnattr_t, Argv, Argv) -> c_int);
    if config::in_run() && !file.is_null() {
        // SAFETY: file is a C string.
        check_search(unsafe { sys::cstr(file) });
    }
    // SAFETY: forwarded.
    unsafe { spawn_with(real, pid, file, fa, attr, argv, envp) }
}

// ---------------------------------------------------------------------------------------------
// system() and popen(): glibc spawns their shell internally with `__environ`, so they are
// reimplemented here on top of the real posix_spawn, with the child's sealed environment.

const SHELL: &core::ffi::CStr = c"/bin/sh";

fn real_posix_spawn() -> SpawnFn {
    real!(posix_spawn: fn(*mut pid_t, *const c_char, *const libc::posix_spawn_file_actions_t, *const libc::posix_spawnattr_t, Argv, Argv) -> c_int)
}

/// Waits for real pid `real`, retrying on EINTR; records the status; -1 on error.
fn wait_real(real: pid_t, status: &mut c_int) -> pid_t {
    let w = real!(wait4: fn(pid_t, *mut c_int, c_int, *mut libc::rusage) -> pid_t);
    loop {
        // SAFETY: status is ours.
        let r = unsafe { w(real, status, 0, core::ptr::null_mut()) };
        if r == -1 && errno() == libc::EINTR {
            continue;
        }
        if r > 0 {
            reaped(r, *status);
        }
        return r;
    }
}

/// # Safety
/// As `system(3)`.
#[no_mangle]
pub unsafe extern "C" fn system(cmd: *const c_char) -> c_int {
    let ra = caller!();
    census::count(Fid::System, NO_DETAIL, ra);
    let real = real!(system: fn(*const c_char) -> c_int);
    if cmd.is_null() || !config::in_run() {
        // SAFETY: forwarded (a null command only asks whether a shell exists).
        return unsafe { real(cmd) };
    }
    // As glibc: ignore SIGINT/SIGQUIT and block SIGCHLD while the command runs; the child gets
    // the default dispositions and the caller's mask back.
    // SAFETY: plain libc calls on local, initialised structures.
    unsafe {
        let mut ign: libc::sigaction = core::mem::zeroed();
        ign.sa_sigaction = libc::SIG_IGN;
        libc::sigemptyset(&mut ign.sa_mask);
        let mut old_int: libc::sigaction = core::mem::zeroed();
        let mut old_quit: libc::sigaction = core::mem::zeroed();
        libc::sigaction(libc::SIGINT, &ign, &mut old_int);
        libc::sigaction(libc::SIGQUIT, &ign, &mut old_quit);
        let mut block: libc::sigset_t = core::mem::zeroed();
        let mut old_mask: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &block, &mut old_mask);

        let mut attr: libc::posix_spawnattr_t = core::mem::zeroed();
        libc::posix_spawnattr_init(&mut attr);
        let mut def: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut def);
        if old_int.sa_sigaction != libc::SIG_IGN {
            libc::sigaddset(&mut def, libc::SIGINT);
        }
        if old_quit.sa_sigaction != libc::SIG_IGN {
            libc::sigaddset(&mut def, libc::SIGQUIT);
        }
        libc::posix_spawnattr_setsigdefault(&mut attr, &def);
        libc::posix_spawnattr_setsigmask(&mut attr, &old_mask);
        libc::posix_spawnattr_setflags(
            &mut attr,
            (libc::POSIX_SPAWN_SETSIGDEF | libc::POSIX_SPAWN_SETSIGMASK) as libc::c_short,
        );
        let argv: [*const c_char; 5] = [
            c"sh".as_ptr(),
            c"-c".as_ptr(),
            c"--".as_ptr(),
            cmd,
            core::ptr::null(),
        ];
        let mut pid: pid_t = 0;
        let r = spawn_with(
            real_posix_spawn(),
            &mut pid,
            SHELL.as_ptr(),
            core::ptr::null(),
            &attr,
            argv.as_ptr(),
            current_environ(),
        );
        libc::posix_spawnattr_destroy(&mut attr);
        let mut status: c_int = 0;
        let result = if r == 0 {
            if wait_real(vpid_real(pid), &mut status) == -1 {
                -1
            } else {
                status
            }
        } else {
            // As glibc: the shell could not be started, report it like `exit 127`.
            127 << 8
        };
        let e = errno();
        libc::sigaction(libc::SIGINT, &old_int, core::ptr::null_mut());
        libc::sigaction(libc::SIGQUIT, &old_quit, core::ptr::null_mut());
        libc::sigprocmask(libc::SIG_SETMASK, &old_mask, core::ptr::null_mut());
        set_errno(e);
        result
    }
}

/// The real pid behind a pid our own spawn handed out (virtual when the family is sealed).
fn vpid_real(shown: pid_t) -> pid_t {
    if vpid::sealed() {
        vpid::to_real(shown)
    } else {
        shown
    }
}

/// Streams opened by our popen: `(FILE*, real pid, fd)`; a fixed table of atomics (no lock).
const POPEN_SLOTS: usize = 64;
static POPEN_FILE: [AtomicPtr<libc::FILE>; POPEN_SLOTS] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; POPEN_SLOTS];
static POPEN_PID: [AtomicI32; POPEN_SLOTS] = [const { AtomicI32::new(0) }; POPEN_SLOTS];
static POPEN_FD: [AtomicI32; POPEN_SLOTS] = [const { AtomicI32::new(-1) }; POPEN_SLOTS];

/// A marker FILE* value used to reserve a slot before fdopen returns.
const RESERVED: *mut libc::FILE = core::ptr::dangling_mut();

/// # Safety
/// As `popen(3)`.
#[no_mangle]
pub unsafe extern "C" fn popen(cmd: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    let ra = caller!();
    census::count(Fid::Popen, NO_DETAIL, ra);
    let real = real!(popen: fn(*const c_char, *const c_char) -> *mut libc::FILE);
    if !config::in_run() || cmd.is_null() || mode.is_null() {
        // SAFETY: forwarded.
        return unsafe { real(cmd, mode) };
    }
    // SAFETY: mode is a C string.
    let m = unsafe { sys::cstr(mode) };
    let reading = match m.first() {
        Some(b'r') => true,
        Some(b'w') => false,
        _ => {
            set_errno(libc::EINVAL);
            return core::ptr::null_mut();
        }
    };
    let cloexec = m.contains(&b'e');
    let Some(slot) = (0..POPEN_SLOTS).find(|&i| {
        POPEN_FILE[i]
            .compare_exchange(core::ptr::null_mut(), RESERVED, AcqRel, Relaxed)
            .is_ok()
    }) else {
        census::record_unsealed(
            unsealed::UNSUPPORTED_CALL,
            b"more than 64 popen() streams open at once: later ones use libc's popen",
        );
        // SAFETY: forwarded.
        return unsafe { real(cmd, mode) };
    };
    let free_slot = || POPEN_FILE[slot].store(core::ptr::null_mut(), Release);
    let mut fds = [0 as c_int; 2];
    // SAFETY: fds is a valid out-array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        free_slot();
        return core::ptr::null_mut();
    }
    let (parent_end, child_end, child_fd) = if reading {
        (fds[0], fds[1], 1)
    } else {
        (fds[1], fds[0], 0)
    };
    // SAFETY: plain libc calls on local structures; fds are ours.
    unsafe {
        let mut fa: libc::posix_spawn_file_actions_t = core::mem::zeroed();
        libc::posix_spawn_file_actions_init(&mut fa);
        libc::posix_spawn_file_actions_adddup2(&mut fa, child_end, child_fd);
        // POSIX: the child must not keep the streams of earlier popen() calls open.
        for (i, fd) in POPEN_FD.iter().enumerate() {
            let fd = fd.load(Acquire);
            if i != slot && fd >= 0 && fd != child_fd {
                libc::posix_spawn_file_actions_addclose(&mut fa, fd);
            }
        }
        let argv: [*const c_char; 5] = [
            c"sh".as_ptr(),
            c"-c".as_ptr(),
            c"--".as_ptr(),
            cmd,
            core::ptr::null(),
        ];
        let mut pid: pid_t = 0;
        let r = spawn_with(
            real_posix_spawn(),
            &mut pid,
            SHELL.as_ptr(),
            &fa,
            core::ptr::null(),
            argv.as_ptr(),
            current_environ(),
        );
        libc::posix_spawn_file_actions_destroy(&mut fa);
        libc::close(child_end);
        if r != 0 {
            libc::close(parent_end);
            free_slot();
            set_errno(r);
            return core::ptr::null_mut();
        }
        if !cloexec {
            libc::fcntl(parent_end, libc::F_SETFD, 0);
        }
        let fmode = if reading { c"r" } else { c"w" };
        let f = libc::fdopen(parent_end, fmode.as_ptr());
        if f.is_null() {
            let e = errno();
            libc::close(parent_end);
            let mut st = 0;
            wait_real(vpid_real(pid), &mut st);
            free_slot();
            set_errno(e);
            return core::ptr::null_mut();
        }
        POPEN_PID[slot].store(vpid_real(pid), Relaxed);
        POPEN_FD[slot].store(parent_end, Release);
        POPEN_FILE[slot].store(f, Release);
        f
    }
}

/// Closes a stream from our popen and waits for its shell; other streams go to libc's pclose.
/// Not counted in the census: it creates nothing (its popen was counted).
///
/// # Safety
/// As `pclose(3)`.
#[no_mangle]
pub unsafe extern "C" fn pclose(f: *mut libc::FILE) -> c_int {
    let real = real!(pclose: fn(*mut libc::FILE) -> c_int);
    let slot = if f.is_null() {
        None
    } else {
        (0..POPEN_SLOTS).find(|&i| POPEN_FILE[i].load(Acquire) == f)
    };
    let Some(slot) = slot else {
        // SAFETY: forwarded (a stream from libc's popen, or the caller's mistake).
        return unsafe { real(f) };
    };
    let pid = POPEN_PID[slot].load(Relaxed);
    POPEN_FD[slot].store(-1, Release);
    POPEN_FILE[slot].store(core::ptr::null_mut(), Release);
    // SAFETY: the stream is ours (from fdopen in popen) and the caller gives it up.
    unsafe { libc::fclose(f) };
    let mut status: c_int = 0;
    if wait_real(pid, &mut status) == -1 {
        return -1;
    }
    status
}

// ---------------------------------------------------------------------------------------------
// /proc/<vpid>/… through the path calls that are not `open` (the open family lives in
// `random::device`): `[ -d /proc/$pid ]`, `ls /proc/$$/fd`, `readlink /proc/$$/exe`. Only
// paths that start with `/proc/<digit>` are looked at (and counted).

/// Calls `f` with `path`, or with the real-pid path when it names a virtual pid of the run.
///
/// # Safety
/// `path` is null or a C string.
#[inline(always)]
unsafe fn with_proc_path<R>(path: *const c_char, ra: u64, f: impl FnOnce(*const c_char) -> R) -> R {
    // SAFETY: path is a C string; we read at most 7 bytes, stopping at its NUL.
    let proc_pid = !path.is_null()
        && unsafe {
            let p = path as *const u8;
            (0..6).all(|i| *p.add(i) == b"/proc/"[i]) && (*p.add(6)).is_ascii_digit()
        };
    if !proc_pid {
        return f(path);
    }
    census::count(Fid::ProcPath, NO_DETAIL, ra);
    let mut out = [0u8; 4096];
    // SAFETY: path is a C string.
    if super::translate_proc_path(unsafe { sys::cstr(path) }, &mut out) {
        return f(out.as_ptr() as *const c_char);
    }
    f(path)
}

macro_rules! proc_path_hook {
    ($name:ident($($arg:ident: $t:ty),*) -> $r:ty) => {
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char $(, $arg: $t)*) -> $r {
            let ra = caller!();
            let real = real!($name: fn(*const c_char $(, $t)*) -> $r);
            // SAFETY: forwarded, with the path translated.
            unsafe { with_proc_path(path, ra, |p| real(p $(, $arg)*)) }
        }
    };
}

proc_path_hook!(stat(buf: *mut libc::stat) -> c_int);
proc_path_hook!(stat64(buf: *mut libc::stat64) -> c_int);
proc_path_hook!(lstat(buf: *mut libc::stat) -> c_int);
proc_path_hook!(lstat64(buf: *mut libc::stat64) -> c_int);
proc_path_hook!(access(mode: c_int) -> c_int);
proc_path_hook!(readlink(buf: *mut c_char, len: libc::size_t) -> libc::ssize_t);
proc_path_hook!(opendir() -> *mut libc::DIR);
proc_path_hook!(chdir() -> c_int);

/// # Safety
/// As `statx(2)`.
#[no_mangle]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: libc::c_uint,
    buf: *mut libc::statx,
) -> c_int {
    let ra = caller!();
    let real =
        real!(statx: fn(c_int, *const c_char, c_int, libc::c_uint, *mut libc::statx) -> c_int);
    // SAFETY: forwarded, with the path translated (absolute /proc paths ignore dirfd).
    unsafe { with_proc_path(path, ra, |p| real(dirfd, p, flags, mask, buf)) }
}

/// # Safety
/// As `fstatat(2)`.
#[no_mangle]
pub unsafe extern "C" fn fstatat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut libc::stat,
    flags: c_int,
) -> c_int {
    let ra = caller!();
    let real = real!(fstatat: fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int);
    // SAFETY: forwarded, with the path translated.
    unsafe { with_proc_path(path, ra, |p| real(dirfd, p, buf, flags)) }
}

/// # Safety
/// As `readlinkat(2)`.
#[no_mangle]
pub unsafe extern "C" fn readlinkat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut c_char,
    len: libc::size_t,
) -> libc::ssize_t {
    let ra = caller!();
    let real =
        real!(readlinkat: fn(c_int, *const c_char, *mut c_char, libc::size_t) -> libc::ssize_t);
    // SAFETY: forwarded, with the path translated.
    unsafe { with_proc_path(path, ra, |p| real(dirfd, p, buf, len)) }
}

// ---------------------------------------------------------------------------------------------
// Other calls that take a pid: `renice -p`, `prlimit --pid`, `chrt -p`, `sigqueue`.

/// # Safety
/// As `getpriority(2)`.
#[no_mangle]
pub unsafe extern "C" fn getpriority(which: c_int, who: libc::id_t) -> c_int {
    let ra = caller!();
    census::count(Fid::Getpriority, NO_DETAIL, ra);
    let real = real!(getpriority: fn(c_int, libc::id_t) -> c_int);
    let who = if vpid::sealed() {
        super::priority_who_to_real(libc::SYS_getpriority, which, who as i32) as libc::id_t
    } else {
        who
    };
    // SAFETY: forwarded.
    unsafe { real(which, who) }
}

/// # Safety
/// As `setpriority(2)`.
#[no_mangle]
pub unsafe extern "C" fn setpriority(which: c_int, who: libc::id_t, prio: c_int) -> c_int {
    let ra = caller!();
    census::count(Fid::Setpriority, NO_DETAIL, ra);
    let real = real!(setpriority: fn(c_int, libc::id_t, c_int) -> c_int);
    let who = if vpid::sealed() {
        super::priority_who_to_real(libc::SYS_setpriority, which, who as i32) as libc::id_t
    } else {
        who
    };
    // SAFETY: forwarded.
    unsafe { real(which, who, prio) }
}

/// A libc function whose first argument is a pid (0 = the caller).
macro_rules! pid_first {
    ($name:ident, $fid:ident, ($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        /// # Safety
        /// As the libc function of the same name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(pid: pid_t, $($arg: $ty),*) -> $ret {
            let ra = caller!();
            census::count(Fid::$fid, NO_DETAIL, ra);
            let real = real!($name: fn(pid_t, $($ty),*) -> $ret);
            let pid = if vpid::sealed() {
                vpid::to_real(pid)
            } else {
                pid
            };
            // SAFETY: forwarded.
            unsafe { real(pid, $($arg),*) }
        }
    };
}

pid_first!(prlimit, Prlimit, (resource: c_int, new: *const libc::rlimit, old: *mut libc::rlimit) -> c_int);
pid_first!(prlimit64, Prlimit, (resource: c_int, new: *const libc::rlimit64, old: *mut libc::rlimit64) -> c_int);
pid_first!(sched_getscheduler, SchedGetscheduler, () -> c_int);
pid_first!(sched_setscheduler, SchedSetscheduler, (policy: c_int, param: *const libc::sched_param) -> c_int);
pid_first!(sched_getparam, SchedGetparam, (param: *mut libc::sched_param) -> c_int);
pid_first!(sched_setparam, SchedSetparam, (param: *const libc::sched_param) -> c_int);
pid_first!(sched_rr_get_interval, SchedRrGetInterval, (tp: *mut libc::timespec) -> c_int);
// `union sigval` is one pointer-sized integer in a register on x86_64.
pid_first!(sigqueue, Sigqueue, (sig: c_int, value: usize) -> c_int);
