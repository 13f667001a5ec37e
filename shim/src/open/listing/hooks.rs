//! The directory-listing hooks, exported (the logic is in the parent module): `readdir`,
//! `readdir64`, `readdir_r`, `readdir64_r`, `getdents64` and `closedir`. Each calls the real
//! function and hands what it read to the parent module, which passes it on, skips it, or
//! returns the listing's numbers in virtual pid order instead.

use libc::{c_int, c_void, dirent64, size_t, ssize_t, DIR};

use super::{self as listing, Step, DIRENT_SIZE};
use crate::hook;

/// The descriptor of a stream.
///
/// # Safety
/// `dir` is a valid open stream.
#[inline(always)]
unsafe fn fd_of(dir: *mut DIR) -> c_int {
    // SAFETY: per the contract; dirfd is not interposed by the shim.
    unsafe { libc::dirfd(dir) }
}

hook! {
    /// # Safety
    /// As `readdir(3)`.
    fn readdir | readdir64(dir: *mut DIR) -> *mut dirent64;
    caller = ra;
    |real| loop {
        let e = real(dir);
        // SAFETY: dir is the caller's open stream.
        let fd = || unsafe { fd_of(dir) };
        let mut next = || real(dir) as *mut u8;
        // SAFETY: e was just read from dir, next reads dir; the slot holds the records we make.
        match unsafe { listing::readdir_step(dir as usize, e as *mut u8, &fd, ra, &mut next, core::ptr::null_mut()) } {
            Step::Return(p) => return p as *mut dirent64,
            Step::Again => continue,
        }
    }
}

hook! {
    /// # Safety
    /// As `readdir_r(3)`: `entry` a whole `struct dirent`, `result` a valid out-pointer.
    fn readdir_r | readdir64_r(dir: *mut DIR, entry: *mut dirent64, result: *mut *mut dirent64) -> c_int;
    caller = ra;
    |real| loop {
        let r = real(dir, entry, result);
        if r != 0 || result.is_null() {
            return r;
        }
        // SAFETY: result is a valid out-pointer per the contract.
        let e = unsafe { *result } as *mut u8;
        // SAFETY: dir is the caller's open stream.
        let fd = || unsafe { fd_of(dir) };
        let mut spare = [0u64; DIRENT_SIZE / 8];
        let mut got: *mut dirent64 = core::ptr::null_mut();
        let mut next = || {
            if real(dir, spare.as_mut_ptr() as *mut dirent64, &mut got) == 0 {
                got as *mut u8
            } else {
                core::ptr::null_mut()
            }
        };
        // SAFETY: e was just read from dir, next reads dir, entry is a whole dirent.
        match unsafe { listing::readdir_step(dir as usize, e, &fd, ra, &mut next, entry as *mut u8) } {
            Step::Return(p) => {
                // SAFETY: as above.
                unsafe { *result = p as *mut dirent64 };
                return 0;
            }
            Step::Again => continue,
        }
    }
}

hook! {
    /// # Safety
    /// As `getdents64(2)`.
    fn getdents64(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t;
    caller = ra;
    // SAFETY: forwarded contract.
    |real| unsafe { listing::getdents(fd, buf as *mut u8, count, ra, |b, c| real(fd, b as *mut c_void, c)) }
}

hook! {
    /// # Safety
    /// As `closedir(3)`.
    fn closedir(dir: *mut DIR) -> c_int;
    uncounted;
    |real| {
        if !dir.is_null() {
            // SAFETY: an open stream per the contract.
            listing::closing(dir as usize, unsafe { fd_of(dir) });
        }
        real(dir)
    }
}
