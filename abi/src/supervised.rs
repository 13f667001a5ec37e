//! Static images under system-call supervision: what the shim (in the process about to exec a
//! static binary) and the launcher's supervisor (`seal __static-supervisor`) agree on.
//!
//! A static binary loads no libseal, and asks the kernel directly (or the vDSO). Before such
//! an exec, the shim installs a seccomp filter that sends the system calls in [`CALLS`] to a
//! supervisor process as user notifications, hands the supervisor the filter's listener, and
//! lets it trace the exec: at the exec stop the supervisor removes `AT_SYSINFO_EHDR` from the
//! new image's auxiliary vector (so its C library reads the clocks by system call) and seals
//! the 16 `AT_RANDOM` bytes, then detaches. From there on, the calls in [`CALLS`] made from the
//! static image's own code are answered with sealed values; the same calls from anything else
//! (a dynamic descendant with libseal loaded, the vDSO) run as they are. The exec'ing side's
//! steps are [`handover`], shared by the shim and the launcher (a static root command).

pub mod entropy;
mod filter;
pub mod go_rand;
pub mod go_select;
pub mod go_site;
pub mod go_sys;
pub mod go_wyrand;
pub mod handover;
pub mod pclntab;

pub use filter::{filter, filter_below, FILTER_LEN, NO_IP_LIMIT};

/// `struct sock_filter` (<linux/filter.h>).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SockFilter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// The system calls sent to the supervisor (x86_64 numbers), with the family that seals each.
pub const CALLS: [(u32, u32); 20] = {
    use crate::flags::{HOST, MACHINE, PID, RANDOM, TIME};
    [
        (228, TIME),    // clock_gettime
        (96, TIME),     // gettimeofday
        (201, TIME),    // time
        (35, TIME),     // nanosleep
        (230, TIME),    // clock_nanosleep
        (227, TIME),    // clock_settime
        (164, TIME),    // settimeofday
        (159, TIME),    // adjtimex
        (305, TIME),    // clock_adjtime
        (39, PID),      // getpid
        (110, PID),     // getppid
        (186, PID),     // gettid
        (62, PID),      // kill (the caller's virtual pid is its real one)
        (200, PID),     // tkill
        (234, PID),     // tgkill
        (318, RANDOM),  // getrandom
        (63, HOST),     // uname
        (170, HOST),    // sethostname
        (171, HOST),    // setdomainname
        (204, MACHINE), // sched_getaffinity
    ]
};

/// Timed waits sent to the supervisor when their timeout is positive (`epoll_wait`,
/// `epoll_pwait`): a Go runtime's netpoller waits there for its timer heap, so a Go image's
/// clock moves when such a wait expires (the supervisor holds it until the image is idle).
/// A zero timeout (a poll) or an infinite one (-1) runs as it is, unseen.
pub const TIMED_WAITS: [u32; 2] = [232, 281];

/// `execve`, sent to the supervisor too: an image's exec of a static binary (a Go program
/// running a static child, past any hook) is followed to its exec stop, where the new image is
/// set up as the first one was.
pub const EXEC: u32 = 59;
/// `execveat` (glibc's `fexecve`, `execveat(2)`), sent and followed as [`EXEC`] is.
pub const EXEC_AT: u32 = 322;

