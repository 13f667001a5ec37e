//! The pytest plugin (python/seal_pytest) end to end: `pytest --seal` on fixtures/pytest prints
//! the same bytes every run, the recording run included; `@pytest.mark.seal` runs a test with
//! its own settings; `--seal-verify N` is green on a stable test and names the line of an
//! unstable one; `--seal-census` names the file:line of each read; the `sealed` fixture's
//! goldens are `seal golden`'s, both ways. The plugin is loaded from the source tree
//! (PYTHONPATH + `-p seal_pytest.plugin`) with the built seal as SEAL_BIN: installing the
//! package would run its maturin build backend, i.e. cargo again; .ci/wheel checks the wheel.

use crate::util::*;
use std::path::Path;
use std::time::Duration;

const PYTEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Skips the rest of the test (visibly) when python3 has no pytest.
macro_rules! require_pytest {
    () => {
        if !have("python3") || run_plain("python3", ["-c", "import pytest"]).code != Some(0) {
            skip!("python3 has no pytest");
        }
    };
}

/// pytest's summary line without the session's duration (`7 passed in 0.00s`): it can differ
/// by a few milliseconds from run to run when a test runs nested seals through
/// `subprocess.run(..., timeout=…)` (`sealed.run`), whose poll loop reads the clock once a pass
/// and makes as many passes as the child's output takes to arrive (docs/limits.md). Every
/// value the tests print is still compared.
fn session_time_out(stdout: &str) -> String {
    stdout
        .lines()
        .map(|l| match l.find(" passed in ") {
            Some(i) => &l[..i + " passed".len()],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A copy of fixtures/NAME in a fresh temporary directory (kept while the TempDir lives).
fn project(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let proj = dir.path().join("proj");
    copy_dir(&fixture(name), &proj);
    let _ = std::fs::remove_dir_all(proj.join("golden"));
    (dir, proj)
}

/// `python3 -m pytest -p seal_pytest.plugin -p no:cacheprovider ARGS` in `proj`.
fn pytest(proj: &Path, args: &[&str]) -> Output {
    let mut c = command("python3");
    c.args([
        "-m",
        "pytest",
        "-p",
        "seal_pytest.plugin",
        "-p",
        "no:cacheprovider",
    ])
    .args(args)
    .current_dir(proj)
    .env("PYTHONPATH", root().join("python"))
    .env("PYTHONDONTWRITEBYTECODE", "1")
    .env("SEAL_BIN", seal_bin());
    run_timeout(c, PYTEST_TIMEOUT)
}

fn seal_in(proj: &Path, args: &[&str]) -> Output {
    let mut c = seal(args);
    c.current_dir(proj);
    run_timeout(c, PYTEST_TIMEOUT)
}

/// The recording run is compared too: it created golden/, which pytest collected on the next
/// runs (two clock reads), moving every later sealed time; the plugin never collects it now.
#[test]
fn pytest_seal_is_stable_and_goldens_round_trip() {
    require_pytest!();
    let (_dir, proj) = project("pytest");
    let mut first = true;
    let out = assert_runs_agree_by(
        "pytest --seal (the recording run too)",
        5,
        session_time_out,
        || {
            let out = pytest(&proj, &["--seal", "-s", "-q"]);
            if first {
                assert!(proj.join("golden/date.json").is_file(), "{}", out.show());
                first = false;
            }
            out
        },
    );
    out.stdout_has("7 passed")
        .stdout_has("now 2026-01-01T00:00:00")
        .stdout_has("c time 1767225600\n")
        .stdout_has("marked 2030-06-01T00:00");
    // A changed golden fails with a diff naming it.
    let g = proj.join("golden/date.json");
    let text = std::fs::read_to_string(&g)
        .unwrap()
        .replace("2026-01-01", "1999-01-01");
    std::fs::write(&g, text).unwrap();
    pytest(&proj, &["--seal", "-s", "-q"])
        .code_is(1)
        .stdout_has("golden date")
        .stdout_has("stdout differs");
}

/// A marked test runs in a sealed child with the marker's epoch and seed, in a sealed session
/// and in a plain one alike, and prints the same bytes every run.
#[test]
fn a_seal_marker_runs_the_test_with_its_own_settings() {
    require_pytest!();
    let (_dir, proj) = project("pytest");
    let sealed = assert_runs_agree_by(
        "a marked test in pytest --seal",
        2,
        session_time_out,
        || {
            pytest(
                &proj,
                &[
                    "--seal",
                    "-s",
                    "-q",
                    "test_marker.py",
                    "test_clock.py::test_now",
                ],
            )
        },
    );
    sealed
        .stdout_has("marked 2030-06-01T00:00 ")
        .stdout_has("now 2026-01-01T00:00:00")
        .stdout_has("2 passed");
    let plain = pytest(&proj, &["-s", "-q", "test_marker.py"]);
    plain.ok().stdout_has("marked 2030-06-01T00:00 ");
    let marked = |o: &Output| {
        o.stdout
            .lines()
            .find(|l| l.contains("marked "))
            .map(str::to_string)
    };
    assert_eq!(marked(&plain), marked(&sealed), "{}", plain.show());
    // An unknown keyword is a usage error naming it.
    std::fs::write(
        proj.join("test_bad_marker.py"),
        "import pytest\n\n@pytest.mark.seal(sede=1)\ndef test_x():\n    pass\n",
    )
    .unwrap();
    pytest(&proj, &["-q", "test_bad_marker.py"]).stderr_has("unknown keyword 'sede'");
}

/// `--seal-verify 3`: green on a stable test (uuid, time, pid, temp name), red on a test that
/// reads /dev/urandom unsealed (`unseal="random"`), naming the test and the line.
#[test]
fn seal_verify_is_green_on_a_stable_test_and_names_the_line_of_an_unstable_one() {
    require_pytest!();
    let (_dir, proj) = project("pytest_verify");
    pytest(&proj, &["--seal-verify", "3", "-q", "test_stable.py"])
        .ok()
        .stdout_has("1 passed")
        .stdout_has(
            "seal-verify: 3 sealed runs of 1 test(s): every outcome and captured output identical",
        );
    pytest(&proj, &["--seal-verify=3", "-q"])
        .code_is(1)
        .stdout_has("seal-verify: 3 sealed runs of 2 test(s) differ:")
        .stdout_has("test_unstable.py::test_urandom: output differs, first at line 3:")
        .stdout_has("    run 1: urandom ")
        .stdout_lacks("test_stable.py::test_stable:");
}

/// `--seal-census` runs each test in its own sealed child and lists its reads by project
/// file:line (the helper's lines included), and writes the patch-target rows of those lines.
#[test]
fn seal_census_lists_the_file_and_line_of_each_read() {
    require_pytest!();
    let (_dir, proj) = project("pytest_census");
    let out = pytest(&proj, &["--seal-census", "-q"]);
    out.ok()
        .stdout_has("seal census: reads per test, by project file:line")
        .stdout_has("test_census.py::test_reads\n")
        .stdout_has("      1  helper.py:6 stamp  time clock_gettime CLOCK_REALTIME\n")
        .stdout_has("      1  helper.py:10 today  time clock_gettime CLOCK_REALTIME\n")
        .stdout_has("  test_census.py:10 test_reads  random getrandom\n")
        .stdout_has(
            "test_census.py::test_reads_nothing\n       (no sealed reads from the project's code)",
        )
        .stdout_has("-> seal-patch-targets.json");
    let rows: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(proj.join("seal-patch-targets.json")).unwrap(),
    )
    .unwrap();
    let row = |line: u64| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["line"] == line && r["file"].as_str().unwrap().ends_with("/helper.py"))
            .unwrap_or_else(|| panic!("no row for helper.py:{line} in {rows:#}"))
            .clone()
    };
    assert_eq!(row(6)["patch_target"], "helper.time.time", "{rows:#}");
    assert_eq!(row(10)["patch_target"], "helper.datetime", "{rows:#}");
    assert_eq!(row(6)["test"], "test_census.py::test_reads", "{rows:#}");
}

