//! The `seal` command: parses the command line (`usage`), and dispatches to one module per
//! command. Errors are printed once, as one line, with a documented exit code.
#![cfg_attr(not(test), no_main)]

#[macro_use]
mod term;

mod census;
mod cli;
mod commands;
mod config;
mod files;
#[cfg(test)]
mod layout_tests;
mod observe;
#[cfg(test)]
mod proptests;
mod report;
mod run;
mod usage;

use std::process::ExitCode;

use cli::{Cli, Command};

/// The C entry point, in place of the one std provides. std's set-up before `main` reads
/// `/proc/self/maps` (glibc's `pthread_getattr_np`, to place the main thread's stack guard),
/// maps an alternate signal stack and installs SIGSEGV/SIGBUS handlers: ~0.18 ms of every
/// `seal` start, a sixth of what `seal run` adds to a command. What seal relies on is done
/// here instead: the standard descriptors opened on `/dev/null` where they were closed (so no
/// file seal opens lands on them), SIGPIPE ignored (a closed pipe is an `EPIPE` error that
/// seal handles), a panic reported with std's status 101, and stdout flushed at the end. A
/// stack overflow (none is expected: no recursion) would be a plain SIGSEGV.
#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    open_closed_standard_fds();
    // SAFETY: setting a disposition; no handler is involved.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let code = std::panic::catch_unwind(seal_main)
        .map(exit_status)
        .unwrap_or(101);
    let _ = std::io::Write::flush(&mut std::io::stdout());
    code
}

/// What std does before `main` (`sanitize_standard_fds`): a closed fd 0, 1 or 2 is opened on
/// `/dev/null` (the lowest free descriptor is the closed one). `supervise` has already noted
/// which were closed, to close them again in the command.
#[cfg(not(test))]
fn open_closed_standard_fds() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: three valid pollfd entries; a zero timeout.
    if unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } <= 0 {
        return;
    }
    for p in fds.iter().filter(|p| p.revents & libc::POLLNVAL != 0) {
        // SAFETY: a NUL-terminated path; the descriptor is kept for the life of seal.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        if fd != p.fd {
            // Not where it was missing (cannot happen, the lowest is taken): leave it.
            break;
        }
    }
}

/// The status an [`ExitCode`] stands for (it has no accessor; seal only makes them from u8).
#[cfg(not(test))]
fn exit_status(code: ExitCode) -> libc::c_int {
    (0..=255u8)
        .find(|&i| ExitCode::from(i) == code)
        .map_or(1, libc::c_int::from)
}

/// The test harness has its own `main`: `seal_main` stays referenced (checked, not dead).
#[cfg(test)]
const _: fn() -> ExitCode = seal_main;

fn seal_main() -> ExitCode {
    // The hidden entry points libseal and the launcher use for static binaries.
    let args: Vec<std::ffi::OsString> = std::env::args_os().take(2).collect();
    if args
        .get(1)
        .is_some_and(|a| a.to_str().is_some_and(|a| a.starts_with("__")))
    {
        let all: Vec<std::ffi::OsString> = std::env::args_os().collect();
        if let Some(code) = run::static_image::entry(&all) {
            return ExitCode::from(code.clamp(0, 255) as u8);
        }
    }
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
    match run::supervise::interrupted() {
        Some(sig) if multi_run => ExitCode::from((128 + sig) as u8),
        _ => code,
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    outputs_writable(&cli)?;
    match cli.command {
        None => {
            usage::require_command(&cli.run.cmd, "seal")?;
            run_cmd(cli.run)
        }
        Some(Command::Run(args)) => {
            usage::require_command(&args.cmd, "seal run")?;
            run_cmd(args)
        }
        Some(Command::Census(args)) => commands::census::run(args),
        Some(Command::Verify(args)) => commands::verify::run(args),
        Some(Command::Probe(args)) => commands::probe::run(args),
        Some(Command::Golden(args)) => commands::golden::run(args),
        Some(Command::Demo(args)) => commands::demo::run(args),
        Some(Command::Time(args)) => commands::timectl::run(args),
        Some(Command::Doctor(args)) => commands::doctor::run(args),
    }
}

/// Every file a command will write is checked before anything runs: a run of twenty passes
/// must not end in "cannot write" (exit 2, nothing lost).
fn outputs_writable(cli: &Cli) -> Result<(), usage::UsageError> {
    use cli::GoldenAction;
    let check = |flag: &str, p: &Option<std::path::PathBuf>| match p {
        Some(p) => usage::writable_file(flag, p),
        None => Ok(()),
    };
    match &cli.command {
        Some(Command::Verify(a)) => check("--json", &a.json),
        Some(Command::Probe(a)) => usage::writable_file("--report", &a.report),
        Some(Command::Golden(g)) => match &g.action {
            GoldenAction::Check(a) => check("--junit", &a.junit),
            GoldenAction::JunitMerge(a) => usage::writable_file("--output", &a.output),
            _ => Ok(()),
        },
        _ => Ok(()),
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
    let run = run::run_interactive(&settings, &args.cmd, args.census.is_some())?;
    if let (Some(path), Some(census)) = (&args.census, &run.census) {
        census.write_json(path)?;
    }
    Ok(run.code)
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
