//! Reads of `/dev/urandom`, `/dev/random`, `/proc/sys/kernel/random/uuid` and `boot_id` (and,
//! when the host family is sealed, `/proc/sys/kernel/hostname` and `/etc/hostname`), however
//! they are opened and however they are read.
//!
//! # Why the seal is at `open`, not at `read`
//!
//! Hooking `read` cannot work: stdio's `fread` calls libc's internal read (not the PLT), and a
//! shell's `tr -dc a-z0-9 < /dev/urandom` reads an fd that its parent opened before exec, in a
//! process that never asked for the device by name. So the *open* is what we replace: every
//! open-family hook (`device/hooks.rs`: `open`, `open64`, `openat`, `openat64`, the fortify
//! `__open_2` family, `fopen`, `fopen64`, `freopen`, `freopen64`) hands back a descriptor whose
//! contents already are the seeded bytes, and then any reader — `read`, stdio, an exec'd child
//! that inherited it, `head -c`, `od` — sees the sealed stream.
//!
//! * `/dev/urandom`, `/dev/random`: a **pipe**. Its write end is fed by a tiny detached
//!   *feeder* process that writes the ChaCha stream keyed by (seed, the opening thread's
//!   lineage, that thread's count of device opens) until the last reader closes (`EPIPE`),
//!   then exits. The opener writes the first [`PREFILL`] bytes itself before returning, so a
//!   first read of up to 4 KiB (even `O_NONBLOCK`) never finds the pipe empty.
//!   The feeder is made with the raw `clone` system call and exit signal 0, twice: an
//!   intermediate process forks the feeder and exits at once, and the opener reaps the
//!   intermediate with `__WALL`. A child with exit signal 0 is a "clone child", invisible to a
//!   program's `wait()`/`waitpid(-1)`/`SIGCHLD`, and the feeder itself ends up reparented to
//!   init (or the nearest subreaper), which reaps it. The feeder is a copy of someone else's
//!   process, so it only makes raw system calls: it blocks every signal (inherited from the
//!   opener, which blocks them around `clone`), starts its own session (no terminal signals),
//!   closes every other descriptor (`close_range`), names itself `seal-random`, and writes.
//!   It touches no thread-local storage and nothing of libc.
//!   Alternatives considered: a `CLONE_VM` feeder on its own stack avoids the copy-on-write
//!   cost but changes the opener's address space at a time only the feeder decides (a freed
//!   stack leaves a hole later `mmap`s may or may not reuse: nondeterministic addresses); a
//!   thread feeder dies at exec, which is exactly when `cmd < /dev/urandom` needs it; a
//!   memfd is finite.
//! * `uuid`: a memfd holding a fresh version-4 uuid from the same per-open stream, so two reads
//!   of the file give two different uuids, the same ones every run.
//! * `boot_id`: a memfd holding one uuid per run, derived from the seed alone.
//! * `hostname` files: a memfd holding the sealed host name and a newline.
//!
//! Only read-only opens are sealed. Write-only opens (feeding the pool) pass through; a
//! read-write open passes through too, with an `unsealed` event and a warning. Paths are
//! recognised after collapsing `//` and `/./`; a device reached through a symlink, a relative
//! path, a directory fd, or a raw `SYS_open` system call is not recognised (see docs/names.md).

use core::cell::Cell;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use seal_abi::{device, flags, unsealed};

use super::EntropyStream;
use crate::{census, config, sys, thread};

#[cfg(not(test))]
pub(crate) mod hooks;

/// Bytes the opener writes into the pipe itself before handing it out.
pub const PREFILL: usize = 4096;
/// Bytes the feeder generates per `write`.
const CHUNK: usize = 16384;
/// Lineage kind for the per-open device streams (distinct from processes/threads/images).
const KIND_DEVICE_OPEN: u64 = 0xde71_ce00;
/// Stream id of the run's boot id.
const BOOT_ID_STREAM: u64 = 0xb007_1d00_5ea1_0001;

/// What a path names, if it is one of ours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A random device: the [`seal_abi::device`] index (URANDOM, RANDOM).
    Stream(u8),
    Uuid,
    BootId,
    /// The host name file: the kernel's (`/proc/sys/kernel/hostname`) or `/etc/hostname`.
    HostName {
        kernel: bool,
    },
}

