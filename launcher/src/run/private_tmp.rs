//! `--private-tmp`: the run sees an empty `/tmp` and `/var/tmp` of its own, at the usual paths,
//! gone when the run ends, so what earlier runs (or neighbours running at the same time) left
//! there cannot change what the command does.
//!
//! In the child, before exec: a private mount namespace (as root `unshare(CLONE_NEWNS)`;
//! otherwise an unprivileged user namespace too, `CLONE_NEWUSER | CLONE_NEWNS`, mapping only
//! the caller's own uid and gid), every mount made private (nothing propagates back), then a
//! fresh tmpfs on each of `/tmp` and `/var/tmp`. The tmpfs dies with the last process of the
//! namespace. Directories the run itself needs that live under those paths (the working
//! directory, seal's cache with the shim, the run directory, the program's directory) are bound
//! back at their own paths, so a test suite working in a temporary directory still works.
//! `TMPDIR` is unset (unless seal.toml's `[env]` sets it): the default `/tmp` is the private
//! one.
//!
//! Where no namespace can be made (user namespaces disabled, seccomp, a container without the
//! capability, or a user namespace whose ids are not mapped), the fallback is weaker and said
//! once on stderr: `TMPDIR` points to an empty directory in the run directory (removed with it);
//! programs that ignore `TMPDIR` still see the shared `/tmp`, and the directory's name differs
//! from run to run.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The directories a private tmpfs goes on.
const TMP_DIRS: [&str; 2] = ["/tmp", "/var/tmp"];

/// How the private `/tmp` can be made on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A mount namespace (`user`: inside a new user namespace).
    Namespace { user: bool },
    /// No namespace (why): `TMPDIR` in the run directory.
    Fallback(String),
}

/// Probed once per launcher: can a child make the namespace and mount a tmpfs?
pub fn mode() -> &'static Mode {
    static MODE: OnceLock<Mode> = OnceLock::new();
    MODE.get_or_init(probe)
}

fn probe() -> Mode {
    // SAFETY: geteuid has no preconditions.
    let user = unsafe { libc::geteuid() } != 0;
    // SAFETY: getuid/getgid have no preconditions.
    let ids = unsafe { (libc::getuid(), libc::getgid()) };
    let maps = IdMaps::new(ids);
    let empty: Vec<Bind> = Vec::new();
    // SAFETY: the child only makes async-signal-safe calls (unshare, open, write, mount,
    // _exit) before it exits.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            let code = match enter(user, &maps, &empty) {
                Ok(()) => 0,
                Err(e) => e.raw_os_error().unwrap_or(1).clamp(1, 255),
            };
            libc::_exit(code);
        }
        if pid < 0 {
            return Mode::Fallback(format!("fork: {}", io::Error::last_os_error()));
        }
        let mut status = 0;
        while libc::waitpid(pid, &mut status, 0) == -1
            && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
        {}
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            Mode::Namespace { user }
        } else {
            let code = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                0
            };
            let what = if user {
                "no user and mount namespace"
            } else {
                "no mount namespace"
            };
            Mode::Fallback(format!("{what}: {}", io::Error::from_raw_os_error(code)))
        }
    }
}

/// The id maps written in the child, prepared before the fork (no allocation after it).
struct IdMaps {
    uid: Vec<u8>,
    gid: Vec<u8>,
}

