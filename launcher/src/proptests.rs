//! Property tests of every parser of user input: seal.toml (settings, `[env]`, `[patterns]`,
//! `[golden]`, `[[case]]`), ticks, epochs, seeds, spans (`seal time`'s durations), golden time
//! limits, mask patterns, golden files and probe reports (`--compare`). Each must never panic
//! on arbitrary input, and must either round-trip a value or reject it with one line (and, where
//! the error reaches `main`, exit status 2). 256 cases each (a few seconds in all);
//! `PROPTEST_CASES` raises it. This is the fuzz run CI makes (`cargo fuzz` needs nightly).

use crate::commands::golden::case::{seal_keys, CASE_KEYS};
use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;

use crate::cli::SealOpts;
use crate::commands::golden::file::Golden;
use crate::config::{self, parse_epoch, parse_tick, resolve, LoadedFile};
use crate::observe::masks::MaskSet;

fn cfg() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn no_env() -> BTreeMap<String, String> {
    BTreeMap::new()
}

/// Text that looks like the values people write: numbers, units, dates, signs, junk.
fn valueish() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[-+@]?[0-9]{0,25}(\\.[0-9]{0,12})?[ ]?(ns|us|µs|ms|s|sec|min|h|d|years|y|x)?",
        "-?[0-9]{1,6}-[0-9]{1,2}-[0-9]{1,2}[T ][0-9]{1,2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]{1,12})?)?(Z|[+-][0-9]{2}:[0-9]{2})?",
        "(true|false|yes|no|on|off|1|0|banana|TRUE| )",
    ]
}

/// A seal.toml value in TOML syntax: strings, integers, floats, booleans, arrays, tables.
fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        valueish().prop_map(|s| format!("{s:?}")),
        valueish().prop_map(|s| toml::Value::String(s).to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| toml::Value::Float(f).to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        "\\[[ ,\"a-z0-9]{0,20}\\]",
        "\\{[ =,\"a-z0-9]{0,20}\\}",
    ]
}

/// The keys seal.toml accepts in `keys`, plus `extra` ones it may not.
fn keys_and(keys: &[&[&'static str]], extra: &[&'static str]) -> &'static [&'static str] {
    let all: Vec<&'static str> = keys
        .concat()
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    Box::leak(all.into_boxed_slice())
}

/// A seal.toml built from the real sections and keys with arbitrary values.
fn config_text() -> impl Strategy<Value = String> {
    let line = |keys: &'static [&'static str]| {
        (prop::sample::select(keys), toml_value()).prop_map(|(k, v)| format!("{k} = {v}\n"))
    };
    (
        prop::collection::vec(line(keys_and(&[&seal_keys()], &["nope"])), 0..5),
        prop::collection::vec(
            (
                "[A-Za-z_][A-Za-z0-9_]{0,12}|LD_PRELOAD|SEAL_SEED|LIBSEAL_X",
                toml_value(),
            ),
            0..3,
        ),
        prop::collection::vec(("[a-z]{1,6}", any::<String>()), 0..3),
        prop::collection::vec(
            prop::collection::vec(
                line(keys_and(&[CASE_KEYS, &seal_keys()], &["exit", "nope"])),
                0..6,
            ),
            0..3,
        ),
        prop::collection::vec(line(&["dir", "masks", "timeout", "nope"]), 0..3),
    )
        .prop_map(|(seal, env, patterns, cases, golden)| {
            let mut t = String::from("[seal]\n");
            t.extend(seal);
            t.push_str("[env]\n");
            for (k, v) in env {
                t.push_str(&format!("{k} = {v}\n"));
            }
            t.push_str("[patterns]\n");
            for (k, v) in patterns {
                t.push_str(&format!("{k} = {}\n", toml::Value::String(v)));
            }
            t.push_str("[golden]\n");
            t.extend(golden);
            for c in cases {
                t.push_str("[[case]]\n");
                t.extend(c);
            }
            t
        })
}

/// Parses and resolves a seal.toml the way `seal run` and `seal golden` do; errors are one
/// line.
fn check_config(dir: &Path, text: String) {
    let path = dir.join("seal.toml");
    let loaded: LoadedFile = match config::parse_config(&path, text) {
        Ok(l) => l,
        Err(e) => return assert_one_line(&e.to_string()),
    };
    if let Err(e) = resolve(&SealOpts::default(), &no_env(), Some(&loaded)) {
        assert_one_line(&e.to_string());
    }
    if let Err(e) = crate::commands::golden::suite::load(&loaded, None, &no_env(), true) {
        assert_one_line(&e.to_string());
    }
}

