//! End-to-end tests: process. Every child of a sealed process is sealed (inherited, cleaned
//! and `env -i` environments, fork, vfork, the exec family, posix_spawn, system, popen), pids
//! are virtual and the same every run, and what cannot be sealed is reported.
use std::path::Path;

use crate::util::*;

const RUNS: usize = 5;

/// Are temp and host names sealed in this build (the `names` family lives in another module)?
/// Asked once per test binary (it was one extra sealed run per compared output), with
/// `uname -n` (coreutils: always there, unlike `hostname`).
fn names_sealed() -> bool {
    static SEALED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SEALED.get_or_init(|| {
        let a = run_seal(["--", "uname", "-n"]);
        a.code == Some(0) && a.stdout.trim() == "seal"
    })
}

/// Are `open`-family hooks in this build (they translate `/proc/<vpid>` paths)?
fn open_hooked() -> bool {
    let cmd = ["--", "head", "-c", "16", "/dev/urandom"];
    let a = run_seal(cmd);
    let b = run_seal(cmd);
    a.code == Some(0) && a.stdout == b.stdout
}

/// Drops lines about temp/host names when that family is not in this build (with a note).
fn without_names(out: &str) -> String {
    if names_sealed() {
        return out.to_string();
    }
    skip_part!("host/temp names not sealed in this build; their lines are not compared");
    out.lines()
        .filter(|l| !l.starts_with("names "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Runs `cmd` sealed RUNS times; asserts exit 0 and identical stdout (ignoring `names` lines
/// when that family is absent); returns the first stdout.
fn stable(cmd: &[&str]) -> String {
    assert_runs_agree_by(&format!("{cmd:?}"), RUNS, without_names, || run_sealed(cmd)).stdout
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let mut it = line.split_whitespace();
    while let Some(w) = it.next() {
        if w == key {
            return it.next();
        }
    }
    None
}

/// Each `(symbol, count)` is the census total of that symbol.
fn assert_totals(totals: &[(String, u64)], want: &[(&str, u64)]) {
    for &(symbol, n) in want {
        assert_eq!(
            totals.iter().find(|t| t.0 == symbol).map(|t| t.1),
            Some(n),
            "{symbol}: {totals:?}"
        );
    }
}

fn line_with<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in\n{out}"))
}

#[test]
fn python_children_three_ways_and_fork_are_sealed() {
    python_children_are_sealed("python3");
}

/// CPython 3.12 and later start `subprocess` children with `vfork` (3.13 with `posix_spawn`
/// where it can): the same children and checks with the oldest of them, and the census shows
/// its vforks.
#[test]
fn python_vfork_children_are_sealed() {
    let found = std::fs::read_dir("/root/.pyenv/versions")
        .ok()
        .and_then(|d| {
            let mut v: Vec<_> = d
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    let n = p.file_name().unwrap().to_string_lossy();
                    let minor = n.strip_prefix("3.").and_then(|r| r.split('.').next());
                    minor.and_then(|m| m.parse::<u32>().ok()) >= Some(12)
                })
                .map(|p| p.join("bin/python3"))
                .filter(|p| p.exists())
                .collect();
            v.sort();
            v.into_iter().next()
        });
    let Some(python) = found else {
        skip!("no CPython 3.12 or later under /root/.pyenv/versions");
    };
    let python = python.to_str().unwrap();
    python_children_are_sealed(python);
    let script = fixture("python/proc_spawn.py");
    let (o, totals) = census_totals(&[python, script.to_str().unwrap()], "exec");
    o.ok();
    assert_totals(&totals, &[("vfork", 4), ("fork", 1)]);
}

fn python_children_are_sealed(python: &str) {
    let script = fixture("python/proc_spawn.py");
    let out = stable(&[python, script.to_str().unwrap()]);
    let parent = line_with(&out, "parent ");
    assert_eq!(field(parent, "pid"), Some("1000"));
    assert_eq!(field(parent, "ppid"), Some("999"));
    let mut pids = std::collections::BTreeSet::new();
    for tag in ["inherited ", "cleaned ", "env-i ", "popen ", "forked "] {
        let l = line_with(&out, tag);
        assert_eq!(field(l, "ppid"), Some("1000"), "{tag}: {l}");
        let pid = field(l, "pid").unwrap();
        assert!(pids.insert(pid.to_string()), "pid {pid} reused: {out}");
        // The child continues the parent's logical time: the epoch, a few µs in.
        assert!(
            field(l, "time").unwrap().starts_with("1767225600.00"),
            "{l}"
        );
    }
    assert!(out.contains("cleaned exit 0") && out.contains("env-i exit 0"));
    let forked = line_with(&out, "forked ");
    let vpid = field(forked, "pid").unwrap();
    assert_has(&out, &format!("forked {vpid} reaped {vpid} exit 7"));
    // Distinct children draw distinct random streams.
    let randoms: std::collections::BTreeSet<_> =
        out.lines().filter_map(|l| field(l, "random")).collect();
    assert_eq!(randoms.len(), 7, "{out}");
}

#[test]
fn bash_pids_jobs_subshells_and_pipelines_are_sealed() {
    let script = fixture("bash/proc_shell.sh");
    let out = stable(&["bash", script.to_str().unwrap()]);
    assert!(
        out.starts_with("top pid 1000 bashpid 1000 ppid 999\n"),
        "{out}"
    );
    let sub = line_with(&out, "subshell pid");
    assert_eq!(field(sub, "pid"), Some("1000"), "$$ stays the parent's");
    assert_ne!(
        field(sub, "bashpid"),
        Some("1000"),
        "$BASHPID is the subshell's"
    );
    assert!(out.contains("background status 0"));
    assert_has(&out, "subshell date 2026-01-01T00:00:00");
    assert!(out.contains("subshell exit 3"));
    assert_has(&out, "self-killed child status 143");
    if names_sealed() {
        assert_has(&out, "names hostname seal");
    }
}

#[test]
fn c_fork_kill_wait_exec_spawn_system_popen() {
    let bin = build_c("proc_signals", &[]);
    let out = stable(&[bin.to_str().unwrap()]);
    assert!(
        out.starts_with("pid 1000 ppid 999 tid 1000 syscall pid 1000 tid 1000 pgid-is-self 1\n"),
        "{out}"
    );
    let child = line_with(&out, "child pid ");
    let c = field(child, "pid").unwrap();
    assert_eq!(field(child, "ppid"), Some("1000"));
    assert_has(&out, &format!("kill by vpid {c} -> 0"));
    assert_has(&out, &format!("killed child pid {c} reaped {c} signal 15"));
    assert_has(&out, "kill self -> 0 delivered 1");
    for (spawned, reaped, code) in [
        ("execl pid", "execl child pid", 0),
        ("execle cleaned env pid", "execle child pid", 0),
        ("vfork+execlp pid", "vfork child pid", 0),
        ("posix_spawn pid", "spawned child pid", 4),
    ] {
        let l = line_with(&out, spawned);
        let pid = field(l, "pid").unwrap();
        assert_eq!(field(l, "ppid"), Some("1000"), "{l}");
        assert!(
            out.contains(&format!("{reaped} {pid} reaped {pid} exit {code}")),
            "{spawned}: {out}"
        );
    }
    assert_has(&out, "system status exit 6");
    assert_has(&out, "pclose exit 0");
    assert_eq!(field(line_with(&out, "from popen"), "ppid"), Some("1000"));
    let thread = line_with(&out, "thread tid");
    let w: Vec<&str> = thread.split_whitespace().collect();
    assert_eq!(
        w[2], w[5],
        "gettid() and syscall(SYS_gettid) agree: {thread}"
    );
    assert_ne!(w[2], "1000", "a second thread has its own virtual tid");
    assert_eq!(field(thread, "pid"), Some("1000"));
    if open_hooked() {
        assert!(
            out.contains("open /proc/<getpid()>/status: ok"),
            "/proc/<vpid> must reach the real process\n{out}"
        );
    } else {
        skip_part!("open() hooks not in this build; /proc/<vpid> translation not checked");
    }
}

#[test]
fn rust_command_children_are_sealed() {
    let bin = build_rust("proc_command");
    let out = stable(&[bin.to_str().unwrap()]);
    assert!(out.starts_with("parent id 1000\n"), "{out}");
    let inh = line_with(&out, "inherited:");
    let clr = line_with(&out, "cleared:");
    assert_eq!(field(inh, "ppid"), Some("1000"));
    assert_eq!(field(clr, "ppid"), Some("1000"));
    assert_ne!(field(inh, "pid"), field(clr, "pid"));
    assert_has(&out, "status Some(9)");
    assert_has(&out, "thread: from thread ");
}

#[test]
fn exit_status_of_the_root_passes_through() {
    let o = run_seal(["--", "sh", "-c", "sh -c 'exit 7'; exit $?"]);
    o.code_is(7);
    let o = run_seal(["--", "sh", "-c", "kill -TERM $$"]);
    o.code_is(128 + 15);
}

#[test]
fn unseal_pid_shows_real_pids_but_children_stay_sealed() {
    let o = run_seal([
        "--unseal",
        "pid",
        "--",
        "sh",
        "-c",
        "echo $$; env -i sh -c 'cat /proc/self/environ | tr \"\\0\" \"\\n\" | sed -n s/^LIBSEAL_VPID=//p'",
    ]);
    o.ok();
    let mut lines = o.stdout.lines();
    let pid: i32 = lines.next().unwrap().parse().unwrap();
    assert_ne!(pid, 1000, "with --unseal pid, $$ is the real pid");
    let child = lines.next().unwrap_or("");
    assert!(
        !child.is_empty(),
        "the cleaned child is still in the run: {}",
        o.show()
    );
}

/// The static binary and the setuid copy each cause exactly one warning line; the run goes on.
#[test]
fn static_and_setuid_targets_are_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let libc_a = [
        "/usr/lib/x86_64-linux-gnu/libc.a",
        "/usr/lib64/libc.a",
        "/usr/lib/libc.a",
    ];
    let have_static = libc_a.iter().any(|p| Path::new(p).exists());
    let mut script = String::new();
    let mut expect = Vec::new();
    if have_static {
        let bin = build_c("proc_static", &["-static"]);
        let dst = dir.path().join("static-prog");
        std::fs::copy(&bin, &dst).unwrap();
        script += &format!("{0}; {0}; sh -c {0}; ", dst.display());
        // Supervised (tests/e2e/static_images.rs): one line says what stayed real.
        let want = format!("(static-binary-supervised): {}:", dst.display());
        // Started by seal itself (no libseal in it at all): the launcher checks it.
        let o = run_seal(["--", dst.to_str().unwrap()]);
        o.ok();
        assert_eq!(o.stdout, "static binary ran\n");
        assert_eq!(
            o.stderr
                .lines()
                .filter(|l| l.contains(want.as_str()))
                .count(),
            1,
            "{}",
            o.show()
        );
        expect.push(want);
    } else {
        skip_part!("no static libc (libc.a); static binary case skipped");
    }
    // A setuid copy only changes the user (the loader's secure mode) when the owner differs
    // from who runs it: as root, give it to nobody; otherwise the bit has no effect on us.
    // SAFETY: getuid has no preconditions.
    let root = unsafe { libc::getuid() } == 0;
    if root {
        let dst = dir.path().join("setuid-prog");
        std::fs::copy("/bin/true", &dst).unwrap();
        std::os::unix::fs::chown(&dst, Some(65534), None).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o4755)).unwrap();
        // nobody must be able to reach the file: make the temp dir traversable.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        script += &format!("{0}; ({0}); ", dst.display());
        expect.push(format!("not sealed (setuid): {}", dst.display()));
    } else {
        skip_part!("not root; setuid case skipped (a file setuid to ourselves is sealed)");
    }
    script += "echo finished";
    let o = run_seal(["--", "bash", "-c", &script]);
    o.ok();
    o.stdout_has("finished");
    for want in &expect {
        let n = o
            .stderr
            .lines()
            .filter(|l| l.contains(want.as_str()))
            .count();
        assert_eq!(n, 1, "want exactly one {want:?} warning\n{}", o.show());
    }
    // -q keeps stderr quiet.
    let q = run_seal(["-q", "--", "bash", "-c", &script]);
    q.ok();
    q.stderr_lacks("not sealed");
    q.stderr_lacks("partly sealed");
}

