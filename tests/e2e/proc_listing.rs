//! End-to-end tests: listings of `/proc` and of task directories (family `pid`). A sealed
//! listing shows the run's processes and threads under their virtual numbers and hides the
//! rest of the machine, as a pid namespace would; `ls /proc`, `ps -e`, `ps ax`, `pgrep`,
//! Python's `os.listdir` and a C program calling `readdir`, `readdir_r` and `getdents64`
//! print the same thing every run. With `--unseal pid` the listing is the kernel's.
use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};

use crate::util::*;

const RUNS: usize = 5;

/// `seal ARGS -- sh -c SCRIPT`.
fn sealed_sh(args: &[&str], script: &str) -> Output {
    let mut c = seal(args);
    c.args(["--", "sh", "-c", script]);
    run_timeout(c, TIMEOUT)
}

/// The stdout of `sealed_sh(&[], script)`, the same in [`RUNS`] runs.
fn sealed_sh_agrees(what: &str, script: &str) -> String {
    assert_runs_agree(what, RUNS, || sealed_sh(&[], script)).stdout
}

/// A process outside the run (a bare `sleep`), there for every run of a test; killed on drop.
struct Outsider(Child);

impl Outsider {
    fn start() -> Outsider {
        let c = Command::new("sleep")
            .arg("120")
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep");
        Outsider(c)
    }
    fn pid(&self) -> String {
        self.0.id().to_string()
    }
}

impl Drop for Outsider {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The whitespace-separated words after `key` on the line that starts with it.
fn words<'a>(out: &'a str, key: &str) -> Vec<&'a str> {
    let line = out
        .lines()
        .find(|l| l.starts_with(key))
        .unwrap_or_else(|| panic!("no {key:?} line in:\n{out}"));
    line[key.len()..].split_whitespace().collect()
}

/// Are these numbers in ascending order (a sealed listing's order)?
fn ascending(v: &[&str]) -> bool {
    let n: Vec<i32> = v.iter().map(|w| w.parse().unwrap()).collect();
    n.windows(2).all(|w| w[0] < w[1])
}

fn set<'a>(v: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    v.into_iter().map(str::to_string).collect()
}

/// `ls /proc` and `find /proc` (each through a shell that prints its pid and becomes it) and
/// Python's `os.listdir('/proc')` list exactly the run: the root shell (1000), its background
/// `sleep` and the lister itself. `find` also stats each name relative to `/proc`; `ls -l
/// /proc` reads them without an error and shows `self` as its own virtual pid.
#[test]
fn ls_proc_and_os_listdir_list_exactly_the_runs_virtual_pids() {
    let outsider = Outsider::start();
    let script = r#"
sleep 5 & s=$!
echo "sleep $s"
l=$(sh -c 'echo "ls $$"; exec ls /proc')
echo "$l" | grep '^ls '
echo "listed $(echo "$l" | grep -E '^[0-9]+$' | tr '\n' ' ')"
echo "named $(echo "$l" | grep -cE '^(self|thread-self|meminfo|sys)$')"
f=$(sh -c 'echo "find $$"; exec find /proc -maxdepth 1 -name "[0-9]*" -perm -u=r -printf "%f\n"' 2>&1)
echo "$f" | grep '^find '
echo "found $(echo "$f" | grep -v '^find ' | tr '\n' ' ')"
x=$(sh -c 'echo "lsl $$"; exec ls -l /proc' 2>&1)
echo "$x" | grep '^lsl '
echo "errors $(echo "$x" | grep -c 'No such')"
echo "$x" | grep -E -- '-> [0-9]+' | sed 's/.* \([a-z-]*\) -> /link \1 /'
sh -c 'echo "readlink $$"; exec readlink /proc/self /proc/thread-self'
kill $s
"#;
    let out = sealed_sh_agrees("ls /proc", script);
    let (sleep, ls) = (words(&out, "sleep")[0], words(&out, "ls ")[0]);
    assert_eq!(
        set(words(&out, "listed")),
        set(["1000", sleep, ls]),
        "{out}"
    );
    assert_eq!(words(&out, "named"), ["4"], "non-numeric names kept: {out}");
    assert!(!words(&out, "listed").contains(&outsider.pid().as_str()));
    // ls -l: no error (its label and ACL reads reach the process), and /proc/self and
    // /proc/thread-self name it by its virtual pid, as readlink does.
    assert_eq!(words(&out, "errors"), ["0"], "{out}");
    let lsl = words(&out, "lsl")[0];
    assert_eq!(words(&out, "link self"), [lsl], "{out}");
    assert_eq!(
        words(&out, "link thread-self"),
        [format!("{lsl}/task/{lsl}").as_str()],
        "{out}"
    );
    let rl = words(&out, "readlink")[0];
    let lines: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("readlink"))
        .collect();
    assert_eq!(
        lines[1..3],
        [rl.to_string(), format!("{rl}/task/{rl}")],
        "{out}"
    );
    // find stats each name relative to /proc: no error, the same run.
    let find = words(&out, "find ")[0];
    assert_eq!(
        set(words(&out, "found")),
        set(["1000", sleep, find]),
        "{out}"
    );

    if have("python3") {
        let py = "import os; print('me', os.getpid()); \
                  print('listed', *sorted(x for x in os.listdir('/proc') if x.isdigit()))";
        let script = format!("sleep 5 & s=$!; echo \"sleep $s\"; python3 -c \"{py}\"; kill $s");
        let out = sealed_sh_agrees("os.listdir", &script);
        let (sleep, me) = (words(&out, "sleep")[0], words(&out, "me")[0]);
        assert_eq!(
            set(words(&out, "listed")),
            set(["1000", sleep, me]),
            "{out}"
        );
    }
}

