//! The machine files of family `machine`: their `detail` values for
//! [`crate::Fid::OpenMachine`] (which one was opened), and their sealed contents, written the
//! same by libseal (into a memfd, in-process: no allocation, through a [`Sink`]) and by the
//! static-image supervisor (for a static image's opens), so a dynamic and a static program of
//! a run read the same files.
//!
//! * `/proc/cpuinfo` is the machine's first processor block ([`cpuinfo_first_block`]) repeated
//!   `N` times: `processor`, `core id`, `apicid` and `initial apicid` are the block's number,
//!   `physical id` 0, `siblings` and `cpu cores` `N`, `cpu MHz` [`MHZ`] and `bogomips`
//!   [`BOGOMIPS`]. The model name, flags and cache sizes stay the machine's, as `cpuid` does
//!   (family `cpu`): a program must not be told of instructions its CPU lacks. A block that
//!   cannot be read or is too long gives way to a minimal one (processor, speeds, topology).
//! * `/proc/stat`: `N` CPUs idle since boot, no interrupts, one process, the boot time given.
//! * `/proc/meminfo`: [`TOTAL_RAM`], [`FREE_RAM`], [`AVAILABLE_RAM`], no swap, no huge pages.
//! * `/proc/loadavg`: no load, one process, as a sealed `sysinfo`.
//! * `/proc/version`, `/proc/sys/kernel/{osrelease,version}`: [`RELEASE`], [`VERSION`].
//! * `/sys/devices/system/cpu/{online,possible,present}`: `0-N-1`; `offline`: empty.

numbered! { u8 from 0, PATHS:
    CPUINFO = "/proc/cpuinfo",
    STAT = "/proc/stat",
    MEMINFO = "/proc/meminfo",
    VERSION_FILE = "/proc/version",
    OSRELEASE = "/proc/sys/kernel/osrelease",
    KERNEL_VERSION = "/proc/sys/kernel/version",
    CPU_ONLINE = "/sys/devices/system/cpu/online",
    CPU_POSSIBLE = "/sys/devices/system/cpu/possible",
    CPU_PRESENT = "/sys/devices/system/cpu/present",
    CPU_OFFLINE = "/sys/devices/system/cpu/offline",
    LOADAVG = "/proc/loadavg",
}

/// `uname -r`, `/proc/sys/kernel/osrelease`.
pub const RELEASE: &[u8] = b"6.1.0-seal";
/// `uname -v`, `/proc/sys/kernel/version`.
pub const VERSION: &[u8] = b"#1 SMP seal";
/// `uname -m` (libseal runs on x86_64 only).
pub const MACHINE: &[u8] = b"x86_64";
/// Total memory: 8 GiB.
pub const TOTAL_RAM: u64 = 8 << 30;
/// Free memory (`sysinfo`'s `freeram`, `MemFree`, `_SC_AVPHYS_PAGES`): 4 GiB.
pub const FREE_RAM: u64 = 4 << 30;
/// `MemAvailable` (free plus what the page cache would give back): 6 GiB.
pub const AVAILABLE_RAM: u64 = 6 << 30;
/// `cpu MHz` of every sealed processor.
pub const MHZ: &[u8] = b"2000.000";
/// `bogomips` of every sealed processor (twice the clock, as the kernel computes it).
pub const BOGOMIPS: &[u8] = b"4000.00";
/// Bytes of the machine's `/proc/cpuinfo` read for its first block.
pub const CPUINFO_READ: usize = 6144;
/// The longest first block used; a longer one gives way to the minimal block.
pub const CPUINFO_BLOCK_MAX: usize = 4000;
/// The longest small file ([`small_file`]): a buffer of this size holds any.
pub const SMALL_MAX: usize = 2048;

/// Where sealed text goes: a bounded buffer in libseal, a growing one in the launcher.
pub trait Sink {
    fn put(&mut self, s: &[u8]);
    fn put_u64(&mut self, v: u64) {
        let mut d = [0u8; 20];
        let n = crate::write_u64(v, &mut d);
        self.put(&d[..n]);
    }
    fn put_i64(&mut self, v: i64) {
        if v < 0 {
            self.put(b"-");
        }
        self.put_u64(v.unsigned_abs());
    }
}

/// Which machine file `norm` (an absolute path, `//` and `/./` collapsed) names.
pub fn index(norm: &[u8]) -> Option<u8> {
    PATHS
        .iter()
        .position(|q| q.as_bytes() == norm)
        .map(|i| i as u8)
}

/// `0-3`, or `0` for one CPU, and a newline: the kernel's CPU list of `n` CPUs.
pub fn cpu_list(n: u32, out: &mut impl Sink) {
    out.put(b"0");
    if n > 1 {
        out.put(b"-");
        out.put_u64(n as u64 - 1);
    }
    out.put(b"\n");
}