/// One census process per process of the tree, each with the right parent.
#[test]
fn census_has_one_process_per_child_with_its_parent() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("census.json");
    let script = fixture("python/proc_spawn.py");
    let o = run_seal([
        "--census",
        json.to_str().unwrap(),
        "--",
        "python3",
        script.to_str().unwrap(),
    ]);
    o.ok();
    let c: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let procs = c["processes"].as_array().unwrap();
    let vpids: std::collections::BTreeSet<i64> =
        procs.iter().map(|p| p["vpid"].as_i64().unwrap()).collect();
    let root = procs.iter().find(|p| p["vpid"] == 1000).expect("root 1000");
    assert!(root["parent_vpid"].is_null());
    // Every pid the fixture printed is a census process whose parent is the root.
    for tag in ["inherited ", "cleaned ", "env-i ", "popen ", "forked "] {
        let l = line_with(&o.stdout, tag);
        let pid: i64 = field(l, "pid").unwrap().parse().unwrap();
        let p = procs
            .iter()
            .find(|p| p["vpid"] == pid)
            .unwrap_or_else(|| panic!("{tag}: no census process {pid}\n{c:#}"));
        assert_eq!(p["parent_vpid"], 1000, "{tag}: {p:#}");
    }
    for p in procs {
        if let Some(parent) = p["parent_vpid"].as_i64() {
            assert!(vpids.contains(&parent), "orphan census entry {p:#}");
        }
    }
    let forked = line_with(&o.stdout, "forked ");
    let pid: i64 = field(forked, "pid").unwrap().parse().unwrap();
    let p = procs.iter().find(|p| p["vpid"] == pid).unwrap();
    assert_eq!(p["exit"]["code"], 7, "reaped status recorded: {p:#}");
}

