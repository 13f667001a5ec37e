//! Directory order (family `machine`): a sealed process lists a directory in name order,
//! whatever order its file system keeps. ext4 returns entries by the hash of their name under
//! the file system's own hash seed (so the order changes from one file system to the next),
//! tmpfs newest first, btrfs and xfs by their own keys; a golden that holds `ls -f`, `find`,
//! `os.listdir` or a `tar` archive's member order would not travel to another machine.
//!
//! At its first read a stream (a `DIR *`, [`dir_key`], or a descriptor read with
//! `getdents64` or the old `getdents`, [`fd_key`]) is read to its end into a snapshot: the kernel's records copied
//! into an anonymous mapping of the stream's own (grown with `mremap` as it fills, so a
//! directory of 100 000 entries is whole), and an index of them sorted by name, bytewise, with
//! `.` and `..` first. The stream then serves the records in that order; `d_off` is the
//! record's place in it (1, 2, …), and `telldir`/`seekdir` speak of the same places. `d_ino`
//! and `d_type` stay the kernel's. `rewinddir` (or `lseek(fd, 0)` for a descriptor) drops
//! the snapshot, so the next read sees the directory as it is then.
//!
//! The snapshots live in [`SLOTS`] fixed slots claimed with a CAS on an owner word and then
//! used by their stream alone (POSIX does not let two threads read one stream at once), freed
//! by `closedir`, `rewinddir` or `close`; a freed slot keeps a small mapping for the next
//! stream. No lock, no `malloc`. When every slot is taken, or the memory for a snapshot
//! cannot be had, the stream comes in the file system's order (what was already read first,
//! then the rest), and the run says so (an `unsupported-call` event). procfs is left to
//! family `pid` (`open::listing`), whose listings are already in a fixed order.

use core::cell::UnsafeCell;

use seal_abi::unsealed;

pub use crate::core::streams::dir_key;
use crate::core::streams::{fd_key, Cells, Claims};
use crate::core::{census, config, sys};
use crate::open::listing::records::{record, NAME_AT};

mod getdents;
pub use getdents::{getdents, old_record, sys_getdents};

/// Streams that can be sorted at once (a tree walker holds one per level at most).
pub const SLOTS: usize = 256;
/// The first mapping of a snapshot; it doubles as it fills.
const FIRST: usize = 64 << 10;
/// A freed slot keeps a mapping up to this size for the next stream (so at most
/// `SLOTS * KEEP` stays mapped once every stream is closed).
const KEEP: usize = FIRST;
/// Free room a `getdents64` read into the snapshot asks for.
const BATCH: usize = 32 << 10;

/// One stream's snapshot.
pub struct Snap {
    base: *mut u8,
    cap: usize,
    /// Bytes of records in use.
    used: usize,
    /// Records, and where their index starts (per record its offset, low 32 bits, and its
    /// name's length, high 32: sorting compares names without parsing a record).
    n: usize,
    idx_at: usize,
    /// The next place to serve.
    pos: usize,
    /// Sorted (`true`) or, when memory failed, served in the kernel's order from byte `pos`.
    sorted: bool,
    /// The error that ended the read (0: the directory's end), given at the end.
    err: i32,
    /// For a descriptor: where the kernel's stream stood after the snapshot was read.
    end_off: i64,
    /// Served in the kernel's order: the record read when memory failed, given after the
    /// snapshot's (it lives in the real stream's buffer until the stream's next read).
    pending: *mut u8,
}

impl Snap {
    const fn new() -> Snap {
        Snap {
            base: core::ptr::null_mut(),
            cap: 0,
            used: 0,
            n: 0,
            idx_at: 0,
            pos: 0,
            sorted: true,
            err: 0,
            end_off: 0,
            pending: core::ptr::null_mut(),
        }
    }

    fn reset(&mut self) {
        self.used = 0;
        self.n = 0;
        self.idx_at = 0;
        self.pos = 0;
        self.sorted = true;
        self.err = 0;
        self.end_off = 0;
        self.pending = core::ptr::null_mut();
    }

