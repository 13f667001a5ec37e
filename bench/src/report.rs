//! The markdown of BENCHMARKS.md: the machine, the targets with met / not met, the tables, how
//! it was measured and how to re-run. Everything below [`KEEP_MARKER`] in an existing file
//! (hand-written analysis) is kept when the file is rewritten.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::machine::Machine;
use crate::measure::{Mode, FAKETIME_SPEC};
use crate::percall::{PerCall, LOOP, OPS};
use crate::process::Runs;

pub const KEEP_MARKER: &str =
    "<!-- seal-bench: everything below this line is kept when the benchmark rewrites this file -->";

/// Everything measured in one run.
pub struct Results {
    pub machine: Machine,
    pub load_after: String,
    pub faketime: bool,
    /// Why libfaketime was not measured (when `faketime` is false).
    pub faketime_skipped: &'static str,
    pub percall: PerCall,
    pub percall_rounds: usize,
    pub iterations: u64,
    pub batches: u32,
    pub startup: Runs,
    pub python: Option<Runs>,
    pub python_exe: String,
    /// Why the Python workload was not measured (when `python` is None).
    pub python_skipped: &'static str,
    /// (mode, op) -> instructions per call; empty when valgrind is absent or skipped.
    pub callgrind: BTreeMap<(&'static str, &'static str), f64>,
    pub callgrind_note: Option<String>,
    pub command_line: String,
    /// The measured source tree: short commit, and whether it had uncommitted changes.
    pub revision: String,
}

fn ns(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v.abs() < 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.1}")
    }
}

fn ratio(a: f64, b: f64) -> String {
    if a.is_nan() || b.is_nan() || b <= 0.0 {
        "–".into()
    } else {
        format!("{:.2}×", a / b)
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "**met**"
    } else {
        "**not met**"
    }
}

