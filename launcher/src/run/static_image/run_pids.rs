//! The run table's pid map, as the supervisor uses it: the virtual pids of a static image's
//! children and threads come from the same run-wide allocator as libseal's
//! ([`seal_abi::vpid_candidates`], one compare-and-swap per candidate on `real_of`), and are
//! registered both ways (`real_of`, `vpid_of`), so that a dynamic process of the run that
//! `kill`s or `waitpid`s the pid it was shown reaches the real process, and an image the
//! child execs (libseal's `on_start`) keeps the number.
//!
//! Mapped at the first child or thread that needs a number (most images have none). Each page
//! is backed with `MADV_POPULATE_WRITE` before it is touched: the file is sparse, and a full
//! file system is then a `None` (the pid stays real), never a `SIGBUS` in the supervisor.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, Ordering::*};

use seal_abi::supervised::go_sys::LEFT;
use seal_abi::{child_lineage, RunTable, KIND_THREAD, TABLE_VPID_MIN, VPID_LIMIT};

use super::page::PAGE;

/// The run table, mapped shared.
pub struct RunPids {
    base: *mut u8,
    len: usize,
    pid_max: usize,
    /// Pages backed so far.
    backed: HashSet<usize>,
}

// SAFETY: a shared mapping of our own, used by one thread at a time (the supervisor's): moved
// once, from where the root's supervisor opens it ahead (`AHEAD`) to where it uses it.
unsafe impl Send for RunPids {}

/// The run table a supervisor opened while it waited ([`RunPids::open_ahead`]), with the run
/// directory it is of, the numbers it claimed for the root's first new threads (0: none) and
/// the root's real parent (0: not the root's supervisor).
type Ahead = (std::path::PathBuf, RunPids, [i32; LEFT], i32);
static AHEAD: std::sync::Mutex<Option<Ahead>> = std::sync::Mutex::new(None);

/// Has descriptor `fd` something to read (the root's request), now?
pub(super) fn readable(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd we own; a zero timeout.
    unsafe { libc::poll(&mut p, 1, 0) != 0 }
}

/// The session and process group of process `pid`.
pub fn session_and_group(pid: i32) -> (i32, i32) {
    // SAFETY: getsid and getpgid take an integer and touch no memory.
    unsafe { (libc::getsid(pid), libc::getpgid(pid)) }
}

impl RunPids {
    /// Maps the run table of `run_dir` in a supervisor's idle time (the root's, before the
    /// root's request; a spare's, before its connection), for [`RunPids::take_ahead`].
    ///
    /// `root`: the root's supervisor's request descriptor. The root's supervisor also backs
    /// the pages the root's identity registers at its exec stop (each was a
    /// `MADV_POPULATE_WRITE` there, ~3–5 µs): its own number's and the launcher's (and the
    /// session's and group's, one page), and the reverse entries of the launcher, this
    /// process's parent (the root's too), and of its session's and group's leaders; the
    /// launcher's page is most often the root's own and its children's (the pids the kernel
    /// gives next). Not every number's pages: backing them all (96 pages, ~0.25 ms of
    /// processor time) outlasted the wait and ran beside the launcher's start (docs/design.md,
    /// "The root's supervisor's idle time"). And it claims the numbers of the root's first
    /// [`LEFT`] new threads (keyed by the root's lineage, which is always
    /// [`seal_abi::ROOT_LINEAGE`], and their place): a Go root's exec stop leaves them in its
    /// table (`serve/go_sys.rs`), where claiming them cost ~55 µs of the supervisor's time on
    /// the image's path (the image waits on its next call). One at a time until the request
    /// is readable; the rest are claimed at the exec stop, so the numbers are the same.
    pub fn open_ahead(run_dir: &Path, root: Option<i32>) {
        let Some(mut t) = RunPids::open(run_dir) else {
            return;
        };
        let (left, parent) = root.map_or(([0; LEFT], 0), |fd| t.root_ahead(fd));
        if let Ok(mut a) = AHEAD.lock() {
            *a = Some((run_dir.to_path_buf(), t, left, parent));
        }
    }