/// One `/proc/meminfo` line as the kernel lays it out: the key in 16 columns, the number in 8.
fn meminfo_line(key: &[u8], v: u64, kb: bool, out: &mut impl Sink) {
    out.put(key);
    out.put(b":");
    let mut digits = [0u8; 20];
    let d = crate::write_u64(v, &mut digits);
    for _ in key.len() + 1..16 {
        out.put(b" ");
    }
    for _ in d..8 {
        out.put(b" ");
    }
    out.put(&digits[..d]);
    out.put(if kb { &b" kB\n"[..] } else { b"\n" });
}

/// The sealed `/proc/meminfo`.
pub fn meminfo(out: &mut impl Sink) {
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

/// One `/proc/stat` CPU line: CPU `n` (`None`: the sum line) idle for `idle` clock ticks.
fn stat_cpu_line(n: Option<u32>, idle: u64, out: &mut impl Sink) {
    out.put(b"cpu");
    match n {
        Some(i) => out.put_u64(i as u64),
        None => out.put(b" "),
    }
    out.put(b" 0 0 0 ");
    out.put_u64(idle);
    out.put(b" 0 0 0 0 0 0\n");
}

/// The sealed `/proc/stat` of `n` CPUs each idle for `idle` clock ticks (the boot-time clock),
/// the machine booted at `btime` (seconds since 1970).
pub fn stat(n: u32, idle: u64, btime: i64, out: &mut impl Sink) {
    stat_cpu_line(None, idle.saturating_mul(n as u64), out);
    for i in 0..n {
        stat_cpu_line(Some(i), idle, out);
    }
    out.put(b"intr 0\nctxt 0\nbtime ");
    out.put_i64(btime);
    out.put(b"\nprocesses 1\nprocs_running 1\nprocs_blocked 0\n");
    out.put(b"softirq 0 0 0 0 0 0 0 0 0 0 0\n");
}

/// The first processor block (with its blank line) of `got`, the first [`CPUINFO_READ`] bytes
/// of the machine's `/proc/cpuinfo`; empty when there is none or it is too long.
pub fn cpuinfo_first_block(got: &[u8]) -> &[u8] {
    let got = &got[..got.len().min(CPUINFO_READ)];
    match got.windows(2).position(|w| w == b"\n\n") {
        Some(end) if end + 2 <= CPUINFO_BLOCK_MAX => &got[..end + 2],
        _ => &[],
    }
}

/// Processor block `i` of `n` from the machine's `block` (empty: a minimal one).
pub fn cpuinfo_block(block: &[u8], i: u32, n: u32, out: &mut impl Sink) {
    if block.is_empty() {
        out.put(b"processor\t: ");
        out.put_u64(i as u64);
        out.put(b"\ncpu MHz\t\t: ");
        out.put(MHZ);
        out.put(b"\nphysical id\t: 0\nsiblings\t: ");
        out.put_u64(n as u64);
        out.put(b"\ncore id\t\t: ");
        out.put_u64(i as u64);
        out.put(b"\ncpu cores\t: ");
        out.put_u64(n as u64);
        out.put(b"\nbogomips\t: ");
        out.put(BOGOMIPS);
        out.put(b"\n\n");
        return;
    }
    for line in block.split_inclusive(|&c| c == b'\n') {
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            out.put(line);
            continue;
        };
        let key = line[..colon].trim_ascii_end();
        let mut num = [0u8; 20];
        let value: &[u8] = match key {
            b"processor" | b"core id" | b"apicid" | b"initial apicid" => {
                let d = crate::write_u64(i as u64, &mut num);
                &num[..d]
            }
            b"siblings" | b"cpu cores" => {
                let d = crate::write_u64(n as u64, &mut num);
                &num[..d]
            }
            b"physical id" => b"0",
            b"cpu MHz" => MHZ,
            b"bogomips" => BOGOMIPS,
            _ => {
                out.put(line);
                continue;
            }
        };
        out.put(&line[..=colon]);
        out.put(b" ");
        out.put(value);
        out.put(b"\n");
    }
}

/// The sealed `/proc/cpuinfo` of `n` CPUs from the machine's first block.
pub fn cpuinfo(block: &[u8], n: u32, out: &mut impl Sink) {
    for i in 0..n {
        cpuinfo_block(block, i, n, out);
    }
}

