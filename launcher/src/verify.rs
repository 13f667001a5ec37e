//! `seal verify`: proves a seal by running the command sealed N times and digesting each run
//! (exit status, stdout, stderr and the `--artifact` files). One digest: exit 0 and one line.
//! Several: exit 1 with how often each digest occurred, a line diff of the first differing run
//! against run 1, and the census rows whose counts moved between those two runs (the usual
//! way to find what is still unsealed).
//!
//! The harness must not create differences itself: every run starts in the same working
//! directory, one after another, with the `--artifact` files put back to how they were before
//! run 1, so a command that appends to its output file does not differ from itself.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::census::Census;
use crate::cli::VerifyArgs;
use crate::report::diff;
use crate::run::{self, Captured, Input};
use crate::usage::UsageError;

/// One run, reduced to what is compared.
struct RunResult {
    captured: Captured,
    artifacts: BTreeMap<String, Vec<u8>>,
    digest: String,
}

#[derive(Serialize)]
struct JsonReport {
    command: Vec<String>,
    runs: usize,
    identical: bool,
    /// Distinct digests, most frequent first.
    digests: Vec<JsonDigest>,
    results: Vec<JsonRun>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_difference: Option<JsonDifference>,
}

#[derive(Serialize)]
struct JsonDigest {
    digest: String,
    count: usize,
    runs: Vec<usize>,
}

#[derive(Serialize)]
struct JsonRun {
    run: usize,
    digest: String,
    exit: i32,
    stdout_bytes: usize,
    stderr_bytes: usize,
    artifacts: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct JsonDifference {
    run: usize,
    against: usize,
    exit: [i32; 2],
    stdout_diff: String,
    stderr_diff: String,
    artifacts: Vec<JsonArtifactDiff>,
    census_rows: Vec<CensusRowDiff>,
}

#[derive(Serialize)]
struct JsonArtifactDiff {
    path: String,
    /// Line diff (text files) or a note (binary, missing).
    diff: String,
}

/// A census row (process executable, function, detail) whose count differs between two runs.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct CensusRowDiff {
    pub process: String,
    pub family: String,
    pub symbol: String,
    pub detail: Option<String>,
    pub counts: [u64; 2],
}

