//! File times (family `files`): what `stat` shows, and what "now" means to `utimensat`.
//!
//! The real files keep the kernel's times; sealed processes see sealed ones, decided once per
//! file and shared by the whole run through a table in the run dir (`table`):
//!
//! * a real time before the run's real start (`table::Header::start`) is from a file made
//!   before the run: it shows `min(real, epoch)` (the reproducible-builds clamp), so two
//!   copies of the same inputs made at different times look the same;
//! * a file the run modified shows the logical time at which the run recorded it: the writer's
//!   clock when a sealed process closes it (`close`, `fclose`), the caller's clock for
//!   `utimensat(…, NULL or UTIME_NOW)` and friends, or, for a file nobody recorded (a
//!   directory whose entries changed, a file written through a descriptor that was never
//!   closed, or by an unsealed program), the clock of the first sealed process that looks;
//! * an explicit time a program sets (`touch -d`, `cp -p`, `gzip`, `tar x`) is what it set.
//!
//! Access, change and birth times follow: equal to the real mtime → the sealed mtime; from
//! before the run → clamped; from inside the run → the sealed mtime. A process that sees a
//! recorded clock value ahead of its own clock moves its clock there first, so nothing it
//! reads afterwards is "in the future" (`make`'s clock-skew check).

pub mod table;

#[cfg(not(test))]
pub(crate) mod hooks;

use seal_abi::flags;

use crate::clock;
use crate::core::{config, thread};

/// A file's four times in nanoseconds (`b`: birth time, when known).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Times {
    pub a: i64,
    pub m: i64,
    pub c: i64,
    pub b: Option<i64>,
}

/// The run's constants: its epoch and the real time it started at.
#[derive(Clone, Copy, Debug)]
pub struct Rules {
    pub epoch: i64,
    pub start: i64,
}

impl Rules {
    /// What a real time from before the run shows; `None` for a time inside the run.
    pub fn before_run(&self, real: i64) -> Option<i64> {
        (real < self.start).then(|| real.min(self.epoch))
    }

    /// The other times given the sealed mtime `m` (see the module doc).
    pub fn follow(&self, real: i64, real_m: i64, m: i64) -> i64 {
        if real == real_m {
            m
        } else {
            self.before_run(real).unwrap_or(m)
        }
    }

    /// All four times, with `mtime(real_m)` deciding the modification time.
    pub fn apply(&self, t: Times, mtime: impl FnOnce(i64) -> i64) -> Times {
        let m = mtime(t.m);
        Times {
            a: self.follow(t.a, t.m, m),
            m,
            c: self.follow(t.c, t.m, m).max(m),
            b: t.b.map(|b| self.follow(b, t.m, m).min(m)),
        }
    }
}

/// "Now" for a write (at close) or a first look at a file the run changed without recording
/// it: the logical clock, not advanced.
pub fn now_quiet() -> i64 {
    in_run(if config::sealed(flags::TIME) {
        clock::realtime_base().wrapping_add(thread::peek())
    } else {
        real_now()
    })
}

/// "Now" for a program's own `utimensat(…, UTIME_NOW)`: one sealed clock read.
pub fn now_read() -> i64 {
    in_run(if config::sealed(flags::TIME) {
        clock::realtime_ns()
    } else {
        real_now()
    })
}

/// Anything the run did is strictly newer than anything from before it (clamped to the epoch),
/// even at logical time 0: `touch src; make` at the start of a run rebuilds.
fn in_run(v: i64) -> i64 {
    v.max(config::epoch_ns().wrapping_add(1))
}

/// A process of the run set a file's time to its own "now" (`touch`): its parent, once it
/// reaps it, is at least that late (as after a child's sleep).
fn publish(recorded: i64, ours: i64) {
    if recorded == ours && config::sealed(flags::TIME) {
        crate::process::vpid::note_waited();
    }
}

fn real_now() -> i64 {
    clock::from_timespec(&crate::core::sys::clock_gettime(libc::CLOCK_REALTIME))
}

/// The sealed times of file (`dev`, `ino`) whose real times are `t`.
pub fn seal(dev: u64, ino: u64, t: Times) -> Times {
    let epoch = config::epoch_ns();
    let Some(tab) = table::get() else {
        // No shared record: clamp everything (deterministic, but files written in the run all
        // show the epoch). Said once by `table::map`.
        let r = Rules {
            epoch,
            start: i64::MAX,
        };
        return r.apply(t, |m| m.min(epoch));
    };
    let rules = Rules {
        epoch,
        start: tab.start(),
    };
    rules.apply(t, |real_m| {
        let (v, kind) = match tab.lookup(dev, ino, real_m) {
            Some(found) => found,
            None => match rules.before_run(real_m) {
                Some(v) => return v,
                None => {
                    let k = table::KIND_OBSERVED;
                    let v = tab.record(dev, ino, real_m, now_quiet(), k, !0);
                    (v, k)
                }
            },
        };
        if kind == table::KIND_CLOCK && config::sealed(flags::TIME) {
            // Causality: what another process recorded at its clock is not in our future.
            thread::advance_to(v.wrapping_sub(clock::realtime_base()));
        }
        v
    })
}

