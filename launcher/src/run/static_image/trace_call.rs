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
//! detached. Every stop is taken from the supervisor's loop ([`poll`]), never waited for: a
//! `wait4` may take as long as its child, a `vfork` until the child execs, and the calls the
//! thread (or its child) makes meanwhile are served.
//!
//! A signal that arrives meanwhile is delivered (`PTRACE_SYSCALL` with it) and the thread
//! stays traced: its handler's system calls pass (their stops are let go), and the call, made
//! again after it with the arguments it was made with, is taken at its new entry. A group
//! stop, or more than [`PASS_MAX`] other stops, detaches: nothing leaves a thread stopped,
//! and the supervisor's own exit detaches every tracee.

use libc::user_regs_struct as Regs;

use super::remote::regs;

/// `SIGTRAP | 0x80`: a syscall stop under `PTRACE_O_TRACESYSGOOD`.
const SYSCALL_STOP: i32 = libc::SIGTRAP | 0x80;
/// The kernel's restart codes (`-ERESTARTSYS` … `-ERESTART_RESTARTBLOCK`): a call that a
/// signal cut short, to be made again.
const RESTARTS: std::ops::RangeInclusive<i64> = -516..=-512;
/// `-ERESTARTSYS` (made again only after a handler with `SA_RESTART`) and `-ERESTARTNOINTR`
/// (made again after any handler).
const ERESTARTSYS: i64 = -512;
const ERESTARTNOINTR: i64 = -513;
/// The calls that make a process, which the kernel never fails with `EINTR`.
const FORKS: [i64; 4] = [
    libc::SYS_clone,
    libc::SYS_fork,
    libc::SYS_vfork,
    libc::SYS_clone3,
];
/// What `rax` holds at a syscall-entry-stop.
const ENTRY_RAX: i64 = -(libc::ENOSYS as i64);
/// Stops of other calls (a signal handler's) let go before the tracing is given up.
const PASS_MAX: u32 = 10_000;

/// Where a traced call is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum State {
    /// Interrupted, on its way to its interrupt stop.
    Interrupting,
    /// Resumed to its call's (new) entry.
    ToEntry,
    /// Past its entry, on its way to its notification.
    ToNotif,
    /// Its notification answered `CONTINUE`: running, to its exit.
    ToExit,
}

/// A thread traced through one call.
pub struct Traced {
    pub nr: i64,
    /// The call's first three arguments as it was made (a call made again gets them back;
    /// its entry is known by them).
    pub args: [u64; 3],
    pub state: State,
    passed: u32,
}

/// What a look at a traced thread found.
pub enum Event {
    /// Nothing to do (not stopped, or a stop let go).
    Nothing,
    /// At its call's entry, with these registers: change them with [`resume_entry`].
    Entry(Box<Regs>),
    /// At its call's exit, with these registers (`rax` the result): [`finish`] detaches it.
    Exit(Box<Regs>),
    /// Gone, or given up (detached).
    Gone,
}

/// Seizes thread `tid`, blocked in its notification for call `nr` (with `args`), and
/// interrupts it; `Err` (the reason) when it may not be traced.
pub fn seize(tid: i32, nr: i64, args: [u64; 3]) -> Result<Traced, &'static str> {
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
        return Err("fork and wait return real pids: ptrace refused");
    }
    // SAFETY: PTRACE_INTERRUPT of our tracee.
    unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) };
    Ok(Traced {
        nr,
        args,
        state: State::Interrupting,
        passed: 0,
    })
}

