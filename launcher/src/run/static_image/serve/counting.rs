//! The census of the image's processes: each one's slot, taken at its first counted call,
//! and the reads a clock page counted itself.

use super::census;
use super::Notif;
use super::Supervisor;

impl Supervisor {
    /// Counts call `n` of process `tgid` in its census slot (taken at its first call).
    pub(super) fn count(&mut self, tgid: i32, n: &Notif) {
        let Some((fid, detail)) = census::fid_of(n.nr as i64, &n.args) else {
            return;
        };
        let ip = self.census_ip(tgid, n.ip);
        if let Some(slot) = self.slot(tgid) {
            slot.count(fid, detail, ip);
        }
    }

    /// Process `tgid`'s census slot, taken at its first use (`None`: not counted).
    pub(super) fn slot(&mut self, tgid: i32) -> Option<&mut census::Slot> {
        let slot = self.slot_deferred(tgid)?;
        slot.commit();
        Some(slot)
    }

    /// [`Supervisor::slot`], whose header a slot just taken has not written yet: the caller
    /// adds to it and then calls [`census::Slot::commit`], for one write in all.
    pub(super) fn slot_deferred(&mut self, tgid: i32) -> Option<&mut census::Slot> {
        let new = !self.census.as_ref()?.contains_key(&tgid);
        let id = new.then(|| self.ident(tgid));
        let gen = self.pids.gens.get(&tgid).copied().unwrap_or(0);
        // Its slot's number, taken through the run table as mapped for the pids.
        let taken = if new {
            self.table().and_then(|t| t.take_census_slot())
        } else {
            None
        };
        let (Some(slots), Some(run_dir)) = (self.census.as_mut(), self.world.run_dir.as_ref())
        else {
            return None;
        };
        let first = tgid == self.pid;
        // A process of the first image whose vDSO reads a clock page (a fork of it too, whose
        // entries make their system call from there): the page's code is a module of its own.
        let page_code = (!self.images.contains_key(&tgid))
            .then(|| self.own.first().copied())
            .flatten();
        let slot = slots.entry(tgid).or_insert_with(|| {
            let exe = std::fs::read_link(format!("/proc/{tgid}/exe")).unwrap_or_default();
            let who = census::Identity {
                vpid: id.map_or(tgid, |i| i.vpid),
                parent_vpid: id.map_or(0, |i| i.ppid),
                // An image the first process exec'd is one generation on, as any other's.
                gen: if first { self.world.gen + gen } else { gen },
                pid: tgid,
                exe: &exe,
                text: &self.text,
                bias: self.bias,
            };
            let mut slot = census::Slot::open(run_dir, &who, taken);
            if let (Some(s), Some((lo, _))) = (slot.as_mut(), page_code) {
                use seal_abi::supervised::clock_page::MODULE_NAME;
                s.add_module(MODULE_NAME, lo, lo + 4096);
            }
            slot
        });
        slot.as_mut()
    }

    /// Writes the reads the clock pages counted themselves into their processes' census.
    pub(super) fn count_page_reads(&mut self) {
        let tgids: Vec<i32> = self.pages.keys().copied().collect();
        for tgid in tgids {
            self.count_page_reads_of(tgid);
        }
    }

    /// [`Supervisor::count_page_reads`] for process `tgid`'s page alone.
    pub(super) fn count_page_reads_of(&mut self, tgid: i32) {
        let Some((site, reads)) = self
            .pages
            .get(&tgid)
            .and_then(|p| Some((p.site?, p.reads())))
        else {
            return;
        };
        if let Some(slot) = self.slot(tgid) {
            for (id, n) in reads.into_iter().enumerate() {
                slot.set(seal_abi::Fid::ClockGettime, id as u8, site, n);
            }
        }
    }

    /// The address a call made at `ip` by process `tgid` is counted at: the rewritten call in
    /// `GetRandom` for the code of its entropy mapping, else `ip`.
    pub(super) fn census_ip(&self, tgid: i32, ip: u64) -> u64 {
        if let Some(site) = self.sys_call_site(tgid, ip) {
            return site;
        }
        match self.entropy_of(tgid) {
            Some(e) if (e.range.0..e.range.1).contains(&ip) => e.site,
            _ => ip,
        }
    }
}
