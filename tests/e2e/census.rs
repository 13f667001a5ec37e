//! End-to-end tests: census. Exact counts per process and per calling object (main
//! executable, a dlopen'd plugin, libpython), counts that survive SIGKILL, parent links across
//! bash -> python -> C, and a census JSON that is byte-identical run after run.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;

use crate::util::*;

/// Builds a C fixture once per test binary run: tests run in parallel, and one test must not
/// rewrite an executable while another runs it or reads its symbols.
fn built(name: &'static str, extra: &'static [&'static str]) -> PathBuf {
    static BUILT: Mutex<BTreeMap<&'static str, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut m = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    m.entry(name)
        .or_insert_with(|| build_c(name, extra))
        .clone()
}

/// Calls of `symbol` with `detail` (`""` for none) in census process `p` (one element of a
/// census JSON's `processes`), summed over its callers at `object` (and, `site: Some`, that
/// symbol of it).
pub(crate) fn calls_at(
    p: &Value,
    symbol: &str,
    detail: &str,
    object: &str,
    site: Option<&str>,
) -> u64 {
    p["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["symbol"] == symbol && c["detail"].as_str().unwrap_or("") == detail)
        .flat_map(|c| c["callers"].as_array().unwrap().iter())
        .filter(|c| c["object"] == object && site.is_none_or(|s| c["symbol"] == s))
        .map(|c| c["count"].as_u64().unwrap())
        .sum()
}

/// Runs `seal census --json FILE -- cmd`; returns the output and the parsed census.
/// Seal options may precede the command when `cmd` contains its own `--`.
fn census_of(cmd: &[&str]) -> (Output, Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("census.json");
    let mut args = vec!["census", "--json", json.to_str().unwrap()];
    if !cmd.contains(&"--") {
        args.push("--");
    }
    args.extend_from_slice(cmd);
    let out = run_seal(&args);
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("no census JSON ({e})\n{}", out.show()));
    let v: Value = serde_json::from_str(&text).unwrap();
    (out, v, text)
}

fn processes(c: &Value) -> &Vec<Value> {
    c["processes"].as_array().expect("processes")
}

fn process(c: &Value, vpid: i64) -> &Value {
    processes(c)
        .iter()
        .find(|p| p["vpid"] == vpid)
        .unwrap_or_else(|| panic!("no process {vpid} in\n{c:#}"))
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// Calls of `symbol` in process `p`, summed over details, as (object basename, caller symbol,
/// count) triples.
fn callers(p: &Value, symbol: &str) -> Vec<(String, Option<String>, u64)> {
    let mut out = Vec::new();
    for call in p["calls"].as_array().unwrap() {
        if call["symbol"] != symbol {
            continue;
        }
        for c in call["callers"].as_array().unwrap() {
            out.push((
                basename(c["object"].as_str().unwrap()).to_string(),
                c["symbol"].as_str().map(str::to_string),
                c["count"].as_u64().unwrap(),
            ));
        }
    }
    out
}

/// Calls of any function of `family` in process `p`, as (object basename, count) pairs.
fn family_callers(p: &Value, family: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for call in p["calls"].as_array().unwrap() {
        if call["family"] == family {
            for c in call["callers"].as_array().unwrap() {
                out.push((
                    basename(c["object"].as_str().unwrap()).to_string(),
                    c["count"].as_u64().unwrap(),
                ));
            }
        }
    }
    out
}

/// The calls of (object basename, count) pairs made by the objects that `from` accepts.
fn sum_from(calls: impl IntoIterator<Item = (String, u64)>, from: impl Fn(&str) -> bool) -> u64 {
    calls
        .into_iter()
        .filter(|(o, _)| from(o))
        .map(|(_, n)| n)
        .sum()
}

/// Calls of `symbol` made by the objects (basenames) that `from` accepts.
fn count_where(p: &Value, symbol: &str, from: impl Fn(&str) -> bool) -> u64 {
    sum_from(callers(p, symbol).into_iter().map(|(o, _, n)| (o, n)), from)
}

/// Calls of `symbol` made by the object named `object` (basename).
fn count_from(p: &Value, symbol: &str, object: &str) -> u64 {
    count_where(p, symbol, |o| o == object)
}

/// Calls of any function of `family` made by the objects (basenames) that `from` accepts.
fn family_count_where(p: &Value, family: &str, from: impl Fn(&str) -> bool) -> u64 {
    sum_from(family_callers(p, family), from)
}

/// Every caller of `symbol` that is not `object` must be glibc or the loader (calls libc
/// itself makes, e.g. at start-up, are attributed to libc, never to the program).
fn others_are_libc(p: &Value, symbol: &str, object: &str) {
    for (obj, sym, n) in callers(p, symbol) {
        if obj != object {
            assert!(
                obj.starts_with("libc.so") || obj.starts_with("ld-linux"),
                "{symbol}: {n} calls from unexpected object {obj} ({sym:?})\n{p:#}"
            );
        }
    }
}

#[test]
fn counts_are_exact_per_process_with_the_program_as_caller() {
    let exe = built("census_counts", &[]);
    let exe_s = exe.to_str().unwrap();
    let (out, c, _) = census_of(&[exe_s]);
    out.ok();
    assert_eq!(
        out.stdout, "child exit 3\n",
        "stdout must stay the command's own"
    );
    let name = basename(exe_s);

    let root = process(&c, 1000);
    assert_eq!(root["parent_vpid"], Value::Null);
    assert_eq!(root["exit"]["code"], 0, "{root:#}");
    assert_eq!(count_from(root, "time", name), 7, "{root:#}");
    assert_eq!(count_from(root, "getrandom", name), 3, "{root:#}");
    assert!(callers(root, "time")
        .iter()
        .any(|c| c.0 == name && c.1.as_deref() == Some("parent_reads")));
    others_are_libc(root, "time", name);
    others_are_libc(root, "getrandom", name);

    let children: Vec<&Value> = processes(&c)
        .iter()
        .filter(|p| p["parent_vpid"] == 1000)
        .collect();
    assert_eq!(children.len(), 1, "one forked child expected\n{c:#}");
    let child = children[0];
    assert_eq!(count_from(child, "time", name), 2, "{child:#}");
    assert_eq!(count_from(child, "getrandom", name), 0, "{child:#}");
    assert_eq!(child["exit"]["code"], 3, "{child:#}");
    assert!(callers(child, "time")
        .iter()
        .any(|c| c.1.as_deref() == Some("child_reads")));

    // The table (stderr) says the same, readable at 80 columns.
    out.stderr_has(&format!("7 from {name} parent_reads"));
    out.stderr_has(&format!("2 from {name} child_reads"));
    // (A machine without cpuid faulting adds a one-line warning, which is not the table.)
    for l in out
        .stderr
        .lines()
        .filter(|l| !l.starts_with("seal: warning: "))
    {
        assert!(l.chars().count() <= 80, "table line wider than 80: {l:?}");
    }
}

#[test]
fn calls_from_a_dlopened_object_are_attributed_to_it() {
    let plugin = built("census_plugin", &["-shared", "-fPIC"]);
    let exe = built("census_dlopen", &["-ldl"]);
    let (out, c, _) = census_of(&[exe.to_str().unwrap(), plugin.to_str().unwrap()]);
    out.ok();
    assert_eq!(out.stdout, "plugin made 4 reads\n");
    let root = process(&c, 1000);
    let pname = basename(plugin.to_str().unwrap());
    assert!(
        callers(root, "time").contains(&(pname.to_string(), Some("plugin_reads".into()), 4)),
        "{root:#}"
    );
    assert_eq!(
        count_from(root, "time", basename(exe.to_str().unwrap())),
        1,
        "{root:#}"
    );
    assert_eq!(count_from(root, "time", "[unknown]"), 0, "{root:#}");
}

/// A library constructor that runs before libseal's (a dependency of the program) and calls a
/// hook: the image is set up at that call, which is counted and attributed to the library (it
/// was lost before), and the census takes the arguments from `/proc/self/cmdline`, since
/// libseal's constructor, which hands them over, has not run yet.
#[test]
fn a_call_from_an_earlier_constructor_is_counted_with_the_arguments() {
    let lib = built("early_lib", &["-shared", "-fPIC"]);
    let exe = build_c("early_main", &[lib.to_str().unwrap()]);
    let exe = exe.to_str().unwrap();
    let (out, c, _) = census_of(&[exe, "one", "two words"]);
    out.ok();
    assert_eq!(out.stdout, "1767225600 3\n");
    let root = process(&c, 1000);
    assert_eq!(
        root["argv"],
        serde_json::json!([exe, "one", "two words"]),
        "{root:#}"
    );
    let lname = basename(lib.to_str().unwrap()).to_string();
    assert_eq!(
        callers(root, "time"),
        vec![(lname, Some("early".to_string()), 1)],
        "{root:#}"
    );
}

#[test]
fn a_short_process_census_holds_one_page() {
    // Census slots are sparse regions of the run table file: a page exists once written, and
    // a short image's header, counts, modules and text share the first page. After 20 short
    // processes, a sealed Python (the last slot) measures each slot's written bytes with
    // SEEK_DATA/SEEK_HOLE: each `true` one page, where a reserved file was 870 KiB (and four
    // pages before the head tables), and two on a machine without cpuid faulting before its
    // cause moved into the header.
    let Some(py) = pythons().into_iter().next() else {
        skip!("no python3");
    };
    let script = format!(
        "i=0; while [ $i -lt 20 ]; do /bin/true; i=$((i+1)); done; \
         \"$PY\" \"$MEASURE\" {} {}",
        seal_abi::RunTable::REAL_MAP_OFFSET,
        seal_abi::CENSUS_SLOT_BYTES
    );
    let mut cmd = seal(["-q", "--", "sh", "-c", &script]);
    cmd.env("PY", &py)
        .env("MEASURE", fixture("python/census_slots.py"));
    let out = run_timeout(cmd, TIMEOUT);
    out.ok();
    let sizes: Vec<u64> = out
        .stdout
        .lines()
        .filter(|l| !l.starts_with("table"))
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    let one_page = sizes.iter().filter(|&&n| n == 4096).count();
    assert!(
        one_page >= 20 && sizes.iter().all(|&n| n > 0 && n <= 16 << 10),
        "{one_page} census slots of one page; sizes {sizes:?}\n{}",
        out.show()
    );
}

/// A Python image's census backs the pages of its frame tables as they are used, not the
/// 416 KiB region at start (nor in each fork child of a Python process).
#[test]
fn a_python_census_backs_only_what_it_uses() {
    let Some(py) = pythons().into_iter().next() else {
        skip!("no python3");
    };
    let code = "import re, subprocess; subprocess.run(['true']); \
                d = re.search(r'/\\S*/seal-run-[0-9a-f]+', open('/proc/self/maps').read()).group(0); \
                print(subprocess.run(['du', '-B1', '-s', d], capture_output=True, text=True).stdout.split()[0])";
    let out = run_seal(["-q", "--", py.to_str().unwrap(), "-c", code]);
    out.ok();
    let total: u64 = out
        .stdout
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}", out.show()));
    // Python and its children (two fork children, `true` and `du`): census files, run table
    // and file-time table, ~620 KiB. Backed whole, the Python region alone was 416 KiB in each
    // of the Python image and its two fork children.
    assert!(
        total <= 1 << 20,
        "run directory {total} bytes\n{}",
        out.show()
    );
}

#[test]
fn counts_survive_sigkill() {
    let exe = built("census_killed", &[]);
    let exe_s = exe.to_str().unwrap();
    let (out, c, _) = census_of(&[exe_s]);
    out.code_is(128 + 9);
    assert_eq!(out.stdout, "about to be killed\n");
    let root = process(&c, 1000);
    assert_eq!(root["exit"]["signal"], 9, "{root:#}");
    let name = basename(exe_s);
    assert_eq!(count_from(root, "time", name), 5, "{root:#}");
    assert_eq!(count_from(root, "getrandom", name), 2, "{root:#}");
    out.stderr_has("killed by SIGKILL (9)");
}

#[test]
fn threads_counting_at_one_call_site_lose_no_call() {
    let exe = built("census_threads", &[]);
    let exe_s = exe.to_str().unwrap();
    for _ in 0..3 {
        let (out, c, _) = census_of(&[exe_s]);
        out.ok();
        let root = process(&c, 1000);
        let name = basename(exe_s);
        assert!(
            callers(root, "time").contains(&(name.into(), Some("thread_reads".into()), 102_000)),
            "{root:#}"
        );
        others_are_libc(root, "time", name);
    }
}

#[test]
fn a_child_killed_by_sigkill_keeps_its_counts_and_shows_signal_9() {
    let exe = built("census_killed", &[]);
    let exe_s = exe.to_str().unwrap();
    let (out, c, _) = census_of(&[exe_s, "child"]);
    out.ok();
    assert_eq!(out.stdout, "about to be killed\nchild killed by 9\n");
    let name = basename(exe_s);
    let child = processes(&c)
        .iter()
        .find(|p| p["parent_vpid"] == 1000)
        .unwrap_or_else(|| panic!("no child in\n{c:#}"));
    assert_eq!(child["exit"]["signal"], 9, "{child:#}");
    assert_eq!(count_from(child, "time", name), 2, "{child:#}");
    assert_eq!(count_from(child, "getrandom", name), 2, "{child:#}");
    assert_eq!(process(&c, 1000)["exit"]["code"], 0);
}

#[test]
fn a_family_turned_off_is_an_unsealed_event_and_still_counted() {
    let exe = built("census_counts", &[]);
    let (out, c, _) = census_of(&["--unseal", "time", "--", exe.to_str().unwrap(), "nofork"]);
    out.ok();
    let root = process(&c, 1000);
    assert_eq!(count_from(root, "time", basename(exe.to_str().unwrap())), 7);
    let events = root["unsealed"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "family-off" && e["detail"] == "time"),
        "{root:#}"
    );
    assert!(
        !events.iter().any(|e| e["detail"] == "random"),
        "random is sealed\n{root:#}"
    );
}

