//! The open family, exported: each hook translates `/proc/<vpid>/…` paths (the pid family's
//! `translate_proc_path`), answers our device paths (see the parent module), and otherwise
//! calls the real function with the caller's arguments unchanged (errno untouched).

use seal_abi::Fid;

use super::{classify, open_sealed, Outcome, Target};
use crate::{caller, census, real, sys};

type OpenFn = unsafe extern "C" fn(*const libc::c_char, libc::c_int, libc::c_uint) -> libc::c_int;
type OpenatFn = unsafe extern "C" fn(
    libc::c_int,
    *const libc::c_char,
    libc::c_int,
    libc::c_uint,
) -> libc::c_int;
type Open2Fn = unsafe extern "C" fn(*const libc::c_char, libc::c_int) -> libc::c_int;
type Openat2Fn = unsafe extern "C" fn(libc::c_int, *const libc::c_char, libc::c_int) -> libc::c_int;
type FopenFn = unsafe extern "C" fn(*const libc::c_char, *const libc::c_char) -> *mut libc::FILE;
type FreopenFn = unsafe extern "C" fn(
    *const libc::c_char,
    *const libc::c_char,
    *mut libc::FILE,
) -> *mut libc::FILE;

use crate::sys::set_errno;

/// A path buffer for the pid family's `/proc/<vpid>` rewrite.
struct Path {
    buf: [u8; 4096],
}

/// Shared front half of every open hook: `Ok(fd)` when the path is ours and sealed, else the
/// path to hand to the real function (`Err`).
///
/// # Safety
/// `path` is null or a NUL-terminated string.
#[inline(always)]
unsafe fn front(
    path: *const libc::c_char,
    oflags: libc::c_int,
    ra: u64,
    scratch: &mut Path,
) -> Result<libc::c_int, *const libc::c_char> {
    if path.is_null() || crate::real::Reentry::inside() {
        return Err(path);
    }
    // SAFETY: per the contract.
    let bytes = unsafe { sys::cstr(path) };
    if let Some(target) = classify(bytes) {
        // The hostname files count as a host-name read, the rest as a device open.
        let fid = if matches!(target, Target::HostName { .. }) {
            Fid::Gethostname
        } else {
            Fid::OpenDevice
        };
        census::count(fid, target.detail(), ra);
        match open_sealed(target, oflags) {
            Outcome::Fd(fd) => return Ok(fd),
            Outcome::Err(e) => {
                set_errno(e);
                return Ok(-1);
            }
            Outcome::PassThrough => return Err(path),
        }
    }
    if crate::process::translate_proc_path(bytes, &mut scratch.buf) {
        return Err(scratch.buf.as_ptr() as *const libc::c_char);
    }
    Err(path)
}

macro_rules! open_hooks {
    ($($name:ident),*) => {$(
        /// # Safety
        /// As `open(2)`: `path` a NUL-terminated string; `mode` read only with `O_CREAT`/`O_TMPFILE`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            path: *const libc::c_char,
            oflags: libc::c_int,
            mode: libc::c_uint,
        ) -> libc::c_int {
            let ra = caller!();
            let mut scratch = Path { buf: [0; 4096] };
            // SAFETY: forwarded contract.
            match unsafe { front(path, oflags, ra, &mut scratch) } {
                Ok(fd) => fd,
                Err(p) => {
                    let real: OpenFn = real!($name: fn(*const libc::c_char, libc::c_int, libc::c_uint) -> libc::c_int);
                    // SAFETY: forwarded.
                    unsafe { real(p, oflags, mode) }
                }
            }
        }
    )*};
}

macro_rules! openat_hooks {
    ($($name:ident),*) => {$(
        /// # Safety
        /// As `openat(2)`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            dirfd: libc::c_int,
            path: *const libc::c_char,
            oflags: libc::c_int,
            mode: libc::c_uint,
        ) -> libc::c_int {
            let ra = caller!();
            let mut scratch = Path { buf: [0; 4096] };
            // SAFETY: forwarded contract.
            match unsafe { front(path, oflags, ra, &mut scratch) } {
                Ok(fd) => fd,
                Err(p) => {
                    let real: OpenatFn = real!($name: fn(libc::c_int, *const libc::c_char, libc::c_int, libc::c_uint) -> libc::c_int);
                    // SAFETY: forwarded.
                    unsafe { real(dirfd, p, oflags, mode) }
                }
            }
        }
    )*};
}

