//! End-to-end tests: values the kernel hands out that differ every run: file times (family
//! `files`) and ephemeral ports (family `net`).
//!
//! Runs where real time matters are spaced a second apart (two of them), the rest follow at
//! once: a file written one second later carries another real time, and a tree copied before
//! the run another real mtime, yet every sealed run must print the same bytes.
use std::path::Path;
use std::thread::sleep;
use std::time::Duration;

use crate::util::*;

const RUNS: usize = 5;

/// `seal ARGS -- sh -c SCRIPT` in `dir`.
fn sealed_sh(dir: &Path, args: &[&str], script: &str) -> Output {
    let mut c = seal(args);
    c.args(["--", "sh", "-c", script]).current_dir(dir);
    run_timeout(c, TIMEOUT)
}

/// A fresh directory holding `pre/` (made now, before the run: a real time that differs
/// every run) and the fixture script.
fn fresh_tree() -> tempfile::TempDir {
    let t = private_tmpdir();
    std::fs::create_dir(t.path().join("pre")).unwrap();
    std::fs::write(t.path().join("pre/in.txt"), "made before the run\n").unwrap();
    std::fs::copy(
        fixture("kernel_values/archive.sh"),
        t.path().join("archive.sh"),
    )
    .unwrap();
    t
}

fn archive_run(args: &[&str]) -> Output {
    let t = fresh_tree();
    sealed_sh(t.path(), args, "sh ./archive.sh").ok().clone()
}

/// Runs `f` RUNS times (the first two a second apart) and asserts one stdout.
fn stable(what: &str, f: impl Fn() -> Output) -> String {
    let mut outs = Vec::new();
    for i in 0..RUNS {
        if i == 1 {
            sleep(Duration::from_millis(1100));
        }
        outs.push(f());
    }
    assert_same_stdout(what, &outs)
}

#[test]
fn archives_of_files_made_in_the_run_are_identical_every_run() {
    if !have("tar") || !have("gzip") || !have("python3") {
        skip!("tar, gzip or python3 missing");
    }
    if !have("zip") {
        skip_part!("zip missing: its archive is not compared");
    }
    let out = stable("archives", || archive_run(&[]));
    // Files from before the run show the epoch (the reproducible-builds clamp), files made in
    // it a logical time just after it.
    assert_has(&out, " 1767225600.000000000 in.txt");
    assert!(
        out.lines().any(|l| l.starts_with("d/a 1767225600 ")),
        "{out}"
    );
    // Unsealed, the real times go into the archives.
    let a = archive_run(&["--unseal", "files"]);
    sleep(Duration::from_millis(1100));
    let b = archive_run(&["--unseal", "files"]);
    assert_ne!(a.stdout, b.stdout, "unsealed archives should differ");
    assert!(a.stderr.contains("files"), "{}", a.show());
}

#[test]
fn make_sees_no_clock_skew_and_a_second_make_does_nothing() {
    if !have("make") {
        skip!("make missing");
    }
    let run = || {
        let t = private_tmpdir();
        std::fs::write(
            t.path().join("Makefile"),
            "out.txt: in.txt\n\tcp in.txt out.txt\n\techo built\n",
        )
        .unwrap();
        std::fs::write(t.path().join("in.txt"), "x\n").unwrap();
        let first = sealed_sh(t.path(), &[], "make").ok().clone();
        let second = sealed_sh(t.path(), &[], "make").ok().clone();
        // A touch at the start of a run is newer than what an earlier run built.
        let third = sealed_sh(t.path(), &[], "touch in.txt; make; make")
            .ok()
            .clone();
        for o in [&first, &second, &third] {
            assert!(
                !o.stderr.contains("skew") && !o.stderr.contains("in the future"),
                "{}",
                o.show()
            );
        }
        Output {
            stdout: format!("{}--\n{}--\n{}", first.stdout, second.stdout, third.stdout),
            ..first
        }
    };
    let out = stable("make", run);
    let parts: Vec<&str> = out.split("--\n").collect();
    assert!(parts[0].contains("built"), "{out}");
    assert!(parts[1].contains("up to date"), "{out}");
    assert!(
        parts[2].contains("built") && parts[2].contains("up to date"),
        "{out}"
    );
}

