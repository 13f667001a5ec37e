//! End-to-end tests: `/proc` files that show pids and times (families `pid` and `time`):
//! `/proc/self/stat`, `status`, `cmdline`, `/proc/<vpid>/…`, `/proc/uptime`, and procps' `ps`,
//! which finds a process by the pids in the `status` files of a listing of `/proc`.
use crate::util::*;

const RUNS: usize = 5;

/// `seal ARGS -- sh -c SCRIPT`.
fn sealed_sh(args: &[&str], script: &str) -> Output {
    let mut c = seal(args);
    c.args(["--", "sh", "-c", script]);
    run_timeout(c, TIMEOUT)
}

/// Prints fields of the shell's own stat (pid, ppid, utime, starttime) and status, the
/// cmdline, the uptime, and the shell's stat read by a child through its virtual pid.
const SHELL: &str = r#"
read -r s < /proc/self/stat; set -- $s; echo "stat pid=$1 ppid=$4 utime=${14} start=${22}"
while read -r k v; do case $k in Pid:|PPid:|Tgid:) echo "status $k $v";; esac; done < /proc/self/status
echo "getpid $$"
tr '\0' ' ' < /proc/self/cmdline; echo
echo "uptime $(cat /proc/uptime)"
set -- $(cat /proc/$$/stat); echo "child sees pid=$1 ppid=$4 start=${22}"
"#;

