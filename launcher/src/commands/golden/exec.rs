//! Running one case sealed: stale artifacts removed, the command run with its stdin and env,
//! its artifacts collected, everything masked, and the census reduced to its totals.

use std::ffi::OsString;

use super::suite::Case;
use crate::observe::{artifacts, Observation, Observed};
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

/// Runs `case` once, sealed.
pub fn run_pass(case: &Case) -> Result<Pass, PassError> {
    // Artifacts are outputs: files matching the globs are removed before each pass, so a file
    // left by an earlier run can never pass for one this run did not write.
    artifacts::remove(&case.cwd, &case.artifacts, "stale artifact").map_err(PassError::Seal)?;
    let stdin = match &case.stdin {
        Some(p) => Some(crate::files::infile::read(p).map_err(|e| PassError::Case {
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
    let captured = run::run_captured(
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
    let (files, unmatched) =
        artifacts::read(&case.cwd, &case.artifacts).map_err(PassError::Seal)?;
    let observation = Observation::of(captured, files);
    let mut used: Vec<String> = Vec::new();
    let observed = observation.masked(|s| {
        let (out, names) = case.masks.apply(s);
        for n in names {
            if !used.contains(&n) {
                used.push(n);
            }
        }
        out
    });
    // Keep the set's order so the report does not depend on which stream matched first.
    used.sort_by_key(|n| case.masks.masks.iter().position(|m| &m.name == n));
    Ok(Pass {
        observed,
        unmatched,
        masks_used: used,
        warnings: observation.census.unsealed_warnings(),
        processes: observation.census.processes.len(),
    })
}