/// A script that runs `body` while a background `sleep 5` runs, then kills it; first it prints
/// `sleep PID`. The background child is `sh` until it has exec'd `sleep`: the script waits for
/// that (with builtins only, so no process is added) before it says so and runs `body`.
fn beside_a_sleep(body: &str) -> String {
    format!(
        "sleep 5 & s=$!; \
         until read c < /proc/$s/comm && [ \"$c\" = sleep ]; do :; done 2>/dev/null; \
         echo \"sleep $s\"; {body}; kill $s"
    )
}

/// `ps -e` and `ps ax` print the run's processes only, with virtual pids and parents.
#[test]
fn ps_e_and_ps_ax_print_only_the_run() {
    require_tools!("ps");
    let _outsider = Outsider::start();
    // `ps` may list the background child under either name until it is `sleep`. `ps ax`
    // without its STAT column: the shell is `R` when `ps` reads it before the shell has
    // reached its wait, `S` after (the kernel's state, which seal leaves real: docs/limits.md).
    let out = sealed_sh_agrees(
        "ps -e, ps ax",
        &beside_a_sleep("ps -e -o pid=,ppid=,comm=; echo ---; ps ax -o pid,tty,time,args"),
    );
    let sleep = words(&out, "sleep")[0];
    let (e, ax) = out.split_once("---\n").unwrap();
    let rows: Vec<Vec<&str>> = e
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{out}");
    assert!(rows.contains(&vec!["1000", "999", "sh"]), "{out}");
    assert!(rows.contains(&vec![sleep, "1000", "sleep"]), "{out}");
    let ps = rows.iter().find(|r| r[2] == "ps").expect("ps row");
    assert_eq!(ps[1], "1000", "{out}");
    assert!(
        (1001..32768).contains(&ps[0].parse::<i32>().unwrap()),
        "{out}"
    );
    let ax: Vec<&str> = ax.lines().collect();
    assert!(ax[0].trim_start().starts_with("PID"), "{out}");
    let pids: Vec<&str> = ax[1..]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    // Another `ps`, with a number of its own; both listings in virtual pid order.
    assert_eq!(pids.len(), 3, "{out}");
    let other = pids.iter().find(|p| !["1000", sleep].contains(p)).unwrap();
    assert_ne!(other, &ps[0], "{out}");
    assert!(ascending(&pids), "{out}");
    assert!(
        ascending(&rows.iter().map(|r| r[0]).collect::<Vec<_>>()),
        "{out}"
    );
    assert!(ax.iter().any(|l| l.ends_with(" sleep 5")), "{out}");
}

