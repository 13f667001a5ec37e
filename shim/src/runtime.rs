//! Runtime bookkeeping: clock reads a language runtime makes for itself, not for the program.
//!
//! A JVM or Node reads the clock for its own bookkeeping (a JIT compile request, a class-load
//! timer, libuv's loop time, V8's GC heuristics) a scheduling-dependent number of times on the
//! program's own threads. With one tick per read, every one of those would move the values the
//! program sees. So a read is classified by its call site, and a read that is the runtime's
//! own returns the thread's logical clock **without advancing it**; only the program's own
//! reads (and its waits) move its clock. The census counts those reads under
//! [`Fid::RuntimeClock`](seal_abi::Fid::RuntimeClock) (docs/design.md, docs/runtimes.md).
//!
//! Which calls are the program's, per runtime (measured with `seal census`, JDK 17, Node 20):
//!
//! * **HotSpot** (`libjvm.so`): every read that `libjvm.so` makes is bookkeeping unless it was
//!   asked for from outside `libjvm.so` or through one of its exported `JVM_*` entry points.
//!   `System.nanoTime`/`currentTimeMillis` reach `os::javaTimeNanos`/`os::javaTimeMillis` from
//!   interpreted or compiled Java code (the code cache, outside any object; `JVM_NanoTime`
//!   tail-jumps), `Instant.now` through `JVM_GetNanoTimeAdjustment`; the JIT's
//!   `CompilationPolicy::update_rate` and the class-loading timers reach the same functions
//!   from inside `libjvm.so`.
//! * **Node** (the `node` executable or `libnode.so`, V8 and libuv inside): realtime reads
//!   (`Date.now`) are the program's; a monotonic read is the program's only when libuv's clock
//!   helper was called from outside libuv (`process.hrtime`, `performance.now` through
//!   `uv_hrtime`). libuv's loop time (`uv_update_time`, inlined into `uv__io_poll`/`uv_run`)
//!   and V8's `base::TimeTicks::Now` (GC, compiler and task-runner heuristics) are bookkeeping.
//!
//! Telling them apart needs two return addresses: the hook's own (`ra`) and its caller's,
//! read through the caller's frame pointer (both runtimes keep frame pointers; a frame pointer
//! that does not point into the stack just above the hook's frame is not followed). For
//! libjvm, whether an address lies in a `JVM_*` function is looked up with `dladdr1` once per
//! address (a cold path, cached lock-free); for Node, the spans of libuv, `TimeTicks` and
//! `NodePlatform` are read from its dynamic symbol table once, when it is listed. The hot path for every other caller is one load and a range compare.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};

/// Kinds of runtime objects.
const JVM: u64 = 1;
const NODE: u64 = 2;
/// CPython (the `python3.X` executable or `libpython3.X.so`): no clock read is bookkeeping,
/// but its condition variables are the GIL's (`crate::causal` leaves them out).
const PYTHON: u64 = 3;

/// Registered runtime objects: `[start, end)` of their mapping and their kind.
const MAX_OBJECTS: usize = 4;
#[link_section = ".data.seal_hot"]
static STARTS: [AtomicU64; MAX_OBJECTS] = [const { AtomicU64::new(0) }; MAX_OBJECTS];
#[link_section = ".data.seal_hot"]
static ENDS: [AtomicU64; MAX_OBJECTS] = [const { AtomicU64::new(0) }; MAX_OBJECTS];
#[link_section = ".data.seal_hot"]
static KINDS: [AtomicU64; MAX_OBJECTS] = [const { AtomicU64::new(0) }; MAX_OBJECTS];
#[link_section = ".data.seal_hot"]
static N_OBJECTS: AtomicUsize = AtomicUsize::new(0);

/// The kind of runtime an object file is, from its path.
pub fn kind_of(path: &[u8]) -> u64 {
    let base = match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[i + 1..],
        None => path,
    };
    if base == b"libjvm.so" {
        JVM
    } else if base == b"node" || base.starts_with(b"libnode.so") || base.starts_with(b"nodejs") {
        NODE
    } else if base.starts_with(b"python") || base.starts_with(b"libpython") {
        PYTHON
    } else {
        0
    }
}

