//! Processes: virtual pids, fork/exec/spawn (re-injecting the seal into every child, also when
//! its environment was cleaned), the run-wide pid table, and reports of what cannot be sealed.
//!
//! - `crate::core::table` (shared with `world`): the run-wide `run.table` (vpid <-> real pid,
//!   reaped statuses).
//! - `vpid`: this process's identity, virtual tids, translation both ways.
//! - `env`: the environment of a new image (LD_PRELOAD, settings, per-process state).
//! - `target`: can libseal follow this exec (static, setuid, foreign architecture)?
//! - `hooks`: the exported entry points (pids, signals, waits, fork, exec, spawn, threads).
//!
//! Virtual pids are allocated by the parent before it creates a child, from the child's
//! lineage (its place in the process tree), so the same tree gets the same numbers when each
//! process starts its children one after another. Concurrent spawns from different processes
//! still get the same numbers unless two lineages hash to the same candidate (then the first
//! to claim it wins and the other takes its next candidate); see docs/processes.md.

pub mod confine;
pub mod env;
mod go_entropy;
mod go_kept;
mod go_rand;
mod go_vdso;
#[cfg(not(test))]
pub(crate) mod hooks;
pub mod static_image;
mod static_server;
pub mod target;
pub mod vfork;
pub mod vpid;

use core::sync::atomic::Ordering::Relaxed;

use seal_abi::Fid;

use crate::core::{census, config, sys, table, thread};

/// Called once per process image after the configuration is loaded, before its census slot
/// is opened (it may correct the identity the file is named after).
pub fn on_start() {
    vpid::on_start();
}

/// Checks an exec target and records an `unsealed` event when libseal cannot follow it. The
/// shim prints nothing itself: the launcher prints one line per distinct program at the end
/// of the run (unless `-q`), deduplicated across every process of the run. Returns the
/// program file the exec runs, when known.
pub fn check_target(path: Option<&[u8]>) -> target::ExeId {
    let Some(path) = path else {
        return target::ExeId::default();
    };
    let mut p = target::Path::new();
    p.push(path);
    check_path(&mut p)
}

/// [`target::check`], recording the program libseal cannot follow.
fn check_path(p: &mut target::Path) -> target::ExeId {
    target::check(p.as_cstr()).unwrap_or_else(|(kind, prog)| {
        census::record_unsealed(kind, prog.as_bytes());
        target::ExeId::default()
    })
}

/// What an exec hook learns of its target: the program file (when known), and a static
/// program libseal cannot load into, not yet recorded (the exec may be supervised:
/// [`static_image`]).
pub struct ExecTarget {
    pub id: target::ExeId,
    pub static_prog: Option<target::Path>,
}

/// [`check_target`] for an exec hook: a static program is handed back, not recorded.
pub fn check_exec(path: Option<&[u8]>) -> ExecTarget {
    let mut p = target::Path::new();
    if let Some(path) = path {
        p.push(path);
    }
    check_exec_path(&mut p)
}

fn check_exec_path(p: &mut target::Path) -> ExecTarget {
    if p.len == 0 {
        return ExecTarget {
            id: target::ExeId::default(),
            static_prog: None,
        };
    }
    match target::check(p.as_cstr()) {
        Ok(id) => ExecTarget {
            id,
            static_prog: None,
        },
        Err((seal_abi::unsealed::STATIC_BINARY, prog)) => ExecTarget {
            id: target::ExeId::default(),
            static_prog: Some(prog),
        },
        Err((kind, prog)) => {
            census::record_unsealed(kind, prog.as_bytes());
            ExecTarget {
                id: target::ExeId::default(),
                static_prog: None,
            }
        }
    }
}

/// [`check_search`] for an exec hook ([`check_exec`]).
pub fn check_search_exec(file: &[u8]) -> Option<(target::Path, ExecTarget)> {
    let mut p = target::search_path(file)?;
    let mut q = target::Path::new();
    q.push(p.as_bytes());
    let t = check_exec_path(&mut q);
    let _ = p.as_cstr();
    Some((p, t))
}

