//! Parsers of single setting values: epochs (absolute and relative), ticks, rates, booleans
//! and integers, each returning the reason a value is refused.

/// A parser of integers of type `T` that says `why` when a value is not one.
pub(crate) fn integer<T: std::str::FromStr>(
    why: &'static str,
) -> impl Fn(&str) -> Result<T, String> {
    move |v| v.trim().parse::<T>().map_err(|_| why.to_string())
}

/// `--cpus`: a whole number of CPUs, 1..=1024.
pub(crate) fn parse_cpus(v: &str) -> Result<u32, String> {
    use seal_abi::settings::{MAX_CPUS, MIN_CPUS};
    let why = || format!("expected a number of CPUs {MIN_CPUS}..={MAX_CPUS}");
    match v.trim().parse::<u32>() {
        Ok(n) if (MIN_CPUS..=MAX_CPUS).contains(&n) => Ok(n),
        _ => Err(why()),
    }
}

pub(crate) fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// Why an epoch cannot be used: its nanoseconds since 1970 do not fit a signed 64-bit integer.
const EPOCH_RANGE: &str =
    "out of range: the epoch must lie between 1677-09-21 and 2262-04-11 (64-bit nanoseconds)";

/// RFC 3339 (`2026-01-01T00:00:00Z`, any offset, fractional seconds) or `@UNIX_SECONDS`.
pub fn parse_epoch(v: &str) -> Result<i64, String> {
    let v = v.trim();
    if let Some(ns) = relative_epoch(v)? {
        return Ok(ns);
    }
    if let Some(secs) = v.strip_prefix('@') {
        let digits = secs.strip_prefix('-').unwrap_or(secs);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err("expected @UNIX_SECONDS, e.g. @1767225600".to_string());
        }
        return secs
            .parse::<i64>()
            .ok()
            .and_then(|s| s.checked_mul(1_000_000_000))
            .ok_or_else(|| EPOCH_RANGE.to_string());
    }
    let t = time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339)
        .map_err(|e| {
            format!(
                "expected RFC 3339 (e.g. 2026-01-01T00:00:00Z), @UNIX_SECONDS, now, now+2d or -15d: {e}"
            )
        })?;
    i64::try_from(t.unix_timestamp_nanos()).map_err(|_| EPOCH_RANGE.to_string())
}

/// Is `v` an epoch relative to the real time at launch (`now`, `now+2d`, `now-15d`, `+2d`,
/// `-1y6mo`)? Such an epoch is resolved once, when seal starts, and is not reproducible across
/// days; [`epoch_note`] says which absolute epoch a run used.
pub fn is_relative_epoch(v: &str) -> bool {
    let v = v.trim();
    v.starts_with("now") || v.starts_with('+') || v.starts_with('-')
}

fn relative_epoch(v: &str) -> Result<Option<i64>, String> {
    if !is_relative_epoch(v) {
        return Ok(None);
    }
    let span = v.strip_prefix("now").unwrap_or(v);
    let offset = if span.is_empty() {
        0
    } else if span.starts_with('+') || span.starts_with('-') {
        crate::commands::timectl::parse_span(span)?
    } else {
        return Err(format!(
            "{v:?}: expected now, now+SPAN or now-SPAN (e.g. now+2d)"
        ));
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| "the real clock is before 1970".to_string())?;
    let now = i64::try_from(now.as_nanos()).map_err(|_| "out of range".to_string())?;
    now.checked_add(offset)
        .map(Some)
        .ok_or_else(|| format!("{v:?}: out of range"))
}

/// The line that says which absolute epoch a relative one resolved to, so the run can be
/// repeated exactly.
pub fn epoch_note(text: &str, epoch_ns: i64) -> String {
    let secs = epoch_ns.div_euclid(1_000_000_000);
    let when = time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default();
    format!(
        "epoch {text} is @{secs} ({when}), resolved now: not reproducible across days; \
         repeat this run with --epoch @{secs}"
    )
}

/// A clock rate (`1`, `10`, `0.5`): how many logical seconds pass per real second, as parts
/// per million. Positive and at most a million.
pub fn parse_rate(v: &str) -> Result<u64, String> {
    let r: f64 = v
        .trim()
        .parse()
        .map_err(|_| "expected a positive number such as 1, 10 or 0.5".to_string())?;
    if !(r.is_finite() && r > 0.0 && r <= 1e6) {
        return Err("expected a positive number (at most 1000000) such as 1, 10 or 0.5".into());
    }
    Ok(((r * 1e6).round() as u64).max(1))
}

/// A duration with its unit (`1us`, `250ns`, `2ms`, `1.5us`), or `0`, which freezes the clock.
/// A bare number other than 0 is an error: `5` could mean 5 ns or 5 s, and a typo there
/// changes every value the command sees, so the unit is always written.
pub fn parse_tick(v: &str) -> Result<i64, String> {
    let v = v.trim();
    let bare = v.strip_prefix(['+', '-']).unwrap_or(v);
    if !bare.is_empty() && bare.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        if v.starts_with('-') {
            return Err("must not be negative".into());
        }
        if bare.bytes().all(|b| b == b'0' || b == b'.') && bare.contains('0') {
            return Ok(0);
        }
        return Err(format!(
            "a tick needs a unit, e.g. {bare}ns, {bare}us or {bare}ms (only 0 may go without)"
        ));
    }
    if v.starts_with('-') {
        return Err("must not be negative".into());
    }
    let d = humantime::parse_duration(v)
        .map_err(|e| format!("expected a duration such as 1us, 250ns or 0: {e}"))?;
    i64::try_from(d.as_nanos()).map_err(|_| "too large".into())
}
