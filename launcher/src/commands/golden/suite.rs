//! The golden suite as written in `seal.toml`: the `[golden]` table, `[patterns]` and the
//! `[[case]]` tables (each read by `case`), validated before anything runs or any golden file is
//! touched. Every bad value is a one-line [`ConfigError`] naming `file:line` (exit 2).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use toml::Value;

pub use super::case::Case;
use super::case::{self, config_error_at, parse_timeout, string_list, type_name, Defaults};
use crate::cli::SealOpts;
use crate::config::{self, ConfigError, EnvSource, LoadedFile};
use crate::observe::masks::MaskSet;

/// Keys of `[golden]`.
pub const GOLDEN_KEYS: &[&str] = &["dir", "masks", "timeout"];

/// The whole suite: its cases in file order and where goldens live.
#[derive(Debug)]
pub struct Suite {
    pub cases: Vec<Case>,
    /// Directory of golden files.
    pub dir: PathBuf,
    pub config_path: PathBuf,
}

/// Loads and validates the suite of `loaded`. `golden_dir` is `--dir` when given.
pub fn load(
    loaded: &LoadedFile,
    golden_dir: Option<&Path>,
    env: &dyn EnvSource,
    quiet: bool,
) -> Result<Suite, ConfigError> {
    let root = root_of(loaded);
    let all_masks = patterns(loaded)?;
    let (dir, defaults) = golden_table(loaded, &root, all_masks)?;
    // The seal settings every case starts from (errors in [seal] are reported once, here).
    let opts = SealOpts {
        quiet,
        ..Default::default()
    };
    config::resolve(&opts, env, Some(loaded))?;
    let mut cases = Vec::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (i, table) in loaded.file.case.iter().enumerate() {
        cases.push(case::read(
            loaded, i, table, &root, &defaults, env, quiet, &mut seen,
        )?);
    }
    let dir = golden_dir.map_or(dir, Path::to_path_buf);
    for case in &mut cases {
        golden_spin_after(&dir, case);
    }
    Ok(Suite {
        cases,
        dir,
        config_path: loaded.path.clone(),
    })
}

use super::file::GOLDEN_SPIN_AFTER;

/// A case that does not set `spin_after` (nor `[seal]`, nor `SEAL_SPIN_AFTER`) takes the one
/// its golden was recorded with, so goldens recorded before golden mode had a default of its
/// own (0) still check; a case without a golden takes [`GOLDEN_SPIN_AFTER`]. Either way the
/// golden's `seal` record holds the value, and `seal --spin-after N -- CMD` reproduces it.
fn golden_spin_after(dir: &Path, case: &mut Case) {
    if case.settings.spin_after_given {
        return;
    }
    let path = dir.join(format!("{}.json", case.name));
    match super::file::read(&path) {
        super::file::OnDisk::Valid(g) => case.settings.spin_after = g.seal.spin_after,
        super::file::OnDisk::Missing => {
            case.settings.spin_after = GOLDEN_SPIN_AFTER;
            case.spin_default = true;
        }
        // Reported by the action that reads it; the default meanwhile.
        super::file::OnDisk::Invalid(_) => case.settings.spin_after = GOLDEN_SPIN_AFTER,
    }
}

/// The directory of seal.toml, absolute: case directories are relative to it.
fn root_of(loaded: &LoadedFile) -> PathBuf {
    let root = match loaded.path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf())
}

/// `[patterns]`: every regex must compile (the error points at its line); with the built-in
/// masks, the masks a case may name.
fn patterns(loaded: &LoadedFile) -> Result<MaskSet, ConfigError> {
    let mut patterns = BTreeMap::new();
    for (name, re) in &loaded.file.patterns {
        if let Err(e) = regex::Regex::new(re.get_ref()) {
            let first = e.to_string();
            let first = first.lines().last().unwrap_or("").trim();
            let msg = format!("pattern `{name}` is not a valid regex: {first}");
            return Err(config_error_at(loaded, re.span().start, msg));
        }
        patterns.insert(name.clone(), re.get_ref().clone());
    }
    MaskSet::new(&patterns).map_err(|e| ConfigError::Io {
        file: loaded.path.display().to_string(),
        msg: e.to_string(),
    })
}

