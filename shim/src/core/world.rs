//! The sealed world that a run's setters change instead of the machine.
//!
//! `clock_settime`, `settimeofday`, `stime`, `adjtime`, `adjtimex`/`clock_adjtime` (when they
//! change the clock), `sethostname` and `setdomainname` never reach the kernel while their
//! family is sealed: they move a run-wide realtime shift and set run-wide names held in the run
//! table ([`seal_abi::World`]), so every process of the run sees the change and the machine
//! never does. A sealed program may only do what it could do bare: without the capability the
//! kernel would ask for (`CAP_SYS_TIME`, `CAP_SYS_ADMIN`), it gets `EPERM` as it would bare.
//! The hooks live with their families (`clock::set`, `host`).

use core::sync::atomic::{fence, AtomicU8, Ordering::*};

use seal_abi::{SealedName, World, NAME_MAX};

use crate::core::{config, sys, table};

/// `CAP_SYS_TIME`: setting the system clock.
pub const CAP_SYS_TIME: u32 = 25;
/// `CAP_SYS_ADMIN`: setting the host and domain names.
pub const CAP_SYS_ADMIN: u32 = 21;
/// `CAP_DAC_OVERRIDE`: writing files whatever their mode (the kernel's host name file).
pub const CAP_DAC_OVERRIDE: u32 = 1;

#[inline(always)]
fn get() -> &'static World {
    table::world_or_local()
}

/// Nanoseconds the run's setters have moved the realtime clocks by.
#[inline(always)]
pub fn realtime_shift() -> i64 {
    get().realtime_shift.load(Relaxed)
}

/// [`realtime_shift`] and [`advance`] through one look-up of the world (the hot clock read).
#[inline(always)]
pub fn realtime_offsets() -> (i64, i64) {
    let w = get();
    (w.realtime_shift.load(Relaxed), w.advance.load(Relaxed))
}

/// Nanoseconds `seal time advance` has moved every realtime and monotonic clock forward by.
#[inline(always)]
pub fn advance() -> i64 {
    get().advance.load(Relaxed)
}

/// Moves every realtime and monotonic clock of the run forward by `delta` (saturating).
pub fn advance_by(delta: i64) {
    let _ = get()
        .advance
        .fetch_update(Relaxed, Relaxed, |s| Some(s.saturating_add(delta)));
}

/// Moves every realtime clock of the run by `delta` nanoseconds (saturating).
pub fn shift_realtime_by(delta: i64) {
    let _ = get()
        .realtime_shift
        .fetch_update(Relaxed, Relaxed, |s| Some(s.saturating_add(delta)));
}

/// May this process set the sealed clock, as the kernel would let it set the real one? It
/// holds `CAP_SYS_TIME`, or the run took the capability away (`process::confine`) from a
/// launcher that held it and this process runs as root, which would hold it bare.
pub fn may_set_time() -> bool {
    if may(CAP_SYS_TIME) {
        return true;
    }
    let run = table::run_flags();
    run != u32::MAX && run & seal_abi::run_flags::SYS_TIME_HELD != 0 && sys::geteuid() == 0
}

/// Does this process hold capability `cap` (effective set), as the kernel would check?
pub fn may(cap: u32) -> bool {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut h = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let mut d = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capget reads the header and writes two Data structs, both live locals.
    let r = unsafe {
        sys::syscall3(
            libc::SYS_capget,
            &mut h as *mut Header as i64,
            d.as_mut_ptr() as i64,
            0,
        )
    };
    r == 0 && d[(cap / 32) as usize].effective & (1 << (cap % 32)) != 0
}

/// Which name a setter changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Name {
    Host,
    Domain,
}

fn slot(w: &World, which: Name) -> &SealedName {
    match which {
        Name::Host => &w.hostname,
        Name::Domain => &w.domainname,
    }
}

/// Sets a run-wide name (`sethostname`/`setdomainname` semantics: at most 64 bytes).
pub fn set_name(which: Name, name: &[u8]) -> Result<(), i32> {
    if name.len() > NAME_MAX {
        return Err(libc::EINVAL);
    }
    write_name(get(), which, name);
    Ok(())
}

/// Copies the run-wide name into `out`, or returns `None` when no setter changed it.
pub fn name(which: Name, out: &mut [u8; NAME_MAX]) -> Option<usize> {
    read_name(get(), which, out)
}

