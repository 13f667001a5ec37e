//! Defines seal's command line interface (clap derive). Parsing only: what the user typed is
//! validated and merged with `SEAL_*` variables and `seal.toml` in `config.rs`.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::commands::golden::shard::Shard;
/// The seal's own settings (`--seed`, `--tick`, …): declared with the rest of each setting's
/// names in `config::table`.
pub use crate::config::table::SealOpts;

const AFTER_HELP: &str = "\
Exit status:
  seal run / seal -- CMD   the command's own status (128+N when killed by signal N);
                           125 seal itself failed; 126 command not executable; 127 not found
  verify, golden           0 holds, 1 differs, 2 usage or configuration error;
                           verify: 126/127 when the command cannot be started
  probe                    0 stable (or masked within budget), 2 an unstable line,
                           3 masked fraction above --max-masked, 4 mask set grew (--compare);
                           127 when the command cannot be started
  any command              2 for a usage or configuration error; 128+N stopped by signal N

Settings come from, in order: flags, SEAL_* environment variables, seal.toml (this directory
or a parent), defaults. x86_64 Linux with glibc only.";

/// The most runs or passes a multi-run command takes (`-n`, `--passes`): each is a sealed run
/// of the command kept in memory, and a bigger count is a typo, not a plan.
pub const MAX_RUNS: u64 = 10_000;
/// The most runs at once (`-j`).
pub const MAX_JOBS: u64 = 256;

/// A count option's parser: a whole number up to `max`, refused at parse time (exit 2).
fn count(max: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(..=max)
}

#[derive(Parser, Debug)]
#[command(
    name = "seal",
    version,
    about = "Run any command with clocks, randomness, pids, host names and temp names sealed to a seed and an epoch",
    long_about = None,
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true,
    subcommand_precedence_over_arg = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// `seal [OPTIONS] -- CMD` is `seal run [OPTIONS] -- CMD`.
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a command sealed (the default: `seal -- CMD` is the same).
    Run(RunArgs),
    /// Run a command sealed and print which processes and libraries read clocks, RNGs, pids, host names.
    Census(CensusArgs),
    /// Run a command sealed N times: one digest, or the lines and census rows that moved.
    Verify(VerifyArgs),
    /// Classify which output lines vary, in what shape, and (with --attribute) why.
    Probe(ProbeArgs),
    /// Record and check a suite of golden commands from seal.toml.
    Golden(GoldenArgs),
    /// Run a bundled nondeterministic report twice unsealed and twice sealed, side by side.
    Demo(DemoArgs),
    /// Move the clocks of the sealed run this command runs in (from a script's step).
    Time(TimeArgs),
    /// Check this machine: what seal can and cannot seal here (CPU traps, kernel, shim cache).
    Doctor(DoctorArgs),
}

#[derive(Args, Debug, Clone, Default)]
pub struct RunArgs {
    #[command(flatten)]
    pub seal: SealOpts,
    /// Write the runtime census of the run as JSON to FILE
    #[arg(long, value_name = "FILE")]
    pub census: Option<PathBuf>,
    /// The command and its arguments, after `--`
    #[arg(last = true, value_name = "CMD")]
    pub cmd: Vec<OsString>,
}

#[derive(Args, Debug, Clone)]
pub struct CensusArgs {
    #[command(flatten)]
    pub seal: SealOpts,
    /// Also write the census as JSON to FILE
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Rows per process in the table (0 = all)
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub top: usize,
    /// Leave the Python interpreter's own reads (start-up, imports) out of the table
    #[arg(long)]
    pub hide_bookkeeping: bool,
    /// Write one row per Python call site (file, line, symbol, kind, patch_target) as JSON
    #[arg(long, value_name = "FILE")]
    pub patch_targets: Option<PathBuf>,
    /// The command and its arguments, after `--`
    #[arg(last = true, value_name = "CMD")]
    pub cmd: Vec<OsString>,
}

#[derive(Args, Debug, Clone)]
pub struct DoctorArgs {
    /// Print the report as JSON on stdout (one object: docs/usage.md#seal-doctor)
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when a check is limited (default: 0, a limited machine is not an error)
    #[arg(long)]
    pub strict: bool,
}

#[derive(Args, Debug, Clone)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub seal: SealOpts,
    /// Number of sealed runs
    #[arg(short = 'n', long = "runs", default_value_t = 20, value_name = "N", value_parser = count(MAX_RUNS))]
    pub runs: usize,
    /// Runs at once (each has its own private /tmp; with --artifact, --no-private-tmp or no
    /// mount namespace they go one after another; runs share the working directory)
    #[arg(short = 'j', long, default_value_t = 1, value_name = "JOBS", value_parser = count(MAX_JOBS))]
    pub jobs: usize,
    /// Files the command writes that are part of its result (glob, relative to the working directory; repeatable)
    #[arg(long = "artifact", value_name = "GLOB")]
    pub artifacts: Vec<String>,
    /// Write the full result as JSON to FILE
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The command and its arguments, after `--`
    #[arg(last = true, value_name = "CMD")]
    pub cmd: Vec<OsString>,
}

