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
use seal_abi::supervised::go_sys;

use crate::core::sys;

/// The runtime's `usleep` and `gettid` to answer in the image too (`seal_abi::supervised::
/// go_sys`; load bias added): the calls to rewrite, and for `gettid` the process's virtual
/// pid (its main thread's tid; another thread's stays real, as the supervisor leaves it).
#[derive(Clone, Copy, Default)]
pub struct Sys {
    pub usleep: Option<u64>,
    pub gettid: Option<(u64, i32)>,
}

/// Points `sites` (load bias added) at the sequence keyed `key`, in a mapping placed below
/// `low` (the program's lowest address), and `sys` at its code there: `Err` with the step
/// that failed (`go_rand::outcome`).
///
/// # Safety
/// Only one thread runs, and the Go runtime has not started.
pub unsafe fn seal(
    sites: &go_rand::Sites,
    low: u64,
    key: u64,
    sys: Sys,
) -> Result<(), &'static str> {
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
    let with_sys = go_rand::code(code, hint, key, sites).map(|()| go_sys::code(code).is_some());
    if with_sys == Some(true) {
        // SAFETY: the mapping's counters page, writable, ours.
        unsafe { numbers(hint, sys) };
    }
    let made = match with_sys.map(|_| ()) {
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
    // Every site at once (each is a function's entry, a `call rel32` or a
    // `mov eax, NR; syscall` in the executable's text), the runtime's `usleep` and `gettid`
    // with them.
    let sys_call = |site: Option<u64>, at: usize| {
        let site = site.filter(|_| with_sys == Some(true))?;
        Some((site, go_sys::call_at(site, hint + at as u64)?))
    };
    let calls = [
        sys_call(sys.usleep, go_sys::USLEEP_AT),
        sys_call(sys.gettid.map(|g| g.0), go_sys::GETTID_AT),
    ];
    let mut all: [(u64, &[u8]); go_rand::PATCHES + 2] = [(0, &[]); go_rand::PATCHES + 2];
    for (slot, (at, bytes)) in all.iter_mut().zip(patches.iter()) {
        *slot = (*at, bytes);
    }
    for (slot, c) in all[go_rand::PATCHES..].iter_mut().zip(&calls) {
        if let Some((at, bytes)) = c {
            *slot = (*at, bytes);
        }
    }
    // SAFETY: per the contract: no thread runs the runtime's code while it is rewritten.
    if !unsafe { super::go_entropy::rewrite_all(&all) } {
        return Err(outcome::REWRITE);
    }
    Ok(())
}

/// Writes the in-image `gettid`'s numbers into the counters page of the mapping at `base`:
/// the real pid (a marked `gettid` of this, the main, thread: the filter lets it through),
/// the virtual pid, and that another thread's tid is its real one.
///
/// # Safety
/// `base` is the start of the mapping, its counters page writable.
unsafe fn numbers(base: u64, sys: Sys) {
    let Some((_, vpid)) = sys.gettid else {
        return;
    };
    // SAFETY: gettid reads no argument; the third carries the mark.
    let real = unsafe { sys_gettid_marked() };
    let at = |off: usize| (base + off as u64) as *mut i32;
    // SAFETY: per the contract: three words of the counters page.
    unsafe {
        at(go_sys::REAL_AT).write(real);
        at(go_sys::VPID_AT).write(vpid);
        at(go_sys::MISS_REAL_AT).write(1);
    }
}

/// This thread's real tid, by a `gettid` the filter lets through.
///
/// # Safety
/// None beyond a system call's.
unsafe fn sys_gettid_marked() -> i32 {
    // SAFETY: gettid takes no argument; rdx carries the mark.
    unsafe { sys::syscall3(libc::SYS_gettid, 0, 0, go_sys::MARK as i64) as i32 }
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
