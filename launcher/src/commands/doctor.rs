//! `seal doctor`: what seal can and cannot seal on this machine, said once, where users look.
//!
//! Every check here is a fact seal depends on and that the machine (CPU, hypervisor, kernel,
//! file system), not the program, decides: the platform the shim is built for, the two
//! instruction traps of family `cpu` (`PR_SET_TSC`, `ARCH_SET_CPUID` with `cpuid_fault`), the
//! kernel confinement of the run's root (`launcher/src/run/confine.rs`) and the shim's private
//! cache directory (`shim::cache_dir`). The traps are tried for real, in a forked child that
//! exits at once, so the answer is the kernel's, not a guess from `/proc/cpuinfo` alone.
//!
//! A limited machine is not an error: the report is written and seal exits 0 (`--strict`
//! exits 1 when a check is limited, for a CI job that needs the full seal). A plain sealed run
//! no longer warns about these limits on every command; `seal census` names them once.

use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::Serialize;
use thiserror::Error;

use crate::cli::DoctorArgs;

/// What one check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Seal has what it needs here.
    Ok,
    /// Something is not sealed on this machine (the meaning says what).
    Limited,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// A stable name (JSON key for scripts).
    pub name: &'static str,
    pub status: Status,
    /// What was found, briefly (a path, a version, an errno).
    pub found: String,
    /// One sentence: what it means for the user.
    pub meaning: String,
}

/// The whole report (`--json`).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub version: u32,
    /// Is any check limited?
    pub limited: bool,
    pub checks: Vec<Check>,
}

/// Why a trial in a forked child could not be made.
#[derive(Debug, Error)]
enum TrialError {
    #[error("fork failed: {0}")]
    Fork(std::io::Error),
    #[error("waitpid failed: {0}")]
    Wait(std::io::Error),
}

/// `seal doctor [--json] [--strict]`.
pub fn run(args: DoctorArgs) -> Result<ExitCode> {
    let report = examine();
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&report).context("cannot encode the report")?;
        s.push('\n');
        s
    } else {
        render(&report)
    };
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(e).context("cannot write the doctor report"),
    }
    Ok(ExitCode::from(u8::from(args.strict && report.limited)))
}

/// Runs every check.
pub fn examine() -> Report {
    let checks = vec![
        platform(),
        rdtsc_trap(),
        cpuid_trap(),
        static_supervision(),
        host_namespace(),
        clock_capability(),
        shim_cache(),
    ];
    Report {
        version: 1,
        limited: checks.iter().any(|c| c.status == Status::Limited),
        checks,
    }
}

/// The report for people: one line per check, `ok`/`limited`, what was found, what it means.
pub fn render(report: &Report) -> String {
    let n = report
        .checks
        .iter()
        .filter(|c| c.status == Status::Limited)
        .count();
    let mut out = if n == 0 {
        "seal doctor: everything seal seals is available on this machine\n".to_string()
    } else {
        format!(
            "seal doctor: {n} of {} checks limited on this machine (a limited machine is not an error)\n",
            report.checks.len()
        )
    };
    let w = report
        .checks
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    for c in &report.checks {
        let status = match c.status {
            Status::Ok => "ok",
            Status::Limited => "limited",
        };
        out.push_str(&format!(
            "{status:<7}  {:<w$}  {}\n           {}\n",
            c.name, c.found, c.meaning
        ));
    }
    out
}

fn check(name: &'static str, ok: bool, found: String, meaning: &str) -> Check {
    Check {
        name,
        status: if ok { Status::Ok } else { Status::Limited },
        found,
        meaning: meaning.to_string(),
    }
}

/// The architecture (`uname -m`), glibc's version and the kernel release.
fn platform() -> Check {
    // SAFETY: uname fills a struct we own; gnu_get_libc_version returns a static string.
    let (machine, release) = unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        libc::uname(&mut u);
        (
            std::ffi::CStr::from_ptr(u.machine.as_ptr())
                .to_string_lossy()
                .into_owned(),
            std::ffi::CStr::from_ptr(u.release.as_ptr())
                .to_string_lossy()
                .into_owned(),
        )
    };
    let glibc = glibc_version();
    let ok = machine == "x86_64" && glibc.is_some();
    let found = format!(
        "{machine}, {}, Linux {release}",
        glibc.map_or("no glibc".to_string(), |v| format!("glibc {v}"))
    );
    let meaning = if ok {
        "the shim loads into every dynamically linked x86_64 glibc program (static ones run under seal's supervisor: see static binaries; setuid ones run unsealed, each said on stderr)"
    } else {
        "seal's shim is built for x86_64 Linux with glibc: other platforms (musl, aarch64) run commands unsealed"
    };
    check("platform", ok, found, meaning)
}

