//! Family `machine`: the facts of the machine a program sizes itself by, answered with the
//! run's fixed values, so a golden recorded on a laptop passes on a CI runner.
//!
//! * **CPUs**: [`cpus`] (`--cpus`, default [`seal_abi::settings::DEFAULT_CPUS`]) online,
//!   possible and present, numbered `0..N`, all in every affinity mask: `sched_getaffinity`
//!   (also `syscall(SYS_sched_getaffinity)`), `pthread_getaffinity_np`, `get_nprocs`,
//!   `get_nprocs_conf`, `sysconf(_SC_NPROCESSORS_ONLN/_CONF)`, and the files
//!   `/sys/devices/system/cpu/{online,possible,present,offline}`, `/proc/cpuinfo` (the first
//!   processor's block, repeated `N` times with its topology fields renumbered and its clock
//!   speeds fixed: [`files`]) and `/proc/stat` (synthesized: `N` idle CPUs).
//! * **Kernel**: `uname`'s release, version and machine ([`RELEASE`], [`VERSION`],
//!   [`MACHINE`]; the node name stays the `host` family's), `/proc/sys/kernel/osrelease`,
//!   `/proc/sys/kernel/version`, `/proc/version`.
//! * **Memory**: [`TOTAL_RAM`] total and [`FREE_RAM`] free, no swap: `sysinfo` (also through
//!   `syscall()`), `sysconf(_SC_PHYS_PAGES/_SC_AVPHYS_PAGES)`, `get_phys_pages`,
//!   `get_avphys_pages`, `/proc/meminfo` (synthesized).
//! * **Directory order**: every listing in name order, bytewise, `.` and `..` first, whatever
//!   order the file system keeps ([`dirorder`]: `readdir`, `readdir_r`, `getdents64` and its
//!   `syscall()` form, `scandir`, `telldir`/`seekdir`/`rewinddir`, glibc's `fts_open` and
//!   `glob(GLOB_NOSORT)`).
//!
//! glibc's `sysconf`, `get_nprocs` and `get_phys_pages` read `/sys` and call `sysinfo` with
//! internal calls that never reach a hook, so each public entry point is interposed itself.
//! Everything here is computed from constants on the stack: no allocation, no lock; the
//! files are memfds (as the sealed host name file), directory snapshots anonymous mappings.

use seal_abi::flags;

use crate::core::config;

#[cfg(not(test))]
mod dirhooks;
pub mod dirorder;
pub mod files;
#[cfg(not(test))]
pub(crate) mod hooks;
pub mod pinned;

/// The sealed kernel names and memory figures, one definition with the static-image
/// supervisor's (`seal_abi::machine_file`).
pub use seal_abi::machine_file::{AVAILABLE_RAM, FREE_RAM, MACHINE, RELEASE, TOTAL_RAM, VERSION};
/// The page size of x86_64 Linux.
pub const PAGE: u64 = 4096;

/// Is family `machine` sealed in this process?
#[inline]
pub fn sealed() -> bool {
    config::sealed(flags::MACHINE)
}

/// The CPU count a sealed process sees.
#[inline]
pub fn cpus() -> u32 {
    config::CPUS
        .load(core::sync::atomic::Ordering::Relaxed)
        .clamp(seal_abi::settings::MIN_CPUS, seal_abi::settings::MAX_CPUS)
}

/// Bytes of the kernel's CPU mask for `n` CPUs (`cpumask_size()`: whole longs).
pub const fn mask_bytes(n: u32) -> usize {
    (n as usize).div_ceil(64) * 8
}

/// Writes the sealed affinity mask of `n` CPUs into `mask` (`size` bytes), as the
/// `sched_getaffinity` system call does: `Err(EINVAL)` when the mask cannot hold `n` CPUs or
/// is not whole longs, else the bytes the kernel would have written (the rest is left alone,
/// as the kernel leaves it; glibc's wrapper zeroes it).
///
/// # Safety
/// `mask` is null or valid for `size` bytes.
pub unsafe fn fill_mask(n: u32, size: usize, mask: *mut u8) -> Result<usize, i32> {
    if size.saturating_mul(8) < n as usize || !size.is_multiple_of(8) {
        return Err(libc::EINVAL);
    }
    if mask.is_null() {
        return Err(libc::EFAULT);
    }
    let len = mask_bytes(n).min(size);
    // SAFETY: `len <= size` bytes are writable per the contract.
    let out = unsafe { core::slice::from_raw_parts_mut(mask, len) };
    for (i, b) in out.iter_mut().enumerate() {
        let lo = i * 8;
        *b = match (n as usize).saturating_sub(lo) {
            0 => 0,
            k if k >= 8 => 0xff,
            k => (1u8 << k) - 1,
        };
    }
    Ok(len)
}