impl IdMaps {
    fn new((uid, gid): (libc::uid_t, libc::gid_t)) -> IdMaps {
        IdMaps {
            uid: format!("{uid} {uid} 1\n").into_bytes(),
            gid: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }
}

/// A directory bound back into a private tmpfs: its path, the directories to create on the way
/// (outermost first, the last one is the mount point: the same path). The child opens it
/// after entering the namespace (a bind mount's source must be in the caller's namespace) and
/// before covering it.
struct Bind {
    path: CString,
    mkdirs: Vec<CString>,
    /// A file (the mount point is then a file made empty, not a directory).
    file: bool,
}

/// `/proc/self/fd/N` in a stack buffer (no allocation in the child).
fn fd_path(fd: libc::c_int, buf: &mut [u8; 40]) -> *const libc::c_char {
    let head = b"/proc/self/fd/";
    buf[..head.len()].copy_from_slice(head);
    let mut digits = [0u8; 12];
    let (mut n, mut v) = (0, fd.max(0) as u32);
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..n {
        buf[head.len() + i] = digits[n - 1 - i];
    }
    buf[head.len() + n] = 0;
    buf.as_ptr().cast()
}

/// Everything the child needs, prepared in the parent.
struct Plan {
    user: bool,
    maps: IdMaps,
    binds: Vec<Bind>,
}

/// Writes `data` to `path` (async-signal-safe).
fn write_file(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: open/write/close on a NUL-terminated path and our own buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let e = io::Error::last_os_error();
        libc::close(fd);
        if n != data.len() as isize {
            return Err(e);
        }
    }
    Ok(())
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Most directories bound back into one run's private tmp.
const MAX_BINDS: usize = 16;

/// In the child (single-threaded, between fork and exec): the namespaces and the mounts.
fn enter(user: bool, maps: &IdMaps, binds: &[Bind]) -> io::Result<()> {
    let mut fds = [-1 as libc::c_int; MAX_BINDS];
    // SAFETY: system calls on our own process with NUL-terminated constant strings.
    unsafe {
        if user {
            check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS))?;
            // Failing to deny setgroups is fine on kernels before 3.19 (no such file).
            let _ = write_file(c"/proc/self/setgroups", b"deny");
            write_file(c"/proc/self/uid_map", &maps.uid)?;
            write_file(c"/proc/self/gid_map", &maps.gid)?;
        } else {
            check(libc::unshare(libc::CLONE_NEWNS))?;
        }
        // Nothing mounted from here on may reach the caller's namespace.
        check(libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))?;
        for (b, fd) in binds.iter().zip(fds.iter_mut()) {
            *fd = libc::open(b.path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
            if *fd < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        for dir in [c"/tmp", c"/var/tmp"] {
            let mut st: libc::stat = std::mem::zeroed();
            // A /var/tmp that is a link to /tmp (or missing) is left alone.
            if libc::lstat(dir.as_ptr(), &mut st) != 0 || st.st_mode & libc::S_IFMT != libc::S_IFDIR
            {
                continue;
            }
            check(libc::mount(
                c"tmpfs".as_ptr(),
                dir.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                c"mode=1777".as_ptr().cast(),
            ))?;
        }
        for (b, &fd) in binds.iter().zip(fds.iter()) {
            for (i, d) in b.mkdirs.iter().enumerate() {
                if b.file && i + 1 == b.mkdirs.len() {
                    let f = libc::open(
                        d.as_ptr(),
                        libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                        0o600,
                    );
                    if f < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    libc::close(f);
                } else if libc::mkdir(d.as_ptr(), 0o755) != 0
                    && io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST)
                {
                    return Err(io::Error::last_os_error());
                }
            }
            let target = b.mkdirs.last().expect("a mount point");
            let mut buf = [0u8; 40];
            check(libc::mount(
                fd_path(fd, &mut buf),
                target.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ))?;
            libc::close(fd);
        }
    }
    Ok(())
}

/// The private tmp of one run: what was done to the command.
pub enum Applied {
    Namespace,
    /// `TMPDIR` in the run directory (the warning is the caller's to print).
    Fallback(String),
}

/// Is the private tmp on for these settings, with `default` for the command?
pub fn wanted(settings: &crate::config::Settings, default: bool) -> bool {
    settings.private_tmp.unwrap_or(default)
}

/// Sets the command up to run with a private `/tmp` (see the module docs). `keep` are
/// directories the run needs (bound back when they are under a private tmp). Call before
/// `supervise::spawn` (its own pre-exec step must come after the namespace is made: entering a
/// user namespace resets the parent-death signal).
pub fn apply(
    cmd: &mut Command,
    settings: &crate::config::Settings,
    run_dir: &Path,
    keep: &[PathBuf],
) -> io::Result<Applied> {
    // A TMPDIR seal.toml's [env] or a golden case's `env` sets is kept.
    let user_tmpdir = settings.env.contains_key("TMPDIR")
        || cmd.get_envs().any(|(k, v)| k == "TMPDIR" && v.is_some());
    match mode() {
        Mode::Namespace { user } => {
            if !user_tmpdir {
                cmd.env_remove("TMPDIR");
            }
            let binds = binds(keep)?;
            // SAFETY: getuid/getgid have no preconditions.
            let maps = IdMaps::new(unsafe { (libc::getuid(), libc::getgid()) });
            let plan = Plan {
                user: *user,
                maps,
                binds,
            };
            use std::os::unix::process::CommandExt;
            // SAFETY: `enter` only makes async-signal-safe calls on data prepared here.
            unsafe {
                cmd.pre_exec(move || enter(plan.user, &plan.maps, &plan.binds));
            }
            Ok(Applied::Namespace)
        }
        Mode::Fallback(why) => {
            let dir = run_dir.join("tmp");
            std::fs::create_dir(&dir)?;
            if !user_tmpdir {
                cmd.env("TMPDIR", &dir);
            }
            Ok(Applied::Fallback(format!(
                "--private-tmp: {why}; TMPDIR points to a private directory instead, and /tmp stays shared"
            )))
        }
    }
}

