//! The run table (`run.table` in the run directory): the state every process of one run
//! shares through one `MAP_SHARED` file, and the census slots that follow it.

use core::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, AtomicU8};

use crate::{
    causal, vpid_candidate, ExeNames, WaiterBoard, CENSUS_FILE_SIZE, VPID_LIMIT, VPID_MIN,
};

/// Layout of the run table (`run.table` in the run dir), shared by every process of one run.
/// `real_of[vpid]` is the real pid (0 free, -1 reserved); `status_of[vpid]` the wait status
/// plus 1 once reaped (0 = unknown); `vpid_of[real]` follows at [`RunTable::REAL_MAP_OFFSET`],
/// sized by the kernel's `pid_max`.
#[repr(C)]
pub struct RunTable {
    pub magic: u64,
    pub version: u32,
    /// Entries in the `vpid_of` array that follows this struct.
    pub pid_max: u32,
    /// Census slots claimed so far: each process image takes the next one
    /// ([`RunTable::census_offset`]), fork children included.
    pub census_next: AtomicU32,
    /// Census slots the file holds (set by the launcher; the images past it go uncounted).
    pub census_cap: u32,
    /// Facts about the whole run that an image checks at its start ([`run_flags`]).
    pub flags: AtomicU32,
    pub _pad: u32,
    /// What the run's setters did to the sealed world (`clock_settime`, `sethostname`, …):
    /// shared by every process of the run, so a change made by one is seen by all.
    pub world: World,
    /// The programs the run has run, by key: their `/proc/self/exe` ([`ExeNames`]).
    pub exe_names: ExeNames,
    pub real_of: [AtomicI32; VPID_LIMIT],
    pub status_of: [AtomicI32; VPID_LIMIT],
    /// `wait_clock[vpid]`: the highest logical clock a wait of the process (a sleep or timed
    /// wait that ran out, a reaped child's own wait clock) moved one of its threads to; 0
    /// none. A parent that reaps the process moves its clock there.
    pub wait_clock: [AtomicI64; VPID_LIMIT],
    /// The run's channels (pipes, sockets) and the clocks their bytes carry: what a sealed
    /// writer leaves for the sealed reader it wakes ([`causal`]).
    pub channels: [causal::Channel; causal::CHANNELS],
    /// `--warp`'s waiter board (appended): who waits for which logical deadline.
    pub waiters: WaiterBoard,
    /// `exec_start[vpid]` (appended): where a dynamic image that process `vpid` execs starts,
    /// left by a static image's supervisor at the `execve` (the image's environment is the
    /// one the static image was given, which the supervisor cannot rewrite). [`ExecStart`].
    pub exec_start: [ExecStart; VPID_LIMIT],
}

/// Where the next image of one process starts, when its exec'ing image could not say so in
/// the environment (a static image's supervisor writes it at the `execve`; libseal's start-up
/// reads it in place of `LIBSEAL_CLOCK`, `LIBSEAL_LINEAGE` and `LIBSEAL_CHILDREN`, and clears
/// it). `real` is written last (`Release`): the entry holds only for that real pid.
#[repr(C)]
pub struct ExecStart {
    /// The exec'ing process's real pid (0: no entry).
    pub real: AtomicI32,
    pub _pad: u32,
    /// Its logical clock at the exec (ns past the epoch: `LIBSEAL_CLOCK`).
    pub clock: AtomicI64,
    /// Its lineage (`LIBSEAL_LINEAGE`; 0: the environment's).
    pub lineage: AtomicU64,
    /// Children it made before the exec (`LIBSEAL_CHILDREN`).
    pub children: AtomicU64,
}

// Four words an entry: libseal and the supervisor index the array by virtual pid.
const _: () = assert!(core::mem::size_of::<ExecStart>() == 32);

/// Bits of [`RunTable::flags`].
pub mod run_flags {
    /// A sealed `/dev/urandom` or `/dev/random` pipe was made in this run: an image checks
    /// whether its standard descriptors are one (three `fstat`s every image skips otherwise).
    pub const DEVICE_PIPES: u32 = 1;
    /// seal held `CAP_SYS_TIME` when it started the run, which the run's root then gave up
    /// (so nothing of the run reaches the real clock): a process running as root may still
    /// set the sealed clock, as it could set the real one bare.
    pub const SYS_TIME_HELD: u32 = 2;
    /// A static image's supervisor left an [`super::ExecStart`] for an exec of a dynamic
    /// image: an image's start-up looks for one (every other image skips the look).
    pub const EXEC_STARTS: u32 = 4;
}

// The header, the world and the program names sit in the first page: one page every image
// backs at start.
const _: () = assert!(core::mem::offset_of!(RunTable, real_of) <= 4096);

