//! The machine files of family `machine`, served as memfds: `/proc/cpuinfo`, `/proc/stat`,
//! `/proc/meminfo`, `/proc/loadavg`, `/proc/version`, `/proc/sys/kernel/{osrelease,version}` and
//! `/sys/devices/system/cpu/{online,possible,present,offline}` (the paths of
//! [`seal_abi::machine_file::PATHS`]).
//!
//! * `/proc/cpuinfo` is the machine's first processor block repeated `N` times: `processor`,
//!   `core id`, `apicid` and `initial apicid` are the block's number, `physical id` 0,
//!   `siblings` and `cpu cores` `N`, `cpu MHz` [`MHZ`] and `bogomips` [`BOGOMIPS`]. The model
//!   name, flags and cache sizes stay the machine's, as `cpuid` does (family `cpu`): a program
//!   must not be told of instructions its CPU lacks. A block that does not fit the shim's
//!   buffer gives way to a minimal one (processor, speeds, topology).
//! * `/proc/stat` is synthesized: `N` CPUs that did nothing but idle since boot (each one's
//!   idle time is the boot-time clock, in clock ticks), no interrupts, one process, and the
//!   boot time (`btime`) the sealed clocks imply (`CLOCK_REALTIME − CLOCK_BOOTTIME`).
//! * `/proc/meminfo` is synthesized from [`super::TOTAL_RAM`], [`super::FREE_RAM`] and
//!   [`super::AVAILABLE_RAM`], no swap, no huge pages.
//! * `/proc/loadavg` says what `sysinfo` does: no load, one process (`uptime`, `top`,
//!   `getloadavg`).
//!
//! Only read-only opens are served; a write or `O_PATH` open reaches the kernel.

use seal_abi::machine_file as mf;
use seal_abi::{flags, Fid};

use super::{cpus, AVAILABLE_RAM, FREE_RAM, RELEASE, TOTAL_RAM, VERSION};
use crate::clock::{self, Domain};
use crate::core::{census, config, fd, sys};
use crate::open::Outcome;

/// `cpu MHz` of every sealed processor.
pub const MHZ: &[u8] = b"2000.000";
/// `bogomips` of every sealed processor (twice the clock, as the kernel computes it).
pub const BOGOMIPS: &[u8] = b"4000.00";

