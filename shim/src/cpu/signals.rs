//! Keeping libseal's `SIGSEGV` handler installed under a program that installs its own.
//!
//! The JVM (null checks, safepoints), Rust's std (stack overflow), Python's faulthandler and
//! others install `SIGSEGV` handlers. While the family is armed, `sigaction`, `signal`,
//! `syscall(SYS_rt_sigaction)` and friends store the program's `SIGSEGV` action here instead
//! of in the kernel and answer queries with it; the kernel keeps libseal's handler, which
//! chains every fault that is not a trapped instruction to the stored action: a handler is
//! called as the kernel would call it (`SA_SIGINFO` or not, `SA_RESETHAND`), and `SIG_DFL`
//! resets the kernel's action and lets the fault happen again (or re-raises a sent signal),
//! so a crash is still a crash.
//!
//! A synchronous fault while `SIGSEGV` is blocked kills the process outright (the kernel
//! resets the action), so a trapped `rdtsc` in a thread that blocked every signal would. The
//! masks a program sets through libc (`sigprocmask`, `pthread_sigmask`, `sigsuspend`,
//! handlers' `sa_mask`) therefore keep `SIGSEGV` unblocked; a query still shows what the
//! program asked for.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};

use libc::{c_int, c_long, c_void, sighandler_t, siginfo_t};
use seal_abi::{Fid, NO_DETAIL};

use crate::core::{census, sys};
use crate::hook;

const SEGV_BIT: u64 = 1 << (libc::SIGSEGV - 1);
const SA_RESTORER: u64 = 0x0400_0000;
const SI_KERNEL: c_int = 0x80;

/// A signal action as the kernel's `rt_sigaction` takes it on x86_64.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct KAction {
    pub handler: u64,
    pub flags: u64,
    pub restorer: u64,
    pub mask: u64,
}

/// The program's `SIGSEGV` action (seqlock: `SEQ` odd while a writer is inside).
#[link_section = ".data.seal_hot"]
static SEQ: AtomicU32 = AtomicU32::new(0);
#[link_section = ".data.seal_hot"]
static PROG: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
/// Bit `sig - 1`: the program's `sa_mask` for `sig` included `SIGSEGV` (which the kernel's
/// copy leaves out).
#[link_section = ".data.seal_hot"]
static MASKED_SEGV: AtomicU64 = AtomicU64::new(0);

// Per thread: the program asked for SIGSEGV to be blocked (what a mask query shows).
crate::initial_exec_tls!("seal_cpu_segv_blocked", u64, blocked_ptr);

pub(crate) fn program_blocked() -> bool {
    // SAFETY: this thread's own zero-initialised slot.
    unsafe { *blocked_ptr() != 0 }
}

pub(crate) fn set_program_blocked(b: bool) {
    // SAFETY: as above.
    unsafe { *blocked_ptr() = b as u64 };
}

fn load_prog() -> KAction {
    // A reader that interrupted a writer on its own thread would wait forever: bounded.
    for _ in 0..1000 {
        let s = SEQ.load(Acquire);
        if s & 1 != 0 {
            core::hint::spin_loop();
            continue;
        }
        let a = read_prog();
        if SEQ.load(Acquire) == s {
            return a;
        }
    }
    read_prog()
}

fn read_prog() -> KAction {
    KAction {
        handler: PROG[0].load(Relaxed),
        flags: PROG[1].load(Relaxed),
        restorer: PROG[2].load(Relaxed),
        mask: PROG[3].load(Relaxed),
    }
}

fn store_prog(a: KAction) {
    loop {
        let s = SEQ.load(Relaxed);
        if s & 1 == 0 && SEQ.compare_exchange(s, s + 1, Acquire, Relaxed).is_ok() {
            break;
        }
        core::hint::spin_loop();
    }
    for (slot, v) in PROG.iter().zip([a.handler, a.flags, a.restorer, a.mask]) {
        slot.store(v, Relaxed);
    }
    SEQ.fetch_add(1, Release);
}

