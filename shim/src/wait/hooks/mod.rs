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
