//! posix_spawn[p]: glibc execs inside (no PLT), so the child's environment is built here.
//!
//! system() and popen(): glibc spawns their shell internally with `__environ`, so they are
//! reimplemented here on top of the real posix_spawn, with the child's sealed environment.

use core::sync::atomic::{AtomicI32, AtomicPtr, Ordering::*};

use libc::{c_char, c_int, pid_t};
use seal_abi::unsealed;

use super::exec::{current_environ, Argv};
use super::real_pid;
use crate::core::sys::{self, errno, set_errno};
use crate::core::{census, config};
use crate::process::target::ExeId;
use crate::process::{check_exec, check_search_exec, reaped, spawn_env, target, vpid};
use crate::{hook, real};

type FileActions = *const libc::posix_spawn_file_actions_t;
type Attr = *const libc::posix_spawnattr_t;
type SpawnFn =
    unsafe extern "C" fn(*mut pid_t, *const c_char, FileActions, Attr, Argv, Argv) -> c_int;

/// Spawns with `f`, giving the child its identity and sealed environment.
///
/// # Safety
/// As `posix_spawn(3)`.
#[allow(clippy::too_many_arguments)]
unsafe fn spawn_with(
    f: SpawnFn,
    pid: *mut pid_t,
    path: *const c_char,
    kernel_name: Option<&[u8]>,
    exe: ExeId,
    fa: FileActions,
    attr: Attr,
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
    let layout = kernel_name.map(|file| crate::process::env::Layout { file, argv });
    // SAFETY: envp per the contract.
    let mut block = unsafe { spawn_env(envp, &p, layout, exe) };
    let mut spawned: pid_t = 0;
    let env = block.as_ref().map(|b| b.envp()).unwrap_or(envp);
    // The child inherits this thread's rdtsc trap, and its loader runs rdtsc before libseal is
    // loaded: off for the spawn.
    let _cpu = crate::cpu::ExecGuard::new();
    // SAFETY: forwarded with our pid slot and environment.
    let mut r = unsafe { f(&mut spawned, path, fa, attr, argv, env) };
    if r == libc::E2BIG {
        if let Some(b) = block.as_mut() {
            if b.drop_pad() {
                // Padded past the kernel's limit: once more without the pad.
                // SAFETY: as above.
                r = unsafe { f(&mut spawned, path, fa, attr, argv, b.envp()) };
            }
        }
    }
    drop(block);
    let shown = vpid::parent_done(&p, if r == 0 { spawned } else { -1 });
    if r == 0 && !pid.is_null() {
        // SAFETY: the caller's pid slot.
        unsafe { *pid = shown };
    }
    r
}

fn real_posix_spawn() -> SpawnFn {
    real!(posix_spawn: fn(*mut pid_t, *const c_char, FileActions, Attr, Argv, Argv) -> c_int)
}

hook! {
    /// # Safety
    /// As `posix_spawn(3)`.
    fn posix_spawn(pid: *mut pid_t, path: *const c_char, fa: FileActions, attr: Attr, argv: Argv, envp: Argv) -> c_int;
    fid = PosixSpawn;
    || {
        // SAFETY: path is null or a C string.
        let name = (!path.is_null()).then(|| unsafe { sys::cstr(path) });
        let exe = if config::in_run() { check_exec(name) } else { check_exec(None) };
        if let Some(prog) = exe.static_prog {
            // SAFETY: forwarded.
            return unsafe { spawn_static(prog, pid, fa, attr, argv, envp) };
        }
        // SAFETY: forwarded.
        unsafe { spawn_with(real_posix_spawn(), pid, path, name, exe.id, fa, attr, argv, envp) }
    }
}

