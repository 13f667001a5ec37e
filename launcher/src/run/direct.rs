//! Starting a sealed run's root without std's `posix_spawn`, when nothing has to happen between
//! fork and exec (libseal ties the root to seal: see `supervise::spawn`).
//!
//! std copies the environment twice (into the command, then into the child's C strings: with
//! the 32 KiB stack pad that is 16 fresh heap pages), and glibc's `posix_spawn` child resets
//! every signal disposition one `rt_sigaction` at a time (~128 calls). Here the root's
//! environment points at seal's own strings for every variable seal does not change, the pad
//! is a tail of a constant ([`seal_abi::pad`]) the kernel copies from, and the child
//! (`clone(CLONE_VM | CLONE_VFORK)` on a stack of its own, like `posix_spawn`) resets only the
//! signals seal handles before `execve`.
//!
//! The environment is the one std would have built: seal's, changed by the command's
//! `env`/`env_remove`, sorted by name (std keeps it in a `BTreeMap`), so the root sees the same
//! order either way.

use std::collections::BTreeMap;
use std::ffi::{c_char, CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::process::Command;

use seal_abi::pad::{self, Pad};
use seal_abi::settings as senv;

extern "C" {
    static environ: *const *const c_char;
}

/// What the kernel gets: the file to run, the arguments and the environment, as C strings
/// (owned here or seal's own), NULL-terminated pointer arrays.
pub struct Prepared {
    program: CString,
    _owned: Vec<CString>,
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
}

/// `cmd` (its program, `argv0` as typed, its arguments and environment changes) for a direct
/// spawn, padded when `pad`. `None` when a string holds a NUL or the pad is not a constant's
/// tail: then std spawns it.
pub fn prepare(cmd: &Command, argv0: &OsStr, pad: bool) -> Option<Prepared> {
    let program = CString::new(cmd.get_program().as_bytes()).ok()?;
    let mut owned = Vec::new();
    let mut argv = Vec::new();
    for a in std::iter::once(argv0).chain(cmd.get_args()) {
        let c = CString::new(a.as_bytes()).ok()?;
        argv.push(c.as_ptr());
        owned.push(c);
    }
    // Name -> entry: seal's own (as `std::env::vars_os` reads them: the name runs to the first
    // `=` after its first byte; the last of a repeated name wins), then the command's changes.
    let mut env: BTreeMap<Vec<u8>, *const c_char> = BTreeMap::new();
    // SAFETY: environ is libc's NULL-terminated array of C strings; seal is single-threaded
    // here and changes no variable of its own while the arrays are in use.
    unsafe {
        let mut p = environ;
        while !p.is_null() && !(*p).is_null() {
            let entry = std::ffi::CStr::from_ptr(*p).to_bytes();
            if let Some(eq) = entry
                .get(1..)
                .and_then(|r| r.iter().position(|&c| c == b'='))
            {
                env.insert(entry[..eq + 1].to_vec(), *p);
            }
            p = p.add(1);
        }
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => {
                let mut e = k.as_bytes().to_vec();
                e.push(b'=');
                e.extend_from_slice(v.as_bytes());
                let c = CString::new(e).ok()?;
                env.insert(k.as_bytes().to_vec(), c.as_ptr());
                owned.push(c);
            }
            None => {
                env.remove(k.as_bytes());
            }
        }
    }
    env.remove(senv::PAD.as_bytes());
    let mut envp: Vec<*const c_char> = env.into_values().collect();
    if pad {
        // SAFETY: every pointer is a live C string (ours or environ's).
        let len = |p: &*const c_char| unsafe { std::ffi::CStr::from_ptr(*p) }.count_bytes() + 1;
        let strings = program.as_bytes().len()
            + 1
            + argv.iter().map(len).sum::<usize>()
            + envp.iter().map(len).sum::<usize>();
        let c = |b: &'static [u8]| b.as_ptr() as *const c_char;
        match pad::plan(strings, argv.len() + envp.len()) {
            Pad::One(a) => envp.push(c(a)),
            Pad::Two(a, b) => envp.extend([c(a), c(b)]),
            Pad::Written(..) => return None,
        }
    }
    argv.push(std::ptr::null());
    envp.push(std::ptr::null());
    Some(Prepared {
        program,
        _owned: owned,
        argv,
        envp,
    })
}

/// What the child runs instead of exec'ing a [`Prepared`]: system calls only, on memory made
/// before ([`spawn_with`]). It execs, or returns the error that ends the child, or `Ok` when
/// it did nothing (then the caller starts the command another way).
pub type Exec<'a> = &'a dyn Fn() -> io::Result<()>;

/// What the child reads and writes (on seal's memory: `CLONE_VM`).
struct ChildArgs<'a> {
    p: Result<&'a Prepared, Exec<'a>>,
    /// The signals to put back to their default action (seal's handlers; SIGPIPE, which seal
    /// ignores).
    reset: &'a [libc::c_int],
    mask: libc::sigset_t,
    /// The exec's error (0: it ran).
    errno: libc::c_int,
    /// The child's [`Exec`] did nothing.
    nothing: bool,
}

extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's ChildArgs, alive while the parent waits (CLONE_VFORK). Only
    // async-signal-safe calls that take no locks: sigaction, sigprocmask, execve, _exit (and
    // an `Exec`'s, by its contract).
    unsafe {
        let a = &mut *(arg as *mut ChildArgs);
        for &sig in a.reset {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
        libc::sigprocmask(libc::SIG_SETMASK, &a.mask, std::ptr::null_mut());
        match a.p {
            Ok(p) => {
                libc::execve(p.program.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr());
                a.errno = *libc::__errno_location();
            }
            Err(exec) => match exec() {
                Ok(()) => a.nothing = true,
                Err(e) => a.errno = e.raw_os_error().unwrap_or(libc::EIO),
            },
        }
        libc::_exit(127)
    }
}

