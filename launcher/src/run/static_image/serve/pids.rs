//! Virtual pids and tids of a static image's processes and threads.
//!
//! The exec'd process has the virtual pid its environment gives. A process it forks gets one
//! from the run-wide allocator (the run table, [`RunPids`]), keyed by its lineage (its
//! parent's lineage and how many children the parent made before it), claimed when the
//! parent's `fork`/`clone`/`vfork`/`clone3` reaches its entry, before the child exists, and
//! registered both ways once the child's real pid is known (at its first notification, or at
//! the parent's call's exit, whichever comes first). The parent's call is traced to its exit
//! ([`trace_call`]) and returns the virtual pid; `wait4`/`waitid` are traced likewise: a
//! virtual pid argument becomes the real one at the entry, the real pid they return the
//! virtual one at the exit. `getpid`, `getppid` and `gettid` (of a process's main thread) are
//! answered from these; another thread's `gettid` takes a virtual tid at its first call, keyed
//! by its process's lineage and how many threads asked before it. `kill`, `tkill` and `tgkill`
//! naming any virtual pid or tid of the run are sent by the supervisor to the real ones.
//!
//! Where a step fails (no run table, ptrace refused), the pid stays real and the census says
//! so (`unsupported-call`).

use libc::user_regs_struct as Regs;
use seal_abi::{child_lineage, unsealed, KIND_PROCESS, KIND_THREAD};

use super::super::pid_state::{Call, Ident};
use super::super::remote::{proc_status_field, read, write};
use super::super::run_pids::RunPids;
use super::super::trace_call::{self, Event, State};
use super::{Answer, Notif, Supervisor, GROUP_CALLS, PROC_CALLS};

/// `CLONE_THREAD`, `CLONE_VFORK`.
const CLONE_THREAD: u64 = 0x10000;
const CLONE_VFORK: u64 = 0x4000;
/// `waitid`'s `P_PID`.
const P_PID: u64 = 1;
/// Where `si_pid` is in a `siginfo_t` (x86_64).
const SI_PID: u64 = 16;

impl Supervisor {
    /// The run table's pid map, mapped at its first use.
    pub(super) fn table(&mut self) -> Option<&mut RunPids> {
        if !self.pids.opened {
            self.pids.opened = true;
            let dir = self.world.run_dir.as_deref();
            let ahead = dir.and_then(RunPids::take_ahead);
            if let Some((t, left, parent)) = ahead {
                self.pids.table = Some(t);
                self.pids.ahead_pairs = left;
                self.pids.root_parent = parent;
            } else {
                self.pids.table = dir.and_then(RunPids::open);
            }
        }
        self.pids.table.as_mut()
    }

    /// The virtual pid the run shows for real pid `real` (itself when none).
    pub(super) fn virt(&mut self, real: i32) -> i32 {
        if let Some((_, i)) = self.pids.idents.iter().find(|(&r, _)| r == real) {
            return i.vpid;
        }
        self.table().and_then(|t| t.virt(real)).unwrap_or(real)
    }

    /// The real pid (or tid) behind virtual one `v`, when it is one of the run's.
    pub(super) fn real(&mut self, v: i32) -> Option<i32> {
        if let Some((&r, _)) = self.pids.idents.iter().find(|(_, i)| i.vpid == v) {
            return Some(r);
        }
        if let Some((&r, _)) = self.pids.vtids.iter().find(|(_, &t)| t == v) {
            return Some(r);
        }
        // A thread that took a number left in its image's table, not seen yet.
        if self.take_all_pairs() {
            if let Some((&r, _)) = self.pids.vtids.iter().find(|(_, &t)| t == v) {
                return Some(r);
            }
        }
        self.table().and_then(|t| t.real(v))
    }

