//! Family `machine`: CPU count and affinity, the kernel's release, version and machine, and
//! memory are the run's fixed values (fixtures/c/machine.c calls every entry point and reads
//! every file; `nproc`, Python and Node ask their own ways), `--cpus` changes the count,
//! `--unseal machine` gives the machine's, and a sealed output is the same under
//! `taskset -c 0` as bare: the point is a golden that travels to another machine.

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::util::*;

fn fixture_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| build_c("machine", &[])).clone()
}

/// What the fixture prints from its calls (the files follow), sealed with `cpus` CPUs.
fn calls_text(cpus: u32) -> String {
    let list = (0..cpus)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mask = format!("{:#x}", (1u64 << cpus) - 1);
    format!(
        "sched_getaffinity r=0\n\
         sched_getaffinity count={cpus} cpus={list}\n\
         sched_getaffinity(8 bytes) r=0 mask={mask}\n\
         sched_getaffinity(4 bytes) r=-1 Invalid argument\n\
         sched_getaffinity(getpid) r=0 count={cpus}\n\
         sched_getaffinity(no such pid) r=-1 No such process\n\
         syscall(SYS_sched_getaffinity) r=8 mask={mask} next=0xffffffffffffffff\n\
         pthread_getaffinity_np r=0\n\
         pthread_getaffinity_np count={cpus} cpus={list}\n\
         get_nprocs {cpus}\n\
         get_nprocs_conf {cpus}\n\
         sysconf(_SC_NPROCESSORS_ONLN) {cpus}\n\
         sysconf(_SC_NPROCESSORS_CONF) {cpus}\n\
         sysconf(_SC_PHYS_PAGES) 2097152\n\
         sysconf(_SC_AVPHYS_PAGES) 1048576\n\
         sysconf(_SC_PAGESIZE) 4096\n\
         get_phys_pages 2097152\n\
         get_avphys_pages 1048576\n\
         sysinfo r=0 totalram=8589934592 freeram=4294967296 sharedram=0 bufferram=0 \
         totalswap=0 freeswap=0 procs=1 loads=0,0,0 mem_unit=1 uptime=86400\n\
         syscall(SYS_sysinfo) r=0 totalram=8589934592 mem_unit=1\n\
         uname r=0 release=6.1.0-seal version=#1 SMP seal machine=x86_64 sysname=Linux\n\
         syscall(SYS_uname) r=0 release=6.1.0-seal version=#1 SMP seal machine=x86_64 \
         nodename=seal\n"
    )
}

/// The lines of `out` that start with `prefix`.
fn lines_with<'a>(out: &'a str, prefix: &str) -> Vec<&'a str> {
    out.lines().filter(|l| l.starts_with(prefix)).collect()
}

/// `taskset -c 0 seal ARGS`: the run pinned to one CPU.
fn pinned_seal(args: &[&str]) -> Output {
    let mut c = command("taskset");
    c.args(["-c", "0"]).arg(seal_bin()).args(args);
    run_timeout(c, TIMEOUT)
}

