//! `syscall(2)`: raw system calls made through libc's wrapper are dispatched to the family that
//! seals them (Rust's std, OpenSSL, libuv and the JVM use it for `getrandom`, `futex`,
//! `clock_gettime`, `gettid`). On x86_64 the variadic arguments arrive in the same registers
//! as fixed ones, so the hook declares six.
//!
//! One route table maps each number to its family's handler, each exported next to the
//! family's hooks with one signature: `unsafe fn(n, args, caller) -> Option<result>` (`None`:
//! the real system call runs). Every handler counts the calls it takes (the `Sys*` ids).

use libc::c_long;

/// Declares the route table: `family: SYS_a | SYS_b => handler;` rows. Generates [`ROUTES`]
/// (every routed number and its family, for the tests) and `dispatch` (one `match`).
macro_rules! routes {
    ($($family:literal: $($n:ident)|+ => $handler:path;)*) => {
        /// Every system call number `syscall()` routes, with the family that seals it.
        #[cfg(test)]
        pub const ROUTES: &[(c_long, &str)] = &[$($((libc::$n, $family),)+)*];

        /// The family that seals system call `n`, if any, handles it: `Some(result)`.
        ///
        /// # Safety
        /// As `syscall(2)` for `n` with `args`.
        #[cfg(not(test))]
        #[inline(always)]
        unsafe fn dispatch(n: c_long, args: [c_long; 6], ra: u64) -> Option<c_long> {
            // SAFETY (every arm): the caller's arguments are forwarded with the same meaning.
            unsafe {
                match n {
                    $($(libc::$n)|+ => $handler(n, args, ra),)*
                    _ => None,
                }
            }
        }
    };
}

routes! {
    "time": SYS_clock_gettime | SYS_gettimeofday | SYS_time => crate::clock::hooks::sys_clock;
    "time": SYS_clock_settime | SYS_settimeofday | SYS_adjtimex | SYS_clock_adjtime
        => crate::clock::setters::sys_set;
    "time": SYS_times | SYS_getrusage => crate::clock::hooks::sys_usage;
    "time": SYS_futex => crate::wait::sys_futex;
    "time": SYS_clock_nanosleep => crate::wait::sys_clock_nanosleep;
    "random": SYS_getrandom => crate::random::hooks::sys_getrandom;
    "host": SYS_sethostname | SYS_setdomainname => crate::host::hooks::sys_set_name;
    "exec": SYS_execve | SYS_execveat => crate::process::hooks::sys_exec;
    "cpu": SYS_rt_sigaction | SYS_rt_sigprocmask => crate::cpu::signals::sys_cpu;
    "pid": SYS_prctl | SYS_seccomp => crate::process::hooks::sys_strict;
    "machine": SYS_getdents64 | SYS_getdents => crate::machine::dirorder::sys_getdents;
    "machine": SYS_sched_getaffinity | SYS_sysinfo | SYS_uname => crate::machine::hooks::sys_machine;
    "files": SYS_stat | SYS_lstat | SYS_fstat | SYS_newfstatat | SYS_statx | SYS_utimensat
        | SYS_utimes | SYS_utime | SYS_futimesat => crate::files::hooks::sys_files;
    "pid": SYS_getpid | SYS_gettid | SYS_getppid | SYS_kill | SYS_tgkill | SYS_tkill | SYS_wait4
        | SYS_pidfd_open | SYS_getpgid | SYS_getsid | SYS_clone | SYS_clone3 | SYS_getpriority
        | SYS_setpriority | SYS_prlimit64 | SYS_sched_getscheduler | SYS_sched_setscheduler
        | SYS_sched_getparam | SYS_sched_setparam | SYS_sched_rr_get_interval
        | SYS_rt_sigqueueinfo | SYS_ioprio_get | SYS_ioprio_set | SYS_sched_getattr
        | SYS_sched_setattr | SYS_perf_event_open => crate::process::sys_pid;
}

#[cfg(not(test))]
crate::hook! {
    /// # Safety
    /// As `syscall(2)`.
    fn syscall(n: c_long, a1: c_long, a2: c_long, a3: c_long, a4: c_long, a5: c_long, a6: c_long) -> c_long;
    caller = ra;
    // Each family counts the calls it handles (with the `Sys*` ids); the rest pass uncounted.
    // SAFETY: forwarded contract.
    |real| unsafe { dispatch(n, [a1, a2, a3, a4, a5, a6], ra) }
        .unwrap_or_else(|| real(n, a1, a2, a3, a4, a5, a6))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_number_is_routed_twice() {
        for (i, (n, f)) in ROUTES.iter().enumerate() {
            for (m, g) in &ROUTES[i + 1..] {
                assert_ne!(n, m, "system call {n} routed to {f} and {g}");
            }
        }
    }

    /// Every hooked function that is also a system call of its own is routed, so its
    /// `syscall()` form is sealed too: the census names (`seal_abi`'s function table) that
    /// are Linux system call names, against the table.
    #[test]
    fn every_hooked_system_call_is_routed() {
        use libc::*;
        // Hooked functions that are system calls of the same name.
        let syscalls: &[(&str, c_long)] = &[
            ("clock_gettime", SYS_clock_gettime),
            ("gettimeofday", SYS_gettimeofday),
            ("time", SYS_time),
            ("clock_settime", SYS_clock_settime),
            ("settimeofday", SYS_settimeofday),
            ("adjtimex", SYS_adjtimex),
            ("clock_adjtime", SYS_clock_adjtime),
            ("clock_nanosleep", SYS_clock_nanosleep),
            ("getrandom", SYS_getrandom),
            ("sethostname", SYS_sethostname),
            ("setdomainname", SYS_setdomainname),
            ("execve", SYS_execve),
            ("execveat", SYS_execveat),
            ("getpid", SYS_getpid),
            ("getppid", SYS_getppid),
            ("gettid", SYS_gettid),
            ("kill", SYS_kill),
            ("tgkill", SYS_tgkill),
            ("wait4", SYS_wait4),
            ("getpgid", SYS_getpgid),
            ("getsid", SYS_getsid),
            ("getpriority", SYS_getpriority),
            ("setpriority", SYS_setpriority),
            ("sched_getscheduler", SYS_sched_getscheduler),
            ("sched_setscheduler", SYS_sched_setscheduler),
            ("sched_getparam", SYS_sched_getparam),
            ("sched_setparam", SYS_sched_setparam),
            ("sched_rr_get_interval", SYS_sched_rr_get_interval),
            ("sched_getaffinity", SYS_sched_getaffinity),
            ("sysinfo", SYS_sysinfo),
            ("pidfd_open", SYS_pidfd_open),
            ("statx", SYS_statx),
            ("utimensat", SYS_utimensat),
            ("times", SYS_times),
            ("getrusage", SYS_getrusage),
        ];
        let hooked: Vec<&str> = seal_abi::FUNCTIONS.iter().map(|(_, name)| *name).collect();
        for (name, n) in syscalls {
            let is_hooked = hooked
                .iter()
                .any(|h| h == name || h.starts_with(&format!("{name} ")));
            assert!(
                is_hooked,
                "{name}: not a census name any more; update this list"
            );
            assert!(
                ROUTES.iter().any(|(m, _)| m == n),
                "{name} is hooked but syscall(SYS_{name}) is not routed"
            );
        }
    }
}
