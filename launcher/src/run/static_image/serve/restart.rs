//! `SA_RESTART` for an image's `SIGCHLD` handler.
//!
//! A call an image makes to the supervisor waits in its notification until it is answered;
//! a signal that lands before the supervisor has taken it cuts it short with `-ERESTARTSYS`
//! (once taken, a traced call is made again by `trace_call.rs`, whatever the handler). After
//! a handler without `SA_RESTART` that becomes `EINTR`, where the kernel's own `fork` or
//! `getpid` never fails: a busybox shell printed `can't fork: Interrupted system call` in
//! some runs, a C program's `getpid` returned -1. The signal that comes at such a moment is
//! a child's `SIGCHLD`, sent as it ends while its parent forks the next one: the filter sends
//! an image's `rt_sigaction` that sets `SIGCHLD`'s disposition
//! (`seal_abi::supervised::SIGACTION`), and the supervisor adds `SA_RESTART` to a handler's
//! flags in the caller's `struct kernel_sigaction` before the call runs. glibc and musl
//! build that structure on their own stack from the program's `struct sigaction`, which is
//! left as it was. The cost: a call of the image that `SIGCHLD` cuts short is made again
//! after the handler rather than failing with `EINTR`; a blocking `read` or `wait` a child's
//! end interrupts still ends by itself (end of file, the child reaped). What the kernel
//! reports as the old disposition then carries the flag. Other signals keep their flags
//! (`docs/limits.md`): a handler without `SA_RESTART` is how a program asks for `EINTR`,
//! a `SIGALRM` timeout on a blocking `read`.

use super::super::notif::Notif;
use super::super::remote::{read, write};
use super::Supervisor;

/// `SA_RESTART`.
const SA_RESTART: u64 = 0x1000_0000;

impl Supervisor {
    /// Adds `SA_RESTART` to the `SIGCHLD` handler that the image's `rt_sigaction` `n` sets
    /// (a handler: not `SIG_DFL` or `SIG_IGN`); the call then runs as it is.
    pub(super) fn restart_sigchld(&mut self, n: &Notif) {
        let tid = n.pid as i32;
        // `struct kernel_sigaction`: the handler, then the flags.
        let mut act = [0u64; 2];
        if !read(tid, n.args[1], &mut act) {
            return; // the kernel fails it with EFAULT
        }
        let [handler, flags] = act;
        if handler > 1 && flags & SA_RESTART == 0 {
            let flags = flags | SA_RESTART;
            // A disposition in read-only memory keeps its flags (nothing else to do).
            write(tid, n.args[1] + 8, &flags.to_ne_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SA_RESTART;

    #[test]
    fn sa_restart_is_the_kernels() {
        assert_eq!(SA_RESTART, libc::SA_RESTART as u64);
    }
}
