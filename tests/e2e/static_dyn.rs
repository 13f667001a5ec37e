//! Dynamic programs that static images exec, and static images those exec in turn: a dynamic
//! program starts where its exec'ing process's clock stands (the supervisor leaves it in the
//! run table at the `execve`: the environment the static image passes on names its own start),
//! forked or exec'd in place, from a busybox shell or a Go program.

use crate::go_images::build_go;
use crate::static_pids::alike;
use crate::util::{have, run_timeout, seal, TIMEOUT};

/// `seal -q -- ARGS`, its output.
pub(crate) fn sealed(args: &[&str]) -> crate::util::Output {
    let mut all = vec!["-q", "--"];
    all.extend_from_slice(args);
    run_timeout(seal(all), TIMEOUT)
}

/// A busybox shell's `sleep 1; /bin/date` prints the epoch + 1 s, as bash's does, for the
/// forked command and for one exec'd in place (`exec /bin/date`, and a script whose only
/// command is that), 5 runs alike. The old build printed the epoch: the dynamic `date` started
/// from the environment the shell was given, at the shell's own start.
#[test]
fn a_dynamic_program_a_static_shell_runs_after_a_sleep_starts_a_second_on() {
    let Some(busybox) = crate::static_images::busybox() else {
        skip!("no busybox (Debian: busybox-static)");
    };
    const DATE: &str = "/bin/date -u +%FT%T";
    for script in [
        format!("sleep 1; {DATE}; exec {DATE}"),
        format!("sleep 1; exec {DATE}"),
    ] {
        let o = alike(5, || sealed(&[busybox, "sh", "-c", &script]));
        let lines = script.matches(DATE).count();
        assert_eq!(
            o.stdout,
            "2026-01-01T00:00:01\n".repeat(lines),
            "{script}\n{}",
            o.show()
        );
    }
}

/// A static Go program that sleeps and then runs a dynamic `date` (os/exec: a fork that
/// execs it; or `syscall.Exec` in place) gets the date its own clock shows after the sleep, 3
/// runs alike. The old build's child printed the epoch.
#[test]
fn a_dynamic_child_of_a_go_program_starts_where_the_go_programs_clock_stands() {
    if !have("go") {
        skip!("go not on PATH (Debian: golang-go)");
    }
    let bin = build_go("sleepexec", false);
    let bin = bin.to_str().unwrap();
    for (args, want) in [
        (
            vec!["1s", "/bin/date", "-u", "+%FT%T"],
            "2026-01-01T00:00:01",
        ),
        (
            vec!["1500ms", "-exec", "/bin/date", "-u", "+%FT%T.%N"],
            "2026-01-01T00:00:01.500000000",
        ),
    ] {
        let mut all = vec![bin];
        all.extend_from_slice(&args);
        let o = alike(3, || sealed(&all));
        assert_eq!(
            o.stdout,
            format!("parent 2026-01-01T00:00:01Z\n{want}\n"),
            "{args:?}\n{}",
            o.show()
        );
    }
}

/// static → dynamic → static: a busybox shell runs `/bin/sh`, which runs busybox again. The
/// grandchild is sealed by the first image's supervisor (the shell carries its filter, so no
/// supervisor of its own could be installed): its `date` shows the shell's clock after its
/// `sleep 1`, its shell's `$$` and `$PPID` are virtual, 5 runs alike, and the census lists it
/// under the dynamic shell's virtual pid, reading its clock from its page, with no `not
/// sealed` line. The old build ran it unsealed (the real date, `not sealed (static-binary)`).
#[test]
fn a_static_image_a_dynamic_shell_of_a_static_shell_runs_is_sealed() {
    const PAGE: &str = seal_abi::supervised::clock_page::MODULE_NAME;
    let Some(busybox) = crate::static_images::busybox() else {
        skip!("no busybox (Debian: busybox-static)");
    };
    let inner = format!(
        "sleep 1; {busybox} date -u +%FT%T; {busybox} sh -c 'echo \\$\\$ \\$PPID'; echo \\$\\$; true"
    );
    let script = format!("/bin/sh -c \"{inner}\"; true");
    let o = alike(5, || {
        let args = ["--", busybox, "sh", "-c", &script];
        let (o, v) = crate::util::census_json(&args, TIMEOUT);
        o.ok();
        let procs = v["processes"].as_array().unwrap();
        let unsealed = procs.iter().flat_map(|p| p["unsealed"].as_array().unwrap());
        for u in unsealed {
            assert_eq!(u["kind"], "static-binary-supervised", "{v:#}");
        }
        // The dynamic shell's vpid: the last line.
        let sh: i64 = o.stdout.lines().last().unwrap().parse().unwrap();
        // Its `date`, reading the clock from its page.
        let date = (procs.iter())
            .find(|p| p["parent_vpid"] == sh && p["argv"][1] == "date")
            .unwrap_or_else(|| panic!("no grandchild\n{v:#}"));
        let paged = (date["calls"].as_array().unwrap().iter())
            .flat_map(|c| c["callers"].as_array().unwrap().iter())
            .any(|c| c["object"] == PAGE);
        assert!(paged, "{v:#}");
        o
    });
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines[0], "2026-01-01T00:00:01", "{}", o.show());
    let ids: Vec<i64> = lines[1].split(' ').map(|w| w.parse().unwrap()).collect();
    assert_eq!(ids[1].to_string(), lines[2], "{}", o.show());
    assert!(
        ids.iter().all(|&v| (1000..32768).contains(&v)),
        "{}",
        o.show()
    );
}

