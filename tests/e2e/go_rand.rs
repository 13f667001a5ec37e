//! The Go runtime's own random numbers under seal (`seal_abi::supervised::go_rand`): map
//! iteration order, `math/rand`'s top-level functions and `os.MkdirTemp` names, printed by
//! `fixtures/go/randseq` from its main goroutine while the runtime makes and ends threads.
//! Built with the `go` on PATH (Debian's 1.19) and with a Go of 1.22 or later (`runtime.rand`;
//! `SEAL_TEST_GO` names its `go`, which `.ci/run` installs), static and with cgo, with symbols
//! and stripped: 8 sealed runs, 4 at a time, each with a `TMPDIR` of its own, print the same
//! bytes, map lines too: Go 1.19–1.21 draw map order from copies of their generator inlined in
//! the map code, which seal redirects one by one (`seal_abi::supervised::go_wyrand`).
//! `fixtures/go/selectorder` does the same for the case a `select` of several ready cases
//! takes (`runtime.selectgo`'s inlined copy, `seal_abi::supervised::go_select`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{build_dir, fixture, have, run_timeout, seal};

/// The environment variable naming a Go 1.22 or later `go` (set by `.ci/run`).
pub(crate) const NEW_GO: &str = "SEAL_TEST_GO";

/// The minor version of Go tool `go` (`go env GOVERSION`: `go1.19.8` is 19); 0 when unknown.
pub(crate) fn go_minor(go: &Path) -> u32 {
    let out = Command::new(go)
        .args(["env", "GOVERSION"])
        .env("GOTOOLCHAIN", "local")
        .output();
    let v = out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    v.ok()
        .and_then(|v| v.strip_prefix("go1.")?.split('.').next()?.parse().ok())
        .unwrap_or(0)
}

/// Does the `go` on PATH make map order one sequence under seal? Go 1.22 or later
/// (`runtime.rand`), and Go 1.19–1.21 through their map code's inlined copies
/// (`seal_abi::supervised::go_wyrand`; checked with 1.19.8 and 1.21.13).
pub(crate) fn path_go_orders_maps() -> bool {
    have("go") && go_minor(Path::new("go")) >= 19
}

/// What a Go image's `partly sealed` line may say right after `real: `, for the `go` on PATH,
/// where the line goes on with `then` (what else stays real): nothing of the runtime's random
/// numbers where map order and select order are one sequence each (Go 1.19–1.21, 1.23 and
/// 1.27 on, whose `selectgo` shapes were checked; the map code's inlined copies or
/// `runtime.rand`), or `select order` too for 1.22 and 1.24–1.26 (not checked: `selectgo`'s
/// copy may be in another shape), map order too for anything older (docs/limits.md).
pub(crate) fn partly_sealed_real(then: &str) -> Vec<String> {
    let select = format!(
        "select order (the scheduler's cheaprand: seeded by seal, but drawn per thread), {then}"
    );
    match go_minor(Path::new("go")) {
        19..=21 | 23 | 27.. => vec![then.to_string()],
        22..=26 => vec![then.to_string(), select],
        _ => vec!["map and select order (the runtime's fastrand inlined in its map code".into()],
    }
}

/// `fixtures/go/NAME` built by `go` (version `minor`), with cgo or not, stripped or not.
fn build(name: &str, go: &Path, minor: u32, cgo: bool, strip: bool) -> PathBuf {
    let ldflags: &[&str] = if strip { &["-ldflags=-s"] } else { &[] };
    build_go(go, minor, name, cgo, ldflags, &format!("{cgo}_{strip}"))
}

/// `fixtures/go/NAME` built by `go` (version `minor`), with cgo or not, with `flags` for
/// `go build`, as `go_NAME_1MINOR_TAG` in the build directory.
pub(crate) fn build_go(
    go: &Path,
    minor: u32,
    name: &str,
    cgo: bool,
    flags: &[&str],
    tag: &str,
) -> PathBuf {
    let out = build_dir().join(format!("go_{name}_1{minor}_{tag}"));
    let st = Command::new(go)
        .arg("build")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(".")
        .current_dir(fixture(&format!("go/{name}")))
        .env("CGO_ENABLED", if cgo { "1" } else { "0" })
        .env("GOFLAGS", "-mod=mod")
        .env("GOTOOLCHAIN", "local")
        .env("GOCACHE", build_dir().join(format!("go-cache-1{minor}")))
        .env("GOPATH", build_dir().join("go-path"))
        .status()
        .expect("go build");
    assert!(st.success(), "go build of fixtures/go/{name} failed");
    out
}

