//! A static root command without the trampoline: the launcher's forked child sets up the
//! supervision itself (`seal_abi::supervised::handover`, the code libseal's exec hook runs)
//! and execs the static binary directly, instead of exec'ing `seal __exec-static` (a 7.7 MB
//! image with libseal loaded) to do it.
//!
//! Its supervisor is forked beforehand by the run's watch (`server::serve_root`, on one end of
//! `server::root_pair`); the child sends its request on the other end.
//!
//! The command is built as for the trampoline (`seal __exec-static PATH ARGV0 ARGS…`): when anything fails
//! before the supervisor holds the listener, the child returns and std execs that command,
//! which sets the supervision up (or reports the image unsealed) as before.
//!
//! The new image gets exactly the environment the trampoline's libseal would have given it:
//! the trampoline's own (sorted by name, as std and `direct` hand it over) without seal's variables,
//! then `LD_PRELOAD`, the run's settings, the second image's per-process variables and the
//! stack pad, in the order libseal's `env::build` writes them. Same bytes, same stack: outputs
//! stay those of the trampoline's runs.

use std::collections::BTreeMap;
use std::ffi::{c_char, CString, OsStr, OsString};
use std::io;
use std::os::fd::{IntoRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering::Relaxed};

use seal_abi::pad::{self, Pad};
use seal_abi::settings::{self as senv, PER_PROCESS, VARS};
use seal_abi::supervised::handover::{self, Handover};
use seal_abi::supervised::{EXEC_STATIC_ARG, SUPERVISOR_LINK};

/// Everything the child needs, made before the fork: between fork and exec (the launcher may
/// run other threads: `golden --jobs`) only system calls on these buffers.
pub struct RootExec {
    path: CString,
    _owned: Vec<CString>,
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
    /// The `LIBSEAL_*` entries of `envp` (no pad), NULL-terminated: the request's variables.
    vars: Vec<*const u8>,
    /// The child's end of the socket pair with the root's supervisor (`SOCK_CLOEXEC`); the
    /// launcher closes its copy once the child is spawned ([`RootExec::spawned`]).
    sock: AtomicI32,
    /// One shared page: the child writes 1 in it when it execs the image under supervision.
    flag: *mut u8,
    /// Is the image a static-pie one (its filter sends forks from every address)?
    pie: bool,
    /// What libseal's exec hook records for the image (`static-binary-supervised`).
    pub program: OsString,
}

// SAFETY: the pointers point into `_owned`, static pad constants, and a shared page that
// lives as long as this value; nothing writes them but the child.
unsafe impl Send for RootExec {}
// SAFETY: as above.
unsafe impl Sync for RootExec {}

impl Drop for RootExec {
    fn drop(&mut self) {
        self.spawned();
        // SAFETY: our own page, mapped in `prepare`.
        unsafe { libc::munmap(self.flag.cast(), 4096) };
    }
}

impl RootExec {
    /// For `cmd`, the trampoline command (`seal __exec-static PATH ARGV0 ARGS…`, its
    /// environment complete), as the run's `program` (what libseal would report), with `sock`,
    /// the child's end of the socket pair with the root's supervisor. `None` when `cmd` is not
    /// one or a string holds a NUL (`sock` is closed then: the supervisor ends).
    pub fn prepare(
        cmd: &Command,
        run_dir: &Path,
        flags: u32,
        program: &Path,
        sock: OwnedFd,
    ) -> Option<RootExec> {
        let args: Vec<&OsStr> = cmd.get_args().collect();
        if args.first() != Some(&OsStr::new(EXEC_STATIC_ARG)) || args.len() < 3 {
            return None;
        }
        let path = CString::new(args[1].as_bytes()).ok()?;
        let mut owned = Vec::new();
        let mut argv = Vec::new();
        for a in &args[2..] {
            let c = CString::new(a.as_bytes()).ok()?;
            argv.push(c.as_ptr());
            owned.push(c);
        }
        let given = trampoline_env(cmd);
        let entries = image_env(&given, link_name(run_dir).as_bytes())?;
        let mut envp = Vec::new();
        let mut vars = Vec::new();
        let mut strings = path.as_bytes().len() + 1;
        strings += owned.iter().map(|c| c.as_bytes().len() + 1).sum::<usize>();
        for e in entries {
            strings += e.len() + 1;
            let c = CString::new(e).ok()?;
            if c.as_bytes().starts_with(senv::PREFIX.as_bytes()) {
                vars.push(c.as_ptr().cast());
            }
            envp.push(c.as_ptr());
            owned.push(c);
        }
        if flags & seal_abi::flags::LAYOUT != 0 {
            let c = |b: &'static [u8]| b.as_ptr() as *const c_char;
            match pad::plan(strings, argv.len() + envp.len()) {
                Pad::One(a) => envp.push(c(a)),
                Pad::Two(a, b) => envp.extend([c(a), c(b)]),
                Pad::Written(n, b) => {
                    // `LIBSEAL_PAD=xxx…` (~30 KiB) written once, into a buffer with room for
                    // its NUL: each copy of it was 8 pages faulted in on the root's path.
                    let mut long = Vec::with_capacity(n);
                    long.extend_from_slice(senv::PAD.as_bytes());
                    long.push(b'=');
                    long.resize(n - 1, b'x');
                    let long = CString::new(long).ok()?;
                    envp.extend([long.as_ptr(), c(b)]);
                    owned.push(long);
                }
            }
        }
        argv.push(std::ptr::null());
        envp.push(std::ptr::null());
        vars.push(std::ptr::null());
        // SAFETY: an anonymous shared page, unmapped on drop.
        let flag = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if flag == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: `path` is a C string.
        let pie = unsafe { handover::is_static_pie(path.as_ptr().cast()) };
        Some(RootExec {
            pie,
            path,
            _owned: owned,
            argv,
            envp,
            vars,
            sock: AtomicI32::new(sock.into_raw_fd()),
            flag: flag.cast(),
            program: program.as_os_str().to_owned(),
        })
    }

