//! The environment handed to a new process image: the caller's own variables, plus libseal in
//! `LD_PRELOAD`, the run's settings (re-added when the caller cleaned its environment: `env -i`,
//! `subprocess.run(env={})`, `execve` with a new array) and the per-process state the new
//! image continues from (`LIBSEAL_CLOCK`, `LIBSEAL_VPID`, `LIBSEAL_PPID`, `LIBSEAL_LINEAGE`,
//! `LIBSEAL_CHILDREN`, `LIBSEAL_GEN`). The names and the encoding are `seal_abi::settings`.
//!
//! With the `layout` family sealed, one more entry, `xxx…LIBSEAL_PAD=` (the tail of a
//! constant), pads what the kernel copies onto the new stack (file name, arguments,
//! environment, pointers) to a fixed size ([`seal_abi::settings::pad_entry_len`]), so the new
//! image's stack addresses do not depend on the caller's environment, working directory or the
//! program's path.
//!
//! Built without malloc, in anonymous memory from `mmap` (the exec may run in a fork child of
//! a multi-threaded program, where malloc's locks may be held by threads that no longer exist).
//!
//! [`hide_from_environ`] takes seal's own variables out of a sealed process's `environ` (the
//! exec hooks put them back for its children from the shim's statics).

use core::sync::atomic::Ordering::Relaxed;

use seal_abi::pad::{Pad, PAD_TAIL};
use seal_abi::settings::{self as senv, Settings};

use crate::core::{config, sys};

/// What the new image starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageState {
    pub clock: i64,
    pub vpid: i32,
    pub ppid: i32,
    pub lineage: u64,
    pub children: u64,
    pub gen: u32,
    /// The program's `LIBSEAL_EXE` key and file-name hash ((0, 0): unknown).
    pub exe: (u64, u64),
    /// The programs of the process's earlier images (`LIBSEAL_NAMES`).
    pub names: u64,
}

/// This process's settings, to hand on: the run's as this image was given them (its flags
/// the run's, not this image's: `--only`/`--skip` may have left this one out).
pub fn current_settings() -> Settings<'static> {
    config::run_settings()
}

/// Variables describing the run (kept when present, re-added when cleaned).
const SETTINGS: [&str; senv::VARS.len()] = senv::VARS;
const LD_PRELOAD: &str = "LD_PRELOAD";

/// Bytes of scratch for one variable we write ourselves (paths are at most 4095 bytes).
const VAR_ROOM: usize = 4200;

/// What the kernel will copy onto the new stack besides the environment: the file name it is
/// given and the arguments. Without it (or with `layout` unsealed) no pad is added.
#[derive(Clone, Copy)]
pub struct Layout<'a> {
    pub file: &'a [u8],
    /// NULL-terminated, or null for no arguments.
    pub argv: *const *const libc::c_char,
}

impl Layout<'_> {
    /// (bytes of the file name and argument strings with their NULs, number of arguments)
    ///
    /// # Safety
    /// `argv` is null or a NULL-terminated array of C strings.
    unsafe fn measure(&self) -> (usize, usize) {
        let (mut bytes, mut n) = (self.file.len() + 1, 0);
        if !self.argv.is_null() {
            // SAFETY: per the contract.
            unsafe {
                while !(*self.argv.add(n)).is_null() {
                    bytes += sys::cstr_len(*self.argv.add(n)) + 1;
                    n += 1;
                }
            }
        }
        (bytes, n)
    }
}

/// Room for the pad entry beyond the other variables.
const PAD_ROOM: usize = senv::LAYOUT_BLOCK + 64;

/// `NAME=value` split; `None` for an entry without `=`.
fn split(entry: &[u8]) -> Option<(&[u8], &[u8])> {
    let eq = entry.iter().position(|&c| c == b'=')?;
    Some((&entry[..eq], &entry[eq + 1..]))
}

/// Does the `:`/space separated preload list already name `shim`?
pub fn preload_has(list: &[u8], shim: &[u8]) -> bool {
    !shim.is_empty() && list.split(|&c| c == b':' || c == b' ').any(|p| p == shim)
}

/// Appends bytes into a fixed region, failing (not overflowing) when it is full.
struct Cursor {
    base: *mut u8,
    len: usize,
    used: usize,
}

