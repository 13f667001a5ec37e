//! The census of a Go program's own random numbers, which seal draws in the image
//! (`seal_abi::supervised::go_rand`: `runtime.rand` in Go 1.22 on, `fastrand` and the map
//! code's inlined copies in 1.19–1.21) and counts from the counters that code keeps, read when
//! the process exits: `fixtures/go/randcount R M C` draws R numbers from `math/rand`'s global
//! source, starts M iterations of a map and makes C reads of `crypto/rand`. And the `partly
//! sealed` line of an image where the redirect could not be made.

use std::path::{Path, PathBuf};

use crate::go_rand::{build_go, go_minor, NEW_GO};
use crate::util::{census_json, have, Output, TIMEOUT};

/// The module the census names in-image draws after.
const IN_IMAGE: &str = seal_abi::supervised::go_rand::MODULE_NAME;

/// `(symbol, count, caller objects)` of the `random` calls of process 1000 in census `v`.
fn random_rows(v: &serde_json::Value) -> Vec<(String, u64, Vec<String>)> {
    rows_of(v, |p| p["vpid"] == 1000)
}

/// The same of the first process `which` picks.
fn rows_of(
    v: &serde_json::Value,
    which: impl Fn(&serde_json::Value) -> bool,
) -> Vec<(String, u64, Vec<String>)> {
    let procs = v["processes"].as_array().unwrap();
    let p = procs.iter().find(|p| which(p)).expect("the process");
    let mut rows: Vec<_> = (p["calls"].as_array().unwrap().iter())
        .filter(|c| c["family"] == "random")
        .map(|c| {
            let callers = c["callers"].as_array().unwrap().iter();
            let objects = callers.map(|k| k["object"].as_str().unwrap().to_string());
            let name = c["symbol"].as_str().unwrap().to_string();
            (name, c["count"].as_u64().unwrap(), objects.collect())
        })
        .collect();
    rows.sort();
    rows
}

/// 3 sealed runs of `bin ARGS…`, whose outputs and `random` rows of process 1000 must agree:
/// the first's output and census.
fn three_runs(bin: &Path, args: &[u32], what: &str) -> (Output, serde_json::Value) {
    let args: Vec<String> = args.iter().map(|n| n.to_string()).collect();
    let mut cmd = vec!["--", bin.to_str().unwrap()];
    cmd.extend(args.iter().map(String::as_str));
    let runs: Vec<_> = (0..3).map(|_| census_json(&cmd, TIMEOUT)).collect();
    for (o, v) in &runs {
        o.ok();
        assert_eq!(o.stdout, runs[0].0.stdout, "{what}: outputs differ");
        let rows = random_rows(v);
        assert_eq!(rows, random_rows(&runs[0].1), "{what}: census rows differ");
    }
    runs.into_iter().next().unwrap()
}

/// What the census must say of `randcount R M C` built by Go 1.`minor` (`exe`: its path), when
/// this test knows its runtime's own start-up draws:
///
/// - Go 1.27: 5 `runtime.rand` at start-up (package `internal/godebug`'s update, the seed of
///   `sync.Map`'s `HashTrieMap`, the maps `syscall` and `unicode` make in their `init`; found
///   with a breakpoint on `runtime.rand`), one a `rand.Int63` (the global source is the
///   runtime's since 1.22), one for making the map (its seed), two a map iteration (its start
///   and its directory offset);
/// - Go 1.19: 7 draws of the map code at start-up (the hash seeds of the maps `syscall`,
///   `unicode` and `time` make in their `init`), one for making the map, one a map iteration;
///   `math/rand`'s global source is seeded with 1 (randomly only from 1.20), so `rand.Int63`
///   draws nothing of the runtime, and the out-of-line `fastrand` is not called.
///
/// The new threads' seeds (`mrandinit`, a second sequence, as many as the scheduler makes
/// threads) are not counted. `crypto/rand`: one `getrandom` a read, at `GetRandom`.
fn want(minor: u32, [r, m, c]: [u32; 3], exe: &str) -> Option<Vec<(String, u64, Vec<String>)>> {
    let made = u64::from(m > 0);
    let (r, m, c) = (u64::from(r), u64::from(m), u64::from(c));
    let row = |s: &str, n, o: &str| (s.to_string(), n, vec![o.to_string()]);
    let mut rows = match minor {
        27 => vec![row(
            "runtime.rand (Go runtime)",
            5 + r + made + 2 * m,
            IN_IMAGE,
        )],
        19 => vec![row("fastrand (Go map code)", 7 + made + m, IN_IMAGE)],
        _ => return None,
    };
    rows.push(row("getrandom", c, exe));
    rows.sort();
    Some(rows)
}

