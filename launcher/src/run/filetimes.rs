//! The run's real start for file times (family `files`), found by the launcher while it makes
//! the run's file-time table (see docs/design.md, "File times").

use std::path::Path;

use anyhow::{Context, Result};

use crate::run::shim;

/// The run's start for the `files` family (`LIBSEAL_FILES_START`), found while making the
/// run's file-time table (`files.table`, sparse, its header filled in here): a real time that
/// every file time given before this call is below and every one given after is at or above.
///
/// File times come from the kernel's coarse clock (4 ms ticks here), so a file written just
/// before the run and one written in its first tick could carry the same time. Since Linux
/// 6.13 ("multigrain" timestamps) a change to a file whose times were just read gets a
/// fine-grained time, and every later file time, on any file system, is at least that one.
/// So: create the table, read its ctime (marking it read), set its times to now, read again.
/// A later ctime is the boundary: fine-grained on such kernels (no wait), the next coarse
/// tick on older ones, which this retries for, in 0.2 ms steps (at most 100).
pub fn files_start(dir: &Path) -> Result<i64> {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::io::AsRawFd;
    let path = dir.join(seal_abi::files::TABLE_NAME);
    let f = shim::create_private_file(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    f.set_len(seal_abi::files::SIZE as u64)?;
    let ctime = |f: &std::fs::File| -> Result<i64> {
        let m = f.metadata()?;
        Ok(m.ctime() * 1_000_000_000 + m.ctime_nsec())
    };
    let before = ctime(&f)?;
    let mut start = before;
    for _ in 0..100 {
        // SAFETY: a descriptor we own; NULL times mean "now".
        if unsafe { libc::futimens(f.as_raw_fd(), std::ptr::null()) } != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("cannot set the times of {}", path.display()));
        }
        start = ctime(&f)?;
        if start > before {
            break;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    let mut header = [0u8; 16];
    header[..8].copy_from_slice(&seal_abi::files::MAGIC.to_le_bytes());
    header[8..].copy_from_slice(&start.to_le_bytes());
    use std::os::unix::fs::FileExt;
    f.write_all_at(&header, seal_abi::files::MAGIC_OFFSET as u64)?;
    Ok(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_start_splits_file_times_before_and_after_it() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let mtime = |name: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, b"x").unwrap();
            let m = std::fs::metadata(&p).unwrap();
            m.mtime() * 1_000_000_000 + m.mtime_nsec()
        };
        for round in 0..20 {
            let run = tempfile::tempdir().unwrap();
            let before = mtime("before");
            let start = files_start(run.path()).unwrap();
            let after = mtime("after");
            assert!(
                before < start,
                "round {round}: {before} is not before {start}"
            );
            assert!(after >= start, "round {round}: {after} is before {start}");
            let table = std::fs::read(run.path().join(seal_abi::files::TABLE_NAME)).unwrap();
            assert_eq!(table.len(), seal_abi::files::SIZE);
            let at = seal_abi::files::START_OFFSET;
            assert_eq!(
                i64::from_le_bytes(table[at..at + 8].try_into().unwrap()),
                start
            );
        }
    }
}