impl Target {
    /// The census detail byte.
    pub fn detail(self) -> u8 {
        match self {
            Target::Stream(d) => d,
            Target::Uuid => device::UUID,
            Target::BootId => device::BOOT_ID,
            Target::HostName { .. } => seal_abi::NO_DETAIL,
        }
    }
    /// The family that must be sealed for us to answer.
    pub fn family(self) -> u32 {
        match self {
            Target::HostName { .. } => flags::HOST,
            _ => flags::RANDOM,
        }
    }
}

/// Classifies `path` (bytes, no NUL). Cheap for the common case: anything not starting with
/// `/d`, `/p`, `/e` or a doubled slash is rejected after two byte compares.
pub fn classify(path: &[u8]) -> Option<Target> {
    if path.len() < 2 || path[0] != b'/' || !matches!(path[1], b'd' | b'p' | b'e' | b'/' | b'.') {
        return None;
    }
    let mut norm = [0u8; 48];
    let n = normalise(path, &mut norm)?;
    match &norm[..n] {
        b"/dev/urandom" => Some(Target::Stream(device::URANDOM)),
        b"/dev/random" => Some(Target::Stream(device::RANDOM)),
        b"/proc/sys/kernel/random/uuid" => Some(Target::Uuid),
        b"/proc/sys/kernel/random/boot_id" => Some(Target::BootId),
        b"/proc/sys/kernel/hostname" => Some(Target::HostName { kernel: true }),
        b"/etc/hostname" => Some(Target::HostName { kernel: false }),
        _ => None,
    }
}

/// Collapses repeated slashes and `/./` components into `out`; `None` if it does not fit.
fn normalise(path: &[u8], out: &mut [u8; 48]) -> Option<usize> {
    let mut n = 0;
    let mut i = 0;
    while i < path.len() {
        let c = path[i];
        if c == b'/' {
            if n > 0 && out[n - 1] == b'/' {
                i += 1;
                continue;
            }
            if path.get(i + 1) == Some(&b'.') && path.get(i + 2) == Some(&b'/') {
                i += 2;
                continue;
            }
        }
        if n == out.len() {
            return None;
        }
        out[n] = c;
        n += 1;
        i += 1;
    }
    Some(n)
}

thread_local! {
    /// (lineage the count belongs to, device opens made by this thread so far).
    static OPENS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// The stream for the next device open on this thread.
fn next_open_stream() -> EntropyStream {
    let lineage = thread::with(|t| t.lineage);
    let idx = OPENS.with(|c| {
        let (l, n) = c.get();
        let n = if l == lineage { n } else { 0 };
        c.set((lineage, n + 1));
        n
    });
    EntropyStream::new(
        config::SEED.load(Relaxed),
        seal_abi::child_lineage(lineage, KIND_DEVICE_OPEN, idx),
    )
}

/// Formats 16 random bytes as a version-4 uuid line (`8-4-4-4-12\n`, lowercase).
pub fn uuid_text(mut b: [u8; 16]) -> [u8; 37] {
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let mut out = [0u8; 37];
    let mut o = 0;
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out[o] = b'-';
            o += 1;
        }
        for nib in [byte >> 4, byte & 0xf] {
            out[o] = if nib < 10 {
                b'0' + nib
            } else {
                b'a' + nib - 10
            };
            o += 1;
        }
    }
    out[36] = b'\n';
    out
}

/// The run's boot id (one per seed).
pub fn boot_id() -> [u8; 37] {
    let mut b = [0u8; 16];
    EntropyStream::new(config::SEED.load(Relaxed), BOOT_ID_STREAM).fill(&mut b);
    uuid_text(b)
}

/// What to do with an open of one of our paths.
pub enum Outcome {
    /// Not sealed here: call the real function.
    PassThrough,
    /// Our descriptor.
    Fd(i32),
    /// Failed with this errno (set it, return -1).
    Err(i32),
}