/// Looks (without blocking) for the next stop of traced thread `tid`, lets go of any stop
/// that is not its call's entry or exit, and says what it found.
pub fn poll(tid: i32, t: &mut Traced) -> Event {
    let mut st = 0;
    // SAFETY: waitpid on our tracee, without blocking.
    let r = unsafe { libc::waitpid(tid, &mut st, libc::WNOHANG | libc::__WALL) };
    if r == 0 {
        return Event::Nothing;
    }
    if r < 0 || !libc::WIFSTOPPED(st) {
        return Event::Gone;
    }
    let sig = libc::WSTOPSIG(st);
    if st >> 16 == libc::PTRACE_EVENT_STOP {
        if sig != libc::SIGTRAP {
            // A group stop (SIGSTOP, a terminal's): it stays stopped, untraced.
            detach(tid, 0);
            return Event::Gone;
        }
        // The interrupt (or its trap after a signal came first).
        if t.state == State::Interrupting {
            t.state = State::ToEntry;
        }
        return resume(tid, 0, t);
    }
    if sig != SYSCALL_STOP {
        // A signal on its way: delivered, and the call is made again after its handler (a
        // fork whatever the handler's flags, below).
        if FORKS.contains(&t.nr) {
            if let Some(mut r) =
                regs(tid).filter(|r| r.orig_rax as i64 == t.nr && r.rax as i64 == ERESTARTSYS)
            {
                r.rax = ERESTARTNOINTR as u64;
                set(tid, &r);
            }
        }
        t.state = State::ToEntry;
        return resume(tid, sig, t);
    }
    let Some(r) = regs(tid) else {
        detach(tid, 0);
        return Event::Gone;
    };
    let ours = r.orig_rax as i64 == t.nr;
    let entry = r.rax as i64 == ENTRY_RAX;
    let same = t.nr == libc::SYS_fork || [r.rdi, r.rsi, r.rdx] == t.args;
    match (ours, entry, t.state) {
        (true, true, State::Interrupting | State::ToEntry) if same => Event::Entry(Box::new(r)),
        (true, false, State::ToNotif | State::ToExit) if RESTARTS.contains(&(r.rax as i64)) => {
            // Cut short by a signal: made again as it was made, and taken at its new entry.
            let mut r = r;
            (r.rdi, r.rsi, r.rdx) = (t.args[0], t.args[1], t.args[2]);
            // A fork is made again even after a handler without `SA_RESTART`, as the
            // kernel's own is (`-ERESTARTNOINTR`): the wait for the supervisor's answer
            // ended with `-ERESTARTSYS`, which such a handler turns into `EINTR` (a busybox
            // shell's `SIGCHLD`: `can't fork: Interrupted system call`).
            if FORKS.contains(&t.nr) && r.rax as i64 == ERESTARTSYS {
                r.rax = ERESTARTNOINTR as u64;
            }
            set(tid, &r);
            t.state = State::ToEntry;
            resume(tid, 0, t)
        }
        (true, false, State::ToNotif | State::ToExit) => Event::Exit(Box::new(r)),
        _ => resume(tid, 0, t),
    }
}

/// Lets thread `tid`, at its call's entry, go on to its notification with registers `r`.
pub fn resume_entry(tid: i32, t: &mut Traced, r: &Regs) -> Event {
    set(tid, r);
    t.state = State::ToNotif;
    resume(tid, 0, t)
}

/// Lets thread `tid`, stopped at its call's exit, go on: with registers `r` (a new result)
/// when given, and detached.
pub fn finish(tid: i32, r: Option<&Regs>) {
    if let Some(r) = r {
        set(tid, r);
    }
    detach(tid, 0);
}

/// Resumes stopped tracee `tid` to its next syscall stop, with signal `sig`; gives up (detached)
/// past [`PASS_MAX`] stops.
fn resume(tid: i32, sig: i32, t: &mut Traced) -> Event {
    t.passed += 1;
    if t.passed > PASS_MAX {
        detach(tid, sig);
        return Event::Gone;
    }
    // SAFETY: our tracee is stopped.
    if unsafe { libc::ptrace(libc::PTRACE_SYSCALL, tid, 0, sig as libc::c_long) } != 0 {
        detach(tid, sig);
        return Event::Gone;
    }
    Event::Nothing
}

/// Sets stopped tracee `tid`'s registers.
fn set(tid: i32, r: &Regs) {
    // SAFETY: our tracee is in a ptrace stop; its own registers, changed.
    unsafe { libc::ptrace(libc::PTRACE_SETREGS, tid, 0, r as *const Regs) };
}

/// Detaches tracee `tid`, which is stopped, with signal `sig` (0: none).
fn detach(tid: i32, sig: i32) {
    // SAFETY: our tracee, in a ptrace stop.
    unsafe { libc::ptrace(libc::PTRACE_DETACH, tid, 0, sig as libc::c_long) };
}
