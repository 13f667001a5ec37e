//! `seal golden`: a suite of golden commands that cannot flake. Cases live in `seal.toml`
//! (`[[case]]`, see `suite`); `record`/`update` run each case sealed several times and write
//! its golden only when every pass agrees; `check` runs each case and compares with its golden.
//!
//! Exit status: 0 all recorded / all passed; 1 a case was refused (record) or failed (check);
//! 2 a configuration error (nothing is written), or a case that could not be checked at all:
//! its golden file is not valid JSON, or its command cannot be started. 2 wins over 1.
//! `settings` prints the `seal` object a golden records for a run with the given options
//! (flags > `SEAL_*` > seal.toml > defaults), so that other writers of goldens (the pytest
//! plugin's `sealed.golden`) record exactly what `record` would.

pub(crate) mod case;
mod check;
mod compare;
mod exec;
pub(crate) mod file;
mod junit;
mod junit_merge;
mod list;
mod load;
mod record;
pub(crate) mod shard;
pub(crate) mod suite;

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{GoldenAction, GoldenArgs};

pub fn run(args: GoldenArgs) -> Result<ExitCode> {
    match args.action {
        GoldenAction::Record(a) => record::run(&a, false),
        GoldenAction::Update(a) => record::run(&a, true),
        GoldenAction::Check(a) => check::run(&a),
        GoldenAction::List(a) => list::run(&a),
        GoldenAction::JunitMerge(a) => junit_merge::run(&a),
        GoldenAction::Settings(a) => file::print_settings(&a),
    }
}
