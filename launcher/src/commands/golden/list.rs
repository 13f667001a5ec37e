//! `seal golden list`: each case, whether its golden exists, and its command; goldens no case
//! writes any more (orphans).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use super::file;
use super::load::{golden_path, load_suite, shown};
use super::suite::Case;
use crate::cli::GoldenListArgs;

/// The command of a case as one line.
fn cmd_line(case: &Case) -> String {
    if case.argv.len() == 3 && case.argv[0] == "sh" && case.argv[1] == "-c" {
        return case.argv[2].clone();
    }
    crate::usage::shell_line(&case.argv)
}

/// `seal golden list`: each case (of `--shard K/N`), whether its golden exists, and its command.
pub(super) fn run(args: &GoldenListArgs) -> Result<ExitCode> {
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