/// Spans of code inside a Node object, `[start, end)` (0/0 when unknown): libuv, V8's
/// `base::TimeTicks`, Node's `NodePlatform`. Found once, from the dynamic symbol table, because
/// `dladdr` scans all of Node's ~50 000 exported symbols on every lookup.
static UV: Span = Span::new();
static TICKS: Span = Span::new();
static PLATFORM: Span = Span::new();

struct Span(AtomicU64, AtomicU64);

impl Span {
    const fn new() -> Span {
        Span(AtomicU64::new(0), AtomicU64::new(0))
    }
    /// Does the return address `ra` come from this span?
    fn holds(&self, ra: u64) -> bool {
        let a = ra.wrapping_sub(1);
        self.0.load(Relaxed) <= a && a < self.1.load(Relaxed)
    }
    fn set(&self, (lo, hi): (u64, u64)) {
        self.0.store(lo, Relaxed);
        self.1.store(hi, Relaxed);
    }
}

/// Registers a loaded object (called for every object the census lists: at image start and
/// whenever a call comes from an object loaded since). Idempotent.
pub fn note_object(path: &[u8], start: u64, end: u64, info: &libc::dl_phdr_info) {
    let kind = kind_of(path);
    if kind == 0 {
        return;
    }
    if kind == NODE && UV.1.load(Relaxed) == 0 {
        // SAFETY: info describes a loaded object (dl_iterate_phdr's callback argument).
        unsafe { node_spans(info) };
    }
    let n = N_OBJECTS.load(Acquire);
    if STARTS[..n.min(MAX_OBJECTS)]
        .iter()
        .any(|s| s.load(Relaxed) == start)
    {
        return;
    }
    // Registration happens under the census's module-walk flag (one walker at a time).
    if n >= MAX_OBJECTS {
        return;
    }
    STARTS[n].store(start, Relaxed);
    ENDS[n].store(end, Relaxed);
    KINDS[n].store(kind, Relaxed);
    // Set before the object is published: no read from it takes the fast path after.
    crate::core::config::slow_set(crate::core::config::slow::RUNTIME);
    N_OBJECTS.store(n + 1, Release);
}

/// Forgets the registered objects (a fresh process image; tests).
pub fn reset() {
    N_OBJECTS.store(0, Release);
    crate::core::config::slow_clear(crate::core::config::slow::RUNTIME);
}

/// The runtime object `addr` lies in: `(kind, start, end)`.
#[inline(always)]
fn object_of(addr: u64) -> Option<(u64, u64, u64)> {
    let n = N_OBJECTS.load(Acquire);
    if n == 0 {
        return None;
    }
    for i in 0..n.min(MAX_OBJECTS) {
        let (s, e) = (STARTS[i].load(Relaxed), ENDS[i].load(Relaxed));
        if s <= addr && addr < e {
            return Some((KINDS[i].load(Relaxed), s, e));
        }
    }
    None
}

/// Whose is a timed wait HotSpot makes (`ra` its return address into `libjvm.so`, `fp` the
/// hook's frame pointer)? `None` when `ra` is not in `libjvm.so`.
///
/// `libjvm.so` parks every thread through its own condition variables, for the program's
/// waits and for its own. The program's are `Thread.sleep` and `Object.wait` (reached through
/// the exported `JVM_Sleep`/`JVM_MonitorWait`) and `LockSupport.parkNanos` (`Parker::park`,
/// called by `Unsafe_Park`, a native method called straight from Java code: the stack leaves
/// `libjvm.so` within three return addresses). Everything else is the VM's own: the timed
/// rechecks of a contended `synchronized` enter (`ObjectMonitor::EnterI` parks 1, 8, 64 ms at
/// a time), the inflation spin's 1 ms naps and the VM's internal monitors. Whether those time
/// out depends on how soon the scheduler runs the lock's holder, so they move no clock
/// (measured: a contended class-initialisation monitor put a program's clock 1 ms later in
/// one run out of a few hundred under load).
#[inline]
pub fn jvm_wait(ra: u64, fp: u64) -> Option<bool> {
    let (kind, start, end) = object_of(ra.wrapping_sub(1))?;
    (kind == JVM).then(|| jvm_program_wait(start, end, fp))
}

/// How many return addresses [`jvm_wait`] looks at before it calls a wait the VM's own.
const JVM_WAIT_DEPTH: usize = 8;

