//! Per-call cost of the clock and randomness entry points and of `rdtsc`: fixtures/bench/percall.c, compiled
//! with the system `cc`, run bare, under seal and under libfaketime in interleaved rounds.
//!
//! Each process runs every op in batches and times each batch with its own thread CPU time
//! (raw syscall). A batch's cost per call minus the same batch's empty-call loop is one sample;
//! the figure is the median over every batch of every round.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::measure::{self, median, Launch, Mode};

/// The ops percall.c knows, in report order, with a label for the table.
pub const OPS: &[(&str, &str)] = &[
    ("clock_gettime_realtime", "`clock_gettime(CLOCK_REALTIME)`"),
    (
        "clock_gettime_monotonic",
        "`clock_gettime(CLOCK_MONOTONIC)`",
    ),
    ("time", "`time(NULL)`"),
    ("gettimeofday", "`gettimeofday`"),
    ("getrandom16", "`getrandom(16 bytes)`"),
    ("rdtsc", "`rdtsc` (sealed: a trap, a SIGSEGV round trip)"),
    (
        "pipe_write_read",
        "1-byte `write` + `read` on a pipe (sealed: a causal clock carried)",
    ),
    (
        "stat",
        "`stat` of a file from before the run (sealed: clamped; target ≤ 1.2×)",
    ),
    (
        "bind0",
        "TCP `socket` + `bind` to port 0 + `close` (sealed: a seeded port)",
    ),
];
pub const LOOP: &str = "loop";

/// Samples per (mode, op): raw ns/call and ns/call net of the loop.
#[derive(Default)]
pub struct PerCall {
    pub raw: BTreeMap<(&'static str, String), Vec<f64>>,
    pub net: BTreeMap<(&'static str, String), Vec<f64>>,
}

impl PerCall {
    pub fn raw_median(&self, mode: Mode, op: &str) -> f64 {
        median(
            self.raw
                .get(&(mode.name(), op.to_string()))
                .map_or(&[][..], |v| v),
        )
    }
    pub fn net_median(&self, mode: Mode, op: &str) -> f64 {
        median(
            self.net
                .get(&(mode.name(), op.to_string()))
                .map_or(&[][..], |v| v),
        )
    }
}

/// Compiles percall.c into `dir` with `cc -O2`.
pub fn compile(root: &Path, dir: &Path) -> Result<PathBuf, String> {
    measure::compile_fixture(root, dir, "percall", &[])
}

/// Runs `rounds` rounds; each round starts one percall process per mode (the order rotates)
/// doing `batches` batches of `iterations` calls of every op.
pub fn measure(
    launch: &Launch,
    percall: &Path,
    modes: &[Mode],
    rounds: usize,
    iterations: u64,
    batches: u32,
) -> Result<PerCall, String> {
    let args: Vec<OsString> = vec![iterations.to_string().into(), batches.to_string().into()];
    let mut res = PerCall::default();
    for round in 0..rounds {
        for mode in measure::rotation(modes, round) {
            let sample = measure::run(launch.command(mode, percall, &args), true)?;
            let mut loop_ns = f64::NAN;
            for line in sample.stdout.lines() {
                let mut it = line.split_whitespace();
                let (Some(op), Some(ns)) = (it.next(), it.next().and_then(|v| v.parse().ok()))
                else {
                    return Err(format!("percall printed an unexpected line: {line:?}"));
                };
                // The loop op comes first in every batch.
                if op == LOOP {
                    loop_ns = ns;
                }
                res.raw
                    .entry((mode.name(), op.to_string()))
                    .or_default()
                    .push(ns);
                res.net
                    .entry((mode.name(), op.to_string()))
                    .or_default()
                    .push(if op == LOOP { ns } else { ns - loop_ns });
            }
        }
        eprint!(".");
    }
    eprintln!();
    Ok(res)
}
