//! Whole-process measurements: `seal run -- true` against bare `true` (startup cost), and a
//! Python workload sealed against unsealed. Modes alternate within every round, the order
//! rotating, so drift in the machine's load hits every mode alike.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use crate::measure::{self, median, percentile, Launch, Mode};

/// Wall and CPU times of one program per mode.
#[derive(Default)]
pub struct Runs {
    pub wall: BTreeMap<&'static str, Vec<f64>>,
    pub cpu: BTreeMap<&'static str, Vec<f64>>,
}

/// Summary of one mode's runs.
pub struct Summary {
    pub n: usize,
    pub wall_median: f64,
    pub wall_p90: f64,
    pub cpu_median: f64,
}

impl Runs {
    pub fn summary(&self, mode: Mode) -> Option<Summary> {
        let wall = self.wall.get(mode.name())?;
        let cpu = &self.cpu[mode.name()];
        Some(Summary {
            n: wall.len(),
            wall_median: median(wall),
            wall_p90: percentile(wall, 90.0),
            cpu_median: median(cpu),
        })
    }

    /// Median over rounds of the per-round ratio `mode / Bare` (paired, so slow drift of the
    /// machine cancels), for wall and CPU time.
    pub fn paired_ratio(&self, mode: Mode) -> Option<(f64, f64)> {
        let ratios = |m: &BTreeMap<&'static str, Vec<f64>>| {
            let a = m.get(mode.name())?;
            let b = m.get(Mode::Bare.name())?;
            Some(median(
                &a.iter().zip(b).map(|(x, y)| x / y).collect::<Vec<_>>(),
            ))
        };
        Some((ratios(&self.wall)?, ratios(&self.cpu)?))
    }
}

/// A section of programs measured side by side (the JVM and Node, static images): where
/// they run, their modes, and the rounds of a long case.
pub struct Section<'a> {
    pub launch: &'a Launch,
    /// The repository (the fixtures).
    pub root: &'a Path,
    /// Where the section builds its programs.
    pub dir: &'a Path,
    pub modes: &'a [Mode],
    pub rounds: usize,
}

impl Section<'_> {
    /// Runs one program of the section in `modes` after a warm-up round, `rounds` times, or
    /// four times as many for a start-up case (its runs are short), showing progress.
    pub fn measure(
        &self,
        label: &str,
        prog: &Path,
        args: &[OsString],
        modes: &[Mode],
        startup: bool,
    ) -> Result<Runs, String> {
        let n = if startup {
            self.rounds * 4
        } else {
            self.rounds
        };
        eprint!("seal-bench: {label}, {n} rounds × {} modes ", modes.len());
        measure(self.launch, prog, args, modes, 1, n, 1)
    }
}

/// Runs `prog args` `rounds` times in every mode (after `warmup` unrecorded rounds).
pub fn measure(
    launch: &Launch,
    prog: &Path,
    args: &[OsString],
    modes: &[Mode],
    warmup: usize,
    rounds: usize,
    progress_every: usize,
) -> Result<Runs, String> {
    let mut runs = Runs::default();
    for round in 0..warmup + rounds {
        for mode in measure::rotation(modes, round) {
            let s = measure::run(launch.command(mode, prog, args), false)?;
            if round >= warmup {
                runs.wall.entry(mode.name()).or_default().push(s.wall_ms);
                runs.cpu.entry(mode.name()).or_default().push(s.cpu_ms);
            }
        }
        if progress_every > 0 && round % progress_every == 0 {
            eprint!(".");
        }
    }
    eprintln!();
    Ok(runs)
}
