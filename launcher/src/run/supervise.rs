//! Starting the sealed command and standing between it and the world while it runs, in one
//! place for every command (`run`, `census`, `verify`, `probe`, `golden`, `demo`):
//!
//! - **Signals are forwarded** (as `timeout --foreground` and tini do): SIGINT, SIGTERM,
//!   SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH sent to seal go to every command it is
//!   running. A signal the kernel sent to seal's whole process group (the terminal's ^C, ^\,
//!   a window resize, the hang-up when the session ends) is not sent again to a command in that
//!   group: it already has it, and a program that counts ^C must see one. (A hang-up the kernel
//!   sent to seal as the session leader is passed on: the command did not get it.) With no
//!   command running, a signal has its default effect on seal.
//! - **The command dies with seal**: `PR_SET_PDEATHSIG(SIGKILL)` in the child before exec
//!   (then `getppid` is checked, in case seal died before the call), so even a seal killed
//!   with SIGKILL leaves no orphan behind. What the command starts in turn is ended by the
//!   run's watch (`watch.rs`) when seal dies without ending the run.
//! - **Closed standard descriptors stay closed**: Rust's runtime reopens a closed 0, 1 or 2 as
//!   `/dev/null` before `main`, which would hand the command a stdin that reads empty and a
//!   stdout that swallows everything (`seal -- echo hi >&-` would exit 0). Which ones were
//!   closed is recorded by a constructor that runs before the runtime, and `seal run` and
//!   `seal census` close them again in the child. seal's own messages keep going to its (now `/dev/null`) fd 2.
//!
//! The launcher itself is not sealed (unless a `seal` runs under another), so the pids here are
//! the kernel's.

use std::io::{self, Read};
use std::process::{Child, Command};

use crate::run::static_image::RootExec;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// The signals passed on to the command.
pub const FORWARDED: [libc::c_int; 7] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
];

/// The forwarded signals that ask seal to stop: after one, the multi-run commands start no
/// further run and exit 128+N.
const STOPPING: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Pids of the commands running now (several under `golden --jobs`); 0 is a free slot.
static CHILDREN: [AtomicI32; 64] = [const { AtomicI32::new(0) }; 64];

/// The forwarded signals (bit N for signal N) seal handles; the others were ignored at start.
static HANDLED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The last stopping signal received while a command ran (0: none).
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

/// Which of fds 0, 1, 2 (bits 0..2) were closed when seal started.
static CLOSED_AT_START: AtomicU8 = AtomicU8::new(0);

/// Runs before Rust's runtime initialisation (which reopens closed standard descriptors).
#[used]
#[link_section = ".init_array"]
static RECORD_CLOSED_STDIO: extern "C" fn() = record_closed_stdio;

extern "C" fn record_closed_stdio() {
    CLOSED_AT_START.store(closed_stdio_now(), Ordering::Relaxed);
}

/// Bits of the standard descriptors that are not open in this process now.
fn closed_stdio_now() -> u8 {
    (0..3)
        // SAFETY: F_GETFD only queries the descriptor.
        .filter(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1)
        .fold(0, |m, fd| m | 1 << fd)
}

/// The standard descriptors (bits of 0, 1, 2) that were closed when seal started.
pub fn closed_at_start() -> u8 {
    CLOSED_AT_START.load(Ordering::Relaxed)
}

/// The stopping signal received while a command ran, if any.
pub fn interrupted() -> Option<i32> {
    Some(INTERRUPTED.load(Ordering::SeqCst)).filter(|&s| s != 0)
}

/// A stopping signal arrived: the run (and the command) ends with status 128+N.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by signal {0}")]
pub struct Interrupted(pub i32);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // Only async-signal-safe work: atomics, getpgrp/getpgid, kill, signal, raise.
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let from_kernel = !info.is_null() && unsafe { (*info).si_code } == libc::SI_KERNEL;
    // A terminal's hang-up goes to the session leader alone: when that is seal (`ssh -t host
    // seal -- cmd`), the command has not had it, so it is passed on like any other.
    // SAFETY: getsid and getpid have no preconditions.
    let to_group =
        from_kernel && !(sig == libc::SIGHUP && unsafe { libc::getsid(0) == libc::getpid() });
    // SAFETY: getpgrp has no preconditions.
    let own_group = unsafe { libc::getpgrp() };
    let mut running = false;
    for slot in &CHILDREN {
        let pid = slot.load(Ordering::SeqCst);
        if pid <= 0 {
            continue;
        }
        running = true;
        // SAFETY: querying and signalling a child of ours, not yet reaped: its slot is cleared
        // as soon as `waitid(WNOWAIT)` sees it exit, before it is reaped (`Supervised::exited`),
        // so the pid cannot have been reused.
        if to_group && unsafe { libc::getpgid(pid) } == own_group {
            continue;
        }
        // SAFETY: as above.
        unsafe { libc::kill(pid, sig) };
    }
    if running {
        if STOPPING.contains(&sig) {
            INTERRUPTED.store(sig, Ordering::SeqCst);
        }
    } else if sig != libc::SIGWINCH {
        // No command: what the signal would have done to seal without this handler.
        // SAFETY: resetting the disposition and re-raising (delivered when the handler returns).
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
}