    /// Makes room for `more` bytes past `used`; `false` when no memory could be had.
    fn room(&mut self, more: usize) -> bool {
        let Some(need) = self.used.checked_add(more) else {
            return false;
        };
        if need <= self.cap {
            return true;
        }
        let mut cap = self.cap.max(FIRST);
        while cap < need {
            cap = match cap.checked_mul(2) {
                Some(c) => c,
                None => return false,
            };
        }
        let p = if self.base.is_null() {
            sys::mmap_anon(cap)
        } else {
            // SAFETY: our own mapping of `self.cap` bytes; it may move (offsets are kept).
            let r = unsafe {
                sys::syscall6(
                    libc::SYS_mremap,
                    self.base as i64,
                    self.cap as i64,
                    cap as i64,
                    libc::MREMAP_MAYMOVE as i64,
                    0,
                    0,
                )
            };
            if r < 0 && r > -4096 {
                core::ptr::null_mut()
            } else {
                r as *mut u8
            }
        };
        if p.is_null() {
            return false;
        }
        self.base = p;
        self.cap = cap;
        true
    }

    /// The bytes in use.
    fn bytes(&self) -> &[u8] {
        if self.base.is_null() {
            return &[];
        }
        // SAFETY: `used <= cap` bytes of our mapping.
        unsafe { core::slice::from_raw_parts(self.base, self.used) }
    }

    /// Appends one record (`len` bytes at `rec`); `false` when memory failed.
    ///
    /// # Safety
    /// `rec` is valid for `len` bytes.
    unsafe fn push(&mut self, rec: *const u8, len: usize) -> bool {
        if !self.room(len) {
            return false;
        }
        // SAFETY: `room` made `len` bytes past `used` ours; `rec` per the contract.
        unsafe { core::ptr::copy_nonoverlapping(rec, self.base.add(self.used), len) };
        self.used += len;
        true
    }

    /// Indexes and sorts the records read; `false` (served in the kernel's order) when the
    /// index does not fit.
    fn sort(&mut self) -> bool {
        let mut n = 0;
        let mut at = 0;
        while let Some(r) = record(self.bytes(), at) {
            at += r.reclen;
            n += 1;
        }
        // Whatever does not parse is not served.
        self.used = at;
        let idx_at = self.used.next_multiple_of(8);
        if self.used > u32::MAX as usize || !self.room(idx_at - self.used + n * 8) {
            self.sorted = false;
            self.pos = 0;
            return false;
        }
        self.idx_at = idx_at;
        self.n = n;
        // SAFETY: `room` made `n` u64s at the aligned `idx_at` ours; the records lie before
        // it, so the two views do not overlap.
        let (all, idx) = unsafe {
            (
                core::slice::from_raw_parts(self.base, self.used),
                core::slice::from_raw_parts_mut(self.base.add(idx_at) as *mut u64, n),
            )
        };
        let mut at = 0;
        for slot in idx.iter_mut() {
            let (len, name) = record(all, at).map_or((0, 0), |r| (r.reclen, r.name.len()));
            *slot = at as u64 | (name as u64) << 32;
            at += len;
        }
        let name = |e: u64| {
            let at = (e as u32 as usize) + NAME_AT;
            all.get(at..at + (e >> 32) as usize).unwrap_or(&[])
        };
        idx.sort_unstable_by(|&a, &b| order(name(a), name(b)));
        self.pos = 0;
        true
    }

    /// The next record to serve (its place written as `d_off`), or `None` at the end.
    fn next(&mut self) -> Option<*mut u8> {
        if !self.sorted {
            let Some(r) = record(self.bytes(), self.pos) else {
                return Some(core::mem::replace(&mut self.pending, core::ptr::null_mut()))
                    .filter(|p| !p.is_null());
            };
            // SAFETY: `pos` is a record's start inside our mapping.
            let p = unsafe { self.base.add(self.pos) };
            self.pos += r.reclen;
            return Some(p);
        }
        if self.pos >= self.n {
            return None;
        }
        // SAFETY: `pos < n` entries of the index built by `sort`.
        let off =
            unsafe { *(self.base.add(self.idx_at) as *const u64).add(self.pos) } as u32 as usize;
        self.pos += 1;
        // SAFETY: a record's start inside our mapping; `d_off` is its bytes 8..16.
        unsafe {
            let p = self.base.add(off);
            core::ptr::write_unaligned(p.add(8) as *mut i64, self.pos as i64);
            Some(p)
        }
    }

    /// Length of the record at `p` (from [`Snap::next`]).
    fn reclen(p: *const u8) -> usize {
        // SAFETY: `p` is a parsed record's start.
        unsafe { u16::from_ne_bytes([*p.add(16), *p.add(17)]) as usize }
    }

