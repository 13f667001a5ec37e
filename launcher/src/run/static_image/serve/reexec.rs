//! An image's exec of a static binary, followed to its exec stop where the new image is set up
//! ([`Supervisor::follow_exec`]). The first image's own process exec'ing another image (`exec prog`, a shell's last command
//! run in place, Go's `syscall.Exec`): the new image is set up as one a forked child execs
//! (`follow_exec`, `exec_clock`), once what the supervisor kept for the old image is let go.
//! And any process of an image exec'ing a dynamic program: where that image starts is left in
//! the run table for its libseal ([`Supervisor::leave_exec_start`]).

use super::super::remote::proc_status_field;
use super::super::vdso_clock::Page;
use super::{Supervisor, MONO_BASE_NS};

impl Supervisor {
    /// Process `pid` (the first image's) is stopped at its exec of another image: the reads
    /// its old image's clock page counted go into the old image's census slot, a Go image's
    /// one clock is carried on as the process's clock (the next image starts from it, as a
    /// child's starts from its parent's), and the descriptors the supervisor took from it (a
    /// Go image's epoll instances, whose numbers the new image may reuse) are closed.
    pub(super) fn first_image_left(&mut self, pid: i32) {
        self.count_page_reads();
        if let Some(page) = self.pages.remove(&pid) {
            self.ensure(pid);
            self.proc(pid).l = Page::c(&page, MONO_BASE_NS);
        }
        self.waits.forget(pid);
    }

    /// Process `tgid` of an image execs a program that is not a static one (a dynamic program,
    /// libseal's to seal, or a script): its environment is the one the static image was
    /// given, which names the static image's start, so where the process's clock stands now,
    /// its lineage and its children count are left in the run table under its virtual pid
    /// (`seal_abi::ExecStart`), for libseal's start-up to take in their place. A failed exec
    /// leaves an entry no image takes (the next exec of the process writes it again).
    pub(super) fn leave_exec_start(&mut self, tgid: i32) {
        let clock = match self.world.sealed(seal_abi::flags::TIME) {
            true => self.clock_now(tgid),
            false => self.world.clock,
        };
        let i = self.ident(tgid);
        let Some(t) = self.table() else {
            return;
        };
        // Only a number the run table gives this process (libseal's start-up looks there).
        if t.virt(tgid) == Some(i.vpid) {
            t.leave_exec_start(i.vpid, tgid, (clock, i.lineage, i.children));
        }
    }

    /// Process `tgid`'s logical clock `L` now, where it is kept (a Go image's page, a static C
    /// image's ticking page; a process met for the first time starts at its parent's), with the
    /// time of the children it reaped taken in: what an image it execs starts from.
    pub(super) fn clock_now(&mut self, tgid: i32) -> i64 {
        if let Some(c) = self.pages.get(&tgid).map(|p| p.c(MONO_BASE_NS)) {
            return c;
        }
        if !self.procs.contains_key(&tgid) {
            // Its parent's clock as a Go parent's page holds it (its reads may have moved it).
            let parent = proc_status_field(tgid, "PPid:").unwrap_or(0);
            // (A cgo program's process may have no state here yet: its clock is its page's.)
            if let Some(c) = self.pages.get(&parent).map(|p| p.c(MONO_BASE_NS)) {
                self.ensure(parent);
                self.proc(parent).l = c;
            }
        }
        self.ensure(tgid);
        self.merge_finished(tgid);
        self.proc(tgid).l()
    }

    /// Follows thread `tid`'s exec of a static binary (its call now runs, if `ran`) to its
    /// exec stop, and sets the new image up there.
    pub(super) fn follow_exec(&mut self, tid: i32, ran: bool, foreign: bool) {
        if !ran {
            super::super::remote::detach_running(tid);
            return;
        }
        self.children += 1;
        let images = self.children;
        let seal = self.world.seal_clocks();
        super::super::exec_child::follow(tid, |pid| {
            // A static image gets its clock page, as the first one did.
            let stop = super::super::stop::Stop::read(pid);
            // An entropy mapping of the image it ran is gone with it.
            self.entropies.remove(&pid);
            if foreign {
                self.adopt_foreign(pid);
            } else if pid == self.pid {
                self.first_image_left(pid);
            }
            // The census slot it had (a fork's, before the exec) keeps its first image; the
            // new image gets a slot of its own, one generation on.
            if self.census.as_mut().and_then(|c| c.remove(&pid)).is_some() {
                *self.pids.gens.entry(pid).or_insert(0) += 1;
            }
            self.images.insert(pid, (stop.text.clone(), stop.go));
            self.exes.followed(pid);
            let lineage = self.image_lineage(pid, images);
            let mut r = self.world.at_random();
            r[..8].copy_from_slice(&seal_abi::mix64(self.world.seed ^ lineage).to_le_bytes());
            self.check_reach(pid, &stop.text);
            let fast = seal
                && match stop.go {
                    true => self.exec_go_clock(pid, &stop),
                    false => self.exec_clock(pid, &stop),
                };
            if let Some(aux) = &stop.aux {
                aux.fix(pid, r, seal && !fast);
            }
            if seal && !fast {
                self.served_clock(pid);
            }
            if stop.go && self.world.sealed(seal_abi::flags::RANDOM) {
                // Its `cputicks` and random numbers, as the first image's, keyed per exec'd
                // image; its `crypto/rand` from a window of its own.
                self.runtime_rand(pid, stop.bias, lineage);
                self.exec_entropy(pid, &stop, lineage);
            } else if stop.go {
                self.rand_left(pid);
            }
        });
    }

    /// Says in process `pid`'s census that the static image it exec'd reads its clocks by
    /// system call: its clock page could not be set up at its exec (the values are still the
    /// sealed ones, each read a notification to the supervisor).
    pub(super) fn served_clock(&mut self, pid: i32) {
        if let Some(slot) = self.slot(pid) {
            slot.unsealed(
                seal_abi::unsealed::UNSUPPORTED_CALL,
                "clock reads are each a system call to seal's supervisor (~40 µs a read, \
                 values sealed): the image's clock page could not be set up at its exec",
            );
        }
    }
}
