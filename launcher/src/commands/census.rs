//! `seal census`: runs a command sealed, then prints its census as a table on stderr (so
//! `seal census -- cmd > out.txt` keeps `out.txt` clean), and writes it as JSON (`--json`)
//! and as patch targets (`--patch-targets`). All three come from the one collected
//! [`crate::census::Census`] value, so they cannot disagree.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::report;

/// `seal census [--json FILE] [--top N] -- cmd`.
pub fn run(args: crate::cli::CensusArgs) -> Result<ExitCode> {
    crate::usage::require_command(&args.cmd, "seal census")?;
    if let Some(out) = &args.json {
        crate::usage::writable_file("--json", out)?;
    }
    if let Some(out) = &args.patch_targets {
        crate::usage::writable_file("--patch-targets", out)?;
    }
    let settings = crate::usage::settings_for(&args.seal)?;
    // A command that could not be started (run_interactive said why) has no census: no
    // table, no JSON.
    let run = crate::run::run_interactive(&settings, &args.cmd, true)?;
    let Some(mut census) = run.census else {
        return Ok(run.code);
    };
    if let Some(out) = &args.json {
        census.write_json(out)?;
    }
    if let Some(out) = &args.patch_targets {
        report::patch_targets::write(out, &report::patch_targets::rows(&census))?;
    }
    if args.hide_bookkeeping {
        report::strip_bookkeeping(&mut census);
    }
    // The table is what was asked for: a failed write is an error (a closed pipe a quiet one).
    let table = report::render(&census, args.top, crate::term::stderr_width());
    std::io::stderr()
        .lock()
        .write_all(table.as_bytes())
        .context("cannot write the census table")?;
    Ok(run.code)
}
