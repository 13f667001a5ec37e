//! The JVM and Node: start-up and a JIT-heavy workload (fixtures/bench/Workload.java,
//! fixtures/bench/workload.js, a few seconds of work each with the JIT on), sealed against
//! bare and libfaketime in rotating rounds. Target: the workloads at most 1.10× bare.

use std::ffi::OsString;
use std::fmt::Write;
use std::path::PathBuf;
use std::process::Command;

use crate::measure::Mode;
use crate::process::{self, Runs};

/// A program on `PATH`.
fn which(prog: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

struct Case {
    label: &'static str,
    workload: bool,
    runs: Runs,
}

/// Measures what is installed; `None` when neither `java`+`javac` nor `node` is.
pub fn section(at: &process::Section) -> Result<Option<String>, String> {
    let (root, dir) = (at.root, at.dir);
    let mut plan: Vec<(&'static str, bool, PathBuf, Vec<OsString>)> = Vec::new();
    if let (Some(java), Some(javac)) = (which("java"), which("javac")) {
        let classes = dir.join("java-workload");
        let ok = Command::new(javac)
            .arg("-d")
            .arg(&classes)
            .arg(root.join("fixtures/bench/Workload.java"))
            .status()
            .map_err(|e| format!("javac: {e}"))?
            .success();
        if !ok {
            return Err("javac failed on fixtures/bench/Workload.java".into());
        }
        plan.push((
            "`java -version` (start-up)",
            false,
            java.clone(),
            vec!["-version".into()],
        ));
        let args = vec!["-cp".into(), classes.into(), "Workload".into()];
        plan.push(("`java Workload` (JIT on)", true, java, args));
    }
    if let Some(node) = which("node") {
        plan.push((
            "`node -e 0` (start-up)",
            false,
            node.clone(),
            vec!["-e".into(), "0".into()],
        ));
        let args = vec![root.join("fixtures/bench/workload.js").into()];
        plan.push(("`node workload.js`", true, node, args));
    }
    if plan.is_empty() {
        return Ok(None);
    }
    let mut cases = Vec::new();
    for (label, workload, prog, args) in plan {
        let runs = at.measure(label, &prog, &args, at.modes, !workload)?;
        cases.push(Case {
            label,
            workload,
            runs,
        });
    }
    Ok(Some(render(&cases)))
}

fn render(cases: &[Case]) -> String {
    let mut s = String::from("## JVM and Node\n\n");
    s.push_str(
        "Default flags (the JIT on, no `--tick 0`): start-up, and a JIT-heavy workload of a few \
         seconds (`fixtures/bench/Workload.java`, `fixtures/bench/workload.js`: a sieve, maps of \
         strings, sorting, string building, with clock, random and uuid reads each round). \
         Milliseconds of wall time, medians; ratios are medians of per-round ratios. Target: \
         each workload ≤ 1.10× bare.\n\n",
    );
    s.push_str(
        "| program | bare ms | seal ms | seal / bare | libfaketime ms | libfaketime / bare | target |\n\
         |---|---:|---:|---:|---:|---:|---|\n",
    );
    for c in cases {
        let med = |m: Mode| c.runs.summary(m).map(|x| x.wall_median);
        let ratio = |m: Mode| c.runs.paired_ratio(m).map(|(w, _)| w);
        let cell = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("–".into(), f);
        let target = match (c.workload, ratio(Mode::Seal)) {
            (true, Some(r)) if r <= 1.10 => "**met** (≤ 1.10×)",
            (true, Some(_)) => "**not met** (≤ 1.10×)",
            _ => "–",
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {target} |",
            c.label,
            cell(med(Mode::Bare), &|v| format!("{v:.0}")),
            cell(med(Mode::Seal), &|v| format!("{v:.0}")),
            cell(ratio(Mode::Seal), &|v| format!("{v:.3}×")),
            cell(med(Mode::Faketime), &|v| format!("{v:.0}")),
            cell(ratio(Mode::Faketime), &|v| format!("{v:.3}×")),
        );
    }
    s.push('\n');
    s
}
