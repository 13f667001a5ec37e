//! Family `machine`'s directory-order entry points beside the `readdir` family (whose hooks
//! are in `open::listing`): `telldir`, `seekdir` and `rewinddir`, which speak of places in a
//! sorted stream, and `scandir`/`scandir64`, whose glibc implementation reads with an internal
//! `readdir` that never reaches a hook, so it is done here over the sorted stream.
//!
//! glibc's `fts`, `nftw`, `ftw` and `glob` read with the same internal calls. `fts_open`
//! of one root without a comparison is given one (name order, as the snapshot's), so
//! `fts_read` yields each directory's children sorted (glibc would sort several roots with it
//! too, so those keep the file system's order); `glob` with `GLOB_NOSORT` sorts anyway (its order is
//! unspecified, sorted is one). `nftw` and `ftw` keep the file system's order (see
//! docs/limits.md). `find`, `du`, `rm -r` and `tar` carry gnulib's own `fts` or `savedir`,
//! which call `readdir` through the PLT, and so list in order.

use libc::{c_char, c_int, c_long, dirent, dirent64, DIR};

use super::dirorder;
use crate::core::sys;
use crate::hook;
use crate::open::listing::hooks::{read_one, readdir_sorted};

/// The descriptor of a stream.
///
/// # Safety
/// `dir` is a valid open stream.
unsafe fn fd_of(dir: *mut DIR) -> c_int {
    // SAFETY: per the contract; dirfd is not interposed by the shim.
    unsafe { libc::dirfd(dir) }
}

/// The real `readdir` of `dir`, for a snapshot made by `telldir` or `seekdir`.
fn real_readdir(dir: *mut DIR) -> *mut dirent64 {
    let f = crate::real!(readdir64: fn(*mut DIR) -> *mut dirent64);
    // SAFETY: the caller's open stream.
    unsafe { f(dir) }
}

hook! {
    /// # Safety
    /// As `telldir(3)`.
    fn telldir(dir: *mut DIR) -> c_long;
    fid = Telldir;
    |real| {
        if dir.is_null() {
            return real(dir);
        }
        // SAFETY: an open stream per the contract.
        let fd = unsafe { fd_of(dir) };
        match dirorder::tell(dir as usize, fd, &mut || read_one(&|| real_readdir(dir))) {
            Some(p) => p as c_long,
            None => real(dir),
        }
    }
}

hook! {
    /// # Safety
    /// As `seekdir(3)`: `loc` a value `telldir` gave for this stream.
    fn seekdir(dir: *mut DIR, loc: c_long) -> ();
    fid = Telldir;
    |real| {
        if dir.is_null() {
            return real(dir, loc);
        }
        // SAFETY: an open stream per the contract.
        let fd = unsafe { fd_of(dir) };
        if !dirorder::seek(dir as usize, fd, loc, &mut || read_one(&|| real_readdir(dir))) {
            real(dir, loc)
        }
    }
}

hook! {
    /// The snapshot is dropped: the next read lists the directory as it is then.
    ///
    /// # Safety
    /// As `rewinddir(3)`.
    fn rewinddir(dir: *mut DIR) -> ();
    fid = Telldir;
    |real| {
        dirorder::release(dirorder::dir_key(dir as usize));
        real(dir)
    }
}

/// `scandir`'s filter and comparison, as C declares them.
type Filter = Option<unsafe extern "C" fn(*const dirent) -> c_int>;
type Compar = Option<unsafe extern "C" fn(*mut *const dirent, *mut *const dirent) -> c_int>;

