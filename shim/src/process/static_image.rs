//! The exec of a static binary, under system-call supervision (the shim's half; the contract
//! is `seal_abi::supervised`, the supervisor `seal __static-supervisor` in the launcher).
//!
//! In the process about to exec (often a fork or vfork child, so raw system calls only, no
//! allocation, nothing of libc's state): ask the run's supervision server for a supervisor
//! (`static_server`: it forks one; the first static image of a run starts the server), or
//! where there can be no server start one (the `seal` binary the run directory links to, as a
//! grandchild that leaves this process's tree at once, in a session of its own); let it attach
//! with ptrace, install the seccomp filter, hand it the listener, and exec. Until the supervisor holds the listener nothing is installed that could fail a
//! call: any failure before that leaves the exec as it was, reported as unsealed.

use libc::c_char;
use seal_abi::supervised;
use seal_abi::supervised::handover::{self, Handover};

use crate::core::{config, sys};
use crate::process::target::{in_run_dir, Path};
use crate::process::{go_entropy, go_rand, go_vdso, static_server};

type Argv = *const *const c_char;

/// Starts the supervision of the exec that follows; `envp` is the new image's environment,
/// `pie` whether the image is a static-pie one ([`handover::is_static_pie`]).
/// Returns the socket to the supervisor (to say the exec failed, [`exec_failed`]), or `None`
/// when the image is to run unsupervised.
///
/// # Safety
/// `envp` is a valid environment vector.
pub unsafe fn prepare(envp: Argv, pie: bool) -> Option<i32> {
    // SAFETY: per the contract.
    unsafe { start(envp, None, pie) }
}

/// Supervises this process itself: a dynamically linked Go program (cgo), whose runtime makes
/// raw `getpid`, `getrandom`, `uname` and signal system calls from the executable's own code,
/// past libseal. Called from libseal's constructor (one thread, before the Go runtime starts);
/// the supervisor serves those calls with the values libseal gives (`vpid`, `ppid`) and seals
/// `AT_RANDOM`, without ptrace (nothing to change at an exec). Returns whether it is in place.
///
/// # Safety
/// `envp` is the image's initial environment vector; only one thread runs.
pub unsafe fn supervise_self(envp: Argv, vpid: i32, ppid: i32) -> bool {
    // SAFETY: per the contract.
    match unsafe { start(envp, Some((vpid, ppid)), false) } {
        Some(sock) => {
            // The supervisor keeps its end until it ends; ours is not needed past this point.
            sys::close(sock);
            true
        }
        None => false,
    }
}

/// [`prepare`], or with `own: Some((vpid, ppid))` [`supervise_self`].
///
/// # Safety
/// As [`prepare`].
unsafe fn start(envp: Argv, own: Option<(i32, i32)>, pie: bool) -> Option<i32> {
    let run_dir = config::RUN_DIR.get();
    let mut exe = in_run_dir(supervised::SUPERVISOR_LINK.as_bytes())?;
    // The supervisor's environment: the new image's LIBSEAL_* variables, nothing else (no
    // LD_PRELOAD: it runs unsealed).
    let mut env: [*const c_char; 65] = [core::ptr::null(); 65];
    let mut n = 0;
    let mut p = envp;
    // SAFETY: envp is a NULL-terminated vector of C strings.
    unsafe {
        while !p.is_null() && !(*p).is_null() && n < 64 {
            if sys::cstr_starts_with(*p, b"LIBSEAL_") && !sys::cstr_starts_with(*p, b"LIBSEAL_PAD=")
            {
                env[n] = *p;
                n += 1;
            }
            p = p.add(1);
        }
    }
    // Yama (if there is one) lets the supervisor, which is not an ancestor, attach; it names
    // itself once it runs.
    prctl(libc::PR_SET_PTRACER, -1);
    let exe_c = exe.as_cstr().as_ptr().cast();
    let pid = sys::getpid();
    // The run's server (started now if this is the run's first static image); a supervisor
    // of this image's own when there can be none.
    let server = static_server::connect(run_dir, exe_c, &env);
    // SAFETY: `env` holds C strings up to a NULL.
    let asked = |s: i32| unsafe { handover::request(s, pid, own, env_bytes(&env)) };
    let sock = match server {
        Some(s) if asked(s) => s,
        _ => {
            if let Some(s) = server {
                sys::close(s);
            }
            match alone(exe_c, &env, pid, own) {
                Some(s) => s,
                None => {
                    prctl(libc::PR_SET_PTRACER, 0);
                    return None;
                }
            }
        }
    };
    // An exec waits in its notification for the supervisor; a process that supervises
    // itself waits for READY.
    match handover::hand_over(sock, pie, own.is_some()) {
        Handover::Ready => Some(sock),
        Handover::Refused => {
            handover::give_up(sock);
            None
        }
        // Nothing can take the filter back; say so loudly.
        Handover::Unanswered => {
            sys::warn(b"the static binary's supervisor did not answer: its clock, entropy and pid calls fail");
            Some(sock)
        }
    }
}