fn install_handlers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for sig in FORWARDED {
            // SAFETY: a zeroed sigaction with an SA_SIGINFO handler and an empty mask; the
            // current disposition is read first.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, std::ptr::null(), &mut old);
                if old.sa_sigaction == libc::SIG_IGN {
                    // Ignored by whoever started seal (`nohup`, a background job of a script):
                    // ignored by the command too, as it would be without seal.
                    continue;
                }
                HANDLED.fetch_or(1 << sig, Ordering::SeqCst);
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as usize;
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    });
}

/// Blocks the forwarded signals in this thread until dropped: between the fork and the
/// child's registration a signal would find no command to forward to.
struct Blocked(libc::sigset_t);

impl Blocked {
    fn new() -> Blocked {
        // SAFETY: building a signal set and masking it in this thread; the old mask is kept.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for sig in FORWARDED {
                libc::sigaddset(&mut set, sig);
            }
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            Blocked(old)
        }
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `new` (pending signals are delivered now).
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// A running command, registered for signal forwarding until it has exited (or this is
/// dropped).
pub struct Supervised {
    /// std's handle, or none for a root started directly ([`spawn_direct`]).
    pub child: Option<Child>,
    pid: libc::pid_t,
    slot: Option<usize>,
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.unregister();
    }
}

impl Supervised {
    fn unregister(&mut self) {
        if let Some(i) = self.slot.take() {
            CHILDREN[i].store(0, Ordering::SeqCst);
        }
    }

    /// Whether the command has exited, without reaping it (`WNOWAIT`): its pid stays ours
    /// until forwarding to it has stopped, so a signal can never reach a process that reused
    /// the pid. Once true, [`Child::wait`] returns at once.
    pub fn exited(&mut self, block: bool) -> io::Result<bool> {
        let flags = libc::WEXITED | libc::WNOWAIT | if block { 0 } else { libc::WNOHANG };
        loop {
            // SAFETY: waitid fills a zeroed siginfo for our own child.
            let (rc, info) = unsafe {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                let rc = libc::waitid(libc::P_PID, self.pid as libc::id_t, &mut info, flags);
                (rc, info)
            };
            if rc == -1 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            // SAFETY: si_pid is set by waitid (0 when WNOHANG found nothing).
            let done = unsafe { info.si_pid() } != 0;
            if done {
                self.unregister();
            }
            return Ok(done);
        }
    }

    /// Waits for the command to exit and reaps it.
    pub fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        self.exited(true)?;
        if let Some(child) = self.child.as_mut() {
            return child.wait();
        }
        use std::os::unix::process::ExitStatusExt;
        let mut status = 0;
        // SAFETY: our own child, exited (waitid above) and not yet reaped.
        while unsafe { libc::waitpid(self.pid, &mut status, 0) } < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(std::process::ExitStatus::from_raw(status))
    }

    /// Waits for the command (with a `limit`, the leader of its own process group) for at most
    /// `limit`, reading its piped output meanwhile; past the limit the whole group is killed.
    /// Returns the output and whether the limit ran out.
    pub fn wait_with_output(
        mut self,
        limit: Option<Duration>,
    ) -> io::Result<(std::process::Output, bool)> {
        let reader = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                if let Some(mut p) = pipe {
                    let _ = p.read_to_end(&mut buf);
                }
                buf
            })
        };
        let child = self.child.as_mut();
        let (out, err) = child.map_or((None, None), |c| (c.stdout.take(), c.stderr.take()));
        let out_t = reader(out.map(|p| Box::new(p) as _));
        let err_t = reader(err.map(|p| Box::new(p) as _));
        let group = -self.pid;
        let mut timed_out = false;
        let status = match limit {
            None => self.wait()?,
            Some(limit) => {
                // A limit past what an Instant can hold (`timeout = "1000000years"`) is none.
                let deadline = Instant::now().checked_add(limit);
                loop {
                    if self.exited(false)? {
                        break self.wait()?;
                    }
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        timed_out = true;
                        // SAFETY: signals the process group the child leads (process_group(0)).
                        unsafe { libc::kill(group, libc::SIGKILL) };
                        break self.wait()?;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        };
        if timed_out {
            // Whatever the command started in its group dies with it; pipes then reach EOF.
            // SAFETY: as above.
            unsafe { libc::kill(group, libc::SIGKILL) };
        }
        let stdout = out_t.join().unwrap_or_default();
        let stderr = err_t.join().unwrap_or_default();
        let output = std::process::Output {
            status,
            stdout,
            stderr,
        };
        Ok((output, timed_out))
    }

    /// [`Command::output`], supervised: stdout and stderr piped and read, then the status.
    pub fn output(cmd: &mut Command) -> io::Result<std::process::Output> {
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        Ok(spawn(cmd, Stdio::Redirected, false, 0, None)?
            .wait_with_output(None)?
            .0)
    }
}

