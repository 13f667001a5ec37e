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
//! `d_off` their place (1, 2, …), `d_ino` and `d_type` the kernel's. The file's position is
//! kept at the place of the next entry. A stream is known again by `kcmp` (the same open file)
//! and by that position: a `rewinddir` (position 0) reads the directory again, a `seekdir` to
//! a place given goes there. At most [`STREAMS`] are kept (the oldest goes), each without its entries once
//! read to its end.

use seal_abi::{flags, Fid, NO_DETAIL};

use super::super::dir_streams::{copy_of, is_proc_root, lseek, read_all, records, sorted};
use super::super::dir_streams::{Stream, STREAMS};
use super::super::remote::write;
use super::{Answer, Notif, Supervisor};

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
            // Kept, without its entries, at its end's place: a read past the end is the end
            // again, and a `seekdir` back (another place) reads the directory again.
            s.entries = Vec::new();
            s.next = 0;
            return Answer::Value(0);
        }
        if !write(n.pid as i32, buf, &bytes) {
            return Answer::Error(libc::EFAULT);
        }
        s.next += taken;
        s.pos = set_place(&s.file, s.next);
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
        let pos = set_place(&file, next);
        Ok(Stream {
            file,
            entries,
            next,
            pos,
            made: 0,
        })
    }
}

/// Moves `file`'s position to place `next` (the `d_off` of the entry given last), so that a
/// `telldir` and `seekdir` of the image, which move the same position, are seen as places;
/// the position it is at (where a file system refuses it, the one it had).
fn set_place(file: &std::os::fd::OwnedFd, next: usize) -> i64 {
    match lseek(file, next as i64, libc::SEEK_SET) {
        p if p >= 0 => p,
        _ => lseek(file, 0, libc::SEEK_CUR),
    }
}