/// `[golden]`: the directory of goldens and what every case starts from.
fn golden_table(
    loaded: &LoadedFile,
    root: &Path,
    all_masks: MaskSet,
) -> Result<(PathBuf, Defaults), ConfigError> {
    let mut dir = root.join("golden");
    let mut defaults = Defaults {
        all_masks,
        mask_names: Vec::new(),
        timeout: None,
    };
    let Some(g) = &loaded.file.golden else {
        return Ok((dir, defaults));
    };
    for (k, v) in g.get_ref() {
        let here = |msg: String| {
            let msg = format!("[golden] `{}`: {msg}", k.get_ref());
            config_error_at(loaded, k.span().start, msg)
        };
        match (k.get_ref().as_str(), v.get_ref()) {
            ("dir", Value::String(s)) if !s.is_empty() => dir = root.join(s),
            ("dir", v) => {
                let found = type_name(v);
                return Err(here(format!("expected a directory name, found {found}")));
            }
            ("timeout", v) => defaults.timeout = Some(parse_timeout(v).map_err(here)?),
            ("masks", v) => {
                defaults.mask_names =
                    string_list(v).ok_or_else(|| here("expected an array of mask names".into()))?;
                if let Err(unknown) = defaults.all_masks.subset(&defaults.mask_names) {
                    let known = defaults.known();
                    return Err(here(format!("unknown mask `{unknown}` (known: {known})")));
                }
            }
            (other, _) => {
                let keys = GOLDEN_KEYS.join(", ");
                return Err(here(format!(
                    "unknown key `{other}` (expected one of {keys})"
                )));
            }
        }
    }
    Ok((dir, defaults))
}