/// Opens `target` sealed, honouring `O_CLOEXEC` and `O_NONBLOCK` of `oflags`.
pub fn open_sealed(target: Target, oflags: i32) -> Outcome {
    if !config::sealed(target.family()) {
        return Outcome::PassThrough;
    }
    let acc = oflags & libc::O_ACCMODE;
    if target == (Target::HostName { kernel: true })
        && acc != libc::O_RDONLY
        && (sys::geteuid() == 0 || crate::world::may(crate::world::CAP_DAC_OVERRIDE))
    {
        // Writing the kernel's host name file would rename the machine (the kernel asks only
        // for write access to the root-owned file, no capability): the write goes to
        // /dev/null instead, and says so (sethostname changes the sealed name). Whoever may
        // not write it gets the kernel's refusal, as bare.
        let m = b"a write to /proc/sys/kernel/hostname is dropped (sethostname changes the sealed name)";
        census::record_unsealed(unsealed::UNSUPPORTED_CALL, m);
        sys::warn(m);
        let fd = sys::open(b"/dev/null\0", acc | (oflags & libc::O_CLOEXEC), 0);
        return if fd >= 0 {
            Outcome::Fd(fd)
        } else {
            Outcome::Err(-fd)
        };
    }
    if oflags & libc::O_PATH != 0 || acc == libc::O_WRONLY {
        return Outcome::PassThrough;
    }
    if acc != libc::O_RDONLY || oflags & (libc::O_DIRECTORY | libc::O_EXCL) != 0 {
        if acc == libc::O_RDWR {
            let mut m = sys::StackBuf::<96>::new();
            m.push(b"read-write open of ")
                .push(path_of(target))
                .push(b" is not sealed");
            census::record_unsealed(unsealed::UNSUPPORTED_CALL, m.as_bytes());
            sys::warn(m.as_bytes());
        }
        return Outcome::PassThrough;
    }
    let cloexec = oflags & libc::O_CLOEXEC != 0;
    let r = match target {
        Target::Stream(_) => {
            open_stream(next_open_stream(), cloexec, oflags & libc::O_NONBLOCK != 0)
        }
        Target::Uuid => {
            let mut b = [0u8; 16];
            next_open_stream().fill(&mut b);
            memfd_with(b"seal-uuid\0", &uuid_text(b), cloexec)
        }
        Target::BootId => memfd_with(b"seal-boot_id\0", &boot_id(), cloexec),
        Target::HostName { .. } => {
            let mut b = sys::StackBuf::<80>::new();
            let mut cur = [0u8; seal_abi::NAME_MAX];
            b.push(crate::world::hostname(&mut cur)).push(b"\n");
            memfd_with(b"seal-hostname\0", b.as_bytes(), cloexec)
        }
    };
    match r {
        Ok(fd) => Outcome::Fd(fd),
        Err(e) if e == libc::EMFILE || e == libc::ENFILE || e == libc::ENOMEM => Outcome::Err(e),
        Err(e) => {
            // The kernel refused a pipe, memfd or clone (seccomp, pid limit): fail loud, then
            // let the program have the real device rather than break it.
            let mut m = sys::StackBuf::<128>::new();
            m.push(b"cannot seal ")
                .push(path_of(target))
                .push(b" (errno ")
                .push_u64(e as u64)
                .push(b"); reads of it are NOT sealed");
            census::record_unsealed(unsealed::UNSUPPORTED_CALL, m.as_bytes());
            sys::warn(m.as_bytes());
            Outcome::PassThrough
        }
    }
}

fn path_of(target: Target) -> &'static [u8] {
    match target {
        Target::Stream(d) => device::PATHS[d as usize].as_bytes(),
        Target::Uuid => device::PATHS[device::UUID as usize].as_bytes(),
        Target::BootId => device::PATHS[device::BOOT_ID as usize].as_bytes(),
        Target::HostName { .. } => b"the hostname file",
    }
}

/// Result of a raw system call as `Result<value, errno>`.
fn check(r: i64) -> Result<i64, i32> {
    if (-4095..0).contains(&r) {
        Err(-r as i32)
    } else {
        Ok(r)
    }
}

fn close_keep_errno(fd: i32) {
    sys::close(fd);
}

/// A memfd holding `content`, positioned at its start.
fn memfd_with(name: &[u8], content: &[u8], cloexec: bool) -> Result<i32, i32> {
    let fl = if cloexec { libc::MFD_CLOEXEC } else { 0 };
    // SAFETY: name is NUL-terminated.
    let fd = check(unsafe {
        sys::syscall3(libc::SYS_memfd_create, name.as_ptr() as i64, fl as i64, 0)
    })? as i32;
    let mut done = 0;
    while done < content.len() {
        // SAFETY: the tail of content is valid.
        let r = unsafe {
            sys::syscall3(
                libc::SYS_write,
                fd as i64,
                content[done..].as_ptr() as i64,
                (content.len() - done) as i64,
            )
        };
        match check(r) {
            Ok(n) => done += n as usize,
            Err(libc::EINTR) => {}
            Err(e) => {
                close_keep_errno(fd);
                return Err(e);
            }
        }
    }
    // SAFETY: plain integers.
    unsafe { sys::syscall3(libc::SYS_lseek, fd as i64, 0, libc::SEEK_SET as i64) };
    Ok(fd)
}

