//! Recording side of the runtime census: every hook calls [`count`] with its function id, a
//! detail byte (clock id, device) and its caller's return address.
//!
//! One file per process image (`<vpid>.<gen>.census` in the run dir), mapped `MAP_SHARED` so
//! the counts are in the page cache the moment they are made: they survive SIGKILL, a crash,
//! `_exit` and exec. The hot path is a one-multiply hash, a load, a compare and one increment
//! (a plain `add` while the process has one thread, a `lock add` on a per-thread shard of the
//! slot once it has more): no locks, no allocation, no `dladdr`. Return addresses are resolved
//! to objects and symbols by the launcher, using the module list written here at start and
//! whenever a call comes from an object loaded since (`dlopen`, C extensions).
//!
//! Measured on this 2-core VM (tight C loop of `clock_gettime(CLOCK_MONOTONIC)`, minimum of
//! runs): the whole sealed call 7.4 ns with this census, 6.9 ns with counting compiled out,
//! 12.0 ns with the previous always-`lock xadd` counter; native vDSO call 22 ns.

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering::*};

use seal_abi::{
    census_key, py::PyCensus, unsealed, CensusFile, Fid, ModuleRecord, ARGV_BYTES,
    CENSUS_FILE_SIZE, CENSUS_MAGIC, CENSUS_SLOTS, EXE_BYTES, HEAD_SLOTS, LAYOUT_VERSION,
};

use crate::core::{backing::Backing, config, sys};

mod argv;
mod modules;
mod runtimes;
use argv::read_argv;
pub use argv::{set_args, start_args};
use modules::reset_refresh_lock;
pub use modules::{add_module, refresh_modules};
pub use runtimes::{in_python_import, Capture, Object};

#[link_section = ".data.seal_hot"]
static FILE: AtomicPtr<CensusFile> = AtomicPtr::new(core::ptr::null_mut());

/// Which pages of this image's (sparse) census slot are backed ([`crate::core::backing`]).
#[link_section = ".data.seal_hot"]
static BACKED: Backing<{ CENSUS_FILE_SIZE.div_ceil(4096 * 64) }> = Backing::new();

/// Backs `len` bytes at `p` inside `file`; false if the file system is full.
#[inline(always)]
fn backed<T: ?Sized>(file: *const CensusFile, p: *const T, len: usize) -> bool {
    let base = file as *const u8;
    BACKED.back(
        base,
        (p as *const u8 as usize).wrapping_sub(base as usize),
        len,
    )
}

/// Set once this image's Python header is backed (see [`back_py`]).
#[link_section = ".data.seal_hot"]
static PY_BACKED: AtomicBool = AtomicBool::new(false);

/// Backs the header of `file`'s Python region (status, version, counters: once per image,
/// when a CPython interpreter is found or a fork child inherits one). Its tables (416 KiB)
/// are backed page by page as they are touched ([`backed_py`]): backed whole, they cost
/// every Python process, and every fork child of one, ~100 pages (~0.5 ms per
/// `subprocess.run`).
pub fn back_py(file: &CensusFile) -> bool {
    if PY_BACKED.load(Relaxed) {
        return true;
    }
    let ok = backed(file, &file.py, core::mem::offset_of!(PyCensus, sites));
    PY_BACKED.store(ok, Relaxed);
    ok
}

/// Backs `len` bytes at `p` inside `py`, this image's Python region; false if the file
/// system is full.
#[inline(always)]
pub fn backed_py<T: ?Sized>(py: &PyCensus, p: *const T, len: usize) -> bool {
    let file =
        (py as *const PyCensus as *const u8).wrapping_sub(core::mem::offset_of!(CensusFile, py));
    backed(file as *const CensusFile, p, len)
}

/// Linear probes before a call counts as "table full".
const MAX_PROBE: usize = 64;

extern "C" {
    /// glibc (2.32+): true while the process has never created a second thread. Only this
    /// thread can clear it (`pthread_create` does, before the new thread exists), and glibc
    /// never sets it again in a process that had threads.
    static __libc_single_threaded: core::ffi::c_char;
}

/// Counts one call. Cheap enough for `clock_gettime`'s hot path: one load of the file pointer,
/// a one-multiply hash, one load and compare, one increment; a new call site (rare) claims a
/// slot with a CAS and makes sure the object that made the call is in the module list.
#[inline(always)]
pub fn count(fid: Fid, detail: u8, caller: u64) {
    count_at(fid, detail, caller);
}

