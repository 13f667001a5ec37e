//! The sends and receives of `crate::causal`, exported: writes and reads on channels, and
//! joins. None of them is
//! counted in the census (they carry no entropy; the census counts what is sealed).
//! `read`/`__read_chk` are exported by `crate::core::descriptors`,
//! timed joins by `crate::wait::hooks::sync`; they call in here.

use libc::{c_int, c_void, iovec, msghdr, size_t, sockaddr, socklen_t, ssize_t};

use super::{join_done, received, send as sending};
use crate::hook;

/// A read-like call on `fd` returned `r`: data or end of file is a receive.
#[inline(always)]
pub fn after_read(fd: c_int, r: ssize_t) -> ssize_t {
    received(fd, r);
    r
}

/// Bytes in an iovec array.
///
/// # Safety
/// `iov` valid for `n` entries (or null).
unsafe fn iov_len(iov: *const iovec, n: usize) -> usize {
    if iov.is_null() {
        return 0;
    }
    // SAFETY: per the contract.
    (0..n)
        .map(|i| unsafe { (*iov.add(i)).iov_len })
        .fold(0, usize::saturating_add)
}

hook! {
    /// # Safety
    /// As `write(2)`.
    fn write(fd: c_int, buf: *const c_void, len: size_t) -> ssize_t;
    uncounted;
    |real| sending(fd, len, || real(fd, buf, len))
}

hook! {
    /// # Safety
    /// As `writev(2)`.
    fn writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
    uncounted;
    // SAFETY: the caller's array of n entries.
    |real| sending(fd, unsafe { iov_len(iov, n.max(0) as usize) }, || real(fd, iov, n))
}

hook! {
    /// # Safety
    /// As `send(2)`.
    fn send(fd: c_int, buf: *const c_void, len: size_t, fl: c_int) -> ssize_t;
    uncounted;
    |real| sending(fd, len, || real(fd, buf, len, fl))
}

hook! {
    /// # Safety
    /// As `sendto(2)`.
    fn sendto(
        fd: c_int,
        buf: *const c_void,
        len: size_t,
        fl: c_int,
        to: *const sockaddr,
        tolen: socklen_t,
    ) -> ssize_t;
    uncounted;
    |real| sending(fd, len, || real(fd, buf, len, fl, to, tolen))
}

hook! {
    /// # Safety
    /// As `sendmsg(2)`.
    fn sendmsg(fd: c_int, msg: *const msghdr, fl: c_int) -> ssize_t;
    uncounted;
    |real| {
        let n = if msg.is_null() {
            0
        } else {
            // SAFETY: a valid msghdr with its iovec array, per the contract.
            unsafe { iov_len((*msg).msg_iov, (*msg).msg_iovlen) }
        };
        sending(fd, n, || real(fd, msg, fl))
    }
}

hook! {
    /// # Safety
    /// As `readv(2)`.
    fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
    uncounted;
    |real| after_read(fd, real(fd, iov, n))
}

hook! {
    /// # Safety
    /// As `recv(2)`.
    fn recv(fd: c_int, buf: *mut c_void, len: size_t, fl: c_int) -> ssize_t;
    uncounted;
    |real| after_read(fd, real(fd, buf, len, fl))
}

hook! {
    /// # Safety
    /// As glibc's fortified `__recv_chk`.
    fn __recv_chk(fd: c_int, buf: *mut c_void, len: size_t, buflen: size_t, fl: c_int) -> ssize_t;
    uncounted;
    |real| after_read(fd, real(fd, buf, len, buflen, fl))
}

hook! {
    /// # Safety
    /// As `recvfrom(2)`.
    fn recvfrom(
        fd: c_int,
        buf: *mut c_void,
        len: size_t,
        fl: c_int,
        from: *mut sockaddr,
        fromlen: *mut socklen_t,
    ) -> ssize_t;
    uncounted;
    |real| after_read(fd, real(fd, buf, len, fl, from, fromlen))
}

hook! {
    /// # Safety
    /// As glibc's fortified `__recvfrom_chk`.
    fn __recvfrom_chk(
        fd: c_int,
        buf: *mut c_void,
        len: size_t,
        buflen: size_t,
        fl: c_int,
        from: *mut sockaddr,
        fromlen: *mut socklen_t,
    ) -> ssize_t;
    uncounted;
    |real| after_read(fd, real(fd, buf, len, buflen, fl, from, fromlen))
}

hook! {
    /// # Safety
    /// As `recvmsg(2)`.
    fn recvmsg(fd: c_int, msg: *mut msghdr, fl: c_int) -> ssize_t;
    uncounted;
    |real| after_read(fd, real(fd, msg, fl))
}

// ---- joins ---------------------------------------------------------------------------------

hook! {
    /// # Safety
    /// As `pthread_join(3)`.
    fn pthread_join(th: libc::pthread_t, retval: *mut *mut c_void) -> c_int;
    uncounted;
    |real| join_done(th, real(th, retval))
}

// ---- epoll registrations ---------------------------------------------------------------------

hook! {
    /// # Safety
    /// As `epoll_ctl(2)`.
    fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut libc::epoll_event) -> c_int;
    uncounted;
    |real| {
        let r = real(epfd, op, fd, ev);
        // SAFETY: ev is null or valid per the contract.
        unsafe { super::epoll_ctl_done(epfd, op, fd, ev, r) };
        r
    }
}

// ---- stdio flushes -------------------------------------------------------------------------

hook! {
    /// # Safety
    /// As `fflush(3)`.
    fn fflush(f: *mut libc::FILE) -> c_int;
    uncounted;
    // SAFETY: f null or a valid stream per the contract.
    |real| unsafe { super::flushing(f, || real(f)) }
}

hook! {
    /// # Safety
    /// As `fflush_unlocked(3)`.
    fn fflush_unlocked(f: *mut libc::FILE) -> c_int;
    uncounted;
    // SAFETY: f null or a valid stream per the contract.
    |real| unsafe { super::flushing(f, || real(f)) }
}
