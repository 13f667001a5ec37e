//! Sealed files for a static image: its `open`/`openat` of the random devices, the kernel's
//! uuid and boot id, `/proc/uptime` and the host name files get, as libseal's open hooks
//! give a dynamic program, a descriptor whose contents are the sealed ones, installed in the
//! caller as the call's result (`SECCOMP_IOCTL_NOTIF_ADDFD`, `notif.rs`):
//!
//! * `/dev/urandom`, `/dev/random`: a pipe the supervisor keeps filled (`feeds.rs`) with the
//!   stream keyed by the seed, the process's lineage and its count of device opens (libseal
//!   keys by the thread's; a static image's process has one clock and one stream), so
//!   `od -N4 /dev/urandom`, `dd if=/dev/urandom` and a shell's `< /dev/urandom` read the same
//!   bytes every run, however much they read;
//! * `uuid`: a memfd with a version-4 uuid from the next per-open stream;
//! * `boot_id`: the run's, the same as libseal's (`seal_abi::device_text`);
//! * `/proc/uptime`: a sealed `CLOCK_BOOTTIME` read, as libseal formats it;
//! * `/proc/sys/kernel/hostname`, `/etc/hostname`: the sealed host name;
//! * the machine files of family `machine` (`/proc/cpuinfo`, `/proc/stat`, `/proc/meminfo`,
//!   `/proc/loadavg`, `/proc/version`, …: [`seal_abi::machine_file::PATHS`]): the text libseal
//!   writes, by the same functions, for the run's CPU count;
//! * `/proc/<pid>/…`: `serve/procfiles.rs`.
//!
//! Only read-only opens of absolute paths (after collapsing `//` and `/./`) are taken, as
//! libseal's hooks take them; anything else runs as it is. Each is counted in the process's
//! census as libseal counts it (`open(device)`, `/proc/uptime`, `gethostname`, `open(machine
//! file)`). Before, a
//! static image read the real devices and files: busybox's `od /dev/urandom`, `cat
//! /proc/sys/kernel/random/uuid` and `uptime` differed in every run.

use seal_abi::machine_file as mf;
use seal_abi::sealed_path::{self, File};
use seal_abi::{device, flags, Fid, NO_DETAIL};
use std::os::unix::ffi::OsStringExt;

use super::super::exec_child::read_cstr;
use super::super::remote::read_proc;
use super::super::world::Stream;
use super::procfiles::{self, ProcPath};
use super::sealed_text::{memfd_with, Text};
use super::{Answer, Notif, Supervisor};

/// A file whose contents are sealed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Sealed {
    /// A random device: its [`seal_abi::device`] index.
    Stream(u8),
    Uuid,
    BootId,
    Uptime,
    HostName,
    /// A machine file of family `machine`: its [`seal_abi::machine_file`] index.
    Machine(u8),
    /// A file of a process directory (`serve/procfiles.rs`).
    Proc(ProcPath),
}

/// What absolute path `path` names, after collapsing `//` and `/./`: a sealed file of
/// [`seal_abi::sealed_path`]'s table (libseal's too), or a file of a process directory.
pub(super) fn classify(path: &[u8]) -> Option<Sealed> {
    if let Some(f) = sealed_path::classify(path) {
        return Some(match f {
            File::Stream(d) => Sealed::Stream(d),
            File::Uuid => Sealed::Uuid,
            File::BootId => Sealed::BootId,
            File::HostName { .. } => Sealed::HostName,
            File::Uptime => Sealed::Uptime,
            File::Machine(i) => Sealed::Machine(i),
        });
    }
    if path.first() != Some(&b'/') {
        return None;
    }
    let mut norm = [0u8; sealed_path::MAX];
    let n = sealed_path::normalise(path, &mut norm)?;
    Some(Sealed::Proc(procfiles::classify(&norm[..n])?))
}

/// Relative `path` of thread `tid`'s open, relative to `dirfd` (or its working directory for
/// `AT_FDCWD`), made absolute when it names a sealed file, as libseal's hooks do
/// (`shim/src/open`): busybox `top` opens `stat`, `meminfo` and `loadavg` after
/// `chdir("/proc")`.
fn relative_sealed(tid: i32, dirfd: i32, path: &[u8]) -> Option<Vec<u8>> {
    if !sealed_path::names_one(path) {
        return None;
    }
    let dir = dir_of(tid, dirfd)?;
    let mut out = vec![0u8; dir.len() + path.len() + 2];
    let n = sealed_path::join(&dir, path, &mut out)?;
    out.truncate(n);
    sealed_path::classify(&out).map(|_| out)
}

