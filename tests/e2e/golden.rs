//! End-to-end tests: `seal golden` on the fixture project fixtures/golden (three cases: a
//! Python report with timestamps and uuids, a shell pipeline with mktemp and date, a C program
//! writing artifacts), copied into a fresh temp dir per test.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::*;

/// A fresh copy of fixtures/golden with writer/writer compiled.
fn project() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("seal-golden-")
        .tempdir()
        .unwrap();
    copy_dir(&fixture("golden"), dir.path());
    let st = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(dir.path().join("writer/writer"))
        .arg(dir.path().join("writer/writer.c"))
        .status()
        .expect("cc not found");
    assert!(st.success(), "compiling writer.c failed");
    dir
}

/// `seal golden ARGS` run in `dir`.
fn golden(dir: &Path, args: &[&str]) -> Output {
    let mut c = seal(["golden"].iter().chain(args));
    c.current_dir(dir);
    run_timeout(c, TIMEOUT)
}

fn read(p: PathBuf) -> String {
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Changed lines of a unified diff (without the ---/+++ headers).
fn changed_lines(out: &str) -> Vec<String> {
    out.lines()
        .map(str::trim_start)
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-'))
                && !l.starts_with("+++")
                && !l.starts_with("---")
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn record_then_check_passes_five_times() {
    let p = project();
    let rec = golden(p.path(), &["record"]);
    assert_eq!(rec.code, Some(0), "record\n{}", rec.show());
    for name in ["report", "pipeline", "writer"] {
        rec.stdout_has(&format!("recorded {name}"));
    }
    let before: Vec<String> = ["report", "pipeline", "writer"]
        .iter()
        .map(|n| read(p.path().join(format!("golden/{n}.json"))))
        .collect();
    for i in 0..5 {
        // Alternate serial and parallel: the three cases have three working directories.
        let jobs = if i % 2 == 0 { "1" } else { "3" };
        let out = golden(p.path(), &["check", "-j", jobs]);
        assert_eq!(
            out.code,
            Some(0),
            "check {} (-j {jobs})\n{}",
            i + 1,
            out.show()
        );
        out.stdout_has("3 ok, 0 failed");
    }
    // Checking never touches a golden; recording again over a stable suite changes nothing.
    let again = golden(p.path(), &["record"]);
    again.ok();
    assert_eq!(
        again.stdout.matches("(unchanged").count(),
        3,
        "{}",
        again.show()
    );
    for (n, old) in ["report", "pipeline", "writer"].iter().zip(&before) {
        assert_eq!(&read(p.path().join(format!("golden/{n}.json"))), old, "{n}");
    }
    let list = golden(p.path(), &["list"]);
    assert_eq!(
        list.stdout.matches("recorded").count(),
        3,
        "{}",
        list.show()
    );
}

#[test]
fn golden_is_canonical_json_with_mask_placeholders_and_artifacts() {
    let p = project();
    let rec = golden(p.path(), &["record"]);
    rec.ok();
    rec.stdout_has("masked: iso8601, uuid");
    // The pipeline's date is sealed to the epoch, its mktemp name to the seed.
    let pipe = read(p.path().join("golden/pipeline.json"));
    for line in [
        r#""| scratch scratch/tmp."#,
        r#""| stamped 2026-01-01 00:00:00\n""#,
        r#""|       3 the\n""#,
    ] {
        assert!(pipe.contains(line), "{line} not in\n{pipe}");
    }
    let text = read(p.path().join("golden/report.json"));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    // Canonical: sorted keys (serde_json's default map is sorted), 2-space indent, newline.
    let mut again = serde_json::to_string_pretty(&v).unwrap();
    again.push('\n');
    assert_eq!(text, again, "golden is not canonical JSON");
    let stdout = golden_stdout(&v);
    assert_has(&stdout, "generated [iso8601]\n");
    assert_has(&stdout, "run [uuid]\n");
    assert_eq!(v["masks"], serde_json::json!(["iso8601", "uuid"]));
    assert_eq!(
        v["argv"],
        serde_json::json!(["python3", "report.py", "--orders", "5"])
    );
    assert_eq!(v["exit_code"], 0);
    assert!(
        v["census"]["time"]["clock_gettime"].as_u64().unwrap() > 0,
        "{text}"
    );
    let w: serde_json::Value =
        serde_json::from_str(&read(p.path().join("golden/writer.json"))).unwrap();
    let summary = w["artifacts"]["out/summary.txt"].as_array().unwrap();
    assert_eq!(summary[0], "generated 2026-01-01T00:00:00Z\n");
    assert_eq!(w["artifacts"]["out/blob.bin"]["bytes"], 64);
    assert_eq!(
        w["artifacts"]["out/blob.bin"]["sha256"]
            .as_str()
            .unwrap()
            .len(),
        64
    );
}

#[test]
fn changed_output_fails_with_only_that_change_and_junit_names_it() {
    let p = project();
    let rec = golden(p.path(), &["record"]);
    rec.ok();
    let script = p.path().join("report/report.py");
    let src = read(script.clone());
    std::fs::write(
        &script,
        src.replace("print(f\"total {total}\")", "print(f\"sum {total}\")"),
    )
    .unwrap();
    let junit = p.path().join("junit.xml");
    let out = golden(p.path(), &["check", "--junit", junit.to_str().unwrap()]);
    out.code_is(1);
    out.stdout_has("FAILED  report");
    out.stdout_has("ok      pipeline");
    out.stdout_has("ok      writer");
    let changed = changed_lines(&out.stdout);
    assert_eq!(changed.len(), 2, "only the changed line\n{}", out.show());
    assert!(changed[0].starts_with("-total "), "{changed:?}");
    assert!(changed[1].starts_with("+sum "), "{changed:?}");
    assert_eq!(changed[0]["-total ".len()..], changed[1]["+sum ".len()..]);

    let xml = read(junit);
    check_well_formed(&xml);
    let failing = xml
        .split("<testcase ")
        .find(|t| t.contains("name=\"report\""))
        .expect("a testcase for report");
    assert!(failing.contains("<failure"), "{xml}");
    assert!(failing.contains("+sum "), "{xml}");
    for ok in ["pipeline", "writer"] {
        let t = xml
            .split("<testcase ")
            .find(|t| t.contains(&format!("name=\"{ok}\"")))
            .unwrap();
        assert!(!t.contains("<failure"), "{xml}");
    }
    assert_has(&xml, "tests=\"3\" failures=\"1\" errors=\"0\"");
}

/// A tiny XML well-formedness check: balanced tags, quoted attributes, known entities.
fn check_well_formed(xml: &str) {
    assert!(xml.starts_with("<?xml version=\"1.0\""), "{xml}");
    let mut stack: Vec<String> = Vec::new();
    let mut rest = &xml[xml.find("?>").unwrap() + 2..];
    while let Some(open) = rest.find('<') {
        let text = &rest[..open];
        for (i, _) in text.match_indices('&') {
            let ent = &text[i..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| ent.starts_with(e)),
                "bad entity in {text:?}"
            );
        }
        let close = rest[open..].find('>').expect("unclosed tag") + open;
        let tag = &rest[open + 1..close];
        assert!(
            tag.matches('"').count().is_multiple_of(2),
            "unbalanced quotes in <{tag}>"
        );
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop().as_deref(), Some(name), "mismatched </{name}>");
        } else if !tag.ends_with('/') {
            stack.push(tag.split_whitespace().next().unwrap().to_string());
        }
        rest = &rest[close + 1..];
    }
    assert!(stack.is_empty(), "unclosed {stack:?}");
}