impl Cursor {
    /// A long pad entry of `len` bytes, NUL included, written here (`LIBSEAL_PAD=xxx…`): only
    /// for a length the constant does not hold ([`seal_abi::pad::Pad::Written`]).
    fn long_pad(&mut self, len: usize) -> Option<*const libc::c_char> {
        let name = senv::PAD.as_bytes();
        if len < name.len() + 2 || self.used + len > self.len {
            return None;
        }
        // SAFETY: base..base+len is our writable mapping; the range was checked above.
        unsafe {
            let start = self.base.add(self.used);
            sys::populate(start, len);
            core::ptr::copy_nonoverlapping(name.as_ptr(), start, name.len());
            *start.add(name.len()) = b'=';
            core::ptr::write_bytes(start.add(name.len() + 1), b'x', len - name.len() - 2);
            *start.add(len - 1) = 0;
            self.used += len;
            Some(start as *const libc::c_char)
        }
    }

    fn put(&mut self, parts: &[&[u8]]) -> Option<*const libc::c_char> {
        let need: usize = parts.iter().map(|p| p.len()).sum::<usize>() + 1;
        if self.used + need > self.len {
            return None;
        }
        // SAFETY: base..base+len is our writable mapping; the range was checked above.
        unsafe {
            let start = self.base.add(self.used);
            let mut p = start;
            for part in parts {
                core::ptr::copy_nonoverlapping(part.as_ptr(), p, part.len());
                p = p.add(part.len());
            }
            *p = 0;
            self.used += need;
            Some(start as *const libc::c_char)
        }
    }
}

/// A built environment in its own mapping (unmapped on drop, i.e. when exec failed or after
/// a spawn).
pub struct EnvBlock {
    base: *mut u8,
    size: usize,
    envp: *const *const libc::c_char,
    /// Index of the pad's first entry (its one or two entries are the last), if any.
    pad: Option<usize>,
}

impl EnvBlock {
    pub fn envp(&self) -> *const *const libc::c_char {
        self.envp
    }

    /// Takes the pad out (when the exec failed with E2BIG: the padded size is past the
    /// kernel's limit, and the program runs with an unpadded stack rather than not at all).
    /// False when there was none.
    pub fn drop_pad(&mut self) -> bool {
        match self.pad.take() {
            // SAFETY: the pad's entries are the last of our own array: end the array there.
            Some(i) => {
                unsafe { *(self.base as *mut *const libc::c_char).add(i) = core::ptr::null() };
                true
            }
            None => false,
        }
    }
}

impl Drop for EnvBlock {
    fn drop(&mut self) {
        super::vfork::unkeep(self.base);
        // SAFETY: our own mapping, no longer referenced.
        unsafe { sys::munmap(self.base, self.size) };
    }
}

/// How to treat the caller's environment.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// Build a sealed environment.
    Seal,
    /// The caller deliberately hands the child to another sealed run (a nested `seal`): leave
    /// its environment alone.
    Foreign,
}

/// Decides from the caller's `LIBSEAL_RUN_DIR` (if any).
pub fn plan(caller_run_dir: Option<&[u8]>, ours: &[u8]) -> Plan {
    match caller_run_dir {
        Some(d) if !d.is_empty() && d != ours => Plan::Foreign,
        _ => Plan::Seal,
    }
}

