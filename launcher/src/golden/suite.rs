//! The golden suite as written in `seal.toml`: `[[case]]` tables and the `[golden]` table,
//! validated into [`Case`]s. Every bad value is a one-line [`ConfigError`] naming the case, the
//! key and `file:line` (exit 2), found before anything runs or any golden file is touched.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::{Spanned, Value};

use crate::cli::SealOpts;
use crate::config::{self, ConfigError, EnvSource, LoadedFile, SealSection, Settings};
use crate::masks::MaskSet;

/// Keys of a case that override `[seal]` for that case only.
pub const SEAL_KEYS: &[&str] = &[
    "epoch",
    "seed",
    "tick",
    "tz",
    "locale",
    "hash_seed",
    "hostname",
    "warp",
    "unseal",
];
/// Keys of a case that describe the command.
pub const CASE_KEYS: &[&str] = &[
    "name",
    "cmd",
    "cwd",
    "stdin",
    "env",
    "artifacts",
    "masks",
    "timeout",
];
/// Keys of `[golden]`.
pub const GOLDEN_KEYS: &[&str] = &["dir", "masks", "timeout"];

type SpannedTable = BTreeMap<Spanned<String>, Spanned<Value>>;

/// The parts of `seal.toml` the suite needs, re-read with a span on every key and value.
#[derive(Deserialize)]
struct SuiteDoc {
    #[serde(default)]
    case: Vec<Spanned<SpannedTable>>,
    #[serde(default)]
    golden: Option<Spanned<SpannedTable>>,
}

/// One validated case.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    /// The command as run (a shell string becomes `sh -c STRING`).
    pub argv: Vec<String>,
    /// `cwd` as written (relative to the directory of seal.toml), `.` by default.
    pub cwd_rel: String,
    /// Absolute working directory.
    pub cwd: PathBuf,
    /// Standard input file (absolute), if any.
    pub stdin: Option<PathBuf>,
    /// `env` of the case, applied after `[env]`.
    pub env: Vec<(String, String)>,
    /// Artifact globs, relative to the working directory.
    pub artifacts: Vec<String>,
    /// Mask names as configured, and the masks themselves.
    pub mask_names: Vec<String>,
    pub masks: MaskSet,
    pub settings: Settings,
    /// Time limit of one sealed pass (`timeout`, else `[golden] timeout`): a case that hangs
    /// is killed and reported instead of hanging the suite.
    pub timeout: Option<std::time::Duration>,
    /// `file:line` of each key of the case (and of the case itself under "").
    pub origins: BTreeMap<String, String>,
}

impl Case {
    /// `file:line` of `key` in this case, else of the case.
    pub fn origin(&self, key: &str) -> &str {
        self.origins
            .get(key)
            .or_else(|| self.origins.get(""))
            .map(String::as_str)
            .unwrap_or("seal.toml")
    }

    /// A one-line config error about `key` of this case.
    pub fn error(&self, key: &str, msg: impl std::fmt::Display) -> ConfigError {
        config_error(self.origin(key), &self.name, key, msg)
    }
}

/// The whole suite: its cases in file order and where goldens live.
#[derive(Debug)]
pub struct Suite {
    pub cases: Vec<Case>,
    /// Directory of golden files.
    pub dir: PathBuf,
    pub config_path: PathBuf,
}

