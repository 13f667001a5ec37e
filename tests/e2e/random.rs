//! End-to-end tests: random devices (`/dev/urandom`, `/dev/random`, the kernel's uuid and
//! boot_id files) read through real programs, however opened and read.
use crate::util::*;

const RUNS: usize = 5;

/// Every open and read path of a C program gives the same bytes every sealed run.
#[test]
fn c_devices_every_open_and_read_path_is_sealed() {
    let prog = build_c("devices", &[]);
    let p = prog.to_str().unwrap();
    let out = assert_sealed_stable(&[p], RUNS);
    for label in [
        "open ",
        "open64 ",
        "openat ",
        "openat64 ",
        "__open_2 ",
        "__open64_2 ",
        "__openat_2 ",
        "__openat64 ",
        "random ",
        "nonblock ",
        "fopen ",
        "fopen64 ",
        "freopen ",
        "inherited ",
        "4MiB sum ",
    ] {
        assert!(
            out.lines().any(|l| l.starts_with(label)),
            "no {label:?} line in\n{out}"
        );
    }
    assert!(
        out.contains("cloexec    1 0"),
        "O_CLOEXEC not honoured\n{out}"
    );
    assert_has(&out, "missing    -1 No such file or directory");
    // Two opens of the uuid file: two v4 uuids, different; boot_id: one per run.
    let uuids: Vec<&str> = out.lines().filter(|l| l.starts_with("uuid ")).collect();
    assert_eq!(uuids.len(), 2, "{out}");
    assert_ne!(
        uuids[0], uuids[1],
        "two opens of uuid gave the same uuid\n{out}"
    );
    assert_eq!(
        uuids[0].trim().as_bytes()[11 + 14],
        b'4',
        "not a v4 uuid: {}",
        uuids[0]
    );
    let boots: Vec<&str> = out.lines().filter(|l| l.starts_with("boot_id ")).collect();
    assert_eq!(boots.len(), 2, "{out}");
    assert_eq!(boots[0], boots[1], "boot_id changed within a run\n{out}");
    // Sixteen distinct 16-byte values: no two opens share a stream.
    let mut hexes: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|h| h.len() == 32)
        .collect();
    let n = hexes.len();
    hexes.sort();
    hexes.dedup();
    assert_eq!(hexes.len(), n, "two reads gave the same bytes\n{out}");

    // Unsealed, the same program differs from run to run (the seal does the work).
    let plain = assert_plain_runs_differ(p, &[]);
    assert_ne!(plain, out);
    // --unseal random passes the devices through.
    let u1 = run_seal(["--unseal", "random", "--", p]);
    let u2 = run_seal(["--unseal", "random", "--", p]);
    u1.ok();
    u2.ok();
    assert_ne!(
        u1.stdout, u2.stdout,
        "--unseal random still sealed the devices"
    );
}

/// `od`, `head -c`, `tr -dc … < /dev/urandom | head -c 16` (an inherited fd in a child),
/// `cat` of the uuid file twice, a megabyte: byte-identical sealed runs.
#[test]
fn bash_urandom_tools_are_sealed() {
    let script = fixture("bash/urandom.sh");
    let s = script.to_str().unwrap();
    let out = assert_sealed_stable(&["bash", s], RUNS);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 9, "{out}");
    assert_eq!(lines[2].len(), 16, "tr | head -c 16 gave {:?}", lines[2]);
    assert!(lines[2]
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
    assert_ne!(
        lines[3], lines[4],
        "two `cat uuid` gave the same uuid\n{out}"
    );
    assert!(lines.last().unwrap().ends_with(" 1000000"), "{out}");
    assert_plain_runs_differ("bash", &[s]);
}

/// Python's `open('/dev/urandom','rb').read(16)` and the uuid file.
#[test]
fn python_reads_urandom_sealed() {
    require_tools!("python3");
    let code = "print(open('/dev/urandom','rb').read(16).hex()); \
                print(open('/proc/sys/kernel/random/uuid').read().strip())";
    let out = assert_sealed_stable(&["python3", "-c", code], RUNS);
    assert_eq!(out.lines().next().unwrap().len(), 32, "{out}");
    assert_plain_runs_differ("python3", &["-c", code]);
}

/// The feeder behind a sealed `/dev/urandom` is invisible to `wait()`/`waitpid(-1)` (a program
/// reaping "all" its children neither hangs nor sees it) and exits when the reader closes.
#[test]
fn feeder_is_invisible_to_wait_and_dies_with_its_reader() {
    let prog = build_c("reaper", &[]);
    let token = format!("seal-reaper-token-{}", std::process::id());
    let out = run_seal(["--", prog.to_str().unwrap(), &token]);
    out.ok();
    let expected_tail = "feeders while open: 1\n\
        wait() reaped 3 children (status sum 33), then ECHILD\n\
        waitpid(-1) reaped 3 children (status sum 33), then ECHILD\n\
        feeders after close: 0\n";
    assert!(out.stdout.ends_with(expected_tail), "{}", out.show());
    // Nothing of this run is left running.
    assert_eq!(live_feeders(&token), 0, "a feeder outlived the run");
}

/// Live (not zombie) `seal-random` processes whose command line mentions `token`.
fn live_feeders(token: &str) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let p = e.path();
        let Ok(stat) = std::fs::read_to_string(p.join("stat")) else {
            continue;
        };
        let Some(rp) = stat.rfind(')') else { continue };
        if !stat.contains("(seal-random)") || stat[rp + 2..].starts_with('Z') {
            continue;
        }
        let cmd = std::fs::read(p.join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).contains(token) {
            n += 1;
        }
    }
    n
}

