//! A static C image's clock read at native speed: its vDSO stays, and its
//! `__vdso_clock_gettime`, `__vdso_gettimeofday` and `__vdso_time` read and tick a clock page
//! the supervisor shares with it (`seal_abi::supervised::clock_page`, `Kind::Ticking`), with
//! exactly the values the supervisor serves by system call (a logical clock per process, one
//! tick a read). Built with glibc `-static` and `musl-gcc -static` (musl reads `gettimeofday`
//! and `time` through `clock_gettime`).

use std::path::PathBuf;
use std::time::Duration;

use crate::static_images::{build_musl_c, have_static_glibc};
use crate::util::{assert_runs_agree_by, build_c, have, run_timeout, seal};

/// `fixtures/c/static_clockloop.c`, built with each static libc there is (`(libc, binary)`),
/// once per test process (the musl build's temp name is made from the pid).
fn builds() -> Vec<(&'static str, PathBuf)> {
    static BUILT: std::sync::Mutex<Option<Vec<(&'static str, PathBuf)>>> =
        std::sync::Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    built.get_or_insert_with(build_all).clone()
}

fn build_all() -> Vec<(&'static str, PathBuf)> {
    let mut b = Vec::new();
    if have_static_glibc() {
        b.push(("glibc", build_c("static_clockloop", &["-static"])));
    } else {
        skip_part!("no static libc (libc.a): the glibc build");
    }
    if have("musl-gcc") {
        b.push(("musl", build_musl_c("static_clockloop")));
    } else {
        skip_part!("musl-gcc not on PATH (Debian: musl-tools): the musl build");
    }
    b
}

/// What `static_clockloop` prints after 100,000 rounds of the four reads: each wall-clock read
/// (`clock_gettime(CLOCK_REALTIME)`, `gettimeofday`, `time`) moves the clock one tick (1 µs),
/// each monotonic read its own tick counter; the 250 ms sleep measures 250 ms and a tick; a
/// forked child starts at its parent's clock, and its parent, once it has waited for it,
/// takes in the child's 1 s sleep (its reads then served by the supervisor, which merges a
/// reaped child's clock).
const CLOCK_LOOP: &str = "\
rounds 100000
realtime 1767225600000000000 .. 1767225600299997000
monotonic 86400000002000 .. 86400399998000
gettimeofday 1767225600.000001 .. 1767225600.299998
time 1767225600 .. 1767225600
slept 250001000
child starts 1000 after the fork
parent after the child 1000002000, status 0
then gettimeofday 1767225601.550003 time 1767225601
";

/// 400,000 clock reads in 5 runs, each inside 8 s (they take ≈1.3 s, 1.25 s of it the sleeps),
/// with the same values. The old build served every read by system call to the supervisor:
/// 11–12 s a run on the development machine (≈30 µs a read), past the 8 s limit; its values
/// were these same ones.
#[test]
fn a_static_c_clock_loop_reads_at_native_speed_with_the_served_values() {
    for (libc, bin) in builds() {
        let first = assert_runs_agree_by(
            &format!("static_clockloop ({libc})"),
            5,
            |s| s.to_string(),
            || run_timeout(seal(["--", bin.to_str().unwrap()]), Duration::from_secs(8)),
        );
        assert_eq!(first.stdout, CLOCK_LOOP, "{libc}\n{}", first.show());
    }
}

/// The census of the image's process (virtual pid 1000, or the forked child) at `object`:
/// `symbol`'s calls with `detail`.
fn calls(v: &serde_json::Value, child: bool, symbol: &str, detail: &str, object: &str) -> u64 {
    let p = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["exe"].as_str().unwrap_or("").contains("static_clockloop"))
        .find(|p| (p["vpid"] == 1000) != child)
        .unwrap_or_else(|| panic!("no process (child: {child})\n{v:#}"));
    crate::census::calls_at(p, symbol, detail, object, None)
}

/// Every read through the page is in the census, exactly, named after `[seal clock page]`:
/// for 1,000 rounds, glibc's 1,000 page reads of each entry in the loop, one wall-clock read
/// before the fork and two monotonic ones around the sleep, then one served read of each
/// wall-clock entry after the fork (the parent's vDSO then makes the system call: its clock
/// must take in its reaped child's time), from the same code; musl reads `gettimeofday` and `time` as
/// `clock_gettime(CLOCK_REALTIME)`. The forked child's one read is served, from the page's
/// code too, in its own slot. Nothing is counted at the image's own code. The old build
/// counted every read as served at the C library's `syscall` instructions and none at the page.
#[test]
fn the_census_counts_a_static_c_images_page_reads_exactly() {
    const PAGE: &str = seal_abi::supervised::clock_page::MODULE_NAME;
    for (libc, bin) in builds() {
        let exe = bin.to_str().unwrap();
        let (o, v) = crate::util::census_json(&["--", exe, "1000"], crate::util::TIMEOUT);
        o.ok();
        let want: &[(&str, &str, u64)] = if libc == "glibc" {
            &[
                ("clock_gettime", "CLOCK_REALTIME", 1002),
                ("clock_gettime", "CLOCK_MONOTONIC", 1002),
                ("gettimeofday", "CLOCK_REALTIME", 1001),
                ("time", "CLOCK_REALTIME", 1001),
            ]
        } else {
            &[
                ("clock_gettime", "CLOCK_REALTIME", 3004),
                ("clock_gettime", "CLOCK_MONOTONIC", 1002),
            ]
        };
        for &(symbol, detail, n) in want {
            assert_eq!(
                calls(&v, false, symbol, detail, PAGE),
                n,
                "{libc} {symbol} {detail}\n{v:#}"
            );
            assert_eq!(
                calls(&v, false, symbol, detail, exe),
                0,
                "{libc} {symbol}\n{v:#}"
            );
        }
        assert_eq!(
            calls(&v, true, "clock_gettime", "CLOCK_REALTIME", PAGE),
            1,
            "{libc} child\n{v:#}"
        );
    }
}

