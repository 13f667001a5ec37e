//! Identity of this process and thread in the run: virtual pid, parent, virtual tids, and the
//! translation of pids between the program's (virtual) view and the kernel's (real) one.
//!
//! The identity is set when an image starts ([`on_start`]), in a fork child ([`become_child`])
//! and, as a fallback, when a process created behind the shim's back (raw `clone`, `_Fork`
//! called by a library, an unsealed intermediate that passed on a stale environment) first
//! asks for its pid ([`adopt`]).

use core::sync::atomic::{AtomicI32, Ordering::*};

use seal_abi::{child_lineage, flags, unsealed, KIND_PROCESS, LAUNCHER_VPID, ROOT_VPID};

use crate::core::table;
use crate::core::{census, config, sys, thread};

/// Real pid the current identity (config::VPID) belongs to; another value means this is a
/// new process that has not been set up yet.
#[link_section = ".data.seal_hot"]
static REAL_PID: AtomicI32 = AtomicI32::new(0);
/// Real parent pid when the identity was set (getppid answers PPID while it still holds).
#[link_section = ".data.seal_hot"]
static REAL_PPID: AtomicI32 = AtomicI32::new(0);

/// Lineage kind of processes the shim did not see being created (kept apart from ordinary
/// children so they never take an ordinary child's lineage).
const KIND_STRAY_PROCESS: u64 = KIND_PROCESS ^ 0x5354_5241_5900;

/// A child the current thread is creating with fork: `(vpid, lineage, parent vpid)`. Thread
/// local, so the fork child (whose only thread is this one) finds it even when an atfork
/// handler asks for its pid before `fork` returns.
#[derive(Clone, Copy, Default)]
pub struct Pending {
    pub vpid: i32,
    pub lineage: u64,
    pub parent: i32,
}

/// [`Pending`] in a per-thread slot: `set` false (all zeros) is none.
#[derive(Clone, Copy, Default)]
struct PendingSlot {
    set: bool,
    p: Pending,
}

crate::thread_cell! {
    static PENDING: PendingSlot = "seal_tls_pending_fork";
}

fn pending() -> Option<Pending> {
    let s = PENDING.with(|c| c.get());
    s.set.then_some(s.p)
}

fn take_pending() -> Option<Pending> {
    let p = pending();
    set_pending(None);
    p
}

/// Is the pid family sealed (virtual pids shown to the program)?
#[inline]
pub fn sealed() -> bool {
    config::sealed(flags::PID)
}

/// This process's real pid as recorded at its start (or fork), else asked of the kernel.
#[inline]
pub fn real_pid() -> i32 {
    match REAL_PID.load(Relaxed) {
        p if p > 0 => p,
        _ => sys::getpid(),
    }
}

/// Sets up the identity of a new process image (called once per image, before its census
/// file is opened, so a corrected identity names the right file).
pub fn on_start() {
    if !table::map() {
        if !config::run_ended() {
            sys::warn(b"cannot map the run table; pids of this process are not virtualised");
        }
        REAL_PID.store(sys::getpid(), Relaxed);
        REAL_PPID.store(sys::getppid(), Relaxed);
        return;
    }
    let me = sys::getpid();
    if config::VPID.load(Relaxed) <= 0 {
        // The parent had no virtual pid to give (run table full): keep the real one.
        config::VPID.store(me, Relaxed);
    }
    let v = config::VPID.load(Relaxed);
    let Some(t) = table::get() else { return };
    let holder = t.holder(v);
    if holder == 0 || holder == -1 || holder == me {
        t.register(v, me);
        REAL_PID.store(me, Relaxed);
        REAL_PPID.store(sys::getppid(), Relaxed);
        if v == ROOT_VPID {
            guard();
            if config::GEN.load(Relaxed) == 0 {
                super::confine::root(config::RUN_FLAGS.load(Relaxed));
            }
            #[cfg(not(test))]
            crate::cpu::signals::glibc_internal_to_default();
            let launcher = sys::getppid();
            if t.virt(launcher).is_none() {
                t.register(LAUNCHER_VPID, launcher);
            }
            let (sid, pgid) = sys::session_and_group(launcher);
            for (v, real) in seal_abi::outside_leaders(launcher, sid, pgid) {
                if real > 0 && t.virt(real).is_none() {
                    t.register(v, real);
                }
            }
        }
    } else {
        // LIBSEAL_VPID names another live process of the run: this image was started by
        // something that passed its own (stale) environment on, e.g. a static image's fork
        // child. Keep the virtual pid the static image's supervisor registered for it (the
        // pid its parent was shown), else take a fresh identity instead of impersonating it.
        adopt_identity(me, false, t.virt(me));
    }
    exec_start(me);
}

