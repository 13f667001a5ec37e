//! The perturbations `seal probe` runs a command under (after Debian's reprotest: time zone,
//! hash seed, locale, umask, HOME, host name, build path; and the size of the environment and
//! the depth of the working directory, which move stack addresses) and the two ways to run it: unsealed
//! (spawned directly) or sealed (`run::run_captured`). Every run gets a fresh copy of the
//! working tree in its own temporary directory, so runs never see each other's files and the
//! path of the tree differs between runs (reprotest's build-path perturbation), unless the
//! tree is past the copy bounds ([`Tree`]): then the runs share it.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use anyhow::Result;

use crate::config::Settings;
use crate::observe::Observation;
use crate::run::{self, Input};

use super::tree::{Sandbox, Tree};

/// One way of changing the environment a command runs in.
#[derive(Debug, Clone)]
pub struct Perturbation {
    pub name: &'static str,
    pub what: &'static str,
    pub env: Vec<(&'static str, &'static str)>,
    pub umask: Option<u32>,
    /// HOME points at a fresh empty directory.
    pub fresh_home: bool,
    /// Host name set in a private UTS namespace (user namespaces permitting).
    pub hostname: Option<&'static str>,
    /// Extra bytes of environment (an unrelated variable `PROBE_PADDING`).
    pub env_bytes: usize,
    /// The working tree is copied this many directory levels deeper.
    pub cwd_depth: usize,
    /// The working tree is copied into one directory this many characters longer (a
    /// checkout at a longer path, same depth).
    pub path_extra: usize,
    /// What a line that varies under this perturbation (and no other) depends on, for the
    /// report (`LineReport::causes`); `None` where the name says it.
    pub cause: Option<&'static str>,
}

impl Perturbation {
    /// A perturbation that only sets `env` (none: the environment as it is).
    pub fn env_only(
        name: &'static str,
        what: &'static str,
        env: &[(&'static str, &'static str)],
    ) -> Perturbation {
        Perturbation {
            name,
            what,
            env: env.to_vec(),
            umask: None,
            fresh_home: false,
            hostname: None,
            env_bytes: 0,
            cwd_depth: 0,
            path_extra: 0,
            cause: None,
        }
    }
}

/// The unrelated variable the `env-size` perturbation (and `layout` attribution) adds.
pub const PADDING_VAR: &str = "PROBE_PADDING";

/// The perturbations, baseline first.
pub fn all() -> Vec<Perturbation> {
    let p = Perturbation::env_only;
    vec![
        p("baseline", "the environment as it is", &[]),
        p(
            "tz-far",
            "TZ=Pacific/Kiritimati (UTC+14)",
            &[("TZ", "Pacific/Kiritimati")],
        ),
        p("hashseed-0", "PYTHONHASHSEED=0", &[("PYTHONHASHSEED", "0")]),
        p(
            "hashseed-4242",
            "PYTHONHASHSEED=4242",
            &[("PYTHONHASHSEED", "4242")],
        ),
        p(
            "c-locale",
            "LC_ALL=C LANG=C TZ=UTC",
            &[("LC_ALL", "C"), ("LANG", "C"), ("TZ", "UTC")],
        ),
        Perturbation {
            umask: Some(0o002),
            ..p("umask", "umask 0002 (reprotest)", &[])
        },
        Perturbation {
            fresh_home: true,
            // A program that prints HOME or reads its files shows it; one that only copies it
            // to the heap (Perl's %ENV, Ruby's rubygems paths) prints addresses that move.
            cause: Some("HOME (its path or files, or heap layout)"),
            ..p("home", "HOME set to a fresh empty directory", &[])
        },
        Perturbation {
            hostname: Some("seal-probe-host"),
            ..p(
                "hostname",
                "host name seal-probe-host (private UTS namespace)",
                &[],
            )
        },
        Perturbation {
            env_bytes: 3000,
            cause: Some("environment size (heap layout)"),
            ..p(
                "env-size",
                "3000 more bytes of environment (PROBE_PADDING=...)",
                &[],
            )
        },
        Perturbation {
            cwd_depth: 12,
            ..p(
                "cwd-depth",
                "working directory 12 levels deeper (a longer path)",
                &[],
            )
        },
        Perturbation {
            path_extra: 100,
            cause: Some("the checkout path"),
            ..p(
                "checkout-path",
                "the working tree copied to a path 100 characters longer, same depth",
                &[],
            )
        },
    ]
}

