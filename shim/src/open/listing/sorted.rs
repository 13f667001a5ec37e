//! Listings served in virtual pid order. The kernel lists `/proc` by real pid, and on a
//! machine whose pids wrap (`pid_max` 32768) the run's processes come in a different order
//! from run to run. So at the first number of a listing the rest of the stream is read at
//! once, the numbers it shows are kept in a set over the virtual pid space (one bit each), and
//! the stream then returns them in ascending order, one record per call, at its end (the
//! kernel's listing puts numbers after every other name: `proc_pid_readdir`,
//! `proc_task_readdir`).
//!
//! A stream is a `DIR *` ([`dir_key`]) or a descriptor read with `getdents64` ([`fd_key`]);
//! its state lives in one of [`SLOTS`] fixed slots, claimed with a CAS on its owner word and
//! then used by that stream alone, and freed by `closedir` or `close`, or when the stream
//! turns out to have been rewound (the kernel has records again). The record of an entry is
//! made when it is returned: `d_type` is the listing's, `d_ino` the real directory's (one
//! `fstatat`, which also skips a process that ended meanwhile), `d_off` the end of the
//! listing (where the kernel's stream stands).

use core::cell::UnsafeCell;

use seal_abi::VPID_LIMIT;

use super::records::{numeric, write_record, Record, DIRENT_SIZE};
use super::{shown, Kind};
pub use crate::core::streams::{dir_key, fd_key};
use crate::core::streams::{Cells, Claims};
use crate::core::{sys, table};

/// Streams that can be listed in order at once (others are listed in the kernel's order).
pub const SLOTS: usize = 16;
const WORDS: usize = VPID_LIMIT / 64;

/// A set of virtual pids.
pub struct Bits([u64; WORDS]);

impl Bits {
    pub const fn new() -> Bits {
        Bits([0; WORDS])
    }
    pub fn clear(&mut self) {
        self.0.fill(0);
    }
    pub fn insert(&mut self, v: i32) {
        if let Some(w) = usize::try_from(v).ok().and_then(|v| self.0.get_mut(v / 64)) {
            *w |= 1 << (v as usize % 64);
        }
    }
    /// The smallest member `>= v`.
    pub fn next_from(&self, v: usize) -> Option<usize> {
        let mut i = v / 64;
        let mut w = *self.0.get(i)? & (!0u64 << (v % 64));
        loop {
            if w != 0 {
                return Some(i * 64 + w.trailing_zeros() as usize);
            }
            i += 1;
            w = *self.0.get(i)?;
        }
    }
}

impl Default for Bits {
    fn default() -> Bits {
        Bits::new()
    }
}

/// What [`State::serve`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// A record of this many bytes.
    Record(usize),
    /// The next record does not fit; it comes next call.
    Full,
    /// Nothing left.
    End,
}

/// One stream listed in order: the list and a record to return from `readdir`.
pub struct State {
    pub list: List,
    pub rec: Rec,
}

/// A `struct dirent64`'s worth of bytes, aligned as one.
#[repr(C, align(8))]
pub struct Rec(pub [u8; DIRENT_SIZE]);

/// The numbers of one listing, and where its caller stands in them.
pub struct List {
    /// The numbers to show.
    pub bits: Bits,
    /// The next number to look at.
    pub next: usize,
    /// `d_off` of the last record taken: the end of the listing.
    pub off: i64,
    /// `d_type` of the numbers' records.
    pub dtype: u8,
}

impl State {
    /// All zero (so the slots sit in `.bss`); [`List::reset`] before use.
    pub const fn new() -> State {
        State {
            list: List::new(),
            rec: Rec([0; DIRENT_SIZE]),
        }
    }
}

impl List {
    pub const fn new() -> List {
        List {
            bits: Bits::new(),
            next: 0,
            off: 0,
            dtype: 0,
        }
    }

    pub fn reset(&mut self) {
        self.bits.clear();
        self.next = 0;
        self.off = 0;
        self.dtype = libc::DT_DIR;
    }

    /// Takes a record of the kernel's listing of `kind`: a number the run shows joins the set.
    pub fn take(&mut self, t: &table::Table, kind: Kind, r: &Record) {
        self.off = r.off;
        if let Some(v) = numeric(r.name).and_then(|p| shown(t, kind, p)) {
            self.bits.insert(v);
            self.dtype = r.dtype;
        }
    }

    /// Writes the next record into `dst`. `t` maps a virtual number back to the real one and
    /// `ino` gives the inode of a real one's directory (`None`: it ended, skip it).
    pub fn serve(
        &mut self,
        t: &table::Table,
        ino: &mut dyn FnMut(i32) -> Option<u64>,
        dst: &mut [u8],
    ) -> Served {
        while let Some(v) = self.bits.next_from(self.next) {
            let Some(i) = t.real(v as i32).and_then(&mut *ino) else {
                self.next = v + 1;
                continue;
            };
            let mut digits = sys::StackBuf::<16>::new();
            let name = digits.push_i64(v as i64).as_bytes();
            let Some(n) = write_record(dst, i, self.off, self.dtype, name) else {
                return Served::Full;
            };
            self.next = v + 1;
            return Served::Record(n);
        }
        Served::End
    }
}

impl Default for State {
    fn default() -> State {
        State::new()
    }
}

impl Default for List {
    fn default() -> List {
        List::new()
    }
}