    /// In the child, last before std's exec of the trampoline: sets the supervision up and
    /// execs the image. Returns `Ok` (std then execs the trampoline) when nothing was
    /// installed; an error when the image's exec failed after the listener was handed over.
    /// System calls only.
    pub fn exec(&self) -> io::Result<()> {
        let sock = self.sock.load(Relaxed);
        if sock < 0 {
            return Ok(());
        }
        handover::prctl(handover::PR_SET_PTRACER, -1);
        // SAFETY: getpid has no preconditions (the real pid: the launcher is unsealed).
        let pid = unsafe { libc::getpid() };
        // SAFETY: `vars` holds C strings up to its NULL.
        if !unsafe { handover::request(sock, pid, None, &self.vars) } {
            handover::give_up(sock);
            return Ok(());
        }
        match handover::hand_over(sock, self.pie, false) {
            Handover::Refused => {
                handover::give_up(sock);
                return Ok(());
            }
            // (Unanswered is a READY's: none is waited for here.)
            Handover::Ready | Handover::Unanswered => {}
        }
        // SAFETY: our shared page; the parent reads it after the spawn.
        unsafe { *self.flag = 1 };
        // SAFETY: NUL-terminated path and NULL-terminated vectors that outlive the call.
        unsafe { libc::execve(self.path.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr()) };
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(handover::NO_SUPERVISOR) {
            const SAY: &[u8] = b"seal: the static binary's supervisor died before it ran: \
                its exec and every call seal supervises fail\n";
            // SAFETY: a write of a constant to stderr.
            unsafe { libc::write(2, SAY.as_ptr().cast(), SAY.len()) };
        }
        // SAFETY: as above.
        unsafe { *self.flag = 0 };
        handover::exec_failed(sock, err.raw_os_error().unwrap_or(0));
        Err(err)
    }

    /// In the launcher, once the child is spawned: closes the launcher's copy of the child's
    /// end, so that the supervisor sees the end of its socket when the child is gone without a
    /// request (it went the trampoline's way, or failed).
    pub fn spawned(&self) {
        let fd = self.sock.swap(-1, Relaxed);
        if fd >= 0 {
            // SAFETY: our descriptor, closed once.
            unsafe { libc::close(fd) };
        }
    }

    /// Did the child exec the image itself (no trampoline)? Then no libseal recorded it.
    pub fn went_direct(&self) -> bool {
        // SAFETY: our shared page; the child has exec'd or exited by now (spawn returned).
        unsafe { std::ptr::read_volatile(self.flag) == 1 }
    }
}

/// The environment `cmd` starts with, in the order std (and `direct`) gives it: by name.
/// Without `LIBSEAL_PAD`, which [`image_env`] drops with seal's other variables (the
/// command's is ~30 KiB, copied for nothing).
fn trampoline_env(cmd: &Command) -> Vec<(OsString, OsString)> {
    let pad = OsStr::new(senv::PAD);
    let mut env: BTreeMap<OsString, OsString> =
        std::env::vars_os().filter(|(k, _)| k != pad).collect();
    for (k, v) in cmd.get_envs().filter(|(k, _)| *k != pad) {
        match v {
            Some(v) => env.insert(k.to_owned(), v.to_owned()),
            None => env.remove(k),
        };
    }
    env.into_iter().collect()
}

/// The name of the run directory's `seal` link's target (the trampoline's program, whose
/// 16-bit name libseal appends to `LIBSEAL_NAMES`).
fn link_name(run_dir: &Path) -> OsString {
    // The link's target is this executable (`make_link`), whose path the kernel keeps
    // resolved: one `readlink`, where resolving the link took one a component.
    let link = run_dir.join(SUPERVISOR_LINK);
    let target = std::env::current_exe()
        .or_else(|_| std::fs::canonicalize(&link))
        .unwrap_or(link);
    target.file_name().unwrap_or_default().to_owned()
}

