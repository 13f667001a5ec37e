//! Family `cpu`: `rdtsc`/`rdtscp` read the logical clock and `cpuid` hides RDRAND/RDSEED
//! (fixtures/c/cpu.c), programs keep their own SIGSEGV handlers and still crash, children
//! started across exec run, gpg's key ids agree, a JVM runs, and `--unseal cpu` turns it off.
//! Skipped, visibly, where the machine cannot trap the instructions (then what is checked is
//! that the limit is said once, by `seal census` and `seal doctor`, and never by a plain run).

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::util::*;

fn fixture_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| build_c("cpu", &[])).clone()
}

/// Can this machine trap both instructions? (`cpuid_fault`; `PR_SET_TSC` works everywhere
/// the kernel has it.)
fn can_trap() -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.contains(" cpuid_fault"))
}

/// `(symbol, count)` of the census totals of family `cpu`.
fn cpu_totals(cmd: &[&str]) -> (Output, Vec<(String, u64)>) {
    census_totals(cmd, "cpu")
}

#[test]
fn rdtsc_and_cpuid_are_sealed_and_counted() {
    let bin = fixture_bin();
    let bin = bin.to_str().unwrap();
    if !can_trap() {
        // The machine's limit is said by census and doctor (machine_limits_are_said_once),
        // not on every run's stderr.
        run_sealed(&[bin]).ok().stderr_lacks("cpu-trap-unavailable");
        skip!("no cpuid_fault in /proc/cpuinfo: checked that runs stay quiet only");
    }
    let out = assert_sealed_stable(&[bin], 3);
    // 3 GHz nominal over the sealed monotonic clock (1 day + L + the thread's monotonic
    // ticks), one tick per read, taken before the read returns.
    assert_eq!(
        out,
        "rdtsc 259200000003000 259200000006000\nrdtscp 259200000009000 aux 0\n\
         rdrand 0 rdseed 0 apic 0\nhypervisor bit 0 leaf 0 0 0 0\n"
    );
    // Unsealed (bare, and with --unseal cpu) the counter moves between runs.
    assert_plain_runs_differ(bin, &[]);
    let a = run_seal(["--unseal", "cpu", "--", bin]);
    let b = run_seal(["--unseal", "cpu", "--", bin]);
    a.ok().stderr_has("not sealed (--unseal): cpu");
    assert_ne!(a.stdout, b.stdout, "{}", a.show());
    if std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.contains(" rdrand")) {
        a.stdout_has("rdrand 1");
    }
    let (out, totals) = cpu_totals(&[bin]);
    out.ok();
    let count = |s: &str| totals.iter().find(|t| t.0 == s).map_or(0, |t| t.1);
    assert_eq!(
        (count("rdtsc"), count("rdtscp"), count("cpuid")),
        (2, 1, 3),
        "{totals:?}"
    );
}

#[test]
fn programs_keep_their_sigsegv_handlers_and_still_crash() {
    let bin = fixture_bin();
    let bin = bin.to_str().unwrap();
    let out = assert_sealed_stable(&[bin, "chain"], 2);
    for line in [
        "previous handler is SIG_DFL: 1",
        "query shows mine: 1, with its full mask: 1",
        "syscall(rt_sigaction) shows mine: 1",
        "blocked SIGSEGV shows blocked: 1",
        "own faults caught: 3",
        "signal() returns mine: 1",
    ] {
        assert!(out.contains(line), "{line:?} missing in\n{out}");
    }
    if can_trap() {
        assert_has(&out, "every signal blocked: 2592000");
    }
    // SIG_DFL: the fault kills the program with SIGSEGV, as bare (seal exits 128 + 11).
    run_sealed(&[bin, "crash"]).code_is(139);
    assert_eq!(run_plain(bin, ["crash"]).signal, Some(11));
}

#[test]
fn a_handler_that_reads_the_counter_during_a_masked_wait_runs() {
    // ppoll, pselect and epoll_pwait install a mask for the wait that blocks SIGSEGV: the
    // trapped rdtsc in a handler would be a fault with SIGSEGV blocked, which the kernel kills.
    let bin = fixture_bin();
    let out = assert_sealed_stable(&[bin.to_str().unwrap(), "waitmask"], 2);
    for call in ["ppoll", "pselect", "epoll_pwait"] {
        let line = format!("{call}: EINTR, handler ran: 1");
        assert!(out.contains(&line), "{line:?} missing in\n{out}");
    }
}

#[test]
fn children_started_across_exec_run() {
    let bin = fixture_bin();
    let out = assert_sealed_stable(&[bin.to_str().unwrap(), "spawn"], 2);
    assert_eq!(out.matches("child ran").count(), 4, "{out}");
    assert_eq!(out.matches("status 0").count(), 4, "{out}");
}