fn assert_one_line(msg: &str) {
    assert!(!msg.is_empty() && !msg.contains('\n'), "{msg:?}");
}

/// SealOpts with one flag set to `v`.
fn flag(key: &str, v: String) -> SealOpts {
    let mut o = SealOpts::default();
    o.set(key, v);
    o
}

/// Every setting with a `[seal]` key.
fn keys() -> &'static [&'static str] {
    let keys = config::table::SETTINGS.iter().filter_map(|s| s.key);
    Box::leak(keys.collect::<Vec<_>>().into_boxed_slice())
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn any_seal_toml_parses_or_fails_in_one_line(text in any::<String>()) {
        let d = tempfile::tempdir().unwrap();
        check_config(d.path(), text);
    }

    #[test]
    fn structured_seal_toml_parses_or_fails_in_one_line(text in config_text()) {
        let d = tempfile::tempdir().unwrap();
        check_config(d.path(), text);
    }

    #[test]
    fn every_flag_and_variable_parses_or_fails_in_one_line(
        key in prop::sample::select(keys()),
        v in valueish(),
    ) {
        if let Err(e) = resolve(&flag(key, v.clone()), &no_env(), None) {
            assert_one_line(&e.to_string());
        }
        let var = format!("SEAL_{}", key.to_ascii_uppercase());
        let env: BTreeMap<String, String> = [(var, v.clone())].into();
        if let Err(e) = resolve(&SealOpts::default(), &env, None) {
            assert_one_line(&e.to_string());
        }
        let env: BTreeMap<String, String> = [("SEAL_QUIET".to_string(), v)].into();
        if let Err(e) = resolve(&SealOpts::default(), &env, None) {
            assert_one_line(&e.to_string());
        }
    }

    #[test]
    fn a_tick_is_never_negative_and_its_nanoseconds_round_trip(v in valueish(), n in 1..i64::MAX) {
        if let Ok(t) = parse_tick(&v) {
            prop_assert!(t >= 0);
        }
        prop_assert_eq!(parse_tick(&format!("{n}ns")), Ok(n));
        let human = humantime::format_duration(std::time::Duration::from_nanos(n as u64));
        prop_assert_eq!(parse_tick(&human.to_string()), Ok(n));
        // A bare number is 0 or an error that asks for a unit.
        let bare = parse_tick(&n.to_string()).unwrap_err();
        prop_assert!(bare.contains("unit"), "{}", bare);
    }

    #[test]
    fn an_accepted_tick_and_epoch_never_overflow(v in valueish(), epoch in any::<i64>()) {
        if let Ok(t) = parse_tick(&v) {
            if config::clock_fits(epoch, t).is_ok() {
                let end = (epoch as i128) + (t as i128) * config::MIN_READS;
                prop_assert!(end <= i64::MAX as i128);
            }
        }
    }

    #[test]
    fn epochs_round_trip_in_seconds_and_rfc3339(secs in -9_223_372_036i64..=9_223_372_036, nanos in 0u32..1_000_000_000, v in valueish()) {
        let _ = parse_epoch(&v);
        prop_assert_eq!(parse_epoch(&format!("@{secs}")), Ok(secs * 1_000_000_000));
        let ns = secs as i128 * 1_000_000_000 + nanos as i128;
        let t = time::OffsetDateTime::from_unix_timestamp_nanos(ns).unwrap();
        let text = t.format(&time::format_description::well_known::Rfc3339).unwrap();
        match i64::try_from(ns) {
            Ok(n) => prop_assert_eq!(parse_epoch(&text), Ok(n)),
            Err(_) => prop_assert!(parse_epoch(&text).is_err()),
        }
    }

    #[test]
    fn seeds_round_trip(seed in any::<u64>()) {
        let s = resolve(&flag("seed", seed.to_string()), &no_env(), None).unwrap();
        prop_assert_eq!(s.seed, seed);
        let over = (seed as u128 + u64::MAX as u128 + 1).to_string();
        prop_assert!(resolve(&flag("seed", over), &no_env(), None).is_err());
    }

    #[test]
    fn golden_time_limits_parse_or_fail(f in any::<f64>(), i in any::<i64>(), s in valueish()) {
        for v in [toml::Value::Float(f), toml::Value::Integer(i), toml::Value::String(s)] {
            match crate::commands::golden::case::parse_timeout(&v) {
                Ok(d) => prop_assert!(!d.is_zero()),
                Err(e) => assert_one_line(&e),
            }
        }
    }

    #[test]
    fn any_pattern_compiles_or_fails_and_masking_never_panics(
        name in "[a-z]{1,8}",
        re in prop_oneof![any::<String>(), "[\\\\()\\[\\]a-z0-9.*+?{},|^$-]{0,16}"],
        text in any::<String>(),
    ) {
        let extra: BTreeMap<String, String> = [(name, re)].into();
        if let Ok(m) = MaskSet::new(&extra) {
            let _ = m.apply(&text);
        }
        let (masked, used) = MaskSet::builtin().apply(&text);
        if used.is_empty() {
            prop_assert_eq!(masked, text);
        }
    }

    #[test]
    fn any_golden_file_parses_or_fails(text in any::<String>()) {
        if let Err(e) = Golden::parse(&text) {
            assert_one_line(&e);
        }
    }

    #[test]
    fn golden_files_round_trip(
        name in "[a-z0-9._-]{1,12}",
        argv in prop::collection::vec(any::<String>(), 1..4),
        lines in prop::collection::vec(any::<String>(), 0..5),
        code in any::<i32>(),
        calls in prop::collection::btree_map("[a-z]{1,6}", any::<u64>(), 0..3),
    ) {
        let json = serde_json::json!({
            "version": crate::commands::golden::file::FORMAT_VERSION,
            "name": name,
            "argv": argv,
            "cwd": ".",
            "masks": [],
            "seal": {
                "epoch": "2026-01-01T00:00:00Z", "seed": 0, "tick_ns": 1000, "warp": false,
                "tz": "UTC", "locale": "C.UTF-8", "hash_seed": 0, "hostname": "seal",
                "unseal": []
            },
            "exit_code": code,
            "stdout": lines,
            "stderr": {"sha256": "00", "bytes": 3},
            "artifacts": {},
            "census": {"time": calls},
        });
        let g = Golden::parse(&json.to_string()).unwrap();
        let canonical = g.to_canonical_json();
        let again = Golden::parse(&canonical).unwrap();
        prop_assert_eq!(&again, &g);
        prop_assert_eq!(again.to_canonical_json(), canonical);
    }
}

