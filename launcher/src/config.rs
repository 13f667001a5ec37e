//! One validated configuration from three sources: command-line flags > `SEAL_*` environment
//! variables > `seal.toml` (this directory or the nearest parent that has one) > defaults.
//!
//! Only [`Settings`] reaches the code that runs things. Every bad value is a [`ConfigError`]
//! that names the key and where it came from (flag, variable, or file and line): exit 2.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::cli::SealOpts;

/// The defaults are the contract's: 2026-01-01T00:00:00Z forever, one microsecond a read.
pub use seal_abi::settings::{DEFAULT_EPOCH_NS, DEFAULT_TICK_NS};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{origin}: invalid value {value:?} for `{key}`: {why}")]
    Invalid {
        origin: String,
        key: String,
        value: String,
        why: String,
    },
    #[error("{file}:{line}: {msg}")]
    File {
        file: String,
        line: usize,
        msg: String,
    },
    #[error("{file}: {msg}")]
    Io { file: String, msg: String },
}

impl ConfigError {
    fn invalid(origin: &str, key: &str, value: &str, why: impl Into<String>) -> Self {
        ConfigError::Invalid {
            origin: origin.into(),
            key: key.into(),
            value: value.into(),
            why: why.into(),
        }
    }
}

/// The fully resolved seal settings of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub epoch_ns: i64,
    /// The epoch as written when it was relative to the launch time (`now+2d`): resolved once
    /// into `epoch_ns`, and said on stderr so the run can be repeated.
    pub epoch_relative: Option<String>,
    pub seed: u64,
    pub tick_ns: i64,
    pub warp: bool,
    /// `--rate` in parts per million; 0: deterministic ticks (the default).
    pub rate_ppm: u64,
    pub tz: String,
    pub locale: String,
    pub hash_seed: u32,
    pub hostname: String,
    /// Families left unsealed, validated names from `seal_abi::settings::FAMILIES`.
    pub unseal: Vec<String>,
    /// `--only` globs: seal only the programs that match (empty: all).
    pub only: Vec<String>,
    /// `--skip` globs: do not seal the programs that match.
    pub skip: Vec<String>,
    pub quiet: bool,
    /// `[env]` of seal.toml: extra variables for the command.
    pub env: BTreeMap<String, String>,
    /// `--private-tmp` / `--no-private-tmp` (or `SEAL_PRIVATE_TMP`): an empty `/tmp` and
    /// `/var/tmp` of the run's own. `None`: the command's default (off for `seal run` and
    /// `census`, on for `verify`, `probe` and `golden`).
    pub private_tmp: Option<bool>,
}

impl Settings {
    pub fn unsealed(&self, family: &str) -> bool {
        self.unseal.iter().any(|f| f == family)
    }

    /// The flags word handed to the shim.
    pub fn shim_flags(&self) -> u32 {
        use seal_abi::flags::*;
        let mut f = seal_abi::settings::shim_flags(|name| self.unsealed(name));
        if self.warp {
            f |= WARP;
        }
        if self.quiet {
            f |= QUIET;
        }
        f
    }
}

/// `seal.toml`, as written. Unknown keys are errors (a typo must not silently unseal).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub seal: SealSection,
    #[serde(default)]
    pub env: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub patterns: BTreeMap<String, Spanned<String>>,
    /// `[[case]]` tables of the golden suite, validated by `golden::case`.
    #[serde(default)]
    pub case: Vec<Spanned<SpannedTable>>,
    /// `[golden]` options of the golden suite (e.g. `dir`).
    #[serde(default)]
    pub golden: Option<Spanned<SpannedTable>>,
}

/// A TOML table with the position of every key and value in the file.
pub type SpannedTable = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SealSection {
    pub epoch: Option<Spanned<toml::Value>>,
    pub tick: Option<Spanned<toml::Value>>,
    pub seed: Option<Spanned<toml::Value>>,
    pub tz: Option<Spanned<String>>,
    pub locale: Option<Spanned<String>>,
    pub hash_seed: Option<Spanned<toml::Value>>,
    pub hostname: Option<Spanned<String>>,
    pub warp: Option<Spanned<bool>>,
    pub rate: Option<Spanned<toml::Value>>,
    pub unseal: Option<Spanned<Vec<String>>>,
    pub only: Option<Spanned<Vec<String>>>,
    pub skip: Option<Spanned<Vec<String>>>,
}

