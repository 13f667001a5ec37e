//! The feeder on its own stack, sharing the opener's memory (`CLONE_VM`), so starting it costs
//! no page-table copy whatever the opener's size.
//!
//! Its stack and table live in a seal-owned range far below where the kernel places mappings
//! (`REGION_BASE`, mapped with `MAP_FIXED_NOREPLACE` and `MADV_DONTFORK`): the kernel's
//! top-down allocator picks the highest free gap, so these mappings (made and freed at times
//! only the feeder decides) never move where the program's own `mmap`s land. The
//! intermediate runs on a buffer in the opener's frame, which `CLONE_VFORK` keeps suspended
//! until the intermediate exits. The feeder unmaps its region and exits in assembly. When the
//! opener execs or exits, the feeder keeps the old address space (and its region) alive.

use core::arch::asm;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::serve::{feeder_setup, serve, Table};
use crate::core::sys;

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
