//! Listings of `/proc` and of a process's `task` directory, as a pid namespace shows them
//! (family `pid`): every process of the run under its virtual pid, every thread of the run
//! under its virtual tid, in ascending order, numbers outside the run (and the launcher, the
//! run's parent) left out, every other name (`self`, `sys`, `.`) unchanged and where the
//! kernel put it. `d_type` is the kernel's; `d_ino` and `d_off` are real (see `sorted`).
//!
//! The hooks (`hooks.rs`) are `readdir`, `readdir64`, `readdir_r`, `readdir64_r` (glibc
//! reads its buffer with an internal `getdents`, past the PLT, so the entries are handled as
//! they leave it), `getdents64` (the libc wrapper, for programs that call it directly;
//! `getdents.rs`) and `closedir`, which forgets a stream. Which directory a stream lists is
//! decided once, by the first numeric name it yields: one `fstat` of its descriptor (procfs's
//! `st_dev`; the root of procfs is inode 1) and, for another procfs directory, one `readlink`
//! of `/proc/self/fd/<fd>` (`/proc/<pid>/task`). The answer is cached per descriptor (in the
//! descriptor table, `core::fd`) and forgotten when the descriptor is closed or replaced
//! (`closedir`, `close`, `dup2`, `dup3`); a directory without numeric names costs nothing,
//! one with them that is not on procfs one `fstat` per stream (and the process one `statfs`
//! and `stat` of `/proc`, the first time).
//!
//! At its first number a listing's stream is read to its end and its numbers are returned in
//! virtual pid order from a fixed slot (`sorted`): the kernel's order is the real pids', which
//! wrap. When all [`sorted::SLOTS`] slots are taken (that many listings half read at once),
//! a stream comes in the kernel's order instead: a `readdir` record renamed in place (a
//! virtual pid longer than the real one's record can hold is left out, and reported), a
//! `getdents64` buffer rewritten through a stack buffer.

use core::sync::atomic::{AtomicU64, AtomicU8, Ordering::*};

use seal_abi::{unsealed, Fid, LAUNCHER_VPID, NO_DETAIL};

pub use records::{
    has_numeric, numeric, reclen_for, record, rewrite, write_record, Record, Rewritten,
    DIRENT_SIZE, NAME_AT,
};

use crate::core::{census, config, sys, table};
use crate::process::vpid;

mod getdents;
#[cfg(not(test))]
pub(crate) mod hooks;
pub mod records;
pub mod sorted;

pub use getdents::getdents;

/// Inode of the root directory of procfs (`PROC_ROOT_INO`).
const PROC_ROOT_INO: u64 = 1;
/// `statfs` magic of procfs.
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

/// What a directory stream lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Anything but the two below: left alone.
    Other,
    /// The root of procfs: processes.
    Root,
    /// `/proc/<pid>/task`: threads.
    Task,
}

/// Whose task directory `p` (a `/proc/self/fd/<n>` link target) is, if it is one.
pub fn task_owner(p: &[u8]) -> Option<i32> {
    numeric(p.strip_prefix(b"/proc/")?.strip_suffix(b"/task")?)
}

/// Is `p` (a `/proc/self/fd/<n>` link target) a process's task directory?
pub fn is_task_path(p: &[u8]) -> bool {
    task_owner(p).is_some()
}

/// `base/path`, NUL-terminated, into `out`; `false` when it does not fit.
pub fn join(base: &[u8], path: &[u8], out: &mut [u8; 4096]) -> bool {
    let n = base.len() + 1 + path.len();
    if n >= out.len() {
        return false;
    }
    out[..base.len()].copy_from_slice(base);
    out[base.len()] = b'/';
    out[base.len() + 1..n].copy_from_slice(path);
    out[n] = 0;
    true
}

/// The number a listing of `kind` shows for real pid or tid `real`: its virtual one when a
/// process or thread of the run holds it, else `None` (hidden). The launcher (999) is the
/// run's parent, outside it, as a pid namespace's parent is: not listed; nor are the leaders
/// of its session and group (998, 997) when they are outside processes.
pub fn shown(t: &table::Table, kind: Kind, real: i32) -> Option<i32> {
    let v = t.virt(real)?;
    (kind != Kind::Root || v > LAUNCHER_VPID).then_some(v)
}

// ---- which directory a descriptor lists -----------------------------------------------------

