//! The travel matrix: a small polyglot project (Python started through a wrapper that reads
//! the clock and execs the interpreter, Node, a C helper, a shell pipeline that lists a
//! directory and archives it) is recorded with `seal golden record` on the real file system,
//! then checked green from a copy at a path 100 characters longer on tmpfs, with the
//! interpreter called directly, under `taskset -c 0`, with `HOME`/`USER` changed, 3 KB more
//! environment and `-j 4`. Harmless refactors stay green; behaviour changes fail with the exact
//! diff.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::*;

const SEAL_TOML: &str = r#"[seal]
seed = 7

[[case]]
name = "py"
cmd = ["python3", "report.py"]

[[case]]
name = "node"
cmd = ["node", "stats.js"]

[[case]]
name = "c"
cmd = ["./helper"]

[[case]]
name = "pipeline"
cmd = "ls -f data | grep -v '^[.]'; find data -type f; tar --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - data | sha256sum; date -u +%FT%T"
"#;

const REPORT_PY: &str = "import datetime, os, random, subprocess, time, uuid\n\
\n\
def total(rows):\n    return sum(r * 3 for r in rows)\n\
\n\
rows = [random.randint(1, 100) for _ in range(5)]\n\
print('generated', datetime.datetime.now().isoformat())\n\
print('rows', rows, 'total', total(rows))\n\
print('run', uuid.uuid4(), 'pid', os.getpid())\n\
print('child', subprocess.run(['date', '+%s.%N'], capture_output=True, text=True).stdout.strip())\n\
time.sleep(0.05)\n\
print('done', datetime.datetime.now().isoformat(), random.random())\n";

const STATS_JS: &str = "const crypto = require('crypto');\n\
const { execSync } = require('child_process');\n\
console.log('start', new Date().toISOString(), crypto.randomUUID());\n\
console.log('child', execSync('date +%s').toString().trim());\n\
setTimeout(() => console.log('later', new Date().toISOString(), crypto.randomBytes(4).toString('hex')), 30);\n";

/// Files of `data/`, created in this order (neither sorted nor reverse-sorted).
const DATA: [&str; 8] = [
    "beta", "omega", "alpha", "zeta", "gamma", "mid", "delta", "kappa",
];

/// Writes the project into `dir`: sources, the C helper (built from
/// `fixtures/c/refactor_clock.c`, with `-DTIMING` when `timing`), data files, seal.toml.
fn write_project(dir: &Path) {
    std::fs::create_dir_all(dir.join("data/sub")).unwrap();
    std::fs::write(dir.join("seal.toml"), SEAL_TOML).unwrap();
    std::fs::write(dir.join("report.py"), REPORT_PY).unwrap();
    std::fs::write(dir.join("stats.js"), STATS_JS).unwrap();
    for (i, name) in DATA.iter().enumerate() {
        std::fs::write(dir.join("data").join(name), format!("{name} {i}\n")).unwrap();
    }
    std::fs::write(dir.join("data/sub/inner"), "inner\n").unwrap();
    put_helper(dir, false);
}

fn put_helper(dir: &Path, timing: bool) {
    let extra: &[&str] = if timing { &["-DTIMING"] } else { &[] };
    let bin = build_c("refactor_clock", extra);
    let to = dir.join("helper");
    let _ = std::fs::remove_file(&to);
    std::fs::copy(bin, &to).unwrap();
}

/// A pyenv-like shim directory: `python3` is a bash script that reads the clock and random,
/// starts a subprocess, then execs the real interpreter.
fn wrapper_dir(dir: &Path) -> PathBuf {
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v python3"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let shims = dir.join("shims");
    std::fs::create_dir_all(&shims).unwrap();
    let p = shims.join("python3");
    std::fs::write(
        &p,
        format!(
            "#!/bin/bash\n: $EPOCHREALTIME $RANDOM\nv=$(date +%s)\nexec {} \"$@\"\n",
            real.trim()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    shims
}

/// `seal golden ARGS` in `dir`, with `env` set, wrapped by `pre` (e.g. `taskset -c 0`).
fn golden(dir: &Path, args: &[&str], env: &[(&str, String)], pre: &[&str]) -> Output {
    let seal = seal_bin();
    let mut cmd = if pre.is_empty() {
        Command::new(&seal)
    } else {
        let mut c = Command::new(pre[0]);
        c.args(&pre[1..]).arg(&seal);
        c
    };
    cmd.arg("golden").args(args).current_dir(dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_timeout(cmd, TIMEOUT)
}

fn path_with(first: &Path) -> String {
    format!("{}:{}", first.display(), std::env::var("PATH").unwrap())
}

/// A copy of `from` at a path about 100 characters longer, on tmpfs when /dev/shm is one.
fn far_copy(from: &Path, keep: &tempfile::TempDir) -> PathBuf {
    let deep = keep
        .path()
        .join("a-checkout-on-the-ci-runner-at-a-much-longer-path")
        .join("workspace-of-the-build-machine-0123456789-abcdef")
        .join("project");
    copy_dir(from, &deep);
    deep
}

fn tmpfs_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let on_tmpfs = std::fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split(' ').nth(1) == Some("/dev/shm") && l.contains(" tmpfs "))
        })
        .unwrap_or(false);
    if on_tmpfs {
        tempfile::Builder::new()
            .prefix("seal-travel-")
            .tempdir_in(shm)
            .unwrap()
    } else {
        private_tmpdir()
    }
}

