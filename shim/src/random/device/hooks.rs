//! Reads and dups of sealed device pipes, exported: `read` fills the whole buffer (as the
//! device would), and a duplicated device pipe is one too. (Opens are in `crate::open`.)

use libc::{c_int, c_void, size_t, ssize_t};

use super::{is_device_fd, on_dup, read_full};
use crate::hook;

hook! {
    /// # Safety
    /// As `read(2)`.
    fn read(fd: c_int, buf: *mut c_void, len: size_t) -> ssize_t;
    caller = ra;
    |real| {
        if is_device_fd(fd) && !buf.is_null() {
            crate::core::census::count(seal_abi::Fid::ReadDevice, seal_abi::NO_DETAIL, ra);
            // SAFETY: forwarded contract.
            return unsafe { read_full(fd, buf as *mut u8, len) };
        }
        crate::causal::hooks::after_read(fd, real(fd, buf, len))
    }
}

hook! {
    /// # Safety
    /// As glibc's fortified `__read_chk` (`len <= buflen`, else it aborts).
    fn __read_chk(fd: c_int, buf: *mut c_void, len: size_t, buflen: size_t) -> ssize_t;
    caller = ra;
    |real| {
        if len <= buflen && is_device_fd(fd) && !buf.is_null() {
            crate::core::census::count(seal_abi::Fid::ReadDevice, seal_abi::NO_DETAIL, ra);
            // SAFETY: forwarded contract.
            return unsafe { read_full(fd, buf as *mut u8, len) };
        }
        crate::causal::hooks::after_read(fd, real(fd, buf, len, buflen))
    }
}

/// After a `dup` of `old` returned `r`: a new device pipe if `old` is one.
fn dup_result(old: c_int, r: c_int) -> c_int {
    if r >= 0 {
        on_dup(old, r);
    }
    r
}

hook! {
    /// # Safety
    /// As `dup2(2)`.
    fn dup2(old: c_int, new: c_int) -> c_int;
    uncounted;
    |real| {
        crate::files::hooks::replacing(old, new);
        crate::core::fd::forget(new);
        dup_result(old, real(old, new))
    }
}

hook! {
    /// # Safety
    /// As `dup3(2)`.
    fn dup3(old: c_int, new: c_int, fl: c_int) -> c_int;
    uncounted;
    |real| {
        crate::files::hooks::replacing(old, new);
        crate::core::fd::forget(new);
        dup_result(old, real(old, new, fl))
    }
}

hook! {
    /// # Safety
    /// As `dup(2)`.
    fn dup(old: c_int) -> c_int;
    uncounted;
    |real| dup_result(old, real(old))
}
