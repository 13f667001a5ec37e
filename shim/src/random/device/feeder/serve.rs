//! Inside the feeder process: its set-up, its table of pipes, and the loop that takes new
//! pipes from its socket and writes each pipe's stream as far as its reader lets it.

use super::*;

/// First thing a feeder does: its own session (no terminal signals), a name, no descriptor but
/// its socket.
pub(super) fn feeder_setup(sock: i32) {
    // SAFETY (all): raw system calls with integer arguments or pointers to constants.
    unsafe {
        sys::syscall3(libc::SYS_setsid, 0, 0, 0);
        sys::syscall6(
            libc::SYS_prctl,
            libc::PR_SET_NAME as i64,
            c"seal-random".as_ptr() as i64,
            0,
            0,
            0,
            0,
        );
        close_all_but(sock);
    }
}

/// One pipe a feeder writes: its write end and its stream.
#[repr(C)]
pub(super) struct Pipe {
    fd: i32,
    stream: EntropyStream,
}

/// A feeder's pipes and its poll list (slot 0: the socket). All-zero is an empty table.
#[repr(C)]
pub(super) struct Table {
    n: usize,
    pipes: [Pipe; MAX_PIPES],
    polls: [libc::pollfd; MAX_PIPES + 1],
}

/// The feeder's loop: take new pipes from `sock`, write each pipe's stream as far as its
/// reader lets it, drop pipes whose readers are gone; return after [`LINGER_MS`] without pipes.
pub(super) fn serve(sock: i32, t: &mut Table) {
    let mut buf = [0u8; BLOCK];
    let linger = libc::timespec {
        tv_sec: 0,
        tv_nsec: LINGER_MS * 1_000_000,
    };
    loop {
        let n = t.n;
        t.polls[0] = libc::pollfd {
            fd: sock,
            events: libc::POLLIN,
            revents: 0,
        };
        for i in 0..n {
            t.polls[i + 1] = libc::pollfd {
                fd: t.pipes[i].fd,
                events: libc::POLLOUT,
                revents: 0,
            };
        }
        let timeout = if n == 0 {
            &linger as *const libc::timespec as i64
        } else {
            0
        };
        // SAFETY: n + 1 valid pollfds; no signal mask change.
        let r = unsafe {
            sys::syscall6(
                libc::SYS_ppoll,
                t.polls.as_mut_ptr() as i64,
                (n + 1) as i64,
                timeout,
                0,
                8,
                0,
            )
        };
        if r == 0 && n == 0 {
            return;
        }
        if r < 0 {
            if n == 0 {
                return;
            }
            continue;
        }
        // Backwards, so a swap-remove only moves a pipe already looked at.
        for i in (0..n).rev() {
            let re = t.polls[i + 1].revents;
            let keep = if re & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                false
            } else if re & libc::POLLOUT != 0 {
                pump(&mut t.pipes[i], &mut buf)
            } else {
                true
            };
            if !keep {
                drop_pipe(t, i);
            }
        }
        if t.polls[0].revents & libc::POLLIN != 0 {
            while receive(sock, t, &mut buf) {}
        }
    }
}

/// Closes pipe `i` and moves the last one into its place.
fn drop_pipe(t: &mut Table, i: usize) {
    sys::close(t.pipes[i].fd);
    t.n -= 1;
    let last = t.n;
    if i != last {
        t.pipes[i].fd = t.pipes[last].fd;
        t.pipes[i].stream = t.pipes[last].stream;
    }
}

/// Writes up to [`BLOCKS_PER_TURN`] blocks of `p`'s stream; `false` once its reader is gone.
fn pump(p: &mut Pipe, buf: &mut [u8; BLOCK]) -> bool {
    for _ in 0..BLOCKS_PER_TURN {
        let at = p.stream.pos;
        p.stream.fill(buf);
        // SAFETY: buf is valid for BLOCK bytes.
        let r = unsafe {
            sys::syscall3(
                libc::SYS_write,
                p.fd as i64,
                buf.as_ptr() as i64,
                BLOCK as i64,
            )
        };
        match check(r) {
            Ok(n) if n as usize == BLOCK => {}
            // Not expected (a block is PIPE_BUF): the rest is written next time.
            Ok(n) => {
                p.stream.pos = at + n as u64;
                return true;
            }
            Err(libc::EAGAIN) | Err(libc::EINTR) => {
                p.stream.pos = at;
                return true;
            }
            Err(_) => return false,
        }
    }
    true
}

