//! What the supervisor keeps per process, let go once the process has gone: its census slot
//! (a descriptor of the run table), a Go image's clock page (a mapping) and the copies of its
//! epoll descriptors, its `$TMPDIR`, its futex steps. A static root that starts thousands of
//! processes (a shell loop, `go build`'s compilers, `go test`'s binaries) kept all of them: a
//! busybox loop of 300 Go programs that sleep left the supervisor 607 descriptors and 300
//! mappings, past the common 1024-descriptor limit within ~500 programs, after which the
//! copies and slots could not be made (timers then ran in real time, calls went uncounted).
//! A process or thread id the kernel gives again (its `pid_max` is 32768 on many machines)
//! met the old process's `$TMPDIR` and futex steps, and the thread's calls were taken as
//! calls of the process its id last belonged to.

use std::collections::HashSet;

use super::super::remote::alive;
use super::Supervisor;

/// The fewest processes kept before a sweep looks for gone ones.
const SWEEP_FLOOR: usize = 16;

impl Supervisor {
    /// How many processes the supervisor keeps state for (the measure [`Supervisor::sweep`]
    /// waits on).
    fn kept(&self) -> usize {
        self.census.as_ref().map_or(0, |c| c.len())
            + self.pages.len()
            + self.tmpdirs.len()
            + self.tgids.len()
    }

    /// Sweeps once what is kept has doubled since the last sweep (at least [`SWEEP_FLOOR`]):
    /// a look at each kept process now and then, whatever the number of processes.
    pub(super) fn maybe_sweep(&mut self) {
        if self.kept() >= self.sweep_at.max(SWEEP_FLOOR) {
            self.sweep();
            self.sweep_at = 2 * self.kept();
        }
    }

    /// Lets go of what is kept for every process that has gone (reaped: a zombie is still
    /// there, and its parent's clock still takes in its time through `procs`, untouched
    /// here). A clock page's reads go into its census slot first, as at an exec.
    pub(super) fn sweep(&mut self) {
        let mut kept: HashSet<i32> = HashSet::new();
        kept.extend(self.census.iter().flat_map(|c| c.keys().copied()));
        kept.extend(self.pages.keys().copied());
        kept.extend(self.tmpdirs.keys().copied());
        kept.extend(self.waits.copied());
        kept.extend(self.futex_steps.keys().map(|k| k.0));
        kept.extend(self.device_opens.keys().copied());
        kept.extend(self.rands.keys().copied());
        kept.extend(self.go_sys.keys().copied());
        let gone: Vec<i32> = kept
            .into_iter()
            .filter(|&t| t != self.pid && !alive(t))
            .collect();
        for tgid in gone {
            self.let_go(tgid);
        }
        // A thread id the kernel gives again is a thread of another process: its process is
        // looked up afresh (the one it had is gone).
        self.tgids.retain(|&tid, _| alive(tid));
        self.waits.keep_threads(alive);
    }

    /// Lets go of what is kept for process `tgid`, which has gone.
    fn let_go(&mut self, tgid: i32) {
        self.count_page_reads_of(tgid);
        if let Some(page) = self.pages.remove(&tgid) {
            page.unmap();
        }
        if let Some(Some(mut slot)) = self.census.as_mut().and_then(|c| c.remove(&tgid)) {
            slot.commit();
        }
        self.waits.forget(tgid);
        self.tmpdirs.remove(&tgid);
        self.futex_steps.retain(|k, _| k.0 != tgid);
        self.device_opens.remove(&tgid);
        self.rands.remove(&tgid);
        self.drop_go_sys(tgid);
    }
}
