//! A static C image's clock page: the logical clock of a process (`L`, and `mono`, the tick
//! counter of its monotonic reads) kept in a page shared with the image, whose
//! `__vdso_clock_gettime`, `__vdso_gettimeofday` and `__vdso_time` tick it with `lock xadd`
//! (`seal_abi::supervised::clock_page`, [`Kind::Ticking`]). The page is the one place the
//! process's clock is: the served calls (other clock ids, sleeps, a reaped child's time, a
//! forked child's start) read and move it there too.
//!
//! Words: `[REALTIME] = epoch + L`, `[MONOTONIC] = MONO_BASE + L + mono`. The image finds the
//! page through a private word (`pointer`, on a `MADV_WIPEONFORK` page): a forked child finds
//! 0 there and makes system calls, served from a clock of its own; and once a process of the
//! image has a child the supervisor knows, the supervisor sets the word to 0 itself, so the
//! parent's reads are served again and take in its reaped children's time as before.

use seal_abi::supervised::clock_page::{self as cp, Kind};

use super::super::clock_state::Ticking;
use super::super::stop::Stop;
use super::{Proc, Supervisor, MONO_BASE_NS};

impl Proc {
    /// `L`, wherever it is kept.
    pub(super) fn l(&self) -> i64 {
        self.page.as_ref().map_or(self.l, Ticking::l)
    }

    /// `mono`, wherever it is kept.
    pub(super) fn mono(&self) -> i64 {
        self.page.as_ref().map_or(self.mono, Ticking::mono)
    }

    /// Moves `L` by `d` ns (a wait: the reads after it leave it still again, `--spin-after`).
    pub(super) fn add_l(&mut self, d: i64) {
        match &self.page {
            Some(t) => {
                t.add(cp::REALTIME, d);
                t.add(cp::MONOTONIC, d);
                t.moved();
            }
            None => {
                self.l = self.l.saturating_add(d);
                self.since = 0;
            }
        }
    }

    /// What a served read moves the clock by: `tick`, or 0 for the first `spin` reads after
    /// the clock last moved by a wait (`--spin-after`, as the page's code counts them).
    pub(super) fn read_tick(&mut self, tick: i64, spin: u32) -> i64 {
        if spin == 0 {
            return tick;
        }
        let n = match &self.page {
            Some(t) => t.add(cp::SINCE_MOVE, 1).clamp(0, u32::MAX as i64) as u32,
            None => {
                self.since = self.since.saturating_add(1);
                self.since - 1
            }
        };
        if n < spin {
            0
        } else {
            tick
        }
    }

    /// A wall-clock read: `epoch + L`, then `L` moves `tick`.
    pub(super) fn tick_realtime(&mut self, epoch: i64, tick: i64) -> i64 {
        match &self.page {
            Some(t) => {
                t.add(cp::MONOTONIC, tick);
                t.add(cp::REALTIME, tick)
            }
            None => {
                let v = epoch.saturating_add(self.l);
                self.l = self.l.saturating_add(tick);
                v
            }
        }
    }

    /// A monotonic read: `MONO_BASE + L + mono + tick`, then `mono` moves `tick`.
    pub(super) fn tick_monotonic(&mut self, tick: i64) -> i64 {
        match &self.page {
            Some(t) => t.add(cp::MONOTONIC, tick).saturating_add(tick),
            None => {
                let v = MONO_BASE_NS
                    .saturating_add(self.l)
                    .saturating_add(self.mono)
                    .saturating_add(tick);
                self.mono = self.mono.saturating_add(tick);
                v
            }
        }
    }

    /// `(L, mono)`, for [`Proc::unwind`].
    pub(super) fn clock_state(&self) -> (i64, i64) {
        (self.l(), self.mono())
    }

    /// Takes back what an answer moved the clock by, from `before` to `after` (by adding the
    /// difference: on a page, reads made meanwhile by other threads stay counted).
    pub(super) fn unwind(&mut self, before: (i64, i64), after: (i64, i64)) {
        let (dl, dm) = (before.0 - after.0, before.1 - after.1);
        match &self.page {
            Some(t) => {
                t.add(cp::REALTIME, dl);
                t.add(cp::MONOTONIC, dl + dm);
            }
            None => {
                self.l = self.l.saturating_add(dl);
                self.mono = self.mono.saturating_add(dm);
            }
        }
    }
}

