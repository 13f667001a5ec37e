//! Static binaries under seal's system-call supervisor (`seal_abi::supervised`): libseal
//! cannot load into them, so their clock, entropy, pid and host-name system calls are answered
//! by a supervisor process, their vDSO's clock entries read a page the supervisor keeps (a static C image's ticking clock,
//! `clock_page::Kind::Ticking`) or the vDSO is taken away, and their `AT_RANDOM` bytes are sealed.
//! Each test runs the real binaries (glibc `-static`, `musl-gcc -static`, Debian's
//! `busybox-static`, a `CGO_ENABLED=0` Go program) under the built `seal`, several times.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{build_c, build_dir, fixture, have, run_seal, Output};

/// What `static_world` prints under seal, whatever the libc (the supervisor's values; the
/// clock read through the vDSO it keeps, whose clock entries read the image's clock page).
const SEALED: &[&str] = &[
    "realtime 1767225600.000000000 time 1767225600 gettimeofday 1767225600.000001",
    "monotonic 86400000004000 slept 200001000",
    "vdso present",
    "pid 1000 ppid 999 host seal release 6.1.0-seal cpus 4",
    "clock_settime -1 Operation not permitted sethostname ",
];

pub(crate) fn have_static_glibc() -> bool {
    [
        "/usr/lib/x86_64-linux-gnu/libc.a",
        "/usr/lib64/libc.a",
        "/usr/lib/libc.a",
    ]
    .iter()
    .any(|p| Path::new(p).exists())
}

/// `static_world` built static with glibc; without a static libc the test is skipped
/// (visibly).
macro_rules! glibc_world_or_skip {
    () => {{
        if !have_static_glibc() {
            skip!("no static libc (libc.a)");
        }
        build_c("static_world", &["-static"])
    }};
}

/// `static_world` built with musl ([`build_musl`]); without `musl-gcc` the test is skipped
/// (visibly).
macro_rules! musl_world_or_skip {
    () => {{
        if !have("musl-gcc") {
            skip!("musl-gcc not on PATH (Debian: musl-tools)");
        }
        build_musl()
    }};
}

/// `static_world` built with `musl-gcc -static`, once per test process (tests run on threads
/// of one process: a temp name made from the pid is the same in each).
fn build_musl() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| build_musl_c("static_world")).clone()
}

/// `fixtures/c/NAME.c` built with `musl-gcc -static` to `NAME_musl` in the build directory
/// (under a temp name first: a concurrent test never runs a half-written file).
pub(crate) fn build_musl_c(name: &str) -> PathBuf {
    let out = build_dir().join(format!("{name}_musl"));
    let tmp = out.with_extension(format!("tmp{}", std::process::id()));
    let st = Command::new("musl-gcc")
        .args(["-static", "-O1", "-o"])
        .arg(&tmp)
        .arg(fixture(&format!("c/{name}.c")))
        .status()
        .expect("musl-gcc");
    assert!(st.success(), "musl-gcc failed on {name}.c");
    std::fs::rename(&tmp, &out).unwrap();
    out
}

/// Runs `seal -- BIN DIR [ARGS]` `n` times (a fresh empty DIR each time); asserts exit 0 and
/// identical stdout; returns the last run.
fn stable(bin: &Path, args: &[&str], n: usize) -> Output {
    crate::static_pids::alike(n, || {
        let dir = tempfile::tempdir().unwrap();
        let mut a = vec!["--", bin.to_str().unwrap(), dir.path().to_str().unwrap()];
        a.extend(args);
        run_seal(&a)
    })
}

fn assert_world(o: &Output, bin: &Path) {
    for line in SEALED {
        assert!(o.stdout.contains(line), "want {line:?}\n{}", o.show());
    }
    says_partly_sealed(
        o,
        "static-binary-supervised",
        bin,
        ": clocks are read from a page seal's supervisor shares with it; entropy, pid and host \
         name are sealed by seal's supervisor",
    );
}

/// Asserts that seal reported `bin` once as partly sealed in `kind`'s way, the report going on
/// with `what`.
fn says_partly_sealed(o: &Output, kind: &str, bin: &Path, what: &str) {
    o.stderr_has_once(&format!("partly sealed ({kind}): {}{what}", bin.display()));
}