/// [`count`], returning the counter the call went to (none when it was not counted, or
/// counted per function only).
#[inline(always)]
fn count_at(fid: Fid, detail: u8, caller: u64) -> Option<&'static AtomicU64> {
    let mut p = FILE.load(Relaxed);
    if p.is_null() {
        p = before_start();
        if p.is_null() {
            return None;
        }
    }
    // SAFETY: FILE points (bar its THREADS_BIT) to a live mapping of CENSUS_FILE_SIZE bytes,
    // never unmapped while published; a fork child replaces it before any other thread exists.
    let file: &'static CensusFile =
        unsafe { &*(((p as usize) & !THREADS_BIT) as *const CensusFile) };
    let key = census_key(caller, fid, detail);
    let counted = if (p as usize) & THREADS_BIT == 0 && single_threaded() {
        count_in(file, key, 0, true)
    } else {
        count_in(file, key, thread_shard(), false)
    };
    match counted {
        Counted::Counted(slot) => {
            if (crate::CENSUS_CAPTURE.wanted)() {
                (crate::CENSUS_CAPTURE.capture)(file, slot);
            }
            Some(&file.slot(slot).count)
        }
        Counted::NewSite(slot) => {
            new_site(file, caller);
            if (crate::CENSUS_CAPTURE.wanted)() {
                (crate::CENSUS_CAPTURE.capture)(file, slot);
            }
            Some(&file.slot(slot).count)
        }
        Counted::Overflow => None,
    }
}

/// The counter of calls of `fid` (with `detail`) from `caller` in this image's census, for
/// calls counted by code of libseal's making (a cgo Go runtime's clock page reads, counted by
/// the code itself); `None` when there is none.
pub fn counter(fid: Fid, detail: u8, caller: u64) -> Option<&'static AtomicU64> {
    let c = count_at(fid, detail, caller)?;
    // Taking it counted one call.
    c.fetch_sub(1, Relaxed);
    Some(c)
}

/// Counts a call of a hot entry point whose call site this thread remembers
/// ([`crate::core::thread::Hot::entry`] matched the caller): one increment of the counter the entry
/// names, with no key to hash and no table to probe.
///
/// # Safety
/// `counter` is the counter of an entry of this thread that matched its caller: a counter of
/// this image's census mapping, which stays mapped while published (entries are forgotten
/// when it is replaced, [`open_image`]).
#[inline(always)]
pub unsafe fn bump_hot(counter: *const AtomicU64) {
    // SAFETY: per the contract.
    bump(unsafe { &*counter }, single_threaded());
}

/// [`count`] for a call of hot entry point `site` whose caller its entry does not remember
/// (a new call site, a new thread, a fork child): the general count, after which the entry
/// remembers where it counted, unless the fast path's conditions `mask` stopped holding
/// (counting a new site can register a runtime or find Python). Returns whether they still
/// hold; the call is counted either way. Sets the thread up.
#[cold]
#[inline(never)]
pub fn learn(site: usize, fid: Fid, detail: u8, caller: u64, mask: u32) -> bool {
    crate::core::thread::with(|_| ());
    let counter = count_at(fid, detail, caller);
    let fast = config::fast(mask);
    if let (Some(c), true) = (counter, fast) {
        crate::core::thread::hot_store(site, caller, c);
    }
    fast
}

/// A call counted before this image was set up: another library's constructor ran before
/// libseal's and called a hook. Sets the image up now, so that the call is counted too (it
/// was lost before); null when the image is not counted (not in a run, or already set up
/// without a census slot).
#[cold]
#[inline(never)]
fn before_start() -> *mut CensusFile {
    if config::initialised() {
        return core::ptr::null_mut();
    }
    config::in_run();
    FILE.load(Relaxed)
}

/// Shards per call site in a multi-threaded process. Threads that read the clock from one
/// call site would otherwise all increment one counter, and its cache line would ping-pong
/// between cores; with shards they mostly count in different slots, which the launcher sums
/// (it merges slots by key anyway). Two threads at one call site, per call (min of 12 runs
/// on a loaded 2-core VM): 23.5 ns one shared counter, 16.8 ns sharded, 11.4 ns uncounted.
const SHARDS: u64 = 8;
/// Distance between the probe starts of two shards of one key.
const SHARD_STRIDE: usize = CENSUS_SLOTS / SHARDS as usize;

