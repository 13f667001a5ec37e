//! The working tree `seal probe` runs its command in: a fresh private copy for every run (so
//! runs never see each other's files, and the tree's path differs between runs), or, past the
//! copy bounds, the tree itself, shared by the runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

/// The largest working tree a probe copies for each run (files, directories and links
/// counted), and its largest total size: past either the runs share the tree ([`Tree`]).
pub const TREE_MAX_FILES: usize = 10_000;
pub const TREE_MAX_BYTES: u64 = 50 * 1024 * 1024;

/// The working tree a probe runs its command in. Each run gets a fresh copy of it when it is
/// within [`TREE_MAX_FILES`] and [`TREE_MAX_BYTES`]; a larger one (a checkout holding its
/// build output or `node_modules`) is shared by the runs, as `verify`'s runs share theirs,
/// and the perturbations that move it (`cwd-depth`, `checkout-path`) are skipped with a note.
/// Copied for each of a probe's runs, a checkout with a 3 GB `target/` made
/// `probe -n 1 -- true` still be copying after 60 s.
pub struct Tree {
    pub dir: PathBuf,
    /// Why the tree is not copied (past a bound).
    pub too_large: Option<TreeTooLarge>,
}

impl Tree {
    /// `dir`, measured against the bounds (a walk that stops at the first bound passed).
    pub fn new(dir: PathBuf) -> Tree {
        let too_large = within_bounds(&dir).err();
        Tree { dir, too_large }
    }

    /// The report's note when the runs share the tree.
    pub fn note(&self) -> Option<String> {
        self.too_large.as_ref().map(|e| {
            format!(
                "{e}: the runs share it rather than each getting a copy (files one run leaves, \
                 the next sees)"
            )
        })
    }
}

/// A fresh copy of the working tree (and an empty HOME) in a private temporary directory
/// (removed when dropped), or only the HOME beside a tree the runs share.
pub struct Sandbox {
    pub(super) dir: tempfile::TempDir,
    /// Held (`flock`) while this probe lives: a copy nobody holds was left by a probe that
    /// was killed, and the next probe's sweep removes it (`rundir::remove_stale`).
    _lock: std::fs::File,
    depth: usize,
    extra: usize,
    /// The tree the runs share (not copied).
    shared: Option<PathBuf>,
}

/// Why the working tree is not copied.
#[derive(Debug, thiserror::Error)]
pub enum TreeTooLarge {
    #[error("the working tree has more than {TREE_MAX_FILES} entries")]
    Files,
    #[error("the working tree holds more than {} MB", TREE_MAX_BYTES / (1024 * 1024))]
    Bytes,
}

/// Checks that `dir` is within the copy bounds, walking it without following any symbolic
/// link (a link counts as one entry, whatever it points at) and stopping as soon as a bound
/// is passed. An unreadable entry counts as nothing: `cp` then says what failed.
pub fn within_bounds(dir: &Path) -> std::result::Result<(), TreeTooLarge> {
    let (mut files, mut bytes) = (0usize, 0u64);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            files += 1;
            if files > TREE_MAX_FILES {
                return Err(TreeTooLarge::Files);
            }
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                bytes += m.len();
                if bytes > TREE_MAX_BYTES {
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
        let sandbox = Sandbox::private(workdir, depth, extra, None)?;
        let work = sandbox.work();
        std::fs::create_dir_all(&work)?;
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

    /// A private HOME for a run in `workdir` itself (a tree the runs share).
    pub fn shared(workdir: &Path) -> Result<Sandbox> {
        Sandbox::private(workdir, 0, 0, Some(workdir.to_path_buf()))
    }

    /// The private directory, with its empty `home`.
    fn private(
        workdir: &Path,
        depth: usize,
        extra: usize,
        shared: Option<PathBuf>,
    ) -> Result<Sandbox> {
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
            shared,
        };
        std::fs::create_dir(sandbox.dir.path().join("home"))?;
        Ok(sandbox)
    }

    pub fn work(&self) -> PathBuf {
        if let Some(w) = &self.shared {
            return w.clone();
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