    /// Process `tgid`'s identity: the exec'd process's from the environment, a child's from
    /// its parent's fork (or its real pid, when the fork was not traced).
    pub(super) fn ident(&mut self, tgid: i32) -> Ident {
        if let Some(&i) = self.pids.idents.get(&tgid) {
            return i;
        }
        // The root's parent is its supervisor's, known ahead (`RunPids::open_ahead`).
        let ahead = tgid == self.pid && self.table().is_some() && self.pids.root_parent > 0;
        let real_parent = match ahead {
            true => self.pids.root_parent,
            false => proc_status_field(tgid, "PPid:").unwrap_or(0),
        };
        let i = if tgid == self.pid {
            // Its exec'ing process registered it (libseal, the trampoline's too); a static
            // root the launcher's child exec'd directly has no libseal that did: its children
            // find their parent's virtual pid in the table.
            let v = self.world.vpid;
            if let Some(t) = self.table() {
                if t.virt(tgid).is_none() {
                    t.register(v, tgid);
                }
                // The launcher and the leaders outside the run (its supervisor registered
                // them ahead when it knew the parent ahead).
                if v == seal_abi::ROOT_VPID && real_parent > 0 && !ahead {
                    let (sid, pgid) = super::super::run_pids::session_and_group(real_parent);
                    t.register_outside(real_parent, sid, pgid);
                }
            }
            Ident {
                vpid: self.world.vpid,
                ppid: self.world.ppid,
                real_parent,
                lineage: self.world.lineage,
                children: 0,
                threads: 0,
            }
        } else {
            let pending = self.pids.calls.values_mut().find(|c| {
                c.tgid == real_parent && c.child.is_some_and(|(_, _, real)| real.is_none())
            });
            let child = pending.and_then(|c| {
                let (v, lineage, _) = c.child?;
                c.child = Some((v, lineage, Some(tgid)));
                Some((v, lineage))
            });
            let ppid = self.virt(real_parent);
            // A fork that was not traced (a cgo Go program's runtime forks by a raw `clone`
            // and execs the child by a raw `execve`, which the filter sends here: `go run`'s
            // program, `go test`'s test binary) of a process this supervisor knows: the child
            // takes its parent's next child number, as a traced fork's would, in the order the
            // children reach the supervisor (their exec: keyed by what it execs), rather than
            // keeping its real pid.
            let child = child.or_else(|| self.untraced_child(real_parent, tgid));
            let (vpid, lineage) = child.unwrap_or((tgid, 0));
            if child.is_some() {
                if let Some(t) = self.table() {
                    t.register(vpid, tgid);
                }
            }
            Ident {
                vpid,
                ppid,
                real_parent,
                lineage,
                children: 0,
                threads: 0,
            }
        };
        self.pids.idents.insert(tgid, i);
        i
    }

    /// The virtual pid and lineage of child `tgid` of `parent` whose fork was not traced: when
    /// the parent is the image this supervisor serves (or a process it already knows) and the
    /// run table has a number to give. Keyed by what the child execs and how many of the
    /// parent's children exec'd the same before (`go run`'s program, `go test`'s binary), not
    /// by its place among the parent's children: the go command starts a varying number of
    /// tools before it (8 or 9 execs for one `go run`, bare), in parallel.
    fn untraced_child(&mut self, parent: i32, tgid: i32) -> Option<(i32, u64)> {
        if parent != self.pid && !self.pids.idents.contains_key(&parent) {
            return None;
        }
        let p = self.ident(parent);
        let lineage = match self.pids.exec_key.filter(|k| k.0 == tgid) {
            Some((_, key)) => {
                let same = self.pids.same_exec.entry((parent, key)).or_insert(0);
                *same += 1;
                child_lineage(p.lineage, KIND_PROCESS, key.wrapping_add(*same - 1))
            }
            None => child_lineage(p.lineage, KIND_PROCESS, p.children),
        };
        let v = self.table()?.allocate(lineage)?;
        if let Some(i) = self.pids.idents.get_mut(&parent) {
            i.children += 1;
        }
        Some((v, lineage))
    }

