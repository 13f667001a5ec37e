//! Every user-facing setting, declared once: its `seal.toml` key, its `SEAL_*` variable, its
//! flag, and whether a golden case may set it. The UTF-8 check of the variables, the keys a
//! `[[case]]` accepts, the property tests and the tables in docs/usage.md (checked by a test
//! below) all come from [`SETTINGS`]; parsing each value stays in `resolve.rs`, which finds a
//! setting's variable here by its key ([`var_of`]).

/// One setting a user can give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The `[seal]` key (and a golden case's key); `None` for a setting with no key.
    pub key: Option<&'static str>,
    /// The environment variable.
    pub var: &'static str,
    /// The long flag, with its dashes.
    pub flag: &'static str,
    /// May a `[[case]]` set it for that case?
    pub case: bool,
}

const fn s(key: &'static str, var: &'static str, flag: &'static str, case: bool) -> Setting {
    Setting {
        key: Some(key),
        var,
        flag,
        case,
    }
}

/// Every setting, in the order docs/usage.md lists them.
pub const SETTINGS: &[Setting] = &[
    s("epoch", "SEAL_EPOCH", "--epoch", true),
    s("seed", "SEAL_SEED", "--seed", true),
    s("tick", "SEAL_TICK", "--tick", true),
    s("warp", "SEAL_WARP", "--warp", true),
    s("rate", "SEAL_RATE", "--rate", false),
    s("tz", "SEAL_TZ", "--tz", true),
    s("locale", "SEAL_LOCALE", "--locale", true),
    s("hash_seed", "SEAL_HASH_SEED", "--hash-seed", true),
    s("hostname", "SEAL_HOSTNAME", "--hostname", true),
    s("cpus", "SEAL_CPUS", "--cpus", true),
    s("spin_after", "SEAL_SPIN_AFTER", "--spin-after", true),
    s("unseal", "SEAL_UNSEAL", "--unseal", true),
    s("only", "SEAL_ONLY", "--only", false),
    s("skip", "SEAL_SKIP", "--skip", false),
    Setting {
        key: None,
        var: "SEAL_PRIVATE_TMP",
        flag: "--private-tmp",
        case: false,
    },
    Setting {
        key: None,
        var: "SEAL_QUIET",
        flag: "--quiet",
        case: false,
    },
];

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
        Some(s) => s.flag.trim_start_matches('-').replace('-', "_"),
        None => "epoch".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn usage_md() -> String {
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/usage.md")).unwrap()
    }

    #[test]
    fn names_are_unique_and_regular() {
        for (i, a) in SETTINGS.iter().enumerate() {
            assert!(
                a.var.starts_with("SEAL_") && a.flag.starts_with("--"),
                "{a:?}"
            );
            for b in &SETTINGS[i + 1..] {
                assert!(a.var != b.var && a.flag != b.flag, "{a:?} {b:?}");
                assert!(a.key.is_none() || a.key != b.key, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn every_flag_is_an_option_of_seal_run() {
        let cli = crate::cli::Cli::command();
        let run = cli.find_subcommand("run").expect("seal run");
        let longs: Vec<String> = run
            .get_arguments()
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        for s in SETTINGS {
            assert!(
                longs.contains(&s.flag.to_string()),
                "{} not a flag of run",
                s.flag
            );
        }
    }

    #[test]
    fn docs_usage_lists_every_setting_with_its_key_variable_and_flag() {
        let doc = usage_md();
        for s in SETTINGS {
            // The flag in the first cell of a row (`-q`, `--quiet`; `--only GLOB` / `--skip GLOB`).
            let first_cell = |l: &str| l.split('|').nth(1).unwrap_or("").to_string();
            assert!(
                doc.lines().any(|l| l.starts_with("| ")
                    && first_cell(l).contains(&format!("`{}", s.flag))),
                "docs/usage.md's option table lacks {}",
                s.flag
            );
            if let Some(key) = s.key {
                let row = doc
                    .lines()
                    .find(|l| l.starts_with(&format!("| `{key}` | ")))
                    .unwrap_or_else(|| panic!("docs/usage.md's key table lacks `{key}`"));
                assert!(
                    row.contains(&format!("`{}`", s.var)) && row.contains(&format!("`{}`", s.flag)),
                    "docs/usage.md: the row of `{key}` should name {} and {}: {row}",
                    s.var,
                    s.flag
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

    #[test]
    fn every_family_is_in_the_unseal_help() {
        let mut cli = crate::cli::Cli::command();
        let help = cli
            .find_subcommand_mut("run")
            .unwrap()
            .render_long_help()
            .to_string();
        for f in seal_abi::settings::FAMILIES {
            assert!(
                help.contains(f.name),
                "seal run --help lacks family {}",
                f.name
            );
        }
    }
}
