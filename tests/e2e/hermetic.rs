//! Hermetic runs: the same output whatever the caller's environment, working directory,
//! leftovers in /tmp and neighbours running at the same time (docs/design.md, "Hermetic runs").

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::util::*;

/// `seal ARGS` in `dir` with `extra` variables added to the environment.
fn seal_in(dir: &Path, extra: &[(&str, String)], args: &[&str]) -> Output {
    let mut c = seal(args);
    c.current_dir(dir);
    for (k, v) in extra {
        c.env(k, v);
    }
    run_timeout(c, TIMEOUT)
}

/// A directory `depth` levels below a fresh directory (kept alive by the result). Not in /tmp:
/// a checkout lives elsewhere, and directories a run needs under /tmp are bound back into its
/// private /tmp, where `ls /tmp` would show them.
fn deep_dir(depth: usize) -> (tempfile::TempDir, std::path::PathBuf) {
    let base = build_dir().join("hermetic");
    std::fs::create_dir_all(&base).unwrap();
    let t = tempfile::Builder::new()
        .prefix("seal-hermetic-")
        .tempdir_in(base)
        .unwrap();
    let d = (0..depth).fold(t.path().to_path_buf(), |p, i| p.join(format!("level{i}")));
    std::fs::create_dir_all(&d).unwrap();
    (t, d)
}

/// Runs `args` sealed from shallow and deep working directories with environments of very
/// different sizes; every run must print the same.
fn same_everywhere(what: &str, args: &[&str]) -> String {
    let (_a, shallow) = deep_dir(0);
    let (_b, deep) = deep_dir(20);
    let mut outs = Vec::new();
    for dir in [&shallow, &deep] {
        for extra in [
            vec![],
            vec![("X", "a".to_string())],
            vec![("X", "a".repeat(40))],
            vec![
                ("X", "b".repeat(5000)),
                ("Y", "1".into()),
                ("Z", "2".into()),
            ],
        ] {
            let o = seal_in(dir, &extra, args);
            o.ok();
            outs.push(o);
        }
    }
    assert_same_stdout(what, &outs)
}

#[test]
fn stack_addresses_do_not_depend_on_the_environment_or_working_directory() {
    let prog = build_c("stack_addr", &[]);
    let p = prog.to_str().unwrap();
    let out = same_everywhere("a local variable's address", &["-q", "--", p]);
    assert!(out.trim().starts_with("0x"), "{out}");
    // Also for a program started by a sealed shell (the shim's exec hooks pad too).
    let cmd = format!("{p}; X=$(printf '%0300d' 0) {p}");
    let out = same_everywhere("addresses under sh", &["-q", "--", "sh", "-c", &cmd]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0], lines[1],
        "an exported variable moved the child's stack"
    );
    // Past one block (32 KiB) the pad fills to the next multiple: two environments in the
    // third block give one address too.
    let (_t, dir) = deep_dir(0);
    let big: Vec<Output> = [70_000, 90_000]
        .iter()
        .map(|&n| seal_in(&dir, &[("X", "d".repeat(n))], &["-q", "--", p]))
        .collect();
    let out = assert_same_stdout("addresses with an environment past two blocks", &big);
    assert!(out.trim().starts_with("0x"), "{out}");
    // Unsealed layout: the environment's size shows.
    let a = seal_in(&dir, &[], &["-q", "--unseal", "layout", "--", p]);
    let b = seal_in(
        &dir,
        &[("X", "c".repeat(100))],
        &["-q", "--unseal", "layout", "--", p],
    );
    assert_ne!(
        a.stdout, b.stdout,
        "--unseal layout should let the stack move"
    );
}

#[test]
fn coreutils_mktemp_names_do_not_depend_on_the_environment() {
    require_tools!("mktemp");
    let out = same_everywhere("mktemp -u", &["-q", "--", "mktemp", "-u"]);
    assert!(out.starts_with("/tmp/tmp."), "{out}");
}