/// `pgrep -x sleep` finds the run's `sleep` by its virtual pid, not the one outside the run;
/// unsealed, it finds both by their real pids.
#[test]
fn pgrep_finds_the_runs_sleep_and_not_an_outside_one() {
    require_tools!("pgrep");
    let outsider = Outsider::start();
    let script = beside_a_sleep("echo \"found $(pgrep -x sleep | tr '\\n' ' ')\"");
    let out = sealed_sh_agrees("pgrep", &script);
    assert_eq!(words(&out, "found"), [words(&out, "sleep")[0]], "{out}");

    let real = sealed_sh(&["--unseal", "pid"], &script);
    let found = words(&real.ok().stdout, "found");
    assert!(found.contains(&outsider.pid().as_str()), "{}", real.show());
    assert!(
        found.contains(&words(&real.stdout, "sleep")[0]),
        "{}",
        real.show()
    );
}

/// The C fixture's readdir, readdir_r and getdents64 (with a 64-byte buffer, which holds
/// two records), its 64-bit-offset build's readdir64, readdir64_r and getdents64 (with a 32
/// KiB one), and readdir after `rewinddir` and getdents64 after
/// `lseek(fd, 0)`, list the same run: the shell, two `sleep`s and itself, as directories, in
/// virtual pid order; each, reached relative to `/proc` (`openat`, `fstatat`), is that
/// process.
#[test]
fn readdir_readdir_r_and_getdents64_list_the_same_run() {
    let bin = build_c("proc_list", &[]);
    // Built for 64-bit offsets, it calls readdir64 and readdir64_r.
    let bin64 = build_c("proc_list", &["-D_FILE_OFFSET_BITS=64"]);
    let _outsider = Outsider::start();
    let script = format!(
        "sleep 5 & a=$!; sleep 5 & b=$!; echo \"sleeps $a $b\"; \
         {bin} /proc 64; {bin64} /proc 32768; kill $a $b",
        bin = bin.display(),
        bin64 = bin64.display()
    );
    let out = sealed_sh_agrees("C listings", &script);
    for (i, block, want) in blocks(&out) {
        for way in WAYS {
            let got = words(block, way);
            assert_eq!(set(got.clone()), want, "{way} of run {i}: {out}");
            assert!(ascending(&got), "{way} of run {i}: {out}");
        }
        assert_reached_relative(block, &want, false);
    }
    assert!(!out.contains('?'), "d_type changed: {out}");
}

/// With every ordered slot taken (16 listings half read) a listing comes in the kernel's
/// order: readdir_r and getdents64 still show the whole run; readdir renames in glibc's
/// record, which may be too short for a virtual pid (a real pid of fewer digits), and then
/// leaves that process out and says so. No number outside the run shows either way.
#[test]
fn listings_beyond_the_ordered_slots_come_in_the_kernels_order() {
    let bin = build_c("proc_list", &[]);
    let _outsider = Outsider::start();
    let script = format!(
        "sleep 5 & a=$!; sleep 5 & b=$!; echo \"sleeps $a $b\"; \
         {bin} /proc 64 busy; {bin} /proc 32768 busy; kill $a $b",
        bin = bin.display()
    );
    let run = sealed_sh(&[], &script);
    let out = &run.ok().stdout;
    for (i, block, want) in blocks(out) {
        for way in WAYS {
            let got = set(words(block, way));
            if way.starts_with("readdir:") || way.starts_with("rewinddir:") {
                assert!(
                    got.is_subset(&want) && got.contains("1000"),
                    "{way} {i}: {out}"
                );
                if got != want {
                    run.stderr_has("too many /proc listings open at once");
                }
            } else {
                assert_eq!(got, want, "{way} of run {i}: {out}");
            }
        }
        assert_reached_relative(block, &want, true);
    }
}

/// The ways the fixture lists a directory, as its lines start.
const WAYS: [&str; 5] = [
    "readdir:",
    "rewinddir:",
    "readdir_r:",
    "getdents64:",
    "lseek 0:",
];