/// `env` as the byte pointers [`handover::request`] takes.
fn env_bytes(env: &[*const c_char]) -> &[*const u8] {
    // SAFETY: `*const c_char` and `*const u8` have one layout.
    unsafe { core::slice::from_raw_parts(env.as_ptr().cast(), env.len()) }
}

/// Starts a supervisor for this image alone (`seal __static-supervisor FD PID [VPID PPID]`,
/// with `env`), as before the run had a server: when the run directory's path is too long
/// for a socket, or its server is gone. The socket to it, or `None`.
fn alone(
    exe: *const c_char,
    env: &[*const c_char],
    pid: i32,
    own: Option<(i32, i32)>,
) -> Option<i32> {
    let mut sv = [0i32; 2];
    // SAFETY: socketpair writes two descriptors into `sv`.
    let r = unsafe {
        sys::syscall6(
            libc::SYS_socketpair,
            libc::AF_UNIX as i64,
            (libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC) as i64,
            0,
            sv.as_mut_ptr() as i64,
            0,
            0,
        )
    };
    if r != 0 {
        return None;
    }
    let mut fd_arg = Path::new();
    fd_arg.push_i64(sv[1] as i64);
    let mut pid_arg = Path::new();
    pid_arg.push_i64(pid as i64);
    let arg0 = *b"seal\0";
    let mut role = [0u8; 32];
    role[..supervised::SUPERVISOR_ARG.len()].copy_from_slice(supervised::SUPERVISOR_ARG.as_bytes());
    let (mut vpid_arg, mut ppid_arg) = (Path::new(), Path::new());
    let mut argv: [*const c_char; 7] = [
        arg0.as_ptr().cast(),
        role.as_ptr().cast(),
        fd_arg.as_cstr().as_ptr().cast(),
        pid_arg.as_cstr().as_ptr().cast(),
        core::ptr::null(),
        core::ptr::null(),
        core::ptr::null(),
    ];
    if let Some((vpid, ppid)) = own {
        vpid_arg.push_i64(vpid as i64);
        ppid_arg.push_i64(ppid as i64);
        argv[4] = vpid_arg.as_cstr().as_ptr().cast();
        argv[5] = ppid_arg.as_cstr().as_ptr().cast();
    }
    let started = static_server::spawn(exe, &argv, env, sv[1]);
    sys::close(sv[1]);
    if !started {
        sys::close(sv[0]);
        return None;
    }
    Some(sv[0])
}

/// Tells the supervisor that the exec failed (it detaches), and closes the socket. An exec
/// failed for want of a supervisor (it died before it held the listener) is said loudly:
/// nothing can take the filter back.
pub fn exec_failed(sock: i32, errno: i32) {
    if errno == handover::NO_SUPERVISOR {
        sys::warn(b"the static binary's supervisor died before it ran: its exec and every call seal supervises fail");
    }
    handover::exec_failed(sock, errno);
}

fn prctl(option: i32, arg: i64) {
    handover::prctl(option, arg);
}