#[test]
fn sealed_env_is_identical_across_runs_and_shows_no_contract() {
    let runs: Vec<Output> = (0..3).map(|_| run_seal(["-q", "--", "env"])).collect();
    let out = assert_same_stdout("seal -- env", &runs);
    assert!(!out.contains("LIBSEAL_"), "{out}");
    assert!(!out.contains("libseal"), "{out}");
    // The user's own preload stays; seal's is gone.
    let o = run_seal(["-q", "--", "sh", "-c", "echo \"[$LD_PRELOAD]\""]);
    o.ok().stdout_has("[]");
    // Children are still sealed: a grandchild sees the sealed host name.
    run_seal(["-q", "--", "sh", "-c", "env -i /bin/sh -c hostname"])
        .ok()
        .stdout_has("seal");
}

#[test]
fn private_tmp_gives_the_same_name_twice_and_leaves_nothing() {
    require_tools!("mktemp");
    let first = run_seal(["-q", "--private-tmp", "--", "mktemp"]);
    first.ok();
    let name = first.stdout.trim().to_string();
    assert!(name.starts_with("/tmp/tmp."), "{name}");
    let second = run_seal(["-q", "--private-tmp", "--", "mktemp"]);
    assert_eq!(second.stdout.trim(), name);
    assert!(
        !Path::new(&name).exists(),
        "{name} was left in the real /tmp"
    );
    // A leftover with that very name in the real /tmp changes nothing.
    std::fs::write(&name, "leftover").unwrap();
    let third = run_seal([
        "-q",
        "--private-tmp",
        "--",
        "sh",
        "-c",
        "mktemp; ls /tmp | wc -l",
    ]);
    let _ = std::fs::remove_file(&name);
    third.ok();
    assert_eq!(third.stdout.lines().next(), Some(name.as_str()));
    // Without it, the leftover of a first run changes the second run's name.
    let a = run_seal(["-q", "--", "mktemp"]);
    let b = run_seal(["-q", "--", "mktemp"]);
    let _ = std::fs::remove_file(a.stdout.trim());
    let _ = std::fs::remove_file(b.stdout.trim());
    assert_ne!(a.stdout, b.stdout);
}

/// Whether `seal --private-tmp` runs in a mount namespace here (else it warns).
fn namespaces_work() -> bool {
    let o = run_seal(["--private-tmp", "--", "true"]);
    !o.stderr.contains("--private-tmp:")
}

#[test]
fn verify_runs_in_parallel_with_one_digest() {
    if !namespaces_work() {
        skip!("no mount namespace here: verify -j runs one after another");
    }
    let script = "f=$(mktemp); echo x > \"$f\"; sleep 0.5; ls /tmp; cat \"$f\"";
    let start = Instant::now();
    let o = run_timeout(
        seal([
            "verify", "-q", "-n", "8", "-j", "4", "--", "sh", "-c", script,
        ]),
        TIMEOUT,
    );
    let took = start.elapsed();
    o.ok().stdout_has("8/8 identical");
    // Eight runs one after another take at least 4 s; four at a time about 1 s.
    assert!(
        took < Duration::from_millis(3000),
        "took {took:?}\n{}",
        o.show()
    );
}

#[test]
fn private_tmp_falls_back_without_namespaces() {
    require_tools!("unshare", "mktemp");
    // In a user namespace whose ids are not mapped, no nested namespace can be made.
    let probe = Command::new("unshare").args(["-U", "true"]).status();
    if !probe.is_ok_and(|s| s.success()) {
        skip!("unshare -U is not permitted here");
    }
    let o = seal_without_namespaces(&[
        "--private-tmp",
        "--",
        "sh",
        "-c",
        "echo \"$TMPDIR\"; mktemp",
    ]);
    o.ok()
        .stderr_has("--private-tmp:")
        .stderr_has("TMPDIR points to a private directory");
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", o.show());
    assert!(lines[1].starts_with(lines[0]), "{}", o.show());
    assert!(
        !Path::new(lines[0]).exists(),
        "the fallback directory outlived the run"
    );
    // verify still works (one run after another) and agrees.
    seal_without_namespaces(&[
        "verify",
        "-n",
        "3",
        "-j",
        "2",
        "--",
        "sh",
        "-c",
        "mktemp >/dev/null; echo ok",
    ])
    .ok()
    .stdout_has("3/3 identical");
}

