//! The embedded libseal and its extraction.
//!
//! The shim is written once, content-addressed, below a directory the user owns with mode 0700
//! (`$XDG_CACHE_HOME/seal`, else `$HOME/.cache/seal`); owner, mode and content are checked
//! before its path is handed to the loader: owner, mode, type and size on every use, the
//! content (all of it, byte for byte) whenever the file is not the very one verified last time
//! (see [`Stamp`]). Never a predictable path in a shared
//! directory (another user could plant a library there), never a memfd (children that close
//! inherited descriptors would silently lose the seal).

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

pub static SHIM_BYTES: &[u8] = include_bytes!(env!("SEAL_SHIM_FILE"));
pub const SHIM_SHA256: &str = env!("SEAL_SHIM_SHA256");

/// `$XDG_CACHE_HOME/seal` or `$HOME/.cache/seal`, created 0700 and checked. A relative
/// `XDG_CACHE_HOME` is ignored, as the XDG Base Directory specification requires (a relative
/// shim path in `LD_PRELOAD` would stop sealing any process that changes directory); a
/// relative `HOME` is refused for the same reason. A `HOME` that does not exist (`HOME=/nonexistent`
/// for a service account, a container) is not created: the shim goes to a private directory
/// of the user's in the system's temporary directory instead, checked the same way.
/// Checked once per process (a launcher asks for it for the shim, the run directory and Go
/// executables' sites; a supervisor it forks inherits the answer): ~30 µs of system calls
/// each time.
pub fn cache_dir() -> Result<PathBuf> {
    static CHECKED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    if let Some(d) = CHECKED.get() {
        return Ok(d.clone());
    }
    let dir = check_cache_dir()?;
    Ok(CHECKED.get_or_init(|| dir).clone())
}

fn check_cache_dir() -> Result<PathBuf> {
    let base = match absolute_var("XDG_CACHE_HOME") {
        Some(d) => d,
        None => match absolute_var("HOME") {
            Some(h) if h.is_dir() => h.join(".cache"),
            Some(_) => {
                // SAFETY: geteuid has no preconditions.
                let uid = unsafe { libc::geteuid() };
                let dir = std::env::temp_dir().join(format!("seal-cache-{uid}"));
                private_dir(&dir)?;
                dir
            }
            None => bail!(
                "neither XDG_CACHE_HOME nor HOME is an absolute path: no private place to put the shim"
            ),
        },
    };
    let dir = base.join("seal");
    private_dir(&dir)?;
    safe_ancestors(&dir)?;
    Ok(dir)
}

/// Every directory above `dir` (links resolved) belongs to you or root and cannot be changed
/// by others, as ssh checks its key paths: else another user could rename `dir` away and put
/// a library of their own in its place between two execs of a run. A sticky directory
/// (`/tmp`) is fine: others cannot rename what is yours in it.
fn safe_ancestors(dir: &Path) -> Result<()> {
    let real =
        fs::canonicalize(dir).with_context(|| format!("cannot resolve {}", dir.display()))?;
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    for a in real.ancestors().skip(1) {
        let m = fs::metadata(a).with_context(|| format!("cannot inspect {}", a.display()))?;
        if let Some(why) = unsafe_dir(&m, uid) {
            bail!(
                "{} is {why}: another user could replace the shim below it; set XDG_CACHE_HOME to a directory only you can change",
                a.display()
            );
        }
    }
    Ok(())
}

/// Why a directory others could change is unsafe to keep the shim below, if it is.
fn unsafe_dir(m: &fs::Metadata, uid: u32) -> Option<String> {
    if m.uid() != uid && m.uid() != 0 {
        return Some(format!("owned by uid {}", m.uid()));
    }
    if m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0 {
        return Some(format!("writable by others (mode {:o})", m.mode() & 0o7777));
    }
    None
}

