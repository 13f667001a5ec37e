//! What a Go image's exec stop needs of its executable (`seal_abi::supervised::go_site`: the
//! runtime's random functions, `cputicks`, the entropy call, the lowest load address), found
//! once per executable. Looking them up reads the symbol table (or the `pclntab`) of a file
//! of megabytes: 100–350 µs of every Go image's start-up, paid twice (the random functions,
//! then the entropy call). What was found is kept in one small file per executable named
//! after its identity (device, inode, size, modification and change times), in the user's
//! cache (`~/.cache/seal/go-exe/SEAL-BUILD`, private as the rest of it; at most
//! [`CACHE_MAX`] files), or in the run directory where there is none, so that a program the
//! run starts many times (`go build`'s compiler and linker, a test binary, a loop in a
//! script) is read once, and so is the next run's: a one-shot `seal -- ./hello` (Go) read its
//! executable for 140 µs of its start-up every time. A supervisor also keeps the executables
//! of its own images in memory; libseal (a cgo program) reads and writes the run directory's
//! files, and the launcher puts a cgo root's there ([`keep_for_root`]). A rebuilt
//! executable has another identity (its change time at least), so a kept file never describes
//! another build; and the files are seal's build's own (named after the `seal` binary's size
//! and modification time): what a word means may change from one seal to the next.

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
    /// from the user's in `cache`, or read now (and kept in the cache, or without one in the
    /// run's directory). `None` when the executable cannot be opened or mapped.
    /// A file of the user's is not copied to the run's: one read of either costs the same,
    /// and the copy was a file written on a one-shot Go image's start-up path.
    pub fn of(&mut self, pid: i32, run_dir: Option<&Path>, cache: Option<&Path>) -> Option<GoExe> {
        let file = File::open(format!("/proc/{pid}/exe")).ok()?;
        let (name, size) = kept_name(&file)?;
        if let Some(&e) = self.0.get(&name) {
            return Some(e);
        }
        let kept = run_dir.and_then(|d| read_kept(&d.join(&name)));
        let e = match kept {
            Some(e) => e,
            None => lookup(&file, size, &name, cache, run_dir)?,
        };
        self.0.insert(name, e);
        Some(e)
    }
}

/// The sites of a dynamically linked Go root command at `path`, kept in the run directory
/// `run_dir` before it starts: its libseal reads them there (`shim/src/process/go_entropy.rs`)
/// instead of the executable's symbol table, 140 µs of a cgo hello world's start-up. From the
/// user's `cache` when it has them (else read now, and kept there too).
pub fn keep_for_root(path: &Path, run_dir: &Path, cache: Option<&Path>) {
    let Ok(file) = File::open(path) else {
        return;
    };
    let Some((name, size)) = kept_name(&file) else {
        return;
    };
    if let Some(e) = lookup(&file, size, &name, cache, None) {
        keep(run_dir, &name, &e);
    }
}

/// The name an executable's sites are kept under (libseal's too:
/// `seal_abi::supervised::go_site::ExeIdentity`), and its size.
fn kept_name(file: &File) -> Option<(String, u64)> {
    let m = file.metadata().ok()?;
    let id = go_site::ExeIdentity {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    };
    let mut out = [0u8; go_site::KEPT_NAME_MAX];
    let n = id.kept_name(&mut out);
    Some((String::from_utf8_lossy(&out[..n]).into_owned(), m.size()))
}

/// `file`'s sites from the user's `cache`, or read from it now and kept in the cache (without
/// one, in `run_dir`).
fn lookup(
    file: &File,
    size: u64,
    name: &str,
    cache: Option<&Path>,
    run_dir: Option<&Path>,
) -> Option<GoExe> {
    if let Some(e) = cache.and_then(|c| read_kept(&c.join(name))) {
        return Some(e);
    }
    let exe = super::exe_map::ExeMap::of_file(file, size as usize)?;
    let e = GoExe {
        sites: go_site::find_all(&exe),
        low: go_site::low(&exe),
    };
    match (cache, run_dir) {
        (Some(c), _) => {
            keep(c, name, &e);
            trim(c);
        }
        (None, Some(d)) => keep(d, name, &e),
        (None, None) => {}
    }
    Some(e)
}

