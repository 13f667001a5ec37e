//! Exported randomness entry points: answered from the thread's stream when `random` is
//! sealed, else by libc.

use seal_abi::{flags, Fid, NO_DETAIL};

use super::{fill, uniform, with_stream};
use crate::{caller, census, config, real};

/// # Safety
/// As `getrandom(2)`: `buf` valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn getrandom(
    buf: *mut libc::c_void,
    len: libc::size_t,
    fl: libc::c_uint,
) -> libc::ssize_t {
    let ra = caller!();
    // SAFETY: forwarded contract.
    unsafe { getrandom_impl(buf, len, fl, Fid::Getrandom, ra) }
}

/// Shared with `syscall(SYS_getrandom, …)`.
///
/// # Safety
/// As `getrandom(2)`.
#[inline(always)]
pub unsafe fn getrandom_impl(
    buf: *mut libc::c_void,
    len: libc::size_t,
    fl: libc::c_uint,
    fid: Fid,
    ra: u64,
) -> libc::ssize_t {
    census::count(fid, NO_DETAIL, ra);
    if config::sealed(flags::RANDOM) && (len == 0 || !buf.is_null()) {
        if len > 0 {
            // SAFETY: caller guarantees buf is writable for len bytes.
            fill(unsafe { core::slice::from_raw_parts_mut(buf as *mut u8, len) });
        }
        return len as libc::ssize_t;
    }
    let real = real!(getrandom: fn(*mut libc::c_void, libc::size_t, libc::c_uint) -> libc::ssize_t);
    // SAFETY: forwarded.
    unsafe { real(buf, len, fl) }
}

/// # Safety
/// As `getentropy(3)`.
#[no_mangle]
pub unsafe extern "C" fn getentropy(buf: *mut libc::c_void, len: libc::size_t) -> libc::c_int {
    let ra = caller!();
    census::count(Fid::Getentropy, NO_DETAIL, ra);
    if config::sealed(flags::RANDOM) {
        if len > 256 {
            // SAFETY: errno is thread-local.
            unsafe { *libc::__errno_location() = libc::EIO };
            return -1;
        }
        if len > 0 {
            if buf.is_null() {
                // SAFETY: errno is thread-local.
                unsafe { *libc::__errno_location() = libc::EFAULT };
                return -1;
            }
            // SAFETY: caller guarantees buf is writable for len bytes.
            fill(unsafe { core::slice::from_raw_parts_mut(buf as *mut u8, len) });
        }
        return 0;
    }
    let real = real!(getentropy: fn(*mut libc::c_void, libc::size_t) -> libc::c_int);
    // SAFETY: forwarded.
    unsafe { real(buf, len) }
}

/// # Safety
/// As `arc4random(3)`.
#[no_mangle]
pub unsafe extern "C" fn arc4random() -> u32 {
    let ra = caller!();
    census::count(Fid::Arc4random, NO_DETAIL, ra);
    if config::sealed(flags::RANDOM) {
        return with_stream(|s| s.next_u32());
    }
    let real = real!(arc4random: fn() -> u32);
    // SAFETY: no arguments.
    unsafe { real() }
}

/// # Safety
/// As `arc4random_buf(3)`.
#[no_mangle]
pub unsafe extern "C" fn arc4random_buf(buf: *mut libc::c_void, len: libc::size_t) {
    let ra = caller!();
    census::count(Fid::Arc4randomBuf, NO_DETAIL, ra);
    if config::sealed(flags::RANDOM) {
        if len > 0 && !buf.is_null() {
            // SAFETY: caller guarantees buf is writable for len bytes.
            fill(unsafe { core::slice::from_raw_parts_mut(buf as *mut u8, len) });
        }
        return;
    }
    let real = real!(arc4random_buf: fn(*mut libc::c_void, libc::size_t) -> ());
    // SAFETY: forwarded.
    unsafe { real(buf, len) }
}

/// # Safety
/// As `arc4random_uniform(3)`.
#[no_mangle]
pub unsafe extern "C" fn arc4random_uniform(upper: u32) -> u32 {
    let ra = caller!();
    census::count(Fid::Arc4randomUniform, NO_DETAIL, ra);
    if config::sealed(flags::RANDOM) {
        return with_stream(|s| uniform(s, upper));
    }
    let real = real!(arc4random_uniform: fn(u32) -> u32);
    // SAFETY: plain integer.
    unsafe { real(upper) }
}
