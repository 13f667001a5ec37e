//! `--warp`'s waiter board, the last region of the run table ([`crate::RunTable`]).

use core::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64};

use crate::VPID_LIMIT;

/// Slots of the waiter board: threads of the run in a timed wait at the same time.
pub const WAITER_SLOTS: usize = 2048;

/// One thread in a timed wait under `--warp` (all zero = free).
#[repr(C)]
pub struct WaiterSlot {
    /// Real tid of the waiter; 0 free. Claimed by a CAS from 0; a slot whose tid is dead
    /// (`tgkill(pid, tid, 0)` fails, or a zombie) is free to take back.
    pub tid: AtomicI32,
    /// Real pid (thread group) of the waiter.
    pub pid: AtomicI32,
    /// The logical deadline (the waiter's `L` when the wait ends by its timeout).
    pub deadline: AtomicI64,
    /// Tie-break among equal deadlines: the waiting thread's lineage.
    pub key: AtomicU64,
    /// 1 while the waiter is in the shim's own bookkeeping between two real slices (running,
    /// but doing none of the program's work); 0 inside (or at the edge of) the real wait.
    pub phase: AtomicU32,
    pub _pad: u32,
}

/// `--warp`: a sleep or timed wait returns at once only when nothing in the run can run;
/// then the waiter with the earliest logical deadline goes first (shim/src/wait/warp.rs).
#[repr(C)]
pub struct WaiterBoard {
    /// Bumped on every change of a slot: an idle check that saw it move is void.
    pub gen: AtomicU64,
    /// One bit per virtual pid: set once its entry of `real_of` needs no more looking at by
    /// the idle check (the process is gone, or it is a thread its process's entry covers).
    pub settled: [AtomicU64; VPID_LIMIT / 64],
    pub slots: [WaiterSlot; WAITER_SLOTS],
    /// POSIX timers armed in the run: no wait warps past one's deadline before it expired.
    pub timers: [TimerSlot; TIMER_SLOTS],
}

/// Timers the waiter board holds at once (more are not seen by `--warp`).
pub const TIMER_SLOTS: usize = 64;

/// A POSIX timer armed in the run (`timer_settime`), which a warped wait must not jump past:
/// a watchdog process's timer (`timeout 1 sleep 5`) would fire first without `--warp`.
#[repr(C)]
pub struct TimerSlot {
    /// Real `CLOCK_MONOTONIC` time (ns) of its next expiry; 0 free, -1 being written. A slot
    /// whose expiry has passed is free again.
    pub until: AtomicI64,
    /// The logical deadline of that expiry (the arming thread's clock plus the timer's value).
    pub deadline: AtomicI64,
    /// Real pid << 32 | the kernel's timer id: a re-arm or a disarm finds its slot.
    pub owner: AtomicU64,
}
