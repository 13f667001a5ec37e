//! The perturbations `seal probe` runs a command under (after Debian's reprotest: time zone,
//! hash seed, locale, umask, HOME, host name, build path; and the size of the environment and
//! the depth of the working directory, which move stack addresses) and the two ways to run it: unsealed
//! (spawned directly) or sealed (`run::run_captured`). Every run gets a fresh copy of the
//! working tree in its own temporary directory, so runs never see each other's files and the
//! path of the tree differs between runs (reprotest's build-path perturbation).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use crate::config::Settings;
use crate::observe::Observation;
use crate::run::{self, Input};

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
    /// checkout at a longer path, same depth); bounded by [`CHECKOUT_MAX_FILES`] and
    /// [`CHECKOUT_MAX_BYTES`].
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

/// The largest working tree the `checkout-path` perturbation copies (files, directories and
/// links counted), and its largest total size: past either it is skipped with a note.
pub const CHECKOUT_MAX_FILES: usize = 10_000;
pub const CHECKOUT_MAX_BYTES: u64 = 50 * 1024 * 1024;

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

/// A fresh copy of the working tree (and an empty HOME) in a private temporary directory
/// (removed when dropped).
pub struct Sandbox {
    dir: tempfile::TempDir,
    /// Held (`flock`) while this probe lives: a copy nobody holds was left by a probe that
    /// was killed, and the next probe's sweep removes it (`rundir::remove_stale`).
    _lock: std::fs::File,
    depth: usize,
    extra: usize,
}

/// Why the `checkout-path` copy was not made.
#[derive(Debug, thiserror::Error)]
pub enum TreeTooLarge {
    #[error("the working tree has more than {CHECKOUT_MAX_FILES} entries")]
    Files,
    #[error("the working tree holds more than {} MB", CHECKOUT_MAX_BYTES / (1024 * 1024))]
    Bytes,
}

/// Checks that `dir` is within the `checkout-path` bounds, walking it without following any
/// symbolic link (a link counts as one entry, whatever it points at) and stopping as soon as
/// a bound is passed. An unreadable entry counts as nothing: `cp` then says what failed.
pub fn within_checkout_bounds(dir: &Path) -> std::result::Result<(), TreeTooLarge> {
    let (mut files, mut bytes) = (0usize, 0u64);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            files += 1;
            if files > CHECKOUT_MAX_FILES {
                return Err(TreeTooLarge::Files);
            }
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                bytes += m.len();
                if bytes > CHECKOUT_MAX_BYTES {
                    return Err(TreeTooLarge::Bytes);
                }
            }
        }
    }
    Ok(())
}

/// The one directory name that makes a copy `extra` characters longer ("/" included).
fn long_name(extra: usize) -> String {
    let head = "checkout-at-a-longer-path-";
    let n = extra.saturating_sub(1);
    let mut s: String = head.chars().take(n).collect();
    s.extend(std::iter::repeat_n('x', n - s.len()));
    s
}

impl Sandbox {
    #[cfg(test)]
    pub fn new(workdir: &Path) -> Result<Sandbox> {
        Sandbox::at_depth(workdir, 0)
    }

    /// The copy `depth` directories below `work` (`work/deeper/deeper/…`).
    #[cfg(test)]
    pub fn at_depth(workdir: &Path, depth: usize) -> Result<Sandbox> {
        Sandbox::at(workdir, depth, 0)
    }