#[cfg(target_env = "gnu")]
fn glibc_version() -> Option<String> {
    extern "C" {
        fn gnu_get_libc_version() -> *const libc::c_char;
    }
    // SAFETY: returns a pointer to a static NUL-terminated string.
    let v = unsafe { std::ffi::CStr::from_ptr(gnu_get_libc_version()) };
    Some(v.to_string_lossy().into_owned())
}

#[cfg(not(target_env = "gnu"))]
fn glibc_version() -> Option<String> {
    None
}

/// Runs `trial` in a forked child and returns its result: 0 when the call succeeded, else
/// the errno it failed with. The child only makes system calls and `_exit`s.
fn in_child(trial: fn() -> i32) -> Result<i32, TrialError> {
    // SAFETY: the child makes only async-signal-safe calls (raw system calls, _exit).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(TrialError::Fork(std::io::Error::last_os_error()));
    }
    if pid == 0 {
        let r = trial();
        // SAFETY: _exit ends the child without running the parent's atexit handlers.
        unsafe { libc::_exit(r.clamp(0, 255)) };
    }
    let mut status = 0;
    loop {
        // SAFETY: waitpid on our own child with a status word we own.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(TrialError::Wait(e));
        }
    }
    Ok(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        255
    })
}

/// The errno of the last failed call, as the child's exit status.
fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(255)
}

fn errno_text(e: i32) -> String {
    std::io::Error::from_raw_os_error(e).to_string()
}

const PR_SET_TSC: libc::c_int = 26;
const PR_TSC_SIGSEGV: libc::c_ulong = 2;
const ARCH_SET_CPUID: libc::c_long = 0x1012;

/// `prctl(PR_SET_TSC, PR_TSC_SIGSEGV)`: can `rdtsc` be made to fault (and so be sealed)?
fn rdtsc_trap() -> Check {
    fn trial() -> i32 {
        // SAFETY: prctl with integers; the child exits right after.
        zero_or_errno(unsafe { libc::prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) }.into())
    }
    trial_check(
        "rdtsc trap",
        trial,
        ("PR_SET_TSC works", "rdtsc and rdtscp in sealed programs count the sealed clock, not the CPU's cycles"),
        ("PR_SET_TSC", "rdtsc gives real cycle counts in every sealed program (libgcrypt-style entropy and cycle timers vary between runs)"),
    )
}

/// `cpuid_fault` and `arch_prctl(ARCH_SET_CPUID, 0)`: can `cpuid` be made to fault, so that
/// sealed programs see RDRAND and RDSEED as absent and fixed APIC ids?
fn cpuid_trap() -> Check {
    fn trial() -> i32 {
        // SAFETY: arch_prctl with integers; the child exits right after.
        zero_or_errno(unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_SET_CPUID, 0) })
    }
    let flag = std::fs::read_to_string("/proc/cpuinfo")
        .map(|c| {
            c.lines()
                .filter(|l| l.starts_with("flags"))
                .any(|l| l.split_whitespace().any(|w| w == "cpuid_fault"))
        })
        .unwrap_or(false);
    let meaning_limited = "cpuid gives real values in every sealed program: a program that finds RDRAND or RDSEED there and uses them reads real hardware randomness, and APIC ids show the CPU it runs on (said once by seal census, not on every run)";
    if !flag {
        return check(
            "cpuid trap",
            false,
            "no cpuid_fault in /proc/cpuinfo (most VMs)".into(),
            meaning_limited,
        );
    }
    trial_check(
        "cpuid trap",
        trial,
        (
            "cpuid_fault, ARCH_SET_CPUID works",
            "cpuid in sealed programs hides RDRAND and RDSEED and reports the APIC ids of CPU 0",
        ),
        ("cpuid_fault present but ARCH_SET_CPUID", meaning_limited),
    )
}

/// The check `name` from a trial run in a child: `works` (what was found, what it means) when
/// it exited 0, else what `call` was refused and what that means.
fn trial_check(
    name: &'static str,
    trial: fn() -> i32,
    works: (&str, &str),
    refused: (&str, &str),
) -> Check {
    match in_child(trial) {
        Ok(0) => check(name, true, works.0.into(), works.1),
        r => check(name, false, trial_found(refused.0, r), refused.1),
    }
}

/// A trial's exit status: 0 when its call returned 0, else the call's errno.
fn zero_or_errno(r: libc::c_long) -> i32 {
    if r == 0 {
        0
    } else {
        errno()
    }
}

