//! A static C image's clock page as the supervisor holds it (`serve/ticking.rs` uses it): the
//! words `[REALTIME] = epoch + L` and `[MONOTONIC] = MONO_BASE + L + mono`, moved with atomics.

use std::sync::atomic::Ordering;

use seal_abi::supervised::clock_page as cp;

use super::vdso_clock::Page;

/// One process's clock page, as the supervisor holds it.
pub(super) struct Ticking {
    pub(super) page: Page,
    /// The private word in the image that names the page (0: it has been switched off).
    pub(super) pointer: u64,
    pub(super) epoch: i64,
    /// What `CLOCK_MONOTONIC` reads at `L = 0`.
    pub(super) mono_base: i64,
}

impl Ticking {
    pub(super) fn add(&self, word: usize, d: i64) -> i64 {
        self.page.word(word).fetch_add(d as u64, Ordering::AcqRel) as i64
    }
    fn get(&self, word: usize) -> i64 {
        self.page.word(word).load(Ordering::Acquire) as i64
    }
    /// The clock moved by a wait: the reads after it start again from none (`--spin-after`).
    pub(super) fn moved(&self) {
        self.page.word(cp::SINCE_MOVE).store(0, Ordering::Release);
    }
    pub(super) fn l(&self) -> i64 {
        self.get(cp::REALTIME) - self.epoch
    }
    pub(super) fn mono(&self) -> i64 {
        self.get(cp::MONOTONIC) - self.mono_base - self.l()
    }
}