/// The host name a sealed process sees now: set inside the run, else the configured one.
pub fn hostname(out: &mut [u8; NAME_MAX]) -> &[u8] {
    match name(Name::Host, out) {
        Some(n) => &out[..n],
        None => {
            let h = config::HOSTNAME.get();
            let n = h.len().min(NAME_MAX);
            out[..n].copy_from_slice(&h[..n]);
            &out[..n]
        }
    }
}

/// How many times a writer tries to enter the seqlock before going ahead anyway (a writer
/// killed inside it must not lock every other process out forever).
const WRITER_TRIES: u32 = 1000;
/// How many times a reader retries a read that a writer overlapped.
const READER_TRIES: u32 = 1000;

fn write_name(w: &World, which: Name, name: &[u8]) {
    let mut entered = None;
    for _ in 0..WRITER_TRIES {
        let s = w.names_seq.load(Relaxed);
        if s & 1 == 0
            && w.names_seq
                .compare_exchange(s, s + 1, Acquire, Relaxed)
                .is_ok()
        {
            entered = Some(s);
            break;
        }
        core::hint::spin_loop();
    }
    let slot = slot(w, which);
    for (b, v) in slot.bytes.iter().zip(name) {
        b.store(*v, Relaxed);
    }
    slot.len.store(name.len() as u8 + 1, Relaxed);
    match entered {
        Some(s) => w.names_seq.store(s + 2, Release),
        // Never entered: leave the sequence even so readers of a stuck odd value still finish.
        None => {
            w.names_seq.fetch_add(2, Release);
        }
    }
}

fn read_name(w: &World, which: Name, out: &mut [u8; NAME_MAX]) -> Option<usize> {
    let slot = slot(w, which);
    let mut n = 0;
    for _ in 0..READER_TRIES {
        let s1 = w.names_seq.load(Acquire);
        n = (slot.len.load(Relaxed) as usize).min(NAME_MAX + 1);
        if n == 0 {
            return None;
        }
        copy(&slot.bytes[..n - 1], out);
        fence(Acquire);
        if s1 & 1 == 0 && w.names_seq.load(Relaxed) == s1 {
            break;
        }
        core::hint::spin_loop();
    }
    Some(n - 1)
}

fn copy(from: &[AtomicU8], out: &mut [u8; NAME_MAX]) {
    for (o, b) in out.iter_mut().zip(from) {
        *o = b.load(Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unset_until_a_setter_runs_then_hold_exactly_what_was_set() {
        let w = World::unchanged();
        let mut out = [0u8; NAME_MAX];
        assert_eq!(read_name(&w, Name::Host, &mut out), None);
        write_name(&w, Name::Host, b"renamed");
        assert_eq!(read_name(&w, Name::Host, &mut out), Some(7));
        assert_eq!(&out[..7], b"renamed");
        // An empty name is a name (sethostname("", 0) is legal).
        write_name(&w, Name::Domain, b"");
        assert_eq!(read_name(&w, Name::Domain, &mut out), Some(0));
        write_name(&w, Name::Host, b"ab");
        assert_eq!(read_name(&w, Name::Host, &mut out), Some(2));
        assert_eq!(&out[..2], b"ab");
        assert_eq!(w.names_seq.load(Relaxed) & 1, 0);
    }

    #[test]
    fn a_writer_that_died_inside_the_lock_does_not_block_anyone() {
        let w = World::unchanged();
        w.names_seq.store(7, Relaxed); // odd: a writer was killed mid-update
        write_name(&w, Name::Host, b"x");
        let mut out = [0u8; NAME_MAX];
        assert_eq!(read_name(&w, Name::Host, &mut out), Some(1));
    }

    #[test]
    fn names_longer_than_the_kernel_allows_are_refused() {
        assert_eq!(set_name(Name::Host, &[b'a'; 65]), Err(libc::EINVAL));
    }

    #[test]
    fn root_in_this_test_process_matches_the_kernel_answer() {
        // Whatever the test runs as, `may` agrees with /proc/self/status's CapEff.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let eff = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
            .unwrap();
        assert_eq!(may(CAP_SYS_TIME), eff & (1 << CAP_SYS_TIME) != 0);
        assert_eq!(may(CAP_SYS_ADMIN), eff & (1 << CAP_SYS_ADMIN) != 0);
    }
}