/// Resolves a `p`-variant's file and checks it; returns the path the kernel will be given and
/// the program file it runs.
pub fn check_search(file: &[u8]) -> Option<(target::Path, target::ExeId)> {
    let mut p = target::search_path(file)?;
    let id = check_path(&mut p);
    Some((p, id))
}

/// The new image's `LIBSEAL_EXE` key and name hash (both 0 when the program is unknown):
/// the file name is the one the kernel is given, its `AT_EXECFN`. Only an absolute name
/// names one dentry: `./prog` from two directories may be two links to one file, and a
/// descriptor (`/dev/fd/N`, `/proc/…`) may lead anywhere.
fn exe_tag(exe: target::ExeId, layout: Option<&env::Layout>) -> (u64, u64) {
    let plain =
        |f: &[u8]| f.starts_with(b"/") && !f.starts_with(b"/dev/fd/") && !f.starts_with(b"/proc/");
    match layout {
        Some(l) if exe != target::ExeId::default() && plain(l.file) => {
            let name = seal_abi::name_hash(l.file);
            (seal_abi::exe_key(exe.dev, exe.ino, name), name)
        }
        _ => (0, 0),
    }
}

/// The file name the kernel gets for `execveat(dirfd, rel)` / `fexecve(dirfd)` (`rel` empty):
/// what goes on the new stack as `AT_EXECFN`.
pub fn kernel_file_name(dirfd: i32, rel: &[u8]) -> target::Path {
    target::execveat_path(dirfd, rel, b"/dev/fd/")
}

/// The environment for an exec by this process (same pid, next image generation). `None`:
/// pass the caller's own environment (not in a run, another run's environment, no memory).
///
/// # Safety
/// `envp` is null or a NULL-terminated array of C strings.
pub unsafe fn exec_env(
    envp: *const *const libc::c_char,
    layout: Option<env::Layout>,
    exe: target::ExeId,
) -> Option<env::EnvBlock> {
    if !config::in_run() {
        return None;
    }
    let exe = exe_tag(exe, layout.as_ref());
    let st = match vfork::child() {
        // A vfork child's exec: image 1 of the child, as after a fork.
        Some(p) => env::ImageState {
            clock: thread::peek(),
            vpid: if p.vpid > 0 { p.vpid } else { sys::getpid() },
            ppid: p.parent,
            lineage: p.lineage,
            children: 0,
            gen: 1,
            exe,
            names: 0,
        },
        // The launch chain is not an input: the new image starts from this image's start and
        // the time its waits moved (not the ticks of its reads: a wrapper that reads the clock
        // before it execs changes nothing), with children counted afresh (its children are
        // keyed by its own ordinal), and knows which programs ran before it.
        None => env::ImageState {
            clock: thread::waited(),
            vpid: vpid::current(),
            ppid: config::PPID.load(Relaxed),
            lineage: config::LINEAGE.load(Relaxed),
            children: 0,
            gen: config::GEN.load(Relaxed) + 1,
            exe,
            names: match config::IMAGE_NAME.load(Relaxed) as u16 {
                0 => config::NAMES.load(Relaxed),
                n => seal_abi::settings::push_name(config::NAMES.load(Relaxed), n),
            },
        },
    };
    // SAFETY: forwarded.
    unsafe { env::build(envp, &env::current_settings(), &st, layout) }
}

/// The environment for a new child process `p` (posix_spawn, system, popen).
///
/// # Safety
/// As [`exec_env`].
pub unsafe fn spawn_env(
    envp: *const *const libc::c_char,
    p: &vpid::Pending,
    layout: Option<env::Layout>,
    exe: target::ExeId,
) -> Option<env::EnvBlock> {
    let exe = exe_tag(exe, layout.as_ref());
    let st = env::ImageState {
        clock: thread::peek(),
        vpid: p.vpid,
        ppid: p.parent,
        lineage: p.lineage,
        children: 0,
        gen: 0,
        exe,
        names: 0,
    };
    // SAFETY: forwarded.
    unsafe { env::build(envp, &env::current_settings(), &st, layout) }
}

