//! End-to-end tests: goldens that travel. `check --shard K/N` splits a suite over a CI matrix
//! (every case checked exactly once, whatever the order of cases), `junit-merge` joins the
//! shards' reports, cases sharing a working directory do not clobber each other under
//! `check -j N`, and census counts the scheduler moves are never pinned by `record`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::util::*;

/// A fresh suite directory whose `seal.toml` is `toml`.
fn suite(toml: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("seal-golden-travel-")
        .tempdir()
        .unwrap();
    std::fs::write(dir.path().join("seal.toml"), toml).unwrap();
    dir
}

/// `seal golden ARGS` run in `dir`.
fn golden(dir: &Path, args: &[&str]) -> Output {
    let mut c = seal(["golden"].iter().chain(args));
    c.current_dir(dir);
    run_timeout(c, TIMEOUT)
}

const NAMES: [&str; 7] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
];

/// Seven quick cases, in the order given.
fn seven(order: &[&str]) -> String {
    order
        .iter()
        .map(|n| format!("[[case]]\nname = \"{n}\"\ncmd = [\"echo\", \"case {n}\"]\n\n"))
        .collect()
}

/// The names of the `ok` lines of a `check` output.
fn passed(out: &Output) -> Vec<String> {
    out.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok      "))
        .map(|n| n.trim().to_string())
        .collect()
}

