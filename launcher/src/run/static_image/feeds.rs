//! The pipes of the sealed random devices a static image opened (`serve/opens.rs`), kept
//! filled by the supervisor's loop: each holds its own stream, written in 4 KiB blocks (a
//! pipe takes a write of up to `PIPE_BUF` whole or not at all, so no byte of the stream is
//! skipped or repeated however the reader reads), and is let go once its last reader is gone
//! (the write fails with `EPIPE`, or the pipe reports `POLLERR`). A read larger than what the
//! pipe holds at that moment returns less (the device's never does; libseal's read hooks fill
//! whole buffers, but a static image's reads are its own system calls): so pipes are made
//! large, below. libseal's feeder process
//! does the same for a dynamic program's; here the supervisor, alive as long as any process
//! of the image, is that writer. The pipes' readers see end of file once the supervisor has
//! gone, which is once every process carrying its filter has.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::world::Stream;

/// Bytes a write: `PIPE_BUF`.
const BLOCK: usize = 4096;
/// A pipe's size, where the kernel allows it (`pipe-max-size` is 1 MiB by default): a read
/// returns what the pipe holds, so a reader of large blocks (`dd bs=64k count=4`) gets whole
/// blocks only while the pipe holds them, as the device always does; kept full, 1 MiB holds
/// any block up to its size. At most [`LARGE_PIPES`] pipes at a time are made this large (the
/// kernel counts pipe memory per user).
const LARGE: i32 = 1 << 20;
const LARGE_PIPES: usize = 8;

struct Feed {
    /// The write end (non-blocking).
    fd: OwnedFd,
    stream: Stream,
}

#[derive(Default)]
pub struct Feeds {
    pipes: Vec<Feed>,
}

impl Feeds {
    /// A new device pipe for `stream`, filled as far as it takes: its read end (blocking
    /// unless `nonblock`), or `None` when no pipe can be made.
    pub fn open(&mut self, stream: Stream, nonblock: bool) -> Option<OwnedFd> {
        let mut p = [0i32; 2];
        // SAFETY: pipe2 writes two descriptors into the array we own.
        if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return None;
        }
        // SAFETY: two descriptors just made, owned from here.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
        if self.pipes.len() < LARGE_PIPES {
            // SAFETY: fcntl on our own descriptor; a failure leaves the default size.
            unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, LARGE) };
        }
        if !nonblock {
            // SAFETY: fcntl on our own descriptor (the read end's own file description).
            unsafe { libc::fcntl(r.as_raw_fd(), libc::F_SETFL, 0) };
        }
        let mut feed = Feed { fd: w, stream };
        feed.fill();
        self.pipes.push(feed);
        Some(r)
    }

    /// What the loop polls: each pipe's write end, for room.
    pub fn pollfds(&self) -> impl Iterator<Item = libc::pollfd> + '_ {
        self.pipes.iter().map(|f| libc::pollfd {
            fd: f.fd.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        })
    }

    /// Fills the pipes `polled` (the entries [`Feeds::pollfds`] gave, in order) found room
    /// in, and lets go of those whose readers are gone.
    pub fn serve(&mut self, polled: &[libc::pollfd]) {
        let mut keep = Vec::with_capacity(self.pipes.len());
        for (i, mut feed) in self.pipes.drain(..).enumerate() {
            let r = polled.get(i).map_or(0, |p| p.revents);
            let gone = r & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0;
            if gone || (r & libc::POLLOUT != 0 && !feed.fill()) {
                continue;
            }
            keep.push(feed);
        }
        self.pipes = keep;
    }
}

impl Feed {
    /// Writes blocks until the pipe is full; false once no reader is left.
    fn fill(&mut self) -> bool {
        let mut block = [0u8; BLOCK];
        loop {
            let at = self.stream.n;
            self.stream.fill(&mut block);
            // SAFETY: a buffer we own, written to our descriptor.
            let n = unsafe { libc::write(self.fd.as_raw_fd(), block.as_ptr().cast(), BLOCK) };
            if n == BLOCK as isize {
                continue;
            }
            // Not taken (no room): the block is written again when there is.
            self.stream.n = at;
            return n < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_reads_its_stream_in_order_however_it_is_read() {
        let mut feeds = Feeds::default();
        let r = feeds.open(Stream::new(7, 9), false).unwrap();
        let mut want = vec![0u8; 200_000];
        Stream::new(7, 9).fill(&mut want);
        let mut f = std::fs::File::from(r);
        let mut got = Vec::new();
        let mut buf = vec![0u8; 7_777];
        while got.len() < want.len() {
            use std::io::Read;
            let n = f.read(&mut buf).unwrap();
            got.extend_from_slice(&buf[..n]);
            let polled: Vec<libc::pollfd> = feeds.pollfds().collect();
            let mut polled = polled;
            // SAFETY: pollfds we own, no waiting.
            unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as _, 0) };
            feeds.serve(&polled);
        }
        assert_eq!(&got[..want.len()], &want[..]);
        drop(f);
        let mut polled: Vec<libc::pollfd> = feeds.pollfds().collect();
        // SAFETY: as above.
        unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as _, 0) };
        feeds.serve(&polled);
        assert!(feeds.pipes.is_empty(), "a pipe without readers is let go");
    }
}
