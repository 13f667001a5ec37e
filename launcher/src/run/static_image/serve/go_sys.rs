//! A Go image's `runtime.usleep` and `runtime.gettid` kept in the image
//! (`seal_abi::supervised::go_sys`: the code, and why): set up at its exec stop in the
//! runtime's random functions' mapping (`go_rand.rs`), then its table of threads filled as the
//! supervisor numbers them, and the virtual tids of its first new threads left in it for them
//! to take (their first `gettid`, in `runtime.clone`, sent here until 2026-12-05).

use seal_abi::supervised::{go_rand, go_site, go_sys};
use seal_abi::{child_lineage, KIND_THREAD};

use super::super::batch::write_text;
use super::super::go_tids::GoSys;
use super::super::remote::{read, write};
use super::Supervisor;

impl Supervisor {
    /// Sets the in-image `usleep` and `gettid` up in Go image `pid` (stopped at its exec, its
    /// program at `bias`, its random functions' mapping at `base`): the code, its numbers
    /// (the real and the virtual pid), the calls rewritten. `gettid` only while pids are
    /// sealed. Whatever fails leaves that call as it was: sent to the supervisor.
    pub(super) fn keep_sys_calls(
        &mut self,
        pid: i32,
        bias: u64,
        base: u64,
        sites: &go_site::Sites,
    ) {
        let mut page = vec![0u8; go_rand::CODE_BYTES];
        if go_sys::code(&mut page).is_none() {
            return;
        }
        let code = &page[go_sys::USLEEP_AT..];
        if !write_text(pid, base + go_sys::USLEEP_AT as u64, code) {
            return;
        }
        let range = (
            base + go_sys::USLEEP_AT as u64,
            base + go_rand::CODE_BYTES as u64,
        );
        // Its calls are the image's own (as its entropy code's are).
        match self.images.get_mut(&pid) {
            Some((text, _)) => text.push(range),
            None => self.own.push(range),
        }
        let rewrite = |site: Option<u64>, at: usize| {
            let site = bias + site?;
            let call = go_sys::call_at(site, base + at as u64)?;
            write_text(pid, site, &call).then_some(site)
        };
        rewrite(sites.usleep, go_sys::USLEEP_AT);
        self.drop_go_sys(pid);
        let affinity = self.keep_affinity(pid, base, sites.affinity.map(|a| bias + a));
        let kept = GoSys {
            base,
            gettid: 0,
            next: 0,
            clone_site: 0,
            clone: false,
            left: [0; go_sys::LEFT],
            seen: 0,
            affinity: affinity.unwrap_or(0),
        };
        if affinity.is_some() {
            self.go_sys.insert(pid, kept);
        }
        if !self.world.sealed(seal_abi::flags::PID) {
            return;
        }
        let vpid = self.ident(pid).vpid;
        let numbers = [pid.to_le_bytes(), vpid.to_le_bytes()].concat();
        if !write(pid, base + go_sys::REAL_AT as u64, &numbers) {
            return;
        }
        if let Some(site) = rewrite(sites.gettid, go_sys::GETTID_AT) {
            // The new thread's call takes a pair left, or asks as before (none left yet).
            let clone_site = rewrite(sites.clone_gettid, go_sys::CLONE_GETTID_AT);
            let clone = clone_site.is_some();
            let s = GoSys {
                gettid: site,
                clone_site: clone_site.unwrap_or(0),
                clone,
                ..kept
            };
            self.go_sys.insert(pid, s);
            // The root's first image: the numbers claimed ahead go in now, with the image
            // stopped (its supervisor's time then is on no call's path); another image's
            // once one of its calls has been answered.
            let i = self.ident(pid);
            let first = pid == self.pid && i.lineage == seal_abi::ROOT_LINEAGE && i.threads == 0;
            match (clone, first && self.pids.ahead_pairs[0] != 0) {
                (true, true) => {
                    let left = std::mem::take(&mut self.pids.ahead_pairs);
                    self.leave_pairs(pid, left);
                }
                (true, false) => self.pids.pairs_due.push(pid),
                _ => {}
            }
        }
    }

    /// Answers Go image `pid`'s `runtime.sched_getaffinity` in the image (`go_sys::
    /// AFFINITY_AT`) while its processor count is sealed: the mask, then the call rewritten
    /// at `site` (its address), which it returns.
    fn keep_affinity(&mut self, pid: i32, base: u64, site: Option<u64>) -> Option<u64> {
        let site = site.filter(|_| self.world.sealed(seal_abi::flags::MACHINE))?;
        let mask = self.world.affinity();
        if mask.is_empty() || mask.len() > go_sys::MASK_MAX {
            return None;
        }
        let len = (mask.len() as u32).to_le_bytes();
        let put = write(pid, base + go_sys::MASK_AT as u64, &mask)
            && write(pid, base + go_sys::MASK_LEN_AT as u64, &len);
        let call = go_sys::call_at(site, base + go_sys::AFFINITY_AT as u64)?;
        (put && write_text(pid, site, &call)).then_some(site)
    }

