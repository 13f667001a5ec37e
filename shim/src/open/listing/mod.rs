//! Listings of `/proc` and of a process's `task` directory, as a pid namespace shows them
//! (family `pid`): every process of the run under its virtual pid, every thread of the run
//! under its virtual tid, numbers of processes outside the run hidden, every other name (`self`,
//! `sys`, `.`) unchanged. `d_type`, `d_ino` and `d_off` stay the kernel's.
//!
//! The hooks (`hooks.rs`) are `readdir`, `readdir64`, `readdir_r`, `readdir64_r` (glibc
//! reads its buffer with an internal `getdents`, past the PLT, so the entries are rewritten as
//! they leave it), `getdents64` (the libc wrapper, for programs that call it directly) and
//! `closedir`, which forgets a stream. Which directory a stream lists is decided once, by the
//! first numeric name it yields: one `fstat` of its descriptor (procfs's `st_dev`; the root of
//! procfs is inode 1) and, for another procfs directory, one `readlink` of
//! `/proc/self/fd/<fd>` (`/proc/<pid>/task`). The answer is cached per descriptor below
//! [`FDS`] and forgotten when the descriptor is closed or replaced (`closedir`, `close`,
//! `dup2`, `dup3`); a directory without numeric names costs nothing, one with them that is
//! not on procfs one `fstat` per stream (and the process one `statfs` and `stat` of `/proc`,
//! the first time).
//!
//! A renamed `readdir` record is a copy in one of [`SLOTS`] per-stream buffers (a virtual pid
//! can be longer than the real one its record was sized for), valid until the stream's next
//! call, as POSIX says. `getdents64` rewrites the caller's buffer through a stack buffer; when
//! the renamed records do not all fit, the descriptor is moved back (`lseek` to the last
//! record returned: procfs directories are seekable by `d_off`) and the rest comes next call.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering::*};

use seal_abi::{unsealed, Fid, LAUNCHER_VPID, NO_DETAIL};

pub use records::{
    has_numeric, numeric, reclen_for, record, rewrite, write_record, Record, Rewritten,
    DIRENT_SIZE, NAME_AT,
};

use crate::process::vpid;
use crate::{census, config, sys, table};

#[cfg(not(test))]
mod hooks;
pub mod records;

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

/// Is `p` (a `/proc/self/fd/<n>` link target) a process's task directory?
pub fn is_task_path(p: &[u8]) -> bool {
    p.strip_prefix(b"/proc/")
        .and_then(|r| r.strip_suffix(b"/task"))
        .is_some_and(|pid| numeric(pid).is_some())
}

/// The number a listing of `kind` shows for real pid or tid `real`: its virtual one when a
/// process or thread of the run holds it, else `None` (hidden). The launcher (999) is the
/// run's parent, outside it, as a pid namespace's parent is: not listed.
pub fn shown(t: &table::Table, kind: Kind, real: i32) -> Option<i32> {
    let v = t.virt(real)?;
    (kind != Kind::Root || v != LAUNCHER_VPID).then_some(v)
}

// ---- which directory a descriptor lists -----------------------------------------------------

/// Descriptors below this have their [`Kind`] cached; others are looked at on every use.
pub const FDS: usize = 1024;
/// Per descriptor: 0 not looked at, else `1 + Kind`.
static KINDS: [AtomicU8; FDS] = [const { AtomicU8::new(0) }; FDS];
/// procfs's `st_dev` + 2; 0 not looked up yet, 1 no procfs at `/proc`.
static PROC_DEV: AtomicU64 = AtomicU64::new(0);

fn code(k: Kind) -> u8 {
    match k {
        Kind::Other => 1,
        Kind::Root => 2,
        Kind::Task => 3,
    }
}

/// What `fd` lists (cached); a newly found `/proc` listing is counted as `fid` from `ra`.
pub fn kind_of(fd: i32, fid: Fid, ra: u64) -> Kind {
    let slot = usize::try_from(fd).ok().and_then(|i| KINDS.get(i));
    match slot.map(|s| s.load(Acquire)) {
        Some(1) => return Kind::Other,
        Some(2) => return Kind::Root,
        Some(3) => return Kind::Task,
        _ => {}
    }
    let k = classify_fd(fd);
    if k != Kind::Other {
        census::count(fid, NO_DETAIL, ra);
    }
    if let Some(s) = slot {
        s.store(code(k), Release);
    }
    k
}

/// `fd` was closed or replaced: whatever reuses its number is looked at afresh.
#[inline]
pub fn forget(fd: i32) {
    if let Some(s) = usize::try_from(fd).ok().and_then(|i| KINDS.get(i)) {
        s.store(0, Release);
    }
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
    let mut p = sys::StackBuf::<40>::new();
    p.push(b"/proc/self/fd/").push_i64(fd as i64);
    let mut link = [0u8; 64];
    let n = sys::readlink(p.as_cstr(), &mut link);
    if n < link.len() && is_task_path(&link[..n]) {
        Kind::Task
    } else {
        Kind::Other
    }
}

