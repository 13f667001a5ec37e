//! Ephemeral ports (family `net`): `bind` to port 0 lets the kernel pick a port, a different
//! one every run, which servers print and clients are told. Sealed, the shim picks instead:
//! candidates from a seeded sequence (the run's seed, this process's place in the process
//! tree, and how many port-0 binds it made before) inside the kernel's ephemeral range
//! (`/proc/sys/net/ipv4/ip_local_port_range`), the first one that is free. A candidate in use
//! (`EADDRINUSE`: another server of the run, or of the machine) moves on to the next, so two
//! sealed servers started at once both start. TCP and UDP, IPv4 and IPv6. Two runs at once
//! with one seed try the same candidates: a socket that may share its port (`SO_REUSEADDR`,
//! `SO_REUSEPORT`) takes a candidate only with a machine-wide claim on it ([`Claim`]), so the
//! second run moves on instead of sharing the first's port.
//!
//! What stays the kernel's: source ports of outgoing connections and of UDP sends from an
//! unbound socket (the kernel binds those itself, not through `bind`), binds made through
//! `syscall(SYS_bind)`, and a port taken by a program outside the run (the run then moves on
//! to the next candidate, so its port differs from a run where it was free).

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use libc::{c_int, sockaddr, socklen_t};
use seal_abi::{flags, mix64, unsealed};

use crate::core::{census, config, sys};
use crate::hook;

/// Candidates tried before giving the bind back to the kernel.
const TRIES: u64 = 128;

/// `lo << 16 | hi` of the ephemeral range, 0 until read.
static RANGE: AtomicU32 = AtomicU32::new(0);
/// Port-0 binds this process image made so far.
static BINDS: AtomicU64 = AtomicU64::new(0);

/// Parses `ip_local_port_range` ("32768\t60999\n"); `None` unless `0 < lo <= hi <= 65535`.
pub fn parse_range(s: &[u8]) -> Option<(u16, u16)> {
    let mut it = s
        .split(|c| c.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
        .map(seal_abi::settings::parse_u64);
    let lo = it.next()??;
    let hi = it.next()??;
    (lo > 0 && lo <= hi && hi <= 65535).then_some((lo as u16, hi as u16))
}

fn range() -> (u16, u16) {
    let r = RANGE.load(Relaxed);
    if r != 0 {
        return ((r >> 16) as u16, r as u16);
    }
    let mut buf = [0u8; 64];
    let n = sys::read_file(b"/proc/sys/net/ipv4/ip_local_port_range\0", &mut buf);
    let (lo, hi) = parse_range(&buf[..n]).unwrap_or((32768, 60999));
    RANGE.store(((lo as u32) << 16) | hi as u32, Relaxed);
    (lo, hi)
}

/// Candidate `i` of the bind with sequence key `key`, in `lo..=hi`.
pub fn candidate(key: u64, i: u64, lo: u16, hi: u16) -> u16 {
    let span = (hi - lo) as u64 + 1;
    lo + (mix64(key ^ mix64(i.wrapping_add(0x0b1d))) % span) as u16
}

/// Offset of the port in the address, when `addr` is an IPv4/IPv6 address with port 0.
///
/// # Safety
/// `addr` valid for `len` bytes (or null).
unsafe fn port_zero(addr: *const sockaddr, len: socklen_t) -> Option<usize> {
    if addr.is_null() || (len as usize) < 4 || len as usize > 128 {
        return None;
    }
    // SAFETY: at least 4 bytes, per the contract.
    let (family, port) = unsafe {
        let b = addr as *const u8;
        (
            (*(addr)).sa_family as c_int,
            u16::from_ne_bytes([*b.add(2), *b.add(3)]),
        )
    };
    let min = match family {
        libc::AF_INET => core::mem::size_of::<libc::sockaddr_in>(),
        libc::AF_INET6 => core::mem::size_of::<libc::sockaddr_in6>(),
        _ => return None,
    };
    ((len as usize) >= min && port == 0).then_some(2)
}

fn stream_or_datagram(fd: c_int) -> bool {
    matches!(
        sys::getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TYPE),
        Some(libc::SOCK_STREAM | libc::SOCK_DGRAM)
    )
}

/// The socket's type when it may share its port (`SO_REUSEADDR` or `SO_REUSEPORT` set): the
/// seeded candidates are the same in every run with the seed, and two such sockets of two
/// runs at once, both bound before either listens, would both be given the port (the
/// second `listen` then fails with `EADDRINUSE`, or the two share it). `None`: the kernel's
/// own check keeps the port to one socket.
fn shared_kind(fd: c_int) -> Option<c_int> {
    let on = |opt| sys::getsockopt_int(fd, libc::SOL_SOCKET, opt).is_some_and(|v| v != 0);
    if !(on(libc::SO_REUSEADDR) || on(libc::SO_REUSEPORT)) {
        return None;
    }
    sys::getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TYPE)
}

/// Claims kept for the process's life (bounded: past it, binds go unclaimed as before).
const MAX_CLAIMS: u32 = 64;
static CLAIMS: AtomicU32 = AtomicU32::new(0);
/// Kept claims go to descriptors from here up, out of the program's way.
const CLAIM_FD_FLOOR: i64 = 700;