/// `syscall(SYS_getpid | SYS_gettid | SYS_kill | …)`: `Some(result)` when handled here.
///
/// # Safety
/// Arguments as the system call takes them.
pub unsafe fn sys_pid(n: libc::c_long, a: [libc::c_long; 6], ra: u64) -> Option<libc::c_long> {
    use libc::c_long as L;
    // SAFETY: the caller's system call with translated pid arguments.
    let raw = |n: L, a: [L; 6]| unsafe { crate::core::real::syscall(n, a) };
    let fid = match n {
        libc::SYS_getpid => Fid::SysGetpid,
        libc::SYS_gettid => Fid::SysGettid,
        libc::SYS_getppid => Fid::Getppid,
        libc::SYS_kill => Fid::Kill,
        libc::SYS_tgkill => Fid::Tgkill,
        libc::SYS_tkill => Fid::Tkill,
        libc::SYS_wait4 => Fid::Wait4,
        libc::SYS_pidfd_open => Fid::PidfdOpen,
        libc::SYS_getpgid => Fid::Getpgid,
        libc::SYS_getsid => Fid::Getsid,
        libc::SYS_clone | libc::SYS_clone3 => Fid::Clone,
        libc::SYS_getpriority => Fid::Getpriority,
        libc::SYS_setpriority => Fid::Setpriority,
        libc::SYS_prlimit64 => Fid::Prlimit,
        libc::SYS_sched_getscheduler => Fid::SchedGetscheduler,
        libc::SYS_sched_setscheduler => Fid::SchedSetscheduler,
        libc::SYS_sched_getparam => Fid::SchedGetparam,
        libc::SYS_sched_setparam => Fid::SchedSetparam,
        libc::SYS_sched_rr_get_interval => Fid::SchedRrGetInterval,
        libc::SYS_rt_sigqueueinfo => Fid::Sigqueue,
        libc::SYS_ioprio_get | libc::SYS_ioprio_set => Fid::SysIoprio,
        libc::SYS_sched_getattr | libc::SYS_sched_setattr => Fid::SysSchedAttr,
        libc::SYS_perf_event_open => Fid::SysPerfEventOpen,
        _ => return None,
    };
    census::count(fid, seal_abi::NO_DETAIL, ra);
    if !vpid::sealed() {
        return None;
    }
    let mut b = a;
    Some(match n {
        libc::SYS_getpid => vpid::current() as L,
        libc::SYS_gettid => vpid::gettid_value() as L,
        libc::SYS_getppid => vpid::getppid_value() as L,
        libc::SYS_kill => {
            b[0] = vpid::pid_arg_to_real(a[0] as i32) as L;
            raw(n, b)
        }
        libc::SYS_tgkill => {
            b[0] = vpid::to_real(a[0] as i32) as L;
            b[1] = vpid::to_real(a[1] as i32) as L;
            raw(n, b)
        }
        libc::SYS_perf_event_open => {
            // (attr, pid, cpu, group_fd, flags): the pid (or tid) to count, unless it names a
            // cgroup's descriptor (PERF_FLAG_PID_CGROUP).
            const PERF_FLAG_PID_CGROUP: L = 1 << 2;
            if a[4] & PERF_FLAG_PID_CGROUP == 0 {
                b[1] = vpid::to_real(a[1] as i32) as L;
            }
            raw(n, b)
        }
        libc::SYS_tkill | libc::SYS_pidfd_open => {
            b[0] = vpid::to_real(a[0] as i32) as L;
            raw(n, b)
        }
        libc::SYS_getpgid | libc::SYS_getsid => {
            b[0] = vpid::to_real(a[0] as i32) as L;
            let r = raw(n, b);
            if r > 0 {
                vpid::to_virt(r as i32) as L
            } else {
                r
            }
        }
        libc::SYS_wait4 => {
            b[0] = vpid::pid_arg_to_real(a[0] as i32) as L;
            let mut st = 0i32;
            b[1] = &mut st as *mut i32 as L;
            let r = raw(n, b);
            if r > 0 {
                let sp = a[1] as *mut i32;
                if !sp.is_null() {
                    // SAFETY: the caller's status pointer.
                    unsafe { *sp = st };
                }
                reaped(r as i32, st) as L
            } else {
                r
            }
        }
        // A pid (0 = the caller) first.
        libc::SYS_prlimit64
        | libc::SYS_sched_getscheduler
        | libc::SYS_sched_setscheduler
        | libc::SYS_sched_getparam
        | libc::SYS_sched_setparam
        | libc::SYS_sched_rr_get_interval
        | libc::SYS_rt_sigqueueinfo
        | libc::SYS_sched_getattr
        | libc::SYS_sched_setattr => {
            b[0] = vpid::to_real(a[0] as i32) as L;
            raw(n, b)
        }
        // (which, who): a process or process group id unless `which` names a user.
        libc::SYS_getpriority
        | libc::SYS_setpriority
        | libc::SYS_ioprio_get
        | libc::SYS_ioprio_set => {
            b[1] = priority_who_to_real(n, a[0] as i32, a[1] as i32) as L;
            raw(n, b)
        }
        // clone/clone3 through syscall(): counted, passed through (the child, if it is a
        // process, takes a fresh identity when it first asks for its pid).
        _ => return None,
    })
}

