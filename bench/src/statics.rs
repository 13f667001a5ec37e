//! Static images and Go (issue 30): a static C loop of `clock_gettime` (each read from the
//! image's clock page through its kept vDSO, at native speed), bare, sealed and under libfaketime (which
//! cannot load into a static binary: its figures are the bare ones, with the real time);
//! start-up of a static `true` and of a Go hello world (static, and with cgo), bare and sealed,
//! each on its own and 50 times from one shell (what one more image costs a running run); a Go
//! loop of `time.Now()` and `crypto/rand` (its `crypto/rand` served in the image), at two
//! lengths in the same rotation, so that the difference per round (what a round costs, the
//! process's start-up left out) is shown beside the whole-process figures; a static C loop of
//! `fork` and `waitpid` (each traced to its exit by the supervisor, for its virtual pid); a
//! static C loop of `open` (each sent to the supervisor, which looks at its path).
//! Side by side in one run, modes rotating every round.

use std::ffi::OsString;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::measure::Mode;
use crate::process::{self, Runs};

/// `clock_gettime` calls of one run of the loop.
pub const LOOP_CALLS: u64 = 20_000;
/// Forks (each waited for) of one run of the fork loop: each is traced to its exit under seal
/// (docs/design.md, "Virtual pids of its children and threads").
pub const FORK_ROUNDS: u64 = 200;
/// Opens (each read once and closed) of one run of the open loop: each open of a static image
/// is sent to the supervisor, which looks at its path (docs/design.md, "Sealed files").
pub const OPEN_ROUNDS: u64 = 2_000;
/// Rounds of the static C listing loop (`fixtures/bench/static_listdir.c`).
pub const LIST_ROUNDS: u64 = 500;
/// Rounds of the Go loop (each: `time.Now()`, two clock reads, and one `getrandom`), short and
/// long: the per-round cost is the difference over the difference in rounds.
pub const GO_ROUNDS: u64 = 2_000;
pub const GO_ROUNDS_LONG: u64 = 20_000;

struct Case {
    label: String,
    runs: Runs,
    /// Calls in one run (per-call figures), or 0 for a start-up case.
    calls: u64,
}

fn build(cmd: &mut Command, what: &str) -> Result<(), String> {
    let st = cmd.status().map_err(|e| format!("{what}: {e}"))?;
    st.success().then_some(()).ok_or(format!("{what} failed"))
}

/// A program to measure: `(label, program, args, with libfaketime, calls)`.
type Planned = (String, PathBuf, Vec<OsString>, bool, u64);