impl Supervisor {
    /// An image's `mkdir`/`mkdirat` (sent for this only): a temp directory's name that an
    /// earlier run left is said ([`Supervisor::note_leftover`]); the call runs as it is.
    pub(super) fn mkdir_call(&mut self, n: &Notif, tgid: i32) -> Answer {
        let tid = n.pid as i32;
        let (dirfd, at) = match n.nr as i64 {
            libc::SYS_mkdir => (libc::AT_FDCWD, n.args[0]),
            _ => (n.args[0] as i32, n.args[1]),
        };
        let path = read_cstr(tid, at);
        self.note_leftover(tid, tgid, dirfd, &path);
        Answer::Continue
    }

    /// Before an image's exclusive create (`O_CREAT|O_EXCL`: `mkstemp`, busybox `mktemp`; a
    /// `mkdir`: `mktemp -d`, Go's `os.MkdirTemp`) of
    /// `path` (relative to `dirfd`) in a temp directory (`/tmp`, `/var/tmp`, the process's
    /// `$TMPDIR`): when the name is taken already by an
    /// entry older than the run (left in a shared `/tmp` by an earlier run), the call will fail
    /// with `EEXIST` and the program take another name, so the process's census says
    /// `tmp-leftover`, as libseal's `note_taken` does for a dynamic program. Looked up through
    /// the image's own root and working directory (`/proc/TID/root`, `/proc/TID/cwd`: a
    /// private `/tmp` is its mount namespace's).
    fn note_leftover(&mut self, tid: i32, tgid: i32, dirfd: i32, path: &[u8]) {
        let start = self.world.files_start_ns;
        if start == 0 || !self.world.sealed(flags::TEMPNAME) || path.is_empty() {
            return;
        }
        let shown = match path[0] {
            b'/' => path.to_vec(),
            _ => {
                let Some(mut p) = dir_of(tid, dirfd) else {
                    return;
                };
                p.push(b'/');
                p.extend_from_slice(path);
                p
            }
        };
        if !sealed_path::in_temp_dir(&shown, None) {
            let tmpdir = self.tmpdir(tgid);
            if !sealed_path::in_temp_dir(&shown, tmpdir.as_deref()) {
                return;
            }
        }
        use std::os::unix::fs::MetadataExt;
        let mut seen = format!("/proc/{tid}/root").into_bytes();
        seen.extend_from_slice(&shown);
        let seen = std::path::PathBuf::from(std::ffi::OsString::from_vec(seen));
        let Ok(m) = std::fs::symlink_metadata(&seen) else {
            return;
        };
        if m.ctime() * 1_000_000_000 + m.ctime_nsec() >= start {
            return;
        }
        let shown = String::from_utf8_lossy(&shown).into_owned();
        if let Some(slot) = self.slot(tgid) {
            slot.unsealed(seal_abi::unsealed::TMP_LEFTOVER, &shown);
        }
    }
}

impl Supervisor {
    /// Process `tgid`'s `$TMPDIR` (absolute), as its environment had it at its exec (what a
    /// static program's `mktemp` or `os.MkdirTemp` reads), kept until it execs again.
    fn tmpdir(&mut self, tgid: i32) -> Option<Vec<u8>> {
        if let Some(t) = self.tmpdirs.get(&tgid) {
            return t.clone();
        }
        let env = read_proc(&format!("/proc/{tgid}/environ")).unwrap_or_default();
        let t = env
            .split(|&c| c == 0)
            .find_map(|e| e.strip_prefix(b"TMPDIR="))
            .filter(|v| v.starts_with(b"/"))
            .map(<[u8]>::to_vec);
        self.tmpdirs.insert(tgid, t.clone());
        t
    }
}

/// The directory thread `tid` resolves a path relative to `dirfd` in (`AT_FDCWD`: its
/// working directory).
fn dir_of(tid: i32, dirfd: i32) -> Option<Vec<u8>> {
    let link = match dirfd {
        libc::AT_FDCWD => format!("/proc/{tid}/cwd"),
        fd => format!("/proc/{tid}/fd/{fd}"),
    };
    Some(
        std::fs::read_link(link)
            .ok()?
            .into_os_string()
            .into_encoded_bytes(),
    )
}

/// `/proc/uptime`'s text for a `CLOCK_BOOTTIME` of `boot_ns`, as libseal writes it
/// ([`seal_abi::proc_text::uptime`]).
fn uptime_text(boot_ns: i64) -> Vec<u8> {
    let mut t = Text::default();
    seal_abi::proc_text::uptime(boot_ns, &mut t);
    t.0
}