fn config_error(origin: &str, case: &str, key: &str, msg: impl std::fmt::Display) -> ConfigError {
    // origin is "file:line"; ConfigError::File prints "file:line: msg".
    let (file, line) = match origin.rsplit_once(':') {
        Some((f, l)) if l.parse::<usize>().is_ok() => (f.to_string(), l.parse().unwrap()),
        _ => (origin.to_string(), 1),
    };
    let what = if key.is_empty() {
        format!("case `{case}`")
    } else {
        format!("case `{case}`, key `{key}`")
    };
    ConfigError::File {
        file,
        line,
        msg: format!("{what}: {msg}"),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date-time",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

/// A time limit: a duration string (`"30s"`, `"2m"`) or a number of seconds, above zero.
fn parse_timeout(v: &Value) -> Result<std::time::Duration, String> {
    let d = match v {
        Value::Integer(n) if *n > 0 => std::time::Duration::from_secs(*n as u64),
        Value::Float(f) if *f > 0.0 && f.is_finite() => std::time::Duration::from_secs_f64(*f),
        Value::String(s) => humantime::parse_duration(s.trim())
            .map_err(|e| format!("{s:?} is not a duration such as \"30s\" or \"2m\": {e}"))?,
        other => {
            return Err(format!(
                "expected a duration such as \"30s\" or a number of seconds, found {}",
                type_name(other)
            ))
        }
    };
    if d.is_zero() {
        return Err("must be more than zero".into());
    }
    Ok(d)
}

fn string_list(v: &Value) -> Option<Vec<String>> {
    v.as_array()?
        .iter()
        .map(|x| x.as_str().map(str::to_string))
        .collect()
}

/// Case names become file names: letters, digits, `.`, `_`, `-`, not starting with `.`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name.len() <= 200
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// A relative path that stays inside its base (no absolute path, no `..`).
fn stays_inside(p: &str) -> bool {
    let path = Path::new(p);
    !path.is_absolute()
        && path
            .components()
            .all(|c| !matches!(c, std::path::Component::ParentDir))
}

/// Loads and validates the suite of `loaded`. `golden_dir` is `--dir` when given.
pub fn load(
    loaded: &LoadedFile,
    golden_dir: Option<&Path>,
    env: &dyn EnvSource,
    quiet: bool,
) -> Result<Suite, ConfigError> {
    let file_err = |off: usize, msg: String| ConfigError::File {
        file: loaded.path.display().to_string(),
        line: config::line_of(&loaded.text, off),
        msg,
    };
    let doc: SuiteDoc = toml::from_str(&loaded.text).map_err(|e| {
        file_err(
            e.span().map(|s| s.start).unwrap_or(0),
            e.message().trim().to_string(),
        )
    })?;
    let root = loaded
        .path
        .parent()
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .unwrap_or(Path::new("."));
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());

    // [patterns]: every regex must compile; the error points at its line.
    let mut patterns = BTreeMap::new();
    for (name, re) in &loaded.file.patterns {
        if let Err(e) = regex::Regex::new(re.get_ref()) {
            let first = e
                .to_string()
                .lines()
                .last()
                .unwrap_or("")
                .trim()
                .to_string();
            return Err(file_err(
                re.span().start,
                format!("pattern `{name}` is not a valid regex: {first}"),
            ));
        }
        patterns.insert(name.clone(), re.get_ref().clone());
    }
    let all_masks = MaskSet::new(&patterns).map_err(|e| ConfigError::Io {
        file: loaded.path.display().to_string(),
        msg: e.to_string(),
    })?;
    let known = || {
        all_masks
            .masks
            .iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };

    // [golden]
    let mut dir = root.join("golden");
    let mut default_masks: Vec<String> = Vec::new();
    let mut default_timeout: Option<std::time::Duration> = None;
    // config.rs checked the shapes ([golden] a table, [[case]] tables); the spanned re-read
    // gives each key its line.
    if let Some(g) = doc.golden.as_ref().filter(|_| loaded.file.golden.is_some()) {
        for (k, v) in g.get_ref() {
            let here = |msg: String| {
                file_err(k.span().start, format!("[golden] `{}`: {msg}", k.get_ref()))
            };
            match k.get_ref().as_str() {
                "dir" => match v.get_ref().as_str() {
                    Some(s) if !s.is_empty() => dir = root.join(s),
                    _ => {
                        return Err(here(format!(
                            "expected a directory name, found {}",
                            type_name(v.get_ref())
                        )))
                    }
                },
                "timeout" => {
                    default_timeout = Some(parse_timeout(v.get_ref()).map_err(here)?);
                }
                "masks" => {
                    default_masks = string_list(v.get_ref())
                        .ok_or_else(|| here("expected an array of mask names".into()))?;
                    if let Err(unknown) = all_masks.subset(&default_masks) {
                        return Err(here(format!(
                            "unknown mask `{unknown}` (known: {})",
                            known()
                        )));
                    }
                }
                other => {
                    return Err(here(format!(
                        "unknown key `{other}` (expected one of {})",
                        GOLDEN_KEYS.join(", ")
                    )))
                }
            }
        }
    }
    if let Some(d) = golden_dir {
        dir = d.to_path_buf();
    }

    // The seal settings every case starts from (errors in [seal] are reported once, here).
    let opts = SealOpts {
        quiet,
        ..Default::default()
    };
    config::resolve(&opts, env, Some(loaded))?;

    let mut cases = Vec::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (i, table) in doc.case.iter().enumerate() {
        let case_start = loaded
            .file
            .case
            .get(i)
            .map_or(table.span().start, |t| t.span().start);
        let case_origin = loaded.origin(case_start);
        let get = |k: &str| table.get_ref().get(k);
        let mut origins: BTreeMap<String, String> = BTreeMap::new();
        origins.insert(String::new(), case_origin.clone());
        for (k, v) in table.get_ref() {
            origins.insert(k.get_ref().clone(), loaded.origin(v.span().start));
        }
        // The name first: every later error names the case.
        let label = format!("#{}", i + 1);
        let name = match get("name") {
            None => return Err(config_error(&case_origin, &label, "name", "missing (every case needs a name)")),
            Some(v) => match v.get_ref().as_str() {
                Some(s) if valid_name(s) => s.to_string(),
                Some(s) => {
                    return Err(config_error(&origins["name"], &label, "name", format!(
                        "{s:?} is not a valid case name (letters, digits, `.`, `_`, `-`; it names the golden file)"
                    )))
                }
                None => return Err(config_error(&origins["name"], &label, "name", format!("expected a string, found {}", type_name(v.get_ref())))),
            },
        };
        let err = |key: &str, msg: String| {
            config_error(origins.get(key).unwrap_or(&case_origin), &name, key, msg)
        };
        if let Some(first) = seen.get(&name) {
            return Err(err(
                "name",
                format!("duplicate case name (first defined at {first})"),
            ));
        }
        seen.insert(name.clone(), origins["name"].clone());
        for k in table.get_ref().keys() {
            let k = k.get_ref().as_str();
            if !CASE_KEYS.contains(&k) && !SEAL_KEYS.contains(&k) {
                return Err(err(
                    k,
                    format!(
                        "unknown key (expected one of {}, or a [seal] setting: {})",
                        CASE_KEYS.join(", "),
                        SEAL_KEYS.join(", ")
                    ),
                ));
            }
        }
        let argv: Vec<String> = match get("cmd").map(|v| v.get_ref()) {
            None => {
                return Err(err(
                    "cmd",
                    "missing (the command to run: an array of arguments or a shell string)".into(),
                ))
            }
            Some(Value::String(s)) if !s.trim().is_empty() => {
                vec!["sh".into(), "-c".into(), s.clone()]
            }
            Some(v @ Value::Array(_)) => match string_list(v) {
                Some(a) if !a.is_empty() && !a[0].is_empty() => a,
                Some(_) => return Err(err("cmd", "empty command".into())),
                None => {
                    return Err(err(
                        "cmd",
                        "expected an array of strings or a shell string".into(),
                    ))
                }
            },
            Some(Value::String(_)) => return Err(err("cmd", "empty command".into())),
            Some(v) => {
                return Err(err(
                    "cmd",
                    format!(
                        "expected an array of strings or a shell string, found {}",
                        type_name(v)
                    ),
                ))
            }
        };
        if argv.iter().any(|a| a.contains('\0')) {
            return Err(err("cmd", "an argument contains a NUL byte".into()));
        }
        let cwd_rel = match get("cwd").map(|v| v.get_ref()) {
            None => ".".to_string(),
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(v) => {
                return Err(err(
                    "cwd",
                    format!(
                        "expected a directory (relative to seal.toml), found {}",
                        type_name(v)
                    ),
                ))
            }
        };
        let cwd = root.join(&cwd_rel);
        if !cwd.is_dir() {
            return Err(err("cwd", format!("{} is not a directory", cwd.display())));
        }
        let stdin = match get("stdin").map(|v| v.get_ref()) {
            None => None,
            Some(Value::String(s)) if !s.is_empty() => {
                let p = cwd.join(s);
                if !p.is_file() {
                    return Err(err(
                        "stdin",
                        format!(
                            "{} is not a file (stdin is relative to the case's cwd)",
                            p.display()
                        ),
                    ));
                }
                Some(p)
            }
            Some(v) => {
                return Err(err(
                    "stdin",
                    format!("expected a file name, found {}", type_name(v)),
                ))
            }
        };
        let mut env_pairs = Vec::new();
        match get("env").map(|v| v.get_ref()) {
            None => {}
            Some(Value::Table(t)) => {
                for (k, v) in t {
                    if k.is_empty() || k.contains('=') || k.contains('\0') {
                        return Err(err("env", format!("{k:?} is not a valid variable name")));
                    }
                    let text = match v {
                        Value::String(s) => s.clone(),
                        Value::Integer(n) => n.to_string(),
                        Value::Float(f) => f.to_string(),
                        Value::Boolean(b) => b.to_string(),
                        other => {
                            return Err(err(
                                "env",
                                format!("`{k}`: expected a string, found {}", type_name(other)),
                            ))
                        }
                    };
                    if text.contains('\0') {
                        return Err(err("env", format!("`{k}` contains a NUL byte")));
                    }
                    env_pairs.push((k.clone(), text));
                }
            }
            Some(v) => {
                return Err(err(
                    "env",
                    format!(
                        "expected a table of NAME = \"value\", found {}",
                        type_name(v)
                    ),
                ))
            }
        }
        let artifacts = match get("artifacts").map(|v| v.get_ref()) {
            None => Vec::new(),
            Some(v) => {
                let list = string_list(v)
                    .ok_or_else(|| err("artifacts", "expected an array of globs".into()))?;
                for g in &list {
                    if g.is_empty() || !stays_inside(g) {
                        return Err(err("artifacts", format!("{g:?}: a glob must be relative to the case's cwd and stay inside it")));
                    }
                    if let Err(e) = glob::Pattern::new(g) {
                        return Err(err("artifacts", format!("{g:?} is not a valid glob: {e}")));
                    }
                }
                list
            }
        };
        let mask_names = match get("masks").map(|v| v.get_ref()) {
            None => default_masks.clone(),
            Some(v) => string_list(v)
                .ok_or_else(|| err("masks", "expected an array of mask names".into()))?,
        };
        let masks = all_masks.subset(&mask_names).map_err(|unknown| {
            err(
                "masks",
                format!("unknown mask `{unknown}` (known: {})", known()),
            )
        })?;
        let overrides: BTreeMap<&str, &Spanned<Value>> = table
            .get_ref()
            .iter()
            .filter(|(k, _)| SEAL_KEYS.contains(&k.get_ref().as_str()))
            .map(|(k, v)| (k.get_ref().as_str(), v))
            .collect();
        let opts = SealOpts {
            quiet,
            ..Default::default()
        };
        let settings = case_layer(loaded, &overrides)
            .and_then(|layer| config::resolve_with(&opts, env, Some(loaded), Some(&layer)))
            .map_err(|e| match e {
                ConfigError::Invalid {
                    origin,
                    key,
                    value,
                    why,
                } => ConfigError::Invalid {
                    origin: format!("{origin}: case `{name}`"),
                    key,
                    value,
                    why,
                },
                ConfigError::File { file, line, msg } => {
                    config_error(&format!("{file}:{line}"), &name, "", msg)
                }
                other => other,
            })?;
        let timeout = match get("timeout").map(|v| v.get_ref()) {
            None => default_timeout,
            Some(v) => Some(parse_timeout(v).map_err(|m| err("timeout", m))?),
        };
        cases.push(Case {
            name,
            argv,
            cwd_rel,
            cwd,
            stdin,
            env: env_pairs,
            artifacts,
            mask_names,
            masks,
            settings,
            timeout,
            origins,
        });
    }
    Ok(Suite {
        cases,
        dir,
        config_path: loaded.path.clone(),
    })
}

/// The case's own `[seal]` keys as a settings layer above `[seal]` (no re-read of the file:
/// the values keep their spans in it, so errors point at the case's lines).
fn case_layer(
    loaded: &LoadedFile,
    overrides: &BTreeMap<&str, &Spanned<Value>>,
) -> Result<SealSection, ConfigError> {
    let wrong = |key: &str, v: &Spanned<Value>, want: &str| ConfigError::File {
        file: loaded.path.display().to_string(),
        line: config::line_of(&loaded.text, v.span().start),
        msg: format!("`{key}`: expected {want}, found {}", type_name(v.get_ref())),
    };
    let text = |key: &str, v: &Spanned<Value>| -> Result<Spanned<String>, ConfigError> {
        match v.get_ref() {
            Value::String(s) => Ok(Spanned::new(v.span(), s.clone())),
            _ => Err(wrong(key, v, "a string")),
        }
    };
    let mut sec = SealSection::default();
    for (&key, &v) in overrides {
        match key {
            "epoch" => sec.epoch = Some(v.clone()),
            "seed" => sec.seed = Some(v.clone()),
            "tick" => sec.tick = Some(v.clone()),
            "hash_seed" => sec.hash_seed = Some(v.clone()),
            "tz" => sec.tz = Some(text(key, v)?),
            "locale" => sec.locale = Some(text(key, v)?),
            "hostname" => sec.hostname = Some(text(key, v)?),
            "warp" => match v.get_ref() {
                Value::Boolean(b) => sec.warp = Some(Spanned::new(v.span(), *b)),
                _ => return Err(wrong(key, v, "true or false")),
            },
            "unseal" => match string_list(v.get_ref()) {
                Some(list) => sec.unseal = Some(Spanned::new(v.span(), list)),
                None => return Err(wrong(key, v, "an array of family names")),
            },
            _ => unreachable!("SEAL_KEYS"),
        }
    }
    Ok(sec)
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
        let e = err_of("[[case]]\nname = 'a'\ncmd = ['x']\nmasks = ['nope']\n");
        assert!(
            e.contains("seal.toml:4")
                && e.contains("case `a`")
                && e.contains("`masks`")
                && e.contains("nope"),
            "{e}"
        );
        let e = err_of("[[case]]\nname = 'a'\ncmd = ['x']\n[[case]]\nname = 'a'\ncmd = ['y']\n");
        assert!(
            e.contains("seal.toml:5") && e.contains("duplicate") && e.contains("seal.toml:2"),
            "{e}"
        );
        let e = err_of("[[case]]\nname = 'a'\n\n[[case]]\nname = 'b'\ncwd = '.'\n");
        assert!(
            e.contains("case `a`") && e.contains("`cmd`") && e.contains("missing"),
            "{e}"
        );
        let e = err_of("[[case]]\nname = 'a'\ncmd = 'x'\nseed = 'many'\n");
        assert!(
            e.contains("seal.toml:4") && e.contains("case `a`") && e.contains("`seed`"),
            "{e}"
        );
        let e = err_of("[[case]]\nname = 'a'\ncmd = 'x'\nretries = 3\n");
        assert!(e.contains("`retries`") && e.contains("unknown key"), "{e}");
        let e = err_of("[[case]]\nname = 'a'\ncmd = 'x'\ntimeout = 0\n");
        assert!(e.contains("seal.toml:4") && e.contains("`timeout`"), "{e}");
        let e = err_of("[golden]\ntimeout = 'later'\n");
        assert!(e.contains("seal.toml:2") && e.contains("timeout"), "{e}");
        let e = err_of("[[case]]\nname = 'a/b'\ncmd = 'x'\n");
        assert!(e.contains("not a valid case name"), "{e}");
        let e = err_of("[[case]]\nname = 'a'\ncmd = 'x'\nartifacts = ['../up']\n");
        assert!(e.contains("`artifacts`"), "{e}");
        let e = err_of("[golden]\nfolder = 'x'\n");
        assert!(e.contains("seal.toml:2") && e.contains("folder"), "{e}");
        let e = err_of("[patterns]\nbad = '('\n");
        assert!(e.contains("seal.toml:2") && e.contains("`bad`"), "{e}");
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