    /// The lineage that keys what process `pid`'s new image is given at its exec stop (its
    /// `AT_RANDOM`, its runtime's random numbers, its `crypto/rand` window), `images` being
    /// how many images the supervisor has set up so far: from the process's identity (its
    /// fork's lineage, or what a child whose fork was not traced execs) and the image's
    /// generation in it; else from that count, which follows the order processes reach the
    /// supervisor.
    pub(super) fn image_lineage(&mut self, pid: i32, images: u64) -> u64 {
        let gen = self.pids.gens.get(&pid).copied().unwrap_or(0) as u64;
        match self
            .pids
            .idents
            .get(&pid)
            .map(|i| i.lineage)
            .filter(|&l| l != 0)
        {
            Some(l) => child_lineage(l, seal_abi::KIND_IMAGE, gen),
            None => seal_abi::mix64(self.world.lineage ^ images),
        }
    }

    /// `getpid`, `getppid`, `gettid` of thread `tid` of process `tgid`.
    pub(super) fn pid_answer(&mut self, nr: i64, tid: i32, tgid: i32) -> Answer {
        let i = self.ident(tgid);
        match nr {
            libc::SYS_getpid => Answer::Value(i.vpid as i64),
            libc::SYS_getppid => {
                let now = proc_status_field(tgid, "PPid:").unwrap_or(i.real_parent);
                if now == i.real_parent {
                    Answer::Value(i.ppid as i64)
                } else {
                    Answer::Value(self.virt(now) as i64)
                }
            }
            _ if tid == tgid => Answer::Value(i.vpid as i64),
            _ if !self.pids.can_trace => Answer::Continue,
            _ => Answer::Value(self.vtid(tid, tgid) as i64),
        }
    }