/// A static image's supervisor left where this image starts ([`table::take_exec_start`]):
/// its process's clock at the `execve`, its lineage and how many children it had made, which
/// the environment the static image passed on (its own start's) could not say. They replace
/// the environment's, for this image and the thread that runs it.
fn exec_start(me: i32) {
    let Some((clock, lineage, children)) = table::take_exec_start(config::VPID.load(Relaxed), me)
    else {
        return;
    };
    config::START_CLOCK.store(clock, Relaxed);
    if lineage != 0 {
        config::LINEAGE.store(lineage, Relaxed);
        config::CHILDREN.store(children, Relaxed);
    }
    let lineage = thread::image_lineage();
    thread::with(|t| {
        (t.clock, t.causal, t.waited) = (clock, clock, clock);
        t.lineage = lineage;
    });
}

/// The root's tie to its launcher (`LIBSEAL_GUARD`, see [`seal_abi::settings::GUARD`]): die
/// with it, and do not outlive it if it already died before this line. The launcher started
/// it with the signals it forwards blocked (so none is lost before it knows the child's pid)
/// and only when its own caller's mask was empty: the root's mask is emptied here, and what
/// arrived meanwhile is delivered now.
fn guard() {
    // Only the root's first image: the tie survives exec, and a mask the program set before a
    // later exec is the program's.
    if config::GEN.load(Relaxed) != 0 {
        return;
    }
    let guard = config::getenv(seal_abi::settings::GUARD);
    let Some(pid) = guard
        .and_then(seal_abi::settings::parse_i64)
        .filter(|&p| p > 0)
    else {
        return;
    };
    // SAFETY: plain integers; PR_SET_PDEATHSIG affects only this process.
    unsafe {
        sys::syscall3(
            libc::SYS_prctl,
            libc::PR_SET_PDEATHSIG as i64,
            libc::SIGKILL as i64,
            0,
        )
    };
    if sys::getppid() as i64 != pid {
        sys::exit_group(125);
    }
    let empty = 0u64;
    // SAFETY: a valid 8-byte kernel signal set; no old set wanted.
    unsafe {
        sys::syscall6(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK as i64,
            &empty as *const u64 as i64,
            0,
            8,
            0,
            0,
        )
    };
}

/// The virtual pid of the calling process (setting it up first if it is new).
#[inline]
pub fn current() -> i32 {
    let real = sys::getpid();
    if real == REAL_PID.load(Relaxed) {
        return config::VPID.load(Relaxed);
    }
    adopt(real)
}

/// The pid to show the program: virtual when sealed, else real.
#[inline]
pub fn getpid_value() -> i32 {
    if sealed() {
        current()
    } else {
        sys::getpid()
    }
}

pub fn getppid_value() -> i32 {
    let real = sys::getppid();
    if !sealed() {
        return real;
    }
    current();
    if real == REAL_PPID.load(Relaxed) {
        config::PPID.load(Relaxed)
    } else {
        // Reparented (the parent died): to init, a subreaper, or the launcher.
        to_virt(real)
    }
}

/// The virtual tid of the calling thread (allocated on first use for non-main threads).
pub fn gettid_value() -> i32 {
    if !sealed() {
        return sys::gettid();
    }
    let vpid = current();
    let real_tid = sys::gettid();
    if real_tid == REAL_PID.load(Relaxed) || crate::core::vfork::in_child() {
        return vpid;
    }
    let (vtid, lineage) = thread::with(|t| (t.vtid, t.lineage));
    if vtid > 0 && vtid != vpid {
        return vtid;
    }
    let Some(t) = table::get() else {
        return real_tid;
    };
    let Some(v) = t.allocate(lineage) else {
        census::record_unsealed(unsealed::PID_SPACE_FULL, b"no virtual tid left");
        return real_tid;
    };
    t.register(v, real_tid);
    thread::with(|t| t.vtid = v);
    v
}