/// `/proc/<vpid>` reaches the real process through the path calls too (stat, readlink, …).
#[test]
fn proc_paths_of_virtual_pids_reach_the_real_process() {
    let o = run_seal([
        "--",
        "bash",
        "-c",
        "[ -d /proc/$$ ] && echo alive; readlink /proc/$$/exe; \
         (readlink /proc/$BASHPID/exe; stat -c %F /proc/$BASHPID/status)",
    ]);
    o.ok();
    let bash = std::fs::canonicalize(
        std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|d| d.join("bash"))
            .find(|p| p.is_file())
            .unwrap(),
    )
    .unwrap();
    let want = format!("alive\n{0}\n{0}\nregular empty file\n", bash.display());
    assert_eq!(o.stdout, want, "{}", o.show());
}

/// The session and group `seal` runs in, led by a process outside the run (here `sh`, made a
/// session leader by `setsid`): a dynamic program's `getsid`, `getpgrp`, `getpgid` and its
/// `/proc/self/stat` show 998 for them, not the shell's real pid, which differs every launch;
/// 3 runs alike. Run from a process leading a group of its own in that session, the
/// launcher's group shows as 997. The old build printed the real pids.
#[test]
fn the_session_and_group_seal_runs_in_show_as_fixed_numbers() {
    if !have("setsid") {
        skip!("setsid not on PATH (util-linux)");
    }
    let bin = build_c("static_groups", &[]);
    let py = "import os; f = open('/proc/self/stat').read().rsplit(') ', 1)[1].split(); \
              print(os.getsid(0), os.getpgrp(), f[1:4])";
    // The second launch runs the line from a python that leads a group of its own.
    let own_group =
        "import os, sys; os.setpgrp(); sys.exit(os.waitstatus_to_exitcode(os.system(sys.argv[1])))";
    for (launch, want) in [
        ("", "pid 1000 pgrp 998 pgid 998 sid 998 parent's pgid 998\n"),
        (
            "own group",
            "pid 1000 pgrp 997 pgid 997 sid 998 parent's pgid 997\n",
        ),
    ] {
        let line = format!(
            "{seal} -q -- {bin}; {seal} -q -- python3 -c \"{py}\"",
            seal = seal_bin().display(),
            bin = bin.display()
        );
        let o = crate::static_pids::alike(3, || {
            let mut c = crate::util::command("setsid");
            c.args(["-w", "sh", "-c"]);
            if launch.is_empty() {
                c.arg(format!("{line}; true"));
            } else {
                c.args(["python3 -c \"$0\" \"$1\"; true", own_group, &line]);
            }
            run_timeout(c, TIMEOUT)
        });
        assert!(o.stdout.starts_with(want), "{launch:?}\n{}", o.show());
        let g = &want[14..17];
        let py_want = format!("998 {g} ['999', '{g}', '998']\n");
        assert!(
            o.stdout.ends_with(&py_want),
            "{launch:?}: {py_want}\n{}",
            o.show()
        );
    }
}