/// How the command's standard descriptors relate to seal's.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Stdio {
    /// Inherited: those closed when seal started are closed in the command too.
    Inherited,
    /// Set up by the caller (pipes, /dev/null).
    Redirected,
}

/// Spawns `cmd` supervised: signals forwarded, dying with seal, closed stdio kept closed
/// (for [`Stdio::Inherited`]). A stopping signal received earlier refuses to start it.
///
/// `shim_guards`: the command loads libseal as the run's root and nothing else must happen
/// between fork and exec, and its environment holds [`guard_var`]`(true)`; then libseal ties
/// it to seal and std starts it with `posix_spawn`, which does not copy seal's address space
/// (~0.15 ms of a sealed `true`; `seal run` goes further with [`spawn_direct`]). Otherwise (a
/// static or setuid root, a private /tmp to enter, stdio seal found closed, a signal mask
/// inherited from seal's caller) the forked child does it before exec, and the variable says
/// so.
///
/// `confine`: the run's [`seal_abi::flags`] word when the command is a sealed run (0 for an
/// unsealed one): where the fork path runs, its child confines itself as libseal confines a
/// root it loads into ([`crate::run::confine`]).
///
/// `root`: a static root command the child execs itself under supervision, last before std
/// would exec `cmd` (the trampoline, which it execs when the supervision cannot be set up).
pub fn spawn(
    cmd: &mut Command,
    stdio: Stdio,
    shim_guards: bool,
    confine: u32,
    root: Option<std::sync::Arc<RootExec>>,
) -> io::Result<Supervised> {
    use std::os::unix::process::CommandExt;
    refuse_if_interrupted()?;
    install_handlers();
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let closed = match stdio {
        Stdio::Inherited => closed_at_start(),
        Stdio::Redirected => 0,
    };
    let blocked = Blocked::new();
    // The child starts with seal's mask of before (std does not reset it).
    let mask = blocked.0;
    let plain_mask = is_empty(&mask);
    // A root the child execs itself never loads libseal: the child ties it to seal.
    if !(shim_guards && closed == 0 && plain_mask && root.is_none()) {
        let (name, value) = guard_var(false);
        cmd.env(name, value);
        // SAFETY: the closure only makes async-signal-safe calls (signal, sigprocmask, prctl,
        // getppid, close, unshare, capget, capset).
        unsafe {
            cmd.pre_exec(move || {
                child_setup(parent, closed, &mask)?;
                crate::run::confine::child(confine);
                Ok(())
            });
        }
    }
    if let Some(root) = root {
        // SAFETY: `RootExec::exec` makes system calls only, on buffers made before the fork.
        unsafe { cmd.pre_exec(move || root.exec()) };
    }
    let child = cmd.spawn()?;
    let pid = child.id() as i32;
    let slot = register(pid);
    drop(blocked);
    Ok(Supervised {
        child: Some(child),
        pid,
        slot,
    })
}

/// A stopping signal received earlier refuses to start another command.
fn refuse_if_interrupted() -> io::Result<()> {
    match interrupted() {
        Some(sig) => Err(io::Error::new(
            io::ErrorKind::Interrupted,
            Interrupted(sig).to_string(),
        )),
        None => Ok(()),
    }
}

/// No signal in the set.
fn is_empty(set: &libc::sigset_t) -> bool {
    // SAFETY: sigismember only reads the set.
    (1..=64).all(|sig| unsafe { libc::sigismember(set, sig) } != 1)
}

fn register(pid: libc::pid_t) -> Option<usize> {
    CHILDREN.iter().position(|s| {
        s.compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    })
}

