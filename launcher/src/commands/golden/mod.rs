//! `seal golden`: a suite of golden commands that cannot flake. Cases live in `seal.toml`
//! (`[[case]]`, see `suite`); `record`/`update` run each case sealed several times and write
//! its golden only when every pass agrees; `check` runs each case and compares with its golden.
//!
//! Exit status: 0 all recorded / all passed; 1 a case was refused (record) or failed (check);
//! 2 a configuration error (nothing is written), or a case that could not be checked at all:
//! its golden file is not valid JSON, or its command cannot be started. 2 wins over 1.

pub(crate) mod case;
mod check;
mod compare;
mod exec;
pub(crate) mod file;
mod junit;
mod junit_merge;
mod record;
pub(crate) mod shard;
pub(crate) mod suite;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{GoldenAction, GoldenArgs, GoldenListArgs, SuiteArgs};
use crate::config::{self, ConfigError};
use crate::usage::UsageError;
use suite::{Case, Suite};

pub fn run(args: GoldenArgs) -> Result<ExitCode> {
    match args.action {
        GoldenAction::Record(a) => record::run(&a, false),
        GoldenAction::Update(a) => record::run(&a, true),
        GoldenAction::Check(a) => check::run(&a),
        GoldenAction::List(a) => list(&a),
        GoldenAction::JunitMerge(a) => junit_merge::run(&a),
    }
}

/// The validated suite of `--config FILE` or the nearest `seal.toml`.
fn load_suite(args: &SuiteArgs, quiet: bool) -> Result<Suite> {
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
fn selected<'a>(suite: &'a Suite, names: &[String]) -> Result<Option<Vec<&'a Case>>> {
    let cases = suite::select(suite, names).map_err(UsageError)?;
    if cases.is_empty() {
        say!("no cases in {}", shown(&suite.config_path))?;
        return Ok(None);
    }
    Ok(Some(cases))
}

/// `--passes N` runs a case at least once.
fn at_least_one_pass(passes: usize) -> Result<(), UsageError> {
    if passes == 0 {
        return Err(UsageError("--passes must be at least 1".into()));
    }
    Ok(())
}

fn golden_path(suite: &Suite, case: &Case) -> PathBuf {
    suite.dir.join(format!("{}.json", case.name))
}

/// A path as the user would type it: relative to the current directory when below it.
fn shown(p: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| {
            let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
            p.strip_prefix(&cwd).ok().map(|r| r.display().to_string())
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| p.display().to_string())
}

/// The command of a case as one line.
fn cmd_line(case: &Case) -> String {
    if case.argv.len() == 3 && case.argv[0] == "sh" && case.argv[1] == "-c" {
        return case.argv[2].clone();
    }
    crate::usage::shell_line(&case.argv)
}

/// `seal golden list`: each case (of `--shard K/N`), whether its golden exists, and its command.
fn list(args: &GoldenListArgs) -> Result<ExitCode> {
    let suite = load_suite(&args.suite, true)?;
    if suite.cases.is_empty() {
        say!(
            "no cases in {} (add [[case]] tables)",
            shown(&suite.config_path)
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let cases: Vec<&Case> = match args.shard {
        Some(shard) => {
            let held: Vec<&Case> = suite
                .cases
                .iter()
                .filter(|c| shard.holds(&c.name))
                .collect();
            say!(
                "shard {shard}: {} of {} case(s)",
                held.len(),
                suite.cases.len()
            )?;
            held
        }
        None => suite.cases.iter().collect(),
    };
    // Goldens no case writes any more (a renamed or removed case): delete or rename them. Not
    // any shard's: shown only in the whole list.
    let mut orphans: Vec<PathBuf> = std::fs::read_dir(&suite.dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_stem()
                    .and_then(|s| s.to_str())
                    .is_some_and(|stem| !suite.cases.iter().any(|c| c.name == stem))
        })
        .filter(|_| args.shard.is_none())
        .collect();
    orphans.sort();
    let width = cases
        .iter()
        .map(|c| c.name.len())
        .chain(orphans.iter().map(|p| p.file_stem().map_or(0, |s| s.len())))
        .max()
        .unwrap_or(0);
    for case in cases {
        let path = golden_path(&suite, case);
        let state = match file::read(&path) {
            file::OnDisk::Missing => "missing",
            file::OnDisk::Invalid(_) => "invalid",
            file::OnDisk::Valid(_) => "recorded",
        };
        say!(
            "{:<width$}  {:<8}  {}  ({})",
            case.name,
            state,
            shown(&path),
            cmd_line(case)
        )?;
    }
    for p in orphans {
        let stem = p
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        say!(
            "{stem:<width$}  {:<8}  {}  (no such case in {})",
            "orphan",
            shown(&p),
            shown(&suite.config_path)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
