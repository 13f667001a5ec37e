//! Running one case sealed: stale artifacts removed, the command run with its stdin and env,
//! its artifacts collected, everything masked, and the census reduced to its totals.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use anyhow::{Context, Result};

use super::file::{CensusTotals, Content, Observed};
use super::suite::Case;
use crate::run::{self, Input};

/// One sealed pass of a case.
#[derive(Debug, Clone)]
pub struct Pass {
    pub observed: Observed,
    /// Artifact globs that matched no file.
    pub unmatched: Vec<String>,
    /// Masks that matched somewhere in this pass.
    pub masks_used: Vec<String>,
    /// Unsealed-event warnings from the census.
    pub warnings: Vec<String>,
    /// Sealed process images in the census (0: nothing was sealed, e.g. a static binary).
    pub processes: usize,
}

/// Why a pass could not produce an observation.
#[derive(Debug)]
pub enum PassError {
    /// The case itself is wrong (command not found, unreadable stdin): names the key.
    Case { key: &'static str, msg: String },
    /// seal itself failed.
    Seal(anyhow::Error),
}

/// Matches of `pattern` (relative to `cwd`): regular files, as relative paths.
fn matches(cwd: &Path, pattern: &str) -> Vec<String> {
    let full = format!(
        "{}/{}",
        glob::Pattern::escape(&cwd.to_string_lossy()),
        pattern
    );
    let Ok(paths) = glob::glob(&full) else {
        return Vec::new();
    };
    let mut out: Vec<String> = paths
        .filter_map(|p| p.ok())
        .filter(|p| p.is_file())
        .filter_map(|p| {
            p.strip_prefix(cwd)
                .ok()
                .map(|r| r.to_string_lossy().into_owned())
        })
        .collect();
    out.sort();
    out
}

/// Artifacts are outputs: files matching the globs are removed before each pass, so a file
/// left by an earlier run can never pass for one this run did not write.
fn remove_stale(case: &Case) -> Result<()> {
    for g in &case.artifacts {
        for rel in matches(&case.cwd, g) {
            let p = case.cwd.join(&rel);
            std::fs::remove_file(&p)
                .with_context(|| format!("cannot remove stale artifact {}", p.display()))?;
        }
    }
    Ok(())
}

pub fn census_totals(census: &crate::census::Census) -> CensusTotals {
    let mut out = CensusTotals::new();
    for t in &census.totals {
        *out.entry(t.family.clone())
            .or_default()
            .entry(t.symbol.clone())
            .or_default() += t.count;
    }
    out
}

/// Runs `case` once, sealed.
pub fn run_pass(case: &Case) -> Result<Pass, PassError> {
    remove_stale(case).map_err(PassError::Seal)?;
    let stdin = match &case.stdin {
        Some(p) => Some(std::fs::read(p).map_err(|e| PassError::Case {
            key: "stdin",
            msg: format!("cannot read {}: {e}", p.display()),
        })?),
        None => None,
    };
    let input = match &stdin {
        Some(b) => Input::Bytes(b),
        None => Input::Null,
    };
    let argv: Vec<OsString> = case.argv.iter().map(OsString::from).collect();
    let captured = run::run_captured_within(
        &case.settings,
        &argv,
        Some(&case.cwd),
        &case.env,
        input,
        case.timeout,
    )
    .map_err(PassError::Seal)?
    .map_err(|e| PassError::Case {
        key: "cmd",
        msg: e.to_string(),
    })?;
    if let (true, Some(limit)) = (captured.timed_out, case.timeout) {
        return Err(PassError::Case {
            key: "timeout",
            msg: format!(
                "did not finish within {} and was killed (with every process it started)",
                humantime::format_duration(limit)
            ),
        });
    }
    let mut used: Vec<String> = Vec::new();
    let mut mask = |s: &str| {
        let (out, names) = case.masks.apply(s);
        for n in names {
            if !used.contains(&n) {
                used.push(n);
            }
        }
        out
    };
    let stdout = Content::from_bytes(&captured.stdout, &mut mask);
    let stderr = Content::from_bytes(&captured.stderr, &mut mask);
    let mut artifacts = BTreeMap::new();
    let mut unmatched = Vec::new();
    for g in &case.artifacts {
        let found = matches(&case.cwd, g);
        if found.is_empty() {
            unmatched.push(g.clone());
        }
        for rel in found {
            let p = case.cwd.join(&rel);
            let bytes = std::fs::read(&p)
                .with_context(|| format!("cannot read artifact {}", p.display()))
                .map_err(PassError::Seal)?;
            artifacts.insert(rel, Content::from_bytes(&bytes, &mut mask));
        }
    }
    // Keep the set's order so the report does not depend on which stream matched first.
    used.sort_by_key(|n| case.masks.masks.iter().position(|m| &m.name == n));
    Ok(Pass {
        observed: Observed {
            exit_code: captured.code(),
            stdout,
            stderr,
            artifacts,
            census: census_totals(&captured.census),
        },
        unmatched,
        masks_used: used,
        warnings: captured.census.unsealed_warnings(),
        processes: captured.census.processes.len(),
    })
}
