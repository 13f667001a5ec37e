//! Bytes a stdio stream writes to a channel carry the writer's clock, as a `write` does.
//!
//! glibc writes a stream's buffer with an internal `write` no hook sees. What the hooks see is
//! the flush that empties it: `fflush` (bash's `echo` and `printf` builtins flush after
//! each), `fclose` (coreutils' `close_stdout`), and the end of the process, where glibc
//! flushes every stream after the shared objects' destructors have run, libseal's among
//! them: libseal flushes standard output there first (as glibc would a moment later,
//! without its lock, as glibc does at exit). So `(sleep 1; echo x) | reader` shows the
//! reader the second. Writes glibc makes while a stream's buffer overflows (in the middle
//! of `fputs` or `printf`) are still not seen: those bytes carry nothing.

use libc::{c_int, FILE};

#[cfg(not(test))]
use super::keys;
use super::{active, send};

/// glibc's `_IO_MAGIC` in the high half of `FILE::_flags` (a live stream).
const IO_MAGIC_MASK: u32 = 0xFFFF_0000;
const IO_MAGIC: u32 = 0xFBAD_0000;

/// Bytes buffered in stream `f` for writing: glibc's `_IO_write_ptr - _IO_write_base` (the
/// fifth and sixth words of `FILE`, after `_flags` and the three read pointers).
///
/// # Safety
/// `f` a valid stream.
unsafe fn pending(f: *mut FILE) -> usize {
    // SAFETY: `_flags` is the first field of a valid stream.
    let flags = unsafe { *(f as *const u32) };
    if flags & IO_MAGIC_MASK != IO_MAGIC {
        return 0;
    }
    let words = f as *const *const u8;
    // SAFETY: fields 4 and 5 (pointer-sized) of glibc's `struct _IO_FILE` on x86_64.
    let (base, ptr) = unsafe { (*words.add(4), *words.add(5)) };
    if base.is_null() || ptr <= base {
        return 0;
    }
    ptr as usize - base as usize
}

/// The descriptor of stream `f` (`-1` for a stream without one), errno left alone.
///
/// # Safety
/// `f` a valid stream.
unsafe fn fd_of(f: *mut FILE) -> c_int {
    let e = crate::core::sys::errno();
    // SAFETY: a valid stream; `fileno` takes no lock and is not interposed.
    let fd = unsafe { libc::fileno(f) };
    crate::core::sys::set_errno(e);
    fd
}

/// A flush of stream `f` run by `call` (0: done): its buffered bytes are a send.
///
/// # Safety
/// `f` null or a valid stream.
pub unsafe fn flushing(f: *mut FILE, call: impl FnOnce() -> c_int) -> c_int {
    if f.is_null() || !active() {
        return call();
    }
    // SAFETY: a valid stream per the contract.
    let n = unsafe { pending(f) };
    if n == 0 {
        return call();
    }
    // SAFETY: as above.
    let fd = unsafe { fd_of(f) };
    let mut r = 0;
    send(fd, n, || {
        r = call();
        if r == 0 {
            n as isize
        } else {
            -1
        }
    });
    r
}

/// Standard output's buffer, flushed as a send before glibc's own flush at exit (when it
/// goes to a channel; otherwise left to glibc).
#[cfg(not(test))]
extern "C" fn flush_stdout_at_exit() {
    extern "C" {
        static stdout: *mut FILE;
    }
    if !active() || crate::core::vfork::in_child() {
        return;
    }
    // SAFETY: glibc's `stdout`, a valid stream pointer for the process's life.
    let f = unsafe { stdout };
    // SAFETY: a valid stream (a closed one has nothing pending and is left alone).
    if f.is_null() || unsafe { pending(f) } == 0 {
        return;
    }
    // SAFETY: as above.
    let fd = unsafe { fd_of(f) };
    if keys(fd).is_none_or(|(s, _)| s == 0) {
        return;
    }
    let real = crate::real!(fflush_unlocked: fn(*mut FILE) -> c_int);
    // SAFETY: a valid stream; unlocked, as glibc flushes at exit (no thread can be waited for).
    unsafe { flushing(f, || real(f)) };
}

#[cfg(not(test))]
#[used]
#[link_section = ".fini_array"]
static FLUSH_AT_EXIT: extern "C" fn() = flush_stdout_at_exit;
