//! Family `cpu`: the instructions that read the machine without a system call.
//!
//! `rdtsc`/`rdtscp` (a cycle counter) and `cpuid`'s `RDRAND`/`RDSEED` bits are what libgcrypt
//! and others mix into their pools. Linux lets a thread make them fault:
//! `prctl(PR_SET_TSC, PR_TSC_SIGSEGV)` for the counter, `arch_prctl(ARCH_SET_CPUID, 0)` for
//! `cpuid` (where the CPU has `cpuid_fault`). Both are per-thread and inherited by new threads
//! and fork children. The fault arrives as `SIGSEGV` (`si_code == SI_KERNEL`); libseal's
//! handler decodes the instruction at the faulting address, writes the answer into the
//! interrupted registers and steps over it:
//!
//! * `rdtsc`/`rdtscp` read [`TSC_PER_NS`] cycles per nanosecond of the thread's sealed
//!   monotonic clock (a read ticks it, like a clock read); `rdtscp`'s processor id is 0.
//!   The vDSO's own `rdtsc` (the real clock behind an unsealed `clock_gettime`) gets the
//!   real counter: the handler lets that one instruction through.
//! * `cpuid` answers the machine's own leaves with `RDRAND` and `RDSEED` cleared and the APIC
//!   ids of CPU 0 (the CPU a thread runs on changes between runs). The first query of a leaf
//!   runs the real instruction with faulting switched off for a moment, later ones come from a
//!   small lock-free cache. No hypervisor is announced (leaf 1 ECX bit 31) and its leaves
//!   (`0x4000_0000..=0x4fff_ffff`) are empty.
//!
//! Every other `SIGSEGV` goes to the program's own handler, which the interposed `sigaction`
//! family keeps (see [`signals`]). The trap survives `exec` (where the new image's dynamic
//! loader runs `rdtsc` before libseal is loaded), so the exec and spawn hooks switch it off on
//! the calling thread first ([`ExecGuard`]) and every image arms itself at start.

#[cfg(not(test))]
pub mod signals;

use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::*};

#[cfg(not(test))]
use seal_abi::unsealed::cpu_cause;
use seal_abi::{Fid, NO_DETAIL};

use crate::clock;
use crate::core::{census, sys};

/// Cycles per nanosecond a sealed `rdtsc` counts: a nominal 3 GHz counter.
pub const TSC_PER_NS: u64 = 3;

const PR_SET_TSC: i64 = 26;
const PR_TSC_ENABLE: i64 = 1;
const PR_TSC_SIGSEGV: i64 = 2;
const ARCH_SET_CPUID: i64 = 0x1012;

/// [`ARMED`] bits.
const TSC: u8 = 1;
const CPUID: u8 = 2;
/// libseal's `SIGSEGV` handler is installed (the program's is kept as the chained one).
const HANDLER: u8 = 4;

/// What this image traps (set once at start, before any fault can arrive).
#[link_section = ".data.seal_hot"]
static ARMED: AtomicU8 = AtomicU8::new(0);
/// The vDSO's address range `[start, end)`: its `rdtsc` is the real clock's.
#[link_section = ".data.seal_hot"]
static VDSO: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

#[inline(always)]
fn armed(bit: u8) -> bool {
    ARMED.load(Relaxed) & bit != 0
}

/// Does `rdtsc` trap in this image? Then the vDSO's clocks (which run `rdtsc`) cost a signal
/// round trip each, and libseal's own real-clock reads take the system call instead.
#[inline(always)]
pub fn tsc_trapped() -> bool {
    armed(TSC)
}

/// Is libseal's `SIGSEGV` handler installed in this image?
#[inline(always)]
pub fn handler_installed() -> bool {
    armed(HANDLER)
}

fn prctl_tsc(mode: i64) -> i64 {
    // SAFETY: PR_SET_TSC takes a mode and no pointers.
    unsafe { sys::syscall3(libc::SYS_prctl, PR_SET_TSC, mode, 0) }
}

