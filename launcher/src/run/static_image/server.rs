//! The run's supervision server: `seal __static-server FD` (the contract is
//! `seal_abi::supervised`, the shim's half `shim/src/process/static_server.rs`).
//!
//! Started by libseal at the first static exec of a run, with FD a socket already bound to the
//! run directory's `SERVER_SOCKET` and listening; or forked by the launcher on such a socket
//! for a root that is a dynamically linked Go program ([`fork_server`]). It keeps one
//! supervisor forked ahead, waiting in `accept` (a spare: a connection does not wait for a
//! fork), two once the run has more than one image (`Refill`);
//! the spare that took a connection says so through a pipe once its image runs
//! ([`super::spare::taken`]), and the server forks the next. The supervisor reads the
//! request (the process's pid, identity and `LIBSEAL_*` variables) and then is
//! what `seal __static-supervisor` would be ([`super::attach`]): it attaches, takes the
//! listener, edits the exec stop, serves ([`super::serve`]). A fork of this small process
//! costs far less than the fork, second fork and exec of the 7.7 MB `seal` binary each static
//! image paid before (docs/design.md has the figures).
//!
//! Its life is the run's: it ends when the run directory is removed (the run's end, or the
//! sweep of a killed launcher's directory), seen through inotify ([`run_ended`]); and it maps the run table,
//! as every sealed process does, so that the run's watch kills it (and its spare) with the
//! rest when seal is killed; a supervisor that has an image unmaps it and ends with its image,
//! as one started on its own does. Nothing waits for it: it holds no descriptor of
//! the image that started it (stdio is `/dev/null`, the rest closed), and is in a session of
//! its own, outside the run's process tree.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use seal_abi::supervised::{msg, REQUEST_HEADER, REQUEST_MAX, SERVER_ARG};

/// How long a forked supervisor waits for its request.
const REQUEST_MS: i32 = 5_000;

/// `seal __static-server FD`: serves until the run directory is gone; its exit status.
pub fn run(args: &[OsString]) -> i32 {
    let Some(ls) = args.first().and_then(|a| a.to_str()?.parse::<i32>().ok()) else {
        eprintln!("seal: {SERVER_ARG}: FD is needed");
        return 2;
    };
    let Some(run_dir) = std::env::var_os(seal_abi::settings::RUN_DIR) else {
        return 2;
    };
    serve(ls, std::path::Path::new(&run_dir))
}

/// The socket pair between a static root command's supervisor and the launcher's child that
/// execs it (`RootExec`): the child's end and the supervisor's, both `SOCK_CLOEXEC`. The
/// launcher forks the supervisor as it makes the run directory
/// (`watch::fork_root_supervisor`), beside its own set-up, so that it is ready when the
/// child asks; it serves the one request on its end ([`serve_root`]).
///
/// No server is started: every process of such a run descends from the root and carries its
/// filter, so this supervisor follows each static image they exec, and a dynamic descendant's
/// libseal asks it (`serve/foreign.rs`) instead of connecting to a server; a process that
/// somehow does not (the trampoline, when this fails) starts the server as in any run.
/// Before, the launcher started the run's server and the root's request waited for its first
/// spare: a fork of the launcher, a second fork on the root's path, and two more beside the
/// running image, for spares no process of the run could take.
///
/// `None` when this launcher is itself sealed (a seal inside another's run: the copy would
/// carry the outer run's libseal), or runs other threads (`verify --jobs`, `golden --jobs`):
/// the copy runs Rust code (it allocates, sets variables), and a lock another thread held
/// stays held in it (seen: a server stuck for good in `set_var`, every image of the run
/// waiting 5 s for it, then running unsealed). The trampoline's libseal then starts a server.
pub fn root_pair() -> Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    if !fork_can_serve() {
        return None;
    }
    let mut pair = [0i32; 2];
    // SAFETY: socketpair writes two descriptors into `pair`.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        )
    };
    // SAFETY: two descriptors socketpair just made, owned here.
    (r == 0).then(|| unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(pair[0]),
            std::os::fd::OwnedFd::from_raw_fd(pair[1]),
        )
    })
}