/// The `who` of `getpriority`/`setpriority` (`which` = PRIO_PROCESS 0, PRIO_PGRP 1, PRIO_USER
/// 2) or `ioprio_get`/`ioprio_set` (IOPRIO_WHO_PROCESS 1, IOPRIO_WHO_PGRP 2, IOPRIO_WHO_USER
/// 3), with a virtual process or group id made real (0, the caller, stays 0).
pub fn priority_who_to_real(n: libc::c_long, which: i32, who: i32) -> i32 {
    let is_user = if n == libc::SYS_ioprio_get || n == libc::SYS_ioprio_set {
        which == 3
    } else {
        which == libc::PRIO_USER as i32
    };
    if is_user {
        who
    } else {
        vpid::to_real(who)
    }
}

/// After a successful wait for real pid `real` with wait status `status`: records the status
/// (when the child was reaped, not merely stopped) and returns the pid to show.
pub fn reaped(real: i32, status: i32) -> i32 {
    let v = table::get().and_then(|t| t.virt(real));
    let ended = libc::WIFEXITED(status) || libc::WIFSIGNALED(status);
    if let Some(v) = v {
        if ended {
            vpid::reaped(v, status);
        }
    }
    if vpid::is_raw(real) {
        if ended {
            vpid::forget_raw(real);
        }
        return real;
    }
    // A stop of a process with no virtual pid yet: a tracer's new tracee, stopped before it
    // could register itself. This tracer knows it by its real pid from now on.
    if v.is_none() && !ended && vpid::sealed() {
        vpid::show_raw(real);
    }
    match v {
        Some(v) if vpid::sealed() => v,
        _ => real,
    }
}

/// The `wait` status word of a child that ended, from `waitid`'s `si_code` and `si_status`;
/// `None` for a child that only stopped or continued.
pub fn wait_status(code: i32, st: i32) -> Option<i32> {
    match code {
        libc::CLD_EXITED => Some((st & 0xff) << 8),
        libc::CLD_KILLED => Some(st & 0x7f),
        libc::CLD_DUMPED => Some((st & 0x7f) | 0x80),
        _ => None,
    }
}

/// If `path` is `/proc/<vpid>/…` (or `/proc/<vpid>/task/<vtid>/…`) for a virtual pid of this
/// run, writes the same path with the real pids into `out` (NUL-terminated) and returns
/// true. Called by every `open`-family hook (they live in `crate::open`).
pub fn translate_proc_path(path: &[u8], out: &mut [u8; 4096]) -> bool {
    if !path.starts_with(b"/proc/") || !config::in_run() || !vpid::sealed() {
        return false;
    }
    rewrite_proc_path(path, out, &vpid::to_real)
}

