//! The pytest plugin (python/seal_pytest) end to end: `pytest --seal` on fixtures/pytest prints
//! the same bytes every run, and the `sealed` fixture's golden file is recorded then checked.
//! The plugin is loaded from the source tree (PYTHONPATH + `-p seal_pytest.plugin`) with the
//! built seal as SEAL_BIN: installing the package would run its maturin build backend, i.e.
//! cargo again; .ci/run checks the real wheel.

use crate::util::*;
use std::time::Duration;

#[test]
fn pytest_seal_is_stable_and_goldens_round_trip() {
    require_tools!("python3");
    if run_plain("python3", ["-c", "import pytest"]).code != Some(0) {
        skip!("python3 has no pytest");
    }
    let dir = tempfile::tempdir().unwrap();
    let proj = dir.path().join("proj");
    copy_dir(&fixture("pytest"), &proj);
    let _ = std::fs::remove_dir_all(proj.join("golden"));
    let run = || {
        let mut c = command("python3");
        c.args([
            "-m",
            "pytest",
            "-p",
            "seal_pytest.plugin",
            "-p",
            "no:cacheprovider",
        ])
        .args(["--seal", "-s", "-q"])
        .current_dir(&proj)
        .env("PYTHONPATH", root().join("python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("SEAL_BIN", seal_bin());
        run_timeout(c, Duration::from_secs(60))
    };
    let first = run();
    first.ok().stdout_has("5 passed");
    assert!(proj.join("golden/date.json").is_file(), "{}", first.show());
    // Runs 2 and 3 check the golden run 1 recorded; every byte (even `in 0.00s`) is sealed.
    assert_runs_agree("pytest --seal", 2, run).stdout_has("now 2026-01-01T00:00:00");
    // A changed golden fails with a diff naming it.
    let g = proj.join("golden/date.json");
    let text = std::fs::read_to_string(&g)
        .unwrap()
        .replace("2026-01-01", "1999-01-01");
    std::fs::write(&g, text).unwrap();
    run()
        .code_is(1)
        .stdout_has("golden date")
        .stdout_has("stdout differs");
}
