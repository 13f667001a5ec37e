//! The observation layer: what one run of a command showed ([`Observation`], as it came;
//! [`Observed`], masked, as a golden stores it), how two observations differ (`compare`), the
//! files that count as its result (`artifacts`), and the one diff renderer (`diff`).

pub mod artifacts;
pub mod compare;
pub mod diff;
pub mod masks;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::census::Census;
use crate::run::Captured;

/// What one run of a command showed, unmasked: the raw material of every comparison.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    pub exit_code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub artifacts: artifacts::Files,
    /// The census of a sealed run (empty for an unsealed one).
    pub census: Census,
}

/// A census row of one process: (executable name, family, function, detail).
pub type ProcessRow = (String, String, String, Option<String>);

impl Observation {
    /// A sealed run and the artifacts collected after it.
    pub fn of(captured: Captured, artifacts: artifacts::Files) -> Observation {
        Observation {
            exit_code: captured.code(),
            stdout: captured.stdout,
            stderr: captured.stderr,
            artifacts,
            census: captured.census,
        }
    }

    /// sha256 over the exit status, stdout, stderr and each artifact (sorted by path), each part
    /// length-prefixed so that bytes cannot move between parts unnoticed.
    pub fn digest(&self) -> String {
        let mut h = Sha256::new();
        h.update(format!("exit {}\n", self.exit_code));
        h.update(format!("stdout {}\n", self.stdout.len()));
        h.update(&self.stdout);
        h.update(format!("stderr {}\n", self.stderr.len()));
        h.update(&self.stderr);
        for (path, content) in &self.artifacts {
            h.update(format!("artifact {} {}\n", path, content.len()));
            h.update(content);
        }
        hex(&h.finalize())
    }

    /// The observation with `mask` applied to every text, as a golden stores it.
    pub fn masked(&self, mut mask: impl FnMut(&str) -> String) -> Observed {
        Observed {
            exit_code: self.exit_code,
            stdout: Content::from_bytes(&self.stdout, &mut mask),
            stderr: Content::from_bytes(&self.stderr, &mut mask),
            artifacts: self
                .artifacts
                .iter()
                .map(|(p, b)| (p.clone(), Content::from_bytes(b, &mut mask)))
                .collect(),
            census: census_totals(&self.census),
        }
    }

    /// Call counts per process row; processes with the same executable are summed, so that
    /// virtual pids need not match between runs. Unsealed events count as `unsealed` rows.
    pub fn census_rows(&self) -> BTreeMap<ProcessRow, u64> {
        let mut m = BTreeMap::new();
        for p in &self.census.processes {
            let exe = std::path::Path::new(&p.exe)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| p.exe.clone());
            for call in &p.calls {
                let row = (
                    exe.clone(),
                    call.family.clone(),
                    call.symbol.clone(),
                    call.detail.clone(),
                );
                *m.entry(row).or_default() += call.count;
            }
            for u in &p.unsealed {
                let row = (
                    exe.clone(),
                    "unsealed".to_string(),
                    u.kind.clone(),
                    Some(u.detail.clone()),
                );
                *m.entry(row).or_default() += 1;
            }
        }
        m
    }
}

/// Census totals: family -> function -> calls.
pub type CensusTotals = BTreeMap<String, BTreeMap<String, u64>>;

pub fn census_totals(census: &Census) -> CensusTotals {
    let mut out = CensusTotals::new();
    for t in &census.totals {
        *out.entry(t.family.clone())
            .or_default()
            .entry(t.symbol.clone())
            .or_default() += t.count;
    }
    out
}

/// What one run produced, masked: the part of a golden that a run is compared against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    pub exit_code: i32,
    pub stdout: Content,
    pub stderr: Content,
    /// Relative path (from the working directory) -> content.
    pub artifacts: BTreeMap<String, Content>,
    pub census: CensusTotals,
}

/// Output of a command, after masking: text lines, or the hash of bytes that are not text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// UTF-8 text without NUL bytes, split after each `\n` (concatenation gives the text back).
    Text(Vec<String>),
    Binary {
        sha256: String,
        bytes: u64,
    },
}

impl Content {
    /// Text (masked) when `raw` is UTF-8 without NUL, else the sha256 of the raw bytes.
    pub fn from_bytes(raw: &[u8], mut mask: impl FnMut(&str) -> String) -> Content {
        match std::str::from_utf8(raw) {
            Ok(s) if !s.contains('\0') => Content::Text(split_lines(&mask(s))),
            _ => Content::Binary {
                sha256: hex(&Sha256::digest(raw)),
                bytes: raw.len() as u64,
            },
        }
    }

    pub fn text(&self) -> Option<String> {
        match self {
            Content::Text(lines) => Some(lines.concat()),
            Content::Binary { .. } => None,
        }
    }

    /// A short description for a one-line report.
    pub fn describe(&self) -> String {
        match self {
            Content::Text(l) => format!("text, {} lines", l.len()),
            Content::Binary { sha256, bytes } => {
                format!(
                    "binary, {bytes} bytes, sha256 {}",
                    &sha256[..16.min(sha256.len())]
                )
            }
        }
    }
}

/// Lines of `s`, each with its own `\n` (the last one may have none).
pub fn split_lines(s: &str) -> Vec<String> {
    s.split_inclusive('\n').map(str::to_string).collect()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An observation of exit 0 with `stdout` as its only output (for tests).
#[cfg(test)]
pub fn stdout_only(stdout: &str) -> Observed {
    Observed {
        exit_code: 0,
        stdout: Content::from_bytes(stdout.as_bytes(), |s| s.to_string()),
        stderr: Content::Text(vec![]),
        artifacts: BTreeMap::new(),
        census: CensusTotals::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_their_newlines() {
        assert_eq!(split_lines("a\nb"), ["a\n", "b"]);
        assert_eq!(split_lines(""), Vec::<String>::new());
        assert_eq!(
            Content::from_bytes(b"a\n\nb\n", |s| s.into())
                .text()
                .unwrap(),
            "a\n\nb\n"
        );
    }

    #[test]
    fn masking_keeps_raw_bytes_out_of_text() {
        let o = Observation {
            stdout: b"id 1\n".to_vec(),
            stderr: vec![0, 1],
            ..Default::default()
        };
        let m = o.masked(|s| s.replace('1', "[n]"));
        assert_eq!(m.stdout, Content::Text(vec!["id [n]\n".into()]));
        assert!(matches!(m.stderr, Content::Binary { bytes: 2, .. }));
        assert_eq!(o.digest().len(), 64);
    }
}