    /// The snapshot is read (`ok`: whole): sorted, or, when memory failed, served in the
    /// kernel's order from its start (reported).
    fn finish(&mut self, ok: bool) {
        if !ok || !self.sort() {
            self.sorted = false;
            self.pos = 0;
            unsorted(NO_MEMORY);
        }
    }

    fn release(&mut self) {
        if self.cap > KEEP {
            // SAFETY: our own mapping, no longer used by anyone.
            unsafe { sys::munmap(self.base, self.cap) };
            self.base = core::ptr::null_mut();
            self.cap = 0;
        }
        self.reset();
    }
}

/// Name order: `.`, `..`, then every other name bytewise.
pub fn order(a: &[u8], b: &[u8]) -> core::cmp::Ordering {
    let rank = |n: &[u8]| match n {
        b"." => 0u8,
        b".." => 1,
        _ => 2,
    };
    (rank(a), a).cmp(&(rank(b), b))
}

/// Which stream owns each snapshot, and the snapshots.
static CLAIMS: Claims<SLOTS> = Claims::new();
static SNAPS: Cells<Snap, SLOTS> = Cells([const { UnsafeCell::new(Snap::new()) }; SLOTS]);

/// Claims a fresh slot for stream `key`, its snapshot emptied; `None` when every slot is
/// taken.
fn claim(key: usize) -> Option<usize> {
    let i = CLAIMS.claim(key)?;
    // SAFETY: the slot is ours from the claim on.
    unsafe { snap(i) }.reset();
    Some(i)
}

/// Frees slot `i` (its stream is done with it), its mapping kept small for the next.
fn free(i: usize) {
    // SAFETY: the caller's stream owns slot `i` until it is freed below.
    unsafe { snap(i) }.release();
    CLAIMS.free(i);
}

/// The snapshot of slot `i`.
///
/// # Safety
/// The caller's stream owns slot `i`, and no other reference to it is live.
#[allow(clippy::mut_from_ref)]
unsafe fn snap(i: usize) -> &'static mut Snap {
    // SAFETY: per the contract.
    unsafe { SNAPS.get(i) }
}

/// Stream `key` is closed or rewound: its snapshot, if any, is dropped.
pub fn release(key: usize) {
    if let Some(i) = CLAIMS.find(key) {
        free(i);
    }
}

/// Descriptor `fd` is closed or replaced (registered in [`crate::FD_FORGET`]).
#[inline]
pub fn release_fd(fd: i32) {
    if CLAIMS.held_by_fds() {
        release(fd_key(fd));
    }
}

/// Does a stream on `fd` get sorted: family `machine` sealed, in a run, not from inside the
/// shim, a directory not on procfs (one `fstat`, at a stream's first read).
pub fn eligible(fd: i32) -> bool {
    if !super::sealed() || !config::in_run() || crate::core::real::Reentry::inside() {
        return false;
    }
    // SAFETY: an all-zero stat is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is a valid out-pointer; a bad fd only fails.
    let r = unsafe { sys::syscall3(libc::SYS_fstat, fd as i64, &mut st as *mut _ as i64, 0) };
    r == 0
        && st.st_mode & libc::S_IFMT == libc::S_IFDIR
        && Some(st.st_dev) != crate::open::listing::proc_dev()
}

#[cold]
fn unsorted(why: &[u8]) {
    census::record_unsealed(unsealed::UNSUPPORTED_CALL, why);
}

const NO_SLOT: &[u8] = b"too many directories open at once: one is listed in the file \
                         system's order";
const NO_MEMORY: &[u8] = b"no memory for a directory's sorted snapshot: it is listed in the \
                           file system's order";

/// The census row a sorted listing counts under, and its caller (`None`: not counted, a read
/// the shim makes itself). A listing counts once, when it is found to be one `machine` sorts
/// (the number of reads depends on the directory's size and the caller's buffer).
pub type Count = Option<(seal_abi::Fid, u64)>;

fn counted(count: Count) {
    if let Some((fid, ra)) = count {
        census::count(fid, seal_abi::NO_DETAIL, ra);
    }
}

/// What a stream read gives next.
pub enum Next {
    /// A record of the snapshot (valid until the stream is closed or rewound).
    Rec(*mut u8),
    /// The end; the error that ended the read (0: none).
    End(i32),
}

