//! What every golden action starts from: the validated suite, the cases named on the command
//! line, where each case's golden lives, and paths as the user would type them.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::suite::{self, Case, Suite};
use crate::cli::SuiteArgs;
use crate::config::{self, ConfigError};
use crate::usage::UsageError;

/// The validated suite of `--config FILE` or the nearest `seal.toml`.
pub(super) fn load_suite(args: &SuiteArgs, quiet: bool) -> Result<Suite> {
    let loaded = config::load_config(args.config.as_deref())?.ok_or_else(|| ConfigError::Io {
        file: "seal.toml".into(),
        msg: "not found in this directory or any parent (the golden suite is its [[case]] tables; or give --config FILE)".into(),
    })?;
    Ok(suite::load(
        &loaded,
        args.dir.as_deref(),
        &config::ProcessEnv,
        quiet,
    )?)
}

/// The cases named on the command line (all when none); `None`, after saying so, when the suite
/// has no case at all.
pub(super) fn selected<'a>(suite: &'a Suite, names: &[String]) -> Result<Option<Vec<&'a Case>>> {
    let cases = suite::select(suite, names).map_err(UsageError)?;
    if cases.is_empty() {
        say!("no cases in {}", shown(&suite.config_path))?;
        return Ok(None);
    }
    Ok(Some(cases))
}

/// `--passes N` runs a case at least once.
pub(super) fn at_least_one_pass(passes: usize) -> Result<(), UsageError> {
    if passes == 0 {
        return Err(UsageError("--passes must be at least 1".into()));
    }
    Ok(())
}

pub(super) fn golden_path(suite: &Suite, case: &Case) -> PathBuf {
    suite.dir.join(format!("{}.json", case.name))
}

/// A path as the user would type it: relative to the current directory when below it.
pub(super) fn shown(p: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| {
            let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
            p.strip_prefix(&cwd).ok().map(|r| r.display().to_string())
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| p.display().to_string())
}
