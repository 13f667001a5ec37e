//! Every user-facing setting, declared once in one list of rows (`settings!` below): its flag
//! with clap's attributes and help, its `SEAL_*` variable, its `seal.toml` key and type, and
//! whether a golden case may set it. From the rows come [`SealOpts`] (the flags), the `[seal]`
//! table [`SealSection`], a golden case's layer ([`SealSection::set`]) and [`SETTINGS`], which
//! drives the UTF-8 check of the variables, the keys a `[[case]]` accepts, the property tests
//! and the check of the tables in docs/usage.md (a test below). Parsing each value stays in
//! `resolve.rs`, which finds a setting's variable here by its key ([`var_of`]).

/// One setting a user can give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The `[seal]` key (and a golden case's key); `None` for a setting with no key.
    pub key: Option<&'static str>,
    /// The environment variable.
    pub var: &'static str,
    /// The [`SealOpts`] field: its long flag with `_` as `-`.
    pub name: &'static str,
    /// May a `[[case]]` set it for that case?
    pub case: bool,
}

impl Setting {
    /// The long flag, with its dashes.
    #[cfg(test)]
    pub fn flag(&self) -> String {
        format!("--{}", self.name.replace('_', "-"))
    }
}

/// A `seal.toml` value type of [`SealSection`]: how a golden case's value becomes one.
pub trait FileValue: Sized {
    /// What a value of the wrong type should have been, for the error.
    const WANT: &'static str;
    fn of(v: &toml::Value) -> Option<Self>;
}

impl FileValue for toml::Value {
    const WANT: &'static str = "a value";
    fn of(v: &toml::Value) -> Option<Self> {
        Some(v.clone())
    }
}

impl FileValue for String {
    const WANT: &'static str = "a string";
    fn of(v: &toml::Value) -> Option<Self> {
        v.as_str().map(str::to_string)
    }
}

impl FileValue for bool {
    const WANT: &'static str = "true or false";
    fn of(v: &toml::Value) -> Option<Self> {
        v.as_bool()
    }
}

impl FileValue for Vec<String> {
    /// The one list a case may set is `unseal`.
    const WANT: &'static str = "an array of family names";
    fn of(v: &toml::Value) -> Option<Self> {
        v.as_array()?
            .iter()
            .map(|x| x.as_str().map(str::to_string))
            .collect()
    }
}

/// A [`SealOpts`] field type a test can set from one string.
#[cfg(test)]
pub trait FlagValue {
    fn put(&mut self, v: String);
}

#[cfg(test)]
impl FlagValue for Option<String> {
    fn put(&mut self, v: String) {
        *self = Some(v);
    }
}

#[cfg(test)]
impl FlagValue for Vec<String> {
    fn put(&mut self, v: String) {
        self.push(v);
    }
}

#[cfg(test)]
impl FlagValue for bool {
    fn put(&mut self, _: String) {
        *self = true;
    }
}

/// `--unseal`'s help, listing every family of `seal_abi::settings::FAMILIES`.
fn unseal_help() -> String {
    let names: Vec<&str> = seal_abi::settings::FAMILIES
        .iter()
        .map(|f| f.name)
        .collect();
    format!("Leave a family unsealed (repeatable): {}", names.join(", "))
}

macro_rules! key_of {
    ($opt:ident) => {
        None
    };
    ($opt:ident, $fty:ty) => {
        Some(stringify!($opt))
    };
}

macro_rules! is_case {
    () => {
        false
    };
    (case) => {
        true
    };
}

