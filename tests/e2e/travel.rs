//! Goldens that travel: what a program sees does not depend on how it was launched (an exec
//! wrapper such as a version manager's shim, `env`, `exec` in a script, `nice`), on where its
//! checkout lies, or on which directory it runs from.

use std::path::Path;

use crate::util::*;

/// A Python program that prints every value family a golden pins: random, uuid, wall and
/// monotonic clocks, its pid, and a child's pid, random bytes and clock.
const PY: &str = "import random, uuid, datetime, os, time, subprocess\n\
print(random.random(), uuid.uuid4(), datetime.datetime.now(), time.monotonic(), os.getpid())\n\
print(subprocess.run(['sh', '-c', 'echo $$; date +%s.%N; od -An -N4 -tx1 /dev/urandom'],\n\
      capture_output=True, text=True).stdout.split())\n";

/// Wrapper scripts that read the clock and draw randomness in-process (bash's `$EPOCHREALTIME`,
/// `$RANDOM`, `printf %()T`), start a subprocess as version managers do, then exec.
fn wrappers(dir: &Path) -> Vec<Vec<String>> {
    let shim = dir.join("python3");
    std::fs::write(
        &shim,
        "#!/bin/bash\n\
         : $EPOCHREALTIME $RANDOM $RANDOM\n\
         printf -v now '%(%s)T' -1\n\
         version=$(cat /dev/null; echo 3)\n\
         exec python3 \"$@\"\n",
    )
    .unwrap();
    let sh = dir.join("run.sh");
    std::fs::write(&sh, "#!/bin/sh\ndate >/dev/null\nexec \"$@\"\n").unwrap();
    for p in [&shim, &sh] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let shim = shim.to_str().unwrap();
    let sh = sh.to_str().unwrap();
    vec![
        s(&["python3", "-c", PY]),
        s(&["env", "python3", "-c", PY]),
        s(&["sh", "-c", "exec python3 -c \"$0\"", PY]),
        s(&[shim, "-c", PY]),
        s(&[sh, "env", "nice", "-n", "0", shim, "-c", PY]),
    ]
}

/// The seeds' workflow breaks if one extra exec changes every value: a golden recorded through
/// pyenv's shim must pass on a machine with the system interpreter.
#[test]
fn an_exec_wrapper_changes_nothing_the_program_sees() {
    let d = private_tmpdir();
    let mut first: Option<(Vec<String>, String)> = None;
    for argv in wrappers(d.path()) {
        let mut args = vec!["--".to_string()];
        args.extend(argv.iter().cloned());
        let out = run_seal(&args);
        out.ok();
        match &first {
            None => first = Some((argv, out.stdout.clone())),
            Some((a, want)) => assert_eq!(
                &out.stdout,
                want,
                "{argv:?} saw other values than {a:?}\n{}",
                out.show()
            ),
        }
    }
    let (_, out) = first.unwrap();
    assert_has(&out, "2026-01-01 00:00:00.000001");
}

/// The same for a C program: its streams, a thread's, a fork and a vfork child's.
#[test]
fn an_exec_wrapper_changes_nothing_a_c_program_sees() {
    let prog = build_c("random_golden", &[]);
    let p = prog.to_str().unwrap();
    let direct = run_seal(["--", p]);
    direct.ok();
    for wrapped in [
        vec!["--", "env", p],
        vec!["--", "sh", "-c", "echo $RANDOM >/dev/null; exec \"$0\"", p],
        vec![
            "--",
            "bash",
            "-c",
            ": $EPOCHREALTIME; exec -a other \"$0\"",
            p,
        ],
    ] {
        let out = run_seal(&wrapped);
        out.ok();
        assert_eq!(out.stdout, direct.stdout, "{wrapped:?}\n{}", out.show());
    }
}

/// A program that re-execs itself gets a fresh stream, not a repeat of its first image's.
#[test]
fn a_program_that_re_execs_itself_draws_new_values() {
    let d = private_tmpdir();
    let f = d.path().join("reexec.py");
    std::fs::write(
        &f,
        "import os, random, sys\n\
         print(random.random(), flush=True)\n\
         if len(sys.argv) < 2:\n    os.execvp('python3', ['python3', __file__, 'again'])\n",
    )
    .unwrap();
    let out = run_seal(["--", "python3", f.to_str().unwrap()]);
    out.ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.show());
    assert_ne!(
        lines[0], lines[1],
        "the second image repeated the first's stream"
    );
    assert_eq!(
        run_seal(["--", "python3", f.to_str().unwrap()]).stdout,
        out.stdout
    );
}

/// Node under an exec wrapper, and from a checkout at a 100-character longer path (the script
/// named relative to the working directory, as a golden case names it).
#[test]
fn node_values_do_not_depend_on_the_wrapper_or_the_checkout_path() {
    if !have("node") {
        report_skip("travel", true, "node not installed");
        return;
    }
    let js = "console.log(Math.random(), require('crypto').randomUUID(), Date.now(), process.pid)";
    let d = private_tmpdir();
    let short = d.path().join("a");
    let long = d.path().join("x".repeat(100)).join("a");
    let mut outs = Vec::new();
    for dir in [&short, &long] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("r.js"), js).unwrap();
        for wrapped in [&["node", "r.js"][..], &["env", "node", "r.js"]] {
            let mut args = vec!["--"];
            args.extend_from_slice(wrapped);
            let mut cmd = seal(&args);
            cmd.current_dir(dir);
            let out = run_timeout(cmd, TIMEOUT);
            out.ok();
            outs.push((dir.display().to_string(), wrapped.join(" "), out.stdout));
        }
    }
    for (dir, how, out) in &outs[1..] {
        assert_eq!(
            out, &outs[0].2,
            "{how} in {dir} differs from {} in {}",
            outs[0].1, outs[0].0
        );
    }
}

/// One interpreter under several names: `python3` (a link to `python3.11`), a venv-style
/// `python` linking to that link, and the file itself draw the same values. The name an image
/// is keyed by is its program file's, links followed, not the name a caller or a CI image
/// happened to use.
#[test]
fn an_interpreter_named_through_links_draws_what_it_draws_by_its_own_name() {
    let Some(real) = python_file() else {
        report_skip("travel", false, "python3 not installed");
        return;
    };
    let d = private_tmpdir();
    let a = d.path().join("a");
    let venv = d.path().join("venv/bin");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&venv).unwrap();
    std::os::unix::fs::symlink(&real, a.join("python3")).unwrap();
    std::os::unix::fs::symlink("../../a/python3", venv.join("python")).unwrap();
    let code = "import random, uuid, datetime; print(random.random(), uuid.uuid4(), datetime.datetime.now())";
    let names = [
        real.display().to_string(),
        a.join("python3").display().to_string(),
        venv.join("python").display().to_string(),
    ];
    let outs: Vec<Output> = names
        .iter()
        .map(|p| {
            let out = run_timeout(seal(["--", p.as_str(), "-c", code]), TIMEOUT);
            out.ok();
            out
        })
        .collect();
    for (name, out) in names.iter().zip(&outs).skip(1) {
        assert_eq!(
            out.stdout,
            outs[0].stdout,
            "{name} differs from {}\n{}",
            names[0],
            out.show()
        );
    }
}

/// The interpreter's own file (`python3`'s links followed).
fn python_file() -> Option<std::path::PathBuf> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import os, sys; print(os.path.realpath(sys.executable))",
        ])
        .output()
        .ok()?;
    let p = String::from_utf8(out.stdout).ok()?;
    let p = std::path::PathBuf::from(p.trim());
    p.is_file().then_some(p)
}
