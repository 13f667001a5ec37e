//! A static Go image's set-up at its exec stop: its clock page and kept vDSO
//! (`vdso_clock.rs`, `vdso_rest.rs`) and its in-image entropy (`go_entropy.rs`), and the
//! reads its entropy code sends here.

use seal_abi::supervised::clock_page::Kind;
use seal_abi::Fid;

use super::super::batch::Along;
use super::super::go_entropy::{Planned, Site};
use super::super::stop::Stop;
use super::Supervisor;
use super::{Answer, Notif, MONO_BASE_NS};

/// What a Go image's exec stop adds to its clock page's batch, for after it
/// ([`Supervisor::go_clock_stop`]).
#[derive(Default)]
pub(super) struct GoAlong {
    along: Along,
    rand: Option<super::go_rand::RandAlong>,
    entropy: Option<Planned>,
}

impl Supervisor {
    /// The Go image just exec'd (stopped at `stop`): its clock page (with `seal`: its clocks
    /// are sealed), whether it is in place, and with its random numbers sealed the calls of
    /// their mappings (the runtime's random functions', `crypto/rand`'s) in the same batch:
    /// one stop of the image where each was one (~70–110 µs of a hello world's start-up).
    pub(super) fn go_clock_stop(&mut self, stop: &Stop, seal: bool) -> (bool, GoAlong) {
        let mut g = GoAlong::default();
        if !seal {
            return (false, g);
        }
        if self.world.sealed(seal_abi::flags::RANDOM) {
            g.rand = self.rand_along(self.pid, self.bias, &mut g.along);
            g.entropy = self.entropy_along(stop, &mut g.along);
        }
        let fast = self.fast_clock(stop, Some(&mut g.along));
        (fast, g)
    }

    /// The Go image's random numbers and `crypto/rand`, after [`Supervisor::go_clock_stop`]
    /// (each in a batch of its own where that one did not make its mapping).
    pub(super) fn go_rand_stop(&mut self, g: GoAlong) {
        self.fast_runtime_rand(g.rand.map(|r| (&g.along, r)));
        self.fast_entropy(g.entropy, &g.along);
    }