/// Reads stream `key` to its end with `read` (a record, null at the end, or the errno) into a
/// fresh slot and sorts it; `None` when no slot was free (reported).
fn build(
    key: usize,
    count: Count,
    read: &mut dyn FnMut() -> Result<*mut u8, i32>,
) -> Option<usize> {
    let i = claim_counted(key, count)?;
    // SAFETY: the slot we just claimed.
    let s = unsafe { snap(i) };
    let mut ok = true;
    loop {
        match read() {
            Ok(e) if e.is_null() => break,
            Ok(e) => {
                let len = Snap::reclen(e);
                // SAFETY: `e` is a record the real call just returned, `len` bytes long.
                if !unsafe { s.push(e, len) } {
                    s.pending = e;
                    ok = false;
                    break;
                }
            }
            Err(er) => {
                s.err = er;
                break;
            }
        }
    }
    s.finish(ok);
    Some(i)
}

/// Counts a stream's first read and claims it a slot: `None` when every slot is taken
/// (reported: the stream comes in the file system's order).
fn claim_counted(key: usize, count: Count) -> Option<usize> {
    counted(count);
    let i = claim(key);
    if i.is_none() {
        unsorted(NO_SLOT);
    }
    i
}

/// The `readdir`-family read of stream `dir` (descriptor `fd`) when family `machine` sorts
/// it: `Some` with what to give, `None` to read the real stream (not sorted, or served in the
/// kernel's order and its snapshot done). `read` reads the real stream.
pub fn next(
    dir: usize,
    fd: &dyn Fn() -> i32,
    count: Count,
    read: &mut dyn FnMut() -> Result<*mut u8, i32>,
) -> Option<Next> {
    let key = dir_key(dir);
    let i = match CLAIMS.find(key) {
        Some(i) => i,
        None if eligible(fd()) => build(key, count, read)?,
        None => return None,
    };
    // SAFETY: the stream owns slot `i`.
    let s = unsafe { snap(i) };
    match s.next() {
        Some(p) => Some(Next::Rec(p)),
        // Served in the kernel's order: the rest comes from the real stream.
        None if !s.sorted => None,
        None => Some(Next::End(s.err)),
    }
}

/// The sorted stream `dir`'s slot, made now if the stream is to be sorted and has none.
fn slot_for(dir: usize, fd: i32, read: &mut dyn FnMut() -> Result<*mut u8, i32>) -> Option<usize> {
    let key = dir_key(dir);
    match CLAIMS.find(key) {
        Some(i) => Some(i),
        None if eligible(fd) => build(key, None, read),
        None => None,
    }
}

/// `telldir` of a sorted stream: its place; `None` for the real call.
pub fn tell(dir: usize, fd: i32, read: &mut dyn FnMut() -> Result<*mut u8, i32>) -> Option<i64> {
    let i = slot_for(dir, fd, read)?;
    // SAFETY: the stream owns slot `i`.
    let s = unsafe { snap(i) };
    s.sorted.then_some(s.pos as i64)
}

