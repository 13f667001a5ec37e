//! The tests' private cache directory in the temporary directory, and its cleaning.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The start of the name of each test run's cache directory in the temporary directory.
const CACHE_PREFIX: &str = "seal-e2e-cache-";

/// A private cache dir for the tests' extracted shim and run dirs (shared by all tests),
/// `seal-e2e-cache-PID` in the temporary directory, removed when the test binary exits. Each
/// test run used to leave its own there (~1 MB: a shim, kept Go sites): 909 of them after a
/// few days of runs on one machine. One a killed run left (no exit) is removed by the next.
pub fn cache_home() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    extern "C" fn remove() {
        if let Some(d) = DIR.get() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
    DIR.get_or_init(|| {
        let tmp = std::env::temp_dir();
        remove_left_caches(&tmp);
        let d = tmp.join(format!("{CACHE_PREFIX}{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        // SAFETY: registers a function of no arguments, run once at exit.
        unsafe { libc::atexit(remove) };
        d
    })
    .clone()
}

/// Removes the cache directories in `tmp` of test runs whose process is gone (ours only).
fn remove_left_caches(tmp: &Path) {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    for e in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(CACHE_PREFIX))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let ours = e.metadata().is_ok_and(|m| m.is_dir() && m.uid() == uid);
        // SAFETY: signal 0 checks only whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if ours && gone && pid > 0 {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
