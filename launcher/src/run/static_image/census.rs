//! The census of a supervised image: the supervisor takes a census slot of the run table for
//! each process of the image, as libseal does for a process it loads into, and counts there
//! every call it is sent from the image's own code (system-call level: the caller is the
//! `syscall` instruction, inside the image's C library). The supervisor is the only writer
//! of its slots, so it writes them with `pwrite` (a full file system is then a failed write,
//! never a `SIGBUS`); only the run table's slot counter, shared with every libseal, is taken
//! with an atomic add on a mapping of its first page.

use std::collections::HashMap;
use std::fs::File;
use std::mem::offset_of;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use seal_abi::{census_key, CensusFile, CensusSlot, Fid, ModuleRecord, RunTable};

/// The function each supervised system call is counted as, and its detail byte: the clock id
/// for `clock_gettime`, `CLOCK_REALTIME` for `gettimeofday` and `time`, as libseal counts them.
pub fn fid_of(nr: i64, args: &[u64; 6]) -> Option<(Fid, u8)> {
    Some(match nr {
        libc::SYS_clock_gettime => (Fid::ClockGettime, args[0] as u8),
        libc::SYS_gettimeofday => (Fid::Gettimeofday, 0),
        libc::SYS_time => (Fid::TimeFn, 0),
        libc::SYS_nanosleep => (Fid::Nanosleep, 0),
        libc::SYS_clock_nanosleep => (Fid::ClockNanosleep, 0),
        libc::SYS_clock_settime => (Fid::ClockSettime, 0),
        libc::SYS_settimeofday => (Fid::Settimeofday, 0),
        libc::SYS_adjtimex => (Fid::Adjtimex, 0),
        libc::SYS_clock_adjtime => (Fid::ClockAdjtime, 0),
        libc::SYS_getpid => (Fid::Getpid, 0),
        libc::SYS_getppid => (Fid::Getppid, 0),
        libc::SYS_gettid => (Fid::Gettid, 0),
        libc::SYS_kill => (Fid::Kill, 0),
        libc::SYS_tkill => (Fid::Tkill, 0),
        libc::SYS_tgkill => (Fid::Tgkill, 0),
        libc::SYS_getrandom => (Fid::Getrandom, 0),
        libc::SYS_uname => (Fid::Uname, 0),
        libc::SYS_sethostname => (Fid::Sethostname, 0),
        libc::SYS_setdomainname => (Fid::Setdomainname, 0),
        libc::SYS_sched_getaffinity => (Fid::SchedGetaffinity, 0),
        _ => return None,
    })
}

/// Who a census slot is for.
pub struct Identity<'a> {
    pub vpid: i32,
    pub parent_vpid: i32,
    pub gen: u32,
    /// The real pid (its `/proc/PID/cmdline` gives the arguments).
    pub pid: i32,
    pub exe: &'a Path,
    /// The image's code: the module the callers are named in.
    pub text: &'a [(u64, u64)],
    /// Its load bias (0 for a fixed-address executable).
    pub bias: u64,
}

/// One process's census slot.
pub struct Slot {
    file: File,
    at: u64,
    counts: HashMap<u64, (usize, u64)>,
    /// Modules listed (the image's code, then code of seal's making: [`Slot::add_module`]).
    n_modules: u32,
    /// The names of the modules [`Slot::add_module`] listed.
    names: Vec<String>,
    /// The `unsealed` events written, by detail.
    said: std::collections::HashSet<String>,
    /// Bytes of the slot's text in use.
    text_used: u32,
    /// The slot's first page until [`Slot::commit`] writes it (its header, modules and first
    /// counters: one write, where each field used to be one).
    head: Option<Box<[u8; HEAD]>>,
}

/// The bytes of a slot kept until [`Slot::commit`]: its first page.
const HEAD: usize = 4096;