/// The `st_dev` of procfs at `/proc` (looked up once per process image).
fn proc_dev() -> Option<u64> {
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

/// What to show for one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    Hide,
    Rename(i32),
}

/// The verdict on `name`, an entry of the stream on descriptor `fd()` (asked only for a
/// numeric name), read through `fid` from `ra`.
#[inline]
pub fn verdict(name: &[u8], fd: impl FnOnce() -> i32, fid: Fid, ra: u64) -> Verdict {
    let Some(real) = numeric(name) else {
        return Verdict::Keep;
    };
    if crate::real::Reentry::inside() || !config::in_run() {
        return Verdict::Keep;
    }
    let kind = kind_of(fd(), fid, ra);
    if kind == Kind::Other || !vpid::sealed() {
        return Verdict::Keep;
    }
    let Some(t) = table::get() else {
        return Verdict::Keep;
    };
    match shown(&t, kind, real) {
        None => Verdict::Hide,
        Some(v) if v == real => Verdict::Keep,
        Some(v) => Verdict::Rename(v),
    }
}

// ---- readdir: a record per stream -----------------------------------------------------------

/// Streams that can hold a renamed `readdir` record at once.
pub const SLOTS: usize = 32;

#[repr(C, align(8))]
struct Dirent(UnsafeCell<[u8; DIRENT_SIZE]>);

/// `OWNER[i]`: the `DIR *` that slot `i` belongs to (0 free).
static OWNER: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static RECORDS: Records = Records([const { Dirent(UnsafeCell::new([0; DIRENT_SIZE])) }; SLOTS]);

struct Records([Dirent; SLOTS]);
// SAFETY: slot `i` is written only by readdir on the stream that owns it (claimed by CAS), and
// read by the caller of that readdir until its next call on the stream (POSIX).
unsafe impl Sync for Records {}

/// The slot of stream `dir`, claimed if it has none; `None` when every slot is taken.
fn slot_of(dir: usize) -> Option<usize> {
    if let Some(i) = OWNER.iter().position(|o| o.load(Acquire) == dir) {
        return Some(i);
    }
    OWNER
        .iter()
        .position(|o| o.compare_exchange(0, dir, AcqRel, Relaxed).is_ok())
}

/// Stream `dir` is being closed: its slot is free again.
pub fn release(dir: usize) {
    for o in &OWNER {
        let _ = o.compare_exchange(dir, 0, AcqRel, Relaxed);
    }
}

/// glibc's record `e` of stream `dir`, renamed to `v`: a copy in the stream's slot, or `e`
/// itself renamed in place when every slot is taken and the name fits; null when neither (the
/// record is then hidden, and that reported).
///
/// # Safety
/// `e` is a record `readdir` just returned for `dir` (valid for its `d_reclen` bytes).
pub unsafe fn renamed(dir: usize, e: *mut u8, v: i32) -> *mut u8 {
    // SAFETY: per the contract, e is valid for its header, then for d_reclen bytes.
    let src = unsafe {
        let reclen = u16::from_ne_bytes([*e.add(16), *e.add(17)]) as usize;
        core::slice::from_raw_parts_mut(e, reclen.max(NAME_AT))
    };
    let Some(r) = record(src, 0) else {
        return e;
    };
    let mut digits = sys::StackBuf::<16>::new();
    let name = digits.push_i64(v as i64).as_bytes();
    if let Some(i) = slot_of(dir) {
        let d = RECORDS.0[i].0.get();
        // SAFETY: the slot is this stream's (see `Records`).
        let dst = unsafe { &mut *d };
        if write_record(dst, r.ino, r.off, r.dtype, name).is_some() {
            return d as *mut u8;
        }
    }
    if NAME_AT + name.len() < src.len() {
        src[NAME_AT..NAME_AT + name.len()].copy_from_slice(name);
        src[NAME_AT + name.len()] = 0;
        return e;
    }
    no_slot();
    core::ptr::null_mut()
}

/// Renames the caller's `readdir_r` entry `e` to `v` in place.
///
/// # Safety
/// `e` is a whole `struct dirent64` (its name has room for 255 bytes and a NUL).
pub unsafe fn rename_entry(e: *mut u8, v: i32) {
    let mut digits = sys::StackBuf::<16>::new();
    let name = digits.push_i64(v as i64).as_bytes();
    // SAFETY: per the contract, e holds at least a header and a name of this length.
    let rec = unsafe { core::slice::from_raw_parts_mut(e, reclen_for(name.len())) };
    let ino = u64::from_ne_bytes(rec[0..8].try_into().unwrap_or([0; 8]));
    let off = i64::from_ne_bytes(rec[8..16].try_into().unwrap_or([0; 8]));
    let dtype = rec[18];
    write_record(rec, ino, off, dtype, name);
}

#[cold]
fn no_slot() {
    census::record_unsealed(
        unsealed::UNSUPPORTED_CALL,
        b"too many /proc listings open at once: a process of the run is left out of one",
    );
}