fn trial_found(call: &str, r: Result<i32, TrialError>) -> String {
    match r {
        Ok(e) => format!("{call} refused: {}", errno_text(e)),
        Err(e) => format!("{call} could not be tried: {e}"),
    }
}

/// Static binaries and Go programs run under seal's supervisor: a seccomp filter with a
/// listener (user notifications, Linux 5.5), and `ptrace` of the image by a process that is
/// not its parent (at its exec stop; Yama's `ptrace_scope` 0 or 1, which the image's
/// `PR_SET_PTRACER` satisfies). Both tried: a child installs seal's filter and names this
/// process its tracer, this process seizes it.
fn static_supervision() -> Check {
    const NAME: &str = "static binaries";
    let limited = "static binaries and Go programs run unsealed here (each said on stderr as `not sealed (static-binary)`): their clocks, randomness and pids are real";
    if !crate::run::static_image::available() {
        return check(
            NAME,
            false,
            "no seccomp user notifications (Linux 5.5 or later needed)".into(),
            limited,
        );
    }
    match try_supervision() {
        Ok(()) => check(
            NAME,
            true,
            "seccomp user notifications and ptrace work".into(),
            "static binaries and Go programs run under seal's system-call supervisor: clocks, randomness, pids, host and temp names sealed (what stays real is said once per program)",
        ),
        Err(found) => check(NAME, false, found, limited),
    }
}

/// The trial of [`static_supervision`]: what was refused, if anything.
fn try_supervision() -> Result<(), String> {
    let mut up = [0i32; 2];
    let mut down = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into each array.
    let made = unsafe {
        libc::pipe2(up.as_mut_ptr(), libc::O_CLOEXEC) == 0
            && libc::pipe2(down.as_mut_ptr(), libc::O_CLOEXEC) == 0
    };
    if !made {
        return Err(format!("pipe2 failed: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the child makes system calls only (prctl, seccomp, close, write, read, _exit).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY (all): system calls on our own descriptors and buffers, in the child.
        unsafe {
            use seal_abi::supervised::handover;
            handover::prctl(handover::PR_SET_PTRACER, parent as i64);
            let listener = handover::install_filter(false);
            if listener >= 0 {
                // A call the filter sends now fails (ENOSYS) instead of waiting for an answer.
                libc::close(listener);
            }
            let r = listener.min(0);
            libc::write(up[1], (&r as *const i32).cast(), 4);
            let mut b = 0u8;
            libc::read(down[0], (&mut b as *mut u8).cast(), 1);
            libc::_exit(0);
        }
    }
    // SAFETY (all below): our own descriptors and child.
    unsafe {
        libc::close(up[1]);
        libc::close(down[0]);
    }
    let result = (|| {
        if pid < 0 {
            return Err(format!("fork failed: {}", std::io::Error::last_os_error()));
        }
        let mut r = 0i32;
        // SAFETY: reads 4 bytes into `r`.
        if unsafe { libc::read(up[0], (&mut r as *mut i32).cast(), 4) } != 4 {
            return Err("the trial child ended early".into());
        }
        if r < 0 {
            return Err(format!(
                "seccomp filter with a listener refused: {}",
                errno_text(-r)
            ));
        }
        // SAFETY: seizing our own child, which named us its tracer.
        if unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0, 0) } != 0 {
            let e = std::io::Error::last_os_error();
            let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
                .map(|s| format!(" (Yama ptrace_scope {})", s.trim()))
                .unwrap_or_default();
            return Err(format!("ptrace refused: {e}{scope}"));
        }
        Ok(())
    })();
    // SAFETY: our own descriptors and child; SIGKILL ends it whether traced or not.
    unsafe {
        libc::close(up[0]);
        libc::close(down[1]);
        if pid > 0 {
            libc::kill(pid, libc::SIGKILL);
            let mut status = 0;
            while libc::waitpid(pid, &mut status, 0) < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
            }
        }
    }
    result
}

/// The effective capability set's first word (`capget`, version 3).
fn effective_caps() -> u32 {
    let mut head = [0x2008_0522u32, 0];
    let mut data = [0u32; 6];
    // SAFETY: capget on buffers we own, of the sizes version 3 describes.
    let r = unsafe { libc::syscall(libc::SYS_capget, head.as_mut_ptr(), data.as_mut_ptr()) };
    if r == 0 {
        data[0]
    } else {
        0
    }
}

const CAP_SYS_ADMIN: u32 = 21;
const CAP_SYS_TIME: u32 = 25;

