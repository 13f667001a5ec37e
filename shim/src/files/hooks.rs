//! The files family, exported: every way a program reads file times (the `stat` family, the
//! pre-2.33 `__xstat` family glibc still exports for old binaries, `statx`, and the same
//! through `syscall()`) shows sealed times; every way it sets them records what it set (now
//! means the logical clock); `close` and `fclose` record the writer's clock. The real call
//! always runs first with the caller's arguments, so errors, permissions and errno are the
//! kernel's. Reads of file times are not counted in the census: how often a program calls
//! `stat` depends on what is on disk (a cache an earlier run left), which would make the
//! census of a deterministic program differ between runs; setters are counted.

use libc::{c_char, c_int, c_long, timespec, timeval, FILE};
use seal_abi::{flags, Fid};

use super::{note_set, note_written, seal, Times};
use crate::core::{census, config, sys};
use crate::hook;
use crate::process::hooks::path::{with_proc_path, with_proc_path_at};

#[inline(always)]
fn active() -> bool {
    config::sealed(flags::FILES) && !crate::core::real::Reentry::inside()
}

fn ns(sec: i64, nsec: i64) -> i64 {
    sec.saturating_mul(1_000_000_000).saturating_add(nsec)
}

/// Rewrites the times of a `struct stat` the kernel filled. Not for Python's importer: it
/// compares a source's mtime with the one its `.pyc` recorded, and the clamp made every
/// bytecode cache look stale (each sealed start recompiled what it imported).
///
/// # Safety
/// `st` valid for reads and writes.
unsafe fn fix_stat(st: *mut libc::stat) {
    if st.is_null() || !active() || crate::core::census::in_python_import() {
        return;
    }
    // SAFETY: per the contract.
    let s = unsafe { &mut *st };
    let t = Times {
        a: ns(s.st_atime, s.st_atime_nsec),
        m: ns(s.st_mtime, s.st_mtime_nsec),
        c: ns(s.st_ctime, s.st_ctime_nsec),
        b: None,
    };
    let o = seal(s.st_dev, s.st_ino, t);
    (s.st_atime, s.st_atime_nsec) = split(o.a);
    (s.st_mtime, s.st_mtime_nsec) = split(o.m);
    (s.st_ctime, s.st_ctime_nsec) = split(o.c);
}

fn split(v: i64) -> (i64, i64) {
    (v.div_euclid(1_000_000_000), v.rem_euclid(1_000_000_000))
}

fn xts(t: &libc::statx_timestamp) -> i64 {
    ns(t.tv_sec, t.tv_nsec as i64)
}

fn set_xts(t: &mut libc::statx_timestamp, v: i64) {
    let (s, n) = split(v);
    t.tv_sec = s;
    t.tv_nsec = n as u32;
}

/// Rewrites the times of a `struct statx` the kernel filled.
///
/// # Safety
/// `x` valid for reads and writes.
unsafe fn fix_statx(x: *mut libc::statx) {
    if x.is_null() || !active() || crate::core::census::in_python_import() {
        return;
    }
    // SAFETY: per the contract.
    let s = unsafe { &mut *x };
    let mask = s.stx_mask;
    let epoch = config::epoch_ns();
    if mask & libc::STATX_MTIME == 0 {
        // No modification time to decide by: clamp what there is.
        for (bit, ts) in [
            (libc::STATX_ATIME, &mut s.stx_atime),
            (libc::STATX_CTIME, &mut s.stx_ctime),
            (libc::STATX_BTIME, &mut s.stx_btime),
        ] {
            if mask & bit != 0 {
                let v = xts(ts).min(epoch);
                set_xts(ts, v);
            }
        }
        return;
    }
    let dev = libc::makedev(s.stx_dev_major, s.stx_dev_minor);
    let t = Times {
        a: xts(&s.stx_atime),
        m: xts(&s.stx_mtime),
        c: xts(&s.stx_ctime),
        b: (mask & libc::STATX_BTIME != 0).then(|| xts(&s.stx_btime)),
    };
    let o = seal(dev, s.stx_ino, t);
    set_xts(&mut s.stx_mtime, o.m);
    if mask & libc::STATX_ATIME != 0 {
        set_xts(&mut s.stx_atime, o.a);
    }
    if mask & libc::STATX_CTIME != 0 {
        set_xts(&mut s.stx_ctime, o.c);
    }
    if let Some(b) = o.b {
        set_xts(&mut s.stx_btime, b);
    }
}