#[test]
fn a_static_glibc_program_sees_the_sealed_world() {
    let bin = glibc_world_or_skip!();
    let o = stable(&bin, &[], 5);
    assert_world(&o, &bin);
    // Unsealed, the same binary sees the machine.
    let plain = crate::util::run_plain(bin.to_str().unwrap(), [std::env::temp_dir()]);
    plain.ok();
    assert!(
        !plain.stdout.contains("realtime 1767225600") && plain.stdout.contains("vdso present"),
        "{}",
        plain.show()
    );
}

#[test]
fn a_static_musl_program_sees_the_sealed_world() {
    let bin = musl_world_or_skip!();
    let o = stable(&bin, &[], 5);
    assert_world(&o, &bin);
}

/// A static image started by a dynamic parent, and a dynamic child of a static image: the
/// supervisor and libseal hand the run over to each other.
#[test]
fn static_and_dynamic_images_nest() {
    let bin = glibc_world_or_skip!();
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "echo shell $$; {} {} /bin/date +%s.%N; echo done",
        bin.display(),
        dir.path().display()
    );
    let mut first = None;
    for _ in 0..3 {
        let o = run_seal(["--", "sh", "-c", &script]);
        o.ok();
        assert!(o.stdout.starts_with("shell 1000\n"), "{}", o.show());
        assert!(o.stdout.contains("realtime 1767225600."), "{}", o.show());
        assert!(o.stdout.contains("vdso present"), "{}", o.show());
        // The dynamic `date` the static image starts carries libseal again.
        assert!(
            o.stdout.contains("\n1767225600.") && o.stdout.contains("child exited 0\ndone\n"),
            "{}",
            o.show()
        );
        if let Some(f) = &first {
            assert_eq!(f, &o.stdout, "{}", o.show());
        }
        first = Some(o.stdout);
    }
}

/// The machine's busybox (Debian's `busybox-static`), if there is one.
pub fn busybox() -> Option<&'static str> {
    ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

#[test]
fn busybox_static_is_sealed() {
    let Some(busybox) = busybox().map(Path::new) else {
        skip!("no busybox (Debian: busybox-static)");
    };
    let script =
        "date +%s; date; echo $$ $RANDOM; hostname; uname -r; mktemp -u; sleep 1; date +%s";
    let mut first: Option<String> = None;
    for _ in 0..5 {
        let o = run_seal(["--", busybox.to_str().unwrap(), "sh", "-c", script]);
        o.ok();
        let lines: Vec<&str> = o.stdout.lines().collect();
        assert_eq!(lines[0], "1767225600", "{}", o.show());
        assert_eq!(lines[1], "Thu Jan  1 00:00:00 UTC 2026", "{}", o.show());
        assert!(lines[2].starts_with("1000 "), "{}", o.show());
        assert_eq!(lines[3..5], ["seal", "6.1.0-seal"], "{}", o.show());
        // A second's sleep moves the sealed clock by a second.
        assert_eq!(lines[6], "1767225601", "{}", o.show());
        if let Some(f) = &first {
            assert_eq!(f, &o.stdout, "{}", o.show());
        }
        first = Some(o.stdout);
    }
}

/// A `CGO_ENABLED=0` Go program: its entropy, pid and host name are sealed; its clocks stay
/// real (the Go runtime's threads read them on their own schedule) and seal says so; nothing
/// hangs (`time.Sleep`, `time.After`, a context deadline).
#[test]
fn a_static_go_program_runs_partly_sealed_and_says_what_is_not() {
    if !have("go") {
        skip!("go not on PATH (Debian: golang-go)");
    }
    let bin = build_go();
    let mut first: Option<String> = None;
    for _ in 0..3 {
        let o = run_seal(["--", bin.to_str().unwrap()]);
        o.ok();
        assert!(o.stdout.contains("pid 1000 host seal\n"), "{}", o.show());
        assert!(
            o.stdout.contains("slept true\ndeadline true\n"),
            "{}",
            o.show()
        );
        let crand = o.stdout.lines().find(|l| l.starts_with("crand ")).unwrap();
        if let Some(f) = &first {
            assert_eq!(f, crand, "{}", o.show());
        }
        first = Some(crand.to_string());
        let says = |real: &String| {
            o.stderr.contains(&format!(
                "partly sealed (static-binary-supervised): {}: clocks (one per process, read \
                 from a page seal's supervisor shares with it, moved by its timer waits), \
                 entropy (crypto/rand from a window of its stream in the image), pid and host \
                 name are sealed by seal's supervisor; real: {real}",
                bin.display(),
            ))
        };
        let reals = crate::go_rand::partly_sealed_real("/proc listings, file times, rdtsc");
        assert!(
            reals.iter().any(says),
            "want one of {reals:?}\n{}",
            o.show()
        );
    }
}

