//! What every command shares on the command line: parsing (with a tip for a forgotten `--`),
//! usage errors, the missing-command message, a command's settings, and the one-line error and
//! exit code `main` ends with.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::Parser;

use crate::cli::{Cli, SealOpts};
use crate::config::{self, Settings};
use crate::term;

/// A usage error found after parsing (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The command line, parsed; a clap error (with a tip when the user forgot `--` before a
/// command) ends the process as clap does, with exit 2.
pub fn parse() -> Cli {
    let args: Vec<OsString> = std::env::args_os().collect();
    if let Some(cli) = parse_run(&args) {
        return cli;
    }
    Cli::try_parse_from(&args)
        .unwrap_or_else(|e| exit_one_line(with_dash_dash_tip(e, &args, is_command)))
}

/// Ends the process for a clap error: help and version as clap prints them; a usage error as
/// one line on stderr (the problem, then clap's tips, `;`-separated) and exit 2.
fn exit_one_line(err: clap::Error) -> ! {
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        err.exit()
    }
    term::note(format_args!(
        "{}",
        one_line_usage(&err.render().to_string())
    ));
    std::process::exit(2)
}

/// clap's rendered error as one line: `error: …; tip: …; tip: …`, without the usage block.
fn one_line_usage(rendered: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for line in rendered.lines().map(str::trim) {
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() {
            parts.push(line);
        }
    }
    let mut s = parts.join("; ");
    if !s.starts_with("error:") {
        s.insert_str(0, "error: ");
    }
    s
}

/// Only `seal run`'s options: what every sealed run parses.
#[derive(clap::Parser)]
#[command(name = "seal", disable_help_flag = true)]
struct RunOnly {
    #[command(flatten)]
    run: crate::cli::RunArgs,
}

/// `seal [run] [OPTIONS] -- CMD`, parsed by a parser that knows only the run options: clap
/// builds every subcommand's arguments before it parses a word, ~0.15 ms of a sealed `true`.
/// Anything else (help, version, another subcommand, any error) is `None`, for the full
/// parser, so what the user sees is always the full command line's.
fn parse_run(args: &[OsString]) -> Option<Cli> {
    let first = args.get(1)?;
    let sub = first == "run";
    if !sub && !first.as_encoded_bytes().starts_with(b"-") {
        return None;
    }
    let rest = &args[if sub { 2 } else { 1 }..];
    if !rest.iter().any(|a| a == "--") {
        return None;
    }
    let run = match plain_run(rest) {
        Some(run) => run,
        None => {
            RunOnly::try_parse_from(args[..1].iter().chain(rest))
                .ok()?
                .run
        }
    };
    Some(if sub {
        Cli {
            command: Some(crate::cli::Command::Run(run)),
            run: Default::default(),
        }
    } else {
        Cli { command: None, run }
    })
}

/// The commonest run line, `[-q] [--warp] -- CMD…`, without clap: building even the run
/// parser (every option's `Arg`, spread over the binary) was ~0.25 ms of `seal run -- true`
/// with its page faults. Each flag at most once (clap refuses a repeat), a command after
/// `--`; anything else is `None`, for clap.
fn plain_run(rest: &[OsString]) -> Option<crate::cli::RunArgs> {
    let dash = rest.iter().position(|a| a == "--")?;
    let cmd = &rest[dash + 1..];
    if cmd.is_empty() {
        return None;
    }
    let mut run = crate::cli::RunArgs::default();
    for a in &rest[..dash] {
        let flag = match a.to_str()? {
            "-q" | "--quiet" => &mut run.seal.quiet,
            "--warp" => &mut run.seal.warp,
            _ => return None,
        };
        if std::mem::replace(flag, true) {
            return None;
        }
    }
    run.cmd = cmd.to_vec();
    Some(run)
}

/// Adds `tip: to run a command sealed, put -- before it: seal -- CMD` to a clap error about an
/// unexpected argument that names a command.
fn with_dash_dash_tip(
    mut err: clap::Error,
    args: &[OsString],
    is_command: impl Fn(&OsStr) -> bool,
) -> clap::Error {
    if !matches!(
        err.kind(),
        ErrorKind::UnknownArgument | ErrorKind::InvalidSubcommand
    ) {
        return err;
    }
    let offending = [ContextKind::InvalidArg, ContextKind::InvalidSubcommand]
        .into_iter()
        .find_map(|k| match err.get(k) {
            Some(ContextValue::String(s)) => Some(s.clone()),
            _ => None,
        });
    let Some(word) = offending.filter(|w| !w.starts_with('-')) else {
        return err;
    };
    let Some(at) = args.iter().skip(1).position(|a| a == word.as_str()) else {
        return err;
    };
    if !is_command(OsStr::new(&word)) {
        return err;
    }
    let at = at + 1;
    let text = |a: &OsString| a.to_string_lossy().into_owned();
    let mut fixed: Vec<String> = vec!["seal".into()];
    fixed.extend(args[1..at].iter().map(text));
    fixed.push("--".into());
    fixed.extend(args[at..].iter().map(text));
    let tip = format!(
        "to run a command sealed, put -- before it: {}",
        shell_line(&fixed)
    );
    let mut tips = match err.get(ContextKind::Suggested) {
        Some(ContextValue::StyledStrs(t)) => t.clone(),
        _ => Vec::new(),
    };
    tips.push(tip.into());
    err.insert(ContextKind::Suggested, ContextValue::StyledStrs(tips));
    err
}

