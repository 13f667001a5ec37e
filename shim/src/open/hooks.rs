//! The open family, exported: each hook answers our paths (see the parent module), translates
//! `/proc/<vpid>/…` paths (the pid family's `translate_proc_path`) and, for `openat`, names a
//! listing of `/proc` showed relative to its directory (`listing::absolute_at`), and otherwise
//! calls the real function with the caller's arguments unchanged (errno untouched).

use libc::{c_char, c_int, c_uint, FILE};
use seal_abi::Fid;

use super::{classify, open_sealed, read_only_mode, Outcome, Target};
use crate::core::census;
use crate::core::sys::{self, set_errno};
use crate::hook;

/// A path buffer for the pid family's `/proc/<vpid>` rewrite, and one for a relative path
/// made absolute (`super::relative_sealed`), relative to `dirfd`.
struct Path {
    buf: [u8; 4096],
    rel: [u8; 256],
    dirfd: c_int,
}

impl Path {
    fn at(dirfd: c_int) -> Path {
        Path {
            buf: [0; 4096],
            rel: [0; 256],
            dirfd,
        }
    }
}

/// Shared front half of every open hook: `Ok(fd)` when the path is ours and sealed, else the
/// path to hand to the real function (`Err`).
///
/// # Safety
/// `path` is null or a NUL-terminated string.
#[inline(always)]
unsafe fn front(
    path: *const c_char,
    oflags: c_int,
    ra: u64,
    scratch: &mut Path,
) -> Result<c_int, *const c_char> {
    if path.is_null() || crate::core::real::Reentry::inside() {
        return Err(path);
    }
    // SAFETY: per the contract.
    let mut bytes = unsafe { sys::cstr(path) };
    let mut path = path;
    // A relative path naming a sealed file, made absolute (in the caller's scratch, so that
    // what is handed back lives on).
    if bytes.first().is_some_and(|&c| c != b'/')
        && super::relative_sealed(scratch.dirfd, bytes, &mut scratch.rel)
    {
        path = scratch.rel.as_ptr() as *const c_char;
        // SAFETY: relative_sealed NUL-terminated it.
        bytes = unsafe { sys::cstr(path) };
    }
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
    match super::procfs::open(bytes, oflags, ra) {
        Some(Outcome::Fd(fd)) => return Ok(fd),
        Some(Outcome::Err(e)) => {
            set_errno(e);
            return Ok(-1);
        }
        Some(Outcome::PassThrough) | None => {}
    }
    match crate::machine::files::open(bytes, oflags, ra) {
        Some(Outcome::Fd(fd)) => return Ok(fd),
        Some(Outcome::Err(e)) => {
            set_errno(e);
            return Ok(-1);
        }
        Some(Outcome::PassThrough) | None => {}
    }
    if crate::process::translate_proc_path(bytes, &mut scratch.buf) {
        return Err(scratch.buf.as_ptr() as *const c_char);
    }
    Err(path)
}

/// Is `path` relative to a directory descriptor and led by a number (a name a listing of
/// `/proc` or of a task directory shows)?
///
/// # Safety
/// `path` is null or a NUL-terminated string.
#[inline(always)]
unsafe fn relative_number(dirfd: c_int, path: *const c_char) -> bool {
    // SAFETY: a non-null path has at least its NUL.
    dirfd >= 0 && !path.is_null() && unsafe { *path as u8 }.is_ascii_digit()
}

/// [`front`] for a path relative to `dirfd`: a number under a listed `/proc` or task directory
/// becomes the absolute path it names first (`listing::absolute_at`). `call` makes the real
/// call, here, while the path it is given lives.
///
/// # Safety
/// `path` is a NUL-terminated string.
#[cold]
#[inline(never)]
unsafe fn front_at(
    dirfd: c_int,
    path: *const c_char,
    oflags: c_int,
    ra: u64,
    call: impl FnOnce(*const c_char) -> c_int,
) -> c_int {
    let mut abs = [0u8; 4096];
    // SAFETY: per the contract.
    if !super::listing::absolute_at(dirfd, unsafe { sys::cstr(path) }, &mut abs) {
        return call(path);
    }
    let mut scratch = Path::at(libc::AT_FDCWD);
    // SAFETY: abs is NUL-terminated.
    match unsafe { front(abs.as_ptr() as *const c_char, oflags, ra, &mut scratch) } {
        Ok(fd) => fd,
        Err(p) => call(p),
    }
}