#[cold]
#[inline(never)]
fn jvm_program_wait(start: u64, end: u64, mut fp: u64) -> bool {
    // Depth 1 is the hook's own return address (in libjvm); depth 2 its caller's.
    for depth in 2..=JVM_WAIT_DEPTH {
        let Some(up) = frame_above(fp) else {
            return false;
        };
        // SAFETY: `up` lies within 64 KiB above a live frame of this stack, 8-aligned.
        let ret = unsafe { ((up + 8) as *const u64).read() };
        let a = ret.wrapping_sub(1);
        if !(start <= a && a < end) {
            return depth <= 3;
        }
        if sym_class(ret) & JVM_WAIT != 0 {
            return true;
        }
        fp = up;
    }
    false
}

/// Is a condition variable wait from `ra` CPython's GIL? Its 5 ms timeouts time out as often
/// as the scheduler makes threads contend: they are the interpreter's bookkeeping, and move
/// no clock (`crate::wait::Owner::Gil`).
#[inline]
pub fn gil_wait(ra: u64) -> bool {
    matches!(object_of(ra.wrapping_sub(1)), Some((PYTHON, _, _)))
}

/// A semaphore call from `ra` that CPython's lock code (`PyThread_acquire_lock_timed`, 3.11+)
/// makes right after reading the monotonic clock for a deadline: that read is bookkeeping
/// whenever the call is untimed (`sem_wait`, `sem_trywait`: 3.11 and 3.12 read the clock for
/// every acquire, timed or not, and a `Lock.acquire()` first tries without blocking), and its
/// tick is taken back (`thread::refund_tick`); for `sem_clockwait` (timed) it is taken back
/// too, since only the deadline saw it. 3.8-3.10 read no clock there; 3.13's untimed waits
/// neither.
#[inline]
pub fn python_lock_read(ra: u64, timed: bool) -> bool {
    if !matches!(object_of(ra.wrapping_sub(1)), Some((PYTHON, _, _))) {
        return false;
    }
    match crate::py::minor() {
        11 | 12 => true,
        13 => timed,
        _ => false,
    }
}

/// Is this clock read the runtime's own bookkeeping (answer without a tick)?
///
/// `ra` is the hook's return address, `fp` the hook's frame pointer (`frame!()`), `realtime`
/// whether a realtime clock was read.
#[inline(always)]
pub fn bookkeeping(ra: u64, fp: u64, realtime: bool) -> bool {
    match object_of(ra.wrapping_sub(1)) {
        None => false,
        Some(obj) => obj.0 != PYTHON && classify(obj, ra, fp, realtime),
    }
}

/// The return address one frame further up: the caller's caller, read through the frame
/// pointer the caller left in the hook's frame. 0 when that frame pointer does not point into
/// the stack just above the hook's frame (a caller that keeps no frame pointer).
#[inline]
fn caller_of_caller(fp: u64) -> u64 {
    match frame_above(fp) {
        // SAFETY: `up` lies within 64 KiB above a live frame of this stack, 8-aligned; the
        // stack between a frame and the frames that called it is mapped.
        Some(up) => unsafe { ((up + 8) as *const u64).read() },
        None => 0,
    }
}

/// The frame pointer saved in the frame at `fp` (its caller's frame), when it points a little
/// higher up the same stack; `None` for a caller that keeps no frame pointer.
#[inline]
fn frame_above(fp: u64) -> Option<u64> {
    if fp == 0 {
        return None;
    }
    // SAFETY: `fp` is a frame base of this stack (the hook's own: frame pointers are forced in
    // libseal; or one found by this function), so [fp] is a readable stack word.
    let up = unsafe { (fp as *const u64).read() };
    // A frame pointer points at a higher address of the same stack, not far away.
    (up > fp && up - fp <= 1 << 16 && up & 7 == 0).then_some(up)
}