#[test]
fn ls_stat_and_find_agree_on_the_order_of_writes() {
    let script = "echo a > a; sleep 1; echo b > b; touch -d @1000 old; \
                  find . -newer a -type f | sort; echo --; ls -t a b old; echo --; \
                  stat -c '%n %Y' a b old; echo --; ls -l --time-style=+%F_%T a old | cut -d' ' -f6-";
    let t0 = private_tmpdir();
    let first = sealed_sh(t0.path(), &["--warp"], script).ok().clone();
    let out = stable("ls/stat/find", || {
        let t = private_tmpdir();
        sealed_sh(t.path(), &["--warp"], script).ok().clone()
    });
    assert_eq!(first.stdout, out);
    let parts: Vec<&str> = out.split("--\n").collect();
    assert_eq!(parts[0], "./b\n", "{out}");
    assert_eq!(parts[1], "b\na\nold\n", "{out}");
    let secs: Vec<i64> = parts[2]
        .lines()
        .map(|l| l.split(' ').nth(1).unwrap().parse().unwrap())
        .collect();
    assert!(secs[1] > secs[0], "{out}");
    assert_eq!(secs[2], 1000, "{out}");
    assert!(parts[3].contains("2026-01-01_00:00:00 a"), "{out}");
    assert!(parts[3].contains("1970-01-01_00:16:40 old"), "{out}");
}

fn ports(args: &[&str], script: &str) -> Output {
    let mut c = seal(args);
    c.args(["--", "sh", "-c", script])
        .env("PORTS", fixture("kernel_values/ports.py"));
    run_timeout(c, TIMEOUT).ok().clone()
}

#[test]
fn servers_on_port_0_get_the_same_ports_every_run() {
    if !have("python3") {
        skip!("python3 missing");
    }
    let one = "python3 \"$PORTS\" one";
    let out = assert_same_stdout(
        "ports",
        &(0..RUNS).map(|_| ports(&[], one)).collect::<Vec<_>>(),
    );
    let nums: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(nums.len(), 7, "{out}");
    // Two sealed servers at once both start, each on its own ports, the same every run.
    // Each writes its own file: two processes printing to one pipe interleave mid-line.
    let two = "d=$(mktemp -d); python3 \"$PORTS\" A hold > $d/a & \
               python3 \"$PORTS\" B hold > $d/b & wait; cat $d/a $d/b; rm -r $d";
    let runs: Vec<Output> = (0..3).map(|_| ports(&[], two)).collect();
    let both = assert_same_stdout("two servers", &runs);
    assert_eq!(both.lines().count(), 2, "{both}");
    // Unsealed, the kernel picks.
    let a = ports(&["--unseal", "net"], one);
    let b = ports(&["--unseal", "net"], one);
    assert_ne!(a.stdout, b.stdout, "unsealed ports should differ");
}

