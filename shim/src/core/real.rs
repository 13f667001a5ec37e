//! Resolving the real libc functions behind our interposed ones, and the re-entry guard.
//!
//! `real!(name: fn(args) -> ret)` resolves `name` once with `dlsym(RTLD_NEXT, …)` and caches
//! the pointer in a per-call-site atomic, so the hot path is one relaxed load. While `dlsym`
//! runs, the calling thread is marked as inside the shim ([`Reentry`]), so anything the
//! loader calls that we also interpose goes straight to the real function.

use core::sync::atomic::{AtomicUsize, Ordering};

crate::thread_cell! {
    /// How deep this thread is inside the shim's own non-trivial work.
    static DEPTH: u32 = "seal_tls_reentry_depth";
}

/// A save-and-restore guard: while it lives, hooks on this thread pass straight through to the
/// real functions. Nested guards are fine.
pub struct Reentry(());

impl Reentry {
    /// Enters the shim; `None` when this thread is already inside it (the caller must then
    /// bypass to the real function).
    #[inline]
    pub fn enter() -> Option<Reentry> {
        DEPTH.with(|d| {
            if d.get() > 0 {
                None
            } else {
                d.set(1);
                Some(Reentry(()))
            }
        })
    }

    /// Enters unconditionally (used around `dlsym` and initialisation).
    #[inline]
    pub fn force() -> Reentry {
        DEPTH.with(|d| d.set(d.get() + 1));
        Reentry(())
    }

    #[inline]
    pub fn inside() -> bool {
        DEPTH.with(|d| d.get() > 0)
    }
}

impl Drop for Reentry {
    #[inline]
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Resolves `name` (NUL-terminated) in the objects after libseal; aborts loudly if libc does
/// not have it (a hook whose real function does not exist cannot have been called by a
/// program linked against this libc, so this is a broken installation).
#[cold]
pub fn resolve(cache: &AtomicUsize, name: &'static [u8]) -> usize {
    let p = {
        let _g = Reentry::force();
        // SAFETY: name is NUL-terminated; RTLD_NEXT is valid from inside a shared object.
        unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr() as *const libc::c_char) as usize }
    };
    if p == 0 {
        let mut b = crate::core::sys::StackBuf::<128>::new();
        b.push(b"libseal: cannot find the real ")
            .push(&name[..name.len() - 1])
            .push(b" in libc\n");
        crate::core::sys::write_all(2, b.as_bytes());
        crate::core::sys::exit_group(125);
    }
    cache.store(p, Ordering::Relaxed);
    p
}

/// `real!(clock_gettime: fn(libc::clockid_t, *mut libc::timespec) -> libc::c_int)` evaluates
/// to the real function pointer.
#[macro_export]
macro_rules! real {
    ($name:ident : fn($($t:ty),* $(,)?) -> $r:ty) => {{
        // With the other statics an image's start touches (see the crate docs).
        #[link_section = ".data.seal_hot"]
        static CACHE: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
        let mut p = CACHE.load(core::sync::atomic::Ordering::Relaxed);
        if p == 0 {
            p = $crate::core::real::resolve(&CACHE, concat!(stringify!($name), "\0").as_bytes());
        }
        // SAFETY: p is the address of the libc function with this C signature.
        unsafe { core::mem::transmute::<usize, unsafe extern "C" fn($($t),*) -> $r>(p) }
    }};
}

/// The real `syscall(n, a…)`, for a family's `sys_*` handler that passes a call on (as given,
/// or with translated arguments).
///
/// # Safety
/// As `syscall(2)` for `n` with `a`.
pub unsafe fn syscall(n: libc::c_long, a: [libc::c_long; 6]) -> libc::c_long {
    use libc::c_long as L;
    let real = crate::real!(syscall: fn(L, L, L, L, L, L, L) -> L);
    // SAFETY: per the contract.
    unsafe { real(n, a[0], a[1], a[2], a[3], a[4], a[5]) }
}

/// The return address of the current (exported, frame-pointer-keeping) function: the call site
/// in the program or library that called the hook. The shim is always built with
/// `-C force-frame-pointers=yes` (the workspace's `.cargo/config.toml`, the launcher's
/// build.rs; shim/build.rs fails a build without it), so `[rbp+8]` holds it.
#[macro_export]
macro_rules! caller {
    () => {{
        let ra: u64;
        // SAFETY: with frame pointers forced, rbp is this function's frame base and [rbp+8] its
        // return address; the read cannot fault.
        unsafe {
            core::arch::asm!("mov {}, [rbp + 8]", out(reg) ra,
                             options(nostack, readonly, preserves_flags));
        }
        ra
    }};
}

/// The current (exported, frame-pointer-keeping) function's frame base: `[rbp]` is its
/// caller's saved frame pointer, through which `runtime::bookkeeping` reads the caller's own
/// return address. Evaluate it in the exported frame, as `caller!()`.
#[macro_export]
macro_rules! frame {
    () => {{
        let fp: u64;
        // SAFETY: reads a register.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::asm!("mov {}, rbp", out(reg) fp,
                             options(nomem, nostack, preserves_flags));
        }
        fp
    }};
}
