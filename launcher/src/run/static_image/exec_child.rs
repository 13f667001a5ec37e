//! An image's own exec of a static binary. A Go program starts its children with a raw
//! `execve` (os/exec), which no hook of libseal sees: a static child would keep its vDSO and
//! run with the parent's filter, unsealed. The filter sends `execve` here; for a static target
//! the supervisor follows the calling process to its exec stop (ptrace, exec events only) and
//! sets the new image up as it set up the first one (`AT_RANDOM`; in a fresh process its clock
//! page: a static C image's ticking one, `serve/ticking.rs`, a Go image's still one,
//! `serve/go_image.rs`; where that fails the vDSO removed), then detaches and serves the new
//! image's calls through the same listener. A dynamic target runs as it is (libseal loads into
//! it).

use super::remote::{detach_running, read};

/// What an exec call names: `execve(path, argv, envp)`, or `execveat(dirfd, path, argv,
/// envp, flags)` (glibc's `fexecve`: an empty path and `AT_EMPTY_PATH`, the file `dirfd`).
pub struct Target {
    dirfd: i32,
    pub path: u64,
    pub argv: u64,
    flags: i32,
}

impl Target {
    /// The exec call of notification `n` (`execve` or `execveat`).
    pub fn of(n: &super::notif::Notif) -> Target {
        match n.nr as u32 {
            seal_abi::supervised::EXEC_AT => Target {
                dirfd: n.args[0] as i32,
                path: n.args[1],
                argv: n.args[2],
                flags: n.args[4] as i32,
            },
            _ => Target {
                dirfd: libc::AT_FDCWD,
                path: n.args[0],
                argv: n.args[1],
                flags: 0,
            },
        }
    }

    /// Is the file thread `tid` asks to exec a static ELF executable (no `PT_INTERP`, not a
    /// script)?
    pub fn is_static(&self, tid: i32) -> bool {
        let name = read_cstr(tid, self.path);
        let file = match (&name[..], self.dirfd) {
            ([], fd) if self.flags & libc::AT_EMPTY_PATH != 0 && fd >= 0 => {
                std::path::PathBuf::from(format!("/proc/{tid}/fd/{fd}"))
            }
            ([], _) => return false,
            ([b'/', ..], _) | (_, libc::AT_FDCWD) => as_seen_by(tid, &name),
            (_, fd) => {
                use std::os::unix::ffi::OsStrExt;
                let rel = std::ffi::OsStr::from_bytes(&name);
                std::path::Path::new(&format!("/proc/{tid}/fd/{fd}")).join(rel)
            }
        };
        let mut head = [0u8; 4096];
        let n = std::fs::File::open(file)
            .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
            .unwrap_or(0);
        is_static_elf(&head[..n])
    }
}

/// The path `name` as thread `tid` would open it (`execve`'s), for the supervisor to open: relative to the
/// thread's working directory, and `/proc/self` and `/proc/thread-self` its own, not the
/// supervisor's. busybox runs its applets by `execve("/proc/self/exe")` (`sh -c 'busybox
/// date'`): read here as the supervisor's own executable (dynamic), it was not followed, and
/// the applet read the real time from its vDSO.
fn as_seen_by(tid: i32, name: &[u8]) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let path = |b: &[u8]| std::path::PathBuf::from(std::ffi::OsStr::from_bytes(b));
    for (prefix, id) in [(&b"/proc/self"[..], 0), (b"/proc/thread-self", 1)] {
        let rest = match name.strip_prefix(prefix) {
            Some(r) if r.is_empty() || r[0] == b'/' => r,
            _ => continue,
        };
        let own = match id {
            0 => super::remote::tgid_of(tid).unwrap_or(tid),
            _ => tid,
        };
        return path(&[format!("/proc/{own}").as_bytes(), rest].concat());
    }
    match name.first() {
        Some(b'/') => path(name),
        _ => std::path::Path::new(&format!("/proc/{tid}/cwd")).join(path(name)),
    }
}

/// The NUL-terminated string at `addr` of thread `tid` (at most 4 KiB), without its NUL;
/// empty when it cannot be read.
pub fn read_cstr(tid: i32, addr: u64) -> Vec<u8> {
    let mut name = [0u8; 4096];
    // Read in pieces (a read across an unmapped page fails as a whole).
    let mut len = 0;
    while len < name.len() {
        let mut chunk = [0u8; 256];
        if !read(tid, addr + len as u64, &mut chunk) {
            break;
        }
        name[len..len + 256].copy_from_slice(&chunk);
        match chunk.iter().position(|&b| b == 0) {
            Some(end) => {
                len += end;
                break;
            }
            None => len += 256,
        }
    }
    name[..len.min(name.len())].to_vec()
}

/// What thread `tid` execs (its `execve` path at `path`, its argument vector at `argv`), as a
/// key: the program's file name without its directory (a build's temporary directory has a
/// name of the run's drawing) and its arguments after the first (64 at most). Never 0.
pub fn exec_key(tid: i32, path: u64, argv: u64) -> u64 {
    let name = read_cstr(tid, path);
    let base = name.rsplit(|&b| b == b'/').next().unwrap_or(&name);
    let mut key = seal_abi::name_hash(base);
    for i in 1..64u64 {
        let mut p = 0u64;
        if argv == 0 || !read(tid, argv + 8 * i, &mut p) || p == 0 {
            break;
        }
        key = seal_abi::mix64(key ^ seal_abi::name_hash(&read_cstr(tid, p)));
    }
    key | 1
}