/// Which stream owns each slot (its counters, which every `close` reads, sit with the other
/// hot statics), and the slots' states.
#[link_section = ".data.seal_hot"]
static CLAIMS: Claims<SLOTS> = Claims::new();
static STATES: Cells<State, SLOTS> = Cells([const { UnsafeCell::new(State::new()) }; SLOTS]);

/// The slot of stream `key`, if it has one.
#[inline]
pub fn find(key: usize) -> Option<usize> {
    CLAIMS.find(key)
}

/// Claims a fresh slot for stream `key`, its list emptied; `None` when every slot is taken.
pub fn claim(key: usize) -> Option<usize> {
    let i = CLAIMS.claim(key)?;
    // SAFETY: the slot is ours from the claim on.
    unsafe { state(i) }.list.reset();
    Some(i)
}

/// Frees slot `i` (its stream is done with it).
pub fn free(i: usize) {
    CLAIMS.free(i);
}

/// Stream `key` is closed: its slot, if any, is free again.
pub fn release(key: usize) {
    if let Some(i) = find(key) {
        free(i);
    }
}

/// Descriptor `fd` is closed or replaced.
#[inline]
pub fn release_fd(fd: i32) {
    if CLAIMS.held_by_fds() {
        release(fd_key(fd));
    }
}

/// The state of slot `i`.
///
/// # Safety
/// The caller's stream owns slot `i` (claimed it, or found it by its key), and no other
/// reference to the state is live.
#[allow(clippy::mut_from_ref)]
pub unsafe fn state(i: usize) -> &'static mut State {
    // SAFETY: per the contract.
    unsafe { STATES.get(i) }
}

/// The inode of real pid or tid `real`'s directory under the listed directory `fd`.
pub fn ino_of(fd: i32, real: i32) -> Option<u64> {
    let mut name = sys::StackBuf::<16>::new();
    name.push_i64(real as i64);
    // SAFETY: an all-zero stat is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: a NUL-terminated name and a valid out-pointer.
    let r = unsafe {
        sys::syscall6(
            libc::SYS_newfstatat,
            fd as i64,
            name.as_cstr().as_ptr() as i64,
            &mut st as *mut _ as i64,
            libc::AT_SYMLINK_NOFOLLOW as i64,
            0,
            0,
        )
    };
    (r == 0).then_some(st.st_ino)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::table::tests::Owned;
    use crate::open::listing::records::tests::{names, records};

    #[test]
    fn a_set_of_pids_walks_in_order() {
        let mut b = Bits::new();
        assert_eq!(b.next_from(0), None);
        for v in [32767, 1000, 1063, 1064, 999, -1, 40000] {
            b.insert(v);
        }
        let mut got = vec![];
        let mut at = 0;
        while let Some(v) = b.next_from(at) {
            got.push(v);
            at = v + 1;
        }
        assert_eq!(got, [999, 1000, 1063, 1064, 32767]);
        assert_eq!(b.next_from(32768), None);
        b.clear();
        assert_eq!(b.next_from(0), None);
    }

    #[test]
    fn a_listing_is_served_in_virtual_pid_order_with_ended_processes_left_out() {
        let o = Owned::new();
        let t = o.table();
        // Real pids in the kernel's order; virtual ones out of that order.
        for (v, r) in [
            (31000, 100),
            (1000, 200),
            (4242, 300),
            (999, 400),
            (2000, 500),
        ] {
            t.register(v, r);
        }
        let src = records(&[
            (1, 1, libc::DT_DIR, "."),
            (2, 5, libc::DT_LNK, "self"),
            (3, 101, libc::DT_DIR, "100"),
            (4, 150, libc::DT_DIR, "150"),
            (5, 201, libc::DT_DIR, "200"),
            (6, 301, libc::DT_DIR, "300"),
            (7, 401, libc::DT_DIR, "400"),
            (8, 501, libc::DT_DIR, "500"),
        ]);
        let mut s = List::new();
        s.reset();
        let mut at = 0;
        while let Some(r) = crate::open::listing::record(&src, at) {
            s.take(&t, Kind::Root, &r);
            at += r.reclen;
        }
        assert_eq!(s.off, 501);
        // Real pid 500 (vpid 2000) ended before its turn.
        let mut ino = |r: i32| (r != 500).then_some(r as u64 * 10);
        let mut out = vec![];
        let mut dst = [0u8; 64];
        // A buffer too small for a record: nothing is lost.
        assert_eq!(s.serve(&t, &mut ino, &mut dst[..16]), Served::Full);
        while let Served::Record(n) = s.serve(&t, &mut ino, &mut dst) {
            out.extend_from_slice(&dst[..n]);
        }
        assert_eq!(s.serve(&t, &mut ino, &mut dst), Served::End);
        assert_eq!(
            names(&out),
            [
                ("1000".to_string(), 501, libc::DT_DIR, 2000),
                ("4242".to_string(), 501, libc::DT_DIR, 3000),
                ("31000".to_string(), 501, libc::DT_DIR, 1000),
            ]
        );
    }

    #[test]
    fn slots_are_claimed_found_and_freed_by_key() {
        let (d, f) = (dir_key(0x7f00_0000_1000), fd_key(7));
        assert_ne!(d, f);
        assert_eq!(find(d), None);
        let i = claim(d).unwrap();
        let j = claim(f).unwrap();
        assert_ne!(i, j);
        assert_eq!((find(d), find(f)), (Some(i), Some(j)));
        release_fd(7);
        assert_eq!(find(f), None);
        release(d);
        assert_eq!(find(d), None);
        assert_eq!(claim(0), None);
    }
}
