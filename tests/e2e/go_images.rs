//! Go programs under seal, static (`CGO_ENABLED=0`) and dynamically linked (cgo): their
//! runtime reads its clocks and waits for its timers past libc, so the supervisor serves them
//! (`launcher/src/run/static_image/go_clock.rs`): one clock per process, still under reads,
//! moved when the runtime's timed netpoller wait expires with the image idle. Each test runs
//! `fixtures/go/world` (clocks, math/rand, crypto/rand, map order, pid, host name, a temp
//! name, a pool of goroutines on timers, a pipe read with netpoller deadlines, a dynamic and a
//! static child) five times.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::util::{assert_runs_agree_by, build_dir, fixture, have, run_timeout, seal, Output};

/// Skips the test, visibly, without `go` and, for `go_or_skip!(true)` (a cgo build), without
/// `cc`.
macro_rules! go_or_skip {
    ($cgo:expr) => {{
        if !have("go") {
            skip!("go not on PATH (Debian: golang-go)");
        }
        if $cgo && !have("cc") {
            skip!("cc not on PATH: the cgo build");
        }
    }};
}

/// `fixtures/go/world` built with `CGO_ENABLED=cgo` (once per test binary and linkage), its
/// Go caches under the build directory.
fn build_world(cgo: bool) -> PathBuf {
    build_go("world", cgo)
}

/// `fixtures/go/NAME` built with `CGO_ENABLED=cgo` (once per test binary, program and
/// linkage), its Go caches under the build directory.
pub(crate) fn build_go(name: &str, cgo: bool) -> PathBuf {
    static BUILT: std::sync::Mutex<Vec<(String, bool, PathBuf)>> =
        std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, out)) = built.iter().find(|b| b.0 == name && b.1 == cgo) {
        return out.clone();
    }
    let linkage = if cgo { "cgo" } else { "static" };
    let out = build_go_with(name, &format!("go_{name}_{linkage}"), cgo, &[]);
    built.push((name.to_string(), cgo, out.clone()));
    out
}

/// `fixtures/go/DIR` built with `CGO_ENABLED=cgo` and more `go build` flags to `NAME` in the
/// build directory.
pub(crate) fn build_go_with(dir: &str, name: &str, cgo: bool, flags: &[&str]) -> PathBuf {
    let out = build_dir().join(name);
    let st = Command::new("go")
        .arg("build")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(".")
        .current_dir(fixture(&format!("go/{dir}")))
        .env("CGO_ENABLED", if cgo { "1" } else { "0" })
        .env("GOFLAGS", "-mod=mod")
        .env("GOCACHE", build_dir().join("go-cache"))
        .env("GOPATH", build_dir().join("go-path"))
        .status()
        .expect("go build");
    assert!(st.success(), "go build of fixtures/go/{dir} failed");
    out
}

/// Runs `body` on `world` built static and, when `cc` is on PATH, with cgo (skipping the test
/// without `go`, and the cgo part without `cc`, visibly).
fn each_world(body: impl FnMut(bool, &PathBuf)) {
    each_build("world", body)
}

/// [`each_world`] for `fixtures/go/NAME`.
fn each_build(name: &str, mut body: impl FnMut(bool, &PathBuf)) {
    each_linkage(|cgo| body(cgo, &build_go(name, cgo)))
}

/// Runs `body` with `cgo` false and, when `cc` is on PATH, true (skipping the test without
/// `go`, and the cgo part without `cc`, visibly).
fn each_linkage(mut body: impl FnMut(bool)) {
    go_or_skip!(false);
    for cgo in [false, true] {
        if cgo && !have("cc") {
            skip_part!("cc not on PATH: the cgo build");
            continue;
        }
        body(cgo);
    }
}

/// The children `world` runs: a dynamic `date` and, when there is one, the static busybox.
fn children() -> Vec<String> {
    let mut c = vec!["date +%s.%N".to_string()];
    let busybox = std::path::Path::new("/usr/bin/busybox");
    let head = std::fs::read(busybox).unwrap_or_default();
    if head.len() > 64 && !head.windows(16).any(|w| w == b"/lib64/ld-linux-") {
        c.push(format!("{} date +%s", busybox.display()));
    } else {
        skip_part!("no static busybox (Debian: busybox-static): the static child");
    }
    c
}

