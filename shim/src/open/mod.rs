//! Path-based opens: `open`, `open64`, `openat`, `openat64`, the fortify `__open_2` family,
//! `fopen`, `fopen64`, `freopen`, `freopen64` (exported in `hooks.rs`). Every one classifies
//! its path and dispatches:
//!
//! * randomness: `/dev/urandom`, `/dev/random`, `/proc/sys/kernel/random/uuid` and `boot_id`
//!   get a descriptor whose contents already are the sealed bytes (`random::device`);
//! * host names: `/proc/sys/kernel/hostname` and `/etc/hostname` get the sealed name
//!   (`host`); a write to the kernel's file goes to /dev/null;
//! * pids and times in `/proc`: `stat` and `status` of a process of the run and
//!   `/proc/uptime` get a memfd with virtual pids and sealed times (`procfs`);
//! * machine facts: `/proc/cpuinfo`, `/proc/stat`, `/proc/meminfo`, `/proc/version`, the
//!   kernel's release and version files and `/sys/devices/system/cpu/{online,…}` get the
//!   family `machine`'s memfd (`crate::machine::files`);
//! * pids: any other `/proc/<vpid>/…` is rewritten to the real pid's path (`process`), then
//!   opened by libc as usual; a number relative to a listed `/proc` or task directory
//!   (`openat(procfd, "1000/stat")`) is made absolute first (`listing`);
//!
//! and anything else reaches the real function with the caller's arguments unchanged (errno
//! untouched).
//!
//! Why the seal is at `open`, not at `read`: stdio's `fread` calls libc's internal read (not
//! the PLT), and a shell's `tr -dc a-z0-9 < /dev/urandom` reads an fd that its parent opened
//! before exec, in a process that never asked for the device by name. So the *open* is what
//! is replaced, and then any reader (`read`, stdio, an exec'd child that inherited the
//! descriptor, `head -c`, `od`) sees the sealed contents.
//!
//! Only read-only opens are sealed. Write-only opens (feeding the pool) pass through; a
//! read-write open passes through too, with an `unsealed` event and a warning. Paths are
//! recognised after collapsing `//` and `/./`, a relative one (to the working directory or a
//! directory fd) by its directory ([`relative_sealed`]); a device reached through a symlink or
//! `..`, or a raw `SYS_open` system call, is not recognised (see docs/names.md).

use seal_abi::sealed_path::{self, File};
use seal_abi::{flags, unsealed};

use crate::core::{census, config, sys};
use crate::host;
use crate::random::device;

#[cfg(not(test))]
mod hooks;
pub mod listing;
pub mod procfs;

/// What a path names, if it is one of ours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A random device: the [`seal_abi::device`] index (URANDOM, RANDOM).
    Stream(u8),
    Uuid,
    BootId,
    /// The host name file: the kernel's (`/proc/sys/kernel/hostname`) or `/etc/hostname`.
    HostName {
        kernel: bool,
    },
}

impl Target {
    /// The census detail byte.
    pub fn detail(self) -> u8 {
        match self {
            Target::Stream(d) => d,
            Target::Uuid => seal_abi::device::UUID,
            Target::BootId => seal_abi::device::BOOT_ID,
            Target::HostName { .. } => seal_abi::NO_DETAIL,
        }
    }
    /// The family that must be sealed for us to answer.
    pub fn family(self) -> u32 {
        match self {
            Target::HostName { .. } => flags::HOST,
            _ => flags::RANDOM,
        }
    }
}

/// Classifies `path` (bytes, no NUL; [`seal_abi::sealed_path`], the supervisor's table too).
/// Cheap for the common case: anything not starting with `/d`, `/p`, `/e` or a doubled slash
/// is rejected after two byte compares. `/proc/uptime` and the machine files are `procfs`'s and
/// `crate::machine::files`'.
pub fn classify(path: &[u8]) -> Option<Target> {
    if path.len() < 2 || path[0] != b'/' || !matches!(path[1], b'd' | b'p' | b'e' | b'/' | b'.') {
        return None;
    }
    match sealed_path::classify(path)? {
        File::Stream(d) => Some(Target::Stream(d)),
        File::Uuid => Some(Target::Uuid),
        File::BootId => Some(Target::BootId),
        File::HostName { kernel } => Some(Target::HostName { kernel }),
        File::Uptime | File::Machine(_) => None,
    }
}