#[cold]
#[inline(never)]
fn classify((kind, start, end): (u64, u64, u64), ra: u64, fp: u64, realtime: bool) -> bool {
    let ra2 = caller_of_caller(fp);
    match kind {
        JVM => {
            // The program's when asked for from outside libjvm (Java code in the code cache,
            // a JNI library) or through an exported JVM_* entry point.
            let inside = start <= ra2.wrapping_sub(1) && ra2.wrapping_sub(1) < end;
            inside && sym_class(ra) & JVM_ENTRY == 0 && sym_class(ra2) & JVM_ENTRY == 0
        }
        NODE => {
            if realtime {
                return false;
            }
            // V8's own TimeTicks; V8's heuristics through Node's platform
            // (NodePlatform::MonotonicallyIncreasingTime); and libuv's loop time (libuv's clock
            // helper called from libuv itself, or a read inlined into one of its functions
            // called from libuv). A libuv read asked for from outside libuv is the program's.
            TICKS.holds(ra) || PLATFORM.holds(ra2) || (UV.holds(ra) && UV.holds(ra2))
        }
        _ => false,
    }
}

/// Finds the [`UV`], [`TICKS`] and [`PLATFORM`] spans of a Node object from its exported
/// functions: each span runs from the lowest to the end of the highest function of its
/// prefix that lies within 256 KiB of its anchor: `uv_run`, `v8::base::TimeTicks::Now`,
/// `NodePlatform::MonotonicallyIncreasingTime` (a library's or a source file's functions sit
/// together; an exit handler such as `uv_library_shutdown` may be placed far away and is left
/// out).
///
/// # Safety
/// `info` describes a loaded object whose dynamic section and symbol table are mapped.
unsafe fn node_spans(info: &libc::dl_phdr_info) {
    // SAFETY: forwarded.
    let Some(t) = (unsafe { crate::elf::DynSyms::of(info) }) else {
        return;
    };
    let bias = t.bias;
    // One pass over the table, and a name is read only for a function within WINDOW of its
    // span's anchor: Node exports ~75 000 symbols whose names lie scattered over 5 MB, and
    // reading every name (four passes, a `strlen` each) cost ~10 ms of every `node` start.
    // Node 20's spans: libuv 116 KiB (uv_run 26 KiB from its start), TimeTicks 340 bytes,
    // NodePlatform 19 KiB; a window of 256 KiB reads ~3 300 names, one of 1 MiB ~19 500.
    const WINDOW: u64 = 1 << 18;
    // The anchors come from the hash table, as the loader finds symbols; a Node without one
    // of them anchors that span at the first function of its prefix (reading every name).
    // Per span: its prefix and (anchor, lowest, end) once anchored.
    type Prefix<'a> = (&'a [u8], Option<(u64, u64, u64)>);
    let mut spans: [Prefix; 3] = [
        (b"uv_", None),
        (b"_ZN2v84base9TimeTicks", None),
        (b"_ZN4node12NodePlatform", None),
    ];
    let anchors: [&[u8]; 3] = [
        b"uv_run",
        b"_ZN2v84base9TimeTicks3NowEv",
        b"_ZN4node12NodePlatform27MonotonicallyIncreasingTimeEv",
    ];
    for ((_, span), name) in spans.iter_mut().zip(anchors) {
        *span = t
            .lookup(name)
            .map(|a| (a.st_value, a.st_value, a.st_value + a.st_size));
    }
    // uv_run is the only anchor libuv's span may have: the first uv_ function in the table
    // might be a far-away one (an exit handler such as `uv_library_shutdown`).
    let uv_found = spans[0].1.is_some();
    for s in t.all() {
        if s.st_info & 0xf != 2 /* STT_FUNC */ || s.st_value == 0 {
            continue;
        }
        for (k, (prefix, span)) in spans.iter_mut().enumerate() {
            let near = match span {
                Some((anchor, ..)) => s.st_value.abs_diff(*anchor) < WINDOW,
                None => k != 0 || uv_found,
            };
            if !near || !t.name_starts_with(s, prefix) {
                continue;
            }
            match span {
                None => *span = Some((s.st_value, s.st_value, s.st_value + s.st_size)),
                Some((_, lo, hi)) => {
                    *lo = (*lo).min(s.st_value);
                    *hi = (*hi).max(s.st_value + s.st_size);
                }
            }
        }
    }
    let [uv, ticks, platform] =
        spans.map(|(_, s)| s.map_or((0, 0), |(_, lo, hi)| (bias + lo, bias + hi)));
    TICKS.set(ticks);
    PLATFORM.set(platform);
    UV.set(uv);
}

/// `sym_class` bits.
const KNOWN: u8 = 1;
/// Inside an exported function whose name starts with `JVM_`.
const JVM_ENTRY: u8 = 2;
/// Inside `JVM_Sleep` or `JVM_MonitorWait`: `Thread.sleep` and `Object.wait`.
const JVM_WAIT: u8 = 4;

