//! Context switches: fixtures/bench/switches.c passes a byte back and forth between two
//! processes, or two threads, over pipes; every round trip is four context switches. Measured
//! bare, sealed, sealed with `--unseal cpu` and under libfaketime, side by side.
//!
//! The `cpu` family (docs/design.md, "CPU instructions") makes `rdtsc` trap
//! (`PR_SET_TSC`) and `cpuid` fault (`ARCH_SET_CPUID`) in every sealed thread; the kernel
//! switches both per thread, with a control-register write and a model-specific-register write
//! each time it switches between a trapped thread and another (the idle task included). On
//! bare metal that is a few hundred cycles; a hypervisor may intercept either write, and then
//! every switch of a sealed program costs an exit. This section shows the price on the
//! machine it runs on.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;

use crate::measure::{Launch, Mode};
use crate::process::{self, Runs};

/// Round trips per run.
pub const ROUND_TRIPS: u64 = 5000;

struct Case {
    label: &'static str,
    runs: Runs,
}

/// Measures both cases (`rounds` rounds each, after a warm-up round) and renders the section.
pub fn section(
    launch: &Launch,
    root: &Path,
    dir: &Path,
    with_faketime: bool,
    rounds: usize,
) -> Result<String, String> {
    let bin = crate::measure::compile_fixture(root, dir, "switches", &["-pthread"])?;
    let mut modes = vec![Mode::Bare, Mode::Seal, Mode::SealNoCpu];
    if with_faketime {
        modes.push(Mode::Faketime);
    }
    let mut cases = Vec::new();
    for (label, kind) in [
        ("two processes (a fork)", "procs"),
        ("two threads", "threads"),
    ] {
        let args = [
            OsString::from(kind),
            OsString::from(ROUND_TRIPS.to_string()),
        ];
        eprint!(
            "seal-bench: context switches, {label}, {rounds} rounds × {} modes ",
            modes.len()
        );
        let runs = process::measure(launch, &bin, &args, &modes, 1, rounds, 1)?;
        cases.push(Case { label, runs });
    }
    Ok(render(&cases))
}

fn render(cases: &[Case]) -> String {
    let mut s = String::from("## Context switches\n\n");
    let _ = write!(
        s,
        "`fixtures/bench/switches.c`: {ROUND_TRIPS} round trips of one byte over two pipes, \
         each a sleep and a wake-up on either side (four context switches). Milliseconds of \
         wall time per run, medians; per round trip: (mode − bare) / {ROUND_TRIPS}, in µs. \
         The `cpu` family (sealed `rdtsc` and `cpuid`: docs/design.md, \"CPU instructions\") \
         has the kernel write a control register and a model-specific register at every \
         switch between a trapped thread and another; `--unseal cpu` leaves both alone. On \
         bare metal those writes cost a few hundred cycles; a hypervisor that intercepts them \
         makes each switch of a sealed program an exit (this machine: the difference between \
         the two sealed columns).\n\n\
         | round trips between | bare ms | seal ms | `--unseal cpu` ms | libfaketime ms | seal, per round trip | `--unseal cpu`, per round trip |\n\
         |---|---:|---:|---:|---:|---:|---:|\n"
    );
    for c in cases {
        let med = |m: Mode| c.runs.summary(m).map(|x| x.wall_median);
        let cell = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.1}"));
        let per = |m: Mode| {
            med(m).zip(med(Mode::Bare)).map_or("–".into(), |(a, b)| {
                format!("{:+.1} µs", (a - b) * 1e3 / ROUND_TRIPS as f64)
            })
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            c.label,
            cell(med(Mode::Bare)),
            cell(med(Mode::Seal)),
            cell(med(Mode::SealNoCpu)),
            cell(med(Mode::Faketime)),
            per(Mode::Seal),
            per(Mode::SealNoCpu),
        );
    }
    s.push('\n');
    s
}