fn set_cpuid(enabled: bool) -> i64 {
    // SAFETY: ARCH_SET_CPUID takes a flag and no pointers.
    unsafe { sys::syscall3(libc::SYS_arch_prctl, ARCH_SET_CPUID, enabled as i64, 0) }
}

/// Arms the traps for this image (called once at start when the family is sealed).
#[cfg(not(test))]
pub fn on_start() {
    if !crate::core::config::sealed(seal_abi::flags::CPU) {
        return;
    }
    find_vdso();
    if !signals::install() {
        report(cpu_cause::NO_HANDLER);
        return;
    }
    ARMED.fetch_or(HANDLER, Relaxed);
    signals::unblock_on_start();
    // A Go program execs its children with a raw `syscall` instruction (os/exec), past the
    // hooks that switch the trap off: the child's loader would die on its first rdtsc.
    let go = is_go_program();
    if go {
        report(cpu_cause::GO_PROGRAM);
    }
    let tsc = if go { -1 } else { prctl_tsc(PR_TSC_SIGSEGV) };
    if tsc == 0 {
        ARMED.fetch_or(TSC, Relaxed);
    }
    let cpuid = set_cpuid(false);
    if cpuid == 0 {
        ARMED.fetch_or(CPUID, Relaxed);
    }
    // One fixed line per cause, so the launcher says it once per run, not once per process.
    match (tsc == 0, cpuid == 0) {
        (true, true) => {}
        (true, false) if cpuid == -(libc::ENODEV as i64) => report(cpu_cause::NO_CPUID_FAULTING),
        (true, false) => report(cpu_cause::CPUID_REFUSED),
        (false, true) if go => {}
        (false, true) => report(cpu_cause::TSC_REFUSED),
        (false, false) => report(cpu_cause::BOTH_REFUSED),
    }
}

#[cfg(not(test))]
/// A cause from [`seal_abi::unsealed::CPU_TRAP_CAUSES`], as a bit of the census header.
fn report(cause: u32) {
    census::record_cpu_unsealed(cause);
}

/// Does the main program carry a Go build id note (`.note.go.buildid`: owner "Go", type 4)?
/// Read from its program headers, already in memory, once per image (libseal's constructor
/// asks, then `on_start`): 0 not yet known, 1 no, 2 yes.
#[cfg(not(test))]
pub(crate) fn is_go_program() -> bool {
    use core::sync::atomic::{AtomicU8, Ordering::Relaxed};
    static GO: AtomicU8 = AtomicU8::new(0);
    match GO.load(Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let go = find_go_note();
            GO.store(if go { 2 } else { 1 }, Relaxed);
            go
        }
    }
}

/// [`is_go_program`], looked for.
#[cfg(not(test))]
fn find_go_note() -> bool {
    // SAFETY: getauxval has no preconditions.
    let (phdr, phnum) = unsafe {
        (
            libc::getauxval(libc::AT_PHDR) as usize,
            libc::getauxval(libc::AT_PHNUM) as usize,
        )
    };
    if phdr == 0 {
        return false;
    }
    // SAFETY: the kernel's program headers of the main program, mapped with it.
    let ph = |i: usize| unsafe { &*(phdr as *const libc::Elf64_Phdr).add(i) };
    let Some(bias) = (0..phnum)
        .find(|&i| ph(i).p_type == libc::PT_PHDR)
        .map(|i| phdr.wrapping_sub(ph(i).p_vaddr as usize))
    else {
        return false;
    };
    (0..phnum)
        .filter(|&i| ph(i).p_type == libc::PT_NOTE)
        .any(|i| {
            let (start, len) = (
                bias.wrapping_add(ph(i).p_vaddr as usize),
                ph(i).p_memsz as usize,
            );
            // SAFETY: a PT_NOTE segment lies inside a loaded segment of the program.
            has_go_note(unsafe { core::slice::from_raw_parts(start as *const u8, len) })
        })
}