    /// Leaves the virtual tids of the next [`go_sys::LEFT`] threads of Go image `served` in
    /// its table, when they are due (it was set up since), for its new threads to take
    /// without a notification (`go_sys::LEFT_AT`). Done once a call of the image has been
    /// answered: its runtime's first (the huge page size's `open`, in `osinit`) came while
    /// they were being left at the detach and waited ~60 µs, and its first thread starts
    /// ~0.3 ms later (a thread that comes first asks, as before). Each number claimed in the
    /// run table may first back a page of it. The numbers are those its threads would have
    /// been given here, keyed by its lineage and their place, in the order they take them.
    pub(super) fn leave_tid_pairs(&mut self, served: i32) {
        if !self.pids.pairs_due.contains(&served) {
            return;
        }
        self.pids.pairs_due.retain(|&t| t != served);
        self.leave_pairs(served, [0; go_sys::LEFT]);
    }

    /// Leaves the pairs of Go image `tgid`'s next new threads in its table: the numbers in
    /// `left` (claimed ahead, a prefix; 0 for none), the rest claimed now.
    fn leave_pairs(&mut self, tgid: i32, mut left: [i32; go_sys::LEFT]) {
        let Some(s) = self.go_sys.get(&tgid).copied() else {
            self.release_all(&left);
            return;
        };
        if !s.clone || s.next != 0 {
            // A thread asked first: the supervisor numbers the rest.
            self.go_sys.entry(tgid).and_modify(|s| s.clone = false);
            self.release_all(&left);
            return;
        }
        let i = self.ident(tgid);
        for (k, v) in left.iter_mut().enumerate().filter(|(_, v)| **v == 0) {
            let lineage = child_lineage(i.lineage, KIND_THREAD, i.threads + k as u64);
            let Some(n) = self.table().and_then(|t| t.allocate(lineage)) else {
                break;
            };
            *v = n;
        }
        let n = left.iter().take_while(|&&v| v != 0).count();
        let mut pairs = [0u8; 8 * go_sys::LEFT];
        for (k, v) in left[..n].iter().enumerate() {
            pairs[8 * k + 4..8 * k + 8].copy_from_slice(&v.to_le_bytes());
        }
        // The pairs, then their count (a thread takes a pair only below it).
        let at = s.base + go_sys::TIDS_AT as u64;
        let written = n > 0
            && write(tgid, at, &pairs[..8 * n])
            && write(
                tgid,
                s.base + go_sys::LEFT_AT as u64,
                &(n as u32).to_le_bytes(),
            );
        if !written {
            self.go_sys.entry(tgid).and_modify(|s| s.clone = false);
            self.release_all(&left);
            return;
        }
        if let Some(i) = self.pids.idents.get_mut(&tgid) {
            i.threads += go_sys::LEFT as u64;
        }
        if let Some(s) = self.go_sys.get_mut(&tgid) {
            s.left = left;
            s.next = go_sys::LEFT;
        }
    }

    /// Gives the numbers in `left` (0: none) back to the run table.
    fn release_all(&mut self, left: &[i32]) {
        for &v in left.iter().filter(|&&v| v != 0) {
            if let Some(t) = self.table() {
                t.release(v);
            }
        }
    }

    /// Gives back the numbers claimed ahead for the root's new threads that its first image
    /// did not take (not a Go image, or it could not be set up): at the end of its exec stop.
    pub(super) fn release_ahead_pairs(&mut self) {
        self.table();
        let left = std::mem::take(&mut self.pids.ahead_pairs);
        self.release_all(&left);
    }

    /// Registers the threads of process `tgid` that took a pair left since the last look
    /// (read from its table): whether any did.
    pub(super) fn take_pairs(&mut self, tgid: i32) -> bool {
        let Some(s) = self.go_sys.get(&tgid).copied() else {
            return false;
        };
        if s.unseen().next().is_none() {
            return false;
        }
        let mut pairs = [0u8; 8 * go_sys::LEFT];
        if !read(tgid, s.base + go_sys::TIDS_AT as u64, &mut pairs) {
            return false;
        }
        let mut seen = s.seen;
        for (k, v) in s.unseen() {
            let real = i32::from_le_bytes(pairs[8 * k..8 * k + 4].try_into().unwrap_or_default());
            if real <= 0 {
                continue;
            }
            seen |= 1 << k;
            if let Some(t) = self.table() {
                t.register(v, real);
            }
            self.pids.vtids.insert(real, v);
        }
        if let Some(g) = self.go_sys.get_mut(&tgid) {
            g.seen = seen;
        }
        seen != s.seen
    }

    /// [`Supervisor::take_pairs`] of every Go image with pairs left (a virtual tid not found:
    /// one of them may hold it).
    pub(super) fn take_all_pairs(&mut self) -> bool {
        let tgids: Vec<i32> = self
            .go_sys
            .iter()
            .filter(|(_, s)| s.unseen().next().is_some())
            .map(|(&t, _)| t)
            .collect();
        // Every one read (not `any`, which would stop at the first).
        let mut any = false;
        for t in tgids {
            any |= self.take_pairs(t);
        }
        any
    }