macro_rules! open2_hooks {
    ($($name:ident),*) => {$(
        /// # Safety
        /// As glibc's fortified `__open_2`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const libc::c_char, oflags: libc::c_int) -> libc::c_int {
            let ra = caller!();
            let mut scratch = Path { buf: [0; 4096] };
            // SAFETY: forwarded contract.
            match unsafe { front(path, oflags, ra, &mut scratch) } {
                Ok(fd) => fd,
                Err(p) => {
                    let real: Open2Fn = real!($name: fn(*const libc::c_char, libc::c_int) -> libc::c_int);
                    // SAFETY: forwarded.
                    unsafe { real(p, oflags) }
                }
            }
        }
    )*};
}

macro_rules! openat2_hooks {
    ($($name:ident),*) => {$(
        /// # Safety
        /// As glibc's fortified `__openat_2`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            dirfd: libc::c_int,
            path: *const libc::c_char,
            oflags: libc::c_int,
        ) -> libc::c_int {
            let ra = caller!();
            let mut scratch = Path { buf: [0; 4096] };
            // SAFETY: forwarded contract.
            match unsafe { front(path, oflags, ra, &mut scratch) } {
                Ok(fd) => fd,
                Err(p) => {
                    let real: Openat2Fn = real!($name: fn(libc::c_int, *const libc::c_char, libc::c_int) -> libc::c_int);
                    // SAFETY: forwarded.
                    unsafe { real(dirfd, p, oflags) }
                }
            }
        }
    )*};
}

open_hooks!(open, open64, __open, __open64);
openat_hooks!(openat, openat64);
open2_hooks!(__open_2, __open64_2);
openat2_hooks!(__openat_2, __openat64_2);

/// Open flags for an fopen-style `mode`, or `None` when the mode writes (those pass through).
///
/// # Safety
/// `mode` is a NUL-terminated string.
unsafe fn read_only_mode(mode: *const libc::c_char) -> Option<libc::c_int> {
    if mode.is_null() {
        return None;
    }
    // SAFETY: per the contract.
    let m = unsafe { sys::cstr(mode) };
    if m.first() != Some(&b'r') || m.contains(&b'+') {
        return None;
    }
    let mut fl = libc::O_RDONLY;
    if m.contains(&b'e') {
        fl |= libc::O_CLOEXEC;
    }
    Some(fl)
}

macro_rules! fopen_hooks {
    ($($name:ident),*) => {$(
        /// # Safety
        /// As `fopen(3)`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            path: *const libc::c_char,
            mode: *const libc::c_char,
        ) -> *mut libc::FILE {
            let ra = caller!();
            let mut scratch = Path { buf: [0; 4096] };
            // A writing mode is not ours: still rewrite /proc/<vpid> paths.
            // SAFETY: forwarded contract.
            let fl = unsafe { read_only_mode(mode) }.unwrap_or(libc::O_RDWR | libc::O_PATH);
            // SAFETY: forwarded contract.
            match unsafe { front(path, fl, ra, &mut scratch) } {
                Ok(-1) => core::ptr::null_mut(),
                Ok(fd) => {
                    // SAFETY: fd is ours; fdopen is not interposed by the shim.
                    let f = unsafe { libc::fdopen(fd, mode) };
                    if f.is_null() {
                        // SAFETY: errno is thread-local.
                        let e = unsafe { *libc::__errno_location() };
                        sys::close(fd);
                        set_errno(e);
                    }
                    f
                }
                Err(p) => {
                    let real: FopenFn = real!($name: fn(*const libc::c_char, *const libc::c_char) -> *mut libc::FILE);
                    // SAFETY: forwarded.
                    unsafe { real(p, mode) }
                }
            }
        }
    )*};
}