/// The programs, built in `dir`, and the Go loop (measured at two lengths).
fn plan(root: &Path, dir: &Path) -> (Vec<Planned>, Option<PathBuf>) {
    let mut plan = Vec::new();
    let mut go_loop = None;
    let cc = |out: &str, src: &Path| {
        let bin = dir.join(out);
        crate::measure::cc(src, &bin, &["-static"])
            .ok()
            .map(|()| bin)
    };
    if let Some(bin) = cc("static_clock", &root.join("fixtures/bench/static_clock.c")) {
        plan.push((
            format!("static C loop, {LOOP_CALLS} × `clock_gettime`"),
            bin,
            vec![LOOP_CALLS.to_string().into()],
            true,
            LOOP_CALLS,
        ));
    }
    if let Some(bin) = cc("static_fork", &root.join("fixtures/bench/static_fork.c")) {
        plan.push((
            format!("static C loop, {FORK_ROUNDS} × (`fork` + `_exit` + `waitpid`)"),
            bin,
            vec![FORK_ROUNDS.to_string().into()],
            true,
            FORK_ROUNDS,
        ));
    }
    if let Some(bin) = cc("static_open", &root.join("fixtures/bench/static_open.c")) {
        plan.push((
            format!("static C loop, {OPEN_ROUNDS} × (`open` + `read` + `close`)"),
            bin,
            vec![OPEN_ROUNDS.to_string().into()],
            true,
            OPEN_ROUNDS,
        ));
    }
    if let Some(bin) = cc(
        "static_listdir",
        &root.join("fixtures/bench/static_listdir.c"),
    ) {
        plan.push((
            format!(
                "static C loop, {LIST_ROUNDS} × (`opendir` + `readdir` to the end + `closedir`)"
            ),
            bin,
            vec![LIST_ROUNDS.to_string().into()],
            true,
            LIST_ROUNDS,
        ));
    }
    let true_src = dir.join("static_true.c");
    let _ = std::fs::write(&true_src, "int main(void) { return 0; }\n");
    if let Some(bin) = cc("static_true", &true_src) {
        plan.push(("static `true` (start-up)".into(), bin, vec![], false, 0));
    }
    // For reference: the dynamic `true`, which libseal loads into (no supervisor).
    if let Some(t) = crate::which("true") {
        plan.push((
            "dynamic `true` (start-up, reference)".into(),
            t,
            vec![],
            false,
            0,
        ));
    }
    if crate::which("go").is_some() {
        // `go build` of files of fixtures/bench (`src`: names separated by spaces), static or
        // with cgo, its caches in `dir`.
        let go = |out: &str, src: &str, cgo: &str| {
            let bin = dir.join(out);
            build(
                Command::new("go")
                    .args(["build", "-o"])
                    .arg(&bin)
                    .args(src.split(' ').map(|f| root.join("fixtures/bench").join(f)))
                    .env("CGO_ENABLED", cgo)
                    .env("GOCACHE", dir.join("go-cache"))
                    .env("GOPATH", dir.join("go-path"))
                    .env("GO111MODULE", "off"),
                "go build",
            )
            .ok()
            .map(|()| bin)
        };
        go_loop = go("go_loop", "go_loop.go", "0");
        // The same loop linked with cgo (`cgo_link.go` only imports "C"): libseal loads into it,
        // and its runtime reads the clock from the page of libseal's vDSO.
        if let Some(bin) = go("go_loop_cgo", "go_loop.go cgo_link.go", "1") {
            plan.push((
                format!("Go loop, cgo, {GO_ROUNDS} × (`time.Now()` + 8 bytes of `crypto/rand`)"),
                bin,
                vec![GO_ROUNDS.to_string().into()],
                true,
                GO_ROUNDS,
            ));
        }
        for (cgo, label, src) in [("0", "static", "hello.go"), ("1", "cgo", "hello_cgo.go")] {
            if let Some(bin) = go(&format!("hello_{label}"), src, cgo) {
                plan.push((
                    format!("Go hello world, {label} (start-up)"),
                    bin,
                    vec![],
                    false,
                    0,
                ));
            }
        }
    }
    // Each start-up again, 50 times from one shell (the shell started once): the cost of one
    // more image in a run that is already going, the run's own start-up left out.
    let sh = crate::which("sh");
    let looped: Vec<_> = plan
        .iter()
        .filter(|p| p.4 == 0)
        .filter_map(|(label, bin, _, _, _)| {
            let what = label.split(" (start-up").next()?;
            let sh = sh.clone()?;
            let script =
                format!("i=0; while [ $i -lt {LOOP_IMAGES} ]; do \"$0\"; i=$((i+1)); done");
            Some((
                format!("{LOOP_IMAGES} × {what} from one shell (per image: last column)"),
                sh,
                vec![OsString::from("-c"), script.into(), bin.clone().into()],
                false,
                LOOP_IMAGES,
            ))
        })
        .collect();
    plan.extend(looped);
    (plan, go_loop)
}

/// Images one shell starts in a start-up loop row.
const LOOP_IMAGES: u64 = 50;

/// Measures what can be built here; `None` when nothing could.
pub fn section(at: &process::Section) -> Result<Option<String>, String> {
    let mut cases = Vec::new();
    let (plan, go_loop) = plan(at.root, at.dir);
    let mut per_round = None;
    if let Some(bin) = go_loop {
        let (short, long) = lengths(at, &bin)?;
        per_round = Some(PerRound::of(&short, &long));
        for (runs, n) in [(short, GO_ROUNDS), (long, GO_ROUNDS_LONG)] {
            cases.push(Case {
                label: format!("Go loop, static, {n} × (`time.Now()` + 8 bytes of `crypto/rand`)"),
                runs,
                calls: n,
            });
        }
    }
    for (label, prog, args, with_faketime, calls) in plan {
        let modes: Vec<Mode> = at
            .modes
            .iter()
            .copied()
            .filter(|m| with_faketime || *m != Mode::Faketime)
            .collect();
        let runs = at.measure(&label, &prog, &args, &modes, calls == 0)?;
        cases.push(Case { label, runs, calls });
    }
    Ok((!cases.is_empty()).then(|| render(&cases, per_round.as_ref())))
}

/// The Go loop at [`GO_ROUNDS`] and [`GO_ROUNDS_LONG`] rounds, one after the other in each
/// mode of each round (modes rotating as elsewhere), after a warm-up round.
fn lengths(at: &process::Section, bin: &Path) -> Result<(Runs, Runs), String> {
    let (mut short, mut long) = (Runs::default(), Runs::default());
    eprint!(
        "seal-bench: Go loop at {GO_ROUNDS} and {GO_ROUNDS_LONG} rounds, {} rounds × {} modes ",
        at.rounds,
        at.modes.len()
    );
    for round in 0..=at.rounds {
        for mode in crate::measure::rotation(at.modes, round) {
            for (runs, n) in [(&mut short, GO_ROUNDS), (&mut long, GO_ROUNDS_LONG)] {
                let args = [OsString::from(n.to_string())];
                let s = crate::measure::run(at.launch.command(mode, bin, &args), false)?;
                if round > 0 {
                    runs.wall.entry(mode.name()).or_default().push(s.wall_ms);
                    runs.cpu.entry(mode.name()).or_default().push(s.cpu_ms);
                }
            }
        }
        eprint!(".");
    }
    eprintln!();
    Ok((short, long))
}