/// A small number that differs between most threads: a hash of the thread pointer (`%fs:0`
/// is the TCB's self pointer on x86_64 glibc). Free to read, no TLS lookup; a collision only
/// shares a slot (the increment is atomic), it never loses a count.
#[inline(always)]
fn thread_shard() -> u64 {
    let tp: u64;
    // SAFETY: reads the first word of this thread's TCB, which glibc sets up before any code
    // of the thread runs (and which always exists on x86_64 Linux).
    unsafe {
        core::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp,
                         options(nostack, readonly, preserves_flags));
    }
    (tp >> 12).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SHARDS.trailing_zeros())
}

/// Low bit of [`FILE`] (the mapping is page-aligned): set once a thread was started behind
/// glibc's back (a raw `clone(CLONE_THREAD)`), which `__libc_single_threaded` does not see.
const THREADS_BIT: usize = 1;

/// Tells the census that this process now has (or may have) more than one thread although
/// glibc's `pthread_create` was not used. Counting stays exact, at the bus-locked speed.
pub fn note_thread() {
    // The hot paths' increments assume glibc knows every thread: no more.
    config::slow_set(config::slow::THREADS);
    let _ = FILE.fetch_update(AcqRel, Acquire, |p| {
        Some(((p as usize) | THREADS_BIT) as *mut CensusFile).filter(|_| !p.is_null())
    });
}

/// The published census slot, without the flag bit.
fn file_ptr() -> *mut CensusFile {
    ((FILE.load(Acquire) as usize) & !THREADS_BIT) as *mut CensusFile
}

/// Is this the only thread of the process? Then no other thread can touch the table, and a
/// counter can be bumped without the bus lock (the lock was ≈4.5 ns of a 12 ns hook here).
#[inline(always)]
fn single_threaded() -> bool {
    // SAFETY: a plain byte owned by libc; read with a volatile load because it changes
    // behind the compiler's back (pthread_create clears it).
    unsafe { core::ptr::addr_of!(__libc_single_threaded).read_volatile() != 0 }
}

/// What [`count_in`] did with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// Added to an existing slot (its index).
    Counted(usize),
    /// Claimed a fresh slot for this key (a call site seen for the first time).
    NewSite(usize),
    /// No free slot within [`MAX_PROBE`]: counted per function only, without a caller.
    Overflow,
}

/// Counts `key` in `file`'s table (lock-free open addressing, linear probing); the result's
/// index is a [`CensusFile::slot`] index.
///
/// Shard 0 (the only one of a single-threaded process) looks in the head first: the
/// [`HEAD_SLOTS`] counters in the file's first page, [`HEAD_PROBE`] of them from the key's
/// place, so a short process's counts stay in the one page every image has. A key that finds
/// no room there goes to the table, and stays found there (head slots are never freed).
/// `shard` moves the probe start in the table (one key may then own several slots, which the
/// reader sums). `single` says no other thread of this process can be counting: the increment
/// is then one non-locked `add` instruction, which a signal handler on this thread cannot
/// split. Exact either way: a claimed key never changes, and every increment is atomic with
/// respect to everything that can run concurrently.
#[inline(always)]
pub fn count_in(file: &CensusFile, key: u64, shard: u64, single: bool) -> Counted {
    // Fibonacci hashing: the top bits of key × 2⁶⁴/φ mix address, function and detail.
    let hash = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // The common case inline: the key sits at its first place (the first page is backed when
    // the file is made; a table slot's page is checked).
    let (slot, idx) = if shard == 0 {
        let i = (hash >> (64 - HEAD_BITS)) as usize;
        (&file.head_slots[i], i)
    } else {
        let i = table_start(hash, shard);
        (&file.slots[i], HEAD_SLOTS + i)
    };
    // A table page is tested before it is read: reading a hole of a tmpfs file allocates it.
    let readable = shard == 0 || BACKED.is_backed(file as *const CensusFile as *const u8, slot);
    if readable && slot.key.load(Relaxed) == key {
        bump(&slot.count, single);
        return Counted::Counted(idx);
    }
    count_probing(file, key, hash, shard, single)
}

/// Where `shard`'s probe for a key of this hash starts in the table.
#[inline(always)]
fn table_start(hash: u64, shard: u64) -> usize {
    ((hash >> (64 - CENSUS_BITS)) as usize).wrapping_add(shard as usize * SHARD_STRIDE)
        & (CENSUS_SLOTS - 1)
}

