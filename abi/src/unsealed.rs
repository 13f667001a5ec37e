//! Kinds of `unsealed` events (what a process could not seal, recorded in its census slot).

numbered! { u32 from 1, NAMES:
    STATIC_BINARY = "static-binary",
    SETUID = "setuid",
    FOREIGN_ARCH = "foreign-arch",
    FAMILY_OFF = "family-off",
    TABLE_FULL = "census-table-full",
    PID_SPACE_FULL = "pid-space-full",
    UNSUPPORTED_CALL = "unsupported-call",
    NOT_EXECUTABLE = "not-executable",
    /// The program did not match `--only` or matched `--skip`: it runs with real values by
    /// the user's choice, and passes the seal on to its children.
    SCOPED_OUT = "scoped-out",
    /// Family `cpu` is sealed but this machine or kernel cannot trap `rdtsc`/`cpuid` (no
    /// `cpuid_fault`, a `prctl` refused): those instructions give real values.
    CPU_TRAP = "cpu-trap-unavailable",
    /// A static binary run under system-call supervision ([`crate::supervised`]): its clocks,
    /// randomness, pid and host name are sealed, what the census line lists is not.
    STATIC_SUPERVISED = "static-binary-supervised",
    /// A dynamically linked Go program (cgo): libseal seals its C library's calls, and the Go
    /// runtime's raw `getpid`, `getrandom`, `uname` and signal calls are served by the
    /// supervisor; what the census line lists stays real (its clocks, read from the vDSO).
    GO_SUPERVISED = "go-runtime-supervised",
    /// A dynamically linked Go program whose supervisor could not start: its runtime's raw
    /// system calls and vDSO reads give real values.
    GO_RUNTIME = "go-runtime",
    /// A temp name the program (or libseal) tried to create was taken by an entry older than
    /// the run (left in a shared `/tmp` by an earlier run): the name it takes instead, and what
    /// the program draws after it, differ from a run without that entry.
    TMP_LEFTOVER = "tmp-leftover",
    /// A Go image whose runtime's random numbers stay per thread beyond `select` order: the
    /// detail says what and why (`supervised::go_rand::outcome`), as the image's set-up found
    /// it; its `partly sealed` line says it.
    GO_RANDOM = "go-runtime-random",
}

/// The details of `CPU_TRAP` events, by cause; a census slot's header holds them as bits
/// (`CensusFile::cpu_unsealed`), one fixed line each, so the launcher says each once per run.
pub const CPU_TRAP_CAUSES: [&str; 6] = [
    "rdtsc and cpuid give real values: libseal could not install its SIGSEGV handler",
    "rdtsc gives real values in Go programs: their os/exec starts children by raw system \
     calls, which the rdtsc trap would kill",
    "cpuid gives real values (RDRAND, RDSEED): this CPU or hypervisor has no cpuid faulting \
     (no cpuid_fault in /proc/cpuinfo)",
    "cpuid gives real values (RDRAND, RDSEED): the kernel refused ARCH_SET_CPUID",
    "rdtsc gives real values: the kernel refused PR_SET_TSC (PR_TSC_SIGSEGV)",
    "rdtsc and cpuid give real values: the kernel refused PR_SET_TSC and ARCH_SET_CPUID",
];
/// Bits of `CensusFile::cpu_unsealed` (indexes into [`CPU_TRAP_CAUSES`]).
pub mod cpu_cause {
    crate::bits! { u32:
        NO_HANDLER,
        GO_PROGRAM,
        NO_CPUID_FAULTING,
        CPUID_REFUSED,
        TSC_REFUSED,
        BOTH_REFUSED,
    }
    /// The causes that are about the machine (CPU, hypervisor, kernel), not the program:
    /// every sealed command on the machine has them, so `seal census` and `seal doctor` say
    /// them once and a plain run stays quiet about them (docs/limits.md).
    pub const MACHINE: u32 = NO_CPUID_FAULTING | CPUID_REFUSED | TSC_REFUSED | BOTH_REFUSED;
}

/// Is this `CPU_TRAP` detail a machine-level cause ([`cpu_cause::MACHINE`])?
pub fn is_machine_cause(detail: &str) -> bool {
    CPU_TRAP_CAUSES
        .iter()
        .enumerate()
        .any(|(i, c)| *c == detail && cpu_cause::MACHINE >> i & 1 == 1)
}

/// The name of an event kind (`unknown` for a number that is none).
pub fn name(kind: u32) -> &'static str {
    kind.checked_sub(1)
        .and_then(|i| NAMES.get(i as usize))
        .copied()
        .unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_keep_their_numbers_and_names() {
        assert_eq!((STATIC_BINARY, SCOPED_OUT, CPU_TRAP), (1, 9, 10));
        assert_eq!(name(STATIC_BINARY), "static-binary");
        assert_eq!(name(CPU_TRAP), "cpu-trap-unavailable");
        assert_eq!(name(0), "unknown");
        assert_eq!(name(STATIC_SUPERVISED), "static-binary-supervised");
        assert_eq!(STATIC_SUPERVISED, 11);
        assert_eq!((GO_SUPERVISED, GO_RUNTIME), (12, 13));
        assert_eq!(name(GO_SUPERVISED), "go-runtime-supervised");
        assert_eq!(TMP_LEFTOVER, 14);
        assert_eq!(name(TMP_LEFTOVER), "tmp-leftover");
        assert_eq!((GO_RANDOM, name(GO_RANDOM)), (15, "go-runtime-random"));
        assert_eq!(name(GO_RANDOM + 1), "unknown");
    }
}
