//! The streak rule (docs/design.md, "Causality"): timed waits ended early by something that
//! carried no time cannot keep a deadline loop's clock standing still forever.

use crate::clock;

/// A run of timed waits that were all ended early by something that carried no time (an
/// fd that became ready, a wakeup from an unsealed process or the network), with the real and
/// logical deadline of the one that should have run out first. Causality (`crate::causal`)
/// moves the clock when the waker is sealed; when it is not, a deadline loop would otherwise
/// spin forever while its logical clock stands still. So once the streak has lasted as long
/// in real time as its shortest timeout, the next wait ends it: `L` moves to that deadline, as
/// real time would have moved it.
#[derive(Clone, Copy)]
struct Streak {
    /// Real `CLOCK_MONOTONIC` deadline; 0 = no streak.
    real: i64,
    /// The logical deadline that goes with it.
    logical: i64,
    /// That wait's timeout: the streak is a loop's, and only a wait no longer than it can
    /// be that loop's next round.
    ns: i64,
}

crate::thread_cell! {
    static STREAK: Streak = "seal_tls_wait_streak";
}

pub(super) fn end_streak() {
    STREAK.with(|s| {
        s.set(Streak {
            real: 0,
            logical: 0,
            ns: 0,
        })
    });
}

/// A relative wait of `ns` that started at real `t0` and logical `l0` ended early.
pub(super) fn early(t0: i64, l0: i64, ns: i64, clock_moved: bool) {
    if clock_moved {
        // A sealed waker carried its time: the loop is making progress on its own.
        end_streak();
        return;
    }
    let real = t0.saturating_add(clock::real_span(ns));
    STREAK.with(|s| {
        let cur = s.get();
        if cur.real == 0 || real < cur.real {
            s.set(Streak {
                real,
                logical: l0.saturating_add(ns),
                ns,
            });
        }
    });
}

/// At the start of a timed wait of `ns`: the logical deadline of a streak whose real time is
/// up, if this wait can be the streak's loop's next round. A deadline loop's rounds wait as
/// long as its shortest one, or less (the time left shrinks by the reads' ticks); a longer
/// wait is something else (a TLS handshake's 10 s `poll` after a server loop's 50 ms
/// `select` was ended by the connection, an `accept` with a 5 s timeout that an alarm
/// should interrupt): it waits as it would without the streak, which stays for its loop.
pub(super) fn streak_due(real_now: i64, ns: i64) -> Option<i64> {
    let cur = STREAK.with(|s| s.get());
    (cur.real != 0 && real_now >= cur.real && ns <= cur.ns).then_some(cur.logical)
}
