//! A Go image's `runtime.usleep` and `runtime.gettid` answered in the image
//! (`abi/src/supervised/go_sys.rs`; set up by the supervisor in a static image,
//! `launcher/src/run/static_image/serve/go_sys.rs`, by libseal in a cgo program,
//! `shim/src/process/go_rand.rs`): no
//! notification for sysmon's naps, none for a thread's `gettid` once the supervisor has
//! numbered it. That the answers are the right ones is what
//! `go_images::a_go_programs_stop_the_world_is_not_stalled_by_its_still_clock` needs: a
//! collection stops a goroutine by a signal to its thread's tid as the runtime read it (a
//! table with wrong tids hangs that test).

use serde_json::Value;

use crate::util::{assert_runs_agree_by, have, seal};

/// `(function, caller, count)` of each row of the root process's census in the JSON at `path`.
fn rows(path: &std::path::Path) -> Vec<(String, String, u64)> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out = Vec::new();
    for call in v["processes"][0]["calls"].as_array().unwrap() {
        for c in call["callers"].as_array().unwrap() {
            // A caller in seal's in-image code has no symbol: its object names it.
            let caller = c["symbol"].as_str().or(c["object"].as_str());
            out.push((
                call["symbol"].as_str().unwrap_or("").to_string(),
                caller.unwrap_or("").to_string(),
                c["count"].as_u64().unwrap_or(0),
            ));
        }
    }
    out
}

/// Runs `body` with fixture `name` built static and, when `cc` is on PATH, with cgo, and a
/// census file's path of its own (skipping visibly without `go`, or the cgo part without `cc`).
fn each_build(name: &str, mut body: impl FnMut(bool, &std::path::Path, &std::path::Path)) {
    if !have("go") {
        skip!("go not on PATH (Debian: golang-go)");
    }
    for cgo in [false, true] {
        if cgo && !have("cc") {
            skip_part!("cc not on PATH: the cgo build");
            continue;
        }
        let bin = crate::go_images::build_go(name, cgo);
        let dir = tempfile::tempdir().unwrap();
        body(cgo, &bin, &dir.path().join("census.json"));
    }
}

#[test]
fn a_go_programs_naps_and_gettid_stay_in_the_image() {
    each_build("world", |cgo, bin, json| {
        let mut seen = Vec::new();
        assert_runs_agree_by("go world", 3, str::to_string, || {
            let mut c = seal(["census", "-q", "--json", json.to_str().unwrap(), "--"]);
            c.arg(bin);
            let o = crate::util::run_timeout(c, crate::util::TIMEOUT);
            seen.push(rows(json));
            o
        });
        for r in &seen {
            let from = |f: &str, caller: &str| {
                r.iter()
                    .filter(|(s, c, _)| s.starts_with(f) && c.starts_with(caller))
                    .map(|x| x.2)
                    .sum::<u64>()
            };
            assert_eq!(from("gettid", "runtime.gettid"), 0, "cgo {cgo}: {r:?}");
            assert_eq!(from("nanosleep", "runtime.usleep"), 0, "cgo {cgo}: {r:?}");
            // A static image's new threads take the virtual tids the supervisor left in the
            // table (their first `gettid`, in `runtime.clone`, counted at the exit as called
            // from the in-image code), and none asks it; a cgo program's keep their real tids
            // (libseal gives its C code's the virtual ones) and ask nothing.
            let clone = from("gettid", "runtime.clone");
            let taken = from("gettid", "[seal in-image gettid]");
            assert_eq!(clone, 0, "cgo {cgo}: {r:?}");
            assert!(
                if cgo { taken == 0 } else { taken >= 2 },
                "cgo {cgo}: {r:?}"
            );
        }
    });
}

/// More new threads than the supervisor leaves virtual tids for (`go_sys::LEFT`, 8): the
/// first take theirs in the image, the rest ask it, and each thread has one tid whichever
/// way it got it: `threads` locks 12 goroutines to threads of their own, reads each one's
/// tid with a raw `gettid` (the supervisor's answer, which must be the number the thread
/// took) and signals each (`tgkill`, signal 0: ESRCH for a number the supervisor does not
/// know). 5 runs, the same output; the census has 8 taken in the image and the rest sent
/// from `runtime.clone`.
#[test]
fn a_go_programs_threads_past_the_numbers_left_each_have_one_tid() {
    if !have("go") {
        skip!("go not on PATH (Debian: golang-go)");
    }
    let bin = crate::go_images::build_go("threads", false);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("census.json");
    let mut seen = Vec::new();
    let first = assert_runs_agree_by("go threads", 5, str::to_string, || {
        let mut c = seal(["census", "-q", "--json", json.to_str().unwrap(), "--"]);
        c.arg(&bin);
        let o = crate::util::run_timeout(c, crate::util::TIMEOUT);
        seen.push(rows(&json));
        o
    });
    first.stdout_is("main true distinct 12 signalled 12\n");
    for r in &seen {
        let from = |caller: &str| {
            r.iter()
                .filter(|(s, c, _)| s == "gettid" && c.starts_with(caller))
                .map(|x| x.2)
                .sum::<u64>()
        };
        assert_eq!(from("[seal in-image gettid]"), 8, "{r:?}");
        assert!(from("runtime.clone") >= 4, "{r:?}");
        assert_eq!(from("syscall."), 13, "{r:?}");
    }
}

/// A Go runtime's processor count at its start (`runtime.sched_getaffinity`, in `osinit`):
/// answered in a static image by the code the supervisor left there, from the mask it wrote
/// (the census names that code), by the supervisor in a cgo program; `--cpus` sets it either
/// way, and with the family `machine` unsealed the machine's count shows.
#[test]
fn a_go_runtimes_processor_count_is_the_sealed_one() {
    each_build("ncpu", |cgo, bin, json| {
        for (cpus, want) in [(None, 4), (Some("7"), 7), (Some("100"), 100)] {
            let mut c = seal(["census", "-q", "--json", json.to_str().unwrap()]);
            if let Some(n) = cpus {
                c.args(["--cpus", n]);
            }
            c.arg("--").arg(bin);
            let o = crate::util::run_timeout(c, crate::util::TIMEOUT);
            o.stdout_is(&format!("cpus {want} gomaxprocs {want}\n"));
            let r = rows(json);
            let from = |caller: &str| {
                r.iter()
                    .filter(|(s, c, _)| s == "sched_getaffinity" && c.starts_with(caller))
                    .map(|x| x.2)
                    .sum::<u64>()
            };
            let (image, runtime) = if cgo { (0, 1) } else { (1, 0) };
            assert_eq!(
                from("[seal in-image sched_getaffinity]"),
                image,
                "cgo {cgo}: {r:?}"
            );
            assert_eq!(
                from("runtime.sched_getaffinity"),
                runtime,
                "cgo {cgo}: {r:?}"
            );
        }
        let mut c = seal(["-q", "--unseal", "machine", "--"]);
        c.arg(bin);
        let o = crate::util::run_timeout(c, crate::util::TIMEOUT);
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        o.stdout_is(&format!("cpus {n} gomaxprocs {n}\n"));
    });
}
