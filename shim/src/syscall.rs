//! `syscall(2)`: raw system calls made through libc's wrapper are dispatched to the family that
//! seals them (Rust's std, OpenSSL, libuv and the JVM use it for `getrandom`, `futex`,
//! `clock_gettime`, `gettid`). On x86_64 the variadic arguments arrive in the same registers
//! as fixed ones, so the hook declares six.

use libc::c_long;
use seal_abi::Fid;

use crate::hook;

hook! {
    /// # Safety
    /// As `syscall(2)`.
    fn syscall(n: c_long, a1: c_long, a2: c_long, a3: c_long, a4: c_long, a5: c_long, a6: c_long) -> c_long;
    caller = ra;
    // Each family counts the calls it handles (with the `Sys*` ids); the rest pass uncounted.
    // SAFETY: forwarded contract.
    |real| unsafe { dispatch(n, [a1, a2, a3, a4, a5, a6], ra) }
        .unwrap_or_else(|| real(n, a1, a2, a3, a4, a5, a6))
}

/// The family that seals system call `n`, if any, handles it: `Some(result)`.
///
/// # Safety
/// As `syscall(2)` for `n` with `args`.
#[inline(always)]
unsafe fn dispatch(n: c_long, args: [c_long; 6], ra: u64) -> Option<c_long> {
    let [a1, a2, a3, ..] = args;
    // SAFETY (all arms): the caller's arguments are forwarded with the same meaning.
    let handled: Option<libc::c_long> = unsafe {
        match n {
            libc::SYS_clock_gettime => Some(crate::clock::hooks::clock_gettime_impl(
                a1 as libc::clockid_t,
                a2 as *mut libc::timespec,
                Fid::SysClockGettime,
                ra,
            ) as libc::c_long),
            libc::SYS_gettimeofday => Some(crate::clock::hooks::gettimeofday_impl(
                a1 as *mut libc::timeval,
                a2 as *mut libc::c_void,
                Fid::SysGettimeofday,
                ra,
            ) as libc::c_long),
            libc::SYS_time => Some(crate::clock::hooks::time_impl(
                a1 as *mut libc::time_t,
                Fid::SysTime,
                ra,
            ) as libc::c_long),
            libc::SYS_getrandom => Some(crate::random::hooks::getrandom_impl(
                a1 as *mut libc::c_void,
                a2 as libc::size_t,
                a3 as libc::c_uint,
                Fid::SysGetrandom,
                ra,
            ) as libc::c_long),
            libc::SYS_clock_settime => Some(crate::clock::hooks::clock_settime_impl(
                a1 as libc::clockid_t,
                a2 as *const libc::timespec,
                Fid::SysClockSettime,
                ra,
            ) as libc::c_long),
            libc::SYS_settimeofday => Some(crate::clock::hooks::settimeofday_impl(
                a1 as *const libc::timeval,
                a2 as *const libc::c_void,
                Fid::SysClockSettime,
                ra,
            ) as libc::c_long),
            libc::SYS_adjtimex => Some(crate::clock::hooks::adjtimex_impl(
                a1 as *mut libc::timex,
                Fid::SysClockSettime,
                ra,
            ) as libc::c_long),
            libc::SYS_clock_adjtime => Some(crate::clock::hooks::clock_adjtime_impl(
                a1 as libc::clockid_t,
                a2 as *mut libc::timex,
                Fid::SysClockSettime,
                ra,
            ) as libc::c_long),
            libc::SYS_sethostname | libc::SYS_setdomainname => {
                let which = if n == libc::SYS_sethostname {
                    crate::world::Name::Host
                } else {
                    crate::world::Name::Domain
                };
                crate::host::hooks::set_name_impl(
                    which,
                    a1 as *const libc::c_char,
                    a2 as libc::size_t,
                    Fid::SysSethostname,
                    ra,
                )
                .map(|r| r as libc::c_long)
            }
            libc::SYS_futex => crate::wait::sys_futex(args, ra),
            libc::SYS_clock_nanosleep => crate::wait::sys_clock_nanosleep(args, ra),
            // An exec through syscall() is an exec: the child is re-injected like any other
            // (the exec hooks keep the cpu family's trap state right across it).
            libc::SYS_execve => {
                crate::census::count(Fid::Execve, seal_abi::NO_DETAIL, ra);
                Some(
                    crate::process::hooks::execve_impl(a1 as *const libc::c_char, a2 as _, a3 as _)
                        as libc::c_long,
                )
            }
            libc::SYS_execveat => {
                crate::census::count(Fid::Execveat, seal_abi::NO_DETAIL, ra);
                Some(crate::process::hooks::execveat_impl(
                    a1 as libc::c_int,
                    a2 as *const libc::c_char,
                    a3 as _,
                    args[3] as _,
                    args[4] as libc::c_int,
                ) as libc::c_long)
            }
            libc::SYS_rt_sigaction | libc::SYS_rt_sigprocmask => {
                crate::cpu::signals::sys_cpu(n, args, ra)
            }
            libc::SYS_getdents64 => crate::machine::dirorder::sys_getdents64(args, ra),
            libc::SYS_getdents => crate::machine::dirorder::sys_getdents(args, ra),
            libc::SYS_sched_getaffinity | libc::SYS_sysinfo | libc::SYS_uname => {
                crate::machine::hooks::sys_machine(n, args, ra)
            }
            _ => crate::files::hooks::sys_files(n, args, ra)
                .or_else(|| crate::process::sys_pid(n, args, ra)),
        }
    };
    handled
}
