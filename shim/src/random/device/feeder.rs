//! The feeder: a tiny detached process that writes a device pipe's stream until the last
//! reader is gone (see the parent module's doc for why it is a process, and how it stays
//! invisible to the program).

use super::{EntropyStream, CHUNK};
use crate::fd::{check, write_all};
use crate::sys;

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
pub(super) fn spawn(wfd: i32, stream: &mut EntropyStream) -> Result<(), i32> {
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
    reap_finished();
    let mut tries = 0;
    let r = loop {
        let r = match shared::spawn(wfd, stream) {
            Some(r) => r,
            // SAFETY: the child branch only makes raw system calls.
            None => unsafe { spawn_copy(wfd, stream) },
        };
        // Under a process limit (cgroup pids.max, RLIMIT_NPROC) the feeders of descriptors
        // closed a moment ago may still count: reap them and try again for a little while.
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
        reap_finished();
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
    match check(r)? {
        FEEDER_STARTED => Ok(()),
        pid => {
            // The copy fallback: reap its intermediate (the feeder itself was reparented).
            loop {
                // SAFETY: reaping our own intermediate child; no status wanted.
                let r =
                    unsafe { sys::syscall6(libc::SYS_wait4, pid, 0, libc::__WALL as i64, 0, 0, 0) };
                if r != -(libc::EINTR as i64) {
                    break;
                }
            }
            Ok(())
        }
    }
}

/// What `shared::spawn` returns once the feeder runs (it is a direct child, reaped later).
const FEEDER_STARTED: i64 = 0;

/// Feeders this process started directly (clone children with exit signal 0: invisible to
/// the program's `wait`, `waitpid(-1)` and SIGCHLD), reaped by [`reap_finished`] at the next
/// device open. A feeder ends when its pipe's last reader is gone; reaping it here keeps
/// finished feeders from piling up as zombies (each counts against a cgroup's pids.max
/// until reaped: 3000 opens left 3000 zombies for 1–2 s when init had to reap them).
const MAX_FEEDERS: usize = 256;
static FEEDERS: [core::sync::atomic::AtomicI32; MAX_FEEDERS] =
    [const { core::sync::atomic::AtomicI32::new(0) }; MAX_FEEDERS];

/// Reaps every recorded feeder that has exited (never waits); forgets pids that are not our
/// children (a fork child inherits the table, not the feeders).
fn reap_finished() {
    use core::sync::atomic::Ordering::Relaxed;
    for slot in &FEEDERS {
        let pid = slot.load(Relaxed);
        if pid <= 0 {
            continue;
        }
        // SAFETY: a non-blocking reap of one pid; no status wanted.
        let r = unsafe {
            sys::syscall6(
                libc::SYS_wait4,
                pid as i64,
                0,
                (libc::WNOHANG | libc::__WALL) as i64,
                0,
                0,
                0,
            )
        };
        if r != 0 && r != -(libc::EINTR as i64) {
            let _ = slot.compare_exchange(pid, 0, Relaxed, Relaxed);
        }
    }
}

/// Remembers a directly started feeder; `false` when the table is full (the caller then
/// starts it the reparented way instead).
fn remember(pid: i32) -> bool {
    use core::sync::atomic::Ordering::Relaxed;
    FEEDERS
        .iter()
        .any(|s| s.compare_exchange(0, pid, Relaxed, Relaxed).is_ok())
}

/// Is there room to remember one more direct feeder?
fn room() -> bool {
    use core::sync::atomic::Ordering::Relaxed;
    FEEDERS.iter().any(|s| s.load(Relaxed) == 0)
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

    /// Starts the feeder as a direct child (exit signal 0, shared memory, its own stack);
    /// `Some(FEEDER_STARTED or -errno)`, or `None` to fall back to copies.
    pub(super) fn spawn(wfd: i32, stream: &EntropyStream) -> Option<i64> {
        if !super::room() {
            return None;
        }
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
        // SAFETY: the feeder runs on its own slot, only makes raw system calls and never
        // returns.
        let pid = unsafe {
            clone_on(
                CLONE_VM,
                args_at & !15,
                feeder as extern "C" fn(*mut Args) -> ! as usize as u64,
                args as u64,
            )
        };
        if pid < 0 {
            // SAFETY: nobody else uses the slot.
            unsafe { sys::munmap(region as *mut u8, STACK) };
            return Some(pid);
        }
        super::remember(pid as i32);
        Some(super::FEEDER_STARTED)
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
        if write_all(wfd, &buf).is_err() {
            return;
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
