//! Static images under system-call supervision (the launcher's half; the contract is
//! `seal_abi::supervised`, the shim's half `shim/src/process/static_image.rs`).
//!
//! Three hidden entry points of the `seal` binary, taken before the command line is parsed:
//! - `seal __static-server FD`: the run's supervision server, started by libseal at the run's
//!   first static exec; it forks one supervisor per static image ([`server`]).
//! - `seal __static-supervisor FD PID`: one supervisor, forked by the server (or started by
//!   libseal in a process about to exec a static binary when there can be no server). It
//!   attaches to that process with ptrace, takes the seccomp listener the process
//!   installs, fixes the new image's auxiliary vector at the exec stop, detaches, then answers
//!   the image's clock, entropy, pid and host-name system calls until every process that
//!   carries the filter has gone ([`serve`]).
//! - `seal __exec-static PATH ARGV0 ARGS…`: the trampoline, a dynamic program libseal loads
//!   into, that execs PATH so that libseal's exec hook sets the supervision up as for any
//!   other exec: for a static binary `posix_spawn` starts, and for a static root command when
//!   the launcher's child cannot set the supervision up itself ([`root`]: it normally does, and
//!   execs the binary directly).

mod attach;
mod auxv;
mod batch;
mod census;
mod clock_state;
mod dir_streams;
mod exe_map;
mod exec_child;
mod feeds;
mod go_clock;
mod go_entropy;
mod go_exe;
mod go_tids;
mod go_unsealed;
mod image_exe;
mod maps;
mod notif;
mod page;
mod pid_state;
mod rand_counts;
mod remote;
mod root;
mod run_pids;
mod serve;
mod server;
mod spare;
mod stop;
mod text;
mod trace_call;
mod vdso_clock;
mod vdso_rest;
mod world;

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use seal_abi::supervised::{SERVER_ARG, SUPERVISOR_ARG};

pub use root::RootExec;

/// The trampoline's argument (`seal __exec-static PATH ARGV0 ARGS…`).
pub const EXEC_ARG: &str = seal_abi::supervised::EXEC_STATIC_ARG;

/// Runs one of the hidden entry points when `args` names one: returns its exit status.
pub fn entry(args: &[OsString]) -> Option<i32> {
    match args.get(1).and_then(|a| a.to_str()) {
        Some(SUPERVISOR_ARG) => Some(attach::supervise(&args[2..])),
        Some(SERVER_ARG) => Some(server::run(&args[2..])),
        Some(EXEC_ARG) => Some(exec_static(&args[2..])),
        _ => None,
    }
}

/// Is the executable at `path` a Go program (whose `partly sealed` line says what stays real
/// of its runtime's random numbers)?
pub fn is_go_program(path: &str) -> bool {
    auxv::file_is_go(path)
}

/// The census line for a static binary that ran supervised: what stayed real in it; a Go
/// image's random numbers as its process's census says (`random`: its `go-runtime-random`
/// event, if any).
pub fn partly_sealed_line(program: &str, random: Option<&str>) -> String {
    let go = auxv::file_is_go(program);
    let (cost, rand) = if go {
        go_unsealed::notes(program, random)
    } else {
        ("", String::new())
    };
    let (served, real) = if go {
        // Its clock is read from a page (`go_clock.rs`), its `crypto/rand` from a window of its
        // stream in the image unless its functions cannot be found (`go_entropy.rs`).
        (
            if cost.is_empty() {
                "clocks (one per process, read from a page seal's supervisor shares with it, \
                 moved by its timer waits), entropy (crypto/rand from a window of its stream in \
                 the image), pid and host name"
            } else {
                "clocks (one per process, read from a page seal's supervisor shares with it, \
                 moved by its timer waits), entropy, pid and host name"
            },
            rand.as_str(),
        )
    } else {
        // Its clock entries read a page of its own (`serve/ticking.rs`); only other clock ids,
        // sleeps and a forked child's clock reach the supervisor.
        (
            "clocks are read from a page seal's supervisor shares with it; entropy, pid and \
             host name",
            "",
        )
    };
    format!(
        "partly sealed (static-binary-supervised): {program}: {served} are sealed by seal's \
         supervisor{cost}; real: {real}/proc listings, file times, rdtsc"
    )
}

/// The census line for a dynamically linked Go program under the supervisor (`random` as for
/// [`partly_sealed_line`]).
pub fn go_line(program: &str, random: Option<&str>) -> String {
    let (cost, rand) = go_unsealed::notes(program, random);
    format!(
        "partly sealed (go-runtime-supervised): {program}: libseal seals its C library's calls; \
         the Go runtime's clocks (one per process, read from a page, moved by its timer waits) \
         and raw getpid, getrandom, uname and signal calls are sealed by seal's supervisor{cost}; \
         real: {rand}tids of its other threads, pids of children it starts"
    )
}

/// The socket pair of a static root command and its supervisor ([`server::root_pair`]):
/// the child's end (for [`RootExec`]) and the supervisor's (for the run's watch, which forks
/// it: [`serve_root`]).
pub fn root_pair() -> Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    server::root_pair()
}

pub use auxv::notes_say_go;
pub use server::{fork_server, serve_root};

/// Puts what the libseal of a dynamically linked Go root command at `exe` looks up in its
/// executable (`go_exe::keep_for_root`) in the run directory `run_dir`.
pub fn keep_go_root(exe: &Path, run_dir: &Path) {
    go_exe::keep_for_root(exe, run_dir, go_exe::user_cache().as_deref());
}

/// The link in the run directory that libseal execs as the supervisor.
pub fn link_in(run_dir: &Path) -> PathBuf {
    run_dir.join(seal_abi::supervised::SUPERVISOR_LINK)
}

/// Makes the run directory's link to this `seal` binary.
pub fn make_link(run_dir: &Path) -> std::io::Result<()> {
    let exe = std::env::current_exe()?;
    match std::os::unix::fs::symlink(exe, link_in(run_dir)) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// Can this kernel supervise a static image (seccomp user notifications: Linux 5.0, with
/// `SECCOMP_USER_NOTIF_FLAG_CONTINUE`: 5.5)? Asked once.
pub fn available() -> bool {
    static YES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *YES.get_or_init(|| {
        let mut sizes = [0u16; 3];
        // SAFETY: SECCOMP_GET_NOTIF_SIZES writes three u16 into `sizes`.
        unsafe { libc::syscall(libc::SYS_seccomp, 3, 0, sizes.as_mut_ptr()) == 0 }
    })
}

/// The trampoline: exec PATH with ARGV0 and ARGS (through libc's `execv`, which libseal
/// hooks). Returns only when the exec failed (status 127, as a shell says "not found", or 126).
fn exec_static(args: &[OsString]) -> i32 {
    let (Some(path), Some(_)) = (args.first(), args.get(1)) else {
        eprintln!("seal: {EXEC_ARG}: a program and its argv[0] are needed");
        return 2;
    };
    let c = |s: &OsStr| CString::new(s.as_bytes()).unwrap_or_default();
    let path_c = c(path);
    let argv: Vec<CString> = args[1..].iter().map(|a| c(a)).collect();
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: a NUL-terminated path and argument vector that outlive the call.
    unsafe { libc::execv(path_c.as_ptr(), ptrs.as_ptr()) };
    let err = std::io::Error::last_os_error();
    eprintln!("seal: cannot run {}: {err}", Path::new(path).display());
    if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}