/// In a process forked to supervise a static root (by the launcher): serves the request on
/// `fd`, its end of [`root_pair`], and exits.
///
/// # Safety
/// One thread runs (a fork of a one-threaded launcher); `fd` is the only descriptor it keeps.
pub unsafe fn serve_root(fd: i32, cpus: &crate::run::cpus::Cpus, run_dir: &std::path::Path) -> ! {
    // SAFETY: per the contract.
    unsafe {
        let fd = isolate(fd);
        // Found now, while the launcher builds the root's command on the other processor (its
        // request comes after): the user's cache of Go programs' sites, which a Go root's exec
        // stop looks in (~20–40 µs with the image stopped). A static C root makes no use of it.
        super::go_exe::user_cache();
        // And the run table, the root's identity's pages backed.
        super::run_pids::RunPids::open_ahead(run_dir, Some(fd));
        // And the root's clock page (used if its clocks are sealed: `serve::run`) if the
        // request has not come meanwhile: in a busy moment the work above outlasts the wait,
        // and what it does ahead is then done on the request's way all the same.
        if !super::run_pids::readable(fd) {
            super::vdso_clock::Prepared::ahead(run_dir);
        }
        // Waits for its image's exit status itself (`isolate` ignores SIGCHLD).
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        libc::_exit(supervise_one(fd, Some(cpus)))
    }
}

/// Starts the run's server from the launcher, for a root that will ask it for a supervisor
/// before its `main` (a dynamically linked Go program: `exec_check::Plan::DynamicGo`): binds
/// and listens on its socket in `run_dir` (the root's libseal then connects to it as to one
/// it started), then forks it, in a session of its own. Its pid (the launcher reaps it), or
/// `None` where a fork of the launcher cannot serve ([`fork_can_serve`]) or the socket
/// cannot be made: the root's libseal then starts the server as in any run. That start was a
/// double fork and an exec of the 7.7 MB `seal` binary on the root's start-up path: a
/// one-shot cgo hello world +4.01 → +3.24 ms over bare with the server forked here.
pub fn fork_server(run_dir: &std::path::Path) -> Option<libc::pid_t> {
    use seal_abi::supervised::handover;
    use std::os::unix::ffi::OsStrExt;
    if !fork_can_serve() {
        return None;
    }
    let a = handover::ServerAddr::of(run_dir.as_os_str().as_bytes())?;
    let ls = a.socket(true);
    if ls < 0 {
        return None;
    }
    handover::listen(ls);
    // SAFETY: a fork of a one-threaded launcher (checked above); the child serves (Rust code,
    // as `serve_root`'s does) and exits, never returning.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: in the forked child, on our own descriptor.
        unsafe {
            libc::setsid();
            libc::_exit(serve(ls, run_dir));
        }
    }
    // SAFETY: our descriptor; the server has its copy.
    unsafe { libc::close(ls) };
    if pid < 0 {
        // Nobody listens on it: the root's libseal finds no socket and starts the server.
        let _ = std::fs::remove_file(run_dir.join(seal_abi::supervised::SERVER_SOCKET));
    }
    (pid > 0).then_some(pid)
}

/// Can a fork of this launcher run Rust code as a supervisor or a server ([`root_pair`],
/// [`fork_server`])? Not in a nested seal, nor while it runs other threads.
fn fork_can_serve() -> bool {
    !crate::run::shim::inside_a_run() && one_thread()
}