/// Spans as people write them, and near misses: signs, several parts, fractions, every unit,
/// unknown units, huge numbers.
fn span_text() -> impl Strategy<Value = String> {
    let unit = prop::sample::select(vec![
        "y", "mo", "w", "d", "h", "m", "s", "ms", "us", "ns", "", "x", "min", "µs",
    ]);
    let part = (
        prop_oneof![
            "[0-9]{1,4}",
            "[0-9]{1,3}\\.[0-9]{0,3}",
            "[0-9]{18,30}",
            "\\.",
            ""
        ],
        unit,
    )
        .prop_map(|(n, u)| format!("{n}{u}"));
    (
        prop::sample::select(vec!["", "-", "+", " ", "--"]),
        prop::collection::vec(part, 0..4),
    )
        .prop_map(|(sign, parts)| format!("{sign}{}", parts.concat()))
}

/// Writes `text` as a file and loads it as `seal probe --compare` does.
fn load_probe_report(text: &str) -> anyhow::Result<crate::commands::probe::Report> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    std::fs::write(&path, text).unwrap();
    crate::commands::probe::load_report(&path)
}

/// A failure that reaches `main`: one line, exit status 2 (the user's input was wrong).
fn assert_usage_error(e: &anyhow::Error) {
    let line = e
        .chain()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(": ");
    assert_one_line(&line);
    assert_eq!(crate::usage::failure_code(e), 2, "{line}");
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn any_span_parses_or_fails_in_one_line(text in any::<String>()) {
        if let Err(e) = crate::commands::timectl::parse_span(&text) {
            assert_one_line(&e);
        }
    }

    #[test]
    fn structured_spans_parse_or_fail_in_one_line(text in span_text()) {
        match crate::commands::timectl::parse_span(&text) {
            Ok(ns) => {
                // The sign is the only way to be negative.
                prop_assert!(ns >= 0 || text.trim_start().starts_with('-'), "{text:?} -> {ns}");
            }
            Err(e) => assert_one_line(&e),
        }
    }

    #[test]
    fn spans_round_trip_in_every_unit(n in 0i64..1_000_000_000, neg in any::<bool>()) {
        use crate::commands::timectl::parse_span;
        let sign = if neg { "-" } else { "" };
        let want = if neg { -n } else { n };
        prop_assert_eq!(parse_span(&format!("{sign}{n}ns")), Ok(want));
        prop_assert_eq!(parse_span(&format!("{sign}{n}s")), Ok(want * 1_000_000_000));
        prop_assert_eq!(parse_span(&format!("{sign}{n}ms")), Ok(want * 1_000_000));
        prop_assert_eq!(parse_span(&format!("{sign}{}d{}h", n % 1000, n % 24)),
            Ok(if neg { -1 } else { 1 } * ((n % 1000) * 86_400 + (n % 24) * 3_600) * 1_000_000_000));
    }

    #[test]
    fn any_probe_report_loads_or_fails_in_one_line_with_status_2(text in any::<String>()) {
        if let Err(e) = load_probe_report(&text) {
            assert_usage_error(&e);
        }
    }

    #[test]
    fn probe_reports_round_trip(
        command in prop::collection::vec(any::<String>(), 1..4),
        sealed in any::<bool>(),
        lines in 0usize..1000,
        fraction in 0.0f64..=1.0,
        notes in prop::collection::vec(any::<String>(), 0..3),
        patterns in prop::collection::btree_map("[a-z]{1,6}", any::<String>(), 0..3),
        growth in prop::collection::vec("[a-z]{1,6}", 0..2),
        exit in 0u8..5,
        text in any::<String>(),
        variants in prop::collection::vec((any::<String>(), 0usize..9), 0..3),
        drift in prop::collection::vec((any::<String>(), 0usize..9, any::<String>()), 0..2),
    ) {
        let mut json = serde_json::json!({
            "version": 1,
            "command": command,
            "sealed": sealed,
            "perturbations": [{"name": "baseline", "what": text, "runs": 3, "exits": [0, 1]}],
            "summary": {"lines": lines, "stable": lines, "volatile": 0, "unstable": 0,
                "masked_fraction": fraction, "max_masked": fraction, "runs": 3},
            "lines": [{
                "line": 1, "text": text, "masked": text, "status": "stable",
                "patterns": [], "varies_under": [],
                "variants": variants.iter().map(|(t, c)| serde_json::json!(
                    {"text": t, "count": c, "first_run": "baseline"})).collect::<Vec<_>>(),
            }],
            "drift": drift.iter().map(|(run, at, line)| serde_json::json!(
                {"run": run, "lines": at, "reference_lines": 1, "inserted": [[at, line]],
                 "missing": [at]})).collect::<Vec<_>>(),
            "patterns": patterns,
            "notes": notes,
            "mask_growth": growth,
            "exit": exit,
        });
        if growth.is_empty() {
            // Written only when something grew.
            json.as_object_mut().unwrap().remove("mask_growth");
        }
        // As `seal probe --report` writes it, and read back as `--compare` does.
        let written = serde_json::to_string_pretty(&json).unwrap();
        let report = match load_probe_report(&written) {
            Ok(r) => r,
            Err(e) => panic!("a report seal writes must load: {e:#}\n{written}"),
        };
        let again = serde_json::to_string_pretty(&report).unwrap();
        let reloaded = load_probe_report(&again).unwrap();
        prop_assert_eq!(serde_json::to_string_pretty(&reloaded).unwrap(), again);
        prop_assert_eq!(
            serde_json::from_str::<serde_json::Value>(&written).unwrap(),
            serde_json::from_str::<serde_json::Value>(&serde_json::to_string(&report).unwrap()).unwrap()
        );
    }

    #[test]
    fn any_seal_toml_fails_with_status_2(text in config_text()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seal.toml");
        match config::parse_config(&path, text) {
            Err(e) => assert_usage_error(&anyhow::Error::from(e)),
            Ok(loaded) => {
                if let Err(e) = resolve(&SealOpts::default(), &no_env(), Some(&loaded)) {
                    assert_usage_error(&anyhow::Error::from(e));
                }
            }
        }
    }
}