    /// The root's supervisor's share of [`RunPids::open_ahead`], until request descriptor
    /// `fd` is readable: the numbers claimed for the root's new threads (a prefix; 0: none),
    /// and the root's real parent: the launcher, this process's parent too, registered now
    /// with the leaders of its session and group, as the root's exec stop would (`ident`,
    /// which then finds them; its `/proc` read of the root's parent was ~10 µs there).
    fn root_ahead(&mut self, fd: i32) -> ([i32; LEFT], i32) {
        for v in [seal_abi::ROOT_VPID, TABLE_VPID_MIN] {
            let _ = self.real_of(v);
            let _ = self.wait_clock_of(v);
        }
        // SAFETY: getppid takes no arguments.
        let parent = unsafe { libc::getppid() };
        let (sid, pgid) = session_and_group(parent);
        for real in [parent, sid, pgid] {
            let _ = self.vpid_of(real);
        }
        self.register_outside(parent, sid, pgid);
        let mut left = [0i32; LEFT];
        for (k, v) in left.iter_mut().enumerate() {
            if readable(fd) {
                break;
            }
            let lineage = child_lineage(seal_abi::ROOT_LINEAGE, KIND_THREAD, k as u64);
            match self.allocate(lineage) {
                Some(n) => *v = n,
                None => break,
            }
        }
        (left, parent)
    }

    /// Registers the launcher (`launcher`, a static root's real parent) and the leaders of its
    /// session `sid` and group `pgid` outside the run, as libseal does at a dynamic root's
    /// start (the launcher leads the root's group when started from a job-control shell).
    pub fn register_outside(&mut self, launcher: i32, sid: i32, pgid: i32) {
        let outside = seal_abi::outside_leaders(launcher, sid, pgid);
        for (v, real) in [(seal_abi::LAUNCHER_VPID, launcher)]
            .into_iter()
            .chain(outside)
        {
            if real > 0 && self.virt(real).is_none() {
                self.register(v, real);
            }
        }
    }

    /// The run table [`RunPids::open_ahead`] opened for `run_dir`, if it did, and the numbers
    /// it claimed.
    pub fn take_ahead(run_dir: &Path) -> Option<(RunPids, [i32; LEFT], i32)> {
        let mut a = AHEAD.lock().ok()?;
        match a.take() {
            Some((dir, t, left, parent)) if dir == run_dir => Some((t, left, parent)),
            _ => None,
        }
    }