/// A machine-wide claim on a port by a sealed process: the abstract Unix socket
/// `\0seal-port-<type>-<port>`, which one socket at a time can be bound to, kept open while
/// the process lives (the kernel drops it when the process ends: nothing to clean up).
struct Claim(i32);

impl Claim {
    /// `None`: another process holds it. A claim that cannot be made (no descriptor left, the
    /// limit reached) is an empty claim: the bind goes on unclaimed, as before claims.
    fn take(kind: c_int, port: u16) -> Option<Claim> {
        if CLAIMS.load(Relaxed) >= MAX_CLAIMS {
            return Some(Claim(-1));
        }
        // SAFETY: plain integer arguments.
        let fd = unsafe {
            sys::syscall3(
                libc::SYS_socket,
                libc::AF_UNIX as i64,
                (libc::SOCK_DGRAM | libc::SOCK_CLOEXEC) as i64,
                0,
            )
        } as i32;
        if fd < 0 {
            return Some(Claim(-1));
        }
        // SAFETY: an all-zero sockaddr_un is a valid value of this plain C struct.
        let mut a: libc::sockaddr_un = unsafe { core::mem::zeroed() };
        a.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let mut name = sys::StackBuf::<40>::new();
        name.push(b"seal-port-")
            .push_u64(kind as u64)
            .push(b"-")
            .push_u64(port as u64);
        for (i, b) in name.as_bytes().iter().enumerate() {
            a.sun_path[i + 1] = *b as libc::c_char;
        }
        let len = core::mem::size_of::<libc::sa_family_t>() + 1 + name.as_bytes().len();
        // SAFETY: a valid address of `len` bytes.
        let r =
            unsafe { sys::syscall3(libc::SYS_bind, fd as i64, &a as *const _ as i64, len as i64) };
        if r == 0 {
            return Some(Claim(fd));
        }
        sys::close(fd);
        (r != -(libc::EADDRINUSE as i64)).then_some(Claim(-1))
    }

    /// Keeps the claim for the process's life, on a high descriptor.
    fn keep(self) {
        if self.0 < 0 {
            return;
        }
        CLAIMS.fetch_add(1, Relaxed);
        // SAFETY: plain integer arguments, our own descriptor.
        let high = unsafe {
            sys::syscall3(
                libc::SYS_fcntl,
                self.0 as i64,
                libc::F_DUPFD_CLOEXEC as i64,
                CLAIM_FD_FLOOR,
            )
        };
        if high >= 0 {
            sys::close(self.0);
        }
    }

    fn release(self) {
        if self.0 >= 0 {
            sys::close(self.0);
        }
    }
}

hook! {
    /// # Safety
    /// As `bind(2)`.
    fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    caller = ra;
    |real| {
        // SAFETY: per the contract.
        let Some(off) = (unsafe { port_zero(addr, len) }) else {
            return real(fd, addr, len);
        };
        census::count(seal_abi::Fid::Bind, seal_abi::NO_DETAIL, ra);
        if !config::sealed(flags::NET) || crate::core::real::Reentry::inside() || !stream_or_datagram(fd) {
            return real(fd, addr, len);
        }
        let mut copy = [0u8; 128];
        // SAFETY: addr is valid for len (<= 128) bytes.
        unsafe { core::ptr::copy_nonoverlapping(addr as *const u8, copy.as_mut_ptr(), len as usize) };
        let (lo, hi) = range();
        let n = BINDS.fetch_add(1, Relaxed);
        let key = mix64(config::SEED.load(Relaxed) ^ mix64(crate::core::thread::image_lineage() ^ mix64(n)));
        let kind = shared_kind(fd);
        for i in 0..TRIES {
            let port = candidate(key, i, lo, hi);
            // Claimed by another sealed process (a run at once with the seed): next one.
            let claim = match kind {
                Some(k) => match Claim::take(k, port) {
                    Some(c) => Some(c),
                    None => continue,
                },
                None => None,
            };
            copy[off..off + 2].copy_from_slice(&port.to_be_bytes());
            let r = real(fd, copy.as_ptr() as *const sockaddr, len);
            if r == 0 {
                if let Some(c) = claim {
                    c.keep();
                }
                return r;
            }
            let e = sys::errno();
            if let Some(c) = claim {
                c.release();
            }
            sys::set_errno(e);
            if e != libc::EADDRINUSE {
                return r;
            }
        }
        let m = b"no free port among the seeded candidates; the kernel picks this bind's port";
        census::record_unsealed(unsealed::UNSUPPORTED_CALL, m);
        sys::warn(m);
        real(fd, addr, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kernel_range() {
        assert_eq!(parse_range(b"32768\t60999\n"), Some((32768, 60999)));
        assert_eq!(parse_range(b"1024 1024"), Some((1024, 1024)));
        assert_eq!(parse_range(b"60999 32768"), None);
        assert_eq!(parse_range(b"0 10"), None);
        assert_eq!(parse_range(b"x"), None);
    }

    #[test]
    fn candidates_stay_in_range_and_spread() {
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..200 {
            let p = candidate(42, i, 32768, 60999);
            assert!((32768..=60999).contains(&p));
            seen.insert(p);
        }
        assert!(seen.len() > 190);
        assert_ne!(candidate(1, 0, 32768, 60999), candidate(2, 0, 32768, 60999));
        assert_eq!(candidate(7, 3, 5, 5), 5);
    }
}
