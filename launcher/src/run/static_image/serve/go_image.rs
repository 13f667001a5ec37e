//! A static Go image's set-up at its exec stop: its clock page and kept vDSO
//! (`vdso_clock.rs`, `vdso_rest.rs`) and its in-image entropy (`go_entropy.rs`), and the
//! reads its entropy code sends here.

use seal_abi::supervised::clock_page::Kind;
use seal_abi::Fid;

use super::super::stop::Stop;
use super::Supervisor;
use super::{Answer, Notif, MONO_BASE_NS};

impl Supervisor {
    /// Sets up the clock page of the Go image just exec'd (stopped at `stop`): whether it is
    /// in place. Its other vDSO entries take the sealed path or make their system call
    /// (`vdso_rest.rs`); when they cannot, it loses its vDSO too.
    pub(super) fn fast_clock(&mut self, stop: &Stop) -> bool {
        let pid = self.pid;
        let Some(vdso) = stop.vdso_base() else {
            return false;
        };
        let counters = self.go_page_counters(pid, vdso);
        let tick = self.world.tick_ns.clamp(0, i32::MAX as i64);
        let counters = counters.as_ref().map(|c| &c[..]);
        let page = (self.prepared.as_ref()).and_then(|prepared| {
            super::super::vdso_clock::install(pid, stop, prepared, tick, counters, Kind::Still)
        });
        let Some((page, _)) = page else {
            return false;
        };
        self.own.extend(stop.vdso);
        self.pages.insert(pid, page);
        true
    }

    /// Process `pid`'s census counters of its page's reads (`CLOCK_REALTIME`,
    /// `CLOCK_MONOTONIC`), which the image maps (its slot's first page), counted from the
    /// vDSO's first byte and named after the page in the census.
    fn go_page_counters(&mut self, pid: i32, vdso: u64) -> Option<[u64; 2]> {
        let slot = self.slot_deferred(pid)?;
        use seal_abi::supervised::clock_page::MODULE_NAME;
        slot.add_module(MODULE_NAME, vdso, vdso + 4096);
        let fid = Fid::ClockGettime;
        let c = [
            slot.reserve(fid, 0, vdso + 1),
            slot.reserve(fid, 1, vdso + 1),
        ];
        slot.commit();
        Some([c[0]?, c[1]?])
    }

    /// Sets up the clock page of a Go image that a process of the run exec'd (a forked child
    /// running `os/exec`'s command: `go build`'s compilers, a Go test binary; or the first
    /// image's own process: `exec prog`, `syscall.Exec`), stopped at
    /// `stop`, as for the first image: its clock starts at its process's (its parent's at the
    /// fork), and its timer waits move it. Whether it is in place (else the caller removes its
    /// vDSO, and each of its clock reads is a system call to the supervisor, ~50 µs).
    pub(super) fn exec_go_clock(&mut self, pid: i32, stop: &Stop) -> bool {
        let (Some(vdso), Some(dir)) = (stop.vdso_base(), self.world.run_dir.clone()) else {
            return false;
        };
        // Its image, whose code includes the vDSO (the entry's fallback is its call).
        let text = stop.text.iter().copied().chain(stop.vdso).collect();
        self.images.insert(pid, (text, true));
        // Its parent's clock as its page holds it (spinning reads may have ticked it there).
        let parent = super::super::remote::proc_status_field(pid, "PPid:").unwrap_or(0);
        if let Some(c) = self.pages.get(&parent).map(|p| p.c(MONO_BASE_NS)) {
            if let Some(p) = self.procs.get_mut(&parent) {
                p.l = c;
            }
        }
        self.ensure(pid);
        // The process's clock, wherever its last image kept it (a static C image's ticking
        // page, whose image is gone: a Go process keeps `C` in `l` and in its own page).
        self.merge_finished(pid);
        let c = self.proc(pid).l();
        let p = self.proc(pid);
        (p.page, p.l) = (None, c);
        let counters = self.go_page_counters(pid, vdso);
        let first = [self.world.epoch_ns.saturating_add(c), MONO_BASE_NS + c];
        let Some(prepared) = super::super::vdso_clock::Prepared::at(pid, &dir, first) else {
            return false;
        };
        let tick = self.world.tick_ns.clamp(0, i32::MAX as i64);
        let counters = counters.as_ref().map(|c| &c[..]);
        let page =
            super::super::vdso_clock::install(pid, stop, &prepared, tick, counters, Kind::Still);
        let Some((page, _)) = page else {
            return false;
        };
        self.pages.insert(pid, page);
        if self.world.sealed(seal_abi::flags::RANDOM) {
            // Its `cputicks` and random numbers, as the first image's, keyed per exec'd image.
            let lineage = seal_abi::mix64(self.world.lineage ^ self.children);
            self.runtime_rand(pid, stop.bias, lineage);
        }
        true
    }

    /// Points the Go image just exec'd (stopped) at its in-image entropy, when its
    /// `GetRandom` can be found; its reads are counted in its census slot, taken now.
    pub(super) fn fast_entropy(&mut self) {
        let Some(exe) = super::super::exe_map::ExeMap::of(self.pid) else {
            return;
        };
        let Some(site) = super::super::go_entropy::find(&exe, self.bias) else {
            return;
        };
        let Some(run_dir) = self.world.run_dir.clone() else {
            return;
        };
        self.ensure(self.pid);
        // The in-image reads' count: a census pair of their own (the call's address + 1,
        // inside `GetRandom`), which only the image's code moves from here on.
        let count = self
            .slot(self.pid)
            .and_then(|s| s.reserve(Fid::Getrandom, 0, site.call + 1));
        let table = run_dir.join(seal_abi::RUN_TABLE_NAME);
        let census = count.map(|off| (table.as_path(), off));
        let key = (self.world.seed, self.world.lineage);
        // The census page the clock page's counters are on, mapped in the image already.
        let mapped = self.pages.get(&self.pid).and_then(|p| p.census);
        let e = super::super::go_entropy::install(self.pid, &run_dir, &site, key, census, mapped);
        if let Some(e) = e {
            self.own.push(e.range);
            self.entropy = Some(e);
        }
    }

    /// A read the image's entropy code could not serve from its window: stream bytes at its
    /// claim's position (`r10`).
    pub(super) fn positioned(&mut self, tid: i32, n: &Notif) -> Answer {
        let Some(e) = &self.entropy else {
            return Answer::Error(libc::ENOSYS);
        };
        let a = n.args;
        let write = |at: u64, b: &[u8]| super::write(tid, at, b);
        match e.draw(a[3], a[1] as usize, write, a[0]) {
            Ok(v) => Answer::Value(v),
            Err(err) => Answer::Error(err),
        }
    }
}