#[test]
fn static_binary_cannot_be_sealed_so_record_refuses_it() {
    let p = project();
    let st = Command::new("cc")
        .args(["-static", "-o"])
        .arg(p.path().join("static/now"))
        .arg(p.path().join("static/now.c"))
        .output()
        .unwrap();
    if !st.status.success() {
        skip!("cc -static failed (no static libc?)");
    }
    let out = golden(p.path(), &["record", "--config", "static.toml"]);
    out.code_is(1);
    out.stdout_has("REFUSED static-clock");
    out.stdout_has("-now ").stdout_has("+now ");
    assert!(
        !p.path().join("golden/static-clock.json").exists(),
        "a golden was written for an unstable case"
    );
}

/// One bad seal.toml: exit 2, one line naming the case and the key, no golden written.
fn assert_rejected(toml: &str, action: &str, needles: &[&str]) {
    let p = project();
    std::fs::write(p.path().join("seal.toml"), toml).unwrap();
    let out = golden(p.path(), &[action]);
    assert_eq!(out.code, Some(2), "{toml}\n{}", out.show());
    let errors: Vec<&str> = out.stderr.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{}", out.show());
    for n in needles {
        assert!(errors[0].contains(n), "{n:?} not in {:?}", errors[0]);
    }
    assert!(
        !p.path().join("golden").exists(),
        "golden dir was touched\n{}",
        out.show()
    );
}

