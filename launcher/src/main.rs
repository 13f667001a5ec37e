//! The `seal` command: parses the command line, merges the configuration, and dispatches to
//! one module per command. Errors are printed once, as one line, with a documented exit code.

mod census;
mod cli;
mod config;
mod demo;
mod exec_check;
mod golden;
mod masks;
mod probe;
mod report;
mod run;
mod shim;
mod symbols;
mod verify;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            if err.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("seal: error: {}", one_line(&err));
            let usage = err.chain().any(|c| {
                c.downcast_ref::<config::ConfigError>().is_some()
                    || c.downcast_ref::<UsageError>().is_some()
            });
            ExitCode::from(if usage { 2 } else { run::EXIT_SEAL_FAILED })
        }
    }
}

/// A usage error found after parsing (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

fn one_line(err: &anyhow::Error) -> String {
    err.chain()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}

/// Resolves the seal settings of a command from its flags, the environment and seal.toml.
pub fn settings_for(opts: &cli::SealOpts) -> anyhow::Result<config::Settings> {
    let file = config::load_config(opts.config.as_deref())?;
    Ok(config::resolve(opts, &config::ProcessEnv, file.as_ref())?)
}

fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        None => {
            if cli.run.cmd.is_empty() {
                return Err(UsageError(
                    "no command given; usage: seal [OPTIONS] -- CMD [ARGS...] (see seal --help)"
                        .into(),
                )
                .into());
            }
            run_cmd(cli.run)
        }
        Some(Command::Run(args)) => {
            if args.cmd.is_empty() {
                return Err(UsageError(
                    "no command given; usage: seal run [OPTIONS] -- CMD [ARGS...]".into(),
                )
                .into());
            }
            run_cmd(args)
        }
        Some(Command::Census(args)) => census_cmd(args),
        Some(Command::Verify(args)) => verify::run(args),
        Some(Command::Probe(args)) => probe::run(args),
        Some(Command::Golden(args)) => golden::run(args),
        Some(Command::Demo(args)) => demo::run(args),
    }
}

fn run_cmd(args: cli::RunArgs) -> anyhow::Result<ExitCode> {
    let settings = settings_for(&args.seal)?;
    run::run_interactive(&settings, &args.cmd, args.census.as_ref())
}

fn census_cmd(args: cli::CensusArgs) -> anyhow::Result<ExitCode> {
    report::census_command(args)
}
