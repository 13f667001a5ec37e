//! End-to-end tests: the command line. Bad input is one line naming what is wrong with exit 2;
//! a command that cannot run exits 126/127 as a shell would; the child's status, signals and
//! stdin pass through; settings come from flag > `SEAL_*` > seal.toml; `seal demo` works.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::util::*;

/// A fresh temporary directory (removed on drop).
fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("seal-cli-")
        .tempdir()
        .unwrap()
}

/// `seal ARGS` run in `dir` with extra environment variables.
fn seal_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = seal(args);
    cmd.current_dir(dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_timeout(cmd, TIMEOUT)
}

/// Asserts a usage/config error: exit 2, one line on stderr containing every one of `needles`.
fn assert_usage_error(out: &Output, needles: &[&str]) {
    assert_eq!(out.code, Some(2), "expected exit 2\n{}", out.show());
    let err = out.stderr.trim_end();
    assert_eq!(err.lines().count(), 1, "expected one line\n{}", out.show());
    for n in needles {
        assert!(
            err.contains(n),
            "stderr does not mention {n:?}\n{}",
            out.show()
        );
    }
}

#[test]
fn malformed_epoch_is_one_line_naming_the_key() {
    let out = run_seal(["--epoch", "yesterday", "--", "true"]);
    assert_usage_error(&out, &["epoch", "yesterday"]);
    let out = run_seal(["--tick", "fast", "--", "true"]);
    assert_usage_error(&out, &["tick", "fast"]);
    let out = run_seal(["--seed=-1", "--", "true"]);
    assert_usage_error(&out, &["seed"]);
}

#[test]
fn unknown_unseal_family_is_exit_2() {
    let out = run_seal(["--unseal", "gravity", "--", "true"]);
    assert_usage_error(&out, &["unseal", "gravity"]);
}

