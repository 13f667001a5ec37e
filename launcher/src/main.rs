//! The `seal` command: parses the command line (`usage`), and dispatches to one module per
//! command. Errors are printed once, as one line, with a documented exit code.

#[macro_use]
mod term;

mod census;
mod cli;
mod config;
mod demo;
mod exec_check;
mod filetimes;
mod golden;
mod masks;
mod observe;
mod patch_targets;
mod private_tmp;
mod probe;
#[cfg(test)]
mod proptests;
mod pycensus;
mod report;
mod run;
mod rundir;
mod shim;
mod supervise;
mod symbols;
mod timectl;
mod usage;
mod verify;

use std::process::ExitCode;

use cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = usage::parse();
    // `seal run` and `seal census` end with their command's status, whatever signals it was
    // sent; the multi-run commands stop at a forwarded SIGINT/TERM/HUP/QUIT and say so.
    let multi_run = !matches!(
        cli.command,
        None | Some(Command::Run(_) | Command::Census(_))
    );
    let code = match dispatch(cli) {
        Ok(code) => code,
        Err(err) => usage::exit_code(&err),
    };
    match supervise::interrupted() {
        Some(sig) if multi_run => ExitCode::from((128 + sig) as u8),
        _ => code,
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        None => {
            usage::require_command(&cli.run.cmd, "seal")?;
            run_cmd(cli.run)
        }
        Some(Command::Run(args)) => {
            usage::require_command(&args.cmd, "seal run")?;
            run_cmd(args)
        }
        Some(Command::Census(args)) => report::census_command(args),
        Some(Command::Verify(args)) => verify::run(args),
        Some(Command::Probe(args)) => probe::run(args),
        Some(Command::Golden(args)) => golden::run(args),
        Some(Command::Demo(args)) => demo::run(args),
        Some(Command::Time(args)) => timectl::run(args),
    }
}

/// The C library's `pow`, for indicatif's rate and ETA (`f64::powf`), the launcher's only
/// call into libm: defined here, the linker resolves it in the binary and `--as-needed`
/// leaves libm.so.6 out of every `seal` start (~0.05 ms). Only libc and the loader are ever
/// loaded into `seal`, and neither calls `pow`.
#[no_mangle]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

fn run_cmd(args: cli::RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.census {
        usage::writable_file("--census", path)?;
    }
    let settings = usage::settings_for(&args.seal)?;
    run::run_interactive(&settings, &args.cmd, args.census.as_ref())
}

#[cfg(test)]
mod tests {
    /// `seal` links the unwinder from libgcc_eh.a (launcher/build.rs): a panic still unwinds
    /// and is caught, with its message.
    #[test]
    fn a_panic_unwinds_through_the_linked_unwinder() {
        let r = std::panic::catch_unwind(|| panic!("unwound"));
        let msg = r.unwrap_err();
        assert_eq!(msg.downcast_ref::<&str>(), Some(&"unwound"));
    }

    /// `f64::powf` reaches the launcher's own `pow`.
    #[test]
    fn powf_is_the_c_librarys_pow() {
        assert_eq!(2f64.powf(10.0), 1024.0);
        assert_eq!(super::pow(2.0, 0.5), std::f64::consts::SQRT_2);
        assert_eq!(10f64.powf(-2.0), 0.01);
        assert!(super::pow(-1.0, 0.5).is_nan());
    }
}