/// [`front`] for the fopen family: the open flags of `mode` (a writing mode is not ours, but
/// its `/proc/<vpid>` path is still rewritten).
///
/// # Safety
/// `path` and `mode` null or NUL-terminated strings.
#[inline(always)]
unsafe fn front_mode(
    path: *const c_char,
    mode: *const c_char,
    ra: u64,
    scratch: &mut Path,
) -> (c_int, Result<c_int, *const c_char>) {
    // SAFETY: null or NUL-terminated per the contract.
    let fl = (!mode.is_null())
        .then(|| read_only_mode(unsafe { sys::cstr(mode) }))
        .flatten()
        .unwrap_or(libc::O_RDWR | libc::O_PATH);
    // SAFETY: forwarded contract.
    (fl, unsafe { front(path, fl, ra, scratch) })
}

/// The back half of an exclusive create (`O_CREAT|O_EXCL`) that failed: a temp name taken by
/// an entry from before the run is reported ([`crate::tempname::note_taken`]). Returns `fd`,
/// errno kept.
///
/// # Safety
/// `path` is null or a NUL-terminated string.
#[inline(always)]
unsafe fn after_create(fd: c_int, path: *const c_char, oflags: c_int) -> c_int {
    if fd < 0 && oflags & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT | libc::O_EXCL {
        // SAFETY: per the contract.
        unsafe { taken(path) };
    }
    fd
}

/// [`after_create`]'s cold part, also `mkdir`'s: reports `path` when the call failed with
/// `EEXIST` (errno kept).
///
/// # Safety
/// `path` is null or a NUL-terminated string.
#[cold]
#[inline(never)]
pub unsafe fn taken(path: *const c_char) {
    let e = sys::errno();
    if e == libc::EEXIST && !path.is_null() {
        // SAFETY: per the contract.
        crate::tempname::note_taken(unsafe { sys::cstr(path) });
        set_errno(e);
    }
}

hook! {
    /// # Safety
    /// As `open(2)`: `path` a NUL-terminated string; `mode` read only with
    /// `O_CREAT`/`O_TMPFILE`.
    fn open | open64 | __open | __open64(path: *const c_char, oflags: c_int, mode: c_uint) -> c_int;
    caller = ra;
    |real| {
        let mut scratch = Path::at(libc::AT_FDCWD);
        // SAFETY: forwarded contract.
        let fd = unsafe { front(path, oflags, ra, &mut scratch) }.unwrap_or_else(|p| real(p, oflags, mode));
        // SAFETY: forwarded contract.
        unsafe { after_create(fd, path, oflags) }
    }
}

hook! {
    /// # Safety
    /// As `mkdir(2)`. Counted nowhere: only a temp name taken by an entry from before the run
    /// is noted ([`taken`]).
    fn mkdir(path: *const c_char, mode: libc::mode_t) -> c_int;
    uncounted;
    |real| {
        let r = real(path, mode);
        if r < 0 {
            // SAFETY: forwarded contract.
            unsafe { taken(path) };
        }
        r
    }
}

hook! {
    /// # Safety
    /// As `mkdirat(2)`; an absolute `path` is noted as `mkdir`'s.
    fn mkdirat(dirfd: c_int, path: *const c_char, mode: libc::mode_t) -> c_int;
    uncounted;
    |real| {
        let r = real(dirfd, path, mode);
        if r < 0 {
            // SAFETY: forwarded contract.
            unsafe { taken(path) };
        }
        r
    }
}

