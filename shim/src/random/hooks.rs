//! Exported randomness entry points: answered from the thread's stream when `random` is
//! sealed, else by libc.

use libc::{c_int, c_uint, c_void, size_t, ssize_t};
use seal_abi::{flags, Fid, NO_DETAIL};

use super::{fill, uniform, with_stream};
use crate::core::{census, config, sys::set_errno};
use crate::{hook, real};

hook! {
    /// # Safety
    /// As `getrandom(2)`: `buf` valid for `len` bytes.
    fn getrandom(buf: *mut c_void, len: size_t, fl: c_uint) -> ssize_t;
    caller = ra;
    || {
        use crate::clock::fast::SITE_GETRANDOM;
        use crate::core::config::slow::RANDOM_READ;
        // The common draw: no flags, a small buffer past the first page, nothing unusual
        // (`config::SLOW`), a call site this thread remembers: counted by one increment,
        // drawn from the thread's stream. Anything else is the general path below.
        // SAFETY: forwarded contract.
        let general = move || unsafe { getrandom_general(buf, len, fl, ra) };
        if fl != 0
            || len.wrapping_sub(1) >= crate::random::FAST_MAX
            || (buf as usize) < 4096
            || !config::fast(RANDOM_READ)
        {
            return general();
        }
        let hot = crate::core::thread::hot();
        let (remembered, counter) = hot.entry::<SITE_GETRANDOM>();
        if remembered != ra {
            core::hint::cold_path();
            return learn_and_draw(buf, len, ra);
        }
        // SAFETY: the entry matched its caller.
    unsafe { census::bump_hot(counter) };
        // SAFETY: caller guarantees buf is writable for len (> 0) bytes.
        unsafe { crate::random::draw_hot(hot, buf as *mut u8, len) }
    }
}

/// The general `getrandom`, out of line so the hook's fast path stays small.
///
/// # Safety
/// As `getrandom(2)`.
#[inline(never)]
unsafe fn getrandom_general(buf: *mut c_void, len: size_t, fl: c_uint, ra: u64) -> ssize_t {
    // SAFETY: forwarded contract.
    unsafe { getrandom_impl(buf, len, fl, Fid::Getrandom, ra) }
}

/// The fast path's draw from a call site this thread does not remember yet: counted (and
/// remembered), then drawn as the general path draws.
#[cold]
#[inline(never)]
fn learn_and_draw(buf: *mut c_void, len: size_t, ra: u64) -> ssize_t {
    use crate::core::config::slow::RANDOM_READ;
    census::learn(
        crate::clock::fast::SITE_GETRANDOM,
        Fid::Getrandom,
        NO_DETAIL,
        ra,
        RANDOM_READ,
    );
    // SAFETY: the hook checked buf (past the first page, writable for len > 0 bytes by the
    // caller's contract).
    unsafe { fill_raw(buf, len) };
    len as ssize_t
}

/// `GRND_NONBLOCK | GRND_RANDOM | GRND_INSECURE`: the flags getrandom(2) knows.
const KNOWN_FLAGS: c_uint = 0x1 | 0x2 | 0x4;
/// `GRND_RANDOM | GRND_INSECURE`, which the kernel refuses together.
const BOTH_POOLS: c_uint = 0x2 | 0x4;

/// Shared with `syscall(SYS_getrandom, …)`.
///
/// # Safety
/// As `getrandom(2)`.
#[inline(always)]
pub unsafe fn getrandom_impl(
    buf: *mut c_void,
    len: size_t,
    fl: c_uint,
    fid: Fid,
    ra: u64,
) -> ssize_t {
    census::count(fid, NO_DETAIL, ra);
    // What the kernel refuses is refused by the kernel: flags it does not know, or
    // GRND_RANDOM with GRND_INSECURE (EINVAL), and a buffer in the never-mapped first page
    // (EFAULT) go to the real call, which fills nothing.
    let valid = fl & !KNOWN_FLAGS == 0 && fl & BOTH_POOLS != BOTH_POOLS;
    let plausible = len == 0 || buf as usize >= 4096;
    if config::sealed(flags::RANDOM) && valid && plausible {
        // SAFETY: caller guarantees buf is writable for len bytes.
        unsafe { fill_raw(buf, len) };
        return len as ssize_t;
    }
    let real = real!(getrandom: fn(*mut c_void, size_t, c_uint) -> ssize_t);
    // SAFETY: forwarded.
    unsafe { real(buf, len, fl) }
}

/// Fills `len` bytes at `buf` from the thread's stream (nothing when `len` is 0).
///
/// # Safety
/// `buf` is writable for `len` bytes (or `len` is 0).
#[inline(always)]
unsafe fn fill_raw(buf: *mut c_void, len: size_t) {
    if len > 0 {
        // SAFETY: per the contract.
        fill(unsafe { core::slice::from_raw_parts_mut(buf as *mut u8, len) });
    }
}

hook! {
    /// # Safety
    /// As `getentropy(3)`.
    fn getentropy(buf: *mut c_void, len: size_t) -> c_int;
    fid = Getentropy;
    |real| {
        if !config::sealed(flags::RANDOM) {
            return real(buf, len);
        }
        if len > 256 {
            set_errno(libc::EIO);
            return -1;
        }
        if len > 0 && buf.is_null() {
            set_errno(libc::EFAULT);
            return -1;
        }
        // SAFETY: caller guarantees buf is writable for len bytes.
        unsafe { fill_raw(buf, len) };
        0
    }
}

hook! {
    /// # Safety
    /// As `arc4random(3)`.
    fn arc4random() -> u32;
    fid = Arc4random;
    |real| if config::sealed(flags::RANDOM) {
        with_stream(|s| s.next_u32())
    } else {
        real()
    }
}

hook! {
    /// # Safety
    /// As `arc4random_buf(3)`.
    fn arc4random_buf(buf: *mut c_void, len: size_t) -> ();
    fid = Arc4randomBuf;
    |real| if !config::sealed(flags::RANDOM) {
        real(buf, len)
    } else if !buf.is_null() {
        // SAFETY: caller guarantees buf is writable for len bytes.
        unsafe { fill_raw(buf, len) }
    }
}

hook! {
    /// # Safety
    /// As `arc4random_uniform(3)`.
    fn arc4random_uniform(upper: u32) -> u32;
    fid = Arc4randomUniform;
    |real| if config::sealed(flags::RANDOM) {
        with_stream(|s| uniform(s, upper))
    } else {
        real(upper)
    }
}

/// `syscall(SYS_getrandom, …)`: the hook's logic, counted as `SysGetrandom`
/// (`crate::syscall`'s route table).
///
/// # Safety
/// As `syscall(2)` for `SYS_getrandom` with `a`.
pub unsafe fn sys_getrandom(
    _n: libc::c_long,
    a: [libc::c_long; 6],
    ra: u64,
) -> Option<libc::c_long> {
    // SAFETY: the caller's arguments, forwarded with the same meaning.
    Some(unsafe {
        getrandom_impl(
            a[0] as *mut libc::c_void,
            a[1] as libc::size_t,
            a[2] as libc::c_uint,
            Fid::SysGetrandom,
            ra,
        )
    } as libc::c_long)
}