/// The entries of the image's environment, given the trampoline's (`given`), as libseal
/// builds them for its exec (`shim/src/process/env`): seal's variables hidden, `LD_PRELOAD`
/// with libseal first (appended when there was none of the user's), the settings, the
/// per-process variables of the trampoline's second image. No pad.
fn image_env(given: &[(OsString, OsString)], trampoline: &[u8]) -> Option<Vec<Vec<u8>>> {
    let get = |name: &str| {
        given
            .iter()
            .find(|(k, _)| k.as_bytes() == name.as_bytes())
            .map(|(_, v)| v.as_bytes())
    };
    let shim = get(senv::SHIM)?;
    let mut out = Vec::new();
    let mut preload = false;
    for (k, v) in given {
        let (k, v) = (k.as_bytes(), v.as_bytes());
        if k.starts_with(senv::PREFIX.as_bytes()) {
            continue;
        }
        let mut e = k.to_vec();
        e.push(b'=');
        if k == b"LD_PRELOAD" {
            let rest: Vec<&[u8]> = v
                .split(|&c| c == b':' || c == b' ')
                .filter(|p| !p.is_empty() && *p != shim)
                .collect();
            if rest.is_empty() {
                continue;
            }
            preload = true;
            e.extend_from_slice(shim);
            for p in rest {
                e.push(b':');
                e.extend_from_slice(p);
            }
        } else {
            e.extend_from_slice(v);
        }
        out.push(e);
    }
    if !preload {
        out.push([b"LD_PRELOAD=", shim].concat());
    }
    for name in VARS {
        out.push([name.as_bytes(), b"=", get(name)?].concat());
    }
    let names = senv::push_name(0, senv::image_name(trampoline));
    for name in PER_PROCESS {
        let value = match name {
            senv::CLOCK | senv::CHILDREN | senv::EXE => "0".to_string(),
            senv::VPID => seal_abi::ROOT_VPID.to_string(),
            senv::PPID => seal_abi::LAUNCHER_VPID.to_string(),
            senv::LINEAGE => format!("{:016x}", seal_abi::ROOT_LINEAGE),
            senv::NAMES => format!("{names:016x}"),
            _ => "1".to_string(), // GEN: the trampoline was the first
        };
        out.push([name.as_bytes(), b"=", value.as_bytes()].concat());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trampoline's environment: `user` entries, then every run variable (`LIBSEAL_SHIM`
    /// = `/s.so`), sorted by name as std hands it over.
    fn given(user: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        let mut env: BTreeMap<OsString, OsString> =
            user.iter().map(|(k, v)| (k.into(), v.into())).collect();
        for name in VARS {
            let v = if name == senv::SHIM { "/s.so" } else { "v" };
            env.insert(name.into(), v.into());
        }
        env.insert(senv::PAD.into(), "xxxx".into());
        env.into_iter().collect()
    }

    fn text(entries: &[Vec<u8>]) -> Vec<String> {
        entries
            .iter()
            .map(|e| String::from_utf8_lossy(e).into_owned())
            .collect()
    }

    #[test]
    fn the_image_gets_the_environment_libseal_builds_for_the_trampolines_exec() {
        let user = [("B", "2"), ("A", "1"), ("LD_PRELOAD", "/s.so"), ("Z", "9")];
        let out = text(&image_env(&given(&user), b"seal").unwrap());
        // The user's entries in order, libseal's preload appended (nothing of the user's was
        // preloaded), the settings, the second image's per-process variables.
        assert_eq!(&out[..4], ["A=1", "B=2", "Z=9", "LD_PRELOAD=/s.so"]);
        for (i, name) in VARS.iter().enumerate() {
            assert!(out[4 + i].starts_with(&format!("{name}=")), "{out:?}");
        }
        let names = senv::push_name(0, senv::image_name(b"seal"));
        let tail = &out[4 + VARS.len()..];
        assert_eq!(
            tail,
            [
                "LIBSEAL_CLOCK=0".to_string(),
                "LIBSEAL_VPID=1000".into(),
                "LIBSEAL_PPID=999".into(),
                format!("LIBSEAL_LINEAGE={:016x}", seal_abi::ROOT_LINEAGE),
                "LIBSEAL_CHILDREN=0".into(),
                "LIBSEAL_GEN=1".into(),
                "LIBSEAL_EXE=0".into(),
                format!("LIBSEAL_NAMES={names:016x}"),
            ]
        );
    }

    #[test]
    fn the_users_preload_keeps_its_place_after_libseal() {
        let user = [("LD_PRELOAD", "/s.so:/u.so /w.so"), ("Z", "9")];
        let out = text(&image_env(&given(&user), b"seal").unwrap());
        assert_eq!(&out[..2], ["LD_PRELOAD=/s.so:/u.so:/w.so", "Z=9"]);
        assert_eq!(
            out.iter().filter(|e| e.starts_with("LD_PRELOAD=")).count(),
            1
        );
    }
}
