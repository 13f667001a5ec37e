//! The descriptor path of directory order: `getdents64` (and the old `getdents`, and both
//! through `syscall()`) on a descriptor family `machine` sorts. Its snapshot is the one a
//! `DIR *` gets ([`super::Snap`]), read in batches of the kernel's records at the first call.

use super::{claim_counted, eligible, free, snap, Count, Snap, BATCH, CLAIMS};
use crate::core::streams::fd_key;
use crate::core::sys;
use crate::open::listing::records::record;

fn lseek(fd: i32, off: i64, whence: i32) -> i64 {
    // SAFETY: no pointers.
    unsafe { sys::syscall3(libc::SYS_lseek, fd as i64, off, whence as i64) }
}

/// `getdents64(fd, buf, count)` when family `machine` sorts `fd`: `Some` with the result
/// (bytes, or -1 with errno set), `None` for the real call. `real` is the real call (libc's
/// convention: -1 and errno).
///
/// A descriptor's snapshot is read at its first call; a later call finds the kernel's stream
/// where the snapshot left it, or the caller moved it: to 0 (rewound: read afresh), to a
/// place a served record's `d_off` named (continue from there), or elsewhere (the snapshot
/// is dropped and the kernel's stream read from there).
///
/// # Safety
/// `buf` valid for `count` bytes.
pub unsafe fn getdents(
    fd: i32,
    buf: *mut u8,
    count: usize,
    fid: Count,
    real: &dyn Fn(*mut u8, usize) -> isize,
) -> Option<isize> {
    // SAFETY: forwarded contract.
    unsafe { getdents_as(fd, buf, count, fid, real, false) }
}

/// [`getdents`], the records written as `getdents64` writes them or, `old`, as the old
/// `getdents` does (`linux_dirent`: no `d_type` after `d_reclen`, it is the record's last
/// byte). `real` is always `getdents64`.
///
/// # Safety
/// `buf` valid for `count` bytes.
unsafe fn getdents_as(
    fd: i32,
    buf: *mut u8,
    count: usize,
    fid: Count,
    real: &dyn Fn(*mut u8, usize) -> isize,
    old: bool,
) -> Option<isize> {
    if buf.is_null() {
        return None;
    }
    let key = fd_key(fd);
    let i = match CLAIMS.find(key) {
        Some(i) => {
            // SAFETY: the stream owns slot `i`.
            let s = unsafe { snap(i) };
            let at = lseek(fd, 0, libc::SEEK_CUR);
            if at != s.end_off {
                if at == 0 {
                    free(i);
                    // SAFETY: forwarded contract.
                    return unsafe { getdents_as(fd, buf, count, fid, real, old) };
                }
                if s.sorted && at > 0 && at as usize <= s.n {
                    s.pos = at as usize;
                    lseek(fd, s.end_off, libc::SEEK_SET);
                } else {
                    free(i);
                    return None;
                }
            }
            i
        }
        None if eligible(fd) => {
            let i = claim_counted(key, fid)?;
            // SAFETY: the slot we just claimed.
            let s = unsafe { snap(i) };
            let mut ok = true;
            loop {
                if !s.room(BATCH) {
                    ok = false;
                    break;
                }
                // SAFETY: `BATCH` bytes past `used` are ours.
                let n = real(unsafe { s.base.add(s.used) }, BATCH);
                if n < 0 {
                    s.err = sys::errno();
                    break;
                }
                if n == 0 {
                    break;
                }
                s.used += n as usize;
            }
            s.end_off = lseek(fd, 0, libc::SEEK_CUR);
            s.finish(ok);
            i
        }
        None => return None,
    };
    // SAFETY: the stream owns slot `i`.
    let s = unsafe { snap(i) };
    // SAFETY: per the contract.
    let dst = unsafe { core::slice::from_raw_parts_mut(buf, count) };
    let mut w = 0;
    while let (save_pos, Some(p)) = (s.pos, s.next()) {
        // SAFETY: a record of its `d_reclen` bytes inside our mapping (or the real stream's).
        let rec = unsafe { core::slice::from_raw_parts(p, Snap::reclen(p)) };
        let wrote = if old {
            old_record(rec, &mut dst[w..])
        } else {
            dst.get_mut(w..w + rec.len()).map(|d| {
                d.copy_from_slice(rec);
                rec.len()
            })
        };
        let Some(len) = wrote else {
            s.pos = save_pos;
            break;
        };
        w += len;
    }
    if w == 0 {
        if s.pos < s.n || (!s.sorted && record(s.bytes(), s.pos).is_some()) {
            sys::set_errno(libc::EINVAL);
            return Some(-1);
        }
        if !s.sorted {
            // Served in the kernel's order: the rest from the kernel.
            free(i);
            return None;
        }
        if s.err != 0 {
            sys::set_errno(s.err);
            return Some(-1);
        }
    }
    Some(w as isize)
}

/// The real `syscall(SYS_getdents64, fd, buf, count)`, through libc's `syscall`.
///
/// # Safety
/// `buf` is valid for `count` bytes of writes.
unsafe fn raw_getdents64(fd: libc::c_long, buf: *mut u8, count: usize) -> isize {
    let f = crate::real!(syscall: fn(libc::c_long, libc::c_long, libc::c_long, libc::c_long, libc::c_long, libc::c_long, libc::c_long) -> libc::c_long);
    // SAFETY: the caller's contract; the kernel writes at most `count` bytes at `buf`.
    unsafe {
        f(
            libc::SYS_getdents64,
            fd,
            buf as libc::c_long,
            count as libc::c_long,
            0,
            0,
            0,
        ) as isize
    }
}

/// `syscall(SYS_getdents64 | SYS_getdents, fd, buf, count)`: `Some(result)` when family
/// `machine` sorts it. The snapshot is read with `getdents64` either way; for the old
/// `getdents` each record is written in its layout.
///
/// # Safety
/// Arguments as the system call takes them.
pub unsafe fn sys_getdents(n: libc::c_long, a: [libc::c_long; 6], ra: u64) -> Option<libc::c_long> {
    let old = n == libc::SYS_getdents;
    let fid = if old {
        seal_abi::Fid::SysGetdentsOld
    } else {
        seal_abi::Fid::SysGetdents
    };
    // SAFETY: a getdents64 of the caller's descriptor into a buffer of `c` bytes.
    let real = |b: *mut u8, c: usize| unsafe { raw_getdents64(a[0], b, c) };
    // SAFETY: forwarded contract (the kernel reads the count as an unsigned int).
    unsafe {
        getdents_as(
            a[0] as i32,
            a[1] as *mut u8,
            a[2] as u32 as usize,
            Some((fid, ra)),
            &real,
            old,
        )
    }
    .map(|r| r as libc::c_long)
}

/// A `getdents64` record as the old `getdents` writes it into `dst`: `d_ino`, `d_off`,
/// `d_reclen`, the name and its NUL, padding, and `d_type` in the last byte; its length, or
/// `None` when it does not fit.
pub fn old_record(rec: &[u8], dst: &mut [u8]) -> Option<usize> {
    let r = record(rec, 0)?;
    let len = (18 + r.name.len() + 2 + 7) & !7;
    let d = dst.get_mut(..len)?;
    d.fill(0);
    d[0..8].copy_from_slice(&r.ino.to_ne_bytes());
    d[8..16].copy_from_slice(&r.off.to_ne_bytes());
    d[16..18].copy_from_slice(&(len as u16).to_ne_bytes());
    d[18..18 + r.name.len()].copy_from_slice(r.name);
    d[len - 1] = r.dtype;
    Some(len)
}