/// The virtual tid of a thread the calling thread is about to create (`lineage`): allocated
/// here, in creation order. Left to each new thread's first `gettid`, threads started together
/// raced for colliding candidates and swapped numbers from run to run (3 runs in 13 of 1000
/// concurrent threads). 0 when pids are not sealed or no number is left (the thread then
/// allocates on first use, as a thread started behind our back does).
pub fn reserve_vtid(lineage: u64) -> i32 {
    if !sealed() {
        return 0;
    }
    table::get().and_then(|t| t.allocate(lineage)).unwrap_or(0)
}

/// Gives back a virtual tid reserved for a thread that was never created.
pub fn release_vtid(v: i32) {
    if let Some(t) = table::get().filter(|_| v > 0) {
        t.release(v);
    }
}

/// First thing in a thread started with a reserved virtual tid: the run table learns its
/// real tid (for `tgkill`, `/proc/<vpid>/task/<vtid>`).
pub fn thread_started(v: i32) {
    if let Some(t) = table::get().filter(|_| v > 0) {
        t.register(v, sys::gettid());
    }
}

/// A process the shim has not set up yet (see the module doc).
#[cold]
fn adopt(real: i32) -> i32 {
    if let Some(p) = super::vfork::child() {
        // A vfork child: its identity is its parent thread's slot, not the process's.
        return if p.vpid > 0 { p.vpid } else { real };
    }
    if shares_memory_with(REAL_PID.load(Relaxed)) {
        // A `clone(CLONE_VM)` child: every static it would set up is its parent's too (and so
        // is the thread state, without CLONE_SETTLS: even the pending fork below may be its
        // parent thread's), so it sets up nothing and shows its real pid (the clone hook
        // reported that such children are not sealed). One `kcmp` per new process.
        return real;
    }
    if let Some(p) = take_pending() {
        become_child(p);
        return p.vpid;
    }
    adopt_identity(real, true, None);
    config::VPID.load(Relaxed)
}

/// Does this process share its memory with process `other` (`kcmp(KCMP_VM)`)? False when
/// the kernel cannot say (no kcmp, or a seccomp filter refuses it): then a new pid is taken
/// for a fork child, as before.
fn shares_memory_with(other: i32) -> bool {
    const KCMP_VM: i64 = 1;
    if other <= 0 {
        return false;
    }
    // SAFETY: kcmp compares two processes' kernel objects; it reads and writes no memory.
    let r = unsafe {
        sys::syscall6(
            libc::SYS_kcmp,
            sys::getpid() as i64,
            other as i64,
            KCMP_VM,
            0,
            0,
            0,
        )
    };
    r == 0
}

/// Takes a new identity for process `real`: virtual pid `known` (already registered) when
/// given, else a fresh one.
#[cold]
fn adopt_identity(real: i32, reopen_census: bool, known: Option<i32>) {
    let ppid_real = sys::getppid();
    let t = table::get();
    let parent = t
        .and_then(|t| t.virt(ppid_real))
        .unwrap_or_else(|| config::VPID.load(Relaxed));
    // A static image's child that the image's supervisor numbered (`known`): keyed by that
    // number (given in its parent's fork order, the same every run), so that two children of
    // one static image, whose environment is their parent's, draw different streams.
    let nth = known.map_or(config::CHILDREN.load(Relaxed), |v| (1 << 32) | v as u64);
    let lineage = child_lineage(config::LINEAGE.load(Relaxed), KIND_STRAY_PROCESS, nth);
    let vpid = known
        .or_else(|| t.and_then(|t| t.allocate(lineage)))
        .unwrap_or(real);
    set_identity(vpid, parent, lineage, real, ppid_real);
    if let Some(t) = t {
        t.register(vpid, real);
    }
    if reopen_census && config::in_run() {
        census::open_image(vpid, parent, 0);
    }
}

