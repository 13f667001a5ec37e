//! A dynamically linked Go program (a cgo build) as the root command: its libseal asks the
//! run's supervision server for a supervisor before `main`, and the launcher has started that
//! server for it (`launcher/src/run/static_image/server.rs`, `fork_server`), a fork of
//! itself, where the root's libseal used to start one: a double fork and an exec of `seal`
//! on the root's start-up path.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::util::{have, seal};

/// `/proc/PID/FILE`, or empty.
fn proc_file(pid: u32, file: &str) -> Vec<u8> {
    std::fs::read(format!("/proc/{pid}/{file}")).unwrap_or_default()
}

/// The processes whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = String::from_utf8_lossy(&proc_file(pid, "stat")).into_owned();
        let after = stat.rsplit(')').next().unwrap_or("");
        if after.split_whitespace().nth(1) == Some(&parent.to_string()) {
            out.push(pid);
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_cgo_root_finds_the_runs_server_that_the_launcher_started() {
    if !have("go") {
        skip!("go not on PATH (Debian: golang-go)");
    }
    if !have("cc") {
        skip!("cc not on PATH: the cgo build");
    }
    let bin: PathBuf = crate::go_images::build_go("world", true);
    let mut c = seal(["-q", "--"]);
    c.arg(&bin)
        .env("WORLD_SLEEP", "500ms")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    let launcher = child.id();
    // The image (the launcher's child running `bin`) and its run directory.
    let deadline = Instant::now() + Duration::from_secs(20);
    let (image, run_dir) = loop {
        let found = children_of(launcher).into_iter().find_map(|pid| {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
            let environ = proc_file(pid, "environ");
            let dir = environ
                .split(|&c| c == 0)
                .find_map(|kv| kv.strip_prefix(b"LIBSEAL_RUN_DIR="))?;
            (exe == bin).then(|| (pid, String::from_utf8_lossy(dir).into_owned()))
        });
        if let Some(f) = found {
            break f;
        }
        assert!(Instant::now() < deadline, "the sealed Go program never ran");
        std::thread::sleep(Duration::from_millis(5));
    };
    // Its server: another child of the launcher, mapping the run's table; no process started
    // as `seal __static-server` for this run.
    let servers: Vec<u32> = children_of(launcher)
        .into_iter()
        .filter(|&p| p != image && contains(&proc_file(p, "maps"), run_dir.as_bytes()))
        .collect();
    let needle = format!("LIBSEAL_RUN_DIR={run_dir}\0");
    let started: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|&p| {
            contains(&proc_file(p, "cmdline"), b"__static-server")
                && contains(&proc_file(p, "environ"), needle.as_bytes())
        })
        .collect();
    let socket = Path::new(&run_dir).join("supervisor.sock").exists();
    let o = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(socket, "no server socket in {run_dir}");
    assert_eq!(
        servers.len(),
        1,
        "the launcher's forked server: {servers:?}"
    );
    assert!(
        started.is_empty(),
        "a server was started by exec: {started:?}"
    );
    // Sealed as ever: its clock and its pid.
    assert!(
        stdout.contains("now 2026-01-01T00:00:00Z 1767225600000000000\n"),
        "{stdout}"
    );
    assert!(stdout.contains("pid 1000 ppid 999 "), "{stdout}");
}

/// What a cgo root's libseal looks up in its executable (its runtime's random functions,
/// `crypto/rand`'s call) comes from the user's cache (`go_exe.rs`), which the launcher copies
/// into the run directory before the root starts (`keep_for_root`), where libseal reads it
/// (`shim/src/process/go_kept.rs`) instead of the executable's symbol table. A cache file
/// that says the random functions were not found leaves the next run's generator unsealed
/// (its census says `go-runtime-random`); without the file the launcher reads the executable
/// again, keeps it, and the run is sealed as the first was.
#[test]
fn a_cgo_roots_sites_come_from_the_users_cache_through_the_run_directory() {
    if !have("go") {
        skip!("go not on PATH (Debian: golang-go)");
    }
    if !have("cc") {
        skip!("cc not on PATH: the cgo build");
    }
    let bin = crate::go_images::build_go_with("entropy", "go_entropy_cgo_cached", true, &[]);
    let cache = tempfile::tempdir().unwrap();
    let run = || crate::go_images::census_cached(&bin, cache.path());
    let (first, unsealed) = run();
    assert!(!unsealed, "{first}");
    let (_, kept) = crate::go_images::kept_in(cache.path());
    assert_eq!(
        kept.len(),
        1,
        "the launcher keeps the root's file: {kept:?}"
    );
    // The first word's bit 2 says the random functions were found: cleared, the file says
    // they were not.
    let mut bytes = std::fs::read(&kept[0]).unwrap();
    assert_eq!(bytes[0] & 4, 4, "found in the executable");
    bytes[0] &= !4;
    std::fs::write(&kept[0], &bytes).unwrap();
    let (_, unsealed) = run();
    assert!(unsealed, "libseal did not read the cache's file");
    std::fs::remove_file(&kept[0]).unwrap();
    let (third, unsealed) = run();
    assert!(!unsealed);
    assert_eq!(third, first, "the program's output");
    assert!(kept[0].exists(), "kept again");
}
