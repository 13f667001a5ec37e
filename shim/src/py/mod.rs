//! Python frames in the census: which Python line made a sealed call.
//!
//! When the image holds a CPython interpreter (an object named `*python*` that exports
//! `_PyRuntime`), every counted call also reads the calling thread's Python frames the way
//! out-of-process profilers do: the thread's `PyThreadState` from the interpreter's own TSS key
//! (`pthread_getspecific`, valid with or without the GIL), then the frame chain. The innermost
//! frame and the innermost frame in the user's own code ([`seal_abi::py::is_library_path`])
//! become *sites* in the census slot; the call is counted under (native caller's census slot,
//! inner site, user site). No allocation, no lock, no call into the interpreter.
//!
//! Reading memory safely: the layout (per minor version, [`layout`]) is checked once against
//! the running interpreter with reads that cannot fault (`process_vm_readv`); file names, line
//! tables and the class of each code object are read that way too, once each. The per-call
//! walk over this thread's own frames uses plain loads of pointers that the checked layout
//! says the interpreter keeps valid (this thread's frames and the code objects they hold a
//! reference to), each checked for range, alignment and, for code objects, their type. An
//! unknown version, a stripped interpreter or a layout that does not check out means no
//! frames: the census is then exactly what it was without this module.

mod layout;
mod resolve;

use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

use seal_abi::py::{self as abi, PyCensus, PY_SITES, PY_SLOTS};
use seal_abi::CensusFile;

use layout::{Layout, NONE};

/// [`STATE`]: no interpreter seen.
const ABSENT: u32 = 0;
/// Symbols found; the interpreter has not yet set up its thread states.
const FOUND: u32 = 1;
/// Layout checked: frames are read on every counted call.
const ON: u32 = 2;
/// No frames in this image, for good.
const OFF: u32 = 3;

crate::hot_statics! {
    static STATE: AtomicU32 = AtomicU32::new(ABSENT);
    static RUNTIME: AtomicU64 = AtomicU64::new(0);
    static RUNTIME_SIZE: AtomicU64 = AtomicU64::new(0);
    static CODE_TYPE: AtomicU64 = AtomicU64::new(0);
    static STR_TYPE: AtomicU64 = AtomicU64::new(0);
    static BYTES_TYPE: AtomicU64 = AtomicU64::new(0);
    static VERSION: AtomicU32 = AtomicU32::new(0);
    /// Index into [`layout::LAYOUTS`].
    static LAYOUT: AtomicUsize = AtomicUsize::new(0);
    /// The interpreter's TSS key (valid once [`STATE`] is [`ON`]).
    static KEY: AtomicU32 = AtomicU32::new(0);
}

/// Frames walked at most per call, looking for a user frame.
const MAX_DEPTH: usize = 256;

/// Moves [`STATE`] on, and tells the hot paths (`config::SLOW`) whether counted calls
/// capture frames.
fn set_state(state: u32) {
    if state == FOUND || state == ON {
        crate::core::config::slow_set(crate::core::config::slow::PYTHON);
    }
    STATE.store(state, Release);
    if state != FOUND && state != ON {
        crate::core::config::slow_clear(crate::core::config::slow::PYTHON);
    }
}

/// Should a counted call look for Python frames? One relaxed load.
#[inline(always)]
pub fn wanted() -> bool {
    let s = STATE.load(Relaxed);
    s == FOUND || s == ON
}

/// The minor version of this image's CPython 3 interpreter (0: none found, or not 3.8-3.13).
pub fn minor() -> u32 {
    let v = VERSION.load(Relaxed);
    if v >> 24 == 3 {
        (v >> 16) & 0xff
    } else {
        0
    }
}

