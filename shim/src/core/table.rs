//! The run-wide pid table (`$LIBSEAL_RUN_DIR/run.table`, layout [`seal_abi::RunTable`]): which
//! virtual pid belongs to which real pid, in both directions, and the wait status of each
//! reaped process (the census reports it as the process's exit).
//!
//! Every sealed process maps the file `MAP_SHARED` once per image; a fork child inherits the
//! mapping. All updates are single atomic stores or CASes: no locks, safe in a fork or vfork
//! child and in signal handlers.

use core::sync::atomic::{AtomicI32, AtomicI64, AtomicPtr, AtomicUsize, Ordering::*};

use seal_abi::{RunTable, TABLE_VPID_MIN, VPID_LIMIT};

use crate::core::{backing::Backing, config, sys};

/// A view of the three arrays of a run table.
#[derive(Clone, Copy)]
pub struct Table<'a> {
    /// `real_of[vpid]`: 0 free, -1 reserved (allocated, child not started yet), else real pid.
    pub real_of: &'a [AtomicI32],
    /// `status_of[vpid]`: wait status + 1 once a sealed parent reaped it.
    pub status_of: &'a [AtomicI32],
    /// `wait_clock[vpid]`: highest clock a wait of the process reached (0 none).
    pub wait_clock: &'a [AtomicI64],
    /// `vpid_of[real pid]`: 0 unknown, else the virtual pid or tid.
    pub vpid_of: &'a [AtomicI32],
}

impl<'a> Table<'a> {
    /// Claims a free virtual pid for `lineage`: the first free `vpid_candidate(lineage, i)`,
    /// then (when the space is crowded) the next free number after the first candidate
    /// ([`seal_abi::vpid_candidates`]). Returns `None` when every virtual pid of the run is
    /// taken.
    pub fn allocate(&self, lineage: u64) -> Option<i32> {
        seal_abi::vpid_candidates(lineage).find(|&v| self.claim(v))
    }

    fn claim(&self, v: i32) -> bool {
        let (slot, clock) = (&self.real_of[v as usize], &self.wait_clock[v as usize]);
        if !backed(slot) || !backed(clock) {
            return false;
        }
        let ok = slot.compare_exchange(0, -1, AcqRel, Relaxed).is_ok();
        if ok {
            // A vpid can be handed out again: forget the wait clock of its last holder
            // (here, before the child exists, so only the child's own waits count).
            clock.store(0, Release);
        }
        ok
    }

    /// Gives back a virtual pid whose process was never created (the spawn failed).
    pub fn release(&self, v: i32) {
        if let Some(slot) = self.slot(v) {
            let _ = slot.compare_exchange(-1, 0, AcqRel, Relaxed);
        }
    }

    /// Records that virtual pid (or tid) `v` is real pid `real`.
    pub fn register(&self, v: i32, real: i32) {
        if let Some(slot) = self.slot(v) {
            slot.store(real, Release);
        }
        if let Some(slot) = self.vpid_of.get(real as usize).filter(|_| real > 0) {
            if backed(slot) {
                slot.store(v, Release);
            }
        }
    }

    /// The real pid of virtual pid `v`, if `v` is a live entry of this run.
    pub fn real(&self, v: i32) -> Option<i32> {
        let r = self.slot(v)?.load(Acquire);
        (r > 0).then_some(r)
    }

    /// Who holds `v` right now: 0 free, -1 reserved, else a real pid.
    pub fn holder(&self, v: i32) -> i32 {
        self.slot(v).map(|s| s.load(Acquire)).unwrap_or(0)
    }

    /// The virtual pid of real pid `real`, if a process of this run registered it.
    pub fn virt(&self, real: i32) -> Option<i32> {
        if real <= 0 {
            return None;
        }
        let slot = self.vpid_of.get(real as usize)?;
        if !backed(slot) {
            return None;
        }
        let v = slot.load(Acquire);
        // Only trust the entry if it still points back (the real pid may have been reused).
        (v > 0 && self.real(v) == Some(real)).then_some(v)
    }

    /// Records the wait status of a reaped virtual pid.
    pub fn set_status(&self, v: i32, status: i32) {
        if v >= TABLE_VPID_MIN && (v as usize) < VPID_LIMIT {
            let slot = &self.status_of[v as usize];
            if backed(slot) {
                slot.store(status.wrapping_add(1), Release);
            }
        }
    }

    /// Raises the wait clock of virtual pid `v` to `clock` (never lowers it).
    pub fn raise_wait_clock(&self, v: i32, clock: i64) {
        if v >= TABLE_VPID_MIN && (v as usize) < VPID_LIMIT {
            let slot = &self.wait_clock[v as usize];
            if backed(slot) {
                slot.fetch_max(clock, AcqRel);
            }
        }
    }

