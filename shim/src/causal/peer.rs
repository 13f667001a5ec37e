//! What a socket is connected to, with raw system calls: its address family, the inode of a
//! UNIX socket's peer (the kernel's `sock_diag` netlink interface, as `ss -x` asks it), and
//! the address pair of an IP socket. Looked up once per descriptor (`super::keys` caches).

use crate::core::sys;

/// `SO_DOMAIN` of a socket.
pub fn domain(fd: i32) -> Option<i32> {
    sys::getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_DOMAIN)
}

/// An FNV-1a hash of an address (the bytes the kernel returned).
fn hash(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| {
        (h ^ c as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// `(local, remote)` address hashes of a connected IP socket.
pub fn inet_pair(fd: i32) -> Option<(u64, u64)> {
    let name = |nr: i64| -> Option<u64> {
        // SAFETY: sockaddr_storage is plain data.
        let mut ss: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
        let mut len = core::mem::size_of::<libc::sockaddr_storage>() as u32;
        // SAFETY: valid out-pointers of the sizes given.
        let r = unsafe {
            sys::syscall3(
                nr,
                fd as i64,
                &mut ss as *mut _ as i64,
                &mut len as *mut u32 as i64,
            )
        };
        if r != 0 {
            return None;
        }
        let n = (len as usize).min(core::mem::size_of::<libc::sockaddr_storage>());
        // SAFETY: ss is n readable bytes.
        Some(hash(unsafe {
            core::slice::from_raw_parts(&ss as *const _ as *const u8, n)
        }))
    };
    Some((name(libc::SYS_getsockname)?, name(libc::SYS_getpeername)?))
}

const NETLINK_SOCK_DIAG: i64 = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const UDIAG_SHOW_PEER: u32 = 4;
const UNIX_DIAG_PEER: u16 = 2;

#[repr(C)]
struct Request {
    // nlmsghdr
    len: u32,
    kind: u16,
    flags: u16,
    seq: u32,
    pid: u32,
    // unix_diag_req
    family: u8,
    protocol: u8,
    pad: u16,
    states: u32,
    ino: u32,
    show: u32,
    cookie: [u32; 2],
}

/// The inode of the socket at the other end of the UNIX socket with inode `ino`.
pub fn unix_peer(ino: u64) -> Option<u64> {
    let ino = u32::try_from(ino).ok()?;
    // SAFETY: plain integers.
    let nl = unsafe {
        sys::syscall3(
            libc::SYS_socket,
            libc::AF_NETLINK as i64,
            (libc::SOCK_DGRAM | libc::SOCK_CLOEXEC) as i64,
            NETLINK_SOCK_DIAG,
        )
    };
    if nl < 0 {
        return None;
    }
    let nl = nl as i32;
    let peer = ask(nl, ino);
    sys::close(nl);
    peer
}

fn ask(nl: i32, ino: u32) -> Option<u64> {
    let req = Request {
        len: core::mem::size_of::<Request>() as u32,
        kind: SOCK_DIAG_BY_FAMILY,
        flags: libc::NLM_F_REQUEST as u16,
        seq: 1,
        pid: 0,
        family: libc::AF_UNIX as u8,
        protocol: 0,
        pad: 0,
        states: !0,
        ino,
        show: UDIAG_SHOW_PEER,
        cookie: [!0, !0],
    };
    // SAFETY: sockaddr_nl is plain data.
    let mut to: libc::sockaddr_nl = unsafe { core::mem::zeroed() };
    to.nl_family = libc::AF_NETLINK as u16;
    // SAFETY: valid buffers of the sizes given.
    let r = unsafe {
        sys::syscall6(
            libc::SYS_sendto,
            nl as i64,
            &req as *const _ as i64,
            req.len as i64,
            0,
            &to as *const _ as i64,
            core::mem::size_of::<libc::sockaddr_nl>() as i64,
        )
    };
    if r < 0 {
        return None;
    }
    let mut buf = [0u8; 512];
    let n = sys::fill(libc::SYS_recvfrom, nl, &mut buf, [0; 3]);
    if n <= 0 {
        return None;
    }
    parse_peer(&buf[..n as usize], ino)
}

/// The `UNIX_DIAG_PEER` attribute of the answer about `ino`.
fn parse_peer(msg: &[u8], ino: u32) -> Option<u64> {
    let u16_at = |o: usize| Some(u16::from_ne_bytes(msg.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_ne_bytes(msg.get(o..o + 4)?.try_into().ok()?));
    let len = u32_at(0)? as usize;
    if u16_at(4)? != SOCK_DIAG_BY_FAMILY || len > msg.len() || u32_at(20)? != ino {
        return None;
    }
    // nlmsghdr (16) + unix_diag_msg (16), then attributes aligned to 4.
    let mut o = 32;
    while o + 4 <= len {
        let alen = u16_at(o)? as usize;
        if alen < 4 {
            return None;
        }
        if u16_at(o + 2)? == UNIX_DIAG_PEER {
            return u32_at(o + 4).map(u64::from).filter(|&p| p != 0);
        }
        o += (alen + 3) & !3;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::io::AsRawFd;
    use std::os::unix::net::UnixStream;

    fn ino(fd: i32) -> u64 {
        // SAFETY: plain data, valid out-pointer.
        let mut st: libc::stat = unsafe { core::mem::zeroed() };
        assert_eq!(unsafe { libc::fstat(fd, &mut st) }, 0);
        st.st_ino
    }

    #[test]
    fn a_socketpair_end_names_the_other() {
        let (a, b) = UnixStream::pair().unwrap();
        let (ia, ib) = (ino(a.as_raw_fd()), ino(b.as_raw_fd()));
        assert_eq!(domain(a.as_raw_fd()), Some(libc::AF_UNIX));
        assert_eq!(unix_peer(ia), Some(ib));
        assert_eq!(unix_peer(ib), Some(ia));
    }

    #[test]
    fn ip_pairs_mirror_each_other() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let (cl, cr) = inet_pair(c.as_raw_fd()).unwrap();
        let (sl, sr) = inet_pair(s.as_raw_fd()).unwrap();
        assert_eq!((cl, cr), (sr, sl));
        assert_eq!(inet_pair(l.as_raw_fd()), None, "a listener has no peer");
    }

    #[test]
    fn answers_about_other_sockets_are_ignored() {
        assert_eq!(parse_peer(&[0u8; 8], 5), None);
        let mut m = [0u8; 40];
        m[0..4].copy_from_slice(&40u32.to_ne_bytes());
        m[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        m[20..24].copy_from_slice(&7u32.to_ne_bytes());
        m[32..34].copy_from_slice(&8u16.to_ne_bytes());
        m[34..36].copy_from_slice(&UNIX_DIAG_PEER.to_ne_bytes());
        m[36..40].copy_from_slice(&9u32.to_ne_bytes());
        assert_eq!(parse_peer(&m, 7), Some(9));
        assert_eq!(parse_peer(&m, 8), None);
    }
}
