//! `/proc/<pid>/stat` and `status` (and `/proc/uptime`) as a sealed process reads them, rewritten the same by
//! libseal (`shim/src/open/procfs.rs`, from a stack buffer) and by the static-image supervisor
//! (for a static image's opens): pids through the run's virtual ones, times sealed.
//!
//! * `stat` fields 1 (pid or tid), 4 (ppid), 5 (pgrp), 6 (session) and 8 (tpgid) through
//!   `virt`; 14-15 (utime, stime) and 22 (starttime) the sealed [`Times`]; 10-13 (faults),
//!   16-17 (children's times), 39 (the CPU it last ran on), 43-44 (guest times) 0;
//! * `status`: the numbers of the lines `Pid`, `PPid`, `Tgid`, `TracerPid`, `NStgid`,
//!   `NSpid`, `NSpgid`, `NSsid` through `virt`.

use crate::machine_file::Sink;
use crate::settings::parse_i64;

/// Clock ticks per second of `/proc` times (`USER_HZ`, 100 on every Linux ABI we run on).
pub const USER_HZ: i64 = 100;
const NS_PER_TICK: i64 = 1_000_000_000 / USER_HZ;

/// Sealed times of a `stat` line, in clock ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Times {
    pub utime: u64,
    pub stime: u64,
    pub start: u64,
}

/// Nanoseconds as clock ticks (negative as 0).
pub fn ticks(ns: i64) -> u64 {
    (ns.max(0) / NS_PER_TICK) as u64
}

/// Rewrites one `stat` line: pids through `virt` (when given), times (when given). `false`
/// when the line does not parse.
pub fn rewrite_stat(
    src: &[u8],
    virt: Option<&dyn Fn(i64) -> i64>,
    times: Option<Times>,
    out: &mut impl Sink,
) -> bool {
    // "pid (comm) state ppid …": comm may hold spaces and parentheses; it ends at the last ')'.
    let Some(open) = src.iter().position(|&c| c == b'(') else {
        return false;
    };
    let Some(close) = src.iter().rposition(|&c| c == b')') else {
        return false;
    };
    if open < 2 || close < open || src[open - 1] != b' ' {
        return false;
    }
    let Some(pid) = parse_i64(&src[..open - 1]) else {
        return false;
    };
    out.put_i64(virt.map_or(pid, |f| f(pid)));
    out.put(&src[open - 1..=close]);
    let mut field = 2usize;
    let mut i = close + 1;
    while i < src.len() {
        let c = src[i];
        if c != b' ' {
            // Copy a trailing newline or anything odd as is.
            out.put(&src[i..i + 1]);
            i += 1;
            continue;
        }
        out.put(b" ");
        i += 1;
        field += 1;
        let end = src[i..]
            .iter()
            .position(|&c| c == b' ' || c == b'\n')
            .map_or(src.len(), |n| i + n);
        let word = &src[i..end];
        let new = match (field, virt, times) {
            (4 | 5 | 6 | 8, Some(f), _) => parse_i64(word).map(|v| f(v) as u64),
            (10..=13 | 16 | 17 | 39 | 43 | 44, _, Some(_)) => Some(0),
            (14, _, Some(t)) => Some(t.utime),
            (15, _, Some(t)) => Some(t.stime),
            (22, _, Some(t)) => Some(t.start),
            _ => None,
        };
        match new {
            // tpgid is -1 without a terminal: keep the sign.
            Some(v) if field == 8 && word.first() == Some(&b'-') => {
                out.put(word);
                let _ = v;
            }
            Some(v) => {
                out.put_i64(v as i64);
            }
            None => {
                out.put(word);
            }
        }
        i = end;
    }
    true
}

/// The `status` lines that hold pids.
const PID_KEYS: [&[u8]; 8] = [
    b"Pid:",
    b"PPid:",
    b"Tgid:",
    b"TracerPid:",
    b"NStgid:",
    b"NSpid:",
    b"NSpgid:",
    b"NSsid:",
];