/// Looks at a loaded object (from the census's module walk): is it a CPython interpreter?
pub fn note_object(path: &[u8], info: &libc::dl_phdr_info, file: &CensusFile) {
    if STATE.load(Relaxed) != ABSENT {
        return;
    }
    let base = match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[i + 1..],
        None => path,
    };
    let Some(at) = base.windows(6).position(|w| w == b"python") else {
        return;
    };
    let mut syms = [
        (&b"_PyRuntime"[..], 0u64, 0u64),
        (b"PyCode_Type", 0, 0),
        (b"PyUnicode_Type", 0, 0),
        (b"PyBytes_Type", 0, 0),
        (b"Py_Version", 0, 0),
    ];
    // SAFETY: info describes a loaded object (dl_iterate_phdr's callback argument).
    unsafe { dynsyms(info, &mut syms) };
    let [(_, runtime, rt_size), (_, code_t, _), (_, str_t, _), (_, bytes_t, _), (_, ver, _)] = syms;
    if runtime == 0 {
        return;
    }
    let version = if ver != 0 {
        // SAFETY: `Py_Version` is a const unsigned long in the object's mapped rodata.
        unsafe { (ver as *const u32).read() }
    } else {
        minor_from_name(&base[at + 6..]).map_or(0, |m| 0x0300_0000 | (m << 16))
    };
    if !crate::core::census::back_py(file) {
        set_state(OFF);
        return;
    }
    let py = &file.py;
    py.version.store(version, Relaxed);
    let minor = (version >> 16) & 0xff;
    let found = layout::LAYOUTS.iter().position(|l| l.minor == minor);
    let Some(idx) = found.filter(|_| version >> 24 == 3 && code_t != 0) else {
        set_state(OFF);
        py.status.store(abi::STATUS_UNKNOWN_VERSION, Relaxed);
        return;
    };
    RUNTIME.store(runtime, Relaxed);
    RUNTIME_SIZE.store(rt_size, Relaxed);
    CODE_TYPE.store(code_t, Relaxed);
    STR_TYPE.store(str_t, Relaxed);
    BYTES_TYPE.store(bytes_t, Relaxed);
    VERSION.store(version, Relaxed);
    LAYOUT.store(idx, Relaxed);
    set_state(FOUND);
}

/// `3.11` from `3.11.so.1.0` / `3.11` (after "python").
fn minor_from_name(rest: &[u8]) -> Option<u32> {
    let rest = rest.strip_prefix(b"3.")?;
    let n = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if n == 0 || n > 2 {
        return None;
    }
    Some(rest[..n].iter().fold(0, |a, &d| a * 10 + (d - b'0') as u32))
}

/// Looks up `(name, value, size)` for each wanted name in the object's `.dynsym`.
///
/// # Safety
/// As [`crate::elf::DynSyms::of`].
unsafe fn dynsyms(info: &libc::dl_phdr_info, want: &mut [(&[u8], u64, u64)]) {
    // SAFETY: forwarded.
    let Some(t) = (unsafe { crate::elf::DynSyms::of(info) }) else {
        return;
    };
    for w in want.iter_mut() {
        if let Some(s) = t.lookup(w.0).filter(|s| s.st_value != 0) {
            *w = (w.0, t.bias.wrapping_add(s.st_value), s.st_size);
        }
    }
}

fn layout() -> &'static Layout {
    &layout::LAYOUTS[LAYOUT.load(Relaxed).min(layout::LAYOUTS.len() - 1)]
}

/// A pointer the interpreter could have made: user space, 8-aligned, not in the first pages.
#[inline(always)]
fn plausible(p: u64) -> bool {
    (0x10000..0x7fff_ffff_f000).contains(&p) && p & 7 == 0
}

/// # Safety
/// `p` must be readable (see the module docs for why the walk's pointers are).
#[inline(always)]
unsafe fn ld(p: u64) -> u64 {
    // SAFETY: forwarded.
    unsafe { (p as *const u64).read_volatile() }
}

/// This thread's Python thread state, or 0.
#[inline(always)]
fn thread_state() -> u64 {
    // SAFETY: pthread_getspecific only reads this thread's key table (a key out of range
    // returns NULL); it takes no lock and is not interposed by libseal.
    unsafe { libc::pthread_getspecific(KEY.load(Relaxed)) as u64 }
}