/// Does this note segment hold a note of owner "Go" and type 4 (the Go build id)? (Not tried
/// on a real Go binary here: no Go toolchain on the machine this was written on.)
pub fn has_go_note(mut notes: &[u8]) -> bool {
    let word =
        |b: &[u8], o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]) as usize;
    while notes.len() >= 12 {
        let (namesz, descsz, kind) = (word(notes, 0), word(notes, 4), word(notes, 8));
        let name_end = 12 + namesz;
        let next = 12 + namesz.next_multiple_of(4) + descsz.next_multiple_of(4);
        if name_end > notes.len() {
            return false;
        }
        // Go's linker writes the owner as "Go\0\0" (namesz 4).
        if kind == 4 && matches!(&notes[12..name_end], b"Go\0" | b"Go\0\0") {
            return true;
        }
        notes = notes.get(next..).unwrap_or(&[]);
    }
    false
}

#[cfg(not(test))]
/// Records the vDSO's text range (from its ELF program headers, already in memory).
fn find_vdso() {
    // SAFETY: getauxval has no preconditions.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) } as usize;
    if base == 0 {
        return;
    }
    // SAFETY: the kernel maps a complete ELF image at AT_SYSINFO_EHDR.
    unsafe {
        let ehdr = &*(base as *const libc::Elf64_Ehdr);
        let ph = (base + ehdr.e_phoff as usize) as *const libc::Elf64_Phdr;
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for i in 0..ehdr.e_phnum as usize {
            let p = &*ph.add(i);
            if p.p_type == libc::PT_LOAD {
                lo = lo.min(p.p_vaddr);
                hi = hi.max(p.p_vaddr + p.p_memsz);
            }
        }
        if lo < hi {
            VDSO[0].store(base as u64, Relaxed);
            VDSO[1].store(base as u64 + (hi - lo), Relaxed);
        }
    }
}

fn in_vdso(ip: u64) -> bool {
    VDSO[0].load(Relaxed) <= ip && ip < VDSO[1].load(Relaxed)
}

/// Switches `rdtsc` trapping off on this thread for an exec (the new image's loader runs
/// `rdtsc` before libseal is there to answer it) and back on when dropped, which only happens
/// when the exec failed or, for a spawn, in the parent once the child has exec'd.
pub struct ExecGuard(bool);

impl ExecGuard {
    #[inline]
    pub fn new() -> ExecGuard {
        // Touches no shared memory: a vfork child runs this on its parent's memory.
        let on = armed(TSC);
        if on {
            prctl_tsc(PR_TSC_ENABLE);
        }
        ExecGuard(on)
    }
}

impl Default for ExecGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ExecGuard {
    fn drop(&mut self) {
        if self.0 {
            prctl_tsc(PR_TSC_SIGSEGV);
        }
    }
}

/// An instruction the handler answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insn {
    Rdtsc,
    Rdtscp,
    Cpuid,
}

/// Decodes the instruction whose bytes `at(i)` reads: `(instruction, length)`. Legacy and REX
/// prefixes (which these instructions ignore) are skipped; bytes are read only as far as the
/// decoding needs, so nothing past the instruction is touched.
pub fn decode(at: impl Fn(usize) -> u8) -> Option<(Insn, usize)> {
    let mut i = 0;
    while i < 4
        && matches!(
            at(i),
            0x26 | 0x2e | 0x36 | 0x3e | 0x64 | 0x65 | 0x66 | 0xf2 | 0xf3 | 0x40..=0x4f
        )
    {
        i += 1;
    }
    if at(i) != 0x0f {
        return None;
    }
    match at(i + 1) {
        0x31 => Some((Insn::Rdtsc, i + 2)),
        0xa2 => Some((Insn::Cpuid, i + 2)),
        0x01 if at(i + 2) == 0xf9 => Some((Insn::Rdtscp, i + 3)),
        _ => None,
    }
}

/// The sealed counter at a sealed monotonic time of `mono_ns`.
#[inline]
pub fn tsc_of(mono_ns: i64) -> u64 {
    (mono_ns.max(0) as u64).wrapping_mul(TSC_PER_NS)
}