/// Does this process run one thread (`/proc/self/stat`'s 20th field)?
fn one_thread() -> bool {
    // One read (std's `read_to_string` makes a `statx` and six reads of a size-less file).
    let stat = super::remote::read_proc_text("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit(')').next().unwrap_or("");
    // Fields from the 3rd (state) on: the 20th is the 18th of these.
    after_name.split_whitespace().nth(17) == Some("1")
}

/// Serves on listening socket `ls` (after [`isolate`]) until the run in `run_dir` ends.
fn serve(ls: i32, run_dir: &std::path::Path) -> i32 {
    // SAFETY: this process is one-threaded and owns every descriptor; see `isolate`.
    let ls = unsafe { isolate(ls) };
    let table = map_table(run_dir);
    let Some(gone) = watch_removal(run_dir) else {
        return 0;
    };
    let mut pipe = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into `pipe`.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return 1;
    }
    let fds = Fds {
        listen: ls,
        taken: pipe,
        gone,
        table,
        run_dir: run_dir.to_path_buf(),
    };
    // Spares: (pid, pidfd). One until the first is taken: a run of one static image (a
    // static root command) does not pay a second fork while it starts.
    let mut spares: Vec<(i32, i32)> = Vec::with_capacity(SPARES);
    let mut refill = Refill::default();
    loop {
        let want = refill.want();
        while spares.len() < want {
            match fds.spare() {
                Some(s) => spares.push(s),
                None => break,
            }
        }
        // Without a spare, a connection waiting in the listen queue is seen here (and gets
        // one forked at once).
        let listen = if spares.is_empty() { ls } else { -1 };
        let mut p: Vec<libc::pollfd> = [gone, pipe[0], listen]
            .into_iter()
            .chain(spares.iter().map(|s| s.1))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // Short of spares (no process could be forked), try again soon; a refill put off
        // comes at its time.
        let timeout = match (spares.len() < want, refill.due_in()) {
            (true, _) => 100,
            (false, Some(ms)) => ms,
            (false, None) => -1,
        };
        // SAFETY: pollfd entries we own.
        let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout) };
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return 1;
        }
        if p[0].revents != 0 && run_ended(gone) {
            return 0;
        }
        if p[2].revents != 0 {
            refill.now();
        }
        // A spare that is taken writes its pid to the pipe; one that died without a
        // connection shows on its pidfd. Either is replaced at the top of the loop.
        let mut gone_spares: Vec<i32> = (spares.iter().zip(&p[3..]))
            .filter(|(_, p)| p.revents != 0)
            .map(|(s, _)| s.0)
            .collect();
        if p[1].revents & libc::POLLIN != 0 {
            let mut b = [0u8; 64];
            loop {
                // SAFETY: a non-blocking read into a buffer we own.
                let n = unsafe { libc::read(pipe[0], b.as_mut_ptr().cast(), b.len()) };
                let Ok(n) = usize::try_from(n) else { break };
                if n == 0 {
                    break;
                }
                // Whole pids: each write is 4 bytes, less than a pipe writes at once.
                for w in b[..n].chunks_exact(4) {
                    gone_spares.push(i32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
                    refill.taken();
                }
            }
        }
        spares.retain(|&(pid, pidfd)| {
            let keep = !gone_spares.contains(&pid);
            if !keep && pidfd >= 0 {
                // SAFETY: our pidfd of a spare that is one no more.
                unsafe { libc::close(pidfd) };
            }
            keep
        });
    }
}

/// When the server forks spares: one from its start; after the first is taken, none for
/// [`FIRST_REFILL`] (unless a connection finds none: one is forked for it at once), then
/// [`SPARES`], each replaced as soon as it is taken. The run's first image is often its only
/// one (a one-shot `seal -- ./cgo-program`), and the two forks of the server right after it
/// was taken ran beside that image's start-up: on a machine that keeps a new process on its
/// parent's processor, ~0.15 ms of a cgo hello world's 4 ms.
#[derive(Default)]
struct Refill {
    /// When the first spare was taken (`None`: not yet).
    first_taken: Option<std::time::Instant>,
    /// A connection found no spare, or the wait is over: spares are kept at [`SPARES`].
    full: bool,
}

/// How long after the run's first image the server waits before it forks more spares.
const FIRST_REFILL: std::time::Duration = std::time::Duration::from_millis(20);