/// `fd`'s byte of the descriptor table: 0 not looked at, else [`code`] of its kind, plus
/// [`COUNTED`] once a listing of it was counted. Descriptors the table does not cover are
/// looked at on every use.
#[inline(always)]
fn kind_mark(fd: i32) -> Option<&'static AtomicU8> {
    crate::core::fd::mark(fd, crate::FD_MARK_LISTING)
}
const COUNTED: u8 = 4;
/// procfs's `st_dev` + 2; 0 not looked up yet, 1 no procfs at `/proc`.
static PROC_DEV: AtomicU64 = AtomicU64::new(0);

fn code(k: Kind) -> u8 {
    match k {
        Kind::Other => 1,
        Kind::Root => 2,
        Kind::Task => 3,
    }
}

fn decode(c: u8) -> Option<Kind> {
    match c & 3 {
        1 => Some(Kind::Other),
        2 => Some(Kind::Root),
        3 => Some(Kind::Task),
        _ => None,
    }
}

/// What `fd` lists (cached); a `/proc` listing is counted as `fid` from `ra`, once.
pub fn kind_of(fd: i32, fid: Fid, ra: u64) -> Kind {
    let slot = kind_mark(fd);
    let c = slot.map_or(0, |s| s.load(Acquire));
    let k = decode(c).unwrap_or_else(|| classify_fd(fd));
    if k != Kind::Other && c & COUNTED == 0 {
        census::count(fid, NO_DETAIL, ra);
    }
    // A vfork child's descriptors are its own; the cache is its parent's.
    if let Some(s) = slot.filter(|_| !crate::core::vfork::in_child()) {
        s.store(code(k) | COUNTED, Release);
    }
    k
}

/// What `fd` is (cached), for a path relative to it; nothing is counted.
fn kind_quiet(fd: i32) -> Kind {
    let slot = kind_mark(fd);
    if let Some(k) = decode(slot.map_or(0, |s| s.load(Acquire))) {
        return k;
    }
    let k = classify_fd(fd);
    if let Some(s) = slot.filter(|_| !crate::core::vfork::in_child()) {
        let _ = s.compare_exchange(0, code(k), AcqRel, Relaxed);
    }
    k
}

/// `fd` was closed or replaced, or its stream closed (`closedir`, which closes the descriptor
/// inside glibc, past the `close` hook): whatever reuses its number is looked at afresh.
/// (`core::fd::forget` zeroes the whole row of a closed descriptor too.)
#[inline]
pub fn forget(fd: i32) {
    if let Some(s) = kind_mark(fd) {
        s.store(0, Release);
    }
    sorted::release_fd(fd);
}

fn classify_fd(fd: i32) -> Kind {
    // SAFETY: an all-zero stat is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is a valid out-pointer; a bad fd only fails.
    let r = unsafe { sys::syscall3(libc::SYS_fstat, fd as i64, &mut st as *mut _ as i64, 0) };
    if r != 0 || st.st_mode & libc::S_IFMT != libc::S_IFDIR || Some(st.st_dev) != proc_dev() {
        return Kind::Other;
    }
    if st.st_ino == PROC_ROOT_INO {
        return Kind::Root;
    }
    if task_of(fd).is_some() {
        Kind::Task
    } else {
        Kind::Other
    }
}

/// The real pid whose task directory `fd` is open on, if it is one (one `readlink`).
fn task_of(fd: i32) -> Option<i32> {
    let mut p = sys::StackBuf::<40>::new();
    p.push(b"/proc/self/fd/").push_i64(fd as i64);
    let mut link = [0u8; 64];
    let n = sys::readlink(p.as_cstr(), &mut link);
    (n < link.len()).then(|| task_owner(&link[..n])).flatten()
}

/// The `st_dev` of procfs at `/proc` (looked up once per process image).
pub(crate) fn proc_dev() -> Option<u64> {
    let mut v = PROC_DEV.load(Relaxed);
    if v == 0 {
        v = find_proc_dev();
        PROC_DEV.store(v, Relaxed);
    }
    (v > 1).then(|| v - 2)
}

#[cold]
fn find_proc_dev() -> u64 {
    // SAFETY: all-zero values of these plain C structs are valid.
    let (mut fs, mut st): (libc::statfs, libc::stat) = unsafe { core::mem::zeroed() };
    let path = b"/proc\0";
    // SAFETY: path is NUL-terminated; fs and st are valid out-pointers.
    let ok = unsafe {
        sys::syscall3(
            libc::SYS_statfs,
            path.as_ptr() as i64,
            &mut fs as *mut _ as i64,
            0,
        ) == 0
            && fs.f_type == PROC_SUPER_MAGIC
            && sys::syscall3(
                libc::SYS_stat,
                path.as_ptr() as i64,
                &mut st as *mut _ as i64,
                0,
            ) == 0
    };
    match st.st_dev.checked_add(2) {
        Some(d) if ok => d,
        _ => 1,
    }
}