pub fn run(args: VerifyArgs) -> Result<ExitCode> {
    crate::usage::require_command(&args.cmd, "seal verify")?;
    if args.runs < 2 {
        return Err(UsageError(format!(
            "-n {}: verify needs at least 2 runs to compare",
            args.runs
        ))
        .into());
    }
    if args.jobs == 0 {
        return Err(UsageError("-j 0: at least one job".into()).into());
    }
    let settings = crate::usage::settings_for(&args.seal)?;
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let globs = compile_globs(&args.artifacts)?;
    if args.jobs > 1 && !settings.quiet {
        // Parallel runs in one working directory could see each other's files, and private
        // copies would change the paths the command sees: either way the harness would create
        // differences. So runs always go one after another.
        crate::term::note(format_args!(
            "note: runs share the working directory {}; running them one after another",
            cwd.display()
        ));
    }
    let before = snapshot(&cwd, &globs)?;
    let progress = progress_bar(args.runs);
    let mut results: Vec<RunResult> = Vec::with_capacity(args.runs);
    let mut first_diff: Option<usize> = None;
    for i in 0..args.runs {
        if i > 0 {
            restore(&cwd, &globs, &before)?;
        }
        let captured = match run::run_captured(&settings, &args.cmd, None, &[], Input::Null)? {
            Ok(c) => c,
            Err(e) => {
                progress.finish_and_clear();
                crate::term::note(&e);
                return Ok(ExitCode::from(e.exit_code()));
            }
        };
        let artifacts = snapshot(&cwd, &globs)?;
        let digest = digest_of(&captured, &artifacts);
        if first_diff.is_none() && i > 0 && digest != results[0].digest {
            first_diff = Some(i);
        }
        // Keep full outputs only of run 1 and the first differing run.
        let keep = i == 0 || first_diff == Some(i);
        let result = RunResult {
            captured: if keep { captured } else { strip(captured) },
            artifacts: if keep {
                artifacts
            } else {
                artifacts.into_keys().map(|k| (k, Vec::new())).collect()
            },
            digest,
        };
        results.push(result);
        progress.inc(1);
        if first_diff.is_some() {
            progress.set_message("differs");
        }
    }
    progress.finish_and_clear();

    if !settings.quiet {
        let mut warned = std::collections::BTreeSet::new();
        for w in results[0].captured.census.unsealed_warnings() {
            if warned.insert(w.clone()) {
                crate::term::warn(w);
            }
        }
    }

    let groups = group_digests(&results);
    let report_json = JsonReport {
        command: args
            .cmd
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        runs: args.runs,
        identical: groups.len() == 1,
        digests: groups
            .iter()
            .map(|(d, runs)| JsonDigest {
                digest: format!("sha256:{d}"),
                count: runs.len(),
                runs: runs.clone(),
            })
            .collect(),
        results: results
            .iter()
            .enumerate()
            .map(|(i, r)| JsonRun {
                run: i + 1,
                digest: format!("sha256:{}", r.digest),
                exit: r.captured.code(),
                stdout_bytes: r.captured.stdout.len(),
                stderr_bytes: r.captured.stderr.len(),
                artifacts: r
                    .artifacts
                    .iter()
                    .map(|(p, c)| (p.clone(), hex(&Sha256::digest(c))))
                    .collect(),
            })
            .collect(),
        first_difference: first_diff.map(|i| difference(&results[0], &results[i], i)),
    };

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let style = diff::Style::for_stdout();
    if groups.len() == 1 {
        let code = results[0].captured.code();
        let note = if code != 0 {
            format!("  (every run exited {code})")
        } else {
            String::new()
        };
        writeln!(
            out,
            "{n}/{n} identical  sha256:{}…{note}",
            &results[0].digest[..16],
            n = args.runs
        )?;
    } else {
        let i = first_diff.expect("a differing run");
        writeln!(
            out,
            "seal verify: {} distinct results in {} runs",
            groups.len(),
            args.runs
        )?;
        for (d, runs) in &groups {
            writeln!(
                out,
                "  sha256:{}…  {:>3}× ({} {})",
                &d[..16],
                runs.len(),
                if runs.len() == 1 { "run" } else { "runs" },
                list_runs(runs)
            )?;
        }
        write_difference(
            &mut out,
            &results[0],
            &results[i],
            i,
            style,
            &settings.unseal,
        )?;
    }
    out.flush()?;
    if let Some(path) = &args.json {
        let mut s = serde_json::to_string_pretty(&report_json)?;
        s.push('\n');
        std::fs::write(path, s).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(ExitCode::from(if groups.len() == 1 { 0 } else { 1 }))
}

fn progress_bar(n: usize) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(n as u64);
    pb.set_style(
        indicatif::ProgressStyle::with_template("seal verify: run {pos}/{len} {bar:30} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    pb
}

fn strip(c: Captured) -> Captured {
    Captured {
        stdout: Vec::new(),
        stderr: Vec::new(),
        census: Census {
            version: c.census.version,
            command: Vec::new(),
            processes: Vec::new(),
            totals: Vec::new(),
        },
        ..c
    }
}

/// Distinct digests with the (1-based) runs that produced each, most frequent first, ties in
/// order of first appearance.
fn group_digests(results: &[RunResult]) -> Vec<(String, Vec<usize>)> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, r) in results.iter().enumerate() {
        match groups.iter_mut().find(|(d, _)| *d == r.digest) {
            Some((_, runs)) => runs.push(i + 1),
            None => groups.push((r.digest.clone(), vec![i + 1])),
        }
    }
    groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.1[0].cmp(&b.1[0])));
    groups
}

fn list_runs(runs: &[usize]) -> String {
    let mut s: Vec<String> = runs.iter().take(8).map(|r| r.to_string()).collect();
    if runs.len() > 8 {
        s.push("…".into());
    }
    s.join(", ")
}