/// Files the user's cache keeps: past this, the oldest (by modification time) go, down to
/// half of it. A file is a few hundred bytes.
pub const CACHE_MAX: usize = 512;

/// The user's cache of executables' sites for this `seal` binary
/// (`~/.cache/seal/go-exe/SEAL-BUILD`, made private), or `None` when there is no private
/// place for it (the run's files are still kept). A new build's directory is made beside the
/// [`BUILDS_KEPT`] − 1 last written others', and older ones go.
pub fn user_cache() -> Option<std::path::PathBuf> {
    // Once per process: the launcher asks before it starts a cgo root, and a supervisor it
    // forks inherits the answer.
    static DIR: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    DIR.get_or_init(find_user_cache).clone()
}

fn find_user_cache() -> Option<std::path::PathBuf> {
    let base = crate::run::shim::cache_dir().ok()?.join("go-exe");
    crate::run::shim::private_dir(&base).ok()?;
    let m = std::fs::metadata("/proc/self/exe").ok()?;
    let build = format!("{:x}-{}.{}", m.size(), m.mtime(), m.mtime_nsec());
    let dir = base.join(&build);
    if std::fs::symlink_metadata(&dir).is_err() {
        drop_old_builds(&base);
    }
    crate::run::shim::private_dir(&dir).ok()?;
    Some(dir)
}

/// Build directories the user's cache keeps. Not one: two `seal` binaries used in turn (an
/// installed one and a checkout's) each removed the other's directory, and every Go image
/// of each run then read its executable's symbol table again (~0.3 ms of a one-shot's).
pub const BUILDS_KEPT: usize = 4;

/// Makes room in `base` for a new build's directory: keeps the [`BUILDS_KEPT`] − 1 last
/// modified directories, removes older ones and anything that is not a directory.
fn drop_old_builds(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let mut builds = Vec::new();
    for e in entries.flatten() {
        match (e.file_type(), e.metadata().and_then(|m| m.modified())) {
            (Ok(t), Ok(at)) if t.is_dir() => builds.push((at, e.path())),
            _ => drop(std::fs::remove_file(e.path())),
        }
    }
    builds.sort();
    let old = builds.len().saturating_sub(BUILDS_KEPT - 1);
    for (_, path) in &builds[..old] {
        let _ = std::fs::remove_dir_all(path);
    }
}