impl Refill {
    /// How many spares to keep now.
    fn want(&mut self) -> usize {
        match self.first_taken {
            None => 1,
            Some(_) if self.full => SPARES,
            Some(at) if at.elapsed() >= FIRST_REFILL => {
                self.full = true;
                SPARES
            }
            Some(_) => 0,
        }
    }

    /// A spare was taken.
    fn taken(&mut self) {
        if self.first_taken.is_none() {
            self.first_taken = Some(std::time::Instant::now());
        }
    }

    /// A connection waits with no spare: fork them now.
    fn now(&mut self) {
        self.full = true;
    }

    /// Milliseconds until the put-off refill (`None`: none is put off).
    fn due_in(&self) -> Option<i32> {
        match self.first_taken {
            Some(at) if !self.full => {
                let left = FIRST_REFILL.saturating_sub(at.elapsed());
                Some(left.as_millis() as i32 + 1)
            }
            _ => None,
        }
    }
}

/// Spares kept waiting: two, so that an image that starts while another's supervisor is
/// still setting it up (a spare says it is taken only then, [`super::spare::taken`]) finds one.
const SPARES: usize = 2;

/// The server's descriptors.
struct Fds {
    /// The listening socket.
    listen: i32,
    /// A spare writes its pid here once it is taken ([`super::spare::taken`]).
    taken: [i32; 2],
    /// The inotify descriptor of the run directory.
    gone: i32,
    /// Where the run table is mapped (0: it is not).
    table: usize,
    run_dir: std::path::PathBuf,
}

impl Fds {
    /// Forks a spare supervisor: a process waiting in `accept`, so that a connection is
    /// served at once, without waiting for a fork. Its pid and pidfd (`None`: there is none).
    fn spare(&self) -> Option<(i32, i32)> {
        // SAFETY: getpid has no preconditions.
        let server = unsafe { libc::getpid() };
        // SAFETY: fork of this one-threaded process; the child never returns here.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: in the child, on descriptors it owns.
            unsafe { libc::_exit(self.take_one(server)) }
        }
        if pid < 0 {
            return None;
        }
        // SAFETY: pidfd_open of our own child. Without one (-1, which `poll` skips) its death
        // before a connection is not seen: it stays counted until it says it is taken.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) as i32 };
        Some((pid, pidfd))
    }

    /// In the spare: waits for a connection (dying with the server meanwhile), says so, and
    /// supervises; its exit status.
    ///
    /// # Safety
    /// Only in the forked child.
    unsafe fn take_one(&self, server: i32) -> i32 {
        // SAFETY (all): system calls on this process and its descriptors.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != server {
                return 0;
            }
            libc::close(self.gone);
            libc::close(self.taken[0]);
            libc::signal(libc::SIGCHLD, libc::SIG_DFL);
            // Its idle time, until a connection comes: a clock page and the run table, as
            // the root's supervisor makes them ([`serve_root`]).
            super::vdso_clock::Prepared::ahead(&self.run_dir);
            super::run_pids::RunPids::open_ahead(&self.run_dir, None);
            let c = loop {
                let c = libc::accept4(
                    self.listen,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC,
                );
                if c >= 0
                    || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
                {
                    break c;
                }
            };
            // From here on it serves its image for as long as that runs, the server gone or
            // not.
            libc::prctl(libc::PR_SET_PDEATHSIG, 0);
            // Nor is it killed with the server when seal is: its image (which maps nothing of
            // the run directory) is not, and would find every supervised call failing.
            if self.table != 0 {
                libc::munmap(self.table as *mut libc::c_void, 4096);
            }
            super::spare::hold(self.taken[1]);
            libc::close(self.listen);
            if c < 0 {
                return 1;
            }
            supervise_one(c, None)
        }
    }
}