/// Builds the environment for a new image from `envp` (null = empty). `None` means "pass the
/// caller's environment unchanged" (a foreign run, or no memory: then the child may run
/// unsealed, which the caller reports). With a `layout` (and the family sealed), the result
/// ends with the pad.
///
/// # Safety
/// `envp` is null or a NULL-terminated array of NUL-terminated strings; `layout.argv` as
/// [`Layout`] says.
pub unsafe fn build(
    envp: *const *const libc::c_char,
    s: &Settings,
    st: &ImageState,
    layout: Option<Layout>,
) -> Option<EnvBlock> {
    // Pass 1: size and what is there.
    let mut n = 0usize;
    let mut bytes = 0usize;
    let mut caller_run_dir = None;
    // SAFETY: per the contract.
    unsafe {
        if !envp.is_null() {
            while !(*envp.add(n)).is_null() {
                if is_pad(*envp.add(n)) {
                    n += 1; // dropped below, never measured
                    continue;
                }
                let e = sys::cstr(*envp.add(n));
                bytes += e.len() + 1;
                if let Some((k, v)) = split(e) {
                    if k == senv::RUN_DIR.as_bytes() {
                        caller_run_dir = Some(v);
                    }
                }
                n += 1;
            }
        }
    }
    if plan(caller_run_dir, s.run_dir) == Plan::Foreign {
        return None;
    }
    let layout = layout.filter(|_| s.flags & seal_abi::flags::LAYOUT != 0);
    // LD_PRELOAD and two pad entries beyond the settings.
    let extra = senv::PER_PROCESS.len() + SETTINGS.len() + 3;
    let ptr_bytes = (n + extra + 1) * 8;
    let pad_room = if layout.is_some() { PAD_ROOM } else { 0 };
    let size = (ptr_bytes + bytes + extra * VAR_ROOM + pad_room + 4095) & !4095;
    let base = sys::mmap_anon(size);
    if base.is_null() {
        // Out of memory or address space (`ulimit -v`): the program starts with the caller's
        // environment, which no longer names libseal. Never silently.
        sys::warn(
            b"cannot map memory for a sealed environment: a program started now runs unsealed",
        );
        return None;
    }
    super::vfork::keep(base, size);
    let mut block = EnvBlock {
        base,
        size,
        envp: base as *const *const libc::c_char,
        pad: None,
    };
    let ptrs = base as *mut *const libc::c_char;
    let mut cur = Cursor {
        base,
        len: size,
        used: ptr_bytes,
    };
    let mut out = 0usize;
    let mut seen_settings = [false; SETTINGS.len()];
    let mut seen_preload = false;
    let mut num = sys::StackBuf::<64>::new();
    for i in 0..n {
        // SAFETY: i < n entries counted above.
        let raw = unsafe { *envp.add(i) };
        // SAFETY: as above; the pad is rewritten below.
        if unsafe { is_pad(raw) } {
            continue;
        }
        // SAFETY: as above.
        let e = unsafe { sys::cstr(raw) };
        let Some((k, v)) = split(e) else {
            // SAFETY: out < n + extra + 1 slots.
            unsafe { *ptrs.add(out) = raw };
            out += 1;
            continue;
        };
        if k == senv::PAD.as_bytes() || senv::PER_PROCESS.iter().any(|p| p.as_bytes() == k) {
            continue; // rewritten below
        }
        if let Some(j) = SETTINGS.iter().position(|p| p.as_bytes() == k) {
            if seen_settings[j] {
                continue;
            }
            seen_settings[j] = true;
        }
        let mut entry = raw;
        if k == LD_PRELOAD.as_bytes() {
            if seen_preload {
                continue;
            }
            seen_preload = true;
            if !s.shim.is_empty() && !preload_has(v, s.shim) {
                let sep: &[u8] = if v.is_empty() { b"" } else { b":" };
                entry = cur.put(&[b"LD_PRELOAD=", s.shim, sep, v])?;
            }
        }
        // SAFETY: out < n + extra + 1 slots.
        unsafe { *ptrs.add(out) = entry };
        out += 1;
    }
    let mut push = |parts: &[&[u8]]| -> Option<()> {
        let p = cur.put(parts)?;
        // SAFETY: at most `extra` pushes after at most n copies.
        unsafe { *ptrs.add(out) = p };
        out += 1;
        Some(())
    };
    if !seen_preload && !s.shim.is_empty() {
        push(&[b"LD_PRELOAD=", s.shim])?;
    }
    for (j, name) in SETTINGS.iter().enumerate() {
        if seen_settings[j] {
            continue;
        }
        let mut buf: senv::NumBuf = [0; 24];
        let value = s.value(name, &mut buf);
        push(&[name.as_bytes(), b"=", value])?;
    }
    for name in senv::PER_PROCESS {
        num.len = 0;
        let value: &[u8] = match name {
            senv::CLOCK => num.push_i64(st.clock).as_bytes(),
            senv::VPID => num.push_i64(st.vpid as i64).as_bytes(),
            senv::PPID => num.push_i64(st.ppid as i64).as_bytes(),
            senv::LINEAGE => num.push_hex(st.lineage).as_bytes(),
            senv::CHILDREN => num.push_u64(st.children).as_bytes(),
            senv::NAMES => num.push_hex(st.names).as_bytes(),
            senv::EXE if st.exe.0 == 0 => b"0",
            senv::EXE => num
                .push_hex(st.exe.0)
                .push(b".")
                .push_hex(st.exe.1)
                .as_bytes(),
            _ => num.push_u64(st.gen as u64).as_bytes(),
        };
        push(&[name.as_bytes(), b"=", value])?;
    }
    if let Some(l) = layout {
        // SAFETY: per the contract; the first `out` slots are C strings.
        let (mut strings, argc) = unsafe { l.measure() };
        for i in 0..out {
            // SAFETY: as above.
            strings += unsafe { sys::cstr_len(*ptrs.add(i)) } + 1;
        }
        // One short entry, or a long one whose name comes first and a short one (tails of
        // constants: `seal_abi::pad`).
        let c = |b: &'static [u8]| Some(b.as_ptr() as *const libc::c_char);
        let parts = match seal_abi::pad::plan(strings, argc + out) {
            Pad::One(a) => [c(a), None],
            Pad::Two(a, b) => [c(a), c(b)],
            Pad::Written(n, b) => match cur.long_pad(n) {
                Some(p) => [Some(p), c(b)],
                None => [None, None],
            },
        };
        if let [Some(first), second] = parts {
            block.pad = Some(out);
            for p in [Some(first), second].into_iter().flatten() {
                // SAFETY: two slots of the extra room are kept for the pad.
                unsafe { *ptrs.add(out) = p };
                out += 1;
            }
        }
    }
    // SAFETY: the terminating NULL (the mapping has room for n + extra + 1 pointers).
    unsafe { *ptrs.add(out) = core::ptr::null() };
    Some(block)
}

