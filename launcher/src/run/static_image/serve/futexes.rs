//! A Go image's short timed futex waits (`seal_abi::supervised::FUTEX`): the runtime's
//! `notetsleep`, which waits on a note with a timeout and loops until the note is woken or
//! `nanotime()` passes its deadline. A stop-the-world (and `forEachP`) waits so, in 100 µs
//! steps, for a goroutine to stop, and after each step that ends with the note unwoken it
//! preempts the running goroutines again (a signal, `SIGURG`: the first may land where the
//! goroutine cannot stop, in a write barrier, in seal's clock code). A Go image's clock
//! stands still while it computes, so a step that really timed out looked as if no time had
//! passed: the loop waited again, and never signalled again. The world stopped only when the
//! goroutine's own code let it, or when 100,000 clock reads moved the clock: `go build`'s
//! compiler stalled ~17 s in 2 runs of 9, and `fixtures/go/stopworld` took 28 s (0.2 s bare).
//!
//! The supervisor holds such a step (a wait of exactly [`STEP_NS`]): it looks at the futex
//! word every [`LOOK`] (a wake sets the note's word before it calls `futex`, which then finds
//! no waiter: the word is what counts), and lets the call run when it changed (the kernel's
//! `futex` sees the new value and returns `EAGAIN` at once). When the step's time has really
//! passed with the word unchanged, the supervisor sends `SIGURG` to each other thread of the
//! process that runs, as the runtime's next step would have (the runtime takes a signal that
//! finds nothing to preempt as the spurious one it allows for), and lets the call run: the
//! kernel waits again, and the note's wake ends it; the clock does not move, so what the
//! program prints does not depend on how many steps the world took to stop. Once the
//! process has run [`SIGNALLED_CPU_NS`] of processor time since the first
//! such step on one word without a wake (ten steps' worth: a goroutine that ran all along and
//! did not stop), each further step moves the process's clock by its length and returns
//! `ETIMEDOUT`, as the kernel's would. Counted in steps of real time, a loaded machine whose
//! threads waited for a processor moved the clock of a world that would have stopped at
//! once (`fixtures/go/stopworld`'s `GOMAXPROCS` call printed `start …00.0003Z` in 1 CI run:
//! three steps past ten before `main` printed anything). The runtime's
//! loop sees its deadline pass and preempts again itself, and what the program prints after
//! depends on how long the world took to stop, as it really did (`fixtures/go/stopworld`'s
//! loop of write barriers got stopped only so: signalled alone it still took 40 s).

use std::time::{Duration, Instant};

use super::super::go_clock::{self, HeldFutex};
use super::super::notif::respond;
use super::super::remote;
use super::{Answer, Notif, Supervisor};

/// The wait held: a stop-the-world's (and `forEachP`'s) step, `notetsleep(note, 100*1000)`.
/// `sysmon` parks with the time to its next timer (with a still clock, a `time.Sleep`'s
/// length), which it keeps waiting in the kernel, as before: its timers are the netpoller's
/// held waits' to move.
pub const STEP_NS: i64 = 100_000;
/// How often a held wait's word is looked at.
pub const LOOK: Duration = Duration::from_micros(20);
/// Processor time the process may run, from the first step of one wait (one
/// futex word) that timed out, with a signal to the running threads at each step and the
/// clock still; past it each step moves the clock. Ten steps of a thread that runs all along.
pub const SIGNALLED_CPU_NS: u64 = 10 * STEP_NS as u64;

impl Supervisor {
    /// A timed `FUTEX_WAIT_PRIVATE` of Go image thread `tid` (of `tgid`): held when it is a
    /// step of [`STEP_NS`] and its word still holds the value (else it runs as it is).
    pub(super) fn futex_wait(&mut self, n: &Notif, tgid: i32) -> Answer {
        let tid = n.pid as i32;
        let a = n.args;
        let mut ts = [0i64; 2];
        if !remote::read(tid, a[3], &mut ts) {
            return Answer::Continue;
        }
        let len_ns = ts[0].saturating_mul(1_000_000_000).saturating_add(ts[1]);
        let mut word = 0u32;
        if len_ns != STEP_NS || !remote::read(tid, a[0], &mut word) || word != a[2] as u32 {
            return Answer::Continue;
        }
        self.futexes.retain(|h| h.tid != tid);
        self.futexes.push(HeldFutex {
            id: n.id,
            tid,
            tgid,
            addr: a[0],
            val: a[2] as u32,
            deadline: Instant::now() + Duration::from_nanos(len_ns as u64),
            len_ns,
        });
        Answer::Held
    }

    /// How long the supervisor may sleep before it must look at the held futex waits.
    pub(super) fn futex_timeout(&self) -> Option<Duration> {
        let now = Instant::now();
        (self.futexes.iter())
            .map(|h| h.deadline.saturating_duration_since(now).min(LOOK))
            .min()
    }

    /// Lets the held futex waits that may go run: one whose word changed (it returns at
    /// once), and one past its time, after the process's running threads are signalled.
    pub(super) fn release_futexes(&mut self, listener: i32) {
        let now = Instant::now();
        let mut i = 0;
        while i < self.futexes.len() {
            let h = &self.futexes[i];
            let mut word = 0u32;
            let changed = !remote::read(h.tid, h.addr, &mut word) || word != h.val;
            if !changed && now < h.deadline {
                i += 1;
                continue;
            }
            let h = self.futexes.remove(i);
            let key = (h.tgid, h.addr);
            if changed {
                self.futex_steps.remove(&key);
                respond(listener, h.id, Answer::Continue);
                continue;
            }
            let running = go_clock::others_running(h.tgid, h.tid);
            let cpu = go_clock::process_cpu_ns(h.tgid);
            let since = *self.futex_steps.entry(key).or_insert(cpu);
            if running.is_empty() || cpu.saturating_sub(since) <= SIGNALLED_CPU_NS {
                for t in running {
                    // SAFETY: tgkill takes integers; a thread gone meanwhile is ESRCH.
                    unsafe { libc::syscall(libc::SYS_tgkill, h.tgid, t, libc::SIGURG) };
                }
                respond(listener, h.id, Answer::Continue);
                continue;
            }
            // Still not stopped: the clock moves by the step (before the answer, which the
            // woken thread reads at once; back if the call had gone meanwhile), so the
            // runtime's own loop sees it end and preempts again.
            self.advance(h.tgid, h.len_ns);
            if !respond(listener, h.id, Answer::Error(libc::ETIMEDOUT)) {
                self.advance(h.tgid, -h.len_ns);
            } else {
                self.waits.moved(&go_clock::thread_ids(h.tgid));
            }
        }
    }
}