/// A loaded `seal.toml` with what is needed to point at a line in it.
#[derive(Debug)]
pub struct LoadedFile {
    pub path: PathBuf,
    pub text: String,
    pub file: ConfigFile,
}

impl LoadedFile {
    /// `path:line` of a byte offset.
    pub fn origin(&self, offset: usize) -> String {
        format!("{}:{}", self.path.display(), line_of(&self.text, offset))
    }
}

pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

/// Finds `seal.toml` in `start` or its nearest parent that has one.
pub fn find_config(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|d| d.join("seal.toml"))
        .find(|p| p.is_file())
}

pub fn load_file(path: &Path) -> Result<LoadedFile, ConfigError> {
    let text = read_regular_file(path).map_err(|e| ConfigError::Io {
        file: path.display().to_string(),
        msg: e.to_string(),
    })?;
    parse_config(path, text)
}

/// The text of a seal.toml read from `path`, parsed (no settings validated yet).
pub fn parse_config(path: &Path, text: String) -> Result<LoadedFile, ConfigError> {
    let file: ConfigFile = toml::from_str(&text).map_err(|e| {
        let line = e.span().map(|s| line_of(&text, s.start)).unwrap_or(1);
        ConfigError::File {
            file: path.display().to_string(),
            line,
            // One line: toml's messages can span several ("invalid array\nexpected `]`").
            msg: e.message().split_whitespace().collect::<Vec<_>>().join(" "),
        }
    })?;
    Ok(LoadedFile {
        path: path.to_path_buf(),
        text,
        file,
    })
}

/// The text of a regular file (a symlink to one is fine). Anything else is refused before a
/// byte is read: `/dev/zero` would never end and a FIFO would block until a writer came.
/// Opened with O_NONBLOCK so that opening a FIFO does not wait either, then checked with
/// fstat on the open descriptor (no window between the check and the read).
pub fn read_regular_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "is a directory"
        } else {
            "is not a regular file"
        };
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, what));
    }
    let mut text = String::new();
    f.read_to_string(&mut text)?;
    Ok(text)
}

/// The config file named by `--config`, else the nearest `seal.toml`, else none.
pub fn load_config(explicit: Option<&Path>) -> Result<Option<LoadedFile>, ConfigError> {
    match explicit {
        Some(p) => load_file(p).map(Some),
        None => {
            let cwd = std::env::current_dir().map_err(|e| ConfigError::Io {
                file: ".".into(),
                msg: e.to_string(),
            })?;
            find_config(&cwd).map(|p| load_file(&p)).transpose()
        }
    }
}

/// A source of environment variables (the process environment in production, a map in tests).
pub trait EnvSource {
    /// The value of `key`, `None` when unset or empty.
    fn var(&self, key: &str) -> Option<String>;
    /// The value of `key` (lossily decoded) when it is set to something that is not UTF-8:
    /// an error, never a silent default (a `SEAL_SEED` that cannot be read is not seed 0).
    fn not_utf8(&self, _key: &str) -> Option<String> {
        None
    }
}

pub struct ProcessEnv;

impl EnvSource for ProcessEnv {
    fn var(&self, key: &str) -> Option<String> {
        std::env::var(key).ok().filter(|v| !v.is_empty())
    }
    fn not_utf8(&self, key: &str) -> Option<String> {
        match std::env::var(key) {
            Err(std::env::VarError::NotUnicode(v)) => Some(v.to_string_lossy().into_owned()),
            _ => None,
        }
    }
}

/// Every variable the settings are read from: each is checked for UTF-8 before any is used.
pub const SETTING_VARS: [&str; 13] = [
    "SEAL_EPOCH",
    "SEAL_SEED",
    "SEAL_TICK",
    "SEAL_WARP",
    "SEAL_TZ",
    "SEAL_LOCALE",
    "SEAL_HOSTNAME",
    "SEAL_HASH_SEED",
    "SEAL_UNSEAL",
    "SEAL_QUIET",
    "SEAL_ONLY",
    "SEAL_SKIP",
    "SOURCE_DATE_EPOCH",
];

impl EnvSource for BTreeMap<String, String> {
    fn var(&self, key: &str) -> Option<String> {
        self.get(key).cloned()
    }
}

fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A raw value of a setting in seal.toml and its byte offset there.
type InFile = Option<(String, usize)>;

fn spanned_val(s: &Option<Spanned<toml::Value>>) -> InFile {
    s.as_ref()
        .map(|v| (value_text(v.get_ref()), v.span().start))
}