/// `gpg --quick-gen-key` in a fresh home: its key id (libgcrypt mixes RDTSC and RDRAND into
/// its pool).
fn gpg_key_id(unseal: &[&str]) -> Output {
    let tmp = private_tmpdir();
    let script = "export GNUPGHOME=$(mktemp -d) && \
        gpg --batch --quiet --passphrase '' --quick-gen-key 'Seal <seal@example.org>' \
            ed25519 default never 2>/dev/null && \
        gpg --batch --with-colons --list-keys 2>/dev/null | grep '^pub' | cut -d: -f5; \
        gpgconf --kill gpg-agent 2>/dev/null; rm -rf \"$GNUPGHOME\"";
    let mut args = unseal.to_vec();
    args.extend(["--", "sh", "-c", script]);
    let mut cmd = seal(&args);
    cmd.env("TMPDIR", tmp.path());
    let out = run_timeout(cmd, TIMEOUT);
    assert_eq!(out.stdout.trim().len(), 16, "no key id\n{}", out.show());
    out
}

#[test]
fn gpg_key_ids_agree() {
    require_tools!("gpg", "gpgconf");
    if !can_trap() {
        skip!("no cpuid_fault in /proc/cpuinfo");
    }
    assert_runs_agree("gpg --quick-gen-key", 5, || gpg_key_id(&[]));
    let a = gpg_key_id(&["--unseal", "cpu"]);
    let b = gpg_key_id(&["--unseal", "cpu"]);
    assert_ne!(a.stdout, b.stdout, "{}", a.show());
}

#[test]
fn a_jvm_runs_with_its_null_checks_chained() {
    require_tools!("java", "javac");
    let classes = build_java("CpuNulls");
    let cp = classes.to_str().unwrap();
    let args = sealed_java(&[], cp, "CpuNulls");
    let first = assert_runs_agree("java CpuNulls", 2, || run_seal(&args));
    first.stdout_has("null checks caught: 1000");
    if can_trap() {
        let (out, totals) = cpu_totals(&["java", "-cp", cp, "CpuNulls"]);
        out.ok();
        let count = |s: &str| totals.iter().find(|t| t.0 == s).map_or(0, |t| t.1);
        assert!(count("cpuid") > 0, "{totals:?}");
        assert!(
            count("sigaction(SIGSEGV) (chained behind seal's)") > 0,
            "{totals:?}"
        );
    }
}

/// The machine's cpu limit is never on a plain run's stderr; `seal census` says it once (a
/// `machine` line in the table, a `machine` list in the JSON) and `seal doctor` reports the
/// cpuid trap `limited`. With cpuid faulting: none of that, and doctor says `ok`.
#[test]
fn machine_limits_are_said_once_by_census_and_doctor() {
    let bin = fixture_bin();
    let bin = bin.to_str().unwrap();
    // Two processes (a shell and the fixture), so "once" means something.
    let script = format!("{bin}; {bin}");
    run_sealed(&["sh", "-c", &script])
        .ok()
        .stderr_lacks("cpu-trap-unavailable")
        .stdout_lacks("cpu-trap-unavailable");
    let (out, census) = census_json(&["--", "sh", "-c", &script], TIMEOUT);
    out.ok().stdout_lacks("cpu-trap-unavailable");
    let machine = census["machine"].as_array().cloned().unwrap_or_default();
    let lines = out
        .stderr
        .lines()
        .filter(|l| l.contains("cpu-trap-unavailable"))
        .count();
    let doctor = run_timeout(seal(["doctor", "--json"]), TIMEOUT);
    doctor.ok();
    let report: serde_json::Value = serde_json::from_str(&doctor.stdout).unwrap();
    let cpuid = doctor_check(&report, "cpuid trap");
    if can_trap() {
        assert!(machine.is_empty(), "{census:#}");
        assert_eq!(lines, 0, "{}", out.show());
        assert_eq!(cpuid["status"], "ok", "{}", doctor.show());
        // With faulting the fixture's cpuid is sealed: counted in the census.
        assert!(
            census["totals"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["symbol"] == "cpuid"),
            "{census:#}"
        );
    } else {
        assert_eq!(machine.len(), 1, "{census:#}");
        assert_eq!(machine[0]["kind"], "cpu-trap-unavailable");
        assert!(
            machine[0]["detail"]
                .as_str()
                .unwrap()
                .contains("no cpuid_fault"),
            "{census:#}"
        );
        assert_eq!(lines, 1, "said once\n{}", out.show());
        out.stderr_has("machine: not sealed (cpu-trap-unavailable)");
        assert_eq!(cpuid["status"], "limited", "{}", doctor.show());
        assert_eq!(report["limited"], true);
    }
}