pub fn render(r: &Results) -> String {
    let mut s = String::new();
    let m = &r.machine;
    let pc = &r.percall;
    let _ = writeln!(s, "# Benchmarks\n");
    let _ = writeln!(
        s,
        "Written by `cargo run --release -p seal-bench` on {} (`{}`, source {}). Every figure \
         below comes from that one run: bare, sealed and libfaketime measured side by side in \
         interleaved rounds, reported as medians. These are benchmarks, never timed tests: the \
         machine is shared and noisy.\n",
        m.date, r.command_line, r.revision
    );

    let _ = writeln!(s, "## Machine\n");
    let _ = writeln!(s, "| | |\n|---|---|");
    for (k, v) in [
        ("CPU", m.cpu.clone()),
        ("cores", m.cores.to_string()),
        ("kernel", m.kernel.clone()),
        ("clock source", m.clocksource.clone()),
        ("glibc", m.glibc.clone()),
        ("rustc", m.rustc.clone()),
        ("Python", m.python.clone()),
        ("libfaketime", m.faketime.clone()),
        (
            "load average (1, 5, 15 min)",
            format!("{} before, {} after", m.load_before, r.load_after),
        ),
    ] {
        let _ = writeln!(s, "| {k} | {v} |");
    }
    s.push('\n');

    // Targets.
    let _ = writeln!(s, "## Targets (docs/design.md, \"Performance targets\")\n");
    let _ = writeln!(s, "| target | measured | verdict |\n|---|---|---|");
    for (op, label) in &OPS[..2] {
        let (sealed, bare) = (pc.net_median(Mode::Seal, op), pc.net_median(Mode::Bare, op));
        let _ = writeln!(
            s,
            "| sealed {label} ≤ 1.0× native | {} ns vs {} ns native ({}) | {} |",
            ns(sealed),
            ns(bare),
            ratio(sealed, bare),
            verdict(sealed <= bare)
        );
    }
    for (op, label) in [&OPS[2], &OPS[4]] {
        let sealed = pc.net_median(Mode::Seal, op);
        let _ = writeln!(
            s,
            "| sealed {label} ≤ 10 ns | {} ns | {} |",
            ns(sealed),
            verdict(sealed <= 10.0)
        );
    }
    let st_bare = r.startup.summary(Mode::Bare);
    let st_seal = r.startup.summary(Mode::Seal);
    if let (Some(b), Some(sl)) = (&st_bare, &st_seal) {
        let over = sl.wall_median - b.wall_median;
        let _ = writeln!(
            s,
            "| `seal run -- true` ≤ 2 ms over bare `true` | +{over:.2} ms (median wall; +{:.2} ms at p90; +{:.2} ms CPU) | {} |",
            sl.wall_p90 - b.wall_p90,
            sl.cpu_median - b.cpu_median,
            verdict(over <= 2.0)
        );
    }
    if let Some((wall, cpu)) = r.python.as_ref().and_then(|p| p.paired_ratio(Mode::Seal)) {
        let _ = writeln!(
            s,
            "| Python workload ≤ 1.05× unsealed wall time | {wall:.3}× wall, {cpu:.3}× CPU (median of paired rounds) | {} |",
            verdict(wall <= 1.05)
        );
    } else {
        let _ = writeln!(
            s,
            "| Python workload ≤ 1.05× unsealed | not measured ({}) | – |",
            r.python_skipped
        );
    }
    let _ = writeln!(
        s,
        "| census within the per-call targets | the census is always on in libseal: every sealed figure above includes it | {} |",
        verdict(
            OPS.iter()
                .take(2)
                .all(|(op, _)| pc.net_median(Mode::Seal, op) <= pc.net_median(Mode::Bare, op))
                && pc.net_median(Mode::Seal, "time") <= 10.0
                && pc.net_median(Mode::Seal, "getrandom16") <= 10.0
        )
    );
    s.push('\n');

    // Per-call table.
    let _ = writeln!(s, "## Per-call cost\n");
    let _ = writeln!(
        s,
        "Nanoseconds per call, net of the loop (an empty call through a pointer, timed in the same \
         batch); in brackets the raw batch time per call. Ratios are against bare.\n"
    );
    let mut header = String::from("| call | bare ns | seal ns | seal / bare |");
    let mut rule = String::from("|---|---:|---:|---:|");
    if r.faketime {
        header.push_str(" libfaketime ns | libfaketime / bare |");
        rule.push_str("---:|---:|");
    }
    let _ = writeln!(s, "{header}\n{rule}");
    let cell = |mode: Mode, op: &str| {
        format!(
            "{} ({})",
            ns(pc.net_median(mode, op)),
            ns(pc.raw_median(mode, op))
        )
    };
    for (op, label) in OPS {
        let (b, sl) = (pc.net_median(Mode::Bare, op), pc.net_median(Mode::Seal, op));
        let mut row = format!(
            "| {label} | {} | {} | {} |",
            cell(Mode::Bare, op),
            cell(Mode::Seal, op),
            ratio(sl, b)
        );
        if r.faketime {
            let f = pc.net_median(Mode::Faketime, op);
            let _ = write!(row, " {} | {} |", cell(Mode::Faketime, op), ratio(f, b));
        }
        let _ = writeln!(s, "{row}");
    }
    let mut row = format!(
        "| loop overhead (subtracted above) | {} | {} | |",
        ns(pc.raw_median(Mode::Bare, LOOP)),
        ns(pc.raw_median(Mode::Seal, LOOP))
    );
    if r.faketime {
        let _ = write!(row, " {} | |", ns(pc.raw_median(Mode::Faketime, LOOP)));
    }
    let _ = writeln!(s, "{row}\n");
    let _ = writeln!(
        s,
        "{} rounds × {} batches per mode; a batch is {} calls ({} for `getrandom`, {} for \
         `rdtsc`, {} for the pipe and `stat`, {} for `bind`). {}\n",
        r.percall_rounds,
        r.batches,
        r.iterations,
        r.iterations / 8,
        r.iterations / 256,
        r.iterations / 64,
        r.iterations / 1024,
        if r.faketime {
            format!(
                "libfaketime: `LD_PRELOAD=libfaketime.so.1 FAKETIME=\"{FAKETIME_SPEC}\"` (its \
                 start-at mode; `getrandom` is not faked without `FAKERANDOM_SEED`)."
            )
        } else {
            format!("libfaketime was not measured: {}.", r.faketime_skipped)
        }
    );

    if !r.callgrind.is_empty() {
        let _ = writeln!(s, "### Instructions per call (callgrind)\n");
        let _ = writeln!(
            s,
            "Noise-free: `valgrind --tool=callgrind`, (instructions at N₂ calls − at N₁ calls) / \
             (N₂ − N₁), less the empty loop. A system call counts only its user-space \
             instructions, so this column flatters bare `getrandom` (a real syscall).\n"
        );
        let modes: Vec<Mode> = [Mode::Bare, Mode::Seal, Mode::Faketime]
            .into_iter()
            .filter(|m| r.callgrind.keys().any(|(n, _)| *n == m.name()))
            .collect();
        let _ = writeln!(
            s,
            "| call | {} |\n|---|{}",
            modes
                .iter()
                .map(|m| m.name())
                .collect::<Vec<_>>()
                .join(" | "),
            "---:|".repeat(modes.len())
        );
        for (op, label) in OPS {
            let cells: Vec<String> = modes
                .iter()
                .map(|m| {
                    r.callgrind
                        .get(&(m.name(), *op))
                        .map_or("–".into(), |v| format!("{v:.0}"))
                })
                .collect();
            let _ = writeln!(s, "| {label} | {} |", cells.join(" | "));
        }
        s.push('\n');
    }
    if let Some(note) = &r.callgrind_note {
        let _ = writeln!(s, "{note}\n");
    }

    // Startup.
    let _ = writeln!(s, "## Startup: `seal run -- true`\n");
    let _ = writeln!(
        s,
        "Milliseconds per run, each run a fresh process started and reaped by the benchmark; \
         CPU is user + system time of the process tree (from `wait4`). Warm: the shim was \
         already extracted to the cache directory by an earlier run (the first `seal` run on a \
         machine writes it once).\n"
    );
    let _ = writeln!(
        s,
        "| command | runs | median wall | p90 wall | median CPU | median over bare |\n|---|---:|---:|---:|---:|---:|"
    );
    for (mode, label) in [
        (Mode::Bare, "`true`"),
        (Mode::Seal, "`seal run -q -- true`"),
        (Mode::Faketime, "`true` under libfaketime"),
    ] {
        if let (Some(x), Some(b)) = (r.startup.summary(mode), &st_bare) {
            let _ = writeln!(
                s,
                "| {label} | {} | {:.2} | {:.2} | {:.2} | {} |",
                x.n,
                x.wall_median,
                x.wall_p90,
                x.cpu_median,
                if mode == Mode::Bare {
                    "–".to_string()
                } else {
                    format!("+{:.2} ms", x.wall_median - b.wall_median)
                }
            );
        }
    }
    s.push('\n');

    // Python.
    if let Some(py) = &r.python {
        let _ = writeln!(s, "## Python workload\n");
        let _ = writeln!(
            s,
            "`{} fixtures/bench/workload.py`: records with `time.time()` stamps, `random` \
             sampling, JSON round trips, sorting, SHA-256, a prime sieve, `uuid4` and \
             `datetime.now()` per round. Ratios are medians of per-round ratios (each round runs \
             every mode once, order rotating).\n",
            r.python_exe
        );
        let _ = writeln!(
            s,
            "| mode | runs | median wall ms | p90 wall ms | median CPU ms | wall / bare | CPU / bare |\n|---|---:|---:|---:|---:|---:|---:|"
        );
        for mode in [Mode::Bare, Mode::Seal, Mode::Faketime] {
            let Some(x) = py.summary(mode) else { continue };
            let (w, c) = if mode == Mode::Bare {
                ("–".to_string(), "–".to_string())
            } else {
                py.paired_ratio(mode)
                    .map_or(("–".into(), "–".into()), |(w, c)| {
                        (format!("{w:.3}×"), format!("{c:.3}×"))
                    })
            };
            let _ = writeln!(
                s,
                "| {} | {} | {:.0} | {:.0} | {:.0} | {w} | {c} |",
                mode.name(),
                x.n,
                x.wall_median,
                x.wall_p90,
                x.cpu_median
            );
        }
        s.push('\n');
    }

    let _ = writeln!(s, "## How it is measured\n");
    let _ = writeln!(
        s,
        "- Per call: `fixtures/bench/percall.c`, compiled with the system `cc -O2`, calls each \
         entry point in a tight loop through the PLT, as a program does. Each batch is timed \
         with the thread's own CPU clock read by a raw `syscall` instruction (libc's clocks are \
         what is being sealed, and CPU time leaves out the time the thread spent descheduled). \
         The sealed runs use the release `seal` binary, so libseal counts every call into its \
         census exactly as in real use.\n\
         - Startup and Python: wall time from the benchmark's own monotonic clock around spawn \
         and reap; CPU time from `wait4`'s rusage.\n\
         - Every round runs every mode once, the order rotating, so load that comes and goes hits \
         every mode alike; medians (and p90 where a tail matters) resist the rest.\n"
    );
    let _ = writeln!(s, "## Re-running\n");
    let _ = writeln!(
        s,
        "```sh\n\
         apt-get install -y faketime valgrind   # optional: the libfaketime column, instruction counts\n\
         cargo run --release -p seal-bench      # builds the release seal, measures, rewrites BENCHMARKS.md\n\
         cargo run --release -p seal-bench -- --quick --no-write   # a quick look, printed only\n\
         ```\n\n\
         `--help` lists the knobs (rounds, iterations, `--no-faketime`, `--no-callgrind`, `--seal PATH`).\n"
    );
    s
}
