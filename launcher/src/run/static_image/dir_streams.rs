//! The state of a static image's directory listings, which the supervisor gives in name
//! order (`serve/listings.rs` says how): each stream's copy of the image's descriptor, its
//! sorted entries and where it is, and the reading, sorting and record writing.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};

use super::notif::Answer;

/// `statfs` magic of procfs, and the inode of its root.
const PROC_SUPER_MAGIC: i64 = 0x9fa0;
const PROC_ROOT_INO: u64 = 1;
/// Streams kept at once (the oldest goes first).
pub(super) const STREAMS: usize = 64;
/// `kcmp`'s `KCMP_FILE`.
const KCMP_FILE: i32 = 0;

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    ino: u64,
    kind: u8,
    name: Vec<u8>,
}

/// A listing being read: the supervisor's copy of the descriptor, the entries, the next one
/// to give, and the position the copy was left at.
pub(super) struct Stream {
    pub(super) file: OwnedFd,
    pub(super) entries: Vec<Entry>,
    pub(super) next: usize,
    pub(super) pos: i64,
    /// When it was made (for [`STREAMS`]).
    pub(super) made: u64,
}

/// The listings of the run's static images, by (process, descriptor).
#[derive(Default)]
pub(super) struct Listings {
    pub(super) streams: HashMap<(i32, i32), Stream>,
    pub(super) made: u64,
}

impl Stream {
    /// Is image descriptor `fd` of process `tgid` still this stream's (the same open file),
    /// at its place (or moved by a `seekdir` to a place given)? False: a new stream.
    pub(super) fn follow(&mut self, tgid: i32, fd: i32) -> bool {
        // SAFETY: kcmp compares two descriptors; no memory is passed.
        let same = unsafe {
            libc::syscall(
                libc::SYS_kcmp,
                libc::getpid(),
                tgid,
                KCMP_FILE,
                self.file.as_raw_fd(),
                fd,
            )
        };
        // 1 or 2: another file. -1: no `kcmp` here (a kernel without it), and the position
        // alone tells (taken for a new stream, a listing in progress would start over at
        // every call).
        if same > 0 {
            return false;
        }
        let at = lseek(&self.file, 0, libc::SEEK_CUR);
        if at == self.pos {
            return true;
        }
        if at > 0 && at as usize <= self.entries.len() {
            self.next = at as usize;
            self.pos = at;
            return true;
        }
        false
    }
}

/// A copy of process `tgid`'s descriptor `fd`: `Err` the answer when there is none (`EBADF`
/// as the kernel's, or the call as it is when it cannot be had).
pub(super) fn copy_of(tgid: i32, fd: i32) -> Result<OwnedFd, Answer> {
    super::remote::copy_fd(tgid, fd).map_err(|e| match e {
        libc::EBADF => Answer::Error(libc::EBADF),
        _ => Answer::Continue,
    })
}

/// Is `file` the root of procfs?
pub(super) fn is_proc_root(file: &OwnedFd) -> bool {
    // SAFETY: plain structures filled by the kernel for a descriptor we own.
    unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstatfs(file.as_raw_fd(), &mut fs) == 0
            && fs.f_type == PROC_SUPER_MAGIC
            && libc::fstat(file.as_raw_fd(), &mut st) == 0
            && st.st_ino == PROC_ROOT_INO
    }
}

pub(super) fn lseek(file: &OwnedFd, off: i64, whence: i32) -> i64 {
    // SAFETY: lseek of a descriptor we own.
    unsafe { libc::lseek(file.as_raw_fd(), off, whence) }
}

/// Every entry of the directory `file` lists from its position: `Err` the kernel's errno.
pub(super) fn read_all(file: &OwnedFd) -> Result<Vec<Entry>, i32> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        // SAFETY: getdents64 into a buffer we own, of its length.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                file.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO));
        }
        if n == 0 {
            return Ok(out);
        }
        out.extend(parse(&buf[..n as usize]));
    }
}

/// The entries of a `getdents64` buffer (`struct linux_dirent64`: `d_ino`, `d_off`,
/// `d_reclen`, `d_type`, the NUL-terminated name).
fn parse(b: &[u8]) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 19 <= b.len() {
        let len = u16::from_ne_bytes([b[at + 16], b[at + 17]]) as usize;
        if len < 20 || at + len > b.len() {
            break;
        }
        let name = &b[at + 19..at + len];
        let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
        out.push(Entry {
            ino: u64::from_ne_bytes(b[at..at + 8].try_into().unwrap_or_default()),
            kind: b[at + 18],
            name: name.to_vec(),
        });
        at += len;
    }
    out
}