impl Supervisor {
    /// Sets up the clock page of the static C image just exec'd (stopped at `stop`): whether
    /// it is in place. Its reads are counted in its census slot, which the image maps.
    pub(super) fn ticking_clock(&mut self, stop: &Stop) -> bool {
        let pid = self.pid;
        let Some(vdso) = stop.vdso_base() else {
            return false;
        };
        // The slot's header, its module of the page's code and the counters are written at
        // once (`Slot::commit`).
        let counters = self.page_counters(pid, vdso);
        let Some(counters) = counters else {
            return false;
        };
        let tick = self.world.tick_ns.clamp(0, i32::MAX as i64);
        let Some(prepared) = &self.prepared else {
            return false;
        };
        // The vDSO's other entries give no real values (`vdso_rest.rs`; `gettimeofday` and
        // `time` are pointed at the page's code).
        let Some((page, pointer)) = super::super::vdso_clock::install(
            pid,
            stop,
            prepared,
            tick,
            Some(&counters),
            Kind::Ticking,
            self.world.spin_after,
            None,
        ) else {
            return false;
        };
        let epoch = self.world.epoch_ns;
        self.ensure(pid);
        self.proc(pid).page = Some(Ticking {
            page,
            pointer,
            epoch,
            mono_base: MONO_BASE_NS,
        });
        self.own.extend(stop.vdso);
        true
    }

    /// Sets up the clock page of the static C image that process `pid` of the image exec'd
    /// (stopped at its exec: `stop`), as for the first image, from the process's clock: whether
    /// it is in place: in a fork of the image (a shell running a command) or in the image's
    /// own process (`exec prog`, a shell's last command). Its census slot is a new one (the
    /// caller let the old one go), which names the page's code.
    pub(super) fn exec_clock(&mut self, pid: i32, stop: &Stop) -> bool {
        let known = self.census.as_ref().is_some_and(|c| c.contains_key(&pid));
        let (Some(vdso), Some(dir)) = (stop.vdso_base(), self.world.run_dir.clone()) else {
            return false;
        };
        if stop.go || known {
            return false;
        }
        // Its image, whose code includes the vDSO (the entries' fallbacks are its calls).
        let text = stop.text.iter().copied().chain(stop.vdso).collect();
        self.images.insert(pid, (text, false));
        // Its clock: its parent's, as at a first served call (and its parent named in the
        // census).
        self.ensure(pid);
        let counters = self.page_counters(pid, vdso);
        let Some(counters) = counters else {
            return false;
        };
        // The time of children it reaped before its exec is its (as at its next read).
        self.merge_finished(pid);
        let (l, mono) = (self.proc(pid).l(), self.proc(pid).mono());
        let epoch = self.world.epoch_ns;
        let first = [epoch + l, MONO_BASE_NS + l + mono];
        let tick = self.world.tick_ns.clamp(0, i32::MAX as i64);
        let Some(prepared) = super::super::vdso_clock::Prepared::at(pid, &dir, first) else {
            return false;
        };
        let Some((page, pointer)) = super::super::vdso_clock::install(
            pid,
            stop,
            &prepared,
            tick,
            Some(&counters),
            Kind::Ticking,
            self.world.spin_after,
            None,
        ) else {
            return false;
        };
        self.proc(pid).page = Some(Ticking {
            page,
            pointer,
            epoch,
            mono_base: MONO_BASE_NS,
        });
        // A process that still has children the supervisor serves (forked before its exec)
        // takes in their time at its reads, as before the exec: they are served.
        if self.procs.values().any(|p| p.parent == pid) {
            self.page_off(pid);
        }
        true
    }

    /// Process `parent` has a child the supervisor now serves: its own reads go to the
    /// supervisor from now on (its clock then takes in its reaped children's time, which a
    /// read of the page could not).
    pub(super) fn page_off(&mut self, parent: i32) {
        if let Some(t) = self.procs.get_mut(&parent).and_then(|p| p.page.as_mut()) {
            if t.pointer != 0 && super::write(parent, t.pointer, &0u64.to_le_bytes()) {
                t.pointer = 0;
            }
        }
    }
}