core::arch::global_asm!(
    ".pushsection .text.seal_cpu_restore_rt,\"ax\",@progbits",
    ".globl seal_cpu_restore_rt",
    ".hidden seal_cpu_restore_rt",
    // glibc's __restore_rt, byte for byte (unwinders recognise a signal frame by these bytes).
    "nop",
    "seal_cpu_restore_rt:",
    ".byte 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00", // mov rax, 15 (rt_sigreturn)
    ".byte 0x0f, 0x05",                               // syscall
    ".popsection",
);

extern "C" {
    fn seal_cpu_restore_rt();
}

fn rt_sigaction(sig: c_int, act: Option<&KAction>, old: Option<&mut KAction>) -> i64 {
    let act = act.map_or(0, |a| a as *const KAction as i64);
    let old = old.map_or(0, |a| a as *mut KAction as i64);
    // SAFETY: valid kernel sigaction structs (or null) and the kernel's sigset size.
    unsafe { sys::syscall6(libc::SYS_rt_sigaction, sig as i64, act, old, 8, 0, 0) }
}

/// glibc's two internal signals (SIGCANCEL 32, SIGSETXID 33) back to their default when they
/// arrive ignored. glibc's `posix_spawn` ignores them in the child it starts, so a seal started
/// by a test harness, a CI runner or Rust's `Command` passed them on ignored, and one started
/// by a shell did not: the run's root calls this, so how seal was started does not show. No
/// glibc program can ignore them itself (its `sigaction` refuses them); an action glibc
/// installed (a handler) is left alone.
pub fn glibc_internal_to_default() {
    for sig in [32, 33] {
        let mut old = KAction::default();
        if rt_sigaction(sig, None, Some(&mut old)) == 0 && old.handler == libc::SIG_IGN as u64 {
            rt_sigaction(sig, Some(&KAction::default()), None);
        }
    }
}

/// libseal's kernel action for the program's stored one: always our handler, on the
/// alternate stack when there is one (a stack-overflow handler needs it), never blocking
/// `SIGSEGV` itself (a chained handler may run a trapped instruction), the program's other
/// mask bits and `SA_RESTART`.
fn ours(prog: &KAction) -> KAction {
    KAction {
        handler: on_segv as *const () as usize as u64,
        flags: (libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER) as u64
            | SA_RESTORER
            | (prog.flags & libc::SA_RESTART as u64),
        restorer: seal_cpu_restore_rt as *const () as usize as u64,
        mask: prog.mask & !SEGV_BIT,
    }
}

/// Installs libseal's handler, keeping what was there as the program's action.
pub fn install() -> bool {
    let mut old = KAction::default();
    if rt_sigaction(libc::SIGSEGV, None, Some(&mut old)) != 0 {
        return false;
    }
    store_prog(old);
    rt_sigaction(libc::SIGSEGV, Some(&ours(&old)), None) == 0
}

/// An image may start with `SIGSEGV` blocked (the exec'ing thread's mask survives exec).
pub fn unblock_on_start() {
    let set = SEGV_BIT;
    let mut old = 0u64;
    // SAFETY: 8-byte kernel sigsets on the stack.
    let r = unsafe {
        sys::syscall6(
            libc::SYS_rt_sigprocmask,
            libc::SIG_UNBLOCK as i64,
            &set as *const u64 as i64,
            &mut old as *mut u64 as i64,
            8,
            0,
            0,
        )
    };
    if r == 0 && old & SEGV_BIT != 0 {
        set_program_blocked(true);
    }
}

/// The kernel's `SIGSEGV` handler while armed.
extern "C" fn on_segv(sig: c_int, info: *mut siginfo_t, ctx: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo and ucontext to an SA_SIGINFO handler.
    unsafe {
        if (*info).si_code == SI_KERNEL && super::emulate(ctx as *mut libc::ucontext_t) {
            return;
        }
        chain(sig, info, ctx);
    }
}