/// Rewrites `status`: the numbers of the pid lines through `virt`.
pub fn rewrite_status(src: &[u8], virt: &dyn Fn(i64) -> i64, out: &mut impl Sink) {
    for line in src.split_inclusive(|&c| c == b'\n') {
        let Some(key) = PID_KEYS.iter().find(|k| line.starts_with(k)) else {
            out.put(line);
            continue;
        };
        out.put(key);
        let mut i = key.len();
        while i < line.len() {
            if line[i].is_ascii_digit() {
                let end = line[i..]
                    .iter()
                    .position(|c| !c.is_ascii_digit())
                    .map_or(line.len(), |n| i + n);
                match parse_i64(&line[i..end]) {
                    Some(v) => out.put_i64(virt(v)),
                    None => out.put(&line[i..end]),
                };
                i = end;
            } else {
                out.put(&line[i..i + 1]);
                i += 1;
            }
        }
    }
}

/// `/proc/uptime` for a boot time of `boot_ns`: seconds with two decimals, truncated as the
/// kernel does; the idle time (the kernel sums it over every CPU) is the same number.
pub fn uptime(boot_ns: i64, out: &mut impl Sink) {
    let cs = boot_ns.max(0) / 10_000_000;
    for sep in [b" ", b"\n"] {
        out.put_i64(cs / 100);
        out.put(b".");
        if cs % 100 < 10 {
            out.put(b"0");
        }
        out.put_i64(cs % 100);
        out.put(sep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Buf([u8; 512], usize);
    impl Sink for Buf {
        fn put(&mut self, s: &[u8]) {
            self.0[self.1..self.1 + s.len()].copy_from_slice(s);
            self.1 += s.len();
        }
    }

    #[test]
    fn stat_and_status_take_virtual_pids_and_sealed_times() {
        let virt = |v: i64| if v == 4242 { 1000 } else { v };
        let mut b = Buf([0; 512], 0);
        let t = Times {
            utime: 1,
            stime: 2,
            start: 3,
        };
        let src = b"4242 (a b) R 4242 1 1 0 -1 0 3 0 0 0 31 7 0 0 20 0 1 0 5 6\n";
        assert!(rewrite_stat(src, Some(&virt), Some(t), &mut b));
        assert_eq!(
            &b.0[..b.1],
            b"1000 (a b) R 1000 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 3 6\n"
        );
        assert!(!rewrite_stat(b"4242 sh", None, None, &mut Buf([0; 512], 0)));
        let mut b = Buf([0; 512], 0);
        rewrite_status(b"Name:\tx\nPid:\t4242\nNSpid:\t4242\t7\n", &virt, &mut b);
        assert_eq!(&b.0[..b.1], b"Name:\tx\nPid:\t1000\nNSpid:\t1000\t7\n");
        assert_eq!(ticks(86_400 * 1_000_000_000), 8_640_000);
        let mut b = Buf([0; 512], 0);
        uptime(86_400_000_000_000 + 50_123_456, &mut b);
        assert_eq!(&b.0[..b.1], b"86400.05 86400.05\n");
    }
}

/// Whose directory of `/proc`: the path's first component after `/proc/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// `self`
    Process,
    /// `thread-self`
    Thread,
    /// a number, as written (virtual, or a real pid from a listing of `/proc`)
    Pid(i32),
}

/// A path under a process directory of `/proc`, parsed the same by libseal and the
/// static-image supervisor: whose, which task, and what follows (no leading slash, may be
/// empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcDir<'a> {
    pub who: Who,
    pub task: Option<i32>,
    pub rest: &'a [u8],
}

/// `p`, a path after `/proc/` (collapsed: no `//` or `/./`), as a process directory's.
pub fn proc_dir(p: &[u8]) -> Option<ProcDir<'_>> {
    let (first, mut rest) = split(p);
    let who = match first {
        b"self" => Who::Process,
        b"thread-self" => Who::Thread,
        d => Who::Pid(number(d)?),
    };
    let mut task = None;
    if who != Who::Thread {
        if let Some(r) = rest.strip_prefix(b"task/") {
            let (t, r) = split(r);
            task = Some(number(t)?);
            rest = r;
        }
    }
    Some(ProcDir { who, task, rest })
}

/// `(component, after its slash)`; the rest is empty when there is no slash.
fn split(p: &[u8]) -> (&[u8], &[u8]) {
    match p.iter().position(|&c| c == b'/') {
        Some(i) => (&p[..i], &p[i + 1..]),
        None => (p, &[]),
    }
}

/// A positive pid as `/proc` spells it (no sign, no leading zero).
fn number(d: &[u8]) -> Option<i32> {
    if d.is_empty() || d.len() > 9 || d[0] == b'0' || !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    d.iter().try_fold(0i32, |n, &c| {
        n.checked_mul(10)?.checked_add((c - b'0') as i32)
    })
}