impl Supervisor {
    /// Process `pid`'s census counters of its page's reads (`clock_gettime` of
    /// `CLOCK_REALTIME` and `CLOCK_MONOTONIC`, `gettimeofday`, `time`), counted from the
    /// vDSO's first byte and named after the page: its slot's header, the page's module and
    /// the counters in one write (`Slot::commit`). `None`: not counted.
    fn page_counters(&mut self, pid: i32, vdso: u64) -> Option<[u64; 4]> {
        let slot = self.slot_deferred(pid)?;
        slot.add_module(cp::MODULE_NAME, vdso, vdso + 4096);
        use seal_abi::Fid;
        let at = vdso + 1;
        let c = [
            slot.reserve(Fid::ClockGettime, 0, at),
            slot.reserve(Fid::ClockGettime, 1, at),
            slot.reserve(Fid::Gettimeofday, 0, at),
            slot.reserve(Fid::TimeFn, 0, at),
        ];
        slot.commit();
        Some([c[0]?, c[1]?, c[2]?, c[3]?])
    }
}

#[cfg(test)]
mod tests {
    use seal_abi::supervised::clock_page::{self as cp, Kind, MAX_LEN};

    type ClockGettime = extern "C" fn(i32, *mut libc::timespec) -> i32;
    type Gettimeofday = extern "C" fn(*mut libc::timeval, *mut u64) -> i32;
    type Time = extern "C" fn(*mut i64) -> i64;

    /// A fresh page holding `code`, made executable (the caller unmaps it).
    ///
    /// # Safety
    /// The code must be safe to run with what its callers pass it.
    unsafe fn executable(code: &[u8]) -> *mut libc::c_void {
        // SAFETY: a fresh anonymous mapping of our own, made executable after the copy.
        unsafe {
            let m = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(m, libc::MAP_FAILED);
            std::ptr::copy_nonoverlapping(code.as_ptr(), m.cast::<u8>(), code.len());
            assert_eq!(
                libc::mprotect(m, 4096, libc::PROT_READ | libc::PROT_EXEC),
                0
            );
            m
        }
    }

    /// The ticking code, run here on a page of our own: it gives the values the supervisor
    /// serves (`serve.rs`: a wall-clock read `epoch + L` then `L += tick`, a monotonic read
    /// `MONO_BASE + L + mono + tick` then `mono += tick`) and counts each read.
    #[test]
    fn the_ticking_code_reads_and_ticks_as_the_served_clock() {
        let (epoch, base, tick) = (1_767_225_600_000_000_000i64, super::MONO_BASE_NS, 1000);
        // Raw memory the code writes behind the compiler's back, read back volatile.
        let page = Box::into_raw(Box::new([0u64; 512])).cast::<u64>();
        let counts = Box::into_raw(Box::new([0u64; 4])).cast::<u64>();
        let pointer = Box::into_raw(Box::new(page as u64));
        let mut code = [0u8; MAX_LEN];
        let e = cp::generate(&mut code, pointer as u64, tick as u32, Kind::Ticking);
        // SAFETY: a fresh anonymous mapping of our own, made executable after the copy; the
        // code only touches the page, the counters and its arguments, all live here.
        unsafe {
            page.add(cp::REALTIME).write(epoch as u64);
            page.add(cp::MONOTONIC).write(base as u64);
            let words = [
                cp::COUNTER,
                cp::COUNTER + 1,
                cp::COUNTER_GETTIMEOFDAY,
                cp::COUNTER_TIME,
            ];
            for (i, w) in words.into_iter().enumerate() {
                page.add(w).write(counts.add(i) as u64);
            }
            let counted = || [0, 1, 2, 3].map(|i| counts.add(i).read_volatile());
            let m = executable(&code[..e.len]);
            let at = |off: usize| m.cast::<u8>().add(off);
            let cg: ClockGettime = std::mem::transmute(at(e.clock_gettime));
            let gtod: Gettimeofday = std::mem::transmute(at(e.gettimeofday.unwrap()));
            let time: Time = std::mem::transmute(at(e.time.unwrap()));
            let mut ts: libc::timespec = std::mem::zeroed();
            let ns = |ts: &libc::timespec| ts.tv_sec * 1_000_000_000 + ts.tv_nsec;
            assert_eq!(cg(0, &mut ts), 0);
            assert_eq!(ns(&ts), epoch);
            assert_eq!(cg(1, &mut ts), 0);
            assert_eq!(ns(&ts), base + tick + tick);
            assert_eq!(cg(1, &mut ts), 0);
            assert_eq!(ns(&ts), base + tick + tick + tick);
            assert_eq!(cg(0, &mut ts), 0);
            assert_eq!(ns(&ts), epoch + tick);
            let mut tv: libc::timeval = std::mem::zeroed();
            let mut tz = u64::MAX;
            assert_eq!(gtod(&mut tv, &mut tz), 0);
            assert_eq!(
                (tv.tv_sec as i64, tv.tv_usec as i64, tz),
                (1_767_225_600, 2, 0)
            );
            assert_eq!(gtod(std::ptr::null_mut(), std::ptr::null_mut()), 0);
            let mut t = 0i64;
            assert_eq!(time(&mut t), 1_767_225_600);
            assert_eq!(t, 1_767_225_600);
            assert_eq!(time(std::ptr::null_mut()), 1_767_225_600);
            assert_eq!(
                page.add(cp::REALTIME).read_volatile() as i64,
                epoch + 6 * tick
            );
            assert_eq!(counted(), [2, 2, 2, 2]);
            // No page named (a forked child): the system call, here the kernel's.
            pointer.write_volatile(0);
            assert_eq!(cg(0, &mut ts), 0);
            assert!(ts.tv_sec > 1_600_000_000);
            assert_eq!(counted(), [2, 2, 2, 2]);
            libc::munmap(m, 4096);
            drop(Box::from_raw(pointer));
            drop(Box::from_raw(counts.cast::<[u64; 4]>()));
            drop(Box::from_raw(page.cast::<[u64; 512]>()));
        }
    }