#[test]
fn node_process_pid_is_sealed() {
    if !have("node") {
        skip!("node not found");
    }
    let js = fixture("node/proc_pid.js");
    let out = stable(&["node", js.to_str().unwrap()]);
    assert!(out.starts_with("node pid 1000 ppid 999\n"), "{out}");
    assert!(
        out.contains(" 1000\n"),
        "cleaned child's parent is node: {out}"
    );
    let spawned = line_with(&out, "spawned ");
    assert!(spawned.ends_with("exit 3"), "{out}");
}

#[test]
fn jvm_process_handle_pid_is_sealed() {
    if !have("java") {
        skip!("java not found");
    }
    // The JVM's exit waits on timed condition variables: without the wait family (a separate
    // module) its sealed clocks make those waits hang. Checked here so this test is about pids.
    let wait_src = std::fs::read_to_string(root().join("shim/src/wait/mod.rs")).unwrap_or_default();
    if wait_src.contains("TODO(wait): not implemented yet") {
        skip!("wait family not in this build");
    }
    let src = fixture("java/ProcPid.java");
    let out = stable(&["java", src.to_str().unwrap()]);
    assert!(out.starts_with("jvm pid 1000\n"), "{out}");
    let child = line_with(&out, "child pid ");
    let pid = field(child, "pid").unwrap();
    assert_has(&out, &format!("child {pid} 1000\n"));
    assert!(child.ends_with("exit 0"), "{out}");
}

