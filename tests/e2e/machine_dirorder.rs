//! Family `machine`, directory order: six files created alike list in name order (`.` and
//! `..` first) under seal, the same bytes on the real file system (ext4 lists by name hash
//! under its own seed) and on tmpfs (newest first): C's every entry point
//! (fixtures/c/dirorder.c), `ls -f`, `find`, Python's `os.listdir` and `os.scandir`, Node's
//! `fs.readdirSync` and `fs.opendirSync`, `tar`'s and `zip -r`'s member order, and glibc's `fts` and
//! `glob(GLOB_NOSORT)` (fixtures/c/dirwalk.c). `--unseal machine`
//! gives the kernel's order back; a directory of 20 000 entries lists whole and sorted.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::util::*;

/// Created in this order: neither ext4's nor tmpfs's listing is the sorted one.
const NAMES: [&str; 6] = ["beta", "alpha", "omega", "zeta", "gamma", "mid"];
const SORTED: &str = ". .. alpha beta gamma mid omega zeta";

fn fixture_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| build_c("dirorder", &["-Wno-deprecated-declarations"]))
        .clone()
}

/// A fresh directory under `parent` holding [`NAMES`], created in order.
fn populated(parent: &Path) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("seal-dirorder")
        .tempdir_in(parent)
        .unwrap();
    for n in NAMES {
        std::fs::write(d.path().join(n), n).unwrap();
    }
    d
}

/// The parents to list in: the real file system's temporary directory, and `/dev/shm` where
/// it is tmpfs.
fn parents() -> Vec<PathBuf> {
    let mut v = vec![std::env::temp_dir()];
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    if mounts.lines().any(|l| l.contains(" /dev/shm tmpfs ")) {
        v.push(PathBuf::from("/dev/shm"));
    } else {
        skip_part!("/dev/shm is not tmpfs: only one file system is listed");
    }
    v
}

/// What the C fixture prints for a sorted listing.
fn c_text() -> String {
    let mut s = String::new();
    for key in [
        "readdir",
        "readdir_r",
        "scandir",
        "syscall(SYS_getdents64)",
        "getdents64",
        "syscall(SYS_getdents)",
    ] {
        s += &format!("{key}: {SORTED}\n");
    }
    s + "telldir: fourth=beta after seekdir=beta after rewinddir=.\n"
}

#[test]
fn c_entry_points_list_in_name_order_on_every_file_system() {
    let bin = fixture_bin();
    for p in parents() {
        let d = populated(&p);
        let out = assert_sealed_stable(&[bin.to_str().unwrap(), d.path().to_str().unwrap()], 2);
        assert_eq!(out, c_text(), "in {}", p.display());
    }
}