/// A sealed process is done writing through a descriptor whose file has these real values:
/// record the writer's clock for a regular file modified in the run and not yet recorded at
/// this real mtime.
pub fn note_written(dev: u64, ino: u64, mode: u32, real_m: i64) {
    if mode & libc::S_IFMT != libc::S_IFREG {
        return;
    }
    let Some(tab) = table::get() else { return };
    if real_m < tab.start() {
        return;
    }
    if let Some((_, k)) = tab.lookup(dev, ino, real_m) {
        if k != table::KIND_OBSERVED {
            return;
        }
    }
    // The writer's clock, not advanced and not handed to its parent: whether a program writes
    // a file can depend on what earlier runs left behind (Python's `__pycache__`), and its
    // clock reads must not.
    let keep = table::KIND_CLOCK | table::KIND_EXPLICIT;
    tab.record(dev, ino, real_m, now_quiet(), table::KIND_CLOCK, keep);
}

/// A program set this file's modification time, now real time `real_m`: to `Some(v)`
/// (explicit) or to now (`None`).
pub fn note_set(dev: u64, ino: u64, real_m: i64, explicit: Option<i64>) {
    let Some(tab) = table::get() else { return };
    let (v, kind) = match explicit {
        Some(v) => (v, table::KIND_EXPLICIT),
        None => (now_read(), table::KIND_CLOCK),
    };
    let recorded = tab.record(dev, ino, real_m, v, kind, 0);
    if explicit.is_none() {
        publish(recorded, v);
    }
}

/// Runs once per sealed image: the run's root fixes the run's real start.
pub fn on_start() {
    use core::sync::atomic::Ordering::Relaxed;
    if !config::sealed(flags::FILES) {
        return;
    }
    // The launcher made the table with the run's start in it (LIBSEAL_FILES_START says so);
    // an older or foreign launcher did not: then the root makes it and waits for the tick.
    if config::FILES_START.load(Relaxed) == 0
        && config::VPID.load(Relaxed) == seal_abi::ROOT_VPID
        && config::GEN.load(Relaxed) == 0
    {
        if let Some(t) = table::map(Some(0)) {
            t.set_start(table::wait_for_tick());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: i64 = 1_000_000;
    const R: i64 = 5_000_000;

    fn rules() -> Rules {
        Rules { epoch: E, start: R }
    }

    #[test]
    fn times_before_the_run_are_clamped_to_the_epoch() {
        let r = rules();
        assert_eq!(r.before_run(10), Some(10));
        assert_eq!(r.before_run(E + 7), Some(E));
        assert_eq!(r.before_run(R - 1), Some(E));
        assert_eq!(r.before_run(R), None);
        // Two copies made at different real times (both before the run) look the same.
        let t1 = Times {
            a: R - 50,
            m: R - 60,
            c: R - 60,
            b: Some(R - 60),
        };
        let t2 = Times {
            a: R - 5,
            m: R - 9,
            c: R - 2,
            b: Some(R - 9),
        };
        let f = |m: i64| r.before_run(m).unwrap();
        assert_eq!(r.apply(t1, f), r.apply(t2, f));
        assert_eq!(r.apply(t1, f).m, E);
    }

    #[test]
    fn times_inside_the_run_follow_the_recorded_mtime() {
        let r = rules();
        let t = Times {
            a: R + 100,
            m: R + 90,
            c: R + 95,
            b: Some(R + 80),
        };
        let s = r.apply(t, |_| E + 42);
        assert_eq!(
            s,
            Times {
                a: E + 42,
                m: E + 42,
                c: E + 42,
                b: Some(E + 42)
            }
        );
        // A file from before the run that was only read (atime) or chmod'ed (ctime) in it.
        let t = Times {
            a: R + 1,
            m: 3,
            c: R + 2,
            b: Some(2),
        };
        let s = r.apply(t, |m| r.before_run(m).unwrap());
        assert_eq!(
            s,
            Times {
                a: 3,
                m: 3,
                c: 3,
                b: Some(2)
            }
        );
    }

    #[test]
    fn keys_differ_by_device_and_inode() {
        assert_ne!(table::key_of(1, 2), table::key_of(2, 1));
        assert_ne!(table::key_of(1, 2), 0);
    }
}
