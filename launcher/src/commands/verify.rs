//! `seal verify`: proves a seal by running the command sealed N times and digesting each run
//! (exit status, stdout, stderr and the `--artifact` files). One digest: exit 0 and one line.
//! Several: exit 1 with how often each digest occurred, a line diff of the first differing run
//! against run 1, and the census rows whose counts moved between those two runs (the usual
//! way to find what is still unsealed).
//!
//! The harness must not create differences itself: every run starts in the same working
//! directory with an empty private `/tmp` of its own (`--no-private-tmp` turns it off), and
//! with `--artifact` files the runs go one after another, the files put back to how they were
//! before run 1, so a command that appends to its output file does not differ from itself.
//! Without artifacts and with a private `/tmp`, `-j N` runs N at once.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::cli::VerifyArgs;
use crate::observe::compare::{self, Change, Part};
use crate::observe::diff;
use crate::observe::{artifacts, hex, Content, Observation, Observed};
use crate::run::{self, Input};
use crate::usage::UsageError;

/// One run, reduced to what is compared.
struct RunResult {
    digest: String,
    summary: JsonRun,
    /// The whole observation: kept for run 1 and the first differing run only.
    observation: Option<Observation>,
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

#[derive(Serialize, Clone)]
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

/// Context and cut of verify's diffs.
const DIFF: diff::Options = diff::Options {
    context: 2,
    max_changed: 200,
};

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
    if settings.rate_ppm != 0 && !settings.quiet {
        crate::term::warn(
            "--rate: the clocks follow real time, so the runs are not expected to be byte-identical",
        );
    }
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    for p in &args.artifacts {
        glob::Pattern::new(p).map_err(|e| UsageError(format!("--artifact {p:?}: {e}")))?;
    }
    let jobs = parallel_jobs(&args, &settings);
    if args.jobs > 1 && jobs == 1 && !settings.quiet {
        let why = if !args.artifacts.is_empty() {
            "--artifact files are put back before each run"
        } else {
            "there is no private /tmp (--no-private-tmp, or no mount namespace)"
        };
        crate::term::note(format_args!(
            "note: runs share the working directory {} and {why}; running them one after another",
            cwd.display()
        ));
    }
    let (results, first_diff) = match run_all(&args, &settings, &cwd, jobs)? {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    let first = results[0].observation.as_ref().expect("run 1 is kept");
    if !settings.quiet {
        for w in first.census.unsealed_warnings() {
            crate::term::warn(w);
        }
    }
    let groups = group_digests(&results);
    let difference = first_diff.map(|i| {
        let other = results[i]
            .observation
            .as_ref()
            .expect("the first differing run is kept");
        (i, first, other)
    });
    print_result(&args, &results, &groups, difference, &settings.unseal)?;
    if let Some(path) = &args.json {
        let report = JsonReport {
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
            results: results.iter().map(|r| r.summary.clone()).collect(),
            first_difference: difference.map(|(i, a, b)| json_difference(a, b, i)),
        };
        let mut s = serde_json::to_string_pretty(&report)?;
        s.push('\n');
        crate::files::outfile::write(path, s)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(ExitCode::from(if groups.len() == 1 { 0 } else { 1 }))
}

/// The runs, and the first one that differs from run 1.
type Runs = (Vec<RunResult>, Option<usize>);

/// How many runs may go at once: `-j` when the runs cannot see each other's temporary files
/// (each has its own private `/tmp`) and no `--artifact` has to be put back between runs;
/// else 1. Runs still share the working directory: a command that writes there needs `-j 1`.
fn parallel_jobs(args: &VerifyArgs, settings: &crate::config::Settings) -> usize {
    use crate::run::private_tmp as pt;
    let private = pt::wanted(settings, true) && matches!(pt::mode(), pt::Mode::Namespace { .. });
    if args.jobs > 1 && private && args.artifacts.is_empty() {
        args.jobs.min(args.runs)
    } else {
        1
    }
}

/// One run's observation, or why the command could not start.
type OneRun = std::result::Result<Observation, run::SpawnError>;

/// Runs the command `args.runs` times (`jobs` at once), artifacts put back before each run.
/// Returns the runs and the first one that differs from run 1, or the exit code when the
/// command cannot start.
fn run_all(
    args: &VerifyArgs,
    settings: &crate::config::Settings,
    cwd: &Path,
    jobs: usize,
) -> Result<std::result::Result<Runs, ExitCode>> {
    let before = artifacts::read(cwd, &args.artifacts)?.0;
    let progress = progress_bar(args.runs);
    let one = |i: usize| -> Result<OneRun> {
        if i > 0 && jobs == 1 {
            restore(cwd, &args.artifacts, &before)?;
        }
        let captured = match run::run_captured(settings, &args.cmd, None, &[], Input::Null, None)? {
            Ok(c) => c,
            Err(e) => return Ok(Err(e)),
        };
        let observation = Observation::of(captured, artifacts::read(cwd, &args.artifacts)?.0);
        progress.inc(1);
        Ok(Ok(observation))
    };
    let mut results: Vec<RunResult> = Vec::with_capacity(args.runs);
    let mut first_diff: Option<usize> = None;
    let mut take = |i: usize, observation: Observation, results: &mut Vec<RunResult>| {
        let digest = observation.digest();
        if first_diff.is_none() && i > 0 && digest != results[0].digest {
            first_diff = Some(i);
            progress.set_message("differs");
        }
        // Keep full outputs only of run 1 and the first differing run.
        let keep = i == 0 || first_diff == Some(i);
        results.push(RunResult {
            summary: JsonRun {
                run: i + 1,
                digest: format!("sha256:{digest}"),
                exit: observation.exit_code,
                stdout_bytes: observation.stdout.len(),
                stderr_bytes: observation.stderr.len(),
                artifacts: observation
                    .artifacts
                    .iter()
                    .map(|(p, c)| (p.clone(), hex(&Sha256::digest(c))))
                    .collect(),
            },
            digest,
            observation: keep.then_some(observation),
        });
    };
    let cannot_start = |e: run::SpawnError| {
        progress.finish_and_clear();
        crate::term::note(&e);
        Ok(Err(ExitCode::from(e.exit_code())))
    };
    if jobs == 1 {
        for i in 0..args.runs {
            match one(i)? {
                Ok(o) => take(i, o, &mut results),
                Err(e) => return cannot_start(e),
            }
        }
    } else {
        // Runs in any order, `jobs` at once; then taken in run order.
        let next = std::sync::atomic::AtomicUsize::new(0);
        let slots: Vec<std::sync::Mutex<Option<Result<OneRun>>>> = (0..args.runs)
            .map(|_| std::sync::Mutex::new(None))
            .collect();
        std::thread::scope(|s| {
            for _ in 0..jobs {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if i >= args.runs {
                        break;
                    }
                    let r = one(i);
                    let stop = !matches!(r, Ok(Ok(_)));
                    *slots[i].lock().unwrap() = Some(r);
                    if stop {
                        next.store(args.runs, std::sync::atomic::Ordering::SeqCst);
                    }
                });
            }
        });
        for (i, slot) in slots.into_iter().enumerate() {
            match slot.into_inner().unwrap() {
                Some(r) => match r? {
                    Ok(o) => take(i, o, &mut results),
                    Err(e) => return cannot_start(e),
                },
                None => break,
            }
        }
    }
    progress.finish_and_clear();
    Ok(Ok((results, first_diff)))
}

