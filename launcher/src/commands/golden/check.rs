//! `seal golden check`: each case runs sealed (`--passes N` times), masked, compared with its
//! golden: `ok` or `FAILED` with a unified diff, a census drift line when the totals moved
//! (`--strict-census` makes drift a failure), JUnit XML with `--junit`, and `-j N` cases at
//! once: each case has its own private `/tmp`, and cases that share a working directory (or
//! run without a private `/tmp`) go one after another (see `serial_groups`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::compare::{self, show};
use super::exec::{self, PassError};
use super::file::{self, OnDisk, SealRecord};
use super::junit::{self, TestCase, Verdict};
use super::load::{at_least_one_pass, golden_path, load_suite, selected, shown};
use super::suite::{Case, Suite};
use crate::cli::GoldenCheckArgs;
use crate::observe::diff::Line;
use crate::usage::UsageError;

/// The result of checking one case.
struct Checked {
    verdict: Verdict,
    /// Report lines under the case's status line (diffs, notes).
    lines: Vec<Line>,
    notes: Vec<String>,
    time: Duration,
}

pub fn run(args: &GoldenCheckArgs) -> Result<ExitCode> {
    at_least_one_pass(args.passes)?;
    if args.jobs == 0 {
        return Err(UsageError("-j must be at least 1".into()).into());
    }
    let suite = load_suite(&args.suite, args.quiet)?;
    let Some(mut cases) = selected(&suite, &args.names)? else {
        return Ok(ExitCode::SUCCESS);
    };
    let of_shard = match args.shard {
        Some(shard) => {
            let all = cases.len();
            cases.retain(|c| shard.holds(&c.name));
            if cases.is_empty() {
                // Not a failure: a matrix wider than the suite has shards with nothing to do.
                say!("no cases in shard {shard} ({all} case(s) selected, none assigned to it)")?;
                write_junit(args, &[], Vec::new(), Duration::ZERO)?;
                return Ok(ExitCode::SUCCESS);
            }
            format!(" in shard {shard}")
        }
        None => String::new(),
    };
    // Extract the shim once, before any worker needs it.
    crate::run::shim::extract()?;
    let colour = crate::term::colour_stdout();
    let start = Instant::now();
    let width = cases.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let mut results: Vec<Option<Checked>> = (0..cases.len()).map(|_| None).collect();
    let mut next_to_print = 0;
    let mut print_ready = |results: &mut Vec<Option<Checked>>| -> std::io::Result<()> {
        while next_to_print < results.len() {
            let Some(c) = &results[next_to_print] else {
                break;
            };
            let status = match c.verdict {
                Verdict::Passed => "ok",
                Verdict::Failed { .. } => "FAILED",
                Verdict::Error { .. } => "ERROR",
            };
            let status = if colour {
                match c.verdict {
                    Verdict::Passed => format!("\x1b[32m{status:<6}\x1b[0m"),
                    _ => format!("\x1b[1;31m{status:<6}\x1b[0m"),
                }
            } else {
                format!("{status:<6}")
            };
            let name = &cases[next_to_print].name;
            match &c.verdict {
                Verdict::Error { message, .. } | Verdict::Failed { message, .. } => {
                    say!("{status}  {name:<width$}  {message}")?
                }
                Verdict::Passed => say!("{status}  {name}")?,
            }
            for l in &c.lines {
                say!("    {}", show(l, colour))?;
            }
            next_to_print += 1;
        }
        Ok(())
    };

    let queue = serial_groups(&cases);
    let queue = Mutex::new(queue);
    let workers = args.jobs.min(cases.len());
    let (tx, rx) = mpsc::channel::<(usize, Checked)>();
    std::thread::scope(|s| {
        for _ in 0..workers {
            let tx = tx.clone();
            let queue = &queue;
            let cases = &cases;
            let suite = &suite;
            s.spawn(move || loop {
                let Some(group) = queue.lock().unwrap().pop() else {
                    break;
                };
                for i in group {
                    let checked = check_case(suite, cases[i], args);
                    if tx.send((i, checked)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        for (i, checked) in rx {
            results[i] = Some(checked);
            print_ready(&mut results)?;
        }
        std::io::Result::Ok(())
    })?;
    let results: Vec<Checked> = results
        .into_iter()
        .map(|r| r.expect("every case checked"))
        .collect();

    let (failed, errors) = junit::tally(results.iter().map(|r| &r.verdict));
    let passed = results.len() - failed - errors;
    say!(
        "\n{} case(s){of_shard}: {passed} ok, {failed} failed, {errors} error(s)",
        results.len()
    )?;
    write_junit(args, &cases, results, start.elapsed())?;
    Ok(ExitCode::from(if errors > 0 {
        2
    } else if failed > 0 {
        1
    } else {
        0
    }))
}

/// `--junit FILE`: one `<testsuite>` of the cases checked (a shard's own; none for an empty
/// shard, so that every job of a CI matrix leaves a report).
fn write_junit(
    args: &GoldenCheckArgs,
    cases: &[&Case],
    results: Vec<Checked>,
    elapsed: Duration,
) -> Result<()> {
    let Some(path) = &args.junit else {
        return Ok(());
    };
    let tcs: Vec<TestCase> = cases
        .iter()
        .zip(results)
        .map(|(c, r)| TestCase {
            name: c.name.clone(),
            time: r.time,
            verdict: r.verdict,
            notes: r.notes,
        })
        .collect();
    let suite_name = match args.shard {
        Some(shard) => format!("seal golden (shard {shard})"),
        None => "seal golden".to_string(),
    };
    let xml = junit::render(&suite_name, "seal golden", &tcs, elapsed);
    crate::files::outfile::write(path, xml)
        .with_context(|| format!("cannot write JUnit XML to {}", path.display()))
}

/// The order `-j N` workers take cases in: groups of cases (indices into `cases`) that must
/// run one after another, in file order, each group on one worker; the groups by their first
/// case. Cases that share a working directory (canonical path) are one group: a file one case
/// writes there, declared as an artifact or not, is one its neighbour may read, append to or
/// delete, so running them at once lets their outputs interleave. Copying the directory per
/// case would isolate them too, but would change the paths they print and break relative
/// references out of it; serializing keeps every case exactly as it runs alone, and costs
/// parallelism only among cases of one directory. Cases without a private `/tmp` all share
/// the real one, so they are one group too (with every case of their directories).
fn serial_groups(cases: &[&Case]) -> Vec<Vec<usize>> {
    // Union-find over cases: each shared resource links the cases that use it.
    let mut parent: Vec<usize> = (0..cases.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut owner: BTreeMap<PathBuf, usize> = BTreeMap::new();
    let shared_tmp = PathBuf::from("\0 the real /tmp");
    for (i, c) in cases.iter().enumerate() {
        let mut keys = vec![std::fs::canonicalize(&c.cwd).unwrap_or_else(|_| c.cwd.clone())];
        if !private_tmp(c) {
            keys.push(shared_tmp.clone());
        }
        for key in keys {
            let first = *owner.entry(key).or_insert(i);
            let (a, b) = (root(&mut parent, first), root(&mut parent, i));
            // The smaller index is the root, so a group's root is its first case.
            parent[a.max(b)] = a.min(b);
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..cases.len() {
        let r = root(&mut parent, i);
        groups.entry(r).or_default().push(i);
    }
    // Workers pop from the end: the group of the first case is taken first.
    let mut queue: Vec<Vec<usize>> = groups.into_values().collect();
    queue.reverse();
    queue
}

/// Does the case run with a private `/tmp` of its own (on by default; a mount namespace)?
fn private_tmp(case: &Case) -> bool {
    use crate::run::private_tmp as pt;
    pt::wanted(&case.settings, true) && matches!(pt::mode(), pt::Mode::Namespace { .. })
}

fn check_case(suite: &Suite, case: &Case, args: &GoldenCheckArgs) -> Checked {
    let start = Instant::now();
    let path = golden_path(suite, case);
    let done = |verdict: Verdict, lines: Vec<Line>, notes: Vec<String>| Checked {
        verdict,
        lines,
        notes,
        time: start.elapsed(),
    };
    // A verdict whose report lines are the notes.
    let noted = |verdict: Verdict, notes: Vec<String>| done(verdict, note_lines(&notes), notes);
    let golden = match file::read(&path) {
        OnDisk::Missing => {
            let message = format!(
                "no golden file {}; record it with `seal golden record {}`",
                shown(&path),
                case.name
            );
            return noted(Verdict::failed(message), vec![]);
        }
        OnDisk::Invalid(message) => return noted(Verdict::error(message), vec![]),
        OnDisk::Valid(g) => g,
    };
    // A golden recorded before a row was known to follow the scheduler may still pin it.
    let mut golden = golden;
    file::without_unpinned(&mut golden.observed.census);
    let mut notes = changed_since_recording(&golden, case);
    let mut drift: Vec<String> = Vec::new();
    for pass in 0..args.passes {
        let observed = match exec::run_pass(case) {
            Ok(p) => {
                // What the seal could not hold explains many a failure: say it once.
                if pass == 0 && !args.quiet {
                    notes.extend(p.warnings.iter().map(|w| format!("warning: {w}")));
                }
                p.observed
            }
            Err(PassError::Case { key, msg }) => {
                let message = case.error(key, msg).to_string();
                return noted(Verdict::error(message), notes);
            }
            Err(PassError::Seal(e)) => {
                return noted(Verdict::error(format!("seal failed: {e:#}")), notes);
            }
        };
        let actual = if args.passes > 1 {
            format!("actual (pass {})", pass + 1)
        } else {
            "actual".to_string()
        };
        let label = shown(&path);
        let mut observed = observed;
        file::without_rows(&mut observed.census, &golden.census_varies);
        file::without_unpinned(&mut observed.census);
        let cmp = compare::compare(&golden.observed, &observed, (&label, &actual));
        if drift.is_empty() && !cmp.census_drift.is_empty() {
            drift = cmp.census_drift.clone();
        }
        if !cmp.same_output() {
            let message = cmp
                .differences
                .iter()
                .map(|d| d.title.clone())
                .collect::<Vec<_>>()
                .join("; ");
            if !drift.is_empty() {
                notes.push(format!("census drift: {}", drift.join(", ")));
            }
            let mut lines: Vec<Line> = cmp.differences.into_iter().flat_map(|d| d.lines).collect();
            lines.extend(note_lines(&notes));
            let detail = lines
                .iter()
                .map(|l| show(l, false))
                .collect::<Vec<_>>()
                .join("\n");
            return done(Verdict::Failed { message, detail }, lines, notes);
        }
    }
    if !drift.is_empty() {
        let line = format!("census drift: {}", drift.join(", "));
        if args.strict_census {
            notes.push(line);
            return noted(
                Verdict::Failed {
                    message: "census totals drifted (--strict-census)".into(),
                    detail: notes.join("\n"),
                },
                notes,
            );
        }
        notes.push(format!("{line} (not a failure without --strict-census)"));
    }
    noted(Verdict::Passed, notes)
}

/// Notes on what changed since the golden was recorded: the command, the masks, the settings.
fn changed_since_recording(golden: &file::Golden, case: &Case) -> Vec<String> {
    let mut notes = Vec::new();
    if golden.argv != case.argv {
        notes.push(format!(
            "note: the command changed since recording (golden: {:?})",
            golden.argv
        ));
    }
    if golden.masks != case.mask_names {
        notes.push(format!(
            "note: the masks changed since recording (golden: {:?}, now: {:?})",
            golden.masks, case.mask_names
        ));
    }
    let now = SealRecord::of(&case.settings);
    if golden.seal != now {
        notes.push(format!(
            "note: seal settings changed since recording (golden: {}; now: {})",
            serde_json::to_string(&golden.seal).unwrap_or_default(),
            serde_json::to_string(&now).unwrap_or_default()
        ));
    }
    notes
}

fn note_lines(notes: &[String]) -> Vec<Line> {
    notes.iter().map(|n| Line::note(n.as_str())).collect()
}