/// A pipe whose read end yields `stream` forever (see the module doc).
fn open_stream(mut stream: EntropyStream, cloexec: bool, nonblock: bool) -> Result<i32, i32> {
    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid out-array of two ints.
    check(unsafe {
        sys::syscall3(
            libc::SYS_pipe2,
            fds.as_mut_ptr() as i64,
            libc::O_CLOEXEC as i64,
            0,
        )
    })?;
    let [rfd, wfd] = fds;
    let fail = |e: i32| {
        sys::close(rfd);
        sys::close(wfd);
        Err(e)
    };
    // Prefill: the pipe is empty and blocking, so this write completes at once.
    let mut first = [0u8; PREFILL];
    stream.fill(&mut first);
    let mut done = 0;
    while done < PREFILL {
        // SAFETY: the tail of `first` is valid.
        let r = unsafe {
            sys::syscall3(
                libc::SYS_write,
                wfd as i64,
                first[done..].as_ptr() as i64,
                (PREFILL - done) as i64,
            )
        };
        match check(r) {
            Ok(n) => done += n as usize,
            Err(libc::EINTR) => {}
            Err(e) => return fail(e),
        }
    }
    if let Err(e) = spawn_feeder(wfd, &mut stream) {
        return fail(e);
    }
    sys::close(wfd);
    // SAFETY (both): fcntl on our own fd with integer arguments.
    unsafe {
        if !cloexec {
            sys::syscall3(libc::SYS_fcntl, rfd as i64, libc::F_SETFD as i64, 0);
        }
        if nonblock {
            sys::syscall3(
                libc::SYS_fcntl,
                rfd as i64,
                libc::F_SETFL as i64,
                libc::O_NONBLOCK as i64,
            );
        }
    }
    register(rfd);
    Ok(rfd)
}

/// Descriptors (below [`TRACKED`]) that this process opened as a sealed device pipe, and the
/// pipe's inode, so `read` can tell a device pipe from whatever reused the number later.
const TRACKED: usize = 1 << 16;
static DEVICE_FD_BITS: [AtomicU64; TRACKED / 64] = [const { AtomicU64::new(0) }; TRACKED / 64];
static DEVICE_FD_INO: [AtomicU64; TRACKED] = [const { AtomicU64::new(0) }; TRACKED];

fn fifo_ino(fd: i32) -> Option<u64> {
    // SAFETY: an all-zero stat is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: st is a valid out-pointer.
    let r = unsafe { sys::syscall3(libc::SYS_fstat, fd as i64, &mut st as *mut _ as i64, 0) };
    (r == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO).then_some(st.st_ino)
}

fn track_ino(fd: i32, ino: u64) {
    if fd >= 0 && (fd as usize) < TRACKED {
        DEVICE_FD_INO[fd as usize].store(ino, Relaxed);
        DEVICE_FD_BITS[fd as usize / 64].fetch_or(1 << (fd % 64), Relaxed);
    }
}

/// `dup2(old, new)` and friends succeeded: `new` is a device pipe if `old` is.
pub fn on_dup(old: i32, new: i32) {
    if is_device_fd(old) {
        track_ino(new, DEVICE_FD_INO[old as usize].load(Relaxed));
    }
}

/// `<run dir>/devpipe.<inode>`: the run-wide registry of device pipes, so a process that
/// inherited one across exec (`cmd < /dev/urandom`) recognises it at start.
fn registry_path(ino: u64, out: &mut sys::StackBuf<4200>) {
    out.push(config::RUN_DIR.get())
        .push(b"/devpipe.")
        .push_u64(ino);
}

fn register(fd: i32) {
    if let Some(ino) = fifo_ino(fd) {
        track_ino(fd, ino);
        let mut p = sys::StackBuf::<4200>::new();
        registry_path(ino, &mut p);
        let f = sys::open(
            p.as_cstr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
            0o600,
        );
        if f >= 0 {
            sys::close(f);
        }
    }
}