/// The real interpreter behind `python3` (pyenv installs a shell-script shim on PATH).
fn real_python(program: &str) -> Option<PathBuf> {
    let out = run_plain(program, ["-c", "import sys; print(sys.executable)"]);
    (out.code == Some(0)).then(|| PathBuf::from(out.stdout.trim()))
}

fn pythons() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = Vec::new();
    for p in ["python3", "/usr/bin/python3"] {
        if (p.starts_with('/') && Path::new(p).exists()) || (!p.starts_with('/') && have(p)) {
            if let Some(real) = real_python(p) {
                let canon = std::fs::canonicalize(&real).unwrap_or(real);
                if !v.contains(&canon) {
                    v.push(canon);
                }
            }
        }
    }
    v
}

#[test]
fn python_reads_clocks_from_libpython_and_getrandom_at_startup() {
    let pys = pythons();
    if pys.is_empty() {
        skip!("no python3");
    }
    let script = fixture("python/census_clock.py");
    for py in pys {
        // The hash secret unsealed: the interpreter then reads the RNG at start-up, as it does
        // outside seal; `import random` seeds from it once more.
        let (py_s, script_s) = (py.to_str().unwrap(), script.to_str().unwrap());
        let (out, c, _) = census_of(&["--unseal", "hashseed", "--", py_s, script_s]);
        out.ok();
        assert_eq!(out.stdout, "ok\n");
        let root = process(&c, 1000);
        let exe = basename(root["exe"].as_str().unwrap()).to_string();
        // libpython when the interpreter links it dynamically, else the executable itself.
        let is_interp = |o: &str| o.starts_with("libpython") || o == exe;
        let clock = count_where(root, "clock_gettime", is_interp);
        assert!(
            clock >= 5,
            "{}: clock_gettime from the interpreter: {clock}\n{root:#}",
            py.display()
        );
        // getrandom(), or syscall(SYS_getrandom) on builds that bypass the libc wrapper.
        let rng = family_count_where(root, "random", is_interp);
        assert!(
            rng >= 2,
            "{}: start-up and `random` RNG reads from the interpreter: {rng}\n{root:#}",
            py.display()
        );
    }
}

