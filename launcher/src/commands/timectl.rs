//! `seal time advance DURATION` and `seal time set TIME`: move the clocks of a sealed run from
//! inside it (a script's step, a test's subprocess), and the span syntax they and relative
//! epochs share (`2d`, `1y6mo`, `90s`).
//!
//! The command runs inside the sealed run, so libseal is loaded into it: it asks the shim with
//! `clock_settime` on one of seal's own clock ids (`seal_abi::CLOCK_SEAL_ADVANCE`,
//! `CLOCK_SEAL_SET`), which the shim applies to the run table every process of the run reads
//! its clocks through. Programs can use the same protocol without spawning (docs/usage.md).

use std::process::ExitCode;

use anyhow::{bail, Result};

use crate::cli::{TimeArgs, TimeCommand};
use crate::usage::UsageError;

/// Nanoseconds per unit of a span, longest names first (so `mo` wins over `m`, `ms` over `m`).
const UNITS: &[(&str, i128)] = &[
    ("mo", 30 * 86_400 * NS),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
    ("y", 365 * 86_400 * NS),
    ("w", 7 * 86_400 * NS),
    ("d", 86_400 * NS),
    ("h", 3_600 * NS),
    ("m", 60 * NS),
    ("s", NS),
];
const NS: i128 = 1_000_000_000;

/// Parses a span: one or more `NUMBER UNIT` parts (`1y6mo`, `2d`, `1.5h`, `250ms`), with an
/// optional leading sign. Units: y (365 days), mo (30 days), w, d, h, m, s, ms, us, ns.
pub fn parse_span(v: &str) -> Result<i64, String> {
    let t = v.trim();
    let (neg, mut rest) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let hint = || {
        format!("{v:?}: expected a span such as 2d, 1y6mo, 90s or 1.5h (units y, mo, w, d, h, m, s, ms, us, ns)")
    };
    if rest.is_empty() {
        return Err(hint());
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(hint)?;
        let (num, after) = rest.split_at(num_len);
        let (unit, scale) = UNITS
            .iter()
            .find(|(u, _)| after.starts_with(u))
            .ok_or_else(hint)?;
        let value: f64 = num.parse().map_err(|_| hint())?;
        if !value.is_finite() {
            return Err(hint());
        }
        // Saturating: a huge part (the cast saturates at i128::MAX) after another must be
        // "too large", not an overflow (a panic in debug builds, a wrapped negative span in
        // release ones). Found by the fuzz run.
        total = total.saturating_add((value * *scale as f64).round() as i128);
        if total > i64::MAX as i128 {
            return Err(format!("{v:?}: too large"));
        }
        rest = &after[unit.len()..];
    }
    let total = total as i64;
    Ok(if neg { -total } else { total })
}

/// Is this process part of a sealed run? libseal takes its variables out of `environ`, but the
/// environment the process started with (`/proc/self/environ`) still has them.
fn in_sealed_run() -> bool {
    let key = format!("{}=", seal_abi::settings::RUN_DIR);
    std::env::var_os(seal_abi::settings::RUN_DIR).is_some()
        || std::fs::read("/proc/self/environ").is_ok_and(|env| {
            env.split(|&b| b == 0)
                .any(|e| e.starts_with(key.as_bytes()) && e.len() > key.len())
        })
}

/// Runs `seal time …`.
pub fn run(args: TimeArgs) -> Result<ExitCode> {
    if !in_sealed_run() {
        return Err(UsageError(
            "seal time: not inside a sealed run (use it from a command run by seal, e.g. a script step)".into(),
        )
        .into());
    }
    let (clock, ns, what) = match &args.command {
        TimeCommand::Advance { duration } => {
            let ns = parse_span(duration).map_err(UsageError)?;
            if ns < 0 {
                return Err(UsageError(format!(
                    "seal time advance {duration}: time only moves forward (use seal time set)"
                ))
                .into());
            }
            (seal_abi::CLOCK_SEAL_ADVANCE, ns, "advance")
        }
        TimeCommand::Set { time } => {
            let ns = crate::config::parse_epoch(time)
                .map_err(|e| UsageError(format!("seal time set {time}: {e}")))?;
            if ns < 0 {
                return Err(UsageError(format!("seal time set {time}: before 1970")).into());
            }
            (seal_abi::CLOCK_SEAL_SET, ns, "set")
        }
    };
    let ts = libc::timespec {
        tv_sec: ns / 1_000_000_000,
        tv_nsec: ns % 1_000_000_000,
    };
    // SAFETY: a valid timespec; libseal (loaded into this sealed process) answers these ids.
    if unsafe { libc::clock_settime(clock, &ts) } != 0 {
        let e = std::io::Error::last_os_error();
        bail!("seal time {what}: the run's clocks are not sealed here (--unseal time?): {e}");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans() {
        assert_eq!(parse_span("2d"), Ok(2 * 86_400_000_000_000));
        assert_eq!(parse_span("+2d"), parse_span("2d"));
        assert_eq!(parse_span("-15d"), Ok(-15 * 86_400_000_000_000));
        assert_eq!(parse_span("1y6mo"), Ok((365 + 180) * 86_400_000_000_000));
        assert_eq!(parse_span("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(parse_span("90s"), Ok(90_000_000_000));
        assert_eq!(parse_span("250ms"), Ok(250_000_000));
        assert_eq!(parse_span("1m30s"), Ok(90_000_000_000));
        for bad in [
            "",
            "+",
            "2",
            "2x",
            "d",
            "1..2d",
            "1e400d",
            "999999999y",
            "1y3000000000000000000000000000m",
            "-1y3000000000000000000000000000m",
        ] {
            assert!(parse_span(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
