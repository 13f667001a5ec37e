//! The fast paths' view of a thread's state (`clock::fast`, the sealed `getrandom`): the
//! hot-site entries that remember where the census counts a call site, read and written as one
//! instruction each, and the tick claimed by one `xadd`.

use super::{state_ptr, update_clock, update_field, with, HotSite, ThreadState, HOT_SITES};
use crate::core::config;

/// This thread's state for the fast paths (`clock::fast`, `census::bump_hot`): its address,
/// found once per call, without setting the thread up (an unset thread's entries are zero
/// and match no caller, so the fast paths only read a set-up state's other fields).
#[derive(Clone, Copy)]
pub struct Hot(*mut ThreadState);

/// This thread's [`Hot`] handle.
#[inline(always)]
pub fn hot() -> Hot {
    Hot(state_ptr())
}

impl Hot {
    /// The entry for hot site `site` (< [`HOT_SITES`]), read by one instruction: a signal
    /// handler on this thread that rewrites the entry runs before or after the load, never
    /// between its two halves, so the caller and the counter always belong together.
    #[inline(always)]
    pub fn entry<const SITE: usize>(self) -> (u64, *const core::sync::atomic::AtomicU64) {
        use core::arch::x86_64::{__m128i, _mm_cvtsi128_si64, _mm_unpackhi_epi64};
        const { assert!(SITE < HOT_SITES) };
        let v: __m128i;
        // SAFETY: one unaligned 16-byte load of the entry, which lies in this thread's live
        // TLS slot at `off`; SSE2 is baseline.
        unsafe {
            core::arch::asm!("movdqu {v}, xmmword ptr [{p} + {off}]", v = out(xmm_reg) v,
                             p = in(reg) self.0,
                             off = const core::mem::offset_of!(ThreadState, hot)
                                 + SITE * core::mem::size_of::<HotSite>(),
                             options(nostack, readonly, preserves_flags));
        }
        // SAFETY: SSE2 is baseline on x86_64.
        unsafe {
            (
                _mm_cvtsi128_si64(v) as u64,
                _mm_cvtsi128_si64(_mm_unpackhi_epi64(v, v)) as usize as *const _,
            )
        }
    }

    /// The thread's lineage ([`ThreadState::lineage`]); valid once an entry matched.
    #[inline(always)]
    pub fn lineage(self) -> u64 {
        // SAFETY: this thread's live TLS slot.
        unsafe { (*self.0).lineage }
    }

    /// The epoch copied with the entries ([`ThreadState::hot_epoch`]); valid once an entry
    /// matched.
    #[inline(always)]
    pub fn epoch(self) -> i64 {
        // SAFETY: this thread's live TLS slot.
        unsafe { (*self.0).hot_epoch }
    }

    /// [`read_and_tick`] on a set-up thread (an entry matched) under the fast path's
    /// conditions (no `LIBSEAL_SPIN_AFTER`, a tick within `1..=FAST_TICK_MAX`): the same
    /// claim, by one `xadd`. A clock returned above [`TICK_GUARD`] may have wrapped: the
    /// caller then calls [`saturate_after`].
    #[inline(always)]
    pub fn read_and_tick(self) -> i64 {
        // SAFETY: this thread's live, set-up slot.
        let tick = unsafe { (*self.0).hot_tick };
        let mut old = tick;
        // SAFETY: one `xadd` (no `lock`: the slot is this thread's own, and a signal is
        // delivered between instructions, never inside one) on the aligned clock field of
        // this thread's live slot: it claims the tick and returns the clock it found.
        unsafe {
            core::arch::asm!("xadd qword ptr [{p} + {off}], {v}", p = in(reg) self.0,
                             off = const core::mem::offset_of!(ThreadState, clock),
                             v = inout(reg) old, options(nostack));
        }
        old
    }

    /// [`mono_read_and_tick`] on a set-up thread under the fast path's conditions: `L` as it
    /// is, then `mono` advanced one tick by one `xadd`; returns `(L, mono before the tick)`
    /// (the read returns `L + mono + tick`). A `mono` returned above [`TICK_GUARD`] may
    /// have wrapped: the caller then calls [`saturate_mono_after`].
    #[inline(always)]
    pub fn mono_read_and_tick(self) -> (i64, i64) {
        // SAFETY: this thread's live, set-up slot; `L` is read first (as in
        // `mono_read_and_tick`).
        let (l, tick) = unsafe {
            (
                core::ptr::addr_of!((*self.0).clock).read_volatile(),
                (*self.0).hot_tick,
            )
        };
        let mut m = tick;
        // SAFETY: as in `read_and_tick`, on the `mono` field.
        unsafe {
            core::arch::asm!("xadd qword ptr [{p} + {off}], {v}", p = in(reg) self.0,
                             off = const core::mem::offset_of!(ThreadState, mono),
                             v = inout(reg) m, options(nostack));
        }
        (l, m)
    }

    /// The tick copied with the entries; valid once an entry matched.
    #[inline(always)]
    pub fn tick(self) -> i64 {
        // SAFETY: this thread's live TLS slot.
        unsafe { (*self.0).hot_tick }
    }
}

/// [`Hot::mono_read_and_tick`] found `mono` at `found`, above [`TICK_GUARD`]: it goes to the
/// cap if the tick wrapped it; returns `found`.
pub fn saturate_mono_after(found: i64) -> i64 {
    update_field(with(|t| core::ptr::addr_of_mut!(t.mono)), |v| {
        if v < found {
            i64::MAX
        } else {
            v
        }
    });
    found
}

/// A clock that [`Hot::read_and_tick`] returns above this was within
/// [`config::FAST_TICK_MAX`] of its cap: the caller then calls [`saturate_after`].
pub const TICK_GUARD: i64 = i64::MAX - config::FAST_TICK_MAX;

/// [`Hot::read_and_tick`] found the clock at `found`, above [`TICK_GUARD`]: its tick may
/// have wrapped the clock. The clock goes to the cap (as a saturating tick leaves it);
/// returns `found`, what the read returns.
pub fn saturate_after(found: i64) -> i64 {
    update_clock(|v| if v < found { i64::MAX } else { v });
    found
}

/// Remembers `count` as where the census counts calls of hot site `site` from `caller`,
/// written by one instruction (see [`hot_load`]).
pub fn hot_store(site: usize, caller: u64, count: *const core::sync::atomic::AtomicU64) {
    if site < HOT_SITES {
        // `with` sets the thread up first: an entry only ever belongs to a set-up thread.
        with(|t| {
            t.hot_tick = config::tick();
            t.hot_epoch = config::epoch_ns();
        });
        hot_write(site, caller, count);
    }
}

/// Writes hot site `site`'s entry by one instruction, whatever the thread's state.
fn hot_write(site: usize, caller: u64, count: *const core::sync::atomic::AtomicU64) {
    use core::arch::x86_64::{__m128i, _mm_set_epi64x};
    // SAFETY: SSE2 is baseline on x86_64.
    let v: __m128i = unsafe { _mm_set_epi64x(count as usize as i64, caller as i64) };
    // SAFETY: the entry lies in this thread's live TLS slot; one unaligned 16-byte store.
    unsafe {
        let at = core::ptr::addr_of_mut!((*state_ptr()).hot[site]);
        core::arch::asm!("movdqu xmmword ptr [{p}], {v}", v = in(xmm_reg) v, p = in(reg) at,
                         options(nostack, preserves_flags));
    }
}

/// Forgets every hot-site entry of this thread (its census mapping changed: a fork child).
pub fn hot_forget() {
    for site in 0..HOT_SITES {
        hot_write(site, 0, core::ptr::null());
    }
}