#[test]
fn bad_suites_are_one_line_errors_and_write_nothing() {
    let ok = "[[case]]\nname = \"w\"\ncmd = [\"./writer\", \"out\"]\ncwd = \"writer\"\n";
    assert_rejected(
        &format!("{ok}\n[[case]]\nname = \"a\"\ncmd = \"echo\"\nmasks = [\"isodate\"]\n"),
        "record",
        &["seal.toml:9", "case `a`", "`masks`", "isodate"],
    );
    assert_rejected(
        &format!("{ok}\n[[case]]\nname = \"w\"\ncmd = \"echo\"\n"),
        "check",
        &["seal.toml:7", "case `w`", "`name`", "duplicate"],
    );
    assert_rejected(
        &format!("{ok}\n[[case]]\nname = \"nocmd\"\ncwd = \"writer\"\n"),
        "record",
        &["case `nocmd`", "`cmd`", "missing"],
    );
    // Only known after running: the command wrote nothing matching the glob.
    assert_rejected(
        "[[case]]\nname = \"w\"\ncmd = [\"./writer\", \"out\"]\ncwd = \"writer\"\nartifacts = [\"out/*.json\"]\n",
        "record",
        &["seal.toml:5", "case `w`", "`artifacts`", "out/*.json", "matched no file"],
    );
}

#[test]
fn invalid_golden_json_is_named_and_other_cases_still_checked() {
    let p = project();
    let rec = golden(p.path(), &["record", "report", "writer"]);
    rec.ok();
    let bad = p.path().join("golden/report.json");
    std::fs::write(&bad, read(bad.clone()).replacen('{', "{ oops", 1)).unwrap();
    let out = golden(p.path(), &["check", "report", "writer"]);
    out.code_is(2);
    out.stdout_has("ERROR").stdout_has("golden/report.json");
    out.stdout_has("ok      writer");
    // A missing golden is a plain failure.
    std::fs::remove_file(&bad).unwrap();
    let out = golden(p.path(), &["check", "report"]);
    out.code_is(1);
    out.stdout_has("seal golden record report");
}

#[test]
fn census_drift_is_a_note_unless_strict_and_update_rerecords() {
    let p = project();
    let rec = golden(p.path(), &["record", "writer"]);
    rec.ok();
    // Pretend the golden was recorded when the program read the clock twice more.
    let path = p.path().join("golden/writer.json");
    let mut v: serde_json::Value = serde_json::from_str(&read(path.clone())).unwrap();
    let n = v["census"]["time"]["time"].as_u64().unwrap();
    v["census"]["time"]["time"] = (n + 2).into();
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap() + "\n").unwrap();
    let out = golden(p.path(), &["check", "writer"]);
    out.ok();
    let drift = format!("census drift: time/time {} -> {n}", n + 2);
    out.stdout_has(&drift);
    let out = golden(p.path(), &["check", "writer", "--strict-census"]);
    out.code_is(1);
    out.stdout_has("FAILED  writer").stdout_has(&drift);
    // update re-records through the same gate and shows what changed in the golden.
    let up = golden(p.path(), &["update", "writer"]);
    up.ok();
    assert!(up.stdout.contains("(changed"), "{}", up.show());
    let want = format!("\"time\": {n}");
    assert!(
        up.stdout
            .lines()
            .any(|l| l.trim_start().starts_with('+') && l.ends_with(&want)),
        "{}",
        up.show()
    );
    let out = golden(p.path(), &["check", "writer", "--strict-census"]);
    out.ok();
}

/// A case that hangs is killed, with every process it started, when its `timeout` runs out,
/// and reported as an error naming the case and the key: the suite ends instead of hanging CI.
#[test]
fn hanging_case_is_killed_at_its_timeout() {
    let dir = tempfile::Builder::new()
        .prefix("seal-golden-timeout-")
        .tempdir()
        .unwrap();
    let marker = format!("seal-e2e-hang-{}", std::process::id());
    std::fs::write(
        dir.path().join("seal.toml"),
        format!(
            "[golden]\ntimeout = \"20s\"\n\n[[case]]\nname = \"quick\"\ncmd = [\"echo\", \"hi\"]\n\n\
             [[case]]\nname = \"hangs\"\ncmd = [\"bash\", \"-c\", \"exec -a {marker} sleep 300 & wait\"]\ntimeout = \"1s\"\n"
        ),
    )
    .unwrap();
    let rec = golden(dir.path(), &["record", "quick"]);
    rec.ok();
    let out = golden(dir.path(), &["record", "hangs"]);
    out.code_is(2);
    out.stderr_has("case `hangs`")
        .stderr_has("`timeout`")
        .stderr_has("killed");
    assert!(
        !dir.path().join("golden/hangs.json").exists(),
        "a golden was written for a hang"
    );
    let check = golden(dir.path(), &["check", "quick"]);
    check.ok();
    let left = std::process::Command::new("pgrep")
        .args(["-f", &marker])
        .output();
    if let Ok(left) = left {
        assert!(
            left.stdout.is_empty(),
            "the hanging case's child outlived the timeout"
        );
    }
    std::fs::write(
        dir.path().join("seal.toml"),
        "[[case]]\nname = \"x\"\ncmd = [\"true\"]\ntimeout = \"soon\"\n",
    )
    .unwrap();
    let bad = golden(dir.path(), &["check"]);
    bad.code_is(2);
    bad.stderr_has("seal.toml:4").stderr_has("`timeout`");
}

