//! End-to-end tests: Python frames in the census (fixtures/python/pyframes). Every CPython
//! 3.8-3.13 on the machine runs the same fixture package: the census names each user line
//! that reads a sealed source with its exact count, the patch-targets file gives the right
//! kind and `unittest.mock.patch` target for each, and patching each target really replaces
//! what the line reads. Interpreters without a known layout (3.6, 3.7) run unchanged.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::*;

/// Interpreters on this machine: `(minor, path)`.
fn pythons() -> Vec<(u32, PathBuf)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/root/.pyenv/versions") else {
        return out;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let minor = name
            .strip_prefix("3.")
            .and_then(|r| r.split('.').next())
            .and_then(|m| m.parse().ok());
        let bin = e.path().join("bin/python3");
        if let (Some(m), true) = (minor, bin.is_file()) {
            out.push((m, bin));
        }
    }
    out.sort();
    out
}

/// `seal census --json --patch-targets -- python -m app.main 2` in the fixture directory:
/// `(census, patch-target rows)`.
fn census_of(python: &Path) -> (Value, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let (json, rows) = (dir.path().join("c.json"), dir.path().join("rows.json"));
    let mut cmd = seal(["census", "--json"]);
    cmd.arg(&json).arg("--patch-targets").arg(&rows);
    cmd.arg("--").arg(python).args(["-m", "app.main", "2"]);
    cmd.current_dir(fixture("python/pyframes"));
    let out = run_timeout(cmd, TIMEOUT);
    out.ok();
    assert_eq!(out.stdout, "done\n", "{}", out.show());
    let read =
        |p: &Path| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let rows = read(&rows).as_array().unwrap().clone();
    (read(&json), rows)
}

/// `file (from app/):line` → (kind, patch_target, count) of the rows in the fixture's code.
fn user_rows(rows: &[Value]) -> BTreeMap<String, (String, String, u64)> {
    rows.iter()
        .filter_map(|r| {
            let file = r["file"].as_str()?;
            let rel = &file[file.find("/app/")? + 1..];
            let key = format!("{rel}:{}", r["line"]);
            let target = r["patch_target"].as_str().unwrap_or("-").to_string();
            let kind = r["kind"].as_str().unwrap().to_string();
            Some((key, (kind, target, r["count"].as_u64().unwrap())))
        })
        .collect()
}

/// Calls per (function, user line) in the census, over every process.
fn user_lines(c: &Value) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for p in c["processes"].as_array().unwrap() {
        for call in p["calls"].as_array().unwrap() {
            for pc in call["python"].as_array().into_iter().flatten() {
                let Some(file) = pc["user"]["file"].as_str() else {
                    continue;
                };
                let Some(at) = file.find("/app/") else {
                    continue;
                };
                let site = format!("{}:{}", &file[at + 1..], pc["user"]["line"]);
                let func = call["symbol"].as_str().unwrap().to_string();
                *out.entry((func, site)).or_default() += pc["count"].as_u64().unwrap();
            }
        }
    }
    out
}

