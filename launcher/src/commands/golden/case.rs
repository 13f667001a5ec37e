//! One `[[case]]` table of seal.toml, validated into a [`Case`]: each key read by its own
//! function, every bad value a one-line [`ConfigError`] naming the case, the key and `file:line`.
//! The case's `[seal]` keys become a settings layer above `[seal]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::{Spanned, Value};

use crate::cli::SealOpts;
use crate::config::{
    self, ConfigError, EnvSource, LoadedFile, SealSection, Settings, SpannedTable,
};
use crate::observe::masks::MaskSet;

/// Keys of a case that override `[seal]` for that case only (config::table::SETTINGS).
pub fn seal_keys() -> Vec<&'static str> {
    crate::config::table::case_keys()
}
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
    /// `settings.spin_after` is golden mode's default for a case recorded anew
    /// (`file::GOLDEN_SPIN_AFTER`): `record` checks it against a pass without it.
    pub spin_default: bool,
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

/// What `[patterns]` and `[golden]` give every case.
pub struct Defaults {
    /// Every mask a case may name (built-in and `[patterns]`).
    pub all_masks: MaskSet,
    /// `[golden] masks`.
    pub mask_names: Vec<String>,
    /// `[golden] timeout`.
    pub timeout: Option<Duration>,
}

impl Defaults {
    /// The names of every mask, for an error message.
    pub fn known(&self) -> String {
        let names: Vec<&str> = self
            .all_masks
            .masks
            .iter()
            .map(|m| m.name.as_str())
            .collect();
        names.join(", ")
    }
}

/// The `[[case]]` table being read, with where each key is and the case's name.
struct Table<'a> {
    table: &'a SpannedTable,
    /// `file:line` of each key (and of the case itself under "").
    origins: BTreeMap<String, String>,
    name: String,
}

impl Table<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.table.get(key).map(|v| v.get_ref())
    }

    fn err(&self, key: &str, msg: impl std::fmt::Display) -> ConfigError {
        let origin = self.origins.get(key).unwrap_or(&self.origins[""]);
        config_error(origin, &self.name, key, msg)
    }
}

/// Reads case number `i` (0-based); `seen` holds the names (and origins) of earlier cases.
#[allow(clippy::too_many_arguments)]
pub fn read(
    loaded: &LoadedFile,
    i: usize,
    table: &Spanned<SpannedTable>,
    root: &Path,
    defaults: &Defaults,
    env: &dyn EnvSource,
    quiet: bool,
    seen: &mut BTreeMap<String, String>,
) -> Result<Case, ConfigError> {
    let mut origins: BTreeMap<String, String> = BTreeMap::new();
    origins.insert(String::new(), loaded.origin(table.span().start));
    for (k, v) in table.get_ref() {
        origins.insert(k.get_ref().clone(), loaded.origin(v.span().start));
    }
    // The name first: every later error names the case.
    let mut t = Table {
        table: table.get_ref(),
        origins,
        name: format!("#{}", i + 1),
    };
    t.name = name(&t)?;
    if let Some(first) = seen.get(&t.name) {
        return Err(t.err(
            "name",
            format!("duplicate case name (first defined at {first})"),
        ));
    }
    seen.insert(t.name.clone(), t.origins["name"].clone());
    known_keys(&t)?;
    let argv = command(&t)?;
    let (cwd_rel, cwd) = cwd(&t, root)?;
    let stdin = stdin(&t, &cwd)?;
    let env_pairs = env_vars(&t)?;
    let artifacts = artifacts(&t)?;
    let (mask_names, masks) = masks(&t, defaults)?;
    let settings = settings(&t, loaded, env, quiet)?;
    let timeout = match t.get("timeout") {
        None => defaults.timeout,
        Some(v) => Some(parse_timeout(v).map_err(|m| t.err("timeout", m))?),
    };
    Ok(Case {
        name: t.name,
        argv,
        cwd_rel,
        cwd,
        stdin,
        env: env_pairs,
        artifacts,
        mask_names,
        masks,
        settings,
        spin_default: false,
        timeout,
        origins: t.origins,
    })
}

