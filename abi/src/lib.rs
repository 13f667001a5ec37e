//! The contract between `libseal` (the LD_PRELOAD shim) and the `seal` launcher.
//!
//! Everything both sides must agree on lives here and nowhere else: the environment variables
//! the launcher hands down, the numbering of intercepted functions, and the byte layout of the
//! run table file every sealed process maps (the run-wide tables, then one census slot per
//! process image).
//! No dependencies, no allocation: the shim uses this from inside other people's processes.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]

use core::sync::atomic::{AtomicU32, AtomicU64};

/// Numbers that each stand for a string, in one table: `pub const NAME: $ty` for each, numbered
/// from `$first` in the order given, and `$table`, the strings in that order, so that a number
/// and its string cannot drift apart.
macro_rules! numbered {
    ($ty:ident from $first:literal, $table:ident: $($(#[$m:meta])* $name:ident = $s:literal,)*) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        enum Index {
            $($name,)*
        }
        $($(#[$m])* pub const $name: $ty = Index::$name as $ty + $first;)*
        pub const $table: [&str; [$($s),*].len()] = [$($s),*];
    };
}

/// Bit constants from one list: `pub const NAME: $ty` for each, bit 0 first in the order given,
/// so that no two share a bit and none is skipped.
#[macro_export]
macro_rules! bits {
    ($ty:ident: $($(#[$m:meta])* $name:ident,)*) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms, dead_code)]
        enum Bit {
            $($name,)*
        }
        $($(#[$m])* pub const $name: $ty = 1 << Bit::$name as u32;)*
    };
}

pub mod causal;
pub mod device_text;
pub mod exec_target;
pub mod files;
pub mod keyed;
pub mod pad;
pub mod proc_text;
pub mod py;
pub mod sealed_path;
mod setting_rows;
pub mod settings;
pub mod supervised;

/// Bits of [`settings::FLAGS`]. A set `SEAL_*` bit means the family is sealed.
pub mod flags {
    crate::bits! { u32:
        TIME,
        RANDOM,
        PID,
        HOST,
        TEMPNAME,
        /// Timed waits and sleeps are translated / advance logical time (part of `time`).
        WAIT,
        /// File times: `stat` shows sealed times, `utimensat(NOW)` uses the logical clock.
        FILES,
        /// `bind` to port 0 picks a seeded free port.
        NET,
        /// `--warp`: sleeps that would time out return at once.
        WARP,
        /// `-q`: the shim prints nothing on stderr.
        QUIET,
        /// Family `layout`: every new image's initial stack has one size (see
        /// [`crate::settings::pad_entry_len`]), so stack addresses do not depend on the size of the
        /// environment, the arguments or the program's path.
        LAYOUT,
        /// Family `cpu`: `rdtsc`/`rdtscp` and `cpuid` trapped and answered (shim/src/cpu).
        CPU,
        /// Family `machine`: CPU count and affinity, kernel release/version/machine, total and
        /// free memory are the run's fixed values (shim/src/machine).
        MACHINE,
    }
    pub const ALL_FAMILIES: u32 =
        TIME | RANDOM | PID | HOST | TEMPNAME | WAIT | FILES | NET | CPU | MACHINE;
}

/// Families of intercepted calls, as named in the census and on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Family {
    Time,
    Wait,
    Random,
    Pid,
    Host,
    Tempname,
    Exec,
    Files,
    Net,
    Cpu,
    Machine,
}

impl Family {
    pub const fn name(self) -> &'static str {
        match self {
            Family::Time => "time",
            Family::Wait => "wait",
            Family::Random => "random",
            Family::Pid => "pid",
            Family::Host => "host",
            Family::Tempname => "tempname",
            Family::Exec => "exec",
            Family::Files => "files",
            Family::Net => "net",
            Family::Cpu => "cpu",
            Family::Machine => "machine",
        }
    }
}

macro_rules! functions {
    ($( $id:ident = $fam:ident $name:literal ),* $(,)?) => {
        /// Function ids, used as the `fid` part of a census key.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub enum Fid { $( $id ),* }

        /// `(family, symbol)` of each [`Fid`], indexed by its number.
        pub const FUNCTIONS: &[(Family, &str)] = &[ $( (Family::$fam, $name) ),* ];
    };
}

functions! {
    // time
    ClockGettime = Time "clock_gettime",
    Gettimeofday = Time "gettimeofday",
    TimeFn = Time "time",
    Ftime = Time "ftime",
    TimespecGet = Time "timespec_get",
    Clock = Time "clock",
    Times = Time "times",
    SysClockGettime = Time "syscall(SYS_clock_gettime)",
    SysGettimeofday = Time "syscall(SYS_gettimeofday)",
    SysTime = Time "syscall(SYS_time)",
    // wait
    Nanosleep = Wait "nanosleep",
    ClockNanosleep = Wait "clock_nanosleep",
    Usleep = Wait "usleep",
    Sleep = Wait "sleep",
    Poll = Wait "poll",
    Ppoll = Wait "ppoll",
    Select = Wait "select",
    Pselect = Wait "pselect",
    EpollWait = Wait "epoll_wait",
    EpollPwait = Wait "epoll_pwait",
    CondTimedwait = Wait "pthread_cond_timedwait",
    CondClockwait = Wait "pthread_cond_clockwait",
    SemTimedwait = Wait "sem_timedwait",
    SemClockwait = Wait "sem_clockwait",
    MutexTimedlock = Wait "pthread_mutex_timedlock",
    MutexClocklock = Wait "pthread_mutex_clocklock",
    RwlockTimedrdlock = Wait "pthread_rwlock_timedrdlock",
    RwlockTimedwrlock = Wait "pthread_rwlock_timedwrlock",
    RwlockClockrdlock = Wait "pthread_rwlock_clockrdlock",
    RwlockClockwrlock = Wait "pthread_rwlock_clockwrlock",
    TimedjoinNp = Wait "pthread_timedjoin_np",
    ClockjoinNp = Wait "pthread_clockjoin_np",
    TimerfdSettime = Wait "timerfd_settime",
    TimerSettime = Wait "timer_settime",
    Alarm = Wait "alarm",
    Setitimer = Wait "setitimer",
    SysFutex = Wait "syscall(SYS_futex)",
    SysNanosleep = Wait "syscall(SYS_clock_nanosleep)",
    // random
    Getrandom = Random "getrandom",
    Getentropy = Random "getentropy",
    Arc4random = Random "arc4random",
    Arc4randomBuf = Random "arc4random_buf",
    Arc4randomUniform = Random "arc4random_uniform",
    SysGetrandom = Random "syscall(SYS_getrandom)",
    OpenDevice = Random "open(device)",
    ReadDevice = Random "read(device)",
    // pid
    Getpid = Pid "getpid",
    Getppid = Pid "getppid",
    Gettid = Pid "gettid",
    SysGetpid = Pid "syscall(SYS_getpid)",
    SysGettid = Pid "syscall(SYS_gettid)",
    Kill = Pid "kill",
    Killpg = Pid "killpg",
    Waitpid = Pid "waitpid",
    Wait4 = Pid "wait4",
    Waitid = Pid "waitid",
    WaitFn = Pid "wait",
    Tgkill = Pid "tgkill",
    Tkill = Pid "tkill",
    Getpgid = Pid "getpgid",
    Setpgid = Pid "setpgid",
    Getsid = Pid "getsid",
    Getpgrp = Pid "getpgrp",
    PidfdOpen = Pid "pidfd_open",
    SchedSetaffinity = Pid "sched_setaffinity",
    SchedGetaffinity = Pid "sched_getaffinity",
    ProcPath = Pid "open(/proc/<pid>)",
    // host
    Gethostname = Host "gethostname",
    Uname = Host "uname",
    Getdomainname = Host "getdomainname",
    // tempname
    Mkstemp = Tempname "mkstemp",
    Mkostemp = Tempname "mkostemp",
    Mkstemps = Tempname "mkstemps",
    Mkostemps = Tempname "mkostemps",
    Mkdtemp = Tempname "mkdtemp",
    Mktemp = Tempname "mktemp",
    Tempnam = Tempname "tempnam",
    Tmpnam = Tempname "tmpnam",
    // exec / process creation
    Fork = Exec "fork",
    Vfork = Exec "vfork",
    Clone = Exec "clone",
    PosixSpawn = Exec "posix_spawn",
    PosixSpawnp = Exec "posix_spawnp",
    Execve = Exec "execve",
    Execveat = Exec "execveat",
    Fexecve = Exec "fexecve",
    Execv = Exec "execv",
    Execvp = Exec "execvp",
    Execvpe = Exec "execvpe",
    Execl = Exec "execl",
    Execlp = Exec "execlp",
    Execle = Exec "execle",
    System = Exec "system",
    Popen = Exec "popen",
    PthreadCreate = Exec "pthread_create",
    // appended by the process module (keep numbering of the ones above)
    Tcgetpgrp = Pid "tcgetpgrp",
    Tcsetpgrp = Pid "tcsetpgrp",
    // wait (appended: waits whose glibc implementation bypasses the PLT or the kernel's own)
    MqTimedreceive = Wait "mq_timedreceive",
    MqTimedsend = Wait "mq_timedsend",
    MtxTimedlock = Wait "mtx_timedlock",
    // host (appended): name resolution of the sealed host name
    Getaddrinfo = Host "getaddrinfo(host name)",
    Gethostbyname = Host "gethostbyname(host name)",
    // time (appended): CPU time in resource usage (bash's `time` and `times`, GNU time)
    Getrusage = Time "getrusage",
    // pid (appended): other calls that take a pid (`renice -p`, `prlimit --pid`, `chrt -p`,
    // `ionice -p`, `sigqueue`)
    Getpriority = Pid "getpriority",
    Setpriority = Pid "setpriority",
    Prlimit = Pid "prlimit",
    SchedGetscheduler = Pid "sched_getscheduler",
    SchedSetscheduler = Pid "sched_setscheduler",
    SchedGetparam = Pid "sched_getparam",
    SchedSetparam = Pid "sched_setparam",
    SchedRrGetInterval = Pid "sched_rr_get_interval",
    Sigqueue = Pid "sigqueue",
    SysIoprio = Pid "syscall(ioprio_get/set)",
    SysSchedAttr = Pid "syscall(sched_getattr/setattr)",
    // time and host (appended): setters act on the sealed world, never on the machine
    ClockSettime = Time "clock_settime",
    Settimeofday = Time "settimeofday",
    Stime = Time "stime",
    Adjtime = Time "adjtime",
    Adjtimex = Time "adjtimex",
    ClockAdjtime = Time "clock_adjtime",
    NtpGettime = Time "ntp_gettime",
    SysClockSettime = Time "syscall(clock_settime/settimeofday/adjtimex)",
    Sethostname = Host "sethostname",
    Setdomainname = Host "setdomainname",
    SysSethostname = Host "syscall(sethostname/setdomainname)",
    // time (appended): clock reads a language runtime made for its own bookkeeping (a JVM's
    // JIT and class-load timers, libuv's loop time, V8's heuristics), answered without a tick
    RuntimeClock = Time "clock read by runtime bookkeeping (no tick)",
    // exec (appended): a JVM started with the sealed profile's options (-XX:-UsePerfData)
    JniCreateJavaVm = Exec "JNI_CreateJavaVM (sealed JVM options)",
    // files (appended): reads of file times (ids reserved; not counted, see shim/src/files),
    // and setters of "now"
    Stat = Files "stat",
    Lstat = Files "lstat",
    Fstat = Files "fstat",
    Fstatat = Files "fstatat",
    Statx = Files "statx",
    Xstat = Files "__xstat",
    Utimensat = Files "utimensat",
    Futimens = Files "futimens",
    Utimes = Files "utimes",
    Utime = Files "utime",
    SysStat = Files "syscall(stat family)",
    SysUtime = Files "syscall(utimensat/utimes/utime)",
    // net (appended): binds to port 0
    Bind = Net "bind(port 0)",
    // pid and time (appended): /proc files rewritten with virtual pids and sealed times
    ProcStat = Pid "open(/proc/<pid>/stat|status)",
    ProcUptime = Time "open(/proc/uptime)",
    // cpu (appended): trapped instructions, and signal calls that keep seal's handler installed
    Rdtsc = Cpu "rdtsc",
    Rdtscp = Cpu "rdtscp",
    Cpuid = Cpu "cpuid",
    SigactionSegv = Cpu "sigaction(SIGSEGV) (chained behind seal's)",
    SigmaskSegv = Cpu "sigprocmask(SIGSEGV left unblocked)",
    // pid (appended): listings of /proc and of a process's task directory, shown with
    // virtual pids (counted once per stream, when it is found to be such a listing)
    ReaddirProc = Pid "readdir(/proc listing)",
    GetdentsProc = Pid "getdents64(/proc listing)",
    // pid (appended): debuggers and tracers (gdb, strace) name their tracee by its pid
    Ptrace = Pid "ptrace",
    ProcessVm = Pid "process_vm_readv/writev",
    // pid (appended): profilers (`perf stat`, `perf record -p`) name the process they count
    SysPerfEventOpen = Pid "syscall(perf_event_open)",
    // machine (appended): facts of the machine answered with the run's fixed values (CPU
    // count and affinity, kernel release, memory), so a golden travels to another machine
    MachineAffinity = Machine "sched_getaffinity (sealed CPUs)",
    MachinePthreadAffinity = Machine "pthread_getaffinity_np (sealed CPUs)",
    SysMachineAffinity = Machine "syscall(SYS_sched_getaffinity) (sealed CPUs)",
    GetNprocs = Machine "get_nprocs",
    GetNprocsConf = Machine "get_nprocs_conf",
    SysconfCpus = Machine "sysconf(_SC_NPROCESSORS_*)",
    SysconfPages = Machine "sysconf(_SC_PHYS_PAGES/_SC_AVPHYS_PAGES)",
    GetPhysPages = Machine "get_phys_pages/get_avphys_pages",
    Sysinfo = Machine "sysinfo",
    SysSysinfo = Machine "syscall(SYS_sysinfo)",
    UnameMachine = Machine "uname (release, version, machine)",
    SysUname = Machine "syscall(SYS_uname)",
    OpenMachine = Machine "open(machine file)",
    // machine (appended): directory listings in name order, whatever order the file system
    // keeps (ext4's hash order changes with each file system's seed; tmpfs lists newest first);
    // the readdir and getdents64 rows count listings (once per stream sorted), not calls
    Readdir = Machine "readdir/readdir64 (listing sorted)",
    ReaddirR = Machine "readdir_r/readdir64_r (listing sorted)",
    Getdents = Machine "getdents64 (listing sorted)",
    SysGetdents = Machine "syscall(SYS_getdents64) (listing sorted)",
    Scandir = Machine "scandir/scandir64 (sorted)",
    Telldir = Machine "telldir/seekdir/rewinddir (sorted places)",
    FtsOpen = Machine "fts_open (children in name order)",
    GlobNosort = Machine "glob(GLOB_NOSORT) (sorted)",
    SysGetdentsOld = Machine "syscall(SYS_getdents) (listing sorted)",
    // time (appended): the syscall() forms of times and getrusage
    SysTimes = Time "syscall(SYS_times)",
    SysGetrusage = Time "syscall(SYS_getrusage)",
    // pid (appended): calls that name a process by pid, translated to the kernel's pid
    ClockGetcpuclockid = Pid "clock_getcpuclockid",
    Capget = Pid "capget/capset",
    // random (appended): OpenSSL's public generator, answered from the thread's stream (its
    // own DRBG puts a heap address into its nonce, so its bytes moved with argument lengths)
    RandBytes = Random "RAND_bytes/RAND_bytes_ex (OpenSSL)",
    RandPrivBytes = Random "RAND_priv_bytes/RAND_priv_bytes_ex (OpenSSL)",
    // machine (appended): glibc's getloadavg reads /proc/loadavg with an internal open
    Getloadavg = Machine "getloadavg",
    // random (appended): libuuid's time-based uuids, made from the sealed clock and seed (its
    // machine-wide state file moved them every run)
    UuidGenerateTime = Random "uuid_generate_time/uuid_generate_time_safe (libuuid)",
    // random (appended): a Go image's own random numbers, drawn in the image from seal's
    // sequence (`supervised::go_rand`) and counted from its counters when the process exits or
    // execs
    GoRuntimeRand = Random "runtime.rand (Go runtime)",
    GoFastrand = Random "fastrand (Go runtime)",
    GoFastrandMaps = Random "fastrand (Go map code)",
    // random (appended): a Go image's `select` order, drawn in the image from a sequence of
    // its own (`supervised::go_select`), counted as the others
    GoSelect = Random "select order (Go runtime)",
}

impl Fid {
    pub const fn family(self) -> Family {
        FUNCTIONS[self as usize].0
    }
    pub const fn symbol(self) -> &'static str {
        FUNCTIONS[self as usize].1
    }
}

/// `detail` values for the random devices ([`Fid::OpenDevice`], [`Fid::ReadDevice`]).
pub mod device {
    numbered! { u8 from 0, PATHS:
        URANDOM = "/dev/urandom",
        RANDOM = "/dev/random",
        UUID = "/proc/sys/kernel/random/uuid",
        BOOT_ID = "/proc/sys/kernel/random/boot_id",
    }
}

pub mod machine_file;

/// `detail` byte meaning "none" (a call with no clock id / device / sub-kind).
pub const NO_DETAIL: u8 = 0xff;

/// Human name of a `detail` byte for the given function.
pub fn detail_name(fid: Fid, detail: u8) -> Option<&'static str> {
    if detail == NO_DETAIL {
        return None;
    }
    match fid {
        Fid::OpenDevice | Fid::ReadDevice => device::PATHS.get(detail as usize).copied(),
        Fid::OpenMachine => machine_file::PATHS.get(detail as usize).copied(),
        _ if fid.family() == Family::Time || fid.family() == Family::Wait => clock_name(detail),
        _ => None,
    }
}

/// Name of a clock id as stored in a census `detail` byte (dynamic clocks are stored as 0xfe).
pub fn clock_name(detail: u8) -> Option<&'static str> {
    Some(match detail {
        0 => "CLOCK_REALTIME",
        1 => "CLOCK_MONOTONIC",
        2 => "CLOCK_PROCESS_CPUTIME_ID",
        3 => "CLOCK_THREAD_CPUTIME_ID",
        4 => "CLOCK_MONOTONIC_RAW",
        5 => "CLOCK_REALTIME_COARSE",
        6 => "CLOCK_MONOTONIC_COARSE",
        7 => "CLOCK_BOOTTIME",
        8 => "CLOCK_REALTIME_ALARM",
        9 => "CLOCK_BOOTTIME_ALARM",
        11 => "CLOCK_TAI",
        0xfe => "dynamic clock",
        _ => return None,
    })
}

/// A census key packs the caller's return address (47 bits on x86_64 user space), the
/// function id and a detail byte into one word, so one CAS claims a table slot.
pub const fn census_key(addr: u64, fid: Fid, detail: u8) -> u64 {
    (addr & 0x0000_ffff_ffff_ffff) | ((fid as u64) << 48) | ((detail as u64) << 56)
}

/// Inverse of [`census_key`]: `(addr, fid number, detail)`.
pub const fn split_census_key(key: u64) -> (u64, u8, u8) {
    (
        key & 0x0000_ffff_ffff_ffff,
        (key >> 48) as u8,
        (key >> 56) as u8,
    )
}

pub const CENSUS_MAGIC: u64 = 0x5345_414c_4345_4e31; // "SEALCEN1"
pub const RUN_MAGIC: u64 = 0x5345_414c_5255_4e31; // "SEALRUN1"
pub const LAYOUT_VERSION: u32 = 6;

pub const CENSUS_SLOTS: usize = 1 << 14;
pub const MAX_UNSEALED: usize = 64;
pub const MAX_MODULES: usize = 1024;
pub const MODULE_STRINGS: usize = 1 << 17;
pub const EXE_BYTES: usize = 4096;
pub const ARGV_BYTES: usize = 16384;
/// Counters and modules in the census slot's first page ([`CensusFile::head_slots`],
/// [`CensusFile::head_modules`]).
pub const HEAD_SLOTS: usize = 64;
pub const HEAD_MODULES: usize = 16;
/// [`CensusFile::text`]: the executable's path, the arguments and the module names.
pub const TEXT_BYTES: usize = EXE_BYTES + ARGV_BYTES + MODULE_STRINGS;

/// One counter: `key` (see [`census_key`], 0 = free) and how often it was hit.
#[repr(C)]
pub struct CensusSlot {
    pub key: AtomicU64,
    pub count: AtomicU64,
}

/// Kinds of `unsealed` events.
pub mod unsealed;

#[repr(C)]
pub struct UnsealedEvent {
    pub kind: AtomicU32,
    pub len: AtomicU32,
    pub detail: [u8; 248],
}

/// A loaded object (main executable or shared library) of the process image: the address range
/// of its mapped segments and its path (in [`CensusFile::text`]).
#[repr(C)]
pub struct ModuleRecord {
    pub start: u64,
    pub end: u64,
    /// Load bias (`dlpi_addr`): file virtual address + bias = runtime address.
    pub bias: u64,
    pub name_off: u32,
    pub name_len: u32,
}

/// Layout of one census slot: one per process image, in the run table file after the tables
/// ([`RunTable::census_offset`]), mapped `MAP_SHARED`, so counts survive SIGKILL and exec.
///
/// The file is sparse: a page exists once something was written to it. A short process's
/// census is its first page only: the header, the first [`HEAD_SLOTS`] counters, the first
/// [`HEAD_MODULES`] modules and the start of the text (its path, its arguments and the module
/// names, in that order). Busier images spill into the tables after it: counter `i` of
/// [`CensusFile::slot`] is `head_slots[i]` below [`HEAD_SLOTS`] and `slots[i - HEAD_SLOTS]`
/// above, and the same for modules.
#[repr(C)]
pub struct CensusFile {
    pub magic: u64,
    pub version: u32,
    /// Set to 1 once the header (ids, exe, argv) is complete.
    pub ready: AtomicU32,
    pub vpid: i32,
    pub parent_vpid: i32,
    pub gen: u32,
    /// The executable's path is `text[..exe_len]`, the arguments (NUL-separated) follow.
    pub exe_len: u32,
    pub argv_len: u32,
    /// Set when `argv` was cut to fit.
    pub argv_truncated: u32,
    /// Logical clock (ns) the image started at; lets a reader order images.
    pub start_clock: i64,
    pub n_unsealed: AtomicU32,
    pub n_modules: AtomicU32,
    /// Bytes of `text` in use (the module names follow the arguments).
    pub text_used: AtomicU32,
    /// Why `rdtsc`/`cpuid` give real values in this image: bit `i` is
    /// [`unsealed::CPU_TRAP_CAUSES`]`[i]` (each an `unsealed::CPU_TRAP` event). Held here, in
    /// the first page, rather than in `unsealed`: on a machine without cpuid faulting every
    /// image has one, and an event would take a second page of every census slot.
    pub cpu_unsealed: AtomicU32,
    /// Families turned off for this image: bit `i` is [`settings::FAMILIES`]`[i]` (each an
    /// `unsealed::FAMILY_OFF` event), in the first page for the same reason.
    pub families_off: AtomicU32,
    pub _pad: u32,
    /// Calls that found the table full, per function id (counted, but without a caller).
    pub dropped_calls: AtomicU64,
    pub head_slots: [CensusSlot; HEAD_SLOTS],
    pub head_modules: [ModuleRecord; HEAD_MODULES],
    pub text: [u8; TEXT_BYTES],
    pub overflow: [AtomicU64; 256],
    pub unsealed: [UnsealedEvent; MAX_UNSEALED],
    pub more_modules: [ModuleRecord; MAX_MODULES - HEAD_MODULES],
    pub slots: [CensusSlot; CENSUS_SLOTS],
    /// Python frames of the calls (CPython images only; see [`py`]).
    pub py: py::PyCensus,
}

/// The header, the head tables and a few hundred bytes of text share the first page.
const _: () = assert!(core::mem::offset_of!(CensusFile, text) + 512 <= 4096);

/// For a table a census slot keeps in two parts, the first `$n` entries in `$head` (in the
/// slot's first page) and the rest in `$rest`: `$get(i)`, entry `i`, and `$offset(i)`, the
/// byte offset of entry `i` in the file.
macro_rules! split_table {
    ($(#[$attr:meta])* $get:ident, $offset:ident: $ty:ty = $head:ident[..$n:expr] ++ $rest:ident) => {
        $(#[$attr])*
        pub fn $get(&self, i: usize) -> &$ty {
            if i < $n {
                &self.$head[i]
            } else {
                &self.$rest[i - $n]
            }
        }

        /// Byte offset of entry `i` in the file.
        pub const fn $offset(i: usize) -> usize {
            let size = core::mem::size_of::<$ty>();
            if i < $n {
                core::mem::offset_of!(Self, $head) + i * size
            } else {
                core::mem::offset_of!(Self, $rest) + (i - $n) * size
            }
        }
    };
}

impl CensusFile {
    /// Counters in all: the head's, then the table's.
    pub const ALL_SLOTS: usize = HEAD_SLOTS + CENSUS_SLOTS;

    split_table!(
        /// Counter `i` (`i < ALL_SLOTS`).
        #[inline(always)]
        slot, slot_offset: CensusSlot = head_slots[..HEAD_SLOTS] ++ slots
    );

    split_table!(
        /// Module record `i` (`i < MAX_MODULES`).
        #[inline]
        module, module_offset: ModuleRecord = head_modules[..HEAD_MODULES] ++ more_modules
    );
}

pub const CENSUS_FILE_SIZE: usize = core::mem::size_of::<CensusFile>();

mod vpids;
pub use vpids::*;
mod run_table;
pub use run_table::*;
mod exe_names;
pub use exe_names::{exe_key, name_hash, ExeName, ExeNames, EXE_NAMES, EXE_NAME_BYTES};
mod waiters;
pub use waiters::{TimerSlot, WaiterBoard, WaiterSlot, TIMER_SLOTS, WAITER_SLOTS};

/// Decimal formatting without allocation; returns bytes written.
pub fn write_u64(mut v: u64, out: &mut [u8]) -> usize {
    let mut tmp = [0u8; 20];
    let mut i = 20;
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let len = 20 - i;
    out[..len].copy_from_slice(&tmp[i..]);
    len
}

/// A 64-bit mixer (splitmix64 finaliser) used to derive child lineage keys and stream keys.
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Lineage key of the `index`-th child (process or thread, per `kind`) of `parent`.
pub const fn child_lineage(parent: u64, kind: u64, index: u64) -> u64 {
    mix64(parent ^ mix64(kind.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ index.wrapping_add(1)))
}

/// Lineage of the root process of a run.
pub const ROOT_LINEAGE: u64 = 0x5ea1_0000_0000_0001;
pub const KIND_PROCESS: u64 = 1;
pub const KIND_THREAD: u64 = 2;
pub const KIND_IMAGE: u64 = 3;
/// Lineage kind of the per-open streams of the random devices (libseal's and the
/// supervisor's alike).
pub const KIND_DEVICE_OPEN: u64 = 0xde71_ce00;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn census_key_round_trips() {
        let k = census_key(0x7fff_dead_beef, Fid::Getrandom, 7);
        assert_eq!(
            split_census_key(k),
            (0x7fff_dead_beef, Fid::Getrandom as u8, 7)
        );
    }

    #[test]
    fn bits_keep_their_values() {
        assert_eq!(
            (flags::TIME, flags::WAIT, flags::MACHINE),
            (1, 1 << 5, 1 << 12)
        );
        assert_eq!(unsealed::cpu_cause::BOTH_REFUSED, 1 << 5);
    }

    #[test]
    fn function_table_matches_ids() {
        assert_eq!(Fid::ClockGettime.symbol(), "clock_gettime");
        assert_eq!(Fid::PthreadCreate.symbol(), "pthread_create");
        assert_eq!(Fid::Getrandom.family(), Family::Random);
        assert!(FUNCTIONS.len() < 256);
    }

    #[test]
    fn census_slots_and_candidates() {
        // Slots are page-aligned, after the table, and never overlap it or each other.
        let pid_max = 4 << 20;
        let first = RunTable::census_offset(pid_max, 0);
        assert!(first >= RunTable::file_size(pid_max) && first.is_multiple_of(4096));
        assert_eq!(
            RunTable::census_offset(pid_max, 1) - first,
            CENSUS_SLOT_BYTES
        );
        assert!(CENSUS_SLOT_BYTES >= CENSUS_FILE_SIZE && CENSUS_SLOT_BYTES.is_multiple_of(4096));
        for a in 0..1000 {
            let v = vpid_candidate(child_lineage(ROOT_LINEAGE, KIND_PROCESS, a), 0);
            assert!(v > VPID_MIN && (v as usize) < VPID_LIMIT);
        }
    }

    #[test]
    fn detail_numbers_keep_their_values_and_paths() {
        assert_eq!((device::URANDOM, device::BOOT_ID), (0, 3));
        assert_eq!(
            device::PATHS[device::UUID as usize],
            "/proc/sys/kernel/random/uuid"
        );
        assert_eq!((machine_file::CPUINFO, machine_file::CPU_OFFLINE), (0, 9));
        assert_eq!(machine_file::LOADAVG, 10);
        assert_eq!(machine_file::PATHS.len(), 11);
        assert_eq!(
            detail_name(Fid::OpenMachine, machine_file::OSRELEASE),
            Some("/proc/sys/kernel/osrelease")
        );
    }
}