/// A dynamically linked Go program, at libseal's constructor: supervised
/// ([`supervise_self`]) and reported as partly sealed, or reported as not sealed.
///
/// # Safety
/// As [`supervise_self`].
pub unsafe fn supervise_go(envp: Argv) {
    use seal_abi::flags::{HOST, PID, RANDOM};
    use seal_abi::unsealed::{GO_RUNTIME, GO_SUPERVISED};
    if !config::sealed(HOST | PID | RANDOM) {
        return;
    }
    let vpid = crate::process::vpid::getpid_value();
    let ppid = crate::process::vpid::getppid_value();
    let time = config::sealed(seal_abi::flags::TIME);
    // The clock page the runtime's vDSO will read, made before the supervisor, which takes it.
    let page = if time {
        go_vdso::make_page()
    } else {
        core::ptr::null_mut()
    };
    // Likewise the mapping its `crypto/rand` will read (the executable's symbols read once,
    // for it and for `runtime.cputicks`).
    let sites = if config::sealed(RANDOM) {
        go_entropy::find_sites()
    } else {
        None
    };
    let entropy = go_entropy::prepare(sites.and_then(|s| s.0.random));
    let entropy_made = entropy.is_some();
    let mut given = false;
    // SAFETY: per the contract.
    let kind = if unsafe { supervise_self(envp, vpid, ppid) } {
        if let Some(p) = entropy {
            // SAFETY: per the contract (one thread, the runtime not started).
            unsafe { go_entropy::give(p) };
        }
        // Map order: each thread's `fastrand` seeded from the sealed `AT_RANDOM` and a
        // constant, as in a static Go image.
        use core::sync::atomic::Ordering::Relaxed;
        let (seed, lineage) = (config::SEED.load(Relaxed), config::LINEAGE.load(Relaxed));
        if let Some(at) = sites.and_then(|s| s.0.cputicks) {
            let key = seed ^ lineage;
            // SAFETY: per the contract (one thread, the runtime not started).
            unsafe { go_entropy::seal_cputicks(at, seal_abi::mix64(key ^ 0x0074_7363) >> 1) };
        }
        // Its own random numbers one sequence (`go_rand`), or the census says why not.
        if config::sealed(RANDOM) {
            use seal_abi::supervised::go_rand::outcome;
            let found = sites.map(|s| (s.0.rand, s.1));
            match found {
                None => go_rand::say(outcome::NONE, outcome::UNREAD),
                Some((None, _)) => go_rand::say(outcome::NONE, outcome::NOT_FOUND),
                Some((Some(rand), low)) => {
                    let key = seal_abi::supervised::go_rand::key(seed, lineage);
                    // Its `usleep` and `gettid` answered in the image too.
                    let s = sites.map(|s| s.0).unwrap_or_default();
                    let sys = go_rand::Sys {
                        usleep: s.usleep,
                        gettid: s.gettid.filter(|_| config::sealed(PID)).map(|g| (g, vpid)),
                    };
                    // SAFETY: per the contract (one thread, the runtime not started).
                    match unsafe { go_rand::seal(&rand, low, key, sys) } {
                        Err(why) => go_rand::say(outcome::NONE, why),
                        Ok(()) if !rand.maps && rand.inlined[0].0 == 0 => {
                            go_rand::say(outcome::MAPS, "")
                        }
                        Ok(()) => {}
                    }
                }
            }
        }
        // SAFETY: per the contract.
        match unsafe { vdso_entry(envp) } {
            // SAFETY: per the contract; the entry is the stack's.
            Some(e) if !page.is_null() && unsafe { go_vdso::give(e, page) } => given = true,
            // SAFETY: as above.
            Some(e) if time => unsafe { *e = AT_IGNORE },
            _ => {}
        }
        GO_SUPERVISED
    } else {
        if let Some(p) = entropy {
            p.forget();
        }
        GO_RUNTIME
    };
    if entropy_made {
        // The supervisor has mapped it, or never will.
        go_entropy::unlink_file();
    }
    if !page.is_null() {
        // The supervisor has mapped it, or never will.
        go_vdso::unlink_page();
        if !given {
            // SAFETY: our mapping of one page, which nothing of ours reads.
            unsafe { sys::munmap(page.cast(), 4096) };
        }
    }
    let mut exe = [0u8; 4096];
    let n = sys::readlink(b"/proc/self/exe\0", &mut exe);
    crate::core::census::record_unsealed(kind, &exe[..n]);
}

/// `AT_IGNORE`: an auxiliary vector entry no one reads.
const AT_IGNORE: u64 = 1;

/// The Go runtime's view of the vDSO: the `AT_SYSINFO_EHDR` entry of the auxiliary vector on
/// the stack (after the environment vector's NULL), which the runtime reads when it starts
/// (C library and loader read theirs long before; libseal seals libc's). Its type word is
/// made `AT_IGNORE` (the runtime reads its clocks by system call, which the supervisor
/// serves), or its value points at a vDSO of libseal's making (`go_vdso`). Found only when
/// the vector there is the kernel's (its `AT_PHDR` and `AT_SYSINFO_EHDR` are `getauxval`'s):
/// an environment vector copied elsewhere is left as it is.
///
/// # Safety
/// `envp` is the image's initial environment vector; only one thread runs.
unsafe fn vdso_entry(envp: Argv) -> Option<*mut u64> {
    // SAFETY: getauxval has no preconditions.
    let (phdr, vdso) = unsafe {
        (
            libc::getauxval(libc::AT_PHDR),
            libc::getauxval(libc::AT_SYSINFO_EHDR),
        )
    };
    if envp.is_null() || vdso == 0 {
        return None;
    }
    // SAFETY: a NULL-terminated vector; on the initial stack the auxiliary vector's (type,
    // value) words follow its NULL, ended by AT_NULL; at most 64 pairs are looked at, and the
    // vector is used only when it holds the kernel's own values.
    unsafe {
        let mut p = envp;
        while !(*p).is_null() {
            p = p.add(1);
        }
        let auxv = p.add(1) as *mut u64;
        let mut at = None;
        let mut phdr_seen = false;
        for i in 0..64 {
            let (kind, value) = (*auxv.add(2 * i), *auxv.add(2 * i + 1));
            match kind {
                0 => break,
                k if k == libc::AT_PHDR => phdr_seen = value == phdr,
                k if k == libc::AT_SYSINFO_EHDR && value == vdso => at = Some(auxv.add(2 * i)),
                _ => {}
            }
        }
        at.filter(|_| phdr_seen)
    }
}