/// `seekdir` of a sorted stream to a place `tell` gave: `true` when done here.
pub fn seek(dir: usize, fd: i32, loc: i64, read: &mut dyn FnMut() -> Result<*mut u8, i32>) -> bool {
    let Some(i) = slot_for(dir, fd, read) else {
        return false;
    };
    // SAFETY: the stream owns slot `i`.
    let s = unsafe { snap(i) };
    if !s.sorted {
        return false;
    }
    s.pos = usize::try_from(loc).unwrap_or(0).min(s.n);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::open::listing::records::tests::{names, records};
    use crate::open::listing::records::write_record;

    fn sorted_names<S: AsRef<str>>(list: &[(u64, i64, u8, S)]) -> Vec<String> {
        let mut src = vec![0u8; list.len() * 64];
        let mut at = 0;
        for (ino, off, t, name) in list {
            at += write_record(&mut src[at..], *ino, *off, *t, name.as_ref().as_bytes()).unwrap();
        }
        src.truncate(at);
        let mut s = Snap::new();
        let mut at = 0;
        while let Some(r) = record(&src, at) {
            // SAFETY: a record of `reclen` bytes of `src`.
            assert!(unsafe { s.push(src.as_ptr().add(at), r.reclen) });
            at += r.reclen;
        }
        assert!(s.sort());
        let mut out = vec![];
        while let Some(p) = s.next() {
            // SAFETY: a record of our snapshot.
            let b = unsafe { core::slice::from_raw_parts(p, Snap::reclen(p)) };
            let n = names(b);
            assert_eq!(n[0].1, out.len() as i64 + 1, "d_off is the place");
            out.push(n[0].0.clone());
        }
        assert!(s.cap >= s.used);
        // SAFETY: the test's own mapping.
        unsafe { sys::munmap(s.base, s.cap) };
        out
    }

    #[test]
    fn names_sort_bytewise_with_dot_and_dotdot_first() {
        let got = sorted_names(&[
            (5, 99, 8, "beta"),
            (1, 7, 4, "."),
            (6, 3, 8, "alpha"),
            (7, 1, 8, "omega"),
            (8, 2, 8, "zeta"),
            (2, 5, 4, ".."),
            (9, 4, 8, "gamma"),
            (10, 6, 8, "mid"),
            (11, 8, 8, "-dash"),
            (12, 9, 8, "Zed"),
            (13, 10, 8, ".hidden"),
        ]);
        assert_eq!(
            got,
            [
                ".", "..", "-dash", ".hidden", "Zed", "alpha", "beta", "gamma", "mid", "omega",
                "zeta"
            ]
        );
        assert_eq!(order(b"..", b"-"), core::cmp::Ordering::Less);
        assert_eq!(order(b"a", b"a"), core::cmp::Ordering::Equal);
    }

    #[test]
    fn a_snapshot_grows_past_its_first_mapping() {
        let owned: Vec<(u64, i64, u8, String)> = (0..20000u64)
            .rev()
            .map(|i| (i, i as i64, 8, format!("file-{i:05}-with-a-longer-name")))
            .collect();
        let got = sorted_names(&owned);
        assert_eq!(got.len(), 20000);
        assert!(got.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn without_memory_a_snapshot_serves_the_kernels_order_then_the_pending_record() {
        let src = records(&[(1, 1, 4, "b"), (2, 2, 4, "a"), (3, 3, 4, "c")]);
        let mut s = Snap::new();
        // SAFETY: the first two records of `src` (24 bytes each).
        assert!(unsafe { s.push(src.as_ptr(), 48) });
        // The third did not fit: it stays where the real stream returned it.
        // SAFETY: inside `src`.
        s.pending = unsafe { src.as_ptr().add(48) } as *mut u8;
        s.sorted = false;
        let mut got = vec![];
        while let Some(p) = s.next() {
            // SAFETY: a record of the snapshot or of `src`.
            let b = unsafe { core::slice::from_raw_parts(p, Snap::reclen(p)) };
            got.push(names(b)[0].0.clone());
        }
        assert_eq!(got, ["b", "a", "c"]);
        assert!(s.next().is_none());
        // SAFETY: the test's own mapping.
        unsafe { sys::munmap(s.base, s.cap) };
    }

    #[test]
    fn old_getdents_records_put_the_type_last() {
        let src = records(&[(7, 3, libc::DT_DIR, "alpha")]);
        let mut dst = [0xffu8; 64];
        assert_eq!(old_record(&src, &mut dst), Some(32));
        assert_eq!(u64::from_ne_bytes(dst[0..8].try_into().unwrap()), 7);
        assert_eq!(u16::from_ne_bytes([dst[16], dst[17]]), 32);
        assert_eq!(&dst[18..24], b"alpha\0");
        assert_eq!(dst[31], libc::DT_DIR);
        assert_eq!(old_record(&src, &mut dst[..31]), None);
    }

    #[test]
    fn keys_and_slots() {
        let (d, f) = (dir_key(0x7f00_0000_2000), fd_key(9));
        assert_ne!(d, f);
        assert_eq!(CLAIMS.find(d), None);
        let i = claim(d).unwrap();
        let j = claim(f).unwrap();
        assert_ne!(i, j);
        assert_eq!((CLAIMS.find(d), CLAIMS.find(f)), (Some(i), Some(j)));
        release_fd(9);
        assert_eq!(CLAIMS.find(f), None);
        release(d);
        assert_eq!(CLAIMS.find(d), None);
        assert_eq!(claim(0), None);
    }
}
