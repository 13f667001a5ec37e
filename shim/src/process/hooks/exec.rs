//! The exec family: the new image gets the sealed environment; unsealable targets are
//! reported.

use libc::{c_char, c_int};

use crate::core::config;
use crate::core::sys::{self, errno, set_errno};
use crate::process::{
    check_exec, check_search_exec, env, exec_env, kernel_file_name, static_image, target,
    ExecTarget,
};
use crate::{hook, real};

pub(super) type Argv = *const *const c_char;

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

/// Resolves the real functions a fork child may need, in the parent: before a fork or vfork,
/// and before a process's first thread (a fork child of a multi-threaded process must not
/// call `dlsym`; one of a single-threaded process may). Cached after the first call; at every
/// image's start it cost ~4 µs that most images never needed.
pub fn resolve_early() {
    real_execve();
    real_execvpe();
    real_fexecve();
    real_execveat();
}

/// Calls `exec` with the sealed environment for `envp` (ours when built, else the caller's),
/// padded for `file` and `argv` (the file name the kernel is given). When the padded
/// environment is past the kernel's limit (E2BIG), tries once more without the pad.
///
/// # Safety
/// `envp` is a valid environment vector, `argv` a valid argument vector.
#[inline(always)]
unsafe fn with_env(
    envp: Argv,
    file: Option<&[u8]>,
    argv: Argv,
    target: ExecTarget,
    exec: impl Fn(Argv) -> c_int,
) -> c_int {
    let layout = file.map(|file| env::Layout { file, argv });
    // SAFETY: per the contract.
    let mut block = unsafe { exec_env(envp, layout, target.id) };
    // The new image's loader runs rdtsc before libseal is loaded: no trap across exec (nor in
    // the supervisor a static image gets).
    let _cpu = crate::cpu::ExecGuard::new();
    let supervisor = target.static_prog.as_ref().and_then(|prog| {
        let mut path = super::super::target::Path::new();
        path.push(prog.as_bytes());
        // SAFETY: a NUL-terminated path.
        let pie = unsafe { seal_abi::supervised::handover::is_static_pie(path.as_cstr().as_ptr()) };
        use seal_abi::supervised::handover::under_supervisor;
        use seal_abi::unsealed::{STATIC_BINARY, STATIC_SUPERVISED};
        // A descendant of a supervised static image: its supervisor follows this exec (no
        // second listener can be installed under its filter).
        // SAFETY: the run directory's NUL-terminated bytes.
        if unsafe { under_supervisor(config::RUN_DIR.get_cstr().as_ptr()) } {
            crate::core::census::record_unsealed(STATIC_SUPERVISED, prog.as_bytes());
            return None;
        }
        // SAFETY: the new image's environment is a valid vector.
        let s =
            unsafe { static_image::prepare(block.as_ref().map(|b| b.envp()).unwrap_or(envp), pie) };
        let kind = if s.is_some() {
            STATIC_SUPERVISED
        } else {
            STATIC_BINARY
        };
        crate::core::census::record_unsealed(kind, prog.as_bytes());
        s
    });
    let mut r = exec(block.as_ref().map(|b| b.envp()).unwrap_or(envp));
    if r == -1 && errno() == libc::E2BIG {
        if let Some(b) = block.as_mut() {
            if b.drop_pad() {
                r = exec(b.envp());
            }
        }
    }
    if let Some(sock) = supervisor {
        let e = errno();
        static_image::exec_failed(sock, e);
        set_errno(e);
    }
    r
}

/// # Safety
/// As `execve(2)`.
pub(crate) unsafe fn execve_impl(path: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let real = real_execve();
    // SAFETY: path is a C string.
    let file = (!path.is_null()).then(|| unsafe { sys::cstr(path) });
    let exe = if config::in_run() {
        check_exec(file)
    } else {
        check_exec(None)
    };
    // SAFETY: forwarded.
    unsafe { with_env(envp, file, argv, exe, |env| real(path, argv, env)) }
}