/// Builds the launcher's side of every setting from the rows of `seal_abi::setting_rows!`
/// (`user { … }`, in the order `seal run --help` shows them; see that macro for the syntax):
/// [`SealOpts`], [`SealSection`], [`SETTINGS`], a case's layer ([`SealSection::set`]), and the
/// tests' flag setter ([`SealOpts::set`]). The rows' contract part is `run/contract.rs`'s.
macro_rules! settings {
    (
        run_fields $run_fields:tt
        shim_fields $shim_fields:tt
        run $run:tt
        shim $shim:tt
        user { $(
            $(#[doc = $doc:literal])*
            #[arg($($arg:tt)*)]
            $opt:ident: $oty:ty $(=> $var:literal $(, file $fty:ty)? $([$case:ident])?)?;
        )* }
    ) => {
        /// Settings of the seal itself, shared by every command that runs something sealed.
        #[derive(clap::Args, Debug, Clone, Default)]
        pub struct SealOpts {
            $( $(#[doc = $doc])* #[arg($($arg)*)] pub $opt: $oty, )*
        }

        /// `[seal]` of seal.toml (and a golden case's layer above it), as written. Unknown keys
        /// are errors (a typo must not silently unseal).
        #[derive(Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct SealSection {
            $( $( $( pub $opt: Option<toml::Spanned<$fty>>, )? )? )*
        }

        /// Every setting, in the order of `seal run --help`.
        pub const SETTINGS: &[Setting] = &[
            $( $( Setting {
                key: key_of!($opt $(, $fty)?),
                var: $var,
                name: stringify!($opt),
                case: is_case!($($case)?),
            }, )? )*
        ];

        impl SealSection {
            /// Sets `key` (a `[seal]` key) from a golden case's value; `Err` names the type the
            /// value should have had.
            pub fn set(
                &mut self,
                key: &str,
                v: &toml::Spanned<toml::Value>,
            ) -> Result<(), &'static str> {
                $( $( $(
                    if key == stringify!($opt) {
                        let x = <$fty as FileValue>::of(v.get_ref())
                            .ok_or(<$fty as FileValue>::WANT)?;
                        self.$opt = Some(toml::Spanned::new(v.span(), x));
                        return Ok(());
                    }
                )? )? )*
                unreachable!("no key `{key}` in SETTINGS")
            }
        }

        impl SealOpts {
            /// Sets the flag of the setting called `name` to `v` (a switch to on).
            #[cfg(test)]
            pub fn set(&mut self, name: &str, v: String) {
                $( $(
                    if name == stringify!($opt) {
                        let _ = $var;
                        return FlagValue::put(&mut self.$opt, v);
                    }
                )? )*
                panic!("no setting `{name}`")
            }
        }
    };
}

seal_abi::setting_rows!(settings);

/// Every variable the settings are read from, `SOURCE_DATE_EPOCH` (the epoch's default) last:
/// each is checked for UTF-8 before any is used.
pub fn setting_vars() -> impl Iterator<Item = &'static str> {
    SETTINGS.iter().map(|s| s.var).chain(["SOURCE_DATE_EPOCH"])
}

/// The keys of a `[[case]]` that override `[seal]` for that case.
pub fn case_keys() -> Vec<&'static str> {
    SETTINGS
        .iter()
        .filter(|s| s.case)
        .filter_map(|s| s.key)
        .collect()
}

/// The `SEAL_*` variable of the setting with this `[seal]` key.
pub fn var_of(key: &str) -> &'static str {
    SETTINGS
        .iter()
        .find(|s| s.key == Some(key))
        .map(|s| s.var)
        .unwrap_or_else(|| panic!("no setting `{key}` in SETTINGS"))
}

/// The setting a variable belongs to, as a `[seal]` key (for error messages).
pub fn key_of_var(var: &str) -> String {
    match SETTINGS.iter().find(|s| s.var == var) {
        Some(Setting { key: Some(k), .. }) => (*k).to_string(),
        Some(s) => s.name.to_string(),
        None => "epoch".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage_md() -> String {
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/usage.md")).unwrap()
    }

    #[test]
    fn names_are_unique_and_regular() {
        for (i, a) in SETTINGS.iter().enumerate() {
            assert!(
                a.var.starts_with("SEAL_") && a.flag().starts_with("--"),
                "{a:?}"
            );
            for b in &SETTINGS[i + 1..] {
                assert!(a.var != b.var && a.name != b.name, "{a:?} {b:?}");
                assert!(a.key.is_none() || a.key != b.key, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn docs_usage_lists_every_setting_with_its_key_variable_and_flag() {
        let doc = usage_md();
        for s in SETTINGS {
            // The flag in the first cell of a row (`-q`, `--quiet`; `--only GLOB` / `--skip GLOB`).
            let first_cell = |l: &str| l.split('|').nth(1).unwrap_or("").to_string();
            assert!(
                doc.lines()
                    .any(|l| l.starts_with("| ")
                        && first_cell(l).contains(&format!("`{}", s.flag()))),
                "docs/usage.md's option table lacks {}",
                s.flag()
            );
            if let Some(key) = s.key {
                let row = doc
                    .lines()
                    .find(|l| l.starts_with(&format!("| `{key}` | ")))
                    .unwrap_or_else(|| panic!("docs/usage.md's key table lacks `{key}`"));
                assert!(
                    row.contains(&format!("`{}`", s.var))
                        && row.contains(&format!("`{}`", s.flag())),
                    "docs/usage.md: the row of `{key}` should name {} and {}: {row}",
                    s.var,
                    s.flag()
                );
            }
        }
    }

    #[test]
    fn docs_usage_lists_every_family() {
        let doc = usage_md();
        let row = doc
            .lines()
            .find(|l| l.starts_with("| `--unseal FAMILY`"))
            .expect("docs/usage.md's --unseal row");
        for f in seal_abi::settings::FAMILIES {
            assert!(
                row.contains(&format!("`{}`", f.name)),
                "--unseal row lacks {}",
                f.name
            );
            // A row of the family table whose first cell names it (`hashseed`, `tz`, … share one).
            assert!(
                doc.lines().any(|l| l.starts_with("| `")
                    && l.split('|')
                        .nth(1)
                        .is_some_and(|c| c.contains(&format!("`{}`", f.name)))),
                "docs/usage.md's family table lacks {}",
                f.name
            );
        }
    }
}
