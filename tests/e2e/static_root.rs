//! A static root command (`seal -- static-prog`) exec'd by the launcher's child under
//! supervision, without the `seal __exec-static` trampoline
//! (`launcher/src/run/static_image/root.rs`): its process runs one image, the census and
//! stderr say what they said, and the image finds on its stack exactly what the trampoline
//! gave it. Where the child cannot set the supervision up (here: a seal inside a sealed run),
//! the trampoline does it as before.

use std::path::{Path, PathBuf};

use crate::static_images::{build_musl_c, have_static_glibc};
use crate::util::{build_c, census_json, have, run_timeout, seal, Output, TIMEOUT};
use seal_abi::supervised::EXEC_STATIC_ARG as EXEC_STATIC;

/// `fixtures/c/NAME.c` built static: with glibc when there is a `libc.a`, else with musl.
fn build_static(name: &str) -> Option<PathBuf> {
    if have_static_glibc() {
        Some(build_c(name, &["-static"]))
    } else if have("musl-gcc") {
        Some(build_musl_c(name))
    } else {
        None
    }
}

macro_rules! static_or_skip {
    ($name:expr) => {{
        match build_static($name) {
            Some(b) => b,
            None => skip!("no static libc (libc.a) and no musl-gcc"),
        }
    }};
}

/// The census of `seal census --json F [ENV] -- BIN ARGS`: its output and its one process,
/// asserted to be the only one.
fn root_census(runtime_dir: &Path, bin: &Path, args: &[&str]) -> (Output, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("census.json");
    let mut c = seal(["census", "--json", json.to_str().unwrap(), "--"]);
    c.arg(bin).args(args).env("XDG_RUNTIME_DIR", runtime_dir);
    let o = run_timeout(c, TIMEOUT);
    o.ok();
    let text = std::fs::read_to_string(&json).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 1, "one process\n{text}\n{}", o.show());
    (o, procs[0].clone())
}

/// The images a process ran before its last (the census's `execs`).
fn earlier_images(p: &serde_json::Value) -> Vec<String> {
    p["execs"]
        .as_array()
        .map(|a| a.iter().map(|e| e.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

/// A private directory for run directories (mode 0700, as seal wants), `extra` bytes of name
/// below a temporary directory.
fn runtime_dir(parent: &Path, extra: usize) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let d = parent.join("r".repeat(extra.max(1)));
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    d
}

/// The root's process runs the static binary as its only image: no `seal` image before it,
/// no exec or wait of the trampoline's in its census, and the one `static-binary-supervised`
/// report (the launcher's, as libseal made it in the trampoline). On the old build the census
/// lists the trampoline's image and its `execv` and `poll`.
#[test]
fn a_static_root_command_is_its_processs_only_image() {
    let bin = static_or_skip!("static_counts");
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime_dir(tmp.path(), 1);
    let mut outs = Vec::new();
    for _ in 0..3 {
        let (o, p) = root_census(&rt, &bin, &[]);
        assert_eq!(p["vpid"], 1000, "{p}");
        assert_eq!(p["exe"], bin.to_str().unwrap(), "{p}");
        assert!(earlier_images(&p).is_empty(), "the trampoline ran\n{p}");
        let families: Vec<&str> = p["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["family"].as_str().unwrap())
            .collect();
        assert!(
            !families.contains(&"exec") && !families.contains(&"wait"),
            "the trampoline's calls\n{p}"
        );
        let unsealed = &p["unsealed"];
        assert_eq!(
            unsealed,
            &serde_json::json!([{"kind": "static-binary-supervised", "detail": bin.to_str().unwrap()}]),
            "{p}"
        );
        o.stderr_has_once(&format!(
            "partly sealed (static-binary-supervised): {}: clocks are read from a page",
            bin.display()
        ));
        outs.push(o);
    }
    crate::util::assert_same_stdout("seal -- static_counts", &outs);
    outs[0].stdout_has(" pid 2000 ").stdout_has(" host seal");
}

/// What the image finds on its stack (every environment entry in order, the arguments, the
/// file name, the stack address, pid and parent pid) is the same exec'd by the launcher's
/// child as by the trampoline (run here as the root command itself, `seal __exec-static PATH
/// ARGV0 ARGS…`, the command std runs when the child cannot set the supervision up), under
/// `seal --` and under `seal verify`. A run directory whose socket path is past
/// `sockaddr_un`'s 108 bytes (no server can listen there) changes nothing: the root's
/// supervisor is reached through a socket pair.
#[test]
fn a_static_root_finds_on_its_stack_what_the_trampoline_gave_it() {
    let bin = static_or_skip!("static_env");
    let tmp = tempfile::tempdir().unwrap();
    let (short, long) = (runtime_dir(tmp.path(), 1), runtime_dir(tmp.path(), 110));
    let args = ["one", "two words"];
    let seal_bin = crate::util::seal_bin();
    let b = bin.to_str().unwrap();
    let tramp = [EXEC_STATIC, b, b, args[0], args[1]];
    let (direct, p) = root_census(&short, &bin, &args);
    assert!(earlier_images(&p).is_empty(), "{p}");
    let (far, p) = root_census(&long, &bin, &args);
    assert!(earlier_images(&p).is_empty(), "{p}");
    let (trampoline, p) = root_census(&short, &seal_bin, &tramp);
    assert_eq!(
        earlier_images(&p).len(),
        1,
        "the trampoline did not run\n{p}"
    );
    direct.same_stdout_as(&trampoline).same_stdout_as(&far);
    direct
        .stdout_has("env LIBSEAL_GEN=1\n")
        .stdout_has("pid 1000 ppid 999");
    let verify = |prog: &Path, args: &[&str]| {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("verify.json");
        let mut c = seal([
            "verify",
            "-q",
            "-n",
            "2",
            "--json",
            json.to_str().unwrap(),
            "--",
        ]);
        c.arg(prog).args(args).env("XDG_RUNTIME_DIR", &short);
        run_timeout(c, TIMEOUT).ok();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(v["identical"], true, "{v}");
        v["digests"][0]["digest"].as_str().unwrap().to_owned()
    };
    assert_eq!(verify(&bin, &args), verify(&seal_bin, &tramp));
}

/// Nested: a seal inside a sealed run starts no server of its own (its fork would carry the
/// outer run's libseal), so its static root goes through the trampoline, sealed all the same.
#[test]
fn a_nested_seals_static_root_still_goes_through_the_trampoline() {
    let bin = static_or_skip!("static_counts");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("census.json");
    let seal_bin = crate::util::seal_bin();
    let (outer, _) = census_json(
        &[
            "--",
            seal_bin.to_str().unwrap(),
            "census",
            "--json",
            json.to_str().unwrap(),
            "--",
            bin.to_str().unwrap(),
        ],
        TIMEOUT,
    );
    outer.ok().stdout_has(" pid 2000 ").stdout_has(" host seal");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let p = &v["processes"][0];
    assert_eq!(earlier_images(p).len(), 1, "{v}");
    assert_eq!(p["unsealed"][0]["kind"], "static-binary-supervised", "{v}");
}