macro_rules! freopen_hooks {
    ($($name:ident),*) => {$(
        /// # Safety
        /// As `freopen(3)`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            path: *const libc::c_char,
            mode: *const libc::c_char,
            stream: *mut libc::FILE,
        ) -> *mut libc::FILE {
            let ra = caller!();
            let real: FreopenFn = real!($name: fn(*const libc::c_char, *const libc::c_char, *mut libc::FILE) -> *mut libc::FILE);
            let mut scratch = Path { buf: [0; 4096] };
            // SAFETY: forwarded contract.
            let fl = unsafe { read_only_mode(mode) }.unwrap_or(libc::O_RDWR | libc::O_PATH);
            // SAFETY: forwarded contract.
            match unsafe { front(path, fl, ra, &mut scratch) } {
                Ok(-1) => {
                    // freopen closes the stream even when the new open fails.
                    // SAFETY: the caller's stream.
                    unsafe { libc::fclose(stream) };
                    core::ptr::null_mut()
                }
                Ok(fd) => {
                    // Reopen the stream on /dev/null (libc picks its fd), then put our
                    // descriptor under that fd number.
                    // SAFETY: forwarded stream; a constant path.
                    let f = unsafe { real(b"/dev/null\0".as_ptr() as *const libc::c_char, mode, stream) };
                    if f.is_null() {
                        sys::close(fd);
                        return f;
                    }
                    // SAFETY: fileno is not interposed; dup3 on descriptors we own.
                    unsafe {
                        let target = libc::fileno(f);
                        let cl = if fl & libc::O_CLOEXEC != 0 { libc::O_CLOEXEC } else { 0 };
                        sys::syscall3(libc::SYS_dup3, fd as i64, target as i64, cl as i64);
                    }
                    sys::close(fd);
                    f
                }
                // SAFETY: forwarded.
                Err(p) => unsafe { real(p, mode, stream) },
            }
        }
    )*};
}

fopen_hooks!(fopen, fopen64);
freopen_hooks!(freopen, freopen64);

/// # Safety
/// As `read(2)`.
#[no_mangle]
pub unsafe extern "C" fn read(
    fd: libc::c_int,
    buf: *mut libc::c_void,
    len: libc::size_t,
) -> libc::ssize_t {
    let ra = caller!();
    if super::is_device_fd(fd) && !buf.is_null() {
        census::count(Fid::ReadDevice, seal_abi::NO_DETAIL, ra);
        // SAFETY: forwarded contract.
        return unsafe { super::read_full(fd, buf as *mut u8, len) };
    }
    let real = real!(read: fn(libc::c_int, *mut libc::c_void, libc::size_t) -> libc::ssize_t);
    // SAFETY: forwarded.
    unsafe { real(fd, buf, len) }
}

/// # Safety
/// As glibc's fortified `__read_chk` (`len <= buflen`, else it aborts).
#[no_mangle]
pub unsafe extern "C" fn __read_chk(
    fd: libc::c_int,
    buf: *mut libc::c_void,
    len: libc::size_t,
    buflen: libc::size_t,
) -> libc::ssize_t {
    let ra = caller!();
    if len <= buflen && super::is_device_fd(fd) && !buf.is_null() {
        census::count(Fid::ReadDevice, seal_abi::NO_DETAIL, ra);
        // SAFETY: forwarded contract.
        return unsafe { super::read_full(fd, buf as *mut u8, len) };
    }
    let real = real!(__read_chk: fn(libc::c_int, *mut libc::c_void, libc::size_t, libc::size_t) -> libc::ssize_t);
    // SAFETY: forwarded.
    unsafe { real(fd, buf, len, buflen) }
}

/// # Safety
/// As `dup2(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup2(old: libc::c_int, new: libc::c_int) -> libc::c_int {
    let real = real!(dup2: fn(libc::c_int, libc::c_int) -> libc::c_int);
    // SAFETY: forwarded.
    let r = unsafe { real(old, new) };
    if r >= 0 {
        super::on_dup(old, r);
    }
    r
}

/// # Safety
/// As `dup3(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup3(old: libc::c_int, new: libc::c_int, fl: libc::c_int) -> libc::c_int {
    let real = real!(dup3: fn(libc::c_int, libc::c_int, libc::c_int) -> libc::c_int);
    // SAFETY: forwarded.
    let r = unsafe { real(old, new, fl) };
    if r >= 0 {
        super::on_dup(old, r);
    }
    r
}

/// # Safety
/// As `dup(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup(old: libc::c_int) -> libc::c_int {
    let real = real!(dup: fn(libc::c_int) -> libc::c_int);
    // SAFETY: forwarded.
    let r = unsafe { real(old) };
    if r >= 0 {
        super::on_dup(old, r);
    }
    r
}
