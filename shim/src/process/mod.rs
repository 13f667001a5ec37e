//! Processes: virtual pids, fork/exec/spawn (re-injecting the seal into every child, also when
//! its environment was cleaned), the run-wide pid table, and reports of what cannot be sealed.
//!
//! TODO(process): not implemented yet.

/// Called once per process image after the configuration is loaded (and the census opened).
pub fn on_start() {}

/// `syscall(SYS_getpid | SYS_gettid | …)`: `Some(result)` when handled here.
///
/// # Safety
/// Arguments as the system call takes them.
#[allow(unused_variables)]
pub unsafe fn sys_pid(n: libc::c_long, a: [libc::c_long; 6], ra: u64) -> Option<libc::c_long> {
    None
}

/// If `path` is `/proc/<vpid>/…` (or `/proc/<vtid>/…`) for a virtual pid of this run, writes
/// the same path with the real pid into `out` (NUL-terminated) and returns true. Called by
/// every `open`-family hook (they live in `random::device`).
#[allow(unused_variables)]
pub fn translate_proc_path(path: &[u8], out: &mut [u8; 4096]) -> bool {
    false
}