// ---- getdents64 -----------------------------------------------------------------------------

/// Bytes of records rewritten per `getdents64` call on a `/proc` listing.
const SCRATCH: usize = 4096;
/// Below this a caller's buffer may not hold a renamed first record (its record can grow).
const SMALL: usize = 32;

fn lseek(fd: i32, off: i64, whence: i32) -> i64 {
    // SAFETY: no pointers.
    unsafe { sys::syscall3(libc::SYS_lseek, fd as i64, off, whence as i64) }
}

/// `getdents64(fd, buf, count)` with `real` the libc function bound to `fd`: the records of
/// a `/proc` listing rewritten (see the module doc).
///
/// # Safety
/// As `getdents64(2)`: `buf` valid for `count` bytes.
pub unsafe fn getdents(
    fd: i32,
    buf: *mut u8,
    count: usize,
    ra: u64,
    real: impl Fn(*mut u8, usize) -> isize,
) -> isize {
    if buf.is_null() || crate::real::Reentry::inside() || !config::in_run() {
        return real(buf, count);
    }
    let listing = |k: u8| k == 2 || k == 3;
    let mut ask = match usize::try_from(fd).ok().and_then(|i| KINDS.get(i)) {
        Some(k) if listing(k.load(Acquire)) && vpid::sealed() => count.min(SCRATCH),
        _ => count,
    };
    let start = if count < SMALL {
        lseek(fd, 0, libc::SEEK_CUR)
    } else {
        -1
    };
    loop {
        let n = real(buf, ask);
        if n <= 0 {
            return n;
        }
        // SAFETY: the kernel wrote n <= count bytes of records at buf.
        let src = unsafe { core::slice::from_raw_parts(buf as *const u8, n as usize) };
        if !has_numeric(src) {
            return n;
        }
        let kind = kind_of(fd, Fid::GetdentsProc, ra);
        if kind == Kind::Other || !vpid::sealed() {
            return n;
        }
        let Some(t) = table::get() else {
            return n;
        };
        let mut scratch = [0u8; SCRATCH];
        let cap = count.min(SCRATCH);
        let r = rewrite(src, &mut scratch[..cap], &mut |p| shown(&t, kind, p));
        if r.full {
            // Resume after the last record taken, or (nothing taken) where this call began.
            let back = r.resume.unwrap_or(start);
            if back < 0 || lseek(fd, back, libc::SEEK_SET) < 0 || r.written == 0 {
                sys::set_errno(libc::EINVAL);
                return -1;
            }
        } else if r.written == 0 {
            // Only processes outside the run in this batch: read on.
            ask = count.min(SCRATCH);
            continue;
        }
        // SAFETY: written <= cap <= count bytes, into the caller's buffer.
        unsafe { core::ptr::copy_nonoverlapping(scratch.as_ptr(), buf, r.written) };
        return r.written as isize;
    }
}

#[cfg(test)]
mod tests {
    use super::records::tests::{names, records};
    use super::*;
    use crate::table::tests::Owned;

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
        let list: Vec<(u64, i64, u8, &str)> = list
            .iter()
            .map(|(a, b, c, d)| (*a, *b, *c, d.as_str()))
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
    fn task_directories_are_recognised_by_their_link() {
        assert!(is_task_path(b"/proc/4242/task"));
        for p in [
            &b"/proc/self/task"[..],
            b"/proc/4242/task/4243",
            b"/proc/4242/fd",
            b"/proc/04242/task",
            b"/tmp/proc/4242/task",
            b"/proc/task",
            b"",
        ] {
            assert!(!is_task_path(p), "{}", String::from_utf8_lossy(p));
        }
    }

    #[test]
    fn a_renamed_readdir_record_lives_in_its_streams_slot() {
        let mut rec = records(&[(77, 88, libc::DT_DIR, "57")]);
        let dir = 0x1234_5670usize;
        // SAFETY: rec is one valid record.
        let p = unsafe { renamed(dir, rec.as_mut_ptr(), 12345) };
        assert_ne!(p, rec.as_mut_ptr());
        // SAFETY: p is the slot's record, DIRENT_SIZE bytes.
        let got = unsafe { core::slice::from_raw_parts(p, DIRENT_SIZE) };
        let r = record(got, 0).unwrap();
        assert_eq!((r.name, r.ino, r.off, r.dtype), (&b"12345"[..], 77, 88, 4));
        // The same stream reuses its slot; another gets its own.
        // SAFETY: as above.
        let q = unsafe { renamed(dir, rec.as_mut_ptr(), 2000) };
        assert_eq!(p, q);
        // SAFETY: as above.
        let other = unsafe { renamed(dir + 8, rec.as_mut_ptr(), 2001) };
        assert_ne!(other, q);
        release(dir);
        release(dir + 8);
        assert!(OWNER.iter().all(|o| o.load(Relaxed) != dir));
    }
}