/// The sealed `sysinfo`: fixed memory, no swap, no load, one process; `uptime` is the sealed
/// boot-time clock when time is sealed (read without a tick) and the real one otherwise.
pub fn fill_sysinfo(s: &mut libc::sysinfo) {
    // SAFETY: sysinfo is plain integers: all zeroes is a value (the kernel zeroes it too).
    *s = unsafe { core::mem::zeroed() };
    s.uptime = files::boot_ns() / 1_000_000_000;
    s.totalram = TOTAL_RAM;
    s.freeram = FREE_RAM;
    s.procs = 1;
    s.mem_unit = 1;
}

/// `sysconf(name)` as family `machine` answers it, for the names it seals.
pub fn sysconf_value(name: i32) -> Option<i64> {
    Some(match name {
        libc::_SC_NPROCESSORS_ONLN | libc::_SC_NPROCESSORS_CONF => cpus() as i64,
        libc::_SC_PHYS_PAGES => (TOTAL_RAM / PAGE) as i64,
        libc::_SC_AVPHYS_PAGES => (FREE_RAM / PAGE) as i64,
        _ => return None,
    })
}

/// Writes the sealed release, version and machine into a `utsname`.
pub fn set_uname(u: &mut libc::utsname) {
    crate::host::set_field(&mut u.release, RELEASE);
    crate::host::set_field(&mut u.version, VERSION);
    crate::host::set_field(&mut u.machine, MACHINE);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask(n: u32, size: usize) -> (Result<usize, i32>, Vec<u8>) {
        let mut m = vec![0xaau8; size];
        // SAFETY: `size` bytes.
        let r = unsafe { fill_mask(n, size, m.as_mut_ptr()) };
        (r, m)
    }

    #[test]
    fn masks_hold_the_sealed_cpus() {
        assert_eq!(mask(4, 8), (Ok(8), vec![0x0f, 0, 0, 0, 0, 0, 0, 0]));
        assert_eq!(mask(1, 128).0, Ok(8));
        assert_eq!(mask(1, 128).1[..9], [1, 0, 0, 0, 0, 0, 0, 0, 0xaa]);
        let (r, m) = mask(70, 16);
        assert_eq!(r, Ok(16));
        assert_eq!(
            m,
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(mask(1024, 128).1, vec![0xff; 128]);
        // Too small for N, or not whole longs: EINVAL, as the kernel says.
        assert_eq!(mask(70, 8).0, Err(libc::EINVAL));
        assert_eq!(mask(4, 4).0, Err(libc::EINVAL));
        // SAFETY: a null mask is refused before it is written.
        assert_eq!(
            unsafe { fill_mask(4, 8, core::ptr::null_mut()) },
            Err(libc::EFAULT)
        );
        assert_eq!(mask_bytes(64), 8);
        assert_eq!(mask_bytes(65), 16);
    }

    #[test]
    fn sysconf_and_sysinfo_are_fixed() {
        assert_eq!(sysconf_value(libc::_SC_NPROCESSORS_ONLN), Some(4));
        assert_eq!(sysconf_value(libc::_SC_PHYS_PAGES), Some(2 << 20));
        assert_eq!(sysconf_value(libc::_SC_AVPHYS_PAGES), Some(1 << 20));
        assert_eq!(sysconf_value(libc::_SC_PAGESIZE), None);
        // SAFETY: sysinfo is plain integers.
        let mut s: libc::sysinfo = unsafe { core::mem::zeroed() };
        s.loads = [5; 3];
        fill_sysinfo(&mut s);
        assert_eq!(
            (s.totalram, s.freeram, s.mem_unit, s.loads),
            (8 << 30, 4 << 30, 1, [0; 3])
        );
    }

    #[test]
    fn uname_fields() {
        // SAFETY: utsname is plain bytes.
        let mut u: libc::utsname = unsafe { core::mem::zeroed() };
        u.release[..3].copy_from_slice(&[b'9' as libc::c_char; 3]);
        set_uname(&mut u);
        let s = |f: &[libc::c_char]| {
            f.iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8 as char)
                .collect::<String>()
        };
        assert_eq!(s(&u.release), "6.1.0-seal");
        assert_eq!(s(&u.version), "#1 SMP seal");
        assert_eq!(s(&u.machine), "x86_64");
    }
}