/// Checks the layout against the running interpreter, with reads that cannot fault.
#[cold]
#[inline(never)]
fn activate(py: &PyCensus) -> bool {
    let l = layout();
    let rt = RUNTIME.load(Relaxed);
    if l.tss_key + 4 > RUNTIME_SIZE.load(Relaxed) as usize {
        return give_up(py);
    }
    // `_is_initialized` and `_key`, side by side: one read (this runs at every counted call
    // until the interpreter is up: ~150 times in a CPython 3.11 start-up).
    let Some(pair) = resolve::read_u64(rt + l.tss_key as u64 - 4) else {
        return give_up(py);
    };
    let (init, key) = (pair as u32 as i32, (pair >> 32) as u32 as i32);
    if init != 1 {
        // Not yet initialised (before Py_Initialize) or not this layout: try again later.
        return false;
    }
    if !(0..1024).contains(&key) {
        return give_up(py);
    }
    KEY.store(key as u32, Relaxed);
    let ts = thread_state();
    if ts == 0 {
        return false;
    }
    let Some(mut f) = resolve::read_u64(ts + l.ts_frame as u64) else {
        return give_up(py);
    };
    if l.cframe_current != NONE && f != 0 {
        match resolve::read_u64(f + l.cframe_current as u64) {
            Some(x) => f = x,
            None => return give_up(py),
        }
    }
    if f == 0 {
        return false;
    }
    // The innermost frames must hold code objects (3.12+ entry frames may not: look a few up).
    let code_t = CODE_TYPE.load(Relaxed);
    for _ in 0..8 {
        let code = resolve::read_u64(f + l.fr_code as u64);
        let ty = code.and_then(|c| resolve::read_u64(c + 8));
        if ty == Some(code_t) {
            py.status.store(abi::STATUS_ON, Relaxed);
            py.version.store(VERSION.load(Relaxed), Relaxed);
            set_state(ON);
            return true;
        }
        match resolve::read_u64(f + l.fr_back as u64) {
            Some(b) if plausible(b) => f = b,
            _ => break,
        }
    }
    give_up(py)
}

fn give_up(py: &PyCensus) -> bool {
    set_state(OFF);
    py.status.store(abi::STATUS_LAYOUT_MISMATCH, Relaxed);
    false
}

/// A frame of the walk: its code object and the bytecode offset (bytes) it is at.
#[derive(Clone, Copy)]
struct At {
    code: u64,
    off: i64,
    fp: u64,
}

/// Records the Python frames of a call that was counted in census slot `slot`.
#[inline(never)]
pub fn capture(file: &CensusFile, slot: usize) {
    if !ready(file) {
        return;
    }
    let py = &file.py;
    let l = layout();
    let mut inner: Option<(At, u32)> = None;
    let mut user: Option<At> = None;
    walk(l, |at| {
        let class = class_of(l, at);
        if inner.is_none() {
            inner = Some((at, class));
        }
        if class & abi::SITE_USER != 0 {
            user = Some(at);
            return true;
        }
        false
    });
    let Some((inner, _)) = inner else {
        return;
    };
    let Some(inner_site) = site_of(l, py, inner) else {
        py.dropped.fetch_add(1, Relaxed);
        return;
    };
    let user_site = match user {
        Some(u) if u.fp == inner.fp && u.off == inner.off => Some(inner_site),
        Some(u) => match site_of(l, py, u) {
            Some(s) => Some(s),
            None => {
                py.dropped.fetch_add(1, Relaxed);
                return;
            }
        },
        None => None,
    };
    let key = abi::py_slot_key(slot, inner_site, user_site);
    let mut i = (mix(key) as usize) & (PY_SLOTS - 1);
    for _ in 0..64 {
        let s = &py.slots[i];
        if !crate::core::census::backed_py(py, s, core::mem::size_of::<abi::PySlot>()) {
            break;
        }
        let k = s.key.load(Relaxed);
        if k == key
            || (k == 0 && s.key.compare_exchange(0, key, Relaxed, Relaxed).is_ok())
            || s.key.load(Relaxed) == key
        {
            s.count.fetch_add(1, Relaxed);
            return;
        }
        i = (i + 1) & (PY_SLOTS - 1);
    }
    py.dropped.fetch_add(1, Relaxed);
}

