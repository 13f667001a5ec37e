//! The run's watch: a small process that outlives a `seal` killed with SIGKILL and ends the
//! run it left behind.
//!
//! `PR_SET_PDEATHSIG` ends the command seal started, not what that command started: after
//! `kill -9` of seal, a shell's background jobs, a server's workers or a fork storm would go on
//! running sealed, with a run directory no launcher holds. So every run directory gets a
//! watch: a child of seal (reaped without waiting: when the run ends, or by a later run's
//! start), in a session of its own (the terminal's signals and a kill of seal's
//! process group do not reach it), holding nothing but the read end of a pipe whose write end
//! only seal holds (`O_CLOEXEC`). When the run ends normally, seal writes one byte and the
//! watch exits. When seal dies any other way, the pipe reads end-of-file: the watch then kills
//! (`SIGKILL`, through a pidfd, so a pid reused meanwhile is never hit) every process whose
//! memory maps a file of this run directory (every process libseal loads into maps the run
//! table) or whose environment names it (a static image and its supervisor), round after round until none is left (a fork storm keeps making new ones for a moment), and
//! removes the run directory. It makes system calls only, with stack buffers, until the
//! processes are gone; then `remove_dir_all` (glibc's `fork` leaves `malloc` usable in the
//! child).

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering::Relaxed};

/// Rounds of killing before the watch gives up (a round is a listing of `/proc`).
const ROUNDS: usize = 200;

/// The launcher's end of a watch: dropping it without [`Watch::done`] (seal killed) sets the
/// watch to work.
pub struct Watch {
    pid: libc::pid_t,
    fd: Option<OwnedFd>,
}

impl Watch {
    /// Starts the watch of `dir`. `None` when it cannot start (no process left under a limit):
    /// the run goes on as before, with only the direct child tied to seal.
    pub fn start(dir: &Path) -> Option<Watch> {
        reap_finished();
        let dir_c = CString::new(dir.as_os_str().as_bytes()).ok()?;
        let mut fds = [0i32; 2];
        // SAFETY: a valid out-array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        let [r, w] = fds;
        // SAFETY: fork; the child only makes system calls on its stack until the run's
        // processes are gone (see `watch`), and never returns.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: in the forked child.
            unsafe {
                libc::close(w);
                watch(r, dir_c.as_bytes());
            }
        }
        // SAFETY: our own descriptor, not used after.
        unsafe { libc::close(r) };
        // SAFETY: w is ours and open.
        let fd = unsafe { OwnedFd::from_raw_fd(w) };
        (pid > 0).then_some(Watch { pid, fd: Some(fd) })
    }

    /// The run ended normally: the watch exits and touches nothing.
    pub fn done(&mut self) {
        if let Some(fd) = self.fd.take() {
            use std::io::Write;
            let _ = std::fs::File::from(fd).write_all(b"x");
            // Reaped now if it has already gone, else by the next run's start (or with seal).
            reap_later(self.pid);
        }
    }
}

/// Forks a static root's supervisor on `root`, the supervisor's end of the root's socket pair
/// (`static_image::serve_root`), in a session of its own (a terminal's signals do not reach
/// it): its pid, `None` when the fork failed (the root's child then finds no supervisor and
/// execs the trampoline). A fork of the launcher, not of the run's watch, which starts after
/// the command as in any run: the root's request waited for two forks in a row (the watch's,
/// then its fork of the supervisor). The launcher reaps it ([`reap_later`]) once the run has
/// ended.
pub fn fork_root_supervisor(root: OwnedFd, run_dir: &Path) -> Option<libc::pid_t> {
    use std::os::fd::AsRawFd;
    reap_finished();
    let cpus = crate::run::cpus::Cpus::of_launcher();
    // SAFETY: fork; the child isolates itself and serves (it runs Rust code: the launcher
    // runs one thread here, `static_image::root_pair`), and never returns.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: in the forked child.
        unsafe {
            libc::setsid();
            crate::run::static_image::serve_root(root.as_raw_fd(), &cpus, run_dir);
        }
    }
    if pid > 0 {
        cpus.start_elsewhere(pid);
    }
    (pid > 0).then_some(pid)
}

