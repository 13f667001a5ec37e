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

/// `(function, caller)` of each row of the root process's census in the JSON at `path`.
fn rows(path: &std::path::Path) -> Vec<(String, String, u64)> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out = Vec::new();
    for call in v["processes"][0]["calls"].as_array().unwrap() {
        for c in call["callers"].as_array().unwrap() {
            out.push((
                call["symbol"].as_str().unwrap_or("").to_string(),
                c["symbol"].as_str().unwrap_or("").to_string(),
                c["count"].as_u64().unwrap_or(0),
            ));
        }
    }
    out
}

#[test]
fn a_go_programs_naps_and_gettid_stay_in_the_image() {
    if !have("go") {
        skip!("go not on PATH (Debian: golang-go)");
    }
    for cgo in [false, true] {
        if cgo && !have("cc") {
            skip_part!("cc not on PATH: the cgo build");
            continue;
        }
        let bin = crate::go_images::build_go("world", cgo);
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("census.json");
        let mut seen = Vec::new();
        assert_runs_agree_by("go world", 3, str::to_string, || {
            let mut c = seal(["census", "-q", "--json", json.to_str().unwrap(), "--"]);
            c.arg(&bin);
            let o = crate::util::run_timeout(c, crate::util::TIMEOUT);
            seen.push(rows(&json));
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
            // A static image's threads are numbered by the supervisor at their first
            // `gettid` (in `runtime.clone`'s new thread); a cgo program's keep their real tids
            // (libseal gives its C code's the virtual ones) and ask nothing.
            let clone = from("gettid", "runtime.clone");
            assert!(
                if cgo { clone == 0 } else { clone >= 2 },
                "cgo {cgo}: {r:?}"
            );
        }
    }
}