/// Goldens are shared: what `sealed.golden` writes `seal golden check` passes (the file is the
/// one `seal golden record` writes, byte for byte), and what `record` writes the fixture passes;
/// an edited golden fails in both.
#[test]
fn goldens_are_shared_with_seal_golden_both_ways() {
    require_pytest!();
    let (_dir, proj) = project("pytest");
    let g = proj.join("golden/date.json");
    pytest(&proj, &["-q", "test_golden.py"]).ok();
    let by_pytest = std::fs::read_to_string(&g).unwrap();
    seal_in(&proj, &["golden", "check"])
        .ok()
        .stdout_has("ok      date");
    std::fs::remove_file(&g).unwrap();
    seal_in(&proj, &["golden", "record"]).ok();
    let by_seal = std::fs::read_to_string(&g).unwrap();
    assert_eq!(by_pytest, by_seal);
    pytest(&proj, &["--seal", "-q", "test_golden.py"])
        .ok()
        .stdout_has("2 passed");
    // The settings record comes from `seal golden settings`; a bad value is one line, exit 2.
    seal_in(&proj, &["golden", "settings", "--seed", "x"])
        .code_is(2)
        .stderr_has("--seed");
    std::fs::write(&g, by_seal.replace("00:00:00.0", "11:11:11.0")).unwrap();
    seal_in(&proj, &["golden", "check"]).code_is(1);
    pytest(&proj, &["-q", "test_golden.py"])
        .code_is(1)
        .stdout_has("stdout differs");
}