/// The contents of one of the small files (all but cpuinfo and stat), for `n` CPUs: at most
/// [`SMALL_MAX`] bytes.
pub fn small_file(which: u8, n: u32, out: &mut impl Sink) {
    match which {
        MEMINFO => meminfo(out),
        VERSION_FILE => {
            out.put(b"Linux version ");
            out.put(RELEASE);
            out.put(b" (seal@seal) (gcc, GNU ld) ");
            out.put(VERSION);
            out.put(b"\n");
        }
        OSRELEASE => {
            out.put(RELEASE);
            out.put(b"\n");
        }
        KERNEL_VERSION => {
            out.put(VERSION);
            out.put(b"\n");
        }
        CPU_OFFLINE => out.put(b"\n"),
        // As `sysinfo`'s: no load, one process, the last one started the run's first.
        LOADAVG => out.put(b"0.00 0.00 0.00 1/1 1000\n"),
        _ => cpu_list(n, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed buffer, as libseal's.
    struct Buf {
        b: [u8; 8192],
        n: usize,
    }
    impl Sink for Buf {
        fn put(&mut self, s: &[u8]) {
            self.b[self.n..self.n + s.len()].copy_from_slice(s);
            self.n += s.len();
        }
    }
    /// What `f` writes, as text (compared by the caller, within this frame).
    fn text(f: impl FnOnce(&mut Buf)) -> Buf {
        let mut b = Buf { b: [0; 8192], n: 0 };
        f(&mut b);
        b
    }
    impl Buf {
        fn s(&self) -> &str {
            core::str::from_utf8(&self.b[..self.n]).unwrap()
        }
    }
    impl PartialEq<&str> for Buf {
        fn eq(&self, o: &&str) -> bool {
            self.s() == *o
        }
    }
    impl core::fmt::Debug for Buf {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.write_str(self.s())
        }
    }

    #[test]
    fn paths_are_indexed() {
        assert_eq!(index(b"/proc/cpuinfo"), Some(CPUINFO));
        assert_eq!(index(b"/sys/devices/system/cpu/online"), Some(CPU_ONLINE));
        assert_eq!(index(b"/proc/cpuinfo2"), None);
        assert_eq!(index(b"/proc/self/stat"), None);
    }

    #[test]
    fn cpu_lists_and_small_files() {
        assert_eq!(text(|b| cpu_list(4, b)), "0-3\n");
        assert_eq!(text(|b| cpu_list(1, b)), "0\n");
        assert_eq!(
            text(|b| small_file(VERSION_FILE, 4, b)),
            "Linux version 6.1.0-seal (seal@seal) (gcc, GNU ld) #1 SMP seal\n"
        );
        assert_eq!(text(|b| small_file(CPU_PRESENT, 2, b)), "0-1\n");
        assert_eq!(text(|b| small_file(CPU_OFFLINE, 2, b)), "\n");
        assert_eq!(text(|b| small_file(OSRELEASE, 2, b)), "6.1.0-seal\n");
        assert_eq!(
            text(|b| small_file(LOADAVG, 2, b)),
            "0.00 0.00 0.00 1/1 1000\n"
        );
        assert!(text(|b| small_file(MEMINFO, 2, b)).n < SMALL_MAX);
    }

    #[test]
    fn meminfo_is_laid_out_as_the_kernel_does() {
        let b = text(meminfo);
        let t = b.s();
        assert!(t.starts_with("MemTotal:        8388608 kB\nMemFree:         4194304 kB\n"));
        assert!(t.contains("MemAvailable:    6291456 kB\n"), "{t}");
        assert!(t.contains("HugePages_Total:       0\n"), "{t}");
        assert!(t.ends_with("Hugepagesize:       2048 kB\n"), "{t}");
    }

    #[test]
    fn stat_has_idle_cpus_and_the_boot_time() {
        assert_eq!(
            text(|b| stat(2, 50, 1_700_000_000, b)),
            "cpu  0 0 0 100 0 0 0 0 0 0\ncpu0 0 0 0 50 0 0 0 0 0 0\n\
             cpu1 0 0 0 50 0 0 0 0 0 0\nintr 0\nctxt 0\nbtime 1700000000\n\
             processes 1\nprocs_running 1\nprocs_blocked 0\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n"
        );
    }

    #[test]
    fn cpuinfo_blocks_are_renumbered() {
        let real = b"processor\t: 0\nvendor_id\t: GenuineIntel\ncpu MHz\t\t: 2299.998\n\
                     physical id\t: 0\nsiblings\t: 2\ncore id\t\t: 1\ncpu cores\t: 2\n\
                     apicid\t\t: 3\nflags\t\t: fpu sse\nbogomips\t: 4599.99\n\n";
        assert_eq!(
            text(|b| cpuinfo_block(real, 2, 4, b)),
            "processor\t: 2\nvendor_id\t: GenuineIntel\ncpu MHz\t\t: 2000.000\n\
             physical id\t: 0\nsiblings\t: 4\ncore id\t\t: 2\ncpu cores\t: 4\n\
             apicid\t\t: 2\nflags\t\t: fpu sse\nbogomips\t: 4000.00\n\n"
        );
        assert!(text(|b| cpuinfo_block(b"", 0, 1, b))
            .s()
            .starts_with("processor\t: 0\ncpu MHz\t\t: 2000.000\n"));
        let two = text(|b| cpuinfo(real, 2, b));
        assert_eq!(two.s().matches("processor").count(), 2);
    }

    #[test]
    fn the_first_block_is_taken_when_it_fits() {
        assert_eq!(cpuinfo_first_block(b"a\nb\n\nc\n\n"), b"a\nb\n\n");
        assert_eq!(cpuinfo_first_block(b"a\nb\n"), b"");
        let mut long = [b'x'; CPUINFO_READ];
        long[CPUINFO_BLOCK_MAX] = b'\n';
        long[CPUINFO_BLOCK_MAX + 1] = b'\n';
        assert_eq!(cpuinfo_first_block(&long), b"");
        long[10] = b'\n';
        long[11] = b'\n';
        assert_eq!(cpuinfo_first_block(&long).len(), 12);
    }
}
