//! What the supervisor keeps of a Go image's in-image `gettid` (`serve/go_sys.rs`).

/// One process's in-image `gettid`: where its mapping is, the rewritten call (what the census
/// names the calls its code still sends after), and the table's next free pair.
#[derive(Clone, Copy, Debug)]
pub struct GoSys {
    pub base: u64,
    pub gettid: u64,
    pub next: usize,
}
