//! One system call of a supervised thread traced to its exit, so that its arguments (at the
//! entry) and its result (at the exit) can be changed: what a user notification cannot do
//! (its answer either replaces the call or lets it run as it is).
//!
//! The thread is blocked in its notification. The supervisor seizes it
//! (`PTRACE_O_TRACESYSGOOD`) and interrupts it: the kernel cancels the notification and the
//! call is to be made again (`-ERESTARTSYS`, no signal). Resumed with `PTRACE_SYSCALL`, the
//! thread stops at the call's new entry (before seccomp: the registers may be changed there),
//! then makes its notification again, which the supervisor answers `CONTINUE`; the kernel runs
//! the call, and the thread stops at its exit, where the result is changed and the thread
//! detached. The exit stop is waited for from the supervisor's loop ([`step`]): a `wait4`
//! may take as long as its child, a `vfork` until the child execs.
//!
//! A signal that arrives meanwhile (a signal-delivery-stop, a group stop) ends the tracing:
//! the thread is detached with its signal, and the call, restarted after it, makes a new
//! notification. Every step that fails detaches; nothing leaves a thread stopped.

use libc::user_regs_struct as Regs;

use super::remote::regs;

/// `SIGTRAP | 0x80`: a syscall stop under `PTRACE_O_TRACESYSGOOD`.
const SYSCALL_STOP: i32 = libc::SIGTRAP | 0x80;
/// The kernel's restart codes (`-ERESTARTSYS` … `-ERESTART_RESTARTBLOCK`): a call that a
/// signal cut short, to be made again.
const RESTARTS: std::ops::RangeInclusive<i64> = -516..=-512;

/// How starting the tracing went.
pub enum Start {
    /// The thread is on its way to its notification again, its call's entry done.
    Started,
    /// Not seized: the notification is still there to answer (the reason).
    Refused(&'static str),
    /// Seized but given up after the interruption: detached, the call will be made again
    /// (and notified again).
    Again,
}

/// What a stop of a traced thread meant.
pub enum Step {
    /// Not stopped yet.
    Running,
    /// At its call's exit, with these registers (`rax` the result): [`finish`] detaches it.
    Exited(Box<Regs>),
    /// The call was cut short by a signal (it returned a restart code, and is made again
    /// after the signal) : detached.
    Restarted,
    /// Another stop (a signal before the call ran, a group stop), or the thread is gone:
    /// detached (or nothing to detach).
    Lost,
}

/// Looks (without blocking) for the next stop of traced thread `tid`, whose call `nr` has
/// been answered `CONTINUE`.
pub fn step(tid: i32, nr: i64) -> Step {
    let mut st = 0;
    // SAFETY: waitpid on our tracee, without blocking.
    let r = unsafe { libc::waitpid(tid, &mut st, libc::WNOHANG | libc::__WALL) };
    if r == 0 {
        return Step::Running;
    }
    if r < 0 || !libc::WIFSTOPPED(st) {
        return Step::Lost;
    }
    let exit = (libc::WSTOPSIG(st) == SYSCALL_STOP)
        .then(|| regs(tid))
        .flatten()
        .filter(|r| r.orig_rax as i64 == nr);
    match exit {
        Some(r) if RESTARTS.contains(&(r.rax as i64)) => {
            detach(tid, 0);
            Step::Restarted
        }
        Some(r) => Step::Exited(Box::new(r)),
        None => {
            detach(tid, signal_of(st));
            Step::Lost
        }
    }
}

/// Lets thread `tid`, stopped at its call's exit, go on: with registers `r` (a new result)
/// when given, and detached.
pub fn finish(tid: i32, r: Option<&Regs>) {
    if let Some(r) = r {
        // SAFETY: our tracee is in its syscall-exit-stop; its registers, with a new result.
        unsafe { libc::ptrace(libc::PTRACE_SETREGS, tid, 0, r as *const Regs) };
    }
    detach(tid, 0);
}

/// Seizes thread `tid`, blocked in its notification for call `nr`, and takes it to the call's
/// new entry, where `at_entry` may change its registers (false: leave them).
pub fn start(tid: i32, nr: i64, at_entry: impl FnOnce(&mut Regs) -> bool) -> Start {
    // SAFETY: PTRACE_SEIZE with an options word.
    let seized = unsafe {
        libc::ptrace(
            libc::PTRACE_SEIZE,
            tid,
            0,
            libc::PTRACE_O_TRACESYSGOOD as libc::c_long,
        )
    } == 0;
    if !seized {
        return Start::Refused("fork and wait return real pids: ptrace refused");
    }
    // SAFETY: PTRACE_INTERRUPT of our tracee.
    unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) };
    // The interrupt stop (a signal may come first: then it is delivered, and the call is made
    // again after it).
    let Some(st) = wait(tid) else {
        return Start::Again;
    };
    if !is_event_stop(st) || libc::WSTOPSIG(st) != libc::SIGTRAP {
        detach(tid, signal_of(st));
        return Start::Again;
    }
    // SAFETY: our tracee is stopped.
    unsafe { libc::ptrace(libc::PTRACE_SYSCALL, tid, 0, 0) };
    let Some(st) = wait(tid) else {
        return Start::Again;
    };
    let r = (libc::WSTOPSIG(st) == SYSCALL_STOP)
        .then(|| regs(tid))
        .flatten();
    let Some(mut r) = r.filter(|r| r.orig_rax as i64 == nr) else {
        detach(tid, signal_of(st));
        return Start::Again;
    };
    // SAFETY: our tracee is in its syscall-entry-stop; the registers are its own, changed.
    if at_entry(&mut r) && unsafe { libc::ptrace(libc::PTRACE_SETREGS, tid, 0, &r) } != 0 {
        detach(tid, 0);
        return Start::Again;
    }
    // SAFETY: our tracee is stopped.
    if unsafe { libc::ptrace(libc::PTRACE_SYSCALL, tid, 0, 0) } != 0 {
        detach(tid, 0);
        return Start::Again;
    }
    Start::Started
}

/// Waits for the next stop of tracee `tid`; `None` when it is gone (or not stopped).
fn wait(tid: i32) -> Option<i32> {
    let mut st = 0;
    // SAFETY: waitpid on our tracee. It was just interrupted or resumed to a syscall stop
    // that comes at once (or it ends): this does not block for long.
    let r = unsafe { libc::waitpid(tid, &mut st, libc::__WALL) };
    (r == tid && libc::WIFSTOPPED(st)).then_some(st)
}

/// A `PTRACE_EVENT_STOP` (an interrupt, or a group stop).
fn is_event_stop(st: i32) -> bool {
    st >> 16 == libc::PTRACE_EVENT_STOP
}

/// The signal a stop is to deliver on its way out: a signal-delivery-stop's (0 for any other).
fn signal_of(st: i32) -> i32 {
    let sig = libc::WSTOPSIG(st);
    if st >> 16 == 0 && sig != SYSCALL_STOP {
        sig
    } else {
        0
    }
}

/// Detaches tracee `tid`, which is stopped, with signal `sig` (0: none).
fn detach(tid: i32, sig: i32) {
    // SAFETY: our tracee, in a ptrace stop.
    unsafe { libc::ptrace(libc::PTRACE_DETACH, tid, 0, sig as libc::c_long) };
}
