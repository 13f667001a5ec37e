//! `seal verify`. TODO(verify): not implemented yet.

use std::process::ExitCode;

pub fn run(_args: crate::cli::VerifyArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("seal verify is not implemented yet")
}
