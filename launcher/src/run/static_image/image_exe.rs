//! Whether a process still runs the image the supervisor set up for it, told by its
//! executable. The supervisor tells an image's own calls from a dynamic descendant's by the
//! caller's address (`serve.rs`, `image`): a process that is not one of the exec'd images is
//! taken to run the first one. But a process of the image can exec a dynamic program the
//! supervisor does not follow (libseal seals it), and a dynamic program built without PIE (a
//! `seal` launcher, nested) has its code at the same low addresses as a static image's: its
//! raw `getpid` was answered with a virtual pid, which the nested seal then gave its root as
//! its own real pid (the root's tie to its launcher failed: exit 125).
//!
//! So each process's executable (device and inode of `/proc/PID/exe`) is compared, at its
//! first notified call, with the one of the image it would run, and the verdict kept. An
//! `execve` makes it unknown again: until the executable differs (the exec went through), each
//! notified call of that process looks again; a failed exec leaves the old image running.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;

/// A file's identity: device and inode.
type Id = (u64, u64);

/// Process `pid`'s executable's identity (`None`: the process is gone).
fn exe(pid: i32) -> Option<Id> {
    let m = std::fs::metadata(format!("/proc/{pid}/exe")).ok()?;
    Some((m.dev(), m.ino()))
}

#[derive(Default)]
pub struct ImageExes {
    /// The first image's executable (set at its exec stop, or at start for a process that
    /// supervises itself).
    first: Option<Id>,
    /// The executable of the image each exec'd (followed) process was set up with; the
    /// others (forks of the first image) run the first.
    of: HashMap<i32, Id>,
    /// Processes known to run their image (true) or another program (false).
    verdict: HashMap<i32, bool>,
    /// Processes that called `execve` since their verdict.
    exec_called: HashSet<i32>,
}

impl ImageExes {
    /// Process `pid` runs the first image (its exec stop, or a cgo program at start).
    pub fn first(&mut self, pid: i32) {
        self.first = exe(pid);
        self.of.remove(&pid);
        self.set_up(pid);
    }

    /// Process `pid` was set up, at its exec stop, with the image it runs now.
    pub fn followed(&mut self, pid: i32) {
        if let Some(id) = exe(pid) {
            self.of.insert(pid, id);
        }
        self.set_up(pid);
    }

    fn set_up(&mut self, pid: i32) {
        self.verdict.insert(pid, true);
        self.exec_called.remove(&pid);
    }

    /// Fork `child` of `parent` runs its parent's image (as `serve.rs`'s `image` takes it).
    pub fn inherit(&mut self, child: i32, parent: i32) {
        if let Some(&id) = self.of.get(&parent) {
            self.of.insert(child, id);
        }
    }

    /// `child`, a fork of `parent` just traced to its return, runs what its parent runs: its
    /// verdict is its parent's, with no look at its executable.
    pub fn forked(&mut self, child: i32, parent: i32) {
        self.inherit(child, parent);
        if let Some(&v) = self.verdict.get(&parent) {
            if !self.exec_called.contains(&parent) {
                self.verdict.insert(child, v);
                self.exec_called.remove(&child);
            }
        }
    }

    /// Process `tgid` calls `execve`: what it runs is unknown until it is seen again.
    pub fn exec_called(&mut self, tgid: i32) {
        self.verdict.remove(&tgid);
        self.exec_called.insert(tgid);
    }

    /// Does process `tgid` run the image the supervisor set up for it (the first one, unless
    /// it was followed into another)? A process gone meanwhile is taken to.
    pub fn runs_image(&mut self, tgid: i32) -> bool {
        if let Some(&v) = self.verdict.get(&tgid) {
            return v;
        }
        let want = self.of.get(&tgid).copied().or(self.first);
        let (Some(want), Some(now)) = (want, exe(tgid)) else {
            return true;
        };
        let v = want == now;
        // After an exec call, the same executable may only mean the exec has not run yet.
        if !v || !self.exec_called.contains(&tgid) {
            self.verdict.insert(tgid, v);
            self.exec_called.remove(&tgid);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_running_another_executable_is_not_the_images() {
        let me = std::process::id() as i32;
        let mut e = ImageExes::default();
        e.first(me);
        assert!(e.runs_image(me));
        // Another executable than this test binary's: the first image is `/bin/sh`'s.
        let mut sh = std::process::Command::new("/bin/sh")
            .args(["-c", "read x"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let child = sh.id() as i32;
        // Until the child has exec'd, it runs this binary: wait for its executable to change.
        let mut e2 = ImageExes::default();
        e2.first(me);
        e2.exec_called(child);
        let mut seen = false;
        for _ in 0..500 {
            if !e2.runs_image(child) {
                seen = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert!(seen, "the child's exec of /bin/sh was not seen");
        // Kept: no further look.
        assert!(!e2.runs_image(child));
        // A process followed into `/bin/sh` runs its image.
        e.followed(child);
        assert!(e.runs_image(child));
        e.inherit(4_000_000, child);
        assert_eq!(e.of.get(&4_000_000), e.of.get(&child));
        drop(sh.stdin.take());
        sh.wait().unwrap();
        // Gone: taken to run it (its calls fail anyway).
        let mut e3 = ImageExes::default();
        e3.first(me);
        assert!(e3.runs_image(child));
    }
}
