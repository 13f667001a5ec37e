//! The JVM profile: options a sealed HotSpot gets without the user asking.
//!
//! Every sealed root process has virtual pid 1000, so two sealed JVMs running at once both
//! want `/tmp/hsperfdata_$USER/1000`; the loser prints `[warning][perf,memops] Cannot use file
//! /tmp/hsperfdata_…/1000 because it is locked by another process` **on stdout**. A sealed JVM
//! therefore starts with `-XX:-UsePerfData` (no perf-data file, so nothing to collide on; its
//! class-loading timers' clock reads are gone too). The option goes *before* the launcher's
//! own, so a user's explicit `-XX:+UsePerfData` still wins.
//!
//! The java launcher (libjli) finds the VM with `dlsym(libjvm_handle, "JNI_CreateJavaVM")`,
//! a lookup in libjvm's own scope that no preloaded symbol can shadow. So libseal interposes
//! `dlsym` itself, as a trampoline that calls [`dlsym_route`] and then *tail-jumps* to glibc's
//! `dlsym`: a `dlsym(RTLD_NEXT, …)` resolves relative to its caller's return address, which
//! therefore must stay the caller's (also for libseal's own `real!` lookups, which reach glibc
//! through this same trampoline with libseal's return address intact). It is the one exported
//! entry point not written with `hook!`, which cannot emit a tail jump. The census counts
//! each VM started this way under `Fid::JniCreateJavaVm`.

use core::sync::atomic::{AtomicUsize, Ordering::*};

use seal_abi::{flags, Fid, NO_DETAIL};

use crate::core::{census, config, sys};

/// glibc's `dlsym`, resolved on the first call (never through the trampoline).
#[link_section = ".data.seal_hot"]
static SEAL_REAL_DLSYM: AtomicUsize = AtomicUsize::new(0);
/// The JVM's own `JNI_CreateJavaVM`.
static REAL_CREATE: AtomicUsize = AtomicUsize::new(0);

/// Options every sealed JVM starts with (before the launcher's).
const OPTIONS: &[&[u8]] = &[b"-XX:-UsePerfData\0"];

/// `dlsym`: asks [`dlsym_route`] whether this lookup gets a sealed answer; if not, tail-jumps
/// to glibc's `dlsym` with the caller's return address still on the stack.
///
/// # Safety
/// As `dlsym(3)`.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn dlsym(
    _handle: *mut libc::c_void,
    _name: *const libc::c_char,
) -> *mut libc::c_void {
    core::arch::naked_asm!(
        // rsp is 8 mod 16 here; two pushes and 8 bytes realign it for the call.
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {route}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "test rax, rax",
        "jnz 2f",
        "jmp qword ptr [rip + {real}]",
        "2:",
        "ret",
        route = sym dlsym_route,
        real = sym SEAL_REAL_DLSYM,
    )
}

/// Makes sure glibc's `dlsym` is known, and returns the sealed answer for this lookup, or 0
/// for "ask glibc".
extern "C" fn dlsym_route(handle: *mut libc::c_void, name: *const libc::c_char) -> usize {
    if SEAL_REAL_DLSYM.load(Relaxed) == 0 {
        resolve_real_dlsym();
    }
    if name.is_null() || !is_create_java_vm(name) {
        return 0;
    }
    // RTLD_DEFAULT / RTLD_NEXT lookups depend on the caller: leave them to glibc.
    if handle.is_null() || handle as isize == -1 || !config::sealed(flags::PID) {
        return 0;
    }
    let real = SEAL_REAL_DLSYM.load(Relaxed);
    // SAFETY: glibc's dlsym, with the caller's handle and name.
    let f = unsafe {
        core::mem::transmute::<
            usize,
            unsafe extern "C" fn(*mut libc::c_void, *const libc::c_char) -> usize,
        >(real)(handle, name)
    };
    if f == 0 {
        return 0;
    }
    REAL_CREATE.store(f, Relaxed);
    create_java_vm as *const () as usize
}