/// [`count_in`] past the key's first place: the head's window, then the table.
#[inline(never)]
fn count_probing(file: &CensusFile, key: u64, hash: u64, shard: u64, single: bool) -> Counted {
    if shard == 0 {
        let mut i = (hash >> (64 - HEAD_BITS)) as usize;
        for _ in 0..HEAD_PROBE {
            let idx = i & (HEAD_SLOTS - 1);
            if let Some(c) = claim(&file.head_slots[idx], key, single, idx) {
                return c;
            }
            i = i.wrapping_add(1);
        }
    }
    let mut i = table_start(hash, shard);
    for _ in 0..MAX_PROBE {
        let idx = i & (CENSUS_SLOTS - 1);
        let slot = &file.slots[idx];
        if !backed(file, slot, core::mem::size_of::<seal_abi::CensusSlot>()) {
            break;
        }
        if let Some(c) = claim(slot, key, single, HEAD_SLOTS + idx) {
            return c;
        }
        i = i.wrapping_add(1);
    }
    overflow(file, (key >> 48) as u8);
    Counted::Overflow
}

/// Counts `key` in `slot` (index `idx`) if it holds it or is free; `None` when it holds
/// another key.
#[inline(always)]
fn claim(slot: &seal_abi::CensusSlot, key: u64, single: bool, idx: usize) -> Option<Counted> {
    let k = slot.key.load(Relaxed);
    if k == key {
        bump(&slot.count, single);
        return Some(Counted::Counted(idx));
    }
    if k == 0 {
        match slot.key.compare_exchange(0, key, Relaxed, Relaxed) {
            Ok(_) => {
                bump(&slot.count, single);
                return Some(Counted::NewSite(idx));
            }
            Err(other) if other == key => {
                bump(&slot.count, single);
                return Some(Counted::Counted(idx));
            }
            Err(_) => {}
        }
    }
    None
}

/// Head slots a key may take, from its place on.
const HEAD_PROBE: usize = 4;
const HEAD_BITS: u32 = HEAD_SLOTS.trailing_zeros();
const _: () = assert!(1 << HEAD_BITS == HEAD_SLOTS);
const CENSUS_BITS: u32 = CENSUS_SLOTS.trailing_zeros();
const _: () = assert!(1 << CENSUS_BITS == CENSUS_SLOTS);

#[inline(always)]
fn bump(c: &AtomicU64, single: bool) {
    if single {
        // SAFETY: one read-modify-write instruction on a valid, aligned u64 of the mapping;
        // without the lock prefix it is still indivisible for this CPU (signals arrive between
        // instructions), and `single` means no other CPU runs this process's code.
        unsafe {
            core::arch::asm!("add qword ptr [{}], 1", in(reg) c.as_ptr(),
                             options(nostack, preserves_flags));
        }
    } else {
        // Laid out after the common (single-threaded) increment, which then jumps nowhere.
        core::hint::cold_path();
        c.fetch_add(1, Relaxed);
    }
}

/// First call from this return address: if no listed module contains it, the object was
/// loaded after the last refresh (`dlopen`, a loader-loaded dependency): list it now, while it
/// is certainly mapped. Doing this here rather than in a `dlopen` hook keeps `dlopen` itself
/// untouched (glibc searches the *caller's* RUNPATH for a bare name, and an interposed dlopen
/// would make libseal the caller), and catches objects loaded by any route.
#[cold]
#[inline(never)]
fn new_site(file: &CensusFile, caller: u64) {
    let probe = caller.wrapping_sub(1);
    let n = (file.n_modules.load(Acquire) as usize).min(seal_abi::MAX_MODULES);
    if (0..n).any(|i| {
        let m = file.module(i);
        m.start <= probe && probe < m.end
    }) {
        return;
    }
    refresh_modules();
}

#[cold]
#[inline(never)]
fn overflow(file: &CensusFile, fid: u8) {
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
    let file = file_ptr();
    if file.is_null() {
        return;
    }
    // SAFETY: see count().
    let file = unsafe { &*file };
    let n = file.n_unsealed.load(Acquire) as usize;
    for ev in file.unsealed.iter().take(n.min(file.unsealed.len())) {
        if !backed(file, ev, core::mem::size_of::<seal_abi::UnsealedEvent>()) {
            return;
        }
        let len = ev.len.load(Relaxed) as usize;
        if ev.kind.load(Relaxed) == kind
            && ev.detail[..len.min(ev.detail.len())] == detail[..detail.len().min(ev.detail.len())]
        {
            return;
        }
    }
    let idx = file.n_unsealed.fetch_add(1, AcqRel) as usize;
    let Some(ev) = file.unsealed.get(idx) else {
        return;
    };
    if !backed(file, ev, core::mem::size_of::<seal_abi::UnsealedEvent>()) {
        return;
    }
    let len = detail.len().min(ev.detail.len());
    // SAFETY: this slot index was reserved by the fetch_add above; nobody else writes it.
    unsafe {
        let d = ev.detail.as_ptr() as *mut u8;
        core::ptr::copy_nonoverlapping(detail.as_ptr(), d, len);
    }
    ev.len.store(len as u32, Relaxed);
    ev.kind.store(kind, Release);
}

