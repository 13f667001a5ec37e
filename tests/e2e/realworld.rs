//! End-to-end tests found by sweeping real native programs (coreutils, bash, make, git, …)
//! under seal: each pins a problem that no fixture had shown. Tools that are not installed
//! are skipped with a printed note. See docs/realworld.md for the sweep and what varies by
//! design.
use std::path::PathBuf;
use std::time::Duration;

use crate::util::*;

/// A per-test scratch directory at a fixed path (so paths are comparable across runs),
/// emptied first.
fn scratch(name: &str) -> PathBuf {
    let d = build_dir().join(format!("realworld-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A shell that polls the clock until some time has passed (`SECONDS`, `date +%s`) while an
/// external `sleep` does the waiting: the parent's clock must take in the child's time when
/// it reaps it, or the loop never ends (it did, before parents adopted children's waits).
#[test]
fn shell_elapsed_time_loops_end() {
    require_tools!("bash");
    let script = r#"
end=$((SECONDS+2)); n=0
while [ $SECONDS -lt $end ]; do sleep 0.5; n=$((n+1)); done
echo seconds-loop $n
s=$(date +%s); m=0
while [ $(( $(date +%s) - s )) -lt 2 ]; do sleep 0.5; m=$((m+1)); done
echo date-loop $m
a=$EPOCHREALTIME; sleep 0.25; b=$EPOCHREALTIME
echo slept ${a} ${b}
"#;
    // Both runs mostly sleep (4 s each) and make no temp files: they run at once.
    let mut runs = run_concurrently(
        sealed_n(&["bash", "-c", script], 2),
        Duration::from_secs(30),
    );
    let again = runs.pop().unwrap();
    let out = runs.pop().unwrap();
    out.ok();
    out.stdout_has("seconds-loop 4\n");
    out.stdout_has("date-loop 4\n");
    assert_eq!(out.stdout, again.stdout, "{}", again.show());
    // The sleep's quarter second shows in the parent's own clock.
    let slept: Vec<f64> = out
        .stdout
        .lines()
        .find(|l| l.starts_with("slept "))
        .unwrap()
        .split(' ')
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    let d = slept[1] - slept[0];
    assert!((0.25..0.26).contains(&d), "elapsed {d}\n{}", out.show());
}

/// A fork child that sleeps and ends with `os._exit` (no destructors), and `system()`: the
/// parent's clock moves by the child's sleep.
#[test]
fn fork_child_and_system_waits_reach_the_parent() {
    require_tools!("python3");
    let script = r#"
import os, time
t0 = time.time()
pid = os.fork()
if pid == 0:
    time.sleep(0.3)
    os._exit(0)
os.waitpid(pid, 0)
t1 = time.time()
os.system("sleep 0.2")
t2 = time.time()
print(round(t1 - t0, 3), round(t2 - t1, 3))
"#;
    // Each run mostly sleeps and makes no temp files: the three run at once.
    let out = assert_sealed_stable_concurrently(&["python3", "-c", script], 3);
    assert_eq!(out, "0.3 0.2\n");
}

/// bash's `time` keyword and `times` builtin, and GNU time, print CPU times from `getrusage`
/// and `wait4`'s resource usage: sealed like `CLOCK_PROCESS_CPUTIME_ID` (they varied run to
/// run before).
#[test]
fn shell_time_and_times_are_stable() {
    require_tools!("bash");
    let mut script =
        String::from("{ time sleep 0.1; TIMEFORMAT=%R/%U/%S; time (sleep 0.2); times\n");
    let gnu = std::path::Path::new("/usr/bin/time").exists();
    if gnu {
        script.push_str("/usr/bin/time -f 'gnu %e %U %S' sleep 0.3\n");
    } else {
        skip_part!("/usr/bin/time is not installed; GNU time not checked");
    }
    script.push_str("} 2>&1\n");
    let out = assert_sealed_stable(&["bash", "-c", &script], 3);
    assert_has(&out, "\n0.200/");
    if gnu {
        assert_has(&out, "gnu 0.30 0.00 0.00");
    }
}

/// libgcrypt (GnuPG's crypto library) mixes the whole `getrusage` struct (page faults,
/// context switches, max RSS) into its weak-random pool and nonces: sealed, they no longer
/// move its output. Its RDRAND mixing cannot be interposed, so the check turns it off when
/// it can (`/etc/gcrypt/hwf.deny`), and otherwise only checks that the seal holds for the
/// strong generator.
#[test]
fn rusage_counters_are_sealed() {
    require_tools!("python3");
    let script = r#"
import resource
u = resource.getrusage(resource.RUSAGE_SELF)
c = resource.getrusage(resource.RUSAGE_CHILDREN)
print(u.ru_utime > 0, u.ru_stime, u.ru_maxrss, u.ru_minflt, u.ru_nvcsw, c.ru_utime, c.ru_maxrss)
try:
    import ctypes
    g = ctypes.CDLL("libgcrypt.so.20")
    g.gcry_check_version.restype = ctypes.c_char_p
    g.gcry_check_version(None)
    b = ctypes.create_string_buffer(16)
    g.gcry_randomize(b, 16, 1)
    print("gcrypt strong", b.raw.hex())
except OSError:
    print("no libgcrypt")
"#;
    let out = assert_sealed_stable(&["python3", "-c", script], 3);
    assert!(out.starts_with("True 0.0 0 0 0 0.0 0\n"), "{out}");
}

/// A background job that outlives the run (`cmd &` as the script's last act, a daemon) and
/// then forks or execs finds the run dir gone: one clear line per process, not two confusing
/// ones about census files and run tables, and its output still sealed.
#[test]
fn processes_outliving_the_run_say_so_once() {
    require_tools!("bash");
    // The job holds stdout/stderr open, so the harness reads until it ends. It waits for the
    // launcher (virtual pid 999) to be gone, rather than for a fixed time that a loaded
    // machine may not honour, then starts `date` after the run.
    let job = "(while kill -0 999 2>/dev/null; do sleep 0.05; done; date +%Y >/dev/null; echo after) & echo started";
    let out = run_seal(["--", "bash", "-c", job]);
    out.ok();
    assert_eq!(out.stdout, "started\nafter\n", "{}", out.show());
    out.stderr_has("started after its sealed run ended");
    out.stderr_lacks("cannot ");
    let quiet = run_seal(["-q", "--", "bash", "-c", job]);
    assert_eq!(quiet.stderr, "", "{}", quiet.show());
}

/// `xargs -P4` reaps its children in whatever order they end. Children that only read the
/// clock must not move the parent's clock (their ends would then shift the next child's start
/// by a few ticks, differently every run); children that sleep move it by their sleep.
#[test]
fn parallel_children_keep_their_start_times() {
    require_tools!("xargs");
    let script = "seq 12 | xargs -P4 -n1 sh -c 'date +%s.%N' | sort; \
                  seq 8 | xargs -P4 -n1 sh -c 'sleep 0.$0; date +%s.%N' | sort; date +%s.%N";
    // One run after another, not at once: which of four sleeping children a parent reaps
    // first follows real time, and overlapping runs on a busy machine blur it.
    let out = assert_sealed_stable(&["sh", "-c", script], 5);
    // Four slots: the sleeps of 0.5..0.8 s start as those of 0.1..0.4 s end, so the last
    // ends at 1.2 s, as in real time.
    assert!(out.ends_with("\n1767225601.200000000\n"), "{out}");
}

/// Everyday tools in one script, run from a fixed fresh directory each time: `make -j2` builds
/// and then rebuilds only what `touch` made newer (make compares real file times with each
/// other, which seal leaves alone), git commit hashes (dates from the sealed clock), `mktemp`
/// in a fresh `TMPDIR`, `sort -R`, `shuf`, and `cc`'s `__DATE__`.
#[test]
fn make_git_mktemp_sort_are_stable() {
    require_tools!("make", "cc", "git", "mktemp", "shuf");
    let dir = scratch("tools");
    let script = format!(
        r#"set -e
cd {d}; rm -rf w; mkdir w; cd w
printf 'int f(void);\nint main(void){{return f();}}\n' > m.c
printf 'int f(void){{return 0;}}\n' > f.c
printf 'prog: m.o f.o\n\tcc -o prog m.o f.o\n%%.o: %%.c\n\tcc -c $< -o $@\n' > Makefile
make -j2 2>/dev/null | sort
sleep 0.01; touch f.c; make 2>/dev/null
./prog && echo built
git init -q r; cd r; git config user.email a@b; git config user.name A
echo x > f; git add f; git commit -qm one; git log --format='%H %ad'; cd ..
TMPDIR=$PWD mktemp; TMPDIR=$PWD mktemp -d
seq 10 | sort -R | tr '\n' ' '; seq 10 | shuf | tr '\n' ' '; echo
printf '#include <stdio.h>\nint main(void){{puts(__DATE__);return 0;}}\n' > d.c; cc -o d d.c; ./d
"#,
        d = dir.display()
    );
    let out = assert_sealed_stable(&["bash", "-c", &script], 3);
    assert!(
        out.contains("cc -c f.c -o f.o\ncc -o prog m.o f.o\nbuilt\n"),
        "the touched file was not rebuilt alone:\n{out}"
    );
    assert_has(&out, " Thu Jan 1 00:00:00 2026 +0000\n");
    assert!(out.ends_with("Jan  1 2026\n"), "{out}");
}

/// util-linux tools that take a pid (`renice -p`, `prlimit --pid`, `chrt -p`, `ionice -p`,
/// `taskset -p`) given `$$` or `$!`, which are virtual: the pid must reach the right process
/// (they failed with "No such process" before `getpriority`, `setpriority`, `prlimit`, the
/// `sched_*` pid calls and `syscall(ioprio_*)` translated it), and `sigqueue` to oneself.
#[test]
fn pid_taking_tools_reach_the_right_process() {
    require_tools!("renice", "prlimit", "chrt", "ionice", "taskset");
    let script = r#"
renice -n 1 -p $$ | cut -d' ' -f1-3
prlimit --pid $$ --nofile --noheadings --output RESOURCE
chrt -p $$ | head -1
ionice -p $$
taskset -p $$ | cut -d: -f1
sleep 5 & p=$!; renice -n 2 -p $p >/dev/null && echo child-reniced; kill $p
python3 -c 'import os, signal; signal.signal(signal.SIGUSR1, lambda *a: print("queued")); signal.sigqueue(os.getpid(), signal.SIGUSR1, 7) if hasattr(signal, "sigqueue") else print("queued")'
"#;
    let out = assert_sealed_stable(&["bash", "-c", script], 2);
    assert_eq!(
        out,
        "1000 (process ID)\nNOFILE\n\
         pid 1000's current scheduling policy: SCHED_OTHER\nnone: prio 0\n\
         pid 1000's current affinity mask\nchild-reniced\nqueued\n",
        "{out}"
    );
}

/// `ldd` runs the dynamic loader as a program, and so does `ld.so /path/prog`: the loader has
/// no `PT_INTERP` (it is the interpreter) but reads `LD_PRELOAD` like any loaded program, so
/// it must not be reported as an unsealable static binary, and what it runs is sealed.
#[test]
fn the_dynamic_loader_run_as_a_program_is_sealed() {
    let loader = "/lib64/ld-linux-x86-64.so.2";
    if !std::path::Path::new(loader).exists() {
        skip!("no {loader}");
    }
    require_tools!("ldd");
    let script = format!("ldd /bin/true >/dev/null && echo ldd-ok; {loader} /bin/date +%s");
    let out = run_seal(["--", "bash", "-c", &script]);
    out.ok();
    assert_eq!(out.stdout, "ldd-ok\n1767225600\n", "{}", out.show());
    out.says_nothing_unsealed();
    let root = run_seal(["--", loader, "/bin/date", "+%s"]);
    root.ok();
    assert_eq!(root.stdout, "1767225600\n", "{}", root.show());
    root.says_nothing_unsealed();
}

/// Perl's hash key order is the same whatever the environment, the working directory or
/// HOME (field sweep: `keys %h` came out in 4 orders over 5 runs; Perl mixes heap addresses
/// and the number of hashes it made before, which move with the environment, into each
/// hash's order unless `PERL_PERTURB_KEYS=0`, which the launcher now sets with the seed).
#[test]
fn perl_hash_order_does_not_follow_the_environment() {
    require_tools!("perl");
    let prog = "my %h = map { $_ => 1 } ('a'..'t'); my %g = (%h, x => 1); \
                print join(',', keys %h), ' ', join(',', keys %g), qq(\\n)";
    let base = scratch("perl-hash");
    let deep = base.join("a/much/deeper/working/directory");
    std::fs::create_dir_all(&deep).unwrap();
    let path = std::env::var_os("PATH").unwrap();
    let runs: Vec<Output> = (0..5)
        .map(|i| {
            let mut c = seal(["--", "perl", "-e", prog]);
            match i {
                1 => {
                    c.env("PADDING", "x".repeat(3000));
                }
                2 => {
                    c.env_clear()
                        .env("PATH", &path)
                        .env("HOME", &base)
                        .env("XDG_CACHE_HOME", cache_home());
                }
                3 => {
                    c.current_dir(&deep).env("OLDPWD", "/usr/share/doc/x");
                }
                4 => {
                    c.env("HOME", &deep)
                        .env("LANG", "C")
                        .env("EXTRA", "1".repeat(300));
                }
                _ => {}
            }
            let out = run_timeout(c, Duration::from_secs(30));
            assert_eq!(out.code, Some(0), "{}", out.show());
            out
        })
        .collect();
    assert_same_stdout("perl hash order under 5 environments", &runs);
}