fn spanned_str(s: &Option<Spanned<String>>) -> InFile {
    s.as_ref().map(|v| (v.get_ref().clone(), v.span().start))
}

/// Where settings come from, highest precedence first: flags, `SEAL_*` variables, then the
/// `[seal]`-shaped layers of seal.toml (a golden case's own keys above `[seal]`), then defaults.
struct Sources<'a> {
    opts: &'a SealOpts,
    env: &'a dyn EnvSource,
    file: Option<&'a LoadedFile>,
    /// Layers of `file`, highest first.
    layers: Vec<&'a SealSection>,
}

impl Sources<'_> {
    /// The highest-precedence raw value of a setting, and where it came from.
    fn pick(
        &self,
        flag: &Option<String>,
        key: &str,
        var: &str,
        in_file: impl Fn(&SealSection) -> InFile,
    ) -> Option<(String, String)> {
        if let Some(v) = flag {
            return Some((v.clone(), format!("--{}", key.replace('_', "-"))));
        }
        if let Some(v) = self.env.var(var) {
            return Some((v, format!("environment variable {var}")));
        }
        let (v, off) = self.layers.iter().find_map(|l| in_file(l))?;
        Some((v, self.file?.origin(off)))
    }

    /// [`Sources::pick`], parsed: a bad value names the key and its origin.
    fn parsed<T>(
        &self,
        flag: &Option<String>,
        key: &str,
        var: &str,
        in_file: impl Fn(&SealSection) -> InFile,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, ConfigError> {
        self.pick(flag, key, var, in_file)
            .map(|(v, origin)| parse(&v).map_err(|why| ConfigError::invalid(&origin, key, &v, why)))
            .transpose()
    }

    /// A one-line text setting (time zone, locale, host name).
    fn text(
        &self,
        flag: &Option<String>,
        key: &str,
        var: &str,
        in_file: impl Fn(&SealSection) -> &Option<Spanned<String>>,
        default: &str,
    ) -> Result<String, ConfigError> {
        let one_line = |v: &str| {
            if v.is_empty() || v.contains('\0') || v.contains('\n') {
                Err("must be a non-empty single line".to_string())
            } else if key == "hostname" && v.len() > 64 {
                Err("at most 64 bytes".to_string())
            } else {
                Ok(v.to_string())
            }
        };
        let v = self.parsed(flag, key, var, |s| spanned_str(in_file(s)), one_line)?;
        Ok(v.unwrap_or_else(|| default.to_string()))
    }

    /// The epoch as the user wrote it, when it is relative to the real time (`now+2d`).
    fn relative_epoch_text(&self) -> Option<String> {
        let text = self
            .opts
            .epoch
            .clone()
            .or_else(|| self.env.var("SEAL_EPOCH"))
            .or_else(|| {
                let v = self.layers.iter().find_map(|l| l.epoch.as_ref())?;
                Some(value_text(v.get_ref()))
            })?;
        is_relative_epoch(&text).then_some(text)
    }

    fn epoch_ns(&self) -> Result<i64, ConfigError> {
        let epoch = self.parsed(
            &self.opts.epoch,
            "epoch",
            "SEAL_EPOCH",
            |s| spanned_val(&s.epoch),
            parse_epoch,
        )?;
        match (epoch, self.env.var("SOURCE_DATE_EPOCH")) {
            (Some(ns), _) => Ok(ns),
            (None, Some(v)) => parse_epoch(&format!("@{v}")).map_err(|why| {
                ConfigError::invalid("environment variable SOURCE_DATE_EPOCH", "epoch", &v, why)
            }),
            (None, None) => Ok(DEFAULT_EPOCH_NS),
        }
    }

    /// The epoch's raw value and origin, for errors about it (the default when none is set).
    fn epoch_origin(&self) -> (String, String) {
        let given = self.pick(&self.opts.epoch, "epoch", "SEAL_EPOCH", |s| {
            spanned_val(&s.epoch)
        });
        match (given, self.env.var("SOURCE_DATE_EPOCH")) {
            (Some(g), _) => g,
            (None, Some(v)) => (v, "environment variable SOURCE_DATE_EPOCH".into()),
            (None, None) => ("2026-01-01T00:00:00Z".into(), "the default epoch".into()),
        }
    }

    fn warp(&self) -> Result<bool, ConfigError> {
        if self.opts.warp {
            return Ok(true);
        }
        if let Some(w) = self.env_bool("SEAL_WARP", "warp")? {
            return Ok(w);
        }
        Ok(self
            .layers
            .iter()
            .find_map(|l| l.warp.as_ref())
            .is_some_and(|w| *w.get_ref()))
    }

    /// A boolean variable (`1/0`, `true/false`, `yes/no`, `on/off`); anything else is an error.
    fn env_bool(&self, var: &str, key: &str) -> Result<Option<bool>, ConfigError> {
        self.env
            .var(var)
            .map(|v| {
                parse_bool(&v).ok_or_else(|| {
                    let origin = format!("environment variable {var}");
                    let why = "expected 1/0, true/false, yes/no or on/off";
                    ConfigError::invalid(&origin, key, &v, why)
                })
            })
            .transpose()
    }

    /// `--only` or `--skip` globs (`which`): flags, else `SEAL_ONLY`/`SEAL_SKIP` (comma
    /// separated), else seal.toml's `only`/`skip`.
    fn scope(&self, which: &str) -> Result<Vec<String>, ConfigError> {
        let flags = if which == "only" {
            &self.opts.only
        } else {
            &self.opts.skip
        };
        let var = format!("SEAL_{}", which.to_uppercase());
        let (raw, origin): (Vec<String>, String) = if !flags.is_empty() {
            (flags.clone(), format!("--{which}"))
        } else if let Some(v) = self.env.var(&var) {
            let globs = v.split(',').map(|s| s.trim().to_string());
            (
                globs.filter(|s| !s.is_empty()).collect(),
                format!("environment variable {var}"),
            )
        } else if let Some(g) = self.layers.iter().find_map(|l| {
            if which == "only" {
                l.only.as_ref()
            } else {
                l.skip.as_ref()
            }
        }) {
            let origin = self.file.map(|f| f.origin(g.span().start));
            (g.get_ref().clone(), origin.unwrap_or_default())
        } else {
            (vec![], String::new())
        };
        for glob in &raw {
            if glob.is_empty() || glob.contains(['\n', '\0']) {
                let why = "a glob must be non-empty and on one line";
                return Err(ConfigError::invalid(&origin, which, glob, why));
            }
        }
        Ok(raw)
    }

    /// The families left unsealed, validated, each once.
    fn unseal(&self) -> Result<Vec<String>, ConfigError> {
        let split = |v: &str| -> Vec<String> {
            v.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        };
        let (raw, origin): (Vec<String>, String) = if !self.opts.unseal.is_empty() {
            let raw = self.opts.unseal.iter().flat_map(|s| s.split(','));
            (
                raw.map(|s| s.trim().to_string()).collect(),
                "--unseal".into(),
            )
        } else if let Some(v) = self.env.var("SEAL_UNSEAL") {
            (split(&v), "environment variable SEAL_UNSEAL".into())
        } else if let Some(u) = self.layers.iter().find_map(|l| l.unseal.as_ref()) {
            let origin = self.file.map(|f| f.origin(u.span().start));
            (u.get_ref().clone(), origin.unwrap_or_default())
        } else {
            (vec![], String::new())
        };
        let mut unseal = Vec::new();
        for fam in raw {
            if seal_abi::settings::family(&fam).is_none() {
                let names: Vec<&str> = seal_abi::settings::FAMILIES
                    .iter()
                    .map(|f| f.name)
                    .collect();
                let why = format!("unknown family; expected one of {}", names.join(", "));
                return Err(ConfigError::invalid(&origin, "unseal", &fam, why));
            }
            if !unseal.contains(&fam) {
                unseal.push(fam);
            }
        }
        Ok(unseal)
    }
}

