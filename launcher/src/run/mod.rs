//! Running a command sealed: the environment handed to the shim, address-space randomisation
//! off, and the child's status (the run directory is [`crate::run::rundir`]).
//!
//! `seal run` and `seal census` use [`run_interactive`] (stdio and terminal pass through
//! untouched);
//! `verify`, `probe` and `golden` use [`run_captured`].

pub mod confine;
mod contract;
pub mod cpus;
pub mod direct;
pub mod exec_check;
pub mod filetimes;
pub mod private_tmp;
pub mod rundir;
pub mod shim;
pub mod static_image;
mod status;
pub mod supervise;
mod watch;

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, ExitCode, ExitStatus, Stdio};

use anyhow::{Context, Result};
use seal_abi::settings as senv;
use seal_abi::unsealed;

use crate::census::{self, Census};
use crate::config::Settings;
use rundir::RunDir;
pub use status::{status_code, SpawnError, EXIT_NOT_FOUND, EXIT_SEAL_FAILED};

/// The real `CLOCK_MONOTONIC` now, what `--rate` measures the run's time from.
fn real_monotonic_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// A static root command the launcher's child can exec itself under supervision (its
/// supervisor is forked): the static binary libseal would report, and the child's end of the
/// socket pair with the supervisor.
pub struct StaticRoot {
    program: std::path::PathBuf,
    sock: std::os::fd::OwnedFd,
}

/// A static root command (a static binary this kernel can supervise), found before the run
/// directory is made: the file to start, the static binary libseal would report, and the
/// child's end of the socket pair with its supervisor, which the launcher forks with the run
/// directory.
pub struct RootPlan {
    path: std::path::PathBuf,
    program: std::path::PathBuf,
    child: Option<std::os::fd::OwnedFd>,
}

/// For root command `argv0`: its [`RootPlan`] when it is a static one, and the supervisor's end
/// of the socket pair, for [`RunDir::create`] (none: the trampoline sets the supervision up);
/// and whether it is a dynamically linked Go program, for which the launcher starts the run's
/// server ([`RunDir::go_root`]).
pub fn plan_root(
    argv0: &OsStr,
) -> (
    Option<RootPlan>,
    Option<std::os::fd::OwnedFd>,
    Option<std::path::PathBuf>,
) {
    use crate::run::exec_check::Plan;
    let (path, program) = match crate::run::exec_check::plan(argv0) {
        Plan::Static(path, program) => (path, program),
        Plan::DynamicGo(path) => return (None, None, Some(path)),
        Plan::Other => return (None, None, None),
    };
    let (child, supervisor) =
        static_image::root_pair().map_or((None, None), |(c, s)| (Some(c), Some(s)));
    (
        Some(RootPlan {
            path,
            program,
            child,
        }),
        supervisor,
        None,
    )
}