/// Which machine file `path` (no NUL) names: its [`seal_abi::machine_file`] index.
pub fn classify(path: &[u8]) -> Option<u8> {
    if path.len() < 10 || path[0] != b'/' || !matches!(path[1], b'p' | b's' | b'/' | b'.') {
        return None;
    }
    let mut norm = [0u8; 48];
    let n = crate::open::normalise(path, &mut norm)?;
    let p = &norm[..n];
    mf::PATHS
        .iter()
        .position(|q| q.as_bytes() == p)
        .map(|i| i as u8)
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

/// `0-3`, or `0` for one CPU, and a newline: the kernel's CPU list of `n` CPUs.
pub fn cpu_list<const N: usize>(n: u32, out: &mut sys::StackBuf<N>) {
    out.push(b"0");
    if n > 1 {
        out.push(b"-").push_u64(n as u64 - 1);
    }
    out.push(b"\n");
}

/// One `/proc/meminfo` line as the kernel lays it out: the key in 16 columns, the number in 8.
fn meminfo_line<const N: usize>(key: &[u8], v: u64, kb: bool, out: &mut sys::StackBuf<N>) {
    out.push(key).push(b":");
    let mut digits = [0u8; 20];
    let d = seal_abi::write_u64(v, &mut digits);
    for _ in key.len() + 1..16 {
        out.push(b" ");
    }
    for _ in d..8 {
        out.push(b" ");
    }
    out.push(&digits[..d]);
    out.push(if kb { &b" kB\n"[..] } else { b"\n" });
}

/// The sealed `/proc/meminfo`.
pub fn meminfo<const N: usize>(out: &mut sys::StackBuf<N>) {
    let kb = |b: u64| b >> 10;
    let cached = AVAILABLE_RAM - FREE_RAM;
    let used = TOTAL_RAM - AVAILABLE_RAM;
    for (key, v) in [
        (&b"MemTotal"[..], kb(TOTAL_RAM)),
        (b"MemFree", kb(FREE_RAM)),
        (b"MemAvailable", kb(AVAILABLE_RAM)),
        (b"Buffers", 0),
        (b"Cached", kb(cached)),
        (b"SwapCached", 0),
        (b"Active", kb(used)),
        (b"Inactive", kb(cached)),
        (b"SwapTotal", 0),
        (b"SwapFree", 0),
        (b"Dirty", 0),
        (b"Writeback", 0),
        (b"AnonPages", kb(used)),
        (b"Mapped", 0),
        (b"Shmem", 0),
        (b"Slab", 0),
        (b"CommitLimit", kb(TOTAL_RAM / 2)),
        (b"Committed_AS", kb(used)),
    ] {
        meminfo_line(key, v, true, out);
    }
    for key in [
        &b"HugePages_Total"[..],
        b"HugePages_Free",
        b"HugePages_Rsvd",
        b"HugePages_Surp",
    ] {
        meminfo_line(key, 0, false, out);
    }
    meminfo_line(b"Hugepagesize", 2048, true, out);
}

/// One `/proc/stat` CPU line: `label` idle for `idle` clock ticks, nothing else.
fn stat_cpu_line(fd: i32, label: &[u8], n: Option<u32>, idle: u64) -> Result<(), i32> {
    let mut l = sys::StackBuf::<128>::new();
    l.push(label);
    match n {
        Some(i) => l.push_u64(i as u64),
        None => l.push(b" "),
    };
    l.push(b" 0 0 0 ").push_u64(idle).push(b" 0 0 0 0 0 0\n");
    fd::write_all(fd, l.as_bytes())
}

/// Writes the sealed `/proc/stat` for `n` CPUs to `fd`.
fn write_stat(fd: i32, n: u32) -> Result<(), i32> {
    let idle = crate::open::procfs::ticks(boot_ns());
    stat_cpu_line(fd, b"cpu", None, idle.saturating_mul(n as u64))?;
    for i in 0..n {
        stat_cpu_line(fd, b"cpu", Some(i), idle)?;
    }
    let mut t = sys::StackBuf::<256>::new();
    t.push(b"intr 0\nctxt 0\nbtime ")
        .push_i64(boot_time_s())
        .push(b"\nprocesses 1\nprocs_running 1\nprocs_blocked 0\n")
        .push(b"softirq 0 0 0 0 0 0 0 0 0 0 0\n");
    fd::write_all(fd, t.as_bytes())
}

/// The first processor block of the machine's `/proc/cpuinfo` (with its blank line), or an
/// empty slice when it cannot be read or does not fit.
fn first_block(buf: &mut [u8]) -> &[u8] {
    let n = sys::read_file(b"/proc/cpuinfo\0", buf);
    let got = &buf[..n];
    match got.windows(2).position(|w| w == b"\n\n") {
        Some(end) => &got[..end + 2],
        None => &[],
    }
}

/// Processor block `i` of `n` from the machine's `block` (empty: a minimal one).
pub fn cpuinfo_block<const N: usize>(block: &[u8], i: u32, n: u32, out: &mut sys::StackBuf<N>) {
    if block.is_empty() {
        out.push(b"processor\t: ").push_u64(i as u64);
        out.push(b"\ncpu MHz\t\t: ").push(MHZ);
        out.push(b"\nphysical id\t: 0\nsiblings\t: ")
            .push_u64(n as u64);
        out.push(b"\ncore id\t\t: ").push_u64(i as u64);
        out.push(b"\ncpu cores\t: ").push_u64(n as u64);
        out.push(b"\nbogomips\t: ").push(BOGOMIPS).push(b"\n\n");
        return;
    }
    for line in block.split_inclusive(|&c| c == b'\n') {
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            out.push(line);
            continue;
        };
        let key = line[..colon].trim_ascii_end();
        let mut num = [0u8; 20];
        let value: &[u8] = match key {
            b"processor" | b"core id" | b"apicid" | b"initial apicid" => {
                let d = seal_abi::write_u64(i as u64, &mut num);
                &num[..d]
            }
            b"siblings" | b"cpu cores" => {
                let d = seal_abi::write_u64(n as u64, &mut num);
                &num[..d]
            }
            b"physical id" => b"0",
            b"cpu MHz" => MHZ,
            b"bogomips" => BOGOMIPS,
            _ => {
                out.push(line);
                continue;
            }
        };
        out.push(&line[..=colon]).push(b" ").push(value).push(b"\n");
    }
}