/// Collapses repeated slashes and `/./` components into `out`; `None` if it does not fit.
pub(crate) use seal_abi::sealed_path::normalise;

/// Relative `path` (relative to `dirfd`, or to the working directory for `AT_FDCWD`) made
/// absolute in `out` (NUL-terminated) when its last component is a sealed file's
/// ([`sealed_path::names_one`]: any other relative path costs that one look) and the result
/// names a sealed file: `cd /proc && cat meminfo`, busybox `top`'s `open("stat")` after
/// `chdir("/proc")`. The directory is the kernel's answer (`getcwd`, or `dirfd`'s link in
/// `/proc/self/fd`); `..` and links inside `path` are not followed.
pub fn relative_sealed(dirfd: i32, path: &[u8], out: &mut [u8; 256]) -> bool {
    if !sealed_path::names_one(path) {
        return false;
    }
    let mut dir = [0u8; 160];
    let n = if dirfd == libc::AT_FDCWD {
        sys::getcwd(&mut dir)
    } else {
        let mut link = sys::StackBuf::<32>::new();
        link.push(b"/proc/self/fd/").push_i64(dirfd as i64);
        sys::readlink(link.as_cstr(), &mut dir)
    };
    if n == 0 || n == dir.len() {
        return false;
    }
    match sealed_path::join(&dir[..n], path, out) {
        Some(len) => sealed_path::classify(&out[..len]).is_some(),
        None => false,
    }
}

/// What to do with an open of one of our paths.
pub enum Outcome {
    /// Not sealed here: call the real function.
    PassThrough,
    /// Our descriptor.
    Fd(i32),
    /// Failed with this errno (set it, return -1).
    Err(i32),
}

/// Opens `target` sealed, honouring `O_CLOEXEC` and `O_NONBLOCK` of `oflags`.
pub fn open_sealed(target: Target, oflags: i32) -> Outcome {
    if !config::sealed(target.family()) {
        return Outcome::PassThrough;
    }
    let acc = oflags & libc::O_ACCMODE;
    if target == (Target::HostName { kernel: true }) && acc != libc::O_RDONLY {
        if let Some(r) = host::drop_kernel_name_write(oflags) {
            return match r {
                Ok(fd) => Outcome::Fd(fd),
                Err(e) => Outcome::Err(e),
            };
        }
    }
    if oflags & libc::O_PATH != 0 || acc == libc::O_WRONLY {
        return Outcome::PassThrough;
    }
    if acc != libc::O_RDONLY || oflags & (libc::O_DIRECTORY | libc::O_EXCL) != 0 {
        if acc == libc::O_RDWR {
            let mut m = sys::StackBuf::<96>::new();
            m.push(b"read-write open of ")
                .push(path_of(target))
                .push(b" is not sealed");
            census::record_unsealed(unsealed::UNSUPPORTED_CALL, m.as_bytes());
            sys::warn(m.as_bytes());
        }
        return Outcome::PassThrough;
    }
    let cloexec = oflags & libc::O_CLOEXEC != 0;
    let r = match target {
        Target::Stream(_) => device::open_stream(cloexec, oflags & libc::O_NONBLOCK != 0),
        Target::Uuid => device::open_uuid(cloexec),
        Target::BootId => device::open_boot_id(cloexec),
        Target::HostName { .. } => host::open_name_file(cloexec),
    };
    match r {
        Ok(fd) => Outcome::Fd(fd),
        Err(e) if e == libc::EMFILE || e == libc::ENFILE || e == libc::ENOMEM => Outcome::Err(e),
        Err(e) if matches!(target, Target::Stream(_)) => {
            // No feeder could take the pipe (a process limit, a refused clone): the open fails
            // with EAGAIN, loudly. Never the real device: its bytes would differ every run with
            // nothing but this line to say so.
            sys::warn(cannot_seal(target, e, b"): the open fails with EAGAIN").as_bytes());
            Outcome::Err(libc::EAGAIN)
        }
        Err(e) => {
            // The kernel refused a memfd (seccomp): fail loud, then let the program have the
            // real file rather than break it.
            let m = cannot_seal(target, e, b"); reads of it are NOT sealed");
            census::record_unsealed(unsealed::UNSUPPORTED_CALL, m.as_bytes());
            sys::warn(m.as_bytes());
            Outcome::PassThrough
        }
    }
}