/// Claims and maps this image's census slot (in the run table file) and fills its header.
/// Called once per image (at initialisation) and again in a fork child (which must not write
/// into its parent's).
pub fn open_image(vpid: i32, parent_vpid: i32, gen: u32) {
    // This thread's hot-site entries name counters of the mapping replaced here (a fork
    // child's are its parent's); the new one starts with the threads glibc knows of.
    crate::core::thread::hot_forget();
    config::slow_clear(config::slow::THREADS);
    let old =
        ((FILE.swap(core::ptr::null_mut(), AcqRel) as usize) & !THREADS_BIT) as *mut CensusFile;
    // The previous image's mapping exists only in a fork child (the parent's file): its module
    // list is copied below instead of asking the loader, whose lock another parent thread may
    // have held at fork time (dl_iterate_phdr in the child would then wait forever).
    let unmap_old = || {
        if !old.is_null() {
            // SAFETY: the fork parent's mapping; no other thread exists in a fork child, and
            // FILE no longer publishes it.
            unsafe { sys::munmap(old as *mut u8, CENSUS_FILE_SIZE) };
        }
    };
    let slot = match crate::core::table::census_slot() {
        Ok(slot) => slot,
        Err(why) => {
            let mut m = sys::StackBuf::<300>::new();
            match why {
                // Said once per run, by the first image turned away.
                crate::core::table::NoSlot::Full(cap, true) => {
                    m.push(b"all ")
                        .push_u64(cap as u64)
                        .push(b" census slots of the run are taken: this and later ")
                        .push(b"processes are sealed but not counted");
                }
                crate::core::table::NoSlot::Open(errno) if !config::run_ended() => {
                    m.push(b"cannot open the run table for a census slot (")
                        .push(sys::errno_name(errno))
                        .push(b"); this process is sealed but not counted");
                }
                _ => {}
            }
            if !m.as_bytes().is_empty() {
                sys::warn(m.as_bytes());
            }
            unmap_old();
            return;
        }
    };
    // Sparse: pages are backed as they are first written (`BACKED`), the header now, so a
    // full file system is this warning rather than a SIGBUS later.
    let (fd, offset) = slot;
    let mut p = sys::mmap_shared_at(fd, CENSUS_FILE_SIZE, offset);
    sys::close(fd);
    BACKED.reset();
    // A fork child reads its parent's Python header only if the parent backed it: reading a
    // page of a sparse tmpfs file allocates it.
    let parent_py = PY_BACKED.swap(false, Relaxed);
    // The first page: the header, the head tables and the start of the text.
    let mapped = !p.is_null();
    if mapped && !BACKED.back(p, 0, 4096) {
        // SAFETY: our fresh mapping, not yet published.
        unsafe { sys::munmap(p, CENSUS_FILE_SIZE) };
        p = core::ptr::null_mut();
    }
    if p.is_null() {
        let mut m = sys::StackBuf::<4300>::new();
        m.push(b"cannot reserve the census slot of this process in ")
            .push(config::RUN_DIR.get())
            .push(b"/")
            .push(seal_abi::RUN_TABLE_NAME.as_bytes())
            .push(b" (")
            .push(sys::errno_name(if mapped {
                libc::ENOSPC
            } else {
                libc::ENOMEM
            }))
            .push(b"); this process is sealed but not counted");
        sys::warn(m.as_bytes());
        unmap_old();
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
        (*file).start_clock = crate::core::thread::peek();
        let text = core::ptr::addr_of_mut!((*file).text) as *mut u8;
        if let Some(from) = old.as_ref() {
            // A fork child runs its parent's program with its parent's arguments, and has its
            // parent's objects loaded: the text (path, arguments, module names) and the module
            // list are its parent's.
            let used = (from.text_used.load(Acquire) as usize).min(seal_abi::TEXT_BYTES);
            let n = (from.n_modules.load(Acquire) as usize).min(seal_abi::MAX_MODULES);
            let copied = copy_in(file, text, seal_abi::TEXT_BYTES, &from.text[..used]);
            let (n, used) = if copied == used && copy_modules(from, &*file, n) {
                (n, used)
            } else {
                (0, ((from.exe_len + from.argv_len) as usize).min(copied))
            };
            (*file).exe_len = from.exe_len.min(used as u32);
            (*file).argv_len = from
                .argv_len
                .min((used as u32).saturating_sub((*file).exe_len));
            (*file).argv_truncated = from.argv_truncated;
            (*file).text_used.store(used as u32, Relaxed);
            // A fork child: its interpreter (if any) was already found in the parent image.
            let py = if parent_py {
                (from.py.status.load(Relaxed), from.py.version.load(Relaxed))
            } else {
                (0, 0)
            };
            if py != (0, 0) && back_py(&*file) {
                (*file).py.status.store(py.0, Relaxed);
                (*file).py.version.store(py.1, Relaxed);
            }
            (*file).n_modules.store(n as u32, Release);
        } else {
            let mut buf = [0u8; 4096];
            let n = crate::core::table::exe_path(&mut buf);
            let exe = copy_in(file, text, EXE_BYTES, &buf[..n]);
            (*file).exe_len = exe as u32;
            let n = read_argv(file, &mut buf);
            (*file).argv_len = n as u32;
            (*file).argv_truncated = (n == ARGV_BYTES) as u32;
            (*file).text_used.store((exe + n) as u32, Relaxed);
        }
    }
    let inherited = !old.is_null();
    unmap_old();
    FILE.store(file, Release);
    reset_refresh_lock();
    record_families_off(config::flags());
    if !inherited {
        refresh_modules();
    }
    // SAFETY: published above; `ready` is an atomic.
    unsafe { (*file).ready.store(1, Release) };
}