fn print_result(
    args: &VerifyArgs,
    results: &[RunResult],
    groups: &[(String, Vec<usize>)],
    difference: Option<(usize, &Observation, &Observation)>,
    unsealed: &[String],
) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match difference {
        None => {
            let code = results[0].summary.exit;
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
        }
        Some((i, a, b)) => {
            writeln!(
                out,
                "seal verify: {} distinct results in {} runs",
                groups.len(),
                args.runs
            )?;
            for (d, runs) in groups {
                writeln!(
                    out,
                    "  sha256:{}…  {:>3}× ({} {})",
                    &d[..16],
                    runs.len(),
                    if runs.len() == 1 { "run" } else { "runs" },
                    list_runs(runs)
                )?;
            }
            write_difference(&mut out, a, b, i, crate::term::colour_stdout(), unsealed)?;
        }
    }
    out.flush()?;
    Ok(())
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

/// Puts the artifact files back as they were before run 1: files that did not exist are
/// removed, the others rewritten.
fn restore(cwd: &Path, globs: &[String], before: &BTreeMap<String, Vec<u8>>) -> Result<()> {
    for g in globs {
        for path in artifacts::matching(cwd, g) {
            if !before.contains_key(&path) {
                let p = cwd.join(&path);
                std::fs::remove_file(&p)
                    .with_context(|| format!("cannot remove {}", p.display()))?;
            }
        }
    }
    for (path, content) in before {
        let p = cwd.join(path);
        std::fs::write(&p, content).with_context(|| format!("cannot restore {}", p.display()))?;
    }
    Ok(())
}

