//! `seal demo`. TODO(demo): not implemented yet.

use std::process::ExitCode;

pub fn run(_args: crate::cli::DemoArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("seal demo is not implemented yet")
}
