//! The launcher under hostile or unusual conditions: signals sent to seal, seal killed, closed
//! standard descriptors, an odd umask or environment, settings that would unseal or overflow,
//! and the error paths users hit first (a forgotten `--`, a bad `--census` path, a closed pipe).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{command, run_seal, run_timeout, seal, seal_bin, write_executable, TIMEOUT};

/// The pids whose parent is `pid` (from /proc/*/stat).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces, so split after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        if rest.split_whitespace().nth(1) == Some(&pid.to_string()) {
            out.push(p);
        }
    }
    out
}

/// Whether `pid` is gone (or a zombie nobody reaped yet: dead all the same).
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with(['Z', 'X'])),
    }
}

fn until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The command seal started once it has exec'd `comm`.
fn sealed_child(seal: &Child, comm: &str) -> u32 {
    let mut found = 0;
    until(&format!("seal to start {comm}"), TIMEOUT, || {
        found = children_of(seal.id())
            .into_iter()
            .find(|c| {
                std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|s| s.trim() == comm)
            })
            .unwrap_or(0);
        found != 0
    });
    found
}

fn wait_timeout(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let mut status = None;
    until("seal to exit", limit, || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    status.unwrap()
}

fn kill(pid: u32, sig: i32) {
    // SAFETY: signalling a process this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

/// A `seal` started in a process group of its own; dropping it kills the group (a failed
/// test leaves nothing running).
struct Spawned(Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        // SAFETY: killing the process group this test created.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for Spawned {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Spawned {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

fn spawn_sealed(args: &[&str]) -> Spawned {
    let mut cmd = seal(args);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    Spawned(cmd.spawn().unwrap())
}

#[test]
fn hardening_signals_to_seal_reach_the_command_and_seal_exits_with_its_status() {
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
        let mut s = spawn_sealed(&["--", "sleep", "30"]);
        let child = sealed_child(&s, "sleep");
        kill(s.id(), sig);
        let status = wait_timeout(&mut s, Duration::from_secs(10));
        assert_eq!(
            status.code(),
            Some(128 + sig),
            "seal after signal {sig}: {status:?}"
        );
        assert!(is_dead(child), "sleep survived signal {sig} sent to seal");
    }
}

#[test]
fn hardening_usr1_usr2_and_winch_are_forwarded() {
    let script = r#"trap 'echo usr1' USR1; trap 'echo usr2' USR2; trap 'echo winch; exit 0' WINCH
echo ready; while :; do sleep 0.05; done"#;
    let mut s = spawn_sealed(&["--", "sh", "-c", script]);
    let out = BufReader::new(s.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let next = |after: &str| {
        rx.recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("no line from the command after {after}"))
    };
    assert_eq!(next("start"), "ready");
    for (sig, want) in [
        (libc::SIGUSR1, "usr1"),
        (libc::SIGUSR2, "usr2"),
        (libc::SIGWINCH, "winch"),
    ] {
        kill(s.id(), sig);
        assert_eq!(next(want), want, "after signal {sig}");
    }
    assert_eq!(
        wait_timeout(&mut s, Duration::from_secs(10)).code(),
        Some(0)
    );
}

#[test]
fn hardening_the_command_dies_with_a_seal_killed_by_sigkill() {
    let mut s = spawn_sealed(&["--", "sleep", "30"]);
    let child = sealed_child(&s, "sleep");
    kill(s.id(), libc::SIGKILL);
    let status = wait_timeout(&mut s, Duration::from_secs(10));
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    until("the orphaned sleep to die", Duration::from_secs(5), || {
        is_dead(child)
    });
}

#[test]
fn hardening_a_static_command_dies_with_a_seal_killed_by_sigkill() {
    // No libseal in a static root: the launcher ties it to itself between fork and exec.
    let bin = crate::util::build_c("static_sleep", &["-static"]);
    let mut s = spawn_sealed(&["-q", "--", bin.to_str().unwrap()]);
    // The kernel keeps the first 15 bytes of the file name as the command name.
    let name = bin.file_name().unwrap().to_string_lossy();
    let child = sealed_child(&s, &name[..name.len().min(15)]);
    kill(s.id(), libc::SIGKILL);
    let status = wait_timeout(&mut s, Duration::from_secs(10));
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    until(
        "the orphaned static program to die",
        Duration::from_secs(5),
        || is_dead(child),
    );
}

#[test]
fn hardening_the_root_starts_unmasked_and_keeps_a_mask_it_sets_across_exec() {
    // seal blocks the signals it forwards while it starts the root; the root's libseal
    // empties that mask in the first image only: a mask the program sets before it execs
    // is the program's.
    let first = run_seal(["-q", "--", "grep", "SigBlk", "/proc/self/status"]);
    assert_eq!(first.ok().stdout, "SigBlk:\t0000000000000000\n");
    let script = "import signal, os\n\
                  signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n\
                  os.execvp('grep', ['grep', 'SigBlk', '/proc/self/status'])";
    let later = run_seal(["-q", "--", "python3", "-c", script]);
    assert_eq!(later.ok().stdout, "SigBlk:\t0000000000000200\n");
}

#[test]
fn hardening_a_script_without_a_shebang_runs_through_sh_as_execvp_does() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_executable(dir.path(), "plain.sh", "echo ran by sh\n");
    let out = run_seal(["-q", "--", script.to_str().unwrap()]);
    assert_eq!(out.ok().stdout, "ran by sh\n");
}

#[test]
fn hardening_a_terminated_verify_stops_and_exits_128_plus_n() {
    let mut s = spawn_sealed(&["verify", "-n", "3", "--", "sleep", "30"]);
    let child = sealed_child(&s, "sleep");
    let start = Instant::now();
    kill(s.id(), libc::SIGTERM);
    let status = wait_timeout(&mut s, Duration::from_secs(10));
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    assert!(start.elapsed() < Duration::from_secs(5), "no second run");
    assert!(is_dead(child));
}

/// `sh -c SCRIPT` with `$0` the built seal, stdin closed unless the script opens it.
fn sh(script: &str) -> crate::util::Output {
    let mut c = command("sh");
    c.args(["-c", script]).arg(seal_bin());
    run_timeout(c, TIMEOUT)
}

#[test]
fn hardening_closed_stdio_stays_closed_for_the_command() {
    // Bare and sealed alike: cat of a closed stdin fails, echo to a closed stdout fails.
    for (bare, sealed) in [
        ("cat <&-", r#""$0" -- cat <&-"#),
        ("echo hi >&-", r#""$0" -- echo hi >&-"#),
        (
            "sh -c 'echo x >&2 && echo wrote' 2>&-",
            r#""$0" -- sh -c 'echo x >&2 && echo wrote' 2>&-"#,
        ),
    ] {
        let b = sh(bare);
        let s = sh(sealed);
        assert_ne!(b.code, Some(0), "bare {bare}\n{}", b.show());
        assert_eq!(s.code, b.code, "sealed {sealed}\n{}", s.show());
        assert_eq!(s.stdout, b.stdout, "sealed {sealed}\n{}", s.show());
    }
    let s = sh(r#""$0" -- cat <&-"#);
    assert!(s.stderr.contains("Bad file descriptor"), "{}", s.show());
}

#[test]
fn hardening_seal_messages_never_land_on_the_commands_stdout() {
    // stderr closed: seal's own note ("not sealed") must go nowhere, not to fd 1.
    let s = sh(r#""$0" --unseal random -- echo out 2>&-"#);
    assert_eq!(
        (s.code, s.stdout.as_str()),
        (Some(0), "out\n"),
        "{}",
        s.show()
    );
}

#[test]
fn hardening_a_script_with_a_missing_interpreter_names_it() {
    let d = tempfile::tempdir().unwrap();
    write_executable(d.path(), "script", "#!/nonexistent/interp\necho hi\n");
    let mut c = seal(["--", "./script"]);
    c.current_dir(d.path());
    let out = run_timeout(c, TIMEOUT);
    let mut b = Command::new("bash");
    b.args(["-c", "./script"]).current_dir(d.path());
    let bash = run_timeout(b, TIMEOUT);
    assert_eq!(out.code, bash.code, "same status as bash\n{}", out.show());
    assert_eq!(out.code, Some(127));
    assert_eq!(
        out.stderr,
        "seal: ./script: bad interpreter /nonexistent/interp: No such file or directory\n"
    );
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn hardening_files_seal_creates_are_private_under_any_umask() {
    let cache = tempfile::tempdir().unwrap();
    let xdg = cache.path().join("fresh/cache");
    // The contract variables are hidden from the program's environ; a child's initial
    // environment (/proc/self/environ) still has them.
    let script = r#"d=$(cat /proc/self/environ | tr '\0' '\n' | sed -n 's/^LIBSEAL_RUN_DIR=//p'); stat -c %a "$d" "$d/run.table""#;
    let mut c = seal(["--", "sh", "-c", script]);
    c.env("XDG_CACHE_HOME", &xdg);
    // SAFETY: umask in the forked child before exec.
    unsafe {
        c.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    let out = run_timeout(c, TIMEOUT);
    assert_eq!(out.stdout, "700\n600\n", "{}", out.show());
    for d in ["fresh", "fresh/cache", "fresh/cache/seal"] {
        assert_eq!(mode(&cache.path().join(d)), 0o700, "{d}");
    }
    let shims: Vec<_> = std::fs::read_dir(xdg.join("seal"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("libseal-"))
        .collect();
    assert_eq!(shims.len(), 1);
    assert_eq!(mode(&shims[0].path()), 0o500);
}

#[test]
fn hardening_a_relative_xdg_cache_home_is_ignored() {
    let home = tempfile::tempdir().unwrap();
    let mut c = seal([
        "--",
        "sh",
        "-c",
        r#"cat /proc/self/environ | tr '\0' '\n' | sed -n 's/^LD_PRELOAD=//p'; cd / && date +%Y"#,
    ]);
    c.env("XDG_CACHE_HOME", "relative/cache")
        .env("XDG_RUNTIME_DIR", "relative/run")
        .env("HOME", home.path())
        .current_dir(home.path());
    let out = run_timeout(c, TIMEOUT);
    let mut lines = out.stdout.lines();
    let preload = lines.next().unwrap_or_default();
    assert!(
        preload.starts_with(&format!("{}/.cache/seal/", home.path().display())),
        "{}",
        out.show()
    );
    assert_eq!(
        lines.next(),
        Some("2026"),
        "sealed after cd\n{}",
        out.show()
    );
    assert!(!home.path().join("relative").exists());
}

fn in_dir_with_config(toml: &str, args: &[&str]) -> crate::util::Output {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("seal.toml"), toml).unwrap();
    let mut c = seal(args);
    c.current_dir(d.path());
    run_timeout(c, TIMEOUT)
}

/// One line on stderr, exit 2, and the line holds every one of `parts`.
fn usage_error(out: &crate::util::Output, parts: &[&str]) {
    assert_eq!(out.code, Some(2), "{}", out.show());
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.show());
    for p in parts {
        assert!(out.stderr.contains(p), "{p:?} missing\n{}", out.show());
    }
}

#[test]
fn hardening_env_keys_that_would_unseal_are_refused() {
    for key in ["LD_PRELOAD", "LD_AUDIT", "SEAL_SEED", "LIBSEAL_SEED"] {
        let toml = format!("[env]\nOK = \"1\"\n{key} = \"x\"\n");
        let out = in_dir_with_config(&toml, &["--", "true"]);
        usage_error(&out, &[key, "seal.toml:3"]);
    }
    let out = in_dir_with_config(
        "[env]\nLD_LIBRARY_PATH = \"/nonexistent\"\n",
        &["--", "sh", "-c", "echo $LD_LIBRARY_PATH"],
    );
    assert_eq!(out.stdout, "/nonexistent\n", "{}", out.show());
}

#[test]
fn hardening_clocks_that_would_overflow_are_refused() {
    let out = run_seal(["--tick", "100years", "--", "true"]);
    usage_error(&out, &["--tick", "100years"]);
    let out = run_seal(["--epoch", "@9223372000", "--tick", "1sec", "--", "true"]);
    usage_error(&out, &["--tick", "1sec"]);
    let out = run_seal(["--epoch", "@99999999999", "--", "true"]);
    usage_error(&out, &["--epoch", "@99999999999", "out of range"]);
    let out = in_dir_with_config("[seal]\ntick = \"100years\"\n", &["--", "true"]);
    usage_error(&out, &["seal.toml:2", "tick"]);
    // The largest tick still allowed runs.
    run_seal(["--tick", "1s", "--", "true"]).ok();
}

#[test]
fn hardening_small_setting_errors_name_their_source() {
    let out = in_dir_with_config("[seal]\ntick = 5\n", &["--", "true"]);
    usage_error(&out, &["seal.toml:2", "5ns"]);
    let out = run_seal(["--tick", "5", "--", "true"]);
    usage_error(&out, &["--tick", "unit"]);
    let host = "h".repeat(65);
    let out = in_dir_with_config(&format!("[seal]\nhostname = \"{host}\"\n"), &["--", "true"]);
    usage_error(&out, &["seal.toml:2", "hostname", "64 bytes"]);
    let mut c = seal(["--", "true"]);
    c.env("SEAL_QUIET", "banana");
    usage_error(&run_timeout(c, TIMEOUT), &["SEAL_QUIET", "banana"]);
    let mut c = seal(["--", "true"]);
    c.env(
        "SEAL_SEED",
        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"\xff"),
    );
    usage_error(&run_timeout(c, TIMEOUT), &["SEAL_SEED", "UTF-8"]);
}

#[test]
fn hardening_a_config_that_is_not_a_regular_file_fails_at_once() {
    let out = run_timeout(
        seal(["--config", "/dev/zero", "--", "true"]),
        Duration::from_secs(10),
    );
    usage_error(&out, &["/dev/zero", "not a regular file"]);
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let out = run_timeout(
        seal([
            "--config".as_ref(),
            fifo.as_os_str(),
            "--".as_ref(),
            "true".as_ref(),
        ]),
        Duration::from_secs(10),
    );
    usage_error(&out, &["fifo", "not a regular file"]);
}

#[test]
fn hardening_a_forgotten_dash_dash_gets_a_tip_and_exit_2() {
    let out = run_seal(["date"]);
    assert_eq!(out.code, Some(2), "{}", out.show());
    assert!(
        out.stderr
            .lines()
            .any(|l| l.contains("tip:") && l.ends_with("seal -- date")),
        "{}",
        out.show()
    );
}

#[test]
fn hardening_census_without_a_command_is_one_line() {
    let out = run_seal(["census"]);
    usage_error(&out, &["no command given", "seal census"]);
}

#[test]
fn hardening_a_census_path_that_is_a_directory_fails_before_the_run() {
    let d = tempfile::tempdir().unwrap();
    let marker = d.path().join("ran");
    let script = format!("touch {}; exit 3", marker.display());
    let dir = d.path().to_str().unwrap();
    let out = run_seal(["--census", dir, "--", "sh", "-c", &script]);
    usage_error(&out, &["--census", "is a directory"]);
    assert!(!marker.exists(), "the command must not run");
}

#[test]
fn hardening_census_into_a_closed_pipe_exits_0_without_a_backtrace() {
    let mut c = command("bash");
    c.args([
        "-c",
        r#""$0" census -- true 2>&1 | head -1; echo "status ${PIPESTATUS[0]}""#,
    ])
    .arg(seal_bin());
    let out = run_timeout(c, TIMEOUT);
    assert!(out.stdout.ends_with("status 0\n"), "{}", out.show());
    assert!(!out.stdout.contains("panicked") && !out.stdout.contains("backtrace"));
}

#[test]
fn hardening_census_to_a_full_stderr_never_panics() {
    let mut c = seal(["census", "--", "true"]);
    c.stderr(std::fs::File::create("/dev/full").unwrap());
    let status = c
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    // The table could not be written: seal failed (125), but it never panics (101).
    assert_ne!(status.code(), Some(101), "{status:?}");
    assert_eq!(status.code(), Some(125), "{status:?}");
}

#[test]
fn hardening_unsealed_families_are_noted_unless_quiet() {
    let out = run_seal(["--unseal", "random", "--", "true"]);
    out.ok();
    assert!(
        out.stderr.lines().any(|l| l.contains("not sealed")),
        "{}",
        out.show()
    );
    let out = run_seal(["-q", "--unseal", "random", "--", "true"]);
    out.ok();
    assert_eq!(out.stderr, "", "{}", out.show());
}

#[test]
fn hardening_huge_golden_time_limits_are_no_limit_or_an_error_never_a_panic() {
    // Past what an Instant can hold: no limit (this panicked computing the deadline).
    let toml =
        "[[case]]\nname = \"t\"\ncmd = [\"echo\", \"hi\"]\ntimeout = \"500000000000years\"\n";
    let out = in_dir_with_config(toml, &["golden", "record"]);
    out.ok();
    // Past what a Duration can hold: a configuration error naming the line.
    let toml = "[[case]]\nname = \"t\"\ncmd = [\"echo\", \"hi\"]\ntimeout = 1e300\n";
    let out = in_dir_with_config(toml, &["golden", "record"]);
    usage_error(&out, &["seal.toml:4", "timeout", "too large"]);
}

/// The command starts with the signal dispositions it would have without seal: SIGPIPE at its
/// default (seal itself ignores it), a signal seal's caller ignored (`nohup`, a background job)
/// still ignored, glibc's internal signals at their default whoever started seal, and none of
/// seal's forwarding handlers (libseal's own SIGSEGV handler aside). `/proc/self/status` of
/// the sealed root shows them.
#[test]
fn hardening_the_command_gets_the_callers_signal_dispositions() {
    let mask = |out: &str, field: &str| -> u64 {
        let line = out.lines().find(|l| l.starts_with(field)).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    let bit = |sig: i32| 1u64 << (sig - 1);
    for ignore_int in [false, true] {
        let mut cmd = seal(["-q", "--", "cat", "/proc/self/status"]);
        if ignore_int {
            // SAFETY: signal() is async-signal-safe.
            unsafe {
                cmd.pre_exec(|| {
                    libc::signal(libc::SIGINT, libc::SIG_IGN);
                    Ok(())
                });
            }
        }
        let out = run_timeout(cmd, TIMEOUT);
        assert_eq!(out.code, Some(0), "{}", out.show());
        // All 64: glibc's `posix_spawn`, which started this seal (when there is no pre-exec
        // step), leaves its two internal signals (32, 33) ignored in its child; the root puts
        // them back, so how seal was started does not show.
        let ign = mask(&out.stdout, "SigIgn:");
        let cgt = mask(&out.stdout, "SigCgt:");
        assert_eq!(
            ign,
            if ignore_int { bit(libc::SIGINT) } else { 0 },
            "{}",
            out.stdout
        );
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGPIPE,
            libc::SIGWINCH,
        ] {
            assert_eq!(cgt & bit(sig), 0, "signal {sig} caught\n{}", out.stdout);
        }
    }
}
