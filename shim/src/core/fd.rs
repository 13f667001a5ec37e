//! Descriptors the shim makes for the program (raw system calls only): a memfd with fixed
//! contents (the sealed uuid, boot id and host name files), and raw results as errnos.

use core::sync::atomic::{AtomicU8, Ordering::Release};

use crate::core::sys;

/// Result of a raw system call as `Result<value, errno>`.
pub fn check(r: i64) -> Result<i64, i32> {
    if (-4095..0).contains(&r) {
        Err(-r as i32)
    } else {
        Ok(r)
    }
}

/// A raw system call's result in libc's convention: the value, or -1 with `errno` set.
pub fn libc_result(r: i64) -> i64 {
    check(r).unwrap_or_else(|e| {
        sys::set_errno(e);
        -1
    })
}

/// A memfd holding `content`, positioned at its start.
pub fn memfd_with(name: &[u8], content: &[u8], cloexec: bool) -> Result<i32, i32> {
    let fl = if cloexec { libc::MFD_CLOEXEC } else { 0 };
    // SAFETY: name is NUL-terminated.
    let fd = check(unsafe {
        sys::syscall3(libc::SYS_memfd_create, name.as_ptr() as i64, fl as i64, 0)
    })? as i32;
    if let Err(e) = write_all(fd, content) {
        sys::close(fd);
        return Err(e);
    }
    // SAFETY: plain integers.
    unsafe { sys::syscall3(libc::SYS_lseek, fd as i64, 0, libc::SEEK_SET as i64) };
    Ok(fd)
}

/// Writes all of `bytes` to `fd` with raw `write`s, retrying after `EINTR`: `Err(errno)` on
/// the first failure (a write of nothing counts as `EPIPE`: the reader is gone). Raw system
/// calls only, so a feeder process may use it.
pub fn write_all(fd: i32, bytes: &[u8]) -> Result<(), i32> {
    let mut done = 0;
    while done < bytes.len() {
        // SAFETY: the tail of bytes is valid.
        let r = unsafe {
            sys::syscall3(
                libc::SYS_write,
                fd as i64,
                bytes[done..].as_ptr() as i64,
                (bytes.len() - done) as i64,
            )
        };
        match check(r) {
            Ok(0) => return Err(libc::EPIPE),
            Ok(n) => done += n as usize,
            Err(libc::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Descriptors below this have a row in the descriptor table; others are looked at afresh on
/// every use.
pub const FDS: usize = 1024;

/// The per-process descriptor table: a row per descriptor, a byte in it for each family that
/// classifies descriptors and caches what it found (numbered at the root, `crate::FD_MARK_*`;
/// 0: not looked at). [`forget`] zeroes the row.
#[link_section = ".data.seal_hot"]
static TABLE: [[AtomicU8; crate::FD_MARKS]; FDS] =
    [const { [const { AtomicU8::new(0) }; crate::FD_MARKS] }; FDS];

/// Family `family`'s byte of descriptor `fd`'s row; `None` for a descriptor the table does
/// not cover. A family writes it only outside a vfork child (the table is the parent's).
#[inline(always)]
pub fn mark(fd: i32, family: usize) -> Option<&'static AtomicU8> {
    let row = TABLE.get(usize::try_from(fd).ok()?)?;
    row.get(family)
}

/// Descriptor `fd` was closed or replaced (`close`, `fclose`, the target of `dup2`/`dup3`):
/// forget what the shim cached about the file it named: its row of the descriptor table
/// (its causal channel, whether it is a `/proc` listing), and what the families registered
/// in [`crate::FD_FORGET`] keep elsewhere (sorted listings).
#[inline]
pub fn forget(fd: i32) {
    if crate::core::vfork::in_child() {
        // The parent's descriptor of that number is still open (see `process::vfork`).
        return;
    }
    if let Some(row) = usize::try_from(fd).ok().and_then(|i| TABLE.get(i)) {
        for m in row {
            m.store(0, Release);
        }
    }
    for f in crate::FD_FORGET {
        f(fd);
    }
}
