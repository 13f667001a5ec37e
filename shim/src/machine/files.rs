//! The machine files of family `machine`, served as memfds: `/proc/cpuinfo`, `/proc/stat`,
//! `/proc/meminfo`, `/proc/loadavg`, `/proc/version`, `/proc/sys/kernel/{osrelease,version}` and
//! `/sys/devices/system/cpu/{online,possible,present,offline}` (the paths of
//! [`seal_abi::machine_file::PATHS`]).
//!
//! What each holds is written by [`seal_abi::machine_file`] (the static-image supervisor
//! writes a static image's with the same functions); here its inputs are read (the CPU count,
//! the sealed boot-time clock and boot time, the machine's first processor block) and the
//! text is written to a memfd from stack buffers.
//!
//! Only read-only opens are served; a write or `O_PATH` open reaches the kernel.

use seal_abi::machine_file::{self as mf, Sink};
use seal_abi::{flags, Fid};

use super::cpus;
use crate::clock::{self, Domain};
use crate::core::{census, config, fd, sys};
use crate::open::Outcome;

/// Which machine file `path` (no NUL) names: its [`seal_abi::machine_file`] index.
pub fn classify(path: &[u8]) -> Option<u8> {
    if path.len() < 10 || path[0] != b'/' || !matches!(path[1], b'p' | b's' | b'/' | b'.') {
        return None;
    }
    match seal_abi::sealed_path::classify(path)? {
        seal_abi::sealed_path::File::Machine(i) => Some(i),
        _ => None,
    }
}

/// The sealed boot-time clock now (ns), without a tick; the real one when time is unsealed.
pub fn boot_ns() -> i64 {
    if config::sealed(flags::TIME) {
        clock::value_at(Domain::Monotonic, clock::now_logical())
    } else {
        clock::from_timespec(&sys::clock_gettime(libc::CLOCK_BOOTTIME))
    }
}

/// When the machine booted (seconds since 1970) as the clocks a process reads imply it.
fn boot_time_s() -> i64 {
    let ns = if config::sealed(flags::TIME) {
        clock::realtime_base().saturating_sub(clock::monotonic_base())
    } else {
        let real = clock::from_timespec(&sys::clock_gettime(libc::CLOCK_REALTIME));
        real.saturating_sub(clock::from_timespec(&sys::clock_gettime(
            libc::CLOCK_BOOTTIME,
        )))
    };
    ns.div_euclid(1_000_000_000)
}

impl<const N: usize> Sink for sys::StackBuf<N> {
    fn put(&mut self, s: &[u8]) {
        self.push(s);
    }
}

/// Text written to a descriptor through a stack buffer, in pieces of at most its size.
struct FdSink {
    fd: i32,
    buf: sys::StackBuf<4096>,
    err: Result<(), i32>,
}

impl FdSink {
    fn flush(&mut self) {
        if self.err.is_ok() && self.buf.len > 0 {
            self.err = fd::write_all(self.fd, self.buf.as_bytes());
        }
        self.buf.len = 0;
    }
}

impl Sink for FdSink {
    fn put(&mut self, s: &[u8]) {
        // `push` keeps one byte free.
        if self.buf.len + s.len() >= 4095 {
            self.flush();
        }
        if s.len() >= 4095 {
            if self.err.is_ok() {
                self.err = fd::write_all(self.fd, s);
            }
            return;
        }
        self.buf.push(s);
    }
}

/// Writes the sealed `/proc/stat` for `n` CPUs to `fd`.
fn write_stat(out: &mut FdSink, n: u32) {
    let idle = crate::open::procfs::ticks(boot_ns());
    mf::stat(n, idle, boot_time_s(), out);
}

/// Writes the sealed `/proc/cpuinfo` for `n` CPUs to `fd`.
fn write_cpuinfo(out: &mut FdSink, n: u32) {
    let mut src = [0u8; mf::CPUINFO_READ];
    let got = sys::read_file(b"/proc/cpuinfo\0", &mut src);
    mf::cpuinfo(mf::cpuinfo_first_block(&src[..got]), n, out);
}

