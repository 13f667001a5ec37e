//! The supervisor's loop: the exec stop, then one answer per user notification.
//!
//! The values follow libseal's model, per process of the static image: a logical clock `L`
//! (ns) that starts where the exec'ing process left it (`LIBSEAL_CLOCK`) and moves one tick
//! per wall-clock read and by each sleep's length; `CLOCK_MONOTONIC` is
//! `MONO_BASE + L + mono + tick` with its own tick counter `mono`, so a monotonic read never
//! moves the wall clock; the process's virtual pid and parent pid; an entropy stream keyed by
//! the seed and the process's lineage. A call made from outside the static image's own code
//! (a dynamic descendant's libseal or libc, which seal already or which must see real values)
//! runs as it is. A Go image's clock is one per process and moves only by its held timer
//! waits (`go_clock.rs`; read from a page, static or cgo, `vdso_clock.rs`).

use seal_abi::flags;
use std::collections::HashMap;

use super::census;
use super::go_clock::Waits;
use super::notif::{respond, Answer, Notif, NOTIF_RECV};
use super::remote::{child_signals, drain, proc_status_field, write};
use super::world::{Stream, World};
use seal_abi::supervised::entropy::MAGIC;
use seal_abi::supervised::{msg, CALLS, EXEC, EXEC_AT, EXIT_GROUP, FUTEX, GROUP_CALLS, IOCTL};
use seal_abi::supervised::{GETDENTS64, MKDIR_CALLS, OPEN_CALLS, PROC_CALLS, SIGACTION};
use seal_abi::supervised::{SYSINFO, TIMED_WAITS};

mod answers;
mod clocks;
mod counting;
mod foreign;
mod futexes;
mod go_image;
mod go_rand;
mod go_sys;
mod groups;
mod held;
mod lamport;
mod listings;
mod opens;
mod pids;
mod procfiles;
mod reexec;
mod restart;
mod sealed_text;
mod sweep;
mod ticking;

/// `MONO_BASE_NS` of libseal's clock: what `CLOCK_MONOTONIC` reads at `L = 0`.
pub const MONO_BASE_NS: i64 = 86_400 * 1_000_000_000;
/// `CLOCK_TAI` runs this far ahead of `CLOCK_REALTIME`.
const TAI_OFFSET_NS: i64 = 37 * 1_000_000_000;
/// One process of the image, as the supervisor knows it.
struct Proc {
    l: i64,
    mono: i64,
    stream: Stream,
    /// Its clock when it started (its `/proc/<pid>/stat` start time).
    start: i64,
    /// Its parent process (0: not one of the image's).
    parent: i32,
    /// Its clock page (a static C image's first process), where `l` and `mono` are then kept.
    page: Option<super::clock_state::Ticking>,
    /// Clock reads since `l` last moved by a wait (`--spin-after`), where there is no page.
    since: u32,
}

