//! libseal: the LD_PRELOAD shim that makes a command deterministic.
//!
//! It interposes libc's clocks, randomness, pids, host names, temp names and process creation,
//! answering from a logical clock and seeded streams, and counts every call into a crash-safe
//! census slot. x86_64 Linux with glibc only. The rules every module follows (docs/design.md):
//! never recurse (raw syscalls and `real!` for our own needs), never lock or allocate on a hot
//! path, never let a panic cross FFI, and report what cannot be sealed instead of pretending.
//!
//! The shim is in floors. `core` is the ground floor, which names no family: `hook` (the
//! `hook!` macro every exported entry point is written with), `census` (recording), `config`
//! (process settings), `thread` (per-thread state), `real` (real symbols, re-entry guard),
//! `sys` (raw system calls), `fd` (descriptors the shim makes, and forgetting the ones the
//! program closes), `table` (the run-wide table of pids and of the sealed world), `world`
//! (what the run's clock and name setters changed, instead of the machine), `backing`,
//! `streams` (per-stream slot tables), `vfork` (is this a vfork child?). Above it, one module
//! per family of calls: `clock`, `wait`, `random`, `process`, `host`, `tempname`, `causal`,
//! `files`, `net`; `open`, where path-based opens come in and are dispatched to `random`
//! (devices, uuid, boot id), `host` (hostname files) and `process` (`/proc/<vpid>` paths);
//! `runtime` (which clock reads are a language runtime's own bookkeeping), `py` (CPython's
//! frames for the census), `jvm` (the options a sealed JVM starts with, through the one
//! `dlsym` trampoline), `cpu` (`rdtsc` and `cpuid` made to fault and answered by a `SIGSEGV`
//! handler that chains to the program's), `machine` (CPU count and affinity, kernel release,
//! memory, directory order: the run's fixed values); `syscall`, the `syscall()` dispatcher.
//!
//! A descriptor's life (`read`, `close`, `fclose`, `dup*`) is hooked in `core::descriptors`,
//! and what families cache per descriptor is one table (`core::fd::mark`). Where `core` must
//! reach a family (a descriptor read, closed or copied, a runtime's call sites, a loaded
//! object), the family registers in a table below, at the root (`FD_READ`, `FD_CLOSING`,
//! `FD_FORGET`, `CENSUS_CAPTURE`, `CENSUS_OBJECT_SEEN`, …). They are consts, so each call
//! compiles to the direct call it replaces.
//!
//! Statics that every image's start reads or writes carry `#[link_section = ".data.seal_hot"]`
//! (the settings, identity, census and run-table pointers, `real!`'s caches, the descriptor
//! caches): the linker keeps one section together, so they share two pages instead of
//! faulting in a dozen scattered over libseal's 780 KiB of `.bss` (8 page faults fewer per
//! sealed command). A static that only some programs touch stays where it is.
//! `shim/layout/hot.ld` page-aligns that section and puts the code that short processes run
//! (found by tracing them) together at the front of `.text`: a sealed `date` then takes about
//! 16 page faults more than a bare one (under libfaketime's preload, 22).
//!
//! The embedded libseal (built with `panic=abort`, the launcher's build.rs) is `no_std`: it
//! needs nothing of std (no allocator, no threads, no I/O of std's), and linking std brought its
//! panic machinery along, backtrace symbolizer and all: a third of libseal's code and half its
//! relocations, which every sealed process loaded and relocated. Its panic handler is
//! `core/panic.rs`; per-thread cells are `thread_cell!` (`core/thread.rs`) instead of
//! `thread_local!`.
//! Unit tests (and any build that unwinds) keep std.
#![cfg_attr(all(panic = "abort", not(test)), no_std)]
#![deny(unsafe_op_in_unsafe_fn)]

// Without std nothing names libc to the linker: without this libseal would have no NEEDED
// entry and no symbol versions, its libc calls bound to whatever the process loaded first.
#[cfg(all(panic = "abort", not(test)))]
#[link(name = "c")]
extern "C" {}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu")))]
compile_error!("libseal supports x86_64 Linux with glibc only");

pub mod causal;
pub mod clock;
pub mod core;
pub mod cpu;
mod dlsym;
pub mod elf;
pub mod files;
pub mod host;
#[cfg(not(test))]
mod jvm;
pub mod machine;
pub mod net;
pub mod open;
pub mod process;
pub mod py;
pub mod random;
pub mod runtime;
mod syscall;
pub mod tempname;
pub mod wait;

// The wiring: what the floors below call up into, named here at the root (which names every
// module anyway) so that `core` names no family: a family registers by adding its function to
// a table, and `core` iterates the table. Consts, not statics: a call through them compiles to
// the direct call it was before (no indirection on a hot path).

