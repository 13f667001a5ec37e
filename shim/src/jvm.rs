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
//! a lookup in libjvm's own scope that no preloaded symbol can shadow; [`crate::dlsym`]'s
//! trampoline asks [`route`] first. The census counts each VM started this way under
//! `Fid::JniCreateJavaVm`.

use core::sync::atomic::{AtomicUsize, Ordering::*};

use seal_abi::{flags, Fid, NO_DETAIL};

use crate::core::{census, config, sys};

/// The JVM's own `JNI_CreateJavaVM`.
static REAL_CREATE: AtomicUsize = AtomicUsize::new(0);

/// Options every sealed JVM starts with (before the launcher's).
const OPTIONS: &[&[u8]] = &[b"-XX:-UsePerfData\0"];

/// [`crate::dlsym`]'s question for the JVM: for `dlsym(handle, "JNI_CreateJavaVM")` on a real
/// handle, the wrapper that adds [`OPTIONS`]; otherwise 0.
pub fn route(
    handle: *mut libc::c_void,
    name: *const libc::c_char,
    real: crate::dlsym::Dlsym,
) -> usize {
    if !crate::dlsym::is_name(name, b"JNI_CreateJavaVM\0") || !config::sealed(flags::PID) {
        return 0;
    }
    // SAFETY: glibc's dlsym, with the caller's handle and name.
    let f = unsafe { real(handle, name) };
    if f == 0 {
        return 0;
    }
    REAL_CREATE.store(f, Relaxed);
    create_java_vm as *const () as usize
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