/// Builds the sealed command for `argv` in `run_dir` (not yet spawned), and for a static root
/// (`plan`, from [`plan_root`]) whose supervisor is forked, what [`StaticRoot::prepare`] needs.
pub fn sealed_command(
    settings: &Settings,
    shim_path: &Path,
    run_dir: &Path,
    argv: &[OsString],
    plan: Option<RootPlan>,
) -> Result<(Command, Option<StaticRoot>)> {
    // The kernel puts the file name it is given on the new stack: name the file found in PATH
    // here, so the pad (`pad_stack`) knows its length (argv[0] stays as typed).
    crate::run::static_image::make_link(run_dir)
        .with_context(|| format!("cannot link seal into {}", run_dir.display()))?;
    let mut root = None;
    let mut cmd = match (crate::run::exec_check::resolve(&argv[0]), plan) {
        // A static root: the launcher's child sets up its supervision and execs it
        // (`StaticRoot`); failing that, libseal does in `seal __exec-static`.
        (
            _,
            Some(RootPlan {
                path,
                program,
                child,
            }),
        ) => {
            if let Some(sock) = child {
                root = Some(StaticRoot { program, sock });
            }
            let mut c = Command::new(crate::run::static_image::link_in(run_dir));
            c.arg(crate::run::static_image::EXEC_ARG)
                .arg(&path)
                .arg(&argv[0]);
            c
        }
        (Some(path), None) if !argv[0].as_bytes().contains(&b'/') => {
            use std::os::unix::process::CommandExt;
            let mut c = Command::new(path);
            c.arg0(&argv[0]);
            c
        }
        _ => Command::new(&argv[0]),
    };
    cmd.args(&argv[1..]);
    for v in senv::PER_PROCESS.iter().chain([&senv::PAD]) {
        cmd.env_remove(v);
    }
    let mut preload = OsString::from(shim_path);
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        // Keep what the user preloads, after us; drop older copies of libseal.
        for part in old
            .to_string_lossy()
            .split([':', ' '])
            .filter(|p| !p.is_empty() && !p.contains("libseal"))
        {
            preload.push(":");
            preload.push(part);
        }
    }
    cmd.env("LD_PRELOAD", preload);
    let (shim, dir) = (shim_path.as_os_str(), run_dir.as_os_str());
    let run = senv::Run {
        run_dir: dir.as_bytes(),
        shim: shim.as_bytes(),
        flags: settings.shim_flags(),
        real_start_ns: real_monotonic_ns(),
        files_start_ns: if settings.unsealed("files") {
            0
        } else {
            crate::run::filetimes::files_start(run_dir)?
        },
    };
    contract::encode_contract(settings, run, |name, value| {
        cmd.env(name, OsStr::from_bytes(value));
    });
    if !settings.unsealed("env") {
        if !settings.unsealed("hashseed") {
            cmd.env("PYTHONHASHSEED", settings.hash_seed.to_string());
            // Perl's key order mixes heap addresses and the number of hashes made before
            // (each moves with the environment's size) into every hash unless perturbation
            // is off; the seed itself is then the only input (docs/design.md).
            cmd.env("PERL_HASH_SEED", format!("0x{:x}", settings.hash_seed))
                .env("PERL_PERTURB_KEYS", "0");
        }
        if !settings.unsealed("tz") {
            cmd.env("TZ", &settings.tz);
        }
        if !settings.unsealed("locale") {
            cmd.env("LC_ALL", &settings.locale)
                .env("LANG", &settings.locale)
                .env_remove("LANGUAGE");
        }
        if !settings.unsealed("time") {
            cmd.env(
                "SOURCE_DATE_EPOCH",
                settings.epoch_ns.div_euclid(1_000_000_000).to_string(),
            );
        }
    }
    for (k, v) in &settings.env {
        cmd.env(k, v);
    }
    Ok((cmd, root))
}

impl StaticRoot {
    /// What the child needs to exec the root itself: `cmd` complete (environment and pad).
    fn prepare(
        self,
        cmd: &Command,
        settings: &Settings,
        run_dir: &Path,
    ) -> Option<std::sync::Arc<static_image::RootExec>> {
        let flags = settings.shim_flags();
        static_image::RootExec::prepare(cmd, run_dir, flags, &self.program, self.sock)
            .map(std::sync::Arc::new)
    }
}

/// After the spawn: a root the child exec'd itself was reported by no libseal; say it as
/// libseal's exec hook would have (`static-binary-supervised`, in the root's census).
fn root_report(root: Option<&static_image::RootExec>) -> Option<Vec<u8>> {
    let root = root.filter(|r| r.went_direct())?;
    let mut detail = root.program.as_bytes().to_vec();
    detail.truncate(std::mem::size_of::<seal_abi::UnsealedEvent>() - 8);
    Some(detail)
}

/// Gives the command a private `/tmp` when the settings (else `default`) ask for one; the
/// fallback's warning is said once per launcher (unless quiet). True when the command enters
/// a mount namespace between fork and exec.
fn private_tmp(
    cmd: &mut Command,
    settings: &Settings,
    default: bool,
    run_dir: &RunDir,
    argv: &[OsString],
    cwd: Option<&Path>,
) -> Result<bool> {
    use crate::run::private_tmp as pt;
    if !pt::wanted(settings, default) {
        return Ok(false);
    }
    let keep = pt::needed(run_dir.path(), cwd, argv);
    let applied = pt::apply(cmd, settings, run_dir.path(), &keep)
        .context("cannot set up the private /tmp")?;
    match applied {
        pt::Applied::Namespace => Ok(true),
        pt::Applied::Fallback(why) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            if !settings.quiet {
                SAID.call_once(|| crate::term::warn(why));
            }
            Ok(false)
        }
    }
}