/// `0` → rewrite `st`; returns `r`.
///
/// # Safety
/// As [`fix_stat`] when `r == 0`.
#[inline(always)]
unsafe fn after(r: c_int, st: *mut libc::stat) -> c_int {
    if r == 0 {
        // SAFETY: the kernel just filled it.
        unsafe { fix_stat(st) };
    }
    r
}

hook! {
    /// # Safety
    /// As `stat(2)`.
    fn stat | stat64(path: *const c_char, buf: *mut libc::stat) -> c_int;
    caller = ra;
    // SAFETY: forwarded (a `/proc/<vpid>` path translated); filled by the real call on success.
    |real| unsafe {
        after(with_proc_path(path, ra, |p| real(p, buf)), buf)
    }
}

hook! {
    /// # Safety
    /// As `lstat(2)`.
    fn lstat | lstat64(path: *const c_char, buf: *mut libc::stat) -> c_int;
    caller = ra;
    // SAFETY: forwarded (a `/proc/<vpid>` path translated); filled by the real call on success.
    |real| unsafe {
        after(with_proc_path(path, ra, |p| real(p, buf)), buf)
    }
}

hook! {
    /// # Safety
    /// As `fstat(2)`.
    fn fstat | fstat64(fd: c_int, buf: *mut libc::stat) -> c_int;
    uncounted;
    // SAFETY: filled by the real call on success.
    |real| unsafe { after(real(fd, buf), buf) }
}

hook! {
    /// # Safety
    /// As `fstatat(2)`.
    fn fstatat | fstatat64(dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flag: c_int) -> c_int;
    caller = ra;
    // SAFETY: forwarded (a `/proc/<vpid>` path translated); filled by the real call on success.
    |real| unsafe {
        after(with_proc_path_at(dirfd, path, ra, |p| real(dirfd, p, buf, flag)), buf)
    }
}

