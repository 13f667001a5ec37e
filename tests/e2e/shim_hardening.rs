//! End-to-end tests: the shim in hostile or starved surroundings. A umask that would weaken
//! the run table holding the census, a memory file system that fills up during the run,
//! signal handlers that race the hooks, clocks pushed to their limit, and virtual tids of
//! many threads.
use std::path::Path;

use crate::util::*;

/// A shell script that finds the run table (from its own mapping of it), prints its mode,
/// then starts one child that prints its pid.
const PLANT: &str = r#"
t=$(grep -m1 '/run\.table' /proc/self/maps | awk '{print $NF}')
stat -c %a "$t"
sh -c 'echo $$'
"#;

#[test]
fn the_run_table_that_holds_the_census_is_0600_whatever_the_umask() {
    // Census slots live in the run table, created by seal before the command starts: no
    // process of the run creates a census file any more, so none can be redirected through
    // a link planted under its name. The table itself is 0600 under a umask that would make
    // files 0400, and the run is unchanged by it.
    let first = run_timeout(seal(["--", "sh", "-c", PLANT]), TIMEOUT);
    first.ok();
    let mut cmd = command("sh");
    cmd.args(["-c", r#"umask 0277; exec "$SEAL" -- sh -c "$PLANT""#])
        .env("SEAL", seal_bin())
        .env("PLANT", PLANT);
    let second = run_timeout(cmd, TIMEOUT);
    // The run table's mode comes first.
    second
        .ok()
        .stdout_starts_with("600\n")
        .same_stdout_as(&first);
}

/// Runs `script` with `sh` in a private mount namespace (we must be root, or allowed user
/// namespaces); `None` (after a visible skip) when namespaces are not available here.
fn in_private_mounts(script: &str, envs: &[(&str, &Path)]) -> Option<Output> {
    if !have("unshare") {
        report_skip(module_path!(), false, "no unshare(1)");
        return None;
    }
    let probe = run_plain("unshare", ["-Urm", "true"]);
    if probe.code != Some(0) {
        report_skip(
            module_path!(),
            false,
            &format!("cannot unshare a mount namespace: {}", probe.stderr),
        );
        return None;
    }
    let mut cmd = command("unshare");
    cmd.args(["-Urm", "sh", "-c", script]);
    cmd.env("SEAL", seal_bin());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    Some(run_timeout(cmd, TIMEOUT))
}

#[test]
fn a_full_tmpfs_is_a_loud_error_at_census_slot_backing_never_a_sigbus() {
    // The launcher only puts its run dir on a memory file system with 512 MiB free, so the
    // run dir lives on a 520 MiB tmpfs that the sealed script itself fills up; every process
    // it starts afterwards must back its census slot on the full file system.
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
set -e
mount -t tmpfs -o size=520m tmpfs "$MNT"
export XDG_RUNTIME_DIR="$MNT"
"$SEAL" -- sh -c '
  dd if=/dev/zero of="$XDG_RUNTIME_DIR/fill" bs=1M 2>/dev/null || echo "dd failed"
  sh -c "echo child ok"
  date +%Y
  rm -f "$XDG_RUNTIME_DIR/fill"
  echo done'
"#;
    let Some(out) = in_private_mounts(script, &[("MNT", dir.path())]) else {
        return;
    };
    assert_eq!(out.code, Some(0), "{}", out.show());
    assert_eq!(
        out.stdout,
        "dd failed\nchild ok\n2026\ndone\n",
        "{}",
        out.show()
    );
    assert!(
        out.stderr
            .contains("libseal: cannot reserve the census slot"),
        "the full file system must be reported\n{}",
        out.show()
    );
}

#[test]
fn clocks_saturate_at_the_cap_instead_of_wrapping() {
    // The launcher refuses settings that could overflow, so the fixture itself moves the
    // run's clocks (seal time's advance id) to just below the cap, then reads with 1 s ticks.
    let exe = build_c("clock_cap", &[]);
    let out = assert_runs_agree("clock_cap", 2, || {
        run_seal(["--tick", "1s", "--", exe.to_str().unwrap()])
    });
    let cap = "9223372036.854775807";
    let rows: Vec<(&str, &str)> = out
        .stdout
        .lines()
        .map(|l| l.split_once(' ').unwrap())
        .collect();
    assert_eq!(rows.len(), 5, "{}", out.show());
    let secs = |v: &str| v.split('.').next().unwrap().parse::<i64>().unwrap();
    for w in rows.windows(2) {
        assert!(
            secs(w[1].0) > secs(w[0].0),
            "monotonic went back\n{}",
            out.show()
        );
        assert!(
            w[1].1 >= w[0].1 || w[1].1 == cap,
            "realtime went back\n{}",
            out.show()
        );
    }
    assert!(
        rows.iter().all(|(_, r)| !r.starts_with('-')),
        "{}",
        out.show()
    );
    assert_eq!(
        rows[4].1,
        cap,
        "realtime did not stop at the cap\n{}",
        out.show()
    );
    assert_ne!(rows[0].1, cap, "started at the cap already\n{}", out.show());
}

#[test]
fn a_thousand_concurrent_threads_get_the_same_virtual_tids_every_run() {
    let exe = build_c("many_threads", &[]);
    let out = assert_sealed_stable(&[exe.to_str().unwrap()], 10);
    let tids: std::collections::BTreeSet<&str> = out.lines().collect();
    assert_eq!(tids.len(), 1000, "every thread its own virtual tid\n{out}");
}

/// glibc's exported aliases (`__getpid`, `__gettimeofday`), called or found with `dlsym`,
/// give the sealed values, counted as the functions they alias.
#[test]
fn glibc_aliases_of_sealed_functions_are_sealed() {
    let want = "__getpid 1000\n__gettimeofday 1767225600\ndlsym __getpid 1000\n";
    assert_dl_fixture("aliases", want, "pid", "getpid");
}

/// Builds fixtures/c/`name` with `-ldl`, asserts that it prints `want` on two sealed runs and
/// that the census counts `symbol` twice in `family`.
fn assert_dl_fixture(name: &str, want: &str, family: &str, symbol: &str) {
    let bin = build_c(name, &["-ldl"]);
    assert_eq!(assert_sealed_stable(&[bin.to_str().unwrap()], 2), want);
    let (_, totals) = census_totals(&[bin.to_str().unwrap()], family);
    assert!(
        totals.iter().any(|(s, n)| s == symbol && *n == 2),
        "{totals:?}"
    );
}

/// A lookup on a handle to libc (`dlsym(dlopen("libc.so.6"), …)`, as ctypes and plugin
/// loaders do) finds the sealed functions, as a direct call binds; names seal does not
/// interpose, and names nobody has, are glibc's answer.
#[test]
fn a_handle_to_libc_resolves_the_sealed_functions() {
    let want = "handle time 1767225600\ndirect time 1767225600\nhandle clock_gettime 1767225600\n\
                handle gettimeofday 1767225600\nhandle getpid 1000\ndirect getpid 1000\n\
                missing null\nstrlen found\n";
    assert_dl_fixture("libchandle", want, "time", "time");
    // Python's ctypes on libc's handle, and on the program's (`CDLL(None)`).
    let code = "import ctypes\n\
                print(ctypes.CDLL('libc.so.6').time(None), ctypes.CDLL(None).time(None))\n\
                print(ctypes.CDLL('libc.so.6').getpid())";
    let out = assert_sealed_stable(&["python3", "-c", code], 2);
    assert_eq!(out, "1767225600 1767225600\n1000\n");
}
