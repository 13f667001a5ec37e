//! seal-bench: measures seal side by side with bare runs and libfaketime in one run and
//! (re)writes BENCHMARKS.md. Run it with `cargo run --release -p seal-bench`.
//!
//! Three measurements, each in interleaved rounds and reported as medians (a benchmark, never
//! a timed test): per-call cost of the clock and randomness entry points (percall.rs), startup
//! of `seal run -- true` and a Python workload (process.rs), and optionally instructions per
//! call under callgrind (callgrind.rs). report.rs renders the markdown.

mod callgrind;
mod machine;
mod measure;
mod percall;
mod process;
mod pytest;
mod report;
mod runtimes;
mod startup;
mod statics;
mod switches;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use measure::{Launch, Mode};

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

const USAGE: &str = "\
usage: cargo run --release -p seal-bench -- [OPTIONS]

Measures seal against bare runs and libfaketime and rewrites BENCHMARKS.md.

Options:
  --quick              few rounds: a quick look, not figures to publish
  --no-write           print the markdown only; leave BENCHMARKS.md alone
  --out FILE           write here instead of BENCHMARKS.md at the workspace root
  --seal PATH          measure this seal binary instead of building the release one
  --rounds N           per-call rounds (default 9)
  --iterations N       calls per per-call batch (default 400000)
  --startup-runs N     runs of `true` per mode (default 150)
  --python-rounds N    rounds of the Python workload (default 7)
  --no-faketime        skip libfaketime even when installed
  --no-callgrind       skip the instruction counts even when valgrind is installed
  --no-python          skip the Python workload
  --no-startup         skip the start-up and per-process section
  --no-runtimes        skip the JVM and Node section
  --runtime-rounds N   rounds of the JVM and Node workloads (default 5)
  --no-static          skip the static-image and Go section
  --static-only        measure the static-image and Go section only and print it (BENCHMARKS.md
                       is left alone)
  --static-rounds N    rounds of the static-image and Go section (default 9)
  --no-switches        skip the context-switch section
  --switches-only      measure the context-switch section only and print it (writes nothing)
  --switch-rounds N    rounds of the context-switch section (default 9)
  --no-pytest          skip the `pytest --seal` section
  --pytest-rounds N    rounds of the `pytest --seal` section (default 7)
  --pytest-only        measure only the `pytest --seal` section and print it (writes nothing)";