/// An open of `path` (no NUL) with `oflags`: `Some` when it is a machine file and family
/// `machine` answered (or failed), `None` to go on to the real call.
pub fn open(path: &[u8], oflags: i32, ra: u64) -> Option<Outcome> {
    let which = classify(path)?;
    if !config::in_run() {
        return None;
    }
    census::count(Fid::OpenMachine, which, ra);
    let acc = oflags & libc::O_ACCMODE;
    if !super::sealed() || acc != libc::O_RDONLY || oflags & (libc::O_PATH | libc::O_DIRECTORY) != 0
    {
        return None;
    }
    let cloexec = oflags & libc::O_CLOEXEC != 0;
    let n = cpus();
    let r = match which {
        mf::CPUINFO | mf::STAT => {
            let fl = if cloexec { libc::MFD_CLOEXEC } else { 0 };
            // SAFETY: the name is NUL-terminated.
            let made = fd::check(unsafe {
                sys::syscall3(
                    libc::SYS_memfd_create,
                    c"seal-machine".as_ptr() as i64,
                    fl as i64,
                    0,
                )
            });
            made.map(|f| f as i32).and_then(|f| {
                let mut w = FdSink {
                    fd: f,
                    buf: sys::StackBuf::new(),
                    err: Ok(()),
                };
                if which == mf::CPUINFO {
                    write_cpuinfo(&mut w, n)
                } else {
                    write_stat(&mut w, n)
                };
                w.flush();
                if let Err(e) = w.err {
                    sys::close(f);
                    return Err(e);
                }
                // SAFETY: plain integers.
                unsafe { sys::syscall3(libc::SYS_lseek, f as i64, 0, libc::SEEK_SET as i64) };
                Ok(f)
            })
        }
        _ => {
            let mut out = sys::StackBuf::<{ mf::SMALL_MAX }>::new();
            mf::small_file(which, n, &mut out);
            fd::memfd_with(b"seal-machine\0", out.as_bytes(), cloexec)
        }
    };
    Some(match r {
        Ok(f) => Outcome::Fd(f),
        Err(e) => Outcome::Err(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<const N: usize>(b: &sys::StackBuf<N>) -> String {
        String::from_utf8(b.as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn classifies_the_machine_files_only() {
        assert_eq!(classify(b"/proc/cpuinfo"), Some(mf::CPUINFO));
        assert_eq!(classify(b"//proc/./meminfo"), Some(mf::MEMINFO));
        assert_eq!(
            classify(b"/sys/devices/system/cpu/online"),
            Some(mf::CPU_ONLINE)
        );
        assert_eq!(classify(b"/proc/sys/kernel/osrelease"), Some(mf::OSRELEASE));
        crate::rejects! { classify =>
            "/proc/cpuinfo2" "/proc/self/stat" "/proc/uptime"
            "/sys/devices/system/cpu/cpu0/online" "proc/stat" "/etc/hostname"
        }
    }

    /// libseal's texts, as they were before `seal_abi::machine_file` wrote them.
    #[test]
    fn the_texts_are_what_libseal_wrote_before() {
        let mut b = sys::StackBuf::<64>::new();
        mf::small_file(mf::CPU_ONLINE, 4, &mut b);
        assert_eq!(text(&b), "0-3\n");
        let mut b = sys::StackBuf::<64>::new();
        mf::small_file(mf::CPU_POSSIBLE, 1, &mut b);
        assert_eq!(text(&b), "0\n");
        let mut b = sys::StackBuf::<256>::new();
        mf::small_file(mf::VERSION_FILE, 4, &mut b);
        assert_eq!(
            text(&b),
            "Linux version 6.1.0-seal (seal@seal) (gcc, GNU ld) #1 SMP seal\n"
        );
        let mut b = sys::StackBuf::<{ mf::SMALL_MAX }>::new();
        mf::small_file(mf::MEMINFO, 4, &mut b);
        let t = text(&b);
        assert!(t.starts_with("MemTotal:        8388608 kB\nMemFree:         4194304 kB\n"));
        assert!(t.contains("MemAvailable:    6291456 kB\n"), "{t}");
        assert!(t.ends_with("Hugepagesize:       2048 kB\n"), "{t}");
        assert_eq!(t.len(), 19 * 28 + 4 * 25, "{t}");
        let real = b"processor\t: 0\nvendor_id\t: GenuineIntel\ncpu MHz\t\t: 2299.998\n\
                     physical id\t: 0\nsiblings\t: 2\ncore id\t\t: 1\ncpu cores\t: 2\n\
                     apicid\t\t: 3\nflags\t\t: fpu sse\nbogomips\t: 4599.99\n\n";
        let mut b = sys::StackBuf::<1024>::new();
        mf::cpuinfo_block(real, 2, 4, &mut b);
        assert_eq!(
            text(&b),
            "processor\t: 2\nvendor_id\t: GenuineIntel\ncpu MHz\t\t: 2000.000\n\
             physical id\t: 0\nsiblings\t: 4\ncore id\t\t: 2\ncpu cores\t: 4\n\
             apicid\t\t: 2\nflags\t\t: fpu sse\nbogomips\t: 4000.00\n\n"
        );
    }

    #[test]
    fn stat_and_cpuinfo_reach_the_descriptor_whole() {
        // SAFETY: a NUL-terminated name; a descriptor we own and close.
        let f = unsafe { libc::memfd_create(c"t".as_ptr(), 0) };
        let mut w = FdSink {
            fd: f,
            buf: sys::StackBuf::new(),
            err: Ok(()),
        };
        mf::cpuinfo(&[], 300, &mut w);
        w.flush();
        assert_eq!(w.err, Ok(()));
        let mut want = sys::StackBuf::<65536>::new();
        mf::cpuinfo(&[], 300, &mut want);
        // SAFETY: plain integers.
        let len = unsafe { libc::lseek(f, 0, libc::SEEK_END) };
        assert_eq!(len as usize, want.len);
        let mut got = vec![0u8; want.len];
        // SAFETY: a buffer of `want.len` bytes.
        let n = unsafe { libc::pread(f, got.as_mut_ptr().cast(), got.len(), 0) };
        assert_eq!(n as usize, want.len);
        assert_eq!(&got[..], want.as_bytes());
        sys::close(f);
    }
}