/// Merges flags, environment and file into [`Settings`].
pub fn resolve(
    opts: &SealOpts,
    env: &dyn EnvSource,
    file: Option<&LoadedFile>,
) -> Result<Settings, ConfigError> {
    resolve_with(opts, env, file, None)
}

/// [`resolve`] with a layer of `file` above its `[seal]`: a golden case's own settings, so that
/// flags > `SEAL_*` > the case > `[seal]` > defaults, and errors point at the case's line.
pub fn resolve_with(
    opts: &SealOpts,
    env: &dyn EnvSource,
    file: Option<&LoadedFile>,
    above: Option<&SealSection>,
) -> Result<Settings, ConfigError> {
    let src = Sources {
        opts,
        env,
        file,
        layers: above
            .into_iter()
            .chain(file.map(|f| &f.file.seal))
            .collect(),
    };
    for var in SETTING_VARS {
        if let Some(lossy) = env.not_utf8(var) {
            let origin = format!("environment variable {var}");
            let key = match var.strip_prefix("SEAL_") {
                Some(k) => k.to_ascii_lowercase(),
                None => "epoch".into(),
            };
            return Err(ConfigError::invalid(
                &origin,
                &key,
                &lossy,
                "not valid UTF-8",
            ));
        }
    }
    // In this order, so that the first bad value reported is the same as ever.
    let epoch_ns = src.epoch_ns()?;
    let seed = src.parsed(
        &opts.seed,
        "seed",
        "SEAL_SEED",
        |s| spanned_val(&s.seed),
        integer::<u64>("expected an unsigned 64-bit integer"),
    )?;
    let tick = src.pick(&opts.tick, "tick", "SEAL_TICK", |s| spanned_val(&s.tick));
    let tick_ns = match &tick {
        Some((v, origin)) => {
            parse_tick(v).map_err(|why| ConfigError::invalid(origin, "tick", v, why))?
        }
        None => DEFAULT_TICK_NS,
    };
    if let Err(why) = clock_fits(epoch_ns, tick_ns) {
        // Blame the tick when one was given, else the epoch (with the default tick).
        return Err(match &tick {
            Some((v, origin)) => ConfigError::invalid(origin, "tick", v, why),
            None => {
                let (v, origin) = src.epoch_origin();
                ConfigError::invalid(&origin, "epoch", &v, why)
            }
        });
    }
    let warp = src.warp()?;
    let rate_ppm = src
        .parsed(
            &opts.rate,
            "rate",
            "SEAL_RATE",
            |s| spanned_val(&s.rate),
            parse_rate,
        )?
        .unwrap_or(0);
    let tz = src.text(&opts.tz, "tz", "SEAL_TZ", |s| &s.tz, "UTC")?;
    let locale = src.text(
        &opts.locale,
        "locale",
        "SEAL_LOCALE",
        |s| &s.locale,
        "C.UTF-8",
    )?;
    let hostname = src.text(
        &opts.hostname,
        "hostname",
        "SEAL_HOSTNAME",
        |s| &s.hostname,
        "seal",
    )?;
    let hash_seed = src.parsed(
        &opts.hash_seed,
        "hash_seed",
        "SEAL_HASH_SEED",
        |s| spanned_val(&s.hash_seed),
        integer::<u32>("expected an integer 0..=4294967295"),
    )?;
    let unseal = src.unseal()?;
    let quiet = opts.quiet || src.env_bool("SEAL_QUIET", "quiet")? == Some(true);
    let private_tmp = if opts.private_tmp {
        Some(true)
    } else if opts.no_private_tmp {
        Some(false)
    } else {
        src.env_bool("SEAL_PRIVATE_TMP", "private_tmp")?
    };
    let mut vars = BTreeMap::new();
    if let Some(f) = file {
        for (k, v) in &f.file.env {
            let at = || f.origin(v.span().start);
            if let Some(why) = bad_env_name(k) {
                return Err(ConfigError::invalid(&at(), "env", k, why));
            }
            if v.get_ref().contains('\0') {
                return Err(ConfigError::invalid(
                    &at(),
                    "env",
                    k,
                    "the value contains a NUL byte",
                ));
            }
            vars.insert(k.clone(), v.get_ref().clone());
        }
    }
    Ok(Settings {
        epoch_ns,
        epoch_relative: src.relative_epoch_text(),
        seed: seed.unwrap_or(0),
        tick_ns,
        warp,
        rate_ppm,
        tz,
        locale,
        hash_seed: hash_seed.unwrap_or(0),
        hostname,
        unseal,
        only: src.scope("only")?,
        skip: src.scope("skip")?,
        quiet,
        env: vars,
        private_tmp,
    })
}

