//! Safety of the user and the machine: no code runs from another user's `seal.toml`, nothing
//! outside a golden case's directory is deleted, no process of a run (skipped, static, raw
//! `syscall`) reaches the machine's clock or names, an exec by `syscall(SYS_execve)` is sealed,
//! the shim is never loaded from below a directory others can change, and output files are
//! never written through another user's link. Tests that need a second user (chown) run as
//! root, as CI does, and say SKIPPED otherwise.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::util::{build_c, run_timeout, seal, TIMEOUT};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Returns from the test, saying SKIPPED and why, unless it runs as root.
macro_rules! require_root {
    ($why:literal) => {
        if !is_root() {
            eprintln!(concat!("SKIPPED: ", $why));
            return;
        }
    };
}

fn chown(path: &Path, uid: u32) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: lchown on a NUL-terminated path.
    assert_eq!(
        unsafe { libc::lchown(c.as_ptr(), uid, uid) },
        0,
        "chown {}",
        path.display()
    );
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The machine's host name, as the kernel has it.
fn machine_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap()
}

fn own_uts() -> String {
    std::fs::read_link("/proc/self/ns/uts")
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// A `seal.toml` that runs code through `[env]`, planted above the working directory.
fn planted(dir: &Path) -> std::path::PathBuf {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let evil = dir.join("evil.sh");
    std::fs::write(&evil, "echo PWNED >&2\n").unwrap();
    std::fs::write(
        dir.join("seal.toml"),
        format!("[env]\nBASH_ENV = \"{}\"\n", evil.display()),
    )
    .unwrap();
    work
}

#[test]
fn a_seal_toml_in_a_directory_others_can_write_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let work = planted(d.path());
    chmod(d.path(), 0o777);
    let mut cmd = seal(["--", "bash", "-c", "true"]);
    cmd.current_dir(&work);
    let out = run_timeout(cmd, TIMEOUT);
    out.code_is(2)
        .stderr_has("refusing to use this seal.toml: others can write its directory")
        .stderr_lacks("PWNED");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.show());
    // Sticky (as /tmp is): others cannot replace the file, so it is used.
    chmod(d.path(), 0o1777);
    let mut cmd = seal(["--", "bash", "-c", "true"]);
    cmd.current_dir(&work);
    run_timeout(cmd, TIMEOUT).ok().stderr_has("PWNED");
    chmod(d.path(), 0o700);
    // A file others can write is refused wherever it is.
    chmod(&d.path().join("seal.toml"), 0o666);
    let mut cmd = seal(["--", "true"]);
    cmd.current_dir(&work);
    run_timeout(cmd, TIMEOUT)
        .code_is(2)
        .stderr_has("others can write it");
    // Named with --config, it is the user's choice.
    let mut cmd = seal(["--config", "../seal.toml", "--", "bash", "-c", "true"]);
    cmd.current_dir(&work);
    run_timeout(cmd, TIMEOUT).ok().stderr_has("PWNED");
}

#[test]
fn another_users_seal_toml_runs_no_code_as_you() {
    require_root!("needs root to plant a file as another user");
    let d = tempfile::tempdir().unwrap();
    chmod(d.path(), 0o1777);
    let work = planted(d.path());
    chown(&d.path().join("seal.toml"), 65534);
    for sub in [&["--", "bash", "-c", "true"][..], &["golden", "list"]] {
        let mut cmd = seal(sub);
        cmd.current_dir(&work);
        let out = run_timeout(cmd, TIMEOUT);
        out.code_is(2)
            .stderr_has("seal.toml: refusing to use this seal.toml: it is owned by ")
            .stderr_has("uid 65534")
            .stderr_lacks("PWNED");
    }
}