/// A program `execvp` would find: on PATH, or a path to an executable file.
fn is_command(program: &OsStr) -> bool {
    use std::os::unix::fs::PermissionsExt;
    crate::run::exec_check::resolve(program).is_some_and(|p| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// Arguments as one shell line: plain words as they are, anything else in single quotes.
pub fn shell_line(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The usage error of a command run without one: the same line for every command.
pub fn require_command(cmd: &[OsString], usage: &str) -> Result<(), UsageError> {
    if cmd.is_empty() {
        return Err(UsageError(format!(
            "no command given; usage: {usage} [OPTIONS] -- CMD [ARGS...] (see {usage} --help)"
        )));
    }
    Ok(())
}

/// Resolves the seal settings of a command from its flags, the environment and seal.toml.
pub fn settings_for(opts: &SealOpts) -> anyhow::Result<Settings> {
    let file = config::load_config(opts.config.as_deref())?;
    let settings = config::resolve(opts, &config::ProcessEnv, file.as_ref())?;
    if let Some(text) = settings
        .epoch_relative
        .as_deref()
        .filter(|_| !settings.quiet)
    {
        term::note(config::epoch_note(text, settings.epoch_ns));
    }
    Ok(settings)
}

/// Validates a path seal will write a JSON document to after the command ran (`--census`,
/// `--json`), so that a bad path fails before the command runs instead of after, when its
/// exit status would be lost.
pub fn writable_file(flag: &str, path: &Path) -> Result<(), UsageError> {
    let bad = |why: &str| Err(UsageError(format!("{flag} {}: {why}", path.display())));
    if path.is_dir() {
        return bad("is a directory");
    }
    if path.exists() {
        return match std::fs::OpenOptions::new().append(true).open(path) {
            Ok(_) => Ok(()),
            Err(e) => bad(&format!("cannot write: {e}")),
        };
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return bad(&format!("{} is not a directory", parent.display()));
    }
    let c = std::ffi::CString::new(parent.as_os_str().as_encoded_bytes()).ok();
    // SAFETY: a NUL-terminated path; access has no other preconditions.
    if c.is_some_and(|c| unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0) {
        return bad(&format!("cannot create a file in {}", parent.display()));
    }
    Ok(())
}

/// The one line and the exit code of a failed command: nothing and 0 for a closed pipe (as
/// ripgrep does), 2 for a usage or configuration error, else 125 (seal itself failed).
pub fn exit_code(err: &anyhow::Error) -> ExitCode {
    if term::is_broken_pipe(err) {
        return ExitCode::SUCCESS;
    }
    if let Some(sig) = err
        .chain()
        .find_map(|c| c.downcast_ref::<crate::run::supervise::Interrupted>())
    {
        // The signal was passed on to the command; nothing more to say.
        return ExitCode::from((128 + sig.0) as u8);
    }
    term::note(format_args!("error: {}", one_line(err)));
    ExitCode::from(failure_code(err))
}

/// The documented exit status of an error that is not a closed pipe or a passed-on signal: 2
/// for a usage or configuration error, else 125.
pub fn failure_code(err: &anyhow::Error) -> u8 {
    let usage = err.chain().any(|c| {
        c.downcast_ref::<config::ConfigError>().is_some()
            || c.downcast_ref::<UsageError>().is_some()
    });
    if usage {
        2
    } else {
        crate::run::EXIT_SEAL_FAILED
    }
}

fn one_line(err: &anyhow::Error) -> String {
    err.chain()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn error_of(args: &[&str], commands: &[&str]) -> String {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let err = Cli::try_parse_from(&args).unwrap_err();
        with_dash_dash_tip(err, &args, |p| commands.iter().any(|c| OsStr::new(c) == p))
            .render()
            .to_string()
    }

    #[test]
    fn usage_errors_are_one_line_with_their_tips() {
        let e = error_of(&["seal", "--nope", "--", "true"], &[]);
        let one = one_line_usage(&e);
        assert!(
            !one.contains('\n') && one.starts_with("error: unexpected argument '--nope'"),
            "{one}"
        );
        let e = error_of(&["seal", "ls", "-l"], &["ls"]);
        let one = one_line_usage(&e);
        assert!(
            one.contains("; tip: to run a command sealed, put -- before it: seal -- ls -l"),
            "{one}"
        );
        for args in [
            &[
                "seal",
                "verify",
                "-n",
                "18446744073709551615",
                "--",
                "false",
            ][..],
            &["seal", "verify", "-n", "100000000", "--", "false"],
            &["seal", "golden", "record", "--passes", "4294967297"],
            &["seal", "verify", "-j", "100000", "--", "true"],
        ] {
            let one = one_line_usage(&error_of(args, &[]));
            assert!(one.starts_with("error: invalid value"), "{args:?}: {one}");
        }
    }

    #[test]
    fn the_run_parser_agrees_with_the_full_one_or_passes() {
        let os = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        for args in [
            &["seal", "run", "--", "true"][..],
            &["seal", "--", "true", "x", "--", "-y"],
            &["seal", "run", "-q", "--warp", "--", "-q", "--warp"],
            &["seal", "--quiet", "--", "x"],
            &["seal", "run", "-q", "--"],
            &[
                "seal", "--epoch", "@0", "--seed", "3", "--unseal", "time", "--unseal", "files",
                "-q", "--", "cmd", "a",
            ],
            &[
                "seal", "run", "--census", "f.json", "--tick", "0", "--", "c",
            ],
            &[
                "seal",
                "--warp",
                "--private-tmp",
                "--epoch",
                "-15d",
                "--",
                "c",
            ],
        ] {
            let a = os(args);
            let fast = parse_run(&a).unwrap_or_else(|| panic!("{args:?} not taken"));
            let full = Cli::try_parse_from(&a).unwrap();
            assert_eq!(format!("{fast:?}"), format!("{full:?}"), "{args:?}");
        }
        for args in [
            &["seal", "--help"][..],
            &["seal", "run", "--help", "--", "x"],
            &["seal", "--version"],
            &["seal", "census", "--", "x"],
            &["seal", "run", "--bogus", "--", "x"],
            &["seal", "run", "x"],
            &["seal", "run", "-q", "-q", "--", "x"],
            &["seal", "--private-tmp", "--no-private-tmp", "--", "x"],
            &["seal"],
        ] {
            assert!(parse_run(&os(args)).is_none(), "{args:?} taken");
        }
    }

    #[test]
    fn a_forgotten_dash_dash_gets_a_tip() {
        let e = error_of(&["seal", "date"], &["date"]);
        assert!(e.contains("unexpected argument 'date'"), "{e}");
        assert!(
            e.contains("tip: to run a command sealed, put -- before it: seal -- date\n"),
            "{e}"
        );
        let e = error_of(&["seal", "--seed", "3", "date", "+%s x"], &["date"]);
        assert!(e.contains("seal --seed 3 -- date '+%s x'"), "{e}");
        let e = error_of(&["seal", "run", "date"], &["date"]);
        assert!(e.contains("put -- before it: seal run -- date"), "{e}");
        // Not a command: clap's error as it is.
        let e = error_of(&["seal", "nosuchprog"], &["date"]);
        assert!(!e.contains("tip:"), "{e}");
        Cli::command().debug_assert();
    }

    #[test]
    fn the_missing_command_is_one_line_for_every_command() {
        let run = require_command(&[], "seal run").unwrap_err().to_string();
        let census = require_command(&[], "seal census").unwrap_err().to_string();
        assert_eq!(
            run.replace("seal run", "X"),
            census.replace("seal census", "X")
        );
        assert_eq!(run.lines().count(), 1);
        assert!(require_command(&["true".into()], "seal run").is_ok());
    }

    #[test]
    fn json_paths_are_checked_before_the_run() {
        let d = tempfile::tempdir().unwrap();
        assert!(writable_file("--census", d.path()).is_err());
        assert!(writable_file("--census", &d.path().join("no/such/c.json")).is_err());
        assert!(writable_file("--census", &d.path().join("c.json")).is_ok());
        assert!(!d.path().join("c.json").exists(), "checking writes nothing");
        assert!(writable_file("--census", Path::new("c.json")).is_ok());
    }

    #[test]
    fn a_closed_pipe_is_a_quiet_success_and_usage_is_2() {
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let err = anyhow::Error::new(pipe).context("cannot write the census table");
        assert_eq!(exit_code(&err), ExitCode::SUCCESS);
        let usage = anyhow::Error::new(UsageError("-n 0".into()));
        assert_eq!(exit_code(&usage), ExitCode::from(2));
        let other = anyhow::anyhow!("disk full");
        assert_eq!(
            exit_code(&other),
            ExitCode::from(crate::run::EXIT_SEAL_FAILED)
        );
    }
}
