//! Test harness: builds fixtures, runs the built `seal` with a hard timeout (a hang is a
//! failure with a clear message, never a stuck CI), and prints expected/actual between rulers.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `seal` binary under test.
pub fn seal_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_seal"))
}

/// Workspace root (for fixtures/).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub fn fixture(rel: &str) -> PathBuf {
    root().join("fixtures").join(rel)
}

pub use crate::dirs::cache_home;

/// Where compiled fixtures go (one per test binary run).
pub fn build_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = root().join("target").join("e2e-fixtures");
        std::fs::create_dir_all(&d).unwrap();
        d
    })
    .clone()
}

#[derive(Debug, Clone)]
pub struct Output {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Output {
    pub fn ok(&self) -> &Self {
        self.code_is(0)
    }
    /// Asserts the exit code (the whole run is shown if it differs).
    pub fn code_is(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "expected exit {code}\n{}",
            self.show()
        );
        self
    }
    /// Asserts that stdout contains `needle` (the whole run is shown if not).
    pub fn stdout_has(&self, needle: &str) -> &Self {
        self.assert_contains("stdout", &self.stdout, needle, true)
    }
    /// Asserts that stdout does not contain `needle` (the whole run is shown if it does).
    pub fn stdout_lacks(&self, needle: &str) -> &Self {
        self.assert_contains("stdout", &self.stdout, needle, false)
    }
    /// Asserts that stderr contains `needle` (the whole run is shown if not).
    pub fn stderr_has(&self, needle: &str) -> &Self {
        self.assert_contains("stderr", &self.stderr, needle, true)
    }
    /// Asserts that exactly one line of stderr contains `needle` (a report said once, not per
    /// process or twice).
    pub fn stderr_has_once(&self, needle: &str) -> &Self {
        let n = self.stderr.lines().filter(|l| l.contains(needle)).count();
        assert_eq!(n, 1, "want one line {needle:?}\n{}", self.show());
        self
    }
    /// Asserts that stderr does not contain `needle` (the whole run is shown if it does).
    pub fn stderr_lacks(&self, needle: &str) -> &Self {
        self.assert_contains("stderr", &self.stderr, needle, false)
    }
    /// Asserts that seal reported nothing of the program as unsealed: no "not sealed" line but
    /// the machine's own (`cpu-trap-unavailable`: a CPU or hypervisor without cpuid faulting).
    pub fn says_nothing_unsealed(&self) -> &Self {
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| l.contains("not sealed"))
            .collect();
        assert!(lines.is_empty(), "unsealed: {lines:?}\n{}", self.show());
        self
    }
    /// Asserts that stdout starts with `prefix` (the whole run is shown if not).
    pub fn stdout_starts_with(&self, prefix: &str) -> &Self {
        assert!(
            self.stdout.starts_with(prefix),
            "stdout does not start with {prefix:?}\n{}",
            self.show()
        );
        self
    }
    /// Asserts that stdout is exactly `want` (the whole run is shown if not).
    pub fn stdout_is(&self, want: &str) -> &Self {
        assert_eq!(self.stdout, want, "{}", self.show());
        self
    }
    /// Asserts that stdout is the same as `other`'s (this run is shown if not).
    pub fn same_stdout_as(&self, other: &Output) -> &Self {
        assert_eq!(self.stdout, other.stdout, "{}", self.show());
        self
    }
    fn assert_contains(&self, stream: &str, text: &str, needle: &str, want: bool) -> &Self {
        let verb = if want { "lacks" } else { "has" };
        assert!(
            text.contains(needle) == want,
            "{stream} {verb} {needle:?}\n{}",
            self.show()
        );
        self
    }
    pub fn show(&self) -> String {
        format!(
            "exit: {:?} signal: {:?} after {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}\n--------------",
            self.code, self.signal, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// A command with seal's own environment variables cleared and the test cache dir set.
pub fn command<S: AsRef<OsStr>>(program: S) -> Command {
    let mut cmd = Command::new(program);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if k.starts_with("SEAL_")
            || k.starts_with("LIBSEAL_")
            || k == "LD_PRELOAD"
            || k == "SOURCE_DATE_EPOCH"
        {
            cmd.env_remove(&k);
        }
    }
    cmd.env("XDG_CACHE_HOME", cache_home());
    cmd
}

/// `seal ARGS...` as a Command.
pub fn seal<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut c = command(seal_bin());
    c.args(args);
    c
}

