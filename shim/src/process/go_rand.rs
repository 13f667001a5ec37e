//! A dynamically linked Go program's own random numbers (map order and hash seeds,
//! `math/rand`'s global source, `os.MkdirTemp` names, `select` order) made one sequence per
//! process, as the supervisor does for a static Go image (`seal_abi::supervised::go_rand`: the
//! code, and why).
//! In libseal's constructor (one thread, the Go runtime not started): a private anonymous
//! mapping of two pages below the program (within a 32-bit displacement of it; a fork copies
//! it), the code written into its first page, made read-and-execute, then the runtime's
//! functions pointed at it. Any step that fails leaves them as they are, and the caller says
//! which in the census (`go-runtime-random`). The draws are counted by the supervisor, which
//! finds the mapping at the same place and reads its counters when the process exits or execs.

use seal_abi::supervised::go_rand::{self, outcome};

use crate::core::sys;

/// Points `sites` (load bias added) at the sequence keyed `key`, in a mapping placed below
/// `low` (the program's lowest address): `Err` with the step that failed
/// (`go_rand::outcome`).
///
/// # Safety
/// Only one thread runs, and the Go runtime has not started.
pub unsafe fn seal(sites: &go_rand::Sites, low: u64, key: u64) -> Result<(), &'static str> {
    let hint = go_rand::place(low).ok_or(outcome::NO_ROOM)?;
    let patches = sites.patches(hint).ok_or(outcome::NO_ROOM)?;
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
        return Err(outcome::MMAP);
    }
    // SAFETY: the first page of our new mapping, writable.
    let code = unsafe { core::slice::from_raw_parts_mut(hint as *mut u8, go_rand::CODE_BYTES) };
    let rx = (libc::PROT_READ | libc::PROT_EXEC) as i64;
    let len = go_rand::CODE_BYTES as i64;
    // SAFETY: our own mapping's first page, made read-only and executable.
    let made = match go_rand::code(code, hint, key, sites) {
        None => Err(outcome::NO_ROOM),
        // SAFETY: as above.
        Some(()) if unsafe { sys::syscall3(libc::SYS_mprotect, hint as i64, len, rx) } != 0 => {
            Err(outcome::MPROTECT)
        }
        Some(()) => Ok(()),
    };
    if made.is_err() {
        // SAFETY: our mapping, which nothing runs.
        unsafe { sys::munmap(hint as *mut u8, go_rand::MAP_BYTES) };
        return made;
    }
    for (at, bytes) in patches.iter().filter(|p| p.0 != 0) {
        // SAFETY: per the contract: no thread runs the runtime's code while it is rewritten;
        // each site is a function's entry or a `call rel32` in the executable's text.
        if !unsafe { super::go_entropy::rewrite(*at, bytes) } {
            return Err(outcome::REWRITE);
        }
    }
    Ok(())
}

/// Says in the census what stays per thread of the runtime's random numbers, when more than
/// `select` order does: `what` (`outcome::MAPS`, or `outcome::NONE` with the reason `why`).
pub fn say(what: &str, why: &str) {
    let mut buf = [0u8; 248];
    let mut n = 0;
    let sep = if why.is_empty() { "" } else { outcome::BECAUSE };
    for part in [what, sep, why] {
        let b = &part.as_bytes()[..part.len().min(buf.len() - n)];
        buf[n..n + b.len()].copy_from_slice(b);
        n += b.len();
    }
    crate::core::census::record_unsealed(seal_abi::unsealed::GO_RANDOM, &buf[..n]);
}