/// What a family forgets when descriptor `fd` is closed or replaced ([`core::fd::forget`],
/// which zeroes the descriptor's row of the table, and leaves everything alone in a vfork
/// child): the sorted listings of `/proc` and of ordinary directories.
pub(crate) const FD_FORGET: [fn(i32); 3] = [
    open::listing::forget,
    machine::dirorder::release_fd,
    causal::forget_epoll,
];

/// The bytes of a row of the per-process descriptor table ([`core::fd::mark`]): whether a
/// descriptor is a causal channel ([`causal`]), what directory it lists ([`open::listing`]).
pub(crate) const FD_MARKS: usize = 2;
pub(crate) const FD_MARK_CAUSAL: usize = 0;
pub(crate) const FD_MARK_LISTING: usize = 1;

/// Who answers a `read` itself ([`core::descriptors`]): a sealed device pipe gives a whole
/// buffer, as the device would ([`random::device`]).
#[cfg(not(test))]
pub(crate) const FD_READ: [core::descriptors::ReadAnswer; 1] = [random::device::answer_read];

/// Who sees what a real `read` returned: data or end of file is a receive ([`causal`]).
#[cfg(not(test))]
pub(crate) const FD_READ_DONE: [fn(libc::c_int, libc::ssize_t) -> libc::ssize_t; 1] =
    [causal::hooks::after_read];

/// Who acts before `close` (a file written in the run records its writer's clock, [`files`]),
/// before `fclose` (the same for a stream that writes), and before `dup2`/`dup3` replace a
/// descriptor.
#[cfg(not(test))]
pub(crate) const FD_CLOSING: [fn(libc::c_int); 1] = [files::hooks::closing];
#[cfg(not(test))]
pub(crate) const FD_FCLOSING: [fn(*mut libc::FILE); 2] = [causal::fclosing, files::hooks::fclosing];
#[cfg(not(test))]
pub(crate) const FD_REPLACING: [fn(libc::c_int, libc::c_int); 1] = [files::hooks::replacing];

/// Who sees a successful `dup`/`dup2`/`dup3` of `old` to `new`: a copy of a device pipe is one
/// too ([`random::device`]).
#[cfg(not(test))]
pub(crate) const FD_DUPED: [fn(libc::c_int, libc::c_int); 1] = [random::device::on_dup];

/// Where the census asks a language runtime for the call site behind a counted call:
/// CPython's frames ([`py`]).
pub(crate) const CENSUS_CAPTURE: core::census::Capture = core::census::Capture {
    wanted: py::wanted,
    capture: py::capture,
    in_import_system: py::in_import_system,
};

/// Who looks at each object the census lists (its module walk): the runtimes whose clock
/// reads are bookkeeping ([`runtime`]) and CPython ([`py`]).
pub(crate) const CENSUS_OBJECT_SEEN: [fn(&core::census::Object); 2] = [
    |o| runtime::note_object(o.name, o.lo, o.hi, o.info),
    |o| py::note_object(o.name, o.info, o.file),
];

/// Runs once per sealed process image, right after its settings are loaded.
pub(crate) fn on_process_start() {
    use ::core::sync::atomic::Ordering::Relaxed;
    // First: it may correct the identity (vpid, generation) the census header records.
    process::on_start();
    core::census::open_image(
        core::config::VPID.load(Relaxed),
        core::config::PPID.load(Relaxed),
        core::config::GEN.load(Relaxed),
    );
    random::device::on_start();
    // Before `main`: a program's own copy of OpenSSL draws from the sealed stream.
    #[cfg(not(test))]
    random::openssl::patch_linked_copies();
    if core::config::SCOPED_OUT.load(Relaxed) {
        let mut exe = [0u8; 4096];
        let n = core::sys::readlink(b"/proc/self/exe\0", &mut exe);
        core::census::record_unsealed(seal_abi::unsealed::SCOPED_OUT, &exe[..n]);
    }
    files::on_start();
    #[cfg(not(test))]
    cpu::on_start();
}

/// libseal's constructor: initialise before `main` even if no hook has run yet.
#[cfg(not(test))]
extern "C" fn seal_init(
    argc: libc::c_int,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
) {
    // Before anything initialises: the census reads the image's arguments from here rather
    // than from /proc/self/cmdline (four system calls per image).
    core::census::set_args(argc, argv);
    if core::config::in_run() {
        // A dynamically linked Go program: its runtime's raw system calls go past libseal.
        if cpu::is_go_program() {
            // SAFETY: the constructor's environment vector; one thread runs.
            unsafe { process::static_image::supervise_go(envp) };
        }
        process::env::hide_from_environ();
    }
}

#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static SEAL_INIT: extern "C" fn(
    libc::c_int,
    *const *const libc::c_char,
    *const *const libc::c_char,
) = seal_init;