// ---- one name of a stream -------------------------------------------------------------------

/// When `name`, an entry of the stream on descriptor `fd()`, is a number of a `/proc` listing
/// the pid family rewrites: the listing's kind and the run table. Read through `fid` from
/// `ra` (counted when the stream is found to be such a listing, sealed or not).
#[inline]
pub fn listed<'t>(
    name: &[u8],
    fd: &dyn Fn() -> i32,
    fid: Fid,
    ra: u64,
) -> Option<(Kind, table::Table<'t>)> {
    numeric(name)?;
    if crate::core::real::Reentry::inside() || !config::in_run() {
        return None;
    }
    let kind = kind_of(fd(), fid, ra);
    if kind == Kind::Other || !vpid::sealed() {
        return None;
    }
    Some((kind, table::get()?))
}

/// The longest record a listing makes: a virtual pid has at most 5 digits.
const MADE: usize = reclen_for(5);

/// The record at `e`.
///
/// # Safety
/// `e` is a record a `readdir` call just returned (valid for its `d_reclen` bytes).
unsafe fn record_at<'a>(e: *const u8) -> Option<Record<'a>> {
    // SAFETY: per the contract: the header first, then d_reclen bytes.
    unsafe {
        let reclen = u16::from_ne_bytes([*e.add(16), *e.add(17)]) as usize;
        record(core::slice::from_raw_parts(e, reclen.max(NAME_AT)), 0)
    }
}

// ---- a name of a listing, relative to its directory -----------------------------------------

/// `path`, relative to directory `dirfd`, as the absolute path it names when `dirfd` is the
/// root of procfs or a task directory and `path` starts with a number (as a listing showed
/// it): `/proc/<n>/…`, or `/proc/<vpid>/task/<n>/…`, NUL-terminated in `out`, so that what
/// applies to absolute paths (virtual numbers translated, `stat` and `status` sealed) applies
/// to it: `find /proc` and tools that `openat` the names they listed. `false` otherwise.
/// `dirfd` is looked at once (one `fstat`, cached as for a listing; a task directory costs a
/// `readlink` each time).
pub fn absolute_at(dirfd: i32, path: &[u8], out: &mut [u8; 4096]) -> bool {
    if dirfd < 0
        || !path.first().is_some_and(u8::is_ascii_digit)
        || crate::core::real::Reentry::inside()
        || !config::in_run()
        || !vpid::sealed()
    {
        return false;
    }
    let mut base = sys::StackBuf::<48>::new();
    match kind_quiet(dirfd) {
        Kind::Root => base.push(b"/proc"),
        Kind::Task => match task_of(dirfd) {
            // Its owner by virtual pid, which translates back to this one.
            Some(r) => base
                .push(b"/proc/")
                .push_i64(vpid::to_virt(r) as i64)
                .push(b"/task"),
            None => return false,
        },
        Kind::Other => return false,
    };
    join(base.as_bytes(), path, out)
}

/// The target of `/proc/self` (`N`) or `/proc/thread-self` (`N/task/T`), as read from the
/// kernel, with its numbers through `virt`, into `out`; `false` for any other target.
pub fn virtual_self_link<const N: usize>(
    target: &[u8],
    virt: &dyn Fn(i32) -> i32,
    out: &mut sys::StackBuf<N>,
) -> bool {
    let (pid, task) = match target.iter().position(|&c| c == b'/') {
        Some(i) => (&target[..i], Some(&target[i..])),
        None => (target, None),
    };
    let Some(pid) = numeric(pid) else {
        return false;
    };
    out.push_i64(virt(pid) as i64);
    if let Some(t) = task {
        let Some(tid) = t.strip_prefix(b"/task/").and_then(numeric) else {
            return false;
        };
        out.push(b"/task/").push_i64(virt(tid) as i64);
    }
    true
}

