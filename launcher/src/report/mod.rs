//! Human-readable output: the census table, line diffs.
//!
//! TODO(census table): `seal census` prints the JSON path only for now.

pub mod diff;

use std::process::ExitCode;

use anyhow::Result;

pub fn census_command(args: crate::cli::CensusArgs) -> Result<ExitCode> {
    let settings = crate::settings_for(&args.seal)?;
    let path = args
        .json
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from("/dev/stdout"));
    crate::run::run_interactive(&settings, &args.cmd, Some(&path))
}