/// Reaps child `pid` now if it has exited, else at a later run's start (or with seal).
pub fn reap_later(pid: libc::pid_t) {
    if !reap(pid) {
        let i = UNREAPED.fetch_add(1, Relaxed) % UNREAPED_PIDS.len();
        UNREAPED_PIDS[i].store(pid, Relaxed);
    }
}

/// Watches and static roots' supervisors that had not exited when their run ended (a ring:
/// more than its size at once only leaves zombies until seal exits).
static UNREAPED_PIDS: [AtomicI32; 64] = [const { AtomicI32::new(0) }; 64];
static UNREAPED: AtomicUsize = AtomicUsize::new(0);

/// Reaps `pid` if it has exited (never blocks); whether it has.
fn reap(pid: libc::pid_t) -> bool {
    let mut status = 0;
    // SAFETY: a non-blocking wait for our own child.
    unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) == pid }
}

/// Reaps the watches and supervisors of earlier runs that have exited since.
fn reap_finished() {
    for slot in &UNREAPED_PIDS {
        let pid = slot.load(Relaxed);
        if pid > 0 && reap(pid) {
            let _ = slot.compare_exchange(pid, 0, Relaxed, Relaxed);
        }
    }
}

/// The watch itself, in a session of its own (out of the terminal's).
///
/// # Safety
/// Only in the forked child.
unsafe fn watch(r: i32, dir: &[u8]) -> ! {
    // SAFETY (all): system calls on our own descriptors and stack buffers.
    unsafe {
        libc::setsid();
        // seal's handlers (signal forwarding) mean nothing here.
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        let mut none: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, core::ptr::null_mut());
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        for fd in 0..3 {
            if null >= 0 && fd != r {
                libc::dup2(null, fd);
            }
        }
        // Nothing else of seal's stays open here: the run table's lock above all.
        let keep = if r > 2 { r } else { libc::dup(r) };
        libc::syscall(libc::SYS_close_range, 3u32, (keep - 1) as u32, 0u32);
        libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32);
        let mut b = [0u8; 1];
        let n = loop {
            let n = libc::read(keep, b.as_mut_ptr() as *mut libc::c_void, 1);
            if n >= 0 || *libc::__errno_location() != libc::EINTR {
                break n;
            }
        };
        if n == 1 {
            libc::_exit(0);
        }
        // seal is gone without ending the run.
        for _ in 0..ROUNDS {
            if kill_round(dir) == 0 {
                break;
            }
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 10_000_000,
            };
            libc::nanosleep(&pause, core::ptr::null_mut());
        }
        let _ = std::fs::remove_dir_all(Path::new(std::ffi::OsStr::from_bytes(dir)));
        libc::_exit(0);
    }
}

/// One listing of `/proc`: kills every other process of the run in `dir` ([`of_run`]); how
/// many.
fn kill_round(dir: &[u8]) -> usize {
    // SAFETY (all): system calls on our own descriptors and stack buffers.
    unsafe {
        let proc_fd = libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if proc_fd < 0 {
            return 0;
        }
        let me = libc::getpid();
        let mut killed = 0;
        let mut buf = [0u8; 8192];
        loop {
            let n = libc::syscall(libc::SYS_getdents64, proc_fd, buf.as_mut_ptr(), buf.len());
            if n <= 0 {
                break;
            }
            let mut off = 0usize;
            while off < n as usize {
                let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
                let name = &buf[off + 19..off + reclen];
                let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
                off += reclen;
                let Some(pid) = parse_pid(name) else { continue };
                if pid == me {
                    continue;
                }
                let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as i32;
                if pidfd < 0 {
                    continue;
                }
                if of_run(name, dir) {
                    let r = libc::syscall(
                        libc::SYS_pidfd_send_signal,
                        pidfd,
                        libc::SIGKILL,
                        core::ptr::null::<libc::siginfo_t>(),
                        0,
                    );
                    if r == 0 {
                        killed += 1;
                    }
                }
                libc::close(pidfd);
            }
        }
        libc::close(proc_fd);
        killed
    }
}