/// Does `cpuid` leaf `leaf` ignore its subleaf (`ecx`)? Then one cache entry serves all.
fn ignores_subleaf(leaf: u32) -> bool {
    matches!(leaf, 0..=3 | 5 | 6 | 8 | 9 | 0xa | 0x15 | 0x16 | 0x19)
        || (0x8000_0000..=0x8000_0008).contains(&leaf)
}

/// The leaves Intel and AMD leave to hypervisors (`0x4000_0000..=0x4fff_ffff`): a signature
/// and the hypervisor's own features, answered as "no hypervisor leaves" (all zero). HotSpot
/// probes every `0x100` from `0x4000_0000` to `0x4000_ff00` at start-up.
fn is_hypervisor(leaf: u32) -> bool {
    leaf & 0xf000_0000 == 0x4000_0000
}

/// The sealed answer to `cpuid(leaf, sub)` given the machine's `r` (`[eax, ebx, ecx, edx]`):
/// no `RDRAND` (leaf 1 ECX bit 30), no hypervisor (bit 31), no `RDSEED` (leaf 7 EBX bit 18),
/// and the APIC ids of the
/// first CPU (leaf 1 EBX bits 31..24, the x2APIC id in EDX of leaves 0xB and 0x1F, AMD's
/// extended APIC id in 0x8000001E), so the answer does not depend on where the thread runs.
pub fn sanitize(leaf: u32, sub: u32, mut r: [u32; 4]) -> [u32; 4] {
    match leaf {
        1 => {
            r[1] &= 0x00ff_ffff;
            // RDRAND, and "running under a hypervisor" (whose leaves are empty, below): HotSpot
            // scans 256 hypervisor leaves at start-up only when this bit is set.
            r[2] &= !(1 << 30 | 1 << 31);
        }
        7 if sub == 0 => r[1] &= !(1 << 18),
        0xb | 0x1f => r[3] = 0,
        0x8000_001e => r[0] = 0,
        _ => {}
    }
    r
}

/// A cached `cpuid` answer: `state` 0 free, 1 being written, 2 ready.
struct Entry {
    state: AtomicU32,
    key: AtomicU64,
    regs: [AtomicU32; 4],
}

/// Slots of the process's answer cache, probed from a hash of the key (HotSpot alone asks
/// ~300 different leaves).
const CACHE_LEN: usize = 512;
#[allow(clippy::declare_interior_mutable_const)]
const FREE: Entry = Entry {
    state: AtomicU32::new(0),
    key: AtomicU64::new(0),
    regs: [const { AtomicU32::new(0) }; 4],
};
static CACHE: [Entry; CACHE_LEN] = [FREE; CACHE_LEN];

/// The sealed `cpuid(leaf, sub)`. Lock-free and async-signal-safe: a miss (or an entry another
/// thread is still writing) asks the CPU, with faulting off on this thread for that one
/// instruction.
pub fn cpuid(leaf: u32, sub: u32) -> [u32; 4] {
    // The hypervisor's range is answered without asking: a `cpuid` there is a VM exit (~12 µs
    // on this project's test VM) on top of the trap's own, and HotSpot probes all 256 bases at
    // every start. Which hypervisor runs the machine is the host's, not the program's.
    if is_hypervisor(leaf) {
        return [0; 4];
    }
    let sub = if ignores_subleaf(leaf) { 0 } else { sub };
    if let Some(r) = cached(key_of(leaf, sub)) {
        return r;
    }
    let trapped = armed(CPUID);
    if trapped {
        set_cpuid(true);
    }
    let r = ask(leaf, sub);
    if trapped {
        set_cpuid(false);
    }
    r
}

fn key_of(leaf: u32, sub: u32) -> u64 {
    ((leaf as u64) << 32) | sub as u64
}

/// The cache slot where `key`'s search starts.
fn home(key: u64) -> usize {
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 55) as usize % CACHE_LEN
}

