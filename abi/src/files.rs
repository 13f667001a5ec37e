//! The run's file-time table (`files.table` in the run dir): its size and the header fields
//! the launcher fills in before the command starts. The shim owns the entries
//! (`shim/src/files/table.rs`, which checks its layout against these numbers).

/// File name in the run dir.
pub const TABLE_NAME: &str = "files.table";
pub const MAGIC: u64 = 0x5345_414c_4649_4c31; // "SEALFIL1"
/// Entries: 64 Ki files recorded per run.
pub const SLOTS: usize = 1 << 16;
pub const HEADER_BYTES: usize = 128;
pub const ENTRY_BYTES: usize = 32;
/// Bytes of the file (sparse: pages are backed as they are first used).
pub const SIZE: usize = HEADER_BYTES + SLOTS * ENTRY_BYTES;
/// Offset of the header's `magic` (u64) and `start` (i64, the run's real start in ns: real
/// file times below it are from before the run).
pub const MAGIC_OFFSET: usize = 0;
pub const START_OFFSET: usize = 8;