/// After `readlink(path)` put `n` bytes into `buf` (`len` long): the link of `/proc/self`
/// or `/proc/thread-self` names the caller by its virtual pid and tid, as `getpid` and
/// `gettid` do (`ls -l /proc`). Returns the length to report.
///
/// # Safety
/// `path` is null or a C string; `buf` valid for `len` bytes, `n` of them the link.
pub unsafe fn self_link(path: *const libc::c_char, buf: *mut u8, len: usize, n: isize) -> isize {
    if n <= 0 || path.is_null() {
        return n;
    }
    // SAFETY: per the contract.
    let p = unsafe { sys::cstr(path) };
    if (p != b"/proc/self" && p != b"/proc/thread-self") || !config::in_run() || !vpid::sealed() {
        return n;
    }
    // SAFETY: per the contract.
    let target = unsafe { core::slice::from_raw_parts(buf as *const u8, n as usize) };
    let mut out = sys::StackBuf::<64>::new();
    if !virtual_self_link(target, &|r| vpid::to_virt(r), &mut out) {
        return n;
    }
    let m = out.len.min(len);
    // SAFETY: m <= len bytes into the caller's buffer.
    unsafe { core::ptr::copy_nonoverlapping(out.as_bytes().as_ptr(), buf, m) };
    m as isize
}

// ---- readdir, readdir_r ---------------------------------------------------------------------

/// What a `readdir`-family hook does next.
pub enum Step {
    /// Return this record (null: the end).
    Return(*mut u8),
    /// Read the next record instead.
    Again,
}

/// After the real `readdir` or `readdir_r` of stream `dir` gave record `e` (null at the
/// end). `next` reads the stream's next record (null at its end); a record made here goes to
/// `out` (a `readdir_r` caller's entry) or, when `out` is null, to the stream's slot.
///
/// # Safety
/// `e` is null or the record just read from `dir`; `next` reads `dir`; `out` is null or a
/// whole `struct dirent64`.
pub unsafe fn readdir_step(
    dir: usize,
    e: *mut u8,
    fd: &dyn Fn() -> i32,
    ra: u64,
    next: &mut dyn FnMut() -> *mut u8,
    out: *mut u8,
) -> Step {
    let key = sorted::dir_key(dir);
    if let Some(i) = sorted::find(key) {
        if e.is_null() {
            // SAFETY: the stream's slot; forwarded contract.
            return Step::Return(unsafe { serve_one(i, fd(), out) });
        }
        // The kernel has records again: the stream was rewound. List it afresh.
        sorted::free(i);
    }
    // Most entries of most directories: not a number, nothing to do.
    // SAFETY: per the contract, a non-null e holds a header and a name.
    if e.is_null() || !(b'1'..=b'9').contains(unsafe { &*e.add(NAME_AT) }) {
        return Step::Return(e);
    }
    // SAFETY: per the contract.
    let Some(rec) = (unsafe { record_at(e) }) else {
        return Step::Return(e);
    };
    let Some((kind, t)) = listed(rec.name, fd, Fid::ReaddirProc, ra) else {
        return Step::Return(e);
    };
    if let Some(i) = sorted::claim(key) {
        // SAFETY: the slot we just claimed.
        let s = &mut unsafe { sorted::state(i) }.list;
        s.take(&t, kind, &rec);
        loop {
            let e = next();
            // SAFETY: a record `next` just read, or null.
            match (!e.is_null()).then(|| unsafe { record_at(e) }).flatten() {
                Some(r) => s.take(&t, kind, &r),
                None => break,
            }
        }
        // SAFETY: as above.
        return Step::Return(unsafe { serve_one(i, fd(), out) });
    }
    // Every slot is taken: this stream comes in the kernel's order.
    let v = match numeric(rec.name).map(|p| (p, shown(&t, kind, p))) {
        Some((_, None)) => return Step::Again,
        Some((p, Some(v))) if v != p => v,
        _ => return Step::Return(e),
    };
    let mut digits = sys::StackBuf::<16>::new();
    let name = digits.push_i64(v as i64).as_bytes();
    let (ino, off, dtype, reclen) = (rec.ino, rec.off, rec.dtype, rec.reclen);
    let dst = if out.is_null() { e } else { out };
    let room = if out.is_null() { reclen } else { MADE };
    if NAME_AT + name.len() < room {
        // SAFETY: `room` bytes of dst are the record's (or the caller's entry's).
        let d = unsafe { core::slice::from_raw_parts_mut(dst, room) };
        write_record(d, ino, off, dtype, name);
        if out.is_null() {
            // Keep the kernel's record length: glibc has already stepped over it.
            d[16..18].copy_from_slice(&(reclen as u16).to_ne_bytes());
        }
        return Step::Return(dst);
    }
    no_slot();
    Step::Again
}

