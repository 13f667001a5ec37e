//! The directory-listing hooks, exported (the logic is in the parent module): `readdir`,
//! `readdir64`, `readdir_r`, `readdir64_r`, `getdents64` and `closedir`. Each calls the real
//! function and passes its entries through [`listing::verdict`]: kept, renamed to a virtual
//! pid, or skipped (the next entry is read in its place).

use libc::{c_int, c_void, dirent64, size_t, ssize_t, DIR};
use seal_abi::Fid;

use super::{self as listing, Verdict};
use crate::{hook, sys};

/// The name of a record (`d_name`, up to its NUL).
///
/// # Safety
/// `e` is a valid `dirent64`.
#[inline(always)]
unsafe fn name<'a>(e: *const dirent64) -> &'a [u8] {
    // SAFETY: d_name is NUL-terminated within the record.
    unsafe { sys::cstr((*e).d_name.as_ptr()) }
}

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
        if e.is_null() {
            return e;
        }
        // SAFETY: e is the record readdir just returned for dir.
        match listing::verdict(unsafe { name(e) }, || unsafe { fd_of(dir) }, Fid::ReaddirProc, ra) {
            Verdict::Keep => return e,
            Verdict::Hide => continue,
            Verdict::Rename(v) => {
                // SAFETY: as above.
                let r = unsafe { listing::renamed(dir as usize, e as *mut u8, v) };
                if !r.is_null() {
                    return r as *mut dirent64;
                }
            }
        }
    }
}

hook! {
    /// # Safety
    /// As `readdir_r(3)`: `entry` a whole `struct dirent`.
    fn readdir_r | readdir64_r(dir: *mut DIR, entry: *mut dirent64, result: *mut *mut dirent64) -> c_int;
    caller = ra;
    |real| loop {
        let r = real(dir, entry, result);
        // SAFETY: result is a valid out-pointer per the contract.
        let e = if r == 0 && !result.is_null() { unsafe { *result } } else { core::ptr::null_mut() };
        if e.is_null() {
            return r;
        }
        // SAFETY: e is the caller's entry, filled by readdir_r.
        match listing::verdict(unsafe { name(e) }, || unsafe { fd_of(dir) }, Fid::ReaddirProc, ra) {
            Verdict::Keep => return r,
            Verdict::Hide => continue,
            Verdict::Rename(v) => {
                // SAFETY: e is the caller's whole struct dirent64 per the contract.
                unsafe { listing::rename_entry(e as *mut u8, v) };
                return r;
            }
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
            listing::forget(unsafe { fd_of(dir) });
            listing::release(dir as usize);
        }
        real(dir)
    }
}