fn set_identity(vpid: i32, parent: i32, lineage: u64, real: i32, real_ppid: i32) {
    config::VPID.store(vpid, Relaxed);
    config::PPID.store(parent, Relaxed);
    config::LINEAGE.store(lineage, Relaxed);
    config::GEN.store(0, Relaxed);
    config::CHILDREN.store(0, Relaxed);
    // A new process: no earlier images of its own, and its image is its parent's, not one it
    // exec'd (its first exec names no program before the one it runs).
    config::NAMES.store(0, Relaxed);
    config::IMAGE_NAME.store(0, Relaxed);
    config::IMAGE_ORD.store(0, Relaxed);
    config::START_CLOCK.store(thread::peek(), Relaxed);
    REAL_PID.store(real, Relaxed);
    REAL_PPID.store(real_ppid, Relaxed);
    let lineage = thread::image_lineage();
    thread::with(|t| {
        t.lineage = lineage;
        t.vtid = vpid;
        t.threads = 0;
        // A new process starts here: its CPU clock from 0, and an image it execs from the
        // clock it was forked at (plus its own waits), as a spawned child would.
        t.waited = t.clock;
    });
}

/// Marks a fork in progress on this thread (see [`Pending`]).
pub fn set_pending(p: Option<Pending>) {
    PENDING.with(|c| {
        c.set(PendingSlot {
            set: p.is_some(),
            p: p.unwrap_or_default(),
        })
    });
}

/// In a fork child: take the identity the parent allocated, a fresh census slot, and the
/// run-table entry. Idempotent (an atfork handler may have done it already).
pub fn become_child(p: Pending) {
    set_pending(None);
    let real = sys::getpid();
    if REAL_PID.load(Relaxed) == real {
        return;
    }
    let vpid = if p.vpid > 0 { p.vpid } else { real };
    set_identity(vpid, p.parent, p.lineage, real, sys::getppid());
    census::open_image(vpid, p.parent, 0);
    if let Some(t) = table::get() {
        t.register(vpid, real);
    }
}

/// Allocates the identity of the next child of this process (fork, spawn): its lineage and
/// virtual pid (0 when the run table is missing or full; the child then keeps its real pid).
pub fn next_child() -> Pending {
    let index = config::CHILDREN.fetch_add(1, Relaxed);
    // Keyed by this image, not only the process: an exec wrapper's children and the program's
    // never share a lineage, and the program's children are the same with or without it.
    let lineage = child_lineage(thread::image_lineage(), KIND_PROCESS, index);
    let vpid = match table::get() {
        Some(t) => t.allocate(lineage).unwrap_or_else(|| {
            census::record_unsealed(
                unsealed::PID_SPACE_FULL,
                b"every virtual pid of this run is taken; new children keep real pids",
            );
            0
        }),
        None => 0,
    };
    Pending {
        vpid,
        lineage,
        parent: current(),
    }
}

/// The parent side after a child was created (`real > 0`) or not (`real <= 0`). Returns the
/// pid to hand to the program.
pub fn parent_done(p: &Pending, real: i32) -> i32 {
    let t = table::get();
    if real <= 0 {
        if let Some(t) = t {
            if p.vpid > 0 {
                t.release(p.vpid);
            }
        }
        return real;
    }
    if p.vpid <= 0 {
        return real;
    }
    if let Some(t) = t {
        t.register(p.vpid, real);
    }
    if sealed() {
        p.vpid
    } else {
        real
    }
}

/// Virtual pid/tid -> real (unknown numbers pass through unchanged).
#[inline]
pub fn to_real(v: i32) -> i32 {
    if v <= 0 || is_raw(v) {
        return v;
    }
    table::get().and_then(|t| t.real(v)).unwrap_or(v)
}

/// Real pid -> virtual (pids of processes outside the run pass through unchanged).
#[inline]
pub fn to_virt(r: i32) -> i32 {
    if r <= 0 || is_raw(r) {
        return r;
    }
    table::get().and_then(|t| t.virt(r)).unwrap_or(r)
}

