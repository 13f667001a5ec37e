//! The feeder: one small detached process per process image that writes the sealed streams of
//! every device pipe that image (and its fork children) opened, until each pipe's last reader
//! is gone, and exits [`LINGER_MS`] after its last pipe (see the parent module's doc for why it
//! is a process, and how it stays invisible to the program).
//!
//! Handing a pipe over: the opener makes the pipe, sends its write end (`SCM_RIGHTS`) and the
//! stream's key to the feeder's datagram socket (an abstract name with a random nonce, kept in
//! this image's memory, so fork children reach the same feeder), closes its own copy of the
//! write end and waits until the pipe has bytes: the feeder's first write is the
//! acknowledgement. A feeder that exits with the message still queued drops the write end with
//! the queue, so the opener sees end-of-file instead of bytes, forgets that feeder, starts a new
//! one and tries again: a pipe is never handed out without a writer.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::EntropyStream;
use crate::fd::check;
use crate::sys;

/// Bytes per feeder write: `PIPE_BUF`, so a non-blocking write is all or nothing.
const BLOCK: usize = 4096;
/// Blocks written into one pipe before the feeder looks at the others (and its socket).
const BLOCKS_PER_TURN: usize = 16;
/// Pipes one feeder serves; the next open starts another feeder.
const MAX_PIPES: usize = 1000;
/// How long a feeder with no pipe left waits for the next one before it exits.
const LINGER_MS: i64 = 250;
/// How long an opener waits for the feeder's first bytes before trying a new feeder.
const ACK_TIMEOUT_S: i64 = 2;

/// The nonce of this image's feeder socket name; 0 = none (yet).
static NAME: AtomicU64 = AtomicU64::new(0);

/// What an opener sends along with the pipe's write end: the stream's key.
#[repr(C)]
#[derive(Clone, Copy)]
struct Msg {
    seed: u64,
    id: u64,
}

