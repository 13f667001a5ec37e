//! Resolving one [`Settings`] from its layered sources: flags, `SEAL_*` variables, the
//! `[seal]`-shaped layers of seal.toml, defaults; each bad value a [`ConfigError`] naming where
//! it came from.

use super::*;

/// The fully resolved seal settings of one run: each field is found by its parse in
/// [`resolve_with`] below.
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
    /// `--cpus`: the CPU count family `machine` shows.
    pub cpus: u32,
    /// `--spin-after`: clock reads after a wait that leave the clock still.
    pub spin_after: u32,
    /// Whether `spin_after` was given (flag, `SEAL_SPIN_AFTER`, a case, `[seal]`) rather than
    /// the default: a golden case without it takes golden mode's own (`golden::suite`).
    pub spin_after_given: bool,
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
    /// The highest-precedence raw value of a setting (`key`, its variable from the table),
    /// and where it came from.
    fn pick(
        &self,
        flag: &Option<String>,
        key: &str,
        in_file: impl Fn(&SealSection) -> InFile,
    ) -> Option<(String, String)> {
        let var = super::table::var_of(key);
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
        in_file: impl Fn(&SealSection) -> InFile,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, ConfigError> {
        self.pick(flag, key, in_file)
            .map(|(v, origin)| parse(&v).map_err(|why| ConfigError::invalid(&origin, key, &v, why)))
            .transpose()
    }

    /// A one-line text setting (time zone, locale, host name).
    fn text(
        &self,
        flag: &Option<String>,
        key: &str,
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
        let v = self.parsed(flag, key, |s| spanned_str(in_file(s)), one_line)?;
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
        let given = self.pick(&self.opts.epoch, "epoch", |s| spanned_val(&s.epoch));
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

    /// A list setting's raw items and where they came from: `flags` (already split) when
    /// given, else its variable split at commas, else the first file layer that has it.
    fn list(
        &self,
        flags: Vec<String>,
        key: &str,
        in_file: impl Fn(&SealSection) -> Option<&Spanned<Vec<String>>>,
    ) -> (Vec<String>, String) {
        let var = super::table::var_of(key);
        if !flags.is_empty() {
            (flags, format!("--{key}"))
        } else if let Some(v) = self.env.var(var) {
            let items = v.split(',').map(|s| s.trim().to_string());
            (
                items.filter(|s| !s.is_empty()).collect(),
                format!("environment variable {var}"),
            )
        } else if let Some(l) = self.layers.iter().find_map(|l| in_file(l)) {
            let origin = self.file.map(|f| f.origin(l.span().start));
            (l.get_ref().clone(), origin.unwrap_or_default())
        } else {
            (vec![], String::new())
        }
    }

    /// `--only` or `--skip` globs (`which`): flags, else `SEAL_ONLY`/`SEAL_SKIP` (comma
    /// separated), else seal.toml's `only`/`skip`.
    fn scope(&self, which: &str) -> Result<Vec<String>, ConfigError> {
        let (raw, origin) = if which == "only" {
            self.list(self.opts.only.clone(), "only", |l| l.only.as_ref())
        } else {
            self.list(self.opts.skip.clone(), "skip", |l| l.skip.as_ref())
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
        // `--unseal a,b` is two families (an empty one is refused below).
        let flags = self.opts.unseal.iter().flat_map(|s| s.split(','));
        let flags = flags.map(|s| s.trim().to_string()).collect();
        let (raw, origin) = self.list(flags, "unseal", |l| l.unseal.as_ref());
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

/// The setting `$key` parsed by `$parse` from the first source that gives it: its flag, its
/// variable, a layer of seal.toml (its `[seal]` key of the same name).
macro_rules! parsed {
    ($src:ident . $key:ident, $parse:expr) => {
        $src.parsed(
            &$src.opts.$key,
            stringify!($key),
            |s| spanned_val(&s.$key),
            $parse,
        )
    };
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
    for var in super::table::setting_vars() {
        if let Some(lossy) = env.not_utf8(var) {
            let origin = format!("environment variable {var}");
            let key = super::table::key_of_var(var);
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
    let seed = parsed!(
        src.seed,
        integer::<u64>("expected an unsigned 64-bit integer")
    )?;
    let tick = src.pick(&opts.tick, "tick", |s| spanned_val(&s.tick));
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
    let rate_ppm = parsed!(src.rate, parse_rate)?.unwrap_or(0);
    let tz = src.text(&opts.tz, "tz", |s| &s.tz, "UTC")?;
    let locale = src.text(&opts.locale, "locale", |s| &s.locale, "C.UTF-8")?;
    let hostname = src.text(&opts.hostname, "hostname", |s| &s.hostname, "seal")?;
    let hash_seed = parsed!(
        src.hash_seed,
        integer::<u32>("expected an integer 0..=4294967295")
    )?;
    let spin_after = parsed!(
        src.spin_after,
        integer::<u32>("expected a number of clock reads, 0 or more")
    )?;
    let cpus = parsed!(src.cpus, parse_cpus)?;
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
        cpus: cpus.unwrap_or(seal_abi::settings::DEFAULT_CPUS),
        spin_after_given: spin_after.is_some(),
        spin_after: spin_after.unwrap_or(seal_abi::settings::DEFAULT_SPIN_AFTER),
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
