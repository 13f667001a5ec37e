//! End-to-end tests: the shim in hostile or starved surroundings. Census files that another
//! user tried to redirect through a planted link, a umask that would weaken them, a memory
//! file system that fills up during the run, signal handlers that race the hooks, clocks
//! pushed to their limit, and virtual tids of many threads.
use std::path::Path;
use std::time::Duration;

use crate::util::*;

/// A shell script that finds the run dir (from its own census mapping), optionally plants
/// `$TARGET.0.census` as a symbolic link to `$VICTIM`, then starts one child that prints its
/// pid. Identical process creation whether or not it plants, so the child's virtual pid is
/// the same in both runs.
const PLANT: &str = r#"
d=$(grep -m1 '\.census' /proc/self/maps | awk '{print $NF}'); d=${d%/*}
ln -s "${VICTIM:-/nonexistent}" "$d/${TARGET:-unused}${TARGET:+.0.census}"
stat -c %a "$(grep -m1 '\.census' /proc/self/maps | awk '{print $NF}')"
sh -c 'echo $$'
"#;

#[test]
fn census_files_never_follow_a_planted_link_and_are_0600_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    // Run 1: learn the child's virtual pid (census file name `<vpid>.0.census`).
    let first = run_timeout(seal(["--", "sh", "-c", PLANT]), TIMEOUT);
    first.ok();
    let lines: Vec<&str> = first.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", first.show());
    let child_vpid = lines[1];
    // Run 2: plant the link under that name, under a umask that would make files 0400.
    let mut cmd = command("sh");
    cmd.args(["-c", r#"umask 0277; exec "$SEAL" -- sh -c "$PLANT""#])
        .env("SEAL", seal_bin())
        .env("PLANT", PLANT)
        .env("TARGET", child_vpid)
        .env("VICTIM", &victim);
    let second = run_timeout(cmd, TIMEOUT);
    second.ok();
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"precious\n",
        "a census file was written through a planted link\n{}",
        second.show()
    );
    assert_eq!(
        second.stdout,
        format!("600\n{child_vpid}\n"),
        "census file mode or child pid\n{}",
        second.show()
    );
}