/// An environment variable holding an absolute path; unset, empty or relative is `None`
/// (the XDG specification: "If an implementation encounters a relative path in any of these
/// variables it should consider the path invalid and ignore it").
pub fn absolute_var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// Creates `dir` and any missing parents, each 0700 whatever the umask (a fresh `~/.cache`
/// under `umask 077` or `000` alike), and checks that the current user owns `dir`, that it
/// is a directory and not a link, and that it is private (made so when it is not).
pub fn private_dir(dir: &Path) -> Result<()> {
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && fs::symlink_metadata(d).is_err())
        .collect();
    for d in missing.into_iter().rev() {
        match fs::DirBuilder::new().mode(0o700).create(d) {
            Ok(()) => {
                make_private(d, 0o700)
                    .with_context(|| format!("cannot make {} private", d.display()))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
    let meta =
        fs::symlink_metadata(dir).with_context(|| format!("cannot inspect {}", dir.display()))?;
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if !meta.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    if meta.uid() != uid {
        bail!(
            "{} is owned by uid {}, not by you (uid {uid}): refusing to load a shim from it",
            dir.display(),
            meta.uid()
        );
    }
    if meta.mode() & 0o777 != 0o700 {
        make_private(dir, 0o700).with_context(|| {
            format!(
                "{} is accessible to others and cannot be made private",
                dir.display()
            )
        })?;
    }
    Ok(())
}

/// Sets the mode of the directory `dir` without following a link (a link planted after the
/// checks is refused, never chmod-ed through): `fchmodat(AT_SYMLINK_NOFOLLOW)`, which works on
/// a directory we cannot read (mode 0000 after `umask 777`); where the C library lacks it,
/// through a descriptor opened with O_NOFOLLOW.
fn make_private(dir: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
    // fchmodat2 (Linux 6.6) takes AT_SYMLINK_NOFOLLOW itself; glibc's fchmodat emulates the
    // flag through an O_PATH descriptor and /proc/self/fd, whose first lookup in a process
    // costs ~25 µs of every `seal` start.
    const SYS_FCHMODAT2: libc::c_long = 452;
    // SAFETY: fchmodat2 on a NUL-terminated path.
    let rc = unsafe {
        libc::syscall(
            SYS_FCHMODAT2,
            libc::AT_FDCWD,
            c.as_ptr(),
            mode as libc::mode_t,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if !matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOSYS)) {
        return Err(e);
    }
    let d = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)?;
    d.set_permissions(fs::Permissions::from_mode(mode))
}

/// Creates a new directory `parent/PREFIXrandom`, mode exactly 0700 whatever the umask, never
/// through a link (mkdir does not follow one; the mode is set through an O_NOFOLLOW
/// descriptor). The random part is 16 hex digits; a taken name draws another.
pub fn create_private_dir_in(parent: &Path, prefix: &str) -> std::io::Result<PathBuf> {
    let mut last = None;
    for _ in 0..64 {
        let mut raw = [0u8; 8];
        // SAFETY: getrandom fills the buffer we own (a short read leaves zeros: still unique
        // enough with the EEXIST retry below).
        unsafe { libc::getrandom(raw.as_mut_ptr().cast(), raw.len(), 0) };
        let name: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let path = parent.join(format!("{prefix}{name}"));
        match fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => {
                make_private(&path, 0o700)?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::from(std::io::ErrorKind::AlreadyExists)))
}

/// Creates the new file `path` (O_EXCL, O_NOFOLLOW, O_CLOEXEC), mode exactly 0600 whatever
/// the umask.
pub fn create_private_file(path: &Path) -> std::io::Result<fs::File> {
    let f = fs::OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    f.set_permissions(fs::Permissions::from_mode(0o600))?;
    Ok(f)
}

/// The path of a verified copy of the embedded shim, writing it if needed.
pub fn extract() -> Result<PathBuf> {
    let dir = cache_dir()?;
    let path = dir.join(format!("libseal-{}.so", &SHIM_SHA256[..16]));
    if !path.is_absolute() {
        bail!("the shim path {} is not absolute", path.display());
    }
    let s = path.to_string_lossy();
    if s.contains(':') || s.contains(' ') || s.contains('\t') || s.contains('\n') {
        bail!("the shim path {s} contains ':' or white space, which LD_PRELOAD cannot express; set XDG_CACHE_HOME to a plain path");
    }
    // Marking it used moves its ctime, so it is compared again then (once a day).
    if verify(&path)? && (!mark_used(&path) || verify(&path)?) {
        return Ok(path);
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(".libseal-")
        .tempfile_in(&dir)
        .with_context(|| format!("cannot write the shim into {}", dir.display()))?;
    tmp.write_all(SHIM_BYTES)?;
    tmp.as_file().sync_all().ok();
    // Through the descriptor: the mode whatever the umask, and never through a link.
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(0o500))?;
    tmp.persist(&path)
        .with_context(|| format!("cannot install the shim at {}", path.display()))?;
    if !verify(&path)? {
        bail!(
            "the shim at {} does not match the embedded one after writing it",
            path.display()
        );
    }
    prune_old_versions(&dir, &path);
    Ok(path)
}

/// How long a shim of another seal version may go unused before a new extraction removes it.
const UNUSED_FOR: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// Keeps the shim's modification time within a day of its last use (at most one metadata
/// write a day), so [`prune_old_versions`] can tell versions in use from abandoned ones.
/// True when it wrote (the file's ctime changed, so its stamp no longer matches).
fn mark_used(path: &Path) -> bool {
    let day = std::time::Duration::from_secs(24 * 3600);
    let stale = fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > day);
    if stale {
        if let Ok(f) = fs::File::open(path) {
            return f.set_modified(std::time::SystemTime::now()).is_ok();
        }
    }
    false
}