hook! {
    /// # Safety
    /// As `posix_spawnp(3)`.
    fn posix_spawnp(pid: *mut pid_t, file: *const c_char, fa: FileActions, attr: Attr, argv: Argv, envp: Argv) -> c_int;
    fid = PosixSpawnp;
    || {
        let real: SpawnFn =
            real!(posix_spawnp: fn(*mut pid_t, *const c_char, FileActions, Attr, Argv, Argv) -> c_int);
        let mut resolved = None;
        if config::in_run() && !file.is_null() {
            // SAFETY: file is a C string.
            resolved = check_search_exec(unsafe { sys::cstr(file) });
        }
        if let Some(prog) = resolved.as_mut().and_then(|r| r.1.static_prog.take()) {
            // SAFETY: forwarded.
            return unsafe { spawn_static(prog, pid, fa, attr, argv, envp) };
        }
        let name = resolved.as_ref().map(|(p, _)| p.as_bytes());
        let exe = resolved.as_ref().map(|r| r.1.id).unwrap_or_default();
        // SAFETY: forwarded.
        unsafe { spawn_with(real, pid, file, name, exe, fa, attr, argv, envp) }
    }
}

/// Arguments the trampoline can carry (more: the static binary is spawned as it is, reported).
const TRAMPOLINE_ARGS: usize = 1024;

/// `posix_spawn` of static binary `prog`: its child execs inside glibc, where no exec hook
/// runs, so the child is `seal __exec-static PROG ARGV…` instead (the run directory's link to
/// the `seal` binary, a dynamic program libseal loads into), whose exec of `prog` goes through
/// libseal's hook and is supervised as any other ([`crate::process::static_image`]). The
/// file actions and attributes apply to the trampoline, and the exec keeps them. When it
/// cannot be used, `prog` is spawned as it is and reported as unsealed.
///
/// # Safety
/// As `posix_spawn(3)`.
unsafe fn spawn_static(
    mut prog: target::Path,
    pid: *mut pid_t,
    fa: FileActions,
    attr: Attr,
    argv: Argv,
    envp: Argv,
) -> c_int {
    let mut n = 0;
    // SAFETY: argv is a NULL-terminated vector per the contract.
    while n < TRAMPOLINE_ARGS && !argv.is_null() && unsafe { !(*argv.add(n)).is_null() } {
        n += 1;
    }
    let run_dir = config::RUN_DIR.get();
    let prog_c = prog.as_cstr().as_ptr().cast::<c_char>();
    if n == 0 || n + 4 > TRAMPOLINE_ARGS || run_dir.is_empty() {
        census::record_unsealed(unsealed::STATIC_BINARY, prog.as_bytes());
        // SAFETY: forwarded.
        return unsafe {
            spawn_with(
                real_posix_spawn(),
                pid,
                prog_c,
                None,
                ExeId::default(),
                fa,
                attr,
                argv,
                envp,
            )
        };
    }
    let mut exe = target::Path::new();
    exe.push(run_dir)
        .push(b"/")
        .push(seal_abi::supervised::SUPERVISOR_LINK.as_bytes());
    let mut role = [0u8; 32];
    let arg = seal_abi::supervised::EXEC_STATIC_ARG.as_bytes();
    role[..arg.len()].copy_from_slice(arg);
    let mut args = [core::ptr::null::<c_char>(); TRAMPOLINE_ARGS];
    args[0] = c"seal".as_ptr();
    args[1] = role.as_ptr().cast();
    args[2] = prog_c;
    // SAFETY: the first n entries of argv are valid C strings.
    unsafe { core::ptr::copy_nonoverlapping(argv, args.as_mut_ptr().add(3), n) };
    let name = exe.as_cstr().as_ptr().cast::<c_char>();
    // SAFETY: forwarded, with the trampoline's file and argument vector (which live until
    // the spawn returns).
    unsafe {
        spawn_with(
            real_posix_spawn(),
            pid,
            name,
            Some(exe.as_bytes()),
            ExeId::default(),
            fa,
            attr,
            args.as_ptr(),
            envp,
        )
    }
}

