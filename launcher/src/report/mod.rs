//! Human-readable output: `seal census` (run a command sealed, print its census as a table).
//!
//! The table goes to stderr after the command has finished, so the command's own stdout
//! stays intact and separable (`seal census -- cmd > out.txt` keeps `out.txt` clean).

pub mod patch_targets;
mod python;
mod table;

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::census::Census;

pub use table::render;

/// `seal census [--json FILE] [--top N] -- cmd`.
pub fn census_command(args: crate::cli::CensusArgs) -> Result<ExitCode> {
    crate::usage::require_command(&args.cmd, "seal census")?;
    if let Some(out) = &args.json {
        crate::usage::writable_file("--json", out)?;
    }
    if let Some(out) = &args.patch_targets {
        crate::usage::writable_file("--patch-targets", out)?;
    }
    let settings = crate::usage::settings_for(&args.seal)?;
    // The run writes the JSON to a private temporary file; the table and `--json` both come
    // from that one document, so they can never disagree, and a command that could not be
    // started (run_interactive said why) leaves it empty: no table, no stale JSON.
    let tmp = tempfile::Builder::new()
        .prefix("seal-census-")
        .suffix(".json")
        .tempfile()
        .context("cannot create a temporary file for the census")?;
    let path = tmp.path().to_path_buf();
    let code = crate::run::run_interactive(&settings, &args.cmd, Some(&path))?;
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    if text.trim().is_empty() {
        return Ok(code);
    }
    if let Some(out) = &args.json {
        crate::files::outfile::write(out, &text)
            .with_context(|| format!("cannot write census to {}", out.display()))?;
    }
    let mut census: Census = serde_json::from_str(&text)
        .with_context(|| format!("cannot read the census back from {}", path.display()))?;
    if let Some(out) = &args.patch_targets {
        crate::report::patch_targets::write(out, &crate::report::patch_targets::rows(&census))?;
    }
    if args.hide_bookkeeping {
        python::strip_bookkeeping(&mut census);
    }
    // The table is what was asked for: a failed write is an error (a closed pipe a quiet one).
    let table = render(&census, args.top, crate::term::stderr_width());
    std::io::stderr()
        .lock()
        .write_all(table.as_bytes())
        .context("cannot write the census table")?;
    Ok(code)
}
