//! `--shard K/N`: which of N machines of a CI matrix checks a case. The assignment depends on
//! the case's name only (the first 8 bytes of its sha256, big-endian, mod N, is shard K-1), so
//! it is the same on every machine, Rust version and order of cases in `seal.toml`, and the N
//! shards together check every case exactly once.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

/// The most shards a suite can be split into (a CI matrix wider than this is a typo).
pub const MAX_SHARDS: u32 = 1000;

/// Shard `index` (1-based) of `total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub total: u32,
}

impl Shard {
    /// The shard (1-based) that checks the case named `name`, of `total`.
    pub fn of(name: &str, total: u32) -> u32 {
        let digest = Sha256::digest(name.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        (u64::from_be_bytes(first) % u64::from(total)) as u32 + 1
    }

    /// Does this shard check the case named `name`?
    pub fn holds(&self, name: &str) -> bool {
        Shard::of(name, self.total) == self.index
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.total)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// `K/N` with 1 <= K <= N <= [`MAX_SHARDS`] (what clap prints after `invalid value`).
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("expected K/N with 1 <= K <= N <= {MAX_SHARDS}, e.g. 2/4");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let num = |t: &str| -> Result<u32, String> {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            t.parse::<u32>().map_err(|_| bad())
        };
        let (index, total) = (num(k)?, num(n)?);
        if total == 0 || total > MAX_SHARDS {
            return Err(format!("N must be 1 to {MAX_SHARDS} (got {n})"));
        }
        if index == 0 || index > total {
            return Err(format!("K must be 1 to N = {total} (got {k})"));
        }
        Ok(Shard { index, total })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        assert_eq!("2/4".parse::<Shard>(), Ok(Shard { index: 2, total: 4 }));
        assert_eq!("1/1".parse::<Shard>().unwrap().to_string(), "1/1");
        for bad in [
            "", "1", "0/3", "4/3", "1/0", "-1/3", "+1/3", "1/3/5", "a/b", " 1/3", "1/1001",
        ] {
            assert!(bad.parse::<Shard>().is_err(), "{bad:?} accepted");
        }
        assert!("1000/1000".parse::<Shard>().is_ok());
    }

    /// Pinned values: the assignment must never change between seal versions or machines,
    /// or a CI matrix would check some cases twice and others never across an upgrade.
    #[test]
    fn assignment_is_pinned() {
        // sha256("report") starts 845e91831319e89c (`printf %s report | sha256sum`): 1 of 4.
        let got: Vec<u32> = ["report", "pipeline", "writer"]
            .iter()
            .map(|n| Shard::of(n, 4))
            .collect();
        assert_eq!(got, PINNED);
        for total in 1..=7 {
            for name in ["a", "b", "report"] {
                let held: Vec<u32> = (1..=total)
                    .filter(|&k| Shard { index: k, total }.holds(name))
                    .collect();
                assert_eq!(held.len(), 1, "{name} in {held:?} of {total}");
            }
        }
    }

    const PINNED: [u32; 3] = [1, 1, 3];
}