/// Runs `cmd` with stdin closed, killing it (and failing the test with a clear message) after
/// `timeout`.
pub fn run_timeout(cmd: Command, timeout: Duration) -> Output {
    try_run_timeout(cmd, timeout).unwrap_or_else(|e| panic!("{e}"))
}

/// [`run_timeout`] that returns a hang (or a command that cannot start) as an `Err` with the
/// same message instead of panicking: for runs shared between tests (each test that uses the
/// run then fails with that message) and for runs on several threads at once.
pub fn try_run_timeout(mut cmd: Command, timeout: Duration) -> Result<Output, String> {
    let desc = format!("{cmd:?}");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Own process group, so a timeout kills the whole tree.
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {desc}: {e}"))?;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > timeout {
            // SAFETY: kill the process group we created.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            let so = String::from_utf8_lossy(&t_out.join().unwrap()).into_owned();
            let se = String::from_utf8_lossy(&t_err.join().unwrap()).into_owned();
            return Err(format!("HANG: {desc} did not finish within {timeout:?}\n--- stdout ---\n{so}\n--- stderr ---\n{se}\n--------------"));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    use std::os::unix::process::ExitStatusExt;
    Ok(Output {
        code: status.code(),
        signal: status.signal(),
        stdout: String::from_utf8_lossy(&t_out.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&t_err.join().unwrap()).into_owned(),
        elapsed: start.elapsed(),
    })
}