/// `fixtures/go/static_world.go`, built with `CGO_ENABLED=0` (once per test binary).
fn build_go() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let out = build_dir().join("static_world_go");
            let cache = build_dir().join("go-cache");
            let st = Command::new("go")
                .args(["build", "-o"])
                .arg(&out)
                .arg(fixture("go/static_world.go"))
                .env("CGO_ENABLED", "0")
                .env("GOCACHE", &cache)
                .env("GOPATH", build_dir().join("go-path"))
                .env("GO111MODULE", "off")
                .status()
                .expect("go build");
            assert!(st.success(), "go build failed");
            out
        })
        .clone()
}

/// A dynamically linked (cgo) Go program: libseal seals its C library, and the supervisor the
/// program starts for itself serves its Go runtime's raw calls with the same values: one pid,
/// one host name; crypto/rand sealed; the runtime's preemption signals (sent to its own,
/// virtual, pid) still arrive; timers never hang; the census line says what stays real.
#[test]
fn a_cgo_go_program_sees_one_pid_and_one_host_name() {
    if !have("go") || !have("cc") {
        skip!("go or cc not on PATH (Debian: golang-go)");
    }
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("cgo_world");
    let st = Command::new("go")
        .args(["build", "-o"])
        .arg(&bin)
        .arg(fixture("go/cgo_world.go"))
        .env("CGO_ENABLED", "1")
        .env("GOFLAGS", "-mod=mod")
        .env("GOCACHE", tmp.path().join("go-cache"))
        .env("GOPATH", tmp.path().join("go-path"))
        .env("GO111MODULE", "off")
        .status()
        .expect("go build");
    assert!(st.success(), "go build (cgo) failed");
    let mut first: Option<String> = None;
    for _ in 0..5 {
        let o = run_seal(["--", bin.to_str().unwrap()]);
        o.ok();
        assert!(
            o.stdout.starts_with(
                "libc time 1767225600 pid 1000 host seal\ngo pid 1000 ppid 999 host seal\n"
            ),
            "{}",
            o.show()
        );
        assert!(
            o.stdout.ends_with("slept true\ndeadline true\n"),
            "{}",
            o.show()
        );
        if let Some(f) = &first {
            assert_eq!(f, &o.stdout, "{}", o.show());
        }
        first = Some(o.stdout.clone());
        says_partly_sealed(
            &o,
            "go-runtime-supervised",
            &bin,
            ": libseal seals its C library's calls; the Go runtime's clocks (one per process, \
             read from a page, moved by its timer waits) and raw getpid, getrandom, uname and \
             signal calls are sealed by seal's supervisor; real: ",
        );
        let reals = crate::go_rand::partly_sealed_real("tids of its other threads");
        assert!(
            reals.iter().any(|r| o.stderr.contains(&format!(
                "signal calls are sealed by seal's supervisor; real: {r}"
            ))),
            "want one of {reals:?}\n{}",
            o.show()
        );
    }
}

