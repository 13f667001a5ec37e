//! A static image's machine files and `/proc/<pid>` files, sealed by the supervisor as libseal
//! seals them for a dynamic program (`serve/opens.rs`, `serve/procfiles.rs`): the same
//! contents a dynamic `cat` of the same file reads in the same run, counted in the census.
//! And the same files opened by relative paths, by libseal and by the supervisor.

use crate::static_pids::alike;
use crate::util::{census_json, TIMEOUT};

/// How many of `symbol`'s calls with `detail` (any, when `None`) the census counts from
/// busybox's own code.
fn from_busybox(v: &serde_json::Value, symbol: &str, detail: Option<&str>) -> u64 {
    (v["processes"].as_array().unwrap().iter())
        .flat_map(|p| p["calls"].as_array().unwrap().iter())
        .filter(|c| c["symbol"] == symbol && detail.is_none_or(|d| c["detail"] == d))
        .flat_map(|c| c["callers"].as_array().unwrap().iter())
        .filter(|c| c["object"].as_str().is_some_and(|o| o.ends_with("busybox")))
        .map(|c| c["count"].as_u64().unwrap())
        .sum()
}

/// busybox's `free`, `nproc` and `cat` of the machine files (`/proc/cpuinfo`, `meminfo`,
/// `loadavg`, `stat`, `version`, the kernel's release, the CPU list), 3 runs alike, each the
/// same text as `/bin/cat` (libseal's) gives in the run, each open counted. The old build read
/// the machine's files: `free` showed the real memory and the runs differed.
#[test]
fn a_static_images_machine_files_are_the_ones_libseal_gives() {
    let Some(busybox) = crate::static_images::busybox() else {
        skip!("no busybox (Debian: busybox-static)");
    };
    let files = "/proc/meminfo /proc/loadavg /proc/version /sys/devices/system/cpu/online \
                 /proc/sys/kernel/osrelease";
    let script = format!(
        "free; nproc; /usr/bin/nproc; head -n 12 /proc/cpuinfo; \
         /usr/bin/head -n 12 /proc/cpuinfo; cat {files}; echo ---; /bin/cat {files}; \
         echo ---; head -1 /proc/stat; grep btime /proc/stat; /bin/grep -E '^cpu |btime' /proc/stat"
    );
    let o = alike(3, || {
        let (o, v) = census_json(&["--", busybox, "sh", "-c", &script], TIMEOUT);
        for (detail, n) in [
            ("/proc/cpuinfo", 1),
            ("/proc/meminfo", 2),
            ("/proc/loadavg", 1),
            ("/proc/stat", 2),
            ("/proc/version", 1),
            ("/sys/devices/system/cpu/online", 1),
            ("/proc/sys/kernel/osrelease", 1),
        ] {
            let got = from_busybox(&v, "open(machine file)", Some(detail));
            assert_eq!(got, n, "{detail}\n{v:#}");
        }
        o
    });
    let out = &o.stdout;
    assert!(
        out.starts_with(
            "              total        used        free      shared  buff/cache   available\n\
             Mem:        8388608     2097152     4194304           0     2097152     6291456\n"
        ),
        "{}",
        o.show()
    );
    let lines: Vec<&str> = out.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("Swap:")).unwrap() + 1;
    assert_eq!(lines[at..at + 2], ["4", "4"], "nproc\n{}", o.show());
    let cpuinfo = &lines[at + 2..at + 26];
    assert_eq!(cpuinfo[..12], cpuinfo[12..], "cpuinfo\n{}", o.show());
    assert!(cpuinfo[0].starts_with("processor\t: 0"), "{}", o.show());
    let parts: Vec<&str> = out.split("---\n").collect();
    assert_eq!(parts.len(), 3, "{}", o.show());
    let (fixed, dynamic) = (&parts[0][parts[0].find("MemTotal").unwrap()..], parts[1]);
    assert_eq!(fixed, dynamic, "static and dynamic\n{}", o.show());
    assert!(
        fixed.contains("0.00 0.00 0.00 1/1 1000\nLinux version 6.1.0-seal ")
            && fixed.ends_with("0-3\n6.1.0-seal\n"),
        "{}",
        o.show()
    );
    let stat: Vec<&str> = parts[2].lines().collect();
    assert_eq!(stat.len(), 4, "{}", o.show());
    assert_eq!(
        stat[..2],
        stat[2..],
        "/proc/stat, static and dynamic\n{}",
        o.show()
    );
    assert!(stat[0].starts_with("cpu  0 0 0 "), "{}", o.show());
}

