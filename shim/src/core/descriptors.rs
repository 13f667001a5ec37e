//! The one home of a descriptor's life as the program lives it: `read` (and glibc's fortified
//! `__read_chk`), `close`, `fclose`, `dup`, `dup2`, `dup3`. What a family does at each step it
//! registers in the root's tables ([`crate::FD_READ`], [`crate::FD_READ_DONE`],
//! [`crate::FD_CLOSING`], [`crate::FD_FCLOSING`], [`crate::FD_REPLACING`],
//! [`crate::FD_DUPED`], and [`crate::FD_FORGET`] through [`super::fd::forget`]); the hooks
//! name no family. The tables are consts: each hook compiles to the direct calls it made
//! when the hooks lived with their families (`files`, `random::device`).
//!
//! Writes, sends and receives stay in `causal::hooks`: only the causal family observes them.

use libc::{c_int, c_void, size_t, ssize_t, FILE};

use crate::hook;

/// A family that answers a read itself: the result, or `None` to read for real. Called
/// with the `read` hook's arguments (`ra` its caller).
///
/// # Safety
/// As `read(2)`: `buf` valid for `len` bytes of writes (or null).
pub type ReadAnswer = unsafe fn(fd: c_int, buf: *mut u8, len: usize, ra: u64) -> Option<isize>;

/// A read on `fd`: the first family that answers it ([`crate::FD_READ`], asked only when
/// `answerable`), else the real read with its result shown to [`crate::FD_READ_DONE`].
///
/// # Safety
/// As `read(2)`.
#[inline(always)]
unsafe fn read_with(
    (fd, buf, len, ra): (c_int, *mut c_void, size_t, u64),
    answerable: bool,
    real: impl FnOnce() -> ssize_t,
) -> ssize_t {
    if super::config::seccomp_strict() {
        return real();
    }
    if answerable {
        for answer in crate::FD_READ {
            // SAFETY: the hook's arguments, per its contract.
            if let Some(r) = unsafe { answer(fd, buf as *mut u8, len, ra) } {
                return r;
            }
        }
    }
    let mut r = real();
    for done in crate::FD_READ_DONE {
        r = done(fd, r);
    }
    r
}

hook! {
    /// # Safety
    /// As `read(2)`.
    fn read(fd: c_int, buf: *mut c_void, len: size_t) -> ssize_t;
    caller = ra;
    // SAFETY: forwarded contract.
    |real| unsafe { read_with((fd, buf, len, ra), true, || real(fd, buf, len)) }
}

hook! {
    /// # Safety
    /// As glibc's fortified `__read_chk` (`len <= buflen`, else it aborts).
    fn __read_chk(fd: c_int, buf: *mut c_void, len: size_t, buflen: size_t) -> ssize_t;
    caller = ra;
    // SAFETY: forwarded contract (glibc aborts when `len > buflen`: nobody answers that).
    |real| unsafe { read_with((fd, buf, len, ra), len <= buflen, || real(fd, buf, len, buflen)) }
}

hook! {
    /// # Safety
    /// As `close(2)`.
    fn close(fd: c_int) -> c_int;
    uncounted;
    |real| {
        for closing in crate::FD_CLOSING {
            closing(fd);
        }
        super::fd::forget(fd);
        real(fd)
    }
}

hook! {
    /// # Safety
    /// As `fclose(3)`.
    fn fclose(f: *mut FILE) -> c_int;
    uncounted;
    |real| {
        if !f.is_null() {
            for closing in crate::FD_FCLOSING {
                closing(f);
            }
            // SAFETY: a valid stream per the contract; fileno is not interposed.
            super::fd::forget(unsafe { libc::fileno(f) });
        }
        real(f)
    }
}

/// Before `dup2`/`dup3` replaces descriptor `new` with a copy of `old`.
#[inline(always)]
fn replacing(old: c_int, new: c_int) {
    for replacing in crate::FD_REPLACING {
        replacing(old, new);
    }
    super::fd::forget(new);
}

/// After a `dup` of `old` returned `r`.
#[inline(always)]
fn duped(old: c_int, r: c_int) -> c_int {
    if r >= 0 {
        for duped in crate::FD_DUPED {
            duped(old, r);
        }
    }
    r
}

hook! {
    /// # Safety
    /// As `dup2(2)`.
    fn dup2(old: c_int, new: c_int) -> c_int;
    uncounted;
    |real| {
        replacing(old, new);
        duped(old, real(old, new))
    }
}

hook! {
    /// # Safety
    /// As `dup3(2)`.
    fn dup3(old: c_int, new: c_int, fl: c_int) -> c_int;
    uncounted;
    |real| {
        replacing(old, new);
        duped(old, real(old, new, fl))
    }
}

hook! {
    /// # Safety
    /// As `dup(2)`.
    fn dup(old: c_int) -> c_int;
    uncounted;
    |real| duped(old, real(old))
}
