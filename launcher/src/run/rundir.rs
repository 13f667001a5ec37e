//! The run directory: the run table (the run-wide pid table, with every process image's
//! census slot after it) and the file-time table, private to the user, removed when the run
//! ends; stale ones (their launcher killed) are swept.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::run::shim;
use crate::run::watch::Watch;

/// A run directory: the run table (census slots of every process image included). Mode 0700,
/// unpredictable name; removed on drop.
pub struct RunDir {
    path: PathBuf,
    /// The run table, locked (`flock`) for as long as this launcher lives: a run directory
    /// whose lock nobody holds was left by a launcher that was killed.
    _lock: std::fs::File,
    /// Where the run directories of this kind live, and their name prefix ([`Self::sweep`]).
    parent: PathBuf,
    prefix: &'static str,
    /// Ends the run's processes and removes the directory if this launcher is killed.
    watch: Option<Watch>,
    /// A static root's supervisor, or the run's server forked for a dynamically linked Go
    /// root ([`Self::go_root`]): a child of this launcher, reaped once the run ends.
    supervisor: Option<libc::pid_t>,
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if let Some(w) = &mut self.watch {
            w.done();
        }
        if let Some(pid) = self.supervisor {
            crate::run::watch::reap_later(pid);
        }
        remove_run_dir(&self.path);
    }
}

/// What a run directory holds after most runs: removed by name, then the directory, in five
/// system calls where `remove_dir_all` makes twelve (it opens, inspects and lists it first:
/// ~30 µs of every one-shot run's end, after its command has exited). Anything else in it
/// (a server's socket, a Go program's clock pages) leaves it not empty: then all of it goes.
const RUN_DIR_FILES: [&str; 3] = [
    seal_abi::files::TABLE_NAME,
    seal_abi::supervised::SUPERVISOR_LINK,
    seal_abi::RUN_TABLE_NAME,
];

fn remove_run_dir(path: &Path) {
    for name in RUN_DIR_FILES {
        let _ = std::fs::remove_file(path.join(name));
    }
    if std::fs::remove_dir(path).is_err() {
        let _ = std::fs::remove_dir_all(path);
    }
}

impl RunDir {
    /// Creates the run directory on a memory file system when one with room is at hand
    /// (`$XDG_RUNTIME_DIR`, else `/dev/shm`): every sealed process creates and maps its census
    /// file there, which costs ~1 ms more per process on a disk. The name is unpredictable and
    /// the mode exactly 0700 whatever the umask, so a shared `/dev/shm` is safe; the cache dir
    /// is the fallback.
    ///
    /// `root`: a static root's supervisor's end of its socket pair: the supervisor is forked
    /// now ([`crate::run::watch::fork_root_supervisor`]). The watch starts once the command
    /// has ([`Self::watch`]).
    pub fn create(root: Option<std::os::fd::OwnedFd>) -> Result<RunDir> {
        let mut root = root;
        for parent in memory_dirs() {
            if let Ok(path) = shim::create_private_dir_in(&parent, "seal-run-") {
                // A memory file system that filled up since `memory_dirs` looked: the next.
                if let Ok(dir) = RunDir::with_table(path, parent, "seal-run-", &mut root) {
                    return Ok(dir);
                }
            }
        }
        let parent = shim::cache_dir()?.join("runs");
        shim::private_dir(&parent)?;
        let path = shim::create_private_dir_in(&parent, "run-")
            .with_context(|| format!("cannot create a run directory in {}", parent.display()))?;
        RunDir::with_table(path, parent, "run-", &mut root)
    }

    /// Removes run directories that killed launchers left next to this one, at most once a
    /// [`SWEEP_EVERY`] per user and parent. Called once the command is running: it lists the
    /// whole parent (`/dev/shm` is shared with every other program's leftovers: ~1000 entries
    /// and ~0.15 ms of every short run here). A directory is only removed once it is
    /// [`STALE_AFTER`] old anyway, so a stale one goes within two minutes, at the next run.
    pub fn sweep(&self) {
        if sweep_due(&self.parent) {
            remove_stale_runs(&self.parent, self.prefix);
        }
    }

