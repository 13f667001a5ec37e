//! Dynamic programs that static images exec, and static images those exec in turn: a dynamic
//! program starts where its exec'ing process's clock stands (the supervisor leaves it in the
//! run table at the `execve`: the environment the static image passes on names its own start),
//! forked or exec'd in place, from a busybox shell or a Go program.

use crate::go_images::build_go;
use crate::static_pids::alike;
use crate::util::{have, run_timeout, seal, TIMEOUT};

/// `seal -q -- ARGS`, its output.
fn sealed(args: &[&str]) -> crate::util::Output {
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
