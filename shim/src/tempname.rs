//! Temp names: `mkstemp`, `mkostemp`, `mkstemps`, `mkostemps` (and their `*64` aliases),
//! `mkdtemp`, `mktemp`, `tempnam`, `tmpnam`, `tmpnam_r` draw their names from the calling
//! thread's seeded stream when the `tempname` family is sealed.
//!
//! glibc's own versions fill the `XXXXXX` from an internal `getrandom` the shim cannot see,
//! so the public functions are replaced whole, with glibc's semantics: `EINVAL` for a template
//! without six trailing `X`s (before the suffix), files `O_RDWR|O_CREAT|O_EXCL` mode 0600,
//! directories 0700, and up to 62³ deterministic retries on `EEXIST`. Only the first name of
//! a call is drawn from the thread's stream; its retries are drawn from that name, so a name
//! left taken by an earlier run does not move the values the thread draws afterwards. The files and
//! directories are made with raw system calls (never through the shim's own `open` hook).
//!
//! Not here: coreutils `mktemp` and Python's `tempfile` do not call these; they use gnulib's
//! `gen_tempname` (which calls the public `getrandom`) and `random.Random` seeded from
//! `os.urandom` (`getrandom`), so their names are sealed by the `random` family.

use crate::core::{config, sys};
use crate::random;

/// The letters glibc draws name characters from.
const LETTERS: &[u8; 62] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
/// glibc's attempt budget (62³).
const ATTEMPTS: u32 = 62 * 62 * 62;
/// glibc's `L_tmpnam` and `P_tmpdir`.
pub const L_TMPNAM: usize = 20;
const P_TMPDIR: &[u8] = b"/tmp";

/// What to make once a name is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Make {
    /// A file, `O_RDWR|O_CREAT|O_EXCL` plus these extra open flags, mode 0600.
    File(i32),
    /// A directory, mode 0700.
    Dir,
    /// Nothing: a name that does not exist now (`mktemp`, `tempnam`, `tmpnam`).
    Name,
}

/// Fills the six `X`s before `suffix` bytes of `tmpl` (a NUL-terminated template without its
/// NUL in the slice) from the thread's stream (the first name; retries from that name, see
/// [`retry_name`]) until `make` succeeds. Returns the fd for
/// [`Make::File`], 0 otherwise, or an errno.
pub fn gen_tempname(tmpl: &mut [u8], suffix: usize, make: Make) -> Result<i32, i32> {
    if tmpl.len() < 6 + suffix || &tmpl[tmpl.len() - 6 - suffix..tmpl.len() - suffix] != b"XXXXXX" {
        return Err(libc::EINVAL);
    }
    let start = tmpl.len() - 6 - suffix;
    let mut path = [0u8; 4096];
    if tmpl.len() >= path.len() {
        return Err(libc::ENAMETOOLONG);
    }
    let mut first = 0u64;
    for attempt in 0..ATTEMPTS {
        if attempt == 0 {
            random::with_stream(|s| {
                for c in &mut tmpl[start..start + 6] {
                    *c = LETTERS[random::uniform(s, 62) as usize];
                }
            });
            first = name_key(&tmpl[start..start + 6]);
        } else {
            retry_name(first, attempt, &mut tmpl[start..start + 6]);
        }
        path[..tmpl.len()].copy_from_slice(tmpl);
        path[tmpl.len()] = 0;
        match try_make(&path[..=tmpl.len()], make) {
            Err(libc::EEXIST) => {
                note_taken(&path[..tmpl.len()]);
                continue;
            }
            r => return r,
        }
    }
    Err(libc::EEXIST)
}

/// The first name's six letters as a number: the key of its retries.
fn name_key(x: &[u8]) -> u64 {
    x.iter()
        .fold(0x7465_6d70_6e61_6d65, |k, &c| seal_abi::mix64(k ^ c as u64))
}

/// The name of retry `attempt` (1..) after a first name keyed `first`: drawn from that key,
/// not from the thread's stream. A name taken by a file an earlier run left behind then
/// changes only this name: the thread's stream has moved by one name, as when the first one
/// was free, and every later value (the next `rand()` seed, the next uuid) is what it was.
fn retry_name(first: u64, attempt: u32, out: &mut [u8]) {
    let mut x = seal_abi::mix64(first ^ seal_abi::mix64(attempt as u64));
    for c in out {
        *c = LETTERS[(x % 62) as usize];
        x /= 62;
    }
}

