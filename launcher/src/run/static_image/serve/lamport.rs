//! Children's waits reach their parents, across the line between images and libseal's
//! processes, as libseal's model has it (design.md, "The wait clock a reaping parent
//! adopts"): each process's *wait clock* in the run table is the highest logical clock its
//! waits took it to, and a parent that reaps a child moves its clock forward to the child's.
//! libseal raises and adopts it for dynamic processes; here the supervisor does both for the
//! images it serves. Before, `sleep 1; date` in a busybox shell, or `exec.Command("sleep",
//! "1").Run()` then `time.Now()` in a Go program, showed no second passed where bash showed
//! one, and a dynamic parent of a static child that slept did not see it either.

use seal_abi::flags;

use super::Supervisor;

impl Supervisor {
    /// Whether the run's clocks and pids are sealed (the wait clock is kept by virtual pid).
    fn lamport(&self) -> bool {
        self.world.sealed(flags::TIME) && self.world.sealed(flags::PID)
    }

    /// A wait of process `tgid` moved its clock (a sleep of its main thread, a Go image's
    /// timer wait, a reaped child's clock taken in): its wait clock goes there, for the parent
    /// that reaps it.
    pub(super) fn note_waited(&mut self, tgid: i32) {
        if !self.lamport() {
            return;
        }
        let l = self.clock_now(tgid);
        let v = self.ident(tgid).vpid;
        if let Some(t) = self.table() {
            t.raise_wait_clock(v, l);
        }
    }

    /// Process `tgid` reaped its child of virtual pid `v`: its clock moves forward to the
    /// child's wait clock (a Lamport receive), which its own wait clock then carries on.
    pub(super) fn adopt_reaped(&mut self, tgid: i32, v: i32) {
        if !self.lamport() {
            return;
        }
        let Some(waited) = self.table().map(|t| t.wait_clock(v)) else {
            return;
        };
        let now = self.clock_now(tgid);
        if waited > now {
            self.advance(tgid, waited - now);
            self.note_waited(tgid);
        }
    }
}