/// Runs independent commands at the same time, one thread each, each with its own `timeout`;
/// returns their outputs in order. Any hang fails the test (after all runs have ended) with
/// the HANG message of the first one that hung. Sealed runs may overlap (seal is built for
/// concurrent runs), but sealed temp names are the same in every run: commands that create
/// temp files need a private `TMPDIR` each (see [`private_tmpdir`]).
pub fn run_concurrently(cmds: Vec<Command>, timeout: Duration) -> Vec<Output> {
    try_run_concurrently(cmds, timeout)
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// [`run_concurrently`] that hands back each hang as an `Err` instead of panicking.
pub fn try_run_concurrently(cmds: Vec<Command>, timeout: Duration) -> Vec<Result<Output, String>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = cmds
            .into_iter()
            .map(|c| s.spawn(move || try_run_timeout(c, timeout)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Asserts that every run exited 0 and printed byte-identical stdout; returns run 1's stdout.
pub fn assert_same_stdout(what: &str, runs: &[Output]) -> String {
    let first = &runs[0];
    first.ok();
    for (i, again) in runs.iter().enumerate().skip(1) {
        assert_same_as_run_1(what, first, i + 1, again, &str::to_string);
    }
    first.stdout.clone()
}

/// Runs `run` `n` times, one after another; asserts that every run exited 0 and printed
/// byte-identical stdout; returns run 1.
pub fn assert_runs_agree(what: &str, n: usize, run: impl FnMut() -> Output) -> Output {
    assert_runs_agree_by(what, n, str::to_string, run)
}

/// [`assert_runs_agree`] comparing each run's stdout as `key` maps it (e.g. without lines that
/// this build does not seal).
pub fn assert_runs_agree_by(
    what: &str,
    n: usize,
    key: impl Fn(&str) -> String,
    mut run: impl FnMut() -> Output,
) -> Output {
    let first = run();
    first.ok();
    for i in 2..=n {
        assert_same_as_run_1(what, &first, i, &run(), &key);
    }
    first
}

/// Asserts that run `i` (counted from 1) exited 0 and printed what run 1 printed (as `key`
/// maps stdout), showing both runs in full if not.
fn assert_same_as_run_1(
    what: &str,
    first: &Output,
    i: usize,
    again: &Output,
    key: &dyn Fn(&str) -> String,
) {
    again.ok();
    assert_eq!(
        key(&first.stdout),
        key(&again.stdout),
        "sealed run {i} of {what} differs from run 1\n=== run 1 ===\n{}\n=== run {i} ===\n{}",
        first.show(),
        again.show()
    );
}

/// A fresh, empty directory for one run's `TMPDIR` (removed when dropped).
pub fn private_tmpdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("seal-e2e-tmp")
        .tempdir()
        .unwrap()
}

pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `seal ARGS` (60 s limit).
pub fn run_seal<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_timeout(seal(args), TIMEOUT)
}

/// Runs a command unsealed (same environment hygiene, 60 s limit).
pub fn run_plain<I, S>(program: &str, args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut c = command(program);
    c.args(args);
    run_timeout(c, TIMEOUT)
}

/// Runs `seal -- CMD` (60 s limit).
pub fn run_sealed(cmd: &[&str]) -> Output {
    run_seal(["--"].iter().chain(cmd))
}

/// `seal FLAGS -- CMD` as a Command run in `dir`.
pub fn seal_in(dir: &Path, flags: &[&str], cmd: &[&str]) -> Command {
    let mut c = seal(flags.iter().chain(["--"].iter()).chain(cmd));
    c.current_dir(dir);
    c
}

/// The `stdout` lines of a golden (or a report in a golden's shape), joined.
pub fn golden_stdout(golden: &serde_json::Value) -> String {
    let lines = golden["stdout"].as_array().expect("stdout lines");
    lines.iter().map(|l| l.as_str().unwrap()).collect()
}

/// Runs `seal -- CMD` `n` times; asserts exit 0 and byte-identical stdout; returns it.
pub fn assert_sealed_stable(cmd: &[&str], n: usize) -> String {
    assert_runs_agree(&format!("{cmd:?}"), n, || run_sealed(cmd)).stdout
}

/// Runs `program ARGS` unsealed twice; asserts that both exit 0 and print different stdout
/// (what the seal pins really varies: the seal, not luck, makes sealed runs agree); returns
/// run 1's stdout.
pub fn assert_plain_runs_differ(program: &str, args: &[&str]) -> String {
    let a = run_plain(program, args);
    a.ok();
    let b = run_plain(program, args);
    b.ok();
    assert_ne!(
        a.stdout,
        b.stdout,
        "two unsealed runs of {program} {args:?} printed the same stdout\n{}",
        a.show()
    );
    a.stdout
}

/// [`assert_sealed_stable`] with the `n` runs at the same time (for commands that mostly wait
/// in real time). Only for commands that create no temp files: sealed temp names are the same
/// in every run, so overlapping runs in one `TMPDIR` would take each other's names.
pub fn assert_sealed_stable_concurrently(cmd: &[&str], n: usize) -> String {
    let runs = run_concurrently(sealed_n(cmd, n), TIMEOUT);
    assert_same_stdout(&format!("{cmd:?}"), &runs)
}

/// `n` commands `seal -- CMD`.
pub fn sealed_n(cmd: &[&str], n: usize) -> Vec<Command> {
    (0..n)
        .map(|_| {
            let mut c = seal(["--"]);
            c.args(cmd);
            c
        })
        .collect()
}

/// The arguments of `seal FLAGS -- java -cp CP CLASS` (no JVM flags: sealed JVMs get
/// `-XX:-UsePerfData` from the shim, so concurrent ones do not share an hsperfdata file).
pub fn sealed_java<'a>(flags: &[&'a str], cp: &'a str, class: &'a str) -> Vec<&'a str> {
    let mut args = flags.to_vec();
    args.extend(["--", "java", "-cp", cp, class]);
    args
}

/// True if `program` is on PATH.
pub fn have(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

/// Compiles a C fixture (fixtures/c/NAME.c) with the system cc into target/e2e-fixtures/NAME.
pub fn build_c(name: &str, extra: &[&str]) -> PathBuf {
    let src = fixture(&format!("c/{name}.c"));
    let suffix = extra.join("").replace(['-', ' ', '/'], "");
    let out = build_dir().join(format!("{name}{suffix}"));
    let tmp = unique_tmp(&out);
    let st = Command::new("cc")
        .args(["-O1", "-g", "-o"])
        .arg(&tmp)
        .arg(&src)
        .args(extra)
        .args(["-lpthread", "-lrt"])
        .status()
        .expect("cc not found");
    assert!(st.success(), "compiling {} failed", src.display());
    install(&tmp, &out);
    out
}

/// A private output path next to `out`: tests run in parallel and may build the same fixture;
/// writing over a binary another test is running fails with "Text file busy".
fn unique_tmp(out: &Path) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    out.with_extension(format!("tmp{}-{n}", std::process::id()))
}

/// Moves a freshly built binary into place atomically (rename never touches a running file).
fn install(tmp: &Path, out: &Path) {
    std::fs::rename(tmp, out).unwrap_or_else(|e| panic!("cannot install {}: {e}", out.display()));
}