/// The cached answer for `key`, if any.
fn cached(key: u64) -> Option<[u32; 4]> {
    for i in 0..CACHE_LEN {
        let e = &CACHE[(home(key) + i) % CACHE_LEN];
        match e.state.load(Acquire) {
            0 => return None,
            2 if e.key.load(Relaxed) == key => {
                return Some(core::array::from_fn(|i| e.regs[i].load(Relaxed)))
            }
            _ => {}
        }
    }
    None
}

/// The CPU's answer (faulting must be off on this thread), sealed and cached.
fn ask(leaf: u32, sub: u32) -> [u32; 4] {
    let r = core::arch::x86_64::__cpuid_count(leaf, sub);
    let r = sanitize(leaf, sub, [r.eax, r.ebx, r.ecx, r.edx]);
    let key = key_of(leaf, sub);
    for i in 0..CACHE_LEN {
        let e = &CACHE[(home(key) + i) % CACHE_LEN];
        if e.state.compare_exchange(0, 1, Acquire, Relaxed).is_ok() {
            e.key.store(key, Relaxed);
            for (slot, v) in e.regs.iter().zip(r) {
                slot.store(v, Relaxed);
            }
            e.state.store(2, Release);
            break;
        }
        if e.state.load(Acquire) == 2 && e.key.load(Relaxed) == key {
            break;
        }
    }
    r
}

/// The real counter (for the vDSO), with trapping off on this thread for that one read.
fn real_tsc(insn: Insn) -> (u64, u32) {
    prctl_tsc(PR_TSC_ENABLE);
    let mut aux = 0u32;
    // SAFETY: rdtsc/rdtscp are allowed while TSC is enabled for this thread.
    let v = unsafe {
        if insn == Insn::Rdtscp {
            core::arch::x86_64::__rdtscp(&mut aux)
        } else {
            core::arch::x86_64::_rdtsc()
        }
    };
    prctl_tsc(PR_TSC_SIGSEGV);
    (v, aux)
}