/// At process start: standard descriptors that are device pipes made earlier in this run
/// (inherited through exec) read full buffers too.
pub fn on_start() {
    for fd in 0..3 {
        if let Some(ino) = fifo_ino(fd) {
            let mut p = sys::StackBuf::<4200>::new();
            registry_path(ino, &mut p);
            // SAFETY: an all-zero stat is a valid value of this plain C struct.
            let mut st: libc::stat = unsafe { core::mem::zeroed() };
            // SAFETY: NUL-terminated path, valid out-pointer.
            let r = unsafe {
                sys::syscall6(
                    libc::SYS_newfstatat,
                    libc::AT_FDCWD as i64,
                    p.as_cstr().as_ptr() as i64,
                    &mut st as *mut _ as i64,
                    0,
                    0,
                    0,
                )
            };
            if r == 0 {
                track_ino(fd, ino);
            }
        }
    }
}

/// Is `fd` (still) a device pipe this process opened? One load for every other descriptor.
#[inline(always)]
pub fn is_device_fd(fd: i32) -> bool {
    if fd < 0 || fd as usize >= TRACKED {
        return false;
    }
    if DEVICE_FD_BITS[fd as usize / 64].load(Relaxed) & (1 << (fd % 64)) == 0 {
        return false;
    }
    is_device_fd_slow(fd)
}

#[cold]
fn is_device_fd_slow(fd: i32) -> bool {
    if fifo_ino(fd) == Some(DEVICE_FD_INO[fd as usize].load(Relaxed)) {
        return true;
    }
    // Closed and reused for something else: forget it.
    DEVICE_FD_BITS[fd as usize / 64].fetch_and(!(1 << (fd % 64)), Relaxed);
    false
}

/// `read` on a device pipe: like the real device, fill the whole buffer (a pipe hands out at
/// most what the feeder has written so far), and never fail with `EAGAIN` on a non-blocking
/// descriptor. Stops early only on EOF or an error.
///
/// # Safety
/// `buf` is valid for `len` bytes.
pub unsafe fn read_full(fd: i32, buf: *mut u8, len: usize) -> isize {
    let mut done = 0usize;
    while done < len {
        // SAFETY: the tail of buf is valid per the contract.
        let r = unsafe {
            sys::syscall3(
                libc::SYS_read,
                fd as i64,
                buf.add(done) as i64,
                (len - done) as i64,
            )
        };
        match check(r) {
            Ok(0) => break,
            Ok(n) => done += n as usize,
            Err(libc::EINTR) if done == 0 => {
                // SAFETY: errno is thread-local.
                unsafe { *libc::__errno_location() = libc::EINTR };
                return -1;
            }
            Err(libc::EINTR) => {}
            Err(libc::EAGAIN) => {
                // Non-blocking: the real device never says "try again", and the feeder is
                // about to write. Wait for it.
                let mut pfd = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, no timeout, no signal mask.
                unsafe { sys::syscall6(libc::SYS_ppoll, &mut pfd as *mut _ as i64, 1, 0, 0, 8, 0) };
            }
            Err(_) if done > 0 => break,
            Err(e) => {
                // SAFETY: errno is thread-local.
                unsafe { *libc::__errno_location() = e };
                return -1;
            }
        }
    }
    done as isize
}

/// Raw `clone` with no flags and exit signal 0: a copy-on-write copy of this process (like
/// `fork`, without glibc's fork handlers) that is a "clone child" for `wait`.
///
/// # Safety
/// In the child only raw system calls may follow (no libc, no locks, no TLS).
unsafe fn raw_fork_silent() -> i64 {
    // SAFETY: flags 0 = no sharing, exit signal 0; stack 0 = the (copied) current stack.
    unsafe { sys::syscall6(libc::SYS_clone, 0, 0, 0, 0, 0, 0) }
}