/// Can this thread's frames be read (the census slot's Python region backed, the layout
/// checked, activating it on first use)?
#[inline(always)]
fn ready(file: &CensusFile) -> bool {
    if !crate::core::census::back_py(file) {
        return false;
    }
    match STATE.load(Acquire) {
        ON => true,
        FOUND => activate(&file.py),
        _ => false,
    }
}

/// Calls `visit` on this thread's Python frames that run code, innermost first, until it
/// returns true (at most [`MAX_DEPTH`] frames). The layout must be checked ([`STATE`] `ON`).
#[inline(always)]
fn walk(l: &Layout, mut visit: impl FnMut(At) -> bool) {
    let ts = thread_state();
    if !plausible(ts) {
        return;
    }
    let code_t = CODE_TYPE.load(Relaxed);
    // SAFETY (every `ld` below): the thread state is this thread's own, handed to the
    // interpreter's TSS key by the interpreter; the checked layout says which of its words
    // point to this thread's frames and each frame's code object, both kept alive while the
    // frame is on the chain; every pointer is range- and alignment-checked before it is read.
    let mut f = unsafe { ld(ts + l.ts_frame as u64) };
    if l.cframe_current != NONE && plausible(f) {
        f = unsafe { ld(f + l.cframe_current as u64) };
    }
    for _ in 0..MAX_DEPTH {
        if !plausible(f) {
            break;
        }
        let back = unsafe { ld(f + l.fr_back as u64) };
        // 3.12+: a frame owned by the C stack is an entry shim, not Python code.
        let shim = l.fr_owner != NONE && unsafe { *((f + l.fr_owner as u64) as *const u8) } == 3;
        let code = unsafe { ld(f + l.fr_code as u64) };
        if !shim && plausible(code) && unsafe { ld(code + 8) } == code_t {
            let off = if l.minor >= 11 {
                (unsafe { ld(f + l.fr_instr as u64) } as i64)
                    .wrapping_sub((code + l.co_code as u64) as i64)
            } else {
                let lasti = unsafe { *((f + l.fr_instr as u64) as *const i32) } as i64;
                if l.minor == 10 {
                    lasti * 2
                } else {
                    lasti
                }
            };
            if off >= 0 {
                let fp = unsafe { fingerprint(l, code) };
                if visit(At { code, off, fp }) {
                    return;
                }
            }
        }
        f = back;
    }
}

/// Is this thread's innermost Python frame in the interpreter's start-up or import machinery
/// (importlib, zipimport, site: [`abi::is_import_path`])? False when no frames can be read.
/// The file-time hooks ask, so that the importer validates bytecode caches against the
/// sources' real times (`crate::files`).
pub fn in_import_system(file: &CensusFile) -> bool {
    if !ready(file) {
        return false;
    }
    let l = layout();
    let mut import = false;
    walk(l, |at| {
        import = class_of(l, at) & abi::SITE_IMPORT != 0;
        true
    });
    import
}

/// What identifies a code object beyond its address (which a freed one's successor may
/// reuse): its file and name objects and first line.
///
/// # Safety
/// `code` is a live code object of the checked layout.
#[inline(always)]
unsafe fn fingerprint(l: &Layout, code: u64) -> u64 {
    // SAFETY: fields of a live code object.
    let (file, name, first) = unsafe {
        (
            ld(code + l.co_filename as u64),
            ld(code + l.co_name as u64),
            *((code + l.co_firstlineno as u64) as *const i32),
        )
    };
    mix(code ^ file.rotate_left(17) ^ name.rotate_left(34) ^ (first as u64).rotate_left(51))
}

#[inline(always)]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Class of each code object seen: `fingerprint & !7 | 4 | flags` (lock-free, never cleared).
const CLASSES: usize = 4096;
static CLASS: [AtomicU64; CLASSES] = [const { AtomicU64::new(0) }; CLASSES];

/// [`abi::SITE_USER`] / [`abi::SITE_IMPORT`] flags of a code object, by its file name.
#[inline(always)]
fn class_of(l: &Layout, at: At) -> u32 {
    let start = (at.fp >> 52) as usize;
    cached_flags(&CLASS, at.fp & !7, start, 32, || classify(l, at.code))
}