/// The loop's state.
struct Supervisor {
    world: World,
    pid: i32,
    /// The static image's executable ranges (empty until the exec stop).
    text: Vec<(u64, u64)>,
    procs: HashMap<i32, Proc>,
    /// Thread id → process (thread group) id.
    tgids: HashMap<i32, i32>,
    children: u64,
    /// Each process's census slot (`None`: not counted). For a process that supervises itself
    /// (cgo Go), a slot beside libseal's, with the same virtual pid and generation: the census
    /// adds the runtime's served calls to its C library's.
    census: Option<HashMap<i32, Option<census::Slot>>>,
    /// The image's load bias, for the census's module record.
    bias: u64,
    /// Is the image a Go runtime (one clock per process, moved by its held waits)?
    go: bool,
    waits: Waits,
    /// Images the image's processes exec'd (static ones, set up here): each process's
    /// executable ranges and whether it is a Go runtime. A process not here runs the first
    /// image.
    images: HashMap<i32, (Vec<(u64, u64)>, bool)>,
    /// A thread whose exec of a static binary is to be followed once its call runs, and
    /// whether it runs a dynamic image of the run (`serve/foreign.rs`), not one of these.
    exec: Option<(i32, bool)>,
    /// The clock pages of Go processes whose vDSO reads them.
    pages: HashMap<i32, super::vdso_clock::Page>,
    /// The first image's code outside its executable whose system calls are its own: its
    /// sealed vDSO (its entries' fallbacks), its entropy mapping.
    own: Vec<(u64, u64)>,
    /// The first image's in-image entropy (`go_entropy.rs`).
    entropy: Option<super::go_entropy::Entropy>,
    /// The in-image entropy of Go images the run's processes exec'd, by process.
    entropies: HashMap<i32, super::go_entropy::Entropy>,
    /// Threads of dynamic descendants whose libseal asked whether this supervisor follows
    /// their next exec of a static image (`serve/foreign.rs`).
    probed: std::collections::HashSet<i32>,
    /// Virtual pids and tids of its processes and threads (`serve/pids.rs`).
    pids: super::pid_state::Pids,
    /// The first image's clock page, made while it execs (removed after the detach).
    prepared: Option<super::vdso_clock::Prepared>,
    /// Which processes still run the image they were set up with (`image_exe.rs`).
    exes: super::image_exe::ImageExes,
    /// The random-device pipes the image's processes opened, and their opens so far.
    feeds: super::feeds::Feeds,
    device_opens: HashMap<i32, u64>,
    /// Go processes' in-image random numbers, counted at their exit or exec (`go_rand.rs`),
    /// and whether the first process's (a cgo program's, libseal's) is still to be found.
    rands: HashMap<i32, super::rand_counts::Rands>,
    /// Go images' in-image `gettid` (`serve/go_sys.rs`).
    go_sys: HashMap<i32, super::go_tids::GoSys>,
    /// Directory listings being read (`listings.rs`).
    listings: super::dir_streams::Listings,
    /// Go executables' sites (`go_exe.rs`).
    go_exes: super::go_exe::GoExes,
    /// Held timed futex waits of Go images (`futexes.rs`).
    futexes: Vec<super::go_clock::HeldFutex>,
    /// By process and futex word: the processor time the process had run at the first step
    /// that timed out since the word was last woken (`futexes.rs`).
    futex_steps: HashMap<(i32, u64), u64>,
    cgo_rands: bool,
    /// Each process's `$TMPDIR`, read from its environment at its first exclusive create since
    /// its exec (`opens.rs`).
    tmpdirs: HashMap<i32, Option<Vec<u8>>>,
    /// What is kept ([`Supervisor::maybe_sweep`]) when the next sweep for gone processes comes.
    sweep_at: usize,
}

