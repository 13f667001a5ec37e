//! Exported wait and sleep entry points. Each: count the call (detail = the clock the deadline
//! is on, or none for plain relative timeouts), then, when the `time` family is sealed,
//! translate the deadline / account the timeout through `crate::wait`; else call the real
//! function.
//!
//! `sync.rs`: condition variables, message queues, semaphores, mutexes, rwlocks, joins (timed
//! waits on an absolute deadline). `sleep.rs`: the sleeps. `poll.rs`: poll, select, epoll
//! (relative timeouts). `timer.rs`: ABSTIME timers.

mod poll;
mod sleep;
mod sync;
mod timer;

use super::{errno, set_errno};

/// An error number from a `-1`-and-errno style result.
fn err_of(r: libc::c_int) -> i32 {
    if r == -1 {
        errno()
    } else {
        0
    }
}

/// Back to `-1`-and-errno.
fn ret_of(err: i32) -> libc::c_int {
    if err == 0 {
        0
    } else {
        set_errno(err);
        -1
    }
}