/// Takes one queued message from `sock`: a new pipe, fed at once (its first bytes tell the
/// opener the feeder has it). `false` when the queue is empty.
fn receive(sock: i32, t: &mut Table, buf: &mut [u8; BLOCK]) -> bool {
    let mut msg = Msg { seed: 0, id: 0 };
    let mut iov = libc::iovec {
        iov_base: &mut msg as *mut Msg as *mut libc::c_void,
        iov_len: core::mem::size_of::<Msg>(),
    };
    let mut control = [0u64; 16];
    // SAFETY: an all-zero msghdr is a valid value of this plain C struct.
    let mut mh: libc::msghdr = unsafe { core::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    mh.msg_controllen = core::mem::size_of_val(&control);
    // SAFETY: mh and everything it points to live until the call returns.
    let r = unsafe {
        sys::syscall3(
            libc::SYS_recvmsg,
            sock as i64,
            &mut mh as *mut _ as i64,
            (libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC) as i64,
        )
    };
    let Ok(len) = check(r) else {
        return false;
    };
    let mut fds = [-1i32; 4];
    let mut nfds = 0;
    let mut uid = u32::MAX;
    // SAFETY: walking the control messages the kernel wrote, within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&mh);
        while !c.is_null() {
            let data = libc::CMSG_DATA(c);
            let bytes = (*c).cmsg_len as usize - (data as usize - c as usize);
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                for k in 0..bytes / 4 {
                    let fd = (data as *const i32).add(k).read_unaligned();
                    if nfds < fds.len() {
                        fds[nfds] = fd;
                        nfds += 1;
                    } else {
                        sys::close(fd);
                    }
                }
            } else if (*c).cmsg_level == libc::SOL_SOCKET
                && (*c).cmsg_type == libc::SCM_CREDENTIALS
                && bytes >= core::mem::size_of::<libc::ucred>()
            {
                uid = (data as *const libc::ucred).read_unaligned().uid;
            }
            c = libc::CMSG_NXTHDR(&mh, c);
        }
    }
    // Only whole messages with one pipe from this user; anything else is dropped (an opener
    // whose pipe is dropped sees end-of-file and starts another feeder).
    let valid = len as usize == core::mem::size_of::<Msg>() && nfds == 1 && uid == sys::geteuid();
    for &fd in &fds[..nfds] {
        if valid && t.n < MAX_PIPES {
            let i = t.n;
            t.pipes[i].fd = fd;
            t.pipes[i].stream = EntropyStream::new(msg.seed, msg.id);
            t.n += 1;
            if !pump(&mut t.pipes[i], buf) {
                drop_pipe(t, i);
            }
        } else {
            sys::close(fd);
        }
    }
    true
}

/// Closes every descriptor except `keep`.
///
/// # Safety
/// Only for the feeder, which owns nothing else.
unsafe fn close_all_but(keep: i32) {
    const SYS_CLOSE_RANGE: i64 = 436;
    let mut ok = true;
    // SAFETY (all): closing descriptors in our own (copied) table.
    unsafe {
        if keep > 0 {
            ok &= sys::syscall3(SYS_CLOSE_RANGE, 0, keep as i64 - 1, 0) == 0;
        }
        ok &= sys::syscall3(SYS_CLOSE_RANGE, keep as i64 + 1, u32::MAX as i64, 0) == 0;
        if !ok {
            for fd in 0..65536i64 {
                if fd != keep as i64 {
                    sys::syscall3(libc::SYS_close, fd, 0, 0);
                }
            }
        }
    }
}