/// Runs `argv` unsealed under `p` in a fresh copy of `tree` (or in it, when shared).
/// `Ok(Err(why))` when the command could not be started (or the perturbation is not possible
/// here).
pub fn run_unsealed(
    argv: &[OsString],
    tree: &Tree,
    p: &Perturbation,
) -> Result<std::result::Result<Observation, String>> {
    let sandbox = match sandbox_for(tree, p)? {
        Ok(s) => s,
        Err(why) => return Ok(Err(why)),
    };
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(sandbox.work())
        .stdin(Stdio::null());
    for (k, v) in &p.env {
        cmd.env(k, v);
    }
    if p.env_bytes > 0 {
        cmd.env(PADDING_VAR, "x".repeat(p.env_bytes));
    }
    if p.fresh_home {
        cmd.env("HOME", sandbox.home());
    }
    if let Some(mask) = p.umask {
        // SAFETY: umask is async-signal-safe and only affects the child.
        unsafe {
            cmd.pre_exec(move || {
                libc::umask(mask as libc::mode_t);
                Ok(())
            });
        }
    }
    if let Some(name) = p.hostname {
        let uts = UtsSetup::new(name);
        // SAFETY: UtsSetup::enter only makes raw syscalls on buffers prepared before fork.
        unsafe {
            cmd.pre_exec(move || uts.enter());
        }
    }
    match crate::run::supervise::Supervised::output(&mut cmd) {
        Ok(o) => Ok(Ok(Observation {
            exit_code: run::status_code(o.status),
            stdout: o.stdout,
            stderr: o.stderr,
            ..Default::default()
        })),
        Err(e) if p.hostname.is_some() && e.kind() != std::io::ErrorKind::NotFound => Ok(Err(
            format!("cannot set a private host name here ({e}); perturbation skipped"),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Err(format!(
            "{}: command not found",
            argv[0].to_string_lossy()
        ))),
        Err(e) => Ok(Err(format!(
            "{}: cannot run: {e}",
            argv[0].to_string_lossy()
        ))),
    }
}

/// Runs `argv` sealed under `p` in a fresh copy of `tree` (or in it). Variables the seal pins (TZ,
/// LC_ALL/LANG, PYTHONHASHSEED) are the seal's unless that family is unsealed, so what differs
/// between runs is what survives the seal. (The host-name perturbation is not applied under
/// seal: the seal pins the host name.)
pub fn run_sealed(
    settings: &Settings,
    argv: &[OsString],
    tree: &Tree,
    p: &Perturbation,
    extra: &[(String, String)],
) -> Result<std::result::Result<Observation, String>> {
    let sandbox = match sandbox_for(tree, p)? {
        Ok(s) => s,
        Err(why) => return Ok(Err(why)),
    };
    let mut env: Vec<(String, String)> = p
        .env
        .iter()
        .filter(|(k, _)| !pinned_by_seal(settings, k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if p.fresh_home {
        env.push(("HOME".into(), sandbox.home().to_string_lossy().into_owned()));
    }
    if p.env_bytes > 0 {
        env.push((PADDING_VAR.into(), "x".repeat(p.env_bytes)));
    }
    env.extend(extra.iter().cloned());
    // umask is inherited: set ours around the spawn (seal probe is single-threaded here).
    // SAFETY: umask has no memory-safety preconditions.
    let old = p.umask.map(|m| unsafe { libc::umask(m as libc::mode_t) });
    let res = run::run_captured(
        settings,
        argv,
        Some(&sandbox.work()),
        &env,
        Input::Null,
        None,
    );
    if let Some(old) = old {
        // SAFETY: as above.
        unsafe { libc::umask(old) };
    }
    Ok(match res? {
        Ok(c) => Ok(Observation::of(c, Default::default())),
        Err(e) => Err(e.to_string()),
    })
}

/// The causes of the perturbations a line varies under (none when it varies in `baseline`:
/// then it varies without any perturbation), in the order of [`all`].
pub fn causes(perturbations: &[Perturbation], varies_under: &[String]) -> Vec<String> {
    if varies_under.iter().any(|v| v == "baseline") {
        return Vec::new();
    }
    perturbations
        .iter()
        .filter(|p| varies_under.iter().any(|v| v == p.name))
        .filter_map(|p| p.cause.map(str::to_string))
        .collect()
}

/// The copy of `tree` a run under `p` gets (a private HOME only, when the runs share the
/// tree); `Ok(Err(why))` when `p` cannot be applied to this tree (one that moves a tree past
/// the bounds: the perturbation is skipped).
fn sandbox_for(tree: &Tree, p: &Perturbation) -> Result<std::result::Result<Sandbox, String>> {
    Ok(Ok(match &tree.too_large {
        None => Sandbox::at(&tree.dir, p.cwd_depth, p.path_extra)?,
        Some(e) if p.cwd_depth > 0 || p.path_extra > 0 => {
            return Ok(Err(format!("{e}; perturbation skipped")))
        }
        Some(_) => Sandbox::shared(&tree.dir)?,
    }))
}

fn pinned_by_seal(settings: &Settings, key: &str) -> bool {
    if settings.unsealed("env") {
        return false;
    }
    match key {
        "TZ" => !settings.unsealed("tz"),
        "LC_ALL" | "LANG" => !settings.unsealed("locale"),
        "PYTHONHASHSEED" | "PERL_HASH_SEED" | "PERL_PERTURB_KEYS" => !settings.unsealed("hashseed"),
        _ => false,
    }
}

/// A private user + UTS namespace with the caller's own uid/gid mapped, and a host name:
/// everything prepared before fork so the child only makes syscalls.
struct UtsSetup {
    hostname: Vec<u8>,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl UtsSetup {
    fn new(hostname: &str) -> UtsSetup {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        UtsSetup {
            hostname: hostname.as_bytes().to_vec(),
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }

    /// Runs in the forked child before exec.
    fn enter(&self) -> std::io::Result<()> {
        // SAFETY: raw syscalls on buffers owned by self, which outlives the call.
        unsafe {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWUTS) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            write_proc(c"/proc/self/uid_map", &self.uid_map)?;
            write_proc(c"/proc/self/setgroups", b"deny")?;
            write_proc(c"/proc/self/gid_map", &self.gid_map)?;
            if libc::sethostname(self.hostname.as_ptr().cast(), self.hostname.len()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// # Safety
/// Only raw syscalls; safe to call between fork and exec.
unsafe fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> std::io::Result<()> {
    // SAFETY: path is NUL-terminated; data is a valid buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        libc::close(fd);
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::probe::tree::{within_bounds, TreeTooLarge, TREE_MAX_BYTES};
    use std::collections::BTreeMap;

    fn settings(unseal: &[&str]) -> Settings {
        let opts = crate::cli::SealOpts {
            unseal: unseal.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        crate::config::resolve(&opts, &BTreeMap::new(), None).unwrap()
    }

    #[test]
    fn the_issue_perturbations_are_there() {
        let all = all();
        assert_eq!(all[0].name, "baseline");
        let env = |name: &str| all.iter().find(|p| p.name == name).unwrap().env.clone();
        assert_eq!(env("tz-far"), [("TZ", "Pacific/Kiritimati")]);
        assert_eq!(env("hashseed-0"), [("PYTHONHASHSEED", "0")]);
        assert_eq!(env("hashseed-4242"), [("PYTHONHASHSEED", "4242")]);
        assert_eq!(
            env("c-locale"),
            [("LC_ALL", "C"), ("LANG", "C"), ("TZ", "UTC")]
        );
        assert!(all.iter().any(|p| p.umask.is_some()));
        assert!(all.iter().any(|p| p.fresh_home));
        assert!(all.iter().any(|p| p.hostname.is_some()));
        assert!(all.iter().any(|p| p.env_bytes > 0));
        assert!(all.iter().any(|p| p.cwd_depth > 0));
        let checkout = all.iter().find(|p| p.name == "checkout-path").unwrap();
        assert_eq!(checkout.cause, Some("the checkout path"));
        assert_eq!(checkout.cwd_depth, 0);
        let env = all.iter().find(|p| p.name == "env-size").unwrap();
        assert_eq!(env.cause, Some("environment size (heap layout)"));
        let home = all.iter().find(|p| p.name == "home").unwrap();
        assert_eq!(home.cause, Some("HOME (its path or files, or heap layout)"));
    }

    #[test]
    fn causes_come_from_the_perturbations_a_line_varies_under() {
        let all = all();
        let v = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            causes(&all, &v(&["cwd-depth", "checkout-path"])),
            ["the checkout path"]
        );
        assert_eq!(
            causes(&all, &v(&["env-size", "checkout-path"])),
            ["environment size (heap layout)", "the checkout path"]
        );
        assert!(causes(&all, &v(&["baseline", "checkout-path"])).is_empty());
        assert!(causes(&all, &v(&["tz-far"])).is_empty());
    }

    #[test]
    fn the_seal_pins_what_it_seals() {
        let s = settings(&[]);
        assert!(pinned_by_seal(&s, "TZ") && pinned_by_seal(&s, "LC_ALL"));
        assert!(pinned_by_seal(&s, "PYTHONHASHSEED") && !pinned_by_seal(&s, "HOME"));
        let s = settings(&["tz"]);
        assert!(!pinned_by_seal(&s, "TZ") && pinned_by_seal(&s, "LANG"));
        assert!(!pinned_by_seal(&settings(&["env"]), "PYTHONHASHSEED"));
    }

    #[test]
    fn a_tree_past_the_bounds_is_shared_and_never_moved() {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("input.txt"), "x").unwrap();
        assert!(within_bounds(src.path()).is_ok());
        let small = Tree::new(src.path().to_path_buf());
        assert!(small.note().is_none());
        let f = std::fs::File::create(src.path().join("big")).unwrap();
        f.set_len(TREE_MAX_BYTES + 1).unwrap();
        assert!(matches!(
            within_bounds(src.path()),
            Err(TreeTooLarge::Bytes)
        ));
        let tree = Tree::new(src.path().to_path_buf());
        assert!(tree.note().unwrap().contains("share"), "{:?}", tree.note());
        let all = all();
        for p in &all {
            let got = sandbox_for(&tree, p).unwrap();
            if p.cwd_depth > 0 || p.path_extra > 0 {
                let why = got.err().unwrap();
                assert!(why.contains("50 MB") && why.contains("skipped"), "{why}");
            } else {
                // The tree itself, with a private HOME beside it; nothing copied.
                let s = got.unwrap();
                assert_eq!(s.work(), src.path(), "{}", p.name);
                assert!(s.home().is_dir() && !s.home().starts_with(src.path()));
                assert!(!s.dir.path().join("work").exists(), "{}", p.name);
            }
        }
        // The small tree's runs each get a copy.
        let copy = sandbox_for(&small, &all[0]).unwrap().unwrap();
        assert_ne!(copy.work(), src.path());
        assert!(copy.work().join("input.txt").is_file());
    }
}