/// Why a variable may not be set for the command by `[env]` (or a golden case's `env`), if it
/// may not: names the environment cannot hold, and the ones that would break or bypass the
/// seal. `LD_PRELOAD` would replace the shim (every process unsealed); `LD_AUDIT` loads an
/// audit library whose `la_symbind` can rebind the shim's hooks; `SEAL_*` would override
/// seal's own settings behind the flags' backs (`SEAL_SEED` in `[env]` changed the seed of
/// nested runs) and `LIBSEAL_*` are the shim's contract with the launcher. `LD_LIBRARY_PATH`
/// stays allowed: legacy programs need it, and the preloaded shim is loaded by path before
/// any library search, so it cannot displace the seal.
pub fn bad_env_name(key: &str) -> Option<String> {
    if key.is_empty() || key.contains('=') || key.contains('\0') {
        return Some("not a valid variable name".into());
    }
    let why = match key {
        "LD_PRELOAD" => "it would replace seal's shim and leave every process unsealed",
        "LD_AUDIT" => "an audit library can rebind the shim's hooks and bypass the seal",
        _ if key.starts_with("SEAL_") => {
            "SEAL_* variables are seal's own settings: set them in [seal] or with a flag"
        }
        _ if key.starts_with(seal_abi::settings::PREFIX) => {
            "LIBSEAL_* variables are how seal configures its shim"
        }
        _ => return None,
    };
    Some(format!("cannot be set for the command: {why}"))
}

