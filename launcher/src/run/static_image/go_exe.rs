//! What a Go image's exec stop needs of its executable (`seal_abi::supervised::go_site`: the
//! runtime's random functions, `cputicks`, the entropy call, the lowest load address), found
//! once per executable in a run. Looking them up reads the symbol table (or the `pclntab`)
//! of a file of megabytes: 100–350 µs of every Go image's start-up, paid twice (the random
//! functions, then the entropy call). A run's supervisors keep what they found in the run
//! directory, one small file per executable named after its identity (device, inode, size,
//! modification and change times), so that a program the run starts many times (`go
//! build`'s compiler and linker, a test binary, a loop in a script) is read once; a
//! supervisor also keeps the executables of its own images in memory.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use seal_abi::supervised::go_site::{self, Sites, WORDS};

/// An executable's sites, as linked (add the load bias of a position-independent one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoExe {
    pub sites: Sites,
    /// The lowest address a `PT_LOAD` is linked at.
    pub low: Option<u64>,
}

/// The start of each kept file's name.
const PREFIX: &str = "go-exe-";

/// Executables already read, by identity.
#[derive(Default)]
pub struct GoExes(HashMap<String, GoExe>);

impl GoExes {
    /// Process `pid`'s executable's sites: from memory, from the run's files in `run_dir`,
    /// or read now (and kept in both). `None` when the executable cannot be opened or mapped.
    pub fn of(&mut self, pid: i32, run_dir: Option<&Path>) -> Option<GoExe> {
        let file = File::open(format!("/proc/{pid}/exe")).ok()?;
        let m = file.metadata().ok()?;
        let name = format!(
            "{PREFIX}{:x}-{:x}-{:x}-{}.{}-{}.{}",
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec()
        );
        if let Some(&e) = self.0.get(&name) {
            return Some(e);
        }
        let kept = run_dir.and_then(|d| read_kept(&d.join(&name)));
        let e = match kept {
            Some(e) => e,
            None => {
                let exe = super::exe_map::ExeMap::of_file(&file, m.size() as usize)?;
                let e = GoExe {
                    sites: go_site::find_all(&exe),
                    low: go_site::low(&exe),
                };
                if let Some(d) = run_dir {
                    keep(d, &name, &e);
                }
                e
            }
        };
        self.0.insert(name, e);
        Some(e)
    }
}

/// The sites kept at `path`, when it holds exactly what [`keep`] writes.
fn read_kept(path: &Path) -> Option<GoExe> {
    let bytes = std::fs::read(path).ok()?;
    if bytes.len() != WORDS * 8 {
        return None;
    }
    let mut w = [0u64; WORDS];
    for (word, b) in w.iter_mut().zip(bytes.chunks_exact(8)) {
        *word = u64::from_le_bytes(b.try_into().ok()?);
    }
    let (sites, low) = Sites::from_words(&w)?;
    Some(GoExe { sites, low })
}

/// Keeps `e` as `name` in `dir`: written to a file of this process's own, then renamed, so
/// that a supervisor reading it at the same time finds all of it or none.
fn keep(dir: &Path, name: &str, e: &GoExe) {
    let bytes: Vec<u8> = (e.sites.to_words(e.low).iter())
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, dir.join(name)).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_executable_is_read_once_per_run_and_kept_whole() {
        let dir = std::env::temp_dir().join(format!("seal-go-exe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // This test's own executable: no Go sites, but a lowest load address.
        let pid = std::process::id() as i32;
        let first = GoExes::default().of(pid, Some(&dir)).unwrap();
        assert!(first.low.is_some());
        let kept: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert!(kept[0].starts_with(PREFIX));
        let path = dir.join(&kept[0]);
        // Another supervisor of the run reads the file, not the executable.
        let mut words = first.sites.to_words(Some(0x1234));
        std::fs::write(&path, words.map(u64::to_le_bytes).concat()).unwrap();
        assert_eq!(
            GoExes::default().of(pid, Some(&dir)).unwrap().low,
            Some(0x1234)
        );
        // A file cut short, or holding words no sites give, is read again from the executable.
        std::fs::write(&path, [0u8; 12]).unwrap();
        assert_eq!(GoExes::default().of(pid, Some(&dir)), Some(first));
        words[0] = u64::MAX;
        std::fs::write(&path, words.map(u64::to_le_bytes).concat()).unwrap();
        assert_eq!(GoExes::default().of(pid, Some(&dir)), Some(first));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