/// Is entry `e` (part of) the stack pad? The launcher's is `LIBSEAL_PAD=xxx…`; the shim's is
/// `xxx…LIBSEAL_PAD=` (short) or `LIBSEAL_PAD=LIBSEAL_PAD=…` and a short one, the last entries
/// of the environments it builds but not necessarily of one a program passes on (the initial
/// stack's `envp` with a variable appended). A short one is read up to its first byte that is
/// not an `x`; one of 64 `x`s or more (an older shim's) is measured with libc's `strlen`.
///
/// # Safety
/// `e` is a NUL-terminated string.
unsafe fn is_pad(e: *const libc::c_char) -> bool {
    // SAFETY: per the contract; the loop stops at the first byte that is not an `x`.
    unsafe {
        if sys::cstr_starts_with(e, PAD_TAIL) {
            return true;
        }
        let mut k = 0;
        while k < 64 && *e.add(k) == b'x' as _ {
            k += 1;
        }
        if k < 64 {
            return sys::cstr_starts_with(e.add(k), PAD_TAIL) && *e.add(k + PAD_TAIL.len()) == 0;
        }
        sys::cstr(e).ends_with(PAD_TAIL)
    }
}

/// Room for the environment a sealed image's constructor leaves in `environ` (the pointers and
/// a rewritten `LD_PRELOAD`); a larger one gets a mapping of its own.
const ENVIRON_ROOM: usize = 3 * 4096;
#[repr(C, align(4096))]
struct EnvironRoom(core::cell::UnsafeCell<[u8; ENVIRON_ROOM]>);
// SAFETY: handed out once ([`ENVIRON_USED`]), then only ever reached through `environ`.
unsafe impl Sync for EnvironRoom {}
static ENVIRON: EnvironRoom = EnvironRoom(core::cell::UnsafeCell::new([0; ENVIRON_ROOM]));
#[link_section = ".data.seal_hot"]
static ENVIRON_USED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// A copy of the environment `envp` without seal's own variables: no `LIBSEAL_*` entry, and
/// `shim` taken out of `LD_PRELOAD` (dropped when nothing else is preloaded; the user's own
/// entries stay, in their order). `None` when there is nothing to take out or no memory.
/// The strings are the caller's, except a rewritten `LD_PRELOAD`; the array is a new mapping
/// (never freed: the process's environment from now on).
///
/// # Safety
/// `envp` is null or a NULL-terminated array of NUL-terminated strings.
pub unsafe fn without_contract(
    envp: *const *const libc::c_char,
    shim: &[u8],
) -> Option<*const *const libc::c_char> {
    if envp.is_null() {
        return None;
    }
    let (mut n, mut found, mut preload_len) = (0usize, false, 0usize);
    // SAFETY: per the contract.
    unsafe {
        while !(*envp.add(n)).is_null() {
            let e = *envp.add(n);
            if sys::cstr_starts_with(e, senv::PREFIX.as_bytes()) || is_pad(e) {
                found = true;
                n += 1;
                continue;
            }
            let e = sys::cstr(*envp.add(n));
            if let Some((k, v)) = split(e) {
                if k == LD_PRELOAD.as_bytes() && preload_has(v, shim) {
                    found = true;
                    preload_len = e.len() + 1;
                }
            }
            n += 1;
        }
    }
    if !found {
        return None;
    }
    let ptr_bytes = (n + 1) * 8;
    let size = (ptr_bytes + preload_len + 4095) & !4095;
    // The constructor's copy (the first) goes to a static: one `mmap` fewer per image.
    let base = if size <= ENVIRON_ROOM && !ENVIRON_USED.swap(true, Relaxed) {
        ENVIRON.0.get() as *mut u8
    } else {
        sys::mmap_anon(size)
    };
    if base.is_null() {
        return None;
    }
    let ptrs = base as *mut *const libc::c_char;
    let mut out = 0;
    for i in 0..n {
        // SAFETY: i < n entries; our mapping has n + 1 slots and room for one LD_PRELOAD.
        unsafe {
            let raw = *envp.add(i);
            if sys::cstr_starts_with(raw, senv::PREFIX.as_bytes()) || is_pad(raw) {
                continue; // seal's own, never measured (the stack pad is one)
            }
            let e = sys::cstr(raw);
            let mut entry = raw;
            if let Some((k, v)) = split(e) {
                if k == LD_PRELOAD.as_bytes() && preload_has(v, shim) {
                    // Rebuild "LD_PRELOAD=" + the other entries, ':'-separated.
                    let dst = base.add(ptr_bytes);
                    let head = b"LD_PRELOAD=";
                    core::ptr::copy_nonoverlapping(head.as_ptr(), dst, head.len());
                    let mut w = head.len();
                    for part in v.split(|&c| c == b':' || c == b' ') {
                        if part.is_empty() || part == shim {
                            continue;
                        }
                        if w > head.len() {
                            *dst.add(w) = b':';
                            w += 1;
                        }
                        core::ptr::copy_nonoverlapping(part.as_ptr(), dst.add(w), part.len());
                        w += part.len();
                    }
                    *dst.add(w) = 0;
                    if w == head.len() {
                        continue; // nothing of the user's: no LD_PRELOAD at all
                    }
                    entry = dst as *const libc::c_char;
                }
            }
            *ptrs.add(out) = entry;
            out += 1;
        }
    }
    // SAFETY: slot out <= n.
    unsafe { *ptrs.add(out) = core::ptr::null() };
    Some(ptrs as *const *const libc::c_char)
}

extern "C" {
    static mut environ: *const *const libc::c_char;
}

/// Takes seal's own variables out of this process's `environ` (once, from libseal's
/// constructor, in a sealed process): the program sees the environment it was given, not the
/// run directory, settings, clocks and pad seal passes along. The settings are in the shim's
/// statics by now, and the exec hooks add them back for children. The original array on the
/// stack is left as it was (`/proc/self/environ`, and runtimes such as Go's that read the
/// initial stack, still see everything).
pub fn hide_from_environ() {
    // SAFETY: environ is libc's NULL-terminated array; the constructor runs before main, with
    // one thread.
    unsafe {
        let envp = environ;
        if let Some(clean) = without_contract(envp, config::SHIM_PATH.get()) {
            environ = clean;
        }
    }
}

#[cfg(test)]
mod tests;