/// Is `head` (a file's first bytes) a 64-bit ELF executable without `PT_INTERP`?
fn is_static_elf(head: &[u8]) -> bool {
    if head.len() < 64 || &head[..4] != b"\x7fELF" || head[4] != 2 {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(head[32..40].try_into().unwrap_or([0; 8])) as usize;
    let (size, count) = (u16_at(54), u16_at(56));
    const PT_INTERP: u32 = 3;
    (0..count).all(|i| {
        let at = phoff + i * size;
        head.get(at..at + 4)
            .is_some_and(|t| u32::from_le_bytes([t[0], t[1], t[2], t[3]]) != PT_INTERP)
    })
}

/// Attaches to thread `tid` for its exec event; false when it cannot be traced.
pub fn seize(tid: i32) -> bool {
    // Stops are reported only while SIGCHLD is not ignored.
    // SAFETY: resetting one signal's disposition in this one-threaded process.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
    // SAFETY: PTRACE_SEIZE with an options word.
    unsafe {
        libc::ptrace(
            libc::PTRACE_SEIZE,
            tid,
            0,
            libc::PTRACE_O_TRACEEXEC as libc::c_long,
        ) == 0
    }
}

/// Waits (at most 2 s) for the exec stop of the process `tid` belongs to, lets `at_stop` set
/// the new image up (given its pid), and detaches. False when the exec failed and it went on
/// (detached then) or ended.
pub fn follow(tid: i32, at_stop: impl FnOnce(i32)) -> bool {
    // Only this tracee's stops: other threads may be traced to a call's exit meanwhile
    // (`trace_call.rs`), and a stop of theirs taken here would be lost to them. An exec from
    // a thread that is not its process's leader is reported as the leader's: the thread
    // takes the leader's tid (its own then names nothing, `ECHILD`), so that tid is waited
    // for next.
    let tgid = super::remote::tgid_of(tid).unwrap_or(tid);
    let mut who = tid;
    let wake = ChildWake::new();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while std::time::Instant::now() < give_up {
        let mut st = 0;
        // SAFETY: waitpid on our tracee, without blocking.
        let r = unsafe { libc::waitpid(who, &mut st, libc::WNOHANG | libc::__WALL) };
        if r < 0 && who != tgid {
            who = tgid;
            continue;
        }
        if r < 0 {
            return false;
        }
        if r == 0 {
            wake.wait();
            continue;
        }
        if libc::WIFEXITED(st) || libc::WIFSIGNALED(st) {
            return false;
        }
        if st >> 8 == (libc::SIGTRAP | (libc::PTRACE_EVENT_EXEC << 8)) {
            at_stop(r);
            // SAFETY: the tracee is in its exec stop.
            unsafe { libc::ptrace(libc::PTRACE_DETACH, r, 0, 0) };
            return true;
        }
        let sig = if st >> 16 == 0 { libc::WSTOPSIG(st) } else { 0 };
        // SAFETY: the tracee is stopped.
        unsafe { libc::ptrace(libc::PTRACE_CONT, r, 0, sig as libc::c_long) };
    }
    detach_running(who);
    false
}

/// Waiting for the next `SIGCHLD` (a stop of a tracee), where the supervisor blocks it for
/// its signalfd: taken here with `sigtimedwait` as soon as it comes (a sleep of 1 ms between
/// looks added ~0.8 ms to every exec followed), and raised again when done, so the loop's
/// signalfd still sees the stops of calls traced meanwhile. Where it is not blocked (no
/// signalfd), a sleep of 1 ms.
struct ChildWake {
    blocked: bool,
    took: std::cell::Cell<bool>,
}

impl ChildWake {
    fn new() -> ChildWake {
        // SAFETY: reading this one-threaded process's signal mask into a set we own.
        let blocked = unsafe {
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigprocmask(libc::SIG_BLOCK, std::ptr::null(), &mut old) == 0
                && libc::sigismember(&old, libc::SIGCHLD) == 1
        };
        ChildWake {
            blocked,
            took: std::cell::Cell::new(false),
        }
    }

    fn wait(&self) {
        if !self.blocked {
            std::thread::sleep(std::time::Duration::from_millis(1));
            return;
        }
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 5_000_000,
        };
        // SAFETY: a signal set and a timespec we own; SIGCHLD is blocked, so it is only ever
        // taken here or by the signalfd.
        let got = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGCHLD);
            libc::sigtimedwait(&set, std::ptr::null_mut(), &ts)
        };
        if got == libc::SIGCHLD {
            self.took.set(true);
        }
    }
}

impl Drop for ChildWake {
    fn drop(&mut self) {
        if self.took.get() {
            // SAFETY: a signal to ourselves (blocked: it stays pending for the signalfd).
            unsafe { libc::kill(libc::getpid(), libc::SIGCHLD) };
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn proc_self_is_the_callers() {
        let me = std::process::id() as i32;
        let p = |n: &str| super::as_seen_by(me, n.as_bytes());
        assert_eq!(
            p("/proc/self/exe"),
            std::path::PathBuf::from(format!("/proc/{me}/exe"))
        );
        assert_eq!(
            p("/proc/thread-self/exe"),
            std::path::PathBuf::from(format!("/proc/{me}/exe"))
        );
        assert_eq!(
            p("/proc/selfish"),
            std::path::PathBuf::from("/proc/selfish")
        );
        assert_eq!(p("/bin/sh"), std::path::PathBuf::from("/bin/sh"));
        assert_eq!(
            p("sh"),
            std::path::PathBuf::from(format!("/proc/{me}/cwd/sh"))
        );
    }

    #[test]
    fn static_and_dynamic_executables_are_told_apart() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(
            !super::is_static_elf(&exe[..4096]),
            "the test binary is dynamic"
        );
        assert!(!super::is_static_elf(b"#!/bin/sh\n"));
    }
}