/// Hands a fault that is not ours to the program's action.
///
/// # Safety
/// Called from the `SIGSEGV` handler with the kernel's arguments.
unsafe fn chain(sig: c_int, info: *mut siginfo_t, ctx: *mut c_void) {
    let prog = load_prog();
    // SAFETY: per the contract.
    let sent = unsafe { (*info).si_code } <= 0;
    match prog.handler as sighandler_t {
        libc::SIG_IGN if sent => {}
        libc::SIG_DFL | libc::SIG_IGN => {
            // What the kernel would do: the default action (a core dump). A fault happens
            // again when the instruction is retried; a sent signal is sent again.
            let dfl = KAction {
                handler: libc::SIG_DFL as u64,
                flags: SA_RESTORER,
                restorer: seal_cpu_restore_rt as *const () as usize as u64,
                mask: 0,
            };
            rt_sigaction(libc::SIGSEGV, Some(&dfl), None);
            if sent {
                // SAFETY: plain ids; SIGSEGV is not blocked in this handler (SA_NODEFER).
                unsafe {
                    sys::syscall3(
                        libc::SYS_tgkill,
                        sys::getpid() as i64,
                        sys::gettid() as i64,
                        libc::SIGSEGV as i64,
                    )
                };
            }
        }
        h => {
            if prog.flags & libc::SA_RESETHAND as u64 != 0 {
                let dfl = KAction {
                    handler: libc::SIG_DFL as u64,
                    ..prog
                };
                store_prog(dfl);
            }
            // SAFETY: the program installed `h` for SIGSEGV with these flags.
            unsafe {
                if prog.flags & libc::SA_SIGINFO as u64 != 0 {
                    let f: extern "C" fn(c_int, *mut siginfo_t, *mut c_void) =
                        core::mem::transmute(h);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(c_int) = core::mem::transmute(h);
                    f(sig);
                }
            }
        }
    }
}

/// The program sets `SIGSEGV`'s action to `new` (if any) and learns the previous one (`old`).
fn segv_action(new: Option<KAction>, old: Option<&mut KAction>) {
    if let Some(o) = old {
        *o = load_prog();
    }
    // A vfork child's `SIGSEGV` disposition is its own, but the record is its parent's: the
    // child keeps libseal's handler (its exec resets it) and the parent's record stays.
    if let Some(a) = new.filter(|_| !crate::core::vfork::in_child()) {
        store_prog(a);
        rt_sigaction(libc::SIGSEGV, Some(&ours(&a)), None);
    }
}

fn first_word(set: *const libc::sigset_t) -> u64 {
    // SAFETY: glibc's sigset_t starts with the kernel's 64-bit mask.
    unsafe { *(set as *const u64) }
}

fn set_first_word(set: *mut libc::sigset_t, w: u64) {
    // SAFETY: as above.
    unsafe { *(set as *mut u64) = w };
}

fn to_kernel(a: &libc::sigaction) -> KAction {
    KAction {
        handler: a.sa_sigaction as u64,
        flags: a.sa_flags as u32 as u64,
        restorer: a.sa_restorer.map_or(0, |f| f as usize as u64),
        mask: first_word(&a.sa_mask),
    }
}

fn to_libc(k: &KAction, out: &mut libc::sigaction) {
    // SAFETY: plain data; all-zero is a valid sigaction.
    *out = unsafe { core::mem::zeroed() };
    out.sa_sigaction = k.handler as sighandler_t;
    out.sa_flags = k.flags as c_int;
    set_first_word(&mut out.sa_mask, k.mask);
}

