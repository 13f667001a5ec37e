//! Instructions per call under valgrind's callgrind: a noise-free complement to the timings.
//!
//! percall runs one op N1 and then N2 times; the difference of the two instruction totals over
//! the difference in calls is the cost of one call (start-up and exit cancel out), less the
//! empty-call loop measured the same way.

use std::ffi::OsString;
use std::path::Path;

use crate::measure::{Launch, Mode};
use crate::percall::LOOP;

const N1: u64 = 8_000;
const N2: u64 = 40_000;

fn collected(launch: &Launch, mode: Mode, percall: &Path, op: &str, n: u64) -> Result<u64, String> {
    let args: Vec<OsString> = ["--tool=callgrind", "--callgrind-out-file=/dev/null", "--"]
        .iter()
        .map(OsString::from)
        .chain([
            percall.as_os_str().to_owned(),
            n.to_string().into(),
            "1".into(),
            op.into(),
        ])
        .collect();
    let out = launch
        .command(mode, Path::new("valgrind"), &args)
        .output()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    err.lines()
        .find_map(|l| {
            l.split_once("Collected :")
                .map(|(_, v)| v.trim().parse().ok())
        })
        .flatten()
        .ok_or_else(|| {
            format!(
                "callgrind printed no instruction count for {op} ({}): {}",
                mode.name(),
                err.lines().last().unwrap_or("")
            )
        })
}

/// Instructions per call of `op` in `mode`, net of the loop. `divisor` is percall's
/// per-op divisor (syscall-backed ops run fewer iterations).
pub fn per_call(
    launch: &Launch,
    mode: Mode,
    percall: &Path,
    op: &str,
    divisor: u64,
) -> Result<f64, String> {
    let per = |op: &str, divisor: u64| -> Result<f64, String> {
        let a = collected(launch, mode, percall, op, N1)?;
        let b = collected(launch, mode, percall, op, N2)?;
        // A warm-up batch and one measured batch: two runs of N/divisor calls.
        let calls = 2 * (N2 - N1) / divisor;
        Ok((b as f64 - a as f64) / calls as f64)
    };
    Ok(per(op, divisor)? - per(LOOP, 1)?)
}

/// percall.c's divisor for `op`.
pub fn divisor(op: &str) -> u64 {
    match op {
        "getrandom16" => 8,
        "rdtsc" => 256,
        _ => 1,
    }
}

/// Can callgrind count `op`? Not `rdtsc`: sealed, it is a fault and a signal handler, which
/// valgrind's emulated CPU never raises (its own rdtsc would fault instead).
pub fn countable(op: &str) -> bool {
    op != "rdtsc"
}