/// `golden record` removed the files a link in the case's directory led to, and a `cwd`
/// outside the suite let `artifacts = ["*"]` empty any directory.
#[test]
fn golden_never_removes_files_outside_the_cases_directory() {
    let d = tempfile::tempdir().unwrap();
    let victim = d.path().join("v");
    let suite = d.path().join("r");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::create_dir_all(&suite).unwrap();
    std::fs::write(victim.join("a"), "keep").unwrap();
    std::os::unix::fs::symlink(&victim, suite.join("out")).unwrap();
    let case = |extra: &str| {
        std::fs::write(
            suite.join("seal.toml"),
            format!("[[case]]\nname = \"c\"\ncmd = [\"true\"]\n{extra}\n"),
        )
        .unwrap();
        let mut cmd = seal(["golden", "record"]);
        cmd.current_dir(&suite);
        run_timeout(cmd, TIMEOUT)
    };
    let out = case("artifacts = [\"out/*\"]");
    assert_ne!(out.code, Some(0), "{}", out.show());
    out.stderr_has("outside").stderr_has("refusing to touch it");
    let out = case(&format!(
        "cwd = \"{}\"\nartifacts = [\"*\"]",
        victim.display()
    ));
    out.code_is(2).stderr_has("outside the suite's directory");
    let out = case("cwd = \"../v\"\nartifacts = [\"*\"]");
    out.code_is(2).stderr_has("outside the suite's directory");
    assert_eq!(std::fs::read_to_string(victim.join("a")).unwrap(), "keep");
}

/// A program the seal scopes out (`--skip`), a static binary and a raw system call all get
/// EPERM from the kernel for the real clock, while a sealed program sets the sealed clock.
#[test]
fn no_process_of_a_run_sets_the_machines_clock() {
    let reach = build_c("reach", &[]);
    let stat = build_c("reach", &["-static"]);
    let r = reach.to_str().unwrap();
    for args in [
        vec!["--skip", "reach", "--", r, "settime"],
        vec!["-q", "--", stat.to_str().unwrap(), "settime"],
    ] {
        let out = run_timeout(seal(&args), TIMEOUT);
        out.ok();
        assert_eq!(
            out.stdout,
            "clock_settime Operation not permitted\nsettimeofday Operation not permitted\n",
            "{args:?}\n{}",
            out.show()
        );
    }
    // Sealed, root may set the sealed clock as it may set the real one bare.
    let out = run_timeout(seal(["--", r, "settime"]), TIMEOUT);
    let want = if is_root() {
        "clock_settime ok"
    } else {
        "clock_settime Operation not permitted"
    };
    out.ok().stdout_has(want);
    // With time unsealed the capability is left alone (shown, not used).
    let out = run_timeout(
        seal([
            "--unseal",
            "time",
            "--",
            "grep",
            "CapBnd",
            "/proc/self/status",
        ]),
        TIMEOUT,
    );
    let sealed = run_timeout(seal(["--", "grep", "CapBnd", "/proc/self/status"]), TIMEOUT);
    let bnd = |s: &str| u64::from_str_radix(s.split_whitespace().nth(1).unwrap(), 16).unwrap();
    assert_eq!(bnd(&sealed.stdout) & (1 << 25), 0, "{}", sealed.show());
    let own = std::fs::read_to_string("/proc/self/status").unwrap();
    let own_bnd = own.lines().find(|l| l.starts_with("CapBnd")).unwrap();
    assert_eq!(bnd(&out.stdout), bnd(own_bnd), "{}", out.show());
}

/// Host and domain names: a skipped or static program, `/proc/sys/kernel/hostname` and a raw
/// system call rename only the run's own UTS namespace, never the machine.
#[test]
fn no_process_of_a_run_renames_the_machine() {
    require_root!("only root can rename the machine (the kernel refuses others)");
    let before = machine_hostname();
    let uts = own_uts();
    let reach = build_c("reach", &[]);
    let stat = build_c("reach", &["-static"]);
    for args in [
        vec![
            "--skip",
            "reach",
            "--",
            reach.to_str().unwrap(),
            "names",
            &uts,
            "sealtest-evil",
        ],
        vec![
            "-q",
            "--",
            stat.to_str().unwrap(),
            "names",
            &uts,
            "sealtest-evil",
        ],
    ] {
        let out = run_timeout(seal(&args), TIMEOUT);
        out.ok()
            .stdout_has("sethostname ok")
            .stdout_has("proc-hostname ok");
        assert_eq!(machine_hostname(), before, "{args:?} renamed the machine");
    }
    let out = run_timeout(
        seal(["--", "sh", "-c", "cd /proc/sys/kernel && echo x > hostname"]),
        TIMEOUT,
    );
    out.ok();
    assert_eq!(machine_hostname(), before);
    // With host unsealed, the run shares the machine's namespace (nothing to rename here).
    let out = run_timeout(
        seal(["--unseal", "host", "--", "readlink", "/proc/self/ns/uts"]),
        TIMEOUT,
    );
    assert_eq!(out.stdout.trim(), uts, "{}", out.show());
}