/// The fixture's outputs in a run that printed `sleeps A B` first: `(index, block, the
/// numbers it should list)`: the root shell, the two sleeps and the fixture itself.
fn blocks(out: &str) -> Vec<(usize, &str, BTreeSet<String>)> {
    let sleeps = words(out, "sleeps");
    let blocks: Vec<&str> = out.split("pid ").skip(1).collect();
    assert!(!blocks.is_empty(), "{out}");
    blocks
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            let me = b.split_whitespace().next().unwrap();
            (i, b, set(["1000", sleeps[0], sleeps[1], me]))
        })
        .collect()
}

/// The fixture's `openat:` line: every listed number, reached relative to the listed
/// directory (`openat(dirfd, "N/stat")`, `fstatat(dirfd, "N")`), is the process or thread
/// its stat names, by the same number (`subset`: the listing it walks may leave some out).
fn assert_reached_relative(out: &str, want: &BTreeSet<String>, subset: bool) {
    let pairs: Vec<(&str, &str)> = words(out, "openat:")
        .into_iter()
        .map(|w| w.split_once('=').unwrap())
        .collect();
    assert!(pairs.iter().all(|(n, stat)| n == stat), "{out}");
    let got = set(pairs.iter().map(|p| p.0));
    if subset {
        assert!(got.is_subset(want), "{out}");
    } else {
        assert_eq!(got, *want, "{out}");
    }
}

/// A listing of a 3-thread process's task directory (`/proc/self/task`, and
/// `/proc/thread-self/..` through getdents64) shows its 3 virtual tids, the ones `gettid`
/// returns, and each reached relative to the directory is that thread.
#[test]
fn a_task_listing_shows_the_three_virtual_tids() {
    let bin = build_c("proc_list", &[]);
    let out = assert_runs_agree("task listing", RUNS, || {
        run_sealed(&[bin.to_str().unwrap(), "threads"])
    })
    .stdout;
    let head = words(&out, "pid");
    assert_eq!((head[0], head[1]), ("1000", "tids"), "{out}");
    let want = set(["1000", head[2], head[3]]);
    assert_eq!(want.len(), 3, "{out}");
    for way in WAYS {
        assert_eq!(set(words(&out, way)), want, "{way}: {out}");
        assert!(ascending(&words(&out, way)), "{way}: {out}");
    }
    assert_reached_relative(&out, &want, false);
}

/// With `--unseal pid` listings are the kernel's (the process outside the run shows, tids are
/// real), and still counted in the census, once per listing stream.
#[test]
fn unsealed_listings_are_real_and_listings_are_counted() {
    let bin = build_c("proc_list", &[]);
    let outsider = Outsider::start();
    let out = run_seal([
        "--unseal",
        "pid",
        "--",
        bin.to_str().unwrap(),
        "/proc",
        "4096",
    ]);
    out.ok();
    let me = words(&out.stdout, "pid")[0].to_string();
    assert_ne!(me, "1000", "{}", out.show());
    for way in ["readdir:", "readdir_r:", "getdents64:"] {
        let w = words(&out.stdout, way);
        assert!(w.contains(&me.as_str()), "{way} {}", out.show());
        assert!(w.contains(&outsider.pid().as_str()), "{way} {}", out.show());
    }
    let out = run_seal(["--unseal", "pid", "--", bin.to_str().unwrap(), "threads"]);
    let head = words(&out.ok().stdout, "pid");
    assert_eq!(
        set(words(&out.stdout, "readdir:")),
        set([head[0], head[2], head[3]]),
        "{}",
        out.show()
    );

    for unseal in [&[][..], &["--unseal", "pid"][..]] {
        let dir = private_tmpdir();
        let json = dir.path().join("census.json");
        let mut args = vec!["census", "--json", json.to_str().unwrap()];
        args.extend_from_slice(unseal);
        args.extend(["--", bin.to_str().unwrap(), "/proc", "64"]);
        let out = run_seal(&args);
        out.ok();
        let c: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let calls = c["processes"][0]["calls"].as_array().unwrap();
        let count = |sym: &str| {
            calls
                .iter()
                .find(|c| c["symbol"] == sym)
                .map_or(0, |c| c["count"].as_u64().unwrap())
        };
        // readdir, readdir_r and the listing the fixture reaches relative to /proc.
        assert_eq!(count("readdir(/proc listing)"), 3, "{unseal:?} {c:#}");
        assert_eq!(count("getdents64(/proc listing)"), 1, "{unseal:?} {c:#}");
    }
}