/// Copies the first `n` module records of `from` (a fork parent's census) to `to`; false when
/// their pages could not be backed.
///
/// # Safety
/// `to` is a live, unpublished census mapping; `n <= MAX_MODULES`.
unsafe fn copy_modules(from: &CensusFile, to: &CensusFile, n: usize) -> bool {
    for i in 0..n {
        let dst = to.module(i);
        if !backed(to, dst, core::mem::size_of::<ModuleRecord>()) {
            return false;
        }
        // SAFETY: an unpublished record of the new mapping; nobody else writes it.
        unsafe {
            core::ptr::copy_nonoverlapping(
                from.module(i),
                dst as *const ModuleRecord as *mut ModuleRecord,
                1,
            )
        };
    }
    true
}

/// Copies `src` to `dst`, a field of `cap` bytes in the census slot at `file`, as far as it
/// fits and its pages can be backed; the bytes copied.
///
/// # Safety
/// `dst..dst + cap` lies in the live mapping at `file`, and nobody else writes it.
unsafe fn copy_in(file: *const CensusFile, dst: *mut u8, cap: usize, src: &[u8]) -> usize {
    let n = src.len().min(cap);
    if !backed(file, dst, n) {
        return 0;
    }
    // SAFETY: per the contract; `src` is ours.
    unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst, n) };
    n
}

/// Families the user turned off (`--unseal`): the process still runs and is counted, but
/// its census says these calls were answered by the real functions.
fn record_families_off(flags: u32) {
    let file = file_ptr();
    if file.is_null() {
        return;
    }
    let off = seal_abi::settings::FAMILIES
        .iter()
        .enumerate()
        .filter(|(_, f)| f.flags != 0 && flags & f.flags == 0)
        .fold(0u32, |m, (i, _)| m | 1 << i);
    // SAFETY: see count(); the header is in the first page, backed at creation.
    unsafe { (*file).families_off.store(off, Relaxed) };
}

/// Records why `rdtsc`/`cpuid` give real values (bits of
/// [`seal_abi::unsealed::cpu_cause`]) in the header: every image on a machine without cpuid
/// faulting has one, and an event would back a second page of each census slot.
pub fn record_cpu_unsealed(cause: u32) {
    let file = file_ptr();
    if file.is_null() {
        return;
    }
    // SAFETY: see count(); the header is in the first page, backed at creation.
    unsafe { (*file).cpu_unsealed.fetch_or(cause, Relaxed) };
}

#[cfg(test)]
mod tests;
