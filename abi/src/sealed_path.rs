//! The files whose contents a run seals, by path: one table for libseal's open hooks
//! (`shim/src/open`) and the static-image supervisor's (`serve/opens.rs`), so that both know
//! the same paths, spelled the same ways.
//!
//! A path is recognised after collapsing `//` and `/./` ([`normalise`]). A relative one
//! (`cd /proc && cat meminfo`, busybox `top`'s `chdir("/proc")` and `open("stat")`,
//! `openat(dirfd, "urandom")`) is recognised when its last component is the last component of
//! one of these paths ([`names_one`]: a cheap test that leaves every other relative open
//! alone); the caller then reads its directory (the working directory, or `dirfd`'s path) and
//! classifies the [`join`]ed path. `..` and symbolic links are not followed.

use crate::{device, machine_file};

/// A sealed file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum File {
    /// A random device: its [`crate::device`] index.
    Stream(u8),
    /// `/proc/sys/kernel/random/uuid`.
    Uuid,
    /// `/proc/sys/kernel/random/boot_id`.
    BootId,
    /// The kernel's host name file (`/proc/sys/kernel/hostname`) or `/etc/hostname`.
    HostName { kernel: bool },
    /// `/proc/uptime`.
    Uptime,
    /// A machine file of family `machine`: its [`crate::machine_file`] index.
    Machine(u8),
}

/// The longest path [`normalise`] keeps (every sealed path is shorter).
pub const MAX: usize = 48;

/// The sealed paths other than the machine files, and what each is.
const FIXED: [(&str, File); 7] = [
    ("/dev/urandom", File::Stream(device::URANDOM)),
    ("/dev/random", File::Stream(device::RANDOM)),
    ("/proc/sys/kernel/random/uuid", File::Uuid),
    ("/proc/sys/kernel/random/boot_id", File::BootId),
    ("/proc/sys/kernel/hostname", File::HostName { kernel: true }),
    ("/etc/hostname", File::HostName { kernel: false }),
    ("/proc/uptime", File::Uptime),
];

/// Collapses repeated slashes and `/./` components of `path` into `out`: its length, or
/// `None` when it does not fit (no sealed path is that long).
pub fn normalise(path: &[u8], out: &mut [u8; MAX]) -> Option<usize> {
    let mut n = 0;
    let mut i = 0;
    while i < path.len() {
        let c = path[i];
        if c == b'/' {
            if n > 0 && out[n - 1] == b'/' {
                i += 1;
                continue;
            }
            if path.get(i + 1) == Some(&b'.') && path.get(i + 2) == Some(&b'/') {
                i += 2;
                continue;
            }
        }
        if n == out.len() {
            return None;
        }
        out[n] = c;
        n += 1;
        i += 1;
    }
    Some(n)
}

/// Which sealed file absolute `path` names (after [`normalise`]).
pub fn classify(path: &[u8]) -> Option<File> {
    if path.first() != Some(&b'/') {
        return None;
    }
    let mut buf = [0u8; MAX];
    let n = normalise(path, &mut buf)?;
    let norm = &buf[..n];
    if let Some(&(_, f)) = FIXED.iter().find(|(p, _)| p.as_bytes() == norm) {
        return Some(f);
    }
    machine_file::index(norm).map(File::Machine)
}

/// Is relative `path`'s last component that of a sealed path (so that its directory is
/// worth a look)?
pub fn names_one(path: &[u8]) -> bool {
    if path.is_empty() || path[0] == b'/' {
        return false;
    }
    let last = |p: &[u8]| -> usize { p.iter().rposition(|&c| c == b'/').map_or(0, |i| i + 1) };
    let name = &path[last(path)..];
    let paths = FIXED
        .iter()
        .map(|f| f.0)
        .chain(machine_file::PATHS.iter().copied());
    !name.is_empty() && paths.map(str::as_bytes).any(|p| &p[last(p)..] == name)
}