/// Whether a taken temp name has been reported by this process.
static SAID_TAKEN: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Is the absolute `path` in a temp directory (`/tmp`, `/var/tmp`, `$TMPDIR`)?
fn in_temp_dir(path: &[u8]) -> bool {
    seal_abi::sealed_path::in_temp_dir(path, config::getenv("TMPDIR"))
}

/// After an exclusive create of `path` (`open` with `O_CREAT|O_EXCL`, `mkdir`, libseal's own
/// temp names) failed with `EEXIST`: when `path` lies in a temp directory and what holds it
/// changed last before the run began (`LIBSEAL_FILES_START`), the run says so once per
/// process (a `tmp-leftover` event): a name left in a shared `/tmp` by an earlier run makes
/// this run take another, and the program's later draws move with it. Entries made during the
/// run (this run's own, or another run's at the same time) are not told apart from each other
/// and not reported. Off with `tempname` unsealed or `files` unsealed (no start known).
pub fn note_taken(path: &[u8]) {
    use core::sync::atomic::Ordering::Relaxed;
    if SAID_TAKEN.load(Relaxed) || !config::sealed(seal_abi::flags::TEMPNAME) {
        return;
    }
    let start = config::FILES_START.load(Relaxed);
    if start == 0 || path.first() != Some(&b'/') || path.len() >= 4095 || !in_temp_dir(path) {
        return;
    }
    let mut b = sys::StackBuf::<4096>::new();
    b.push(path);
    // SAFETY: an all-zero stat is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out-pointer.
    let r = unsafe {
        sys::syscall6(
            libc::SYS_newfstatat,
            libc::AT_FDCWD as i64,
            b.as_cstr().as_ptr() as i64,
            &mut st as *mut libc::stat as i64,
            libc::AT_SYMLINK_NOFOLLOW as i64,
            0,
            0,
        )
    };
    let ctime = st
        .st_ctime
        .saturating_mul(1_000_000_000)
        .saturating_add(st.st_ctime_nsec);
    if r != 0 || ctime >= start || SAID_TAKEN.swap(true, Relaxed) {
        return;
    }
    crate::core::census::record_unsealed(seal_abi::unsealed::TMP_LEFTOVER, path);
}

fn check(r: i64) -> Result<i32, i32> {
    crate::core::fd::check(r).map(|v| v as i32)
}

/// One attempt at `path` (NUL-terminated).
fn try_make(path: &[u8], make: Make) -> Result<i32, i32> {
    match make {
        Make::File(extra) => {
            let fl = (extra & !libc::O_ACCMODE) | libc::O_RDWR | libc::O_CREAT | libc::O_EXCL;
            check(sys::open(path, fl, 0o600) as i64)
        }
        // SAFETY: path is NUL-terminated.
        Make::Dir => check(unsafe {
            sys::syscall3(
                libc::SYS_mkdirat,
                libc::AT_FDCWD as i64,
                path.as_ptr() as i64,
                0o700,
            )
        })
        .map(|_| 0),
        Make::Name => match lstat_mode(path) {
            Ok(_) => Err(libc::EEXIST),
            Err(libc::ENOENT) => Ok(0),
            Err(e) => Err(e),
        },
    }
}

/// `st_mode` of `path` (NUL-terminated) without following a final symlink.
fn lstat_mode(path: &[u8]) -> Result<u32, i32> {
    stat_mode(path, libc::AT_SYMLINK_NOFOLLOW)
}

fn stat_mode(path: &[u8], fl: i32) -> Result<u32, i32> {
    // SAFETY: an all-zero stat is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: path is NUL-terminated, st a valid out-pointer.
    check(unsafe {
        sys::syscall6(
            libc::SYS_newfstatat,
            libc::AT_FDCWD as i64,
            path.as_ptr() as i64,
            &mut st as *mut libc::stat as i64,
            fl as i64,
            0,
            0,
        )
    })?;
    Ok(st.st_mode)
}