/// Cache of [`sym_class`]: open addressing, key = address, value = class (with `KNOWN`).
const CACHE_SLOTS: usize = 4096;
static CACHE_KEYS: [AtomicU64; CACHE_SLOTS] = [const { AtomicU64::new(0) }; CACHE_SLOTS];
static CACHE_VALS: [AtomicU64; CACHE_SLOTS] = [const { AtomicU64::new(0) }; CACHE_SLOTS];

/// What kind of exported function `addr` (a return address) lies in. Cached per address;
/// `dladdr1` on a miss (the loader's lock, never taken on a hot path: a call site misses once).
fn sym_class(addr: u64) -> u8 {
    if addr == 0 {
        return 0;
    }
    let first = (addr.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52) as usize;
    let mut free = None;
    for i in first..first + 32 {
        let k = CACHE_KEYS[i % CACHE_SLOTS].load(Acquire);
        if k == addr {
            let v = CACHE_VALS[i % CACHE_SLOTS].load(Acquire) as u8;
            if v & KNOWN != 0 {
                return v;
            }
            break;
        }
        if k == 0 {
            free = Some(i % CACHE_SLOTS);
            break;
        }
    }
    let v = lookup(addr) | KNOWN;
    if let Some(slot) = free {
        if CACHE_KEYS[slot]
            .compare_exchange(0, addr, AcqRel, Acquire)
            .is_ok()
        {
            CACHE_VALS[slot].store(v as u64, Release);
        }
    }
    v
}

/// glibc's `RTLD_DL_SYMENT` (`<dlfcn.h>`): `dladdr1` returns the matching `ElfW(Sym)`.
#[cfg(not(test))]
const RTLD_DL_SYMENT: libc::c_int = 1;

#[cfg(not(test))]
fn lookup(addr: u64) -> u8 {
    // SAFETY: all-zero is a valid Dl_info (null pointers, zero address).
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    let mut sym: *const libc::Elf64_Sym = core::ptr::null();
    let _g = crate::core::real::Reentry::force();
    // SAFETY: info and sym are valid for writes; RTLD_DL_SYMENT makes extra_info an
    // `ElfW(Sym) **`. A return address points after its call: look up the byte before it.
    let ok = unsafe {
        libc::dladdr1(
            (addr - 1) as *const libc::c_void,
            &mut info,
            &mut sym as *mut *const libc::Elf64_Sym as *mut *mut libc::c_void,
            RTLD_DL_SYMENT,
        )
    };
    if ok == 0 || info.dli_sname.is_null() || sym.is_null() {
        return 0;
    }
    // SAFETY: dladdr1 filled sym with a pointer into the object's dynamic symbol table.
    let size = unsafe { (*sym).st_size };
    let base = info.dli_saddr as u64;
    if addr - 1 < base || addr > base.wrapping_add(size) {
        // The nearest exported symbol does not contain the address: an internal function.
        return 0;
    }
    // SAFETY: dli_sname is a NUL-terminated string of the loaded object.
    name_class(unsafe { crate::core::sys::cstr(info.dli_sname) })
}

#[cfg(test)]
fn lookup(_addr: u64) -> u8 {
    0
}