    /// Has process `tgid` pairs left that its threads take themselves (so the supervisor
    /// numbers no thread but the one asking)?
    pub(super) fn leaves_pairs(&self, tgid: i32) -> bool {
        self.go_sys.get(&tgid).is_some_and(|s| s.clone)
    }

    /// Writes the calls process `tgid`'s in-image code answered into its census (at its
    /// `exit_group` or `execve`, with its in-image draws): its `sched_getaffinity`s, and how
    /// many of its threads took a pair left (`gettid` called from that code).
    pub(super) fn count_in_image_calls(&mut self, tgid: i32) {
        self.take_pairs(tgid);
        let Some(s) = self.go_sys.get(&tgid).copied() else {
            return;
        };
        self.count_affinity(tgid, &s);
        let taken = s.seen.count_ones() as u64;
        if taken == 0 {
            return;
        }
        let code = s.base + go_sys::GETTID_AT as u64;
        let clone = s.base + go_sys::CLONE_GETTID_AT as u64;
        if let Some(slot) = self.slot(tgid) {
            slot.add_module(go_sys::NAME, code, s.base + go_sys::AFFINITY_AT as u64);
            slot.set(seal_abi::Fid::Gettid, 0, clone + 1, taken);
        }
    }

    /// Writes the `sched_getaffinity` calls process `tgid`'s in-image code answered (`s`) into
    /// its census: called from that code.
    fn count_affinity(&mut self, tgid: i32, s: &GoSys) {
        let mut n = [0u8; 4];
        if s.affinity == 0 || !read(tgid, s.base + go_sys::AFFINITY_COUNT_AT as u64, &mut n) {
            return;
        }
        let n = u32::from_le_bytes(n) as u64;
        let code = s.base + go_sys::AFFINITY_AT as u64;
        if let Some(slot) = self.slot(tgid).filter(|_| n > 0) {
            let end = s.base + go_rand::CODE_BYTES as u64;
            slot.add_module(go_sys::AFFINITY_NAME, code, end);
            slot.set(seal_abi::Fid::SchedGetaffinity, 0, code + 1, n);
        }
    }

    /// Lets go of process `tgid`'s in-image `gettid` as it calls `execve`: its new threads
    /// ask from now on (the pairs' count made 0 first), the pairs taken are read once more
    /// (an exec that fails leaves them in use), and the numbers left stay claimed (a thread
    /// may be taking one as the count goes; the exec, or its end, ends them).
    pub(super) fn go_sys_exec(&mut self, tgid: i32) {
        if let Some(s) = self.go_sys.get(&tgid).copied() {
            if s.left[0] != 0 {
                write(tgid, s.base + go_sys::LEFT_AT as u64, &0u32.to_le_bytes());
                self.take_pairs(tgid);
            }
        }
        self.go_sys.remove(&tgid);
    }

    /// Lets go of process `tgid`'s in-image `gettid` (it is gone, or a new Go image of it is
    /// set up): the numbers left that no thread was seen to take go back to the run table.
    pub(super) fn drop_go_sys(&mut self, tgid: i32) {
        self.pids.pairs_due.retain(|&t| t != tgid);
        let Some(s) = self.go_sys.remove(&tgid) else {
            return;
        };
        let unseen: Vec<i32> = s.unseen().map(|(_, v)| v).collect();
        self.release_all(&unseen);
    }

    /// Thread `tid` of process `tgid` was given virtual tid `v`: its image's code answers its
    /// next `gettid` itself, from the table (the virtual tid written before the real one, so
    /// a thread reading meanwhile never finds a pair half-written). A full table leaves the
    /// rest to the supervisor.
    pub(super) fn note_tid(&mut self, tgid: i32, tid: i32, v: i32) {
        let Some(s) = self.go_sys.get_mut(&tgid) else {
            return;
        };
        let Some(at) = go_sys::tid_at(s.next) else {
            return;
        };
        let at = s.base + at as u64;
        if write(tgid, at + 4, &v.to_le_bytes()) && write(tgid, at, &tid.to_le_bytes()) {
            s.next += 1;
        }
    }

    /// The call `ip` of process `tgid` names in the census: a `gettid` its in-image code
    /// sent is named after the call it replaced (in `runtime.gettid` or `runtime.clone`): the
    /// address after it, as a system call's.
    pub(super) fn sys_call_site(&self, tgid: i32, ip: u64) -> Option<u64> {
        let s = self.go_sys.get(&tgid)?;
        let at = |o: usize| s.base + o as u64;
        let after = go_sys::site_bytes(186).len() as u64;
        if (at(go_sys::GETTID_AT)..at(go_sys::CLONE_GETTID_AT)).contains(&ip) {
            return (s.gettid != 0).then_some(s.gettid + after);
        }
        let clone = at(go_sys::CLONE_GETTID_AT)..at(go_sys::AFFINITY_AT);
        if clone.contains(&ip) {
            return (s.clone_site != 0).then_some(s.clone_site + after);
        }
        let affinity = at(go_sys::AFFINITY_AT)..at(go_rand::CODE_BYTES);
        (affinity.contains(&ip) && s.affinity != 0).then_some(s.affinity + after)
    }
}