/// A reader that stops early (`head -c 16` closing the pipe) leaves no feeder behind.
#[test]
fn short_readers_leave_no_feeder() {
    let token = format!("seal-short-reader-{}", std::process::id());
    let script =
        format!("for i in 1 2 3; do head -c 16 /dev/urandom | od -An -tx1; done # {token}");
    let out = run_seal(["--", "bash", "-c", &script]);
    out.ok();
    assert_eq!(out.stdout.lines().count(), 3, "{}", out.show());
    let mut left = usize::MAX;
    for _ in 0..200 {
        left = live_feeders(&token);
        if left == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(left, 0, "feeders still running after their readers exited");
}

/// The sealed bytes themselves are pinned, not only their stability: users record goldens on
/// them, so a change to the stream (its cipher, its keying, how a request is cut from it) must
/// be a deliberate edit of these lines. fixtures/c/random_golden.c hashes getrandom in mixed
/// request sizes, the other entry points, a thread, a fork child, a vfork child and
/// /dev/urandom. (Re-pinned when streams came to be keyed by the image's program name instead
/// of its exec generation: docs/design.md, "The launch chain is not an input".)
#[test]
fn sealed_random_bytes_are_pinned() {
    let prog = build_c("random_golden", &[]);
    let out = run_seal(["--seed", "42", "--", prog.to_str().unwrap()]);
    out.ok();
    assert_eq!(
        out.stdout,
        "getrandom 9e8726397f1e544e\n\
         others    4961a237b96d7a46\n\
         thread    fd4a67a864d24ecb\n\
         fork      3a7c814be12fe7fd\n\
         vfork     161\n\
         after     4d71e5dbe011dcad\n\
         urandom   7322d6ae2628b11e\n",
        "{}",
        out.show()
    );
}

/// getrandom(2) refuses what the kernel refuses, sealed as bare: unknown flags and
/// GRND_RANDOM|GRND_INSECURE are EINVAL, a buffer in the first page EFAULT (not a SIGSEGV
/// inside the shim); valid calls are still sealed.
#[test]
fn getrandom_refuses_what_the_kernel_refuses() {
    let script = "import ctypes, os\n\
libc = ctypes.CDLL(None, use_errno=True)\n\
def call(buf, n, fl):\n    r = libc.getrandom(buf, n, fl)\n    return r, (ctypes.get_errno() if r < 0 else 0)\n\
b = ctypes.create_string_buffer(16)\n\
print('unknown flag', call(b, 16, 0x80))\n\
print('both pools', call(b, 16, 0x6))\n\
print('bad buffer', call(ctypes.c_void_p(1), 16, 0))\n\
print('ok', call(b, 16, 1), b.raw.hex())\n";
    let out = assert_sealed_stable(&["python3", "-c", script], 2);
    let bare = run_plain("python3", ["-c", script]).stdout;
    let first3 = |s: &str| s.lines().take(3).collect::<Vec<_>>().join("\n");
    assert_eq!(first3(&out), first3(&bare), "sealed:\n{out}\nbare:\n{bare}");
    assert!(
        out.contains("unknown flag (-1, 22)") && out.contains("bad buffer (-1, 14)"),
        "{out}"
    );
    assert_has(&out, "ok (16, 0)");
}

/// libuuid's time-based uuids (`uuid_generate_time`, `_safe`, a fork child's, one looked up in
/// a `dlopen`ed libuuid) and Python's `uuid.uuid1()`/`getnode()`: the same every run. Before,
/// libuuid's machine-wide state file (`/var/lib/libuuid/clock.txt`) found each run's epoch
/// already used and bumped the clock sequence, so every run differed from the one before, and
/// the node was the machine's MAC address.
#[test]
fn libuuid_time_uuids_are_the_same_every_run() {
    if ![
        "/lib/x86_64-linux-gnu/libuuid.so.1",
        "/usr/lib/x86_64-linux-gnu/libuuid.so.1",
    ]
    .iter()
    .any(|p| std::path::Path::new(p).exists())
    {
        skip!("no libuuid.so.1");
    }
    let prog = build_c("uuid_time", &["-l:libuuid.so.1", "-ldl"]);
    let p = prog.to_str().unwrap();
    let out = assert_sealed_stable(&[p], 3);
    let uuids: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(_, u)| u))
        .filter(|u| u.len() == 32)
        .collect();
    assert_eq!(uuids.len(), 5, "{out}");
    assert_has(&out, "safe-return 0\n");
    let mut distinct = uuids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 5, "two uuids alike\n{out}");
    for u in &uuids {
        assert_eq!(&u[12..13], "1", "not version 1: {u}\n{out}");
        // One node for the run, with the multicast bit (no network card's address).
        assert_eq!(&u[20..], &uuids[0][20..], "{out}");
        assert_eq!(u8::from_str_radix(&u[20..22], 16).unwrap() & 1, 1, "{out}");
    }
    // The fork child's clock sequence is its own, though it reads its parent's clock.
    let child = out.lines().find(|l| l.starts_with("child ")).unwrap();
    assert_ne!(&child[6 + 16..6 + 20], &uuids[1][16..20], "{out}");
    let (cen, totals) = census_totals(&[p], "random");
    assert_totals(
        &cen,
        &totals,
        &[("uuid_generate_time/uuid_generate_time_safe (libuuid)", 5)],
    );

    require_tools!("python3");
    let code = "import uuid; print(uuid.uuid1(), uuid.uuid1(), uuid.getnode())";
    let py = assert_sealed_stable(&["python3", "-c", code], 3);
    assert!(
        py.split(' ').nth(1).unwrap() != py.split(' ').next().unwrap(),
        "{py}"
    );
}
