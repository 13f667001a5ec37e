//! The run's record of file times: one shared table (`files.table` in the run dir) that maps a
//! file (device, inode) and the real modification time the kernel gave it to the sealed time
//! the run showed for it. Every process of the run maps the same file, so a time recorded by
//! one (the writer at `close`, a `touch`, the first process to look) is what all of them see.
//!
//! Lock-free: a slot is claimed with one CAS on its key; its (real, sealed) pair is written
//! under a per-slot sequence number (odd while a writer is inside), and a reader that cannot
//! get a stable pair within a bounded number of tries treats the file as not recorded. Nothing
//! here allocates, locks or calls libc: hooks run in signal handlers and vfork children.

use core::sync::atomic::{
    fence, AtomicI64, AtomicU32, AtomicU64, AtomicUsize,
    Ordering::{AcqRel, Acquire, Relaxed, Release},
};

use crate::core::{backing::Backing, census, config, sys};

use seal_abi::files::{MAGIC, SLOTS};
use seal_abi::keyed::{probe, Probe};
/// Slots looked at from a key's home slot before the table counts as full for it.
const PROBES: usize = 64;

seal_abi::bits! { u32:
    /// The sealed value came from a clock (a writer's or observer's "now"), so a reader whose
    /// own clock is behind it moves forward (causality); an explicit time a program set does
    /// not.
    KIND_CLOCK,
    KIND_EXPLICIT,
    /// The clock of the first process that looked at a file the run changed without recording
    /// it (a directory, a file still being written by another process): shown, never
    /// propagated, and replaced by the writer's record when the writer closes it.
    KIND_OBSERVED,
}

#[repr(C)]
pub struct Header {
    pub magic: AtomicU64,
    /// Real time (ns) at which the run started: real times before it are from before the run.
    pub start: AtomicI64,
    /// Set once the table was found full (reported once per run).
    pub full: AtomicU32,
    _pad: u32,
    /// A bit per page of entries: set before an entry of the page is first claimed. A lookup
    /// that reaches a page whose bit is clear stops there without touching it, so looking up
    /// the many files nobody recorded (everything from before the run) backs no page.
    used: [AtomicU64; USED_WORDS],
    _pad2: [u64; 16 - 3 - USED_WORDS],
}

const ENTRY_PAGES: usize = (SLOTS * core::mem::size_of::<Entry>()).div_ceil(4096) + 1;
const USED_WORDS: usize = ENTRY_PAGES.div_ceil(64);

#[repr(C)]
pub struct Entry {
    /// `key_of(dev, ino)`, 0 = free.
    key: AtomicU64,
    /// Even when stable, odd while a writer updates the fields below.
    seq: AtomicU32,
    kind: AtomicU32,
    /// The real modification time this record is about (ns).
    real: AtomicI64,
    /// What the run shows for it (ns).
    sealed: AtomicI64,
}

pub const SIZE: usize = core::mem::size_of::<Header>() + SLOTS * core::mem::size_of::<Entry>();
const _: () = assert!(SIZE == seal_abi::files::SIZE);
const _: () = assert!(core::mem::size_of::<Header>() == seal_abi::files::HEADER_BYTES);
const _: () = assert!(core::mem::offset_of!(Header, start) == seal_abi::files::START_OFFSET);

#[repr(C)]
pub struct Table {
    pub header: Header,
    entries: [Entry; SLOTS],
}

/// 0: not mapped yet, 1: mapping failed, else the mapping.
#[link_section = ".data.seal_hot"]
static MAP: AtomicUsize = AtomicUsize::new(0);

/// Which pages of the (sparse) table this process has backed ([`crate::core::backing`]).
#[link_section = ".data.seal_hot"]
static BACKED: Backing<{ SIZE.div_ceil(4096 * 64) }> = Backing::new();

pub fn key_of(dev: u64, ino: u64) -> u64 {
    seal_abi::mix64(dev ^ seal_abi::mix64(ino ^ 0x5eed_f11e)) | 1
}

/// The run's table, mapping it on first use. `None` when it cannot be mapped (said once).
#[inline]
pub fn get() -> Option<&'static Table> {
    let p = MAP.load(Acquire);
    if p > 1 {
        // SAFETY: a published mapping of SIZE bytes, never unmapped.
        return Some(unsafe { &*(p as *const Table) });
    }
    if p == 1 {
        return None;
    }
    map(None)
}