#[test]
fn a_three_level_tree_has_correct_parent_links() {
    let Some(py) = pythons().into_iter().next() else {
        skip!("no python3");
    };
    let exe = built("census_counts", &[]);
    let sh = fixture("bash/census_tree.sh");
    let pyf = fixture("python/census_tree.py");
    let cmd = [
        "bash",
        sh.to_str().unwrap(),
        py.to_str().unwrap(),
        pyf.to_str().unwrap(),
        exe.to_str().unwrap(),
        "nofork",
    ];
    let (out, c, _) = census_of(&cmd);
    out.ok();
    assert_eq!(
        out.stdout,
        "done\npython: child exited 0\nbash: python exited 0\n"
    );
    let by_exe = |name: &str| -> Vec<&Value> {
        processes(&c)
            .iter()
            .filter(|p| basename(p["exe"].as_str().unwrap()) == name)
            .collect()
    };
    let cname = basename(exe.to_str().unwrap());
    let cprocs = by_exe(cname);
    assert_eq!(cprocs.len(), 1, "{c:#}");
    let cp = cprocs[0];
    assert_eq!(count_from(cp, "time", cname), 7, "{cp:#}");
    assert_eq!(count_from(cp, "getrandom", cname), 3, "{cp:#}");
    assert_eq!(cp["exit"]["code"], 0, "{cp:#}");
    let pyp = process(&c, cp["parent_vpid"].as_i64().expect("C has a parent"));
    assert!(
        basename(pyp["exe"].as_str().unwrap()).starts_with("python"),
        "parent of the C program is not python\n{c:#}"
    );
    let root = process(
        &c,
        pyp["parent_vpid"].as_i64().expect("python has a parent"),
    );
    assert_eq!(root["vpid"], 1000, "{c:#}");
    assert_eq!(basename(root["exe"].as_str().unwrap()), "bash");
    assert_eq!(root["parent_vpid"], Value::Null);
    // Each image's arguments, as /proc/self/cmdline shows them at its start (libseal takes
    // them from its constructor's argv).
    let argv = |p: &Value| -> Vec<String> {
        p["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(argv(root), cmd, "{c:#}");
    assert_eq!(argv(cp)[0], exe.to_str().unwrap(), "{cp:#}");
    assert_eq!(
        argv(pyp)[..2],
        [py.to_str().unwrap(), pyf.to_str().unwrap()],
        "{pyp:#}"
    );
}

#[test]
fn census_json_is_identical_across_runs() {
    let exe = built("census_counts", &[]);
    let exe_s = exe.to_str().unwrap();
    let mut commands: Vec<Vec<String>> = vec![vec![exe_s.to_string()]];
    // A tree with an interpreter in the middle: fork, exec, C extensions, pid translation.
    if let Some(py) = pythons().into_iter().next() {
        commands.push(vec![
            "bash".into(),
            fixture("bash/census_tree.sh").to_str().unwrap().into(),
            py.to_str().unwrap().into(),
            fixture("python/census_tree.py").to_str().unwrap().into(),
            exe_s.into(),
        ]);
    }
    for cmd in commands {
        let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let (first_out, _, first) = census_of(&cmd);
        first_out.ok();
        for run in 2..=5 {
            let (out, _, again) = census_of(&cmd);
            out.ok();
            assert_eq!(
                first, again,
                "census JSON of run {run} of {cmd:?} differs from run 1\n=== run 1 ===\n{first}\n=== run {run} ===\n{again}"
            );
            assert_eq!(
                first_out.stderr, out.stderr,
                "census table of {cmd:?} differs in run {run}"
            );
        }
    }
}

/// A sealed program that lowers its own address-space limit (`ulimit -v`, as test harnesses
/// do to guard their memory) can still start sealed, counted children: each image maps the
/// run table and its own census slot (two mappings of ~0.9 MiB), never the whole 0.9 TiB
/// sparse file, which would leave such a program unable to map anything.
#[test]
fn under_an_address_space_limit_every_process_is_still_counted() {
    let script = "ulimit -v 1000000; \
                  sh -c 'grep -c run.table /proc/self/maps'; \
                  date +%s; (date +%Y; :); sh -c 'date +%m'";
    let (out, c, _) = census_of(&["bash", "-c", script]);
    out.ok();
    assert_eq!(out.stdout, "2\n1767225600\n2026\n01\n", "{}", out.show());
    out.stderr_lacks("cannot");
    let dates: Vec<&Value> = processes(&c)
        .iter()
        .filter(|p| basename(p["exe"].as_str().unwrap()) == "date")
        .collect();
    assert_eq!(dates.len(), 3, "{c:#}");
    for p in dates {
        assert!(family_count_where(p, "time", |_| true) > 0, "{p:#}");
    }
}

/// The run table file is sparse but long: a file size limit (`ulimit -f`) bounds its census
/// slots instead of killing seal with SIGXFSZ. The first process past the last slot says so,
/// once, and the run goes on sealed.
#[test]
fn a_file_size_limit_bounds_the_census_slots_and_says_so_once() {
    let pid_max: usize = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 22)
        .max(seal_abi::VPID_LIMIT);
    // bash counts `ulimit -f` in KiB: room for the table and three slots.
    let kib = (seal_abi::RunTable::census_offset(pid_max, 3) + 4096).div_ceil(1024);
    let mut cmd = command("bash");
    cmd.args([
        "-c",
        &format!(
            "ulimit -f {kib}; exec \"$SEAL\" -- sh -c \
             'for i in 1 2 3 4 5; do /bin/true; done; date +%s'"
        ),
    ])
    .env("SEAL", seal_bin());
    let out = run_timeout(cmd, TIMEOUT);
    out.ok();
    assert_eq!(out.stdout, "1767225600\n", "{}", out.show());
    let said = out
        .stderr
        .matches("all 3 census slots of the run are taken")
        .count();
    assert_eq!(said, 1, "{}", out.show());
}

/// Every image's census names its program as `/proc/self/exe` does (links followed, a script
/// by its interpreter), also when one path is a copy, then a link to one program, then to
/// another. An image of a program the run already ran under the same name takes the name from
/// the run table rather than reading the link (strace: one `readlink` per program and name).
#[test]
fn each_image_names_its_program_and_repeats_skip_the_link() {
    let dir = tempfile::tempdir().unwrap();
    // Each run in a directory of its own ($1).
    let script = "for i in 1 2 3; do /bin/true; done; cp /bin/true $1/prog; $1/prog; $1/prog; \
         rm $1/prog; ln -s /bin/false $1/prog; $1/prog; ln -sf /bin/true $1/prog; $1/prog; \
         printf '#!/bin/sh\\n' > $1/script; chmod +x $1/script; $1/script; $1/script";
    let fresh = |name: &str| {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        d.to_str().unwrap().to_string()
    };
    let d = fresh("census");
    let real = |p: &str| std::fs::canonicalize(p).unwrap().display().to_string();
    let (out, c, _) = census_of(&["sh", "-c", script, "sh", &d]);
    out.ok();
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    for p in processes(&c) {
        let argv: Vec<&str> = p["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let exe = p["exe"].as_str().unwrap().to_string();
        *seen
            .entry((argv.last().unwrap().to_string(), exe))
            .or_default() += 1;
    }
    let (prog, scr) = (format!("{d}/prog"), format!("{d}/script"));
    let want = [
        (("/bin/true".to_string(), real("/bin/true")), 3),
        ((prog.clone(), prog.clone()), 2),
        ((prog.clone(), real("/bin/false")), 1),
        ((prog.clone(), real("/bin/true")), 1),
        ((scr.clone(), real("/bin/sh")), 2),
    ];
    for (k, n) in want {
        assert_eq!(seen.get(&k), Some(&n), "{k:?} in {seen:#?}");
    }
    if !have("strace") {
        return report_skip(module_path!(), true, "strace not on PATH");
    }
    let d = fresh("strace");
    let (o, log) = sealed_strace(
        &["-e", "trace=execve,readlinkat"],
        &["sh", "-c", script, "sh", &d],
    );
    o.ok();
    let (prog, scr) = (format!("{d}/prog"), format!("{d}/script"));
    // Per program name: images started, and images that read the link.
    let (mut pending, mut current) = (BTreeMap::new(), BTreeMap::new());
    let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for line in log.lines() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        if let Some(name) = rest.trim_start().strip_prefix("execve(\"") {
            pending.insert(pid.to_string(), name.split('"').next().unwrap().to_string());
        }
        if rest.contains("execve") && rest.ends_with("= 0") {
            let name = pending[pid].clone();
            counts.entry(name.clone()).or_default().0 += 1;
            current.insert(pid.to_string(), name);
        }
        if rest.contains("readlinkat(AT_FDCWD, \"/proc/self/exe\"") {
            counts.entry(current[pid].clone()).or_default().1 += 1;
        }
    }
    assert_eq!(counts.get("/bin/true"), Some(&(3, 1)), "{log}");
    assert_eq!(counts.get(&prog), Some(&(4, 3)), "{log}");
    assert_eq!(counts.get(&scr), Some(&(2, 1)), "{log}");
}
