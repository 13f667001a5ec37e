//! `seal golden record` / `update`: each case runs sealed `--passes N` times; a golden is
//! written only when every pass produced the same masked output, artifacts, exit code and
//! census totals. A case whose passes differ is refused with the lines and census rows that
//! moved: a golden recorded over nondeterminism is the failure this command exists to prevent.

use std::process::ExitCode;

use anyhow::Result;

use super::compare::{self, show};
use super::exec::{self, Pass, PassError};
use super::file::{self, Golden, SealRecord, FORMAT_VERSION};
use super::load::{at_least_one_pass, golden_path, load_suite, selected, shown};
use super::suite::Case;
use crate::cli::GoldenRunArgs;
use crate::observe;

enum Outcome {
    /// The golden, and the masks that matched somewhere.
    Stable(Box<Golden>, Vec<String>),
    Refused,
}

pub fn run(args: &GoldenRunArgs, update: bool) -> Result<ExitCode> {
    at_least_one_pass(args.passes)?;
    let suite = load_suite(&args.suite, args.quiet)?;
    let Some(cases) = selected(&suite, &args.names)? else {
        return Ok(ExitCode::SUCCESS);
    };
    if args.passes == 1 && !args.quiet {
        crate::term::warn("--passes 1 records without a stability gate");
    }
    let colour = crate::term::colour_stdout();
    let mut outcomes: Vec<(&Case, Outcome)> = Vec::new();
    let mut config_errors: Vec<String> = Vec::new();
    for case in cases {
        match record_case(case, args.passes, colour, args.quiet)? {
            Ok(o) => outcomes.push((case, o)),
            Err(e) => config_errors.push(e),
        }
    }
    // A configuration error anywhere: nothing is written.
    if !config_errors.is_empty() {
        for e in &config_errors {
            crate::term::note(format_args!("error: {e}"));
        }
        crate::term::note("no golden file written");
        return Ok(ExitCode::from(2));
    }
    let mut refused = 0;
    for (case, outcome) in outcomes {
        let (golden, used) = match outcome {
            Outcome::Stable(g, used) => (g, used),
            Outcome::Refused => {
                refused += 1;
                continue;
            }
        };
        let path = golden_path(&suite, case);
        let text = golden.to_canonical_json();
        let before = std::fs::read_to_string(&path).ok();
        let written = file::write(&path, &text)?;
        let state = match (&before, written) {
            (None, _) => "new",
            (Some(_), false) => "unchanged",
            (Some(_), true) => "changed",
        };
        let masked = if used.is_empty() {
            String::new()
        } else {
            format!("; masked: {}", used.join(", "))
        };
        say!(
            "recorded {}  {}  ({state}{masked})",
            case.name,
            shown(&path)
        )?;
        if update && written {
            if let Some(old) = before {
                let label = shown(&path);
                for l in compare::unified(
                    &old,
                    &text,
                    &format!("{label} (before)"),
                    &format!("{label} (after)"),
                ) {
                    say!("    {}", show(&l, colour))?;
                }
            }
        }
    }
    if refused > 0 {
        say!("{refused} case(s) refused: their passes differ; no golden written for them")?;
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the passes of one case. `Err(line)` is a configuration error of the case.
fn record_case(
    case: &Case,
    passes: usize,
    colour: bool,
    quiet: bool,
) -> Result<std::result::Result<Outcome, String>> {
    let mut runs: Vec<Pass> = Vec::with_capacity(passes);
    // A new case under golden mode's `spin_after` is also run once without it: a program
    // that divides by a wall-clock duration of real work (`n / (time() - t)`) sees 0 there and
    // fails. Its exit status then differs, and the case is recorded with every read ticking.
    let without_spin;
    let mut case = case;
    if case.spin_default {
        let mut ticking = case.clone();
        ticking.settings.spin_after = 0;
        ticking.spin_default = false;
        let pass = |c: &Case| match exec::run_pass(c) {
            Ok(p) => Ok(Ok(p)),
            Err(PassError::Case { key, msg }) => Ok(Err(c.error(key, msg).to_string())),
            Err(PassError::Seal(e)) => Err(e),
        };
        let spun = match pass(case)? {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        let ticked = match pass(&ticking)? {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        if spun.observed.exit_code != ticked.observed.exit_code {
            if !quiet {
                crate::term::warn(format_args!(
                    "case {}: with spin_after = {} it exits {}, with every read ticking {}: recorded with spin_after = 0 (unprinted wall-clock reads a refactor adds will move its printed times)",
                    case.name,
                    case.settings.spin_after,
                    spun.observed.exit_code,
                    ticked.observed.exit_code
                ));
            }
            without_spin = ticking;
            case = &without_spin;
            runs.push(ticked);
        } else {
            runs.push(spun);
        }
    }
    while runs.len() < passes {
        match exec::run_pass(case) {
            Ok(p) => runs.push(p),
            Err(PassError::Case { key, msg }) => return Ok(Err(case.error(key, msg).to_string())),
            Err(PassError::Seal(e)) => return Err(e),
        }
    }
    // Counts the scheduler moves are never pinned, whether or not these passes agreed on them.
    for r in &mut runs {
        file::without_unpinned(&mut r.observed.census);
    }
    let first = &runs[0];
    if let Some(g) = first.unmatched.first() {
        return Ok(Err(case
            .error(
                "artifacts",
                format!(
                    "{g:?} matched no file in {} after the run",
                    shown(&case.cwd)
                ),
            )
            .to_string()));
    }
    if !quiet {
        if let Some(text) = &case.settings.epoch_relative {
            let note = crate::config::epoch_note(text, case.settings.epoch_ns);
            crate::term::warn(format_args!(
                "case {}: {note}; the golden records that epoch, and checking it on another day fails",
                case.name
            ));
        }
        for w in &first.warnings {
            crate::term::warn(format_args!("case {}: {w}", case.name));
        }
        if first.processes == 0 {
            crate::term::warn(format_args!(
                "case {}: no process of this case was sealed (a static or setuid program cannot be)",
                case.name
            ));
        }
    }
    // Every pass's output must agree with the first's.
    if let Some((k, cmp)) = runs.iter().enumerate().skip(1).find_map(|(k, p)| {
        let c = compare::compare(
            &first.observed,
            &p.observed,
            ("pass 1", &format!("pass {}", k + 1)),
        );
        (!c.same_output()).then_some((k, c))
    }) {
        say!(
            "REFUSED {}: pass 1 and pass {} differ; a golden recorded over nondeterminism would flake",
            case.name,
            k + 1
        )?;
        for d in &cmp.differences {
            say!("  {}", d.title)?;
            for l in &d.lines {
                say!("    {}", show(l, colour))?;
            }
        }
        let rows = census_rows(&runs);
        if !rows.is_empty() {
            say!("  census rows that differ (pass 1 .. pass {passes}):")?;
            for (_, row) in rows {
                say!("    {row}")?;
            }
        }
        say!(
            "  hint: `seal probe --sealed -- CMD` shows which lines vary and why; mask what must vary (masks = [...])"
        )?;
        return Ok(Ok(Outcome::Refused));
    }
    // The same output with census totals that moved: the runtime's own bookkeeping (a JVM's
    // clock reads, waits and thread ids vary with its threads' timing). Those rows are not
    // recorded, so re-recording gives the same golden, and `check` leaves them out.
    let varies: Vec<String> = census_rows(&runs).into_iter().map(|(key, _)| key).collect();
    if !varies.is_empty() && !quiet {
        crate::term::warn(format_args!(
            "case {}: census rows that vary between passes are not recorded or compared: {}",
            case.name,
            varies.join(", ")
        ));
    }
    let mut observed = first.observed.clone();
    file::without_rows(&mut observed.census, &varies);
    Ok(Ok(Outcome::Stable(
        Box::new(Golden {
            version: FORMAT_VERSION,
            name: case.name.clone(),
            argv: case.argv.clone(),
            cwd: case.cwd_rel.clone(),
            masks: case.mask_names.clone(),
            seal: SealRecord::of(&case.settings),
            census_varies: varies,
            observed,
        }),
        first.masks_used.clone(),
    )))
}

/// `family/function` and `family/function: n1 n2 n3` for every census row whose count is not
/// the same in all passes.
fn census_rows(runs: &[Pass]) -> Vec<(String, String)> {
    let rows: Vec<_> = runs
        .iter()
        .map(|r| observe::compare::total_rows(&r.observed.census))
        .collect();
    observe::compare::moved_rows(&rows.iter().collect::<Vec<_>>())
        .into_iter()
        .map(|((fam, f), counts)| {
            let shown: Vec<String> = counts
                .iter()
                .map(|c| c.map_or("-".into(), |n| n.to_string()))
                .collect();
            (
                format!("{fam}/{f}"),
                format!("{fam}/{f}: {}", shown.join(" ")),
            )
        })
        .collect()
}
