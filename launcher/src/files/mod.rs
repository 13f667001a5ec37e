//! The files a user names: read through [`infile`] (regular files, size-capped), written
//! through [`outfile`] (never led elsewhere by a link).

pub mod infile;
pub mod outfile;

/// A fresh temporary directory for a test, and the path `name` in it (the directory goes when
/// the first value is dropped).
#[cfg(test)]
pub fn scratch(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join(name);
    (d, path)
}