    /// The wait clock of virtual pid `v` (0 none).
    pub fn wait_clock(&self, v: i32) -> i64 {
        if v >= TABLE_VPID_MIN && (v as usize) < VPID_LIMIT && backed(&self.wait_clock[v as usize])
        {
            self.wait_clock[v as usize].load(Acquire)
        } else {
            0
        }
    }

    fn slot(&self, v: i32) -> Option<&'a AtomicI32> {
        if v >= TABLE_VPID_MIN && (v as usize) < VPID_LIMIT && backed(&self.real_of[v as usize]) {
            Some(&self.real_of[v as usize])
        } else {
            None
        }
    }
}

/// Pages of the mapped run table this process has backed ([`crate::core::backing`]): the fixed
/// arrays and the `vpid_of` map (up to the kernel's largest `pid_max`, 2²²).
#[link_section = ".data.seal_hot"]
static BACKED: Backing<{ (RunTable::REAL_MAP_OFFSET + 4 * (1 << 22)).div_ceil(4096 * 64) }> =
    Backing::new();

/// The table is sparse, and on tmpfs even a read of a page never touched allocates it: back
/// an entry's page before any access, so a full file system is a reported error (`false`)
/// rather than a SIGBUS. Memory outside the mapping (unit tests' tables) needs nothing.
fn backed<T>(x: &T) -> bool {
    let base = BASE.load(Relaxed);
    let off = (x as *const T as usize).wrapping_sub(base as usize);
    if base.is_null() || off >= RunTable::file_size(PID_MAX.load(Relaxed)) {
        return true;
    }
    if BACKED.back(base, off, core::mem::size_of::<T>()) {
        return true;
    }
    no_room();
    false
}

/// Backs a whole region of the table once per process image (`done` remembers it).
fn backed_region<T>(x: &T, done: &core::sync::atomic::AtomicBool) -> bool {
    if done.load(Relaxed) {
        return true;
    }
    let ok = backed(x);
    done.store(ok, Relaxed);
    ok
}

/// The run table's file system is full: this pid stays untranslated for kill/wait by real pid.
#[cold]
fn no_room() {
    use core::sync::atomic::AtomicBool;
    static SAID: AtomicBool = AtomicBool::new(false);
    crate::core::census::record_unsealed(
        seal_abi::unsealed::PID_SPACE_FULL,
        b"run table file system full: a real pid is not mapped back to its virtual pid",
    );
    if !SAID.swap(true, Relaxed) {
        sys::warn(b"the run directory's file system is full: some real pids are not mapped back to virtual pids");
    }
}

#[link_section = ".data.seal_hot"]
static BASE: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
#[link_section = ".data.seal_hot"]
static PID_MAX: AtomicUsize = AtomicUsize::new(0);

/// The mapped run table of this run, if any.
#[inline]
pub fn get() -> Option<Table<'static>> {
    let p = BASE.load(Acquire);
    if p.is_null() {
        return None;
    }
    let pid_max = PID_MAX.load(Relaxed);
    // SAFETY: BASE is a live MAP_SHARED mapping of RunTable::file_size(pid_max) bytes, never
    // unmapped while published; the arrays are AtomicI32 at the offsets of the layout.
    unsafe {
        let rt = &*(p as *const RunTable);
        let map = core::slice::from_raw_parts(
            p.add(RunTable::REAL_MAP_OFFSET) as *const AtomicI32,
            pid_max,
        );
        Some(Table {
            real_of: &rt.real_of,
            status_of: &rt.status_of,
            wait_clock: &rt.wait_clock,
            vpid_of: map,
        })
    }
}

/// The run-wide causal clocks of channels ([`seal_abi::causal`]), if the run table is mapped.
#[inline]
pub fn channels() -> Option<&'static [seal_abi::causal::Channel]> {
    let p = BASE.load(Acquire);
    // SAFETY: as in `get`: a live mapping that starts with a RunTable.
    #[link_section = ".data.seal_hot"]
    static DONE: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
    // SAFETY: as in `get`: a live mapping that starts with a RunTable.
    let chans = (!p.is_null()).then(|| unsafe { &(*(p as *const RunTable)).channels })?;
    backed_region(chans, &DONE).then_some(&chans[..])
}

/// Used by [`world_or_local`] while the run table is not mapped (then a setter's change holds
/// in this process only).
static LOCAL_WORLD: seal_abi::World = seal_abi::World::unchanged();