/// The case names `list --shard K/N` shows.
fn listed(dir: &Path, shard: &str) -> Vec<String> {
    let out = golden(dir, &["list", "--shard", shard]);
    out.ok();
    out.stdout
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

/// A suite recorded once passes when checked shard by shard, for every N from 1 to 5, and the
/// shards of each N check every case exactly once (an empty shard is a pass that says so).
#[test]
fn shards_check_every_case_exactly_once() {
    let p = suite(&seven(&NAMES));
    golden(p.path(), &["record", "-q", "--passes", "1"]).ok();
    for n in 1..=5 {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for k in 1..=n {
            let shard = format!("{k}/{n}");
            let out = golden(p.path(), &["check", "--shard", &shard]);
            assert_eq!(out.code, Some(0), "shard {shard}\n{}", out.show());
            let names = passed(&out);
            if names.is_empty() {
                out.stdout_has(&format!("no cases in shard {shard}"));
            } else {
                out.stdout_has(&format!(
                    "{} case(s) in shard {shard}: {} ok, 0 failed",
                    names.len(),
                    names.len()
                ));
            }
            assert_eq!(listed(p.path(), &shard), names, "list and check disagree");
            for name in names {
                *seen.entry(name).or_default() += 1;
            }
        }
        let want: BTreeMap<String, usize> = NAMES.iter().map(|n| (n.to_string(), 1)).collect();
        assert_eq!(seen, want, "N = {n}");
    }
}

/// The assignment depends on the names only: reversing the cases and adding others moves none.
#[test]
fn shard_assignment_ignores_the_order_of_cases() {
    let a = suite(&seven(&NAMES));
    let mut reversed = NAMES.to_vec();
    reversed.reverse();
    let mut toml = seven(&reversed);
    toml.push_str("[[case]]\nname = \"hotel\"\ncmd = [\"true\"]\n");
    let b = suite(&toml);
    for k in 1..=4 {
        let shard = format!("{k}/4");
        let mut in_a = listed(a.path(), &shard);
        let mut in_b = listed(b.path(), &shard);
        in_b.retain(|n| n != "hotel");
        in_a.sort();
        in_b.sort();
        assert_eq!(in_a, in_b, "shard {shard}");
    }
}

#[test]
fn bad_shards_are_one_line_errors() {
    let p = suite(&seven(&NAMES));
    for bad in ["0/3", "4/3", "3", "1/0", "1/1001", "a/b", "-1/2", "1/2/3"] {
        let out = golden(p.path(), &["check", &format!("--shard={bad}")]);
        assert_eq!(out.code, Some(2), "--shard {bad}\n{}", out.show());
        let errors: Vec<&str> = out.stderr.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(errors.len(), 1, "--shard {bad}\n{}", out.show());
        assert!(errors[0].contains("--shard"), "{}", out.show());
    }
    golden(p.path(), &["list", "--shard", "2/1"]).code_is(2);
}

/// Every shard writes its JUnit file, an empty one too, and `junit-merge` sums them.
#[test]
fn shard_reports_merge_into_one() {
    let p = suite(&seven(&NAMES));
    golden(p.path(), &["record", "-q", "--passes", "1"]).ok();
    let files: Vec<String> = (1..=8)
        .map(|k| {
            let file = format!("shard-{k}.xml");
            let shard = format!("{k}/8");
            golden(p.path(), &["check", "--shard", &shard, "--junit", &file]).ok();
            let xml = std::fs::read_to_string(p.path().join(&file)).unwrap();
            assert!(
                xml.contains(&format!("name=\"seal golden (shard {shard})\"")),
                "{xml}"
            );
            file
        })
        .collect();
    let mut args = vec!["junit-merge"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["-o", "all.xml"]);
    let out = golden(p.path(), &args);
    out.ok();
    out.stdout_has("8 suite(s) from 8 file(s), 7 test(s): 0 failure(s)");
    let all = std::fs::read_to_string(p.path().join("all.xml")).unwrap();
    assert_has(
        &all,
        "<testsuites name=\"seal golden\" tests=\"7\" failures=\"0\" errors=\"0\"",
    );
    for n in NAMES {
        assert_eq!(
            all.matches(&format!("classname=\"seal golden\" name=\"{n}\""))
                .count(),
            1,
            "{all}"
        );
    }
    std::fs::write(p.path().join("not.xml"), "{}\n").unwrap();
    golden(p.path(), &["junit-merge", "not.xml", "-o", "x.xml"]).code_is(2);
}

/// Two cases in one working directory append to one file and print it; only one declares an
/// artifact (another file). Run at once, each would print the other's lines; cases sharing a
/// directory run one after another, so `check -j 4` passes every time.
#[test]
fn cases_sharing_a_cwd_do_not_clobber_each_other_under_j() {
    let case = |name: &str, extra: &str| {
        format!(
            "[[case]]\nname = \"{name}\"\n\
             cmd = \"rm -f log; for i in 1 2 3 4; do echo {name} $i >> log; sleep 0.05; done; cat log; rm -f log{extra}\"\n"
        )
    };
    let toml = format!(
        "{}artifacts = [\"first.out\"]\n\n{}\n[[case]]\nname = \"elsewhere\"\ncmd = \"echo other\"\ncwd = \"sub\"\n",
        case("first", "; echo done > first.out"),
        case("second", "")
    );
    let p = suite(&toml);
    std::fs::create_dir(p.path().join("sub")).unwrap();
    golden(p.path(), &["record", "-q"]).ok();
    for i in 0..5 {
        let out = golden(p.path(), &["check", "-j", "4"]);
        assert_eq!(
            out.code,
            Some(0),
            "check -j 4, run {}\n{}",
            i + 1,
            out.show()
        );
        out.stdout_has("3 case(s): 3 ok");
    }
}

/// Python's `subprocess.run` polls the child's pipes until it has written everything: how
/// often depends on the scheduler. `record` pins no such count, so `check --strict-census`
/// passes every time (also over a golden that still pins one), while one more clock read is
/// still census drift.
#[test]
fn scheduling_counts_are_not_pinned_but_clock_reads_are() {
    if !have("python3") {
        skip!("python3 not on PATH");
    }
    let toml = |reads: u32| {
        format!(
            "[[case]]\nname = \"sub\"\n\
             cmd = [\"python3\", \"-c\", \"import subprocess; print(subprocess.run(['sh','-c','echo a; sleep 0.05; echo hi'], capture_output=True, text=True).stdout)\"]\n\n\
             [[case]]\nname = \"clock\"\n\
             cmd = [\"python3\", \"-c\", \"import time\\nfor _ in range({reads}): time.time()\\nprint('read')\"]\n"
        )
    };
    let p = suite(&toml(3));
    golden(p.path(), &["record", "-q"]).ok();
    let path = p.path().join("golden/sub.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut g: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(g["census"]["wait"].is_null(), "wait pinned\n{text}");
    for f in ["waitpid", "wait4", "waitid", "wait"] {
        assert!(g["census"]["pid"][f].is_null(), "pid/{f} pinned\n{text}");
    }
    assert!(
        !text.contains("wait/"),
        "a wait row in census_varies\n{text}"
    );
    for i in 0..4 {
        let out = golden(p.path(), &["check", "--strict-census", "-j", "2"]);
        assert_eq!(out.code, Some(0), "run {}\n{}", i + 1, out.show());
        out.stdout_lacks("census drift");
    }
    // A golden recorded before the rule, pinning a poll count this run will not repeat.
    g["census"]["wait"] = serde_json::json!({ "poll": 8, "syscall(SYS_futex)": 3 });
    g["census"]["pid"]["waitpid"] = 5.into();
    std::fs::write(&path, serde_json::to_string_pretty(&g).unwrap() + "\n").unwrap();
    golden(p.path(), &["check", "sub", "--strict-census"]).ok();
    // One more time() call is a behaviour change: still drift, a failure when strict.
    std::fs::write(p.path().join("seal.toml"), toml(4)).unwrap();
    let out = golden(p.path(), &["check", "clock", "--strict-census"]);
    out.code_is(1);
    out.stdout_has("FAILED  clock")
        .stdout_has("census drift: time/");
}
