//! `/proc/<vpid>/…` through the path calls that are not `open` (the open family lives in
//! `crate::open`; the stat family in `crate::files`, which calls [`with_proc_path`] and, for
//! paths relative to a directory descriptor, [`with_proc_path_at`]): `[ -d /proc/$pid ]`,
//! `ls /proc/$$/fd`, `ls -l /proc` (whose `self` link names the caller by virtual pid),
//! `readlink /proc/$$/exe`, `find /proc`. Only paths that start with
//! `/proc/<digit>` (or a digit, relative to a listed `/proc` or task directory) are looked at
//! (and counted).

use libc::{c_char, c_int, size_t, ssize_t};
use seal_abi::{Fid, NO_DETAIL};

use crate::core::{census, sys};
use crate::hook;
use crate::process::translate_proc_path;

/// Calls `f` with `path`, or with the real-pid path when it names a virtual pid of the run.
///
/// # Safety
/// `path` is null or a C string.
#[inline(always)]
pub(crate) unsafe fn with_proc_path<R>(
    path: *const c_char,
    ra: u64,
    f: impl FnOnce(*const c_char) -> R,
) -> R {
    // SAFETY: path is a C string; we read at most 7 bytes, stopping at its NUL.
    let proc_pid = !path.is_null()
        && unsafe {
            let p = path as *const u8;
            (0..6).all(|i| *p.add(i) == b"/proc/"[i]) && (*p.add(6)).is_ascii_digit()
        };
    if !proc_pid {
        return f(path);
    }
    census::count(Fid::ProcPath, NO_DETAIL, ra);
    let mut out = [0u8; 4096];
    // SAFETY: path is a C string.
    if translate_proc_path(unsafe { sys::cstr(path) }, &mut out) {
        return f(out.as_ptr() as *const c_char);
    }
    f(path)
}

/// [`with_proc_path`] for `path` relative to `dirfd`: a number under a listed `/proc` or task
/// directory (a name its listing showed) is made the absolute path it names first
/// (`crate::open::listing::absolute_at`), so `find /proc` reaches the run's processes.
///
/// # Safety
/// `path` is null or a C string.
#[inline(always)]
pub(crate) unsafe fn with_proc_path_at<R>(
    dirfd: c_int,
    path: *const c_char,
    ra: u64,
    f: impl FnOnce(*const c_char) -> R,
) -> R {
    // SAFETY: a non-null path has at least its NUL.
    if dirfd >= 0 && !path.is_null() && unsafe { *path as u8 }.is_ascii_digit() {
        // SAFETY: forwarded.
        return unsafe { with_listed_path(dirfd, path, ra, f) };
    }
    // SAFETY: forwarded.
    unsafe { with_proc_path(path, ra, f) }
}

/// The slow half of [`with_proc_path_at`], with its buffer.
///
/// # Safety
/// `path` is a C string.
#[cold]
#[inline(never)]
unsafe fn with_listed_path<R>(
    dirfd: c_int,
    path: *const c_char,
    ra: u64,
    f: impl FnOnce(*const c_char) -> R,
) -> R {
    let mut abs = [0u8; 4096];
    // SAFETY: per the contract.
    if crate::open::listing::absolute_at(dirfd, unsafe { sys::cstr(path) }, &mut abs) {
        // SAFETY: abs is NUL-terminated.
        return unsafe { with_proc_path(abs.as_ptr() as *const c_char, ra, f) };
    }
    f(path)
}

hook! {
    /// # Safety
    /// As `access(2)`.
    fn access(path: *const c_char, mode: c_int) -> c_int;
    caller = ra;
    // SAFETY: forwarded, with the path translated.
    |real| unsafe { with_proc_path(path, ra, |p| real(p, mode)) }
}

hook! {
    /// # Safety
    /// As `readlink(2)`.
    fn readlink(path: *const c_char, buf: *mut c_char, len: size_t) -> ssize_t;
    caller = ra;
    // SAFETY: forwarded, with the path translated; `/proc/self` answered with virtual numbers.
    |real| unsafe {
        let n = with_proc_path(path, ra, |p| real(p, buf, len));
        crate::open::listing::self_link(path, buf as *mut u8, len, n)
    }
}

hook! {
    /// # Safety
    /// As `opendir(3)`.
    fn opendir(path: *const c_char) -> *mut libc::DIR;
    caller = ra;
    // SAFETY: forwarded, with the path translated.
    |real| unsafe { with_proc_path(path, ra, real) }
}

hook! {
    /// # Safety
    /// As `chdir(2)`.
    fn chdir(path: *const c_char) -> c_int;
    caller = ra;
    // SAFETY: forwarded, with the path translated.
    |real| unsafe { with_proc_path(path, ra, real) }
}

hook! {
    /// # Safety
    /// As `readlinkat(2)`.
    fn readlinkat(dirfd: c_int, path: *const c_char, buf: *mut c_char, len: size_t) -> ssize_t;
    caller = ra;
    // SAFETY: forwarded, with the path translated; `/proc/self` answered with virtual numbers.
    |real| unsafe {
        let n = with_proc_path_at(dirfd, path, ra, |p| real(dirfd, p, buf, len));
        crate::open::listing::self_link(path, buf as *mut u8, len, n)
    }
}

hook! {
    /// # Safety
    /// As `getxattr(2)` and `lgetxattr(2)` (`ls -l` asks for a file's security label).
    fn getxattr | lgetxattr(path: *const c_char, name: *const c_char, value: *mut libc::c_void, size: size_t) -> ssize_t;
    caller = ra;
    // SAFETY: forwarded, with the path translated.
    |real| unsafe { with_proc_path(path, ra, |p| real(p, name, value, size)) }
}

hook! {
    /// # Safety
    /// As `listxattr(2)` and `llistxattr(2)` (`ls -l` looks for ACLs).
    fn listxattr | llistxattr(path: *const c_char, list: *mut c_char, size: size_t) -> ssize_t;
    caller = ra;
    // SAFETY: forwarded, with the path translated.
    |real| unsafe { with_proc_path(path, ra, |p| real(p, list, size)) }
}
