//! A static image's directory listings (`getdents64` from its code, sent by the filter:
//! `seal_abi::supervised::GETDENTS64`) in name order (`.`, `..`, then bytewise: family
//! `machine`), as libseal gives a dynamic program's (`shim/src/machine/dirorder`), not in the
//! file system's (ext4's hash order, tmpfs's newest first): busybox `find` printed a tree in
//! another order on another file system, and a Go program's `Readdirnames` too.
//!
//! `/proc` stays the kernel's listing, real pids: a static image's `stat` of `/proc/<vpid>`
//! is not translated (sending every `stat` of an image to the supervisor would cost a `find`
//! or a `go build` a notification a file), so a listing of virtual pids would fail busybox
//! `ls /proc` and `ps` (which `stat`s each entry for its owner).
//!
//! At a stream's first call the supervisor takes a copy of the image's descriptor
//! (`pidfd_getfd`: the same open file, so the same position), reads the directory to its end
//! through it, and keeps the entries; each call is then given the next of them that fit, with
//! `d_off` their place (1, 2, …), `d_ino` and `d_type` the kernel's. A stream is known again by
//! `kcmp` (the same open file) and by its position, which the reads left at the directory's
//! end: a `rewinddir` (position 0) reads the directory again, a `seekdir` to a place given
//! goes there. At most [`STREAMS`] are kept (the oldest goes).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use seal_abi::{flags, Fid, NO_DETAIL};

use super::super::remote::write;
use super::{Answer, Notif, Supervisor};

/// `statfs` magic of procfs, and the inode of its root.
const PROC_SUPER_MAGIC: i64 = 0x9fa0;
const PROC_ROOT_INO: u64 = 1;
/// Streams kept at once (the oldest goes first).
const STREAMS: usize = 64;
/// `kcmp`'s `KCMP_FILE`.
const KCMP_FILE: i32 = 0;

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    ino: u64,
    kind: u8,
    name: Vec<u8>,
}

/// A listing being read: the supervisor's copy of the descriptor, the entries, the next one
/// to give, and the position the copy was left at.
pub(super) struct Stream {
    file: OwnedFd,
    entries: Vec<Entry>,
    next: usize,
    pos: i64,
    /// When it was made (for [`STREAMS`]).
    made: u64,
}

/// The listings of the run's static images, by (process, descriptor).
#[derive(Default)]
pub(super) struct Listings {
    streams: HashMap<(i32, i32), Stream>,
    made: u64,
}

impl Supervisor {
    /// Process `tgid`'s image's `getdents64(fd, buf, count)`.
    pub(super) fn listing(&mut self, n: &Notif, tgid: i32) -> Answer {
        let (fd, buf, count) = (n.args[0] as i32, n.args[1], n.args[2] as usize);
        let key = (tgid, fd);
        let known = match self.listings.streams.get_mut(&key) {
            Some(s) => s.follow(tgid, fd),
            None => false,
        };
        if !known {
            self.listings.streams.remove(&key);
            match self.new_stream(tgid, fd, n.ip) {
                Ok(s) => {
                    self.listings.made += 1;
                    let made = self.listings.made;
                    let all = &mut self.listings.streams;
                    if all.len() >= STREAMS {
                        let oldest = all.iter().min_by_key(|(_, s)| s.made).map(|(k, _)| *k);
                        oldest.map(|k| all.remove(&k));
                    }
                    all.insert(key, Stream { made, ..s });
                }
                Err(a) => return a,
            }
        }
        let Some(s) = self.listings.streams.get_mut(&key) else {
            return Answer::Continue;
        };
        let (bytes, taken) = records(&s.entries[s.next..], s.next, count);
        if taken == 0 {
            if s.next < s.entries.len() {
                return Answer::Error(libc::EINVAL); // the buffer holds no entry
            }
            // Kept: a read past the end is the end again (the copy's position, the
            // directory's end, no place of the listing, would read it afresh).
            return Answer::Value(0);
        }
        if !write(n.pid as i32, buf, &bytes) {
            return Answer::Error(libc::EFAULT);
        }
        s.next += taken;
        Answer::Value(bytes.len() as i64)
    }

    /// A stream of image descriptor `fd` of process `tgid`, read: `Err` the answer when the
    /// call is not this supervisor's to give (its family unsealed: the call as it is), or
    /// fails as the kernel's would.
    fn new_stream(&mut self, tgid: i32, fd: i32, ip: u64) -> Result<Stream, Answer> {
        let file = copy_of(tgid, fd)?;
        // `/proc` stays the kernel's (see above).
        if is_proc_root(&file) || !self.world.sealed(flags::MACHINE) {
            return Err(Answer::Continue);
        }
        // A seekdir to a place of a listing already given (and ended) goes there again.
        let at = lseek(&file, 0, libc::SEEK_CUR);
        lseek(&file, 0, libc::SEEK_SET);
        let entries = sorted(read_all(&file).map_err(Answer::Error)?);
        let ip = self.census_ip(tgid, ip);
        if let Some(slot) = self.slot(tgid) {
            slot.count(Fid::Getdents, NO_DETAIL, ip);
        }
        let next = if at > 0 && at as usize <= entries.len() {
            at as usize
        } else {
            0
        };
        let pos = lseek(&file, 0, libc::SEEK_CUR);
        Ok(Stream {
            file,
            entries,
            next,
            pos,
            made: 0,
        })
    }
}

impl Stream {
    /// Is image descriptor `fd` of process `tgid` still this stream's (the same open file),
    /// at its place (or moved by a `seekdir` to a place given)? False: a new stream.
    fn follow(&mut self, tgid: i32, fd: i32) -> bool {
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

/// A copy of process `tgid`'s descriptor `fd` (`pidfd_getfd`): `Err` the answer when there is
/// none (`EBADF` as the kernel's, or the call as it is when it cannot be had).
fn copy_of(tgid: i32, fd: i32) -> Result<OwnedFd, Answer> {
    // SAFETY: pidfd_open of a process; the descriptor is ours.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, tgid, 0) } as i32;
    if pidfd < 0 {
        return Err(Answer::Continue);
    }
    // SAFETY: ours, closed here.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    // SAFETY: pidfd_getfd of the image's descriptor (the supervisor may ptrace it).
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) } as i32;
    if got < 0 {
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return Err(match e {
            libc::EBADF => Answer::Error(libc::EBADF),
            _ => Answer::Continue,
        });
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(got) })
}

/// Is `file` the root of procfs?
fn is_proc_root(file: &OwnedFd) -> bool {
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

fn lseek(file: &OwnedFd, off: i64, whence: i32) -> i64 {
    // SAFETY: lseek of a descriptor we own.
    unsafe { libc::lseek(file.as_raw_fd(), off, whence) }
}

/// Every entry of the directory `file` lists from its position: `Err` the kernel's errno.
fn read_all(file: &OwnedFd) -> Result<Vec<Entry>, i32> {
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
fn sorted(mut entries: Vec<Entry>) -> Vec<Entry> {
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
fn records(entries: &[Entry], first: usize, count: usize) -> (Vec<u8>, usize) {
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