/// The abstract socket address `\0seal-random-<nonce in hex>` and its length.
fn address(nonce: u64) -> (libc::sockaddr_un, u32) {
    // SAFETY: an all-zero sockaddr_un is a valid value of this plain C struct.
    let mut a: libc::sockaddr_un = unsafe { core::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let mut name = sys::StackBuf::<40>::new();
    name.push(b"seal-random-").push_hex(nonce);
    for (i, b) in name.as_bytes().iter().enumerate() {
        a.sun_path[i + 1] = *b as libc::c_char;
    }
    let len = core::mem::size_of::<libc::sa_family_t>() + 1 + name.as_bytes().len();
    (a, len as u32)
}

/// A new pipe whose read end (returned, `O_CLOEXEC|O_NONBLOCK`) yields the stream (`seed`,
/// `id`) forever, fed by this image's feeder (started if there is none). `Err(errno)` when no
/// feeder could take it.
pub(super) fn open_pipe(seed: u64, id: u64) -> Result<i32, i32> {
    let msg = Msg { seed, id };
    for _ in 0..4 {
        let mut fds = [0i32; 2];
        // SAFETY: fds is a valid out-array of two ints.
        check(unsafe {
            sys::syscall3(
                libc::SYS_pipe2,
                fds.as_mut_ptr() as i64,
                (libc::O_CLOEXEC | libc::O_NONBLOCK) as i64,
                0,
            )
        })?;
        let [rfd, wfd] = fds;
        let sent = hand_over(wfd, &msg);
        sys::close(wfd);
        match sent {
            Err(e) => {
                sys::close(rfd);
                return Err(e);
            }
            Ok(nonce) => {
                if first_bytes_arrive(rfd) {
                    return Ok(rfd);
                }
                // The feeder exited with our message queued, or was full: never again.
                sys::close(rfd);
                let _ = NAME.compare_exchange(nonce, 0, Relaxed, Relaxed);
            }
        }
    }
    Err(libc::EAGAIN)
}

/// Sends `wfd` and `msg` to this image's feeder, starting one when there is none or the last
/// one is gone. `Ok(nonce of the feeder's name)`.
fn hand_over(wfd: i32, msg: &Msg) -> Result<u64, i32> {
    // SAFETY: plain integer arguments.
    let sock = check(unsafe {
        sys::syscall3(
            libc::SYS_socket,
            libc::AF_UNIX as i64,
            (libc::SOCK_DGRAM | libc::SOCK_CLOEXEC) as i64,
            0,
        )
    })? as i32;
    let mut nonce = NAME.load(Relaxed);
    let mut result = Err(libc::EAGAIN);
    for _ in 0..3 {
        if nonce == 0 {
            nonce = match spawn() {
                Ok(n) => n,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
        }
        match send(sock, nonce, wfd, msg) {
            Ok(()) => {
                result = Ok(nonce);
                break;
            }
            // Nobody bound to that name any more (the feeder exited after lingering): forget it.
            Err(libc::ECONNREFUSED) | Err(libc::ENOENT) => {
                let _ = NAME.compare_exchange(nonce, 0, Relaxed, Relaxed);
                nonce = 0;
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    sys::close(sock);
    result
}

/// One datagram with the message and the write end to the feeder named by `nonce`.
fn send(sock: i32, nonce: u64, wfd: i32, msg: &Msg) -> Result<(), i32> {
    let (mut addr, addr_len) = address(nonce);
    let mut iov = libc::iovec {
        iov_base: msg as *const Msg as *mut libc::c_void,
        iov_len: core::mem::size_of::<Msg>(),
    };
    let mut control = [0u64; 4];
    // SAFETY: an all-zero msghdr is a valid value of this plain C struct.
    let mut mh: libc::msghdr = unsafe { core::mem::zeroed() };
    mh.msg_name = &mut addr as *mut _ as *mut libc::c_void;
    mh.msg_namelen = addr_len;
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    // SAFETY: CMSG_SPACE is pure arithmetic.
    mh.msg_controllen = unsafe { libc::CMSG_SPACE(4) } as usize;
    // SAFETY: the control buffer (32 bytes) holds one header with one int.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&mh);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(4) as usize;
        (libc::CMSG_DATA(c) as *mut i32).write_unaligned(wfd);
    }
    loop {
        // SAFETY: mh and everything it points to live until the call returns.
        let r = unsafe {
            sys::syscall3(
                libc::SYS_sendmsg,
                sock as i64,
                &mh as *const _ as i64,
                libc::MSG_NOSIGNAL as i64,
            )
        };
        match check(r) {
            Ok(_) => return Ok(()),
            Err(libc::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Waits until `rfd` has bytes (the feeder took the pipe) or ends (the feeder dropped it).
fn first_bytes_arrive(rfd: i32) -> bool {
    let limit = libc::timespec {
        tv_sec: ACK_TIMEOUT_S,
        tv_nsec: 0,
    };
    for _ in 0..1000 {
        let mut pfd = libc::pollfd {
            fd: rfd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd and timespec, no signal mask.
        let r = unsafe {
            sys::syscall6(
                libc::SYS_ppoll,
                &mut pfd as *mut _ as i64,
                1,
                &limit as *const _ as i64,
                0,
                8,
                0,
            )
        };
        match check(r) {
            Ok(0) => return false,
            Ok(_) => return pfd.revents & libc::POLLIN != 0,
            Err(libc::EINTR) => {}
            Err(_) => return false,
        }
    }
    false
}

/// Starts a feeder listening on a fresh name, publishes the name and returns its nonce.
fn spawn() -> Result<u64, i32> {
    let mut nonce = 0u64;
    // SAFETY: 8 writable bytes; the kernel's (unsealed) entropy only names the socket.
    unsafe {
        sys::syscall3(
            libc::SYS_getrandom,
            &mut nonce as *mut u64 as i64,
            8,
            libc::GRND_NONBLOCK as i64,
        )
    };
    nonce ^=
        (sys::gettid() as u64) << 32 ^ sys::clock_gettime(libc::CLOCK_MONOTONIC).tv_nsec as u64;
    nonce |= 1;
    // SAFETY: plain integer arguments.
    let sock = check(unsafe {
        sys::syscall3(
            libc::SYS_socket,
            libc::AF_UNIX as i64,
            (libc::SOCK_DGRAM | libc::SOCK_CLOEXEC) as i64,
            0,
        )
    })? as i32;
    let (addr, len) = address(nonce);
    let one: i32 = 1;
    // SAFETY (both): valid option value and address of the given lengths.
    let r = unsafe {
        sys::syscall6(
            libc::SYS_setsockopt,
            sock as i64,
            libc::SOL_SOCKET as i64,
            libc::SO_PASSCRED as i64,
            &one as *const i32 as i64,
            4,
            0,
        )
    };
    let r = check(r).and_then(|_| {
        check(unsafe {
            sys::syscall3(
                libc::SYS_bind,
                sock as i64,
                &addr as *const _ as i64,
                len as i64,
            )
        })
    });
    let r = r.and_then(|_| start(sock));
    // The feeder has its own copy of the socket (or there is no feeder).
    sys::close(sock);
    r?;
    NAME.store(nonce, Relaxed);
    Ok(nonce)
}

/// Starts the feeder process for the bound socket `sock`: on its own stack in a seal-owned
/// address range when it can (no copy of the opener's page tables), else as a copy-on-write
/// copy of the opener. Either way through an intermediate that exits at once, so the feeder is
/// reparented to init (or the nearest subreaper), which reaps it: no zombie is left behind
/// with the opener, however long the opener lives.
fn start(sock: i32) -> Result<(), i32> {
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
    let mut tries = 0;
    let r = loop {
        let r = match shared::spawn(sock) {
            Some(r) => r,
            // SAFETY: the children only make raw system calls.
            None => unsafe { spawn_copy(sock) },
        };
        // Under a process limit (cgroup pids.max, RLIMIT_NPROC) processes that exited a moment
        // ago may still count: try again for a little while.
        if r != -(libc::EAGAIN as i64) || tries == 50 {
            break r;
        }
        tries += 1;
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 2_000_000,
        };
        // SAFETY: a valid timespec, no remainder wanted.
        unsafe { sys::syscall3(libc::SYS_nanosleep, &pause as *const _ as i64, 0, 0) };
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
    check(r).map(|_| ())
}

/// Reaps the intermediate `pid` (exit signal 0: only `__WALL` sees it); its exit status.
fn reap(pid: i64) -> i32 {
    let mut status = 0i32;
    loop {
        // SAFETY: reaping our own intermediate child into a valid int.
        let r = unsafe {
            sys::syscall6(
                libc::SYS_wait4,
                pid,
                &mut status as *mut i32 as i64,
                libc::__WALL as i64,
                0,
                0,
                0,
            )
        };
        if r != -(libc::EINTR as i64) {
            return status;
        }
    }
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

/// The fallback: the intermediate and the feeder are copy-on-write copies of the opener
/// (`fork` without glibc's handlers); the feeder maps its table in its own address space.
/// `0` or `-errno`.
///
/// # Safety
/// Signals must be blocked; the children only make raw system calls.
unsafe fn spawn_copy(sock: i32) -> i64 {
    // SAFETY: the child branch below only makes raw system calls.
    let pid = unsafe { raw_fork_silent() };
    if pid == 0 {
        // The intermediate: fork the feeder and leave at once, so the feeder is reparented;
        // its exit status says whether the feeder started.
        // SAFETY: as above.
        let p2 = unsafe { raw_fork_silent() };
        if p2 == 0 {
            feeder_setup(sock);
            let table = sys::mmap_anon(core::mem::size_of::<Table>()) as *mut Table;
            if !table.is_null() {
                // SAFETY: a fresh zeroed mapping of the table's size; all-zero is empty.
                serve(sock, unsafe { &mut *table });
            }
            sys::exit_group(0);
        }
        sys::exit_group(if p2 < 0 { 1 } else { 0 });
    }
    if pid < 0 {
        return pid;
    }
    if reap(pid) != 0 {
        return -(libc::EAGAIN as i64);
    }
    0
}

/// The feeder on its own stack, sharing the opener's memory (`CLONE_VM`), so starting it costs
/// no page-table copy whatever the opener's size.
///
/// Its stack and table live in a seal-owned range far below where the kernel places mappings
/// (`REGION_BASE`, mapped with `MAP_FIXED_NOREPLACE` and `MADV_DONTFORK`): the kernel's
/// top-down allocator picks the highest free gap, so these mappings (made and freed at times
/// only the feeder decides) never move where the program's own `mmap`s land. The
/// intermediate runs on a buffer in the opener's frame, which `CLONE_VFORK` keeps suspended
/// until the intermediate exits. The feeder unmaps its region and exits in assembly. When the
/// opener execs or exits, the feeder keeps the old address space (and its region) alive.
mod shared {
    use core::arch::asm;
    use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

    use super::{feeder_setup, serve, Table};
    use crate::sys;

    const CLONE_VM: i64 = 0x100;
    const CLONE_VFORK: i64 = 0x4000;
    const MAP_FIXED_NOREPLACE: i64 = 0x10_0000;
    const MADV_DONTFORK: i64 = 10;
    /// 62 TiB: far below the mmap area (just under 128 TiB) and far above brk heaps.
    const REGION_BASE: u64 = 0x3e5e_0000_0000;
    /// The feeder's stack, at the start of its region; the table follows it.
    const STACK: usize = 64 * 1024;
    /// Stack and table, rounded up to 64 KiB.
    const REGION: usize = (STACK + core::mem::size_of::<Table>() + 0xffff) & !0xffff;
    const SLOTS: u64 = 1 << 14;
    static NEXT_SLOT: AtomicU64 = AtomicU64::new(0);

    #[repr(C)]
    struct Args {
        sock: i32,
        region: u64,
    }

    /// What the intermediate reads and writes (in the opener's suspended frame).
    #[repr(C)]
    struct Hop {
        args: *mut Args,
        stack_top: u64,
        /// The feeder's pid or `-errno`, written by the intermediate.
        result: i64,
    }

    /// Maps a free region slot; `None` when the range is unusable.
    fn map_slot() -> Option<u64> {
        for _ in 0..64 {
            let slot = NEXT_SLOT.fetch_add(1, Relaxed) % SLOTS;
            let want = REGION_BASE + slot * REGION as u64;
            // SAFETY: a fixed mapping that refuses to replace anything already there.
            let got = unsafe {
                sys::syscall6(
                    libc::SYS_mmap,
                    want as i64,
                    REGION as i64,
                    (libc::PROT_READ | libc::PROT_WRITE) as i64,
                    (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE) as i64
                        | MAP_FIXED_NOREPLACE,
                    -1,
                    0,
                )
            };
            if got == want as i64 {
                // SAFETY: our own fresh mapping.
                unsafe { sys::syscall3(libc::SYS_madvise, got, REGION as i64, MADV_DONTFORK) };
                return Some(want);
            }
            if got >= 0 {
                // An old kernel took the address as a hint: not ours to use.
                // SAFETY: the mapping just made.
                unsafe { sys::munmap(got as *mut u8, REGION) };
                return None;
            }
            if got != -(libc::EEXIST as i64) {
                return None;
            }
        }
        None
    }

    /// Starts intermediate + feeder; `Some(0 or -errno)`, or `None` to fall back to copies.
    pub(super) fn spawn(sock: i32) -> Option<i64> {
        let region = map_slot()?;
        let args_at = (region + STACK as u64 - core::mem::size_of::<Args>() as u64) & !63;
        let args = args_at as *mut Args;
        // SAFETY: args lies inside our fresh, writable mapping.
        unsafe { args.write(Args { sock, region }) };
        let mut hop = Hop {
            args,
            stack_top: args_at & !15,
            result: -(libc::EAGAIN as i64),
        };
        let mut istack = [0u64; 1024];
        let itop = (istack.as_mut_ptr() as u64 + 8 * 1024) & !15;
        // SAFETY: the intermediate shares our memory and runs on `istack` while this thread is
        // suspended (CLONE_VFORK) until it exits; it only makes raw system calls.
        let pid = unsafe {
            clone_on(
                CLONE_VM | CLONE_VFORK,
                itop,
                intermediate as extern "C" fn(*mut Hop) -> ! as usize as u64,
                &mut hop as *mut Hop as u64,
            )
        };
        core::hint::black_box(&mut istack);
        if pid < 0 {
            // SAFETY: nobody else uses the region.
            unsafe { sys::munmap(region as *mut u8, REGION) };
            return Some(pid);
        }
        super::reap(pid);
        // SAFETY: written by the intermediate, which has exited.
        let result = unsafe { core::ptr::read_volatile(&hop.result) };
        if result < 0 {
            // SAFETY: no feeder runs on the region.
            unsafe { sys::munmap(region as *mut u8, REGION) };
            return Some(result);
        }
        Some(0)
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

    /// The intermediate: start the feeder (exit signal 0, shared memory), say how it went,
    /// exit.
    extern "C" fn intermediate(hop: *mut Hop) -> ! {
        // SAFETY: hop lives in the opener's frame, suspended until we exit.
        let (args, top) = unsafe { ((*hop).args, (*hop).stack_top) };
        // SAFETY: the feeder runs on its own region and never returns.
        let r = unsafe {
            clone_on(
                CLONE_VM,
                top,
                feeder as extern "C" fn(*mut Args) -> ! as usize as u64,
                args as u64,
            )
        };
        // SAFETY: as above.
        unsafe { core::ptr::write_volatile(&mut (*hop).result, r) };
        loop {
            // SAFETY: ends this task only.
            unsafe { sys::syscall3(libc::SYS_exit, 0, 0, 0) };
        }
    }

    /// The feeder: serve pipes until none is left for a while, then unmap the region it runs
    /// on and exit, in assembly (no stack use after the unmap).
    extern "C" fn feeder(args: *mut Args) -> ! {
        // SAFETY: args points into our own region, written before clone.
        let (sock, region) = unsafe { ((*args).sock, (*args).region) };
        feeder_setup(sock);
        // SAFETY: the table follows the stack in our fresh zeroed region; all-zero is empty.
        serve(sock, unsafe {
            &mut *((region + STACK as u64) as *mut Table)
        });
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
                in("rsi") REGION,
                options(noreturn),
            );
        }
    }
}

/// First thing a feeder does: its own session (no terminal signals), a name, no descriptor but
/// its socket.
fn feeder_setup(sock: i32) {
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
        close_all_but(sock);
    }
}

/// One pipe a feeder writes: its write end and its stream.
#[repr(C)]
struct Pipe {
    fd: i32,
    stream: EntropyStream,
}

/// A feeder's pipes and its poll list (slot 0: the socket). All-zero is an empty table.
#[repr(C)]
struct Table {
    n: usize,
    pipes: [Pipe; MAX_PIPES],
    polls: [libc::pollfd; MAX_PIPES + 1],
}

/// The feeder's loop: take new pipes from `sock`, write each pipe's stream as far as its
/// reader lets it, drop pipes whose readers are gone; return after [`LINGER_MS`] without pipes.
fn serve(sock: i32, t: &mut Table) {
    let mut buf = [0u8; BLOCK];
    let linger = libc::timespec {
        tv_sec: 0,
        tv_nsec: LINGER_MS * 1_000_000,
    };
    loop {
        let n = t.n;
        t.polls[0] = libc::pollfd {
            fd: sock,
            events: libc::POLLIN,
            revents: 0,
        };
        for i in 0..n {
            t.polls[i + 1] = libc::pollfd {
                fd: t.pipes[i].fd,
                events: libc::POLLOUT,
                revents: 0,
            };
        }
        let timeout = if n == 0 {
            &linger as *const libc::timespec as i64
        } else {
            0
        };
        // SAFETY: n + 1 valid pollfds; no signal mask change.
        let r = unsafe {
            sys::syscall6(
                libc::SYS_ppoll,
                t.polls.as_mut_ptr() as i64,
                (n + 1) as i64,
                timeout,
                0,
                8,
                0,
            )
        };
        if r == 0 && n == 0 {
            return;
        }
        if r < 0 {
            if n == 0 {
                return;
            }
            continue;
        }
        // Backwards, so a swap-remove only moves a pipe already looked at.
        for i in (0..n).rev() {
            let re = t.polls[i + 1].revents;
            let keep = if re & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                false
            } else if re & libc::POLLOUT != 0 {
                pump(&mut t.pipes[i], &mut buf)
            } else {
                true
            };
            if !keep {
                drop_pipe(t, i);
            }
        }
        if t.polls[0].revents & libc::POLLIN != 0 {
            while receive(sock, t, &mut buf) {}
        }
    }
}

/// Closes pipe `i` and moves the last one into its place.
fn drop_pipe(t: &mut Table, i: usize) {
    sys::close(t.pipes[i].fd);
    t.n -= 1;
    let last = t.n;
    if i != last {
        t.pipes[i].fd = t.pipes[last].fd;
        t.pipes[i].stream = t.pipes[last].stream;
    }
}

/// Writes up to [`BLOCKS_PER_TURN`] blocks of `p`'s stream; `false` once its reader is gone.
fn pump(p: &mut Pipe, buf: &mut [u8; BLOCK]) -> bool {
    for _ in 0..BLOCKS_PER_TURN {
        let at = p.stream.pos;
        p.stream.fill(buf);
        // SAFETY: buf is valid for BLOCK bytes.
        let r = unsafe {
            sys::syscall3(
                libc::SYS_write,
                p.fd as i64,
                buf.as_ptr() as i64,
                BLOCK as i64,
            )
        };
        match check(r) {
            Ok(n) if n as usize == BLOCK => {}
            // Not expected (a block is PIPE_BUF): the rest is written next time.
            Ok(n) => {
                p.stream.pos = at + n as u64;
                return true;
            }
            Err(libc::EAGAIN) | Err(libc::EINTR) => {
                p.stream.pos = at;
                return true;
            }
            Err(_) => return false,
        }
    }
    true
}

/// Takes one queued message from `sock`: a new pipe, fed at once (its first bytes tell the
/// opener the feeder has it). `false` when the queue is empty.
fn receive(sock: i32, t: &mut Table, buf: &mut [u8; BLOCK]) -> bool {
    let mut msg = Msg { seed: 0, id: 0 };
    let mut iov = libc::iovec {
        iov_base: &mut msg as *mut Msg as *mut libc::c_void,
        iov_len: core::mem::size_of::<Msg>(),
    };
    let mut control = [0u64; 16];
    // SAFETY: an all-zero msghdr is a valid value of this plain C struct.
    let mut mh: libc::msghdr = unsafe { core::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    mh.msg_controllen = core::mem::size_of_val(&control);
    // SAFETY: mh and everything it points to live until the call returns.
    let r = unsafe {
        sys::syscall3(
            libc::SYS_recvmsg,
            sock as i64,
            &mut mh as *mut _ as i64,
            (libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC) as i64,
        )
    };
    let Ok(len) = check(r) else {
        return false;
    };
    let mut fds = [-1i32; 4];
    let mut nfds = 0;
    let mut uid = u32::MAX;
    // SAFETY: walking the control messages the kernel wrote, within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&mh);
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            let bytes = (*c).cmsg_len as usize - (data as usize - c as usize);
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                for k in 0..bytes / 4 {
                    let fd = (data as *const i32).add(k).read_unaligned();
                    if nfds < fds.len() {
                        fds[nfds] = fd;
                        nfds += 1;
                    } else {
                        sys::close(fd);
                    }
                }
            } else if (*c).cmsg_level == libc::SOL_SOCKET
                && (*c).cmsg_type == libc::SCM_CREDENTIALS
                && bytes >= core::mem::size_of::<libc::ucred>()
            {
                uid = (data as *const libc::ucred).read_unaligned().uid;
            }
            c = libc::CMSG_NXTHDR(&mh, c);
        }
    }
    // Only whole messages with one pipe from this user; anything else is dropped (an opener
    // whose pipe is dropped sees end-of-file and starts another feeder).
    let valid = len as usize == core::mem::size_of::<Msg>() && nfds == 1 && uid == sys::geteuid();
    for &fd in &fds[..nfds] {
        if valid && t.n < MAX_PIPES {
            let i = t.n;
            t.pipes[i].fd = fd;
            t.pipes[i].stream = EntropyStream::new(msg.seed, msg.id);
            t.n += 1;
            if !pump(&mut t.pipes[i], buf) {
                drop_pipe(t, i);
            }
        } else {
            sys::close(fd);
        }
    }
    true
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
    fn socket_names_are_abstract_and_distinct() {
        let (a, la) = address(0x1234);
        let (b, lb) = address(0x1235);
        assert_eq!(a.sun_path[0], 0);
        assert_eq!(la, lb);
        assert_ne!(a.sun_path[..la as usize - 2], b.sun_path[..lb as usize - 2]);
    }
}