    /// Maps the run table of the run in `run_dir`; `None` without one.
    pub fn open(run_dir: &Path) -> Option<RunPids> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(run_dir.join(seal_abi::RUN_TABLE_NAME))
            .ok()?;
        let mut head = [0u8; 16];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut head, 8).ok()?;
        let pid_max = u32::from_le_bytes(head[4..8].try_into().ok()?) as usize;
        let len = RunTable::file_size(pid_max);
        let base = super::page::map_shared_len(&file, len, true)?.cast::<u8>();
        Some(RunPids {
            base,
            len,
            pid_max,
            backed: HashSet::new(),
        })
    }

    /// Claims the next census slot number (`RunTable::census_next`, with the atomic add
    /// libseal and `census::take_slot` use) through this mapping: the number and the table's
    /// `pid_max`, `None` when the table is full. An image's exec stop has this mapping
    /// already (its identity is registered in it), where `take_slot` mapped the table's first
    /// page again and unmapped it: ~20 µs of every static image's start-up.
    pub fn take_census_slot(&mut self) -> Option<(usize, usize)> {
        use std::mem::offset_of;
        // SAFETY: the table's first page, which the launcher wrote (no hole), mapped shared
        // for as long as `self`.
        unsafe {
            let next = &*(self.base.add(offset_of!(RunTable, census_next)) as *const AtomicU32);
            let cap = *(self.base.add(offset_of!(RunTable, census_cap)) as *const u32);
            let k = next.fetch_add(1, AcqRel);
            (k < cap).then_some((k as usize, self.pid_max))
        }
    }

    /// Backs the page of the `size` bytes at `off` (false: no room, or outside the table).
    fn back(&mut self, off: usize, size: usize) -> bool {
        if off + size > self.len {
            return false;
        }
        let page = off / PAGE;
        if self.backed.contains(&page) {
            return true;
        }
        // SAFETY: one page of our own shared mapping, populated for writing.
        let ok = unsafe {
            libc::madvise(
                self.base.add(page * PAGE).cast(),
                PAGE,
                libc::MADV_POPULATE_WRITE,
            )
        } == 0;
        if ok {
            self.backed.insert(page);
        }
        ok
    }

    /// The atomic at byte offset `off`, backed first.
    fn at<T>(&mut self, off: usize) -> Option<&T> {
        // SAFETY: `off` is inside the mapping (checked by `back`), aligned as the layout's
        // arrays are, and the mapping lives as long as `self`.
        self.back(off, std::mem::size_of::<T>())
            .then(|| unsafe { &*(self.base.add(off) as *const T) })
    }

    fn real_of(&mut self, v: i32) -> Option<&AtomicI32> {
        if v < TABLE_VPID_MIN || v as usize >= VPID_LIMIT {
            return None;
        }
        self.at(std::mem::offset_of!(RunTable, real_of) + v as usize * 4)
    }

    fn vpid_of(&mut self, real: i32) -> Option<&AtomicI32> {
        if real <= 0 || real as usize >= self.pid_max {
            return None;
        }
        self.at(RunTable::REAL_MAP_OFFSET + real as usize * 4)
    }

    /// Claims the first free virtual pid of `lineage`'s candidates (as libseal's allocator
    /// does), reserved until [`RunPids::register`]; `None` when none is left or the table has
    /// no room.
    pub fn allocate(&mut self, lineage: u64) -> Option<i32> {
        seal_abi::vpid_candidates(lineage).find(|&v| {
            let clock = std::mem::offset_of!(RunTable, wait_clock) + v as usize * 8;
            let claimed = self
                .real_of(v)
                .is_some_and(|s| s.compare_exchange(0, -1, AcqRel, Relaxed).is_ok());
            if claimed {
                // A number's last holder's wait clock is not this process's.
                if let Some(c) = self.at::<AtomicI64>(clock) {
                    c.store(0, Release);
                }
            }
            claimed
        })
    }

    /// Leaves where the next image of process `real` (virtual pid `v`) starts: a dynamic
    /// image its static image execs finds it at its start-up ([`seal_abi::ExecStart`]), in
    /// place of the environment's values. Whether it was left.
    pub fn leave_exec_start(&mut self, v: i32, real: i32, start: (i64, u64, u64)) -> bool {
        if v < TABLE_VPID_MIN || v as usize >= VPID_LIMIT || real <= 0 {
            return false;
        }
        let off = std::mem::offset_of!(RunTable, exec_start)
            + v as usize * std::mem::size_of::<seal_abi::ExecStart>();
        let Some(e) = self.at::<seal_abi::ExecStart>(off) else {
            return false;
        };
        e.clock.store(start.0, Relaxed);
        e.lineage.store(start.1, Relaxed);
        e.children.store(start.2, Relaxed);
        e.real.store(real, Release);
        let flags = std::mem::offset_of!(RunTable, flags);
        if let Some(f) = self.at::<AtomicU32>(flags) {
            f.fetch_or(seal_abi::run_flags::EXEC_STARTS, AcqRel);
        }
        true
    }

    /// Gives back a number whose process was never created.
    pub fn release(&mut self, v: i32) {
        if let Some(s) = self.real_of(v) {
            let _ = s.compare_exchange(-1, 0, AcqRel, Relaxed);
        }
    }

    /// Records that virtual pid (or tid) `v` is real pid `real`.
    pub fn register(&mut self, v: i32, real: i32) {
        if let Some(s) = self.real_of(v) {
            s.store(real, Release);
        }
        if let Some(s) = self.vpid_of(real) {
            s.store(v, Release);
        }
    }

    /// Records the wait status of reaped virtual pid `v` (the census's exit line).
    pub fn set_status(&mut self, v: i32, status: i32) {
        if v < TABLE_VPID_MIN || v as usize >= VPID_LIMIT {
            return;
        }
        let off = std::mem::offset_of!(RunTable, status_of) + v as usize * 4;
        if let Some(s) = self.at::<AtomicI32>(off) {
            s.store(status.wrapping_add(1), Release);
        }
    }

    fn wait_clock_of(&mut self, v: i32) -> Option<&AtomicI64> {
        if v < TABLE_VPID_MIN || v as usize >= VPID_LIMIT {
            return None;
        }
        self.at(std::mem::offset_of!(RunTable, wait_clock) + v as usize * 8)
    }

    /// Virtual pid `v`'s wait clock: the highest logical clock its waits (and the children it
    /// reaped) took it to, 0 when none did.
    pub fn wait_clock(&mut self, v: i32) -> i64 {
        self.wait_clock_of(v).map_or(0, |c| c.load(Acquire))
    }

    /// Raises virtual pid `v`'s wait clock to `l` (never lowers it).
    pub fn raise_wait_clock(&mut self, v: i32, l: i64) {
        if let Some(c) = self.wait_clock_of(v) {
            c.fetch_max(l, AcqRel);
        }
    }

    /// The real pid of virtual pid `v`, if it is a live entry of the run.
    pub fn real(&mut self, v: i32) -> Option<i32> {
        let r = self.real_of(v)?.load(Acquire);
        (r > 0).then_some(r)
    }

    /// The virtual pid of real pid `real`, if a process of the run registered it.
    pub fn virt(&mut self, real: i32) -> Option<i32> {
        let v = self.vpid_of(real)?.load(Acquire);
        (v > 0 && self.real(v) == Some(real)).then_some(v)
    }
}

impl Drop for RunPids {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unused past here.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
