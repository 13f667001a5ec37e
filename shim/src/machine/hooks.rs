//! Family `machine`'s exported entry points (`pthread_getaffinity_np`, `get_nprocs`,
//! `get_nprocs_conf`, `sysconf`, `get_phys_pages`, `get_avphys_pages`, `sysinfo`),
//! `sched_getaffinity` and `sched_setaffinity` (their pids translated by `process`), and the
//! `syscall()` forms (`SYS_sched_getaffinity`, `SYS_sysinfo`, `SYS_uname`).
//!
//! Each counts the call (in the census, whether or not the family is sealed), and while
//! `machine` is sealed answers from the fixed values of the parent module; errors the kernel
//! would give for the caller's arguments (a bad pid or thread, a short mask, a bad pointer)
//! are still given.

use libc::{c_int, c_long, pid_t};
use seal_abi::{Fid, NO_DETAIL};

use super::{cpus, fill_mask, fill_sysinfo, sealed, set_uname, sysconf_value, PAGE};
use crate::core::{census, sys};
use crate::hook;

/// Room for the mask of a probe that only asks whether the pid or thread exists.
const PROBE_BYTES: usize = 128;

/// The sealed `sched_getaffinity` for a caller's `size`-byte `mask`: the bytes written (the
/// kernel's answer), or the errno. `probe(buf, len)` makes the real call for the same pid or
/// thread into a scratch mask (errno-valued: 0 or the error), so a pid that does not exist
/// still fails; it is skipped for the caller itself (`pid == 0`). `own`: the mask asked for
/// is the calling thread's, which answers the CPUs it set itself, if it did
/// ([`super::pinned`]).
///
/// # Safety
/// `mask` is null or valid for `size` bytes.
pub unsafe fn affinity(
    pid: pid_t,
    own: bool,
    size: usize,
    mask: *mut u8,
    probe: impl FnOnce(*mut u8, usize) -> c_int,
) -> Result<usize, i32> {
    if pid != 0 {
        let mut scratch = [0u64; PROBE_BYTES / 8];
        let e = probe(scratch.as_mut_ptr() as *mut u8, PROBE_BYTES);
        if e != 0 && e != libc::EINVAL {
            return Err(e);
        }
    }
    let n = cpus();
    // SAFETY: per the contract.
    let len = unsafe { fill_mask(n, size, mask) }?;
    if own && n <= 64 {
        if let Some(bits) = super::pinned::lookup() {
            // SAFETY: per the contract; fill_mask checked the size.
            return Ok(unsafe { super::pinned::fill_bits(n, bits, size, mask) });
        }
    }
    Ok(len)
}

/// Is `real_pid` the calling thread (0, or its real tid)?
pub fn is_own(real_pid: pid_t) -> bool {
    real_pid == 0 || real_pid == sys::gettid()
}

/// [`affinity`] with glibc's wrapper semantics: the rest of the mask zeroed; 0 or the errno.
///
/// # Safety
/// `mask` is null or valid for `size` bytes.
unsafe fn affinity_whole(
    pid: pid_t,
    own: bool,
    size: usize,
    mask: *mut u8,
    probe: impl FnOnce(*mut u8, usize) -> c_int,
) -> c_int {
    // glibc hands the kernel at most INT_MAX bytes and zeroes the rest.
    // SAFETY: per the contract.
    match unsafe { affinity(pid, own, size.min(i32::MAX as usize), mask, probe) } {
        Ok(len) => {
            // SAFETY: `len <= size`; the tail is the caller's.
            unsafe { core::ptr::write_bytes(mask.add(len), 0, size - len) };
            0
        }
        Err(e) => e,
    }
}

hook! {
    /// # Safety
    /// As `sched_getaffinity(2)`. Here rather than with the other calls that take a pid
    /// (`process::hooks`): the pid is translated by `process`, the answer is `machine`'s.
    fn sched_getaffinity(pid: pid_t, size: libc::size_t, mask: *mut libc::cpu_set_t) -> c_int;
    caller = ra;
    |real| {
        census::count(Fid::SchedGetaffinity, NO_DETAIL, ra);
        let pid = if crate::process::vpid::sealed() {
            crate::process::vpid::to_real(pid)
        } else {
            pid
        };
        // SAFETY: forwarded contract; the sealed path answers with the sealed CPUs.
        unsafe { sched_getaffinity_sealed(pid, size, mask, ra, real) }
            .unwrap_or_else(|| real(pid, size, mask))
    }
}