/// Answers the faulting instruction in `uc` if it is one of ours: the registers it writes are
/// set and the instruction pointer moved past it. False: not ours, chain to the program.
///
/// # Safety
/// `uc` is the `ucontext_t` the kernel handed a `SIGSEGV` handler with `si_code == SI_KERNEL`
/// (a general-protection fault: the bytes at its instruction pointer were fetched).
pub unsafe fn emulate(uc: *mut libc::ucontext_t) -> bool {
    // SAFETY: per the contract.
    let g = unsafe { &mut (*uc).uc_mcontext.gregs };
    let ip = g[libc::REG_RIP as usize] as u64;
    // SAFETY: the CPU fetched this instruction; decode reads no further than it needs.
    let Some((insn, len)) = decode(|i| unsafe { ((ip as usize + i) as *const u8).read_volatile() })
    else {
        return false;
    };
    let next = ip + len as u64;
    match insn {
        Insn::Rdtsc | Insn::Rdtscp if armed(TSC) => {
            let (v, aux) = if in_vdso(ip) {
                real_tsc(insn)
            } else {
                let fid = if insn == Insn::Rdtsc {
                    Fid::Rdtsc
                } else {
                    Fid::Rdtscp
                };
                census::count(fid, NO_DETAIL, next);
                (tsc_of(clock::read(clock::Domain::Monotonic)), 0)
            };
            g[libc::REG_RAX as usize] = (v & 0xffff_ffff) as i64;
            g[libc::REG_RDX as usize] = (v >> 32) as i64;
            if insn == Insn::Rdtscp {
                g[libc::REG_RCX as usize] = aux as i64;
            }
        }
        Insn::Cpuid if armed(CPUID) => {
            census::count(Fid::Cpuid, NO_DETAIL, next);
            let r = cpuid(
                g[libc::REG_RAX as usize] as u32,
                g[libc::REG_RCX as usize] as u32,
            );
            g[libc::REG_RAX as usize] = r[0] as i64;
            g[libc::REG_RBX as usize] = r[1] as i64;
            g[libc::REG_RCX as usize] = r[2] as i64;
            g[libc::REG_RDX as usize] = r[3] as i64;
        }
        _ => return false,
    }
    g[libc::REG_RIP as usize] = next as i64;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(b: &[u8]) -> Option<(Insn, usize)> {
        decode(|i| b.get(i).copied().unwrap_or(0))
    }

    #[test]
    fn decodes_the_three_instructions_and_nothing_else() {
        assert_eq!(dec(&[0x0f, 0x31]), Some((Insn::Rdtsc, 2)));
        assert_eq!(dec(&[0x0f, 0x01, 0xf9]), Some((Insn::Rdtscp, 3)));
        assert_eq!(dec(&[0x0f, 0xa2]), Some((Insn::Cpuid, 2)));
        assert_eq!(dec(&[0x48, 0x0f, 0x31]), Some((Insn::Rdtsc, 3)));
        assert_eq!(dec(&[0x0f, 0x01, 0xd0]), None); // xgetbv
        assert_eq!(dec(&[0x0f, 0xc7, 0xf0]), None); // rdrand
        assert_eq!(dec(&[0x8b, 0x00]), None);
        assert_eq!(dec(&[0x66, 0x66, 0x66, 0x66, 0x66, 0x0f, 0x31]), None);
    }

    #[test]
    fn rdrand_rdseed_and_apic_ids_are_sealed() {
        let all = [u32::MAX; 4];
        let l1 = sanitize(1, 5, all);
        assert_eq!(l1[2] & (1 << 30), 0);
        assert_eq!(l1[1], 0x00ff_ffff);
        assert_eq!(l1[3], u32::MAX);
        assert_eq!(sanitize(7, 0, all)[1] & (1 << 18), 0);
        assert_eq!(sanitize(7, 1, all), all);
        assert_eq!(sanitize(0xb, 1, all)[3], 0);
        assert_eq!(sanitize(0x8000_0001, 0, all), all);
    }

    #[test]
    fn go_build_id_notes_are_found() {
        let note = |name: &[u8], kind: u32, desc: &[u8]| {
            let mut v = Vec::new();
            v.extend((name.len() as u32).to_le_bytes());
            v.extend((desc.len() as u32).to_le_bytes());
            v.extend(kind.to_le_bytes());
            v.extend(name);
            v.resize(v.len().next_multiple_of(4), 0);
            v.extend(desc);
            v.resize(v.len().next_multiple_of(4), 0);
            v
        };
        let gnu = note(b"GNU\0", 3, &[7; 20]);
        let go = note(b"Go\0\0", 4, b"abcdef/ghijk");
        assert!(has_go_note(&[gnu.clone(), go.clone()].concat()));
        assert!(!has_go_note(&gnu));
        assert!(!has_go_note(&note(b"Go\0", 1, b"x")));
        assert!(!has_go_note(&go[..14]));
    }

    #[test]
    fn the_counter_runs_at_the_nominal_rate() {
        assert_eq!(tsc_of(1_000_000_000), 3_000_000_000);
        assert_eq!(tsc_of(-5), 0);
    }

    #[test]
    fn cpuid_answers_come_from_the_cache_the_second_time() {
        // Not trapped in a test process: the real instruction, sanitized.
        let a = cpuid(1, 0);
        assert_eq!(a[2] & (1 << 30), 0);
        assert_eq!(cpuid(1, 9), a);
        assert!(CACHE
            .iter()
            .any(|e| e.state.load(Acquire) == 2 && e.key.load(Relaxed) == 1 << 32));
    }

    #[test]
    fn hypervisor_leaves_are_empty_and_never_asked() {
        for (leaf, sub) in [
            (0x4000_0000, 0),
            (0x4000_0001, 3),
            (0x4000_ff00, 0),
            (0x4fff_ffff, 1),
        ] {
            assert_eq!(cpuid(leaf, sub), [0; 4]);
            assert_eq!(cached(key_of(leaf, sub)), None);
        }
        assert!(!is_hypervisor(0x3fff_ffff) && !is_hypervisor(0x5000_0000));
    }
}