/// Starts the detached feeder for `wfd`, continuing `stream`: on its own stack in a
/// seal-owned address range when it can (no copy of the opener's page tables), else as a
/// copy-on-write copy of the opener.
fn spawn_feeder(wfd: i32, stream: &mut EntropyStream) -> Result<(), i32> {
    // Block every signal around clone: the children start with all signals blocked, so no
    // handler of the program ever runs in them.
    let all: u64 = !0;
    let mut old: u64 = 0;
    // SAFETY: valid sigset pointers of the kernel's size (8 bytes).
    unsafe {
        sys::syscall6(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK as i64,
            &all as *const u64 as i64,
            &mut old as *mut u64 as i64,
            8,
            0,
            0,
        )
    };
    let pid = match shared::spawn(wfd, stream) {
        Some(pid) => pid,
        // SAFETY: the child branch only makes raw system calls.
        None => unsafe { spawn_copy(wfd, stream) },
    };
    // SAFETY: restoring the mask saved above.
    unsafe {
        sys::syscall6(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK as i64,
            &old as *const u64 as i64,
            0,
            8,
            0,
            0,
        )
    };
    let pid = check(pid)?;
    loop {
        // SAFETY: reaping our own intermediate child; no status wanted.
        let r = unsafe { sys::syscall6(libc::SYS_wait4, pid, 0, libc::__WALL as i64, 0, 0, 0) };
        if r != -(libc::EINTR as i64) {
            break;
        }
    }
    Ok(())
}

/// The fallback: the intermediate and the feeder are copy-on-write copies of the opener
/// (`fork` without glibc's handlers). Costs two page-table copies of the opener.
///
/// # Safety
/// Signals must be blocked; the children only make raw system calls.
unsafe fn spawn_copy(wfd: i32, stream: &mut EntropyStream) -> i64 {
    // SAFETY: the child branch below only makes raw system calls.
    let pid = unsafe { raw_fork_silent() };
    if pid == 0 {
        // The intermediate: fork the feeder and leave at once, so the feeder is reparented.
        // SAFETY: as above.
        let p2 = unsafe { raw_fork_silent() };
        if p2 == 0 {
            feeder_setup(wfd);
            feed(wfd, stream);
            sys::exit_group(0);
        }
        sys::exit_group(0);
    }
    pid
}

/// The feeder on its own stack, sharing the opener's memory (`CLONE_VM`), so starting it costs
/// no page-table copy whatever the opener's size.
///
/// Its stack lives in a seal-owned range far below where the kernel places mappings
/// (`REGION_BASE`, mapped with `MAP_FIXED_NOREPLACE` and `MADV_DONTFORK`): the kernel's
/// top-down allocator picks the highest free gap, so these mappings (made and freed at times
/// only the feeder decides) never move where the program's own `mmap`s land. The
/// intermediate runs on a buffer in the opener's frame, which `CLONE_VFORK` keeps suspended
/// until the intermediate exits. The feeder unmaps its stack and exits in assembly.
mod shared {
    use core::arch::asm;
    use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

    use super::{feed, feeder_setup, EntropyStream};
    use crate::sys;

    const CLONE_VM: i64 = 0x100;
    const CLONE_VFORK: i64 = 0x4000;
    const MAP_FIXED_NOREPLACE: i64 = 0x10_0000;
    const MADV_DONTFORK: i64 = 10;
    /// 62 TiB: far below the mmap area (just under 128 TiB) and far above brk heaps.
    const REGION_BASE: u64 = 0x3e5e_0000_0000;
    const STACK: usize = 64 * 1024;
    const SLOTS: u64 = 1 << 16;
    static NEXT_SLOT: AtomicU64 = AtomicU64::new(0);

    #[repr(C)]
    struct Args {
        wfd: i32,
        region: u64,
        stack_top: u64,
        stream: EntropyStream,
    }

