//! Recording side of the runtime census: every hook calls [`count`] with its function id, a
//! detail byte (clock id, device) and its caller's return address.
//!
//! One file per process image (`<vpid>.<gen>.census` in the run dir), mapped `MAP_SHARED` so
//! the counts are in the page cache the moment they are made: they survive SIGKILL, a crash,
//! `_exit` and exec. The hot path is a hash, a load and one `lock xadd`: no locks, no
//! allocation, no `dladdr`. Return addresses are resolved to objects and symbols by the
//! launcher, using the module list written here at start and after each `dlopen`.

use core::sync::atomic::{AtomicPtr, Ordering::*};

use seal_abi::{
    census_key, mix64, unsealed, CensusFile, Fid, CENSUS_FILE_SIZE, CENSUS_MAGIC, CENSUS_SLOTS,
    LAYOUT_VERSION,
};

use crate::{config, sys};

static FILE: AtomicPtr<CensusFile> = AtomicPtr::new(core::ptr::null_mut());

/// Linear probes before a call counts as "table full".
const MAX_PROBE: usize = 64;

/// Counts one call. Cheap enough for `clock_gettime`'s hot path.
#[inline(always)]
pub fn count(fid: Fid, detail: u8, caller: u64) {
    let file = FILE.load(Relaxed);
    if file.is_null() {
        return;
    }
    // SAFETY: FILE points to a live mapping of CENSUS_FILE_SIZE bytes (never unmapped while
    // published; a fork child replaces it before any other thread exists).
    let file = unsafe { &*file };
    let key = census_key(caller, fid, detail);
    let mut i = mix64(key) as usize;
    for _ in 0..MAX_PROBE {
        let slot = &file.slots[i & (CENSUS_SLOTS - 1)];
        let k = slot.key.load(Relaxed);
        if k == key {
            slot.count.fetch_add(1, Relaxed);
            return;
        }
        if k == 0 {
            match slot.key.compare_exchange(0, key, Relaxed, Relaxed) {
                Ok(_) => {
                    slot.count.fetch_add(1, Relaxed);
                    return;
                }
                Err(other) if other == key => {
                    slot.count.fetch_add(1, Relaxed);
                    return;
                }
                Err(_) => {}
            }
        }
        i = i.wrapping_add(1);
    }
    overflow(file, fid);
}

#[cold]
fn overflow(file: &CensusFile, fid: Fid) {
    file.overflow[fid as usize].fetch_add(1, Relaxed);
    if file.dropped_calls.fetch_add(1, Relaxed) == 0 {
        record_unsealed(
            unsealed::TABLE_FULL,
            b"census caller table full; later calls counted without callers",
        );
    }
}

/// Records an `unsealed` event once per (kind, detail) in this image.
pub fn record_unsealed(kind: u32, detail: &[u8]) {
    let file = FILE.load(Acquire);
    if file.is_null() {
        return;
    }
    // SAFETY: see count().
    let file = unsafe { &*file };
    let n = file.n_unsealed.load(Acquire) as usize;
    for ev in file.unsealed.iter().take(n.min(file.unsealed.len())) {
        let len = ev.len.load(Relaxed) as usize;
        if ev.kind.load(Relaxed) == kind
            && &ev.detail[..len.min(ev.detail.len())]
                == &detail[..detail.len().min(ev.detail.len())]
        {
            return;
        }
    }
    let idx = file.n_unsealed.fetch_add(1, AcqRel) as usize;
    let Some(ev) = file.unsealed.get(idx) else {
        return;
    };
    let len = detail.len().min(ev.detail.len());
    // SAFETY: this slot index was reserved by the fetch_add above; nobody else writes it.
    unsafe {
        let d = ev.detail.as_ptr() as *mut u8;
        core::ptr::copy_nonoverlapping(detail.as_ptr(), d, len);
    }
    ev.len.store(len as u32, Relaxed);
    ev.kind.store(kind, Release);
}