/// Writes the sealed `/proc/cpuinfo` for `n` CPUs to `fd`.
fn write_cpuinfo(fd: i32, n: u32) -> Result<(), i32> {
    let mut src = [0u8; 6144];
    let mut block = first_block(&mut src);
    if block.len() > 4000 {
        block = &[];
    }
    for i in 0..n {
        let mut out = sys::StackBuf::<4224>::new();
        cpuinfo_block(block, i, n, &mut out);
        fd::write_all(fd, out.as_bytes())?;
    }
    Ok(())
}

/// The contents of one of the small files (all but cpuinfo and stat) into `out`.
pub fn small_file<const N: usize>(which: u8, n: u32, out: &mut sys::StackBuf<N>) {
    match which {
        mf::MEMINFO => meminfo(out),
        mf::VERSION => {
            out.push(b"Linux version ").push(RELEASE);
            out.push(b" (seal@seal) (gcc, GNU ld) ")
                .push(VERSION)
                .push(b"\n");
        }
        mf::OSRELEASE => {
            out.push(RELEASE).push(b"\n");
        }
        mf::KERNEL_VERSION => {
            out.push(VERSION).push(b"\n");
        }
        mf::CPU_OFFLINE => {
            out.push(b"\n");
        }
        mf::LOADAVG => {
            // As `sysinfo`'s: no load, one process, the last one started the run's first.
            out.push(b"0.00 0.00 0.00 1/1 1000\n");
        }
        _ => cpu_list(n, out),
    }
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
                let w = if which == mf::CPUINFO {
                    write_cpuinfo(f, n)
                } else {
                    write_stat(f, n)
                };
                if let Err(e) = w {
                    sys::close(f);
                    return Err(e);
                }
                // SAFETY: plain integers.
                unsafe { sys::syscall3(libc::SYS_lseek, f as i64, 0, libc::SEEK_SET as i64) };
                Ok(f)
            })
        }
        _ => {
            let mut out = sys::StackBuf::<2048>::new();
            small_file(which, n, &mut out);
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

    #[test]
    fn cpu_lists_and_small_files() {
        let mut b = sys::StackBuf::<64>::new();
        cpu_list(4, &mut b);
        assert_eq!(text(&b), "0-3\n");
        let mut b = sys::StackBuf::<64>::new();
        cpu_list(1, &mut b);
        assert_eq!(text(&b), "0\n");
        let mut b = sys::StackBuf::<256>::new();
        small_file(mf::VERSION, 4, &mut b);
        assert_eq!(
            text(&b),
            "Linux version 6.1.0-seal (seal@seal) (gcc, GNU ld) #1 SMP seal\n"
        );
    }

    #[test]
    fn meminfo_is_laid_out_as_the_kernel_does() {
        let mut b = sys::StackBuf::<2048>::new();
        meminfo(&mut b);
        let t = text(&b);
        assert!(t.starts_with("MemTotal:        8388608 kB\nMemFree:         4194304 kB\n"));
        assert!(t.contains("MemAvailable:    6291456 kB\n"), "{t}");
        assert!(t.contains("HugePages_Total:       0\n"), "{t}");
        assert!(t.ends_with("Hugepagesize:       2048 kB\n"), "{t}");
    }

    #[test]
    fn cpuinfo_blocks_are_renumbered() {
        let real = b"processor\t: 0\nvendor_id\t: GenuineIntel\ncpu MHz\t\t: 2299.998\n\
                     physical id\t: 0\nsiblings\t: 2\ncore id\t\t: 1\ncpu cores\t: 2\n\
                     apicid\t\t: 3\nflags\t\t: fpu sse\nbogomips\t: 4599.99\n\n";
        let mut b = sys::StackBuf::<1024>::new();
        cpuinfo_block(real, 2, 4, &mut b);
        assert_eq!(
            text(&b),
            "processor\t: 2\nvendor_id\t: GenuineIntel\ncpu MHz\t\t: 2000.000\n\
             physical id\t: 0\nsiblings\t: 4\ncore id\t\t: 2\ncpu cores\t: 4\n\
             apicid\t\t: 2\nflags\t\t: fpu sse\nbogomips\t: 4000.00\n\n"
        );
        let mut b = sys::StackBuf::<1024>::new();
        cpuinfo_block(b"", 0, 1, &mut b);
        assert!(text(&b).starts_with("processor\t: 0\ncpu MHz\t\t: 2000.000\n"));
    }
}