/// What one round of the Go loop costs in each mode: the median over rounds of (long − short)
/// wall time, over the difference in rounds (µs); and the median of sealed over bare.
struct PerRound {
    us: Vec<(Mode, f64)>,
    ratio: Option<f64>,
}

impl PerRound {
    fn of(short: &Runs, long: &Runs) -> PerRound {
        let per = |m: Mode| -> Option<Vec<f64>> {
            let (a, b) = (long.wall.get(m.name())?, short.wall.get(m.name())?);
            let d = (GO_ROUNDS_LONG - GO_ROUNDS) as f64;
            Some(a.iter().zip(b).map(|(l, s)| (l - s) * 1e3 / d).collect())
        };
        let modes = [Mode::Bare, Mode::Seal, Mode::Faketime];
        let us = modes
            .iter()
            .filter_map(|&m| Some((m, crate::measure::median(&per(m)?))))
            .collect();
        let ratio = per(Mode::Seal).zip(per(Mode::Bare)).map(|(s, b)| {
            let r: Vec<f64> = s.iter().zip(&b).map(|(x, y)| x / y).collect();
            crate::measure::median(&r)
        });
        PerRound { us, ratio }
    }
}

fn render(cases: &[Case], per_round: Option<&PerRound>) -> String {
    let mut s = String::from("## Static images and Go\n\n");
    s.push_str(
        "Static binaries run under seal's system-call supervisor (docs/design.md, \"Static \
         binaries: system-call supervision\"): each sealed call from the image is a seccomp \
         user notification, answered by another process, except clock reads through the \
         vDSO, which read a page the supervisor shares with the image. libfaketime cannot load into a static \
         binary: its column is the bare program, with the real time. Milliseconds of wall time \
         per run, medians; ratios are medians of per-round ratios; per call: (sealed − bare) \
         wall time / calls (in a loop row, per image: what one more image costs a run). \
         Targets (issue 30): a sealed static image's start-up ≤ bare + 2 ms.\n\n",
    );
    s.push_str(
        "| program | bare ms | seal ms | seal / bare | seal − bare | libfaketime ms | per sealed call |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    for c in cases {
        let med = |m: Mode| c.runs.summary(m).map(|x| x.wall_median);
        let ratio = c.runs.paired_ratio(Mode::Seal).map(|(w, _)| w);
        let cell = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("–".into(), f);
        let diff = med(Mode::Seal).zip(med(Mode::Bare)).map(|(a, b)| a - b);
        let per_call = diff
            .filter(|_| c.calls > 0)
            .map(|d| d * 1e3 / c.calls as f64);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            c.label,
            cell(med(Mode::Bare), &|v| format!("{v:.2}")),
            cell(med(Mode::Seal), &|v| format!("{v:.2}")),
            cell(ratio, &|v| format!("{v:.2}×")),
            cell(diff, &|v| format!("{v:+.2} ms")),
            cell(med(Mode::Faketime), &|v| format!("{v:.2}")),
            cell(per_call, &|v| format!("{v:.1} µs")),
        );
    }
    s.push('\n');
    if let Some(p) = per_round {
        let cell = |m: Mode| {
            p.us.iter()
                .find(|x| x.0 == m)
                .map_or("–".into(), |x| format!("{:.2}", x.1))
        };
        let _ = write!(
            s,
            "The Go loop per round, its process's start-up left out: (wall time at \
             {GO_ROUNDS_LONG} rounds − at {GO_ROUNDS}) / {} rounds, median over rounds (both \
             lengths in the same rotation). Target (issue 30): sealed ≤ 1.2× bare.\n\n\
             | Go loop, per round | bare µs | seal µs | libfaketime µs | seal / bare |\n\
             |---|---:|---:|---:|---:|\n\
             | `time.Now()` + 8 bytes of `crypto/rand` | {} | {} | {} | {} |\n\n",
            GO_ROUNDS_LONG - GO_ROUNDS,
            cell(Mode::Bare),
            cell(Mode::Seal),
            cell(Mode::Faketime),
            p.ratio.map_or("–".into(), |r| format!("{r:.2}×")),
        );
    }
    s
}