/// Creates and maps this image's census file and fills its header. Called once per image
/// (at initialisation) and again in a fork child (which must not write into its parent's).
pub fn open_image(vpid: i32, parent_vpid: i32, gen: u32) {
    let old = FILE.swap(core::ptr::null_mut(), AcqRel);
    if !old.is_null() {
        // SAFETY: the previous image's (the fork parent's) mapping; no other thread exists in a
        // fork child, and FILE no longer publishes it.
        unsafe { sys::munmap(old as *mut u8, CENSUS_FILE_SIZE) };
    }
    let mut path = sys::StackBuf::<4200>::new();
    let mut name = [0u8; 40];
    let n = seal_abi::census_file_name(vpid, gen, &mut name);
    path.push(config::RUN_DIR.get()).push(b"/").push(&name[..n]);
    let fd = sys::open(
        path.as_cstr(),
        libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
        0o600,
    );
    if fd < 0 {
        let mut m = sys::StackBuf::<4300>::new();
        m.push(b"cannot create census file ")
            .push(path.as_bytes())
            .push(b"; this process is sealed but not counted");
        sys::warn(m.as_bytes());
        return;
    }
    let ok = sys::ftruncate(fd, CENSUS_FILE_SIZE) == 0;
    let p = if ok {
        sys::mmap_shared(fd, CENSUS_FILE_SIZE)
    } else {
        core::ptr::null_mut()
    };
    sys::close(fd);
    if p.is_null() {
        sys::warn(b"cannot map the census file; this process is sealed but not counted");
        return;
    }
    let file = p as *mut CensusFile;
    // SAFETY: a fresh zeroed shared mapping of the right size, not yet published.
    unsafe {
        (*file).magic = CENSUS_MAGIC;
        (*file).version = LAYOUT_VERSION;
        (*file).vpid = vpid;
        (*file).parent_vpid = parent_vpid;
        (*file).gen = gen;
        (*file).start_clock = crate::thread::peek();
        let n = sys::readlink(b"/proc/self/exe\0", &mut (*file).exe);
        (*file).exe_len = n as u32;
        let n = sys::read_file(b"/proc/self/cmdline\0", &mut (*file).argv);
        (*file).argv_len = n as u32;
        (*file).argv_truncated = (n == (*file).argv.len()) as u32;
    }
    FILE.store(file, Release);
    refresh_modules();
    // SAFETY: published above; `ready` is an atomic.
    unsafe { (*file).ready.store(1, Release) };
}

/// Appends every loaded object not yet listed to the module list (at start, after `dlopen`).
pub fn refresh_modules() {
    let file = FILE.load(Acquire);
    if file.is_null() {
        return;
    }
    let _g = crate::real::Reentry::force();
    // SAFETY: dl_iterate_phdr calls us back synchronously with valid info structs.
    unsafe { libc::dl_iterate_phdr(Some(module_cb), file as *mut libc::c_void) };
}

unsafe extern "C" fn module_cb(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: called by dl_iterate_phdr with a valid info; data is our census file.
    let (info, file) = unsafe { (&*info, &mut *(data as *mut CensusFile)) };
    let mut lo = u64::MAX;
    let mut hi = 0u64;
    for i in 0..info.dlpi_phnum as usize {
        // SAFETY: dlpi_phdr has dlpi_phnum entries.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type == libc::PT_LOAD {
            let s = info.dlpi_addr + ph.p_vaddr;
            lo = lo.min(s);
            hi = hi.max(s + ph.p_memsz);
        }
    }
    if hi == 0 {
        return 0;
    }
    let n = file.n_modules.load(Relaxed) as usize;
    if file.modules[..n.min(file.modules.len())]
        .iter()
        .any(|m| m.start == lo && m.end == hi)
    {
        return 0;
    }
    if n >= file.modules.len() {
        return 1;
    }
    // SAFETY: dlpi_name is a NUL-terminated string or null.
    let mut name = unsafe { sys::cstr(info.dlpi_name) };
    let mut exe_buf = [0u8; 1024];
    if name.is_empty() {
        // The main executable has an empty name.
        let k = sys::readlink(b"/proc/self/exe\0", &mut exe_buf);
        name = &exe_buf[..k];
    }
    let used = file.strings_used.load(Relaxed) as usize;
    let len = name.len().min(file.strings.len().saturating_sub(used));
    file.strings[used..used + len].copy_from_slice(&name[..len]);
    file.strings_used.store((used + len) as u32, Relaxed);
    let m = &mut file.modules[n];
    m.start = lo;
    m.end = hi;
    m.bias = info.dlpi_addr;
    m.name_off = used as u32;
    m.name_len = len as u32;
    file.n_modules.store(n as u32 + 1, Release);
    0
}