// ---------------------------------------------------------------------------------------------
// system() and popen()

const SHELL: &core::ffi::CStr = c"/bin/sh";

/// Spawns `/bin/sh -c -- cmd` with the process's environment (sealed for the child), as
/// glibc's `system` and `popen` do; the shown pid goes to `pid`.
///
/// # Safety
/// `cmd` a C string; `fa` and `attr` null or initialised.
unsafe fn spawn_shell(cmd: *const c_char, fa: FileActions, attr: Attr, pid: &mut pid_t) -> c_int {
    let argv: [*const c_char; 5] = [
        c"sh".as_ptr(),
        c"-c".as_ptr(),
        c"--".as_ptr(),
        cmd,
        core::ptr::null(),
    ];
    let (sh, env) = (SHELL.as_ptr(), current_environ());
    // SAFETY: per the contract; argv lives until the spawn returns.
    unsafe {
        spawn_with(
            real_posix_spawn(),
            pid,
            sh,
            Some(SHELL.to_bytes()),
            ExeId::default(),
            fa,
            attr,
            argv.as_ptr(),
            env,
        )
    }
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

hook! {
    /// # Safety
    /// As `system(3)`.
    fn system(cmd: *const c_char) -> c_int;
    fid = System;
    |real| {
        if cmd.is_null() || !config::in_run() {
            // A null command only asks whether a shell exists.
            return real(cmd);
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
            let mut pid: pid_t = 0;
            let r = spawn_shell(cmd, core::ptr::null(), &attr, &mut pid);
            libc::posix_spawnattr_destroy(&mut attr);
            let mut status: c_int = 0;
            let result = if r == 0 {
                if wait_real(real_pid(pid), &mut status) == -1 {
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
}

/// Streams opened by our popen: `(FILE*, real pid, fd)`; a fixed table of atomics (no lock).
const POPEN_SLOTS: usize = 64;
static POPEN_FILE: [AtomicPtr<libc::FILE>; POPEN_SLOTS] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; POPEN_SLOTS];
static POPEN_PID: [AtomicI32; POPEN_SLOTS] = [const { AtomicI32::new(0) }; POPEN_SLOTS];
static POPEN_FD: [AtomicI32; POPEN_SLOTS] = [const { AtomicI32::new(-1) }; POPEN_SLOTS];

/// A marker FILE* value used to reserve a slot before fdopen returns.
const RESERVED: *mut libc::FILE = core::ptr::dangling_mut();

hook! {
    /// # Safety
    /// As `popen(3)`.
    fn popen(cmd: *const c_char, mode: *const c_char) -> *mut libc::FILE;
    fid = Popen;
    |real| {
        if !config::in_run() || cmd.is_null() || mode.is_null() {
            return real(cmd, mode);
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
            return real(cmd, mode);
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
            let mut pid: pid_t = 0;
            let r = spawn_shell(cmd, &fa, core::ptr::null(), &mut pid);
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
                wait_real(real_pid(pid), &mut st);
                free_slot();
                set_errno(e);
                return core::ptr::null_mut();
            }
            POPEN_PID[slot].store(real_pid(pid), Relaxed);
            POPEN_FD[slot].store(parent_end, Release);
            POPEN_FILE[slot].store(f, Release);
            f
        }
    }
}

hook! {
    /// Closes a stream from our popen and waits for its shell; other streams go to libc's
    /// pclose. Not counted in the census: it creates nothing (its popen was counted).
    ///
    /// # Safety
    /// As `pclose(3)`.
    fn pclose(f: *mut libc::FILE) -> c_int;
    uncounted;
    |real| {
        let slot = if f.is_null() {
            None
        } else {
            (0..POPEN_SLOTS).find(|&i| POPEN_FILE[i].load(Acquire) == f)
        };
        let Some(slot) = slot else {
            // A stream from libc's popen, or the caller's mistake.
            return real(f);
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
}
