//! A Go process's in-image random numbers as the census counts them: where the mapping of
//! `seal_abi::supervised::go_rand` is in the process, what its draws are named, and the
//! counts it started from; read from the process's memory (its counters are private to it).

use seal_abi::supervised::{go_rand, go_wyrand};
use seal_abi::Fid;

use super::remote::read;

/// A process's in-image random numbers: where its mapping is, what the census counts its draws
/// as, and the counts it started from (a forked child's copy of its parent's).
#[derive(Clone, Copy, Debug)]
pub struct Rands {
    base: u64,
    fids: [Fid; 2],
    /// Whether the map code's inlined copies draw from it (Go 1.19–1.21, `go_wyrand`).
    wy: bool,
    /// Whether `selectgo`'s inlined copies draw from it (`go_select`), and whether on 32 bits.
    select: Option<bool>,
    start: [u64; 3],
    /// A jump that must be in place before its counters are believed (libseal made the
    /// mapping, in a cgo program): its address and bytes.
    check: Option<(u64, [u8; 5])>,
}

impl Rands {
    pub fn new(base: u64, sites: &go_rand::Sites, check: bool) -> Option<Rands> {
        let first = *sites.patches(base)?.iter().find(|p| p.0 != 0)?;
        Some(Rands {
            base,
            fids: go_rand::census_fids(sites),
            wy: sites.inlined[0].0 != 0,
            select: (sites.select[0].0 != 0).then_some(sites.select[0].1 & go_wyrand::NARROW != 0),
            start: [0; 3],
            check: check.then_some(first),
        })
    }

    /// The draws process `pid` made through it so far (`None`: it cannot be read, or it is
    /// not in place).
    pub fn draws(&self, pid: i32) -> Option<[u64; 3]> {
        if let Some((at, want)) = self.check {
            let mut got = [0u8; 5];
            if !read(pid, at, &mut got) || got != want {
                return None;
            }
        }
        let mut page = [0u8; go_rand::COUNTERS_BYTES];
        if !read(pid, self.base + go_rand::COUNT_AT as u64, &mut page) {
            return None;
        }
        let d = go_rand::draws(&page, self.select == Some(true))?;
        Some([0, 1, 2].map(|i| d[i].wrapping_sub(self.start[i])))
    }

    /// The same for process `child`, forked (a copy) from the process of this: from the
    /// counts its copy holds now.
    pub fn forked(&self, child: i32) -> Option<Rands> {
        let mut r = Rands {
            start: [0; 3],
            ..*self
        };
        r.start = r.draws(child)?;
        Some(r)
    }

    /// The mapping's addresses (the census's module `[seal in-image rand]`).
    pub fn range(&self) -> (u64, u64) {
        (self.base, self.base + go_rand::MAP_BYTES as u64)
    }

    /// The census rows of draws `d` ([`Rands::draws`]): `(function, caller, count)`, each
    /// named after the piece of code it is drawn by (the caller: its first byte + 1).
    pub fn rows(&self, d: [u64; 3]) -> impl Iterator<Item = (Fid, u64, u64)> {
        let main = self.base + go_rand::MAIN_AT as u64 + 1;
        let wy = self.base + go_wyrand::TRAMPOLINES_AT as u64 + 1;
        let select = self.base + go_rand::SELECT_TRAMPOLINE_AT as u64 + 1;
        let rows = [
            (self.fids[0], main, d[0]),
            (self.fids[1], wy, d[1]),
            (Fid::GoSelect, select, d[2]),
        ];
        let keep = [true, self.wy, self.select.is_some()];
        rows.into_iter().zip(keep).filter(|r| r.1).map(|r| r.0)
    }
}