/// sha256 over the exit status, stdout, stderr and each artifact (sorted by path), each part
/// length-prefixed so that bytes cannot move between parts unnoticed.
fn digest_of(c: &Captured, artifacts: &BTreeMap<String, Vec<u8>>) -> String {
    let mut h = Sha256::new();
    h.update(format!("exit {}\n", c.code()));
    h.update(format!("stdout {}\n", c.stdout.len()));
    h.update(&c.stdout);
    h.update(format!("stderr {}\n", c.stderr.len()));
    h.update(&c.stderr);
    for (path, content) in artifacts {
        h.update(format!("artifact {} {}\n", path, content.len()));
        h.update(content);
    }
    hex(&h.finalize())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn compile_globs(patterns: &[String]) -> Result<Vec<glob::Pattern>> {
    patterns
        .iter()
        .map(|p| {
            glob::Pattern::new(p).map_err(|e| UsageError(format!("--artifact {p:?}: {e}")).into())
        })
        .collect()
}

/// The files matching the artifact globs (relative to `cwd`), with their contents.
fn snapshot(cwd: &Path, globs: &[glob::Pattern]) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut files = BTreeMap::new();
    for g in globs {
        let full = cwd.join(g.as_str());
        let entries = glob::glob(&full.to_string_lossy())
            .map_err(|e| UsageError(format!("--artifact {:?}: {e}", g.as_str())))?;
        for entry in entries.flatten() {
            if !entry.is_file() {
                continue;
            }
            let rel = entry
                .strip_prefix(cwd)
                .unwrap_or(&entry)
                .to_string_lossy()
                .into_owned();
            let content = std::fs::read(&entry)
                .with_context(|| format!("cannot read artifact {}", entry.display()))?;
            files.insert(rel, content);
        }
    }
    Ok(files)
}

/// Puts the artifact files back as they were before run 1: files that did not exist are
/// removed, the others rewritten.
fn restore(cwd: &Path, globs: &[glob::Pattern], before: &BTreeMap<String, Vec<u8>>) -> Result<()> {
    for path in snapshot(cwd, globs)?.keys() {
        if !before.contains_key(path) {
            let p = cwd.join(path);
            std::fs::remove_file(&p).with_context(|| format!("cannot remove {}", p.display()))?;
        }
    }
    for (path, content) in before {
        let p: PathBuf = cwd.join(path);
        std::fs::write(&p, content).with_context(|| format!("cannot restore {}", p.display()))?;
    }
    Ok(())
}

fn difference(a: &RunResult, b: &RunResult, i: usize) -> JsonDifference {
    let plain = diff::Style::plain();
    let name_b = format!("run {}", i + 1);
    JsonDifference {
        run: i + 1,
        against: 1,
        exit: [a.captured.code(), b.captured.code()],
        stdout_diff: diff::render(
            &String::from_utf8_lossy(&a.captured.stdout),
            &String::from_utf8_lossy(&b.captured.stdout),
            "run 1",
            &name_b,
            plain,
        ),
        stderr_diff: diff::render(
            &String::from_utf8_lossy(&a.captured.stderr),
            &String::from_utf8_lossy(&b.captured.stderr),
            "run 1",
            &name_b,
            plain,
        ),
        artifacts: artifact_diffs(a, b, &name_b, plain),
        census_rows: census_diff(&a.captured.census, &b.captured.census),
    }
}

fn artifact_diffs(
    a: &RunResult,
    b: &RunResult,
    name_b: &str,
    style: diff::Style,
) -> Vec<JsonArtifactDiff> {
    let mut paths: Vec<&String> = a.artifacts.keys().chain(b.artifacts.keys()).collect();
    paths.sort();
    paths.dedup();
    let mut out = Vec::new();
    for p in paths {
        let diff = match (a.artifacts.get(p), b.artifacts.get(p)) {
            (Some(x), Some(y)) if x == y => continue,
            (Some(x), Some(y)) => match (std::str::from_utf8(x), std::str::from_utf8(y)) {
                (Ok(x), Ok(y)) => diff::render(
                    x,
                    y,
                    &format!("{p} (run 1)"),
                    &format!("{p} ({name_b})"),
                    style,
                ),
                _ => format!("binary file differs ({} vs {} bytes)\n", x.len(), y.len()),
            },
            (Some(_), None) => format!("missing in {name_b}\n"),
            (None, _) => "missing in run 1\n".to_string(),
        };
        out.push(JsonArtifactDiff {
            path: p.clone(),
            diff,
        });
    }
    out
}

/// Census rows (process executable, function, detail) whose counts differ; rows of
/// processes with the same executable are summed so that virtual pids need not match.
pub fn census_diff(a: &Census, b: &Census) -> Vec<CensusRowDiff> {
    type Key = (String, String, String, Option<String>);
    fn rows(c: &Census) -> BTreeMap<Key, u64> {
        let mut m = BTreeMap::new();
        for p in &c.processes {
            let exe = Path::new(&p.exe)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| p.exe.clone());
            for call in &p.calls {
                *m.entry((
                    exe.clone(),
                    call.family.clone(),
                    call.symbol.clone(),
                    call.detail.clone(),
                ))
                .or_default() += call.count;
            }
            for u in &p.unsealed {
                *m.entry((
                    exe.clone(),
                    "unsealed".to_string(),
                    u.kind.clone(),
                    Some(u.detail.clone()),
                ))
                .or_default() += 1;
            }
        }
        m
    }
    let (ra, rb) = (rows(a), rows(b));
    let mut keys: Vec<&Key> = ra.keys().chain(rb.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| {
            let (x, y) = (
                ra.get(k).copied().unwrap_or(0),
                rb.get(k).copied().unwrap_or(0),
            );
            (x != y).then(|| CensusRowDiff {
                process: k.0.clone(),
                family: k.1.clone(),
                symbol: k.2.clone(),
                detail: k.3.clone(),
                counts: [x, y],
            })
        })
        .collect()
}

