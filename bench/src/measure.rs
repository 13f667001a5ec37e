//! Running one measured child process (wall time and CPU time from `wait4`) and the order
//! statistics the report uses (medians and percentiles, never means: a shared machine's noise
//! is one-sided).

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// How a measured program is started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The program itself.
    Bare,
    /// `seal run -q -- program` with the release `seal` (census on, as always).
    Seal,
    /// The program with Debian's libfaketime preloaded.
    Faketime,
    /// `seal run -q --unseal cpu -- program`: sealed without the `rdtsc`/`cpuid` traps (the
    /// context-switch section, switches.rs, shows what they cost).
    SealNoCpu,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Bare => "bare",
            Mode::Seal => "seal",
            Mode::Faketime => "libfaketime",
            Mode::SealNoCpu => "seal --unseal cpu",
        }
    }
}

/// The modes in the order round `round` runs them: the order rotates every round, so that no
/// mode always runs first (or always right after another one).
pub fn rotation(modes: &[Mode], round: usize) -> impl Iterator<Item = Mode> + '_ {
    (0..modes.len()).map(move |k| modes[(round + k) % modes.len()])
}

/// Everything needed to start a program in each [`Mode`].
pub struct Launch {
    pub seal: PathBuf,
    /// libfaketime.so.1, when installed.
    pub faketime: Option<PathBuf>,
    /// Working directory of every child: a scratch directory with no `seal.toml` above it.
    pub workdir: PathBuf,
}

/// What `FAKETIME` is set to: start the clock at the seal's default epoch and let it run,
/// libfaketime's usual "start at" mode.
pub const FAKETIME_SPEC: &str = "@2026-01-01 00:00:00";

impl Launch {
    pub fn command(&self, mode: Mode, prog: &Path, args: &[OsString]) -> Command {
        let mut cmd = match mode {
            Mode::Bare | Mode::Faketime => {
                let mut c = Command::new(prog);
                c.args(args);
                c
            }
            Mode::Seal | Mode::SealNoCpu => {
                let mut c = Command::new(&self.seal);
                c.args(["run", "-q"]);
                if mode == Mode::SealNoCpu {
                    c.args(["--unseal", "cpu"]);
                }
                c.arg("--").arg(prog).args(args);
                c
            }
        };
        if mode == Mode::Faketime {
            let lib = self
                .faketime
                .as_ref()
                .expect("faketime mode without libfaketime");
            cmd.env("LD_PRELOAD", lib).env("FAKETIME", FAKETIME_SPEC);
        }
        // The benchmark's own environment must not configure or unseal the measured runs.
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("SEAL_") {
                cmd.env_remove(&k);
            }
        }
        // Every mode may cache bytecode, as a default Python does. With this variable set (as
        // on this VM), a bare Python recompiles what `site` imports at every start while a
        // sealed one reads seal's own bytecode cache, which made sealed Python look faster.
        cmd.env_remove("PYTHONDONTWRITEBYTECODE");
        cmd.current_dir(&self.workdir).stdin(Stdio::null());
        cmd
    }
}

/// One finished child.
pub struct Sample {
    pub wall_ms: f64,
    /// User + system time of the child and the descendants it waited for.
    pub cpu_ms: f64,
    pub stdout: String,
}

/// Runs `cmd` to completion, capturing stdout when `capture` (else discarding it); stderr is
/// discarded. Fails when the child fails: a benchmark of a broken run is worthless.
pub fn run(mut cmd: Command, capture: bool) -> Result<Sample, String> {
    cmd.stdout(if capture {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stderr(Stdio::null());
    let describe = format!("{:?}", cmd);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {describe}: {e}"))?;
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut stdout)
            .map_err(|e| format!("reading the output of {describe}: {e}"))?;
    }
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; status and usage are valid for writes. std's Child is
    // never waited on afterwards (dropping it does not wait).
    let r = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let wall_ms = start.elapsed().as_secs_f64() * 1e3;
    if r < 0 {
        return Err(format!(
            "wait4 for {describe}: {}",
            std::io::Error::last_os_error()
        ));
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(format!("{describe} failed (wait status {status:#x})"));
    }
    let tv_ms = |tv: libc::timeval| tv.tv_sec as f64 * 1e3 + tv.tv_usec as f64 / 1e3;
    Ok(Sample {
        wall_ms,
        cpu_ms: tv_ms(usage.ru_utime) + tv_ms(usage.ru_stime),
        stdout,
    })
}

/// The `p`-th percentile (0..=100) by nearest rank; NaN for no values.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Runs a program found on PATH and returns its first output line, if it runs.
pub fn first_line(prog: impl AsRef<OsStr>, args: &[&str]) -> Option<String> {
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    String::from_utf8_lossy(&text)
        .lines()
        .next()
        .map(|l| l.trim().to_string())
}

/// Compiles C source `src` into `out` with `cc -O2` and `flags`.
pub fn cc(src: &Path, out: &Path, flags: &[&str]) -> Result<(), String> {
    let status = Command::new("cc")
        .arg("-O2")
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(src)
        .status()
        .map_err(|e| format!("cannot run cc: {e}"))?;
    if !status.success() {
        return Err(format!("cc failed to compile {}", src.display()));
    }
    Ok(())
}

/// Compiles `fixtures/bench/NAME.c` into `dir/NAME` ([`cc`]).
pub fn compile_fixture(
    root: &Path,
    dir: &Path,
    name: &str,
    flags: &[&str],
) -> Result<PathBuf, String> {
    let out = dir.join(name);
    cc(&root.join(format!("fixtures/bench/{name}.c")), &out, flags)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_statistics() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(
            percentile(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 90.0),
            9.0
        );
        assert_eq!(percentile(&[5.0], 90.0), 5.0);
        assert!(median(&[]).is_nan());
    }
}