/// `scandir(path, list, filter, compar)` over the sorted stream: the entries `filter` keeps,
/// each in its own `malloc`ed copy, in a `malloc`ed array sorted by `compar` (name order
/// without one), as glibc's. `None` when the directory is not sorted (the real call).
///
/// # Safety
/// As `scandir(3)`.
unsafe fn scandir_sorted(
    path: *const c_char,
    list: *mut *mut *mut dirent,
    filter: Filter,
    compar: Compar,
) -> Option<c_int> {
    if path.is_null() || list.is_null() || !super::sealed() || crate::core::real::Reentry::inside()
    {
        return None;
    }
    let saved = sys::errno();
    // SAFETY: a C string per the contract (our own opendir hook translates it as usual).
    let dir = unsafe { libc::opendir(path) };
    if dir.is_null() {
        return Some(-1);
    }
    // SAFETY: dir is open.
    if !dirorder::eligible(unsafe { fd_of(dir) }) {
        // SAFETY: ours, opened above.
        unsafe { libc::closedir(dir) };
        return None;
    }
    let mut v: *mut *mut dirent = core::ptr::null_mut();
    let (mut n, mut cap) = (0usize, 0usize);
    let failed;
    loop {
        // As glibc's: errno 0 before each read, so an error is told from the end (a filter
        // may have set it).
        sys::set_errno(0);
        // SAFETY: dir is open; the sorted read (or the real one, when no slot was free).
        let e = unsafe { readdir_sorted(dir, None, &|| real_readdir(dir)) }
            .unwrap_or_else(|| real_readdir(dir));
        if e.is_null() {
            failed = sys::errno();
            break;
        }
        // SAFETY: the user's filter, on a record valid until the next read.
        if let Some(f) = filter {
            if unsafe { f(e as *const dirent) } == 0 {
                continue;
            }
        }
        if n == cap {
            cap = if cap == 0 { 16 } else { cap * 2 };
            // SAFETY: realloc of our own array (or null).
            let g = unsafe { libc::realloc(v as *mut _, cap * core::mem::size_of::<usize>()) };
            if g.is_null() {
                failed = libc::ENOMEM;
                break;
            }
            v = g as *mut *mut dirent;
        }
        // SAFETY: a record of the stream: its header first.
        let len = unsafe { (*e).d_reclen } as usize;
        // SAFETY: a fresh allocation of `len` bytes, filled from the record.
        let c = unsafe { libc::malloc(len) };
        if c.is_null() {
            failed = libc::ENOMEM;
            break;
        }
        // SAFETY: `len` bytes each side; `n < cap` slots of `v`.
        unsafe {
            core::ptr::copy_nonoverlapping(e as *const u8, c as *mut u8, len);
            *v.add(n) = c as *mut dirent;
        }
        n += 1;
    }
    // SAFETY: ours, opened above.
    unsafe { libc::closedir(dir) };
    if failed != 0 {
        for i in 0..n {
            // SAFETY: our own allocations.
            unsafe { libc::free(*v.add(i) as *mut _) };
        }
        // SAFETY: ours (or null).
        unsafe { libc::free(v as *mut _) };
        sys::set_errno(failed);
        return Some(-1);
    }
    if let Some(c) = compar {
        if n > 1 {
            // SAFETY: `n` pointers; the user's comparison takes two pointers to them, the ABI
            // of qsort's.
            unsafe {
                libc::qsort(
                    v as *mut _,
                    n,
                    core::mem::size_of::<usize>(),
                    Some(core::mem::transmute::<
                        unsafe extern "C" fn(*mut *const dirent, *mut *const dirent) -> c_int,
                        unsafe extern "C" fn(*const libc::c_void, *const libc::c_void) -> c_int,
                    >(c)),
                );
            }
        }
    }
    // SAFETY: a valid out-pointer per the contract.
    unsafe { *list = v };
    sys::set_errno(saved);
    Some(n as c_int)
}

hook! {
    /// # Safety
    /// As `scandir(3)`.
    fn scandir | scandir64(path: *const c_char, list: *mut *mut *mut dirent, filter: Filter, compar: Compar) -> c_int;
    fid = Scandir;
    // SAFETY: forwarded contract.
    |real| unsafe { scandir_sorted(path, list, filter, compar) }
        .unwrap_or_else(|| real(path, list, filter, compar))
}

/// Offsets of `fts_namelen` and `fts_name` in glibc's `FTSENT` (and `FTSENT64`) on x86_64:
/// seven pointers, two ints, `fts_pathlen`, then `fts_namelen`; the name after `fts_statp`.
const FTS_NAMELEN_AT: usize = 66;
const FTS_NAME_AT: usize = 112;

/// The name order of two `FTSENT`s, for an `fts_open` that had no comparison.
///
/// # Safety
/// `a` and `b` point at pointers to entries `fts_read` made.
unsafe extern "C" fn fts_by_name(a: *const *const u8, b: *const *const u8) -> c_int {
    // SAFETY: per the contract: each entry holds `fts_namelen` bytes of name.
    let name = |e: *const *const u8| unsafe {
        let e = *e;
        let len = u16::from_ne_bytes([*e.add(FTS_NAMELEN_AT), *e.add(FTS_NAMELEN_AT + 1)]);
        core::slice::from_raw_parts(e.add(FTS_NAME_AT), len as usize)
    };
    dirorder::order(name(a), name(b)) as c_int
}

type FtsCompar = Option<unsafe extern "C" fn(*const *const u8, *const *const u8) -> c_int>;

hook! {
    /// # Safety
    /// As `fts_open(3)`.
    fn fts_open | fts64_open(paths: *const *mut c_char, options: c_int, compar: FtsCompar) -> *mut libc::c_void;
    fid = FtsOpen;
    |real| {
        let by_name: FtsCompar = Some(fts_by_name);
        // glibc sorts the roots with a comparison too: only a walk of one root is given one,
        // so several roots keep the order the caller gave them.
        // SAFETY: a null-terminated array of C strings per the contract.
        let one_root = !paths.is_null() && unsafe { !(*paths).is_null() && (*paths.add(1)).is_null() };
        let sorting = compar.is_none()
            && one_root
            && super::sealed()
            && !crate::core::real::Reentry::inside();
        real(paths, options, if sorting { by_name } else { compar })
    }
}

hook! {
    /// # Safety
    /// As `glob(3)`.
    fn glob | glob64(pattern: *const c_char, flags: c_int, errfunc: Option<unsafe extern "C" fn(*const c_char, c_int) -> c_int>, pglob: *mut libc::c_void) -> c_int;
    caller = ra;
    |real| {
        if flags & libc::GLOB_NOSORT == 0 || !super::sealed() {
            return real(pattern, flags, errfunc, pglob);
        }
        crate::core::census::count(seal_abi::Fid::GlobNosort, seal_abi::NO_DETAIL, ra);
        real(pattern, flags & !libc::GLOB_NOSORT, errfunc, pglob)
    }
}
