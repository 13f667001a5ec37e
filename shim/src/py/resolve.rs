//! Cold path of the frame reader: memory reads that cannot fault (`process_vm_readv` on this
//! process, which fails with `EFAULT` instead of a segfault), and the decoding of a code
//! object's file name, function name and line table. Runs once per new site or code object;
//! never calls into the interpreter, never allocates, never takes a lock.

use super::layout::Layout;
use crate::core::sys;

/// Reads `buf.len()` bytes at `addr` of this process; false if any of it is not mapped.
pub fn read(addr: u64, buf: &mut [u8]) -> bool {
    if addr < 0x1000 || buf.is_empty() {
        return false;
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: both iovecs describe one buffer each; the kernel checks the remote range and
    // returns EFAULT instead of faulting; the local one is our own buffer.
    let n = unsafe {
        sys::syscall6(
            libc::SYS_process_vm_readv,
            // The pid recorded at start: a system call less per read.
            crate::process::vpid::real_pid() as i64,
            &local as *const _ as i64,
            1,
            &remote as *const _ as i64,
            1,
            0,
        )
    };
    n == buf.len() as i64
}

pub fn read_u64(addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    read(addr, &mut b).then(|| u64::from_le_bytes(b))
}

pub fn read_i32(addr: u64) -> Option<i32> {
    let mut b = [0u8; 4];
    read(addr, &mut b).then(|| i32::from_le_bytes(b))
}

/// The text of a `str` object as UTF-8 into `out` (cut to fit); its length. `str_type` is
/// `&PyUnicode_Type` (0 when unknown: the type is then not checked).
pub fn read_str(l: &Layout, obj: u64, str_type: u64, out: &mut [u8]) -> Option<usize> {
    // One read for the header and, for a short ASCII name (most file and function names),
    // its text; field by field only when those 128 bytes are not all mapped.
    let mut head = [0u8; 128];
    let whole = read(obj, &mut head);
    let word = |o: usize| u64::from_le_bytes(head[o..o + 8].try_into().unwrap());
    let (ty, state, len) = if whole {
        (word(8), word(l.str_state) as u32, word(l.str_len) as usize)
    } else {
        (
            read_u64(obj + 8)?,
            read_i32(obj + l.str_state as u64)? as u32,
            read_u64(obj + l.str_len as u64)? as usize,
        )
    };
    if str_type != 0 && ty != str_type {
        return None;
    }
    let (kind, compact, ascii) = ((state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1);
    if compact == 0 || !matches!(kind, 1 | 2 | 4) {
        return None;
    }
    let off = if ascii == 1 {
        l.str_ascii
    } else {
        l.str_compact
    };
    if whole && ascii == 1 && off + len <= head.len() {
        let n = len.min(out.len());
        out[..n].copy_from_slice(&head[off..off + n]);
        return Some(n);
    }
    let data = obj + off as u64;
    let mut n = 0;
    let mut chunk = [0u8; 128];
    let mut i = 0;
    while i < len && n < out.len() {
        let take = ((len - i) * kind as usize).min(chunk.len());
        if !read(data + (i * kind as usize) as u64, &mut chunk[..take]) {
            return None;
        }
        for c in chunk[..take].chunks_exact(kind as usize) {
            let cp = match kind {
                1 => c[0] as u32,
                2 => u16::from_le_bytes([c[0], c[1]]) as u32,
                _ => u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
            };
            let ch = char::from_u32(cp).unwrap_or('?');
            let mut enc = [0u8; 4];
            let s = ch.encode_utf8(&mut enc).as_bytes();
            if n + s.len() > out.len() {
                return Some(n);
            }
            out[n..n + s.len()].copy_from_slice(s);
            n += s.len();
        }
        i += take / kind as usize;
    }
    Some(n)
}

/// A byte stream over a `bytes` object's contents, read in chunks.
struct Bytes {
    data: u64,
    len: usize,
    pos: usize,
    buf: [u8; 256],
    buf_at: usize,
    buf_len: usize,
}

impl Bytes {
    fn open(l: &Layout, obj: u64, bytes_type: u64) -> Option<Bytes> {
        if bytes_type != 0 && read_u64(obj + 8)? != bytes_type {
            return None;
        }
        let len = read_u64(obj + l.bytes_size as u64)? as usize;
        Some(Bytes {
            data: obj + l.bytes_data as u64,
            len: len.min(1 << 20),
            pos: 0,
            buf: [0; 256],
            buf_at: 0,
            buf_len: 0,
        })
    }

    fn next(&mut self) -> Option<u8> {
        if self.pos >= self.len {
            return None;
        }
        if self.pos >= self.buf_at + self.buf_len {
            let take = (self.len - self.pos).min(self.buf.len());
            if !read(self.data + self.pos as u64, &mut self.buf[..take]) {
                self.len = 0;
                return None;
            }
            self.buf_at = self.pos;
            self.buf_len = take;
        }
        let b = self.buf[self.pos - self.buf_at];
        self.pos += 1;
        Some(b)
    }
}

/// The source line of bytecode offset `off` (in bytes) of a code object whose first line is
/// `first` and whose line table is the `bytes` object `table`; 0 when it has none.
pub fn line_of(l: &Layout, table: u64, bytes_type: u64, first: i32, off: i64) -> i32 {
    let Some(mut t) = Bytes::open(l, table, bytes_type) else {
        return 0;
    };
    match l.minor {
        ..=9 => lnotab(&mut t, first, off),
        10 => linetable_310(&mut t, first, off),
        _ => locations(&mut t, first, off),
    }
}

/// 3.8, 3.9 `co_lnotab`: (address increment, signed line increment) byte pairs.
fn lnotab(t: &mut Bytes, first: i32, off: i64) -> i32 {
    let (mut line, mut addr) = (first, 0i64);
    while let (Some(da), Some(dl)) = (t.next(), t.next()) {
        addr += da as i64;
        if addr > off {
            break;
        }
        line += dl as i8 as i32;
    }
    line
}

/// 3.10 `co_linetable` (PEP 626): (address delta, line delta) pairs, -128 = no line.
fn linetable_310(t: &mut Bytes, first: i32, off: i64) -> i32 {
    let (mut computed, mut end) = (first, 0i64);
    while let (Some(da), Some(dl)) = (t.next(), t.next()) {
        let start = end;
        end += da as i64;
        let dl = dl as i8;
        let line = if dl == -128 {
            0
        } else {
            computed += dl as i32;
            computed
        };
        if start <= off && off < end {
            return line;
        }
    }
    0
}

/// 3.11+ location table (PEP 657): entries of `1CCCCLLL` + payload, length in code units.
fn locations(t: &mut Bytes, first: i32, off: i64) -> i32 {
    let (mut line, mut end) = (first, 0i64);
    let mut b = t.next();
    while let Some(head) = b {
        if head & 0x80 == 0 {
            return 0;
        }
        let code = (head >> 3) & 15;
        let start = end;
        end += (((head & 7) as i64) + 1) * 2;
        let delta = match code {
            13 | 14 => {
                let v = varint(t);
                if v & 1 != 0 {
                    -((v >> 1) as i32)
                } else {
                    (v >> 1) as i32
                }
            }
            10..=12 => (code - 10) as i32,
            _ => 0,
        };
        line += delta;
        // Skip the rest of the entry: up to the next byte with the top bit set.
        b = loop {
            match t.next() {
                Some(n) if n & 0x80 != 0 => break Some(n),
                Some(_) => {}
                None => break None,
            }
        };
        if start <= off && off < end {
            return if code == 15 { 0 } else { line };
        }
    }
    0
}

fn varint(t: &mut Bytes) -> u32 {
    let mut read = t.next().unwrap_or(0) as u32;
    let mut val = read & 63;
    let mut shift = 0;
    while read & 64 != 0 && shift < 30 {
        read = t.next().unwrap_or(0) as u32;
        shift += 6;
        val |= (read & 63) << shift;
    }
    val
}
