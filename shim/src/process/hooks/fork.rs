//! fork, vfork, _Fork, clone, and pthread_create (the new thread starts at its creator's
//! logical clock, with its own lineage).

use libc::{c_int, c_void, pid_t};
use seal_abi::unsealed;

use crate::core::sys::{errno, set_errno};
use crate::core::{census, config, thread};
use crate::process::vpid;
use crate::{hook, real};

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
    super::resolve_early();
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

/// The real `_Fork`: a fork without atfork handlers.
fn real_fork_no_handlers() -> unsafe extern "C" fn() -> pid_t {
    real!(_Fork: fn() -> pid_t)
}

hook! {
    /// # Safety
    /// As `fork(2)`.
    fn fork() -> pid_t;
    fid = Fork;
    || {
        let real = real!(fork: fn() -> pid_t);
        // SAFETY: fork is fork-like.
        unsafe { fork_with(real) }
    }
}

/// `vfork(2)` itself (see `crate::process::vfork`), written as glibc writes it: the return
/// address is popped into a register before the system call, because the child returns first
/// and its calls overwrite this frame on the shared stack; the parent pushes it back when it
/// resumes. Around the call, `prepare` allocates the child and switches this thread to it,
/// `child_started` gives the child its signal mask back, and `parent_done` restores the thread
/// and registers the child. (glibc's own `vfork` also repairs the shadow stack when CET
/// shadow stacks are on; they never are with libseal loaded, which is not marked for them.)
///
/// # Safety
/// As `vfork(2)`: the child may only exec or `_exit` (and what POSIX allows before that).
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn vfork() -> pid_t {
    core::arch::naked_asm!(
        // Entry: rsp = 8 mod 16, [rsp] the caller's return address (counted as the caller).
        "mov rdi, [rsp]",
        "sub rsp, 8",
        "call {prepare}",
        "add rsp, 8",
        "pop rdi",
        "mov eax, {nr}",
        "syscall",
        "push rdi",
        "sub rsp, 8",
        "test rax, rax",
        "jz 2f",
        // Parent (rax the child's real pid) or failure (rax a negated errno).
        "mov rdi, rax",
        "call {parent}",
        "add rsp, 8",
        "ret",
        "2:",
        "call {child}",
        "add rsp, 8",
        "xor eax, eax",
        "ret",
        prepare = sym crate::process::vfork::prepare,
        parent = sym crate::process::vfork::parent_done,
        child = sym crate::process::vfork::child_started,
        nr = const libc::SYS_vfork,
    )
}

hook! {
    /// # Safety
    /// As `_Fork(3)`.
    fn _Fork() -> pid_t;
    fid = Fork;
    // SAFETY: _Fork is fork-like.
    || unsafe { fork_with(real_fork_no_handlers()) }
}

hook! {
    /// `clone(fn, stack, flags, arg, ptid, tls, ctid)`: variadic in C; on x86_64 the first six
    /// arguments arrive in registers and `ctid` on the stack at `[rbp+16]` (the shim keeps
    /// frame pointers, see `caller!`). Threads pass through (they get a virtual tid lazily). A
    /// new process created this way keeps its real pid in the parent's view: reported, not
    /// hidden.
    ///
    /// # Safety
    /// As `clone(2)`.
    fn clone(
        func: *mut c_void,
        stack: *mut c_void,
        flags: c_int,
        arg: *mut c_void,
        ptid: *mut pid_t,
        tls: *mut c_void,
    ) -> c_int;
    fid = Clone;
    || {
        let ctid: *mut pid_t;
        // SAFETY: with frame pointers, [rbp+16] is the first stack-passed argument (ctid); the
        // slot exists in the caller's frame even when the caller passed fewer arguments. The
        // hook body is the exported function's own (see `hook!`), so rbp is its frame.
        unsafe {
            core::arch::asm!("mov {}, [rbp + 16]", out(reg) ctid, options(nostack, readonly));
        }
        if flags & libc::CLONE_THREAD == 0 && config::in_run() {
            census::record_unsealed(
                unsealed::UNSUPPORTED_CALL,
                b"clone() creating a process: the parent sees its real pid",
            );
        }
        let real = real!(clone: fn(*mut c_void, *mut c_void, c_int, *mut c_void, *mut pid_t, *mut c_void, *mut pid_t) -> c_int);
        // SAFETY: forwarded, with the caller's seventh argument.
        unsafe { real(func, stack, flags, arg, ptid, tls, ctid) }
    }
}

struct Start {
    func: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
    state: thread::ThreadState,
}

extern "C" fn trampoline(p: *mut c_void) -> *mut c_void {
    // SAFETY: p is the `Start` pthread_create allocated, handed to exactly this thread.
    let s = unsafe { (p as *mut Start).read() };
    // SAFETY: allocated with malloc in pthread_create and not freed since.
    unsafe { libc::free(p) };
    thread::install(s.state);
    vpid::thread_started(s.state.vtid);
    let (func, arg) = (s.func, s.arg);
    let r = func(arg);
    // SAFETY: pthread_self has no preconditions.
    crate::causal::thread_done(unsafe { libc::pthread_self() });
    r
}

hook! {
    /// # Safety
    /// As `pthread_create(3)`.
    fn pthread_create(
        th: *mut libc::pthread_t,
        attr: *const libc::pthread_attr_t,
        func: extern "C" fn(*mut c_void) -> *mut c_void,
        arg: *mut c_void,
    ) -> c_int;
    fid = PthreadCreate;
    |real| {
        if !config::in_run() {
            return real(th, attr, func, arg);
        }
        // This process may be multi-threaded from now on: a fork child may no longer dlsym.
        super::resolve_early();
        let mut state = thread::spawn_child_state();
        state.vtid = vpid::reserve_vtid(state.lineage);
        // The program's malloc, as std's `Box` would use: libseal has no allocator of its own.
        // SAFETY: malloc has no preconditions.
        let start = unsafe { libc::malloc(core::mem::size_of::<Start>()) } as *mut Start;
        if start.is_null() {
            vpid::release_vtid(state.vtid);
            return libc::EAGAIN;
        }
        // SAFETY: fresh, suitably aligned (malloc's alignment suits any object) and ours.
        unsafe { start.write(Start { func, arg, state }) };
        // Our trampoline owns `start` once the thread runs.
        let r = real(th, attr, trampoline, start as *mut c_void);
        if r != 0 {
            vpid::release_vtid(state.vtid);
            // SAFETY: no thread was created, so the allocation is still ours.
            unsafe { libc::free(start as *mut c_void) };
        }
        r
    }
}