    /// The virtual tid of thread `tid` (not its process's main one), taken at its first ask,
    /// after the threads of its process created before it that have not asked yet: threads
    /// are numbered in the order they were created (the kernel's tids rise in that order),
    /// not in the order of their first `gettid` (a Go runtime's threads ask as they start,
    /// in whatever order they are scheduled).
    /// In a Go image whose threads take the numbers left in its table (`go_sys.rs`), only
    /// the thread asking is numbered (another could be taking one meanwhile).
    fn vtid(&mut self, tid: i32, tgid: i32) -> i32 {
        if let Some(&v) = self.pids.vtids.get(&tid) {
            return v;
        }
        if self.take_pairs(tgid) {
            if let Some(&v) = self.pids.vtids.get(&tid) {
                return v;
            }
        }
        if self.leaves_pairs(tgid) {
            return self.number_thread(tid, tgid);
        }
        let mut earlier: Vec<i32> = std::fs::read_dir(format!("/proc/{tgid}/task"))
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                    .filter(|&t: &i32| t != tgid && t < tid && !self.pids.vtids.contains_key(&t))
                    .collect()
            })
            .unwrap_or_default();
        earlier.sort_unstable();
        for t in earlier {
            self.number_thread(t, tgid);
        }
        self.number_thread(tid, tgid)
    }

    /// Gives thread `tid` of process `tgid` the next virtual tid of its process.
    fn number_thread(&mut self, tid: i32, tgid: i32) -> i32 {
        let i = self.ident(tgid);
        let lineage = child_lineage(i.lineage, KIND_THREAD, i.threads);
        let v = self.table().and_then(|t| t.allocate(lineage));
        let Some(v) = v else {
            self.stays_real(tgid, "gettid: the run table has no virtual tid to give");
            return tid;
        };
        if let Some(t) = self.table() {
            t.register(v, tid);
        }
        if let Some(i) = self.pids.idents.get_mut(&tgid) {
            i.threads += 1;
        }
        self.pids.vtids.insert(tid, v);
        self.note_tid(tgid, tid, v);
        v
    }

    /// `kill`, `tkill`, `tgkill` naming virtual pids or tids of the run: sent to the real
    /// ones; any other target runs as it is.
    /// `tgid`: the calling process. A `kill` of another process or of a process group is sent
    /// once the caller has its answer ([`Supervisor::later_kill`]); a signal to the caller's
    /// own process or threads at once, as the kernel delivers it before the call returns.
    pub(super) fn signal(&mut self, nr: i64, a: [u64; 6], tgid: i32) -> Answer {
        let target = a[0] as i32;
        if nr == libc::SYS_kill && target < -1 {
            return self.later_kill(-target, a[1] as i32, true);
        }
        if nr == libc::SYS_kill && target > 0 && self.real(target).is_some_and(|r| r != tgid) {
            return self.later_kill(target, a[1] as i32, false);
        }
        super::super::notif::signal(nr, a, |v| self.real(v))
    }

    /// `kill(v, sig)` (`group`: `kill(-v, sig)`) of virtual pid `v` of the run: checked now
    /// with signal 0 (the answer is the kernel's for the real target), sent once the caller
    /// has its answer. Sent before, the target's end raised the caller's `SIGCHLD` while its
    /// `kill` still waited for the answer, which cut it short (`EINTR`: busybox's `kill $!`
    /// in 2 of 10 runs). A number that names no process of the run runs as it is.
    fn later_kill(&mut self, v: i32, sig: i32, group: bool) -> Answer {
        let Some(r) = self.real(v) else {
            return Answer::Continue;
        };
        let r = if group { -r } else { r };
        if !(0..=64).contains(&sig) {
            return Answer::Error(libc::EINVAL);
        }
        // SAFETY: kill with integer arguments (signal 0: only the checks).
        if unsafe { libc::kill(r, 0) } != 0 {
            let e = std::io::Error::last_os_error().raw_os_error();
            return Answer::Error(e.unwrap_or(libc::ESRCH));
        }
        if sig != 0 {
            self.pids.later_signal = Some((r, sig));
        }
        Answer::Value(0)
    }

    /// Sends the signal a `kill` asked for, once it was answered (`answered`: the caller has
    /// its answer; else the call is made again, or fails, and sends nothing).
    pub(super) fn send_later_signal(&mut self, answered: bool) {
        if let Some((g, sig)) = self.pids.later_signal.take() {
            if answered {
                // SAFETY: kill with integer arguments.
                unsafe { libc::kill(g, sig) };
            }
        }
    }

    /// A notification of a thread being traced: its call's again, past its entry (it runs
    /// now: `CONTINUE`); its call made again before the interrupt landed (a signal came
    /// first: left unanswered, the pending interrupt cancels it, and the call is taken at its
    /// entry); or one its signal handler makes past its entry stop (it runs as it is).
    pub(super) fn traced_call(&mut self, n: &Notif) -> Option<Answer> {
        let c = self.pids.calls.get_mut(&(n.pid as i32))?;
        let t = &mut c.traced;
        if !PROC_CALLS.contains(&(n.nr as u32)) && !GROUP_CALLS.contains(&(n.nr as u32)) {
            return None;
        }
        Some(match t.state {
            State::ToNotif if t.nr == n.nr as i64 => {
                t.state = State::ToExit;
                Answer::Continue
            }
            State::Interrupting => Answer::Held,
            _ => Answer::Continue,
        })
    }

    /// A call that makes or reaps a process, from the image's own code: traced to its exit.
    pub(super) fn proc_call(&mut self, n: &Notif, tgid: i32) -> Answer {
        let (tid, nr) = (n.pid as i32, n.nr as i64);
        if !self.pids.can_trace {
            return Answer::Continue;
        }
        let a = n.args;
        let forks = matches!(
            nr,
            libc::SYS_fork | libc::SYS_vfork | libc::SYS_clone | libc::SYS_clone3
        );
        let mut flags = a[0];
        if nr == libc::SYS_clone3 && (!read(tid, a[0], &mut flags) || flags & CLONE_THREAD != 0) {
            return Answer::Continue;
        }
        let copy = nr == libc::SYS_fork
            || (matches!(nr, libc::SYS_clone | libc::SYS_clone3) && flags & CLONE_VFORK == 0);
        // A fork's child number, claimed before the child exists.
        let child = if forks {
            let i = self.ident(tgid);
            let lineage = child_lineage(i.lineage, KIND_PROCESS, i.children);
            match self.table().and_then(|t| t.allocate(lineage)) {
                Some(v) => Some((v, lineage, None)),
                None => {
                    self.stays_real(tgid, "fork: the run table has no virtual pid to give");
                    return Answer::Continue;
                }
            }
        } else {
            None
        };
        // A virtual pid argument becomes the real one at the entry.
        let target = match nr {
            libc::SYS_wait4 if a[0] as i32 > 0 => self.real(a[0] as i32),
            libc::SYS_waitid if a[0] == P_PID => self.real(a[1] as i32),
            _ => None,
        };
        match trace_call::seize(tid, nr, [a[0], a[1], a[2]]) {
            Ok(traced) => {
                let infop = if nr == libc::SYS_waitid { a[2] } else { 0 };
                let call = Call {
                    traced,
                    tgid,
                    child,
                    target,
                    infop,
                    copy,
                    group: None,
                };
                self.pids.calls.insert(tid, call);
                // The interrupt cancels the notification: nothing to answer.
                Answer::Held
            }
            Err(why) => {
                self.give_back(child);
                self.stays_real(tgid, why);
                Answer::Continue
            }
        }
    }

    /// Releases a fork's child number that no child took.
    fn give_back(&mut self, child: Option<(i32, u64, Option<i32>)>) {
        if let Some((v, _, None)) = child {
            if let Some(t) = self.table() {
                t.release(v);
            }
        }
    }

    /// Looks at the traced calls' stops: at a call's entry a virtual pid argument becomes the
    /// real one, at its exit the real pid it returned the virtual one.
    pub(super) fn trace_events(&mut self) {
        let tids: Vec<i32> = self.pids.calls.keys().copied().collect();
        for tid in tids {
            let Some(call) = self.pids.calls.get_mut(&tid) else {
                continue;
            };
            match trace_call::poll(tid, &mut call.traced) {
                Event::Nothing => {}
                Event::Entry(mut r) => {
                    match (call.traced.nr, call.target) {
                        (libc::SYS_setpgid, pid) => {
                            r.rdi = pid.map_or(r.rdi, |p| p as u64);
                            r.rsi = call.group.map_or(r.rsi, |g| g as u64);
                        }
                        (libc::SYS_wait4, Some(real)) => r.rdi = real as u64,
                        (libc::SYS_waitid, Some(real)) => r.rsi = real as u64,
                        _ => {}
                    }
                    if let Event::Gone = trace_call::resume_entry(tid, &mut call.traced, &r) {
                        self.lost(tid);
                    }
                }
                Event::Exit(r) => {
                    let Some(call) = self.pids.calls.remove(&tid) else {
                        continue;
                    };
                    let shown = self.exited(tid, call, &r);
                    trace_call::finish(tid, shown.as_ref());
                }
                Event::Gone => self.lost(tid),
            }
        }
    }

    /// A traced call given up (its thread gone or detached): its child number, if no child
    /// took it, goes back.
    fn lost(&mut self, tid: i32) {
        if let Some(call) = self.pids.calls.remove(&tid) {
            self.give_back(call.child);
        }
    }

    /// Call `call` of thread `tid` at its exit (its registers `r`): the registers with the
    /// virtual pid in place of the real one it returned, if they change.
    fn exited(&mut self, tid: i32, call: Call, r: &Regs) -> Option<Regs> {
        let ret = r.rax as i64;
        let shown = match call.child {
            Some((v, lineage, known)) if ret > 0 => {
                let real = ret as i32;
                // The next child's number is keyed by one more (a fork cut short and made
                // again takes the same number again).
                if let Some(i) = self.pids.idents.get_mut(&call.tgid) {
                    i.children += 1;
                }
                let ppid = self.ident(call.tgid).vpid;
                if known.is_none() && !self.pids.idents.contains_key(&real) {
                    if let Some(t) = self.table() {
                        t.register(v, real);
                    }
                    let i = Ident {
                        vpid: v,
                        ppid,
                        real_parent: call.tgid,
                        lineage,
                        children: 0,
                        threads: 0,
                    };
                    self.pids.idents.insert(real, i);
                }
                self.exes.forked(real, call.tgid);
                // The child is in the census from its start, as libseal's children are
                // (while it still runs its parent's image: one that exec'd is counted by its
                // new image).
                let exe = |p: i32| std::fs::read_link(format!("/proc/{p}/exe")).ok();
                if call.copy && exe(real).is_some() && exe(real) == exe(call.tgid) {
                    self.slot(real);
                    self.forked_rands(call.tgid, real);
                }
                self.ident(real).vpid
            }
            Some(child) => {
                self.give_back(Some(child));
                return None;
            }
            None if call.traced.nr == libc::SYS_wait4 && ret > 0 => {
                let v = self.virt(ret as i32);
                // A reaped child's status, for the census (a stopped or continued one's
                // is not its end).
                let mut status = 0i32;
                let st = call.traced.args[1];
                if st != 0 && read(tid, st, &mut status) && (status & 0x7f != 0x7f) {
                    if let Some(t) = self.table() {
                        t.set_status(v, status);
                    }
                }
                // An end (not a stop or a continue; without a status, `WEXITED` only).
                if st == 0 && call.traced.args[2] as i32 & (libc::WUNTRACED | libc::WCONTINUED) == 0
                    || st != 0 && status & 0x7f != 0x7f && status != 0xffff
                {
                    self.adopt_reaped(call.tgid, v);
                }
                v
            }
            None if call.traced.nr == libc::SYS_waitid && ret == 0 && call.infop != 0 => {
                let mut pid = 0i32;
                if read(tid, call.infop + SI_PID, &mut pid) && pid > 0 {
                    let v = self.virt(pid);
                    write(tid, call.infop + SI_PID, &v.to_le_bytes());
                    self.reaped_by_waitid(tid, v, call.infop);
                }
                return None;
            }
            None => return None,
        };
        (shown as i64 != ret).then(|| {
            let mut r = *r;
            r.rax = shown as u64;
            r
        })
    }

    /// Records the status of child `v` that a `waitid` (its `siginfo_t` at `infop`) reaped,
    /// as a wait status, for the census.
    fn reaped_by_waitid(&mut self, tid: i32, v: i32, infop: u64) {
        // si_code at 8, si_status at 24 (x86_64).
        let (mut code, mut status) = (0i32, 0i32);
        if !read(tid, infop + 8, &mut code) || !read(tid, infop + SI_PID + 8, &mut status) {
            return;
        }
        let wait_status = match code {
            libc::CLD_EXITED => (status & 0xff) << 8,
            libc::CLD_KILLED => status & 0x7f,
            libc::CLD_DUMPED => (status & 0x7f) | 0x80,
            _ => return,
        };
        if let Some(t) = self.table() {
            t.set_status(v, wait_status);
        }
        let tgid = self.tgid(tid);
        self.adopt_reaped(tgid, v);
    }

    /// Says in process `tgid`'s census that a pid stays real, and why.
    /// An image loaded where the filter takes calls for libc's (a static-pie binary, mapped
    /// top-down next to where shared libraries go) under a filter installed for another image
    /// (a static-pie image exec'd by a non-PIE one): its `fork` and `wait` never reach the
    /// supervisor, so their pids stay real, and the census says so. (A first image that is
    /// static-pie had the filter that sends them from every address.)
    pub(super) fn check_reach(&mut self, tgid: i32, text: &[(u64, u64)]) {
        let limit = (seal_abi::supervised::IMAGE_IP_LIMIT as u64) << 32;
        let beyond = text.iter().any(|&(_, end)| end > limit);
        if !self.pids.all_addresses && self.world.sealed(seal_abi::flags::PID) && beyond {
            self.stays_real(
                tgid,
                "fork and wait return real pids: a static-pie image is loaded among shared \
                 libraries, where its calls cannot be told from theirs",
            );
        }
    }

    pub(super) fn stays_real(&mut self, tgid: i32, why: &str) {
        if let Some(slot) = self.slot(tgid) {
            slot.unsealed(unsealed::UNSUPPORTED_CALL, why);
        }
    }
}
