//! End-to-end tests: what a sealed `/dev/urandom` costs and who can read it. One feeder process
//! serves every device pipe of a process image, so thousands of opens leave no processes behind;
//! pipes stay fed after an exec, after the opener exits, in fork children.
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::util::*;

const RUNS: usize = 5;

/// Real pids of the processes named `comm` whose command line mentions `token`.
fn pids_with(comm: &str, token: &str) -> Vec<i32> {
    procs()
        .filter(|(_, c, _, _, cmd)| c.starts_with(comm) && cmd.contains(token))
        .map(|(pid, ..)| pid)
        .collect()
}

/// Every process as (pid, comm, state, ppid, command line).
fn procs() -> impl Iterator<Item = (i32, String, char, i32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let (l, r) = (stat.find('(')?, stat.rfind(')')?);
            let comm = stat[l + 1..r].to_string();
            let mut rest = stat[r + 2..].split(' ');
            let state = rest.next()?.chars().next()?;
            let ppid = rest.next()?.parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            Some((
                pid,
                comm,
                state,
                ppid,
                String::from_utf8_lossy(&cmd).into_owned(),
            ))
        })
}

/// Live feeders (`seal-random`, not zombies) whose command line (their opener's) has `token`.
fn feeders(token: &str) -> usize {
    procs()
        .filter(|(_, comm, state, _, cmd)| {
            comm == "seal-random" && *state != 'Z' && cmd.contains(token)
        })
        .count()
}

/// Children of `pid`, in any state (zombies too).
fn children(pid: i32) -> Vec<(i32, String, char)> {
    procs()
        .filter(|(_, _, _, ppid, _)| *ppid == pid)
        .map(|(p, comm, state, ..)| (p, comm, state))
        .collect()
}

/// 3000 opens and reads of `/dev/urandom` in one process: at most one feeder runs while it
/// reads, and afterwards (the feeder lingers a moment, then exits) the process has no child
/// and no feeder at all, live or zombie. The bytes are the same every run.
#[test]
fn three_thousand_opens_leave_no_process_behind() {
    require_tools!("python3");
    let mut hashes = Vec::new();
    for _ in 0..2 {
        let token = format!("seal-devices-opens-{}-{}", std::process::id(), hashes.len());
        let code = "import sys, hashlib\n\
                    h = hashlib.sha256()\n\
                    for i in range(3000):\n\
                    \x20   with open('/dev/urandom', 'rb', buffering=0) as f:\n\
                    \x20       b = f.read(64)\n\
                    \x20       assert len(b) == 64, len(b)\n\
                    \x20       h.update(b)\n\
                    print(h.hexdigest(), flush=True)\n\
                    sys.stdin.readline()\n";
        let mut cmd = seal(["--", "python3", "-c", code, &token]);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim().len(), 64, "no hash: {line:?}");
        let at_end = feeders(&token);
        assert!(at_end <= 1, "{at_end} feeders serve one process");
        let pids = pids_with("python", &token);
        assert_eq!(pids.len(), 1, "the sealed python: {pids:?}");
        let start = Instant::now();
        let (mut kids, mut live) = (children(pids[0]), feeders(&token));
        while (!kids.is_empty() || live > 0) && start.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(20));
            (kids, live) = (children(pids[0]), feeders(&token));
        }
        writeln!(stdin, "done").unwrap();
        let status = child.wait().unwrap();
        assert!(status.success());
        assert!(kids.is_empty(), "left behind: {kids:?}");
        assert_eq!(live, 0, "a feeder outlived its pipes");
        hashes.push(line);
    }
    assert_eq!(hashes[0], hashes[1]);
}

/// Every way a shell hands the device on: a redirection into an exec'd tool, a descriptor
/// inherited through one and two execs, a pipe whose opener exited before its reader read,
/// fork children of a process that already has a feeder, `dd` (one `read` of 64 KiB per
/// block, never short, from a device it opened or one it inherited), a megabyte. Byte-identical over five sealed runs, different unsealed.
#[test]
fn redirections_inherited_fds_and_orphaned_pipes_read_sealed_bytes() {
    let script = r#"
set -eu
od -An -tx1 -N 16 < /dev/urandom
exec 3< /dev/urandom
head -c 16 <&3 | od -An -tx1
sh -c 'head -c 16 <&3' | od -An -tx1
exec 3<&-
# The subshell that opened fd 4 exits before its background child reads it.
( exec 4< /dev/urandom; ( sleep 0.2; head -c 16 <&4 | od -An -tx1 ) & ) ; sleep 0.5
for i in 1 2 3; do ( head -c 8 < /dev/urandom | od -An -tx1 ) & wait; done
dd if=/dev/urandom bs=65536 count=16 2>&1 >/dev/null | head -n 1
dd bs=65536 count=16 < /dev/urandom 2>&1 >/dev/null | head -n 1
dd if=/dev/urandom bs=65536 count=16 2>/dev/null | cksum
head -c 1000000 < /dev/urandom | cksum
"#;
    let out = assert_sealed_stable(&["bash", "-c", script], RUNS);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 11, "{out}");
    assert_eq!(lines[7], "16+0 records in", "dd read short blocks\n{out}");
    // The shell's device pipe, inherited as dd's standard input.
    assert_eq!(lines[8], "16+0 records in", "dd read short blocks\n{out}");
    assert!(lines[10].ends_with(" 1000000"), "{out}");
    let mut seen: Vec<&str> = lines[..7].to_vec();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 7, "two reads gave the same bytes\n{out}");
    assert_plain_runs_differ("bash", &["-c", script]);
}