    /// Sets up the clock page of the Go image just exec'd (stopped at `stop`): whether it is
    /// in place. Its other vDSO entries take the sealed path or make their system call
    /// (`vdso_rest.rs`); when they cannot, it loses its vDSO too. `along`: a mapping made
    /// in the same batch (the runtime's random functions' code).
    fn fast_clock(&mut self, stop: &Stop, along: Option<&mut Along>) -> bool {
        let pid = self.pid;
        let Some(vdso) = stop.vdso_base() else {
            return false;
        };
        let counters = self.go_page_counters(pid, vdso);
        let tick = self.world.tick_ns.clamp(0, i32::MAX as i64);
        let counters = counters.as_ref().map(|c| &c[..]);
        let page = (self.prepared.as_ref()).and_then(|prepared| {
            let still = Kind::Still;
            super::super::vdso_clock::install(pid, stop, prepared, tick, counters, still, 0, along)
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
        let page = super::super::vdso_clock::install(
            pid,
            stop,
            &prepared,
            tick,
            counters,
            Kind::Still,
            0,
            None,
        );
        let Some((page, _)) = page else {
            return false;
        };
        self.pages.insert(pid, page);
        true
    }

    /// Points the Go image just exec'd (stopped) at its in-image entropy, when its
    /// `GetRandom` can be found; its reads are counted in its census slot, taken now.
    /// `planned`: its mapping's calls added to the clock page's batch `along`
    /// ([`Supervisor::entropy_along`]); set up in a batch of its own when they did not run.
    pub(super) fn fast_entropy(&mut self, planned: Option<Planned>, along: &Along) {
        let (pid, bias, lineage) = (self.pid, self.bias, self.world.lineage);
        let e = match planned {
            Some(p) if p.ran(|i| along.result(i)) => p.finish(pid, |i| along.result(i)),
            Some(p) => {
                let count = p.count();
                p.abandon();
                self.entropy_in(pid, bias, lineage, Some(count))
            }
            None => self.entropy_in(pid, bias, lineage, None),
        };
        if let Some(e) = e {
            self.own.push(e.range);
            self.entropy = Some(e);
        }
    }

    /// [`Supervisor::fast_entropy`] for a Go image process `pid` of the run exec'd (stopped
    /// at `stop`: a forked child's `os/exec` command, a dynamic descendant's), its stream keyed
    /// by `lineage`: the entropy code's calls are the image's own.
    pub(super) fn exec_entropy(&mut self, pid: i32, stop: &Stop, lineage: u64) {
        let Some(e) = self.entropy_in(pid, stop.bias, lineage, None) else {
            return;
        };
        if let Some((text, _)) = self.images.get_mut(&pid) {
            text.push(e.range);
        }
        self.entropies.insert(pid, e);
    }

    /// Prepares the in-image entropy of the Go image just exec'd (stopped at `stop`), its
    /// mapping's calls added to the clock page's batch `along` (its paths further down the
    /// new stack than the clock page's; its census page mapped by a call of its own, as the
    /// clock page's is not mapped yet).
    fn entropy_along(&mut self, stop: &Stop, along: &mut Along) -> Option<Planned> {
        let (pid, bias, lineage) = (self.pid, self.bias, self.world.lineage);
        let (site, run_dir, count) = self.entropy_site(pid, bias, None)?;
        let rsp = stop.regs?.rsp;
        let table = run_dir.join(seal_abi::RUN_TABLE_NAME);
        let census = count.map(|off| (table.as_path(), off));
        let key = (self.world.seed, lineage);
        let paths = ((rsp - 12288) & !15, (rsp - 16384) & !15);
        super::super::go_entropy::plan(pid, &run_dir, &site, key, census, None, paths, along)
    }

    /// The rewritten call's site in Go image `pid` (its program at `bias`), the run directory,
    /// and its reads' census pair (reserved now unless `count` gives it).
    fn entropy_site(
        &mut self,
        pid: i32,
        bias: u64,
        count: Option<Option<u64>>,
    ) -> Option<(Site, std::path::PathBuf, Option<u64>)> {
        let found = self.go_exe(pid)?.sites.random?;
        let site = Site::biased(found, bias);
        let run_dir = self.world.run_dir.clone()?;
        self.ensure(pid);
        let count = match count {
            Some(c) => c,
            None => (self.slot(pid)).and_then(|s| s.reserve(Fid::Getrandom, 0, site.call + 1)),
        };
        Some((site, run_dir, count))
    }

    /// Sets the in-image entropy up in Go image `pid` (stopped at its exec, its program at
    /// `bias`), its stream keyed by the seed and `lineage`, its reads counted in its census
    /// slot (a pair of their own: the call's address + 1, inside `GetRandom`, which only the
    /// image's code moves from here on; `count`: reserved already), in a batch of its own.
    fn entropy_in(
        &mut self,
        pid: i32,
        bias: u64,
        lineage: u64,
        count: Option<Option<u64>>,
    ) -> Option<super::super::go_entropy::Entropy> {
        let (site, run_dir, count) = self.entropy_site(pid, bias, count)?;
        let table = run_dir.join(seal_abi::RUN_TABLE_NAME);
        let census = count.map(|off| (table.as_path(), off));
        let key = (self.world.seed, lineage);
        // The census page the clock page's counters are on, mapped in the image already.
        let mapped = self.pages.get(&pid).and_then(|p| p.census);
        super::super::go_entropy::install(pid, &run_dir, &site, key, census, mapped)
    }

    /// Is `ip` in process `tgid`'s image's entropy code (a read its window did not hold)?
    pub(super) fn entropy_code(&self, tgid: i32, ip: u64) -> bool {
        self.entropy_of(tgid)
            .is_some_and(|e| (e.range.0..e.range.1).contains(&ip))
    }

    /// The in-image entropy of process `tgid`'s image, if it has one.
    pub(super) fn entropy_of(&self, tgid: i32) -> Option<&super::super::go_entropy::Entropy> {
        match self.images.contains_key(&tgid) {
            true => self.entropies.get(&tgid),
            false => self.entropy.as_ref(),
        }
    }

    /// A read the image's entropy code could not serve from its window: stream bytes at its
    /// claim's position (`r10`).
    pub(super) fn positioned(&mut self, tid: i32, tgid: i32, n: &Notif) -> Answer {
        let Some(e) = self.entropy_of(tgid) else {
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