/// `base` (a directory's absolute path) and relative `path` joined with one `/` into `out`,
/// NUL-terminated: the length without the NUL, or `None` when it does not fit.
pub fn join(base: &[u8], path: &[u8], out: &mut [u8]) -> Option<usize> {
    let base = base.strip_suffix(b"/").unwrap_or(base);
    let n = base.len() + 1 + path.len();
    if n + 1 > out.len() {
        return None;
    }
    out[..base.len()].copy_from_slice(base);
    out[base.len()] = b'/';
    out[base.len() + 1..n].copy_from_slice(path);
    out[n] = 0;
    Some(n)
}

/// Is the absolute `path` in a temp directory (`/tmp`, `/var/tmp`, `tmpdir`: the process's
/// `$TMPDIR`), below it, not the directory itself? Where a name taken by an earlier run's
/// leftover is said (`tmp-leftover`): libseal's exclusive creates, a static image's in its
/// supervisor.
pub fn in_temp_dir(path: &[u8], tmpdir: Option<&[u8]>) -> bool {
    let under = |dir: &[u8]| {
        let dir = dir.strip_suffix(b"/").unwrap_or(dir);
        !dir.is_empty()
            && path.len() > dir.len() + 1
            && path.starts_with(dir)
            && path[dir.len()] == b'/'
    };
    under(b"/tmp") || under(b"/var/tmp") || tmpdir.is_some_and(under)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_dirs_hold_their_entries_not_themselves() {
        assert!(in_temp_dir(b"/tmp/tmp.abc", None));
        assert!(in_temp_dir(b"/var/tmp/x/y", None));
        assert!(in_temp_dir(b"/scratch/t/x", Some(b"/scratch/t/")));
        for p in [
            &b"/tmp"[..],
            b"/tmp/",
            b"/tmpx/a",
            b"/home/tmp/a",
            b"/scratch/t/x",
        ] {
            assert!(
                !in_temp_dir(p, None),
                "{}",
                core::str::from_utf8(p).unwrap()
            );
        }
        assert!(!in_temp_dir(b"/x", Some(b"")));
    }

    #[test]
    fn every_spelling_of_a_sealed_path_is_recognised() {
        assert_eq!(
            classify(b"/dev/urandom"),
            Some(File::Stream(device::URANDOM))
        );
        assert_eq!(
            classify(b"//dev/./random"),
            Some(File::Stream(device::RANDOM))
        );
        assert_eq!(classify(b"/proc/uptime"), Some(File::Uptime));
        assert_eq!(
            classify(b"/etc/hostname"),
            Some(File::HostName { kernel: false })
        );
        assert_eq!(
            classify(b"/proc//meminfo"),
            Some(File::Machine(machine_file::MEMINFO))
        );
        assert_eq!(classify(b"dev/urandom"), None);
        assert_eq!(classify(b"/dev/urandom2"), None);
        assert_eq!(classify(b"/proc/1000/stat"), None);
    }

    #[test]
    fn only_a_sealed_files_name_makes_a_relative_path_worth_a_look() {
        let yes = [
            "urandom",
            "meminfo",
            "stat",
            "loadavg",
            "uptime",
            "random/uuid",
        ];
        let yes = yes.iter().chain(&["./boot_id", "cpu/online", "hostname"]);
        let no = ["main.c", "/dev/urandom", "", "dev/", "urandom2", "status"];
        let cases = yes.map(|p| (p, true)).chain(no.iter().map(|p| (p, false)));
        for (p, want) in cases {
            assert_eq!(names_one(p.as_bytes()), want, "{p}");
        }
    }

    #[test]
    fn a_joined_path_is_the_absolute_one() {
        let mut out = [0xffu8; 32];
        let n = join(b"/proc", b"meminfo", &mut out).unwrap();
        assert_eq!(&out[..=n], b"/proc/meminfo\0");
        assert_eq!(
            classify(&out[..n]),
            Some(File::Machine(machine_file::MEMINFO))
        );
        let n = join(b"/", b"dev/./urandom", &mut out).unwrap();
        assert_eq!(classify(&out[..n]), Some(File::Stream(device::URANDOM)));
        assert_eq!(
            join(b"/a-long-directory-name", b"0123456789", &mut out),
            None
        );
    }
}