#[test]
fn a_suite_recorded_here_passes_from_a_far_copy_on_tmpfs_and_survives_harmless_refactors() {
    require_tools!("python3", "node", "tar", "taskset");
    let home = private_tmpdir();
    let proj = home.path().join("proj");
    write_project(&proj);
    let shims = wrapper_dir(home.path());
    // Recorded through the wrapper, on the real file system.
    let rec = golden(&proj, &["record"], &[("PATH", path_with(&shims))], &[]);
    rec.ok();
    let golden_py = std::fs::read_to_string(proj.join("golden/py.json")).unwrap();
    assert_has(&golden_py, "generated 2026-01-01T00:00:00");
    let pipeline = std::fs::read_to_string(proj.join("golden/pipeline.json")).unwrap();
    let mut sorted: Vec<&str> = DATA.iter().copied().chain(["sub"]).collect();
    sorted.sort();
    let v: serde_json::Value = serde_json::from_str(&pipeline).unwrap();
    let lines: Vec<String> = v["stdout"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().trim_end().to_string())
        .collect();
    assert_eq!(
        lines[..sorted.len()],
        sorted[..],
        "ls -f lists by name: {pipeline}"
    );

    // Checked from a far copy on tmpfs: interpreter called directly, one CPU, another HOME and
    // USER, 3 KB more environment, four cases at a time.
    let shm = tmpfs_dir();
    let far = far_copy(&proj, &shm);
    let big = "x".repeat(3 * 1024);
    let env = [
        // Another user's home (seal extracts its shim under it when no XDG_CACHE_HOME says
        // otherwise: a fresh cache, as on a CI runner).
        (
            "HOME",
            shm.path().join("home-of-someone").display().to_string(),
        ),
        ("USER", "someone-else".to_string()),
        ("SEAL_TRAVEL_PADDING", big),
    ];
    let check = golden(&far, &["check", "-j", "4"], &env, &["taskset", "-c", "0"]);
    check.ok();

    // Harmless refactors, all at once: unprinted clock reads in Python, Node and C (monotonic
    // and wall-clock: the suite sets no `spin_after`, so golden mode's own holds), a function
    // moved to another module, an extra import, an extra exec wrapper.
    std::fs::write(
        far.join("util.py"),
        "import time\n\ndef total(rows):\n    t = time.perf_counter(); w = time.time()\n    \
         s = sum(r * 3 for r in rows)\n    took = time.perf_counter() - t, time.time() - w\n    return s\n",
    )
    .unwrap();
    let refactored = REPORT_PY
        .replace(
            "import datetime, os, random, subprocess, time, uuid\n",
            "import datetime, os, random, subprocess, time, uuid\nimport json\nfrom util import total\n\
             t0 = time.monotonic(); c0 = time.process_time()\n",
        )
        .replace("def total(rows):\n    return sum(r * 3 for r in rows)\n", "");
    std::fs::write(far.join("report.py"), refactored).unwrap();
    std::fs::write(
        far.join("stats.js"),
        format!(
            "const t0 = process.hrtime.bigint(), w0 = Date.now();\n{STATS_JS}const took = [performance.now(), Date.now() - w0];\n"
        ),
    )
    .unwrap();
    put_helper(&far, true);
    let toml = SEAL_TOML.replace(
        "cmd = [\"python3\", \"report.py\"]",
        "cmd = [\"env\", \"python3\", \"report.py\"]",
    );
    std::fs::write(far.join("seal.toml"), toml).unwrap();
    let check = golden(&far, &["check", "-j", "4"], &env, &[]);
    check.ok();

    // Behaviour changes fail, each with its exact diff.
    let changed = REPORT_PY
        .replace(
            "print('done', datetime.datetime.now().isoformat(), random.random())",
            "print('done', (datetime.datetime.now() + datetime.timedelta(days=1)).isoformat(), random.random())\nprint('extra line')",
        )
        .replace("random.randint(1, 100) for _ in range(5)", "random.randint(1, 1000) for _ in range(5)");
    std::fs::write(far.join("report.py"), changed).unwrap();
    let fail = golden(&far, &["check", "py"], &[], &[]);
    fail.code_is(1);
    let diff: String = fail
        .stdout
        .lines()
        .map(|l| l.trim_start().to_string() + "\n")
        .collect();
    let minus: Vec<&str> = diff.lines().filter(|l| l.starts_with("-done ")).collect();
    let plus: Vec<&str> = diff.lines().filter(|l| l.starts_with("+done ")).collect();
    assert!(
        minus.len() == 1
            && plus.len() == 1
            && minus[0].contains("2026-01-01T")
            && plus[0].contains("2026-01-02T"),
        "the printed date moved a day: {}",
        fail.show()
    );
    assert!(diff.lines().any(|l| l == "+extra line"), "{}", fail.show());
    assert!(
        diff.lines().any(|l| l.starts_with("-rows "))
            && diff.lines().any(|l| l.starts_with("+rows ")),
        "the changed draw shows: {}",
        fail.show()
    );
}
