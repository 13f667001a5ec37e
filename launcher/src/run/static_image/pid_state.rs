//! The supervisor's state of the virtual pids and tids of a static image's processes and
//! threads ([`super::serve`]'s `pids.rs` uses it): each process's identity, the calls traced
//! to their exit, the threads' virtual tids.

use std::collections::HashMap;

use super::run_pids::RunPids;
use super::trace_call::Traced;

/// A process's identity as its image is shown it.
#[derive(Clone, Copy)]
pub(super) struct Ident {
    pub(super) vpid: i32,
    pub(super) ppid: i32,
    /// Its real parent when the identity was set (another one now: it was reparented).
    pub(super) real_parent: i32,
    pub(super) lineage: u64,
    /// Children it has forked, threads that asked for their tid.
    pub(super) children: u64,
    pub(super) threads: u64,
}

/// A call traced to its exit ([`super::trace_call`]).
pub(super) struct Call {
    pub(super) traced: Traced,
    pub(super) tgid: i32,
    /// A fork's child: its virtual pid, its lineage, its real pid once known.
    pub(super) child: Option<(i32, u64, Option<i32>)>,
    /// The real pid a `wait4`/`waitid` is to be given at its entry, for the virtual one.
    pub(super) target: Option<i32>,
    /// `waitid`'s `siginfo_t` (0: none).
    pub(super) infop: u64,
    /// A fork whose child runs a copy of its parent (not a vfork, which execs at once).
    pub(super) copy: bool,
    /// The real process group a `setpgid` is to be given at its entry (its second argument;
    /// its first is `target`).
    pub(super) group: Option<i32>,
}

/// The supervisor's pid state.
#[derive(Default)]
pub(super) struct Pids {
    pub(super) table: Option<RunPids>,
    pub(super) opened: bool,
    pub(super) idents: HashMap<i32, Ident>,
    /// Real tid → virtual tid, for threads other than a process's main one.
    pub(super) vtids: HashMap<i32, i32>,
    /// Calls traced to their exit, by thread.
    pub(super) calls: HashMap<i32, Call>,
    /// Images a process has exec'd since its census slot was taken (its next slot's
    /// generation).
    pub(super) gens: HashMap<i32, u32>,
    /// Does the filter send `fork`s and `wait`s from every address (the first image is a
    /// static-pie one: `seal_abi::supervised::NO_IP_LIMIT`), not only from below `0x7f00…`?
    pub(super) all_addresses: bool,
    /// May calls be traced (a traced image: the supervisor's `SIGCHLD` signalfd is there)?
    pub(super) can_trace: bool,
    /// A signal to another process or a process group (its real pid, a group's negated;
    /// the signal) to send once the `kill` that asked for it has its answer (sent before, the
    /// caller's own `SIGCHLD` from the target's end could cut its `kill` short with `EINTR`).
    pub(super) later_signal: Option<(i32, i32)>,
    /// The process whose `execve` is being answered and what it execs ([`super::exec_child::
    /// exec_key`]), while its identity is taken.
    pub(super) exec_key: Option<(i32, u64)>,
    /// How many children of a process (by real pid) have exec'd each command so far.
    pub(super) same_exec: HashMap<(i32, u64), u64>,
    /// Go images whose new threads' virtual tids are to be left in their table, once they run
    /// (`serve/go_sys.rs`).
    pub(super) pairs_due: Vec<i32>,
    /// The numbers claimed ahead for the root's first new threads (`RunPids::open_ahead`),
    /// until its exec stop uses or releases them.
    pub(super) ahead_pairs: [i32; seal_abi::supervised::go_sys::LEFT],
    /// The root's real parent, read by its supervisor ahead (0: unknown, read at its exec).
    pub(super) root_parent: i32,
}

impl Pids {
    /// Are calls being traced (their stops to be looked for)?
    pub(super) fn tracing(&self) -> bool {
        !self.calls.is_empty()
    }
}
