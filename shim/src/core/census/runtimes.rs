//! What the census asks of the language runtimes it does not name: who can give the call
//! site behind a counted call (CPython's frames, [`Capture`]) and who wants to see each loaded
//! object (its module walk, [`Object`]). The runtimes register at the crate root
//! ([`crate::CENSUS_CAPTURE`], [`crate::CENSUS_OBJECT_SEEN`]), consts whose calls compile to
//! direct ones.

use seal_abi::CensusFile;

use super::file_ptr;

/// A language runtime that can name the call site behind a counted call (its own frames, not
/// the native return address), registered at the root ([`crate::CENSUS_CAPTURE`]) so the
/// census names no runtime.
pub struct Capture {
    /// Is this image's runtime found and capturing? One relaxed load; called on every count.
    pub wanted: fn() -> bool,
    /// Records the calling thread's runtime frame for census slot `slot`.
    pub capture: fn(&CensusFile, usize),
    /// Is the calling thread's innermost runtime frame in the runtime's import machinery?
    pub in_import_system: fn(&CensusFile) -> bool,
}

/// A loaded object the census's module walk found, shown to the runtimes registered in
/// [`crate::CENSUS_OBJECT_SEEN`].
pub struct Object<'a> {
    /// Its path (the main executable's, for the empty name `dl_iterate_phdr` gives it).
    pub name: &'a [u8],
    /// Its first and last-plus-one mapped address.
    pub lo: u64,
    pub hi: u64,
    pub info: &'a libc::dl_phdr_info,
    pub file: &'a CensusFile,
}

/// Is the calling thread's innermost Python frame in the interpreter's import machinery (the
/// registered runtime's `in_import_system`)? One relaxed load when the image holds no Python.
#[inline]
pub fn in_python_import() -> bool {
    if !(crate::CENSUS_CAPTURE.wanted)() {
        return false;
    }
    // SAFETY: as in `count`: null, or a live mapping while published.
    match unsafe { file_ptr().as_ref() } {
        Some(file) => (crate::CENSUS_CAPTURE.in_import_system)(file),
        None => false,
    }
}