/// Every build of `randcount` by `go`, static and cgo: the exact rows, the same in 3 runs.
fn counts_of(go: &Path) {
    let minor = go_minor(go);
    let Some(_) = want(minor, [0; 3], "") else {
        skip!("no known start-up draws for Go 1.{minor} (this test knows 1.19 and 1.27)");
    };
    for cgo in [false, true] {
        if cgo && !have("cc") {
            skip_part!("cc not on PATH: the cgo build");
            continue;
        }
        let bin = build_go(go, minor, "randcount", cgo, &[], &format!("{cgo}"));
        let exe = bin.to_str().unwrap();
        for rmc in [[0, 0, 0], [7, 5, 3]] {
            let what = format!("go1.{minor} cgo {cgo} {rmc:?}");
            let (o, v) = three_runs(&bin, &rmc, &what);
            let mut want = want(minor, rmc, exe).unwrap();
            // A program that reads no crypto/rand has no getrandom row.
            want.retain(|r| r.1 > 0);
            assert_eq!(random_rows(&v), want, "{what}\n{}", o.show());
        }
        // A forked child (a raw fork, no exec) counts only its own draws, from the copy of its
        // parent's counters it starts with: 4 map iterations, and its parent's are as before.
        if !cgo {
            let what = format!("go1.{minor} fork");
            let (o, v) = three_runs(&bin, &[7, 5, 3, 4], &what);
            assert_eq!(
                random_rows(&v),
                want(minor, [7, 5, 3], exe).unwrap(),
                "{what}"
            );
            let child = rows_of(&v, |p| p["parent_vpid"] == 1000);
            let (name, per) = match minor {
                27 => ("runtime.rand (Go runtime)", 2),
                _ => ("fastrand (Go map code)", 1),
            };
            let want = vec![(name.to_string(), 4 * per, vec![IN_IMAGE.to_string()])];
            assert_eq!(child, want, "{what}\n{}", o.show());
        }
    }
}

/// Go 1.19 (the `go` on PATH): the map code's draws (its inlined `fastrand` copies, which seal
/// redirects one by one) are in the census, exactly, named after `[seal in-image rand]`,
/// static and cgo, the same in 3 runs; a forked child's are its own. The old build counted
/// none (only `getrandom`).
#[test]
fn the_census_counts_a_go_programs_own_draws_exactly() {
    if !have("go") {
        skip!("go not on PATH (Debian: golang-go)");
    }
    counts_of(Path::new("go"));
}

/// Go 1.22 or later (`SEAL_TEST_GO`, 1.27 on CI): `runtime.rand`'s draws (`math/rand`'s global
/// source, map seeds and iterations) are in the census, exactly, static and cgo, the same in 3
/// runs. The old build counted none.
#[test]
fn the_census_counts_a_new_go_programs_own_draws_exactly() {
    let Some(go) = std::env::var_os(NEW_GO).map(PathBuf::from) else {
        skip!("{NEW_GO} not set (the `go` of a Go 1.22 or later; .ci/run installs one)");
    };
    counts_of(&go);
}

/// A Go program linked at 128 KiB (`-T`; the cgo build through its C linker's
/// `-Ttext-segment`) leaves no room below it for seal's code, so its runtime's random numbers
/// are not redirected: its `partly sealed` line says what stays per thread and why, the census
/// records it (`go-runtime-random`) and counts no in-image draws, static (the supervisor's
/// set-up) and cgo (libseal's); exec'd by a static shell, the event is a line of its own. The
/// old build's line, made from the file, said only `select order` stayed real, and nothing
/// of the exec'd image.
#[test]
fn a_go_program_with_no_room_below_it_says_its_random_numbers_stay_per_thread() {
    if !have("go") {
        skip!("go not on PATH (Debian: golang-go)");
    }
    let go = Path::new("go");
    let minor = go_minor(go);
    use seal_abi::supervised::go_rand::outcome;
    let why = format!("not redirected: {}", outcome::NO_ROOM);
    for cgo in [false, true] {
        if cgo && !have("cc") {
            skip_part!("cc not on PATH: the cgo build");
            continue;
        }
        let flags = match cgo {
            false => ["-ldflags=-T=0x21000"],
            true => ["-ldflags=-extldflags=-Wl,-Ttext-segment=0x20000"],
        };
        let bin = build_go(go, minor, "randcount", cgo, &flags, &format!("low_{cgo}"));
        let exe = bin.to_str().unwrap();
        let (o, v) = census_json(&["--", exe, "2", "2", "1"], TIMEOUT);
        o.ok();
        let kind = if cgo {
            "go-runtime-supervised"
        } else {
            "static-binary-supervised"
        };
        let line = o
            .stderr
            .lines()
            .find(|l| l.contains(&format!("partly sealed ({kind})")));
        let line = line.unwrap_or_else(|| panic!("no partly sealed line\n{}", o.show()));
        assert!(
            line.contains("real: map order, math/rand's global source, os.MkdirTemp names")
                && line.contains(&why),
            "cgo {cgo}: {line}"
        );
        let procs = v["processes"].as_array().unwrap();
        let p = procs.iter().find(|p| p["vpid"] == 1000).unwrap();
        let recorded = format!("{}{}{}", outcome::NONE, outcome::BECAUSE, outcome::NO_ROOM);
        let events = p["unsealed"].as_array().unwrap();
        assert!(
            events
                .iter()
                .any(|u| u["kind"] == "go-runtime-random" && u["detail"] == recorded),
            "cgo {cgo}: {events:?}"
        );
        let rows = random_rows(&v);
        assert!(
            rows.iter().all(|r| !r.2.iter().any(|o| o == IN_IMAGE)),
            "cgo {cgo}: {rows:?}"
        );
        // Exec'd by a static shell (set up by the shell's supervisor at the exec stop), it has
        // no `partly sealed` line of its own: the event is a line.
        if cgo {
            continue;
        }
        let Some(busybox) = crate::static_images::busybox() else {
            skip_part!("no static busybox: the image a static shell execs");
            continue;
        };
        let script = format!("exec {exe} 2 2 1");
        let o = crate::util::run_seal(["--", busybox, "sh", "-c", &script]);
        o.ok().stderr_has_once(&format!(
            "not sealed (go-runtime-random): {exe}: {}{}{}",
            outcome::NONE,
            outcome::BECAUSE,
            outcome::NO_ROOM
        ));
    }
}