fn write_difference(
    out: &mut impl Write,
    a: &RunResult,
    b: &RunResult,
    i: usize,
    style: diff::Style,
    unsealed: &[String],
) -> Result<()> {
    let name_b = format!("run {}", i + 1);
    writeln!(out, "\nfirst difference: {name_b} against run 1")?;
    let (ca, cb) = (a.captured.code(), b.captured.code());
    if ca != cb {
        writeln!(out, "exit status: {ca} in run 1, {cb} in {name_b}")?;
    }
    for (what, x, y) in [
        ("stdout", &a.captured.stdout, &b.captured.stdout),
        ("stderr", &a.captured.stderr, &b.captured.stderr),
    ] {
        if x == y {
            continue;
        }
        writeln!(out, "\n{what}:")?;
        out.write_all(
            diff::render(
                &String::from_utf8_lossy(x),
                &String::from_utf8_lossy(y),
                "run 1",
                &name_b,
                style,
            )
            .as_bytes(),
        )?;
    }
    for d in artifact_diffs(a, b, &name_b, style) {
        writeln!(out, "\nartifact {}:", d.path)?;
        out.write_all(d.diff.as_bytes())?;
    }
    let rows = census_diff(&a.captured.census, &b.captured.census);
    if rows.is_empty() {
        let why = if unsealed.is_empty() {
            "the difference comes from something seal does not intercept: thread scheduling, \
             a static binary, a raw syscall, the file system"
                .to_string()
        } else {
            format!("families left unsealed: {}", unsealed.join(", "))
        };
        writeln!(out, "\ncensus: the same counts in both runs ({why})")?;
    } else {
        writeln!(out, "\ncensus rows that differ (run 1 vs {name_b}):")?;
        let w = rows
            .iter()
            .map(|r| row_name(r).len())
            .max()
            .unwrap_or(0)
            .max(8);
        writeln!(out, "  {:<w$}  {:>8}  {:>8}", "row", "run 1", name_b)?;
        for r in &rows {
            writeln!(
                out,
                "  {:<w$}  {:>8}  {:>8}",
                row_name(r),
                r.counts[0],
                r.counts[1]
            )?;
        }
    }
    Ok(())
}

fn row_name(r: &CensusRowDiff) -> String {
    match &r.detail {
        Some(d) => format!("{} {}:{}({d})", r.process, r.family, r.symbol),
        None => format!("{} {}:{}", r.process, r.family, r.symbol),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn census(rows: &[(&str, &str, u64)]) -> Census {
        Census {
            version: 1,
            command: vec![],
            processes: vec![crate::census::Process {
                vpid: 1,
                parent_vpid: None,
                exe: "/usr/bin/prog".into(),
                argv: vec![],
                execs: vec![],
                exit: None,
                calls: rows
                    .iter()
                    .map(|(f, s, n)| crate::census::Call {
                        family: f.to_string(),
                        symbol: s.to_string(),
                        detail: None,
                        count: *n,
                        callers: vec![],
                    })
                    .collect(),
                unsealed: vec![],
            }],
            totals: vec![],
        }
    }

    #[test]
    fn census_diff_lists_only_moved_rows() {
        let a = census(&[("time", "clock_gettime", 3), ("random", "getrandom", 1)]);
        let b = census(&[("time", "clock_gettime", 5), ("random", "getrandom", 1)]);
        let d = census_diff(&a, &b);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].process, "prog");
        assert_eq!(d[0].symbol, "clock_gettime");
        assert_eq!(d[0].counts, [3, 5]);
    }

    #[test]
    fn runs_are_listed_briefly() {
        assert_eq!(list_runs(&[1, 2, 3]), "1, 2, 3");
        assert_eq!(
            list_runs(&(1..=10).collect::<Vec<_>>()),
            "1, 2, 3, 4, 5, 6, 7, 8, …"
        );
    }
}