/// Selects cases by name (all when `names` is empty); an unknown name is a usage error.
pub fn select<'a>(suite: &'a Suite, names: &[String]) -> Result<Vec<&'a Case>, String> {
    if names.is_empty() {
        return Ok(suite.cases.iter().collect());
    }
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for n in names {
        match suite.cases.iter().find(|c| &c.name == n) {
            Some(c) => {
                if seen.insert(n.clone()) {
                    out.push(c);
                }
            }
            None => {
                let all: Vec<&str> = suite.cases.iter().map(|c| c.name.as_str()).collect();
                return Err(format!(
                    "no case named `{n}` in {} (cases: {})",
                    suite.config_path.display(),
                    if all.is_empty() {
                        "none".to_string()
                    } else {
                        all.join(", ")
                    }
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(dir: &Path, text: &str) -> LoadedFile {
        let path = dir.join("seal.toml");
        std::fs::write(&path, text).unwrap();
        config::load_file(&path).unwrap()
    }

    fn env() -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    fn err_of(text: &str) -> String {
        let d = tempfile::tempdir().unwrap();
        let l = loaded(d.path(), text);
        load(&l, None, &env(), true).unwrap_err().to_string()
    }

    #[test]
    fn cases_parse_with_overrides_and_defaults() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/in.txt"), "x").unwrap();
        let l = loaded(
            d.path(),
            "[seal]\nseed = 3\n[patterns]\nreq = 'req-\\d+'\n[golden]\ndir = 'gold'\nmasks = ['uuid']\n\n[[case]]\nname = 'a'\ncmd = ['echo', 'hi']\n\n[[case]]\nname = 'b'\ncmd = 'echo $X | tr a-z A-Z'\ncwd = 'sub'\nstdin = 'in.txt'\nenv = { X = 'y', N = 3 }\nartifacts = ['out/*.txt']\nmasks = ['iso8601', 'req']\nseed = 9\ntz = 'Europe/Paris'\n",
        );
        let s = load(&l, None, &env(), true).unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        assert_eq!(s.dir, root.join("gold"));
        let (a, b) = (&s.cases[0], &s.cases[1]);
        assert_eq!(a.argv, ["echo", "hi"]);
        assert_eq!(
            (a.settings.seed, a.mask_names.clone()),
            (3, vec!["uuid".to_string()])
        );
        assert_eq!(b.argv, ["sh", "-c", "echo $X | tr a-z A-Z"]);
        assert_eq!(
            (b.settings.seed, b.settings.tz.as_str()),
            (9, "Europe/Paris")
        );
        assert_eq!(b.cwd, root.join("sub"));
        assert_eq!(
            b.env,
            [("N".to_string(), "3".to_string()), ("X".into(), "y".into())]
        );
        assert_eq!(
            b.masks.apply("req-7 at 2026-01-01T00:00:00Z").0,
            "[req] at [iso8601]"
        );
        assert!(
            b.origin("seed").ends_with("seal.toml:21"),
            "{}",
            b.origin("seed")
        );
    }

    #[test]
    fn bad_cases_name_case_key_and_line() {
        // Each bad suite, and what its one error names.
        let bad: &[(&str, &[&str])] = &[
            (
                "[[case]]\nname = 'a'\ncmd = ['x']\nmasks = ['nope']\n",
                &["seal.toml:4", "case `a`", "`masks`", "nope"],
            ),
            (
                "[[case]]\nname = 'a'\ncmd = ['x']\n[[case]]\nname = 'a'\ncmd = ['y']\n",
                &["seal.toml:5", "duplicate", "seal.toml:2"],
            ),
            (
                "[[case]]\nname = 'a'\n\n[[case]]\nname = 'b'\ncwd = '.'\n",
                &["case `a`", "`cmd`", "missing"],
            ),
            (
                "[[case]]\nname = 'a'\ncmd = 'x'\nseed = 'many'\n",
                &["seal.toml:4", "case `a`", "`seed`"],
            ),
            (
                "[[case]]\nname = 'a'\ncmd = 'x'\nretries = 3\n",
                &["`retries`", "unknown key"],
            ),
            (
                "[[case]]\nname = 'a'\ncmd = 'x'\ntimeout = 0\n",
                &["seal.toml:4", "`timeout`"],
            ),
            ("[golden]\ntimeout = 'later'\n", &["seal.toml:2", "timeout"]),
            (
                "[[case]]\nname = 'a/b'\ncmd = 'x'\n",
                &["not a valid case name"],
            ),
            (
                "[[case]]\nname = 'a'\ncmd = 'x'\nartifacts = ['../up']\n",
                &["`artifacts`"],
            ),
            ("[golden]\nfolder = 'x'\n", &["seal.toml:2", "folder"]),
            ("[patterns]\nbad = '('\n", &["seal.toml:2", "`bad`"]),
        ];
        for (text, needles) in bad {
            let e = err_of(text);
            assert!(needles.iter().all(|n| e.contains(n)), "{text}: {e}");
        }
        for e in [
            err_of("[[case]]\nname = 'a'\ncmd = ['x']\nmasks = ['nope']\n"),
            err_of("[[case]]\nname = 'a'\n"),
        ] {
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    #[test]
    fn select_by_name() {
        let d = tempfile::tempdir().unwrap();
        let l = loaded(
            d.path(),
            "[[case]]\nname = 'a'\ncmd = 'x'\n[[case]]\nname = 'b'\ncmd = 'y'\n",
        );
        let s = load(&l, None, &env(), true).unwrap();
        assert_eq!(select(&s, &[]).unwrap().len(), 2);
        assert_eq!(select(&s, &["b".into()]).unwrap()[0].name, "b");
        assert!(select(&s, &["c".into()])
            .unwrap_err()
            .contains("cases: a, b"));
    }
}
