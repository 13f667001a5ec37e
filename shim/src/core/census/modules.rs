//! The census slot's module list: every loaded object (path, address range, load bias), so
//! the launcher can name the object and symbol behind each counted return address. Written
//! at image start and again whenever a call comes from an object loaded since (`dlopen`, C
//! extensions); one walker at a time, never waiting.

use core::sync::atomic::{AtomicBool, Ordering::*};

use seal_abi::{CensusFile, ModuleRecord, MAX_MODULES, TEXT_BYTES};

use super::{backed, file_ptr};
use crate::core::sys;

/// Held by the thread that is walking the loaded objects into the module list.
#[link_section = ".data.seal_hot"]
static REFRESHING: AtomicBool = AtomicBool::new(false);
/// Set by anyone who wants a walk; cleared by the walker before it walks.
#[link_section = ".data.seal_hot"]
static REFRESH_WANTED: AtomicBool = AtomicBool::new(false);

/// Appends every loaded object not yet listed to the module list (at image start, and when a
/// call comes from an address no listed object contains).
///
/// Never waits: if another thread (or this one, from a signal handler) is already walking,
/// the request is left in [`REFRESH_WANTED`] and that walker walks again before it lets go,
/// so an object loaded before the request is always listed by someone.
pub fn refresh_modules() {
    let file = file_ptr();
    if file.is_null() {
        return;
    }
    REFRESH_WANTED.store(true, SeqCst);
    loop {
        if REFRESHING
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_err()
        {
            return;
        }
        while REFRESH_WANTED.swap(false, SeqCst) {
            let _g = crate::core::real::Reentry::force();
            // SAFETY: dl_iterate_phdr calls us back synchronously with valid info structs;
            // data is the published census slot, and REFRESHING makes us its only module
            // writer.
            unsafe { libc::dl_iterate_phdr(Some(module_cb), file as *mut libc::c_void) };
        }
        REFRESHING.store(false, Release);
        if !REFRESH_WANTED.load(SeqCst) {
            return;
        }
    }
}

/// Forgets a walk that a thread of the fork parent was in the middle of (that thread does not
/// exist in the child).
pub(super) fn reset_refresh_lock() {
    REFRESHING.store(false, Relaxed);
    REFRESH_WANTED.store(false, Relaxed);
}

unsafe extern "C" fn module_cb(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: called by dl_iterate_phdr with a valid info; data is our census slot (shared:
    // other threads count into its slots meanwhile, so it is only ever borrowed shared here).
    let (info, file) = unsafe { (&*info, &*(data as *const CensusFile)) };
    let mut lo = u64::MAX;
    let mut hi = 0u64;
    for i in 0..info.dlpi_phnum as usize {
        // SAFETY: dlpi_phdr has dlpi_phnum entries.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type == libc::PT_LOAD {
            let s = info.dlpi_addr.wrapping_add(ph.p_vaddr);
            lo = lo.min(s);
            hi = hi.max(s.wrapping_add(ph.p_memsz));
        }
    }
    if hi == 0 {
        return 0;
    }
    // SAFETY: dlpi_name is a NUL-terminated string or null.
    let mut name = unsafe { sys::cstr(info.dlpi_name) };
    let mut exe_buf = [0u8; 1024];
    let exe_len = (file.exe_len as usize).min(seal_abi::EXE_BYTES);
    if name.is_empty() {
        // The main executable has an empty name: the path the header holds (else the link).
        name = if exe_len > 0 {
            &file.text[..exe_len]
        } else {
            let k = sys::readlink(b"/proc/self/exe\0", &mut exe_buf);
            &exe_buf[..k]
        };
    }
    let object = super::Object {
        name,
        lo,
        hi,
        info,
        file,
    };
    for seen in crate::CENSUS_OBJECT_SEEN {
        seen(&object);
    }
    append(file, name, lo, hi, info.dlpi_addr)
}

/// Lists code of libseal's making at `lo..hi`, in no loaded object, as module `name` (a cgo Go
/// runtime's vDSO, `process::go_vdso`): the census names the calls counted from it after it.
/// False when the list is being walked or is full.
pub fn add_module(name: &[u8], lo: u64, hi: u64) -> bool {
    let file = file_ptr();
    if file.is_null()
        || REFRESHING
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_err()
    {
        return false;
    }
    // SAFETY: a published census slot; REFRESHING makes us its only module writer.
    let ok = append(unsafe { &*file }, name, lo, hi, lo) == 0;
    REFRESHING.store(false, Release);
    ok
}

/// Appends module `name` at `lo..hi` (load bias `bias`) to `file`'s list unless it is there:
/// 0, or 1 when the list or the text is full. The caller holds [`REFRESHING`].
fn append(file: &CensusFile, name: &[u8], lo: u64, hi: u64, bias: u64) -> libc::c_int {
    let exe_len = (file.exe_len as usize).min(seal_abi::EXE_BYTES);
    let n = (file.n_modules.load(Relaxed) as usize).min(MAX_MODULES);
    let used = (file.text_used.load(Relaxed) as usize).min(TEXT_BYTES);
    let listed = (0..n).any(|i| {
        let m = file.module(i);
        let off = m.name_off as usize;
        m.start == lo && m.end == hi && file.text.get(off..off + m.name_len as usize) == Some(name)
    });
    if listed {
        return 0;
    }
    if n >= MAX_MODULES {
        return 1;
    }
    let record = file.module(n);
    if !backed(file, record, core::mem::size_of::<ModuleRecord>()) {
        return 1;
    }
    // The executable's name is the path at the start of the text: no second copy.
    let (off, len) = if exe_len > 0 && name == &file.text[..exe_len] {
        (0, exe_len)
    } else {
        let len = name.len().min(TEXT_BYTES - used);
        if !backed(file, file.text[used..].as_ptr(), len) {
            return 1;
        }
        // SAFETY: the text bytes past `used` are not yet published (text_used is stored
        // after them), and REFRESHING makes this thread their only writer.
        unsafe {
            let text = file.text.as_ptr() as *mut u8;
            core::ptr::copy_nonoverlapping(name.as_ptr(), text.add(used), len);
        }
        file.text_used.store((used + len) as u32, Release);
        (used, len)
    };
    // SAFETY: the module record `n` is not yet published (n_modules is stored after it), and
    // REFRESHING makes this thread its only writer; readers (the launcher) read only up to the
    // published counts.
    unsafe {
        let m = record as *const ModuleRecord as *mut ModuleRecord;
        (*m).start = lo;
        (*m).end = hi;
        (*m).bias = bias;
        (*m).name_off = off as u32;
        (*m).name_len = len as u32;
    }
    file.n_modules.store(n as u32 + 1, Release);
    0
}