/// `sigaction` while armed. `real` is the real function.
///
/// # Safety
/// As `sigaction(2)`.
unsafe fn sigaction_impl(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
    ra: u64,
    real: impl Fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int,
) -> c_int {
    if !super::handler_installed() {
        return real(sig, act, old);
    }
    if sig == libc::SIGSEGV {
        census::count(Fid::SigactionSegv, NO_DETAIL, ra);
        let mut prev = KAction::default();
        // SAFETY: act is null or a valid sigaction per the contract.
        let new = unsafe { act.as_ref() }.map(to_kernel);
        segv_action(new, Some(&mut prev));
        // SAFETY: old is null or writable per the contract.
        if let Some(o) = unsafe { old.as_mut() } {
            to_libc(&prev, o);
        }
        return 0;
    }
    let bit = 1u64.checked_shl(sig as u32 - 1).unwrap_or(0);
    let had = MASKED_SEGV.load(Relaxed) & bit != 0;
    let mut copy: libc::sigaction;
    let mut act = act;
    // SAFETY: act is null or a valid sigaction per the contract.
    if let Some(a) = unsafe { act.as_ref() } {
        let w = first_word(&a.sa_mask);
        let child = crate::core::vfork::in_child();
        if w & SEGV_BIT != 0 && bit != 0 {
            copy = *a;
            set_first_word(&mut copy.sa_mask, w & !SEGV_BIT);
            act = &copy;
            if !child {
                MASKED_SEGV.fetch_or(bit, Relaxed);
            }
        } else if !child {
            MASKED_SEGV.fetch_and(!bit, Relaxed);
        }
    }
    let r = real(sig, act, old);
    // SAFETY: old is null or writable per the contract.
    if let (0, Some(o), true) = (r, unsafe { old.as_mut() }, had) {
        set_first_word(&mut o.sa_mask, first_word(&o.sa_mask) | SEGV_BIT);
    }
    r
}

hook! {
    /// # Safety
    /// As `sigaction(2)`.
    fn sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int;
    caller = ra;
    // SAFETY: forwarded contract.
    |real| unsafe { sigaction_impl(sig, act, old, ra, real) }
}

/// `signal`-style calls for `SIGSEGV` while armed: the previous handler, or `None` to pass the
/// call on.
fn signal_impl(sig: c_int, h: sighandler_t, flags: c_int, ra: u64) -> Option<sighandler_t> {
    if sig != libc::SIGSEGV || !super::handler_installed() || h == libc::SIG_ERR {
        return None;
    }
    census::count(Fid::SigactionSegv, NO_DETAIL, ra);
    let mut prev = KAction::default();
    let new = KAction {
        handler: h as u64,
        flags: flags as u32 as u64,
        restorer: 0,
        mask: 0,
    };
    segv_action(Some(new), Some(&mut prev));
    Some(prev.handler as sighandler_t)
}

hook! {
    /// # Safety
    /// As `signal(2)` (BSD semantics, as glibc's).
    fn signal | bsd_signal(sig: c_int, h: sighandler_t) -> sighandler_t;
    caller = ra;
    |real| signal_impl(sig, h, libc::SA_RESTART, ra).unwrap_or_else(|| real(sig, h))
}

hook! {
    /// # Safety
    /// As `sysv_signal(3)`.
    fn sysv_signal | __sysv_signal(sig: c_int, h: sighandler_t) -> sighandler_t;
    caller = ra;
    |real| signal_impl(sig, h, libc::SA_RESETHAND | libc::SA_NODEFER, ra)
        .unwrap_or_else(|| real(sig, h))
}

/// `sigprocmask`/`pthread_sigmask` while armed: `SIGSEGV` stays unblocked in the kernel's
/// mask, and the program's wish is kept for queries.
///
/// # Safety
/// As `sigprocmask(2)`.
unsafe fn mask_impl(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
    ra: u64,
    real: impl Fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int,
) -> c_int {
    if !super::handler_installed() {
        return real(how, set, old);
    }
    let before = program_blocked();
    let mut after = before;
    let mut copy: libc::sigset_t;
    let mut set = set;
    if !set.is_null() {
        let w = first_word(set);
        let has = w & SEGV_BIT != 0;
        after = match how {
            libc::SIG_BLOCK => before || has,
            libc::SIG_UNBLOCK => before && !has,
            _ => has,
        };
        if has && how != libc::SIG_UNBLOCK {
            census::count(Fid::SigmaskSegv, NO_DETAIL, ra);
            // SAFETY: set is a valid sigset per the contract.
            copy = unsafe { *set };
            set_first_word(&mut copy, w & !SEGV_BIT);
            set = &copy;
        }
    }
    let r = real(how, set, old);
    if r == 0 {
        if !old.is_null() && before {
            set_first_word(old, first_word(old) | SEGV_BIT);
        }
        set_program_blocked(after);
    }
    r
}

