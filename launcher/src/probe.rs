//! `seal probe`. TODO(probe): not implemented yet.

use std::process::ExitCode;

pub fn run(_args: crate::cli::ProbeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("seal probe is not implemented yet")
}