/// A lock-free cache of 2-bit flags (never cleared): entries `tag | 4 | flags`, where `tag`
/// has its low 3 bits clear; open addressing from `start`, `probes` slots at most. `compute`
/// runs on a miss (and its answer is kept when a slot is free).
#[inline(always)]
fn cached_flags(
    table: &[AtomicU64],
    tag: u64,
    start: usize,
    probes: usize,
    compute: impl FnOnce() -> u32,
) -> u32 {
    let mask = table.len() - 1;
    let mut i = start & mask;
    for _ in 0..probes {
        let v = table[i].load(Relaxed);
        if v & !7 == tag && v & 4 != 0 {
            return (v & 3) as u32;
        }
        if v == 0 {
            let flags = compute();
            let _ = table[i].compare_exchange(0, tag | 4 | flags as u64, Relaxed, Relaxed);
            return flags;
        }
        i = (i + 1) & mask;
    }
    compute()
}

/// Flags of each file name seen, `hash of its text | 4 | flags`: every code object of a
/// module shares its `co_filename`, so a module's functions are classified by one read of the
/// name (five system calls; CPython's start-up meets ~200 code objects in its frames). Keyed
/// by the text, not the object's address: a freed name's address is reused by another name
/// (the importer replaces and frees file names as it loads bytecode).
const FILES: usize = 1024;
static FILE_CLASS: [AtomicU64; FILES] = [const { AtomicU64::new(0) }; FILES];

#[cold]
#[inline(never)]
fn classify(l: &Layout, code: u64) -> u32 {
    // SAFETY: `code` is a live code object (its type was checked by the frame walk, which
    // read this field the same way for its fingerprint).
    let obj = unsafe { ld(code + l.co_filename as u64) };
    if !plausible(obj) {
        return 0;
    }
    // SAFETY: `obj` is the file name a live code object holds a reference to.
    match unsafe { text_hash(l, obj) } {
        Some(h) => cached_flags(&FILE_CLASS, h & !7, (h >> 54) as usize, 16, || {
            file_flags(l, obj)
        }),
        None => file_flags(l, obj),
    }
}

