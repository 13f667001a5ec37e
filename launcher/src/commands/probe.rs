//! `seal probe`: the determinism probe. Runs the command under controlled perturbations
//! (`probe::perturb`), each in a fresh copy of the working tree, unsealed by default or sealed
//! with `--sealed`; classifies every output line as stable, volatile (masked) or unstable
//! (`probe::classify`); with `--attribute` names the entropy families behind each varying line
//! (`probe::attribute`). Writes a JSON report and exits 0 / 2 unstable / 3 mask budget / 4 mask
//! set grew against `--compare`.

mod attribute;
mod classify;
mod perturb;
mod tree;

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::cli::ProbeArgs;
use crate::observe::masks::MaskSet;
use crate::usage::UsageError;
use classify::{Drift, LineReport, RunLines, Status};

pub const EXIT_UNSTABLE: u8 = 2;
pub const EXIT_MASK_BUDGET: u8 = 3;
pub const EXIT_MASK_GREW: u8 = 4;

#[derive(Debug, Serialize, Deserialize)]
pub struct Report {
    pub version: u32,
    pub command: Vec<String>,
    pub sealed: bool,
    pub perturbations: Vec<PerturbationReport>,
    pub summary: Summary,
    pub lines: Vec<LineReport>,
    pub drift: Vec<Drift>,
    /// Patterns available to the masks (name -> regex).
    pub patterns: BTreeMap<String, String>,
    #[serde(default)]
    pub notes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mask_growth: Vec<String>,
    pub exit: u8,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct PerturbationReport {
    pub name: String,
    pub what: String,
    pub runs: usize,
    /// Exit statuses of its runs.
    pub exits: Vec<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Summary {
    pub lines: usize,
    pub stable: usize,
    pub volatile: usize,
    pub unstable: usize,
    pub masked_fraction: f64,
    pub max_masked: f64,
    pub runs: usize,
}

pub fn run(args: ProbeArgs) -> Result<ExitCode> {
    crate::usage::require_command(&args.cmd, "seal probe")?;
    if args.runs == 0 {
        return Err(UsageError("-n 0: at least one run per perturbation".into()).into());
    }
    if !(0.0..=1.0).contains(&args.max_masked) {
        return Err(UsageError(format!(
            "--max-masked {}: a fraction between 0 and 1",
            args.max_masked
        ))
        .into());
    }
    let file = crate::config::load_config(args.seal.config.as_deref())?;
    let settings = crate::config::resolve(&args.seal, &crate::config::ProcessEnv, file.as_ref())?;
    let mut extra: BTreeMap<String, String> = file
        .as_ref()
        .map(|f| {
            f.file
                .patterns
                .iter()
                .map(|(k, v)| (k.clone(), v.get_ref().clone()))
                .collect()
        })
        .unwrap_or_default();
    if let Some(p) = &args.patterns {
        extra.extend(crate::observe::masks::load_patterns_file(p)?);
    }
    let masks = MaskSet::new(&extra).map_err(|e| UsageError(format!("{e:#}")))?;
    let before = match &args.compare {
        Some(p) => Some(load_report(p)?),
        None => None,
    };
    let workdir = match &args.workdir {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("cannot read the working directory")?,
    };
    if !workdir.is_dir() {
        return Err(UsageError(format!("--workdir {}: not a directory", workdir.display())).into());
    }

    let tree = tree::Tree::new(workdir);
    let perturbations = perturb::all();
    let total = perturbations.len() * args.runs;
    let progress = progress_bar(total as u64);
    let mut runs: Vec<RunLines> = Vec::new();
    let mut preports = Vec::new();
    let mut notes: Vec<String> = tree.note().into_iter().collect();
    for p in &perturbations {
        let mut exits = Vec::new();
        let mut skipped = None;
        for r in 0..args.runs {
            progress.set_message(p.name);
            let out = if args.sealed {
                perturb::run_sealed(&settings, &args.cmd, &tree, p, &[])?
            } else {
                perturb::run_unsealed(&args.cmd, &tree, p)?
            };
            progress.inc(1);
            match out {
                Ok(o) => {
                    exits.push(o.exit_code);
                    runs.push(RunLines {
                        label: format!("{}#{}", p.name, r + 1),
                        perturbation: p.name.to_string(),
                        lines: attribute::split_lines(&o.stdout),
                    });
                }
                Err(why) if runs.is_empty() => {
                    progress.finish_and_clear();
                    crate::term::note(&why);
                    return Ok(ExitCode::from(crate::run::EXIT_NOT_FOUND));
                }
                Err(why) => {
                    notes.push(format!("{}: {why}", p.name));
                    skipped = Some(why);
                    break;
                }
            }
        }
        preports.push(PerturbationReport {
            name: p.name.to_string(),
            what: p.what.to_string(),
            runs: exits.len(),
            exits,
            skipped,
        });
    }
    progress.finish_and_clear();
    if args.sealed {
        notes.push("hostname: not applied under --sealed (the seal pins the host name)".into());
    }

    let (mut lines, drift) = classify::classify(&runs, &masks);
    for l in &mut lines {
        l.causes = perturb::causes(&perturbations, &l.varies_under);
    }
    if args.attribute && lines.iter().any(|l| l.status != Status::Stable) {
        let pb = progress_bar(1 + 2 * attribute::ATTRIBUTED.len() as u64 + 1);
        let reference = runs[0].lines.clone();
        notes.extend(attribute::attribute(
            &settings,
            &args.cmd,
            &tree,
            &masks,
            &reference,
            &mut lines,
            |what| {
                pb.set_message(format!("attribute: {what}"));
                pb.inc(1);
            },
        )?);
        pb.finish_and_clear();
    }

    let n = lines.len();
    let count = |s| lines.iter().filter(|l| l.status == s).count();
    let (stable, volatile, unstable) = (
        count(Status::Stable),
        count(Status::Volatile),
        count(Status::Unstable),
    );
    let drifted = !drift.is_empty();
    let masked_fraction = if n == 0 {
        0.0
    } else {
        volatile as f64 / n as f64
    };
    let growth = before
        .as_ref()
        .map(|b| classify::mask_growth(&b.lines, &lines))
        .unwrap_or_default();
    let exit = if unstable > 0 || drifted {
        EXIT_UNSTABLE
    } else if masked_fraction > args.max_masked {
        EXIT_MASK_BUDGET
    } else if !growth.is_empty() {
        EXIT_MASK_GREW
    } else {
        0
    };
    let report = Report {
        version: 1,
        command: args
            .cmd
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        sealed: args.sealed,
        perturbations: preports,
        summary: Summary {
            lines: n,
            stable,
            volatile,
            unstable,
            masked_fraction,
            max_masked: args.max_masked,
            runs: runs.len(),
        },
        lines,
        drift,
        patterns: masks
            .masks
            .iter()
            .map(|m| (m.name.clone(), m.regex.as_str().to_string()))
            .collect(),
        notes,
        mask_growth: growth,
        exit,
    };
    let mut s = serde_json::to_string_pretty(&report)?;
    s.push('\n');
    crate::files::outfile::write(&args.report, s)
        .with_context(|| format!("cannot write the report {}", args.report.display()))?;
    print_report(&report, &args.report, args.attribute)?;
    Ok(ExitCode::from(exit))
}

pub(crate) fn load_report(path: &Path) -> Result<Report> {
    let text = crate::files::infile::read_string(path)
        .map_err(|e| UsageError(format!("--compare {}: cannot read: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        UsageError(format!(
            "--compare {}: not a seal probe report: {e}",
            path.display()
        ))
        .into()
    })
}

fn progress_bar(n: u64) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(n);
    pb.set_style(
        indicatif::ProgressStyle::with_template("seal probe: {pos}/{len} {bar:30} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    pb
}

fn status_name(s: Status) -> &'static str {
    match s {
        Status::Stable => "stable",
        Status::Volatile => "volatile",
        Status::Unstable => "unstable",
    }
}

fn clip(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(w.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

fn print_report(r: &Report, path: &Path, attributed: bool) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let s = &r.summary;
    let ran: Vec<&str> = r
        .perturbations
        .iter()
        .filter(|p| p.skipped.is_none())
        .map(|p| p.name.as_str())
        .collect();
    writeln!(
        out,
        "seal probe: {} lines, {} runs{} ({})",
        s.lines,
        s.runs,
        if r.sealed { " sealed" } else { " unsealed" },
        ran.join(", ")
    )?;
    writeln!(
        out,
        "  stable {}, volatile {} ({:.0}% masked, budget {:.0}%), unstable {}",
        s.stable,
        s.volatile,
        s.masked_fraction * 100.0,
        s.max_masked * 100.0,
        s.unstable
    )?;
    let varying: Vec<&LineReport> = r
        .lines
        .iter()
        .filter(|l| l.status != Status::Stable)
        .collect();
    if !varying.is_empty() && !attributed {
        writeln!(out)?;
        writeln!(
            out,
            "{:>5}  {:<9} {:<44} varies under / patterns",
            "line", "status", "line (masked)"
        )?;
        for l in &varying {
            let why = if l.status == Status::Volatile && !l.causes.is_empty() {
                // Masked, yet each run agrees: what moves it is named (a heap address under
                // `--sealed` moving with the environment's size or HOME).
                format!(
                    "mask: {}; {} ({})",
                    l.patterns.join(", "),
                    l.varies_under.join(", "),
                    l.causes.join(", ")
                )
            } else if l.status == Status::Volatile {
                format!("mask: {}", l.patterns.join(", "))
            } else if !l.missing_in.is_empty() {
                format!("missing in {}", l.missing_in.join(", "))
            } else if !l.causes.is_empty() {
                format!("{} ({})", l.varies_under.join(", "), l.causes.join(", "))
            } else {
                l.varies_under.join(", ")
            };
            writeln!(
                out,
                "{:>5}  {:<9} {:<44} {}",
                l.line,
                status_name(l.status),
                clip(&l.masked, 44),
                why
            )?;
        }
    }
    if attributed && !varying.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "{:>5}  {:<9} {:<38} {:<18} action",
            "line", "status", "line (masked)", "families"
        )?;
        for l in &varying {
            let fams = l.families.as_ref().map(|f| f.join(",")).unwrap_or_default();
            writeln!(
                out,
                "{:>5}  {:<9} {:<38} {:<18} {}",
                l.line,
                status_name(l.status),
                clip(&l.masked, 38),
                if fams.is_empty() { "-".into() } else { fams },
                l.action.as_deref().unwrap_or("")
            )?;
        }
    }
    for d in &r.drift {
        writeln!(
            out,
            "drift: {} printed {} lines (reference {}): {} extra, {} missing",
            d.run,
            d.lines,
            d.reference_lines,
            d.inserted.len(),
            d.missing.len()
        )?;
    }
    for g in &r.mask_growth {
        writeln!(out, "mask set grew: {g}")?;
    }
    for n in &r.notes {
        writeln!(out, "note: {n}")?;
    }
    let verdict = match r.exit {
        0 => "exit 0: every line stable or masked within budget".to_string(),
        EXIT_UNSTABLE if s.unstable == 0 => "exit 2: the line count drifts".to_string(),
        EXIT_UNSTABLE => format!(
            "exit 2: {} unstable line{}{}",
            s.unstable,
            if s.unstable == 1 { "" } else { "s" },
            if r.drift.is_empty() {
                ""
            } else {
                " (and the line count drifts)"
            }
        ),
        EXIT_MASK_BUDGET => format!(
            "exit 3: {:.0}% of lines masked, above --max-masked {:.0}%",
            s.masked_fraction * 100.0,
            s.max_masked * 100.0
        ),
        _ => "exit 4: the mask set grew against --compare".to_string(),
    };
    writeln!(out, "{verdict}; report: {}", path.display())?;
    Ok(())
}