/// Real pids this process was shown as they are: a tracer's `PTRACE_GETEVENTMSG` names a new
/// tracee before the tracee has registered its virtual pid (it is stopped until the tracer
/// resumes it). The tracer (strace -f) then knows it by that number only, so its waits,
/// signals and further ptrace calls keep using the real pid for it until it is reaped.
const RAW_SLOTS: usize = 256;
static RAW: [AtomicI32; RAW_SLOTS] = [const { AtomicI32::new(0) }; RAW_SLOTS];
#[link_section = ".data.seal_hot"]
static RAW_USED: AtomicI32 = AtomicI32::new(0);

/// Remembers that `real` was shown unchanged (a full list forgets nothing, adds nothing). A
/// number that is also a virtual pid of the run (with another real pid behind it) is left
/// out: it could not mean both.
pub fn show_raw(real: i32) {
    if real <= 0 || is_raw(real) || table::get().and_then(|t| t.real(real)).is_some() {
        return;
    }
    for slot in &RAW {
        if slot.compare_exchange(0, real, AcqRel, Relaxed).is_ok() {
            RAW_USED.fetch_add(1, AcqRel);
            return;
        }
    }
}

/// Was `p` shown as a real pid (see [`show_raw`])?
#[inline]
pub fn is_raw(p: i32) -> bool {
    RAW_USED.load(Acquire) > 0 && RAW.iter().any(|s| s.load(Relaxed) == p)
}

/// `p` was reaped: a later process may reuse the number.
pub fn forget_raw(p: i32) {
    if RAW_USED.load(Acquire) == 0 {
        return;
    }
    for slot in &RAW {
        if slot.compare_exchange(p, 0, AcqRel, Relaxed).is_ok() {
            RAW_USED.fetch_sub(1, AcqRel);
        }
    }
}

/// A `kill`/`waitpid`-style pid argument: `> 0` a process, `0` and `-1` as is, `< -1` a
/// process group.
#[inline]
pub fn pid_arg_to_real(p: i32) -> i32 {
    if p > 0 {
        to_real(p)
    } else if p < -1 {
        -to_real(-p)
    } else {
        p
    }
}

/// Records the status of a reaped child (virtual pid `v`) and moves the caller's clock to the
/// child's wait clock (a Lamport receive): the parent has seen the child end, so
/// `sleep 1; date` in a shell shows the second, and `while [ $SECONDS -lt $end ]; do sleep 1;
/// done` ends. Only the child's waits count, not its clock reads: children that merely
/// compute (`xargs -P4 date`, `make -j` compiling) leave their parent's clock alone however
/// the scheduler orders their ends. Every reap counts, `WNOHANG` ones too: shells reap
/// foreground children from their SIGCHLD handler as often as from their blocking wait.
pub fn reaped(v: i32, status: i32) {
    if let Some(t) = table::get() {
        t.set_status(v, status);
        let waited = t.wait_clock(v);
        if waited > 0 && config::sealed(flags::TIME) && thread::adopt(waited) {
            note_waited();
        }
    }
}

/// A wait moved this thread's clock (or a reaped child's waits did, or it adopted another's
/// clock, or set the realtime clock: its `W` moved): raise this process's
/// wait clock in the run table, where the parent that reaps it will find it. Only the main
/// thread's waits count: a runtime's background threads (a JVM's periodic tasks, timer
/// threads) time out as often as real time allows before the process ends, and would make
/// the parent's clock depend on it.
pub fn note_waited() {
    if !config::in_run() {
        return;
    }
    let Some(t) = table::get() else { return };
    let real = sys::getpid();
    if sys::gettid() != real {
        return;
    }
    // No `current()`: in a fork child that has not set up its identity yet, it would.
    let v = if real == REAL_PID.load(Relaxed) {
        Some(config::VPID.load(Relaxed))
    } else if let Some(p) = pending().filter(|p| p.vpid > 0) {
        Some(p.vpid)
    } else {
        t.virt(real)
    };
    if let Some(v) = v {
        t.raise_wait_clock(v, thread::peek());
    }
}