impl Slot {
    /// Takes the next census slot of the run in `run_dir` (or slot `taken`, with the table's
    /// `pid_max`, when the caller took its number) and makes its header, written by
    /// [`Slot::commit`] (the caller's next counts and modules go into the same write); `None`
    /// when there is no run table or it is full (the calls go uncounted, as libseal's would).
    pub fn open(run_dir: &Path, who: &Identity, taken: Option<(usize, usize)>) -> Option<Slot> {
        let file = open_table(run_dir)?;
        let (k, pid_max) = match taken {
            Some(t) => t,
            None => take_slot(&file)?,
        };
        let at = RunTable::census_offset(pid_max, k) as u64;
        let mut slot = Slot {
            file,
            at,
            counts: HashMap::new(),
            n_modules: 1,
            names: Vec::new(),
            said: Default::default(),
            text_used: 0,
            head: Some(Box::new([0; HEAD])),
        };
        let exe = who.exe.as_os_str().as_encoded_bytes();
        let exe = &exe[..exe.len().min(seal_abi::EXE_BYTES)];
        let argv =
            super::remote::read_proc(&format!("/proc/{}/cmdline", who.pid)).unwrap_or_default();
        let argv = &argv[..argv.len().min(seal_abi::ARGV_BYTES)];
        let text = offset_of!(CensusFile, text) as u64;
        slot.put(text, exe);
        slot.put(text + exe.len() as u64, argv);
        let start = who.text.iter().map(|r| r.0).min().unwrap_or(0);
        let end = who.text.iter().map(|r| r.1).max().unwrap_or(0);
        let m = CensusFile::module_offset(0) as u64;
        slot.put(
            m + offset_of!(ModuleRecord, start) as u64,
            &start.to_le_bytes(),
        );
        slot.put(m + offset_of!(ModuleRecord, end) as u64, &end.to_le_bytes());
        slot.put(
            m + offset_of!(ModuleRecord, bias) as u64,
            &who.bias.to_le_bytes(),
        );
        slot.put(
            m + offset_of!(ModuleRecord, name_off) as u64,
            &0u32.to_le_bytes(),
        );
        let name_len = (exe.len() as u32).to_le_bytes();
        slot.put(m + offset_of!(ModuleRecord, name_len) as u64, &name_len);
        let u32s = [
            (offset_of!(CensusFile, version), seal_abi::LAYOUT_VERSION),
            (offset_of!(CensusFile, vpid), who.vpid as u32),
            (offset_of!(CensusFile, parent_vpid), who.parent_vpid as u32),
            (offset_of!(CensusFile, gen), who.gen),
            (offset_of!(CensusFile, exe_len), exe.len() as u32),
            (offset_of!(CensusFile, argv_len), argv.len() as u32),
            (
                offset_of!(CensusFile, text_used),
                (exe.len() + argv.len()) as u32,
            ),
            (offset_of!(CensusFile, n_modules), 1),
            (offset_of!(CensusFile, ready), 1),
        ];
        for (off, v) in u32s {
            slot.put(off as u64, &v.to_le_bytes());
        }
        slot.text_used = (exe.len() + argv.len()) as u32;
        Some(slot)
    }

    /// Writes what [`Slot::open`] and the calls since made of the slot's first page: all but
    /// the magic in one write, then the magic (a reader takes the slot for a process once the
    /// magic is there).
    pub fn commit(&mut self) {
        let Some(head) = self.head.take() else {
            return;
        };
        self.put(0, &head[..]);
        self.put(
            offset_of!(CensusFile, magic) as u64,
            &seal_abi::CENSUS_MAGIC.to_le_bytes(),
        );
    }

    /// Counts one call of `fid` (with `detail`) made at `ip`.
    pub fn count(&mut self, fid: Fid, detail: u8, ip: u64) {
        let key = census_key(ip, fid, detail);
        let next = self.counts.len();
        if next >= CensusFile::ALL_SLOTS && !self.counts.contains_key(&key) {
            return;
        }
        let (i, n) = self.counts.entry(key).or_insert((next, 0));
        *n += 1;
        let (i, n) = (*i, *n);
        const _: () = assert!(std::mem::size_of::<CensusSlot>() == 16);
        self.write_pair(i, key, n);
    }

