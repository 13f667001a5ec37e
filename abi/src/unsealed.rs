//! Kinds of `unsealed` events (what a process could not seal, recorded in its census file).

pub const STATIC_BINARY: u32 = 1;
pub const SETUID: u32 = 2;
pub const FOREIGN_ARCH: u32 = 3;
pub const FAMILY_OFF: u32 = 4;
pub const TABLE_FULL: u32 = 5;
pub const PID_SPACE_FULL: u32 = 6;
pub const UNSUPPORTED_CALL: u32 = 7;
pub const NOT_EXECUTABLE: u32 = 8;
/// The program did not match `--only` or matched `--skip`: it runs with real values by
/// the user's choice, and passes the seal on to its children.
pub const SCOPED_OUT: u32 = 9;
/// Family `cpu` is sealed but this machine or kernel cannot trap `rdtsc`/`cpuid` (no
/// `cpuid_fault`, a `prctl` refused): those instructions give real values.
pub const CPU_TRAP: u32 = 10;

pub fn name(kind: u32) -> &'static str {
    match kind {
        STATIC_BINARY => "static-binary",
        SETUID => "setuid",
        FOREIGN_ARCH => "foreign-arch",
        FAMILY_OFF => "family-off",
        TABLE_FULL => "census-table-full",
        PID_SPACE_FULL => "pid-space-full",
        UNSUPPORTED_CALL => "unsupported-call",
        NOT_EXECUTABLE => "not-executable",
        SCOPED_OUT => "scoped-out",
        CPU_TRAP => "cpu-trap-unavailable",
        _ => "unknown",
    }
}
