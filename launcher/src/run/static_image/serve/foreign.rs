//! A static image that a dynamic descendant of the supervised image execs (static → `sh` →
//! static: a busybox shell running bash that runs a static program). The descendant carries
//! this supervisor's filter, and the kernel allows one listener in a filter chain, so no
//! supervisor of its own can be installed: its libseal asks whether one holds its filter
//! (`handover::under_supervisor`, answered here when the run is this supervisor's) and
//! execs, and this supervisor follows that thread's exec as its own image's (`follow_exec`). The new image's identity and clock are the ones
//! the descendant's libseal wrote into its environment (`LIBSEAL_VPID`, `LIBSEAL_CLOCK`, …),
//! read from `/proc/PID/environ` at the exec stop.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

use super::super::pid_state::Ident;
use super::super::remote::proc_status_field;
use super::super::world::World;
use super::{Answer, Notif, Proc, Stream, Supervisor};

impl Supervisor {
    /// A dynamic descendant's libseal, about to exec a static image, asks whether a
    /// supervisor of its run holds its filter (`handover::under_supervisor`, its run directory
    /// at `args[0]`): this one, if the run directory is its own; it then follows that thread's
    /// exec. `None`: not the question.
    pub(super) fn probe(&mut self, n: &Notif) -> Option<Answer> {
        use seal_abi::supervised::handover::{PROBE_ANSWER, PROBE_FLAGS};
        if n.nr as i64 != libc::SYS_getrandom || n.args[1] != 0 || n.args[2] != PROBE_FLAGS {
            return None;
        }
        let tid = n.pid as i32;
        let dir = super::super::exec_child::read_cstr(tid, n.args[0]);
        let ours = self.world.run_dir.as_ref();
        if ours.is_none_or(|d| d.as_os_str().as_bytes() != &dir[..]) {
            // Another run's (a nested seal's): the kernel fails it, and that libseal reports
            // the image it cannot supervise.
            return Some(Answer::Continue);
        }
        self.probed.insert(tid);
        Some(Answer::Value(PROBE_ANSWER))
    }

    /// Process `pid`, stopped at its exec of a static image from a dynamic image of the run:
    /// its virtual pid (the run table's, which its libseal registered), parent, lineage,
    /// generation and clock from the environment its libseal gave the new image. What the
    /// supervisor kept for an image the process ran before (a census slot, a page) goes.
    pub(super) fn adopt_foreign(&mut self, pid: i32) {
        let env =
            super::super::remote::read_proc(&format!("/proc/{pid}/environ")).unwrap_or_default();
        let vars: Vec<(OsString, OsString)> = (env.split(|&b| b == 0))
            .filter_map(|kv| {
                let eq = kv.iter().position(|&b| b == b'=')?;
                let (k, v) = (&kv[..eq], &kv[eq + 1..]);
                k.starts_with(b"LIBSEAL_").then(|| {
                    let os = |b: &[u8]| std::ffi::OsStr::from_bytes(b).to_os_string();
                    (os(k), os(v))
                })
            })
            .collect();
        let run_dir = seal_abi::settings::RUN_DIR;
        if !vars.iter().any(|(k, _)| k.as_bytes() == run_dir.as_bytes()) {
            // No settings (cannot happen: libseal wrote them): a child's start, its parent's.
            self.ensure(pid);
            return;
        }
        let w = World::from_vars(&vars);
        if pid == self.pid {
            self.first_image_left(pid);
        }
        let real_parent = proc_status_field(pid, "PPid:").unwrap_or(0);
        let vpid = (self.table().and_then(|t| t.virt(pid))).unwrap_or(w.vpid);
        let ident = Ident {
            vpid,
            ppid: w.ppid,
            real_parent,
            lineage: w.lineage,
            children: 0,
            threads: 0,
        };
        self.pids.idents.insert(pid, ident);
        // Its census slot's generation is the environment's (the first process's slots add
        // the first image's own).
        let gen = match pid == self.pid {
            true => w.gen.saturating_sub(self.world.gen),
            false => w.gen,
        };
        self.pids.gens.insert(pid, gen);
        if let Some(c) = self.census.as_mut() {
            c.remove(&pid);
        }
        let proc = Proc {
            l: w.clock,
            mono: 0,
            start: w.clock,
            stream: Stream::new(self.world.seed, seal_abi::mix64(w.lineage ^ 0x666f_7265)),
            parent: 0,
            page: None,
            since: 0,
        };
        self.procs.insert(pid, proc);
    }
}
