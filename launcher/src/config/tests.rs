//! Unit tests of the configuration: precedence, errors with their origins, value parsers.
use super::*;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Settings from these variables and that file, with no flag given.
fn no_flags(vars: &[(&str, &str)], file: Option<&LoadedFile>) -> Result<Settings, ConfigError> {
    resolve(&SealOpts::default(), &env(vars), file)
}

fn file(text: &str) -> LoadedFile {
    LoadedFile {
        path: "seal.toml".into(),
        text: text.into(),
        file: toml::from_str(text).unwrap(),
    }
}

#[test]
fn defaults() {
    let s = no_flags(&[], None).unwrap();
    assert_eq!(s.epoch_ns, DEFAULT_EPOCH_NS);
    assert_eq!(
        (
            s.seed,
            s.tick_ns,
            s.tz.as_str(),
            s.locale.as_str(),
            s.hostname.as_str()
        ),
        (0, 1000, "UTC", "C.UTF-8", "seal")
    );
}

#[test]
fn precedence_flag_env_file() {
    let f = file("[seal]\nseed = 3\ntick = \"2us\"\ntz = \"Europe/Paris\"\n");
    let s = no_flags(&[("SEAL_SEED", "2")], Some(&f)).unwrap();
    assert_eq!(
        (s.seed, s.tick_ns, s.tz.as_str()),
        (2, 2000, "Europe/Paris")
    );
    let opts = SealOpts {
        seed: Some("1".into()),
        ..Default::default()
    };
    assert_eq!(
        resolve(&opts, &env(&[("SEAL_SEED", "2")]), Some(&f))
            .unwrap()
            .seed,
        1
    );
}

#[test]
fn source_date_epoch_is_the_default_epoch() {
    let s = no_flags(&[("SOURCE_DATE_EPOCH", "1000")], None).unwrap();
    assert_eq!(s.epoch_ns, 1000 * 1_000_000_000);
}

#[test]
fn bad_values_name_key_and_line() {
    let f = file("[seal]\nseed = 1\nepoch = \"yesterday\"\n");
    let e = no_flags(&[], Some(&f)).unwrap_err().to_string();
    assert!(e.contains("seal.toml:3") && e.contains("`epoch`"), "{e}");
    let opts = SealOpts {
        unseal: vec!["clocks".into()],
        ..Default::default()
    };
    let e = resolve(&opts, &env(&[]), None).unwrap_err().to_string();
    assert!(
        e.contains("--unseal") && e.contains("clocks") && e.contains("time"),
        "{e}"
    );
}

#[test]
fn env_keys_that_would_unseal_are_refused_with_their_line() {
    for key in ["LD_PRELOAD", "LD_AUDIT", "SEAL_SEED", "LIBSEAL_SEED"] {
        let f = file(&format!("[env]\nOK = \"1\"\n{key} = \"x\"\n"));
        let e = no_flags(&[], Some(&f)).unwrap_err().to_string();
        assert!(e.starts_with("seal.toml:3:") && e.contains(key), "{e}");
    }
    let f = file("[env]\nLD_LIBRARY_PATH = \"/opt/lib\"\n");
    let s = no_flags(&[], Some(&f)).unwrap();
    assert_eq!(s.env["LD_LIBRARY_PATH"], "/opt/lib");
}

#[test]
fn clocks_that_would_overflow_are_refused_naming_the_culprit() {
    let opts = |epoch: Option<&str>, tick: Option<&str>| SealOpts {
        epoch: epoch.map(String::from),
        tick: tick.map(String::from),
        ..Default::default()
    };
    let err = |o: SealOpts| resolve(&o, &env(&[]), None).unwrap_err().to_string();
    let e = err(opts(None, Some("100years")));
    assert!(e.starts_with("--tick: ") && e.contains("100years"), "{e}");
    let e = err(opts(Some("@9223372000"), Some("1sec")));
    assert!(e.starts_with("--tick: "), "{e}");
    let e = err(opts(Some("@9223372000"), None));
    assert!(e.starts_with("--epoch: "), "{e}");
    let e = err(opts(Some("@92233720000"), Some("0")));
    assert!(e.contains("out of range"), "{e}");
    let e = err(opts(Some("9999-01-01T00:00:00Z"), None));
    assert!(e.contains("out of range"), "{e}");
    // The largest tick the bound allows, and 0 at the very end of the range.
    let max = (i64::MAX as i128 - DEFAULT_EPOCH_NS as i128) / MIN_READS;
    assert!(clock_fits(DEFAULT_EPOCH_NS, max as i64).is_ok());
    assert!(clock_fits(DEFAULT_EPOCH_NS, max as i64 + 1).is_err());
    assert!(clock_fits(i64::MAX, 0).is_ok());
    let f = file("[seal]\ntick = \"100years\"\n");
    let e = no_flags(&[], Some(&f)).unwrap_err();
    assert!(e.to_string().starts_with("seal.toml:2:"), "{e}");
}

#[test]
fn booleans_and_hostnames_are_checked_where_they_come_from() {
    let e = no_flags(&[("SEAL_QUIET", "banana")], None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("SEAL_QUIET") && e.contains("banana"), "{e}");
    let s = no_flags(&[("SEAL_QUIET", "yes")], None).unwrap();
    assert!(s.quiet);
    let f = file(&format!("[seal]\nhostname = \"{}\"\n", "h".repeat(65)));
    let e = no_flags(&[], Some(&f)).unwrap_err().to_string();
    assert!(
        e.starts_with("seal.toml:2:") && e.contains("64 bytes"),
        "{e}"
    );
}

#[test]
fn a_config_that_is_not_a_regular_file_is_refused_at_once() {
    let e = load_file(Path::new("/dev/zero")).unwrap_err().to_string();
    assert_eq!(e, "/dev/zero: is a device, not a regular file");
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path in our temp dir.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    assert!(load_file(&fifo).is_err(), "a FIFO must not block");
    assert!(load_file(d.path()).is_err());
}

#[test]
fn epochs_and_ticks() {
    assert_eq!(parse_epoch("@0").unwrap(), 0);
    assert_eq!(
        parse_epoch("2026-01-01T01:00:00+01:00").unwrap(),
        DEFAULT_EPOCH_NS
    );
    assert!(parse_epoch("2026-13-01").is_err());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let day = 86_400;
    for (v, want) in [
        ("now", 0),
        ("now+2d", 2 * day),
        ("+2d", 2 * day),
        ("-15d", -15 * day),
    ] {
        let got = parse_epoch(v).unwrap() / 1_000_000_000 - now;
        assert!((got - want).abs() <= 2, "{v}: {got} vs {want}");
    }
    for bad in ["now2d", "+2x", "nowish", "-"] {
        assert!(parse_epoch(bad).is_err(), "{bad} accepted");
    }
    assert!(epoch_note("now+1d", 1_767_225_600_000_000_000)
        .contains("@1767225600 (2026-01-01T00:00:00Z)"));
    assert_eq!(parse_tick("0").unwrap(), 0);
    assert_eq!(parse_tick("0.0").unwrap(), 0);
    for bare in ["5", "5.5", "1000"] {
        let e = parse_tick(bare).unwrap_err();
        assert!(
            e.contains("needs a unit") && e.contains(&format!("{bare}ns")),
            "{e}"
        );
    }
    assert_eq!(parse_tick("1us").unwrap(), 1000);
    assert_eq!(parse_tick("2ms").unwrap(), 2_000_000);
    assert!(parse_tick("-1").is_err());
    assert!(parse_tick("-1us").is_err());
}