/// The next record of an ordered stream, written to `out` (null: the slot's own record).
///
/// # Safety
/// The caller's stream owns slot `i`; `out` is null or a whole `struct dirent64`.
unsafe fn serve_one(i: usize, fd: i32, out: *mut u8) -> *mut u8 {
    let Some(t) = table::get() else {
        return core::ptr::null_mut();
    };
    // SAFETY: per the contract.
    let sorted::State { list, rec } = unsafe { sorted::state(i) };
    let dst: &mut [u8] = if out.is_null() {
        &mut rec.0
    } else {
        // SAFETY: per the contract, out holds a whole entry; we write at most MADE bytes.
        unsafe { core::slice::from_raw_parts_mut(out, MADE) }
    };
    match list.serve(&t, &mut |r| sorted::ino_of(fd, r), dst) {
        sorted::Served::Record(_) => dst.as_mut_ptr(),
        _ => core::ptr::null_mut(),
    }
}

/// Stream `dir` is being closed.
pub fn closing(dir: usize, fd: i32) {
    sorted::release(sorted::dir_key(dir));
    crate::machine::dirorder::release(crate::machine::dirorder::dir_key(dir));
    forget(fd);
}

#[cold]
fn no_slot() {
    census::record_unsealed(
        unsealed::UNSUPPORTED_CALL,
        b"too many /proc listings open at once: a process of the run is left out of one",
    );
}

#[cfg(test)]
mod tests {
    use super::records::tests::{names, records};
    use super::*;
    use crate::core::table::tests::Owned;

    /// The procfs root of a machine where real pids 4242 (the root command, vpid 1000), 4250
    /// (vpid 12345) and 4243 (the launcher, 999) belong to the run, and 1, 17 and 5000 do not.
    fn root_listing() -> Vec<u8> {
        records(&[
            (1, 1, libc::DT_DIR, "."),
            (1, 2, libc::DT_DIR, ".."),
            (4026531, 3, libc::DT_DIR, "sys"),
            (4026532, 4, libc::DT_LNK, "self"),
            (4026533, 5, libc::DT_LNK, "thread-self"),
            (9001, 257, libc::DT_DIR, "1"),
            (9002, 273, libc::DT_DIR, "17"),
            (9003, 4498, libc::DT_DIR, "4242"),
            (9004, 4499, libc::DT_DIR, "4243"),
            (9005, 4506, libc::DT_DIR, "4250"),
            (9006, 5256, libc::DT_DIR, "5000"),
        ])
    }

    fn run_table() -> Owned {
        let o = Owned::new();
        let t = o.table();
        t.register(1000, 4242);
        t.register(12345, 4250);
        t.register(LAUNCHER_VPID, 4243);
        o
    }