/// Compiles a Java fixture (fixtures/java/NAME.java) with javac into the class directory
/// target/e2e-fixtures/java-NAME; returns that directory.
pub fn build_java(name: &str) -> PathBuf {
    let src = fixture(&format!("java/{name}.java"));
    let classes = build_dir().join(format!("java-{name}"));
    std::fs::create_dir_all(&classes).unwrap();
    // The fixtures' shared classes (Values.java) are found on the source path.
    let st = Command::new("javac")
        .arg("-d")
        .arg(&classes)
        .arg("-sourcepath")
        .arg(fixture("java"))
        .arg(&src)
        .status()
        .expect("javac not found");
    assert!(st.success(), "compiling {} failed", src.display());
    classes
}

/// fixtures/java/NAME.java compiled once per test binary (by [`build_java`]), so that no test
/// runs classes another is writing; `None`, after a visible skip of the calling test (of
/// `module`, [`report_skip`]), when java or javac is not on PATH.
pub fn java_classes(module: &str, name: &str) -> Option<PathBuf> {
    if !have("java") || !have("javac") {
        // The caller returns at once: the whole test is skipped.
        report_skip(module, false, "java/javac not on PATH");
        return None;
    }
    static BUILT: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, dir)) = built.iter().find(|(n, _)| n == name) {
        return Some(dir.clone());
    }
    let dir = build_java(name);
    built.push((name.to_string(), dir.clone()));
    Some(dir)
}

/// Compiles a Rust fixture (fixtures/rust/NAME.rs) with rustc into target/e2e-fixtures/NAME.
pub fn build_rust(name: &str) -> PathBuf {
    let src = fixture(&format!("rust/{name}.rs"));
    let out = build_dir().join(format!("{name}-rs"));
    let tmp = unique_tmp(&out);
    let st = Command::new("rustc")
        .args(["-O", "--edition", "2021", "-o"])
        .arg(&tmp)
        .arg(&src)
        .status()
        .expect("rustc not found");
    assert!(st.success(), "compiling {} failed", src.display());
    install(&tmp, &out);
    out
}

/// Writes `msg` straight to file descriptor 2. libtest captures `eprintln!` and everything
/// written through `std::io::stderr()` and shows it only for failing tests; a raw write is
/// never captured, so a skip shows up next to the test's `ok`.
fn write_stderr_raw(msg: &str) {
    let mut b = msg.as_bytes();
    while !b.is_empty() {
        // SAFETY: writing an initialised buffer to fd 2.
        let n = unsafe { libc::write(2, b.as_ptr().cast(), b.len()) };
        if n <= 0 {
            return;
        }
        b = &b[n as usize..];
    }
}

/// The running test's name ("module::test"): libtest names each test's thread after it.
fn test_name(fallback: &str) -> String {
    match std::thread::current().name() {
        Some(n) if n != "main" => n.to_string(),
        _ => fallback.to_string(),
    }
}

static SKIPS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Records a skip, prints `SKIPPED: <test>: <reason>` (or `PARTLY SKIPPED: …`) uncaptured, and
/// arranges for a summary of all skips after libtest's own summary. With
/// `SEAL_E2E_NO_SKIP=1` in the environment a skip is a failure instead (for a CI job that
/// has every tool installed).
pub fn report_skip(module: &str, partly: bool, reason: &str) {
    let name = test_name(module);
    let kind = if partly { "PARTLY SKIPPED" } else { "SKIPPED" };
    if std::env::var_os("SEAL_E2E_NO_SKIP").is_some_and(|v| v == "1") {
        panic!("{kind}: {name}: {reason} (SEAL_E2E_NO_SKIP=1 forbids skips)");
    }
    let line = format!("{kind}: {name}: {reason}");
    let mut skips = SKIPS.lock().unwrap_or_else(|e| e.into_inner());
    if skips.contains(&line) {
        return; // the same part of the same test, once per run: said once
    }
    write_stderr_raw(&format!("{line}\n"));
    if skips.is_empty() {
        extern "C" fn summary() {
            let skips = SKIPS.lock().unwrap_or_else(|e| e.into_inner());
            let mut msg = format!(
                "\ne2e: {} skip(s) on this machine (the tests above still say ok):\n",
                skips.len()
            );
            for s in skips.iter() {
                msg.push_str("  ");
                msg.push_str(s);
                msg.push('\n');
            }
            write_stderr_raw(&msg);
        }
        // SAFETY: registering a plain extern "C" fn to run at exit (after libtest's summary).
        unsafe { libc::atexit(summary) };
    }
    skips.push(line);
}