/// The private tmp directory a path lies under, if any.
fn tmp_root(p: &Path) -> Option<&'static str> {
    TMP_DIRS.into_iter().find(|d| p.starts_with(d))
}

/// Bind mounts for the paths of `keep` that lie under a private tmp (outermost only): a
/// directory, or a file (kept as itself when it lies in the tmp directory itself, else its
/// directory is kept).
fn binds(keep: &[PathBuf]) -> io::Result<Vec<Bind>> {
    let mut dirs: Vec<PathBuf> = keep
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .filter_map(|p| {
            let root = Path::new(tmp_root(&p)?);
            if p.is_dir() || p.parent() == Some(root) {
                Some(p)
            } else {
                p.parent().map(Path::to_path_buf)
            }
        })
        .filter(|p| tmp_root(p).is_some_and(|r| p.as_path() != Path::new(r)))
        .collect();
    dirs.sort();
    dirs.dedup();
    let mut outer: Vec<PathBuf> = Vec::new();
    for d in dirs {
        if !outer.iter().any(|o| d.starts_with(o)) {
            outer.push(d);
        }
    }
    outer.truncate(MAX_BINDS);
    let mut out = Vec::new();
    for d in outer {
        let root = Path::new(tmp_root(&d).expect("filtered"));
        let path = CString::new(d.as_os_str().as_bytes())?;
        let mut mkdirs = Vec::new();
        let mut cur = root.to_path_buf();
        for comp in d.strip_prefix(root).expect("under root").components() {
            cur.push(comp);
            mkdirs.push(CString::new(cur.as_os_str().as_bytes())?);
        }
        out.push(Bind {
            path,
            mkdirs,
            file: !d.is_dir(),
        });
    }
    Ok(out)
}

/// The paths a run needs kept visible: its working directory, seal's cache (the shim), the
/// run directory, the program (its directory, or the file itself when it lies in /tmp), and
/// files or directories under /tmp that its arguments or environment name (`python3
/// /tmp/x/script.py`, `--config=/tmp/x/c.toml`, `CONFIG=/tmp/x/c.toml`): they existed before
/// the run, so hiding them would only make the command fail.
pub fn needed(run_dir: &Path, cwd: Option<&Path>, argv: &[std::ffi::OsString]) -> Vec<PathBuf> {
    let program = argv.first().map(|p| p.as_os_str()).unwrap_or_default();
    let mut keep = vec![run_dir.to_path_buf()];
    let here = cwd
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok());
    let env: Vec<std::ffi::OsString> = std::env::vars_os().map(|(_, v)| v).collect();
    let named = argv[1.min(argv.len())..]
        .iter()
        .chain(env.iter())
        .filter_map(|a| {
            // `--opt=PATH` names PATH too.
            let b = a.as_bytes();
            let b = b.iter().position(|&c| c == b'=').map_or(b, |i| &b[i + 1..]);
            let p = Path::new(std::ffi::OsStr::from_bytes(b));
            let p = match (&here, p.is_absolute()) {
                (_, true) => p.to_path_buf(),
                (Some(d), false) if !b.is_empty() => d.join(p),
                _ => return None,
            };
            (tmp_root(&p).is_some() && p.exists()).then_some(p)
        })
        .collect::<Vec<_>>();
    keep.extend(named);
    keep.extend(here);
    keep.extend(crate::run::shim::cache_dir().ok());
    if let Some(p) = crate::run::exec_check::resolve(program) {
        let p = match cwd {
            Some(d) if !Path::new(program).is_absolute() && program.as_bytes().contains(&b'/') => {
                d.join(program)
            }
            _ => p,
        };
        // Its directory as named (not where a link in it points), or the file itself when it
        // lies in /tmp itself.
        match p.parent() {
            Some(d) if tmp_root(d).is_some_and(|r| d != Path::new(r)) => keep.push(d.into()),
            _ => keep.push(p),
        }
    }
    // Programs the command starts from PATH directories under /tmp.
    if let Some(path) = std::env::var_os("PATH") {
        keep.extend(std::env::split_paths(&path).filter(|d| tmp_root(d).is_some()));
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_outermost_directories_under_tmp_are_bound() {
        let base = tempfile::Builder::new()
            .prefix("seal-ptmp")
            .tempdir_in("/tmp")
            .unwrap();
        let inner = base.path().join("a/b");
        std::fs::create_dir_all(&inner).unwrap();
        let b = binds(&[
            inner.clone(),
            base.path().to_path_buf(),
            PathBuf::from("/"),
            PathBuf::from("/tmp"),
        ])
        .unwrap();
        assert_eq!(b.len(), 1);
        let last = b[0].mkdirs.last().unwrap().to_str().unwrap().to_string();
        assert_eq!(
            Path::new(&last),
            std::fs::canonicalize(base.path()).unwrap()
        );
    }
}