/// Many processes spawning at the same time (xargs -P): the order of the lines is the
/// scheduler's, the set of virtual pids is not.
#[test]
fn concurrent_spawns_from_different_parents_get_the_same_pids() {
    let cmd = r#"seq 40 | xargs -P 8 -I{} sh -c 'sh -c "echo \$\$ \$PPID"' | sort"#;
    let out = stable(&["bash", "-c", cmd]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 40, "{out}");
    let pids: std::collections::BTreeSet<&str> =
        lines.iter().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(pids.len(), 40, "unique: {out}");
}

/// Children started one after another get the same numbers, and never the same number twice.
#[test]
fn many_sequential_children_are_unique_and_stable() {
    let out = stable(&[
        "bash",
        "-c",
        "for i in $(seq 200); do (echo $BASHPID); done | sort -n | uniq -d | wc -l; \
         for i in $(seq 200); do sh -c 'echo $$'; done | md5sum",
    ]);
    assert!(out.starts_with("0\n"), "no duplicate pids: {out}");
}

/// A program that traces its own child names it by the pid fork returned (a virtual one):
/// `ptrace`, `process_vm_readv` and `process_vm_writev` reach the real process.
#[test]
fn a_tracer_reaches_its_child_by_its_virtual_pid() {
    let bin = build_c("tracer", &[]);
    let out = stable(&[bin.to_str().unwrap()]);
    assert_eq!(
        out,
        "process_vm_readv 32 (ok): child's own words\n\
         process_vm_writev 32 (ok)\n\
         ptrace attach 0 (ok)\n\
         stopped: waitpid gives the child 1, stopped 1 by signal 19\n\
         ptrace peekdata (ok): written \n\
         ptrace detach 0 (ok)\n\
         child sees: written by the tracer\n\
         reaped the child 1, exit 7\n"
    );
    let (o, totals) = census_totals(&[bin.to_str().unwrap()], "pid");
    o.ok();
    assert_totals(&totals, &[("ptrace", 3), ("process_vm_readv/writev", 2)]);
}