/// Skips the rest of the test, visibly: `skip!("needs java")` prints
/// `SKIPPED: module::test: needs java` past libtest's output capture, counts it in the
/// summary printed at exit, and returns from the test.
macro_rules! skip {
    ($($why:tt)+) => {{
        $crate::util::report_skip(module_path!(), false, &format!($($why)+));
        return;
    }};
}

/// Notes that part of a test did not run (a missing optional tool): printed and summed up
/// like [`skip!`], but the test goes on.
macro_rules! skip_part {
    ($($why:tt)+) => {{
        $crate::util::report_skip(module_path!(), true, &format!($($why)+));
    }};
}

/// Skips the rest of the test, visibly (see [`skip!`]), unless every one of the programs is on
/// PATH: `require_tools!("java", "javac")`.
macro_rules! require_tools {
    ($($tool:expr),+ $(,)?) => {{
        for tool in [$($tool),+] {
            if !$crate::util::have(tool) {
                skip!("{tool} not on PATH");
            }
        }
    }};
}

/// Copies a directory tree (files and folders only).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// The value of the first line `KEY VALUE...` of `out`.
pub fn value<'a>(out: &'a str, key: &str) -> &'a str {
    let prefix = format!("{key} ");
    out.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no line `{key} ...` in\n{out}"))
}

/// Asserts that the value of the first line `KEY VALUE...` of `out` starts with `prefix`.
pub fn assert_value_starts(out: &str, key: &str, prefix: &str) {
    let v = value(out, key);
    assert!(
        v.starts_with(prefix),
        "`{key}` is {v:?}, want {prefix:?}...\n{out}"
    );
}

/// Runs `seal census --json FILE ARGS...` (`args`: census options, then `--` and the
/// command) within `timeout`: its output and the census it wrote.
pub fn census_json(args: &[&str], timeout: Duration) -> (Output, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("census.json");
    let mut all = vec!["census", "--json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = run_timeout(seal(&all), timeout);
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("no census JSON ({e})\n{}", out.show()));
    (out, serde_json::from_str(&text).unwrap())
}

/// Runs `seal census --json` on `cmd`: its output, and `(symbol, count)` of the census totals
/// of one family.
pub fn census_totals(cmd: &[&str], family: &str) -> (Output, Vec<(String, u64)>) {
    let mut args = vec!["--"];
    args.extend_from_slice(cmd);
    let (out, v) = census_json(&args, TIMEOUT);
    let totals = v["totals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["family"] == family)
        .map(|t| {
            let s = t["symbol"].as_str().unwrap().to_string();
            (s, t["count"].as_u64().unwrap())
        })
        .collect();
    (out, totals)
}

/// Asserts that `totals` (from [`census_totals`]), in any order, are `want` (sorted by symbol).
pub fn assert_totals(out: &Output, totals: &[(String, u64)], want: &[(&str, u64)]) {
    let mut got = totals.to_vec();
    got.sort();
    let want: Vec<(String, u64)> = want.iter().map(|(s, n)| (s.to_string(), *n)).collect();
    assert_eq!(got, want, "{}", out.show());
}

/// The check named `name` in the report of `seal doctor --json`.
pub fn doctor_check<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name:?} in {report:#}"))
}

/// Writes an executable (mode 0755) file `name` in `dir` holding `text`; its path.
pub fn write_executable(dir: &Path, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Asserts that `text` contains `needle` (all of `text` is shown if not).
#[track_caller]
pub fn assert_has(text: &str, needle: &str) {
    assert!(text.contains(needle), "{needle:?} is not in\n{text}");
}

/// Runs `seal -- strace -f OPTIONS -o LOG CMD...`: its output and the log strace wrote.
pub fn sealed_strace(options: &[&str], cmd: &[&str]) -> (Output, String) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("strace.log");
    let mut args = vec!["--", "strace", "-f"];
    args.extend_from_slice(options);
    args.extend(["-o", log.to_str().unwrap()]);
    args.extend_from_slice(cmd);
    let out = run_seal(&args);
    let log = std::fs::read_to_string(&log)
        .unwrap_or_else(|e| panic!("no strace log ({e})\n{}", out.show()));
    (out, log)
}