/// # Safety
/// As `execvpe(3)`.
unsafe fn execvpe_impl(file: *const c_char, argv: Argv, envp: Argv) -> c_int {
    let real = real_execvpe();
    let mut resolved = None;
    if config::in_run() && !file.is_null() {
        // SAFETY: file is a C string.
        resolved = check_search_exec(unsafe { sys::cstr(file) });
    }
    let (name, exe) = match resolved.as_mut() {
        Some((p, t)) => (
            Some(p.as_bytes()),
            ExecTarget {
                id: t.id,
                static_prog: t.static_prog.take(),
            },
        ),
        None => (None, check_exec(None)),
    };
    // SAFETY: forwarded.
    unsafe { with_env(envp, name, argv, exe, |env| real(file, argv, env)) }
}

extern "C" {
    static environ: Argv;
}

pub(super) fn current_environ() -> Argv {
    // SAFETY: reading libc's environ pointer.
    unsafe { environ }
}

hook! {
    /// # Safety
    /// As `execve(2)`.
    fn execve(path: *const c_char, argv: Argv, envp: Argv) -> c_int;
    fid = Execve;
    // SAFETY: per the contract.
    || unsafe { execve_impl(path, argv, envp) }
}

hook! {
    /// # Safety
    /// As `execv(3)`.
    fn execv(path: *const c_char, argv: Argv) -> c_int;
    fid = Execv;
    // SAFETY: per the contract.
    || unsafe { execve_impl(path, argv, current_environ()) }
}

hook! {
    /// # Safety
    /// As `execvp(3)`.
    fn execvp(file: *const c_char, argv: Argv) -> c_int;
    fid = Execvp;
    // SAFETY: per the contract.
    || unsafe { execvpe_impl(file, argv, current_environ()) }
}

hook! {
    /// # Safety
    /// As `execvpe(3)`.
    fn execvpe(file: *const c_char, argv: Argv, envp: Argv) -> c_int;
    fid = Execvpe;
    // SAFETY: per the contract.
    || unsafe { execvpe_impl(file, argv, envp) }
}

hook! {
    /// # Safety
    /// As `fexecve(3)`.
    fn fexecve(fd: c_int, argv: Argv, envp: Argv) -> c_int;
    fid = Fexecve;
    || {
        let real = real_fexecve();
        let mut exe = check_exec(None);
        if config::in_run() {
            let mut p = target::Path::new();
            p.push(b"/proc/self/fd/").push_i64(fd as i64);
            exe = check_exec(Some(p.as_bytes()));
        }
        let name = kernel_file_name(fd, b"");
        // SAFETY: forwarded.
        unsafe { with_env(envp, Some(name.as_bytes()), argv, exe, |env| real(fd, argv, env)) }
    }
}

hook! {
    /// # Safety
    /// As `execveat(2)`.
    fn execveat(dirfd: c_int, path: *const c_char, argv: Argv, envp: Argv, flags: c_int) -> c_int;
    fid = Execveat;
    // SAFETY: per the contract.
    || unsafe { execveat_impl(dirfd, path, argv, envp, flags) }
}