    /// The copy `depth` directories below `work`, then (when `extra` > 0) in one directory
    /// that makes its path `extra` characters longer.
    pub fn at(workdir: &Path, depth: usize, extra: usize) -> Result<Sandbox> {
        use std::os::unix::fs::PermissionsExt;
        let parent = sandbox_parent(workdir)?;
        // Copies that killed probes left (SIGKILL, or a SIGTERM during the copy) go first.
        crate::run::rundir::remove_stale(&parent, "seal-probe-");
        // Mode 0700: the copy holds the user's working tree.
        let dir = tempfile::Builder::new()
            .prefix("seal-probe-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&parent)
            .context("cannot create a temporary directory for a probe run")?;
        let _lock = crate::run::rundir::hold(dir.path())
            .context("cannot lock the temporary directory of a probe run")?;
        let sandbox = Sandbox {
            dir,
            _lock,
            depth,
            extra,
        };
        let work = sandbox.work();
        std::fs::create_dir_all(&work)?;
        std::fs::create_dir(sandbox.dir.path().join("home"))?;
        let st = Command::new("cp")
            .arg("-a")
            .arg(workdir.join("."))
            .arg(&work)
            .stdin(Stdio::null())
            .status()
            .context("cannot run cp to copy the working tree")?;
        if !st.success() {
            anyhow::bail!("copying {} for a probe run failed", workdir.display());
        }
        Ok(sandbox)
    }

    pub fn work(&self) -> PathBuf {
        let w = (0..self.depth).fold(self.dir.path().join("work"), |p, _| p.join("deeper"));
        if self.extra > 0 {
            w.join(long_name(self.extra))
        } else {
            w
        }
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
}

/// Where the copies of `workdir` go: the temporary directory (`TMPDIR`, else `/tmp`), or the
/// first of `/var/tmp`, `/dev/shm` and seal's cache directory that does not lie inside
/// `workdir` (a probe run from `/tmp` would otherwise copy the tree into itself).
fn sandbox_parent(workdir: &Path) -> Result<PathBuf> {
    let work = workdir
        .canonicalize()
        .with_context(|| format!("cannot resolve the working directory {}", workdir.display()))?;
    let candidates = [
        Some(std::env::temp_dir()),
        Some(PathBuf::from("/var/tmp")),
        Some(PathBuf::from("/dev/shm")),
        crate::run::shim::cache_dir().ok(),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|d| {
            d.canonicalize()
                .is_ok_and(|c| c.is_dir() && !c.starts_with(&work))
        })
        .with_context(|| {
            format!(
                "every temporary directory lies inside the working directory {}, which each \
                 probe run copies; run probe from the project's directory or give --workdir",
                work.display()
            )
        })
}

/// Runs `argv` unsealed under `p` in a fresh copy of `workdir`. `Ok(Err(why))` when the
/// command could not be started (or the perturbation is not possible here).
pub fn run_unsealed(
    argv: &[OsString],
    workdir: &Path,
    p: &Perturbation,
) -> Result<std::result::Result<Observation, String>> {
    let sandbox = match sandbox_for(workdir, p)? {
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

/// Runs `argv` sealed under `p` in a fresh copy of `workdir`. Variables the seal pins (TZ,
/// LC_ALL/LANG, PYTHONHASHSEED) are the seal's unless that family is unsealed, so what differs
/// between runs is what survives the seal. (The host-name perturbation is not applied under
/// seal: the seal pins the host name.)
pub fn run_sealed(
    settings: &Settings,
    argv: &[OsString],
    workdir: &Path,
    p: &Perturbation,
    extra: &[(String, String)],
) -> Result<std::result::Result<Observation, String>> {
    let sandbox = match sandbox_for(workdir, p)? {
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

/// The copy of `workdir` a run under `p` gets; `Ok(Err(why))` when `p` cannot be applied to
/// this tree (a `checkout-path` copy past its bounds: the perturbation is skipped).
fn sandbox_for(workdir: &Path, p: &Perturbation) -> Result<std::result::Result<Sandbox, String>> {
    if p.path_extra > 0 {
        if let Err(e) = within_checkout_bounds(workdir) {
            return Ok(Err(format!("{e}; perturbation skipped")));
        }
    }
    Ok(Ok(Sandbox::at(workdir, p.cwd_depth, p.path_extra)?))
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
    fn a_checkout_copy_is_100_characters_longer_at_the_same_depth() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir(src.path().join("sub")).unwrap();
        std::fs::write(src.path().join("sub/input.txt"), "x").unwrap();
        std::os::unix::fs::symlink("/etc", src.path().join("outside")).unwrap();
        let (a, b) = (
            Sandbox::new(src.path()).unwrap(),
            Sandbox::at(src.path(), 0, 100).unwrap(),
        );
        assert_eq!(b.work().as_os_str().len(), a.work().as_os_str().len() + 100);
        assert!(b.work().join("sub/input.txt").is_file());
        // A link is copied as a link, never followed.
        assert!(b
            .work()
            .join("outside")
            .symlink_metadata()
            .unwrap()
            .is_symlink());
        let dir = b.dir.path().to_path_buf();
        drop(b);
        assert!(!dir.exists(), "the copy is removed");
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
    fn a_tree_past_the_bounds_is_not_copied() {
        let src = tempfile::tempdir().unwrap();
        assert!(within_checkout_bounds(src.path()).is_ok());
        let f = std::fs::File::create(src.path().join("big")).unwrap();
        f.set_len(CHECKOUT_MAX_BYTES + 1).unwrap();
        assert!(matches!(
            within_checkout_bounds(src.path()),
            Err(TreeTooLarge::Bytes)
        ));
        let p = all()
            .into_iter()
            .find(|p| p.name == "checkout-path")
            .unwrap();
        let why = sandbox_for(src.path(), &p).unwrap().err().unwrap();
        assert!(why.contains("50 MB") && why.contains("skipped"), "{why}");
    }

    /// A working tree with one file, `input.txt`, and two copies of it: the second `depth`
    /// levels deeper.
    fn tree_and_copies(depth: usize) -> (tempfile::TempDir, Sandbox, Sandbox) {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("input.txt"), "x").unwrap();
        let a = Sandbox::new(src.path()).unwrap();
        let b = Sandbox::at_depth(src.path(), depth).unwrap();
        (src, a, b)
    }

    #[test]
    fn a_deeper_copy_has_a_longer_path() {
        let (_src, a, b) = tree_and_copies(3);
        assert_eq!(
            b.work().as_os_str().len(),
            a.work().as_os_str().len() + 3 * "/deeper".len()
        );
        assert!(b.work().join("input.txt").is_file());
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
    fn each_run_gets_a_fresh_copy() {
        let (src, a, b) = tree_and_copies(0);
        assert_ne!(a.work(), b.work());
        assert_eq!(
            std::fs::read_to_string(a.work().join("input.txt")).unwrap(),
            "x"
        );
        std::fs::write(a.work().join("out"), "y").unwrap();
        assert!(!b.work().join("out").exists() && !src.path().join("out").exists());
        assert!(a.home().is_dir());
    }
}