    /// Maps a free 64 KiB stack slot; `None` when the range is unusable.
    fn map_slot() -> Option<u64> {
        for _ in 0..64 {
            let slot = NEXT_SLOT.fetch_add(1, Relaxed) % SLOTS;
            let want = REGION_BASE + slot * STACK as u64;
            // SAFETY: a fixed mapping that refuses to replace anything already there.
            let got = unsafe {
                sys::syscall6(
                    libc::SYS_mmap,
                    want as i64,
                    STACK as i64,
                    (libc::PROT_READ | libc::PROT_WRITE) as i64,
                    (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as i64 | MAP_FIXED_NOREPLACE,
                    -1,
                    0,
                )
            };
            if got == want as i64 {
                // SAFETY: our own fresh mapping.
                unsafe { sys::syscall3(libc::SYS_madvise, got, STACK as i64, MADV_DONTFORK) };
                return Some(want);
            }
            if got >= 0 {
                // An old kernel took the address as a hint: not ours to use.
                // SAFETY: the mapping just made.
                unsafe { sys::munmap(got as *mut u8, STACK) };
                return None;
            }
            if got != -(libc::EEXIST as i64) {
                return None;
            }
        }
        None
    }

    /// Starts intermediate + feeder; `Some(intermediate pid or -errno)`, or `None` to fall
    /// back to copies.
    pub(super) fn spawn(wfd: i32, stream: &EntropyStream) -> Option<i64> {
        let region = map_slot()?;
        let args_at = (region + STACK as u64 - core::mem::size_of::<Args>() as u64) & !63;
        let args = args_at as *mut Args;
        // SAFETY: args lies inside our fresh, writable mapping.
        unsafe {
            args.write(Args {
                wfd,
                region,
                stack_top: args_at & !15,
                stream: *stream,
            })
        };
        let mut istack = [0u64; 1024];
        let itop = (istack.as_mut_ptr() as u64 + 8 * 1024) & !15;
        // SAFETY: the intermediate shares our memory and runs on `istack` while this thread is
        // suspended (CLONE_VFORK) until it exits; it only makes raw system calls.
        let pid = unsafe {
            clone_on(
                CLONE_VM | CLONE_VFORK,
                itop,
                intermediate as extern "C" fn(*mut Args) -> ! as usize as u64,
                args as u64,
            )
        };
        core::hint::black_box(&mut istack);
        if pid < 0 {
            // SAFETY: nobody else uses the slot.
            unsafe { sys::munmap(region as *mut u8, STACK) };
        }
        Some(pid)
    }

    /// `clone(flags)` with the child starting on `stack_top` in `entry(arg)` (never returns).
    ///
    /// # Safety
    /// `stack_top` is 16-byte aligned writable memory the child may use; `entry` never
    /// returns and only makes raw system calls.
    unsafe fn clone_on(flags: i64, stack_top: u64, entry: u64, arg: u64) -> i64 {
        let ret: i64;
        // SAFETY: per the contract; the child never comes back into this frame.
        unsafe {
            asm!(
                "syscall",
                "test rax, rax",
                "jnz 2f",
                "xor ebp, ebp",
                "mov rdi, r12",
                "call r13",
                "ud2",
                "2:",
                inlateout("rax") libc::SYS_clone => ret,
                in("rdi") flags,
                in("rsi") stack_top,
                in("rdx") 0,
                in("r10") 0,
                in("r8") 0,
                in("r12") arg,
                in("r13") entry,
                lateout("rcx") _,
                lateout("r11") _,
            );
        }
        ret
    }

    /// The intermediate: start the feeder (exit signal 0, shared memory) and exit.
    extern "C" fn intermediate(args: *mut Args) -> ! {
        // SAFETY: args points into the feeder's mapping, written before clone.
        let top = unsafe { (*args).stack_top };
        // SAFETY: the feeder runs on its own slot and never returns.
        unsafe {
            clone_on(
                CLONE_VM,
                top,
                feeder as extern "C" fn(*mut Args) -> ! as usize as u64,
                args as u64,
            )
        };
        loop {
            // SAFETY: ends this task only.
            unsafe { sys::syscall3(libc::SYS_exit, 0, 0, 0) };
        }
    }

    /// The feeder: write the stream until the reader is gone, then unmap the stack it runs on
    /// and exit, in assembly (no stack use after the unmap).
    extern "C" fn feeder(args: *mut Args) -> ! {
        // SAFETY: args points into our own stack slot, written before clone.
        let a = unsafe { &mut *args };
        feeder_setup(a.wfd);
        feed(a.wfd, &mut a.stream);
        let region = a.region;
        // SAFETY: after munmap nothing touches memory; exit ends the task.
        unsafe {
            asm!(
                "syscall",
                "mov eax, {exit}",
                "xor edi, edi",
                "syscall",
                "ud2",
                exit = const libc::SYS_exit,
                in("rax") libc::SYS_munmap,
                in("rdi") region,
                in("rsi") STACK,
                options(noreturn),
            );
        }
    }
}

/// First thing a feeder does: its own session (no terminal signals), a name, no descriptor but
/// the pipe's write end.
fn feeder_setup(wfd: i32) {
    // SAFETY (all): raw system calls with integer arguments or pointers to constants.
    unsafe {
        sys::syscall3(libc::SYS_setsid, 0, 0, 0);
        sys::syscall6(
            libc::SYS_prctl,
            libc::PR_SET_NAME as i64,
            c"seal-random".as_ptr() as i64,
            0,
            0,
            0,
            0,
        );
        close_all_but(wfd);
    }
}

/// Writes `stream` into `wfd` until the reader is gone (`EPIPE`: SIGPIPE is blocked).
fn feed(wfd: i32, stream: &mut EntropyStream) {
    let mut buf = [0u8; CHUNK];
    loop {
        stream.fill(&mut buf);
        let mut done = 0;
        while done < CHUNK {
            // SAFETY: the tail of buf is valid.
            let r = unsafe {
                sys::syscall3(
                    libc::SYS_write,
                    wfd as i64,
                    buf[done..].as_ptr() as i64,
                    (CHUNK - done) as i64,
                )
            };
            if r == -(libc::EINTR as i64) {
                continue;
            }
            if r <= 0 {
                return;
            }
            done += r as usize;
        }
    }
}

/// Closes every descriptor except `keep`.
///
/// # Safety
/// Only for the feeder, which owns nothing else.
unsafe fn close_all_but(keep: i32) {
    const SYS_CLOSE_RANGE: i64 = 436;
    let mut ok = true;
    // SAFETY (all): closing descriptors in our own (copied) table.
    unsafe {
        if keep > 0 {
            ok &= sys::syscall3(SYS_CLOSE_RANGE, 0, keep as i64 - 1, 0) == 0;
        }
        ok &= sys::syscall3(SYS_CLOSE_RANGE, keep as i64 + 1, u32::MAX as i64, 0) == 0;
        if !ok {
            for fd in 0..65536i64 {
                if fd != keep as i64 {
                    sys::syscall3(libc::SYS_close, fd, 0, 0);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_our_paths_only() {
        assert_eq!(
            classify(b"/dev/urandom"),
            Some(Target::Stream(device::URANDOM))
        );
        assert_eq!(
            classify(b"//dev/./urandom"),
            Some(Target::Stream(device::URANDOM))
        );
        assert_eq!(
            classify(b"/dev/random"),
            Some(Target::Stream(device::RANDOM))
        );
        assert_eq!(
            classify(b"/proc/sys/kernel/random/uuid"),
            Some(Target::Uuid)
        );
        assert_eq!(
            classify(b"/proc/sys/kernel/random/boot_id"),
            Some(Target::BootId)
        );
        assert_eq!(
            classify(b"/etc/hostname"),
            Some(Target::HostName { kernel: false })
        );
        for p in [
            &b"/dev/urandom2"[..],
            b"dev/urandom",
            b"/dev/null",
            b"/etc/hosts",
            b"/",
            b"",
            b"/dev/../dev/urandom",
            b"/proc/sys/kernel/random/uuid/",
        ] {
            assert_eq!(classify(p), None, "{}", String::from_utf8_lossy(p));
        }
        let long = [b'/'; 300];
        assert_eq!(classify(&long), None);
    }

    #[test]
    fn read_full_waits_for_the_writer_and_tracking_follows_the_pipe() {
        let mut fds = [0i32; 2];
        // SAFETY: a valid out-array.
        assert_eq!(
            unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK) },
            0
        );
        let [r, w] = fds;
        assert!(!is_device_fd(r));
        track_ino(r, fifo_ino(r).unwrap());
        assert!(is_device_fd(r));
        let writer = std::thread::spawn(move || {
            for i in 0..3u8 {
                std::thread::sleep(std::time::Duration::from_millis(20));
                // SAFETY: a valid buffer and our pipe.
                unsafe { libc::write(w, [i; 1000].as_ptr() as *const libc::c_void, 1000) };
            }
            // SAFETY: our fd.
            unsafe { libc::close(w) };
        });
        let mut buf = vec![0u8; 3000];
        // SAFETY: buf is valid for its length.
        let n = unsafe { read_full(r, buf.as_mut_ptr(), buf.len()) };
        writer.join().unwrap();
        assert_eq!(n, 3000);
        assert_eq!((buf[0], buf[1500], buf[2999]), (0, 1, 2));
        // SAFETY: our fd.
        unsafe { libc::close(r) };
        // The number now names something else (or nothing): no longer a device pipe.
        assert!(!is_device_fd(r));
    }

    #[test]
    fn uuid_text_is_v4() {
        let t = uuid_text([0xff; 16]);
        assert_eq!(&t, b"ffffffff-ffff-4fff-bfff-ffffffffffff\n");
        let t = uuid_text([0; 16]);
        assert_eq!(&t, b"00000000-0000-4000-8000-000000000000\n");
    }
}