/// `entries` in name order: `.`, `..`, then bytewise (libseal's `dirorder::order`).
pub(super) fn sorted(mut entries: Vec<Entry>) -> Vec<Entry> {
    let rank = |n: &[u8]| match n {
        b"." => 0u8,
        b".." => 1,
        _ => 2,
    };
    entries.sort_by(|a, b| (rank(&a.name), &a.name).cmp(&(rank(&b.name), &b.name)));
    entries
}

/// The records of the first of `entries` (the first at place `first`) that fit in `count`
/// bytes, and how many.
pub(super) fn records(entries: &[Entry], first: usize, count: usize) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut n = 0;
    for (i, e) in entries.iter().enumerate() {
        let len = (19 + e.name.len() + 1).next_multiple_of(8);
        if out.len() + len > count {
            break;
        }
        out.extend(e.ino.to_ne_bytes());
        out.extend(((first + i + 1) as i64).to_ne_bytes());
        out.extend((len as u16).to_ne_bytes());
        out.push(e.kind);
        out.extend(&e.name);
        out.resize(out.len() + len - 19 - e.name.len(), 0);
        n += 1;
    }
    (out, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> Entry {
        Entry {
            ino: 7,
            kind: libc::DT_REG,
            name: name.as_bytes().to_vec(),
        }
    }

    #[test]
    fn records_are_the_kernels_layout_and_read_back() {
        let list = [entry("."), entry(".."), entry("a-long-name.txt")];
        let (b, n) = records(&list, 4, 4096);
        assert_eq!((b.len(), n), (24 + 24 + 40, 3));
        assert_eq!(parse(&b), list);
        // Its places: 5, 6, 7.
        assert_eq!(i64::from_ne_bytes(b[8..16].try_into().unwrap()), 5);
        // Only what fits: one record of 24 bytes in 30.
        assert_eq!(records(&list, 0, 30).1, 1);
        assert_eq!(records(&list, 0, 10).1, 0);
    }

    #[test]
    fn names_sort_as_libseal_sorts_them() {
        let list = ["b", "..", "B", "a", ".", "ab"].map(entry).to_vec();
        let names: Vec<_> = sorted(list).into_iter().map(|e| e.name).collect();
        let want = [".", "..", "B", "a", "ab", "b"].map(|s| s.as_bytes().to_vec());
        assert_eq!(names, want);
    }

    #[test]
    fn a_stream_is_known_by_its_position_where_kcmp_cannot_tell() {
        let d = tempfile::tempdir().unwrap();
        let file: OwnedFd = std::fs::File::open(d.path()).unwrap().into();
        let entries = sorted(read_all(&file).unwrap());
        let pos = lseek(&file, 0, libc::SEEK_CUR);
        let mut s = Stream {
            file,
            entries,
            next: 1,
            pos,
            made: 0,
        };
        // No such process: kcmp fails, and the position (unmoved) keeps the stream.
        assert!(s.follow(i32::MAX, 3));
        assert_eq!(s.next, 1);
        // A seekdir to place 2 (the last: `.`, `..`).
        lseek(&s.file, 2, libc::SEEK_SET);
        assert!(s.follow(i32::MAX, 3));
        assert_eq!(s.next, 2);
        // A rewinddir: a new stream.
        lseek(&s.file, 0, libc::SEEK_SET);
        assert!(!s.follow(i32::MAX, 3));
    }

    #[test]
    fn a_directory_is_read_to_its_end_through_a_descriptor() {
        let d = tempfile::tempdir().unwrap();
        for n in ["x", "y", "z"] {
            std::fs::write(d.path().join(n), n).unwrap();
        }
        let f: OwnedFd = std::fs::File::open(d.path()).unwrap().into();
        let mut names: Vec<_> = read_all(&f).unwrap().into_iter().map(|e| e.name).collect();
        names.sort();
        assert_eq!(names, [&b"."[..], b"..", b"x", b"y", b"z"]);
        assert!(!is_proc_root(&f));
        let proc: OwnedFd = std::fs::File::open("/proc").unwrap().into();
        assert!(is_proc_root(&proc));
    }
}
