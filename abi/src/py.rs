//! Python frames in the census: the part of a census slot that says which Python line made a
//! sealed call (docs/census.md, "Python frames").
//!
//! The shim reads the calling thread's innermost CPython frame (and the innermost frame in
//! the user's own code) inside the hook and records them as *sites*: a (code object, bytecode
//! offset) pair resolved once, when first seen, to file, line and function. Each call is then
//! counted in [`PyCensus::slots`] under (census slot of its native caller, innermost site,
//! user site). The launcher joins the two tables.

use core::sync::atomic::{AtomicU32, AtomicU64};

/// Distinct Python sites per process image.
pub const PY_SITES: usize = 4096;
/// Distinct (native call site, innermost site, user site) triples per process image.
pub const PY_SLOTS: usize = 8192;
/// Bytes for file and function names of sites.
pub const PY_STRINGS: usize = 1 << 17;

/// [`PyCensus::status`]: no CPython interpreter in this image (or not yet running).
pub const STATUS_NONE: u32 = 0;
/// Frames are being recorded.
pub const STATUS_ON: u32 = 1;
/// A CPython interpreter whose version has no known layout: no frames.
pub const STATUS_UNKNOWN_VERSION: u32 = 2;
/// The layout did not check out against the running interpreter: no frames.
pub const STATUS_LAYOUT_MISMATCH: u32 = 3;

// The bits of `PySite::flags`.
crate::bits! { u32:
    /// [`PySite::flags`]: the site is in the user's own code (not the standard library,
    /// site-packages or the import machinery).
    SITE_USER,
    /// [`PySite::flags`]: the site is in the interpreter's start-up or import machinery.
    SITE_IMPORT,
}

/// One Python site: a code object and a bytecode offset in it, resolved.
#[repr(C)]
pub struct PySite {
    /// Hash of (code object identity, offset); 0 = free.
    pub key: AtomicU64,
    /// 1 once the fields below are written.
    pub ready: AtomicU32,
    pub flags: u32,
    /// Source line (0 when the offset has no line).
    pub line: i32,
    pub file_off: u32,
    pub file_len: u32,
    pub func_off: u32,
    pub func_len: u32,
    pub _pad: u32,
}

/// One counter of Python-attributed calls. `key` = [`py_slot_key`].
#[repr(C)]
pub struct PySlot {
    pub key: AtomicU64,
    pub count: AtomicU64,
}

/// The Python part of a census slot.
#[repr(C)]
pub struct PyCensus {
    pub status: AtomicU32,
    /// `PY_VERSION_HEX` of the interpreter (`0x030b07f0` = 3.11.7 final), 0 when unknown.
    pub version: AtomicU32,
    pub strings_used: AtomicU32,
    pub _pad: u32,
    /// Calls with a Python frame that found a table full (counted natively only).
    pub dropped: AtomicU64,
    pub sites: [PySite; PY_SITES],
    pub slots: [PySlot; PY_SLOTS],
    pub strings: [u8; PY_STRINGS],
}

/// Key of a [`PySlot`]: the native census slot index (bits 40..), innermost site index + 1
/// (bits 20..40) and user site index + 1 (bits 0..20, 0 = no user frame).
pub const fn py_slot_key(census_slot: usize, inner: usize, user: Option<usize>) -> u64 {
    ((census_slot as u64 + 1) << 40)
        | ((inner as u64 + 1) << 20)
        | match user {
            Some(u) => u as u64 + 1,
            None => 0,
        }
}

/// Inverse of [`py_slot_key`]: `(census slot, inner site, user site)`.
pub const fn split_py_slot_key(key: u64) -> (usize, usize, Option<usize>) {
    let user = (key & 0xf_ffff) as usize;
    (
        ((key >> 40) as usize).wrapping_sub(1),
        (((key >> 20) & 0xf_ffff) as usize).wrapping_sub(1),
        if user == 0 { None } else { Some(user - 1) },
    )
}

/// Is a code object's `co_filename` library code (standard library, site-packages, frozen
/// modules) rather than the user's own? Judged from the path alone, the same way in the shim
/// (which needs it to find the innermost user frame) and in the launcher.
pub fn is_library_path(path: &[u8]) -> bool {
    if path.first() == Some(&b'<') {
        // `<frozen importlib._bootstrap>`, `<frozen runpy>`: frozen standard library.
        // `<string>`, `<stdin>`: code the user handed to exec/compile or typed.
        return path.starts_with(b"<frozen ");
    }
    contains(path, b"/site-packages/") || contains(path, b"/dist-packages/") || stdlib_dir(path)
}

/// Is this site the interpreter's start-up or import machinery (importlib, zipimport, site)?
pub fn is_import_path(path: &[u8]) -> bool {
    path.starts_with(b"<frozen importlib")
        || path.starts_with(b"<frozen zipimport")
        || path == b"<frozen site>"
        || (stdlib_dir(path)
            && (contains(path, b"/importlib/")
                || path.ends_with(b"/site.py")
                || path.ends_with(b"/zipimport.py")))
}

/// `…/lib/python3.N/…` (or `lib64`), but not below its site-packages (checked separately).
fn stdlib_dir(path: &[u8]) -> bool {
    let mut i = 0;
    while let Some(p) = find(&path[i..], b"/python3.") {
        let at = i + p;
        let before = &path[..at];
        let after = &path[at + 9..];
        let digits = after.iter().take_while(|b| b.is_ascii_digit()).count();
        if (before.ends_with(b"/lib") || before.ends_with(b"/lib64"))
            && digits > 0
            && after.get(digits) == Some(&b'/')
        {
            return true;
        }
        i = at + 1;
    }
    false
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find(hay, needle).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_paths() {
        // Each input, and whether it is a library's.
        macro_rules! library {
            ($want:literal: $($path:literal)*) => {
                for p in [$($path.as_bytes()),*] {
                    assert_eq!(is_library_path(p), $want, "{}", core::str::from_utf8(p).unwrap());
                }
            };
        }
        library! { true:
            "/root/.pyenv/versions/3.11.7/lib/python3.11/datetime.py" "/usr/lib/python3.11/uuid.py"
            "/usr/lib64/python3.9/random.py" "/venv/lib/python3.12/site-packages/requests/api.py"
            "/usr/lib/python3/dist-packages/yaml/__init__.py" "<frozen importlib._bootstrap>"
        }
        library! { false:
            "/tmp/app/report.py" "app.py" "<string>" "/home/me/python3.11/x.py"
            "/srv/lib/python3.x/notes.py"
        }
        assert!(is_import_path(b"<frozen importlib._bootstrap_external>"));
        assert!(is_import_path(
            b"/usr/lib/python3.8/importlib/_bootstrap.py"
        ));
        assert!(!is_import_path(b"/usr/lib/python3.8/uuid.py"));
    }

    #[test]
    fn slot_keys_round_trip() {
        let k = py_slot_key(16383, 4095, Some(7));
        assert_eq!(split_py_slot_key(k), (16383, 4095, Some(7)));
        assert_eq!(split_py_slot_key(py_slot_key(0, 0, None)), (0, 0, None));
        assert_ne!(py_slot_key(0, 0, None), 0);
    }
}