/// Reads the start of file `path` into `buf` (as much as fits): the bytes read.
fn read_up_to(path: &str, buf: &mut [u8]) -> usize {
    use std::io::Read;
    let Ok(mut f) = std::fs::File::open(path) else {
        return 0;
    };
    let mut got = 0;
    while got < buf.len() {
        match f.read(&mut buf[got..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => got += k,
        }
    }
    got
}

/// The machine's boot-time clock and boot time (ns), for a run whose time is not sealed.
fn real_boot() -> (i64, i64) {
    let read = |c| {
        // SAFETY: a timespec we own, filled by the kernel.
        let mut t: libc::timespec = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::clock_gettime(c, &mut t) };
        t.tv_sec * 1_000_000_000 + t.tv_nsec
    };
    let boot = read(libc::CLOCK_BOOTTIME);
    (boot, read(libc::CLOCK_REALTIME) - boot)
}

impl Supervisor {
    /// An `open` or `openat` from process `tgid`'s image: a sealed file's descriptor, or the
    /// call as it is.
    pub(super) fn open_call(&mut self, n: &Notif, tgid: i32) -> Answer {
        let tid = n.pid as i32;
        let a = n.args;
        let (dirfd, at, oflags) = match n.nr as i64 {
            libc::SYS_open => (libc::AT_FDCWD, a[0], a[1] as i32),
            _ => (a[0] as i32, a[1], a[2] as i32),
        };
        let mut path = read_cstr(tid, at);
        if oflags & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT | libc::O_EXCL {
            self.note_leftover(tid, tgid, dirfd, &path);
        }
        if path.first().is_some_and(|&c| c != b'/') {
            match relative_sealed(tid, dirfd, &path) {
                Some(abs) => path = abs,
                None => return Answer::Continue,
            }
        }
        let Some(file) = classify(&path) else {
            return Answer::Continue;
        };
        let read_only = oflags & libc::O_ACCMODE == libc::O_RDONLY;
        if let Sealed::Proc(p) = &file {
            // Writes (`oom_score_adj`) and `O_PATH` reach the path as it is.
            if !read_only || oflags & libc::O_PATH != 0 {
                return Answer::Continue;
            }
            return self.proc_open(tid, tgid, p, oflags, n.ip);
        }
        let family = match file {
            Sealed::HostName => flags::HOST,
            Sealed::Uptime => flags::TIME,
            Sealed::Machine(_) => flags::MACHINE,
            _ => flags::RANDOM,
        };
        if !self.world.sealed(family) {
            return Answer::Continue;
        }
        let (fid, detail) = match file {
            Sealed::Stream(d) => (Fid::OpenDevice, d),
            Sealed::Uuid => (Fid::OpenDevice, device::UUID),
            Sealed::BootId => (Fid::OpenDevice, device::BOOT_ID),
            Sealed::Uptime => (Fid::ProcUptime, NO_DETAIL),
            Sealed::HostName => (Fid::Gethostname, NO_DETAIL),
            Sealed::Machine(i) => (Fid::OpenMachine, i),
            Sealed::Proc(_) => unreachable!("answered above"),
        };
        let ip = self.census_ip(tgid, n.ip);
        if let Some(slot) = self.slot(tgid) {
            slot.count(fid, detail, ip);
        }
        // Its clock, for the files that read it (a shell's first call can be this open).
        self.ensure(tgid);
        // Writing to the devices feeds the kernel's pool; libseal lets those through too.
        if !read_only || oflags & (libc::O_PATH | libc::O_DIRECTORY) != 0 {
            return Answer::Continue;
        }
        let fd = match file {
            Sealed::Stream(_) => {
                let stream = self.device_stream(tgid);
                self.feeds.open(stream, oflags & libc::O_NONBLOCK != 0)
            }
            Sealed::Uuid => {
                let mut b = [0u8; 16];
                self.device_stream(tgid).fill(&mut b);
                memfd_with(c"seal-uuid", &seal_abi::device_text::uuid_text(b))
            }
            Sealed::BootId => memfd_with(
                c"seal-boot_id",
                &seal_abi::device_text::boot_id(self.world.seed),
            ),
            Sealed::Uptime => {
                let Some(ns) = self.clock(tid, tgid, libc::CLOCK_BOOTTIME) else {
                    return Answer::Continue;
                };
                memfd_with(c"seal-uptime", &uptime_text(ns))
            }
            Sealed::HostName => {
                let mut name = self.world.hostname.clone();
                name.push(b'\n');
                memfd_with(c"seal-hostname", &name)
            }
            Sealed::Machine(i) => {
                let text = self.machine_text(tid, tgid, i);
                memfd_with(c"seal-machine", &text.0)
            }
            Sealed::Proc(_) => unreachable!("answered above"),
        };
        match fd {
            Some(fd) => Answer::Fd(fd, oflags & libc::O_CLOEXEC != 0),
            // No descriptor to give (out of memory or descriptors): the call fails as the
            // kernel's would, rather than read the real file.
            None => Answer::Error(libc::ENFILE),
        }
    }