    /// Sets the count of `fid` (with `detail`) at `ip` to `n` (counts made elsewhere: a Go
    /// image's reads of its clock page).
    pub fn set(&mut self, fid: Fid, detail: u8, ip: u64, n: u64) {
        let key = census_key(ip, fid, detail);
        let next = self.counts.len();
        if next >= CensusFile::ALL_SLOTS && !self.counts.contains_key(&key) {
            return;
        }
        let (i, count) = self.counts.entry(key).or_insert((next, 0));
        if *count == n {
            return;
        }
        *count = n;
        let i = *i;
        self.write_pair(i, key, n);
    }

    /// Takes a counter of `fid` (with `detail`) at `ip` for counts made by the image itself
    /// (its clock page's code and its entropy code, with atomic adds on a mapping of the run
    /// table): the counter's offset in the run table file. `None` when the slot is full.
    pub fn reserve(&mut self, fid: Fid, detail: u8, ip: u64) -> Option<u64> {
        let key = census_key(ip, fid, detail);
        let next = self.counts.len();
        if next >= CensusFile::ALL_SLOTS || self.counts.contains_key(&key) {
            return None;
        }
        self.counts.insert(key, (next, 0));
        self.write_pair(next, key, 0);
        Some(self.at + CensusFile::slot_offset(next) as u64 + 8)
    }

    /// Lists `lo..hi` as module `name` (after the image's code, module 0), once: code of
    /// seal's making in the image (its clock page's reader, its random numbers' code) that the
    /// census names counts after.
    pub fn add_module(&mut self, name: &str, lo: u64, hi: u64) {
        let k = self.n_modules as usize;
        if self.names.iter().any(|n| n == name) || k >= seal_abi::HEAD_MODULES {
            return;
        }
        let used = self.text_used;
        let name_len = name.len() as u32;
        if used as usize + name.len() > seal_abi::TEXT_BYTES {
            return;
        }
        let m = CensusFile::module_offset(k) as u64;
        self.put(
            offset_of!(CensusFile, text) as u64 + used as u64,
            name.as_bytes(),
        );
        for (off, v) in [
            (offset_of!(ModuleRecord, start), lo),
            (offset_of!(ModuleRecord, end), hi),
            (offset_of!(ModuleRecord, bias), lo),
        ] {
            self.put(m + off as u64, &v.to_le_bytes());
        }
        for (off, v) in [
            (m as usize + offset_of!(ModuleRecord, name_off), used),
            (m as usize + offset_of!(ModuleRecord, name_len), name_len),
            (offset_of!(CensusFile, text_used), used + name_len),
            (offset_of!(CensusFile, n_modules), k as u32 + 1),
        ] {
            self.put(off as u64, &v.to_le_bytes());
        }
        self.names.push(name.to_owned());
        self.n_modules = k as u32 + 1;
        self.text_used = used + name_len;
    }

    fn write_pair(&mut self, i: usize, key: u64, n: u64) {
        let mut pair = [0u8; 16];
        pair[..8].copy_from_slice(&key.to_le_bytes());
        pair[8..].copy_from_slice(&n.to_le_bytes());
        self.put(CensusFile::slot_offset(i) as u64, &pair);
    }

    /// Takes back one count of system call `nr` (with `args`) at `ip` (a call that will be
    /// made again).
    pub fn uncount(&mut self, nr: i64, args: &[u64; 6], ip: u64) {
        let Some((fid, detail)) = fid_of(nr, args) else {
            return;
        };
        let key = census_key(ip, fid, detail);
        let Some((i, n)) = self.counts.get_mut(&key) else {
            return;
        };
        *n = n.saturating_sub(1);
        let (i, n) = (*i, *n);
        self.write_pair(i, key, n);
    }