hook! {
    /// # Safety
    /// As `sigprocmask(2)`.
    fn sigprocmask | pthread_sigmask(how: c_int, set: *const libc::sigset_t, old: *mut libc::sigset_t) -> c_int;
    caller = ra;
    // SAFETY: forwarded contract.
    |real| unsafe { mask_impl(how, set, old, ra, real) }
}

hook! {
    /// # Safety
    /// As `sigsuspend(2)`.
    fn sigsuspend(set: *const libc::sigset_t) -> c_int;
    caller = ra;
    |real| {
        if set.is_null() || !super::handler_installed() || first_word(set) & SEGV_BIT == 0 {
            return real(set);
        }
        census::count(Fid::SigmaskSegv, NO_DETAIL, ra);
        // SAFETY: set is a valid sigset per the contract.
        let mut copy = unsafe { *set };
        set_first_word(&mut copy, first_word(set) & !SEGV_BIT);
        real(&copy)
    }
}

/// The mask a `ppoll`/`pselect`/`epoll_pwait` installs while it waits, with `SIGSEGV` taken
/// out while armed (a handler that runs during the wait may execute a trapped instruction).
/// Returns `mask` itself, or `copy` filled with the cleared mask.
///
/// # Safety
/// `mask` is null or a valid sigset.
pub unsafe fn wait_mask(
    mask: *const libc::sigset_t,
    copy: &mut core::mem::MaybeUninit<libc::sigset_t>,
) -> *const libc::sigset_t {
    if mask.is_null() || !super::handler_installed() || first_word(mask) & SEGV_BIT == 0 {
        return mask;
    }
    // SAFETY: mask is a valid sigset per the contract.
    let c = copy.write(unsafe { *mask });
    set_first_word(c, first_word(mask) & !SEGV_BIT);
    c
}

/// `syscall(SYS_rt_sigaction | SYS_rt_sigprocmask | SYS_execve | SYS_execveat)` while armed:
/// `Some(result)` when handled here.
///
/// # Safety
/// Arguments as the system call takes them.
pub unsafe fn sys_cpu(n: c_long, a: [c_long; 6], ra: u64) -> Option<c_long> {
    if !super::handler_installed() {
        return None;
    }
    let raw = |a: [c_long; 6]| {
        // SAFETY: the caller's system call with the caller's (or equivalent) arguments.
        unsafe { sys::syscall6(n, a[0], a[1], a[2], a[3], a[4], a[5]) as c_long }
    };
    let ret = |r: c_long| -> c_long {
        if r < 0 {
            sys::set_errno(-r as c_int);
            -1
        } else {
            r
        }
    };
    match n {
        libc::SYS_rt_sigaction if a[0] == libc::SIGSEGV as c_long => {
            census::count(Fid::SigactionSegv, NO_DETAIL, ra);
            // SAFETY: null or valid kernel sigactions per the contract.
            let new = unsafe { (a[1] as *const KAction).as_ref() }.copied();
            let old = unsafe { (a[2] as *mut KAction).as_mut() };
            segv_action(new, old);
            Some(0)
        }
        libc::SYS_rt_sigaction if a[1] != 0 => {
            // SAFETY: as above.
            let mut k = unsafe { *(a[1] as *const KAction) };
            k.mask &= !SEGV_BIT;
            let mut b = a;
            b[1] = &k as *const KAction as c_long;
            Some(ret(raw(b)))
        }
        libc::SYS_rt_sigprocmask if a[1] != 0 && a[0] != libc::SIG_UNBLOCK as c_long => {
            // SAFETY: a kernel sigset per the contract.
            let set = unsafe { *(a[1] as *const u64) } & !SEGV_BIT;
            let mut b = a;
            b[1] = &set as *const u64 as c_long;
            Some(ret(raw(b)))
        }
        _ => None,
    }
}
