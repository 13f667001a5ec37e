//! A Go image's held timer waits (`epoll_pwait` with a timeout): held until its epoll
//! instance has an event, or until the process (and its descendants) are idle, when its clock
//! moves by the wait's length (`go_clock.rs`).

use seal_abi::flags;

use super::super::go_clock::{self, Held};
use super::super::notif::respond;
use super::{Answer, Notif, Supervisor};

impl Supervisor {
    /// A held wait of a Go image (`epoll_pwait` with a timeout): it runs at once when its
    /// epoll instance has an event, else waits for [`Supervisor::release`].
    pub(super) fn hold(&mut self, n: &Notif, tgid: i32) -> Answer {
        let fd = self.waits.copy_of(tgid, n.args[0] as i32);
        if fd < 0 || go_clock::ready(fd) {
            return Answer::Continue;
        }
        let ms = n.args[3] as i32 as i64;
        self.waits.hold(Held {
            id: n.id,
            tid: n.pid as i32,
            tgid,
            len_ns: ms * 1_000_000,
            deadline: std::time::Instant::now() + std::time::Duration::from_millis(ms as u64),
            fd,
            next: std::time::Instant::now(),
            kids: Vec::new(),
            busy_since: None,
        });
        Answer::Held
    }

    /// Answers the held waits that may go: one whose epoll instance has an event runs as it
    /// is; one whose process is idle (under `--warp` at once, else past its real deadline too)
    /// moves its process's clock by its length and returns no events.
    pub(super) fn release(&mut self, listener: i32) {
        let warp = self.world.sealed(flags::WARP);
        let mut i = 0;
        while i < self.waits.held.len() {
            // A fork of the process traced to its exit: its thread sleeps, waiting, and the
            // child is not there yet. So does a wait traced once its child is gone: it returns
            // at once (its thread looked asleep as the supervisor let it go on, 1 run in 20
            // under load).
            let tgid = self.waits.held[i].tgid;
            let mut waits = false;
            let forking = self.pids.calls.values().any(|c| {
                waits |=
                    c.tgid == tgid && matches!(c.traced.nr, libc::SYS_wait4 | libc::SYS_waitid);
                c.tgid == tgid
                    && matches!(
                        c.traced.nr,
                        libc::SYS_clone | libc::SYS_clone3 | libc::SYS_fork | libc::SYS_vfork
                    )
            });
            let forking = forking || (waits && go_clock::descendants(tgid).is_empty());
            let h = &mut self.waits.held[i];
            let now = std::time::Instant::now();
            let ready = go_clock::ready(h.fd);
            // Expired (idle, its descendants too: `go_clock::expired`), and still no event (a
            // thread that made one, a new earlier timer waking the netpoller through its
            // eventfd, ran before the first look at the threads).
            let expired = !ready
                && !forking
                && go_clock::expired(h, now, warp, listener)
                && !go_clock::ready(h.fd);
            if !ready && !expired {
                i += 1;
                continue;
            }
            let h = self.waits.held.remove(i);
            let answer = if ready {
                Answer::Continue
            } else {
                Answer::Value(0)
            };
            // The clock moves before the answer (the woken thread reads it from the page at
            // once), and back if the call had gone meanwhile.
            let d = if expired { h.len_ns } else { 0 };
            self.advance(h.tgid, d);
            if !respond(listener, h.id, answer) {
                self.advance(h.tgid, -d);
            } else if expired {
                self.waits.moved(&go_clock::thread_ids(h.tgid));
                self.note_waited(h.tgid);
            }
        }
    }
}
