//! Timed waits and sleeps under logical time: absolute deadlines are translated
//! (real deadline = real now + (logical deadline − logical now)), relative ones wait the same
//! real time; a wait that times out advances the logical clock to its deadline; `--warp`
//! returns sleeps that would time out at once.
//!
//! TODO(wait): not implemented yet.

/// `syscall(SYS_futex, …)`: `Some(result)` when handled here, `None` to pass through.
///
/// # Safety
/// Arguments as the futex system call takes them.
#[allow(unused_variables)]
pub unsafe fn sys_futex(a: [libc::c_long; 6], ra: u64) -> Option<libc::c_long> {
    None
}

/// `syscall(SYS_clock_nanosleep, …)`.
///
/// # Safety
/// Arguments as the system call takes them.
#[allow(unused_variables)]
pub unsafe fn sys_clock_nanosleep(a: [libc::c_long; 6], ra: u64) -> Option<libc::c_long> {
    None
}