    fn with_table(
        path: PathBuf,
        parent: PathBuf,
        prefix: &'static str,
        root: &mut Option<std::os::fd::OwnedFd>,
    ) -> Result<RunDir> {
        match create_run_table(&path) {
            Ok(_lock) => Ok(RunDir {
                watch: None,
                supervisor: root
                    .take()
                    .and_then(|r| crate::run::watch::fork_root_supervisor(r, &path)),
                path,
                _lock,
                parent,
                prefix,
            }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&path);
                Err(e)
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Starts the run's supervision server now, for a root that is a dynamically linked Go
    /// program (`exec_check::Plan::DynamicGo`), unless a static root's supervisor was forked.
    /// Also puts what the root's libseal looks up in its executable in the run directory
    /// (`static_image::keep_go_root`).
    /// Before the fork: the server and its supervisors inherit the user's cache directory
    /// found for it.
    pub fn go_root(&mut self, exe: &Path) {
        crate::run::static_image::keep_go_root(exe, &self.path);
        if self.supervisor.is_none() {
            self.supervisor = crate::run::static_image::fork_server(&self.path);
        }
    }

    /// Starts the run's watch if it is not started yet: called once the command is started,
    /// so that the watch's fork (~0.2 ms, the launcher's first) runs beside the command's
    /// start-up instead of before it. A launcher killed in between leaves its command to
    /// `PR_SET_PDEATHSIG` and its directory to the next run's sweep.
    pub fn watch(&mut self) {
        if self.watch.is_none() {
            self.watch = Watch::start(&self.path);
        }
    }
}

/// Free space a memory file system must have to hold a run directory. A census page that
/// cannot be allocated on a full tmpfs would kill the sealed process with SIGBUS, so small
/// ones (containers often have a 64 MiB /dev/shm) are passed over.
const MIN_MEMORY_FS_FREE: u64 = 512 << 20;

fn memory_dirs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    // A relative XDG_RUNTIME_DIR is invalid (XDG specification) and ignored.
    if let Some(d) = shim::absolute_var("XDG_RUNTIME_DIR") {
        out.push(d);
    }
    out.push(PathBuf::from("/dev/shm"));
    out.retain(|d| free_bytes(d).is_some_and(|f| f >= MIN_MEMORY_FS_FREE));
    out
}

fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs fills the zeroed struct for a NUL-terminated path.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return None;
        }
        Some(st.f_bavail as u64 * st.f_frsize as u64)
    }
}

fn pid_max() -> usize {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4_194_304usize)
        .max(seal_abi::VPID_LIMIT)
}

/// How old a run directory whose launcher is gone must be before a sweep removes it.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(60);
/// How often a user's launchers sweep one parent directory.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Is a sweep of `parent` due? The mark is `<parent>/.seal-swept-<uid>`, whose mtime is the
/// last sweep's time: one `stat` instead of listing the parent. A mark that is missing, not
/// ours, not a regular file or not recent means a sweep; a sweep that is due touches it (made
/// 0600 and never followed when it is a link).
fn sweep_due(parent: &Path) -> bool {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let mark = parent.join(format!(".seal-swept-{uid}"));
    let recent = std::fs::symlink_metadata(&mark).is_ok_and(|m| {
        m.is_file()
            && m.uid() == uid
            && m.modified()
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age < SWEEP_EVERY)
    });
    if recent {
        return false;
    }
    if let Ok(f) = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&mark)
    {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
    true
}

/// Removes this user's directories `parent/PREFIX*` that no live seal holds (see [`hold`]),
/// whether or not a sweep is due: for directories that are made once per command.
pub fn remove_stale(parent: &Path, prefix: &str) {
    remove_stale_runs(parent, prefix);
}

/// Marks `dir` as held by this process for as long as the returned file is open: the lock
/// file the sweeps look for ([`seal_abi::RUN_TABLE_NAME`], empty here), locked with `flock`.
pub fn hold(dir: &Path) -> Result<std::fs::File> {
    use std::os::unix::io::AsRawFd;
    let path = dir.join(seal_abi::RUN_TABLE_NAME);
    let f = shim::create_private_file(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    // SAFETY: an exclusive lock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        anyhow::bail!("cannot lock {}", path.display());
    }
    Ok(f)
}