/// Keeps at most [`CACHE_MAX`] files in cache `dir`: the oldest go past it.
fn trim(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, std::path::PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(PREFIX))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if files.len() <= CACHE_MAX {
        return;
    }
    files.sort();
    for (_, path) in &files[..files.len() - CACHE_MAX / 2] {
        let _ = std::fs::remove_file(path);
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
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    // Mode 0600 whatever the umask (which can only take bits away), never through a link.
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .and_then(|mut f| f.write_all(&bytes));
    if written.is_ok() && std::fs::rename(&tmp, dir.join(name)).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new build's directory is made beside the last written others' (at most
    /// [`BUILDS_KEPT`] in all): older ones, and stray files, go.
    #[test]
    fn a_new_build_keeps_the_last_written_builds_directories() {
        let base = std::env::temp_dir().join(format!("seal-go-builds-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let t0 = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        for k in 0..5u64 {
            let d = base.join(format!("build{k}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("kept"), b"x").unwrap();
            let at = t0 + std::time::Duration::from_secs(k * 60);
            std::fs::File::open(&d).unwrap().set_modified(at).unwrap();
        }
        std::fs::write(base.join("stray"), b"x").unwrap();
        drop_old_builds(&base);
        let mut left: Vec<String> = std::fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["build2", "build3", "build4"]);
        assert_eq!(left.len(), BUILDS_KEPT - 1);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn an_executable_is_read_once_per_run_and_kept_whole() {
        let dir = std::env::temp_dir().join(format!("seal-go-exe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // This test's own executable: no Go sites, but a lowest load address.
        let pid = std::process::id() as i32;
        let first = GoExes::default().of(pid, Some(&dir), None).unwrap();
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
            GoExes::default().of(pid, Some(&dir), None).unwrap().low,
            Some(0x1234)
        );
        // A file cut short, or holding words no sites give, is read again from the executable.
        std::fs::write(&path, [0u8; 12]).unwrap();
        assert_eq!(GoExes::default().of(pid, Some(&dir), None), Some(first));
        words[0] = u64::MAX;
        std::fs::write(&path, words.map(u64::to_le_bytes).concat()).unwrap();
        assert_eq!(GoExes::default().of(pid, Some(&dir), None), Some(first));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_next_run_reads_the_users_cache_and_a_cgo_roots_file_is_put_in_the_run() {
        let base = std::env::temp_dir().join(format!("seal-go-cache-{}", std::process::id()));
        let (run1, run2, cache) = (base.join("run1"), base.join("run2"), base.join("cache"));
        for d in [&run1, &run2, &cache] {
            std::fs::create_dir_all(d).unwrap();
        }
        let pid = std::process::id() as i32;
        let first = GoExes::default()
            .of(pid, Some(&run1), Some(&cache))
            .unwrap();
        let names = |d: &Path| -> Vec<String> {
            std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect()
        };
        let kept = names(&cache);
        assert_eq!(kept.len(), 1);
        assert!(names(&run1).is_empty(), "kept in the cache only");
        // The next run reads the cache's file (changed here to tell it from a read of the
        // executable).
        let words = first.sites.to_words(Some(0x5678));
        std::fs::write(cache.join(&kept[0]), words.map(u64::to_le_bytes).concat()).unwrap();
        let next = GoExes::default()
            .of(pid, Some(&run2), Some(&cache))
            .unwrap();
        assert_eq!(next.low, Some(0x5678));
        // A cgo root's file goes to the run's directory, from the cache, for its libseal.
        let exe = std::env::current_exe().unwrap();
        let run3 = base.join("run3");
        std::fs::create_dir_all(&run3).unwrap();
        keep_for_root(&exe, &run3, Some(&cache));
        let e = read_kept(&run3.join(&kept[0])).unwrap();
        assert_eq!(e.low, Some(0x5678));
        // A damaged file in the cache is read again from the executable, and replaced.
        std::fs::write(cache.join(&kept[0]), [1u8; 5]).unwrap();
        let again = GoExes::default()
            .of(pid, Some(&run2), Some(&cache))
            .unwrap();
        assert_eq!(again, first);
        assert_eq!(read_kept(&cache.join(&kept[0])), Some(first));
        // Without a cache, the run's directory keeps it.
        let run4 = base.join("run4");
        std::fs::create_dir_all(&run4).unwrap();
        GoExes::default().of(pid, Some(&run4), None).unwrap();
        assert_eq!(names(&run4), kept);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_cgo_roots_sites_are_kept_in_the_run_directory() {
        let base = std::env::temp_dir().join(format!("seal-go-root-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let exe = std::env::current_exe().unwrap();
        keep_for_root(&exe, &base, None);
        let (name, _) = kept_name(&File::open(&exe).unwrap()).unwrap();
        let e = read_kept(&base.join(&name)).expect("kept under its identity's name");
        let pid = std::process::id() as i32;
        assert_eq!(Some(e), GoExes::default().of(pid, None, None));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn the_users_cache_keeps_at_most_its_size_and_drops_the_oldest() {
        let dir = std::env::temp_dir().join(format!("seal-go-trim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        for k in 0..=CACHE_MAX {
            let f = std::fs::File::create(dir.join(format!("{PREFIX}{k:04}"))).unwrap();
            // The first ten are the oldest.
            let at = old
                + std::time::Duration::from_secs(if k < 10 { k as u64 } else { 1000 + k as u64 });
            f.set_modified(at).unwrap();
        }
        std::fs::write(dir.join("other"), b"x").unwrap();
        trim(&dir);
        let left: std::collections::BTreeSet<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            left.len(),
            CACHE_MAX / 2 + 1,
            "half kept, and the other file"
        );
        assert!(left.contains("other"));
        assert!(
            left.contains(&format!("{PREFIX}{CACHE_MAX:04}")),
            "the newest stays"
        );
        assert!(!left.contains(&format!("{PREFIX}0000")), "the oldest goes");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