#[derive(Args, Debug, Clone)]
pub struct ProbeArgs {
    #[command(flatten)]
    pub seal: SealOpts,
    /// Runs per perturbation
    #[arg(short = 'n', long = "runs", default_value_t = 2, value_name = "N", value_parser = count(MAX_RUNS))]
    pub runs: usize,
    /// Run the perturbations under seal, showing what survives the seal
    #[arg(long)]
    pub sealed: bool,
    /// For each varying line, find which entropy families make it vary
    #[arg(long)]
    pub attribute: bool,
    /// Extra mask patterns: a TOML file of `name = "regex"`
    #[arg(long, value_name = "FILE")]
    pub patterns: Option<PathBuf>,
    /// Largest fraction of lines that may be masked before exit 3
    #[arg(long, default_value_t = 0.25, value_name = "FRACTION")]
    pub max_masked: f64,
    /// Where to write the JSON report
    #[arg(long, default_value = "seal-probe.json", value_name = "FILE")]
    pub report: PathBuf,
    /// An earlier report: exit 4 when the mask set grew against it
    #[arg(long, value_name = "BEFORE.json")]
    pub compare: Option<PathBuf>,
    /// Working tree copied fresh for each run [default: the current directory]
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// The command and its arguments, after `--`
    #[arg(last = true, value_name = "CMD")]
    pub cmd: Vec<OsString>,
}

#[derive(Args, Debug, Clone)]
pub struct GoldenArgs {
    #[command(subcommand)]
    pub action: GoldenAction,
}

#[derive(Subcommand, Debug, Clone)]
pub enum GoldenAction {
    /// Run each case sealed several times and write its golden, refusing unstable cases
    Record(GoldenRunArgs),
    /// Run each case sealed and compare with its golden
    Check(GoldenCheckArgs),
    /// Re-record goldens (with the same stability gate)
    Update(GoldenRunArgs),
    /// List the cases and whether each golden exists
    List(GoldenListArgs),
    /// Merge the JUnit reports of several `check --junit` runs (the shards of a CI matrix)
    JunitMerge(GoldenJunitMergeArgs),
    /// Print the settings record (a golden's `seal` object) a run with these options gets here
    Settings(Box<GoldenSettingsArgs>),
}

#[derive(Args, Debug, Clone)]
pub struct GoldenSettingsArgs {
    #[command(flatten)]
    pub seal: SealOpts,
}

/// Where the golden suite is: options every `seal golden` action shares.
#[derive(Args, Debug, Clone)]
pub struct SuiteArgs {
    /// seal.toml to use instead of searching upwards
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Directory of golden files [default: golden, next to seal.toml]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct GoldenRunArgs {
    /// Cases to record (default: all)
    pub names: Vec<String>,
    /// Sealed passes that must agree before a golden is written
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = count(MAX_RUNS))]
    pub passes: usize,
    #[command(flatten)]
    pub suite: SuiteArgs,
    /// Print no warnings
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Args, Debug, Clone)]
pub struct GoldenCheckArgs {
    /// Cases to check (default: all)
    pub names: Vec<String>,
    /// Sealed runs per case
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = count(MAX_RUNS))]
    pub passes: usize,
    /// Fail when census totals drifted from the golden
    #[arg(long)]
    pub strict_census: bool,
    /// Write JUnit XML to FILE
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Cases at once (each has its own private /tmp; cases that share a working directory
    /// still run one after another, in file order)
    #[arg(short = 'j', long, default_value_t = 1, value_name = "N", value_parser = count(MAX_JOBS))]
    pub jobs: usize,
    /// Check only the cases of shard K of N (1 <= K <= N), assigned by a hash of each case's
    /// name: N machines with --shard 1/N .. N/N check every case exactly once
    #[arg(long, value_name = "K/N")]
    pub shard: Option<Shard>,
    #[command(flatten)]
    pub suite: SuiteArgs,
    /// Print no warnings
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Args, Debug, Clone)]
pub struct GoldenListArgs {
    /// List only the cases `check --shard K/N` checks
    #[arg(long, value_name = "K/N")]
    pub shard: Option<Shard>,
    #[command(flatten)]
    pub suite: SuiteArgs,
}

#[derive(Args, Debug, Clone)]
pub struct GoldenJunitMergeArgs {
    /// JUnit XML files to merge (e.g. one per shard)
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Where to write the merged report
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Name of the merged <testsuites>
    #[arg(long, default_value = "seal golden", value_name = "NAME")]
    pub name: String,
}

#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Print no warnings
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Args, Debug, Clone)]
pub struct TimeArgs {
    #[command(subcommand)]
    pub command: TimeCommand,
}

#[derive(Subcommand, Debug, Clone)]
pub enum TimeCommand {
    /// Move every clock of the run forward (2d, 1y6mo, 90s, 1.5h, 250ms).
    Advance {
        /// How far: units y (365 d), mo (30 d), w, d, h, m, s, ms, us, ns.
        #[arg(allow_hyphen_values = true)]
        duration: String,
    },
    /// Set the run's wall clock (monotonic clocks keep running).
    Set {
        /// RFC 3339 (2027-06-01T12:00:00Z) or @UNIX_SECONDS.
        time: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn bare_double_dash_is_run() {
        let cli = Cli::try_parse_from(["seal", "--seed", "7", "--", "echo", "hi"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(
            cli.run.cmd,
            vec![OsString::from("echo"), OsString::from("hi")]
        );
        assert_eq!(cli.run.seal.seed.as_deref(), Some("7"));
        let cli = Cli::try_parse_from(["seal", "run", "--warp", "--", "true"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Run(ref r)) if r.seal.warp));
    }

    #[test]
    fn every_flag_is_an_option_of_seal_run() {
        let cli = Cli::command();
        let run = cli.find_subcommand("run").expect("seal run");
        let longs: Vec<String> = run
            .get_arguments()
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        for s in crate::config::table::SETTINGS {
            assert!(longs.contains(&s.flag()), "{} not a flag of run", s.flag());
        }
    }

    #[test]
    fn every_family_is_in_the_unseal_help() {
        let mut cli = Cli::command();
        let help = cli
            .find_subcommand_mut("run")
            .unwrap()
            .render_long_help()
            .to_string();
        for f in seal_abi::settings::FAMILIES {
            assert!(
                help.contains(f.name),
                "seal run --help lacks family {}",
                f.name
            );
        }
    }
}
