//! The golden file: one canonical JSON document per case (sorted keys, 2-space indent,
//! trailing newline), so a reviewer reads its diff in a pull request. Its output part is an
//! [`Observed`]: text as an array of lines (each with its own `\n`), so a changed output line is
//! a changed JSON line; binary content as its sha256 and size.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::observe::Observed;

pub const FORMAT_VERSION: u32 = 1;

/// The seal settings a golden was recorded with (shown as a note when they change).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealRecord {
    pub epoch: String,
    pub seed: u64,
    pub tick_ns: i64,
    pub warp: bool,
    pub tz: String,
    pub locale: String,
    pub hash_seed: u32,
    pub hostname: String,
    /// Goldens recorded before `--cpus` existed were recorded with the default.
    #[serde(default = "default_cpus")]
    pub cpus: u32,
    /// Goldens recorded before `--spin-after` existed were recorded with every read ticking.
    #[serde(default)]
    pub spin_after: u32,
    pub unseal: Vec<String>,
    /// `--rate` in parts per million (0: deterministic ticks). Written only when set, so a
    /// golden recorded without it keeps its bytes (and one recorded before it reads as 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rate_ppm: u64,
    /// `--only` and `--skip` globs (from `[seal]` or `SEAL_ONLY`/`SEAL_SKIP`), written only when
    /// given, as `rate_ppm`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn default_cpus() -> u32 {
    seal_abi::settings::DEFAULT_CPUS
}

impl SealRecord {
    pub fn of(s: &crate::config::Settings) -> SealRecord {
        let epoch = time::OffsetDateTime::from_unix_timestamp_nanos(s.epoch_ns as i128)
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
            .unwrap_or_else(|| format!("@{}", s.epoch_ns / 1_000_000_000));
        SealRecord {
            epoch,
            seed: s.seed,
            tick_ns: s.tick_ns,
            warp: s.warp,
            tz: s.tz.clone(),
            locale: s.locale.clone(),
            hash_seed: s.hash_seed,
            hostname: s.hostname.clone(),
            cpus: s.cpus,
            spin_after: s.spin_after,
            unseal: s.unseal.clone(),
            rate_ppm: s.rate_ppm,
            only: s.only.clone(),
            skip: s.skip.clone(),
        }
    }
}

/// Golden mode's `spin_after` (docs/design.md, "Unprinted wall-clock reads in goldens"): the
/// first 1000 wall-clock reads after each wait leave the clock still, so a refactor that adds
/// or removes unprinted `time.time()`/`Date.now()` reads moves no printed value.
pub const GOLDEN_SPIN_AFTER: u32 = 1000;

/// `seal golden settings`: the settings record of a run with these options in this directory,
/// as canonical JSON on stdout (exit 0), or the configuration error (exit 2).
pub fn print_settings(args: &crate::cli::GoldenSettingsArgs) -> Result<std::process::ExitCode> {
    let mut settings = crate::usage::settings_for(&args.seal)?;
    // What a new case records: golden mode's own `spin_after` unless one was given.
    if !settings.spin_after_given {
        settings.spin_after = GOLDEN_SPIN_AFTER;
    }
    let v = canonical(serde_json::to_value(SealRecord::of(&settings))?);
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(std::process::ExitCode::SUCCESS)
}

/// A golden file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Golden {
    pub version: u32,
    pub name: String,
    pub argv: Vec<String>,
    pub cwd: String,
    /// Masks the case applies (placeholders `[name]` in the text show where each matched).
    pub masks: Vec<String>,
    pub seal: SealRecord,
    /// Census rows (`family/function`) whose totals differed between the recording passes
    /// although the output did not (a JVM's or Node's own bookkeeping): left out of `census`
    /// and of the drift `check` reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub census_varies: Vec<String>,
    #[serde(flatten)]
    pub observed: Observed,
}