/// `clock_settime(CLOCK_SEAL_ADVANCE, &duration)` inside a sealed run moves every clock of the
/// run forward by `duration` (what `seal time advance` does; no privilege needed). The id is
/// no clock of the kernel's, so outside a sealed run the call fails with `EINVAL`.
pub const CLOCK_SEAL_ADVANCE: i32 = 0x5ea1;
/// `clock_settime(CLOCK_SEAL_SET, &time)` inside a sealed run sets the run's realtime clocks
/// to `time` (what `seal time set` does; monotonic clocks keep running).
pub const CLOCK_SEAL_SET: i32 = 0x5ea2;

/// Longest host or domain name the kernel accepts (`HOST_NAME_MAX`, `__NEW_UTS_LEN`).
pub const NAME_MAX: usize = 64;

/// A name set inside the run: `len` is 0 until set, else the name's length + 1.
#[repr(C)]
pub struct SealedName {
    pub len: AtomicU8,
    pub bytes: [AtomicU8; NAME_MAX],
}

/// Run-wide changes that sealed setters make instead of changing the machine.
#[repr(C)]
pub struct World {
    /// Nanoseconds added to every sealed realtime clock read (`clock_settime(CLOCK_REALTIME)`,
    /// `settimeofday`, `stime`, `adjtime`, `adjtimex(ADJ_SETOFFSET)` move it).
    pub realtime_shift: AtomicI64,
    /// Nanoseconds every sealed realtime and monotonic clock of the run has been moved
    /// forward by `seal time advance` (or [`CLOCK_SEAL_ADVANCE`]): time passing, all at once.
    pub advance: AtomicI64,
    /// Seqlock over the names: odd while a writer is inside.
    pub names_seq: AtomicU32,
    pub _pad: u32,
    /// `sethostname` inside the run.
    pub hostname: SealedName,
    /// `setdomainname` inside the run.
    pub domainname: SealedName,
    pub _reserved: [u8; 6],
}

impl SealedName {
    pub const fn unset() -> SealedName {
        SealedName {
            len: AtomicU8::new(0),
            bytes: [const { AtomicU8::new(0) }; NAME_MAX],
        }
    }
}

impl World {
    /// Nothing changed yet (what a zero-filled run table holds).
    pub const fn unchanged() -> World {
        World {
            realtime_shift: AtomicI64::new(0),
            advance: AtomicI64::new(0),
            names_seq: AtomicU32::new(0),
            _pad: 0,
            hostname: SealedName::unset(),
            domainname: SealedName::unset(),
            _reserved: [0; 6],
        }
    }
}

impl RunTable {
    pub const REAL_MAP_OFFSET: usize = core::mem::size_of::<RunTable>();
    /// Bytes of the table itself (what every image maps), without the census slots.
    pub const fn file_size(pid_max: usize) -> usize {
        Self::REAL_MAP_OFFSET + pid_max * 4
    }
    /// Where census slot `k` starts in the run table file: after the table, page-aligned,
    /// [`CENSUS_SLOT_BYTES`] apart. The file is sparse: a slot takes the pages its image wrote
    /// (one for a short process), and no image creates or removes a file of its own.
    pub const fn census_offset(pid_max: usize, k: usize) -> usize {
        Self::file_size(pid_max).next_multiple_of(4096) + k * CENSUS_SLOT_BYTES
    }
    /// The file's length for `cap` census slots.
    pub const fn file_size_with_census(pid_max: usize, cap: usize) -> usize {
        Self::census_offset(pid_max, cap)
    }
}

/// Bytes between two census slots of the run table file: a [`CensusFile`], page-aligned.
pub const CENSUS_SLOT_BYTES: usize = CENSUS_FILE_SIZE.next_multiple_of(4096);
/// Census slots a run holds at most (fewer under `RLIMIT_FSIZE`): 0.9 TiB of sparse file.
pub const CENSUS_CAP: usize = 1 << 20;

/// Name of the run table inside the run dir.
pub const RUN_TABLE_NAME: &str = "run.table";

/// Candidates tried by hash before [`vpid_candidates`] falls back to a linear scan.
const HASH_ATTEMPTS: u64 = 64;

/// The virtual pids a process or thread with this lineage key tries, in order: 64 hashed
/// candidates, then every number after the first one (wrapping). libseal's allocator and the
/// static-image supervisor's claim the first free one of this sequence in the run table.
pub fn vpid_candidates(lineage: u64) -> impl Iterator<Item = i32> {
    let start = vpid_candidate(lineage, 0) as usize;
    let span = VPID_LIMIT - VPID_MIN as usize - 1;
    let hashed = (0..HASH_ATTEMPTS).map(move |a| vpid_candidate(lineage, a));
    let scan = (0..span)
        .map(move |i| (VPID_MIN as usize + 1 + (start - VPID_MIN as usize - 1 + i) % span) as i32);
    hashed.chain(scan)
}
