//! The directory-listing hooks, exported (the logic is in the parent module): `readdir`,
//! `readdir64`, `readdir_r`, `readdir64_r`, `getdents64` and `closedir`. A directory family
//! `machine` sorts is served from its snapshot (`machine::dirorder`); any other, each calls
//! the real function and hands what it read to the parent module, which passes it on, skips
//! it, or returns the listing's numbers in virtual pid order instead.

use libc::{c_int, c_void, dirent64, size_t, ssize_t, DIR};
use seal_abi::Fid;

use super::{self as listing, Step, DIRENT_SIZE};
use crate::core::sys;
use crate::hook;
use crate::machine::dirorder::{self, Next};

/// `readdir(dir)` through `real`, for a snapshot: a record, null at the end, or the errno.
pub fn read_one(real: &dyn Fn() -> *mut dirent64) -> Result<*mut u8, i32> {
    sys::set_errno(0);
    let e = real();
    match sys::errno() {
        0 => Ok(e as *mut u8),
        er if e.is_null() => Err(er),
        _ => Ok(e as *mut u8),
    }
}

/// `readdir(dir)` sorted (the `readdir` hook without its count, for `scandir`): `Some` with
/// the record (null at the end, errno as `readdir` leaves it), `None` for the real stream.
///
/// # Safety
/// `dir` is an open stream.
pub unsafe fn readdir_sorted(
    dir: *mut DIR,
    count: dirorder::Count,
    real: &dyn Fn() -> *mut dirent64,
) -> Option<*mut dirent64> {
    let saved = sys::errno();
    // SAFETY: dir is the caller's open stream.
    let fd = || unsafe { fd_of(dir) };
    let r = match dirorder::next(dir as usize, &fd, count, &mut || read_one(real))? {
        Next::Rec(p) => p as *mut dirent64,
        Next::End(e) => {
            sys::set_errno(if e != 0 { e } else { saved });
            core::ptr::null_mut()
        }
    };
    if !r.is_null() {
        sys::set_errno(saved);
    }
    Some(r)
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
    |real| {
        // SAFETY: dir is the caller's open stream.
        if let Some(p) = unsafe { readdir_sorted(dir, Some((Fid::Readdir, ra)), &|| real(dir)) } {
            return p;
        }
        loop {
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
}

hook! {
    /// # Safety
    /// As `readdir_r(3)`: `entry` a whole `struct dirent`, `result` a valid out-pointer.
    fn readdir_r | readdir64_r(dir: *mut DIR, entry: *mut dirent64, result: *mut *mut dirent64) -> c_int;
    caller = ra;
    |real| {
        // SAFETY: dir is the caller's open stream.
        let fd = || unsafe { fd_of(dir) };
        let mut spare = [0u64; DIRENT_SIZE / 8];
        let mut read = || {
            let mut got: *mut dirent64 = core::ptr::null_mut();
            match real(dir, spare.as_mut_ptr() as *mut dirent64, &mut got) {
                0 => Ok(got as *mut u8),
                e => Err(e),
            }
        };
        if !result.is_null() && !entry.is_null() {
            match dirorder::next(dir as usize, &fd, Some((Fid::ReaddirR, ra)), &mut read) {
                Some(Next::Rec(p)) => {
                    let len = u16::from_ne_bytes(
                        // SAFETY: a record of the snapshot: its header first.
                        unsafe { [*p.add(16), *p.add(17)] },
                    ) as usize;
                    // SAFETY: entry is a whole struct dirent per the contract; the record is
                    // at most that long.
                    unsafe {
                        core::ptr::copy_nonoverlapping(p, entry as *mut u8, len.min(DIRENT_SIZE));
                        *result = entry;
                    }
                    return 0;
                }
                Some(Next::End(e)) => {
                    // SAFETY: result is a valid out-pointer per the contract.
                    unsafe { *result = core::ptr::null_mut() };
                    return e;
                }
                None => {}
            }
        }
        loop {
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
}

hook! {
    /// # Safety
    /// As `getdents64(2)`.
    fn getdents64(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t;
    caller = ra;
    |real| {
        let call = |b: *mut u8, c: usize| real(fd, b as *mut c_void, c);
        // SAFETY: forwarded contract.
        if let Some(r) = unsafe { dirorder::getdents(fd, buf as *mut u8, count, Some((Fid::Getdents, ra)), &call) } {
            return r;
        }
        // SAFETY: forwarded contract.
        unsafe { listing::getdents(fd, buf as *mut u8, count, ra, call) }
    }
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
