//! Artifacts: the files a command writes that are part of its result, named by globs relative
//! to its working directory. Regular files only, as relative paths, in sorted order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Artifact files: path relative to the working directory -> bytes.
pub type Files = BTreeMap<String, Vec<u8>>;

/// Files matching `pattern` below `cwd` (the directory's own name is never a pattern).
pub fn matching(cwd: &Path, pattern: &str) -> Vec<String> {
    let full = format!(
        "{}/{}",
        glob::Pattern::escape(&cwd.to_string_lossy()),
        pattern
    );
    let Ok(paths) = glob::glob(&full) else {
        return Vec::new();
    };
    let mut out: Vec<String> = paths
        .filter_map(|p| p.ok())
        .filter(|p| p.is_file())
        .filter_map(|p| {
            p.strip_prefix(cwd)
                .ok()
                .map(|r| r.to_string_lossy().into_owned())
        })
        .collect();
    out.sort();
    out
}

/// `path`, resolved with every link followed, when it lies inside `root` (itself resolved).
/// A match reached through a link that leads out of the case's directory (`out -> /elsewhere`,
/// `out/a -> /etc/passwd`) is an error: seal never reads, and above all never removes, a file
/// outside it.
fn inside(root: &Path, path: &Path, what: &str) -> Result<PathBuf> {
    let real = std::fs::canonicalize(path)
        .with_context(|| format!("cannot resolve {what} {}", path.display()))?;
    if !real.starts_with(root) {
        bail!(
            "{what} {} is {} through a link, outside {}: refusing to touch it",
            path.display(),
            real.display(),
            root.display()
        );
    }
    Ok(real)
}

fn resolved(cwd: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(cwd)
        .with_context(|| format!("cannot resolve the directory {}", cwd.display()))
}

/// The files matching `globs`, read, and the globs that matched nothing.
pub fn read(cwd: &Path, globs: &[String]) -> Result<(Files, Vec<String>)> {
    let mut files = BTreeMap::new();
    let mut unmatched = Vec::new();
    let root = resolved(cwd)?;
    for g in globs {
        let found = matching(cwd, g);
        if found.is_empty() {
            unmatched.push(g.clone());
        }
        for rel in found {
            let p = inside(&root, &cwd.join(&rel), "artifact")?;
            let bytes = std::fs::read(&p)
                .with_context(|| format!("cannot read artifact {}", p.display()))?;
            files.insert(rel, bytes);
        }
    }
    Ok((files, unmatched))
}

/// Removes the files matching `globs`: each only once its directory is known to lie inside
/// `cwd` (see [`inside`]); a link that is itself the match is removed as a link, never its
/// target.
pub fn remove(cwd: &Path, globs: &[String], what: &str) -> Result<()> {
    let root = resolved(cwd)?;
    for g in globs {
        for rel in matching(cwd, g) {
            let path = cwd.join(&rel);
            let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
                continue;
            };
            let p = inside(&root, dir, what)?.join(name);
            std::fs::remove_file(&p)
                .with_context(|| format!("cannot remove {what} {}", p.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_find_files_relative_to_a_cwd_with_glob_characters() {
        let (_d, cwd) = crate::files::scratch("odd [dir]");
        std::fs::create_dir_all(cwd.join("out/sub")).unwrap();
        std::fs::write(cwd.join("out/a.txt"), "a").unwrap();
        std::fs::write(cwd.join("out/b.txt"), "b").unwrap();
        let globs = vec!["out/*.txt".to_string(), "none/*".to_string()];
        let (files, unmatched) = read(&cwd, &globs).unwrap();
        assert_eq!(files.keys().collect::<Vec<_>>(), ["out/a.txt", "out/b.txt"]);
        assert_eq!(unmatched, ["none/*"]);
        remove(&cwd, &globs, "artifact").unwrap();
        assert!(matching(&cwd, "out/*").is_empty());
    }

    /// A link to a directory outside the case's own is never read through nor emptied: the
    /// files there stay (the hardening issue: `golden record` deleted them).
    #[test]
    fn a_link_out_of_the_directory_is_refused_and_its_files_kept() {
        let d = tempfile::tempdir().unwrap();
        let (cwd, victim) = (d.path().join("case"), d.path().join("victim"));
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&victim).unwrap();
        std::fs::write(victim.join("a"), "keep").unwrap();
        std::os::unix::fs::symlink(&victim, cwd.join("out")).unwrap();
        std::os::unix::fs::symlink(victim.join("a"), cwd.join("b")).unwrap();
        let globs = vec!["out/*".to_string()];
        let e = remove(&cwd, &globs, "artifact").unwrap_err().to_string();
        assert!(e.contains("outside"), "{e}");
        assert!(read(&cwd, &globs).is_err());
        // A link that is itself the match is read as nothing outside, and removed as a link.
        let globs = vec!["b".to_string()];
        assert!(read(&cwd, &globs).is_err());
        remove(&cwd, &globs, "artifact").unwrap();
        assert!(std::fs::symlink_metadata(cwd.join("b")).is_err());
        assert_eq!(std::fs::read_to_string(victim.join("a")).unwrap(), "keep");
        // A link inside the directory to a file inside it is fine.
        std::fs::remove_file(cwd.join("out")).unwrap();
        std::fs::write(cwd.join("real"), "r").unwrap();
        std::os::unix::fs::symlink("real", cwd.join("alias")).unwrap();
        let (files, _) = read(&cwd, &["alias".to_string()]).unwrap();
        assert_eq!(files["alias"], b"r");
    }
}