/// Calls that make or reap a process (`clone` without `CLONE_THREAD`, `fork`, `vfork`,
/// `clone3`, `wait4`, `waitid`): the pid they return (or take) is a real one, which the
/// supervisor turns into the virtual one by tracing the call to its exit (`serve/pids.rs`).
/// Sent only from code below [`IMAGE_IP_LIMIT`]: a static image's text (fixed, or a
/// static-pie's at the kernel's `ET_DYN` base), never a dynamic descendant's libc, which
/// carries the filter too and whose forks libseal already seals: a sealed `bash` or `make`
/// pays nothing for them.
pub const PROC_CALLS: [u32; 6] = [56, 57, 58, 61, 247, 435];
/// Calls that take or give a process group or session (`setpgid`, `getpgrp`, `getpgid`,
/// `getsid`): their pids are real ones, which the supervisor turns into the run's virtual
/// ones as libseal does for a dynamic program (`serve/groups.rs`). Sent, as [`PROC_CALLS`],
/// only from code below [`IMAGE_IP_LIMIT`]: a dynamic descendant's libc calls are libseal's.
pub const GROUP_CALLS: [u32; 4] = [109, 111, 121, 124];
/// Opens by path (`open`, `openat`), sent (from an image, as [`GROUP_CALLS`]): the sealed
/// files (the random devices, the kernel's uuid and boot id, `/proc/uptime`, the host name
/// files) get a descriptor with sealed contents from the supervisor (`serve/opens.rs`), as
/// libseal's open hooks give a dynamic program; any other path runs as it is.
pub const OPEN_CALLS: [u32; 2] = [2, 257];
/// `mkdir`, `mkdirat`, sent (from an image, as [`GROUP_CALLS`]) so that a temp directory's
/// name that an earlier run left in a shared `/tmp` is said (`tmp-leftover`), as for an
/// exclusive open (`serve/opens.rs`): busybox `mktemp -d`, Go's `os.MkdirTemp`. They run as
/// they are.
pub const MKDIR_CALLS: [u32; 2] = [83, 258];
/// `sysinfo`, sent (from an image, as [`GROUP_CALLS`]): the sealed machine's uptime, memory
/// and load, as libseal's hook fills them.
pub const SYSINFO: u32 = 99;
/// The upper half of the flags argument of the supervisor's own `open`s, which it makes in a
/// stopped image (`batch.rs`: the clock page, the run table), and which it must not be sent
/// (it is waiting for them to return). The kernel reads `open`'s flags as an `int`, so these
/// bits change nothing; a program's `int` flags never carry them.
pub const BATCH_OPEN: u32 = 0x5ea1_0b7e;
/// `ioctl`, sent (from an image, as [`GROUP_CALLS`]) only for the terminal's foreground
/// process group: [`TIOCGPGRP`] (`tcgetpgrp`) and [`TIOCSPGRP`] (`tcsetpgrp`), whose pids
/// the supervisor translates too (a job-control shell compares `tcgetpgrp` with `getpgrp`).
pub const IOCTL: u32 = 16;
/// `TIOCGPGRP`, `TIOCSPGRP` (x86_64).
pub const TIOCGPGRP: u32 = 0x540F;
pub const TIOCSPGRP: u32 = 0x5410;
/// `exit_group`, sent (from an image, as [`GROUP_CALLS`]) so that the supervisor reads what
/// a Go image's in-image random number code counted (`go_rand`: private counters, gone once
/// the process is) into its census before the process goes; answered `CONTINUE`.
pub const EXIT_GROUP: u32 = 231;
/// `getdents64`, sent (from an image, as [`GROUP_CALLS`]): the supervisor reads the
/// directory itself (through a copy of the image's descriptor, the same open file) and gives
/// the image its entries as libseal gives a dynamic program's: a listing of `/proc` with the
/// run's processes under their virtual pids, any other directory in name order
/// (`serve/listings.rs`).
pub const GETDENTS64: u32 = 217;
/// `rt_sigaction`, sent (from an image, as [`GROUP_CALLS`]) only when it sets a disposition
/// (its second argument not NULL) for [`SIGCHLD`]: the supervisor adds `SA_RESTART` to a
/// handler's flags (`serve/restart.rs`). A call of an image waits in its notification until
/// the supervisor answers it, and a signal that lands before the supervisor has taken it
/// cuts it short with `-ERESTARTSYS`, which a handler without `SA_RESTART` turns into
/// `EINTR`: a `fork` or `getpid` the kernel never fails so (a busybox shell's `can't fork:
/// Interrupted system call`, `$$` of -1). A child's end is the signal that comes at such a
/// moment, while its parent forks the next one.
pub const SIGACTION: u32 = 13;
/// `SIGCHLD`.
pub const SIGCHLD: u32 = 17;
/// `futex`, sent (from an image, as [`GROUP_CALLS`]) only as a [`FUTEX_WAIT_PRIVATE`] with a
/// timeout (its fourth argument not NULL): a Go runtime's `notetsleep`, whose loop ends when
/// its note is woken or the image's clock passes the deadline. A stop-the-world waits so in
/// 100 µs steps for a goroutine to stop, preempting it again after each step that times out;
/// a Go image's clock stands still while it computes, so no step seemed to end, and the world
/// waited for the goroutine's own code to let it (`go build`'s compiler stalled ~17 s in 2
/// runs of 9). The supervisor holds such a step (100 µs), and once its time has passed with
/// the futex word unchanged it signals the process's running threads as the runtime's next
/// step would, and after 10 such steps moves the clock by each (`serve/futexes.rs`).
pub const FUTEX: u32 = 202;
/// `FUTEX_WAIT | FUTEX_PRIVATE_FLAG`, the operation (the second argument) Go waits with.
pub const FUTEX_WAIT_PRIVATE: u32 = 128;
/// [`PROC_CALLS`] made from an address whose upper 32 bits are at least this run as they are:
/// shared libraries, the vDSO and the stack live at `0x7f…` (the kernel's top-down mmap
/// base), executables (static or PIE) below.
pub const IMAGE_IP_LIMIT: u32 = 0x7f00;