/// "cannot seal PATH (errno E" and `then`: what a failed sealed open says.
fn cannot_seal(target: Target, e: i32, then: &[u8]) -> sys::StackBuf<128> {
    let mut m = sys::StackBuf::<128>::new();
    m.push(b"cannot seal ")
        .push(path_of(target))
        .push(b" (errno ")
        .push_u64(e as u64)
        .push(then);
    m
}

fn path_of(target: Target) -> &'static [u8] {
    match target {
        Target::Stream(d) => seal_abi::device::PATHS[d as usize].as_bytes(),
        Target::Uuid => seal_abi::device::PATHS[seal_abi::device::UUID as usize].as_bytes(),
        Target::BootId => seal_abi::device::PATHS[seal_abi::device::BOOT_ID as usize].as_bytes(),
        Target::HostName { .. } => b"the hostname file",
    }
}

/// Open flags for an fopen-style `mode` (no NUL), or `None` when the mode writes (those are
/// not ours).
pub fn read_only_mode(m: &[u8]) -> Option<libc::c_int> {
    if m.first() != Some(&b'r') || m.contains(&b'+') {
        return None;
    }
    let mut fl = libc::O_RDONLY;
    if m.contains(&b'e') {
        fl |= libc::O_CLOEXEC;
    }
    Some(fl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_our_paths_only() {
        assert_eq!(
            classify(b"/dev/urandom"),
            Some(Target::Stream(seal_abi::device::URANDOM))
        );
        assert_eq!(
            classify(b"//dev/./urandom"),
            Some(Target::Stream(seal_abi::device::URANDOM))
        );
        assert_eq!(
            classify(b"/dev/random"),
            Some(Target::Stream(seal_abi::device::RANDOM))
        );
        assert_eq!(
            classify(b"/proc/sys/kernel/random/uuid"),
            Some(Target::Uuid)
        );
        assert_eq!(
            classify(b"/proc/sys/kernel/random/boot_id"),
            Some(Target::BootId)
        );
        assert_eq!(
            classify(b"/etc/hostname"),
            Some(Target::HostName { kernel: false })
        );
        crate::rejects! { classify =>
            "/dev/urandom2" "dev/urandom" "/dev/null" "/etc/hosts" "/" "" "/dev/../dev/urandom"
            "/proc/sys/kernel/random/uuid/"
        }
        let long = [b'/'; 300];
        assert_eq!(classify(&long), None);
    }

    #[test]
    fn normalises_only_slashes_and_dots() {
        let mut out = [0u8; 48];
        let n = normalise(b"//proc/.//sys/./kernel//hostname", &mut out).unwrap();
        assert_eq!(&out[..n], b"/proc/sys/kernel/hostname");
        let n = normalise(b"/dev/../dev/./random", &mut out).unwrap();
        assert_eq!(&out[..n], b"/dev/../dev/random");
        assert_eq!(normalise(&[b'a'; 49], &mut out), None);
    }

    #[test]
    fn fopen_modes_that_only_read_are_ours() {
        let read = Some(libc::O_RDONLY);
        let read_cloexec = Some(libc::O_RDONLY | libc::O_CLOEXEC);
        let modes = [(&b"r"[..], read), (b"rb", read), (b"re", read_cloexec)];
        let others = [&b"r+"[..], b"w", b"a", b"rb+", b"", b"x"].map(|m| (m, None));
        for (m, want) in modes.into_iter().chain(others) {
            assert_eq!(read_only_mode(m), want, "{}", String::from_utf8_lossy(m));
        }
    }

    #[test]
    fn details_and_families_follow_the_target() {
        assert_eq!(Target::Uuid.detail(), seal_abi::device::UUID);
        assert_eq!(
            Target::HostName { kernel: true }.detail(),
            seal_abi::NO_DETAIL
        );
        assert_eq!(Target::HostName { kernel: false }.family(), flags::HOST);
        assert_eq!(Target::BootId.family(), flags::RANDOM);
        assert_eq!(
            path_of(Target::Stream(seal_abi::device::RANDOM)),
            b"/dev/random"
        );
    }
}
