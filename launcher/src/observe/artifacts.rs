//! Artifacts: the files a command writes that are part of its result, named by globs relative
//! to its working directory. Regular files only, as relative paths, in sorted order.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

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

/// The files matching `globs`, read, and the globs that matched nothing.
pub fn read(cwd: &Path, globs: &[String]) -> Result<(Files, Vec<String>)> {
    let mut files = BTreeMap::new();
    let mut unmatched = Vec::new();
    for g in globs {
        let found = matching(cwd, g);
        if found.is_empty() {
            unmatched.push(g.clone());
        }
        for rel in found {
            let p = cwd.join(&rel);
            let bytes = std::fs::read(&p)
                .with_context(|| format!("cannot read artifact {}", p.display()))?;
            files.insert(rel, bytes);
        }
    }
    Ok((files, unmatched))
}

/// Removes the files matching `globs`.
pub fn remove(cwd: &Path, globs: &[String], what: &str) -> Result<()> {
    for g in globs {
        for rel in matching(cwd, g) {
            let p = cwd.join(&rel);
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
        let d = tempfile::tempdir().unwrap();
        let cwd = d.path().join("odd [dir]");
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
}