fn parse_pid(name: &[u8]) -> Option<libc::pid_t> {
    if name.is_empty() || name.len() > 9 || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(name.iter().fold(0i32, |a, &c| a * 10 + (c - b'0') as i32))
}

/// Is this a process of the run in `dir`? Its `/proc/<pid>/maps` names a file under `dir/`
/// (every process libseal loads into maps the run table), or its environment holds
/// `LIBSEAL_RUN_DIR=dir` (a static image, which maps nothing of the run, and its supervisor:
/// their environment is the sealed one that the exec hooks and the launcher give).
fn of_run(pid: &[u8], dir: &[u8]) -> bool {
    let mut needle = [0u8; 4200];
    let env = b"LIBSEAL_RUN_DIR=";
    if env.len() + dir.len() + 1 > needle.len() {
        return false;
    }
    needle[..dir.len()].copy_from_slice(dir);
    needle[dir.len()] = b'/';
    if proc_file_holds(pid, b"/maps\0", &needle[..dir.len() + 1]) {
        return true;
    }
    needle[..env.len()].copy_from_slice(env);
    needle[env.len()..env.len() + dir.len()].copy_from_slice(dir);
    needle[env.len() + dir.len()] = 0;
    proc_file_holds(pid, b"/environ\0", &needle[..env.len() + dir.len() + 1])
}

/// Does `/proc/<pid><file>` (`file` NUL-terminated) hold `needle` (at most 4,200 bytes)?
fn proc_file_holds(pid: &[u8], file: &[u8], needle: &[u8]) -> bool {
    let mut path = [0u8; 64];
    let prefix = b"/proc/";
    let len = prefix.len() + pid.len() + file.len();
    if len > path.len() || needle.is_empty() || needle.len() > 4200 {
        return false;
    }
    path[..prefix.len()].copy_from_slice(prefix);
    path[prefix.len()..prefix.len() + pid.len()].copy_from_slice(pid);
    path[prefix.len() + pid.len()..len].copy_from_slice(file);
    // SAFETY (all): system calls on our own descriptor and stack buffers.
    unsafe {
        let fd = libc::open(
            path.as_ptr() as *const libc::c_char,
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return false;
        }
        // A window keeps the tail of the last chunk, so a match split between two reads is
        // found.
        let mut buf = [0u8; 16384 + 4200];
        let mut have = 0usize;
        let mut found = false;
        loop {
            let n = libc::read(
                fd,
                buf[have..].as_mut_ptr() as *mut libc::c_void,
                buf.len() - have,
            );
            if n <= 0 {
                break;
            }
            have += n as usize;
            if holds(&buf[..have], needle) {
                found = true;
                break;
            }
            let keep = (needle.len() - 1).min(have);
            buf.copy_within(have - keep..have, 0);
            have = keep;
        }
        libc::close(fd);
        found
    }
}

fn holds(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_found_only_as_a_directory() {
        assert!(holds(
            b"7f00 rw-s /dev/shm/seal-run-ab/run.table\n",
            b"/dev/shm/seal-run-ab/"
        ));
        assert!(!holds(
            b"7f00 rw-s /dev/shm/seal-run-abc/run.table\n",
            b"/dev/shm/seal-run-ab/"
        ));
        assert_eq!(parse_pid(b"1234"), Some(1234));
        assert_eq!(parse_pid(b"self"), None);
        assert_eq!(parse_pid(b""), None);
    }
}
