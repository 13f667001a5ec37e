//! The image's command line for its census: `argc`/`argv` as glibc hands them to libseal's
//! constructor, or read back from the start of the stack when libseal was set up earlier.

use core::sync::atomic::{AtomicUsize, Ordering::*};

use seal_abi::CensusFile;

use super::*;

/// The image's `argc` and `argv` as glibc passes them to libseal's constructor (0 and null
/// until then, or when libseal was initialised earlier, from a hook another library's
/// constructor called).
#[link_section = ".data.seal_hot"]
static ARGC: AtomicUsize = AtomicUsize::new(0);
#[link_section = ".data.seal_hot"]
static ARGV: AtomicUsize = AtomicUsize::new(0);

/// The arguments the constructor was given, when it has run: `(argc, argv)`.
pub fn start_args() -> Option<(usize, *const *const libc::c_char)> {
    let (argc, argv) = (ARGC.load(Relaxed), ARGV.load(Relaxed));
    (argc > 0 && argv != 0).then_some((argc, argv as *const *const libc::c_char))
}

/// Keeps the constructor's arguments for [`read_argv`].
pub fn set_args(argc: libc::c_int, argv: *const *const libc::c_char) {
    if argc > 0 && !argv.is_null() {
        ARGV.store(argv as usize, Relaxed);
        ARGC.store(argc as usize, Relaxed);
    }
}

/// Copies the constructor's arguments into the census slot's `argv`, each with its NUL, as
/// `/proc/self/cmdline` shows them at start; `None` when they are not known.
///
/// # Safety
/// `file` is a live, unpublished census mapping.
unsafe fn argv_from_start(file: *mut CensusFile) -> Option<usize> {
    let (argc, argv) = (
        ARGC.load(Relaxed),
        ARGV.load(Relaxed) as *const *const libc::c_char,
    );
    if argc == 0 || argv.is_null() {
        return None;
    }
    let mut done = 0;
    for i in 0..argc {
        // SAFETY: glibc's argv holds argc strings, untouched before main.
        let a = unsafe { *argv.add(i) };
        if a.is_null() {
            break;
        }
        // SAFETY: a NUL-terminated argument, NUL included.
        let arg = unsafe { core::slice::from_raw_parts(a as *const u8, sys::cstr(a).len() + 1) };
        // SAFETY: per the contract.
        if !unsafe { append_argv(file, &mut done, arg) } {
            break;
        }
    }
    Some(done)
}

/// Appends `piece` to the census slot's `argv` at `*done` as far as it fits (and its pages can
/// be backed); false when it was cut.
///
/// # Safety
/// `file` is a live, unpublished census mapping and `*done <= ARGV_BYTES`.
unsafe fn append_argv(file: *mut CensusFile, done: &mut usize, piece: &[u8]) -> bool {
    // SAFETY: the text of the live mapping, after the path; `*done <= ARGV_BYTES` keeps the
    // start inside it.
    let c = unsafe {
        let at = (*file).exe_len as usize + *done;
        let dst = core::ptr::addr_of_mut!((*file).text) as *mut u8;
        copy_in(file, dst.add(at), ARGV_BYTES - *done, piece)
    };
    *done += c;
    c == piece.len()
}

/// Reads `/proc/self/cmdline` into the census slot's `argv` a page at a time (or takes the
/// constructor's arguments, the same bytes); the bytes read.
///
/// # Safety
/// `file` is a live, unpublished census mapping.
pub(super) unsafe fn read_argv(file: *mut CensusFile, buf: &mut [u8; 4096]) -> usize {
    // SAFETY: per the contract.
    if let Some(n) = unsafe { argv_from_start(file) } {
        return n;
    }
    let fd = sys::open(b"/proc/self/cmdline\0", libc::O_RDONLY | libc::O_CLOEXEC, 0);
    if fd < 0 {
        return 0;
    }
    let mut done = 0;
    while done < ARGV_BYTES {
        let n = sys::read_all(fd, &mut buf[..4096.min(ARGV_BYTES - done)]);
        // SAFETY: per the contract; `done < ARGV_BYTES`.
        if n == 0 || !unsafe { append_argv(file, &mut done, &buf[..n]) } {
            break;
        }
    }
    sys::close(fd);
    done
}
