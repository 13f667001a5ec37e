//! Mask patterns: named regexes that collapse a volatile span (a timestamp, a uuid, a temp
//! path) into a `[name]` placeholder. Shared by `probe` (to classify lines) and `golden` (to
//! compare outputs). Built-ins first, then `[patterns]` of seal.toml or `--patterns FILE`.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use regex::Regex;

/// The built-in patterns, in the order they are applied (more specific first).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "iso8601",
        r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?",
    ),
    (
        "uuid",
        r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
    ),
    ("tmppath", r"/(?:tmp|var/tmp|dev/shm)/[A-Za-z0-9._/-]+"),
    ("hexaddr", r"\b0x[0-9a-fA-F]{6,16}\b"),
    (
        "duration",
        r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds|min)\b",
    ),
];

#[derive(Debug, Clone)]
pub struct Mask {
    pub name: String,
    pub regex: Regex,
}

/// An ordered set of masks.
#[derive(Debug, Clone)]
pub struct MaskSet {
    pub masks: Vec<Mask>,
}

impl MaskSet {
    /// The built-ins plus `extra` (`name -> regex`); an extra name replaces a built-in.
    pub fn new(extra: &BTreeMap<String, String>) -> Result<MaskSet> {
        let mut masks: Vec<Mask> = BUILTIN
            .iter()
            .filter(|(n, _)| !extra.contains_key(*n))
            .map(|(n, r)| Mask {
                name: n.to_string(),
                regex: Regex::new(r).expect("built-in pattern"),
            })
            .collect();
        for (name, re) in extra {
            let regex =
                Regex::new(re).with_context(|| format!("pattern `{name}` is not a valid regex"))?;
            masks.push(Mask {
                name: name.clone(),
                regex,
            });
        }
        Ok(MaskSet { masks })
    }

    /// The built-in patterns only (golden's default; the tests).
    #[allow(dead_code)]
    pub fn builtin() -> MaskSet {
        MaskSet::new(&BTreeMap::new()).unwrap()
    }

    pub fn get(&self, name: &str) -> Option<&Mask> {
        self.masks.iter().find(|m| m.name == name)
    }

    /// Only the named masks (in this set's order); `Err(name)` for an unknown one.
    pub fn subset(&self, names: &[String]) -> std::result::Result<MaskSet, String> {
        for n in names {
            if self.get(n).is_none() {
                return Err(n.clone());
            }
        }
        Ok(MaskSet {
            masks: self
                .masks
                .iter()
                .filter(|m| names.contains(&m.name))
                .cloned()
                .collect(),
        })
    }

    /// Replaces every match of every mask by `[name]`; returns the masked text and the names
    /// of the masks that matched (in order, without repeats).
    pub fn apply(&self, text: &str) -> (String, Vec<String>) {
        let mut out = text.to_string();
        let mut used = Vec::new();
        for m in &self.masks {
            if m.regex.is_match(&out) {
                let placeholder = format!("[{}]", m.name);
                out = m
                    .regex
                    .replace_all(&out, regex::NoExpand(&placeholder))
                    .into_owned();
                used.push(m.name.clone());
            }
        }
        (out, used)
    }
}

/// Reads a patterns file: a TOML table of `name = "regex"`.
pub fn load_patterns_file(path: &std::path::Path) -> Result<BTreeMap<String, String>> {
    let text = crate::files::infile::read_string(path).map_err(|e| {
        crate::usage::UsageError(format!("--patterns {}: cannot read: {e}", path.display()))
    })?;
    let table: BTreeMap<String, String> = toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            .map(|s| crate::config::line_of(&text, s.start))
            .unwrap_or(1);
        crate::config::ConfigError::File {
            file: path.display().to_string(),
            line,
            msg: e.message().trim().to_string(),
        }
    })?;
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_mask_common_shapes() {
        let m = MaskSet::builtin();
        let (s, used) = m.apply("at 2026-11-30T04:15:00.123Z id 0b6e1a2c-1f0e-4a4e-9f43-3d2b7c1a9e10 in /tmp/tmp.Ab12 took 12ms obj 0x7f12ab34cd56");
        assert_eq!(
            s,
            "at [iso8601] id [uuid] in [tmppath] took [duration] obj [hexaddr]"
        );
        assert_eq!(used, ["iso8601", "uuid", "tmppath", "hexaddr", "duration"]);
    }

    #[test]
    fn extra_patterns_and_subsets() {
        let mut extra = BTreeMap::new();
        extra.insert("req".to_string(), r"req-\d+".to_string());
        let m = MaskSet::new(&extra).unwrap();
        assert_eq!(m.apply("req-42 ok").0, "[req] ok");
        assert!(m.subset(&["nope".into()]).is_err());
        assert_eq!(m.subset(&["req".into()]).unwrap().masks.len(), 1);
        extra.insert("bad".to_string(), "(".to_string());
        assert!(MaskSet::new(&extra).is_err());
    }
}
