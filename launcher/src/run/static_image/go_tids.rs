//! What the supervisor keeps of a Go image's in-image `gettid` (`serve/go_sys.rs`).

use seal_abi::supervised::go_sys::LEFT;

/// One process's in-image `gettid`: where its mapping is, the rewritten call (what the census
/// names the calls its code still sends after), the table's next free pair, and the virtual
/// tids left in the table for new threads to take.
#[derive(Clone, Copy, Debug)]
pub struct GoSys {
    pub base: u64,
    pub gettid: u64,
    pub next: usize,
    /// `runtime.clone`'s `gettid` (rewritten to call the code's copy, `CLONE_GETTID_AT`),
    /// what the census names that copy's calls after.
    pub clone_site: u64,
    /// Pairs are to be left, or are (once the image runs, `Supervisor::leave_tid_pairs`).
    pub clone: bool,
    /// The virtual tids left, by pair (0: none).
    pub left: [i32; LEFT],
    /// The pairs seen taken (a bit each), their threads registered.
    pub seen: u16,
    /// `runtime.sched_getaffinity`'s call, rewritten to the code's (0: it is not).
    pub affinity: u64,
}

const _: () = assert!(LEFT <= 16);

impl GoSys {
    /// The pairs left that no thread has been seen to take: `(pair, virtual tid)`.
    pub fn unseen(&self) -> impl Iterator<Item = (usize, i32)> + '_ {
        self.left
            .iter()
            .copied()
            .enumerate()
            .filter(move |&(k, v)| v != 0 && self.seen & (1 << k) == 0)
    }
}