/// A static binary started by `posix_spawn` and `posix_spawnp` (glibc execs inside its own
/// child, where no exec hook runs): supervised as one started by exec, through the `seal
/// __exec-static` trampoline.
#[test]
fn a_static_binary_started_by_posix_spawn_is_supervised() {
    let child = glibc_world_or_skip!();
    let spawner = build_c("spawn_static", &[]);
    let (spawner, child_s) = (spawner.to_str().unwrap(), child.to_str().unwrap());
    crate::static_pids::alike(3, || {
        let dir = tempfile::tempdir().unwrap();
        let o = run_seal(["--", spawner, child_s, dir.path().to_str().unwrap()]);
        o.ok();
        // The second child starts where the spawner's clock stands once it reaped the first,
        // whose 200 ms sleep it took in (as it would a dynamic child's).
        for (want, n) in [
            ("vdso present", 2),
            ("host seal release 6.1.0-seal cpus 4", 2),
            ("realtime 1767225600.000000000", 1),
            ("realtime 1767225600.200003000", 1),
        ] {
            assert_eq!(o.stdout.matches(want).count(), n, "{want}\n{}", o.show());
        }
        for call in ["posix_spawn", "posix_spawnp"] {
            let ended = o
                .stdout
                .lines()
                .any(|l| l.starts_with(&format!("{call} child ")) && l.ends_with(" exited 0"));
            assert!(ended, "{call}\n{}", o.show());
        }
        assert!(
            !o.stderr.contains("not sealed (static-binary)"),
            "{}",
            o.show()
        );
        says_partly_sealed(&o, "static-binary-supervised", &child, "");
        o
    });
}

/// The census counts a supervised image's calls per process like libseal's, by function,
/// clock and calling site: `static_counts` makes each call through libc's `syscall()`, so the
/// counts at that site are exact whatever the libc does besides.
#[test]
fn the_census_counts_a_static_images_calls_exactly() {
    let mut bins = Vec::new();
    if have_static_glibc() {
        bins.push(build_c("static_counts", &["-static"]));
    }
    if have("musl-gcc") {
        bins.push(build_musl_c("static_counts"));
    }
    if bins.is_empty() {
        skip!("no static libc (libc.a) and no musl-gcc");
    }
    for bin in &bins {
        let (o, v) = crate::util::census_json(&["--", bin.to_str().unwrap()], crate::util::TIMEOUT);
        o.ok();
        assert!(o.stdout.contains(" host seal\n"), "{}", o.show());
        let procs = v["processes"].as_array().unwrap();
        let p = procs
            .iter()
            .find(|p| p["exe"] == bin.to_str().unwrap())
            .unwrap_or_else(|| panic!("no process for {}\n{v:#}", bin.display()));
        assert_eq!(p["vpid"], 1000, "{p:#}");
        // (symbol, detail) → calls from the image's syscall() site.
        let mut at_site = Vec::new();
        for c in p["calls"].as_array().unwrap() {
            for caller in c["callers"].as_array().unwrap() {
                if caller["object"] == bin.to_str().unwrap() && caller["symbol"] == "syscall" {
                    at_site.push((
                        c["symbol"].as_str().unwrap().to_string(),
                        c["detail"].as_str().unwrap_or("").to_string(),
                        caller["count"].as_u64().unwrap(),
                    ));
                }
            }
        }
        at_site.sort();
        let want: Vec<(String, String, u64)> = [
            ("clock_gettime", "CLOCK_MONOTONIC", 2),
            ("clock_gettime", "CLOCK_REALTIME", 3),
            ("getpid", "", 2),
            ("getrandom", "", 1),
            ("uname", "", 1),
        ]
        .iter()
        .map(|(s, d, n)| (s.to_string(), d.to_string(), *n))
        .collect();
        assert_eq!(at_site, want, "{}\n{p:#}", bin.display());
    }
}

/// A sealed shell's line `run_dir=DIR`: the run directory (libseal hides `LIBSEAL_*` from the
/// shell's variables, not from `/proc`).
const PRINT_RUN_DIR: &str = "printf 'run_dir=%s\\n' \"$(cat /proc/$$/environ | tr '\\0' '\\n' \
     | sed -n 's/^LIBSEAL_RUN_DIR=//p')\"";

/// The processes of the supervision of the run in `run_dir` (its server, spare and
/// supervisors: `seal __static-…` processes started with that run directory).
fn supervision_of(run_dir: &str) -> Vec<String> {
    let needle = format!("LIBSEAL_RUN_DIR={run_dir}\0");
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let environ = std::fs::read(e.path().join("environ")).unwrap_or_default();
        let has = |hay: &[u8], n: &[u8]| hay.windows(n.len()).any(|w| w == n);
        if has(&cmdline, b"__static-") && has(&environ, needle.as_bytes()) {
            found.push(format!("{pid}: {}", String::from_utf8_lossy(&cmdline)));
        }
    }
    found
}