fn name(t: &Table) -> Result<String, ConfigError> {
    match t.get("name") {
        None => Err(t.err("name", "missing (every case needs a name)")),
        Some(v) => match v.as_str() {
            Some(s) if valid_name(s) => Ok(s.to_string()),
            Some(s) => Err(t.err("name", format!(
                "{s:?} is not a valid case name (letters, digits, `.`, `_`, `-`; it names the golden file)"
            ))),
            None => Err(t.err("name", format!("expected a string, found {}", type_name(v)))),
        },
    }
}

fn known_keys(t: &Table) -> Result<(), ConfigError> {
    for k in t.table.keys() {
        let k = k.get_ref().as_str();
        if !CASE_KEYS.contains(&k) && !seal_keys().contains(&k) {
            return Err(t.err(
                k,
                format!(
                    "unknown key (expected one of {}, or a [seal] setting: {})",
                    CASE_KEYS.join(", "),
                    seal_keys().join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// `cmd`: an array of arguments, or a shell string run as `sh -c STRING`.
fn command(t: &Table) -> Result<Vec<String>, ConfigError> {
    let expected = "expected an array of strings or a shell string";
    let argv = match t.get("cmd") {
        None => {
            return Err(t.err(
                "cmd",
                "missing (the command to run: an array of arguments or a shell string)",
            ))
        }
        Some(Value::String(s)) if !s.trim().is_empty() => {
            vec!["sh".into(), "-c".into(), s.clone()]
        }
        Some(v @ Value::Array(_)) => match string_list(v) {
            Some(a) if !a.is_empty() && !a[0].is_empty() => a,
            Some(_) => return Err(t.err("cmd", "empty command")),
            None => return Err(t.err("cmd", expected)),
        },
        Some(Value::String(_)) => return Err(t.err("cmd", "empty command")),
        Some(v) => return Err(t.err("cmd", format!("{expected}, found {}", type_name(v)))),
    };
    if argv.iter().any(|a| a.contains('\0')) {
        return Err(t.err("cmd", "an argument contains a NUL byte"));
    }
    Ok(argv)
}

/// `cwd` as written and as an absolute directory.
fn cwd(t: &Table, root: &Path) -> Result<(String, PathBuf), ConfigError> {
    let rel = match t.get("cwd") {
        None => ".".to_string(),
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(v) => {
            return Err(t.err(
                "cwd",
                format!(
                    "expected a directory (relative to seal.toml), found {}",
                    type_name(v)
                ),
            ))
        }
    };
    let cwd = root.join(&rel);
    if !cwd.is_dir() {
        return Err(t.err("cwd", format!("{} is not a directory", cwd.display())));
    }
    // A case runs, and has its artifacts removed, inside the suite: never in a directory a
    // `..` or a link leads to (`cwd = "/tmp/v"` with `artifacts = ["*"]` emptied it).
    let (Ok(real), Ok(suite)) = (std::fs::canonicalize(&cwd), std::fs::canonicalize(root)) else {
        return Err(t.err("cwd", format!("cannot resolve {}", cwd.display())));
    };
    if !real.starts_with(&suite) {
        return Err(t.err(
            "cwd",
            format!(
                "{rel:?} is {}, outside the suite's directory {}",
                real.display(),
                suite.display()
            ),
        ));
    }
    Ok((rel, cwd))
}

fn stdin(t: &Table, cwd: &Path) -> Result<Option<PathBuf>, ConfigError> {
    match t.get("stdin") {
        None => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => {
            let p = cwd.join(s);
            if !p.is_file() {
                return Err(t.err(
                    "stdin",
                    format!(
                        "{} is not a file (stdin is relative to the case's cwd)",
                        p.display()
                    ),
                ));
            }
            Ok(Some(p))
        }
        Some(v) => Err(t.err(
            "stdin",
            format!("expected a file name, found {}", type_name(v)),
        )),
    }
}

/// `env`: a table of variables; numbers and booleans are written as text.
fn env_vars(t: &Table) -> Result<Vec<(String, String)>, ConfigError> {
    let table = match t.get("env") {
        None => return Ok(Vec::new()),
        Some(Value::Table(table)) => table,
        Some(v) => {
            return Err(t.err(
                "env",
                format!(
                    "expected a table of NAME = \"value\", found {}",
                    type_name(v)
                ),
            ))
        }
    };
    let mut pairs = Vec::new();
    for (k, v) in table {
        if let Some(why) = crate::config::bad_env_name(k) {
            return Err(t.err("env", format!("{k:?}: {why}")));
        }
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Integer(n) => n.to_string(),
            Value::Float(f) => f.to_string(),
            Value::Boolean(b) => b.to_string(),
            other => {
                return Err(t.err(
                    "env",
                    format!("`{k}`: expected a string, found {}", type_name(other)),
                ))
            }
        };
        if text.contains('\0') {
            return Err(t.err("env", format!("`{k}` contains a NUL byte")));
        }
        pairs.push((k.clone(), text));
    }
    Ok(pairs)
}

fn artifacts(t: &Table) -> Result<Vec<String>, ConfigError> {
    let Some(v) = t.get("artifacts") else {
        return Ok(Vec::new());
    };
    let list = string_list(v).ok_or_else(|| t.err("artifacts", "expected an array of globs"))?;
    for g in &list {
        if g.is_empty() || !stays_inside(g) {
            return Err(t.err(
                "artifacts",
                format!("{g:?}: a glob must be relative to the case's cwd and stay inside it"),
            ));
        }
        if let Err(e) = glob::Pattern::new(g) {
            return Err(t.err("artifacts", format!("{g:?} is not a valid glob: {e}")));
        }
    }
    Ok(list)
}

/// `masks` (else `[golden] masks`): the names and the masks.
fn masks(t: &Table, defaults: &Defaults) -> Result<(Vec<String>, MaskSet), ConfigError> {
    let names = match t.get("masks") {
        None => defaults.mask_names.clone(),
        Some(v) => {
            string_list(v).ok_or_else(|| t.err("masks", "expected an array of mask names"))?
        }
    };
    let masks = defaults.all_masks.subset(&names).map_err(|unknown| {
        t.err(
            "masks",
            format!("unknown mask `{unknown}` (known: {})", defaults.known()),
        )
    })?;
    Ok((names, masks))
}

/// The case's settings: its `[seal]` keys as a layer above `[seal]`.
fn settings(
    t: &Table,
    loaded: &LoadedFile,
    env: &dyn EnvSource,
    quiet: bool,
) -> Result<Settings, ConfigError> {
    let overrides: BTreeMap<&str, &Spanned<Value>> = t
        .table
        .iter()
        .filter(|(k, _)| seal_keys().contains(&k.get_ref().as_str()))
        .map(|(k, v)| (k.get_ref().as_str(), v))
        .collect();
    let opts = SealOpts {
        quiet,
        ..Default::default()
    };
    let name = &t.name;
    case_layer(loaded, &overrides)
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
                config_error(&format!("{file}:{line}"), name, "", msg)
            }
            other => other,
        })
}

/// The case's own `[seal]` keys as a settings layer above `[seal]` (no re-read of the file:
/// the values keep their spans in it, so errors point at the case's lines).
fn case_layer(
    loaded: &LoadedFile,
    overrides: &BTreeMap<&str, &Spanned<Value>>,
) -> Result<SealSection, ConfigError> {
    let mut sec = SealSection::default();
    for (&key, &v) in overrides {
        sec.set(key, v).map_err(|want| ConfigError::File {
            file: loaded.path.display().to_string(),
            line: config::line_of(&loaded.text, v.span().start),
            msg: format!("`{key}`: expected {want}, found {}", type_name(v.get_ref())),
        })?;
    }
    Ok(sec)
}

/// A one-line config error at byte `offset` of seal.toml.
pub fn config_error_at(loaded: &LoadedFile, offset: usize, msg: String) -> ConfigError {
    ConfigError::File {
        file: loaded.path.display().to_string(),
        line: config::line_of(&loaded.text, offset),
        msg,
    }
}

pub fn config_error(
    origin: &str,
    case: &str,
    key: &str,
    msg: impl std::fmt::Display,
) -> ConfigError {
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

pub fn type_name(v: &Value) -> &'static str {
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
pub fn parse_timeout(v: &Value) -> Result<std::time::Duration, String> {
    let d = match v {
        Value::Integer(n) if *n > 0 => std::time::Duration::from_secs(*n as u64),
        Value::Float(f) if *f > 0.0 => std::time::Duration::try_from_secs_f64(*f)
            .map_err(|_| format!("{f:e} seconds is too large a time limit"))?,
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

pub fn string_list(v: &Value) -> Option<Vec<String>> {
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