/// The pure part of [`translate_proc_path`], with the translation passed in.
fn rewrite_proc_path(path: &[u8], out: &mut [u8; 4096], to_real: &dyn Fn(i32) -> i32) -> bool {
    let path = match path.iter().position(|&c| c == 0) {
        Some(n) => &path[..n],
        None => path,
    };
    if !path.starts_with(b"/proc/") {
        return false;
    }
    let mut b = sys::StackBuf::<4096>::new();
    b.push(b"/proc/");
    let Some((mut changed, mut rest)) = translate_component(&path[6..], &mut b, to_real) else {
        return false;
    };
    if rest.starts_with(b"/task/") {
        b.push(b"/task/");
        rest = &rest[6..];
        if let Some((c, r)) = translate_component(rest, &mut b, to_real) {
            changed |= c;
            rest = r;
        }
    }
    if !changed || b.len + rest.len() >= out.len() - 1 {
        return false;
    }
    b.push(rest);
    out[..b.len].copy_from_slice(b.as_bytes());
    out[b.len] = 0;
    true
}

/// Translates the leading number of `s` into `b`; `(changed, rest)`; `None` if `s` does not
/// start with a number followed by `/` or the end.
fn translate_component<'a, const N: usize>(
    s: &'a [u8],
    b: &mut sys::StackBuf<N>,
    to_real: &dyn Fn(i32) -> i32,
) -> Option<(bool, &'a [u8])> {
    let n = s.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 || n > 9 || (n < s.len() && s[n] != b'/') {
        return None;
    }
    let v = sys::parse_i64(&s[..n])? as i32;
    let real = to_real(v);
    b.push_i64(real as i64);
    Some((real != v, &s[n..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(p: &str) -> Option<String> {
        let mut out = [0u8; 4096];
        let map = |v: i32| match v {
            1000 => 4242,
            1234 => 777,
            v => v,
        };
        rewrite_proc_path(p.as_bytes(), &mut out, &map).then(|| {
            let n = out.iter().position(|&c| c == 0).unwrap();
            String::from_utf8(out[..n].to_vec()).unwrap()
        })
    }

    #[test]
    fn waitid_codes_become_wait_statuses() {
        let st = wait_status(libc::CLD_EXITED, 3).unwrap();
        assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 3);
        let st = wait_status(libc::CLD_KILLED, libc::SIGKILL).unwrap();
        assert!(libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGKILL);
        let st = wait_status(libc::CLD_DUMPED, libc::SIGSEGV).unwrap();
        assert!(libc::WIFSIGNALED(st) && libc::WCOREDUMP(st));
        assert_eq!(wait_status(libc::CLD_STOPPED, libc::SIGSTOP), None);
        assert_eq!(wait_status(libc::CLD_CONTINUED, libc::SIGCONT), None);
    }

    #[test]
    fn proc_paths_of_virtual_pids_are_rewritten() {
        assert_eq!(
            rewrite("/proc/1000/status").as_deref(),
            Some("/proc/4242/status")
        );
        assert_eq!(rewrite("/proc/1000").as_deref(), Some("/proc/4242"));
        assert_eq!(rewrite("/proc/1000\0junk").as_deref(), Some("/proc/4242"));
        assert_eq!(
            rewrite("/proc/1000/task/1234/stat").as_deref(),
            Some("/proc/4242/task/777/stat")
        );
        assert_eq!(
            rewrite("/proc/self/task/1234/comm").as_deref(),
            None,
            "only numeric first components"
        );
        assert_eq!(
            rewrite("/proc/55/task/1234").as_deref(),
            Some("/proc/55/task/777")
        );
    }

    #[test]
    fn other_paths_are_left_alone() {
        for p in [
            "/proc/self/status",
            "/proc/999x/status",
            "/proc/55/status",
            "/etc/1000",
            "/proc/",
        ] {
            assert_eq!(rewrite(p), None, "{p}");
        }
    }
}