/// `(command run in the directory, its sealed output)` of each tool that is installed.
fn tools() -> Vec<(Vec<&'static str>, String)> {
    let lines = |first: &str, prefix: &str| {
        let mut s = format!("{first}\n");
        for f in NAMES_SORTED {
            s += &format!("{prefix}{f}\n");
        }
        s
    };
    let mut t = vec![
        (vec!["ls", "-f"], format!(".\n{}", lines("..", ""))),
        (vec!["find", "."], lines(".", "./")),
    ];
    // The tools that may be missing: (the programs each needs, command, sealed output).
    let optional: [(&[&str], Vec<&'static str>, String); 4] = [
        (
            &["tar"],
            vec!["sh", "-c", "tar cf - . | tar tf -"],
            lines("./", "./"),
        ),
        (
            &["zip", "unzip"],
            vec![
                "sh",
                "-c",
                "f=$(mktemp); zip -qr - . > \"$f\"; unzip -Z1 \"$f\"; rm -f \"$f\"",
            ],
            NAMES_SORTED.iter().map(|n| format!("{n}\n")).collect(),
        ),
        (
            &["python3"],
            vec![
                "python3",
                "-c",
                "import os\nprint(os.listdir('.'))\nprint([e.name for e in os.scandir('.')])",
            ],
            format!(
                "{0}\n{0}\n",
                "['alpha', 'beta', 'gamma', 'mid', 'omega', 'zeta']"
            ),
        ),
        (
            &["node"],
            vec![
                "node",
                "-e",
                "const fs = require('fs');\nconsole.log(fs.readdirSync('.').join(' '));\n\
                 const d = fs.opendirSync('.'); const a = []; let e;\n\
                 while ((e = d.readSync())) a.push(e.name); d.closeSync();\n\
                 console.log(a.join(' '));",
            ],
            format!("{0}\n{0}\n", "alpha beta gamma mid omega zeta"),
        ),
    ];
    for (needs, cmd, want) in optional {
        if needs.iter().all(|p| have(p)) {
            t.push((cmd, want));
        } else {
            skip_part!("{} not on PATH", needs.join(" or "));
        }
    }
    t
}

const NAMES_SORTED: [&str; 6] = ["alpha", "beta", "gamma", "mid", "omega", "zeta"];

/// `seal [flags] -- cmd` in directory `dir`.
fn sealed_in(dir: &Path, flags: &[&str], cmd: &[&str]) -> Output {
    run_timeout(seal_in(dir, flags, cmd), TIMEOUT)
}

#[test]
fn tools_list_in_name_order_and_the_same_bytes_on_every_file_system() {
    let dirs: Vec<_> = parents().iter().map(|p| populated(p)).collect();
    for (cmd, want) in tools() {
        for d in &dirs {
            let o = sealed_in(d.path(), &[], &cmd);
            o.ok();
            assert_eq!(
                o.stdout,
                want,
                "{cmd:?} in {}\n{}",
                d.path().display(),
                o.show()
            );
        }
    }
}

#[test]
fn glibc_fts_and_unsorted_glob_list_in_name_order() {
    let bin = build_c("dirwalk", &[]);
    let want = "fts: alpha beta gamma mid omega zeta\n\
                glob(GLOB_NOSORT): alpha beta gamma mid omega zeta\n";
    for p in parents() {
        let d = populated(&p);
        let out = assert_sealed_stable(&[bin.to_str().unwrap(), d.path().to_str().unwrap()], 2);
        assert_eq!(out, want, "in {}", p.display());
    }
    let d = populated(&std::env::temp_dir());
    let (out, totals) = census_totals(
        &[bin.to_str().unwrap(), d.path().to_str().unwrap()],
        "machine",
    );
    out.ok();
    for want in [
        ("fts_open (children in name order)", 1),
        ("glob(GLOB_NOSORT) (sorted)", 1),
    ] {
        assert!(totals.contains(&(want.0.to_string(), want.1)), "{totals:?}");
    }
}

#[test]
fn unseal_machine_gives_the_kernel_order() {
    for p in parents() {
        let d = populated(&p);
        let mut bare = command("ls");
        bare.arg("-f").current_dir(d.path());
        let bare = run_timeout(bare, TIMEOUT);
        bare.ok();
        let o = sealed_in(d.path(), &["--unseal", "machine"], &["ls", "-f"]);
        o.ok();
        assert_eq!(o.stdout, bare.stdout, "in {}", p.display());
        let sorted = sealed_in(d.path(), &[], &["ls", "-f"]);
        let kernel_sorts = bare.stdout.lines().collect::<Vec<_>>().join(" ") == SORTED;
        if !kernel_sorts {
            assert_ne!(o.stdout, sorted.stdout, "in {}", p.display());
        }
    }
}

#[test]
fn c_directory_calls_are_counted_under_machine() {
    let d = populated(&std::env::temp_dir());
    let bin = fixture_bin();
    let (out, totals) = census_totals(
        &[bin.to_str().unwrap(), d.path().to_str().unwrap()],
        "machine",
    );
    out.ok();
    assert_totals(
        &out,
        &totals,
        &[
            // One per listing sorted: the telldir part's rewinddir makes a second.
            ("getdents64 (listing sorted)", 1),
            ("readdir/readdir64 (listing sorted)", 3),
            ("readdir_r/readdir64_r (listing sorted)", 1),
            ("scandir/scandir64 (sorted)", 1),
            ("syscall(SYS_getdents) (listing sorted)", 1),
            ("syscall(SYS_getdents64) (listing sorted)", 1),
            ("telldir/seekdir/rewinddir (sorted places)", 3),
        ],
    );
}

#[test]
fn twenty_thousand_entries_list_whole_and_sorted() {
    let d = tempfile::Builder::new()
        .prefix("seal-dirorder-big")
        .tempdir()
        .unwrap();
    // Created out of order.
    for i in 0..20000u32 {
        std::fs::File::create(d.path().join(format!("f{:05}", (i * 7919) % 20000))).unwrap();
    }
    let o = sealed_in(d.path(), &[], &["ls", "-f"]);
    o.ok();
    let got: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(got.len(), 20002, "{}", o.show());
    assert_eq!(&got[..3], [".", "..", "f00000"]);
    assert!(got[2..].windows(2).all(|w| w[0] < w[1]), "not sorted");
    assert_eq!(got[20001], "f19999");
    let bin = fixture_bin();
    let c = run_seal(["--", bin.to_str().unwrap(), d.path().to_str().unwrap()]);
    c.ok();
    for line in c.stdout.lines().take(6) {
        let names: Vec<&str> = line.split(' ').skip(1).collect();
        assert_eq!(names.len(), 20002, "{}", &line[..40.min(line.len())]);
        assert!(
            names[2..].windows(2).all(|w| w[0] < w[1]),
            "{}",
            &line[..40]
        );
    }
    o.says_nothing_unsealed();
}

#[test]
fn streams_past_the_snapshot_slots_come_whole_in_the_kernels_order_and_say_so() {
    let bin = build_c("dirmany", &[]);
    let d = populated(&std::env::temp_dir());
    let o = run_seal(["--", bin.to_str().unwrap(), d.path().to_str().unwrap()]);
    o.ok();
    assert_eq!(
        o.stdout,
        format!("last stream: 8 entries\nafter closing: {SORTED}\n"),
        "{}",
        o.show()
    );
    o.stderr_has("too many directories open at once");
}
