//! `pytest --seal` on a suite of 200 small tests (issue 32): what the sealed session costs over
//! plain `pytest`, against the budget "one extra interpreter start plus seal's per-process
//! cost". The plugin re-executes pytest once under seal, so the extra is the outer pytest's
//! start (an interpreter that imports pytest and its plugins and parses the command line:
//! measured as `pytest --seal` with `SEAL_BIN=true`, which re-executes into `true`) plus seal's own cost for a process (measured as
//! `seal run -- python -c pass` over bare `python -c pass`). All five commands run once per
//! round, the order rotating; medians of wall time.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::measure::{self, median};

pub const TESTS: usize = 200;
const FILES: usize = 10;

/// Writes the suite: FILES files of TESTS/FILES tests, each reading the clock and a uuid.
fn write_suite(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(dir.join("pytest.ini"), "[pytest]\n").map_err(|e| e.to_string())?;
    for f in 0..FILES {
        let mut text = String::from("import time\nimport uuid\n");
        for t in 0..TESTS / FILES {
            let _ = write!(
                text,
                "\n\ndef test_{f}_{t}():\n    assert time.time() > 0 and uuid.uuid4().version == 4\n"
            );
        }
        std::fs::write(dir.join(format!("test_s{f:02}.py")), text).map_err(|e| e.to_string())?;
    }
    Ok(())
}

struct Case {
    label: &'static str,
    args: Vec<String>,
    sealed: bool,
    /// `SEAL_BIN` for the plugin: `true` instead of seal measures the outer pytest alone.
    outer_only: bool,
}

pub struct Results {
    labels: Vec<&'static str>,
    wall: Vec<Vec<f64>>,
    cpu: Vec<Vec<f64>>,
    rounds: usize,
    load_before: String,
    load_after: String,
    python: String,
}

/// Measures; `None` when python3 has no pytest.
pub fn measure(
    seal: &Path,
    root: &Path,
    workdir: &Path,
    rounds: usize,
) -> Result<Option<Results>, String> {
    let Some(python) = crate::python_exe() else {
        return Ok(None);
    };
    let has_pytest = Command::new(&python)
        .args(["-c", "import pytest"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_pytest {
        eprintln!("seal-bench: python3 has no pytest; skipping the pytest section");
        return Ok(None);
    }
    let suite = workdir.join("pytest-suite");
    write_suite(&suite)?;
    let pytest = |extra: &[&str]| {
        let mut v: Vec<String> = ["-m", "pytest", "-q", "-p", "seal_pytest.plugin"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let cases = [
        Case {
            label: "plain `pytest -q` (200 tests)",
            args: pytest(&[]),
            sealed: false,
            outer_only: false,
        },
        Case {
            label: "`pytest --seal -q` (200 tests)",
            args: pytest(&["--seal"]),
            sealed: false,
            outer_only: false,
        },
        Case {
            label: "`pytest --seal -q` with `SEAL_BIN=true` (the outer pytest alone)",
            args: pytest(&["--seal"]),
            sealed: false,
            outer_only: true,
        },
        Case {
            label: "`python -c pass`",
            args: vec!["-c".into(), "pass".into()],
            sealed: false,
            outer_only: false,
        },
        Case {
            label: "`seal run -- python -c pass`",
            args: vec!["-c".into(), "pass".into()],
            sealed: true,
            outer_only: false,
        },
    ];
    let true_bin = crate::which("true").ok_or("`true` is not on PATH")?;
    let command = |c: &Case| {
        let mut cmd = if c.sealed {
            let mut s = Command::new(seal);
            s.args(["run", "-q", "--"]).arg(&python);
            s
        } else {
            Command::new(&python)
        };
        cmd.args(&c.args)
            .current_dir(&suite)
            .env("PYTHONPATH", root.join("python"))
            .env("SEAL_BIN", if c.outer_only { &true_bin } else { seal })
            .env_remove("PYTEST_ADDOPTS");
        cmd
    };
    let load_before = crate::machine::load_average();
    let mut wall = vec![Vec::new(); cases.len()];
    let mut cpu = vec![Vec::new(); cases.len()];
    let order: Vec<usize> = (0..cases.len()).collect();
    eprint!(
        "seal-bench: pytest --seal, {rounds} rounds × {} commands ",
        cases.len()
    );
    for round in 0..rounds + 1 {
        for k in 0..cases.len() {
            let i = order[(round + k) % cases.len()];
            let s = measure::run(command(&cases[i]), false)?;
            if round > 0 {
                wall[i].push(s.wall_ms);
                cpu[i].push(s.cpu_ms);
            }
        }
        eprint!(".");
    }
    eprintln!();
    Ok(Some(Results {
        labels: cases.iter().map(|c| c.label).collect(),
        wall,
        cpu,
        rounds,
        load_before,
        load_after: crate::machine::load_average(),
        python: python.display().to_string(),
    }))
}

pub fn render(r: &Results) -> String {
    let wall: Vec<f64> = r.wall.iter().map(|w| median(w)).collect();
    let cpu: Vec<f64> = r.cpu.iter().map(|w| median(w)).collect();
    // The verdict is on CPU time (user + system of the process tree, from wait4), which a
    // loaded machine inflates far less than wall time; wall time is shown beside it.
    let (plain, sealed, outer, bare_py, sealed_py) = (cpu[0], cpu[1], cpu[2], cpu[3], cpu[4]);
    let extra = sealed - plain;
    let per_process = sealed_py - bare_py;
    let budget = outer + per_process;
    let verdict = if extra <= budget { "met" } else { "not met" };
    let mut s = String::from("## pytest --seal\n\n");
    let _ = write!(
        s,
        "A suite of {TESTS} small tests ({FILES} files; each reads `time.time()` and a \
         `uuid4()`), run by `{}` with the plugin from `python/` (`-p seal_pytest.plugin`). \
         `pytest --seal` re-executes pytest once under seal, so its cost over plain pytest \
         should be at most one extra interpreter start (the outer pytest up to the re-exec, \
         measured with `SEAL_BIN=true` so that it starts `true` instead of the sealed session) \
         plus seal's per-process cost (`seal run -- python -c pass` over `python -c pass`). Milliseconds, medians of {} rounds, the order rotating; \
         CPU is user + system time of the process tree (wait4), on which the verdict is taken. \
         Load average (1, 5, 15 min) {} before, {} after: the machine was shared, so wall \
         times are rough.\n\n",
        r.python, r.rounds, r.load_before, r.load_after
    );
    s.push_str("| command | median CPU ms | median wall ms |\n|---|---:|---:|\n");
    for ((label, c), w) in r.labels.iter().zip(&cpu).zip(&wall) {
        let _ = writeln!(s, "| {label} | {c:.0} | {w:.0} |");
    }
    let _ = write!(
        s,
        "\n`pytest --seal` − plain, CPU: **{extra:+.0} ms** (wall {:+.0} ms); budget: {outer:.0} \
         (outer start) + {per_process:.0} (seal per process) = {budget:.0} ms: **{verdict}**.\n",
        wall[1] - wall[0]
    );
    s
}