fn is_create_java_vm(name: *const libc::c_char) -> bool {
    const WANT: &[u8] = b"JNI_CreateJavaVM\0";
    for (i, &w) in WANT.iter().enumerate() {
        // SAFETY: a NUL-terminated string; we stop at its NUL (or at the first mismatch).
        let c = unsafe { *name.add(i) } as u8;
        if c != w {
            return false;
        }
        if c == 0 {
            break;
        }
    }
    true
}

#[cold]
fn resolve_real_dlsym() {
    extern "C" {
        fn dlvsym(
            handle: *mut libc::c_void,
            name: *const libc::c_char,
            version: *const libc::c_char,
        ) -> *mut libc::c_void;
    }
    for version in [&b"GLIBC_2.34\0"[..], b"GLIBC_2.2.5\0"] {
        // SAFETY: NUL-terminated strings; RTLD_NEXT is valid from inside a shared object.
        let p = unsafe {
            dlvsym(
                libc::RTLD_NEXT,
                c"dlsym".as_ptr(),
                version.as_ptr() as *const libc::c_char,
            )
        };
        if !p.is_null() {
            SEAL_REAL_DLSYM.store(p as usize, Relaxed);
            return;
        }
    }
    sys::write_all(2, b"libseal: cannot find the real dlsym in libc\n");
    sys::exit_group(125);
}

/// `JavaVMOption` and `JavaVMInitArgs` of `<jni.h>`.
#[repr(C)]
#[derive(Clone, Copy)]
struct JavaVmOption {
    option_string: *const libc::c_char,
    extra_info: *mut libc::c_void,
}

#[repr(C)]
struct JavaVmInitArgs {
    version: i32,
    n_options: i32,
    options: *mut JavaVmOption,
    ignore_unrecognized: u8,
}

type CreateJavaVm = unsafe extern "C" fn(
    *mut *mut libc::c_void,
    *mut *mut libc::c_void,
    *mut JavaVmInitArgs,
) -> i32;

/// `JNI_CreateJavaVM` with [`OPTIONS`] in front of the caller's options.
unsafe extern "C" fn create_java_vm(
    pvm: *mut *mut libc::c_void,
    penv: *mut *mut libc::c_void,
    args: *mut JavaVmInitArgs,
) -> i32 {
    census::count(Fid::JniCreateJavaVm, NO_DETAIL, crate::caller!());
    // libjvm is loaded by now: make sure the census (and with it `runtime`) lists it before
    // the VM's first clock read, whatever libjvm called before.
    census::refresh_modules();
    // SAFETY: REAL_CREATE was stored before this wrapper was handed out.
    let real = unsafe { core::mem::transmute::<usize, CreateJavaVm>(REAL_CREATE.load(Relaxed)) };
    if args.is_null() {
        // SAFETY: forwarded.
        return unsafe { real(pvm, penv, args) };
    }
    // SAFETY: the caller's init args, valid for reads per the JNI contract.
    let given = unsafe { &*args };
    let n = given.n_options.max(0) as usize;
    let total = n + OPTIONS.len();
    // The VM may keep pointers into the array; it lives as long as the process.
    let mem = sys::mmap_anon(total * core::mem::size_of::<JavaVmOption>()) as *mut JavaVmOption;
    if mem.is_null() {
        // SAFETY: forwarded unchanged.
        return unsafe { real(pvm, penv, args) };
    }
    // SAFETY: mem holds `total` options; the caller's array holds `n`.
    unsafe {
        for (i, o) in OPTIONS.iter().enumerate() {
            *mem.add(i) = JavaVmOption {
                option_string: o.as_ptr() as *const libc::c_char,
                extra_info: core::ptr::null_mut(),
            };
        }
        if n > 0 && !given.options.is_null() {
            core::ptr::copy_nonoverlapping(given.options, mem.add(OPTIONS.len()), n);
        }
    }
    let mut ours = JavaVmInitArgs {
        version: given.version,
        n_options: total as i32,
        options: mem,
        ignore_unrecognized: given.ignore_unrecognized,
    };
    // SAFETY: the caller's contract, with a valid, longer option array.
    unsafe { real(pvm, penv, &mut ours) }
}