/// Starts `p` with signal mask `mask` and the signals in `reset` at their default action;
/// returns its pid. An exec that fails is reaped here and returned as its error.
pub fn spawn(
    p: &Prepared,
    reset: &[libc::c_int],
    mask: &libc::sigset_t,
) -> io::Result<libc::pid_t> {
    // (A `Prepared` is exec'd or its error returned: never "nothing".)
    spawn_in(Ok(p), reset, mask)?.ok_or_else(|| io::Error::other("the child started nothing"))
}

/// [`spawn`], the child running `exec` (which execs itself) instead of a [`Prepared`]:
/// `None` when it did nothing (the child is reaped).
pub fn spawn_with(
    exec: Exec,
    reset: &[libc::c_int],
    mask: &libc::sigset_t,
) -> io::Result<Option<libc::pid_t>> {
    spawn_in(Err(exec), reset, mask)
}

fn spawn_in(
    p: Result<&Prepared, Exec>,
    reset: &[libc::c_int],
    mask: &libc::sigset_t,
) -> io::Result<Option<libc::pid_t>> {
    // The child's stack: allocated, never filled (zeroing it faulted in all 16 pages; the child
    // touches one or two).
    const STACK: usize = 64 << 10;
    let mut stack: Vec<u8> = Vec::with_capacity(STACK);
    let mut args = ChildArgs {
        p,
        reset,
        mask: *mask,
        errno: 0,
        nothing: false,
    };
    // SAFETY: every signal blocked across the clone (a handler of seal's must not run on the
    // child, which shares seal's memory); the child runs on its own stack, 16-byte aligned at
    // the top, and the parent resumes once it has exec'd or exited (CLONE_VFORK).
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let top = (stack.as_mut_ptr().add(STACK) as usize & !15) as *mut libc::c_void;
        // (`stack` is only ever written by the child, through `top`, never read as a Vec.)
        let pid = libc::clone(
            child,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &mut args as *mut ChildArgs as *mut libc::c_void,
        );
        let clone_err = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(clone_err);
        }
        // The child is done with the arguments: it exec'd or exited.
        let errno = std::ptr::read_volatile(&args.errno);
        let nothing = std::ptr::read_volatile(&args.nothing);
        if errno != 0 || nothing {
            let mut status = 0;
            while libc::waitpid(pid, &mut status, 0) < 0
                && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
            {}
        }
        if errno != 0 {
            return Err(io::Error::from_raw_os_error(errno));
        }
        Ok((!nothing).then_some(pid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[*const c_char]) -> Vec<String> {
        v.iter()
            .take_while(|p| !p.is_null())
            // SAFETY: live C strings of a Prepared.
            .map(|p| {
                unsafe { std::ffi::CStr::from_ptr(*p) }
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    }

    #[test]
    fn the_environment_is_what_std_would_give_and_the_pad_makes_a_whole_block() {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new("/bin/echo");
        cmd.arg0("e")
            .arg("x")
            .env("ZZ_SEAL_TEST", "1")
            .env("PATH", "/p")
            .env_remove("HOME");
        let p = prepare(&cmd, OsStr::new("e"), false).unwrap();
        assert_eq!(strings(&p.argv), ["e", "x"]);
        let got = strings(&p.envp);
        let mut want: Vec<String> = std::env::vars_os()
            .filter(|(k, _)| k != "HOME" && k != "PATH" && k != senv::PAD)
            .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
            .chain(["PATH=/p".into(), "ZZ_SEAL_TEST=1".into()])
            .collect();
        want.sort_by(|a, b| {
            let key = |s: &str| s.as_bytes()[..s[1..].find('=').unwrap() + 1].to_vec();
            key(a).cmp(&key(b))
        });
        assert_eq!(got, want);

        let padded = prepare(&cmd, OsStr::new("e"), true).unwrap();
        let env = strings(&padded.envp);
        assert_eq!(&env[..got.len()], &got[..]);
        assert!(env[got.len()..].iter().all(|e| e.contains("LIBSEAL_PAD=")));
        let all: usize = b"/bin/echo\0".len()
            + strings(&padded.argv)
                .iter()
                .chain(&env)
                .map(|s| s.len() + 1)
                .sum::<usize>();
        let n = padded.argv.len() - 1 + padded.envp.len() - 1;
        assert_eq!((all + 8 * (n + n % 2) - 8) % senv::LAYOUT_BLOCK, 0);
    }

    #[test]
    fn a_failed_exec_is_its_error() {
        let cmd = Command::new("/nonexistent/seal-direct-test");
        let p = prepare(&cmd, OsStr::new("x"), true).unwrap();
        // SAFETY: an empty signal set.
        let mask = unsafe {
            let mut m: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut m);
            m
        };
        let e = spawn(&p, &[], &mask).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let cmd = Command::new("/bin/sh");
        let mut cmd = cmd;
        cmd.args(["-c", "exit 7"]);
        let p = prepare(&cmd, OsStr::new("sh"), true).unwrap();
        let pid = spawn(&p, &[], &mask).unwrap();
        let mut status = 0;
        // SAFETY: our child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert_eq!(libc::WEXITSTATUS(status), 7);
    }
}