/// Host names: the run's root takes a UTS namespace of its own when it may (CAP_SYS_ADMIN);
/// without that privilege the kernel refuses `sethostname` to the run anyway.
fn host_namespace() -> Check {
    fn trial() -> i32 {
        // SAFETY: unshare with a flags word, in a child that exits right after.
        zero_or_errno(unsafe { libc::unshare(libc::CLONE_NEWUTS) }.into())
    }
    if effective_caps() & (1 << CAP_SYS_ADMIN) == 0 {
        return check(
            "host namespace",
            true,
            "not needed: no CAP_SYS_ADMIN".into(),
            "the kernel refuses sethostname to the run already, so a program seal does not reach cannot rename this machine",
        );
    }
    trial_check(
        "host namespace",
        trial,
        ("unshare(CLONE_NEWUTS) works", "the run gets a UTS namespace of its own: a raw sethostname renames only the run, never this machine"),
        ("unshare(CLONE_NEWUTS)", "seal runs with CAP_SYS_ADMIN but cannot take a UTS namespace: a program seal does not reach (static, --skip) could rename this machine"),
    )
}

/// The clock: the run's root gives up CAP_SYS_TIME when it holds it (bounding set too, which
/// needs CAP_SETPCAP); without it the kernel refuses to set the clock anyway.
fn clock_capability() -> Check {
    fn trial() -> i32 {
        // SAFETY: prctl with integers, in a child that exits right after.
        let r = unsafe {
            libc::prctl(
                libc::PR_CAPBSET_DROP,
                CAP_SYS_TIME as libc::c_ulong,
                0,
                0,
                0,
            )
        };
        zero_or_errno(r.into())
    }
    if !crate::run::confine::holds_sys_time() {
        return check(
            "clock capability",
            true,
            "not needed: no CAP_SYS_TIME".into(),
            "the kernel refuses settimeofday to the run already, so no program in it can move this machine's clock",
        );
    }
    trial_check(
        "clock capability",
        trial,
        ("CAP_SYS_TIME held, and dropped for the run", "the run gives CAP_SYS_TIME up (bounding set too): no image of it can set this machine's clock"),
        ("CAP_SYS_TIME held; PR_CAPBSET_DROP", "the run drops CAP_SYS_TIME from its own sets but not its bounding set: a setuid program in it could set this machine's clock"),
    )
}

/// The shim's cache directory: private, and every directory above it safe from other users.
fn shim_cache() -> Check {
    match crate::run::shim::cache_dir() {
        Ok(dir) => check(
            "shim cache",
            true,
            dir.display().to_string(),
            "the shim is extracted to a private directory no other user can replace it in",
        ),
        Err(e) => check(
            "shim cache",
            false,
            format!("{e:#}"),
            "seal cannot run anything sealed (exit 125) until XDG_CACHE_HOME or HOME names a directory only you can change",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_is_named_once_and_says_what_it_means() {
        let r = examine();
        let mut names: Vec<&str> = r.checks.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), r.checks.len());
        assert!(r.checks.iter().all(|c| !c.meaning.is_empty()));
        assert_eq!(
            r.limited,
            r.checks.iter().any(|c| c.status == Status::Limited)
        );
    }

    #[test]
    fn the_cpuid_check_agrees_with_proc_cpuinfo() {
        let flag = std::fs::read_to_string("/proc/cpuinfo")
            .unwrap()
            .contains(" cpuid_fault");
        let c = cpuid_trap();
        if !flag {
            assert_eq!(c.status, Status::Limited);
            assert!(c.found.contains("no cpuid_fault"), "{c:?}");
        }
    }

    /// On a kernel that has user notifications, the trial either works or names what was
    /// refused; this machine's answer is also what a static root finds (`static_root` tests).
    #[test]
    fn the_static_check_tries_both_halves() {
        let c = static_supervision();
        if crate::run::static_image::available() {
            let refused = c.found.contains("refused") || c.found.contains("failed");
            assert_eq!(c.status == Status::Ok, !refused, "{c:?}");
        } else {
            assert_eq!(c.status, Status::Limited, "{c:?}");
        }
    }

    #[test]
    fn render_marks_limited_lines() {
        let r = Report {
            version: 1,
            limited: true,
            checks: vec![
                check("a", true, "x".into(), "fine"),
                check("bb", false, "y".into(), "not fine"),
            ],
        };
        let t = render(&r);
        assert_eq!(
            t,
            "seal doctor: 1 of 2 checks limited on this machine (a limited machine is not an error)\n\
             ok       a   x\n           fine\n\
             limited  bb  y\n           not fine\n"
        );
    }
}
