//! End-to-end tests: `seal verify` proves a seal with N identical runs, and shows the moved
//! lines (and census rows) when a source is out of the seal's reach.

use std::path::Path;

use serde_json::Value;

use crate::util::*;

fn in_dir(args: &[&str], dir: &Path) -> Output {
    let mut c = seal(args);
    c.current_dir(dir);
    run_timeout(c, std::time::Duration::from_secs(120))
}

/// `seal verify ARGS --json FILE -- CMD` in `dir`; returns the output and the JSON report.
fn verify_with_report(dir: &Path, args: &[&str], cmd: &[&str]) -> (Output, Value) {
    let json = dir.join("verify.json");
    let mut all = vec!["verify"];
    all.extend_from_slice(args);
    all.extend(["--json", json.to_str().unwrap(), "--"]);
    all.extend_from_slice(cmd);
    let out = in_dir(&all, dir);
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("no report {}: {e}\n{}", json.display(), out.show()));
    (out, serde_json::from_str(&text).unwrap())
}

/// A Python program reading the clock, the RNG, the pid and a hash-ordered set, and appending
/// to an artifact file: N/N identical, because seal pins them and the harness puts the
/// artifact back before every run (an appending command must not differ from itself).
#[test]
fn sealed_python_is_identical_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let script = fixture("python/verify_sealed.py");
    let (out, report) = verify_with_report(
        dir.path(),
        &["-n", "10", "--artifact", "out/*.txt"],
        &["python3", script.to_str().unwrap()],
    );
    out.ok();
    assert!(
        out.stdout.starts_with("10/10 identical  sha256:"),
        "{}",
        out.show()
    );
    assert_eq!(report["identical"], true);
    assert_eq!(report["results"].as_array().unwrap().len(), 10);
    assert!(report["results"][0]["artifacts"]["out/result.txt"].is_string());
    // The artifact holds one run's line, not ten.
    let art = std::fs::read_to_string(dir.path().join("out/result.txt")).unwrap();
    assert_eq!(art.lines().count(), 1, "{art}");
}

/// A statically linked binary cannot be preloaded, but seal's system-call supervisor serves
/// its clock (tests/e2e/static_images.rs): verify finds one result.
#[test]
fn a_static_binary_clock_is_stable() {
    let probe = std::process::Command::new("cc")
        .args(["-static", "-x", "c", "-o", "/dev/null", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .unwrap()
                .write_all(b"int main(){return 0;}")?;
            c.wait()
        });
    if !probe.map(|s| s.success()).unwrap_or(false) {
        skip!("cc -static is not available");
    }
    let bin = build_c("verify_static_time", &["-static"]);
    let dir = tempfile::tempdir().unwrap();
    let out = in_dir(
        &["verify", "-n", "5", "--", bin.to_str().unwrap()],
        dir.path(),
    );
    out.code_is(0);
    out.stdout_lacks("distinct results");
}

/// Threads printing in scheduler order: real nondeterminism no seal can pin; the diff shows
/// the worker lines that moved.
#[test]
fn thread_interleaving_differs_with_moved_lines() {
    let bin = build_c("verify_threads", &[]);
    let dir = tempfile::tempdir().unwrap();
    let (out, report) = verify_with_report(dir.path(), &["-n", "30"], &[bin.to_str().unwrap()]);
    out.code_is(1);
    out.stdout_has("distinct results in 30 runs");
    let moved = out
        .stdout
        .lines()
        .filter(|l| l.starts_with('-') || l.starts_with('+'))
        .filter(|l| l.contains("worker"))
        .count();
    assert!(moved >= 2, "{}", out.show());
    assert_eq!(report["identical"], false);
    assert!(report["first_difference"]["stdout_diff"]
        .as_str()
        .unwrap()
        .contains("worker"));
}

/// A family left unsealed on purpose: the census rows that moved are not required (counts
/// can be equal), but the diff and exit 1 are; `-n 1` is a usage error.
#[test]
fn unsealed_time_differs_and_bad_n_is_usage() {
    let dir = tempfile::tempdir().unwrap();
    let out = in_dir(
        &[
            "verify",
            "-n",
            "3",
            "--unseal",
            "time",
            "--",
            "python3",
            "-c",
            "import time; print('t', time.time_ns())",
        ],
        dir.path(),
    );
    out.code_is(1);
    out.stdout_has("\n-t [-");
    let out = in_dir(&["verify", "-n", "1", "--", "true"], dir.path());
    out.code_is(2);
}