/// The class of an exported function from its (mangled) name.
pub fn name_class(name: &[u8]) -> u8 {
    if name == b"JVM_Sleep" || name == b"JVM_MonitorWait" {
        JVM_ENTRY | JVM_WAIT
    } else if name.starts_with(b"JVM_") {
        JVM_ENTRY
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_objects_are_recognised_by_name() {
        assert_eq!(kind_of(b"/usr/lib/jvm/java-17/lib/server/libjvm.so"), JVM);
        assert_eq!(kind_of(b"/usr/bin/node"), NODE);
        assert_eq!(kind_of(b"/usr/lib/x86_64-linux-gnu/libnode.so.108"), NODE);
        assert_eq!(kind_of(b"/usr/bin/python3"), PYTHON);
        assert_eq!(kind_of(b"/usr/lib/libpython3.11.so.1.0"), PYTHON);
        assert_eq!(kind_of(b"/usr/lib/libjvm.so.bak"), 0);
        assert_eq!(name_class(b"JVM_NanoTime"), JVM_ENTRY);
        assert_eq!(name_class(b"JVM_Sleep"), JVM_ENTRY | JVM_WAIT);
        assert_eq!(name_class(b"JVM_MonitorWait"), JVM_ENTRY | JVM_WAIT);
        assert_eq!(name_class(b"uv_run"), 0);
    }

    /// The registered objects are process-wide: tests that register some take turns.
    static OBJECTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn reads_outside_runtime_objects_tick() {
        let _turn = OBJECTS.lock().unwrap_or_else(|e| e.into_inner());
        reset();
        assert!(!bookkeeping(0x1000, 0, false));
        // SAFETY: all-zero is a valid dl_phdr_info (no program headers).
        let info: libc::dl_phdr_info = unsafe { core::mem::zeroed() };
        note_object(
            b"/opt/jdk/lib/server/libjvm.so",
            0x10_0000,
            0x20_0000,
            &info,
        );
        note_object(
            b"/opt/jdk/lib/server/libjvm.so",
            0x10_0000,
            0x20_0000,
            &info,
        );
        assert_eq!(N_OBJECTS.load(Relaxed), 1);
        assert!(!bookkeeping(0x30_0000, 0, false));
        // A read from libjvm whose caller's caller is unknown (no frame pointer): the program's.
        assert!(!bookkeeping(0x15_0000, 0, false));
        // A read from libjvm called from inside libjvm: bookkeeping. The hook's frame is
        // stack[0..2] (saved rbp, return address), its caller's frame stack[2..4].
        let mut stack = [0u64; 4];
        stack[3] = 0x15_1234;
        stack[0] = stack.as_ptr() as u64 + 16;
        assert!(bookkeeping(0x15_0000, stack.as_ptr() as u64, false));
        // Called from outside (compiled Java code): the program's.
        stack[3] = 0x40_0000;
        assert!(!bookkeeping(0x15_0001, stack.as_ptr() as u64, false));
        reset();
    }

    /// A frame-pointer chain on a fake stack: frame `i` is `stack[2i..2i + 2]` (saved frame
    /// pointer, return address); `rets[i]` is the return address of frame `i + 1`.
    fn chain(stack: &mut [u64; 32], rets: &[u64]) -> u64 {
        let base = stack.as_ptr() as u64;
        for (i, &r) in rets.iter().enumerate() {
            stack[2 * i] = base + 16 * (i as u64 + 1);
            stack[2 * i + 3] = r;
        }
        base
    }

    #[test]
    fn hotspot_waits_are_the_programs_only_when_java_code_is_near() {
        let _turn = OBJECTS.lock().unwrap_or_else(|e| e.into_inner());
        reset();
        // SAFETY: all-zero is a valid dl_phdr_info (no program headers).
        let info: libc::dl_phdr_info = unsafe { core::mem::zeroed() };
        note_object(b"/jdk/lib/server/libjvm.so", 0x10_0000, 0x20_0000, &info);
        let mut stack = [0u64; 32];
        // Not libjvm: not HotSpot's.
        assert_eq!(jvm_wait(0x30_0000, 0), None);
        // Parker::park <- Unsafe_Park <- Java code: LockSupport.parkNanos, the program's.
        let fp = chain(&mut stack, &[0x15_0000, 0x40_0000]);
        assert_eq!(jvm_wait(0x15_0010, fp), Some(true));
        // PlatformEvent::park <- ObjectMonitor::EnterI <- enter <- ObjectSynchronizer::enter
        // <- SharedRuntime <- Java code: a contended monitor's recheck, the VM's own.
        let mut stack = [0u64; 32];
        let fp = chain(
            &mut stack,
            &[0x15_0000, 0x15_1000, 0x15_2000, 0x15_3000, 0x40_0000],
        );
        assert_eq!(jvm_wait(0x15_0010, fp), Some(false));
        // A VM thread's monitor, deep inside libjvm and then libc: the VM's own.
        let mut stack = [0u64; 32];
        let fp = chain(&mut stack, &[0x15_0000; 12]);
        assert_eq!(jvm_wait(0x15_0010, fp), Some(false));
        // No frame pointer to follow: the VM's own.
        assert_eq!(jvm_wait(0x15_0010, 0), Some(false));
        reset();
    }
}