hook! {
    /// # Safety
    /// As `sched_setaffinity(2)`. Here for the same reason as `sched_getaffinity`: the pid is
    /// translated by `process`; a thread that sets its own mask has it recorded
    /// ([`super::pinned`]).
    fn sched_setaffinity(pid: pid_t, size: libc::size_t, mask: *const libc::cpu_set_t) -> c_int;
    fid = SchedSetaffinity;
    |real| {
        let target = if crate::process::vpid::sealed() {
            crate::process::vpid::to_real(pid)
        } else {
            pid
        };
        let r = real(target, size, mask);
        let n = cpus();
        if r == 0 && !mask.is_null() && n <= 64 && sealed() && is_own(target) {
            // SAFETY: the kernel just read `size` bytes of it.
            let bits = unsafe { super::pinned::sealed_bits(n, size, mask as *const u8) };
            super::pinned::record(bits);
        }
        r
    }
}

/// The `sched_getaffinity` hook's sealed path (`real_pid` already translated): `Some` with
/// libc's result when `machine` is sealed. Counts the call under `machine`.
///
/// # Safety
/// As `sched_getaffinity(2)`.
unsafe fn sched_getaffinity_sealed(
    real_pid: pid_t,
    size: usize,
    mask: *mut libc::cpu_set_t,
    ra: u64,
    real: impl FnOnce(pid_t, usize, *mut libc::cpu_set_t) -> c_int,
) -> Option<c_int> {
    census::count(Fid::MachineAffinity, NO_DETAIL, ra);
    if !sealed() {
        return None;
    }
    let probe = |buf: *mut u8, len: usize| {
        if real(real_pid, len, buf as *mut libc::cpu_set_t) == 0 {
            0
        } else {
            sys::errno()
        }
    };
    // SAFETY: per the contract.
    match unsafe { affinity_whole(real_pid, is_own(real_pid), size, mask as *mut u8, probe) } {
        0 => Some(0),
        e => {
            sys::set_errno(e);
            Some(-1)
        }
    }
}

hook! {
    /// # Safety
    /// As `pthread_getaffinity_np(3)`.
    fn pthread_getaffinity_np(th: libc::pthread_t, size: usize, mask: *mut libc::cpu_set_t) -> c_int;
    fid = MachinePthreadAffinity;
    |real| {
        if !sealed() {
            return real(th, size, mask);
        }
        // `0` for the pid: the thread is probed below, whoever it is.
        let probe = |buf: *mut u8, len: usize| real(th, len, buf as *mut libc::cpu_set_t);
        let mut scratch = [0u64; PROBE_BYTES / 8];
        let e = probe(scratch.as_mut_ptr() as *mut u8, PROBE_BYTES);
        if e != 0 && e != libc::EINVAL {
            return e;
        }
        // SAFETY: pthread_self() cannot fail.
        let own = th == unsafe { libc::pthread_self() };
        // SAFETY: forwarded contract (`mask` valid for `size` bytes).
        unsafe { affinity_whole(0, own, size, mask as *mut u8, |_, _| 0) }
    }
}

hook! {
    /// # Safety
    /// As `get_nprocs(3)`.
    fn get_nprocs() -> c_int;
    fid = GetNprocs;
    |real| if sealed() { cpus() as c_int } else { real() }
}

hook! {
    /// # Safety
    /// As `get_nprocs_conf(3)`.
    fn get_nprocs_conf() -> c_int;
    fid = GetNprocsConf;
    |real| if sealed() { cpus() as c_int } else { real() }
}

hook! {
    /// Only the CPU and memory names are counted and answered; every other name reaches
    /// glibc untouched (page size, clock ticks, limits).
    ///
    /// # Safety
    /// As `sysconf(3)`.
    fn sysconf | __sysconf(name: c_int) -> c_long;
    caller = ra;
    |real| {
        let Some(v) = sysconf_value(name) else {
            return real(name);
        };
        let fid = if matches!(name, libc::_SC_NPROCESSORS_ONLN | libc::_SC_NPROCESSORS_CONF) {
            Fid::SysconfCpus
        } else {
            Fid::SysconfPages
        };
        census::count(fid, NO_DETAIL, ra);
        if sealed() { v as c_long } else { real(name) }
    }
}