hook! {
    /// # Safety
    /// As `openat(2)`.
    fn openat | openat64(dirfd: c_int, path: *const c_char, oflags: c_int, mode: c_uint) -> c_int;
    caller = ra;
    |real| {
        // SAFETY: forwarded contract.
        if unsafe { relative_number(dirfd, path) } {
            // SAFETY: as above; the path front_at passes is absolute (dirfd unused) or path.
            return unsafe { front_at(dirfd, path, oflags, ra, |p| real(dirfd, p, oflags, mode)) };
        }
        let mut scratch = Path::at(dirfd);
        // SAFETY: forwarded contract.
        let fd = unsafe { front(path, oflags, ra, &mut scratch) }
            .unwrap_or_else(|p| real(dirfd, p, oflags, mode));
        // SAFETY: forwarded contract; note_taken looks only at an absolute path.
        unsafe { after_create(fd, path, oflags) }
    }
}

hook! {
    /// # Safety
    /// As glibc's fortified `__open_2`.
    fn __open_2 | __open64_2(path: *const c_char, oflags: c_int) -> c_int;
    caller = ra;
    |real| {
        let mut scratch = Path::at(libc::AT_FDCWD);
        // SAFETY: forwarded contract.
        unsafe { front(path, oflags, ra, &mut scratch) }.unwrap_or_else(|p| real(p, oflags))
    }
}

hook! {
    /// # Safety
    /// As glibc's fortified `__openat_2`.
    fn __openat_2 | __openat64_2(dirfd: c_int, path: *const c_char, oflags: c_int) -> c_int;
    caller = ra;
    |real| {
        // SAFETY: forwarded contract.
        if unsafe { relative_number(dirfd, path) } {
            // SAFETY: as above; the path front_at passes is absolute (dirfd unused) or path.
            return unsafe { front_at(dirfd, path, oflags, ra, |p| real(dirfd, p, oflags)) };
        }
        let mut scratch = Path::at(dirfd);
        // SAFETY: forwarded contract.
        unsafe { front(path, oflags, ra, &mut scratch) }
            .unwrap_or_else(|p| real(dirfd, p, oflags))
    }
}

hook! {
    /// # Safety
    /// As `fopen(3)`.
    fn fopen | fopen64(path: *const c_char, mode: *const c_char) -> *mut FILE;
    caller = ra;
    |real| {
        let mut scratch = Path::at(libc::AT_FDCWD);
        // SAFETY: forwarded contract.
        match unsafe { front_mode(path, mode, ra, &mut scratch) }.1 {
            Ok(-1) => core::ptr::null_mut(),
            Ok(fd) => {
                // SAFETY: fd is ours; fdopen is not interposed by the shim.
                let f = unsafe { libc::fdopen(fd, mode) };
                if f.is_null() {
                    let e = sys::errno();
                    sys::close(fd);
                    set_errno(e);
                }
                f
            }
            Err(p) => real(p, mode),
        }
    }
}

hook! {
    /// # Safety
    /// As `freopen(3)`.
    fn freopen | freopen64(path: *const c_char, mode: *const c_char, stream: *mut FILE) -> *mut FILE;
    caller = ra;
    |real| {
        let mut scratch = Path::at(libc::AT_FDCWD);
        // SAFETY: forwarded contract.
        let (fl, front) = unsafe { front_mode(path, mode, ra, &mut scratch) };
        match front {
            Ok(-1) => {
                // freopen closes the stream even when the new open fails.
                // SAFETY: the caller's stream.
                unsafe { libc::fclose(stream) };
                core::ptr::null_mut()
            }
            Ok(fd) => {
                // Reopen the stream on /dev/null (libc picks its fd), then put our
                // descriptor under that fd number.
                let f = real(c"/dev/null".as_ptr(), mode, stream);
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
            Err(p) => real(p, mode, stream),
        }
    }
}