    /// With `--spin-after 3`: the first three wall-clock reads after a move leave the clock
    /// still, the fourth and later tick; a move by a wait (the supervisor zeroes
    /// `SINCE_MOVE`) starts the count again; monotonic reads likewise.
    #[test]
    fn the_ticking_code_leaves_the_clock_still_for_the_first_reads_after_a_wait() {
        let (epoch, base, tick) = (1_767_225_600_000_000_000i64, super::MONO_BASE_NS, 1000);
        let page = Box::into_raw(Box::new([0u64; 512])).cast::<u64>();
        let counts = Box::into_raw(Box::new([0u64; 4])).cast::<u64>();
        let pointer = Box::into_raw(Box::new(page as u64));
        let mut code = [0u8; MAX_LEN];
        let e = cp::generate_spin(&mut code, pointer as u64, tick as u32, Kind::Ticking, 3);
        assert!(e.len <= MAX_LEN);
        // SAFETY: as in the test above.
        unsafe {
            page.add(cp::REALTIME).write(epoch as u64);
            page.add(cp::MONOTONIC).write(base as u64);
            for (i, w) in [
                cp::COUNTER,
                cp::COUNTER + 1,
                cp::COUNTER_GETTIMEOFDAY,
                cp::COUNTER_TIME,
            ]
            .into_iter()
            .enumerate()
            {
                page.add(w).write(counts.add(i) as u64);
            }
            let m = executable(&code[..e.len]);
            let at = |off: usize| m.cast::<u8>().add(off);
            let cg: ClockGettime = std::mem::transmute(at(e.clock_gettime));
            let time: Time = std::mem::transmute(at(e.time.unwrap()));
            let mut ts: libc::timespec = std::mem::zeroed();
            let mut read = |clk| {
                assert_eq!(cg(clk, &mut ts), 0);
                ts.tv_sec * 1_000_000_000 + ts.tv_nsec
            };
            // Reads 0..3 still, the fourth ticks (its value is from before its tick).
            assert_eq!(
                [read(0), read(0), read(1), read(0)],
                [epoch, epoch, base, epoch]
            );
            assert_eq!(read(0), epoch + tick);
            assert_eq!(read(1), base + 2 * tick + tick);
            assert_eq!(time(std::ptr::null_mut()), 1_767_225_600);
            // A wait moved the clock: still again.
            page.add(cp::SINCE_MOVE).write_volatile(0);
            let now = page.add(cp::REALTIME).read_volatile() as i64;
            assert_eq!([read(0), read(0), read(0)], [now, now, now]);
            assert_eq!(read(0), now);
            assert_eq!(read(0), now + tick);
            libc::munmap(m, 4096);
            drop(Box::from_raw(pointer));
            drop(Box::from_raw(counts.cast::<[u64; 4]>()));
            drop(Box::from_raw(page.cast::<[u64; 512]>()));
        }
    }
}