/// Every part of run `i` that differs from run 1 (the exit code apart), as text: a line diff
/// (coloured with `colour`, else with `[-…-]`/`{+…+}` marks) or a one-line note.
fn part_diffs(a: &Observation, b: &Observation, i: usize, colour: bool) -> Vec<(Part, String)> {
    let same = |s: &str| s.to_string();
    let (a, b): (Observed, Observed) = (a.masked(same), b.masked(same));
    let name_b = format!("run {}", i + 1);
    let size = |c: &Content| match c {
        Content::Binary { bytes, .. } => *bytes,
        Content::Text(lines) => lines.iter().map(|l| l.len() as u64).sum(),
    };
    compare::compare(&a, &b)
        .into_iter()
        .filter_map(|d| {
            let (old_name, new_name) = match &d.part {
                Part::Artifact(p) => (format!("{p} (run 1)"), format!("{p} ({name_b})")),
                _ => ("run 1".to_string(), name_b.clone()),
            };
            let text = match d.change {
                Change::Exit(..) => return None,
                Change::Text(x, y) => {
                    let lines = diff::diff(&x, &y, &old_name, &new_name, DIFF);
                    diff::to_text(&lines, colour, true)
                }
                Change::Opaque(x, y) => format!(
                    "binary {} differs ({} vs {} bytes)\n",
                    if matches!(d.part, Part::Artifact(_)) {
                        "file"
                    } else {
                        "output"
                    },
                    size(x),
                    size(y)
                ),
                Change::Gone(_) => format!("missing in {name_b}\n"),
                Change::New(_) => "missing in run 1\n".to_string(),
            };
            Some((d.part, text))
        })
        .collect()
}

fn json_difference(a: &Observation, b: &Observation, i: usize) -> JsonDifference {
    let parts = part_diffs(a, b, i, false);
    let text_of = |want: Part| {
        parts
            .iter()
            .find(|(p, _)| *p == want)
            .map(|(_, t)| t.clone())
            .unwrap_or_default()
    };
    JsonDifference {
        run: i + 1,
        against: 1,
        exit: [a.exit_code, b.exit_code],
        stdout_diff: text_of(Part::Stdout),
        stderr_diff: text_of(Part::Stderr),
        artifacts: parts
            .iter()
            .filter_map(|(p, t)| match p {
                Part::Artifact(path) => Some(JsonArtifactDiff {
                    path: path.clone(),
                    diff: t.clone(),
                }),
                _ => None,
            })
            .collect(),
        census_rows: census_diff(a, b),
    }
}

/// Census rows (process executable, function, detail) whose counts differ; rows of
/// processes with the same executable are summed so that virtual pids need not match.
pub fn census_diff(a: &Observation, b: &Observation) -> Vec<CensusRowDiff> {
    let (ra, rb) = (a.census_rows(), b.census_rows());
    compare::moved_rows(&[&ra, &rb])
        .into_iter()
        .map(|((process, family, symbol, detail), n)| CensusRowDiff {
            process,
            family,
            symbol,
            detail,
            counts: [n[0].unwrap_or(0), n[1].unwrap_or(0)],
        })
        .collect()
}

fn write_difference(
    out: &mut impl Write,
    a: &Observation,
    b: &Observation,
    i: usize,
    colour: bool,
    unsealed: &[String],
) -> Result<()> {
    let name_b = format!("run {}", i + 1);
    writeln!(out, "\nfirst difference: {name_b} against run 1")?;
    let (ca, cb) = (a.exit_code, b.exit_code);
    if ca != cb {
        writeln!(out, "exit status: {ca} in run 1, {cb} in {name_b}")?;
    }
    for (part, text) in part_diffs(a, b, i, colour) {
        writeln!(out, "\n{part}:")?;
        out.write_all(text.as_bytes())?;
    }
    let rows = census_diff(a, b);
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

    fn census(rows: &[(&str, &str, u64)]) -> Observation {
        let census = crate::census::Census {
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
                        python: vec![],
                    })
                    .collect(),
                unsealed: vec![],
                python: None,
            }],
            totals: vec![],
            machine: vec![],
        };
        Observation {
            census,
            ..Default::default()
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
