//! `seal demo`: the first thing a newcomer runs. A bundled report full of nondeterminism (the
//! clock, random numbers, a uuid, urandom bytes, set order, an object address) runs twice as it
//! is and twice under seal; the two pairs are shown side by side with the changing lines
//! marked, and a one-line verdict closes the output.
//!
//! The report is Python (fixtures/demo/report.py, embedded) when `python3` works, else a bash
//! script (fixtures/demo/report.sh). Both are written to a private temporary directory. The
//! sealed runs use seal's defaults only (no seal.toml, no `SEAL_*`), so every machine shows the
//! same sealed output. Exit 0 when the sealed runs agree, 1 if they ever differ.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context, Result};

use crate::cli::{DemoArgs, SealOpts};
use crate::config;
use crate::run::{self, Input};

const REPORT_PY: &str = include_str!("../../../fixtures/demo/report.py");
const REPORT_SH: &str = include_str!("../../../fixtures/demo/report.sh");

/// Widest value shown in a column; longer values are cut with an ellipsis.
const VALUE_WIDTH: usize = 30;

pub fn run(args: DemoArgs) -> Result<ExitCode> {
    let dir = tempfile::Builder::new()
        .prefix("seal-demo-")
        .tempdir()
        .context("cannot create a temporary directory for the demo")?;
    let report = write_report(dir.path())?;
    // writeln!, not println!: a closed pipe (`seal demo | head`) is an error main turns into exit 0.
    let mut out = std::io::stdout().lock();
    let argv = report.argv;

    writeln!(
        out,
        "seal demo: a small report that reads {}.",
        report.reads
    )?;
    writeln!(
        out,
        "It runs twice as it is, then twice under seal (`seal -- {}`).",
        report.shown
    )?;
    writeln!(out)?;

    // Plain runs first: sealed runs turn address-space randomisation off for our children.
    let plain = [plain_run(&argv, dir.path())?, plain_run(&argv, dir.path())?];
    let opts = SealOpts {
        quiet: args.quiet,
        ..SealOpts::default()
    };
    let settings = config::resolve(&opts, &BTreeMap::<String, String>::new(), None)?;
    let sealed = [
        sealed_run(&settings, &argv, dir.path())?,
        sealed_run(&settings, &argv, dir.path())?,
    ];

    let plain_diff = table(&mut out, "Unsealed: two plain runs", &plain[0], &plain[1])?;
    writeln!(out)?;
    let sealed_diff = table(
        &mut out,
        "Sealed: two runs under seal",
        &sealed[0],
        &sealed[1],
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "Seal your own command the same way: seal -- CMD [ARGS...]"
    )?;
    let lines = sealed[0].lines().count().max(sealed[1].lines().count());
    if sealed_diff == 0 {
        writeln!(
            out,
            "Verdict: unsealed, {plain_diff} of {} lines changed between two runs; sealed, all {lines} lines identical.",
            plain[0].lines().count().max(plain[1].lines().count())
        )?;
        Ok(ExitCode::SUCCESS)
    } else {
        writeln!(
            out,
            "Verdict: NOT sealed: {sealed_diff} of {lines} lines still changed under seal (a bug: please report it)."
        )?;
        Ok(ExitCode::from(1))
    }
}

/// The bundled report, written out and ready to run.
struct Report {
    argv: Vec<OsString>,
    /// How the command is shown (`python3 report.py`).
    shown: String,
    /// What it reads, for the introduction.
    reads: &'static str,
}

/// Writes the report into `dir`.
fn write_report(dir: &Path) -> Result<Report> {
    let (name, text, interpreter, reads) = if python_works() {
        (
            "report.py",
            REPORT_PY,
            "python3",
            "the clock, random numbers, a uuid, urandom bytes, set order, an object address, its pid and a temp name",
        )
    } else {
        (
            "report.sh",
            REPORT_SH,
            "bash",
            "the clock, random numbers, urandom bytes, its pid and a temp name (python3 is missing, so it is a bash script)",
        )
    };
    let path = dir.join(name);
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(Report {
        argv: vec![interpreter.into(), path.into_os_string()],
        shown: format!("{interpreter} {name}"),
        reads,
    })
}