/// `census` without the rows named `family/function` in `rows` (families left empty go too).
pub fn without_rows(census: &mut crate::observe::CensusTotals, rows: &[String]) {
    for row in rows {
        if let Some((fam, f)) = row.split_once('/') {
            if let Some(fns) = census.get_mut(fam) {
                fns.remove(f);
                if fns.is_empty() {
                    census.remove(fam);
                }
            }
        }
    }
}

/// Census rows (`family/function`) whose counts follow the scheduler, not the program: they
/// are never pinned in a golden (`record` leaves them out, `check` ignores them, even in a
/// golden recorded before this rule), so that passes that happened to agree on them cannot
/// fail a later `check --strict-census`. Every `wait` row: a poll, select or futex loop runs
/// until its data arrives, a timed wait or sleep returns early when woken, and how often
/// depends on when the other side ran (Python's `subprocess.communicate` polls its pipes:
/// `wait/poll 8 -> 11` under load). The reaping calls of `pid` (`waitpid`, `wait4`, `waitid`,
/// `wait`): a shell reaps in a loop until no exited child is left, and a `timeout=` wait
/// polls with `WNOHANG`, so the count depends on how many children exited together. And a
/// runtime's own bookkeeping clock reads (a JVM's, libuv's), which follow its threads.
pub fn unpinned(family: &str, function: &str) -> bool {
    family == "wait"
        || (family == "pid" && matches!(function, "waitpid" | "wait4" | "waitid" | "wait"))
        || (family == "time" && function == "clock read by runtime bookkeeping (no tick)")
}

/// `census` without the rows [`unpinned`] names (families left empty go too).
pub fn without_unpinned(census: &mut crate::observe::CensusTotals) {
    census.retain(|fam, fns| {
        fns.retain(|f, _| !unpinned(fam, f));
        !fns.is_empty()
    });
}

/// Rebuilds every object with its keys sorted (independent of serde_json's map order).
fn canonical(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            let sorted: BTreeMap<String, Value> =
                map.into_iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(canonical).collect()),
        other => other,
    }
}

impl Golden {
    /// Canonical JSON: sorted keys, 2-space indent, trailing newline.
    pub fn to_canonical_json(&self) -> String {
        let v = canonical(serde_json::to_value(self).expect("golden serializes"));
        let mut s = serde_json::to_string_pretty(&v).expect("golden serializes");
        s.push('\n');
        s
    }

    pub fn parse(text: &str) -> std::result::Result<Golden, String> {
        let g: Golden = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if g.version != FORMAT_VERSION {
            return Err(format!(
                "format version {} (this seal reads version {FORMAT_VERSION})",
                g.version
            ));
        }
        Ok(g)
    }
}

/// The state of a case's golden file on disk.
pub enum OnDisk {
    Missing,
    Invalid(String),
    Valid(Box<Golden>),
}

pub fn read(path: &Path) -> OnDisk {
    match crate::files::infile::read_string(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => OnDisk::Missing,
        Err(e) => OnDisk::Invalid(format!("{}: cannot read: {e}", path.display())),
        Ok(text) => match Golden::parse(&text) {
            Ok(g) => OnDisk::Valid(Box::new(g)),
            Err(e) => OnDisk::Invalid(format!(
                "{}: not a valid golden file ({e}); fix it or re-record it",
                path.display()
            )),
        },
    }
}