/// Removes the shims of other seal versions that no `seal` used for [`UNUSED_FOR`]: each build
/// of seal extracts its own content-addressed copy, and nothing else would ever delete them.
/// A running sealed process keeps its mapped copy even when the file goes; only a version
/// idle for a week is removed, and a `seal` of that version would simply extract it again.
fn prune_old_versions(dir: &Path, keep: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if let Some(hash) = name.strip_prefix(STAMP_PREFIX) {
            // The stamp of a shim that is gone.
            if !dir.join(format!("libseal-{hash}.so")).exists() {
                let _ = fs::remove_file(&path);
            }
            continue;
        }
        // The private bytecode cache seal kept for sealed Pythons before they used the
        // installation's own (`PYTHONPYCACHEPREFIX`): nothing reads it any more.
        let old_pycache = name == "pycache" && entry.file_type().is_ok_and(|t| t.is_dir());
        if path == keep || !(old_pycache || name.starts_with("libseal-") && name.ends_with(".so")) {
            continue;
        }
        let idle = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > UNUSED_FOR);
        if idle && old_pycache {
            let _ = fs::remove_dir_all(&path);
        } else if idle {
            let _ = fs::remove_file(&path);
        }
    }
}

/// Names the stamp of `libseal-<hash>.so`: `verified-<hash>`, next to it.
const STAMP_PREFIX: &str = "verified-";

/// What identifies one file on disk as the one whose content was compared byte for byte: its
/// device, inode, size and change time (ctime). Any write to the file, a chmod, a rename over
/// it or a copy in its place changes one of them, and no process can set a ctime (only the
/// kernel does, from the clock), so a matching stamp means the same, unmodified file.
///
/// Threat model: the stamp lives in the same private (0700, owner-only) directory as the shim,
/// so whoever could forge it could as well write the shim itself — that is, the user (or
/// root), who can already put anything in `LD_PRELOAD`. The full comparison guards against
/// corruption and accidents (a torn write, another tool rewriting the file), which always
/// move the ctime; the stamp only saves re-reading 0.7 MB on every run.
#[derive(PartialEq, Eq, Debug)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    ctime: i64,
    ctime_nsec: i64,
}

impl Stamp {
    fn of(meta: &fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
            ctime: meta.ctime(),
            ctime_nsec: meta.ctime_nsec(),
        }
    }

    fn encode(&self) -> String {
        format!(
            "{} {} {} {} {} {}\n",
            SHIM_SHA256, self.dev, self.ino, self.size, self.ctime, self.ctime_nsec
        )
    }

    fn decode(s: &str) -> Option<Stamp> {
        let mut it = s.trim_end().split(' ');
        if it.next()? != SHIM_SHA256 {
            return None;
        }
        let mut n = || it.next()?.parse::<i64>().ok();
        let st = Stamp {
            dev: n()? as u64,
            ino: n()? as u64,
            size: n()? as u64,
            ctime: n()?,
            ctime_nsec: n()?,
        };
        it.next().is_none().then_some(st)
    }
}

fn stamp_path(path: &Path) -> PathBuf {
    path.with_file_name(format!("{STAMP_PREFIX}{}", &SHIM_SHA256[..16]))
}

/// The stamp recorded for `path`, when it is a private file of ours.
fn read_stamp(path: &Path) -> Option<Stamp> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(stamp_path(path))
        .ok()?;
    let meta = f.metadata().ok()?;
    // SAFETY: geteuid has no preconditions.
    if !meta.is_file() || meta.uid() != unsafe { libc::geteuid() } || meta.mode() & 0o022 != 0 {
        return None;
    }
    let mut s = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(f, 256), &mut s).ok()?;
    Stamp::decode(&s)
}

/// Records `stamp` for `path` (written aside and renamed into place; failure only costs the
/// next run a full comparison).
fn write_stamp(path: &Path, stamp: &Stamp) {
    let dir = match path.parent() {
        Some(d) => d,
        None => return,
    };
    let Ok(mut tmp) = tempfile::Builder::new()
        .prefix(".verified-")
        .tempfile_in(dir)
    else {
        return;
    };
    if tmp.write_all(stamp.encode().as_bytes()).is_ok() {
        let _ = tmp.persist(stamp_path(path));
    }
}