hook! {
    /// # Safety
    /// As `get_phys_pages(3)`.
    fn get_phys_pages() -> c_long;
    fid = GetPhysPages;
    |real| if sealed() { (super::TOTAL_RAM / PAGE) as c_long } else { real() }
}

hook! {
    /// # Safety
    /// As `get_avphys_pages(3)`.
    fn get_avphys_pages() -> c_long;
    fid = GetPhysPages;
    |real| if sealed() { (super::FREE_RAM / PAGE) as c_long } else { real() }
}

hook! {
    /// The real call first (a bad pointer still fails with `EFAULT`), then the sealed values.
    ///
    /// # Safety
    /// As `sysinfo(2)`.
    fn sysinfo(info: *mut libc::sysinfo) -> c_int;
    fid = Sysinfo;
    |real| {
        let r = real(info);
        if r == 0 && !info.is_null() && sealed() {
            // SAFETY: the kernel just filled it.
            fill_sysinfo(unsafe { &mut *info });
        }
        r
    }
}

hook! {
    /// The sealed machine's load, as `sysinfo` and `/proc/loadavg` give it: none (glibc reads
    /// the file with an internal open no hook sees).
    ///
    /// # Safety
    /// As `getloadavg(3)`.
    fn getloadavg(loads: *mut libc::c_double, nelem: c_int) -> c_int;
    fid = Getloadavg;
    |real| {
        if !sealed() || loads.is_null() || nelem < 0 {
            return real(loads, nelem);
        }
        let n = nelem.min(3);
        for i in 0..n as usize {
            // SAFETY: the caller's array of nelem (>= n) entries.
            unsafe { *loads.add(i) = 0.0 };
        }
        n
    }
}

/// `syscall(SYS_sched_getaffinity | SYS_sysinfo | SYS_uname)`: `Some(raw result)` when
/// handled here (counted under `machine`), else `None`.
///
/// # Safety
/// Arguments as the system call takes them.
pub unsafe fn sys_machine(n: c_long, a: [c_long; 6], ra: u64) -> Option<c_long> {
    // SAFETY: the caller's system call, as given (or with a translated pid).
    let raw = |n: c_long, a: [c_long; 6]| unsafe { crate::core::real::syscall(n, a) };
    let fid = match n {
        libc::SYS_sched_getaffinity => Fid::SysMachineAffinity,
        libc::SYS_sysinfo => Fid::SysSysinfo,
        libc::SYS_uname => Fid::SysUname,
        _ => return None,
    };
    census::count(fid, NO_DETAIL, ra);
    if n == libc::SYS_uname {
        census::count(Fid::Uname, NO_DETAIL, ra);
    }
    if n == libc::SYS_uname {
        let r = raw(n, a);
        let u = a[0] as *mut libc::utsname;
        if r == 0 && !u.is_null() {
            // SAFETY: the kernel just filled it.
            let u = unsafe { &mut *u };
            crate::host::hooks::seal_uname_host(u);
            if sealed() {
                set_uname(u);
            }
        }
        return Some(r);
    }
    let pid_sealed = crate::process::vpid::sealed();
    if !sealed() {
        // Unsealed: the real call, with a virtual pid made real.
        let mut b = a;
        if n == libc::SYS_sched_getaffinity && pid_sealed {
            b[0] = crate::process::vpid::to_real(a[0] as i32) as c_long;
        }
        return Some(raw(n, b));
    }
    if n == libc::SYS_sysinfo {
        let r = raw(n, a);
        let info = a[0] as *mut libc::sysinfo;
        if r == 0 && !info.is_null() {
            // SAFETY: the kernel just filled it.
            fill_sysinfo(unsafe { &mut *info });
        }
        return Some(r);
    }
    let pid = if pid_sealed {
        crate::process::vpid::to_real(a[0] as i32)
    } else {
        a[0] as i32
    };
    let probe = |buf: *mut u8, len: usize| {
        if raw(n, [pid as c_long, len as c_long, buf as c_long, 0, 0, 0]) < 0 {
            sys::errno()
        } else {
            0
        }
    };
    // The kernel reads the length as an unsigned int.
    // SAFETY: the caller's mask of `a[1]` bytes.
    Some(
        match unsafe {
            affinity(
                pid,
                is_own(pid),
                a[1] as u32 as usize,
                a[2] as *mut u8,
                probe,
            )
        } {
            Ok(len) => len as c_long,
            Err(e) => {
                sys::set_errno(e);
                -1
            }
        },
    )
}
