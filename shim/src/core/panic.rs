//! The panic handler of the embedded libseal, which is `no_std` (lib.rs says why).
//!
//! A panic in the shim is a bug in it, inside somebody else's process: the handler writes one
//! line, `libseal: panicked at <file>:<line>:<col>: <message>`, to the process's stderr with
//! a raw `write` (no lock, no allocation: it may run inside malloc or a signal handler) and
//! aborts, as std's `panic=abort` did. A line longer than its 512-byte buffer is cut short.

use core::fmt::{Display, Write};
use core::panic::Location;

use crate::core::sys::StackBuf;

/// The line a panic at `at` with `message` prints, newline included (a message too long for
/// the buffer is cut; the newline always fits, in the byte `push` keeps free).
pub fn line(at: Option<&Location>, message: impl Display) -> StackBuf<512> {
    let mut l = StackBuf::new();
    l.push(b"libseal: panicked");
    if let Some(at) = at {
        let _ = write!(l, " at {}:{}:{}", at.file(), at.line(), at.column());
    }
    let _ = write!(l, ": {message}");
    l.buf[l.len] = b'\n';
    l.len += 1;
    l
}

#[cfg(all(panic = "abort", not(test)))]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    crate::core::sys::write_all(2, line(info.location(), info.message()).as_bytes());
    // SAFETY: abort has no preconditions; it never returns.
    unsafe { libc::abort() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_one_line_with_its_place() {
        let at = Location::caller();
        let l = line(Some(at), format_args!("index {} out of range", 7));
        let want = format!(
            "libseal: panicked at {}:{}:{}: index 7 out of range\n",
            at.file(),
            at.line(),
            at.column()
        );
        assert_eq!(l.as_bytes(), want.as_bytes());
        assert_eq!(line(None, "x").as_bytes(), b"libseal: panicked: x\n");
    }

    #[test]
    fn a_long_message_is_cut_and_still_ends_the_line() {
        let long = "y".repeat(2000);
        let l = line(None, &long);
        assert_eq!(l.as_bytes().len(), 512);
        assert!(l.as_bytes().starts_with(b"libseal: panicked: yyy"));
        assert_eq!(l.as_bytes()[511], b'\n');
    }
}