/// Pads the command's environment with `LIBSEAL_PAD=xxx…` so that what the kernel copies onto
/// its stack (file name, arguments, environment, pointers) has one fixed size
/// ([`senv::pad_entry_len`]): with randomisation off, stack addresses then do not depend on
/// the caller's environment, working directory or the program's path. The shim pads every
/// exec after this one the same way. Call last, when the environment is complete.
pub fn pad_stack(cmd: &mut Command, settings: &Settings, argv0: &OsStr) {
    cmd.env_remove(senv::PAD);
    if settings.unsealed("layout") {
        return;
    }
    let mut env: std::collections::BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => env.insert(k.to_owned(), v.to_owned()),
            None => env.remove(k),
        };
    }
    env.remove(OsStr::new(senv::PAD));
    let args: Vec<&OsStr> = std::iter::once(argv0).chain(cmd.get_args()).collect();
    let strings = cmd.get_program().len()
        + 1
        + args.iter().map(|a| a.len() + 1).sum::<usize>()
        + env
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2)
            .sum::<usize>();
    let len = senv::pad_entry_len(strings, args.len() + env.len());
    // The value is a slice of a constant (one copy of up to a block, into the command, instead of
    // two); an environment past one block needs a longer pad than the constant holds.
    static XS: [u8; senv::LAYOUT_BLOCK + 64] = [b'x'; senv::LAYOUT_BLOCK + 64];
    let n = len - senv::PAD.len() - 2;
    match XS.get(..n) {
        Some(xs) => cmd.env(senv::PAD, OsStr::from_bytes(xs)),
        None => cmd.env(senv::PAD, "x".repeat(n)),
    };
}

/// Turns address-space randomisation off for this process's future children (the personality
/// flag is inherited by fork and kept across exec).
pub fn disable_aslr(settings: &Settings) {
    if settings.unsealed("aslr") {
        return;
    }
    // SAFETY: personality(0xffffffff) queries; the second call sets a flag on ourselves.
    unsafe {
        let cur = libc::personality(0xffff_ffff);
        if cur != -1 {
            libc::personality((cur as libc::c_ulong) | libc::ADDR_NO_RANDOMIZE as libc::c_ulong);
        }
    }
}

/// Everything a sealed run produced, for the multi-run commands.
pub struct Captured {
    /// The run was killed (with its whole process group) when its time limit ran out.
    pub timed_out: bool,
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub census: Census,
}

impl Captured {
    pub fn code(&self) -> i32 {
        status_code(self.status)
    }
}

/// Where a captured run gets its standard input.
pub enum Input<'a> {
    Null,
    Bytes(&'a [u8]),
}