/// A static C image's kept vDSO gives no real values through any entry, called directly
/// through `AT_SYSINFO_EHDR` (`fixtures/c/go_vdso.c` without its Go note): `__vdso_time` and
/// `__vdso_gettimeofday` read the page (one tick apart), `__vdso_getrandom`'s probe says it is
/// unsupported (`-ENOSYS`: callers then draw by system call, which the supervisor serves), the
/// same in five runs. The old build removed the vDSO (`vdso absent`).
#[test]
fn a_static_c_images_kept_vdso_gives_no_real_values() {
    assert_kept_vdso_gives_no_real_values(
        "go_vdso without its Go note",
        &["-static", "-DNO_GO_NOTE"],
        "gettimeofday 0 1767225600.000001\n",
    );
}

/// `fixtures/c/go_vdso.c` built static with `flags` (the test skipped, visibly, without a
/// static libc), run five times under seal, the runs alike: its vDSO entries, called
/// directly, print the sealed `time` and `gettimeofday` (the line the image's clock gives),
/// and `__vdso_getrandom`'s probe, where the kernel has one, says it is unsupported. Shared
/// by a static C image's test and a Go image's (`go_images`).
pub(crate) fn assert_kept_vdso_gives_no_real_values(label: &str, flags: &[&str], gtod: &str) {
    if !have_static_glibc() {
        skip!("no static libc (libc.a)");
    }
    let bin = build_c("go_vdso", flags);
    let first = assert_runs_agree_by(
        label,
        5,
        |s| s.to_string(),
        || run_timeout(seal(["--", bin.to_str().unwrap()]), crate::util::TIMEOUT),
    );
    for w in ["time 1767225600\n", gtod] {
        assert!(first.stdout.contains(w), "missing {w:?}\n{}", first.show());
    }
    // A kernel before 6.11 has no `__vdso_getrandom`; with one, its probe says unsupported.
    assert!(
        !first.stdout.contains("getrandom supported"),
        "{}",
        first.show()
    );
    if first.stdout.contains("getrandom probe") {
        assert!(
            first.stdout.contains("getrandom probe -38\n"),
            "{}",
            first.show()
        );
    }
}

/// Four threads of a static C program read the clock 50,000 rounds each (400,000 reads, each a
/// `lock xadd` on the process's one clock): once they are joined, the clock has moved exactly
/// one tick per read, the same in 5 runs, each inside 8 s. The old build served the reads
/// (≈30 µs each: ≈12 s) and ran past the limit.
#[test]
fn a_static_c_programs_threads_move_one_clock_by_a_tick_a_read() {
    if !have_static_glibc() {
        skip!("no static libc (libc.a)");
    }
    let bin = build_c("static_threads", &["-static", "-pthread"]);
    let first = assert_runs_agree_by(
        "static_threads",
        5,
        |s| s.to_string(),
        || run_timeout(seal(["--", bin.to_str().unwrap()]), Duration::from_secs(8)),
    );
    assert_eq!(
        first.stdout,
        "after the threads: realtime 1767225600.200000000 monotonic 86400.400002000\n",
        "{}",
        first.show()
    );
}

/// A static C image that a supervised image execs itself (busybox's shell runs a command in a
/// fork that execs it, no libseal in between) gets its clock page at that exec stop too: the
/// loop's reads in its census slot are all from `[seal clock page]`, the counts of the first
/// image's test, and three runs print the same values. The old build removed its vDSO and
/// served each read (none from the page).
#[test]
fn a_static_c_image_execd_by_a_static_shell_reads_its_own_page() {
    const PAGE: &str = seal_abi::supervised::clock_page::MODULE_NAME;
    let Some(busybox) = crate::static_images::busybox() else {
        skip!("no busybox (Debian: busybox-static)");
    };
    let Some((_, bin)) = builds().into_iter().next() else {
        skip!("no static C build");
    };
    let exe = bin.to_str().unwrap();
    // The first command runs in a fork of the shell that execs it; the last one in the shell
    // itself (not a fresh process: it stays served).
    let script = format!("{exe} 1000; {exe} 3");
    let mut first: Option<String> = None;
    for _ in 0..3 {
        let (o, v) =
            crate::util::census_json(&["--", busybox, "sh", "-c", &script], crate::util::TIMEOUT);
        o.ok();
        let p = (v["processes"].as_array().unwrap().iter())
            .find(|p| {
                p["exe"].as_str().unwrap_or("").contains("static_clockloop")
                    && p["parent_vpid"] == 1000
                    && p["argv"][1] == "1000"
            })
            .unwrap_or_else(|| panic!("no exec'd image\n{v:#}"));
        for (symbol, detail, n) in [
            ("clock_gettime", "CLOCK_REALTIME", 1002),
            ("clock_gettime", "CLOCK_MONOTONIC", 1002),
            ("gettimeofday", "CLOCK_REALTIME", 1001),
            ("time", "CLOCK_REALTIME", 1001),
        ] {
            let got = crate::census::calls_at(p, symbol, detail, PAGE, None);
            assert_eq!(got, n, "{symbol} {detail}\n{v:#}");
        }
        if let Some(f) = &first {
            assert_eq!(f, &o.stdout, "{}", o.show());
        }
        first = Some(o.stdout);
    }
}