#[test]
fn a_shell_reads_its_own_proc_files_sealed() {
    let out = assert_runs_agree("shell /proc reads", RUNS, || sealed_sh(&[], SHELL)).stdout;
    for want in [
        "stat pid=1000 ppid=999 utime=0 start=8640000\n",
        "status Pid: 1000\n",
        "status PPid: 999\n",
        "status Tgid: 1000\n",
        "getpid 1000\n",
        // The redirection is the shell's own open: its cmdline.
        "getpid 1000\nsh -c \nread -r s",
        "uptime 86400.",
        "child sees pid=1000 ppid=999 start=8640000\n",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
}

const PYTHON: &str = r#"
import os, threading
s = open('/proc/self/stat').read()
f = s[s.rindex(')') + 2:].split()
print('stat', s.split()[0], f[1], 'utime', f[11], 'start', f[19])
st = dict(l.split(':\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\t' in l)
print('status', st['Pid'], st['PPid'], st['Tgid'])
print('getpid', os.getpid(), os.getppid())
print('cmdline', open('/proc/self/cmdline').read().split('\0')[1])
print('uptime', open('/proc/uptime').read().split())
def thread():
    tid = threading.get_native_id()
    print('task', tid, open('/proc/self/task/%d/stat' % tid).read().split()[0])
    print('thread-self', open('/proc/thread-self/stat').read().split()[0])
t = threading.Thread(target=thread)
t.start()
t.join()
"#;

#[test]
fn python_reads_its_own_proc_files_sealed() {
    require_tools!("python3");
    // A tick of 10 ms makes every clock read one clock tick of CPU time (USER_HZ 100).
    let out = assert_runs_agree("python /proc reads", RUNS, || {
        run_seal(["--tick", "10ms", "--", "python3", "-c", PYTHON])
    })
    .stdout;
    let word = |key: &str, i: usize| -> String {
        let l = out.lines().find(|l| l.starts_with(key)).unwrap();
        l.split_whitespace().nth(i).unwrap().to_string()
    };
    let (pid, ppid) = (word("getpid", 1), word("getpid", 2));
    assert_eq!(
        (word("stat", 1), word("stat", 2)),
        (pid.clone(), ppid.clone()),
        "{out}"
    );
    assert_eq!(
        (word("status", 1), word("status", 2), word("status", 3)),
        (pid.clone(), ppid, pid),
        "{out}"
    );
    assert!(word("stat", 4).parse::<u64>().unwrap() > 0, "utime: {out}");
    assert!(
        word("stat", 6).parse::<u64>().unwrap() >= 8_640_000,
        "start: {out}"
    );
    // The thread's stat, by virtual tid and by thread-self, names its virtual tid.
    let (tid, by_task, by_self) = (word("task", 1), word("task", 2), word("thread-self", 1));
    assert_eq!((&by_task, &by_self), (&tid, &tid), "{out}");
    assert_has(&out, "cmdline -c\n");
}

#[test]
fn ps_prints_the_sealed_process() {
    require_tools!("ps");
    let out = assert_runs_agree("ps -p $$", RUNS, || {
        sealed_sh(&[], "ps -o pid=,ppid=,comm= -p $$; echo rc=$?; ps -p $$")
    })
    .stdout;
    let mut lines = out.lines();
    let first: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(first, ["1000", "999", "sh"], "{out}");
    assert_eq!(lines.next(), Some("rc=0"), "{out}");
    assert!(lines.next().unwrap().contains("PID"), "{out}");
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        (row[0], row.get(2).copied(), row.last().copied()),
        ("1000", Some("00:00:00"), Some("sh")),
        "{out}"
    );
}

#[test]
fn c_reads_of_proc_self_stat_with_open_and_fopen_are_sealed() {
    let bin = build_c("proc_stat", &[]);
    let out = assert_runs_agree("C /proc/self/stat", RUNS, || {
        run_sealed(&[bin.to_str().unwrap()])
    })
    .stdout;
    assert_eq!(
        out,
        "open: pid 1000 ppid 999 start 8640000\n\
         fopen: pid 1000 ppid 999 start 8640000\n\
         getpid 1000 getppid 999\n"
    );
}

#[test]
fn unsealed_pids_are_real_in_proc_files() {
    let bin = build_c("proc_stat", &[]);
    let out = run_seal(["--unseal", "pid", "--", bin.to_str().unwrap()]);
    out.ok();
    let lines: Vec<Vec<&str>> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let (pid, ppid) = (lines[2][1], lines[2][3]);
    assert_ne!(pid, "1000", "{}", out.show());
    for l in &lines[..2] {
        assert_eq!((l[2], l[4]), (pid, ppid), "{}", out.show());
        // Times stay sealed: the time family is.
        assert_eq!(l[6], "8640000", "{}", out.show());
    }
    let sh = sealed_sh(&["--unseal", "pid"], SHELL);
    sh.ok();
    assert!(!sh.stdout.contains("pid=1000"), "{}", sh.show());
}

/// `seal probe --attribute` on `ps -o pid= -p $$`: the line varies with the pid family, and
/// seal pins it (the sealed run prints the virtual pid, not an empty line).
#[test]
fn probe_attributes_the_ps_line_to_pid_and_seal_pins_it() {
    require_tools!("ps");
    let dir = private_tmpdir();
    let work = dir.path().join("tree");
    std::fs::create_dir_all(&work).unwrap();
    let report = dir.path().join("r.json");
    let mut c = seal(["probe", "--attribute", "--workdir"]);
    c.arg(&work).arg("--report").arg(&report);
    c.args(["--", "sh", "-c", "echo \"pid=$(ps -o pid= -p $$)\""]);
    let out = run_timeout(c, std::time::Duration::from_secs(240));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let l = r["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["text"].as_str().unwrap().starts_with("pid="))
        .unwrap_or_else(|| panic!("no pid line: {r:#}\n{}", out.show()));
    assert!(
        l["families"]
            .as_array()
            .unwrap()
            .contains(&serde_json::Value::from("pid")),
        "{l:#}"
    );
    assert_eq!(l["action"], "pin with seal", "{l:#}");
    let sealed = sealed_sh(&[], "echo \"pid=$(ps -o pid= -p $$)\"");
    assert_eq!(sealed.ok().stdout.trim(), "pid= 1000", "{}", sealed.show());
}
