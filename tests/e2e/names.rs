//! End-to-end tests: host names (`gethostname`, `uname`, `getdomainname`, the `hostname`
//! command, Python) and temp names (`mkstemp` & co., coreutils `mktemp`, Python `tempfile`).
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::*;

const RUNS: usize = 5;

/// A per-test scratch directory (fixed path, so names are comparable across runs; emptied
/// first, so a leftover never forces a retry).
fn scratch(name: &str) -> PathBuf {
    let d = build_dir().join(format!("names-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `c` with `TMPDIR` set to `dir`.
fn run_in_tmpdir(mut c: Command, dir: &Path) -> Output {
    c.env("TMPDIR", dir);
    run_timeout(c, TIMEOUT)
}

/// Runs `seal -- CMD` with `TMPDIR` set to `dir` RUNS times; asserts exit 0 and byte-identical
/// stdout; returns it.
fn stable_in_tmpdir(cmd: &[&str], dir: &Path) -> String {
    let what = format!("{cmd:?} with TMPDIR={}", dir.display());
    let run = || run_in_tmpdir(seal(["--"].iter().chain(cmd)), dir);
    assert_runs_agree(&what, RUNS, run).stdout
}

#[test]
fn c_host_and_temp_names_are_sealed() {
    let prog = build_c("names", &[]);
    let dir = scratch("c");
    let (p, d) = (prog.to_str().unwrap(), dir.to_str().unwrap());
    let out = assert_sealed_stable(&[p, d], RUNS);
    for want in [
        "gethostname seal\n",
        "uname.nodename seal\n",
        "uname.sysname Linux\n",
        "getdomainname (none)\n",
        "short buffer -1 File name too long\n",
        "mkostemp cloexec 1\n",
        "bad template -1 Invalid argument\n",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    let line = |label: &str| -> String {
        out.lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} in\n{out}"))
            .to_string()
    };
    assert!(line("mkstemp ").ends_with(" 600"));
    assert!(line("mkstemps ").contains(".txt 600"));
    assert!(line("mkdtemp ").ends_with(" 700"));
    assert!(line("tempnam ").contains(&format!("{d}/pfx")));
    assert!(line("tmpnam ").contains("/tmp/file"));
    assert!(!out.contains("XXXXXX"), "a template was not filled\n{out}");
    // Everything the fixture made it removed: the directory is empty.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);

    // --unseal tempname: glibc's own names, different every run.
    let u1 = run_seal(["--unseal", "tempname", "--", p, d]);
    let u2 = run_seal(["--unseal", "tempname", "--", p, d]);
    u1.ok();
    u2.ok();
    let pick = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("mkstemp "))
            .unwrap()
            .to_string()
    };
    assert_ne!(
        pick(&u1.stdout),
        pick(&u2.stdout),
        "--unseal tempname still sealed"
    );
    assert_ne!(pick(&u1.stdout), line("mkstemp "));

    // --unseal host: the machine's name.
    let real = run_plain("hostname", [] as [&str; 0]).stdout;
    let u = run_seal(["--unseal", "host", "--", p, d]);
    u.ok();
    u.stdout_has(&format!("gethostname {real}"));
}

#[test]
fn hostname_command_and_flag() {
    if have("hostname") {
        assert_eq!(assert_sealed_stable(&["hostname"], RUNS), "seal\n");
        let x = run_seal(["--hostname", "x", "--", "hostname"]);
        x.ok();
        assert_eq!(x.stdout, "x\n");
    } else {
        skip_part!("hostname not on PATH; the hostname command not checked");
    }
    assert_eq!(assert_sealed_stable(&["uname", "-n"], 2), "seal\n");
    assert_eq!(
        assert_sealed_stable(&["cat", "/proc/sys/kernel/hostname"], 2),
        "seal\n"
    );
    let x = run_seal(["--hostname", "build-7", "--", "uname", "-n"]);
    x.ok();
    assert_eq!(x.stdout, "build-7\n");
}

#[test]
fn python_host_and_temp_names_are_sealed() {
    require_tools!("python3");
    let dir = scratch("py");
    let script = fixture("python/names.py");
    let out = stable_in_tmpdir(&["python3", script.to_str().unwrap()], &dir);
    assert_has(&out, "gethostname seal\n");
    assert_has(&out, "uname seal seal\n");
    assert!(
        out.contains(" 0o600\n") && out.contains(" 0o700\n"),
        "{out}"
    );
    assert_has(&out, dir.to_str().unwrap());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    let mut c = command("python3");
    c.arg(&script);
    let a = run_in_tmpdir(c, &dir);
    assert_ne!(a.stdout, out, "unsealed Python printed the sealed names");
}

/// coreutils `mktemp` (gnulib's own tempname, seeded through `getrandom`) prints the same path
/// every sealed run.
#[test]
fn coreutils_mktemp_is_stable() {
    require_tools!("mktemp");
    let dir = scratch("mktemp");
    let script = "f=$(mktemp); d=$(mktemp -d); echo \"$f\"; echo \"$d\"; \
                  stat -c %a \"$f\" \"$d\"; rm -f \"$f\"; rmdir \"$d\"";
    let out = stable_in_tmpdir(&["bash", "-c", script], &dir);
    assert_has(&out, "600\n700\n");
    let mut c = command("bash");
    c.args(["-c", script]);
    let a = run_in_tmpdir(c, &dir);
    assert_ne!(a.stdout, out);
}

/// The JVM: `FileInputStream("/dev/urandom")`, `NativePRNG`, `InetAddress.getLocalHost()` (the
/// sealed name must resolve, or the JVM throws) and `File.createTempFile`.
#[test]
fn java_devices_host_and_temp_names_are_sealed() {
    require_tools!("java", "javac");
    let classes = build_java("Names");
    let dir = scratch("java");
    let (cp, d) = (classes.to_str().unwrap(), dir.to_str().unwrap());
    // `--unseal time`: this test is about devices, host and temp names; the JVM's timed waits
    // belong to the time/wait families and their own tests.
    let args = ["--unseal", "time", "--", "java", "-cp", cp, "Names", d];
    let out = assert_runs_agree(&format!("{args:?}"), RUNS, || run_seal(args)).stdout;
    assert_has(&out, "getLocalHost seal 127.0.0.1\n");
    let plain = run_plain("java", ["-cp", cp, "Names", d]);
    plain.ok();
    assert_ne!(plain.stdout, out);
}

/// A `mkstemp` file left behind by an earlier run takes that run's sealed name: the next run
/// takes another name, but the values its thread draws afterwards stay what they were (the
/// retries used to draw from the thread's stream, so a PHP `tempnam` left in `/tmp` moved
/// every later `mt_rand()` of the next run), and the run says that a temp name was taken by an
/// entry from before it (`tmp-leftover`), as it does for an exclusive `open` or a `mkdir`
/// (Python's `mkstemp`/`mkdtemp`, coreutils `mktemp`, Java's `createTempFile`). Entries the run
/// made itself are not reported.
#[test]
fn a_name_left_by_an_earlier_run_moves_only_that_name_and_is_reported() {
    require_tools!("python3");
    let prog = build_c("tempname_leftover", &[]);
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let d = dir.path().to_str().unwrap();
    let run = |cmd: &[&str]| {
        let mut c = seal(["--"].iter().chain(cmd));
        c.env("TMPDIR", d);
        let out = run_timeout(c, std::time::Duration::from_secs(60));
        out.ok();
        out
    };
    let runs: Vec<Output> = (0..3).map(|_| run(&[prog.to_str().unwrap(), d])).collect();
    let line = |o: &Output, key: &str| value(&o.stdout, key).to_string();
    // Each run left a file: three names, one for each run.
    let mut names: Vec<String> = runs.iter().map(|o| line(o, "name")).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 3, "{}", runs[2].show());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    for o in &runs[1..] {
        assert_eq!(line(o, "after"), line(&runs[0], "after"), "{}", o.show());
    }
    let warned = |o: &Output, path: &str| {
        o.stderr.contains(&format!(
            "not sealed (tmp-leftover): {path} was there before the run"
        ))
    };
    assert!(
        !runs[0].stderr.contains("tmp-leftover"),
        "{}",
        runs[0].show()
    );
    let first = format!("{d}/{}", line(&runs[0], "name"));
    assert!(warned(&runs[1], &first), "{}", runs[1].show());

    // An exclusive open (mkstemp) and a mkdir (mkdtemp) in Python; the same mkdir twice within
    // one run says nothing.
    let code = "import os, tempfile\n\
                fd, f = tempfile.mkstemp(); print(os.path.basename(f))\n\
                d = tempfile.mkdtemp(); print(os.path.basename(d))\n\
                os.mkdir(d + '/x')\n\
                try: os.mkdir(d + '/x')\n\
                except FileExistsError: print('exists')\n";
    let py1 = run(&["python3", "-c", code]);
    assert!(!py1.stderr.contains("tmp-leftover"), "{}", py1.show());
    assert!(py1.stdout.ends_with("exists\n"), "{}", py1.show());
    let py2 = run(&["python3", "-c", code]);
    let taken = py1.stdout.lines().next().unwrap();
    assert!(warned(&py2, &format!("{d}/{taken}")), "{}", py2.show());
    std::fs::remove_file(dir.path().join(taken)).unwrap();
    // Without that file, the first name is free and the mkdir of the next meets the first
    // run's directory.
    let py3 = run(&["python3", "-c", code]);
    let dir1 = py1.stdout.lines().nth(1).unwrap();
    assert!(warned(&py3, &format!("{d}/{dir1}")), "{}", py3.show());
}