/// Maps the table. The launcher made it, with the run's start in its header; without one (an
/// older or foreign launcher) the first process creates it. `start`: the run's real start to
/// store when this process is the run's first (the root); others store their own start only
/// if nobody has. The file is sparse: [`BACKED`] backs each page before its first touch.
#[cold]
pub fn map(start: Option<i64>) -> Option<&'static Table> {
    let mut path = sys::StackBuf::<4200>::new();
    path.push(config::RUN_DIR.get())
        .push(b"/")
        .push(seal_abi::files::TABLE_NAME.as_bytes());
    let mut fd = sys::open(
        path.as_cstr(),
        libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        0,
    );
    if fd == -libc::ENOENT {
        fd = sys::open(
            path.as_cstr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        );
        if fd >= 0 {
            // Private whatever the umask (every process of the run must be able to open it).
            // SAFETY: fchmod and ftruncate of a descriptor we own (the same size from every
            // process: the first one sizes it, the rest change nothing).
            unsafe { sys::syscall3(libc::SYS_fchmod, fd as i64, 0o600, 0) };
            sys::ftruncate(fd, SIZE);
        }
    }
    let mut p = core::ptr::null_mut();
    if fd >= 0 {
        p = sys::mmap_shared(fd, SIZE);
        sys::close(fd);
    }
    if !p.is_null() && !BACKED.back(p, 0, seal_abi::files::HEADER_BYTES) {
        // SAFETY: our own mapping, never published.
        unsafe { sys::munmap(p, SIZE) };
        p = core::ptr::null_mut();
    }
    if p.is_null() {
        if MAP.compare_exchange(0, 1, AcqRel, Acquire).is_ok() && !config::run_ended() {
            let m = b"cannot map the run's file-time table; file times are clamped to the epoch";
            census::record_unsealed(seal_abi::unsealed::UNSUPPORTED_CALL, m);
            sys::warn(m);
        }
        return None;
    }
    // SAFETY: a shared mapping of SIZE bytes (zero-filled when new); all fields are atomics.
    let t = unsafe { &*(p as *const Table) };
    // The root maps first and fixes the start after (`set_start`); others start it now if
    // nobody has.
    if start.is_none() {
        t.set_start(real_now_coarse());
    }
    t.header.magic.store(MAGIC, Release);
    match MAP.compare_exchange(0, p as usize, AcqRel, Acquire) {
        Ok(_) => Some(t),
        Err(other) => {
            // SAFETY: our own mapping, never published.
            unsafe { sys::munmap(p, SIZE) };
            (other > 1).then(|| {
                // SAFETY: as in get().
                unsafe { &*(other as *const Table) }
            })
        }
    }
}

/// The kernel's coarse real clock: what it stamps files with.
pub fn real_now_coarse() -> i64 {
    let ts = sys::clock_gettime(libc::CLOCK_REALTIME_COARSE);
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// The run's real start for the root process: the first tick of the kernel's coarse clock
/// after this call began. Every file written before the run has a real time below it, every
/// file written in the run one at or above it (file times come from that clock and are only
/// as fine as its tick, so without the wait a file written just before the run and one
/// written just after could carry the same time). Costs the root up to one tick (1-10 ms).
pub fn wait_for_tick() -> i64 {
    let c0 = real_now_coarse();
    for _ in 0..100 {
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 200_000,
        };
        // SAFETY: a valid timespec; no remainder wanted.
        unsafe { sys::syscall3(libc::SYS_nanosleep, &ts as *const _ as i64, 0, 0) };
        let c = real_now_coarse();
        if c != c0 {
            return c;
        }
    }
    real_now_coarse()
}

impl Table {
    pub fn set_start(&self, s: i64) {
        let _ = self.header.start.compare_exchange(0, s, AcqRel, Acquire);
    }

    pub fn start(&self) -> i64 {
        self.header.start.load(Relaxed)
    }

    fn slot(&self, key: u64, claim: bool) -> Option<&Entry> {
        let home = (key as usize) & (SLOTS - 1);
        let base = self as *const Table as *const u8;
        for i in 0..PROBES {
            let e = &self.entries[(home + i) & (SLOTS - 1)];
            let page = (e as *const Entry as usize - base as usize) / 4096;
            let (word, bit) = (&self.header.used[page / 64], 1u64 << (page % 64));
            if word.load(Acquire) & bit == 0 {
                if !claim {
                    return None;
                }
                word.fetch_or(bit, AcqRel);
            }
            if !BACKED.back_ref(base, e) {
                break;
            }
            match probe(&e.key, key, claim) {
                Probe::Mine => return Some(e),
                Probe::Absent => return None,
                Probe::Taken => {}
            }
        }
        if claim && self.header.full.swap(1, Relaxed) == 0 {
            let m = b"the run's file-time table is full; times of further files written in \
                      the run are NOT sealed";
            census::record_unsealed(seal_abi::unsealed::TABLE_FULL, m);
            sys::warn(m);
        }
        None
    }

    /// The sealed time recorded for this file at real modification time `real`, and its kind.
    pub fn lookup(&self, dev: u64, ino: u64, real: i64) -> Option<(i64, u32)> {
        let e = self.slot(key_of(dev, ino), false)?;
        for _ in 0..1000 {
            let s1 = e.seq.load(Acquire);
            if s1 & 1 == 1 {
                core::hint::spin_loop();
                continue;
            }
            let r = e.real.load(Relaxed);
            let v = e.sealed.load(Relaxed);
            let k = e.kind.load(Relaxed);
            fence(Acquire);
            if e.seq.load(Relaxed) == s1 {
                return (r == real && k != 0).then_some((v, k));
            }
        }
        None
    }

    /// Records that this file, at real modification time `real`, shows `sealed`. Returns what
    /// the table holds afterwards for it: a record of the same real time whose kind is in
    /// `keep` (a bit set of kinds) stays, so every process agrees on it.
    pub fn record(&self, dev: u64, ino: u64, real: i64, sealed: i64, kind: u32, keep: u32) -> i64 {
        let Some(e) = self.slot(key_of(dev, ino), true) else {
            return sealed;
        };
        for _ in 0..10_000 {
            let s = e.seq.load(Acquire);
            if s & 1 == 1 {
                core::hint::spin_loop();
                continue;
            }
            if e.seq.compare_exchange(s, s + 1, Acquire, Relaxed).is_err() {
                continue;
            }
            let won = if e.real.load(Relaxed) == real && e.kind.load(Relaxed) & keep != 0 {
                e.sealed.load(Relaxed)
            } else {
                e.real.store(real, Relaxed);
                e.sealed.store(sealed, Relaxed);
                e.kind.store(kind, Relaxed);
                sealed
            };
            e.seq.store(s + 2, Release);
            return won;
        }
        sealed
    }
}
