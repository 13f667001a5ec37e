//! A Go image's `runtime.usleep` and `runtime.gettid` kept in the image
//! (`seal_abi::supervised::go_sys`: the code, and why): set up at its exec stop in the
//! runtime's random functions' mapping (`go_rand.rs`), then its table of threads filled as the
//! supervisor numbers them.

use seal_abi::supervised::{go_rand, go_site, go_sys};

use super::super::batch::write_text;
use super::super::go_tids::GoSys;
use super::super::remote::write;
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
        if !self.world.sealed(seal_abi::flags::PID) {
            return;
        }
        let vpid = self.ident(pid).vpid;
        let numbers = [pid.to_le_bytes(), vpid.to_le_bytes()].concat();
        if !write(pid, base + go_sys::REAL_AT as u64, &numbers) {
            return;
        }
        if let Some(site) = rewrite(sites.gettid, go_sys::GETTID_AT) {
            let s = GoSys {
                base,
                gettid: site,
                next: 0,
            };
            self.go_sys.insert(pid, s);
        }
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
    /// sent is named after the call it replaced (in `runtime.gettid`).
    pub(super) fn sys_call_site(&self, tgid: i32, ip: u64) -> Option<u64> {
        let s = self.go_sys.get(&tgid)?;
        let code = s.base + go_sys::GETTID_AT as u64..s.base + go_rand::CODE_BYTES as u64;
        code.contains(&ip).then_some(s.gettid)
    }
}