fn with_config(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = temp_dir();
    let path = dir.path().join("seal.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

#[test]
fn broken_seal_toml_names_the_key_and_line() {
    // A bad value: key and file:line.
    let (dir, path) = with_config("[seal]\nseed = 1\nepoch = \"last tuesday\"\n");
    let out = seal_in(dir.path(), &["--", "true"], &[]);
    assert_usage_error(&out, &["epoch", &format!("{}:3", path.display())]);
    // An unknown key.
    let (dir, path) = with_config("[seal]\nseed = 1\n\ncolour = \"blue\"\n");
    let out = seal_in(dir.path(), &["--", "true"], &[]);
    assert_usage_error(&out, &["colour", &format!("{}:4", path.display())]);
    // Not TOML at all.
    let (dir, path) = with_config("[seal]\nseed = 1\ntick = [\n");
    let out = seal_in(dir.path(), &["--", "true"], &[]);
    assert_usage_error(&out, &[&format!("{}:", path.display())]);
    // A bad value of the right TOML type.
    let (dir, path) = with_config("[seal]\nunseal = [\"time\", \"moon\"]\n");
    let out = seal_in(dir.path(), &["--", "true"], &[]);
    assert_usage_error(&out, &["moon", &format!("{}:2", path.display())]);
    // Found from a subdirectory too.
    let (dir, path) = with_config("[seal]\ntick = \"soon\"\n");
    let sub = dir.path().join("a/b");
    std::fs::create_dir_all(&sub).unwrap();
    let out = seal_in(&sub, &["--", "true"], &[]);
    assert_usage_error(&out, &["tick", &format!("{}:2", path.display())]);
}

#[test]
fn bad_environment_value_names_the_variable() {
    let out = seal_in(Path::new("/"), &["--", "true"], &[("SEAL_SEED", "many")]);
    assert_usage_error(&out, &["SEAL_SEED", "many"]);
}

#[test]
fn missing_command_is_127() {
    let out = run_seal(["--", "seal-no-such-command-anywhere"]);
    out.code_is(127);
    out.stderr_has("not found");
    let out = run_seal(["--", "/nonexistent/dir/prog"]);
    out.code_is(127);
}

#[test]
fn non_executable_file_is_126() {
    let dir = temp_dir();
    let file = dir.path().join("data.txt");
    std::fs::write(&file, "not a program\n").unwrap();
    let out = run_seal(["--", file.to_str().unwrap()]);
    out.code_is(126);
    // A directory is not executable either.
    let out = run_seal(["--", dir.path().to_str().unwrap()]);
    out.code_is(126);
}

#[test]
fn exit_status_passes_through() {
    let out = run_seal(["--", "sh", "-c", "exit 3"]);
    out.code_is(3);
    let out = run_seal(["run", "--", "sh", "-c", "exit 0"]);
    out.ok();
    let out = run_seal(["--", "false"]);
    out.code_is(1);
}

#[test]
fn signal_is_128_plus_n() {
    let out = run_seal(["--", "sh", "-c", "kill -TERM $$"]);
    out.code_is(143);
    let out = run_seal(["--", "sh", "-c", "kill -KILL $$"]);
    out.code_is(137);
}

#[test]
fn no_command_is_usage_exit_2() {
    let out = run_seal(Vec::<&str>::new());
    out.code_is(2);
    assert!(
        out.stderr.to_lowercase().contains("usage"),
        "{}",
        out.show()
    );
    let out = run_seal(["run"]);
    out.code_is(2);
}

#[test]
fn stdin_passes_through() {
    let mut cmd = seal(["--", "cat"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"hi\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, b"hi\n");
    // And through a shell pipeline.
    let mut cmd = command("sh");
    cmd.args([
        "-c",
        &format!("echo hi | '{}' -- cat", seal_bin().display()),
    ]);
    let out = run_timeout(cmd, TIMEOUT);
    out.ok();
    assert_eq!(out.stdout, "hi\n");
}

#[test]
fn help_mentions_exit_codes() {
    let out = run_seal(["--help"]);
    out.ok();
    for s in ["Exit status", "125", "126", "127", "128+N"] {
        assert!(out.stdout.contains(s), "--help lacks {s:?}\n{}", out.show());
    }
}

/// `--unseal`'s help is made from the families table: every family a user can unseal is named
/// in `seal --help` and `seal run --help` (the hand-kept list once lacked `cpu`).
#[test]
fn help_names_every_family() {
    for args in [&["--help"][..], &["run", "--help"]] {
        let out = run_seal(args);
        out.ok();
        // The help wraps the list; join its lines.
        let text = out.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
        let list = text
            .split("Leave a family unsealed (repeatable): ")
            .nth(1)
            .unwrap_or_else(|| panic!("{args:?}: no --unseal help\n{}", out.show()));
        let named: Vec<&str> = list
            .split(", ")
            .map(|f| f.split(' ').next().unwrap())
            .collect();
        for f in seal_abi::settings::FAMILIES {
            assert!(
                named.contains(&f.name),
                "{args:?}: --unseal help lacks {}: {named:?}",
                f.name
            );
        }
    }
}

/// The epoch a sealed `date` prints, as UNIX seconds.
fn sealed_epoch(dir: &Path, flags: &[&str], env: &[(&str, &str)]) -> String {
    let mut args = flags.to_vec();
    args.extend(["--", "date", "+%s"]);
    let out = seal_in(dir, &args, env);
    out.ok();
    out.stdout.trim().to_string()
}

#[test]
fn settings_precedence_is_flag_env_file() {
    let (dir, _) = with_config("[seal]\nepoch = \"@1000\"\n");
    let d = dir.path();
    assert_eq!(sealed_epoch(d, &[], &[]), "1000");
    assert_eq!(sealed_epoch(d, &[], &[("SEAL_EPOCH", "@2000")]), "2000");
    assert_eq!(
        sealed_epoch(d, &["--epoch", "@3000"], &[("SEAL_EPOCH", "@2000")]),
        "3000"
    );
    // --config names a file explicitly, in place of the one found by searching.
    let other = temp_dir();
    let cfg = other.path().join("other.toml");
    std::fs::write(&cfg, "[seal]\nepoch = \"@4000\"\n").unwrap();
    assert_eq!(
        sealed_epoch(d, &["--config", cfg.to_str().unwrap()], &[]),
        "4000"
    );
}

#[test]
fn seed_precedence_is_flag_env_file() {
    // Its own build (-DSEAL_CLI), so it never races clocks.rs writing the same binary.
    let prog = build_c("clocks", &["-DSEAL_CLI"]);
    let prog = prog.to_str().unwrap();
    let getrandom = |dir: &Path, flags: &[&str], env: &[(&str, &str)]| {
        let mut args = flags.to_vec();
        args.extend(["--", prog]);
        let out = seal_in(dir, &args, env);
        out.ok();
        out.stdout
            .lines()
            .find(|l| l.starts_with("getrandom "))
            .unwrap()
            .to_string()
    };
    let bare = temp_dir();
    let seed = |n: &str| getrandom(bare.path(), &["--seed", n], &[]);
    let (s1, s2, s3) = (seed("1"), seed("2"), seed("3"));
    assert!(s1 != s2 && s2 != s3 && s1 != s3);
    let (dir, _) = with_config("[seal]\nseed = 1\n");
    let d = dir.path();
    assert_eq!(getrandom(d, &[], &[]), s1);
    assert_eq!(getrandom(d, &[], &[("SEAL_SEED", "2")]), s2);
    assert_eq!(getrandom(d, &["--seed", "3"], &[("SEAL_SEED", "2")]), s3);
}

/// Asserts what every `seal demo` report ends with: sealed runs that agree ("(0 of N" differ)
/// and, last, the verdict; returns the verdict line.
fn demo_verdict(out: &Output) -> &str {
    out.ok();
    assert!(
        out.stdout.contains("(0 of "),
        "sealed runs differ\n{}",
        out.show()
    );
    let verdict = out.stdout.lines().last().unwrap_or("");
    assert!(verdict.starts_with("Verdict: unsealed,"), "{}", out.show());
    verdict
}

#[test]
fn demo_shows_unsealed_differ_and_sealed_agree() {
    let out = run_timeout(seal(["demo"]), TIMEOUT);
    let verdict = demo_verdict(&out);
    assert!(verdict.contains("sealed, all"), "{}", out.show());
    out.stdout_has("Unsealed: two plain runs");
    let starred = out.stdout.lines().any(|l| l.starts_with("* "));
    assert!(starred, "{}", out.show());
}

#[test]
fn demo_falls_back_to_bash_without_python() {
    require_tools!("bash");
    // A PATH with the tools the bash report needs, and no python3.
    let bin = temp_dir();
    for tool in ["bash", "date", "seq", "env", "sh", "od", "tr", "mktemp"] {
        let found = std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|d| d.join(tool))
            .find(|p| p.is_file());
        if let Some(p) = found {
            std::os::unix::fs::symlink(p, bin.path().join(tool)).unwrap();
        }
    }
    let mut cmd = seal(["demo"]);
    cmd.env("PATH", bin.path());
    let out = run_timeout(cmd, TIMEOUT);
    demo_verdict(&out);
    out.stdout_has("bash report.sh");
}

/// Each seal build extracts its own content-addressed shim; copies of other versions idle for a
/// week are removed when a new one is written, recent ones are kept (another installed seal may
/// be using them). So is the bytecode cache of versions before sealed Pythons used the
/// installation's own.
#[test]
fn old_shim_versions_are_pruned_on_extraction() {
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join("seal");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let old = dir.join("libseal-0000000000000000.so");
    let recent = dir.join("libseal-1111111111111111.so");
    std::fs::write(&old, b"old").unwrap();
    std::fs::write(&recent, b"recent").unwrap();
    // The private bytecode cache older versions kept for sealed Pythons.
    let pycache = dir.join("pycache");
    std::fs::create_dir_all(pycache.join("usr/lib")).unwrap();
    std::fs::write(pycache.join("usr/lib/m.cpython-311.pyc"), b"pyc").unwrap();
    let ten_days = std::time::Duration::from_secs(10 * 24 * 3600);
    for stale in [&old, &pycache] {
        std::fs::File::open(stale)
            .unwrap()
            .set_modified(std::time::SystemTime::now() - ten_days)
            .unwrap();
    }
    let mut cmd = seal(["--", "true"]);
    cmd.env("XDG_CACHE_HOME", cache.path());
    run_timeout(cmd, TIMEOUT).ok();
    assert!(!old.exists(), "a shim idle for 10 days was kept");
    assert!(!pycache.exists(), "the old bytecode cache was kept");
    assert!(recent.exists(), "a recently used shim was removed");
    let ours = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name();
            let n = n.to_string_lossy().into_owned();
            n.starts_with("libseal-") && n != "libseal-1111111111111111.so"
        })
        .count();
    assert_eq!(ours, 1, "the current shim was not extracted");
}

/// A `seal` killed with SIGKILL cannot remove its run directory; the next `seal` removes it
/// (while its own command runs) once no launcher holds its lock, and leaves a live run's
/// directory alone.
#[test]
fn run_dirs_of_killed_launchers_are_removed() {
    if !std::path::Path::new("/dev/shm").is_dir() {
        skip!("no /dev/shm");
    }
    let runtime = tempfile::Builder::new()
        .prefix("seal-e2e-rt-")
        .tempdir_in("/dev/shm")
        .unwrap();
    let run_dirs = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(runtime.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("seal-run-")
            })
            .collect()
    };
    // A directory already gone is left so: the killed launcher's watch
    // (launcher/src/run/watch.rs) can remove its own before it is aged (seen once in 400 runs).
    let age = |dir: &std::path::Path| {
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
        if let Ok(f) = std::fs::File::open(dir) {
            f.set_modified(old).unwrap();
        }
    };
    let start = |secs: &str| {
        let mut cmd = seal(["--", "sleep", secs]);
        cmd.env("XDG_RUNTIME_DIR", runtime.path());
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        cmd.spawn().unwrap()
    };
    // A run dir counts once its launcher holds the lock on its run table: a launcher killed
    // between creating the dir and locking the table leaves a dir the next `seal` cannot
    // tell from a live one's (and must keep), which is not what this test is about.
    let locked = |dir: &std::path::Path| {
        use std::os::unix::io::AsRawFd;
        let Ok(f) = std::fs::File::open(dir.join("run.table")) else {
            return false;
        };
        // SAFETY: a non-blocking lock attempt on a descriptor we own (dropped at once).
        unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) != 0 }
    };
    let wait_for_dir = || {
        for _ in 0..200 {
            if let Some(d) = run_dirs().into_iter().find(|d| locked(d)) {
                return d;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!(
            "no run directory appeared under {}",
            runtime.path().display()
        );
    };
    let mut killed = start("5");
    let stale = wait_for_dir();
    killed.kill().unwrap();
    killed.wait().unwrap();
    age(&stale);
    // The first launcher may have swept the parent before it was killed; the next sweep is
    // then due a minute later.
    // SAFETY: geteuid has no preconditions.
    let mark = runtime
        .path()
        .join(format!(".seal-swept-{}", unsafe { libc::geteuid() }));
    if mark.exists() {
        age(&mark);
    }
    let mut live = start("5");
    let mut fresh = None;
    for _ in 0..200 {
        fresh = run_dirs().into_iter().find(|d| *d != stale);
        if fresh.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let fresh = fresh.expect("the second run made no directory");
    // The sweep runs once the second launcher's command has started. The killed launcher's
    // watch (launcher/src/run/watch.rs) may remove its directory first: wait for the sweep's
    // mark as well.
    for _ in 0..200 {
        if !stale.exists() && mark.is_file() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(!stale.exists(), "the killed launcher's run dir was kept");
    assert!(mark.is_file(), "no sweep mark {}", mark.display());
    age(&fresh);
    age(&mark);
    let run_true = || {
        let mut cmd = seal(["--", "true"]);
        cmd.env("XDG_RUNTIME_DIR", runtime.path());
        run_timeout(cmd, TIMEOUT).ok();
    };
    run_true();
    assert!(fresh.exists(), "a live run's directory was removed");
    live.kill().unwrap();
    live.wait().unwrap();
    // Within a minute of a sweep, runs do not list the parent: an old, unlocked run dir stays
    // until the mark is a minute old.
    let left = runtime.path().join("seal-run-0123456789abcdef");
    std::fs::create_dir(&left).unwrap();
    std::fs::write(left.join("run.table"), b"").unwrap();
    age(&left);
    run_true();
    assert!(
        left.exists(),
        "a run swept the parent although the last sweep was recent"
    );
    age(&mark);
    run_true();
    assert!(!left.exists(), "a due sweep kept a stale run dir");
}

/// A `seal` started inside a sealed run reads its own seal.toml, flags and environment: the
/// outer run's contract variables (`LIBSEAL_*`) are not its configuration. The outer run's
/// seed 0 used to win over the inner directory's `seed = 7`.
#[test]
fn a_nested_seal_reads_its_own_configuration_not_the_outer_runs() {
    let dir = build_dir().join("nested-seed");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("seal.toml"), "[seal]\nseed = 7\n").unwrap();
    let py = "import random; print(random.random())";
    let mut direct = seal(["--", "python3", "-c", py]);
    direct.current_dir(&dir);
    let direct = run_timeout(direct, TIMEOUT);
    direct.ok();
    let mut nested = seal([
        "--",
        "sh",
        "-c",
        &format!("cd '{}' && \"$SEAL\" -- python3 -c '{py}'", dir.display()),
    ]);
    nested.env("SEAL", seal_bin()).current_dir(root());
    let nested = run_timeout(nested, TIMEOUT);
    nested.ok();
    assert_eq!(
        direct.stdout,
        nested.stdout,
        "the inner seal took the outer run's settings\n{}",
        nested.show()
    );
    // And the seed really is 7, not the default 0.
    let default = run_seal(["--", "python3", "-c", py]);
    assert_ne!(default.stdout, direct.stdout, "seed = 7 was not read");
}

/// A nested seal starts its root with a call the outer run's libseal hooks: the outer run
/// says nothing of it, and the inner root runs sealed by the inner seal. The inner launcher
/// made its child with a raw `clone` (its direct spawn), which the outer run reported as
/// `not sealed (unsupported-call): clone() creating a process`.
#[test]
fn a_nested_seal_is_no_unsupported_call_of_the_outer_run() {
    let inner = "\"$SEAL\" -q -- date +%s; \"$SEAL\" -q --epoch @86400 -- date +%s";
    let mut nested = seal(["--", "sh", "-c", inner]);
    nested.env("SEAL", seal_bin());
    let o = run_timeout(nested, TIMEOUT);
    o.ok();
    assert_eq!(o.stdout, "1767225600\n86400\n", "{}", o.show());
    assert!(!o.stderr.contains("unsupported-call"), "{}", o.show());
}

/// Counts are bounded when parsed: a huge `-n` or `--passes` is one line and exit 2, never a
/// panic or an abort.
#[test]
fn huge_counts_are_refused_at_parse_time() {
    let d = temp_dir();
    for args in [
        &["verify", "-n", "18446744073709551615", "--", "false"][..],
        &["verify", "-n", "100000000", "--", "false"],
        &["verify", "-j", "100000", "--", "true"],
        &["probe", "-n", "4294967297", "--", "true"],
        &["golden", "record", "--passes", "4294967297"],
        &["golden", "check", "--passes", "18446744073709551615"],
    ] {
        assert_usage_error(
            &seal_in(d.path(), args, &[]),
            &["invalid value", "is not in 0..="],
        );
    }
}

/// clap's errors are one line too, with clap's tips kept on it.
#[test]
fn parse_errors_are_one_line_with_their_tips() {
    let d = temp_dir();
    let o = seal_in(d.path(), &["--seed", "-1", "--", "true"], &[]);
    assert_usage_error(&o, &["--seed", "-1", "unsigned 64-bit integer"]);
    assert_usage_error(
        &seal_in(d.path(), &["-q", "verify"], &[]),
        &["unexpected argument 'verify'"],
    );
    let o = seal_in(d.path(), &["verify", "--report", "x", "--", "true"], &[]);
    assert_usage_error(&o, &["unexpected argument '--report'", "tip:"]);
    let o = seal_in(d.path(), &["--nope", "--", "true"], &[]);
    assert_usage_error(&o, &["--nope"]);
    // Help and version are still clap's own.
    let o = seal_in(d.path(), &["--help"], &[]);
    o.ok().stdout_has("Usage:");
}

/// Special files where seal reads a file are refused at once (no hang on a FIFO, no endless
/// read of /dev/zero), in one line with exit 2; output files are checked before anything runs.
#[test]
fn special_input_files_are_refused_and_outputs_checked_first() {
    let d = temp_dir();
    let fifo = d.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let fifo = fifo.to_str().unwrap();
    let o = seal_in(
        d.path(),
        &["probe", "--patterns", "/dev/zero", "--", "true"],
        &[],
    );
    assert_usage_error(&o, &["--patterns /dev/zero", "not a regular file"]);
    let o = seal_in(d.path(), &["probe", "--compare", fifo, "--", "true"], &[]);
    assert_usage_error(&o, &["--compare", "FIFO"]);
    let o = seal_in(
        d.path(),
        &["probe", "--patterns", "/nonexistent/p.toml", "--", "true"],
        &[],
    );
    assert_usage_error(&o, &["--patterns /nonexistent/p.toml", "No such file"]);
    // Goldens that are a link to /dev/zero or a FIFO: reported, not read.
    std::fs::write(
        d.path().join("seal.toml"),
        "[[case]]\nname = \"z\"\ncmd = [\"true\"]\n[[case]]\nname = \"f\"\ncmd = [\"true\"]\n",
    )
    .unwrap();
    std::fs::create_dir(d.path().join("golden")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", d.path().join("golden/z.json")).unwrap();
    std::fs::rename(fifo, d.path().join("golden/f.json")).unwrap();
    let o = seal_in(d.path(), &["golden", "list"], &[]);
    assert!(o.code.is_some(), "{}", o.show());
    let o = seal_in(d.path(), &["golden", "check"], &[]);
    assert_ne!(o.code, Some(0), "{}", o.show());
    let all = format!("{}{}", o.stdout, o.stderr);
    assert!(
        all.contains("device") && all.contains("FIFO"),
        "{}",
        o.show()
    );
    // An output in a directory that does not exist: exit 2 before the 20 runs.
    let o = seal_in(
        d.path(),
        &["verify", "--json", "/nonexistent/dir/v.json", "--", "true"],
        &[],
    );
    assert_usage_error(&o, &["--json /nonexistent/dir/v.json"]);
    let o = seal_in(
        d.path(),
        &["golden", "check", "--junit", "/nonexistent/j.xml"],
        &[],
    );
    assert_usage_error(&o, &["--junit /nonexistent/j.xml"]);
}