/// Python's importer sees the sources' real times, so a sealed Python loads the bytecode a
/// bare one compiled (also with `PYTHONDONTWRITEBYTECODE`, where a stale-looking cache meant
/// compiling on every start), and the bytecode it writes is what a bare Python accepts. The
/// program itself still sees the clamped time.
#[test]
fn sealed_python_uses_the_bytecode_a_bare_one_wrote_and_the_other_way_round() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("sealmod.py");
    std::fs::write(&src, "VALUE = 42\n").unwrap();
    let cache = dir.path().join("__pycache__");
    let code = "import os, sealmod; print(sealmod.VALUE, os.stat(sealmod.__file__).st_mtime)";
    let imported = |o: &Output, from_pyc: bool| {
        let matches = o
            .stderr
            .lines()
            .any(|l| l.contains("sealmod") && l.contains(" matches "));
        let compiled = o.stderr.contains("code object from") && !matches;
        assert!(o.stderr.contains("sealmod"), "{}", o.show());
        assert_eq!(matches, from_pyc, "{}", o.show());
        assert_eq!(compiled, !from_pyc, "{}", o.show());
    };
    let sealed = |write: bool| {
        let mut c = seal(["--", "python3", "-v", "-c", code]);
        c.current_dir(dir.path());
        if write {
            c.env_remove("PYTHONDONTWRITEBYTECODE");
        } else {
            c.env("PYTHONDONTWRITEBYTECODE", "1");
        }
        run_timeout(c, TIMEOUT)
    };
    let bare = || {
        let mut c = command("python3");
        c.args(["-v", "-c", code]).current_dir(dir.path());
        c.env_remove("PYTHONDONTWRITEBYTECODE");
        run_timeout(c, TIMEOUT)
    };
    // A sealed Python compiles the new module and writes the cache a bare one then loads.
    let first = sealed(true);
    first.ok();
    imported(&first, false);
    assert_eq!(first.stdout, "42 1767225600.0\n", "{}", first.show());
    assert_eq!(walk_count(&cache, ".pyc"), 1, "{}", first.show());
    let b = bare();
    b.ok();
    imported(&b, true);
    // A bare Python's cache is what a sealed one loads, without writing (or being allowed to).
    std::fs::remove_dir_all(&cache).unwrap();
    bare().ok();
    let pyc = std::fs::read_dir(&cache)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let before = std::fs::read(&pyc).unwrap();
    let again = sealed(false);
    again.ok();
    imported(&again, true);
    assert_eq!(again.stdout, first.stdout, "{}", again.show());
    assert_eq!(std::fs::read(&pyc).unwrap(), before);
}

fn walk_count(dir: &std::path::Path, suffix: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                walk_count(&p, suffix)
            } else {
                usize::from(p.to_string_lossy().ends_with(suffix))
            }
        })
        .sum()
}

/// Two sealed runs at once with one seed try the same seeded ports. A server that sets
/// `SO_REUSEADDR` (Python's `socketserver`, most servers) and binds before the other listens
/// would share the port with it, and its `listen` fail with `EADDRINUSE` (CPython's asyncio
/// tests under `verify -j` did): the candidates are tried as exclusive binds, so each run
/// gets a port of its own. The old build fails here: the second `listen` raises.
#[test]
fn two_runs_at_once_with_one_seed_get_ports_of_their_own() {
    if !have("python3") {
        skip!("python3 missing");
    }
    let d = tempfile::Builder::new()
        .prefix("reuse-race")
        .tempdir_in(build_dir())
        .unwrap();
    let script = fixture("kernel_values/reuse_race.py");
    let run = |me: &str, other: &str| {
        let mut c = seal(["-q"]);
        c.arg("--").arg("python3").arg(&script).arg(d.path());
        c.args([me, other]);
        c
    };
    let runs = run_concurrently(vec![run("a", "b"), run("b", "a")], TIMEOUT);
    for r in &runs {
        r.ok();
    }
    assert_ne!(runs[0].stdout, runs[1].stdout, "one port for both runs");
}

/// A server's port left with a connection in TIME_WAIT (the server closed first) is taken
/// again by the next run at once, as the bind the program asked for would take it: the
/// exclusive candidate bind fails there, and only TIME_WAIT entries hold the port.
#[test]
fn a_port_left_in_time_wait_is_the_next_runs_port_again() {
    if !have("python3") {
        skip!("python3 missing");
    }
    let script = fixture("kernel_values/time_wait.py");
    let runs: Vec<Output> = (0..3)
        .map(|_| {
            let mut c = seal(["-q"]);
            c.arg("--").arg("python3").arg(&script);
            run_timeout(c, TIMEOUT)
        })
        .collect();
    assert_same_stdout("a server whose port is in TIME_WAIT", &runs);
}