/// `/proc/self/stat` and `status`, `/proc/thread-self/stat` and `/proc/$$/stat` read by the
/// busybox shell itself (its `read` builtin) and by a busybox child show virtual pids (the
/// shell's `$$`, its parent 999) and the sealed start time, and `/proc/$$/cmdline` reaches the
/// shell's own file; 3 runs alike, each pid file counted. The old build read the real pids
/// and times (and `/proc/1000/…` was not the shell's, or no file).
#[test]
fn a_static_images_proc_pid_files_show_virtual_pids_and_sealed_times() {
    let Some(busybox) = crate::static_images::busybox() else {
        skip!("no busybox (Debian: busybox-static)");
    };
    let script = "read a b c d e f g rest < /proc/self/stat; echo $a $d $$ $PPID; \
                  read a b c d rest < /proc/thread-self/stat; echo $a $d; \
                  read a b c d rest < /proc/$$/stat; echo $a $d; \
                  while read k v rest; do case $k in Pid:|PPid:|Tgid:) echo $k $v;; esac; \
                  done < /proc/self/status; \
                  cut -d' ' -f1,4,22 /proc/self/stat; /bin/cut -d' ' -f22 /proc/self/stat; \
                  tr '\\0' ' ' < /proc/$$/cmdline; echo";
    let o = alike(3, || {
        let (o, v) = census_json(&["--", busybox, "sh", "-c", script], TIMEOUT);
        let got = from_busybox(&v, "open(/proc/<pid>/stat|status)", None);
        assert_eq!(got, 5, "{v:#}");
        o
    });
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(
        lines[..6],
        [
            "1000 999 1000 999",
            "1000 999",
            "1000 999",
            "Tgid: 1000",
            "Pid: 1000",
            "PPid: 999"
        ],
        "{}",
        o.show()
    );
    let cut: Vec<&str> = lines[6].split(' ').collect();
    assert_eq!(cut.len(), 3, "{}", o.show());
    assert_ne!(cut[0], "1000", "a child's own pid\n{}", o.show());
    assert_eq!(cut[1], "1000", "{}", o.show());
    assert_eq!(
        cut[2],
        lines[7],
        "start time, static and dynamic\n{}",
        o.show()
    );
    assert!(
        lines[8].contains(" sh -c read a b c d e f g rest < /proc/self/stat;"),
        "{}",
        o.show()
    );
}