fn dir_exists(dir: &[u8]) -> bool {
    let mut b = sys::StackBuf::<4096>::new();
    if dir.len() >= 4095 {
        return false;
    }
    b.push(dir);
    matches!(stat_mode(b.as_cstr(), 0), Ok(m) if m & libc::S_IFMT == libc::S_IFDIR)
}

/// glibc's `__path_search`: writes `DIR/PFXXXXXXX` (NUL-terminated) into `out` and returns its
/// length without the NUL. `try_tmpdir` honours `$TMPDIR` (`tempnam`), `dir` is the caller's
/// preferred directory.
pub fn path_search(
    out: &mut [u8],
    dir: Option<&[u8]>,
    pfx: Option<&[u8]>,
    try_tmpdir: bool,
) -> Result<usize, i32> {
    let pfx = match pfx {
        Some(p) if !p.is_empty() => &p[..p.len().min(5)],
        _ => b"file",
    };
    let mut chosen: Option<&[u8]> = None;
    if try_tmpdir {
        if let Some(d) = config::getenv("TMPDIR").filter(|d| dir_exists(d)) {
            chosen = Some(d);
        } else if let Some(d) = dir.filter(|d| dir_exists(d)) {
            chosen = Some(d);
        }
    } else {
        chosen = dir;
    }
    let dir = match chosen {
        Some(d) => d,
        None if dir_exists(P_TMPDIR) => P_TMPDIR,
        None => return Err(libc::ENOENT),
    };
    let mut dlen = dir.len();
    while dlen > 1 && dir[dlen - 1] == b'/' {
        dlen -= 1;
    }
    let need = dlen + 1 + pfx.len() + 6;
    if out.len() < need + 1 {
        return Err(libc::EINVAL);
    }
    out[..dlen].copy_from_slice(&dir[..dlen]);
    out[dlen] = b'/';
    out[dlen + 1..dlen + 1 + pfx.len()].copy_from_slice(pfx);
    out[need - 6..need].copy_from_slice(b"XXXXXX");
    out[need] = 0;
    Ok(need)
}

#[cfg(not(test))]
mod hooks {
    use core::cell::UnsafeCell;

    use libc::{c_char, c_int};
    use seal_abi::flags;

    use super::{gen_tempname, path_search, Make, L_TMPNAM};
    use crate::core::{config, sys};
    use crate::hook;

    use crate::core::sys::set_errno;

    /// The template as a mutable byte slice (without its NUL) while `tempname` is sealed;
    /// `None` (unsealed, or a null template) leaves the call to the real function.
    ///
    /// # Safety
    /// `t` is null or a writable NUL-terminated string.
    unsafe fn sealed_template<'a>(t: *mut libc::c_char) -> Option<&'a mut [u8]> {
        if !config::sealed(flags::TEMPNAME) || t.is_null() {
            return None;
        }
        // SAFETY: per the contract, and not null.
        Some(unsafe { core::slice::from_raw_parts_mut(t as *mut u8, sys::cstr_len(t)) })
    }

    /// The `mk*stemp*` body: a sealed file from template `tmpl` (`suffix` bytes after its
    /// `X`s, `extra` open flags), or `None` to call the real function.
    ///
    /// # Safety
    /// `tmpl` null or a writable NUL-terminated string.
    #[inline(always)]
    unsafe fn mkstemp_sealed(tmpl: *mut c_char, suffix: c_int, extra: c_int) -> Option<c_int> {
        // SAFETY: the caller's writable template.
        let t = unsafe { sealed_template(tmpl) }?;
        if suffix < 0 {
            set_errno(libc::EINVAL);
            return Some(-1);
        }
        Some(
            gen_tempname(t, suffix as usize, Make::File(extra)).unwrap_or_else(|e| {
                set_errno(e);
                -1
            }),
        )
    }

    hook! {
        /// # Safety
        /// As glibc's `mkstemp`: the template is a writable C string.
        fn mkstemp | mkstemp64(tmpl: *mut c_char) -> c_int;
        fid = Mkstemp;
        // SAFETY: forwarded contract.
        |real| unsafe { mkstemp_sealed(tmpl, 0, 0) }.unwrap_or_else(|| real(tmpl))
    }

