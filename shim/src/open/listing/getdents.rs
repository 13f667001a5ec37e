//! `getdents64`, the libc wrapper, for programs that read a directory without a `DIR`
//! stream: a `/proc` listing comes back with the run's numbers in virtual pid order (the
//! parent module's doc), or, when every ordered slot is taken, in the kernel's order.

use seal_abi::Fid;

use super::records::{has_numeric, numeric, record, rewrite};
use super::{kind_of, shown, sorted, Kind};
use crate::core::{config, sys, table};
use crate::process::vpid;

/// Bytes of records read per `getdents64` call while a listing is collected.
const SCRATCH: usize = 4096;
/// Below this a caller's buffer may not hold a renamed first record (its record can grow).
const SMALL: usize = 32;

fn lseek(fd: i32, off: i64, whence: i32) -> i64 {
    // SAFETY: no pointers.
    unsafe { sys::syscall3(libc::SYS_lseek, fd as i64, off, whence as i64) }
}

fn einval() -> isize {
    sys::set_errno(libc::EINVAL);
    -1
}

/// `getdents64(fd, buf, count)` with `real` the libc function bound to `fd`: a `/proc`
/// listing with the run's numbers, in virtual pid order (see the module doc).
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
    if buf.is_null() || crate::core::real::Reentry::inside() || !config::in_run() {
        return real(buf, count);
    }
    let key = sorted::fd_key(fd);
    let slot = sorted::find(key);
    let start = if slot.is_none() && count < SMALL {
        lseek(fd, 0, libc::SEEK_CUR)
    } else {
        -1
    };
    let n = real(buf, count);
    if let Some(i) = slot {
        match n {
            // SAFETY: the stream's slot; buf valid for count bytes.
            0 => return unsafe { serve_many(i, fd, buf, count, 0) },
            n if n < 0 => return n,
            // The kernel has records again: the descriptor was rewound. List it afresh.
            _ => sorted::free(i),
        }
    }
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
    let Some(i) = sorted::claim(key) else {
        // SAFETY: forwarded contract.
        return unsafe { in_kernel_order(fd, buf, count, n as usize, start, &t, kind, &real) };
    };
    // SAFETY: the slot we just claimed.
    let s = &mut unsafe { sorted::state(i) }.list;
    // Names that are not numbers stay (they come first, before any number), compacted in
    // place; numbers join the set.
    let (mut at, mut kept) = (0, 0);
    loop {
        // SAFETY: n bytes of records at buf; this view ends before the copy below.
        let view = unsafe { core::slice::from_raw_parts(buf as *const u8, n as usize) };
        let Some(r) = record(view, at) else { break };
        let len = r.reclen;
        if numeric(r.name).is_some() {
            s.take(&t, kind, &r);
        } else {
            // SAFETY: kept <= at, both within the n bytes; copy handles the overlap.
            unsafe { core::ptr::copy(buf.add(at), buf.add(kept), len) };
            kept += len;
        }
        at += len;
    }
    // The rest of the listing (numbers only: the kernel lists them last).
    let mut scratch = [0u8; SCRATCH];
    loop {
        let m = real(scratch.as_mut_ptr(), SCRATCH);
        if m <= 0 {
            break;
        }
        let mut at = 0;
        while let Some(r) = record(&scratch[..m as usize], at) {
            s.take(&t, kind, &r);
            at += r.reclen;
        }
    }
    // SAFETY: the slot is ours; buf valid for count bytes, `kept` of them used.
    unsafe { serve_many(i, fd, buf, count, kept) }
}

/// Fills `buf[used..count]` with the next records of ordered stream `i`; the bytes in `buf`,
/// or `EINVAL` when not even one record fits (as the kernel).
///
/// # Safety
/// The caller's stream owns slot `i`; `buf` valid for `count` bytes.
unsafe fn serve_many(i: usize, fd: i32, buf: *mut u8, count: usize, used: usize) -> isize {
    let Some(t) = table::get() else {
        return used as isize;
    };
    // SAFETY: per the contract.
    let s = &mut unsafe { sorted::state(i) }.list;
    // SAFETY: per the contract.
    let dst = unsafe { core::slice::from_raw_parts_mut(buf, count) };
    let mut w = used;
    let mut ino = |r: i32| sorted::ino_of(fd, r);
    loop {
        match s.serve(&t, &mut ino, &mut dst[w..]) {
            sorted::Served::Record(n) => w += n,
            sorted::Served::Full if w == 0 => return einval(),
            _ => return w as isize,
        }
    }
}

/// The fallback when every ordered slot is taken: the `n` bytes of records at `buf` rewritten
/// in the kernel's order, through a stack buffer. When renamed records outgrow the caller's
/// buffer the descriptor goes back to the last record returned (procfs directories seek by
/// `d_off`), or to `start` when none was.
///
/// # Safety
/// `buf` valid for `count` bytes, `n` of them records the kernel just wrote.
#[allow(clippy::too_many_arguments)]
unsafe fn in_kernel_order(
    fd: i32,
    buf: *mut u8,
    count: usize,
    mut n: usize,
    start: i64,
    t: &table::Table,
    kind: Kind,
    real: &dyn Fn(*mut u8, usize) -> isize,
) -> isize {
    let cap = count.min(SCRATCH);
    loop {
        // SAFETY: per the contract.
        let src = unsafe { core::slice::from_raw_parts(buf as *const u8, n) };
        let mut scratch = [0u8; SCRATCH];
        let r = rewrite(src, &mut scratch[..cap], &mut |p| shown(t, kind, p));
        if r.full {
            let back = r.resume.unwrap_or(start);
            if back < 0 || lseek(fd, back, libc::SEEK_SET) < 0 || r.written == 0 {
                return einval();
            }
        } else if r.written == 0 {
            // Only numbers outside the run in this batch: read on.
            match real(buf, cap) {
                m if m <= 0 => return m,
                m => {
                    n = m as usize;
                    continue;
                }
            }
        }
        // SAFETY: written <= cap <= count bytes, into the caller's buffer.
        unsafe { core::ptr::copy_nonoverlapping(scratch.as_ptr(), buf, r.written) };
        return r.written as isize;
    }
}