/// Sealed files opened by relative paths (`fixtures/c/relative_opens.c`: `meminfo` and
/// `./uptime` after `chdir("/proc")`, `openat` of `urandom` through a descriptor of `/dev` and
/// of `random/boot_id` through one of `/proc/sys/kernel`), dynamic (libseal's hooks) and static
/// glibc and musl builds (the supervisor's): the sealed contents, 3 runs alike, the boot id
/// the absolute path's, and a file of the program's own named `stat` its own text. busybox
/// `top`, which opens `stat`, `meminfo` and `loadavg` after `chdir("/proc")`, prints the sealed
/// machine in its header. The old build read the machine's files (`MemTotal:       24683792 kB`, a new
/// urandom every run) for every build.
#[test]
fn sealed_files_opened_by_relative_paths_are_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut bins = vec![crate::util::build_c("relative_opens", &[])];
    bins.extend(crate::static_pids::static_builds("relative_opens"));
    for bin in &bins {
        let bin = bin.to_str().unwrap();
        let o = alike(3, || crate::static_dyn::sealed(&[bin, d]));
        let lines: Vec<&str> = o.stdout.lines().collect();
        assert_eq!(lines.len(), 6, "{bin}: {}", o.show());
        assert_eq!(lines[0], "meminfo: MemTotal:        8388608 kB", "{bin}");
        assert!(
            lines[1].starts_with("uptime: 86400."),
            "{bin}: {}",
            lines[1]
        );
        assert!(
            lines[2].len() == "urandom: ".len() + 16,
            "{bin}: {}",
            lines[2]
        );
        let id = lines[3].strip_prefix("boot_id: ").unwrap();
        assert_eq!(lines[4], format!("boot_id absolute: {id}"), "{bin}");
        assert_eq!(lines[5], "own stat: mine", "{bin}");
    }
    if let Some(busybox) = crate::static_images::busybox() {
        // Its header (the process list is the machine's: a static image's `/proc` listings
        // are real, docs/limits.md).
        let top = "top -b -n1 | head -3";
        let o = alike(3, || crate::static_dyn::sealed(&[busybox, "sh", "-c", top]));
        assert!(
            o.stdout.starts_with(
                "Mem: 4194304K used, 4194304K free, 0K shrd, 0K buff, 2097152K cached\n"
            ) && o
                .stdout
                .contains("\nLoad average: 0.00 0.00 0.00 1/1 1000\n"),
            "{}",
            o.show()
        );
    } else {
        skip_part!("no busybox (Debian: busybox-static)");
    }
}