    hook! {
        /// # Safety
        /// As glibc's `mkostemp`: the template is a writable C string.
        fn mkostemp | mkostemp64(tmpl: *mut c_char, fl: c_int) -> c_int;
        fid = Mkostemp;
        // SAFETY: forwarded contract.
        |real| unsafe { mkstemp_sealed(tmpl, 0, fl) }.unwrap_or_else(|| real(tmpl, fl))
    }

    hook! {
        /// # Safety
        /// As glibc's `mkstemps`: the template is a writable C string.
        fn mkstemps | mkstemps64(tmpl: *mut c_char, sl: c_int) -> c_int;
        fid = Mkstemps;
        // SAFETY: forwarded contract.
        |real| unsafe { mkstemp_sealed(tmpl, sl, 0) }.unwrap_or_else(|| real(tmpl, sl))
    }

    hook! {
        /// # Safety
        /// As glibc's `mkostemps`: the template is a writable C string.
        fn mkostemps | mkostemps64(tmpl: *mut c_char, sl: c_int, fl: c_int) -> c_int;
        fid = Mkostemps;
        // SAFETY: forwarded contract.
        |real| unsafe { mkstemp_sealed(tmpl, sl, fl) }.unwrap_or_else(|| real(tmpl, sl, fl))
    }

    hook! {
        /// # Safety
        /// As `mkdtemp(3)`.
        fn mkdtemp(tmpl: *mut c_char) -> *mut c_char;
        fid = Mkdtemp;
        // SAFETY: the caller's writable template.
        |real| match unsafe { sealed_template(tmpl) } {
            Some(t) => name_or_null(gen_tempname(t, 0, Make::Dir).map(|_| tmpl)),
            None => real(tmpl),
        }
    }

    hook! {
        /// # Safety
        /// As `mktemp(3)`.
        fn mktemp(tmpl: *mut c_char) -> *mut c_char;
        fid = Mktemp;
        |real| {
            // SAFETY: the caller's writable template.
            let Some(t) = (unsafe { sealed_template(tmpl) }) else {
                return real(tmpl);
            };
            if let Err(e) = gen_tempname(t, 0, Make::Name) {
                set_errno(e);
                // SAFETY: tmpl is writable (at least its NUL).
                unsafe { *tmpl = 0 };
            }
            tmpl
        }
    }

    /// What a name-returning function gives back: the name, or null with `errno` set.
    fn name_or_null(r: Result<*mut c_char, i32>) -> *mut c_char {
        r.unwrap_or_else(|e| {
            set_errno(e);
            core::ptr::null_mut()
        })
    }

    /// `buf` gets a fresh name from `path_search` + `gen_tempname(Name)`.
    fn fresh_name(
        buf: &mut [u8],
        dir: Option<&[u8]>,
        pfx: Option<&[u8]>,
        try_tmpdir: bool,
    ) -> Result<usize, i32> {
        let n = path_search(buf, dir, pfx, try_tmpdir)?;
        gen_tempname(&mut buf[..n], 0, Make::Name)?;
        Ok(n)
    }

    hook! {
        /// # Safety
        /// As `tempnam(3)`: the result is `malloc`ed.
        fn tempnam(dir: *const c_char, pfx: *const c_char) -> *mut c_char;
        fid = Tempnam;
        |real| {
            if !config::sealed(flags::TEMPNAME) {
                return real(dir, pfx);
            }
            let mut buf = [0u8; 4096];
            // SAFETY: null or NUL-terminated per the contract.
            let (d, p) = unsafe {
                (
                    (!dir.is_null()).then(|| sys::cstr(dir)),
                    (!pfx.is_null()).then(|| sys::cstr(pfx)),
                )
            };
            name_or_null(fresh_name(&mut buf, d, p, true).map(|n| {
                // SAFETY: malloc is not interposed by the shim; we copy n+1 bytes in.
                unsafe {
                    let out = libc::malloc(n + 1) as *mut u8;
                    if !out.is_null() {
                        core::ptr::copy_nonoverlapping(buf.as_ptr(), out, n + 1);
                    }
                    out as *mut libc::c_char
                }
            }))
        }
    }

