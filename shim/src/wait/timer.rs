//! Timers armed with an absolute deadline (`timerfd_settime`, `timer_settime` with ABSTIME):
//! which clock a timer is on (the kernel's `/proc` views of it), and its deadline translated
//! to the real clock.

use super::{from_real_clock, real_deadline, real_now, valid_timespec};
use crate::clock::{self, Domain};
use crate::core::sys;

/// The value of the first `key` line (`key:` then blanks, a decimal integer) of a `/proc`
/// text file such as `/proc/self/fdinfo/N`.
pub fn parse_key_i64(text: &[u8], key: &[u8]) -> Option<i64> {
    text.split(|&c| c == b'\n').find_map(|line| {
        let rest = line.strip_prefix(key)?;
        let rest = rest.strip_prefix(b":")?;
        let start = rest.iter().position(|&c| c != b' ' && c != b'\t')?;
        let end = rest[start..]
            .iter()
            .position(|&c| !(c.is_ascii_digit() || c == b'-'))
            .map_or(rest.len(), |e| start + e);
        sys::parse_i64(&rest[start..end])
    })
}

/// The `ClockID` of kernel timer `id` in a `/proc/self/timers` listing.
pub fn parse_timer_clock(text: &[u8], id: i64) -> Option<i64> {
    let mut in_timer = false;
    for line in text.split(|&c| c == b'\n') {
        if line.starts_with(b"ID:") {
            in_timer = parse_key_i64(line, b"ID") == Some(id);
        } else if in_timer && line.starts_with(b"ClockID:") {
            return parse_key_i64(line, b"ClockID");
        }
    }
    None
}

/// The clock a timerfd was created with (`/proc/self/fdinfo/FD`).
pub fn timerfd_clock(fd: libc::c_int) -> Option<libc::clockid_t> {
    let mut path = sys::StackBuf::<64>::new();
    path.push(b"/proc/self/fdinfo/").push_i64(fd as i64);
    let mut buf = [0u8; 512];
    let n = sys::read_file(path.as_cstr(), &mut buf);
    parse_key_i64(&buf[..n], b"clockid").map(|c| c as libc::clockid_t)
}

/// The kernel id behind a glibc `timer_t` (glibc 2.34+: a `SIGEV_THREAD` timer is a pointer
/// to glibc's `struct timer`, shifted right by one with the top bit set; its first field is
/// the kernel id. Any other timer_t is the kernel id itself).
///
/// # Safety
/// `t` is a timer_t returned by glibc's `timer_create`.
pub unsafe fn kernel_timer_id(t: libc::timer_t) -> i64 {
    let v = t as isize;
    if v < 0 {
        let p = ((v as usize) << 1) as *const libc::c_int;
        // SAFETY: per glibc's encoding, p is its live `struct timer`.
        unsafe { *p as i64 }
    } else {
        v as i64
    }
}

/// The clock of a POSIX timer (`/proc/self/timers`).
///
/// # Safety
/// As [`kernel_timer_id`].
pub unsafe fn posix_timer_clock(t: libc::timer_t) -> Option<libc::clockid_t> {
    // SAFETY: forwarded.
    let id = unsafe { kernel_timer_id(t) };
    let mut buf = [0u8; 4096];
    let n = sys::read_file(b"/proc/self/timers\0", &mut buf);
    parse_timer_clock(&buf[..n], id).map(|c| c as libc::clockid_t)
}

/// Translates an absolute `it_value` of a timer on `clock_id` (for `timerfd_settime` /
/// `timer_settime` with ABSTIME): real deadline = real now + (logical − logical now). A zero
/// `it_value` (disarm) and invalid values are kept.
pub fn translate_itimer(clock_id: libc::clockid_t, its: &libc::itimerspec) -> libc::itimerspec {
    let v = &its.it_value;
    let domain = clock::domain(clock_id);
    if domain == Domain::PassThrough || (v.tv_sec == 0 && v.tv_nsec == 0) || !valid_timespec(v) {
        return *its;
    }
    let value = clock::from_timespec(v);
    let target = clock::logical_of(domain, value);
    let (now_l, rnow) = (clock::now_logical(), real_now(clock_id));
    if from_real_clock(value, clock::value_at(domain, now_l), rnow) {
        return *its;
    }
    let real = real_deadline(rnow, target, now_l).max(1);
    libc::itimerspec {
        it_interval: its.it_interval,
        it_value: clock::to_timespec(real),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdinfo_and_timers() {
        let fdinfo = b"pos:\t0\nflags:\t02\nmnt_id:\t17\nino:\t1038\nclockid: 1\nticks: 0\n";
        assert_eq!(parse_key_i64(fdinfo, b"clockid"), Some(1));
        assert_eq!(parse_key_i64(fdinfo, b"nope"), None);
        let timers = b"ID: 1\nsignal: 32/0000559a4d09f470\nnotify: signal/tid.2774\nClockID: 0\n\
                       ID: 0\nsignal: 10/0000000000000000\nnotify: signal/pid.2773\nClockID: 1\n";
        assert_eq!(parse_timer_clock(timers, 0), Some(1));
        assert_eq!(parse_timer_clock(timers, 1), Some(0));
        assert_eq!(parse_timer_clock(timers, 2), None);
    }
}