/// The standard outputs of 8 sealed runs of `bin`, 4 at a time, each with a `TMPDIR` of its
/// own.
fn eight_sealed_runs(bin: &Path) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let mut outs = Vec::new();
    for round in 0..2 {
        let runs: Vec<_> = (0..4)
            .map(|i| {
                let dir = tmp.path().join(format!("t{round}{i}"));
                std::fs::create_dir(&dir).unwrap();
                let mut c = seal(["-q", "--", bin.to_str().unwrap()]);
                c.env("TMPDIR", &dir);
                std::thread::spawn(move || run_timeout(c, crate::util::TIMEOUT))
            })
            .collect();
        for r in runs {
            let o = r.join().unwrap();
            o.ok();
            outs.push(o.stdout.clone());
        }
    }
    outs
}

/// [`eight_sealed_runs`] of `bin` (map lines left out unless `maps`), which must all be the
/// same.
fn eight_runs_agree(bin: &Path, maps: bool, what: &str) -> String {
    let mut outs: Vec<String> = eight_sealed_runs(bin)
        .iter()
        .map(|out| {
            out.lines()
                .filter(|l| maps || !l.starts_with("map "))
                .map(|l| format!("{l}\n"))
                .collect()
        })
        .collect();
    for (i, o) in outs.iter().enumerate() {
        assert_eq!(o, &outs[0], "{what}: run {i} differs from run 0");
    }
    let first = outs.swap_remove(0);
    assert!(
        first.contains("tempdir x") && first.contains(" <nil>\n"),
        "{first}"
    );
    assert_eq!(
        first.lines().filter(|l| l.starts_with("map ")).count(),
        if maps { 12 } else { 0 }
    );
    first
}

/// Every build of `randseq` by `go`: static and cgo (without `cc`, skipped visibly), with
/// symbols and stripped.
fn every_build(go: &Path) {
    let minor = go_minor(go);
    assert!(minor >= 19, "{} is no Go 1.19 or later", go.display());
    let maps = minor >= 19;
    for cgo in [false, true] {
        if cgo && !have("cc") {
            skip_part!("cc not on PATH: the cgo build");
            continue;
        }
        for strip in [false, true] {
            let bin = build("randseq", go, minor, cgo, strip);
            let what = format!("go1.{minor} cgo {cgo} stripped {strip}");
            let out = eight_runs_agree(&bin, maps, &what);
            let linkage = if cgo { "cgo\n" } else { "static\n" };
            assert!(out.ends_with(linkage), "{what}: {out}");
        }
    }
}

/// Go 1.22 or later (`runtime.rand`: map order, `math/rand`, temp names): every line of 8
/// runs, 4 at a time, is the same, static and cgo, with symbols and stripped. The old build
/// printed 8 different outputs of each (map order followed the thread the main goroutine ran
/// on, and a stripped binary's `cputicks` was `rdtsc`).
#[test]
fn a_new_go_programs_map_order_rand_and_temp_names_are_the_same_in_every_run() {
    let Some(go) = std::env::var_os(NEW_GO).map(PathBuf::from) else {
        skip!("{NEW_GO} not set (the `go` of a Go 1.22 or later; .ci/run installs one)");
    };
    every_build(&go);
}

/// The `go` on PATH (Debian's 1.19: `fastrand`): map order, `math/rand` and temp names the
/// same in 8 runs, 4 at a time, static and cgo, with symbols and stripped. Go 1.19–1.21
/// inline their generator into the map code, whose copies seal redirects one by one
/// (`go_wyrand`). An older build printed different temp names (`os.fastrand` drew per
/// thread), and the last one a different map line in each of 6 runs of the static build.
#[test]
fn a_go_programs_map_order_rand_and_temp_names_are_the_same_in_every_run() {
    if !have("go") {
        skip!("go not on PATH (Debian: golang-go)");
    }
    every_build(Path::new("go"));
}