/// The run table's [`seal_abi::World`] once mapped, else [`LOCAL_WORLD`]: never null, so the
/// hot clock read finds the run's shifts with one load.
#[link_section = ".data.seal_hot"]
static WORLD: AtomicPtr<seal_abi::World> =
    AtomicPtr::new(&LOCAL_WORLD as *const seal_abi::World as *mut seal_abi::World);

/// The run-wide state the setters change: the run table's, or this process's own while no
/// run table is mapped.
#[inline(always)]
pub fn world_or_local() -> &'static seal_abi::World {
    let p: *const seal_abi::World;
    // SAFETY: an 8-byte load of WORLD, an aligned AtomicPtr (an acquire load is a plain `mov`
    // on x86_64), RIP-relative through `sym` (WORLD is libseal's own: no GOT entry read).
    unsafe {
        core::arch::asm!("mov {p}, qword ptr [rip + {s}]", p = out(reg) p, s = sym WORLD,
                         options(nostack, readonly, preserves_flags));
    }
    // SAFETY: WORLD points to LOCAL_WORLD or into the run table's mapping, which is never
    // unmapped once published.
    unsafe { &*p }
}

/// The run-wide state the setters change ([`seal_abi::World`]), if the run table is mapped.
#[inline(always)]
pub fn world() -> Option<&'static seal_abi::World> {
    let p = BASE.load(Acquire);
    // SAFETY: as in `get`: a live mapping that starts with a RunTable.
    (!p.is_null()).then(|| unsafe { &(*(p as *const RunTable)).world })
}

/// The run's `--warp` waiter board ([`seal_abi::WaiterBoard`]), if the run table is mapped.
#[inline]
pub fn waiters() -> Option<&'static seal_abi::WaiterBoard> {
    let p = BASE.load(Acquire);
    // SAFETY: as in `get`: a live mapping that starts with a RunTable.
    #[link_section = ".data.seal_hot"]
    static DONE: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
    // SAFETY: as in `get`: a live mapping that starts with a RunTable.
    let w = (!p.is_null()).then(|| unsafe { &(*(p as *const RunTable)).waiters })?;
    backed_region(w, &DONE).then_some(w)
}

/// The run's [`seal_abi::run_flags`]; all set when no table is mapped (nothing known).
pub fn run_flags() -> u32 {
    header().map_or(u32::MAX, |rt| rt.flags.load(Acquire))
}

/// Sets run flag `bit` for every process of the run from now on.
pub fn set_run_flag(bit: u32) {
    if let Some(rt) = header() {
        rt.flags.fetch_or(bit, Release);
    }
}

/// Where this image starts, when a static image's supervisor left it for real pid `real`
/// under virtual pid `v` at its `execve` ([`seal_abi::ExecStart`]): `(clock, lineage,
/// children)`, taken once (the entry is cleared). Only runs where a supervisor left one
/// ([`seal_abi::run_flags::EXEC_STARTS`]) look: one load of the header otherwise.
pub fn take_exec_start(v: i32, real: i32) -> Option<(i64, u64, u64)> {
    let rt = header()?;
    if rt.flags.load(Acquire) & seal_abi::run_flags::EXEC_STARTS == 0 {
        return None;
    }
    if v < TABLE_VPID_MIN || v as usize >= VPID_LIMIT || real <= 0 {
        return None;
    }
    let e = &rt.exec_start[v as usize];
    if !backed(e) || e.real.load(Acquire) != real {
        return None;
    }
    let start = (
        e.clock.load(Relaxed),
        e.lineage.load(Relaxed),
        e.children.load(Relaxed),
    );
    e.real.store(0, Release);
    Some(start)
}

/// The mapped run table, for its first page (header, world, program names), which [`map`]
/// backed.
fn header() -> Option<&'static RunTable> {
    let p = BASE.load(Acquire);
    // SAFETY: as in `get`: a live mapping that starts with a RunTable.
    (!p.is_null()).then(|| unsafe { &*(p as *const RunTable) })
}

/// This image's program, as `/proc/self/exe` names it, into `out`; its length (0 when
/// unreadable). When the parent's exec hook handed a key for the file name this image was
/// started under (`AT_EXECFN`), the run's program names ([`seal_abi::ExeNames`]) answer
/// without the link: the first look into `/proc/self` of a new process costs it 25–30 µs.
/// The first image of a program under a name reads the link and fills the entry.
pub fn exe_path(out: &mut [u8]) -> usize {
    let key = config::EXE_KEY.load(Relaxed);
    let names = (key != 0 && config::EXE_NAME.load(Relaxed) == execfn_hash())
        .then(header)
        .flatten()
        .map(|rt| &rt.exe_names);
    if let Some(n) = names.and_then(|t| t.lookup(key, out)) {
        return n;
    }
    let n = sys::readlink(b"/proc/self/exe\0", out);
    // A program deleted since (`… (deleted)`) is not a name for the next image of that key.
    if let Some(t) = names.filter(|_| !out[..n].ends_with(b" (deleted)")) {
        t.insert(key, &out[..n]);
    }
    n
}