struct Options {
    quick: bool,
    write: bool,
    out: Option<PathBuf>,
    seal: Option<PathBuf>,
    rounds: usize,
    iterations: u64,
    startup_runs: usize,
    python_rounds: usize,
    faketime: bool,
    callgrind: bool,
    python: bool,
    startup: bool,
    runtimes: bool,
    runtime_rounds: usize,
    statics: bool,
    static_only: bool,
    switches: bool,
    switches_only: bool,
    switch_rounds: usize,
    static_rounds: usize,
    pytest: bool,
    pytest_rounds: usize,
    pytest_only: bool,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        quick: false,
        write: true,
        out: None,
        seal: None,
        rounds: 9,
        iterations: 400_000,
        startup_runs: 150,
        python_rounds: 7,
        faketime: true,
        callgrind: true,
        python: true,
        startup: true,
        runtimes: true,
        runtime_rounds: 5,
        statics: true,
        static_only: false,
        switches: true,
        switches_only: false,
        switch_rounds: 9,
        static_rounds: 9,
        pytest: true,
        pytest_rounds: 7,
        pytest_only: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        let number = |name: &str, v: String| {
            v.parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(format!("{name}: not a positive number: {v}"))
        };
        match a.as_str() {
            "--quick" => {
                o.quick = true;
                o.rounds = 3;
                o.iterations = 200_000;
                o.startup_runs = 20;
                o.python_rounds = 2;
                o.runtime_rounds = 1;
                o.pytest_rounds = 2;
                o.switch_rounds = 2;
            }
            "--no-write" => o.write = false,
            "--out" => o.out = Some(value("--out")?.into()),
            "--seal" => o.seal = Some(value("--seal")?.into()),
            "--rounds" => o.rounds = number(&a, value(&a)?)? as usize,
            "--iterations" => o.iterations = number(&a, value(&a)?)?.max(8),
            "--startup-runs" => o.startup_runs = number(&a, value(&a)?)? as usize,
            "--python-rounds" => o.python_rounds = number(&a, value(&a)?)? as usize,
            "--no-faketime" => o.faketime = false,
            "--no-callgrind" => o.callgrind = false,
            "--no-python" => o.python = false,
            "--no-startup" => o.startup = false,
            "--no-runtimes" => o.runtimes = false,
            "--runtime-rounds" => o.runtime_rounds = number(&a, value(&a)?)? as usize,
            "--no-static" => o.statics = false,
            "--static-only" => {
                o.static_only = true;
                o.write = false;
            }
            "--static-rounds" => o.static_rounds = number(&a, value(&a)?)? as usize,
            "--no-switches" => o.switches = false,
            "--switches-only" => {
                o.switches_only = true;
                o.write = false;
            }
            "--switch-rounds" => o.switch_rounds = number(&a, value(&a)?)? as usize,
            "--no-pytest" => o.pytest = false,
            "--pytest-rounds" => o.pytest_rounds = number(&a, value(&a)?)? as usize,
            "--pytest-only" => {
                o.pytest_only = true;
                o.write = false;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}\n\n{USAGE}")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    without_cargos_library_path();
    match parse_args().and_then(|o| run(&o)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("seal-bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Takes out of `LD_LIBRARY_PATH` the directories `cargo run` put there (the target
/// directory's, the toolchain's): every dynamically linked program the benchmark starts, bare
/// or sealed, and `seal` itself, looked for each library in them first (four directories,
/// each with its `glibc-hwcaps` subdirectories: ~16 failed opens per library), which no user's
/// run does: a sealed dynamic `true` measured +1.29 ms over bare with them, +1.16 without.
/// Called first, while this process runs one thread.
fn without_cargos_library_path() {
    let Some(paths) = std::env::var_os("LD_LIBRARY_PATH") else {
        return;
    };
    let target = workspace_root().join("target");
    let cargos = |p: &Path| {
        p.starts_with(&target)
            || std::env::var_os("CARGO_TARGET_DIR").is_some_and(|t| p.starts_with(t))
            || p.components()
                .any(|c| c.as_os_str() == "rustlib" || c.as_os_str() == "toolchains")
    };
    let kept: Vec<PathBuf> = std::env::split_paths(&paths)
        .filter(|p| !cargos(p))
        .collect();
    match kept.is_empty() {
        true => std::env::remove_var("LD_LIBRARY_PATH"),
        false => match std::env::join_paths(kept) {
            Ok(v) => std::env::set_var("LD_LIBRARY_PATH", v),
            Err(_) => std::env::remove_var("LD_LIBRARY_PATH"),
        },
    }
}

/// The workspace root (this crate lives in `<root>/bench`).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench crate has a parent directory")
        .to_path_buf()
}

/// Builds the release `seal` next to this binary (same target directory) and returns it.
fn build_seal(root: &Path) -> Result<PathBuf, String> {
    eprintln!("seal-bench: building the release seal (cargo build --release -p seal)");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(root)
        .args(["build", "--release", "--quiet", "-p", "seal"])
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err("cargo build --release -p seal failed".into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let seal = exe.with_file_name("seal");
    if !seal.is_file() {
        return Err(format!("built seal not found at {}", seal.display()));
    }
    read_afresh(&seal);
    Ok(seal)
}

/// Drops `file`'s pages from the page cache (written back first), so that its first run reads
/// it as a program installed earlier is read. Just linked, its cached pages were the ones the
/// linker wrote: the same bytes ran a one-shot sealed Go hello world ~0.15 ms slower (80
/// paired rounds) than after this, or than a `cp` of them (docs/design.md, "The launcher's
/// own start").
fn read_afresh(file: &Path) {
    use std::os::fd::AsRawFd;
    if let Ok(f) = std::fs::File::open(file) {
        let _ = f.sync_all();
        // SAFETY: advice on our own descriptor.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
}

/// `git` commit of the measured tree, marked when it had uncommitted changes.
fn revision(root: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(rev) => match git(&["status", "--porcelain", "--untracked-files=no"]) {
            Some(changes) if !changes.is_empty() => format!("`{rev}` plus uncommitted changes"),
            _ => format!("`{rev}`"),
        },
        None => "not a git checkout".into(),
    }
}

/// A program's full path from PATH.
pub(crate) fn which(prog: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// The real Python interpreter (not a pyenv shim script, whose own start-up would dominate).
pub(crate) fn python_exe() -> Option<PathBuf> {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && p.is_file()).then_some(p)
}

fn run(o: &Options) -> Result<(), String> {
    let root = workspace_root();
    let seal = match &o.seal {
        Some(p) => p
            .canonicalize()
            .map_err(|e| format!("--seal {}: {e}", p.display()))?,
        None => build_seal(&root)?,
    };
    let faketime = Path::new(LIBFAKETIME);
    let faketime = (o.faketime && faketime.is_file()).then(|| faketime.to_path_buf());
    if o.faketime && faketime.is_none() {
        eprintln!(
            "seal-bench: libfaketime is not installed ({LIBFAKETIME}); measuring without it \
             (apt-get install -y faketime)"
        );
    }
    if faketime.is_some() {
        clear_faketime_leftovers(Path::new("/dev/shm"));
    }
    let workdir = std::env::temp_dir().join(format!("seal-bench-{}", std::process::id()));
    std::fs::create_dir_all(&workdir)
        .map_err(|e| format!("cannot create {}: {e}", workdir.display()))?;
    let result = if o.pytest_only {
        pytest::measure(&seal, &root, &workdir, o.pytest_rounds)
            .map(|r| r.map(|r| pytest::render(&r)).unwrap_or_default())
    } else {
        measure_all(o, &root, seal, faketime, &workdir)
    };
    let _ = std::fs::remove_dir_all(&workdir);
    let markdown = result?;
    print!("{markdown}");
    if o.write {
        let out = o.out.clone().unwrap_or_else(|| root.join("BENCHMARKS.md"));
        let kept = std::fs::read_to_string(&out)
            .ok()
            .and_then(|old| {
                old.find(report::KEEP_MARKER)
                    .map(|i| old[i + report::KEEP_MARKER.len()..].to_string())
            })
            .unwrap_or_else(|| "\n".into());
        let text = format!("{markdown}{}{kept}", report::KEEP_MARKER);
        std::fs::write(&out, text).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
        eprintln!("seal-bench: wrote {}", out.display());
    }
    Ok(())
}

/// Removes what killed `faketime` wrappers left in `shm`: the wrapper names its semaphore and
/// shared memory after its pid (`sem.faketime_sem_<pid>`, `faketime_shm_<pid>`) and fails
/// ("File exists") when a later wrapper gets the same pid, which a benchmark of thousands of
/// processes does once a few hundred are left. Only this user's entries of pids that are gone.
fn clear_faketime_leftovers(shm: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(shm) else {
        return;
    };
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("sem.faketime_sem_")
            .or_else(|| name.strip_prefix("faketime_shm_"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let ours = e.metadata().is_ok_and(|m| m.uid() == uid && m.is_file());
        if ours && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn measure_all(
    o: &Options,
    root: &Path,
    seal: PathBuf,
    faketime: Option<PathBuf>,
    workdir: &Path,
) -> Result<String, String> {
    let machine = machine::Machine::probe(faketime.as_deref());
    let launch = Launch {
        seal,
        faketime,
        workdir: workdir.to_path_buf(),
    };
    let mut modes = vec![Mode::Bare, Mode::Seal];
    if launch.faketime.is_some() {
        modes.push(Mode::Faketime);
    }
    let at = |rounds| process::Section {
        launch: &launch,
        root,
        dir: workdir,
        modes: &modes,
        rounds,
    };
    if o.static_only {
        let load = machine::load_average();
        let section = statics::section(&at(o.static_rounds))?;
        let after = machine::load_average();
        return Ok(format!(
            "{}(load average {load} before, {after} after; {})\n",
            section.unwrap_or_default(),
            revision(root)
        ));
    }
    let switches = |rounds| {
        let faketime = launch.faketime.is_some();
        switches::section(&launch, root, workdir, faketime, rounds)
    };
    if o.switches_only {
        let load = machine::load_average();
        let section = switches(o.switch_rounds)?;
        let after = machine::load_average();
        return Ok(format!(
            "{section}(load average {load} before, {after} after; {})\n",
            revision(root)
        ));
    }
    let percall_bin = percall::compile(root, workdir)?;
    let true_bin = which("true").ok_or("`true` is not on PATH")?;

    // Warm: the first seal run extracts the shim to the cache directory.
    measure::run(launch.command(Mode::Seal, &true_bin, &[]), false)?;

    let batches = 3;
    eprint!(
        "seal-bench: per-call cost, {} rounds × {} modes ",
        o.rounds,
        modes.len()
    );
    let percall = percall::measure(
        &launch,
        &percall_bin,
        &modes,
        o.rounds,
        o.iterations,
        batches,
    )?;

    eprint!(
        "seal-bench: startup, {} runs × {} modes ",
        o.startup_runs,
        modes.len()
    );
    let startup = process::measure(&launch, &true_bin, &[], &modes, 5, o.startup_runs, 10)?;

    let py = if o.python { python_exe() } else { None };
    let python = match &py {
        Some(exe) => {
            eprint!(
                "seal-bench: Python workload, {} rounds × {} modes ",
                o.python_rounds,
                modes.len()
            );
            let args: Vec<OsString> = vec![root.join("fixtures/bench/workload.py").into()];
            Some(process::measure(
                &launch,
                exe,
                &args,
                &modes,
                1,
                o.python_rounds,
                1,
            )?)
        }
        None => {
            if o.python {
                eprintln!("seal-bench: python3 not found; skipping the Python workload");
            }
            None
        }
    };

    let startup_section = if o.startup {
        let env = startup::Env {
            launch: &launch,
            empty_so: startup::empty_so(workdir)?,
            faketime_cmd: which("faketime").filter(|_| launch.faketime.is_some()),
            shim: startup::ShimHolder::start(&launch)
                .map_err(|e| eprintln!("seal-bench: no libseal-only column: {e}"))
                .ok(),
        };
        let r = startup::measure_all(&env, o.quick)?;
        Some(startup::render(&r, launch.faketime.is_some()))
    } else {
        None
    };

    let runtimes_section = if o.runtimes {
        runtimes::section(&at(o.runtime_rounds))?
    } else {
        None
    };

    let statics_section = if o.statics {
        statics::section(&at(o.static_rounds))?
    } else {
        None
    };

    let switches_section = if o.switches {
        Some(switches(o.switch_rounds)?)
    } else {
        None
    };

    let pytest_section = if o.pytest {
        pytest::measure(&launch.seal, root, workdir, o.pytest_rounds)?.map(|r| pytest::render(&r))
    } else {
        None
    };

    let mut callgrind = BTreeMap::new();
    let mut callgrind_note = None;
    if o.callgrind && which("valgrind").is_some() {
        eprint!("seal-bench: instructions per call (callgrind) ");
        'modes: for &mode in &modes {
            for (op, _) in percall::OPS
                .iter()
                .filter(|(op, _)| callgrind::countable(op))
            {
                match callgrind::per_call(&launch, mode, &percall_bin, op, callgrind::divisor(op)) {
                    Ok(v) => {
                        callgrind.insert((mode.name(), *op), v);
                    }
                    Err(e) => {
                        eprintln!("\nseal-bench: callgrind: {e}");
                        callgrind_note = Some(format!(
                            "Callgrind could not measure the {} mode on this machine: {e}",
                            mode.name()
                        ));
                        continue 'modes;
                    }
                }
                eprint!(".");
            }
        }
        eprintln!();
    } else if o.callgrind {
        callgrind_note = Some(
            "Instruction counts were skipped: valgrind is not installed \
             (`apt-get install -y valgrind`)."
                .into(),
        );
    }

    let results = report::Results {
        machine,
        load_after: machine::load_average(),
        faketime: launch.faketime.is_some(),
        faketime_skipped: if o.faketime {
            "it is not installed (`apt-get install -y faketime`)"
        } else {
            "skipped with `--no-faketime`"
        },
        percall,
        percall_rounds: o.rounds,
        iterations: o.iterations,
        batches,
        startup,
        python,
        python_exe: py
            .as_ref()
            .map_or("python3".into(), |p| p.display().to_string()),
        python_skipped: if o.python {
            "python3 not found"
        } else {
            "skipped with `--no-python`"
        },
        callgrind,
        callgrind_note,
        revision: revision(root),
        command_line: std::iter::once("cargo run --release -p seal-bench".to_string())
            .chain(if std::env::args().len() > 1 {
                Some("--".to_string())
            } else {
                None
            })
            .chain(std::env::args().skip(1))
            .collect::<Vec<_>>()
            .join(" "),
    };
    if o.quick {
        eprintln!("seal-bench: --quick: few rounds; do not publish these figures");
    }
    let mut text = report::render(&results);
    for section in [
        startup_section,
        runtimes_section,
        statics_section,
        switches_section,
        pytest_section,
    ]
    .into_iter()
    .flatten()
    {
        text.push('\n');
        text.push_str(&section);
    }
    Ok(text)
}
