//! `seal doctor`: the machine's report (human and `--json`), one line per check with `ok` or
//! `limited`, exit 0 on a limited machine, 1 with `--strict`; checked against what the test
//! itself reads of the machine (`/proc/cpuinfo`, the cache directory).

use crate::util::*;

const CHECKS: [&str; 7] = [
    "platform",
    "rdtsc trap",
    "cpuid trap",
    "static binaries",
    "host namespace",
    "clock capability",
    "shim cache",
];

fn has_cpuid_fault() -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.contains(" cpuid_fault"))
}

#[test]
fn doctor_json_reports_every_check_and_agrees_with_the_machine() {
    let out = run_seal(["doctor", "--json"]);
    out.ok();
    assert_eq!(out.stderr, "", "{}", out.show());
    let r: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(r["version"], 1);
    let checks = r["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, CHECKS);
    for c in checks {
        assert!(c["status"] == "ok" || c["status"] == "limited", "{c:#}");
        assert!(!c["meaning"].as_str().unwrap().is_empty(), "{c:#}");
    }
    let limited = checks.iter().any(|c| c["status"] == "limited");
    assert_eq!(r["limited"], limited);
    let get = |n: &str| checks.iter().find(|c| c["name"] == n).unwrap();
    // The cpuid trap follows /proc/cpuinfo: limited without the flag; with it, the kernel's
    // answer (ok on a normal kernel).
    if has_cpuid_fault() {
        assert_eq!(get("cpuid trap")["status"], "ok", "{}", out.show());
    } else {
        assert_eq!(get("cpuid trap")["status"], "limited", "{}", out.show());
        assert!(r["limited"].as_bool().unwrap());
    }
    // The static check says what a static command then gets: supervised where both halves
    // work, said unsealed where either is refused.
    if let Some(busybox) = crate::static_images::busybox() {
        let run = run_sealed(&[busybox, "true"]);
        run.ok();
        let (status, said) = match get("static binaries")["status"] == "ok" {
            true => ("ok", "partly sealed (static-binary-supervised)"),
            false => ("limited", "not sealed (static-binary)"),
        };
        assert!(
            run.stderr.contains(said),
            "{status}\n{}\n{}",
            out.show(),
            run.show()
        );
    }
    // The platform under test is the one seal is built for.
    assert_eq!(get("platform")["status"], "ok");
    assert!(get("platform")["found"]
        .as_str()
        .unwrap()
        .starts_with("x86_64, glibc "));
    // The shim cache is the tests' private one.
    let cache = cache_home().join("seal");
    assert_eq!(get("shim cache")["status"], "ok");
    assert_eq!(get("shim cache")["found"], cache.to_str().unwrap());
}

#[test]
fn doctor_prints_one_line_per_check_and_limited_is_not_an_error() {
    let out = run_seal(["doctor"]);
    out.ok();
    assert!(out.stdout.starts_with("seal doctor: "), "{}", out.show());
    for name in CHECKS {
        let rows: Vec<&str> = out
            .stdout
            .lines()
            .filter(|l| {
                (l.starts_with("ok ") || l.starts_with("limited "))
                    && l.split("  ").map(str::trim).any(|w| w == name)
            })
            .collect();
        assert_eq!(rows.len(), 1, "{name}\n{}", out.show());
    }
    let limited = out.stdout.lines().any(|l| l.starts_with("limited "));
    assert_eq!(
        out.stdout.lines().next().unwrap().contains("limited"),
        limited,
        "{}",
        out.show()
    );
    // --strict: 1 exactly when a check is limited.
    let strict = run_seal(["doctor", "--strict"]);
    strict.code_is(if limited { 1 } else { 0 });
    assert_eq!(strict.stdout, out.stdout);
}

#[test]
fn doctor_names_an_unsafe_shim_cache_as_limited() {
    let dir = tempfile::tempdir().unwrap();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut cmd = seal(["doctor", "--json"]);
    cmd.env("XDG_CACHE_HOME", &open);
    let out = run_timeout(cmd, TIMEOUT);
    out.ok();
    let r: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let cache = doctor_check(&r, "shim cache");
    assert_eq!(cache["status"], "limited", "{}", out.show());
    assert!(
        cache["found"]
            .as_str()
            .unwrap()
            .contains("writable by others"),
        "{}",
        out.show()
    );
    assert_eq!(r["limited"], true);
}

/// Under a tracer that follows forks (`strace -f`), seal's supervisor cannot trace a static
/// image: doctor says the static check is limited because ptrace is refused, and a static
/// command is then said unsealed, not silently run as if sealed.
#[test]
fn doctor_under_strace_names_ptrace_and_a_static_command_is_said_unsealed() {
    require_tools!("strace");
    let Some(busybox) = crate::static_images::busybox() else {
        skip!("no busybox (Debian: busybox-static)");
    };
    let traced = |args: &[&str]| {
        let mut c = command("strace");
        c.args(["-f", "-o", "/dev/null"]).arg(seal_bin()).args(args);
        run_timeout(c, TIMEOUT)
    };
    let out = traced(&["doctor", "--json"]);
    out.ok();
    let r: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let c = (r["checks"].as_array().unwrap().iter())
        .find(|c| c["name"] == "static binaries")
        .unwrap();
    assert_eq!(c["status"], "limited", "{}", out.show());
    assert!(
        c["found"].as_str().unwrap().starts_with("ptrace refused"),
        "{}",
        out.show()
    );
    let run = traced(&["--", busybox, "true"]);
    run.ok();
    assert!(
        run.stderr.contains("not sealed (static-binary)"),
        "{}",
        run.show()
    );
}