fn expected_rows() -> BTreeMap<String, (String, String, u64)> {
    let row = |k: &str, t: &str, n| (k.to_string(), t.to_string(), n);
    [
        // 2 calls in app.main, 1 more in the app.child subprocess: merged.
        (
            "app/clock_mod.py:5",
            row("module_attr", "app.clock_mod.time.time", 3),
        ),
        (
            "app/local_mod.py:5",
            row("local_copy", "app.local_mod.time", 2),
        ),
        (
            "app/helper.py:5",
            row("local_copy", "app.helper.datetime", 2),
        ),
        ("app/ids.py:5", row("module_attr", "app.ids.uuid.uuid4", 2)),
        (
            "app/native.py:6",
            row("module_attr", "app.native.os.urandom", 2),
        ),
        (
            "app/native.py:10",
            // Seeding reads getrandom once per Random() from 3.11, more often before: 0 = any.
            row("module_attr", "app.native.random.Random", 0),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

#[test]
fn census_names_each_python_line_on_every_cpython() {
    let all = pythons();
    if all.is_empty() {
        skip!("no pyenv CPython under /root/.pyenv/versions");
    }
    let mut tested = 0;
    for (minor, python) in &all {
        let (census, rows) = census_of(python);
        let root = &census["processes"][0];
        if !(8..=13).contains(minor) {
            // No known layout: no frames, and nothing else changes.
            assert!(root.get("python").is_none(), "3.{minor}: {root}");
            assert!(user_lines(&census).is_empty(), "3.{minor}");
            continue;
        }
        tested += 1;
        assert!(root["python"]
            .as_str()
            .unwrap()
            .starts_with(&format!("3.{minor}")));
        let got = user_rows(&rows);
        for (site, want) in expected_rows() {
            let mut have = got.get(&site).cloned();
            if want.2 == 0 {
                have = have.map(|(k, t, n)| (k, t, if n >= 2 { 0 } else { n }));
            }
            assert_eq!(have, Some(want), "3.{minor} row {site}: {rows:#?}");
        }
        // The thread's read: `random.seed()` draws from getrandom exactly once.
        let lines = user_lines(&census);
        let seed = ("getrandom".to_string(), "app/worker.py:6".to_string());
        assert_eq!(lines.get(&seed), Some(&1), "3.{minor}: {lines:#?}");
        assert_eq!(
            got["app/worker.py:6"].1, "app.worker.random.seed",
            "3.{minor}"
        );
        // Per function: time.time() is one CLOCK_REALTIME read, uuid4() one getrandom.
        let n = |f: &str, s: &str| lines.get(&(f.to_string(), s.to_string())).copied();
        assert_eq!(
            n("clock_gettime", "app/clock_mod.py:5"),
            Some(3),
            "3.{minor}"
        );
        assert_eq!(n("getrandom", "app/ids.py:5"), Some(2), "3.{minor}");
        // Applying every target with unittest.mock.patch reaches the mock instead.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rows.json");
        std::fs::write(&file, serde_json::to_string(&rows).unwrap()).unwrap();
        let mut c = command(python);
        c.arg("patch_check.py").arg(&file);
        c.current_dir(fixture("python/pyframes"));
        let out = run_timeout(c, TIMEOUT);
        out.ok();
        assert!(
            out.stdout.contains("checked 7\n"),
            "3.{minor}: {}",
            out.show()
        );
    }
    assert!(tested > 0, "no CPython 3.8-3.13 found");
}

#[test]
fn python_lines_are_the_same_every_run() {
    let Some((_, python)) = pythons().into_iter().find(|(m, _)| *m == 11) else {
        skip!("no CPython 3.11 under /root/.pyenv/versions");
    };
    let first = census_of(&python);
    // The thread's lines also see the GIL changing hands (timed waits and clock reads in
    // take_gil), which depends on scheduling: compare its getrandom only.
    let key = |(c, r): &(Value, Vec<Value>)| {
        let mut lines = user_lines(c);
        lines.retain(|(f, s), _| !s.starts_with("app/worker.py") || f == "getrandom");
        let mut rows = user_rows(r);
        rows.retain(|s, _| !s.starts_with("app/worker.py"));
        (lines, rows)
    };
    let want = key(&first);
    assert!(want.0.len() >= 8, "{:#?}", want.0);
    for run in 2..=5 {
        assert_eq!(
            key(&census_of(&python)),
            want,
            "run {run} differs from run 1"
        );
    }
}

#[test]
fn the_table_groups_reads_by_user_line() {
    let Some((_, python)) = pythons().into_iter().find(|(m, _)| *m == 11) else {
        skip!("no CPython 3.11 under /root/.pyenv/versions");
    };
    let mut cmd = seal(["census", "--hide-bookkeeping", "--"]);
    cmd.arg(&python).args(["-m", "app.main", "1"]);
    cmd.current_dir(fixture("python/pyframes"));
    let out = run_timeout(cmd, TIMEOUT);
    out.ok();
    let t = &out.stderr;
    assert_has(t, "PYTHON 3.11.7 CALL SITE");
    assert!(
        t.contains("app/clock_mod.py:5 stamp → time.time (clock_gettime"),
        "{t}"
    );
    assert_has(t, "app/ids.py:5 new_id → uuid.uuid4 (getrandom)\n");
    assert_has(t, "via uuid.py:");
    // Bookkeeping hidden: no start-up reads without a user frame, no import-line reads.
    assert!(!t.contains("[library code only]"), "{t}");
    assert!(!t.contains("app/main.py:4 <module>"), "{t}");
}