/// [`spawn`] with standard descriptors inherited and libseal tying the root to seal, without
/// std ([`crate::run::direct`]): `Ok(None)` when that does not apply (a descriptor seal found
/// closed, a signal mask inherited from seal's caller), for [`spawn`] to do it.
pub fn spawn_direct(p: &crate::run::direct::Prepared) -> io::Result<Option<Supervised>> {
    refuse_if_interrupted()?;
    if closed_at_start() != 0 {
        return Ok(None);
    }
    install_handlers();
    let blocked = Blocked::new();
    let mask = blocked.0;
    if !is_empty(&mask) {
        return Ok(None);
    }
    let (reset, n) = direct_reset();
    let pid = crate::run::direct::spawn(p, &reset[..n], &mask)?;
    Ok(Some(direct_started(pid, blocked)))
}

/// The signals a direct child puts back to their default action (the first `n`): SIGPIPE,
/// which seal ignores, and those seal handles.
fn direct_reset() -> ([libc::c_int; FORWARDED.len() + 1], usize) {
    let handled = HANDLED.load(Ordering::Relaxed);
    let mut reset = [libc::SIGPIPE; FORWARDED.len() + 1];
    let mut n = 1;
    for sig in FORWARDED.into_iter().filter(|s| handled & (1 << s) != 0) {
        reset[n] = sig;
        n += 1;
    }
    (reset, n)
}

/// A directly started child `pid`, registered; seal's signals unblocked again.
fn direct_started(pid: libc::pid_t, blocked: Blocked) -> Supervised {
    let slot = register(pid);
    drop(blocked);
    Supervised {
        child: None,
        pid,
        slot,
    }
}

/// Starts a static root the child execs itself under supervision ([`RootExec::exec`]), with
/// `clone(CLONE_VM | CLONE_VFORK)` as [`spawn_direct`] does: no fork of seal, no copy of the
/// trampoline command's environment (std makes one though the child never execs it), on the
/// image's start-up path. The child starts as [`spawn`]'s would: seal's signal mask of
/// before, the standard descriptors closed at seal's start closed again. `None` (nothing
/// started) when the child could not set the supervision up: the caller then spawns it as
/// before ([`spawn`], which tries once more and else execs the trampoline). `confine`: the
/// run's flags.
pub fn spawn_root(root: &RootExec, confine: u32) -> io::Result<Option<Supervised>> {
    refuse_if_interrupted()?;
    let closed = closed_at_start();
    install_handlers();
    let blocked = Blocked::new();
    let mask = blocked.0;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let (reset, n) = direct_reset();
    // In the child, on seal's memory: system calls only (`child_setup`, `confine::child` and
    // `RootExec::exec` make nothing else).
    let exec = || {
        child_setup(parent, closed, &mask)?;
        crate::run::confine::child(confine);
        root.exec()
    };
    let Some(pid) = crate::run::direct::spawn_with(&exec, &reset[..n], &mask)? else {
        return Ok(None);
    };
    Ok(Some(direct_started(pid, blocked)))
}

/// `LIBSEAL_GUARD` ([`seal_abi::settings::GUARD`]): seal's real pid when libseal is to tie
/// the root to seal, zeros when seal does it itself. Always ten digits, so the choice never
/// changes the size of the root's environment (stack addresses do not depend on it).
pub fn guard_var(by_shim: bool) -> (&'static str, String) {
    let pid = if by_shim { real_pid() } else { 0 };
    (seal_abi::settings::GUARD, format!("{pid:010}"))
}

/// This process's real pid, by the system call itself: under an outer seal (a nested run)
/// libc's getpid, and syscall(SYS_getpid), answer with a virtual pid.
fn real_pid() -> i64 {
    let r: i64;
    // SAFETY: getpid takes no arguments and touches no memory; rcx and r11 are clobbered by
    // the syscall instruction.
    unsafe {
        std::arch::asm!("syscall", inlateout("rax") libc::SYS_getpid => r,
                        lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    r
}

/// In the child, between fork and exec.
fn child_setup(parent: libc::pid_t, closed: u8, mask: &libc::sigset_t) -> io::Result<()> {
    // SAFETY: async-signal-safe calls on our own process.
    unsafe {
        let handled = HANDLED.load(Ordering::Relaxed);
        for sig in FORWARDED {
            if handled & (1 << sig) != 0 {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, mask, std::ptr::null_mut());
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            return Err(io::Error::last_os_error());
        }
        // seal died before PR_SET_PDEATHSIG took effect: we were re-parented already.
        if libc::getppid() != parent {
            libc::_exit(super::status::EXIT_SEAL_FAILED as i32);
        }
        for fd in 0..3 {
            if closed & (1 << fd) != 0 {
                libc::close(fd);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_stdio_is_not_reported_closed() {
        // The test harness has 0, 1 and 2 open (Rust guarantees it after start).
        assert_eq!(closed_stdio_now(), 0);
    }
}