    struct StaticName(UnsafeCell<[u8; L_TMPNAM]>);
    // SAFETY: like glibc's own static tmpnam buffer: not thread-safe by the function's contract.
    unsafe impl Sync for StaticName {}
    static TMPNAM_BUF: StaticName = StaticName(UnsafeCell::new([0; L_TMPNAM]));

    /// # Safety
    /// `s` null (for `tmpnam` only) or writable for `L_tmpnam` bytes.
    unsafe fn tmpnam_into(s: *mut libc::c_char) -> *mut libc::c_char {
        let mut buf = [0u8; L_TMPNAM];
        name_or_null(fresh_name(&mut buf, None, None, false).map(|n| {
            let out = if s.is_null() {
                TMPNAM_BUF.0.get() as *mut u8
            } else {
                s as *mut u8
            };
            // SAFETY: out is writable for L_TMPNAM >= n + 1 bytes.
            unsafe { core::ptr::copy_nonoverlapping(buf.as_ptr(), out, n + 1) };
            out as *mut libc::c_char
        }))
    }

    hook! {
        /// # Safety
        /// As `tmpnam(3)`.
        fn tmpnam(s: *mut c_char) -> *mut c_char;
        fid = Tmpnam;
        // SAFETY: forwarded contract.
        |real| if config::sealed(flags::TEMPNAME) { unsafe { tmpnam_into(s) } } else { real(s) }
    }

    hook! {
        /// # Safety
        /// As `tmpnam_r(3)`.
        fn tmpnam_r(s: *mut c_char) -> *mut c_char;
        fid = Tmpnam;
        |real| {
            if !config::sealed(flags::TEMPNAME) {
                return real(s);
            }
            if s.is_null() {
                return core::ptr::null_mut();
            }
            // SAFETY: forwarded contract.
            unsafe { tmpnam_into(s) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_templates_are_einval() {
        let mut t = *b"/tmp/abcXXXXX";
        assert_eq!(gen_tempname(&mut t, 0, Make::Name), Err(libc::EINVAL));
        let mut t = *b"XXXXXX.c";
        assert_eq!(gen_tempname(&mut t, 3, Make::Name), Err(libc::EINVAL));
        let mut t = *b"XX";
        assert_eq!(gen_tempname(&mut t, 0, Make::Name), Err(libc::EINVAL));
    }

    #[test]
    fn fills_only_the_xs() {
        let mut t = *b"/nonexistent-dir-for-seal/aXXXXXX.c";
        assert_eq!(gen_tempname(&mut t, 2, Make::Name), Ok(0));
        assert!(t.starts_with(b"/nonexistent-dir-for-seal/a"));
        assert!(t.ends_with(b".c"));
        assert!(t[27..33].iter().all(|c| LETTERS.contains(c)));
        assert_ne!(&t[27..33], b"XXXXXX");
    }

    #[test]
    fn retries_follow_the_first_name_and_differ() {
        let k = name_key(b"abcdef");
        assert_ne!(k, name_key(b"abcdeg"));
        let mut names = std::collections::HashSet::new();
        for attempt in 1..200 {
            let mut n = [0u8; 6];
            retry_name(k, attempt, &mut n);
            assert!(n.iter().all(|c| LETTERS.contains(c)));
            let mut again = [0u8; 6];
            retry_name(k, attempt, &mut again);
            assert_eq!(n, again);
            names.insert(n);
        }
        assert_eq!(names.len(), 199, "retries repeat a name");
    }

    #[test]
    fn path_search_like_glibc() {
        let mut b = [0u8; 64];
        let n = path_search(&mut b, Some(b"/nonexistent"), Some(b"abcdefgh"), true).unwrap();
        assert_eq!(&b[..n], b"/tmp/abcdeXXXXXX");
        let n = path_search(&mut b, None, None, false).unwrap();
        assert_eq!(&b[..n], b"/tmp/fileXXXXXX");
        let mut small = [0u8; 10];
        assert_eq!(
            path_search(&mut small, None, None, false),
            Err(libc::EINVAL)
        );
    }
}