    /// `sysinfo` from process `tgid`'s image: libseal's sealed one (`fill_sysinfo`): the
    /// sealed uptime (`CLOCK_BOOTTIME`), the memory figures of [`seal_abi::machine_file`] (as
    /// the sealed `/proc/meminfo` says), no swap, no load, one process.
    pub(super) fn sysinfo(&mut self, n: &Notif, tgid: i32) -> Answer {
        if !self.world.sealed(flags::MACHINE) {
            return Answer::Continue;
        }
        let tid = n.pid as i32;
        let ip = self.census_ip(tgid, n.ip);
        if let Some(slot) = self.slot(tgid) {
            slot.count(Fid::SysSysinfo, NO_DETAIL, ip);
        }
        // Its clock (a shell's `free`, run in the shell, can call this before any clock read:
        // the supervisor stopped there, and every later call of the image failed `ENOSYS`).
        self.ensure(tgid);
        let boot = match self.world.sealed(flags::TIME) {
            true => self.clock(tid, tgid, libc::CLOCK_BOOTTIME).unwrap_or(0),
            false => real_boot().0,
        };
        // SAFETY: sysinfo is plain integers: all zeroes is a value (libseal's starts there).
        let mut s: libc::sysinfo = unsafe { std::mem::zeroed() };
        s.uptime = boot / 1_000_000_000;
        s.totalram = mf::TOTAL_RAM;
        s.freeram = mf::FREE_RAM;
        s.procs = 1;
        s.mem_unit = 1;
        self.put(tid, n.args[0], &s)
    }

    /// Machine file `which` as libseal writes it ([`seal_abi::machine_file`]), for `cpus`
    /// CPUs: `/proc/stat`'s idle times are process `tgid`'s sealed boot-time clock, its boot
    /// time the epoch less the clocks' boot-time base.
    fn machine_text(&mut self, tid: i32, tgid: i32, which: u8) -> Text {
        let n = self.world.cpus;
        let mut out = Text::default();
        match which {
            mf::CPUINFO => {
                let mut src = vec![0u8; mf::CPUINFO_READ];
                let got = read_up_to("/proc/cpuinfo", &mut src);
                mf::cpuinfo(mf::cpuinfo_first_block(&src[..got]), n, &mut out);
            }
            mf::STAT => {
                let (boot, btime) = match self.world.sealed(flags::TIME) {
                    true => (
                        self.clock(tid, tgid, libc::CLOCK_BOOTTIME).unwrap_or(0),
                        self.world.epoch_ns.saturating_sub(super::MONO_BASE_NS),
                    ),
                    false => real_boot(),
                };
                let idle = seal_abi::proc_text::ticks(boot);
                mf::stat(n, idle, btime.div_euclid(1_000_000_000), &mut out);
            }
            _ => mf::small_file(which, n, &mut out),
        }
        out
    }

    /// The stream of process `tgid`'s next device open.
    fn device_stream(&mut self, tgid: i32) -> Stream {
        let lineage = self.ident(tgid).lineage;
        let n = self.device_opens.entry(tgid).or_insert(0);
        let id = seal_abi::child_lineage(lineage, seal_abi::KIND_DEVICE_OPEN, *n);
        *n += 1;
        Stream::new(self.world.seed, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_paths_are_told_as_libseal_tells_them() {
        // The table is `seal_abi::sealed_path`'s (tested there); a process's files are ours.
        let uuid = classify(b"/proc/sys/kernel/random//uuid");
        assert_eq!(uuid, Some(Sealed::Uuid));
        assert_eq!(classify(b"/etc/hostname"), Some(Sealed::HostName));
        assert!(matches!(
            classify(b"/proc/self/stat"),
            Some(Sealed::Proc(_))
        ));
        assert_eq!(classify(b"dev/urandom"), None);
        assert_eq!(classify(b"/etc/passwd"), None);
    }

    #[test]
    fn uptime_has_two_decimals() {
        assert_eq!(
            uptime_text(86_400_000_000_000 + 50_123_456),
            b"86400.05 86400.05\n"
        );
        assert_eq!(uptime_text(1_230_000_000), b"1.23 1.23\n");
    }
}