/// Writes `text` to `path` atomically (temporary file in the same directory, then rename).
/// Returns false when the file already held exactly this text (left untouched).
pub fn write(path: &Path, text: &str) -> Result<bool> {
    if crate::files::infile::read_string(path).ok().as_deref() == Some(text) {
        return Ok(false);
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".golden-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())?;
    // Goldens are committed files: the usual 0644, not tempfile's 0600.
    use std::os::unix::fs::PermissionsExt;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    tmp.persist(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{CensusTotals, Content};

    fn sample() -> Golden {
        let mut artifacts = BTreeMap::new();
        artifacts.insert(
            "out/a.txt".to_string(),
            Content::from_bytes(b"x\ny", |s| s.to_string()),
        );
        artifacts.insert(
            "out/b.bin".to_string(),
            Content::from_bytes(b"\0\x01", |s| s.to_string()),
        );
        let mut census = CensusTotals::new();
        census
            .entry("time".into())
            .or_default()
            .insert("clock_gettime".into(), 3);
        Golden {
            version: FORMAT_VERSION,
            census_varies: Vec::new(),
            name: "a".into(),
            argv: vec!["echo".into()],
            cwd: ".".into(),
            masks: vec!["uuid".into()],
            seal: SealRecord::of(
                &crate::config::resolve(
                    &Default::default(),
                    &BTreeMap::<String, String>::new(),
                    None,
                )
                .unwrap(),
            ),
            observed: Observed {
                exit_code: 0,
                stdout: Content::from_bytes(b"id 1\n", |s| s.replace('1', "[n]")),
                stderr: Content::Text(vec![]),
                artifacts,
                census,
            },
        }
    }

    #[test]
    fn scheduling_rows_are_never_pinned() {
        let mut c = CensusTotals::new();
        for (fam, f) in [
            ("wait", "poll"),
            ("wait", "syscall(SYS_futex)"),
            ("pid", "waitpid"),
            ("pid", "getpid"),
            ("time", "time"),
        ] {
            c.entry(fam.into()).or_default().insert(f.into(), 1);
        }
        without_unpinned(&mut c);
        let rows: Vec<String> = c
            .iter()
            .flat_map(|(fam, fns)| fns.keys().map(move |f| format!("{fam}/{f}")))
            .collect();
        assert_eq!(rows, ["pid/getpid", "time/time"]);
    }

    #[test]
    fn canonical_json_round_trips_sorted() {
        let g = sample();
        let text = g.to_canonical_json();
        assert!(text.ends_with("}\n") && text.contains("\n  \"argv\": [\n    \"echo\"\n  ],"));
        let keys: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("  \"") && !l.starts_with("   "))
            .map(|l| l.trim().split('"').nth(1).unwrap())
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert!(text.contains("\"id [n]\\n\""));
        assert!(text.contains("\"bytes\": 2"));
        assert!(text.contains("\"epoch\": \"2026-01-01T00:00:00Z\""));
        assert_eq!(Golden::parse(&text).unwrap(), g);
        assert_eq!(Golden::parse(&text).unwrap().to_canonical_json(), text);
        assert!(Golden::parse("{ nope").is_err());
    }

    /// `rate_ppm`, `only` and `skip` are recorded when set and read back; a golden without them
    /// (recorded before they were, or with none set) keeps its bytes and reads them as unset.
    #[test]
    fn rate_only_and_skip_are_recorded_when_set() {
        let plain = sample();
        let text = plain.to_canonical_json();
        for key in ["rate_ppm", "\"only\"", "\"skip\""] {
            assert!(!text.contains(key), "{key} in {text}");
        }
        let back = Golden::parse(&text).unwrap();
        assert_eq!((back.seal.rate_ppm, back.seal.only.len()), (0, 0));
        assert_eq!(back.to_canonical_json(), text);

        let opts = crate::cli::SealOpts {
            only: vec!["python*".into()],
            skip: vec!["/usr/bin/make".into()],
            ..Default::default()
        };
        let env: BTreeMap<String, String> = [("SEAL_RATE".to_string(), "2".to_string())].into();
        let set = crate::config::resolve(&opts, &env, None).unwrap();
        let g = Golden {
            seal: SealRecord::of(&set),
            ..sample()
        };
        assert_eq!(
            (g.seal.rate_ppm, g.seal.only.clone(), g.seal.skip.clone()),
            (
                2_000_000,
                vec!["python*".into()],
                vec!["/usr/bin/make".into()]
            )
        );
        assert_ne!(g.seal, plain.seal, "check notes the change");
        let text = g.to_canonical_json();
        assert!(text.contains("\"rate_ppm\": 2000000"), "{text}");
        assert_eq!(Golden::parse(&text).unwrap(), g);
        assert_eq!(Golden::parse(&text).unwrap().to_canonical_json(), text);
    }
}