/// Leaves the exec'ing image's state behind: its signal dispositions and mask (an exec keeps
/// what was ignored or blocked), its working directory, and its descriptors: a pipe this
/// server held open would keep a reader waiting for the end of file (`x=$(./static)`) for as
/// long as the run. Children are reaped by the kernel (`SIGCHLD` ignored).
///
/// # Safety
/// One thread runs; `keep` is the only descriptor it goes on using (returned, moved above the
/// standard ones if it was one of them).
unsafe fn isolate(keep: i32) -> i32 {
    // SAFETY (all): system calls on our own process and descriptors.
    unsafe {
        let keep = if keep < 3 {
            libc::fcntl(keep, libc::F_DUPFD_CLOEXEC, 3)
        } else {
            keep
        };
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        libc::signal(libc::SIGCHLD, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::chdir(c"/".as_ptr());
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        for fd in 0..3 {
            if null >= 0 {
                libc::dup2(null, fd);
            }
        }
        if keep > 3 {
            libc::syscall(libc::SYS_close_range, 3u32, (keep - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32);
        keep
    }
}

/// Maps the run table (read-only; nothing is read): the run's watch kills every process that
/// maps a file of the run directory when seal dies, this one and its spare included. Where it
/// is mapped (0: it could not be). Its descriptor (read-write) stays open for the census of
/// the supervisors forked from here (`census::keep_table`): one look-up for the run.
fn map_table(run_dir: &std::path::Path) -> usize {
    use std::os::fd::IntoRawFd;
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(run_dir.join(seal_abi::RUN_TABLE_NAME))
    else {
        return 0;
    };
    // Read-only, never read.
    let at = super::page::map_shared(&f, false).map_or(0, |p| p as usize);
    super::census::keep_table(f.into_raw_fd());
    at
}

/// An inotify descriptor on `run_dir` for [`run_ended`]; `None` when it is gone already (or
/// cannot be watched: the server would not know when to end).
fn watch_removal(run_dir: &std::path::Path) -> Option<i32> {
    let path = std::ffi::CString::new(run_dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: inotify calls on a descriptor we own and a C string.
    unsafe {
        let fd = libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK);
        if fd < 0 {
            return None;
        }
        let mask =
            libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF;
        if libc::inotify_add_watch(fd, path.as_ptr(), mask) < 0 {
            libc::close(fd);
            return None;
        }
        Some(fd)
    }
}

/// Reads the pending events of `fd`: has the run ended? The directory itself going is seen
/// late (the table this process maps pins it until it exits), so the removal of the run
/// table or of this server's socket, which live as long as the run, says it.
fn run_ended(fd: i32) -> bool {
    let mut buf = [0u64; 512];
    // SAFETY: a buffer we own; the descriptor is non-blocking.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), std::mem::size_of_val(&buf)) };
    let Ok(n) = usize::try_from(n) else {
        return false;
    };
    // SAFETY: the u64 buffer read as the bytes the kernel wrote.
    let b = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) };
    let ends = [
        seal_abi::RUN_TABLE_NAME.as_bytes(),
        seal_abi::supervised::SERVER_SOCKET.as_bytes(),
    ];
    let mut off = 0;
    // struct inotify_event: wd, mask, cookie, len (u32 each), then `len` bytes of name.
    while off + 16 <= n {
        let word = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let (mask, len) = (word(off + 4), word(off + 12) as usize);
        let name = &b[(off + 16).min(n)..(off + 16 + len).min(n)];
        let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
        if mask & (libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_IGNORED) != 0
            || ends.contains(&name)
        {
            return true;
        }
        off += 16 + len;
    }
    false
}

/// In a forked child: reads the request on connection `c`, takes its variables as this
/// process's, and supervises; the exit status.
fn supervise_one(c: i32, cpus: Option<&crate::run::cpus::Cpus>) -> i32 {
    let mut p = libc::pollfd {
        fd: c,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd we own.
    if unsafe { libc::poll(&mut p, 1, REQUEST_MS) } != 1 {
        return 1;
    }
    // Not zeroed: 64 KiB of zeros were 16 pages faulted in on the image's start-up path, for
    // a request of a few hundred bytes.
    let mut buf: Vec<u8> = Vec::with_capacity(REQUEST_MAX);
    // SAFETY: recv writes at most `REQUEST_MAX` bytes into the buffer's capacity.
    let n = unsafe { libc::recv(c, buf.as_mut_ptr().cast(), REQUEST_MAX, 0) };
    let Ok(n) = usize::try_from(n) else {
        return 1;
    };
    // SAFETY: recv wrote the first `n` bytes.
    unsafe { buf.set_len(n) };
    // The launcher moved this process before it sent the request.
    if let Some(c) = cpus {
        c.restore();
    }
    let Some(req) = Request::parse(&buf) else {
        return 1;
    };
    // The image's settings and identity (not this process's environment: the image that
    // started the server had its own).
    let world = super::world::World::from_vars(&req.env);
    let mut args: Vec<OsString> = vec![c.to_string().into(), req.pid.to_string().into()];
    if let Some((vpid, ppid)) = req.own {
        args.push(vpid.to_string().into());
        args.push(ppid.to_string().into());
    }
    super::attach::supervise_in(&args, world)
}

/// A request for a supervisor (`seal_abi::supervised::REQUEST_HEADER`).
#[derive(Debug, PartialEq)]
struct Request {
    pid: i32,
    own: Option<(i32, i32)>,
    env: Vec<(OsString, OsString)>,
}

impl Request {
    fn parse(b: &[u8]) -> Option<Request> {
        if b.len() < REQUEST_HEADER || b[0] != msg::REQUEST {
            return None;
        }
        let word = |i: usize| i32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let env = b[REQUEST_HEADER..]
            .split(|&c| c == 0)
            .filter_map(|kv| {
                let eq = kv.iter().position(|&c| c == b'=')?;
                Some((
                    OsString::from_vec(kv[..eq].to_vec()),
                    OsString::from_vec(kv[eq + 1..].to_vec()),
                ))
            })
            .collect();
        Some(Request {
            pid: word(1),
            own: (b[5] == 1).then(|| (word(6), word(10))),
            env,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spares_are_put_off_after_the_first_image_unless_a_connection_finds_none() {
        let mut r = Refill::default();
        assert_eq!((r.want(), r.due_in()), (1, None), "one from the start");
        r.taken();
        assert_eq!(r.want(), 0, "none right after the first image");
        let ms = r.due_in().unwrap();
        assert!(
            (1..=FIRST_REFILL.as_millis() as i32 + 1).contains(&ms),
            "{ms}"
        );
        r.now();
        assert_eq!(
            (r.want(), r.due_in()),
            (SPARES, None),
            "a waiting connection"
        );
        let mut r = Refill::default();
        r.taken();
        std::thread::sleep(FIRST_REFILL);
        assert_eq!((r.want(), r.due_in()), (SPARES, None), "the wait is over");
        r.taken();
        assert_eq!(r.want(), SPARES, "later images are replaced at once");
    }

    #[test]
    fn a_request_gives_pid_identity_and_variables() {
        let mut b = vec![msg::REQUEST];
        b.extend_from_slice(&42u32.to_le_bytes());
        b.push(1);
        b.extend_from_slice(&1000u32.to_le_bytes());
        b.extend_from_slice(&999u32.to_le_bytes());
        b.extend_from_slice(b"LIBSEAL_VPID=1000\0LIBSEAL_RUN_DIR=/r/x=y\0");
        let r = Request::parse(&b).unwrap();
        assert_eq!(r.pid, 42);
        assert_eq!(r.own, Some((1000, 999)));
        assert_eq!(
            r.env,
            vec![
                ("LIBSEAL_VPID".into(), "1000".into()),
                ("LIBSEAL_RUN_DIR".into(), "/r/x=y".into())
            ]
        );
        b[5] = 0;
        assert_eq!(Request::parse(&b).unwrap().own, None);
        assert_eq!(Request::parse(&b[..REQUEST_HEADER - 1]), None);
        b[0] = msg::LISTENER;
        assert_eq!(Request::parse(&b), None);
    }
}
