//! The supervisor's answers that write into the image: `uname`, the affinity mask, a value
//! at an address, and `getrandom`'s bytes.

use super::super::remote::write;
use super::{Answer, Supervisor};

impl Supervisor {
    pub(super) fn uname(&mut self, tid: i32, buf: u64) -> Answer {
        match self.world.uname() {
            Some(u) if write(tid, buf, &u) => Answer::Value(0),
            Some(_) => Answer::Error(libc::EFAULT),
            None => Answer::Continue,
        }
    }

    /// The sealed affinity mask: CPUs `0..cpus`.
    pub(super) fn affinity(&mut self, tid: i32, len: usize, mask: u64) -> Answer {
        let m = self.world.affinity();
        if len < m.len() || !len.is_multiple_of(8) {
            Answer::Error(libc::EINVAL)
        } else if write(tid, mask, &m) {
            Answer::Value(m.len() as i64)
        } else {
            Answer::Error(libc::EFAULT)
        }
    }

    /// Writes `v` at `addr` in thread `tid`: the call's value, or `EFAULT`.
    pub(super) fn put<T: Copy>(&self, tid: i32, addr: u64, v: &T) -> Answer {
        // SAFETY: a Copy value read as its bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>())
        };
        if addr != 0 && write(tid, addr, bytes) {
            Answer::Value(0)
        } else {
            Answer::Error(libc::EFAULT)
        }
    }

    pub(super) fn getrandom(
        &mut self,
        tid: i32,
        tgid: i32,
        buf: u64,
        len: usize,
        fl: u32,
    ) -> Answer {
        // GRND_NONBLOCK | GRND_RANDOM | GRND_INSECURE, as the kernel checks them.
        if fl & !0x7 != 0 || fl & 0x6 == 0x6 {
            return Answer::Error(libc::EINVAL);
        }
        let len = len.min(33_554_431);
        let mut chunk = vec![0u8; len.min(1 << 16)];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(chunk.len());
            self.proc(tgid).stream.fill(&mut chunk[..n]);
            if !write(tid, buf + done as u64, &chunk[..n]) {
                return if done == 0 {
                    Answer::Error(libc::EFAULT)
                } else {
                    Answer::Value(done as i64)
                };
            }
            done += n;
        }
        Answer::Value(len as i64)
    }
}