/// Serves until every process carrying the filter has gone; returns the exit status.
/// `traced`: the process is to be followed to its exec stop; else it runs its image already
/// (a cgo program, whose runtime reads its clock from `page` when libseal made one, and its
/// `crypto/rand` from `entropy`).
pub fn run(
    listener: i32,
    sock: i32,
    pid: i32,
    world: World,
    traced: bool,
    page: Option<super::vdso_clock::Page>,
    entropy: Option<super::go_entropy::Entropy>,
) -> i32 {
    let text = if traced {
        Vec::new()
    } else {
        super::auxv::text_ranges(pid)
    };
    // A cgo program runs its image already: its census names callers with its load bias (a
    // position-independent one's served calls were named after the wrong symbols).
    let bias = if traced {
        0
    } else {
        super::auxv::load_bias(pid, &text)
    };
    // The caller of each answered call wakes on this CPU, where this process is about to
    // sleep (Linux 6.6; an older kernel refuses the flag and wakes it as before).
    super::notif::sync_wake_up(listener);
    raise_descriptor_limit();
    let world_random = world.sealed(flags::RANDOM);
    let mut sv = Supervisor {
        world,
        pid,
        text,
        procs: HashMap::new(),
        tgids: HashMap::new(),
        children: 0,
        census: Some(HashMap::new()),
        bias,
        // A process that supervises itself is a dynamically linked Go program.
        go: !traced,
        waits: Waits::default(),
        images: HashMap::new(),
        exec: None,
        pages: HashMap::new(),
        own: Vec::new(),
        entropy: None,
        entropies: HashMap::new(),
        probed: Default::default(),
        pids: super::pid_state::Pids::default(),
        prepared: None,
        exes: Default::default(),
        feeds: Default::default(),
        device_opens: HashMap::new(),
        rands: HashMap::new(),
        go_sys: HashMap::new(),
        listings: Default::default(),
        go_exes: Default::default(),
        futexes: Vec::new(),
        futex_steps: HashMap::new(),
        cgo_rands: !traced && world_random,
        tmpdirs: HashMap::new(),
        sweep_at: 0,
    };
    if !traced {
        sv.exes.first(pid);
    }
    if let Some(p) = page {
        sv.pages.insert(pid, p);
    }
    // A cgo program's in-process entropy (libseal maps it; its code's fallback reads are its own).
    if let Some(e) = entropy {
        sv.own.push(e.range);
        sv.entropy = Some(e);
    }
    let mut attached = traced;
    let clocks = traced && sv.world.seal_clocks();
    sv.prepared = super::vdso_clock::Prepared::new(clocks, pid, &sv.world, MONO_BASE_NS);
    let mut sock_open = true;
    // The tracee's stops arrive as SIGCHLD, read from a signalfd: the exec stop is seen as
    // soon as it happens (polling waitpid every 10 ms cost 5 ms of every static start-up).
    let stops = if traced { child_signals() } else { -1 };
    // Calls traced to their exit report their stops there too.
    sv.pids.can_trace = stops >= 0;
    loop {
        let mut fds = vec![
            libc::pollfd {
                fd: listener,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: if sock_open { sock } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: if attached || sv.pids.tracing() {
                    stops
                } else {
                    -1
                },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // A held wait returns when its epoll instance has an event.
        fds.extend(sv.waits.held.iter().map(|h| libc::pollfd {
            fd: h.fd,
            events: libc::POLLIN,
            revents: 0,
        }));
        // A device pipe is filled again when it has room.
        let feeds_at = fds.len();
        fds.extend(sv.feeds.pollfds());
        // While attached without a signalfd, the exec stop is looked for every 10 ms; held
        // waits are looked at when they may be released.
        let held = sv.waits.timeout(sv.world.sealed(flags::WARP));
        let held = [held, sv.futex_timeout()].into_iter().flatten().min();
        let timeout = match (attached && stops < 0, held) {
            (true, _) => Some(std::time::Duration::from_millis(10)),
            (false, h) => h,
        };
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs() as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let tsp = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: pollfd entries we own, an optional timespec, no signal mask.
        let r = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as _, tsp, std::ptr::null()) };
        sv.feeds.serve(&fds[feeds_at..]);
        if fds[2].revents & libc::POLLIN != 0 {
            drain(stops);
        }
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return 1;
        }
        if attached {
            attached = sv.tracee_event();
        }
        if !attached {
            sv.prepared = None;
            // Its image runs (or its exec failed): the server may fork the next spare.
            super::spare::taken();
        }
        if sv.pids.tracing() {
            sv.trace_events();
        }
        if fds[1].revents != 0 {
            let mut m = [0u8; 5];
            // SAFETY: a buffer we own.
            let n = unsafe { libc::recv(sock, m.as_mut_ptr().cast(), m.len(), 0) };
            if n >= 1 && m[0] == msg::EXEC_FAILED && attached {
                super::remote::detach_running(pid);
                attached = false;
            }
            if n <= 0 {
                sock_open = false;
                // SAFETY: our descriptor.
                unsafe { libc::close(sock) };
            }
        }
        if fds[0].revents & libc::POLLIN != 0 {
            sv.one(listener, attached);
            sv.maybe_sweep();
        } else if fds[0].revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            sv.count_page_reads();
            return 0;
        }
        if !sv.waits.held.is_empty() {
            sv.release(listener);
        }
        if !sv.futexes.is_empty() {
            sv.release_futexes(listener);
        }
    }
}