/// `syscall(SYS_execve, ...)` went to the cpu family's handler and started the child unsealed.
#[test]
fn a_child_started_by_syscall_execve_is_sealed() {
    let reach = build_c("reach", &[]);
    let out = run_timeout(seal(["--", reach.to_str().unwrap(), "exec"]), TIMEOUT);
    out.ok().says_nothing_unsealed();
    assert_eq!(out.stdout, "1767225600\n", "{}", out.show());
    // Counted as the exec it is.
    let out = run_timeout(
        seal(["census", "--", reach.to_str().unwrap(), "exec"]),
        TIMEOUT,
    );
    out.ok().stderr_has("execve");
}

/// With `XDG_CACHE_HOME` below a directory others can write, another user could swap the
/// shim between two execs of the run: refused, naming the directory.
#[test]
fn the_shim_is_never_kept_below_a_directory_others_can_change() {
    let d = tempfile::tempdir().unwrap();
    let shared = d.path().join("shared");
    std::fs::create_dir_all(shared.join("x")).unwrap();
    chmod(&shared, 0o777);
    let mut cmd = seal(["--", "true"]);
    cmd.env("XDG_CACHE_HOME", shared.join("x"));
    let out = run_timeout(cmd, TIMEOUT);
    out.code_is(125)
        .stderr_has(&format!("{} is writable by others", shared.display()));
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.show());
    // Sticky, as /tmp: fine.
    chmod(&shared, 0o1777);
    let mut cmd = seal(["--", "true"]);
    cmd.env("XDG_CACHE_HOME", shared.join("x"));
    run_timeout(cmd, TIMEOUT).ok();
}

/// `--census FILE` and `probe --report FILE` followed a link another user planted and
/// overwrote what it pointed to.
#[test]
fn output_files_are_not_written_through_another_users_link() {
    require_root!("needs root to plant a link as another user");
    let d = tempfile::tempdir().unwrap();
    let victim = d.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let link = d.path().join("c.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    chown(&link, 65534);
    let l = link.to_str().unwrap();
    for args in [
        vec!["--census", l, "--", "true"],
        vec!["census", "--json", l, "--", "true"],
        vec!["probe", "-n", "1", "--report", l, "--", "true"],
        vec!["verify", "-n", "2", "--json", l, "--", "true"],
    ] {
        let out = run_timeout(seal(&args), TIMEOUT);
        assert_ne!(out.code, Some(0), "{args:?}\n{}", out.show());
        out.stderr_has("refusing to write through it");
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "keep",
            "{args:?}"
        );
    }
    // Your own link is followed as before.
    chown(&link, 0);
    run_timeout(seal(["--census", l, "--", "true"]), TIMEOUT).ok();
    assert!(std::fs::read_to_string(&victim)
        .unwrap()
        .contains("processes"));
}

/// A `HOME` that does not exist (a service account's `/nonexistent`) is not created to hold
/// the shim: it goes to a private directory in the temporary directory, and the run works.
#[test]
fn a_missing_home_is_not_created() {
    let d = tempfile::tempdir().unwrap();
    let home = d.path().join("no-such-home");
    let mut cmd = seal(["--", "sh", "-c", "echo ok"]);
    cmd.env("HOME", &home).env_remove("XDG_CACHE_HOME");
    let out = run_timeout(cmd, TIMEOUT);
    out.ok();
    assert_eq!(out.stdout, "ok\n", "{}", out.show());
    assert!(!home.exists(), "{} was created", home.display());
}