#[test]
fn c_calls_and_files_show_the_sealed_machine() {
    let bin = fixture_bin();
    let bin = bin.to_str().unwrap();
    let out = assert_sealed_stable(&[bin], 3);
    assert!(out.starts_with(&calls_text(4)), "{out}");
    for want in [
        "/sys/devices/system/cpu/online| 0-3\n",
        "/sys/devices/system/cpu/possible| 0-3\n",
        "/sys/devices/system/cpu/present| 0-3\n",
        "/sys/devices/system/cpu/offline| \n",
        "/proc/sys/kernel/osrelease| 6.1.0-seal\n",
        "/proc/sys/kernel/version| #1 SMP seal\n",
        "/proc/version| Linux version 6.1.0-seal (seal@seal) (gcc, GNU ld) #1 SMP seal\n",
        "/proc/meminfo| MemTotal:        8388608 kB\n\
         /proc/meminfo| MemFree:         4194304 kB\n\
         /proc/meminfo| MemAvailable:    6291456 kB\n",
        "/proc/meminfo lines 23\n",
        "/proc/stat| cpu  0 0 0 34560000 0 0 0 0 0 0\n\
         /proc/stat| cpu0 0 0 0 8640000 0 0 0 0 0 0\n",
        "/proc/stat| cpu3 0 0 0 8640000 0 0 0 0 0 0\n/proc/stat| intr 0\n",
        "/proc/stat| btime 1767139200\n",
        "/proc/stat lines 12\n",
        "/proc/cpuinfo| processor\t: 3\n/proc/cpuinfo| cpu MHz\t\t: 2000.000\n",
        "/proc/cpuinfo| siblings\t: 4\n",
        "/proc/cpuinfo| bogomips\t: 4000.00\n",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    assert_eq!(
        lines_with(&out, "/proc/cpuinfo| processor").len(),
        4,
        "{out}"
    );
    let block = out
        .lines()
        .filter(|l| l.starts_with("/proc/cpuinfo|"))
        .count()
        / 4;
    assert!(block >= 2, "{out}");

    // --cpus 2: every count, mask, list and file follows.
    let two = run_seal(["--cpus", "2", "--", bin]);
    two.ok();
    assert!(two.stdout.starts_with(&calls_text(2)), "{}", two.show());
    two.stdout_has("/sys/devices/system/cpu/online| 0-1\n")
        .stdout_has("/proc/stat lines 10\n")
        .stdout_lacks("/proc/cpuinfo| processor\t: 2\n");
    let one = run_seal(["--cpus", "1", "--", bin]);
    one.ok()
        .stdout_has("get_nprocs 1\n")
        .stdout_has("/sys/devices/system/cpu/online| 0\n");

    // A golden travels: pinned to one CPU, the sealed output is byte for byte the same.
    if have("taskset") {
        let pinned = pinned_seal(&["--", bin]);
        pinned.ok();
        assert_eq!(pinned.stdout, out, "{}", pinned.show());
    } else {
        skip_part!("taskset not on PATH: the pinned run");
    }
}

#[test]
fn unsealed_machine_gives_the_machines_values() {
    let bin = fixture_bin();
    let bin = bin.to_str().unwrap();
    let bare = run_plain(bin, [] as [&str; 0]);
    bare.ok();
    let unsealed = run_seal(["--unseal", "machine", "--", bin]);
    unsealed.ok().stderr_has("not sealed (--unseal): machine");
    for key in [
        "sched_getaffinity count=",
        "pthread_getaffinity_np count=",
        "get_nprocs ",
        "get_nprocs_conf ",
        "sysconf(_SC_NPROCESSORS_ONLN) ",
        "sysconf(_SC_PHYS_PAGES) ",
        "uname r=0 ",
        "/sys/devices/system/cpu/online|",
        "/proc/sys/kernel/osrelease|",
        "/proc/version|",
        "/proc/cpuinfo lines ",
    ] {
        assert_eq!(
            lines_with(&unsealed.stdout, key),
            lines_with(&bare.stdout, key),
            "{key}\n{}",
            unsealed.show()
        );
    }
    // The machine's release is not the sealed one (no kernel is called 6.1.0-seal).
    unsealed.stdout_lacks("6.1.0-seal");
}

#[test]
fn c_calls_are_counted_under_machine() {
    let bin = fixture_bin();
    let (out, totals) = census_totals(&[bin.to_str().unwrap()], "machine");
    out.ok();
    assert_totals(
        &out,
        &totals,
        &[
            ("get_nprocs", 1),
            ("get_nprocs_conf", 1),
            ("get_phys_pages/get_avphys_pages", 2),
            ("open(machine file)", 10),
            ("pthread_getaffinity_np (sealed CPUs)", 1),
            ("sched_getaffinity (sealed CPUs)", 5),
            ("syscall(SYS_sched_getaffinity) (sealed CPUs)", 1),
            ("syscall(SYS_sysinfo)", 1),
            ("syscall(SYS_uname)", 1),
            ("sysconf(_SC_NPROCESSORS_*)", 2),
            ("sysconf(_SC_PHYS_PAGES/_SC_AVPHYS_PAGES)", 2),
            ("sysinfo", 1),
            ("uname (release, version, machine)", 1),
        ],
    );
    // The pid family still counts the affinity calls it translates, host the uname ones.
    let (_, pid) = census_totals(&[bin.to_str().unwrap()], "pid");
    assert!(pid.contains(&("sched_getaffinity".into(), 5)), "{pid:?}");
    let (_, host) = census_totals(&[bin.to_str().unwrap()], "host");
    assert!(host.contains(&("uname".into(), 2)), "{host:?}");
}

const PYTHON: &str = "import os, platform\n\
print('cpu_count', os.cpu_count())\n\
print('sched_getaffinity', sorted(os.sched_getaffinity(0)))\n\
print('release', platform.release(), platform.machine())\n\
print('phys_pages', os.sysconf('SC_PHYS_PAGES'))\n";

const NODE: &str = "const os = require('os');\n\
console.log('cpus', os.cpus().length);\n\
console.log('availableParallelism', os.availableParallelism());\n\
console.log('totalmem', os.totalmem());\n\
console.log('freemem', os.freemem());\n\
console.log('release', os.release(), os.arch());\n";

/// `(command, sealed output for 4 CPUs, for 2)` of each tool that is installed.
fn tools() -> Vec<(Vec<&'static str>, String, String)> {
    let mut t = vec![(vec!["nproc"], "4\n".to_string(), "2\n".to_string())];
    let py = |n: u32| {
        let list = (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
        format!(
            "cpu_count {n}\nsched_getaffinity [{list}]\nrelease 6.1.0-seal x86_64\n\
             phys_pages 2097152\n"
        )
    };
    if have("python3") {
        t.push((vec!["python3", "-c", PYTHON], py(4), py(2)));
    } else {
        skip_part!("python3 not on PATH");
    }
    let node = |n: u32| {
        format!(
            "cpus {n}\navailableParallelism {n}\ntotalmem 8589934592\nfreemem 6442450944\n\
             release 6.1.0-seal x64\n"
        )
    };
    if have("node") {
        t.push((vec!["node", "-e", NODE], node(4), node(2)));
    } else {
        println!("note: node not on PATH; its part of the machine test is skipped");
        skip_part!("node not on PATH");
    }
    t
}

#[test]
fn nproc_python_and_node_see_the_sealed_cpus() {
    let pinned_ok = have("taskset");
    if !pinned_ok {
        skip_part!("taskset not on PATH: the pinned runs");
    }
    for (cmd, four, two) in tools() {
        let out = assert_sealed_stable(&cmd, 2);
        assert_eq!(out, four, "{cmd:?}");
        let mut args = vec!["--cpus", "2", "--"];
        args.extend(&cmd);
        let o = run_seal(&args);
        o.ok();
        assert_eq!(o.stdout, two, "{cmd:?}\n{}", o.show());
        if pinned_ok {
            let mut args = vec!["--"];
            args.extend(&cmd);
            let p = pinned_seal(&args);
            p.ok();
            assert_eq!(p.stdout, four, "{cmd:?} under taskset -c 0\n{}", p.show());
        }
    }
    // Unsealed, nproc says what it says bare (pinned: 1).
    let bare = run_plain("nproc", [] as [&str; 0]);
    let unsealed = run_seal(["--unseal", "machine", "--", "nproc"]);
    unsealed.ok();
    assert_eq!(unsealed.stdout, bare.stdout);
    if pinned_ok {
        let p = pinned_seal(&["--unseal", "machine", "--", "nproc"]);
        assert_eq!(p.stdout, "1\n", "{}", p.show());
    }
}

#[test]
fn cpus_is_validated_from_every_source() {
    for bad in ["0", "1025", "four", "-1", "2.5"] {
        let o = run_seal(["--cpus", bad, "--", "true"]);
        o.code_is(2).stderr_has("--cpus").stderr_has("1..=1024");
        assert_eq!(o.stderr.lines().count(), 1, "{}", o.show());
    }
    let mut c = seal(["--", "nproc"]);
    c.env("SEAL_CPUS", "0");
    let o = run_timeout(c, TIMEOUT);
    o.code_is(2).stderr_has("SEAL_CPUS");
    let mut c = seal(["--", "nproc"]);
    c.env("SEAL_CPUS", "3");
    run_timeout(c, TIMEOUT).ok().stdout_has("3\n");

    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("seal.toml");
    std::fs::write(&toml, "[seal]\ncpus = 6\n").unwrap();
    let t = toml.to_str().unwrap();
    run_seal(["--config", t, "--", "nproc"])
        .ok()
        .stdout_has("6\n");
    // The flag wins over the file.
    run_seal(["--config", t, "--cpus", "5", "--", "nproc"])
        .ok()
        .stdout_has("5\n");
    std::fs::write(&toml, "[seal]\ncpus = 2000\n").unwrap();
    let o = run_seal(["--config", t, "--", "nproc"]);
    o.code_is(2)
        .stderr_has("seal.toml:2")
        .stderr_has("1..=1024");
}

/// `/proc/loadavg` is the sealed machine's (field sweep: `uptime`'s load averages and the
/// file's process counts and last pid were the machine's, different every run): `uptime`,
/// `cat` and Python's `os.getloadavg()` (glibc's `getloadavg` reads the file) agree with
/// `sysinfo`'s zero load.
#[test]
fn load_average_is_the_sealed_machines() {
    require_tools!("python3", "uptime");
    let script = "cat /proc/loadavg; uptime; python3 -c 'import os; print(os.getloadavg())'";
    let out = assert_sealed_stable(&["sh", "-c", script], 3);
    assert_has(&out, "0.00 0.00 0.00 1/1 1000\n");
    assert_has(&out, "load average: 0.00, 0.00, 0.00\n");
    assert_has(&out, "(0.0, 0.0, 0.0)\n");
}

/// A thread that sets its own affinity reads back the sealed CPUs it set (CPython's
/// `test_posix.test_sched_setaffinity` drops CPU 0 and failed sealed: it read all the sealed
/// CPUs again); a new thread, and a mask set back to all, show all of them.
#[test]
fn a_thread_reads_back_the_affinity_it_set() {
    require_tools!("python3");
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        skip!("fewer than 2 CPUs: no mask without CPU 0 can be set");
    }
    let code = "import os, threading\n\
                m = os.sched_getaffinity(0); print(sorted(m))\n\
                os.sched_setaffinity(0, m - {0}); print(sorted(os.sched_getaffinity(0)))\n\
                t = threading.Thread(target=lambda: print('thread', sorted(os.sched_getaffinity(0))))\n\
                t.start(); t.join()\n\
                os.sched_setaffinity(0, m); print(sorted(os.sched_getaffinity(0)), os.cpu_count())\n";
    let out = assert_sealed_stable(&["python3", "-c", code], 3);
    assert_eq!(
        out,
        "[0, 1, 2, 3]\n[1, 2, 3]\nthread [0, 1, 2, 3]\n[0, 1, 2, 3] 4\n"
    );
}