/// A JVM case prints the same bytes every pass, but the JVM's own bookkeeping (its clock
/// reads, timed waits and thread-id lookups) moves the census totals from pass to pass. The
/// case is recorded with those rows named in `census_varies` and left out of its census, and
/// checks clean; it used to be refused, so no JVM program could have a golden.
#[test]
fn a_jvm_case_is_recorded_without_its_varying_census_rows() {
    let Some(classes) = java_classes(module_path!(), "Runtimes") else {
        return;
    };
    let p = tempfile::Builder::new()
        .prefix("seal-golden-jvm-")
        .tempdir()
        .unwrap();
    std::fs::write(
        p.path().join("seal.toml"),
        format!(
            "[[case]]\nname = \"jvm\"\ncmd = [\"java\", \"-cp\", {:?}, \"Runtimes\"]\n",
            classes.to_str().unwrap()
        ),
    )
    .unwrap();
    let rec = golden(p.path(), &["record"]);
    rec.ok();
    let g: serde_json::Value =
        serde_json::from_str(&read(p.path().join("golden/jvm.json"))).unwrap();
    let varies: Vec<&str> = g["census_varies"]
        .as_array()
        .map(|a| a.iter().map(|r| r.as_str().unwrap()).collect())
        .unwrap_or_default();
    for row in &varies {
        let (fam, f) = row.split_once('/').unwrap();
        assert!(g["census"][fam][f].is_null(), "{row} recorded\n{g:#}");
        assert!(rec.stderr.contains(row), "{row} not named\n{}", rec.show());
    }
    golden(p.path(), &["check"]).ok();
}

/// A golden of 80,000 lines checked against a one-line output: the diff settles for a coarse
/// edit past its deadline (it took 15 s before) and prints at most 2000 changed lines, then
/// says it was cut.
#[test]
fn a_huge_diff_is_quick_and_cut() {
    let d = private_tmpdir();
    let toml = |cmd: &str| format!("[[case]]\nname = \"big\"\ncmd = \"{cmd}\"\n");
    std::fs::write(d.path().join("seal.toml"), toml("seq 80000")).unwrap();
    golden(d.path(), &["record"]).ok();
    std::fs::write(d.path().join("seal.toml"), toml("echo x")).unwrap();
    let out = golden(d.path(), &["check"]);
    out.code_is(1);
    assert!(
        out.stdout.contains("… (diff cut after 2000 changed lines)"),
        "{}",
        out.show()
    );
    assert!(
        out.stdout.lines().count() < 2100,
        "{} lines",
        out.stdout.lines().count()
    );
    assert!(
        out.stdout.lines().any(|l| l.trim() == "-1")
            && out.stdout.lines().any(|l| l.trim() == "+x"),
        "{}",
        out.show()
    );
}

/// A static root command recorded (the launcher's child execs it) and checked (`check` runs
/// its cases on worker threads, where the launcher cannot fork a supervisor and its
/// `__exec-static` trampoline execs the root): the census is the command's either way, so
/// `--strict-census` passes. The trampoline's own `execv` and `poll` were counted as the
/// root's: `census drift: exec/execv 0 -> 1` at every check.
#[test]
fn a_static_roots_census_is_the_same_however_seal_started_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("quiet.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    let bin = dir.path().join("quiet");
    let built = Command::new("cc")
        .args(["-static", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .unwrap();
    if !built.status.success() {
        skip!("cc -static failed (no static libc?)");
    }
    std::fs::write(
        dir.path().join("seal.toml"),
        format!(
            "[[case]]\nname = \"quiet\"\ncmd = [\"{}\"]\n",
            bin.display()
        ),
    )
    .unwrap();
    golden(dir.path(), &["record"]).ok();
    for args in [
        &["check", "--strict-census"][..],
        &["check", "-j", "2", "--strict-census"],
    ] {
        let out = golden(dir.path(), args);
        out.ok();
        assert!(!out.stdout.contains("census drift"), "{}", out.show());
    }
}