/// A static image lists a directory in name order, as libseal lists a dynamic program's
/// (`fixtures/c/static_dirorder.c`: eight files made out of order, read through, again after
/// `rewinddir`, and with a `seekdir` back to a `telldir`, before and after the end), glibc and musl static builds and the
/// dynamic one alike, 3 runs; busybox `find` too, its listing counted in the census. The old
/// build listed a static image's directories in the file system's order (ext4's hash order,
/// tmpfs's newest first: `b z f q a x c m`).
#[test]
fn a_static_image_lists_directories_in_name_order() {
    let mut bins = vec![crate::util::build_c("static_dirorder", &[])];
    bins.extend(crate::static_pids::static_builds("static_dirorder"));
    let line = "a b c f m q x z ";
    let want = format!("{line}\nend\n{line}\na b c f | c f m q x z \nagain c\n");
    for bin in &bins {
        let bin = bin.to_str().unwrap();
        let o = alike(3, || {
            let dir = tempfile::tempdir().unwrap();
            crate::static_dyn::sealed(&[bin, dir.path().to_str().unwrap()])
        });
        assert_eq!(o.stdout, want, "{bin}");
    }
    let Some(busybox) = crate::static_images::busybox() else {
        skip_part!("no busybox (Debian: busybox-static)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for n in ["m", "c", "x", "a"] {
        std::fs::write(dir.path().join(n), n).unwrap();
    }
    let d = dir.path().to_str().unwrap();
    let (o, v) = census_json(&["--", busybox, "find", d], TIMEOUT);
    o.ok();
    let names: Vec<&str> = o
        .stdout
        .lines()
        .map(|l| l.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(names[1..], ["a", "c", "m", "x"], "{}", o.show());
    assert_eq!(
        from_busybox(&v, "getdents64 (listing sorted)", None),
        1,
        "{v:#}"
    );
}

/// A static image's temp name that an earlier run left in a shared `/tmp` is said, as libseal
/// says a dynamic program's (`tmp-leftover`): busybox `mktemp` draws the same first name in
/// each run, finds it taken by the first run's file and takes another. The old build said
/// nothing, and the second run printed another name silently. With the leftover gone the
/// name is the first run's again. And the same for `mktemp -d`'s `mkdir`, and under the
/// process's `$TMPDIR`.
#[test]
fn a_static_images_temp_name_left_by_an_earlier_run_is_said() {
    let Some(busybox) = crate::static_images::busybox() else {
        skip!("no busybox (Debian: busybox-static)");
    };
    // A directory of its own under /tmp (`mktemp -p`: seal unsets `TMPDIR`), so that no
    // leftover of another run or test is there.
    let dir = std::path::PathBuf::from(format!("/tmp/seal-e2e-leftover-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let run = || {
        let c = crate::util::seal(["--", busybox, "mktemp", "-p", dir.to_str().unwrap()]);
        crate::util::run_timeout(c, TIMEOUT)
    };
    let (name, second) = leftover_said_second(run, &dir);
    assert_ne!(second.stdout.trim(), name, "{}", second.show());
    std::fs::remove_file(&name).unwrap();
    let third = run();
    assert_eq!(third.stdout.trim(), name, "{}", third.show());
    assert!(!third.stderr.contains("tmp-leftover"), "{}", third.show());
    // A directory (`mktemp -d`: a `mkdir`, which the filter sends for this) likewise.
    let dirs = dir.join("d");
    std::fs::create_dir(&dirs).unwrap();
    leftover_said_second(
        || {
            let d = dirs.to_str().unwrap();
            let c = crate::util::seal(["--", busybox, "mktemp", "-d", "-p", d]);
            crate::util::run_timeout(c, TIMEOUT)
        },
        &dirs,
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // Under the process's `$TMPDIR` (outside `/tmp` and `/var/tmp`), read from its
    // environment: said too. The build before said nothing.
    let tmpdir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("seal-e2e-leftover-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmpdir);
    std::fs::create_dir_all(&tmpdir).unwrap();
    leftover_said_second(
        || {
            let mut c = crate::util::seal(["--", busybox, "mktemp"]);
            c.env("TMPDIR", &tmpdir);
            crate::util::run_timeout(c, TIMEOUT)
        },
        &tmpdir,
    );
    std::fs::remove_dir_all(&tmpdir).unwrap();
}

/// Runs `run` (a sealed `mktemp` in `dir`) twice: the first prints a name in `dir` and says
/// nothing, the second says that name was there before the run. The name and the second run.
fn leftover_said_second(
    run: impl Fn() -> crate::util::Output,
    dir: &std::path::Path,
) -> (String, crate::util::Output) {
    let first = run();
    first.ok();
    let name = first.stdout.trim().to_string();
    assert!(
        name.starts_with(&format!("{}/tmp.", dir.display())),
        "{}",
        first.show()
    );
    assert!(!first.stderr.contains("tmp-leftover"), "{}", first.show());
    let second = run();
    let want = format!("not sealed (tmp-leftover): {name} was there before the run");
    assert!(second.stderr.contains(&want), "{}", second.show());
    (name, second)
}

/// A static image's speculation mitigations are what they are without seal: the filter that
/// routes its calls to the supervisor is installed with `SECCOMP_FILTER_FLAG_SPEC_ALLOW`. A
/// kernel booted with the default `spec_store_bypass_disable=seccomp` force-mitigates every
/// thread a filter without that flag holds (`thread force mitigated` where the bare image
/// says `thread vulnerable`): slower code, and on some CPUs a register write at every context
/// switch. (On a kernel whose line is `Vulnerable` or `Not affected` both say the same.)
#[test]
fn a_static_images_speculation_mitigations_are_its_own() {
    let Some(busybox) = crate::static_images::busybox() else {
        skip!("no busybox (Debian: busybox-static)");
    };
    let script = "grep -E '^Speculation' /proc/self/status";
    let bare = crate::util::run_plain(busybox, ["sh", "-c", script]);
    bare.ok();
    assert!(
        bare.stdout.contains("Speculation_Store_Bypass"),
        "{}",
        bare.show()
    );
    let sealed = crate::util::run_sealed(&[busybox, "sh", "-c", script]);
    sealed.ok();
    assert_eq!(sealed.stdout, bare.stdout, "{}", sealed.show());
}