    /// Records an `unsealed` event of `kind` with `detail` (once per detail).
    pub fn unsealed(&mut self, kind: u32, detail: &str) {
        if !self.said.insert(detail.to_owned()) {
            return;
        }
        let n = self.said.len() - 1;
        if n >= seal_abi::MAX_UNSEALED {
            return;
        }
        let d = &detail.as_bytes()[..detail.len().min(248)];
        let ev =
            offset_of!(CensusFile, unsealed) + n * std::mem::size_of::<seal_abi::UnsealedEvent>();
        let ev = ev as u64;
        self.put(ev + offset_of!(seal_abi::UnsealedEvent, detail) as u64, d);
        self.put(
            ev + offset_of!(seal_abi::UnsealedEvent, len) as u64,
            &(d.len() as u32).to_le_bytes(),
        );
        self.put(
            ev + offset_of!(seal_abi::UnsealedEvent, kind) as u64,
            &kind.to_le_bytes(),
        );
        let count = (n as u32 + 1).to_le_bytes();
        self.put(offset_of!(CensusFile, n_unsealed) as u64, &count);
    }

    fn put(&mut self, off: u64, data: &[u8]) {
        // Into the first page while it is kept, the rest (if any) written.
        let (mut off, mut data) = (off, data);
        if let Some(head) = self.head.as_mut() {
            let o = off as usize;
            if o < HEAD {
                let n = data.len().min(HEAD - o);
                head[o..o + n].copy_from_slice(&data[..n]);
                (off, data) = (off + n as u64, &data[n..]);
            }
        }
        if data.is_empty() {
            return;
        }
        // A failed write (a full file system) leaves the census short, as a failed page
        // reservation does in libseal; the run goes on.
        let _ = self.file.write_all_at(data, self.at + off);
    }
}

/// The run table of the server this supervisor was forked from, opened before the fork
/// (-1: none; [`open_table`] then opens it by name).
static TABLE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// Keeps descriptor `fd` of the run table (read-write) for [`open_table`].
pub fn keep_table(fd: i32) {
    TABLE.store(fd, Ordering::Relaxed);
}

/// The run table of the run in `run_dir`, read-write: a copy of the descriptor the server
/// opened, or opened by name.
fn open_table(run_dir: &Path) -> Option<File> {
    use std::os::fd::FromRawFd;
    let fd = TABLE.load(Ordering::Relaxed);
    // SAFETY: F_DUPFD_CLOEXEC of a descriptor this process keeps open for its life.
    let copy = if fd >= 0 {
        unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) }
    } else {
        -1
    };
    if copy >= 0 {
        // SAFETY: a descriptor we just made and own.
        return Some(unsafe { File::from_raw_fd(copy) });
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(run_dir.join(seal_abi::RUN_TABLE_NAME))
        .ok()
}

/// Claims the next census slot number (`RunTable::census_next`, shared with every libseal of
/// the run), or `None` when the table is full; with the table's `pid_max`.
fn take_slot(file: &File) -> Option<(usize, usize)> {
    let p = super::page::map_shared(file, true)?;
    // SAFETY: `p` maps the run table's first page (which the launcher wrote), to take a number
    // with the same atomic add libseal uses, and read `pid_max`; unmapped before returning.
    unsafe {
        let b = p.cast::<u8>();
        let next = &*(b.add(offset_of!(RunTable, census_next)) as *const AtomicU32);
        let cap = *(b.add(offset_of!(RunTable, census_cap)) as *const u32);
        let pid_max = *(b.add(offset_of!(RunTable, pid_max)) as *const u32);
        let k = next.fetch_add(1, Ordering::AcqRel);
        libc::munmap(p, super::page::PAGE);
        (k < cap).then_some((k as usize, pid_max as usize))
    }
}
