//! A dynamically linked Go program's own random numbers (map order and hash seeds,
//! `math/rand`'s global source, `os.MkdirTemp` names, `select` order) made one sequence per
//! process, as the supervisor does for a static Go image (`seal_abi::supervised::go_rand`: the
//! code, and why).
//! In libseal's constructor (one thread, the Go runtime not started): a private anonymous
//! mapping of two pages below the program (within a 32-bit displacement of it; a fork copies
//! it), the code written into its first page, made read-and-execute, then the runtime's
//! functions pointed at it. Any step that fails leaves them as they are.

use seal_abi::supervised::go_rand;

use crate::core::sys;

/// Points `sites` (load bias added) at the sequence keyed `key`, in a mapping placed below
/// `low` (the program's lowest address): whether it did.
///
/// # Safety
/// Only one thread runs, and the Go runtime has not started.
pub unsafe fn seal(sites: &go_rand::Sites, low: u64, key: u64) -> bool {
    let Some(hint) = low.checked_sub(256 << 10).map(|h| h & !0xfff) else {
        return false;
    };
    let Some(patches) = sites.patches(hint) else {
        return false;
    };
    // SAFETY: a new private anonymous mapping at an address nothing holds
    // (MAP_FIXED_NOREPLACE: the kernel refuses rather than replace a mapping).
    let r = unsafe {
        sys::syscall6(
            libc::SYS_mmap,
            hint as i64,
            go_rand::MAP_BYTES as i64,
            (libc::PROT_READ | libc::PROT_WRITE) as i64,
            (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE) as i64,
            -1,
            0,
        )
    };
    if r != hint as i64 {
        if !(-4095..0).contains(&r) {
            // A kernel without MAP_FIXED_NOREPLACE placed it elsewhere.
            // SAFETY: our mapping, unused.
            unsafe { sys::munmap(r as *mut u8, go_rand::MAP_BYTES) };
        }
        return false;
    }
    // SAFETY: the first page of our new mapping, writable.
    let code = unsafe { core::slice::from_raw_parts_mut(hint as *mut u8, go_rand::CODE_BYTES) };
    let rx = (libc::PROT_READ | libc::PROT_EXEC) as i64;
    let len = go_rand::CODE_BYTES as i64;
    // SAFETY: our own mapping's first page, made read-only and executable.
    let made = go_rand::code(code, hint, key, sites).is_some()
        && unsafe { sys::syscall3(libc::SYS_mprotect, hint as i64, len, rx) } == 0;
    if !made {
        // SAFETY: our mapping, which nothing runs.
        unsafe { sys::munmap(hint as *mut u8, go_rand::MAP_BYTES) };
        return false;
    }
    for (at, bytes) in patches.iter().filter(|p| p.0 != 0) {
        // SAFETY: per the contract: no thread runs the runtime's code while it is rewritten;
        // each site is a function's entry or a `call rel32` in the executable's text.
        if !unsafe { super::go_entropy::rewrite(*at, bytes) } {
            return false;
        }
    }
    true
}
