//! `seal golden`. TODO(golden): not implemented yet.

use std::process::ExitCode;

pub fn run(_args: crate::cli::GoldenArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("seal golden is not implemented yet")
}