/// A static Go image that a static Go program's child execs (os/exec) gets the in-image
/// `crypto/rand` window the first image gets: its 12,001 reads are all counted at the call
/// `GetRandom` makes (the window's code counts them there), none at `Syscall6` (where a read
/// served by notification is counted), and 3 runs print the same values. The old build served
/// every read of the child by notification (all 12,001 at `Syscall6`).
#[test]
fn a_go_child_of_a_static_go_program_reads_crypto_rand_in_its_image() {
    if !have("go") {
        skip!("go not on PATH (Debian: golang-go)");
    }
    let parent = build_go("runchild", false);
    let child = build_go("entropy", false);
    let (parent, child) = (parent.to_str().unwrap(), child.to_str().unwrap());
    alike(3, || {
        let (o, v) = crate::util::census_json(&["--", parent, child], TIMEOUT);
        o.ok();
        let p = crate::go_images::exec_image(&v, "go_entropy_static");
        let callers: Vec<(String, u64)> = (p["calls"].as_array().unwrap().iter())
            .filter(|c| c["symbol"] == "getrandom")
            .flat_map(|c| c["callers"].as_array().unwrap().iter())
            .map(|c| {
                let at = c["symbol"].as_str().unwrap_or("?").to_string();
                (at, c["count"].as_u64().unwrap())
            })
            .collect();
        let in_image: u64 = (callers.iter())
            .filter(|(at, _)| at.ends_with("unix.GetRandom"))
            .map(|c| c.1)
            .sum();
        assert_eq!(in_image, 12_001, "{callers:?}\n{v:#}");
        assert_eq!(callers.len(), 1, "{callers:?}");
        o
    });
}

/// A nested seal inside a busybox shell: the inner run's dynamic shell carries the outer
/// supervisor's filter, but its libseal names its own run directory when it asks, so the outer
/// supervisor does not take its static image (whose values would mix the two runs'): the inner
/// libseal reports it `not sealed (static-binary)`, as before. A guard: the old build did the
/// same (its libseal never asked).
#[test]
fn a_nested_seals_static_image_is_not_taken_by_the_outer_supervisor() {
    let Some(busybox) = crate::static_images::busybox() else {
        skip!("no busybox (Debian: busybox-static)");
    };
    let inner = format!(
        "{} -- /bin/sh -c '{busybox} date -u +%Y; true'; true",
        crate::util::seal_bin().display()
    );
    let o = run_timeout(seal(["--", busybox, "sh", "-c", &inner]), TIMEOUT);
    o.ok();
    assert!(
        o.stderr
            .contains(&format!("not sealed (static-binary): {busybox}")),
        "{}",
        o.show()
    );
}

/// A dynamic program built without PIE (its code at 0x401000, inside a static image's text
/// range) that a busybox shell runs, forked and exec'd in place: its raw `getpid` is its real
/// pid, not answered by the supervisor as the image's. The old build answered it with a
/// virtual pid (`no`), which broke a nested seal in a busybox shell (its launcher, built so,
/// gave its root a virtual pid as its own real one: exit 125).
#[test]
fn a_non_pie_dynamic_program_a_static_shell_runs_is_not_taken_for_the_image() {
    let Some(busybox) = crate::static_images::busybox() else {
        skip!("no busybox (Debian: busybox-static)");
    };
    let bin = crate::util::build_c("rawpid_nopie", &["-no-pie"]);
    let bin = bin.to_str().unwrap();
    let o = sealed(&[busybox, "sh", "-c", &format!("{bin}; exec {bin}")]);
    assert_eq!(
        o.stdout,
        "raw getpid is the real pid: yes\n".repeat(2),
        "{}",
        o.show()
    );
    // And the nested seal it broke: its root runs, with its own first virtual pid.
    let inner = format!(
        "{} -q -- /bin/sh -c 'echo $$'",
        crate::util::seal_bin().display()
    );
    let o = sealed(&[busybox, "sh", "-c", &inner]);
    assert_eq!(o.stdout, "1000\n", "{}", o.show());
}

/// A child's sleeps reach the parent that reaps it across the line between static images and
/// libseal's processes, as they do between two dynamic ones (`sleep 1; date` in bash): a
/// busybox shell reaping a dynamic `sleep`, and bash reaping busybox's, 3 runs alike. The old
/// build printed `00:00:00` for both: the supervisor neither took in a dynamic child's wait
/// clock nor kept one for its images.
#[test]
fn a_childs_sleep_reaches_its_parent_between_static_and_dynamic_processes() {
    let Some(busybox) = crate::static_images::busybox() else {
        skip!("no busybox (Debian: busybox-static)");
    };
    let static_parent = format!("/bin/sleep 1; {busybox} date -u +%T; date -u +%T");
    let o = alike(3, || sealed(&[busybox, "sh", "-c", &static_parent]));
    assert_eq!(o.stdout, "00:00:01\n00:00:01\n", "{}", o.show());
    let dynamic_parent = format!("{busybox} sleep 1; /bin/date -u +%T.%N");
    let o = alike(3, || sealed(&["/bin/bash", "-c", &dynamic_parent]));
    assert!(o.stdout.starts_with("00:00:01.0"), "{}", o.show());
}