/// The argument that makes the `seal` binary the supervisor: `seal __static-supervisor FD PID`
/// (the socket to the shim, the process's real pid), or `… FD PID VPID PPID` for a process
/// that supervises itself (a dynamically linked Go program, no exec to trace; its virtual pid
/// and parent pid as libseal gives them). Its environment is the new image's
/// `LIBSEAL_*` variables only (so it runs unsealed, and knows the image's settings and
/// identity).
pub const SUPERVISOR_ARG: &str = "__static-supervisor";

/// The trampoline's argument: `seal __exec-static PATH ARGV0 ARGS…` execs PATH (a static
/// binary) through libseal's exec hook, which sets the supervision up. libseal starts a static
/// binary started by `posix_spawn` so (its child execs inside glibc, where no hook runs), and
/// the launcher a static root command where its own child cannot set the supervision up
/// ([`handover`]).
pub const EXEC_STATIC_ARG: &str = "__exec-static";

/// The link to the `seal` binary in the run directory, which libseal execs as the supervisor.
pub const SUPERVISOR_LINK: &str = "seal";

/// The argument that makes the `seal` binary the run's supervision server:
/// `seal __static-server FD`, FD a unix socket already bound to [`SERVER_SOCKET`] in the run
/// directory and listening. libseal starts it (as it would a supervisor) at the first static
/// exec of a run that finds no server; the server forks one supervisor per connection, which
/// then speaks the [`msg`] protocol as `__static-supervisor` does. Its environment is the
/// `LIBSEAL_*` variables of the image that started it.
pub const SERVER_ARG: &str = "__static-server";

/// The supervision server's socket in the run directory (`SOCK_SEQPACKET`).
pub const SERVER_SOCKET: &str = "supervisor.sock";

/// The first message on a connection to the server (shim → server): [`msg::REQUEST`], the
/// process's real pid (`u32`), whether it supervises itself (`u8`), its virtual pid and parent
/// pid (`u32` each, 0 unless it supervises itself), then the new image's `LIBSEAL_*`
/// variables, each NUL-terminated: what `__static-supervisor` takes as arguments and
/// environment.
pub const REQUEST_HEADER: usize = 14;

/// The largest request the server reads (the header and the variables).
pub const REQUEST_MAX: usize = 64 << 10;

pub mod clock_page;

/// Messages on the socket between the shim and the supervisor (one byte, then a `u32`).
pub mod msg {
    /// Supervisor → shim: attached to the process (the `u32` is the supervisor's pid).
    pub const ATTACHED: u8 = 1;
    /// Supervisor → shim: could not attach (the `u32` is the errno).
    pub const REFUSED: u8 = 2;
    /// Shim → supervisor: the filter's listener, as `SCM_RIGHTS`.
    pub const LISTENER: u8 = 3;
    /// Supervisor → shim: holds the listener and has taken its pages (a process that
    /// supervises itself; an exec'ing process does not wait for it).
    pub const READY: u8 = 4;
    /// Shim → supervisor: the exec failed (the `u32` is the errno); detach.
    pub const EXEC_FAILED: u8 = 5;
    /// Shim → server: a supervisor is wanted ([`super::REQUEST_HEADER`]).
    pub const REQUEST: u8 = 6;
}