impl Supervisor {
    /// Looks for the tracee's next stop; false once detached (or gone).
    fn tracee_event(&mut self) -> bool {
        let mut st = 0;
        // SAFETY: waitpid on our tracee, without blocking.
        let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG | libc::__WALL) };
        if r == 0 {
            return true;
        }
        if r < 0 || libc::WIFEXITED(st) || libc::WIFSIGNALED(st) {
            return false;
        }
        if st >> 8 == (libc::SIGTRAP | (libc::PTRACE_EVENT_EXEC << 8)) {
            let stop = super::stop::Stop::read(self.pid);
            self.go = stop.go;
            let seal = self.world.seal_clocks();
            self.text = stop.text.clone();
            self.bias = stop.bias;
            self.exes.first(self.pid);
            // The exec'ing side installed the filter for this image (`is_static_pie`).
            self.pids.all_addresses = stop.pie;
            self.check_reach(self.pid, &stop.text);
            // A Go runtime keeps its vDSO, whose clock reads the image's clock page; anything
            // else (or a Go image whose page could not be set up) loses it.
            let (fast, go) = match self.go {
                true => self.go_clock_stop(&stop, seal),
                false => (false, Default::default()),
            };
            // A static C image keeps it too, its clock entries reading its ticking page.
            let fast = fast || (seal && !self.go && self.ticking_clock(&stop));
            if let Some(aux) = &stop.aux {
                aux.fix(self.pid, self.world.at_random(), seal && !fast);
            }
            if self.go && self.world.sealed(flags::RANDOM) {
                self.go_rand_stop(go);
            } else if self.go {
                self.rand_left(self.pid);
            }
            // SAFETY: the tracee is in its exec stop.
            unsafe { libc::ptrace(libc::PTRACE_DETACH, self.pid, 0, 0) };
            self.release_ahead_pairs();
            return false;
        }
        // Another stop (a signal on its way): let it go on, with its signal.
        let sig = if st >> 16 == 0 { libc::WSTOPSIG(st) } else { 0 };
        // SAFETY: the tracee is stopped.
        unsafe { libc::ptrace(libc::PTRACE_CONT, self.pid, 0, sig as libc::c_long) };
        true
    }

    /// Receives one notification and answers it.
    /// Before the image's exec stop (`attached`), its process's own exec of it goes at once:
    /// no image runs yet, and the call is the hand-over's (~0.1 ms of look-ups on its path).
    fn one(&mut self, listener: i32, attached: bool) {
        let mut n = Notif::default();
        // SAFETY: the listener fills a seccomp_notif of this size.
        if unsafe { libc::ioctl(listener, NOTIF_RECV, &mut n) } != 0 {
            return; // the caller died meanwhile, or a signal
        }
        if attached && n.pid as i32 == self.pid && matches!(n.nr as u32, EXEC | EXEC_AT) {
            respond(listener, n.id, Answer::Continue);
            return;
        }
        // A call a signal interrupts while it waits for the answer is made again: what the
        // answer drew (a tick, entropy) is put back, or the next run draws differently.
        let tgid = self.tgid(n.pid as i32);
        let before = self.procs.get(&tgid).map(|p| (p.clock_state(), p.stream.n));
        let answer = self.answer(&n);
        let after = self.procs.get(&tgid).map(|p| p.clock_state());
        let ok = respond(listener, n.id, answer);
        self.leave_tid_pairs(tgid);
        self.send_later_signal(ok);
        if let Some((tid, foreign)) = self.exec.take() {
            self.follow_exec(tid, ok, foreign);
        }
        if !ok {
            let p = self.procs.get_mut(&tgid);
            if let (Some((clock, drawn)), Some(after), Some(p)) = (before, after, p) {
                p.unwind(clock, after);
                p.stream.n = drawn;
            }
            // Counted again when it is made again.
            let ip = self.census_ip(tgid, n.ip);
            let slots = self.census.as_mut();
            if let Some(Some(slot)) = slots.and_then(|s| s.get_mut(&tgid)) {
                slot.uncount(n.nr as i64, &n.args, ip);
            }
        }
    }

    /// Moves process `tgid`'s clock by `d` ns (its page too).
    fn advance(&mut self, tgid: i32, d: i64) {
        if d == 0 {
            return;
        }
        self.ensure(tgid);
        self.proc(tgid).add_l(d);
        if let Some(page) = self.pages.get(&tgid) {
            page.advance(d);
        }
        self.count_page_reads();
    }

    /// The image process `tgid` runs: its executable ranges and whether it is a Go runtime.
    fn image(&mut self, tgid: i32) -> (&[(u64, u64)], bool) {
        if !self.images.contains_key(&tgid) && tgid != self.pid {
            // A fork of a process that exec'd another image runs that image.
            let parent = proc_status_field(tgid, "PPid:").unwrap_or(0);
            if let Some(i) = self.images.get(&parent).cloned() {
                self.images.insert(tgid, i);
                self.exes.inherit(tgid, parent);
            }
        }
        match self.images.get(&tgid) {
            Some((t, go)) => (t, *go),
            None => (&self.text, self.go),
        }
    }

    fn is_go(&mut self, tgid: i32) -> bool {
        self.image(tgid).1
    }

    fn answer(&mut self, n: &Notif) -> Answer {
        if let Some(a) = self.traced_call(n) {
            return a;
        }
        if let Some(a) = self.probe(n) {
            return a;
        }
        let tgid = self.tgid(n.pid as i32);
        // An exit is looked at only to count a Go image's in-image draws (`go_rand.rs`): any
        // other process's goes on at once, without the look-ups below.
        if n.nr as u32 == EXIT_GROUP && !self.has_rands(tgid) {
            return Answer::Continue;
        }
        // Its image's code (a fork's from its parent), unless the process exec'd another
        // program since: a dynamic one's code can sit at the same addresses.
        let text = self
            .image(tgid)
            .0
            .iter()
            .any(|&(a, b)| (a..b).contains(&n.ip));
        let first_image = !self.images.contains_key(&tgid);
        let own = first_image && self.own.iter().any(|&(a, b)| (a..b).contains(&n.ip));
        let in_image = (own || text) && self.exes.runs_image(tgid);
        if in_image && matches!(n.nr as u32, EXEC | EXEC_AT | EXIT_GROUP) {
            // Its in-image draws, while its memory is there.
            self.count_rands(tgid);
        }
        if n.nr as u32 == EXIT_GROUP {
            return Answer::Continue;
        }
        if n.nr as u32 == GETDENTS64 {
            return match in_image {
                true => self.listing(n, tgid),
                false => Answer::Continue,
            };
        }
        if n.nr as u32 == SIGACTION {
            if in_image {
                self.restart_sigchld(n);
            }
            return Answer::Continue;
        }
        if n.nr as u32 == FUTEX {
            return match in_image && self.world.sealed(flags::TIME) && self.is_go(tgid) {
                true => self.futex_wait(n, tgid),
                false => Answer::Continue,
            };
        }
        if matches!(n.nr as u32, EXEC | EXEC_AT) {
            // Only an image's own exec of a static binary is followed (a dynamic process's
            // goes through libseal's hook).
            let tid = n.pid as i32;
            let target = super::exec_child::Target::of(n);
            if in_image {
                // Its virtual pid is in the run table before the new image looks for it; a
                // child whose fork was not traced takes one keyed by what it execs.
                if !self.pids.idents.contains_key(&tgid) {
                    let key = super::exec_child::exec_key(tid, target.path, target.argv);
                    self.pids.exec_key = Some((tgid, key));
                }
                self.ident(tgid);
                self.pids.exec_key = None;
            }
            // A dynamic process's exec of a static image too: its libseal could install no
            // supervisor of its own under this one's filter (`serve/foreign.rs`).
            let asked = self.probed.remove(&tid);
            let target = target.is_static(tid);
            if target && (in_image || asked) && super::exec_child::seize(tid) {
                self.exec = Some((tid, !in_image));
            } else if in_image && !target {
                self.leave_exec_start(tgid);
            }
            self.exes.exec_called(tgid);
            self.go_sys_exec(tgid);
            self.tmpdirs.remove(&tgid);
            return Answer::Continue;
        }
        if PROC_CALLS.contains(&(n.nr as u32)) {
            return match in_image && self.world.sealed(flags::PID) {
                true => self.proc_call(n, tgid),
                false => Answer::Continue,
            };
        }
        if MKDIR_CALLS.contains(&(n.nr as u32)) {
            return match in_image {
                true => self.mkdir_call(n, tgid),
                false => Answer::Continue,
            };
        }
        if OPEN_CALLS.contains(&(n.nr as u32)) || n.nr as u32 == SYSINFO {
            return match (in_image, n.nr as u32) {
                (true, SYSINFO) => self.sysinfo(n, tgid),
                (true, _) => self.open_call(n, tgid),
                (false, _) => Answer::Continue,
            };
        }
        if GROUP_CALLS.contains(&(n.nr as u32)) || n.nr as u32 == IOCTL {
            return match (in_image && self.world.sealed(flags::PID), n.nr as u32) {
                (true, IOCTL) => self.tty_group(n, tgid),
                (true, _) => self.group_call(n, tgid),
                (false, _) => Answer::Continue,
            };
        }
        let family = if TIMED_WAITS.contains(&(n.nr as u32)) {
            flags::TIME
        } else {
            CALLS.iter().find(|c| c.0 as i32 == n.nr).map_or(0, |c| c.1)
        };
        if !in_image || !self.world.sealed(family) {
            return Answer::Continue;
        }
        let tid = n.pid as i32;
        self.ensure(tgid);
        self.count(tgid, n);
        let a = n.args;
        match n.nr as i64 {
            libc::SYS_epoll_wait | libc::SYS_epoll_pwait if self.is_go(tgid) => self.hold(n, tgid),
            libc::SYS_epoll_wait | libc::SYS_epoll_pwait => Answer::Continue,
            // A Go runtime's own short sleeps (sysmon's 20 µs, a spinning thread's 3 µs) run
            // as they are and leave its clock where it is.
            libc::SYS_nanosleep | libc::SYS_clock_nanosleep if self.is_go(tgid) => Answer::Continue,
            libc::SYS_clock_gettime => match self.clock(tid, tgid, a[0] as i32) {
                Some(ns) => self.put(tid, a[1], &timespec(ns)),
                None => Answer::Continue,
            },
            libc::SYS_gettimeofday => {
                let ns = self.realtime(tgid);
                if a[1] != 0 {
                    if let e @ Answer::Error(_) = self.put(tid, a[1], &[0u32; 2]) {
                        return e;
                    }
                }
                if a[0] == 0 {
                    return Answer::Value(0);
                }
                let ts = timespec(ns);
                self.put(tid, a[0], &[ts[0], ts[1] / 1000])
            }
            libc::SYS_time => {
                let s = self.realtime(tgid).div_euclid(1_000_000_000);
                if a[0] != 0 {
                    if let e @ Answer::Error(_) = self.put(tid, a[0], &s) {
                        return e;
                    }
                }
                Answer::Value(s)
            }
            libc::SYS_nanosleep | libc::SYS_clock_nanosleep => {
                let answer = match n.nr as i64 {
                    libc::SYS_nanosleep => self.sleep(tid, tgid, a[0], libc::CLOCK_MONOTONIC, 0),
                    _ => self.sleep(tid, tgid, a[2], a[0] as i32, a[1] as i32),
                };
                // Only the main thread's waits reach a parent, as in libseal.
                if tid == tgid {
                    self.note_waited(tgid);
                }
                answer
            }
            libc::SYS_clock_settime
            | libc::SYS_settimeofday
            | libc::SYS_adjtimex
            | libc::SYS_clock_adjtime => Answer::Error(libc::EPERM),
            // The run's own UTS namespace (root) or the kernel (anyone else) keeps the
            // machine's names; the image's `uname` stays the sealed one either way.
            libc::SYS_sethostname | libc::SYS_setdomainname => Answer::Continue,
            libc::SYS_getpid | libc::SYS_getppid | libc::SYS_gettid => {
                self.pid_answer(n.nr as i64, tid, tgid)
            }
            libc::SYS_kill | libc::SYS_tkill | libc::SYS_tgkill => {
                self.signal(n.nr as i64, a, tgid)
            }
            libc::SYS_getrandom if a[4] == MAGIC && self.entropy_code(tgid, n.ip) => {
                self.positioned(tid, tgid, n)
            }
            libc::SYS_getrandom => self.getrandom(tid, tgid, a[0], a[1] as usize, a[2] as u32),
            libc::SYS_uname => self.uname(tid, a[0]),
            libc::SYS_sched_getaffinity if a[0] == 0 || a[0] as i32 == self.world.vpid => {
                self.affinity(tid, a[1] as usize, a[2])
            }
            _ => Answer::Continue,
        }
    }

    /// The thread group of thread `tid` (from `/proc`, once per thread).
    fn tgid(&mut self, tid: i32) -> i32 {
        if let Some(&g) = self.tgids.get(&tid) {
            return g;
        }
        let g = super::remote::tgid_of(tid).unwrap_or(tid);
        self.tgids.insert(tid, g);
        g
    }

    /// Makes sure process `tgid` has its state: the exec'd process's from the environment, a
    /// child's from its parent's clock (at its first call), with a stream of its own.
    fn ensure(&mut self, tgid: i32) {
        if self.procs.contains_key(&tgid) {
            return;
        }
        let first = tgid == self.pid;
        let (l, id, parent) = if first {
            (self.world.clock, self.world.lineage, 0)
        } else {
            self.children += 1;
            let parent = proc_status_field(tgid, "PPid:").unwrap_or(0);
            self.merge_finished(parent);
            self.page_off(parent);
            let l = self.procs.get(&parent).map_or(self.world.clock, |p| p.l());
            (
                l,
                seal_abi::mix64(self.world.lineage ^ self.children),
                parent,
            )
        };
        self.procs.insert(
            tgid,
            Proc {
                l,
                mono: 0,
                start: l,
                stream: Stream::new(self.world.seed, id),
                parent,
                page: None,
                since: 0,
            },
        );
    }

    fn proc(&mut self, tgid: i32) -> &mut Proc {
        self.procs.get_mut(&tgid).expect("ensure() ran")
    }
}

/// `ns` as a timespec's two words.
fn timespec(ns: i64) -> [i64; 2] {
    [ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000)]
}

/// Raises this supervisor's soft limit on descriptors to its hard one (as the Go runtime and
/// systemd do for themselves): it holds a few per live process of the image (a census slot, a
/// Go image's epoll copies), and a shell's common soft limit of 1024 would end its sealing at
/// a few hundred live processes. Its own: the run's processes keep the limits they were given.
fn raise_descriptor_limit() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit with a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}
