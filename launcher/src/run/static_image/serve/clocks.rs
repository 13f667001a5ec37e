//! The supervisor's clock answers for a static image's processes: the logical clock per
//! process (a wall-clock read ticks it, a sleep moves it, a reaped child's time joins its
//! parent's), and a Go image's one clock per process (`go_clock.rs`).

use super::super::remote::{alive, read};
use super::{Answer, Supervisor, MONO_BASE_NS, TAI_OFFSET_NS};

impl Supervisor {
    /// A parent's clock takes in the time of its children that have ended and been reaped
    /// (as a waited-for child's does in libseal): a shell's `sleep 1; date` moves a second.
    pub(super) fn merge_finished(&mut self, parent: i32) {
        let done: Vec<(i32, i64)> = self
            .procs
            .iter()
            .filter(|(&pid, p)| p.parent == parent && parent != 0 && !alive(pid))
            .map(|(&pid, p)| (pid, p.l()))
            .collect();
        for (pid, l) in done {
            self.procs.remove(&pid);
            if let Some(p) = self.procs.get_mut(&parent) {
                p.add_l((l - p.l()).max(0));
            }
        }
    }

    /// `CLOCK_REALTIME`: `epoch + L`, then `L` moves one tick (in a Go image, only when the
    /// reading thread spins on the clock).
    pub(super) fn realtime(&mut self, tgid: i32) -> i64 {
        self.merge_finished(tgid);
        let epoch = self.world.epoch_ns;
        let tick = if self.is_go(tgid) {
            0
        } else {
            let (tick, spin) = (self.world.tick_ns, self.world.spin_after);
            self.proc(tgid).read_tick(tick, spin)
        };
        self.proc(tgid).tick_realtime(epoch, tick)
    }

    /// The sealed value of clock `clk` (`None`: a clock of another process or thread, or an
    /// unknown id: it runs as it is).
    pub(super) fn clock(&mut self, tid: i32, tgid: i32, clk: i32) -> Option<i64> {
        self.merge_finished(tgid);
        if self.is_go(tgid) {
            // One clock for all the image's threads, still under reads unless this thread
            // spins on it. Where the vDSO reads it from a page, the page is where it is (its
            // reads may have ticked it).
            if let Some(c) = self.pages.get(&tgid).map(|p| p.c(MONO_BASE_NS)) {
                self.proc(tgid).l = c;
            }
            if self.waits.spinning(tid) {
                let tick = self.world.tick_ns;
                let p = self.proc(tgid);
                p.l = p.l.saturating_add(tick);
            }
            let l = self.proc(tgid).l;
            return match clk {
                libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE | libc::CLOCK_REALTIME_ALARM => {
                    Some(self.world.epoch_ns.saturating_add(l))
                }
                libc::CLOCK_TAI => Some(self.world.epoch_ns.saturating_add(l + TAI_OFFSET_NS)),
                libc::CLOCK_PROCESS_CPUTIME_ID | libc::CLOCK_THREAD_CPUTIME_ID => Some(l),
                c if (0..=libc::CLOCK_BOOTTIME_ALARM).contains(&c) => Some(MONO_BASE_NS + l),
                _ => None,
            };
        }
        let tick = self.world.tick_ns;
        match clk {
            libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE | libc::CLOCK_REALTIME_ALARM => {
                Some(self.realtime(tgid))
            }
            libc::CLOCK_TAI => Some(self.realtime(tgid).saturating_add(TAI_OFFSET_NS)),
            libc::CLOCK_MONOTONIC
            | libc::CLOCK_MONOTONIC_RAW
            | libc::CLOCK_MONOTONIC_COARSE
            | libc::CLOCK_BOOTTIME
            | libc::CLOCK_BOOTTIME_ALARM => {
                let spin = self.world.spin_after;
                let tick = self.proc(tgid).read_tick(tick, spin);
                Some(self.proc(tgid).tick_monotonic(tick))
            }
            libc::CLOCK_PROCESS_CPUTIME_ID | libc::CLOCK_THREAD_CPUTIME_ID => {
                Some(self.proc(tgid).l())
            }
            _ => None,
        }
    }

    /// A sleep: the logical clock moves by its length; a relative one then really sleeps, an
    /// absolute one (a deadline on the sealed clock, which the kernel's clock is not) returns
    /// at once.
    pub(super) fn sleep(&mut self, tid: i32, tgid: i32, req: u64, clk: i32, flags: i32) -> Answer {
        let mut ts = [0i64; 2];
        if !read(tid, req, &mut ts) {
            return Answer::Error(libc::EFAULT);
        }
        if !(0..1_000_000_000).contains(&ts[1]) || ts[0] < 0 {
            return Answer::Error(libc::EINVAL);
        }
        let d = ts[0].saturating_mul(1_000_000_000).saturating_add(ts[1]);
        if flags & libc::TIMER_ABSTIME != 0 {
            let now = {
                let (l, mono) = self.proc(tgid).clock_state();
                match clk {
                    libc::CLOCK_REALTIME | libc::CLOCK_TAI => self.world.epoch_ns.saturating_add(l),
                    _ => MONO_BASE_NS.saturating_add(l).saturating_add(mono),
                }
            };
            self.proc(tgid).add_l(d.saturating_sub(now).max(0));
            return Answer::Value(0);
        }
        self.proc(tgid).add_l(d);
        Answer::Continue
    }
}