/// True when `python3` is on PATH and runs (a stale pyenv shim, for one, does not).
fn python_works() -> bool {
    Command::new("python3")
        .args(["-c", "import uuid, random, datetime"])
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn plain_run(argv: &[OsString], dir: &Path) -> Result<String> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(dir)
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null());
    let out = crate::run::supervise::Supervised::output(&mut cmd)
        .with_context(|| format!("cannot run {}", argv[0].to_string_lossy()))?;
    if !out.status.success() {
        bail!(
            "the demo report failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn sealed_run(settings: &config::Settings, argv: &[OsString], dir: &Path) -> Result<String> {
    let cap = match run::run_captured(settings, argv, Some(dir), &[], Input::Null, None)? {
        Ok(c) => c,
        Err(e) => bail!("{e}"),
    };
    if !cap.status.success() {
        bail!(
            "the sealed demo report failed (exit {}): {}",
            cap.code(),
            String::from_utf8_lossy(&cap.stderr).trim()
        );
    }
    if !settings.quiet {
        for line in cap.census.unsealed_warnings() {
            crate::term::warn(line);
        }
    }
    Ok(String::from_utf8_lossy(&cap.stdout).into_owned())
}

/// One row of a side-by-side table: label, value in run 1, value in run 2.
struct Row {
    label: String,
    a: String,
    b: String,
}

impl Row {
    fn differs(&self) -> bool {
        self.a != self.b
    }
}

/// Pairs the `label: value` lines of two runs (a line without `: ` is all value).
fn rows(a: &str, b: &str) -> Vec<Row> {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    (0..a.len().max(b.len()))
        .map(|i| {
            let la = a.get(i).copied().unwrap_or("");
            let lb = b.get(i).copied().unwrap_or("");
            let (label, va) = split(la);
            let (label_b, vb) = split(lb);
            if label == label_b {
                Row {
                    label: label.to_string(),
                    a: va.to_string(),
                    b: vb.to_string(),
                }
            } else {
                Row {
                    label: String::new(),
                    a: la.to_string(),
                    b: lb.to_string(),
                }
            }
        })
        .collect()
}

fn split(line: &str) -> (&str, &str) {
    match line.split_once(": ") {
        Some((l, v)) => (l, v),
        None => ("", line),
    }
}

fn cut(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width - 1).collect();
        t.push('…');
        t
    }
}

/// Prints the two runs side by side, `*` marking the lines that differ; returns how many do.
fn table(out: &mut impl Write, title: &str, a: &str, b: &str) -> Result<usize> {
    let rows = rows(a, b);
    let lw = rows.iter().map(|r| r.label.len()).max().unwrap_or(0);
    let vw = rows
        .iter()
        .map(|r| r.a.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(5, VALUE_WIDTH);
    let differing = rows.iter().filter(|r| r.differs()).count();
    writeln!(
        out,
        "{title} ({differing} of {} lines differ, marked *)",
        rows.len()
    )?;
    writeln!(out, "  {:lw$}  {:vw$}  run 2", "", "run 1")?;
    for r in &rows {
        writeln!(
            out,
            "{} {:lw$}  {:vw$}  {}",
            if r.differs() { '*' } else { ' ' },
            r.label,
            cut(&r.a, vw),
            cut(&r.b, VALUE_WIDTH)
        )?;
    }
    Ok(differing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_pair_labels_and_mark_differences() {
        let r = rows("now: 1\nsame: x\n", "now: 2\nsame: x\nextra: y\n");
        assert_eq!(r.len(), 3);
        assert!(r[0].differs() && !r[1].differs() && r[2].differs());
        assert_eq!(r[0].label, "now");
        assert_eq!(r[2].b, "extra: y");
    }

    #[test]
    fn long_values_are_cut() {
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abc", 4), "abc");
    }
}