/// Runs `argv` sealed with output captured; the census is read from the run directory. With a
/// time `limit`, the command runs in a process group of its own, which is killed (SIGKILL) when
/// the limit runs out; the result then has `timed_out` set.
pub fn run_captured(
    settings: &Settings,
    argv: &[OsString],
    cwd: Option<&Path>,
    extra_env: &[(String, String)],
    input: Input,
    limit: Option<std::time::Duration>,
) -> Result<std::result::Result<Captured, SpawnError>> {
    let shim_path = shim::extract()?;
    let (plan, supervisor, go_root) = plan_root(&argv[0]);
    let supervised = plan.is_some();
    let mut run_dir = RunDir::create(supervisor)?;
    if let Some(exe) = go_root {
        run_dir.go_root(&exe);
    }
    disable_aslr(settings);
    let (mut cmd, static_root) = sealed_command(settings, &shim_path, run_dir.path(), argv, plan)?;
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let namespace = private_tmp(&mut cmd, settings, true, &run_dir, argv, cwd)?;
    let guards = !namespace && crate::run::exec_check::inspect(&argv[0], supervised).1;
    let (name, value) = supervise::guard_var(guards);
    cmd.env(name, value);
    pad_stack(&mut cmd, settings, &argv[0]);
    let root = static_root.and_then(|r| r.prepare(&cmd, settings, run_dir.path()));
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(match input {
        Input::Null => Stdio::null(),
        Input::Bytes(_) => Stdio::piped(),
    });
    if limit.is_some() {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    if let Some(sig) = supervise::interrupted() {
        return Err(supervise::Interrupted(sig).into());
    }
    let mut child = match supervise::spawn(
        &mut cmd,
        supervise::Stdio::Redirected,
        guards,
        settings.shim_flags(),
        root.clone(),
    ) {
        Ok(c) => c,
        Err(e) => return Ok(Err(SpawnError::from_io(&argv[0], cwd, e))),
    };
    if let Some(r) = &root {
        r.spawned();
    }
    let root_report = root_report(root.as_deref());
    run_dir.watch();
    run_dir.sweep();
    let writer = match (input, child.child.as_mut().and_then(|c| c.stdin.take())) {
        (Input::Bytes(b), Some(mut stdin)) => {
            let data = b.to_vec();
            Some(std::thread::spawn(move || {
                let _ = stdin.write_all(&data);
            }))
        }
        _ => None,
    };
    let (out, timed_out) = child
        .wait_with_output(limit)
        .context("waiting for the sealed command")?;
    if let Some(w) = writer {
        let _ = w.join();
    }
    if let Some(sig) = supervise::interrupted() {
        return Err(supervise::Interrupted(sig).into());
    }
    let mut census = census::collect(run_dir.path(), argv, Some(out.status))?;
    if let Some(detail) = root_report {
        census.add_unsealed(seal_abi::ROOT_VPID, unsealed::STATIC_SUPERVISED, &detail);
    }
    Ok(Ok(Captured {
        timed_out,
        status: out.status,
        stdout: out.stdout,
        stderr: out.stderr,
        census,
    }))
}

/// What [`run_interactive`] returns: the command's status, and its census when one was asked
/// for and the command started.
pub struct Interactive {
    pub code: ExitCode,
    pub census: Option<Census>,
}

/// `seal run` and `seal census`: the command with the terminal and stdio untouched; returns
/// its status, and with `want_census` its census (the symbol tables of every object are read
/// only then).
pub fn run_interactive(
    settings: &Settings,
    argv: &[OsString],
    want_census: bool,
) -> Result<Interactive> {
    let shim_path = shim::extract()?;
    let (plan, supervisor, go_root) = plan_root(&argv[0]);
    let supervised = plan.is_some();
    let mut run_dir = RunDir::create(supervisor)?;
    if let Some(exe) = go_root {
        run_dir.go_root(&exe);
    }
    disable_aslr(settings);
    if let Some(line) = unsealed_note(settings) {
        crate::term::note(line);
    }
    let (mut cmd, static_root) = sealed_command(settings, &shim_path, run_dir.path(), argv, plan)?;
    let namespace = private_tmp(&mut cmd, settings, false, &run_dir, argv, None)?;
    // A static or setuid root never loads libseal: it is reported after the run, and seal
    // ties it to itself before exec.
    let (root_warnings, loads) = crate::run::exec_check::inspect(&argv[0], supervised);
    let guards = !namespace && loads;
    let (name, value) = supervise::guard_var(guards);
    cmd.env(name, value);
    // Signals go to the command (the terminal's ^C reaches it directly); seal waits and
    // reports its status. Started directly when libseal ties it to seal, else by std.
    // Not in another seal's run: its libseal sees the raw `clone` of a direct spawn.
    // A static root the child execs itself (std spawns it: it is set up between fork and exec;
    // std too, the trampoline, when it cannot be).
    let root = static_root.and_then(|r| {
        pad_stack(&mut cmd, settings, &argv[0]);
        r.prepare(&cmd, settings, run_dir.path())
    });
    let direct = (guards && !supervised && !crate::run::shim::inside_a_run())
        .then(|| crate::run::direct::prepare(&cmd, &argv[0], !settings.unsealed("layout")))
        .flatten();
    // A static root's child sets its supervision up without a fork of seal (not into a
    // private /tmp: std runs that set-up); else, or failing that, std forks it as below.
    let root_direct = match (&root, namespace) {
        (Some(r), false) => Some(supervise::spawn_root(r, settings.shim_flags())),
        _ => None,
    };
    let started = match root_direct.or_else(|| direct.as_ref().map(supervise::spawn_direct)) {
        Some(Ok(Some(child))) => Ok(child),
        Some(Err(e)) => Err(e),
        _ => {
            pad_stack(&mut cmd, settings, &argv[0]);
            supervise::spawn(
                &mut cmd,
                supervise::Stdio::Inherited,
                guards,
                settings.shim_flags(),
                root.clone(),
            )
        }
    };
    if let Some(r) = &root {
        r.spawned();
    }
    let root_report = root_report(root.as_deref());
    let mut child = match started {
        Ok(c) => c,
        Err(e) => {
            let err = SpawnError::from_io(&argv[0], None, e);
            crate::term::note(&err);
            return Ok(Interactive {
                code: ExitCode::from(err.exit_code()),
                census: None,
            });
        }
    };
    run_dir.watch();
    run_dir.sweep();
    let status = child.wait().context("waiting for the sealed command")?;
    drop(child);
    // The full census (symbol tables of every object) only when it was asked for.
    let mut census = match want_census {
        true => Some(census::collect(run_dir.path(), argv, Some(status))?),
        false => None,
    };
    if let (Some(c), Some(detail)) = (census.as_mut(), &root_report) {
        c.add_unsealed(seal_abi::ROOT_VPID, unsealed::STATIC_SUPERVISED, detail);
    }
    if !settings.quiet {
        // The root command itself (no libseal in a static/setuid root, so no census of it),
        // then what the shim reported; one line per distinct program.
        // (The root's report goes with its process's events: what its image's set-up said.)
        let mut lines: std::collections::BTreeSet<String> = root_warnings.into_iter().collect();
        match &census {
            Some(c) => {
                lines.extend(c.unsealed_warnings());
                // A root with no census slot at all (nothing counted) has no process there.
                let listed = c.processes.iter().any(|p| p.vpid == seal_abi::ROOT_VPID);
                if let (Some(detail), false) = (&root_report, listed) {
                    let program = String::from_utf8_lossy(detail);
                    lines.insert(static_image::partly_sealed_line(&program, None));
                }
            }
            None => lines.extend(census::unsealed_warnings_in(
                run_dir.path(),
                root_report.as_deref(),
            )?),
        }
        for line in lines {
            crate::term::warn(line);
        }
    }
    Ok(Interactive {
        code: ExitCode::from(status_code(status).clamp(0, 255) as u8),
        census,
    })
}

/// The one line that says which families the user left unsealed (none when quiet: `-q` or
/// `SEAL_QUIET`, the same switch that silences the warnings).
pub fn unsealed_note(settings: &Settings) -> Option<String> {
    (!settings.quiet && !settings.unseal.is_empty())
        .then(|| format!("not sealed (--unseal): {}", settings.unseal.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn settings(args: &[&str], env: &[(&str, &str)]) -> Settings {
        let opts = crate::cli::SealOpts {
            unseal: args.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        crate::config::resolve(&opts, &env, None).unwrap()
    }

    #[test]
    fn unsealed_families_are_named_once_unless_quiet() {
        assert_eq!(
            unsealed_note(&settings(&["random", "time"], &[])).as_deref(),
            Some("not sealed (--unseal): random, time")
        );
        assert_eq!(unsealed_note(&settings(&[], &[])), None);
        assert_eq!(
            unsealed_note(&settings(&["random"], &[("SEAL_QUIET", "1")])),
            None
        );
    }
}