/// [`seal_abi::name_hash`] of the file name the kernel started this image under.
fn execfn_hash() -> u64 {
    // SAFETY: getauxval has no preconditions; AT_EXECFN is a NUL-terminated string on the
    // initial stack, or 0.
    unsafe {
        let p = libc::getauxval(libc::AT_EXECFN) as *const libc::c_char;
        if p.is_null() {
            return 0;
        }
        seal_abi::name_hash(sys::cstr(p))
    }
}

/// The run table's descriptor, left open by [`map`] for the image's census slot.
static PENDING_FD: AtomicI32 = AtomicI32::new(-1);

/// Why an image has no census slot.
pub enum NoSlot {
    /// No run table mapped (the run ended, or it could not be mapped: said already).
    NoTable,
    /// Every slot of the run is taken (of how many; true for the first image turned away).
    Full(usize, bool),
    /// The run table file could not be opened again (a fork child's slot): the errno.
    Open(i32),
}

/// Claims the next census slot of the run ([`RunTable::census_offset`]): the run table's
/// descriptor to map it from (the caller closes it) and the slot's offset in the file.
///
/// Each slot is a mapping of its own, not a part of one mapping of the whole (sparse, 0.9 TiB)
/// file: that would save an image one `mmap`, but address space counts against
/// `RLIMIT_AS`, and a sealed program that lowers it (`ulimit -v`, a test harness guarding
/// its memory) could then map nothing at all.
pub fn census_slot() -> Result<(i32, usize), NoSlot> {
    let p = BASE.load(Acquire);
    if p.is_null() {
        return Err(NoSlot::NoTable);
    }
    // SAFETY: BASE is a live mapping that starts with a RunTable (header page backed by map).
    let rt = unsafe { &*(p as *const RunTable) };
    let cap = rt.census_cap as usize;
    let k = rt.census_next.fetch_add(1, AcqRel) as usize;
    if k >= cap {
        return Err(NoSlot::Full(cap, k == cap));
    }
    let mut fd = PENDING_FD.swap(-1, AcqRel);
    if fd < 0 {
        // A fork child: its parent's descriptor was closed after its own slot was mapped.
        let mut path = sys::StackBuf::<4200>::new();
        path.push(config::RUN_DIR.get())
            .push(b"/")
            .push(seal_abi::RUN_TABLE_NAME.as_bytes());
        fd = sys::open(path.as_cstr(), libc::O_RDWR | libc::O_CLOEXEC, 0);
        if fd < 0 {
            return Err(NoSlot::Open(-fd));
        }
    }
    Ok((fd, RunTable::census_offset(PID_MAX.load(Relaxed), k)))
}