/// A profiler names its child by the pid fork returned (a virtual one): `perf_event_open`
/// counts the real process, where it failed with ESRCH (or counted whichever unrelated process
/// had that number), and `perf stat` around a command works sealed.
#[test]
fn a_profiler_counts_its_child_by_its_virtual_pid() {
    let bin = build_c("profiler", &[]);
    let out = stable(&[bin.to_str().unwrap()]);
    if out.starts_with("unavailable") {
        report_skip(
            module_path!(),
            false,
            &format!("no perf events here: {out}"),
        );
        return;
    }
    assert_eq!(
        out,
        "open by the child's pid: ok\n\
         counted the child: yes\n\
         child exit 5\n"
    );
    let (o, totals) = census_totals(&[bin.to_str().unwrap()], "pid");
    o.ok();
    assert_totals(&totals, &[("syscall(perf_event_open)", 2)]);
    if have("perf") {
        let o = run_seal(["-q", "--", "perf", "stat", "-e", "task-clock", "--", "true"]);
        assert_eq!(o.code, Some(0), "{}", o.show());
        o.stderr_has("task-clock");
    }
}

/// `strace -f` follows a shell's children (it learns their real pids from the kernel before
/// they have virtual ones, and keeps using those) and passes the traced command's status on;
/// gdb runs a program to its end.
#[test]
fn strace_and_gdb_run_sealed() {
    if have("strace") {
        let (o, log) = sealed_strace(&[], &["sh", "-c", "/bin/echo a; /bin/echo b; exit 3"]);
        assert_eq!(o.code, Some(3), "{}", o.show());
        assert_eq!(o.stdout, "a\nb\n", "{}", o.show());
        assert!(!o.stderr.contains("strace:"), "{}", o.show());
        assert_eq!(log.matches("+++ exited with 0 +++").count(), 2, "{log}");
        assert_has(&log, "+++ exited with 3 +++");
    } else {
        report_skip(module_path!(), true, "strace not on PATH");
    }
    if have("gdb") {
        let o = run_seal([
            "--",
            "gdb",
            "-q",
            "-batch",
            "-ex",
            "run",
            "--args",
            "/bin/echo",
            "traced",
        ]);
        o.ok();
        assert!(o.stdout.contains("traced\n"), "{}", o.show());
        assert!(o.stdout.contains("exited normally"), "{}", o.show());
    } else {
        report_skip(module_path!(), true, "gdb not on PATH");
    }
}

/// A vfork child runs on its parent's memory (seal keeps vfork a vfork): it sees its own
/// virtual pid and tid, draws from a stream of its own, and leaves its parent's random stream,
/// `SIGSEGV` handler and address space as they were, whether its exec succeeds or fails. Its
/// calls before exec are counted in the parent's census image; the shells it execs are
/// processes of their own.
#[test]
fn a_vfork_child_leaves_its_parent_as_it_was() {
    let bin = build_c("vfork_child", &[]);
    let sh = "/bin/sh";
    let out = stable(&[bin.to_str().unwrap(), sh]);
    let parent = line_with(&out, "parent ");
    let child = field(parent, "returned").unwrap();
    assert_eq!(field(parent, "parent"), Some("1000"), "{out}");
    assert_eq!(
        line_with(&out, "exec pid"),
        format!("exec pid {child} ppid 1000"),
        "{out}"
    );
    let seen = line_with(&out, "child pid");
    assert_eq!(field(seen, "pid"), Some(child), "{out}");
    assert_eq!(field(seen, "tid"), Some(child), "{out}");
    assert_eq!(field(seen, "ppid"), Some("1000"), "{out}");
    // The parent's stream continues as if the child had never drawn.
    let reference = run_sealed(&[bin.to_str().unwrap(), sh, "ref"]);
    assert_eq!(
        line_with(&out, "parent random"),
        reference.stdout.trim_end(),
        "{out}"
    );
    assert_ne!(
        field(seen, "random"),
        field(reference.stdout.trim_end(), "after"),
        "the child drew the parent's bytes: {out}"
    );
    for line in [
        "SIGSEGV handler kept yes",
        "fault caught by the program's handler",
        "address space after 40 more vforks: +0 KiB",
    ] {
        assert!(out.lines().any(|l| l == line), "no {line:?} in\n{out}");
    }
    let (o, totals) = census_totals(&[bin.to_str().unwrap(), sh], "exec");
    o.ok();
    assert_totals(&totals, &[("vfork", 43), ("execl", 43)]);
    assert!(
        o.stderr.contains("23 processes"),
        "the parent and the 22 shells its children exec'd: {}",
        o.show()
    );
}