/// Waits (at most 10 s) until nothing of the run in `run_dir` is left: no supervision
/// process, no socket, no directory; panics naming what is left.
fn assert_run_gone(run_dir: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left = supervision_of(run_dir);
        let dir = Path::new(run_dir);
        if left.is_empty() && !dir.exists() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "left after the run: {left:?}, directory exists: {}, socket exists: {}",
            dir.exists(),
            dir.join(seal_abi::supervised::SERVER_SOCKET).exists()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The run directory a sealed shell printed with [`PRINT_RUN_DIR`].
fn run_dir_of(o: &Output) -> String {
    let dir = o
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("run_dir="))
        .unwrap_or_default();
    assert!(
        dir.starts_with('/'),
        "no run directory printed\n{}",
        o.show()
    );
    dir.to_owned()
}

/// Twenty static images started at once from one shell, in two seal runs at once: each
/// image is supervised (by the run's one server: its socket is there during the run), each
/// run ends (the harness's timeout fails a hang: a server that held the shell's pipe, a
/// spare that took no connection), and after each run nothing is left of its supervision.
#[test]
fn many_static_images_at_once_are_all_sealed_and_the_runs_leave_no_supervisor() {
    let bin = musl_world_or_skip!();
    let script = format!(
        "{PRINT_RUN_DIR}; rd=$(cat /proc/$$/environ | tr '\\0' '\\n' | sed -n \
         's/^LIBSEAL_RUN_DIR=//p'); for i in $(seq 20); do mkdir d$i; {bin} d$i > o$i & done; \
         wait; [ -S \"$rd/{sock}\" ] && echo server; for i in $(seq 20); do cat o$i; done",
        bin = bin.display(),
        sock = seal_abi::supervised::SERVER_SOCKET,
    );
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let cmds = dirs
        .iter()
        .map(|d| {
            let mut c = crate::util::seal(["-q", "--", "sh", "-c", &script]);
            c.current_dir(d.path());
            c
        })
        .collect();
    let runs = crate::util::run_concurrently(cmds, crate::util::TIMEOUT);
    for o in &runs {
        o.ok();
        assert!(o.stdout.contains("\nserver\n"), "no server\n{}", o.show());
        // Each image is a child of the shell (virtual pid 1000), with a pid of its own.
        for line in &SEALED[..3] {
            let n = o.stdout.matches(line).count();
            assert_eq!(n, 20, "{line:?} {n} times, not 20\n{}", o.show());
        }
        let n = o
            .stdout
            .matches(" ppid 1000 host seal release 6.1.0-seal cpus 4")
            .count();
        assert_eq!(n, 20, "{n} sealed pid lines, not 20\n{}", o.show());
    }
    assert_ne!(run_dir_of(&runs[0]), run_dir_of(&runs[1]));
    for o in &runs {
        assert_run_gone(&run_dir_of(o));
    }
}

/// seal killed with SIGKILL while its run has a supervision server: the run's watch ends the
/// server and its spare with the run's other processes, and nothing is left.
#[test]
fn a_killed_seal_leaves_no_supervisor() {
    let bin = musl_world_or_skip!();
    // `_dir` bound: the temporary directory stays until the test ends.
    let Marked {
        mut child,
        run_dir,
        _dir,
        ..
    } = sealed_shell_marking(
        |dir, mark| {
            format!(
                "{PRINT_RUN_DIR} > {mark}.tmp; {bin} {d} > /dev/null; mv {mark}.tmp {mark}; \
                 sleep 60",
                bin = bin.display(),
                d = dir.display(),
            )
        },
        "the sealed shell never got past its static image",
    );
    let during = supervision_of(&run_dir);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!during.is_empty(), "no supervision server during the run");
    assert_run_gone(&run_dir);
}