/// Maps `$LIBSEAL_RUN_DIR/run.table` (once per image; a fork child keeps its parent's mapping).
pub fn map() -> bool {
    if !BASE.load(Acquire).is_null() {
        return true;
    }
    let mut path = sys::StackBuf::<4200>::new();
    path.push(config::RUN_DIR.get())
        .push(b"/")
        .push(seal_abi::RUN_TABLE_NAME.as_bytes());
    let fd = sys::open(path.as_cstr(), libc::O_RDWR | libc::O_CLOEXEC, 0);
    if fd < 0 {
        return false;
    }
    let mut head = [0u8; 16];
    let n = sys::fill(libc::SYS_pread64, fd, &mut head, [0; 3]);
    let magic = u64::from_le_bytes(head[..8].try_into().unwrap_or([0; 8]));
    let pid_max = u32::from_le_bytes(head[12..16].try_into().unwrap_or([0; 4])) as usize;
    if n != 16 || magic != seal_abi::RUN_MAGIC || pid_max == 0 {
        sys::close(fd);
        return false;
    }
    let p = sys::mmap_shared(fd, RunTable::file_size(pid_max));
    if p.is_null() {
        sys::close(fd);
        return false;
    }
    // Kept for the census slot this image claims next (`census_slot`), which saves it an open.
    let stale = PENDING_FD.swap(fd, AcqRel);
    if stale >= 0 {
        sys::close(stale);
    }
    // The header and the setters' world are read by every clock read: backed now. The rest
    // is backed page by page as it is first used (`backed`).
    let r = sys::populate(p, core::mem::offset_of!(RunTable, real_of));
    if r < 0 && r != -(libc::EINVAL as i64) {
        // SAFETY: our fresh mapping, not yet published.
        unsafe { sys::munmap(p, RunTable::file_size(pid_max)) };
        let fd = PENDING_FD.swap(-1, AcqRel);
        if fd >= 0 {
            sys::close(fd);
        }
        let mut m = sys::StackBuf::<200>::new();
        m.push(b"cannot map the run table (")
            .push(sys::errno_name(-r as i32))
            .push(b")");
        sys::warn(m.as_bytes());
        return false;
    }
    PID_MAX.store(pid_max, Relaxed);
    BASE.store(p, Release);
    // SAFETY: a live mapping that starts with a RunTable (as in `world`).
    let world = unsafe { core::ptr::addr_of!((*(p as *const RunTable)).world) };
    WORLD.store(world as *mut seal_abi::World, Release);
    true
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use seal_abi::VPID_MIN;

    /// An in-memory table for unit tests.
    pub struct Owned {
        pub real_of: Vec<AtomicI32>,
        pub status_of: Vec<AtomicI32>,
        pub wait_clock: Vec<AtomicI64>,
        pub vpid_of: Vec<AtomicI32>,
    }

    impl Owned {
        pub fn new() -> Owned {
            let v = |n: usize| (0..n).map(|_| AtomicI32::new(0)).collect::<Vec<_>>();
            Owned {
                real_of: v(VPID_LIMIT),
                status_of: v(VPID_LIMIT),
                wait_clock: (0..VPID_LIMIT).map(|_| AtomicI64::new(0)).collect(),
                vpid_of: v(VPID_LIMIT),
            }
        }
        pub fn table(&self) -> Table<'_> {
            Table {
                real_of: &self.real_of,
                status_of: &self.status_of,
                wait_clock: &self.wait_clock,
                vpid_of: &self.vpid_of,
            }
        }
    }

    #[test]
    fn allocation_is_deterministic_and_unique() {
        let a = Owned::new();
        let b = Owned::new();
        let mut seen = std::collections::HashSet::new();
        for i in 0..2000u64 {
            let l = seal_abi::child_lineage(seal_abi::ROOT_LINEAGE, seal_abi::KIND_PROCESS, i);
            let va = a.table().allocate(l).unwrap();
            let vb = b.table().allocate(l).unwrap();
            assert_eq!(va, vb);
            assert!(seen.insert(va), "duplicate vpid {va}");
            assert!(va > VPID_MIN && (va as usize) < VPID_LIMIT);
        }
    }

    #[test]
    fn same_lineage_twice_gets_another_number() {
        let a = Owned::new();
        let t = a.table();
        let v1 = t.allocate(42).unwrap();
        let v2 = t.allocate(42).unwrap();
        assert_ne!(v1, v2);
        t.release(v2);
        assert_eq!(t.allocate(42), Some(v2));
    }

    #[test]
    fn wait_clock_only_rises_and_is_forgotten_when_the_vpid_is_handed_out_again() {
        let a = Owned::new();
        let t = a.table();
        let v = t.allocate(77).unwrap();
        assert_eq!(t.wait_clock(v), 0);
        t.raise_wait_clock(v, 500);
        t.raise_wait_clock(v, 300);
        assert_eq!(t.wait_clock(v), 500);
        t.register(v, 1234);
        t.set_status(v, 0);
        // The process is gone; its number is free again for someone else.
        a.real_of[v as usize].store(0, Relaxed);
        assert_eq!(t.allocate(77), Some(v));
        assert_eq!(t.wait_clock(v), 0);
    }

    #[test]
    fn full_space_is_reported() {
        let a = Owned::new();
        let t = a.table();
        let n = VPID_LIMIT - VPID_MIN as usize - 1;
        for i in 0..n as u64 {
            assert!(t.allocate(i).is_some());
        }
        assert_eq!(t.allocate(7), None);
    }

    #[test]
    fn translation_both_ways_checks_back_pointer() {
        let a = Owned::new();
        let t = a.table();
        let v = t.allocate(9).unwrap();
        assert_eq!(t.real(v), None, "reserved is not live");
        t.register(v, 4321);
        assert_eq!(t.real(v), Some(4321));
        assert_eq!(t.virt(4321), Some(v));
        // Real pid reused by another process of the run: the old vpid no longer resolves.
        let w = t.allocate(10).unwrap();
        t.register(w, 4321);
        assert_eq!(t.virt(4321), Some(w));
        assert_eq!(t.virt(0), None);
        assert_eq!(t.virt(-5), None);
        assert_eq!(t.real(5), None);
    }
}