/// How many clock reads from the epoch must stay representable: 2^32 reads in one thread,
/// each advancing the clock by one tick (~70 minutes of reads at 1 µs of real time each; far
/// more than any run makes). With the default epoch (2026) that allows ticks up to ~1.7 s.
pub const MIN_READS: i128 = 1 << 32;

/// Whether the sealed clock, starting at `epoch_ns` and advancing `tick_ns` per read, can take
/// [`MIN_READS`] reads without leaving signed 64-bit nanoseconds (year 2262).
pub fn clock_fits(epoch_ns: i64, tick_ns: i64) -> Result<(), String> {
    let end = epoch_ns as i128 + tick_ns as i128 * MIN_READS;
    if end <= i64::MAX as i128 {
        return Ok(());
    }
    let max_tick = (i64::MAX as i128 - epoch_ns as i128).max(0) / MIN_READS;
    Err(format!(
        "2^32 clock reads from the epoch would pass 2262-04-11, the end of 64-bit nanoseconds; \
         with this epoch the tick can be at most {max_tick}ns"
    ))
}

/// A parser of integers of type `T` that says `why` when a value is not one.
fn integer<T: std::str::FromStr>(why: &'static str) -> impl Fn(&str) -> Result<T, String> {
    move |v| v.trim().parse::<T>().map_err(|_| why.to_string())
}

fn parse_bool(v: &str) -> Option<bool> {
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
        crate::timectl::parse_span(span)?
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

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
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
        let s = resolve(&SealOpts::default(), &env(&[]), None).unwrap();
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
        let s = resolve(&SealOpts::default(), &env(&[("SEAL_SEED", "2")]), Some(&f)).unwrap();
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
        let s = resolve(
            &SealOpts::default(),
            &env(&[("SOURCE_DATE_EPOCH", "1000")]),
            None,
        )
        .unwrap();
        assert_eq!(s.epoch_ns, 1000 * 1_000_000_000);
    }

    #[test]
    fn bad_values_name_key_and_line() {
        let f = file("[seal]\nseed = 1\nepoch = \"yesterday\"\n");
        let e = resolve(&SealOpts::default(), &env(&[]), Some(&f))
            .unwrap_err()
            .to_string();
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
            let e = resolve(&SealOpts::default(), &env(&[]), Some(&f))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("seal.toml:3:") && e.contains(key), "{e}");
        }
        let f = file("[env]\nLD_LIBRARY_PATH = \"/opt/lib\"\n");
        let s = resolve(&SealOpts::default(), &env(&[]), Some(&f)).unwrap();
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
        let e = resolve(&SealOpts::default(), &env(&[]), Some(&f)).unwrap_err();
        assert!(e.to_string().starts_with("seal.toml:2:"), "{e}");
    }

    #[test]
    fn booleans_and_hostnames_are_checked_where_they_come_from() {
        let e = resolve(
            &SealOpts::default(),
            &env(&[("SEAL_QUIET", "banana")]),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("SEAL_QUIET") && e.contains("banana"), "{e}");
        let s = resolve(&SealOpts::default(), &env(&[("SEAL_QUIET", "yes")]), None).unwrap();
        assert!(s.quiet);
        let f = file(&format!("[seal]\nhostname = \"{}\"\n", "h".repeat(65)));
        let e = resolve(&SealOpts::default(), &env(&[]), Some(&f))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("seal.toml:2:") && e.contains("64 bytes"),
            "{e}"
        );
    }

    #[test]
    fn a_config_that_is_not_a_regular_file_is_refused_at_once() {
        let e = load_file(Path::new("/dev/zero")).unwrap_err().to_string();
        assert_eq!(e, "/dev/zero: is not a regular file");
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
}