/// One sealed run of `world` (`sleep`: its base duration; `extra`: seal's flags).
fn run_world(bin: &PathBuf, sleep: &str, extra: &[&str], limit: Duration) -> Output {
    let mut c = seal(extra.iter().chain(&["--"]));
    c.arg(bin).args(children()).env("WORLD_SLEEP", sleep);
    run_timeout(c, limit)
}

/// The lines compared: all but map order where the `go` on PATH is older than 1.22 (Go
/// 1.19–1.21 draw it from a generator inlined in the map code, per thread; docs/limits.md).
/// `os.MkdirTemp` names are one sequence per process in every version (`go_rand.rs`).
fn sealed_lines(stdout: &str) -> String {
    let maps = crate::go_rand::path_go_orders_maps();
    stdout
        .lines()
        .filter(|l| maps || !l.starts_with("map "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// What every run prints on the sealed clock, static or cgo.
fn assert_sealed_world(o: &Output, cgo: bool) {
    let want = [
        "now 2026-01-01T00:00:00Z 1767225600000000000\n",
        "since 20ms true\n",
        "pid 1000 ppid 999 host seal\n",
        "pool g0 20ms, g1 40ms, g2 20ms, g3 200ms, g4 100ms, g5 120ms, g6 20ms, g7 200ms \
         context deadline exceeded\n",
        "end 220ms\npipe 1 <nil> 40ms\npipe 0 read |0: i/o timeout 60ms\n",
    ];
    // A dynamic child starts where the program's clock stands after its timer waits (220 +
    // 60 ms), static or cgo (whose child takes its virtual pid at its `execve`).
    let _ = cgo;
    let child = "child date <nil>: 1767225600.280000000\n";
    assert!(o.stdout.contains(child), "missing {child:?}\n{}", o.show());
    for w in want {
        assert!(o.stdout.contains(w), "missing {w:?}\n{}", o.show());
    }
    if o.stdout.contains("child /usr/bin/busybox") {
        assert!(
            o.stdout
                .contains("child /usr/bin/busybox <nil>: 1767225600\n"),
            "the static child's clock\n{}",
            o.show()
        );
    }
    if cgo {
        assert!(o.stdout.contains("libc time 1767225600\n"), "{}", o.show());
    }
}

fn five_sealed_runs_agree(cgo: bool) {
    if !have("go") || (cgo && !have("cc")) {
        skip!("go (or cc for cgo) not on PATH (Debian: golang-go)");
    }
    let bin = build_world(cgo);
    let first = assert_runs_agree_by("go world", 5, sealed_lines, || {
        run_world(&bin, "20ms", &[], crate::util::TIMEOUT)
    });
    assert_sealed_world(&first, cgo);
}

/// A static Go program's `time.Now()`, `time.Since` over `time.Sleep(20ms)`, timers, tickers
/// and context deadlines print the same sealed values in five runs, and its dynamic and static
/// children see the sealed clock too (the old build printed the real time).
#[test]
fn a_static_go_program_prints_the_same_clocks_every_run() {
    five_sealed_runs_agree(false);
}

/// The same program linked with cgo: libseal gives its Go runtime a vDSO of its own, whose
/// clock reads come from a page the supervisor moves; its timer waits go to the supervisor.
#[test]
fn a_cgo_go_program_prints_the_same_clocks_every_run() {
    five_sealed_runs_agree(true);
}

/// Under `--warp` a Go program's 22 s of sleeps, timers and deadlines take no real time: the
/// run ends well inside the harness limit (the old build slept them in real time), with the
/// same sealed values as without it.
#[test]
fn warp_skips_a_go_programs_sleeps() {
    each_world(|_, bin| {
        let first = assert_runs_agree_by("go world --warp", 3, sealed_lines, || {
            run_world(bin, "2s", &["--warp"], Duration::from_secs(15))
        });
        for w in [
            "since 2s true\n",
            "pool g0 2s, g1 4s, g2 2s, g3 20s, g4 10s, g5 12s, g6 2s, g7 20s context deadline \
             exceeded\n",
            "end 22s\npipe 1 <nil> 4s\npipe 0 read |0: i/o timeout 6s\n",
        ] {
            assert!(first.stdout.contains(w), "missing {w:?}\n{}", first.show());
        }
    });
}

/// Calls of `symbol` with `detail` in process 1000 of census `v`, per caller object and symbol
/// (`site`: `None` for any).
fn census_calls(
    v: &serde_json::Value,
    symbol: &str,
    detail: &str,
    object: &str,
    site: Option<&str>,
) -> u64 {
    let p = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["vpid"] == 1000)
        .unwrap_or_else(|| panic!("no process 1000\n{v:#}"));
    crate::census::calls_at(p, symbol, detail, object, site)
}

/// The object the census names a Go runtime's reads of its clock page after (code of seal's
/// making, in no object of the image).
const PAGE_READS: &str = seal_abi::supervised::clock_page::MODULE_NAME;

/// The census counts the calls the supervisor serves for a Go runtime per process, static or
/// cgo (beside libseal's counts of its C library's): `crypto/rand`'s one `getrandom` (served in
/// the process by its entropy code, static or cgo, counted at `GetRandom`'s call); and the runtime's reads of its clock page, which are
/// no system calls: `time.now`'s 23 wall-clock reads (one per `time.Now()` the program makes),
/// none served. The old build counted nothing for cgo (no slot), served the cgo runtime's
/// clock reads, did not count a static one's, and counted a static `getrandom` at `Syscall6`
/// (and, before the cgo program's entropy was served in the process, a cgo one's).
#[test]
fn the_census_counts_a_go_runtimes_served_calls() {
    each_world(|_cgo, bin| {
        let exe = bin.to_str().unwrap();
        let (o, v) = crate::util::census_json(&["--", exe], crate::util::TIMEOUT);
        o.ok();
        let calls = |detail, object, site| census_calls(&v, "clock_gettime", detail, object, site);
        for clock in ["CLOCK_REALTIME", "CLOCK_MONOTONIC"] {
            assert_eq!(calls(clock, exe, Some("time.now")), 0, "{exe}\n{v:#}");
        }
        assert_eq!(
            calls("CLOCK_REALTIME", PAGE_READS, None),
            23,
            "{exe}\n{v:#}"
        );
        assert!(
            calls("CLOCK_MONOTONIC", PAGE_READS, None) >= 23,
            "{exe}\n{v:#}"
        );
        let site = "internal/syscall/unix.GetRandom";
        let random = census_calls(&v, "getrandom", "", exe, Some(site));
        assert_eq!(random, 1, "{exe}\n{v:#}");
    });
}

/// A Go program that reads the clock 200,000 times (`time.Now()`, a 1 ms sleep every 10,000)
/// runs at native speed sealed, static or cgo: its reads come from its clock page. The old
/// build served a cgo runtime's reads by system call (≈30–70 µs each: 2.75 s for 20,000
/// rounds on the development machine) and ran past the 15 s limit. The values are the sealed
/// ones in every run (the sleeps move the clock, 19 of them before the last read).
#[test]
fn a_go_clock_loop_runs_at_native_speed_with_the_same_values() {
    each_build("clockloop", |cgo, bin| {
        let first = assert_runs_agree_by(
            "go clockloop",
            5,
            |s| s.to_string(),
            || run_timeout(seal(["--", bin.to_str().unwrap()]), Duration::from_secs(15)),
        );
        let linkage = if cgo { "cgo" } else { "static" };
        let want = format!(
            "{linkage} 200000 2026-01-01T00:00:00.000000000Z 2026-01-01T00:00:00.019000000Z 19ms\n"
        );
        assert_eq!(first.stdout, want, "{}", first.show());
    });
}

/// Every read of the clock page is in the census, exactly: 1,001 `time.Now()` (the first and
/// 1,000 in the loop) are 1,001 `CLOCK_REALTIME` reads, none of them a system call. The old
/// build counted none for a static image (no system call) and served all of them for a cgo one.
#[test]
fn the_census_counts_every_clock_page_read() {
    each_build("clockloop", |_, bin| {
        let exe = bin.to_str().unwrap();
        let (o, v) = crate::util::census_json(&["--", exe, "1000"], crate::util::TIMEOUT);
        o.ok();
        let calls =
            |object, site| census_calls(&v, "clock_gettime", "CLOCK_REALTIME", object, site);
        assert_eq!(calls(PAGE_READS, None), 1001, "{exe}\n{v:#}");
        assert_eq!(calls(exe, None), 0, "{exe}\n{v:#}");
    });
}

/// A static image seal takes for Go (a C program carrying a Go build id note,
/// `fixtures/c/go_vdso.c`) keeps its vDSO, whose clock entry reads the image's clock page.
/// The vDSO's other entries, called directly through `AT_SYSINFO_EHDR`, give the sealed
/// values (`__vdso_time`, `__vdso_gettimeofday`: the system call, answered by the supervisor)
/// or say they are unsupported (`__vdso_getrandom`'s probe: `-ENOSYS`, so callers draw by
/// system call), the same in five runs. The old build gave the real time and a working
/// `__vdso_getrandom`.
#[test]
fn a_go_images_kept_vdso_gives_no_real_values() {
    crate::static_clock::assert_kept_vdso_gives_no_real_values(
        "go_vdso",
        &["-static"],
        "gettimeofday 0 1767225600.000000\n",
    );
}

/// `fixtures/go/entropy`, static: four goroutines one after another draw 3,000 `crypto/rand`
/// reads each (8 to 100 bytes; more than the in-image window holds, so it is refilled several
/// times), then one read larger than the window. Five sealed runs print the same values, and
/// so do four runs made at once; the census counts every read (12,001), served in the image
/// or not, at `GetRandom`. The old build counted them at the runtime's `Syscall6` (each was a
/// system call the supervisor answered), so the census half fails there; the values agreed
/// there too (the supervisor served them all).
#[test]
fn a_static_go_programs_crypto_rand_is_served_in_the_image_and_counted() {
    go_or_skip!(false);
    entropy_served_in_process(false);
}

/// The same program linked with cgo (libseal loaded): libseal's constructor sets the same up
/// (its supervisor takes the mapping), so the census counts its 12,001 reads at `GetRandom`
/// too, in libseal's slot (the window's) and the supervisor's (the rest), none at the
/// runtime's `Syscall6`. The old build served each read by a notification, counted at
/// `Syscall6`, so the census half fails there.
#[test]
fn a_cgo_go_programs_crypto_rand_is_served_in_the_process_and_counted() {
    go_or_skip!(true);
    entropy_served_in_process(true);
}

/// The cgo program built position-independent (`-buildmode=pie`): libseal finds the call with
/// the load bias, and the census names every read after `GetRandom`, the in-process ones and
/// those the supervisor served (named with the program's load bias). The old build served them
/// all and named them after the wrong symbol (`_fini`: the address without the bias).
#[test]
fn a_position_independent_cgo_go_programs_reads_are_counted_at_get_random() {
    go_or_skip!(true);
    let bin = build_go_with("entropy", "go_entropy_pie", true, &["-buildmode=pie"]);
    let exe = bin.to_str().unwrap();
    let (o, v) = crate::util::census_json(&["--", exe], crate::util::TIMEOUT);
    assert!(o.stdout.ends_with("reads 12001\ncgo\n"), "{}", o.show());
    let p = &v["processes"];
    let count = census_calls(
        &v,
        "getrandom",
        "",
        exe,
        Some("internal/syscall/unix.GetRandom"),
    );
    assert_eq!(count, 12_001, "{p:#}");
}

/// `fixtures/go/entropy` built static or with cgo: five runs one after another and four at once
/// agree; the census counts the 12,001 reads at `GetRandom`.
fn entropy_served_in_process(cgo: bool) {
    let bin = build_go("entropy", cgo);
    let exe = bin.to_str().unwrap().to_string();
    let run = move || run_timeout(seal(["--", &exe]), crate::util::TIMEOUT);
    let first = assert_runs_agree_by("go entropy", 5, |s| s.to_string(), run.clone());
    let linkage = if cgo { "cgo" } else { "static" };
    let tail = format!("reads 12001\n{linkage}\n");
    assert!(first.stdout.ends_with(&tail), "{}", first.show());
    let at_once: Vec<_> = (0..4).map(|_| std::thread::spawn(run.clone())).collect();
    for t in at_once {
        let o = t.join().unwrap();
        assert_eq!(
            o.stdout,
            first.stdout,
            "a run made beside others\n{}",
            o.show()
        );
    }
    let exe = bin.to_str().unwrap();
    let (o, v) = crate::util::census_json(&["--", exe], crate::util::TIMEOUT);
    o.ok();
    let count = |site| census_calls(&v, "getrandom", "", exe, Some(site));
    let p = &v["processes"];
    assert_eq!(count("internal/syscall/unix.GetRandom"), 12_001, "{p:#}");
    assert_eq!(count("runtime/internal/syscall.Syscall6"), 0, "{p:#}");
}

/// The same program stripped (`-ldflags=-s`), static and with cgo: seal finds `GetRandom`
/// through the runtime's function table (`pclntab`), so its reads are served in the image as
/// an unstripped binary's are: the same values in each run, all 12,001 counted at the
/// executable, and no cost note on stderr. The old build could not find it (no symbol table):
/// every read was a system call, stderr said so, and the census named them at no object of
/// the executable's for the cgo program.
#[test]
fn a_stripped_go_programs_reads_are_served_in_the_image() {
    each_linkage(|cgo| {
        let name = format!("go_entropy_stripped_{cgo}");
        let bin = build_go_with("entropy", &name, cgo, &["-ldflags=-s"]);
        let exe = bin.to_str().unwrap();
        let first = assert_runs_agree_by(
            "stripped go entropy",
            2,
            |s| s.to_string(),
            || run_timeout(seal(["--", exe]), crate::util::TIMEOUT),
        );
        assert!(first.stdout.contains("reads 12001\n"), "{}", first.show());
        assert!(
            !first
                .stderr
                .contains("crypto/rand reads are each a system call"),
            "{}",
            first.show()
        );
        let (o, v) = crate::util::census_json(&["--", exe], crate::util::TIMEOUT);
        o.ok();
        let count = census_calls(&v, "getrandom", "", exe, None);
        assert_eq!(count, 12_001, "{:#}", v["processes"]);
    });
}

/// Map order is sealed: a goroutine that fills a map and prints its keys starts the
/// iteration at the same key in every run, static and cgo (Go 1.22 and later through
/// `runtime.rand`, 1.19–1.21 through their map code's inlined generator: `go_rand.rs`), 6 runs
/// of 6; with an older `go`, 5 of 6 (seeded by seal, drawn per thread). Bare, or in a cgo
/// program on an old build (`rdtsc`), the start is one of 8 in each run.
#[test]
fn a_go_programs_map_order_is_seeded_by_seal() {
    each_build("maporder", |cgo, bin| {
        let outs: Vec<String> = (0..6)
            .map(|_| {
                let o = run_timeout(
                    seal(["-q", "--", bin.to_str().unwrap()]),
                    crate::util::TIMEOUT,
                );
                o.ok();
                o.stdout
            })
            .collect();
        let most = outs
            .iter()
            .map(|o| outs.iter().filter(|x| *x == o).count())
            .max()
            .unwrap_or(0);
        let need = if crate::go_rand::path_go_orders_maps() {
            6
        } else {
            5
        };
        assert!(
            most >= need,
            "{}: map order alike in {most} of 6 runs:\n{}",
            if cgo { "cgo" } else { "static" },
            outs.concat()
        );
    });
}

/// A cgo Go program (as the go command is) starts a static Go child with `os/exec`: a raw
/// `clone` no hook sees and a raw `execve` the supervisor follows. The child's `getpid` is a
/// virtual pid, its parent's next child number, the same in 3 runs (`go run`'s program, `go
/// test`'s binary). The old build left it the real pid: every run printed another.
#[test]
fn a_cgo_go_programs_static_child_has_a_virtual_pid() {
    go_or_skip!(true);
    let parent = build_go("runchild", true);
    let child = build_go("pids", false);
    let o = crate::static_pids::alike(3, || {
        run_timeout(
            seal([
                "-q",
                "--",
                parent.to_str().unwrap(),
                child.to_str().unwrap(),
                "child",
            ]),
            crate::util::TIMEOUT,
        )
    });
    let line = o.stdout.lines().next().unwrap_or_default();
    let pid: i32 = line
        .strip_prefix("child pid ")
        .and_then(|r| r.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{}", o.show()));
    assert!((1001..32768).contains(&pid), "{}", o.show());
    assert!(line.ends_with(" ppid 1000"), "{}", o.show());
}

/// The census's process whose image is the executable whose path ends with `name` (an exec'd
/// child's).
pub(crate) fn exec_image<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    (v["processes"].as_array().unwrap().iter())
        .find(|p| p["exe"].as_str().unwrap_or("").ends_with(name))
        .unwrap_or_else(|| panic!("no exec'd image {name}\n{v:#}"))
}

/// A static Go image that a static Go program's child execs (os/exec: `go build`'s compilers,
/// a Go test binary) gets its clock page at that exec stop, as the first image did: the
/// child's `time.Now()` loop reads are all from `[seal clock page]`, none served, and three
/// runs print the same values. The old build removed the child's vDSO and served each read
/// (~50 µs each: a sealed `go build` took 5× as long as bare).
#[test]
fn a_static_go_image_execd_by_a_static_go_child_reads_its_own_page() {
    const PAGE: &str = seal_abi::supervised::clock_page::MODULE_NAME;
    go_or_skip!(false);
    let parent = build_go("runchild", false);
    let child = build_go("clockloop", false);
    let (parent, child) = (parent.to_str().unwrap(), child.to_str().unwrap());
    let mut first: Option<String> = None;
    for _ in 0..3 {
        let args = ["--", parent, child, "20000"];
        let (o, v) = crate::util::census_json(&args, crate::util::TIMEOUT);
        o.ok();
        let p = exec_image(&v, "go_clockloop_static");
        // Every caller of `clock_gettime` in the child, by object: the page, or the image.
        let callers = (p["calls"].as_array().unwrap().iter())
            .filter(|c| c["symbol"] == "clock_gettime")
            .flat_map(|c| c["callers"].as_array().unwrap().iter());
        let (mut paged, mut served) = (0, 0);
        for c in callers {
            let n = c["count"].as_u64().unwrap();
            match c["object"] == PAGE {
                true => paged += n,
                false => served += n,
            }
        }
        assert!(
            paged >= 40_000 && served == 0,
            "page {paged}, served {served}\n{v:#}"
        );
        assert!(
            o.stdout.starts_with("static 20000 2026-01-01T00:00:00"),
            "{}",
            o.show()
        );
        if let Some(f) = &first {
            assert_eq!(f, &o.stdout, "{}", o.show());
        }
        first = Some(o.stdout);
    }
}

/// A Go program's clock does not move with its children's real running time. `childwait N`
/// keeps a 100 ms timer pending (never read) while it waits for a child that computes and one
/// that computes and sleeps 40 ms, each computing longer in each run (`N` = 1..5), then kills
/// a child blocked on a pipe at a 300 ms `context` deadline, and starts a Go child last, whose
/// clock starts at its parent's. The sleeping child's 40 ms reach the parent as it reaps the
/// child (`after nap … 40ms`): the build before printed `0s` there, its Go parents taking in
/// no child's waits. The previous build let the pending timer expire whenever the parent slept
/// through its real deadline while a child ran: `after spin … 100ms` in the runs whose child
/// computed longest, `0s` in the others. The blocked child is killed at its deadline in every
/// run. Not under `--warp`: there a parent's timer goes at the first moment it and its
/// children all look blocked, with no real deadline to wait for, and a child's start-up still
/// has such moments (docs/limits.md).
#[test]
fn a_go_programs_clock_does_not_move_with_its_childrens_running_time() {
    let want = "spun true\nafter spin 00:00:00.000000 0s\nnapped\nafter nap 00:00:00.040000 40ms\n\
                forever: signal: killed 00:00:00.340000 340ms\nchild now 00:00:00.340000\n";
    each_build("childwait", |_, bin| {
        let mut work = 0;
        let first = assert_runs_agree_by("go childwait", 5, str::to_string, || {
            work += 1;
            let mut c = seal(["--"]);
            c.arg(bin).arg(work.to_string());
            run_timeout(c, Duration::from_secs(30))
        });
        first.stdout_is(want);
    });
}

/// A Go program's stop-the-world is never kept waiting by its still clock. `stopworld` runs
/// 10 garbage collections beside a goroutine in a loop with no call in it, which only a
/// preemption signal stops; a collection waits for it in 100 µs steps (a futex wait with a
/// timeout), signalling again after each step that ends with the goroutine still running.
/// The clock stood still across such a step, so the runtime never saw one end and never
/// signalled again: the build before took 28 s for this (bare 0.2 s), and `go build`'s
/// compiler stalled ~17 s in 2 runs of 9. Each run must end within 20 s.
#[test]
fn a_go_programs_stop_the_world_is_not_stalled_by_its_still_clock() {
    each_build("stopworld", |_, bin| {
        let first = assert_runs_agree_by("go stopworld", 3, str::to_string, || {
            let mut c = seal(["--"]);
            c.arg(bin);
            run_timeout(c, Duration::from_secs(20))
        });
        first.stdout_is("start 2026-01-01T00:00:00Z\ncollections 10 churned true\n");
    });
}

/// What the supervisor keeps for each Go image (a census slot, a clock page, copies of its
/// epoll descriptor) goes when the image does. `many 120` runs 120 Go children one after
/// another with 64 descriptors allowed (soft and hard): each child's 1 ms sleep moves its
/// clock by exactly 1 ms, and every child is in the census. The build before held two
/// descriptors per child to the end of the run: from the 29th child on the sleeps took real
/// time (`slept 1.13ms`), the clock pages could not be set up, and later children went on
/// without their epoll copies, slowly.
#[test]
fn a_go_programs_hundred_children_fit_in_64_descriptors() {
    each_build("many", |cgo, bin| {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("census.json");
        let mut c = seal(["--census", json.to_str().unwrap(), "--"]);
        c.arg(bin).arg("120");
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit only, between fork and exec.
        unsafe {
            c.pre_exec(|| {
                let l = libc::rlimit {
                    rlim_cur: 64,
                    rlim_max: 64,
                };
                match libc::setrlimit(libc::RLIMIT_NOFILE, &l) {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                }
            });
        }
        let o = run_timeout(c, Duration::from_secs(120));
        o.ok()
            .stdout_is(&format!("{}ran 120\n", "slept 1ms\n".repeat(120)));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let name = bin.to_str().unwrap();
        let images = v["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["exe"] == name)
            .count();
        assert_eq!(images, 121, "cgo {cgo}: {}", o.show());
    });
}

/// What the supervisor finds in a Go executable is kept in the user's cache
/// (`go_exe.rs`), private, and the next run of the same build reads it there instead of the
/// executable: a cache file that says nothing was found (all zeros) leaves the next run's
/// runtime generator unsealed (its census says `go-runtime-random`), and without the file the
/// run reads the executable again and seals it.
#[test]
fn the_next_run_of_a_go_build_reads_what_the_first_found_from_the_users_cache() {
    go_or_skip!(false);
    let bin = build_go_with("entropy", "go_entropy_cached", false, &[]);
    let cache = tempfile::tempdir().unwrap();
    let run = || census_cached(&bin, cache.path());
    let (first, unsealed) = run();
    assert!(!unsealed, "{first}");
    // One directory, this seal build's, with one file.
    let (dir, kept) = kept_in(cache.path());
    assert_eq!(kept.len(), 1, "{kept:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(&dir), mode(&kept[0])), (0o700, 0o600));
    let len = std::fs::metadata(&kept[0]).unwrap().len() as usize;
    std::fs::write(&kept[0], vec![0u8; len]).unwrap();
    let (_, unsealed) = run();
    assert!(unsealed, "the cache's file was not read");
    std::fs::remove_file(&kept[0]).unwrap();
    let (third, unsealed) = run();
    assert!(!unsealed);
    assert_eq!(third, first, "the program's output");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "kept again");
}

/// `seal census --json` of `bin` with `XDG_CACHE_HOME` at `cache`: the program's output, and
/// whether its census says its runtime's random generator is unsealed (`go-runtime-random`).
pub(crate) fn census_cached(bin: &std::path::Path, cache: &std::path::Path) -> (String, bool) {
    let json = cache.join("census.json");
    let mut c = seal(["census", "--json", json.to_str().unwrap(), "--"]);
    c.arg(bin).env("XDG_CACHE_HOME", cache);
    let o = run_timeout(c, crate::util::TIMEOUT);
    o.ok();
    let census = std::fs::read_to_string(&json).unwrap();
    (o.stdout, census.contains("go-runtime-random"))
}

/// The user's cache's one directory (this seal build's) under `cache`, and its files.
pub(crate) fn kept_in(cache: &std::path::Path) -> (PathBuf, Vec<PathBuf>) {
    let list = |d: &std::path::Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| !p.ends_with("census.json"))
            .collect()
    };
    let builds = list(&cache.join("seal/go-exe"));
    assert_eq!(builds.len(), 1, "{builds:?}");
    let kept = list(&builds[0]);
    (builds[0].clone(), kept)
}