hook! {
    /// # Safety
    /// As glibc's `__xstat` (binaries built before glibc 2.33); `ver` 1 is the kernel layout.
    fn __xstat | __xstat64(ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int;
    uncounted;
    // SAFETY: filled by the real call on success.
    |real| unsafe { after(real(ver, path, buf), buf) }
}

hook! {
    /// # Safety
    /// As glibc's `__lxstat`.
    fn __lxstat | __lxstat64(ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int;
    uncounted;
    // SAFETY: filled by the real call on success.
    |real| unsafe { after(real(ver, path, buf), buf) }
}

hook! {
    /// # Safety
    /// As glibc's `__fxstat`.
    fn __fxstat | __fxstat64(ver: c_int, fd: c_int, buf: *mut libc::stat) -> c_int;
    uncounted;
    // SAFETY: filled by the real call on success.
    |real| unsafe { after(real(ver, fd, buf), buf) }
}

hook! {
    /// # Safety
    /// As glibc's `__fxstatat`.
    fn __fxstatat | __fxstatat64(ver: c_int, dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flag: c_int) -> c_int;
    uncounted;
    // SAFETY: filled by the real call on success.
    |real| unsafe { after(real(ver, dirfd, path, buf, flag), buf) }
}

hook! {
    /// # Safety
    /// As `statx(2)`.
    fn statx(dirfd: c_int, path: *const c_char, flag: c_int, mask: libc::c_uint, buf: *mut libc::statx) -> c_int;
    caller = ra;
    |real| {
        // SAFETY: forwarded, with a `/proc/<vpid>` path translated (absolute: dirfd unused).
        let r = unsafe { with_proc_path_at(dirfd, path, ra, |p| real(dirfd, p, flag, mask, buf)) };
        if r == 0 {
            // SAFETY: filled by the real call.
            unsafe { fix_statx(buf) };
        }
        r
    }
}

/// What a setter asked the modification time to become.
#[derive(Clone, Copy)]
enum Spec {
    Now,
    Omit,
    At(i64),
}

fn spec_ts(times: *const timespec) -> Spec {
    if times.is_null() {
        return Spec::Now;
    }
    // SAFETY: a non-null `times` is an array of two timespecs (the caller's contract).
    let m = unsafe { *times.add(1) };
    match m.tv_nsec {
        libc::UTIME_NOW => Spec::Now,
        libc::UTIME_OMIT => Spec::Omit,
        n => Spec::At(ns(m.tv_sec, n)),
    }
}

fn spec_tv(tv: *const timeval) -> Spec {
    if tv.is_null() {
        return Spec::Now;
    }
    // SAFETY: a non-null `tv` is an array of two timevals.
    let m = unsafe { *tv.add(1) };
    Spec::At(ns(m.tv_sec, m.tv_usec * 1000))
}

fn spec_utimbuf(buf: *const libc::utimbuf) -> Spec {
    if buf.is_null() {
        return Spec::Now;
    }
    // SAFETY: a non-null `buf` is readable (the caller's contract).
    Spec::At(ns(unsafe { (*buf).modtime }, 0))
}

/// After a successful setter on (`dirfd`, `path`; null path: `dirfd` itself): record it.
///
/// # Safety
/// `path` null or NUL-terminated.
unsafe fn note(dirfd: c_int, path: *const c_char, nofollow: bool, spec: Spec) {
    if !active() {
        return;
    }
    let explicit = match spec {
        Spec::Omit => return,
        Spec::Now => None,
        Spec::At(v) => Some(v),
    };
    // SAFETY: stat is plain data.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    let (p, mut fl) = if path.is_null() {
        (c"".as_ptr(), libc::AT_EMPTY_PATH)
    } else {
        (path, 0)
    };
    if nofollow {
        fl |= libc::AT_SYMLINK_NOFOLLOW;
    }
    // SAFETY: p NUL-terminated, st a valid out-pointer.
    let r = unsafe {
        sys::syscall6(
            libc::SYS_newfstatat,
            dirfd as i64,
            p as i64,
            &mut st as *mut _ as i64,
            fl as i64,
            0,
            0,
        )
    };
    if r == 0 {
        note_set(
            st.st_dev,
            st.st_ino,
            ns(st.st_mtime, st.st_mtime_nsec),
            explicit,
        );
    }
}

/// A setter's result `r`, after [`note`] when it succeeded (`spec` is read only then: a
/// failed call may have been given a bad pointer).
///
/// # Safety
/// As [`note`]; `spec` reads what the successful setter read.
unsafe fn noted(
    r: c_int,
    dirfd: c_int,
    path: *const c_char,
    nofollow: bool,
    spec: impl FnOnce() -> Spec,
) -> c_int {
    if r == 0 {
        // SAFETY: per the contract.
        unsafe { note(dirfd, path, nofollow, spec()) };
    }
    r
}

hook! {
    /// # Safety
    /// As `utimensat(2)`.
    fn utimensat(dirfd: c_int, path: *const c_char, times: *const timespec, flag: c_int) -> c_int;
    fid = Utimensat;
    |real| {
        let nofollow = flag & libc::AT_SYMLINK_NOFOLLOW != 0;
        // SAFETY: forwarded contract.
        unsafe { noted(real(dirfd, path, times, flag), dirfd, path, nofollow, || spec_ts(times)) }
    }
}

hook! {
    /// # Safety
    /// As `futimens(3)`.
    fn futimens(fd: c_int, times: *const timespec) -> c_int;
    fid = Futimens;
    // SAFETY: null path: the descriptor itself.
    |real| unsafe { noted(real(fd, times), fd, core::ptr::null(), false, || spec_ts(times)) }
}

hook! {
    /// # Safety
    /// As `utimes(2)` / `lutimes(3)`.
    fn utimes | lutimes(path: *const c_char, tv: *const timeval) -> c_int;
    fid = Utimes;
    // lutimes acts on a link itself; utimes follows it. Both record by the path: an lstat of
    // a link then shows the link's own real mtime, which nothing recorded.
    // SAFETY: forwarded contract.
    |real| unsafe { noted(real(path, tv), libc::AT_FDCWD, path, false, || spec_tv(tv)) }
}

hook! {
    /// # Safety
    /// As `futimes(3)`.
    fn futimes(fd: c_int, tv: *const timeval) -> c_int;
    fid = Utimes;
    // SAFETY: null path: the descriptor itself.
    |real| unsafe { noted(real(fd, tv), fd, core::ptr::null(), false, || spec_tv(tv)) }
}

hook! {
    /// # Safety
    /// As `futimesat(2)`.
    fn futimesat(dirfd: c_int, path: *const c_char, tv: *const timeval) -> c_int;
    fid = Utimes;
    // SAFETY: forwarded contract.
    |real| unsafe { noted(real(dirfd, path, tv), dirfd, path, false, || spec_tv(tv)) }
}

hook! {
    /// # Safety
    /// As `utime(2)`.
    fn utime(path: *const c_char, buf: *const libc::utimbuf) -> c_int;
    fid = Utime;
    // SAFETY: forwarded contract.
    |real| unsafe { noted(real(path, buf), libc::AT_FDCWD, path, false, || spec_utimbuf(buf)) }
}

/// Before a descriptor is closed: record the closer's clock for a regular file written in the
/// run (one `fstat`).
#[inline(always)]
pub fn closing(fd: c_int) {
    if fd < 0 || !active() {
        return;
    }
    // SAFETY: stat is plain data.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is a valid out-pointer; a bad fd only fails.
    let r = unsafe { sys::syscall3(libc::SYS_fstat, fd as i64, &mut st as *mut _ as i64, 0) };
    if r == 0 {
        note_written(
            st.st_dev,
            st.st_ino,
            st.st_mode,
            ns(st.st_mtime, st.st_mtime_nsec),
        );
    }
}

/// glibc's `_IO_NO_WRITES` bit of `FILE::_flags` (the first field): a stream that cannot write.
const IO_NO_WRITES: c_int = 0x8;

/// Before `fclose` closes stream `f` (registered in [`crate::FD_FCLOSING`]): glibc closes
/// the descriptor internally (not through `close`): flush what is buffered (fclose would),
/// then record, for streams that write.
#[inline(always)]
pub fn fclosing(f: *mut FILE) {
    // SAFETY: a valid stream per fclose's contract; `_flags` is its first field.
    if active() && unsafe { *(f as *const c_int) } & IO_NO_WRITES == 0 {
        // SAFETY: a valid stream; neither function is interposed by the shim.
        let fd = unsafe {
            libc::fflush(f);
            libc::fileno(f)
        };
        closing(fd);
    }
}

/// `syscall()` numbers of this family: the raw call, then the same rewrite as the hooks.
/// `Some(result in syscall()'s convention)` when `n` is one of ours.
///
/// # Safety
/// As `syscall(2)` for `n` with `a`.
pub unsafe fn sys_files(n: c_long, a: [c_long; 6], ra: u64) -> Option<c_long> {
    let fid = match n {
        libc::SYS_stat
        | libc::SYS_lstat
        | libc::SYS_fstat
        | libc::SYS_newfstatat
        | libc::SYS_statx => Fid::SysStat,
        libc::SYS_utimensat | libc::SYS_utimes | libc::SYS_utime | libc::SYS_futimesat => {
            Fid::SysUtime
        }
        _ => return None,
    };
    if fid == Fid::SysUtime {
        census::count(fid, seal_abi::NO_DETAIL, ra);
    }
    // SAFETY: the caller's system call with its own arguments.
    let r = unsafe { sys::syscall6(n, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if r < 0 {
        sys::set_errno(-r as i32);
        return Some(-1);
    }
    // SAFETY (all arms): the kernel accepted the arguments with these meanings.
    unsafe {
        match n {
            libc::SYS_stat | libc::SYS_lstat | libc::SYS_fstat => fix_stat(a[1] as *mut libc::stat),
            libc::SYS_newfstatat => fix_stat(a[2] as *mut libc::stat),
            libc::SYS_statx => fix_statx(a[4] as *mut libc::statx),
            libc::SYS_utimensat => note(
                a[0] as c_int,
                a[1] as *const c_char,
                a[3] as c_int & libc::AT_SYMLINK_NOFOLLOW != 0,
                spec_ts(a[2] as *const timespec),
            ),
            libc::SYS_utimes => note(
                libc::AT_FDCWD,
                a[0] as *const c_char,
                false,
                spec_tv(a[1] as *const timeval),
            ),
            libc::SYS_futimesat => note(
                a[0] as c_int,
                a[1] as *const c_char,
                false,
                spec_tv(a[2] as *const timeval),
            ),
            _ => note(
                libc::AT_FDCWD,
                a[0] as *const c_char,
                false,
                spec_utimbuf(a[1] as *const libc::utimbuf),
            ),
        }
    }
    Some(r as c_long)
}

/// Before `dup2`/`dup3` (hooked in `core::descriptors`) replaces descriptor `new`: a shell
/// restoring its standard output after `echo a > f` closes `f` this way, not with `close`.
#[inline(always)]
pub fn replacing(old: c_int, new: c_int) {
    if old != new {
        closing(new);
    }
}