/// Every build of `selectorder` by `go` (static and cgo, with symbols and stripped): 8 sealed
/// runs, 4 at a time, print the same cases, 200 selects of 4 ready cases on one thread and
/// 200 across thread hops; the `partly sealed` line no longer says `select order`; and the
/// census counts the selects' draws exactly (the old build: no row).
fn every_select_build(go: &Path) {
    let minor = go_minor(go);
    assert!(minor >= 19, "{} is no Go 1.19 or later", go.display());
    for cgo in [false, true] {
        if cgo && !have("cc") {
            skip_part!("cc not on PATH: the cgo build");
            continue;
        }
        for strip in [false, true] {
            let bin = build("selectorder", go, minor, cgo, strip);
            let what = format!("go1.{minor} cgo {cgo} stripped {strip}");
            let outs = eight_sealed_runs(&bin);
            for (i, o) in outs.iter().enumerate() {
                assert_eq!(o, &outs[0], "{what}: run {i} differs from run 0");
            }
            let lines: Vec<&str> = outs[0].lines().collect();
            assert_eq!(lines.len(), 3, "{what}: {}", outs[0]);
            for (line, name) in lines.iter().zip(["select ", "hops "]) {
                let cases = line.strip_prefix(name).unwrap_or_default();
                assert_eq!(cases.len(), 200, "{what}: {line}");
                // Each of the 4 cases taken, roughly a quarter of the time each.
                for c in ['0', '1', '2', '3'] {
                    let n = cases.matches(c).count();
                    assert!((20..=80).contains(&n), "{what}: case {c} {n} times: {line}");
                }
            }
            assert_eq!(lines[2], if cgo { "cgo" } else { "static" });
            let o = run_timeout(seal(["--", bin.to_str().unwrap()]), crate::util::TIMEOUT);
            o.ok();
            assert!(
                o.stderr.contains("partly sealed") && !o.stderr.contains("select order"),
                "{what}: {}",
                o.stderr
            );
            // Each select polls its 4 cases in an order of 4 draws (`selectgo`: one per case
            // with a channel), counted from the image's counter, and nothing else selects.
            let (o, v) =
                crate::util::census_json(&["--", bin.to_str().unwrap()], crate::util::TIMEOUT);
            o.ok();
            let procs = v["processes"].as_array().unwrap();
            let p = procs.iter().find(|p| p["vpid"] == 1000).unwrap();
            let rows: Vec<_> = (p["calls"].as_array().unwrap().iter())
                .filter(|c| c["symbol"] == "select order (Go runtime)")
                .map(|c| (c["count"].as_u64(), c["callers"][0]["object"].as_str()))
                .collect();
            let object = Some(seal_abi::supervised::go_rand::MODULE_NAME);
            assert_eq!(rows, [(Some(1600), object)], "{what}\n{}", o.show());
        }
    }
}

/// The `go` on PATH (Debian's 1.19: `selectgo` draws its order from an inlined `fastrandn`):
/// which of 4 ready cases each of 400 selects takes is the same in 8 runs, 4 at a time,
/// static and cgo, with symbols and stripped. The old build printed a different `hops` line
/// in every run (the `select` line too when runs went 4 at a time).
#[test]
fn a_go_programs_select_order_is_the_same_in_every_run() {
    if !have("go") {
        skip!("go not on PATH (Debian: golang-go)");
    }
    every_select_build(Path::new("go"));
}

/// The same with a Go 1.22 or later (`selectgo`'s inlined `cheaprandn`; Go 1.27: a 32-bit
/// wyrand). The old build printed a different `hops` line in every run.
#[test]
fn a_new_go_programs_select_order_is_the_same_in_every_run() {
    let Some(go) = std::env::var_os(NEW_GO).map(PathBuf::from) else {
        skip!("{NEW_GO} not set (the `go` of a Go 1.22 or later; .ci/run installs one)");
    };
    every_select_build(&go);
}