/// A static image still running when seal is killed (SIGKILL) is ended with the run: it maps
/// no file of the run, so the run's watch finds it by the environment the exec gave it
/// (before, it went on running, unsupervised once its supervisor was gone).
#[test]
fn a_killed_seal_leaves_no_static_image_running() {
    if !have("musl-gcc") {
        skip!("musl-gcc not on PATH (Debian: musl-tools)");
    }
    let bin = build_musl_c("static_sleep");
    let Marked {
        mut child,
        run_dir,
        deadline,
        _dir,
    } = sealed_shell_marking(
        |_, mark| {
            format!(
                "{bin} & {PRINT_RUN_DIR} > {mark}.tmp; mv {mark}.tmp {mark}; wait",
                bin = bin.display(),
            )
        },
        "the sealed shell never wrote its mark",
    );
    // The image is running, under its supervisor (it may still be at its exec stop).
    let image = bin.to_string_lossy().into_owned();
    let mut running = images_of(&run_dir, &image);
    while running.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
        running = images_of(&run_dir, &image);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!running.is_empty(), "the static image never ran");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left = images_of(&run_dir, &image);
        if left.is_empty() {
            break;
        }
        if std::time::Instant::now() > deadline {
            for pid in &left {
                // SAFETY: kill(2) of a process this test's run started.
                unsafe { libc::kill(*pid, libc::SIGKILL) };
            }
            panic!("the static image went on running after seal was killed: pids {left:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_run_gone(&run_dir);
}

/// A sealed shell started by [`sealed_shell_marking`], past its mark.
struct Marked {
    /// seal, still running.
    child: std::process::Child,
    /// The run's directory, as the script printed it.
    run_dir: String,
    /// The end of the wait for the mark (the harness's time limit).
    deadline: std::time::Instant,
    /// The temporary directory the mark is in, removed when this is dropped.
    _dir: tempfile::TempDir,
}

/// Starts `sh -c SCRIPT` under seal (quiet, its output thrown away), `SCRIPT` made by `script`
/// from a temporary directory and the path of a mark file in it, and waits, within the
/// harness's time limit, for the script to write the mark (a [`PRINT_RUN_DIR`] line). Kills
/// seal and panics with `never` when no mark comes in time.
fn sealed_shell_marking(script: impl FnOnce(&Path, &str) -> String, never: &str) -> Marked {
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("mark");
    let script = script(dir.path(), &mark.display().to_string());
    let mut c = crate::util::seal(["-q", "--", "sh", "-c", &script]);
    c.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = c.spawn().unwrap();
    let deadline = std::time::Instant::now() + crate::util::TIMEOUT;
    let text = loop {
        if let Ok(t) = std::fs::read_to_string(&mark) {
            break t;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("{never}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let run_dir = text.trim().strip_prefix("run_dir=").unwrap().to_owned();
    Marked {
        child,
        run_dir,
        deadline,
        _dir: dir,
    }
}

/// Real pids of the processes running `exe` whose environment names run `run_dir`.
fn images_of(run_dir: &str, exe: &str) -> Vec<i32> {
    let needle = format!("LIBSEAL_RUN_DIR={run_dir}\0");
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let same = std::fs::read_link(e.path().join("exe")).is_ok_and(|p| p.to_str() == Some(exe));
        let environ = std::fs::read(e.path().join("environ")).unwrap_or_default();
        let state = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // A zombie has run its course.
        let zombie = state
            .rsplit(')')
            .next()
            .is_some_and(|t| t.trim_start().starts_with('Z'));
        if same
            && !zombie
            && environ
                .windows(needle.len())
                .any(|w| w == needle.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

/// A run whose server cannot be reached (here its socket's name is taken by a directory):
/// each static image gets a supervisor of its own, as before there were servers, and is
/// sealed all the same.
#[test]
fn without_a_server_each_static_image_gets_its_own_supervisor() {
    let bin = musl_world_or_skip!();
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "rd=$(cat /proc/$$/environ | tr '\\0' '\\n' | sed -n 's/^LIBSEAL_RUN_DIR=//p'); \
         mkdir \"$rd/{sock}\"; {bin} {d}; [ -d \"$rd/{sock}\" ] && echo no server",
        sock = seal_abi::supervised::SERVER_SOCKET,
        bin = bin.display(),
        d = dir.path().display(),
    );
    let o = run_seal(["--", "sh", "-c", &script]);
    o.ok();
    assert!(o.stdout.ends_with("no server\n"), "{}", o.show());
    // A child of the shell: a pid of its own, the shell's virtual pid as its parent.
    for line in SEALED[..3]
        .iter()
        .chain(&[" ppid 1000 host seal release 6.1.0-seal cpus 4"])
    {
        assert!(o.stdout.contains(line), "want {line:?}\n{}", o.show());
    }
}