/// True when `path` exists, is ours, private, and byte-identical to the embedded shim (compared
/// in full unless its [`Stamp`] shows it is the file compared last time).
fn verify(path: &Path) -> Result<bool> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e).with_context(|| format!("cannot inspect {}", path.display())),
    };
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if !meta.is_file()
        || meta.uid() != uid
        || meta.mode() & 0o022 != 0
        || meta.len() != SHIM_BYTES.len() as u64
    {
        fs::remove_file(path)
            .with_context(|| format!("cannot replace the unexpected file {}", path.display()))?;
        return Ok(false);
    }
    if read_stamp(path).is_some_and(|s| s == Stamp::of(&meta)) {
        return Ok(true);
    }
    let mut f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    // The stamp of the file actually read (a replacement between the lstat and the open
    // shows as another inode and is never recorded).
    let opened = Stamp::of(&f.metadata()?);
    let mut buf = Vec::with_capacity(SHIM_BYTES.len());
    std::io::Read::read_to_end(&mut f, &mut buf)?;
    if buf != SHIM_BYTES {
        fs::remove_file(path)
            .with_context(|| format!("cannot replace the corrupted shim {}", path.display()))?;
        return Ok(false);
    }
    // Unchanged while it was read, so the content compared is that stamp's; and settled: a
    // file system stamps ctimes from a coarse clock, so a write in the same tick as the last
    // change could leave the ctime as it was. A fresh shim gets its stamp on a later run.
    let settled = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .is_ok_and(|now| now.as_secs() as i64 > opened.ctime + 2);
    if settled && Stamp::of(&f.metadata()?) == opened && opened == Stamp::of(&meta) {
        write_stamp(path, &opened);
    }
    Ok(true)
}

/// Is this launcher itself sealed (a seal inside another's run: libseal mapped here)? Then
/// its children are made by calls libseal hooks (`fork`, `posix_spawn`), not by a raw `clone`
/// the outer run would report as unsupported, and no server is forked from it (the copy
/// would carry the outer run's libseal). Read once.
///
/// Asked of the dynamic loader's list of loaded objects (`dl_iterate_phdr`: no system call),
/// not of `/proc/self/maps` (a file the kernel writes out in ~10 reads on every run).
pub fn inside_a_run() -> bool {
    static INSIDE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INSIDE.get_or_init(|| {
        unsafe extern "C" fn visit(
            info: *mut libc::dl_phdr_info,
            _size: libc::size_t,
            found: *mut libc::c_void,
        ) -> libc::c_int {
            // SAFETY: the loader passes a valid info whose name is NULL or NUL-terminated;
            // `found` is the bool below.
            unsafe {
                let name = (*info).dlpi_name;
                if !name.is_null() {
                    let name = std::ffi::CStr::from_ptr(name).to_bytes();
                    if name.windows(9).any(|w| w == b"/libseal-") {
                        *found.cast::<bool>() = true;
                        return 1;
                    }
                }
            }
            0
        }
        let mut found = false;
        // SAFETY: the callback only reads the info it is given and writes `found`.
        unsafe { libc::dl_iterate_phdr(Some(visit), (&mut found as *mut bool).cast()) };
        found
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test binary is no sealed process: no libseal among its loaded objects. (Inside a
    /// run, the nested-seal end-to-end tests.)
    #[test]
    fn the_tests_are_not_inside_a_run() {
        assert!(!inside_a_run());
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert_eq!(inside_a_run(), maps.contains("/libseal-"));
    }

    #[test]
    fn a_stamp_round_trips_and_rejects_others() {
        let s = Stamp {
            dev: 2049,
            ino: 77,
            size: 788_032,
            ctime: 1_796_110_079,
            ctime_nsec: 265_258_194,
        };
        assert_eq!(Stamp::decode(&s.encode()), Some(s));
        assert_eq!(Stamp::decode("0123 1 2 3 4 5\n"), None);
        assert_eq!(Stamp::decode(&format!("{SHIM_SHA256} 1 2 3 4\n")), None);
        assert_eq!(Stamp::decode(&format!("{SHIM_SHA256} 1 2 3 4 5 6\n")), None);
    }

    #[test]
    fn a_modified_shim_is_compared_again_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir
            .path()
            .join(format!("libseal-{}.so", &SHIM_SHA256[..16]));
        assert!(!verify(&path).unwrap());
        fs::write(&path, SHIM_BYTES).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(verify(&path).unwrap());
        assert!(
            read_stamp(&path).is_none(),
            "no stamp for a file changed just now"
        );
        // A stamp that matches is trusted without reading the file.
        write_stamp(&path, &Stamp::of(&fs::metadata(&path).unwrap()));
        assert!(verify(&path).unwrap(), "stamp accepted");
        // Same size, one byte different: the write moves the ctime, so the stamp no longer
        // matches and the full comparison finds (and removes) the damage.
        let mut bad = SHIM_BYTES.to_vec();
        bad[SHIM_BYTES.len() / 2] ^= 1;
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(&path, &bad).unwrap();
        assert!(!verify(&path).unwrap());
        assert!(!path.exists());
    }
}