/// # Safety
/// As `execveat(2)`.
pub(crate) unsafe fn execveat_impl(
    dirfd: c_int,
    path: *const c_char,
    argv: Argv,
    envp: Argv,
    flags: c_int,
) -> c_int {
    let real = real_execveat();
    let mut exe = check_exec(None);
    if config::in_run() {
        // SAFETY: path is null or a C string.
        let p = target::execveat_path(dirfd, unsafe { sys::cstr(path) }, b"/proc/self/fd/");
        exe = check_exec(Some(p.as_bytes()));
    }
    // SAFETY: path is null or a C string.
    let name = kernel_file_name(dirfd, unsafe { sys::cstr(path) });
    // SAFETY: forwarded.
    unsafe {
        with_env(envp, Some(name.as_bytes()), argv, exe, |env| {
            real(dirfd, path, argv, env, flags)
        })
    }
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
        crate::process::vfork::keep(mem, size);
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

/// The body of an `execl`-style hook: collects the argument list into an argv, runs `exec`
/// with it (and the list's length, for execle's envp after it), frees it when exec failed.
#[inline(always)]
fn list_exec(
    arg0: *const c_char,
    va: VarArgs,
    exec: impl FnOnce(Argv, &VarArgs, usize) -> c_int,
) -> c_int {
    let Some((argv, n, mem, size)) = va.collect(arg0) else {
        set_errno(libc::ENOMEM);
        return -1;
    };
    let r = exec(argv, &va, n);
    let e = errno();
    crate::process::vfork::unkeep(mem);
    // SAFETY: our own mapping; exec failed, so nothing references it any more.
    unsafe { sys::munmap(mem, size) };
    set_errno(e);
    r
}

/// `execl`-style hooks: on x86_64 a variadic call passes its first six integer arguments in
/// registers (path, arg0 and four more) and the rest on the stack, which with frame pointers
/// starts at `[rbp+16]` in the callee. Stable Rust cannot define a C-variadic function, but it
/// can read that ABI directly. The read is in the hook's body, which is the exported
/// function's own (see `hook!`).
macro_rules! stack_args {
    ($a1:ident, $a2:ident, $a3:ident, $a4:ident) => {{
        let stack: *const usize;
        // SAFETY: with frame pointers, [rbp+16] is where the caller's stack-passed arguments
        // start; we read only as far as the NULL-terminated list goes.
        unsafe {
            core::arch::asm!("lea {}, [rbp + 16]", out(reg) stack,
                             options(nostack, nomem, preserves_flags));
        }
        VarArgs {
            regs: [$a1, $a2, $a3, $a4],
            stack,
        }
    }};
}

hook! {
    /// # Safety
    /// As `execl(3)`: a NULL-terminated argument list.
    fn execl(path: *const c_char, arg0: *const c_char, a1: usize, a2: usize, a3: usize, a4: usize) -> c_int;
    fid = Execl;
    // SAFETY: argv built from the caller's list, environ is libc's.
    || list_exec(arg0, stack_args!(a1, a2, a3, a4), |argv, _, _| unsafe {
        execve_impl(path, argv, current_environ())
    })
}

hook! {
    /// # Safety
    /// As `execlp(3)`: a NULL-terminated argument list.
    fn execlp(file: *const c_char, arg0: *const c_char, a1: usize, a2: usize, a3: usize, a4: usize) -> c_int;
    fid = Execlp;
    // SAFETY: as execl.
    || list_exec(arg0, stack_args!(a1, a2, a3, a4), |argv, _, _| unsafe {
        execvpe_impl(file, argv, current_environ())
    })
}

hook! {
    /// # Safety
    /// As `execle(3)`: a NULL-terminated argument list, then the environment.
    fn execle(path: *const c_char, arg0: *const c_char, a1: usize, a2: usize, a3: usize, a4: usize) -> c_int;
    fid = Execle;
    // envp follows the NULL that ends the list: argument index n (arg0 is index 0).
    // SAFETY: as execl, with the caller's envp.
    || list_exec(arg0, stack_args!(a1, a2, a3, a4), |argv, va, n| unsafe {
        execve_impl(path, argv, va.get(n) as Argv)
    })
}

/// `syscall(SYS_execve | SYS_execveat, …)`: an exec through `syscall()` is an exec, and the
/// new image is re-injected like any other (`crate::syscall`'s route table). Counted as the
/// functions are.
///
/// # Safety
/// As `syscall(2)` for `n` with `a`.
pub(crate) unsafe fn sys_exec(
    n: libc::c_long,
    a: [libc::c_long; 6],
    ra: u64,
) -> Option<libc::c_long> {
    // SAFETY (both arms): the caller's arguments, forwarded with the same meaning.
    let r = unsafe {
        if n == libc::SYS_execve {
            crate::core::census::count(seal_abi::Fid::Execve, seal_abi::NO_DETAIL, ra);
            execve_impl(a[0] as *const c_char, a[1] as _, a[2] as _)
        } else {
            crate::core::census::count(seal_abi::Fid::Execveat, seal_abi::NO_DETAIL, ra);
            execveat_impl(
                a[0] as libc::c_int,
                a[1] as *const c_char,
                a[2] as _,
                a[3] as _,
                a[4] as libc::c_int,
            )
        }
    };
    Some(r as libc::c_long)
}