/// Removes this user's run directories under `parent` that no live launcher holds: a `seal`
/// killed with SIGKILL cannot remove its own. A directory younger than a minute is left alone
/// (its launcher may not have locked it yet).
fn remove_stale_runs(parent: &Path, prefix: &str) {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::io::AsRawFd;
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let young = meta
            .modified()
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_none_or(|age| age < STALE_AFTER);
        if !meta.is_dir() || meta.uid() != uid || young {
            continue;
        }
        let table = entry.path().join(seal_abi::RUN_TABLE_NAME);
        let free = match std::fs::File::open(&table) {
            // SAFETY: a non-blocking lock attempt on a descriptor we own.
            Ok(f) => (unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }) == 0,
            // Killed between making the directory and its lock file (a probe's copy under
            // load): a seal makes the lock file right after the directory, never a minute on.
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        };
        if free {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Creates the run table and returns it locked (see [`RunDir`]): the run-wide pid table every
/// sealed process maps, and the census slots after it (sparse: only written pages cost
/// memory).
fn create_run_table(dir: &Path) -> Result<std::fs::File> {
    use std::os::unix::io::AsRawFd;
    let pid_max = pid_max();
    let path = dir.join(seal_abi::RUN_TABLE_NAME);
    let mut f = shim::create_private_file(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    // SAFETY: locking a descriptor we own (O_CLOEXEC: the command does not inherit it).
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    let cap = size_for_census(pid_max, census_cap(pid_max), |len| f.set_len(len))
        .with_context(|| format!("cannot size the run table {}", path.display()))?;
    let mut header = Vec::with_capacity(24);
    header.extend_from_slice(&seal_abi::RUN_MAGIC.to_le_bytes());
    header.extend_from_slice(&seal_abi::LAYOUT_VERSION.to_le_bytes());
    header.extend_from_slice(&(pid_max as u32).to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes()); // census_next
    header.extend_from_slice(&(cap as u32).to_le_bytes());
    let flags = if crate::run::confine::holds_sys_time() {
        seal_abi::run_flags::SYS_TIME_HELD
    } else {
        0
    };
    header.extend_from_slice(&flags.to_le_bytes());
    f.write_all(&header)
        .with_context(|| format!("cannot write the run table {}", path.display()))?;
    Ok(f)
}

/// Sets the run table file's length for `cap` census slots, or fewer where the file system's
/// largest file is smaller (EFBIG: FAT, some network mounts) rather than refusing the run.
/// Returns the slots it holds.
fn size_for_census(
    pid_max: usize,
    mut cap: usize,
    mut set_len: impl FnMut(u64) -> std::io::Result<()>,
) -> std::io::Result<usize> {
    loop {
        match set_len(seal_abi::RunTable::file_size_with_census(pid_max, cap) as u64) {
            Ok(()) => return Ok(cap),
            Err(e) if e.raw_os_error() == Some(libc::EFBIG) && cap >= 64 => cap /= 8,
            Err(e) => return Err(e),
        }
    }
}

/// Census slots for the run table file (sparse: its length costs nothing), as many as
/// `RLIMIT_FSIZE` lets seal's file grow to (past it, `ftruncate` would kill seal with
/// `SIGXFSZ`).
fn census_cap(pid_max: usize) -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit.
    let max_len = if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim) } == 0
        && lim.rlim_cur != libc::RLIM_INFINITY
    {
        lim.rlim_cur as usize
    } else {
        usize::MAX
    };
    let table = seal_abi::RunTable::census_offset(pid_max, 0);
    (max_len.saturating_sub(table) / seal_abi::CENSUS_SLOT_BYTES).min(seal_abi::CENSUS_CAP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_directory_goes_with_what_it_holds_known_or_not() {
        let parent = tempfile::tempdir().unwrap();
        for extra in [None, Some("server.sock"), Some("go-clock-12")] {
            let d = parent.path().join("run");
            std::fs::create_dir(&d).unwrap();
            for name in RUN_DIR_FILES.iter().copied().chain(extra) {
                std::fs::write(d.join(name), b"x").unwrap();
            }
            remove_run_dir(&d);
            assert!(!d.exists(), "{extra:?} left it");
        }
    }

    #[test]
    fn stale_directories_go_locked_by_no_one_or_never_locked_and_held_ones_stay() {
        let parent = tempfile::tempdir().unwrap();
        let make = |name: &str, lock: bool, old: bool| {
            let d = parent.path().join(name);
            std::fs::create_dir(&d).unwrap();
            let held = lock.then(|| hold(&d).unwrap());
            if old {
                let t = std::time::SystemTime::now() - 2 * STALE_AFTER;
                std::fs::File::open(&d).unwrap().set_modified(t).unwrap();
            }
            held
        };
        let _held = make("seal-x-held", true, true);
        drop(make("seal-x-released", true, true));
        make("seal-x-unlocked", false, true);
        make("seal-x-young", false, false);
        make("other-unlocked", false, true);
        remove_stale(parent.path(), "seal-x-");
        let mut left: Vec<String> = std::fs::read_dir(parent.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["other-unlocked", "seal-x-held", "seal-x-young"]);
    }

    #[test]
    fn a_file_system_with_a_small_largest_file_gets_fewer_census_slots() {
        let limit = 4u64 << 30; // a FAT volume's largest file
        let mut lens = Vec::new();
        let cap = size_for_census(1 << 22, seal_abi::CENSUS_CAP, |len| {
            lens.push(len);
            if len > limit {
                Err(std::io::Error::from_raw_os_error(libc::EFBIG))
            } else {
                Ok(())
            }
        })
        .unwrap();
        assert!(
            cap >= 64 && *lens.last().unwrap() <= limit,
            "{cap} {lens:?}"
        );
        assert_eq!(
            *lens.last().unwrap(),
            seal_abi::RunTable::file_size_with_census(1 << 22, cap) as u64
        );
        // Other errors, and a volume too small for 64 slots, still refuse the run.
        let e = size_for_census(1 << 22, 1 << 20, |_| {
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        });
        assert_eq!(e.unwrap_err().raw_os_error(), Some(libc::ENOSPC));
        let e = size_for_census(1 << 22, 1 << 20, |_| {
            Err(std::io::Error::from_raw_os_error(libc::EFBIG))
        });
        assert_eq!(e.unwrap_err().raw_os_error(), Some(libc::EFBIG));
    }
}
