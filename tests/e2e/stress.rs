//! End-to-end stress tests: many threads, processes and signals at once, each bounded by a
//! harness timeout and checked exactly (census counts, identical output run after run). The
//! whole module is sized to finish in about a minute on two loaded cores.
use std::time::Duration;

use crate::util::*;

#[test]
fn signal_handlers_and_the_thread_they_interrupt_never_share_a_clock_or_random_value() {
    let exe = build_c("signal_storm", &[]);
    for _ in 0..2 {
        let out = run_timeout(seal(["--", exe.to_str().unwrap()]), Duration::from_secs(60));
        out.ok();
        assert_eq!(
            out.stdout,
            "clock_dups=0 clock_backwards=0 random_dups=0\n",
            "{}",
            out.show()
        );
    }
}

/// Runs `cmd` inside a fresh cgroup-v1 pids group limited to `max` tasks; `None` (after a
/// visible skip) when no writable pids controller is mounted here.
fn under_pids_limit(test: &str, max: u32, cmd: &[&str]) -> Option<Output> {
    let base = std::path::Path::new("/sys/fs/cgroup/pids");
    let group = base.join(format!("seal-e2e-{}-{test}", std::process::id()));
    if std::fs::create_dir(&group).is_err() {
        skip(
            test,
            "no writable cgroup pids controller at /sys/fs/cgroup/pids",
        );
        return None;
    }
    std::fs::write(group.join("pids.max"), max.to_string()).unwrap();
    let mut c = command("sh");
    c.args([
        "-c",
        r#"echo $$ > "$GROUP/cgroup.procs" && exec "$@""#,
        "sh",
    ])
    .args(cmd)
    .env("GROUP", &group);
    let out = run_timeout(c, Duration::from_secs(60));
    for _ in 0..100 {
        if std::fs::remove_dir(&group).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(out)
}

#[test]
fn urandom_reads_are_never_short_under_a_process_limit() {
    let exe = build_c("urandom_reads", &[]);
    let seal = seal_bin();
    let args = [seal.to_str().unwrap(), "--", exe.to_str().unwrap()];
    let free = run_timeout(seal(&args[1..]), Duration::from_secs(60));
    free.ok();
    let Some(limited) = under_pids_limit("urandom_pids", 100, &args) else {
        return;
    };
    limited.ok();
    assert!(
        free.stdout.starts_with("open_failures=0 short_reads=0 "),
        "{}",
        free.show()
    );
    assert_eq!(limited.stdout, free.stdout, "{}", limited.show());
}