/// A hash of the text of the compact `str` `obj` (up to 4 KiB of it), read with plain loads;
/// `None` for anything else.
///
/// # Safety
/// `obj` is a live object (a code object's `co_filename`).
unsafe fn text_hash(l: &Layout, obj: u64) -> Option<u64> {
    let str_t = STR_TYPE.load(Relaxed);
    // SAFETY: the header words of a live object.
    let (ty, state, len) = unsafe {
        (
            ld(obj + 8),
            *((obj + l.str_state as u64) as *const u32),
            ld(obj + l.str_len as u64) as usize,
        )
    };
    let (kind, compact, ascii) = ((state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1);
    if str_t == 0 || ty != str_t || compact == 0 || !matches!(kind, 1 | 2 | 4) || len > 4096 {
        return None;
    }
    let off = if ascii == 1 {
        l.str_ascii
    } else {
        l.str_compact
    };
    let data = (obj + off as u64) as *const u8;
    let n = len * kind as usize;
    let mut h = mix(n as u64 ^ 0x9e37_79b9_7f4a_7c15);
    for i in (0..n).step_by(8) {
        let mut w = [0u8; 8];
        let k = (n - i).min(8);
        // SAFETY: a compact str's `n` bytes of text follow its header, inside the object.
        unsafe { core::ptr::copy_nonoverlapping(data.add(i), w.as_mut_ptr(), k) };
        h = mix(h ^ u64::from_le_bytes(w));
    }
    Some(h)
}

/// [`flags_of`] the file name `obj` (a `str`), read without faulting.
fn file_flags(l: &Layout, obj: u64) -> u32 {
    let mut name = [0u8; 1024];
    match resolve::read_str(l, obj, STR_TYPE.load(Relaxed), &mut name) {
        Some(n) => flags_of(&name[..n]),
        None => 0,
    }
}

fn flags_of(path: &[u8]) -> u32 {
    if abi::is_import_path(path) {
        abi::SITE_IMPORT
    } else if abi::is_library_path(path) {
        0
    } else {
        abi::SITE_USER
    }
}

/// The index of `at`'s site in the census slot, claiming and resolving it when new.
#[inline(always)]
fn site_of(l: &Layout, py: &PyCensus, at: At) -> Option<usize> {
    let key = mix(at.fp ^ (at.off as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
    let mut i = (key >> 40) as usize & (PY_SITES - 1);
    for _ in 0..64 {
        let s = &py.sites[i];
        if !crate::core::census::backed_py(py, s, core::mem::size_of::<abi::PySite>()) {
            return None;
        }
        let k = s.key.load(Relaxed);
        if k == key {
            return Some(i);
        }
        if k == 0 {
            match s.key.compare_exchange(0, key, Relaxed, Relaxed) {
                Ok(_) => {
                    resolve_site(l, py, i, at);
                    return Some(i);
                }
                Err(now) if now == key => return Some(i),
                Err(_) => {}
            }
        }
        i = (i + 1) & (PY_SITES - 1);
    }
    None
}

/// Fills a freshly claimed site: file, function, line (reads that cannot fault).
#[cold]
#[inline(never)]
fn resolve_site(l: &Layout, py: &PyCensus, idx: usize, at: At) {
    let s = &py.sites[idx];
    let mut file = [0u8; 1024];
    let mut func = [0u8; 256];
    let (st, bt) = (STR_TYPE.load(Relaxed), BYTES_TYPE.load(Relaxed));
    let rd = |off: usize| resolve::read_u64(at.code + off as u64).unwrap_or(0);
    let nf = resolve::read_str(l, rd(l.co_filename), st, &mut file).unwrap_or(0);
    let nn = resolve::read_str(l, rd(l.co_name), st, &mut func).unwrap_or(0);
    let first = resolve::read_i32(at.code + l.co_firstlineno as u64).unwrap_or(0);
    let line = resolve::line_of(l, rd(l.co_lines), bt, first, at.off);
    let (file_off, file_len) = put_string(py, &file[..nf]);
    let (func_off, func_len) = put_string(py, &func[..nn]);
    let w = s as *const abi::PySite as *mut abi::PySite;
    // SAFETY: this thread claimed the site (CAS on its key) and is its only writer; readers
    // (the launcher) look at the fields only once `ready` is set below.
    unsafe {
        (*w).flags = flags_of(&file[..nf]);
        (*w).line = line;
        (*w).file_off = file_off;
        (*w).file_len = file_len;
        (*w).func_off = func_off;
        (*w).func_len = func_len;
    }
    s.ready.store(1, Release);
}

/// Appends `b` to the census slot's Python strings: `(offset, length)`; `(0, 0)` when full.
fn put_string(py: &PyCensus, b: &[u8]) -> (u32, u32) {
    let at = py.strings_used.fetch_add(b.len() as u32, Relaxed) as usize;
    if at + b.len() > py.strings.len()
        || !crate::core::census::backed_py(py, py.strings[at..].as_ptr(), b.len())
    {
        return (0, 0);
    }
    // SAFETY: the fetch_add above reserved these bytes for this thread alone.
    unsafe {
        let p = py.strings.as_ptr() as *mut u8;
        core::ptr::copy_nonoverlapping(b.as_ptr(), p.add(at), b.len());
    }
    (at as u32, b.len() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minor_versions_from_object_names() {
        assert_eq!(minor_from_name(b"3.11.so.1.0"), Some(11));
        assert_eq!(minor_from_name(b"3.8"), Some(8));
        assert_eq!(minor_from_name(b"3"), None);
        assert_eq!(minor_from_name(b""), None);
    }

    #[test]
    fn every_layout_is_complete() {
        for l in &layout::LAYOUTS {
            assert!(l.tss_key != NONE && l.ts_frame != NONE && l.fr_code != NONE);
            assert_eq!(l.minor >= 11, l.co_code != NONE);
            assert_eq!(l.minor >= 11, l.fr_owner != NONE);
            assert_eq!(matches!(l.minor, 11 | 12), l.cframe_current != NONE);
        }
    }
}