    #[test]
    fn a_root_listing_shows_the_run_under_virtual_pids_and_hides_the_rest() {
        let o = run_table();
        let t = o.table();
        let src = root_listing();
        assert!(has_numeric(&src));
        let mut dst = vec![0u8; 4096];
        let r = rewrite(&src, &mut dst, &mut |p| shown(&t, Kind::Root, p));
        assert_eq!(
            r,
            Rewritten {
                written: r.written,
                full: false,
                resume: Some(5256)
            }
        );
        let got = names(&dst[..r.written]);
        let want = [
            (".", 1, libc::DT_DIR, 1),
            ("..", 2, libc::DT_DIR, 1),
            ("sys", 3, libc::DT_DIR, 4026531),
            ("self", 4, libc::DT_LNK, 4026532),
            ("thread-self", 5, libc::DT_LNK, 4026533),
            ("1000", 4498, libc::DT_DIR, 9003),
            ("12345", 4506, libc::DT_DIR, 9005),
        ];
        let want: Vec<_> = want
            .iter()
            .map(|&(n, o, t, i)| (n.to_string(), o, t, i))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_task_listing_shows_virtual_tids_and_only_the_root_hides_the_launcher() {
        let o = run_table();
        let t = o.table();
        t.register(1500, 4244);
        let src = records(&[
            (1, 1, libc::DT_DIR, "."),
            (2, 2, libc::DT_DIR, ".."),
            (3, 4245, libc::DT_DIR, "4242"),
            (4, 4246, libc::DT_DIR, "4244"),
            (5, 4247, libc::DT_DIR, "4245"),
        ]);
        let mut dst = vec![0u8; 4096];
        let r = rewrite(&src, &mut dst, &mut |p| shown(&t, Kind::Task, p));
        let got: Vec<String> = names(&dst[..r.written]).into_iter().map(|n| n.0).collect();
        assert_eq!(got, [".", "..", "1000", "1500"]);
        assert_eq!(shown(&t, Kind::Task, 4243), Some(LAUNCHER_VPID));
        assert_eq!(shown(&t, Kind::Root, 4243), None);
    }

    #[test]
    fn records_that_grow_past_the_buffer_are_left_for_the_next_call() {
        // Short real pids, long virtual ones: every renamed record grows from 24 to 32 bytes.
        let o = Owned::new();
        let t = o.table();
        for (i, real) in (50..60).enumerate() {
            t.register(20000 + i as i32, real);
        }
        let list: Vec<(u64, i64, u8, String)> = (50..60)
            .map(|p| (p as u64, p as i64 + 1, libc::DT_DIR, p.to_string()))
            .collect();
        let src = records(&list);
        assert_eq!(src.len(), 240);
        // The caller's buffer was as large as the kernel's batch: 7 renamed records fit.
        let mut dst = vec![0u8; src.len()];
        let r = rewrite(&src, &mut dst, &mut |p| shown(&t, Kind::Root, p));
        assert_eq!(
            r,
            Rewritten {
                written: 224,
                full: true,
                resume: Some(57)
            }
        );
        let got = names(&dst[..r.written]);
        assert_eq!(got.len(), 7);
        assert_eq!(got[0].0, "20000");
        assert_eq!(got[6], ("20006".to_string(), 57, libc::DT_DIR, 56));
        // Nothing fits: nothing taken, no position to resume from.
        let mut tiny = [0u8; 24];
        let r = rewrite(&src, &mut tiny, &mut |p| shown(&t, Kind::Root, p));
        assert_eq!(
            r,
            Rewritten {
                written: 0,
                full: true,
                resume: None
            }
        );
    }

    #[test]
    fn hidden_records_still_move_the_resume_point() {
        let o = Owned::new();
        let t = o.table();
        let src = records(&[(1, 10, 4, "17"), (2, 20, 4, "18")]);
        let mut dst = vec![0u8; 4096];
        let r = rewrite(&src, &mut dst, &mut |p| shown(&t, Kind::Root, p));
        assert_eq!(
            r,
            Rewritten {
                written: 0,
                full: false,
                resume: Some(20)
            }
        );
        assert!(!has_numeric(&records(&[(1, 1, 4, "."), (2, 2, 4, "self")])));
    }

    #[test]
    fn names_relative_to_a_listed_directory_are_joined_to_it() {
        let mut out = [0u8; 4096];
        assert!(join(b"/proc", b"1000/stat", &mut out));
        assert_eq!(&out[..16], b"/proc/1000/stat\0");
        assert!(join(b"/proc/1000/task", b"1234", &mut out));
        assert_eq!(&out[..21], b"/proc/1000/task/1234\0");
        assert!(!join(b"/proc", &[b'1'; 4090], &mut out));
        assert!(join(b"/proc", &[b'1'; 4089], &mut out));
    }

    #[test]
    fn self_links_name_the_caller_by_virtual_numbers() {
        let virt = |r: i32| if r == 4242 { 1000 } else { r + 1 };
        let link = |t: &[u8]| {
            let mut out = sys::StackBuf::<64>::new();
            virtual_self_link(t, &virt, &mut out).then(|| out.as_bytes().to_vec())
        };
        assert_eq!(link(b"4242").as_deref(), Some(&b"1000"[..]));
        assert_eq!(
            link(b"4242/task/4250").as_deref(),
            Some(&b"1000/task/4251"[..])
        );
        for t in [&b"self/net"[..], b"4242/fd", b"", b"4242/task/", b"x"] {
            assert_eq!(link(t), None, "{}", String::from_utf8_lossy(t));
        }
    }

    #[test]
    fn task_directories_are_recognised_by_their_link() {
        assert_eq!(task_owner(b"/proc/4242/task"), Some(4242));
        assert!(is_task_path(b"/proc/4242/task"));
        crate::rejects! { |p| is_task_path(p).then_some(()) =>
            "/proc/self/task" "/proc/4242/task/4243" "/proc/4242/fd" "/proc/04242/task"
            "/tmp/proc/4242/task" "/proc/task" ""
        }
    }
}
