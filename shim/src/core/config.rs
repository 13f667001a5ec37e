//! Process-wide seal settings, read once from the environment the launcher (or the parent's
//! exec hook) handed down.
//!
//! Hooks ask [`sealed`] on every call: one relaxed atomic load once initialised. The first hook
//! to run in a process (possibly before libseal's own constructor, from another library's
//! constructor) performs the initialisation.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering::*};

use seal_abi::flags as f;
use seal_abi::settings::{self, parse_hex, parse_i64, parse_u64, Settings};

use crate::core::sys;

/// Set once initialisation has finished, whether or not the process is sealed.
const READY: u32 = 1 << 31;

/// `READY | FLAGS` once initialised; the families' bits are only set when sealed.
#[link_section = ".data.seal_hot"]
static ACTIVE: AtomicU32 = AtomicU32::new(0);
#[link_section = ".data.seal_hot"]
static INIT: AtomicU8 = AtomicU8::new(0); // 0 not started, 1 running, 2 done

/// Why the hot paths (`clock::fast`, the sealed `getrandom`) must take the general path:
/// 0 when nothing unusual holds, so that one load and one test stand for every rare mode.
/// Each bit is owned by the module that knows the condition, which sets it when the
/// condition starts and clears it when it ends; the general path stays correct whatever the
/// word says (the fast paths compute what it would, for the common case only).
/// Statics the hot paths read, placed in libseal's hot data section (`.data.seal_hot`, kept
/// together by `shim/layout/hot.ld`): each `$vis static NAME: T = init;` with its docs.
#[macro_export]
macro_rules! hot_statics {
    ($($(#[$m:meta])* $vis:vis static $name:ident: $ty:ty = $init:expr;)*) => {
        $($(#[$m])* #[link_section = ".data.seal_hot"] $vis static $name: $ty = $init;)*
    };
}

#[link_section = ".data.seal_hot"]
pub static SLOW: AtomicU32 = AtomicU32::new(slow::UNREAD);

/// The bits of [`SLOW`].
pub mod slow {
    seal_abi::bits! { u32:
        /// The configuration has not been read yet.
        UNREAD,
        /// A language runtime's object is registered (`crate::runtime`): a clock read may be its
        /// bookkeeping, which only the general path tells apart.
        RUNTIME,
        /// A Python interpreter is found (`crate::py`): a counted call captures frames.
        PYTHON,
        /// A thread exists that glibc does not know of (`census::note_thread`).
        THREADS,
        /// Time is unsealed, or runs under `--rate`, `--spin-after`, or a tick out of the range
        /// the fast read handles.
        TIME,
        /// Randomness is unsealed.
        RANDOM,
        /// The process is in seccomp's strict mode (only `read`, `write`, `exit`, `sigreturn`):
        /// hooks may add no system call of their own (`seccomp_strict`).
        STRICT,
    }
    /// What a sealed clock read's fast path must find clear.
    /// What a sealed clock read's fast path must find clear.
    pub const CLOCK_READ: u32 = UNREAD | RUNTIME | PYTHON | THREADS | TIME | STRICT;
    /// What a sealed `getrandom`'s fast path must find clear.
    pub const RANDOM_READ: u32 = UNREAD | PYTHON | THREADS | RANDOM | STRICT;
}

/// The largest tick the fast clock read handles (its checked arithmetic assumes a tick far
/// below the clock's range): 2^40 ns, about 18 minutes.
pub const FAST_TICK_MAX: i64 = 1 << 40;

/// Sets `bits` of [`SLOW`] (a rare mode began).
#[inline]
pub fn slow_set(bits: u32) {
    SLOW.fetch_or(bits, Relaxed);
}

/// Clears `bits` of [`SLOW`] (a rare mode ended).
#[inline]
pub fn slow_clear(bits: u32) {
    SLOW.fetch_and(!bits, Relaxed);
}

/// Is the process in seccomp's strict mode? Then a hook whose call the kernel allows there
/// (`read`, `write`) passes it straight through: anything the shim would add (an `fstat`, a
/// clock of its own) would get the process killed.
#[inline]
pub fn seccomp_strict() -> bool {
    SLOW.load(Relaxed) & slow::STRICT != 0
}

/// May a hot path whose conditions are `mask` ([`slow`]) take its fast way? One load.
#[inline(always)]
pub fn fast(mask: u32) -> bool {
    let slow: u32;
    // SAFETY: a 4-byte load of SLOW, an aligned AtomicU32 (a relaxed atomic load is a plain
    // `mov` on x86_64). Through `sym`, the load is RIP-relative: SLOW is libseal's own (not
    // exported), so no GOT entry is read on the way.
    unsafe {
        core::arch::asm!("mov {v:e}, dword ptr [rip + {s}]", v = out(reg) slow, s = sym SLOW,
                         options(nostack, readonly, preserves_flags));
    }
    slow & mask == 0
}

crate::hot_statics! {
    pub static EPOCH_NS: AtomicI64 = AtomicI64::new(settings::DEFAULT_EPOCH_NS);
    pub static TICK_NS: AtomicI64 = AtomicI64::new(settings::DEFAULT_TICK_NS);
    /// `LIBSEAL_SPIN_AFTER`: how many clock reads after a wait leave the clock still.
    pub static SPIN_AFTER: AtomicI64 = AtomicI64::new(settings::DEFAULT_SPIN_AFTER as i64);
    pub static SEED: AtomicU64 = AtomicU64::new(0);
    /// `--rate` in parts per million (0: deterministic ticks) and the real monotonic time at
    /// launch it measures from.
    pub static RATE_PPM: AtomicU64 = AtomicU64::new(0);
    pub static REAL_START: AtomicI64 = AtomicI64::new(0);
    /// `LIBSEAL_FILES_START`: the run's start on the coarse real clock, found by the launcher.
    pub static FILES_START: AtomicI64 = AtomicI64::new(0);
}
/// `LIBSEAL_CPUS`: the CPU count family `machine` shows.
pub static CPUS: AtomicU32 = AtomicU32::new(settings::DEFAULT_CPUS);
crate::hot_statics! {
    /// Logical clock the first thread of this image starts at.
    pub static START_CLOCK: AtomicI64 = AtomicI64::new(0);
    pub static VPID: AtomicI32 = AtomicI32::new(seal_abi::ROOT_VPID);
    pub static PPID: AtomicI32 = AtomicI32::new(seal_abi::LAUNCHER_VPID);
    /// This process's place in the process tree (stable across exec).
    pub static LINEAGE: AtomicU64 = AtomicU64::new(seal_abi::ROOT_LINEAGE);
    /// Exec generation of this image.
    pub static GEN: AtomicU32 = AtomicU32::new(0);
}
/// The programs of this process's earlier images ([`settings::NAMES`]).
pub static NAMES: AtomicU64 = AtomicU64::new(0);
/// This image's program name ([`settings::image_name`]); 0 in a fork child, whose image is
/// its parent's and not one it exec'd.
pub static IMAGE_NAME: AtomicU32 = AtomicU32::new(0);
/// This image's ordinal among the images of its process ([`settings::image_ordinal`]); 0 in a
/// fork child. The main thread's lineage, and so its streams and its children, derive from it.
pub static IMAGE_ORD: AtomicU64 = AtomicU64::new(0);
/// Children created so far by this process (across its images): the next child's index.
#[link_section = ".data.seal_hot"]
pub static CHILDREN: AtomicU64 = AtomicU64::new(0);

crate::hot_statics! {
    /// This image's program as its parent's exec hook found it: the key of its run-wide name
    /// and the hash of the file name the parent gave the kernel (0, 0: unknown; see
    /// [`crate::core::table::exe_path`]).
    pub static EXE_KEY: AtomicU64 = AtomicU64::new(0);
    pub static EXE_NAME: AtomicU64 = AtomicU64::new(0);
}

/// Room for every [`FixedStr`] of the configuration at its longest, each with its NUL: the
/// five below and [`RAW`].
const STRINGS_LEN: usize = 4096 + 4096 + 65 + 2048 + 2048 + RAW_ROOM * settings::VARS.len();

/// The values of the [`FixedStr`]s, packed one after another as they are set: short values
/// (the usual case) share the first bytes, so an image's start touches one page of them where
/// a buffer each touched four.
struct Strings {
    buf: UnsafeCell<[u8; STRINGS_LEN]>,
    used: AtomicU32,
}

// SAFETY: bytes are written once, by the one thread initialising the image (INIT), each range
// before the `FixedStr` that owns it is published with Release; readers read after Acquire.
unsafe impl Sync for Strings {}

static STRINGS: Strings = Strings {
    buf: UnsafeCell::new([0; STRINGS_LEN]),
    used: AtomicU32::new(0),
};

/// A byte string of at most `N - 1` bytes, set once during initialisation; its bytes live in
/// [`STRINGS`].
pub struct FixedStr<const N: usize> {
    /// 1 + offset in [`STRINGS`]; 0 while unset.
    at: AtomicU32,
    len: AtomicU32,
}

impl<const N: usize> FixedStr<N> {
    pub const fn new() -> Self {
        FixedStr {
            at: AtomicU32::new(0),
            len: AtomicU32::new(0),
        }
    }
    /// Stores `s` (cut to N-1 bytes, NUL-terminated). Once per image: a second value would
    /// need room the packing does not keep, and is dropped.
    pub fn set(&self, s: &[u8]) {
        if s.is_empty() && self.at.load(Relaxed) == 0 {
            return; // reads as empty already
        }
        let n = s.len().min(N - 1);
        let off = STRINGS.used.fetch_add(n as u32 + 1, Relaxed) as usize;
        if off + n + 1 > STRINGS_LEN {
            return;
        }
        // SAFETY: `off..off+n+1` was claimed above by this call alone, inside the buffer.
        unsafe {
            let b = STRINGS.buf.get() as *mut u8;
            core::ptr::copy_nonoverlapping(s.as_ptr(), b.add(off), n);
            *b.add(off + n) = 0;
        }
        self.len.store(n as u32, Relaxed);
        self.at.store(off as u32 + 1, Release);
    }
    /// The value with its trailing NUL.
    pub fn get_cstr(&self) -> &[u8] {
        let at = self.at.load(Acquire) as usize;
        if at == 0 {
            return b"\0";
        }
        let n = self.len.load(Relaxed) as usize;
        // SAFETY: published by `set` (Release) after the bytes and their NUL were written.
        unsafe { core::slice::from_raw_parts((STRINGS.buf.get() as *const u8).add(at - 1), n + 1) }
    }
    pub fn get(&self) -> &[u8] {
        let c = self.get_cstr();
        &c[..c.len() - 1]
    }
}

impl<const N: usize> Default for FixedStr<N> {
    fn default() -> Self {
        Self::new()
    }
}

#[link_section = ".data.seal_hot"]
pub static RUN_DIR: FixedStr<4096> = FixedStr::new();
/// `--only`/`--skip` globs of the run, one a line, handed on to children as they came.
#[link_section = ".data.seal_hot"]
pub static ONLY: FixedStr<2048> = FixedStr::new();
#[link_section = ".data.seal_hot"]
pub static SKIP: FixedStr<2048> = FixedStr::new();
/// The run's flags word as the launcher gave it (what children get), even in a process that
/// `--only`/`--skip` left out.
#[link_section = ".data.seal_hot"]
pub static RUN_FLAGS: AtomicU32 = AtomicU32::new(0);
/// This program is outside `--only`/`--skip`: sealed families are off in this image only.
#[link_section = ".data.seal_hot"]
pub static SCOPED_OUT: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
#[link_section = ".data.seal_hot"]
pub static SHIM_PATH: FixedStr<4096> = FixedStr::new();
#[link_section = ".data.seal_hot"]
pub static HOSTNAME: FixedStr<65> = FixedStr::new();

/// Bytes kept of a run-wide variable's value, with its NUL: at most those of its own
/// [`FixedStr`] when it has one ([`raw_len`]).
const RAW_ROOM: usize = 4096;

/// The value of each run-wide variable ([`settings::VARS`], same order) as this image was
/// given it, cut as its [`FixedStr`] cuts it: what [`run_settings`] decodes for children.
/// A setting the shim does not use needs nothing here.
static RAW: [FixedStr<RAW_ROOM>; settings::VARS.len()] =
    [const { FixedStr::new() }; settings::VARS.len()];
/// Bit `i`: `RAW[i]` was given (an empty value is not a missing one).
static RAW_GIVEN: AtomicU32 = AtomicU32::new(0);

/// How much of variable `name`'s value is kept: as much as the [`FixedStr`] it fills.
fn raw_len(name: &str) -> usize {
    match name {
        settings::HOSTNAME => 64,
        settings::ONLY | settings::SKIP => 2047,
        _ => RAW_ROOM - 1,
    }
}

/// The run's settings as this image was given them, to hand on to its children (every
/// default when not in a run, with no run directory).
pub fn run_settings() -> Settings<'static> {
    let given = RAW_GIVEN.load(Acquire);
    let raw = |name: &str| {
        let i = settings::VARS.iter().position(|v| *v == name)?;
        (given & (1 << i) != 0).then(|| RAW[i].get())
    };
    // `decode` reads no run directory as "not sealed"; callers ask `in_run` first.
    let dir = raw(settings::RUN_DIR).unwrap_or(b"");
    let s = Settings::decode(|name| match name {
        settings::RUN_DIR => Some(&b"-"[..]),
        _ => raw(name),
    });
    match s {
        Some(s) => Settings { run_dir: dir, ..s },
        None => unreachable!("a run directory was given"),
    }
}

/// The flags word (0 until initialised or when not sealed; the READY bit aside).
#[inline(always)]
pub fn flags() -> u32 {
    ACTIVE.load(Relaxed) & !READY
}

/// Is `family` (a [`seal_abi::flags`] bit) sealed in this process? Initialises on first use.
#[inline(always)]
pub fn sealed(family: u32) -> bool {
    let a = ACTIVE.load(Relaxed);
    if a & READY != 0 {
        return a & family != 0;
    }
    init_slow();
    ACTIVE.load(Relaxed) & family != 0
}

/// Has this image's configuration been read (whatever it said)?
#[inline]
pub fn initialised() -> bool {
    ACTIVE.load(Relaxed) & READY != 0
}

/// Is this process part of a sealed run at all?
#[inline]
pub fn in_run() -> bool {
    sealed(f::ALL_FAMILIES | f::WARP | f::QUIET | (1 << 30))
}

crate::thread_cell! {
    static INITIALISING: bool = "seal_tls_initialising";
}

#[cold]
pub fn init_slow() {
    loop {
        match INIT.compare_exchange(0, 1, Acquire, Acquire) {
            Ok(_) => {
                INITIALISING.with(|c| c.set(true));
                let _g = crate::core::real::Reentry::force();
                let flags = load_from_env();
                set_slow_modes(flags);
                ACTIVE.store(READY | flags, Release);
                INIT.store(2, Release);
                INITIALISING.with(|c| c.set(false));
                if flags != 0 {
                    crate::on_process_start();
                }
                return;
            }
            Err(2) => return,
            Err(_) => {
                // Another thread is initialising, or this one is (re-entered from inside init):
                // then pass through rather than wait on ourselves.
                if INITIALISING.with(|c| c.get()) {
                    return;
                }
                // SAFETY: sched_yield has no arguments.
                unsafe { sys::syscall3(libc::SYS_sched_yield, 0, 0, 0) };
            }
        }
    }
}

/// The [`SLOW`] bits the configuration decides, then `UNREAD` cleared: called once, after
/// the settings are stored and before `ACTIVE` publishes them.
fn set_slow_modes(flags: u32) {
    let tick = TICK_NS.load(Relaxed);
    let plain_time = flags & f::TIME != 0
        && RATE_PPM.load(Relaxed) == 0
        && SPIN_AFTER.load(Relaxed) == 0
        && (1..=FAST_TICK_MAX).contains(&tick);
    slow_set(
        if plain_time { 0 } else { slow::TIME }
            | if flags & f::RANDOM != 0 {
                0
            } else {
                slow::RANDOM
            },
    );
    slow_clear(slow::UNREAD);
}

extern "C" {
    static mut environ: *const *const libc::c_char;
}

/// Looks `name` up in the process environment without calling getenv (which a program may
/// have replaced) and without allocating.
pub fn getenv(name: &'static str) -> Option<&'static [u8]> {
    // SAFETY: environ is a NULL-terminated array of NUL-terminated strings owned by libc.
    unsafe {
        let mut p = environ;
        if p.is_null() {
            return None;
        }
        while !(*p).is_null() {
            // Only the name is compared: other entries are never measured (the stack pad).
            if sys::cstr_starts_with(*p, name.as_bytes()) && *(*p).add(name.len()) == b'=' as _ {
                return Some(sys::cstr((*p).add(name.len() + 1)));
            }
            p = p.add(1);
        }
    }
    None
}

/// seal's own variables (`LIBSEAL_*`), found in one pass over the environment: looking each
/// of the ~20 names up with [`getenv`] compared every name with every entry (~7 µs of each
/// image's start).
struct SealVars {
    n: usize,
    vars: [(&'static [u8], &'static [u8]); 32],
}

impl SealVars {
    fn read() -> SealVars {
        let mut v = SealVars {
            n: 0,
            vars: [(&[], &[]); 32],
        };
        // SAFETY: environ is a NULL-terminated array of NUL-terminated strings owned by libc.
        unsafe {
            let mut p = environ;
            if p.is_null() {
                return v;
            }
            while !(*p).is_null() && v.n < v.vars.len() {
                // Only `LIBSEAL_` entries are measured (never the stack pad, which is last
                // and starts with `x`, nor the launcher's, whose value is not needed).
                if sys::cstr_starts_with(*p, settings::PREFIX.as_bytes())
                    && !sys::cstr_starts_with(*p, settings::PAD.as_bytes())
                {
                    let e = sys::cstr(*p);
                    if let Some(eq) = e.iter().position(|&c| c == b'=') {
                        v.vars[v.n] = (&e[..eq], &e[eq + 1..]);
                        v.n += 1;
                    }
                }
                p = p.add(1);
            }
        }
        v
    }

    fn get(&self, name: &str) -> Option<&'static [u8]> {
        self.vars[..self.n]
            .iter()
            .find(|(k, _)| *k == name.as_bytes())
            .map(|(_, v)| *v)
    }
}

/// Reads the settings; returns the flags word (0 = this process is not sealed).
fn load_from_env() -> u32 {
    let vars = SealVars::read();
    let getenv = |name| vars.get(name);
    let Some(s) = Settings::decode(getenv) else {
        return 0;
    };
    let mut given = 0;
    for (i, &name) in settings::VARS.iter().enumerate() {
        if let Some(v) = getenv(name) {
            RAW[i].set(&v[..v.len().min(raw_len(name))]);
            given |= 1 << i;
        }
    }
    RAW_GIVEN.store(given, Release);
    RUN_DIR.set(s.run_dir);
    SHIM_PATH.set(s.shim);
    HOSTNAME.set(s.hostname);
    EPOCH_NS.store(s.epoch_ns, Relaxed);
    TICK_NS.store(s.tick_ns, Relaxed);
    SEED.store(s.seed, Relaxed);
    RATE_PPM.store(s.rate_ppm, Relaxed);
    REAL_START.store(s.real_start_ns, Relaxed);
    FILES_START.store(s.files_start_ns, Relaxed);
    CPUS.store(s.cpus, Relaxed);
    SPIN_AFTER.store(s.spin_after as i64, Relaxed);
    if let Some(v) = getenv(settings::CLOCK).and_then(parse_i64) {
        START_CLOCK.store(v, Relaxed);
    }
    if let Some(v) = getenv(settings::VPID).and_then(parse_i64) {
        VPID.store(v as i32, Relaxed);
    }
    if let Some(v) = getenv(settings::PPID).and_then(parse_i64) {
        PPID.store(v as i32, Relaxed);
    }
    if let Some(v) = getenv(settings::LINEAGE).and_then(parse_hex) {
        LINEAGE.store(v, Relaxed);
    }
    if let Some(v) = getenv(settings::CHILDREN).and_then(parse_u64) {
        CHILDREN.store(v, Relaxed);
    }
    if let Some(v) = getenv(settings::GEN).and_then(parse_u64) {
        GEN.store(v as u32, Relaxed);
    }
    let names = getenv(settings::NAMES).and_then(parse_hex).unwrap_or(0);
    NAMES.store(names, Relaxed);
    if let Some(program) = program_file_name() {
        let mut buf = [0u8; 1024];
        let name = settings::image_name(link_target_name(program, &mut buf));
        IMAGE_NAME.store(name as u32, Relaxed);
        IMAGE_ORD.store(settings::image_ordinal(names, name), Relaxed);
    }
    if let Some((key, name)) = getenv(settings::EXE).and_then(|v| {
        let dot = v.iter().position(|&c| c == b'.')?;
        Some((parse_hex(&v[..dot])?, parse_hex(&v[dot + 1..])?))
    }) {
        EXE_KEY.store(key, Relaxed);
        EXE_NAME.store(name, Relaxed);
    }
    if s.flags & f::QUIET != 0 {
        sys::QUIET.store(true, Relaxed);
    }
    ONLY.set(s.only);
    SKIP.set(s.skip);
    RUN_FLAGS.store(s.flags, Relaxed);
    let mut flags = s.flags;
    if !(s.only.is_empty() && s.skip.is_empty()) {
        let mut exe = [0u8; 4096];
        let n = sys::readlink(b"/proc/self/exe\0", &mut exe);
        if !s.in_scope(&exe[..n]) {
            SCOPED_OUT.store(true, Relaxed);
            flags &= !f::ALL_FAMILIES;
        }
    }
    // Bit 30 marks "in a run" even when every family is unsealed.
    flags | (1 << 30)
}

/// The file name of the program this image runs: the name it was started under (`AT_EXECFN`),
/// or for a script the interpreter's, as the kernel put it in `argv[0]` before the script's
/// path (and the `#!` line's one optional argument): a version manager's shim named `python3`
/// is a `bash` image, the interpreter it execs the `python3` one.
fn program_file_name() -> Option<&'static [u8]> {
    // SAFETY: getauxval has no preconditions; AT_EXECFN is a NUL-terminated string on the
    // initial stack, or 0.
    let execfn = unsafe { libc::getauxval(libc::AT_EXECFN) } as *const libc::c_char;
    if execfn.is_null() {
        return None;
    }
    // SAFETY: as above; the string lives as long as the process.
    let execfn = unsafe { sys::cstr(execfn) };
    if let Some((argc, argv)) = crate::core::census::start_args() {
        for i in 1..argc.min(3) {
            // SAFETY: glibc's argv holds argc strings, untouched before main.
            let (a, first) = unsafe { (*argv.add(i), *argv) };
            // SAFETY: as above.
            if !a.is_null() && !first.is_null() && unsafe { sys::cstr(a) } == execfn {
                // SAFETY: as above.
                return Some(unsafe { sys::cstr(first) });
            }
        }
    }
    Some(execfn)
}

/// `path` with the symbolic links of its last component followed (at most 8): `python3`, a
/// link to `python3.11`, names the program `python3.11` as a direct call, a venv's `python` and
/// `/usr/bin/python3` do, so the name a caller or a CI image uses for one interpreter is not
/// an input. `path` itself when it is not a link (or too long to follow). One `readlink` per
/// image.
fn link_target_name<'a>(path: &'a [u8], buf: &'a mut [u8; 1024]) -> &'a [u8] {
    if path.len() + 1 > buf.len() {
        return path;
    }
    buf[..path.len()].copy_from_slice(path);
    buf[path.len()] = 0;
    let mut len = path.len();
    let mut followed = false;
    for _ in 0..8 {
        let mut target = [0u8; 512];
        let n = sys::readlink(&buf[..len + 1], &mut target);
        if n == 0 || n >= target.len() {
            break;
        }
        // An absolute target replaces the path; a relative one replaces its last component.
        let dir = if target[0] == b'/' {
            0
        } else {
            buf[..len]
                .iter()
                .rposition(|&c| c == b'/')
                .map_or(0, |i| i + 1)
        };
        if dir + n + 1 > buf.len() {
            break;
        }
        buf[dir..dir + n].copy_from_slice(&target[..n]);
        len = dir + n;
        buf[len] = 0;
        followed = true;
    }
    if followed {
        &buf[..len]
    } else {
        path
    }
}

/// Logical-clock tick in nanoseconds.
#[inline(always)]
pub fn tick() -> i64 {
    TICK_NS.load(Relaxed)
}

/// Clock reads after a wait that do not move the clock (0: every read ticks).
#[inline(always)]
pub fn spin_after() -> i64 {
    SPIN_AFTER.load(Relaxed)
}

#[inline(always)]
pub fn epoch_ns() -> i64 {
    EPOCH_NS.load(Relaxed)
}

/// Has this process's sealed run ended (its run dir removed because `seal` already exited)?
/// A background process that outlives the run and then forks or execs lands here. Says so
/// on stderr, once per process, and returns true; the caller then skips its own warning.
pub fn run_ended() -> bool {
    use core::sync::atomic::AtomicBool;
    #[link_section = ".data.seal_hot"]
    static SAID: AtomicBool = AtomicBool::new(false);
    let mut path = sys::StackBuf::<4200>::new();
    path.push(RUN_DIR.get());
    let fd = sys::open(
        path.as_cstr(),
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        0,
    );
    if fd >= 0 {
        sys::close(fd);
        return false;
    }
    if fd != -libc::ENOENT {
        return false;
    }
    if !SAID.swap(true, Relaxed) {
        sys::warn(
            b"this process started after its sealed run ended (seal has exited): \
              it stays sealed, but is not counted in the census",
        );
    }
    true
}