const SUITE: &str = r#"
[[case]]
name = "tempfiles"
cmd = 'f=$(mktemp); d=$(mktemp -d); echo data > "$f"; ls "$d" /tmp | sort; echo "$f $d"'

[[case]]
name = "stack"
cmd = ['./stack_addr']

[[case]]
name = "coreutils"
cmd = 'mktemp -u; mktemp -u -p /var/tmp'

[[case]]
name = "env-free"
cmd = 'env | grep -c LIBSEAL_ || true'
"#;

#[test]
fn a_golden_suite_recorded_in_one_environment_passes_from_another() {
    require_tools!("mktemp");
    let (_a, rec) = deep_dir(0);
    std::fs::write(rec.join("seal.toml"), SUITE).unwrap();
    std::fs::copy(build_c("stack_addr", &[]), rec.join("stack_addr")).unwrap();
    let mut c = seal(["golden", "record"]);
    c.current_dir(&rec);
    run_timeout(c, TIMEOUT).ok();
    // Another checkout: a longer path, unrelated variables, leftovers in /tmp, four at once.
    let (_b, other) = deep_dir(7);
    copy_dir(&rec, &other);
    let leftovers: Vec<_> = (0..5)
        .map(|_| tempfile::Builder::new().prefix("tmp.").tempfile().unwrap())
        .collect();
    let mut c = seal(["golden", "check", "-j", "4"]);
    c.current_dir(&other)
        .env("UNRELATED_VARIABLE", "z".repeat(777))
        .env("ANOTHER_ONE", "1");
    let o = run_timeout(c, TIMEOUT);
    drop(leftovers);
    o.ok().stdout_has("4 ok");
}

/// `seal ARGS` inside `unshare -U` with no mapping, where no further namespace can be made.
fn seal_without_namespaces(args: &[&str]) -> Output {
    let mut c = command("unshare");
    c.arg("-U").arg(seal_bin()).args(args);
    run_timeout(c, TIMEOUT)
}

/// A private /tmp hides what was in /tmp before the run, except what the run names: a script
/// under /tmp given as an argument (a checkout under /tmp, as CI clones often are), a
/// `--flag=PATH` and an environment variable naming a file there stay visible.
#[test]
fn a_private_tmp_keeps_the_files_the_command_names() {
    let in_tmp = |prefix: &str| tempfile::Builder::new().prefix(prefix).tempdir_in("/tmp");
    let dir = in_tmp("seal-named-").unwrap();
    let script = dir.path().join("s.sh");
    // "$1" is `--x=PATH`: the script strips the flag.
    std::fs::write(
        &script,
        "cat \"${1#--x=}\" \"$CONF\"; ls /tmp | grep -c leftover || true\n",
    )
    .unwrap();
    let data = dir.path().join("data.txt");
    std::fs::write(&data, "data\n").unwrap();
    let conf = in_tmp("seal-conf-").unwrap();
    std::fs::write(conf.path().join("c"), "conf\n").unwrap();
    let leftover = tempfile::Builder::new()
        .prefix("leftover-")
        .tempfile_in("/tmp")
        .unwrap();
    let mut c = seal(["--private-tmp", "--", "sh"]);
    c.arg(&script)
        .arg(format!("--x={}", data.display()))
        .env("CONF", conf.path().join("c"))
        .current_dir(root());
    let out = run_timeout(c, TIMEOUT);
    out.ok();
    assert_eq!(out.stdout, "data\nconf\n0\n", "{}", out.show());
    drop(leftover);
}
