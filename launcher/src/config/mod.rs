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

mod resolve;
pub mod table;
#[cfg(test)]
mod tests;
mod values;

pub use resolve::{bad_env_name, resolve, resolve_with, Settings};
#[cfg(test)]
pub use resolve::{clock_fits, MIN_READS};
pub use table::SealSection;
pub use values::*;

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

/// Why a `seal.toml` found by the search (not named with `--config`) may not be used: it, or
/// the directory that holds it, belongs to someone else or can be changed by others. A file
/// another user planted in `/tmp` would otherwise set `[env]` (`BASH_ENV`, `LD_PRELOAD`) or
/// `unseal` for everyone who runs seal below it, as git refuses a repository another user owns
/// (`safe.directory`). Trusted: owned by you or root, not writable by group or others, in a
/// directory owned by you or root that others cannot write (group write is fine for your own
/// group, the sticky bit makes a shared directory fine).
pub fn untrusted_config(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid/getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // `p`'s metadata when you or root own it, else why not (`short`, `long`: how to name it).
    let owned = |p: &Path, short: &str, long: &str| -> Result<std::fs::Metadata, String> {
        let m = std::fs::metadata(p).map_err(|e| format!("cannot inspect {short}: {e}"))?;
        if m.uid() != uid && m.uid() != 0 {
            let owner = user_name(m.uid());
            return Err(format!("{long} is owned by {owner}, not by you or root"));
        }
        Ok(m)
    };
    let others_write =
        |m: &std::fs::Metadata| m.mode() & 0o002 != 0 || (m.mode() & 0o020 != 0 && m.gid() != gid);
    let dir = path.parent().unwrap_or(Path::new("/"));
    let dir_path = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let dir_name = format!("its directory {}", dir_path.display());
    let checked = (|| {
        let file = owned(path, "it", "it")?;
        if others_write(&file) {
            return Err(format!(
                "others can write it (mode {:o})",
                file.mode() & 0o7777
            ));
        }
        let d = owned(dir_path, "its directory", &dir_name)?;
        // The sticky bit makes a directory others can write fine (/tmp).
        if others_write(&d) && d.mode() & 0o1000 == 0 {
            let mode = d.mode() & 0o7777;
            return Err(format!("others can write {dir_name} (mode {mode:o})"));
        }
        Ok(())
    })();
    checked.err()
}

/// `name (uid N)` of a user id, or `uid N` when the name is unknown.
fn user_name(uid: u32) -> String {
    // SAFETY: getpwuid_r writes into the buffers we own; the result points into them.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut buf = [0 as libc::c_char; 1024];
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        if libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) == 0
            && !out.is_null()
            && !pw.pw_name.is_null()
        {
            let name = std::ffi::CStr::from_ptr(pw.pw_name).to_string_lossy();
            return format!("{name} (uid {uid})");
        }
    }
    format!("uid {uid}")
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

/// The text of a regular file (a symlink to one is fine; anything else, or more than
/// `infile::CAP`, is refused before it can hang: `crate::files::infile`).
pub fn read_regular_file(path: &Path) -> std::io::Result<String> {
    crate::files::infile::read_string(path)
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
            let Some(found) = find_config(&cwd) else {
                return Ok(None);
            };
            if let Some(why) = untrusted_config(&found) {
                return Err(ConfigError::Io {
                    file: found.display().to_string(),
                    msg: format!(
                        "refusing to use this seal.toml: {why} (name it with --config FILE to use it anyway)"
                    ),
                });
            }
            load_file(&found).map(Some)
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

impl EnvSource for BTreeMap<String, String> {
    fn var(&self, key: &str) -> Option<String> {
        self.get(key).cloned()
    }
}

pub(crate) fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A raw value of a setting in seal.toml and its byte offset there.
pub(crate) type InFile = Option<(String, usize)>;

pub(crate) fn spanned_val(s: &Option<Spanned<toml::Value>>) -> InFile {
    s.as_ref()
        .map(|v| (value_text(v.get_ref()), v.span().start))
}

pub(crate) fn spanned_str(s: &Option<Spanned<String>>) -> InFile {
    s.as_ref().map(|v| (v.get_ref().clone(), v.span().start))
}
