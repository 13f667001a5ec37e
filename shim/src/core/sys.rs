//! Raw Linux system calls and tiny no-allocation helpers.
//!
//! The shim exports `getpid`, `open`, `clock_gettime`, `syscall`… so calling those through libc
//! from inside the shim would call the shim again. Everything the shim does for itself goes
//! through the `syscall` instruction here instead.

use core::arch::asm;

/// # Safety
/// A raw system call: the caller guarantees the arguments are valid for `n`.
#[inline(always)]
pub unsafe fn syscall6(n: i64, a1: i64, a2: i64, a3: i64, a4: i64, a5: i64, a6: i64) -> i64 {
    let ret: i64;
    // SAFETY: the x86_64 Linux syscall ABI; rcx and r11 are clobbered by the instruction.
    unsafe {
        asm!("syscall", inlateout("rax") n => ret, in("rdi") a1, in("rsi") a2, in("rdx") a3,
             in("r10") a4, in("r8") a5, in("r9") a6, lateout("rcx") _, lateout("r11") _,
             options(nostack));
    }
    ret
}

/// # Safety
/// See [`syscall6`].
#[inline(always)]
pub unsafe fn syscall3(n: i64, a1: i64, a2: i64, a3: i64) -> i64 {
    // SAFETY: forwarded.
    unsafe { syscall6(n, a1, a2, a3, 0, 0, 0) }
}

/// A system call that fills `buf`: `nr(fd, buf, buf.len(), rest…)` (`read`-like calls:
/// `pread64`, `recvfrom`, `getdents64`). Its raw result (bytes, or a negated errno).
pub fn fill(nr: i64, fd: i32, buf: &mut [u8], rest: [i64; 3]) -> i64 {
    // SAFETY: buf is valid for writes of its length; the rest are plain integers.
    unsafe {
        syscall6(
            nr,
            fd as i64,
            buf.as_mut_ptr() as i64,
            buf.len() as i64,
            rest[0],
            rest[1],
            rest[2],
        )
    }
}

pub fn getpid() -> i32 {
    // SAFETY: no arguments.
    unsafe { syscall3(libc::SYS_getpid, 0, 0, 0) as i32 }
}

pub fn gettid() -> i32 {
    // SAFETY: no arguments.
    unsafe { syscall3(libc::SYS_gettid, 0, 0, 0) as i32 }
}

pub fn geteuid() -> u32 {
    // SAFETY: no arguments.
    unsafe { syscall3(libc::SYS_geteuid, 0, 0, 0) as u32 }
}

pub fn getppid() -> i32 {
    // SAFETY: no arguments.
    unsafe { syscall3(libc::SYS_getppid, 0, 0, 0) as i32 }
}

/// Process `pid`'s session (`getsid`) and process group (`getpgid`); negative errnos.
pub fn session_and_group(pid: i32) -> (i32, i32) {
    // SAFETY: both take an integer only.
    unsafe {
        (
            syscall3(libc::SYS_getsid, pid as i64, 0, 0) as i32,
            syscall3(libc::SYS_getpgid, pid as i64, 0, 0) as i32,
        )
    }
}

/// The real clock, straight from the kernel (not the vDSO the shim interposes on).
pub fn clock_gettime(clock: libc::clockid_t) -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe {
        syscall3(
            libc::SYS_clock_gettime,
            clock as i64,
            &mut ts as *mut _ as i64,
            0,
        )
    };
    ts
}

pub fn write_all(fd: i32, mut buf: &[u8]) {
    while !buf.is_empty() {
        // SAFETY: buf is valid for its length.
        let n = unsafe {
            syscall3(
                libc::SYS_write,
                fd as i64,
                buf.as_ptr() as i64,
                buf.len() as i64,
            )
        };
        if n == -(libc::EINTR as i64) {
            continue;
        }
        if n <= 0 {
            return;
        }
        buf = &buf[n as usize..];
    }
}

/// Opens a NUL-terminated path; returns the fd or a negative errno.
pub fn open(path: &[u8], flags: i32, mode: u32) -> i32 {
    debug_assert_eq!(path.last(), Some(&0));
    // SAFETY: path is NUL-terminated.
    unsafe {
        syscall6(
            libc::SYS_openat,
            libc::AT_FDCWD as i64,
            path.as_ptr() as i64,
            flags as i64,
            mode as i64,
            0,
            0,
        ) as i32
    }
}

/// An `int` socket option (`getsockopt(fd, level, name)`), with a raw system call.
pub fn getsockopt_int(fd: i32, level: i32, name: i32) -> Option<i32> {
    let mut v: i32 = 0;
    let mut len: u32 = 4;
    // SAFETY: valid out-pointers of the sizes given.
    let r = unsafe {
        syscall6(
            libc::SYS_getsockopt,
            fd as i64,
            level as i64,
            name as i64,
            &mut v as *mut i32 as i64,
            &mut len as *mut u32 as i64,
            0,
        )
    };
    (r == 0).then_some(v)
}

/// Waits until `fd` is readable (or hung up, or in error): `ppoll` of that one descriptor
/// for at most `timeout_ms` (`None`: no limit), the signal mask unchanged. Its `revents` (0:
/// the time ran out), or the errno (`EINTR` too: whether to wait again is the caller's).
pub fn wait_readable(fd: i32, timeout_ms: Option<i64>) -> Result<i16, i32> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let limit = timeout_ms.map(|ms| libc::timespec {
        tv_sec: ms / 1000,
        tv_nsec: ms % 1000 * 1_000_000,
    });
    let limit = limit
        .as_ref()
        .map_or(0, |t| t as *const libc::timespec as i64);
    // SAFETY: one pollfd we own and a timespec (or none) alive across the call, no signal mask.
    let r = unsafe {
        syscall6(
            libc::SYS_ppoll,
            &mut pfd as *mut _ as i64,
            1,
            limit,
            0,
            8,
            0,
        )
    };
    if r < 0 {
        Err(-r as i32)
    } else {
        Ok(pfd.revents)
    }
}

pub fn close(fd: i32) {
    // SAFETY: closing an fd the shim owns.
    unsafe { syscall3(libc::SYS_close, fd as i64, 0, 0) };
}

pub fn ftruncate(fd: i32, len: usize) -> i64 {
    // SAFETY: plain integers.
    unsafe { syscall3(libc::SYS_ftruncate, fd as i64, len as i64, 0) }
}

/// Creates a file only this user can read, for the shim's own use: a new inode (`O_EXCL`),
/// never through a symbolic link (`O_NOFOLLOW`), closed on exec, mode 0600 whatever the umask
/// (`fchmod` after the create). With `replace`, a name that already exists (a planted link,
/// a stale file) is unlinked (which never follows a link) and the create retried once.
/// Returns the fd or a negative errno.
pub fn create_private(path: &[u8], access: i32, replace: bool) -> i32 {
    let flags = access | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let mut fd = open(path, flags, 0o600);
    if fd == -libc::EEXIST && replace {
        // SAFETY: NUL-terminated path (checked by `open`).
        unsafe { syscall3(libc::SYS_unlink, path.as_ptr() as i64, 0, 0) };
        fd = open(path, flags, 0o600);
    }
    if fd < 0 {
        return fd;
    }
    // SAFETY: plain integers on our own fd.
    let r = unsafe { syscall3(libc::SYS_fchmod, fd as i64, 0o600, 0) };
    if r < 0 {
        close(fd);
        return r as i32;
    }
    fd
}

/// Backs the pages of `p..p+len` now (`MADV_POPULATE_WRITE`): on a full tmpfs this is an
/// error here instead of a SIGBUS at the first store. 0, or a negative errno (`-EINVAL` on
/// kernels before 5.14, which cannot populate: the caller goes on as before).
pub fn populate(p: *const u8, len: usize) -> i64 {
    const MADV_POPULATE_WRITE: i64 = 23;
    let start = (p as usize) & !4095;
    let end = (p as usize).saturating_add(len);
    loop {
        // SAFETY: advice on pages of a mapping the caller owns; it never unmaps anything.
        let r = unsafe {
            syscall3(
                libc::SYS_madvise,
                start as i64,
                (end - start) as i64,
                MADV_POPULATE_WRITE,
            )
        };
        if r != -(libc::EINTR as i64) {
            return r;
        }
    }
}

/// Is `[p, p + len)` mapped in this process? False when the kernel says some page of it is
/// not (`mincore` answers `ENOMEM`), which is when a system call given the pointer would
/// answer `EFAULT` instead of the program crashing; so a hook that reads or writes a caller's
/// struct itself can answer as the kernel would. A mapped page the process may not touch
/// (`PROT_NONE`, or read-only for an output) is not told apart; ranges over 64 pages are not
/// checked (true).
pub fn mapped<T>(p: *const T, len: usize) -> bool {
    let start = p as usize & !4095;
    let Some(end) = (p as usize).checked_add(len.max(1)) else {
        return false;
    };
    if p.is_null() {
        return false;
    }
    let mut pages = [0u8; 64];
    if (end - start).div_ceil(4096) > pages.len() {
        return true;
    }
    // SAFETY: mincore writes one byte per page of the range into `pages`, which has room for
    // all of them (checked above); it reads no memory of the range.
    let r = unsafe {
        syscall3(
            libc::SYS_mincore,
            start as i64,
            (end - start) as i64,
            pages.as_mut_ptr() as i64,
        )
    };
    r != -(libc::ENOMEM as i64)
}

/// A short name for an errno, for the shim's one-line warnings.
pub fn errno_name(e: i32) -> &'static [u8] {
    match e {
        libc::ENOSPC => b"no space left on device",
        libc::EDQUOT => b"disk quota exceeded",
        libc::ENOMEM => b"out of memory",
        libc::EEXIST => b"file exists",
        libc::ELOOP => b"is a symbolic link",
        libc::EACCES | libc::EPERM => b"permission denied",
        libc::ENOENT => b"no such file or directory",
        libc::EROFS => b"read-only file system",
        libc::EMFILE | libc::ENFILE => b"too many open files",
        _ => b"error",
    }
}

/// Maps `len` bytes of `fd` shared, read-write. Returns null on failure.
pub fn mmap_shared(fd: i32, len: usize) -> *mut u8 {
    mmap_shared_at(fd, len, 0)
}

/// Maps `len` bytes of `fd` from `offset` (page-aligned) shared, read-write; null on failure.
pub fn mmap_shared_at(fd: i32, len: usize, offset: usize) -> *mut u8 {
    // SAFETY: a fresh mapping chosen by the kernel.
    let p = unsafe {
        syscall6(
            libc::SYS_mmap,
            0,
            len as i64,
            (libc::PROT_READ | libc::PROT_WRITE) as i64,
            libc::MAP_SHARED as i64,
            fd as i64,
            offset as i64,
        )
    };
    if p < 0 && p > -4096 {
        core::ptr::null_mut()
    } else {
        p as *mut u8
    }
}

/// Anonymous private memory (for scratch buffers in exec hooks, which may run in a vfork child
/// where malloc is off limits). Returns null on failure.
pub fn mmap_anon(len: usize) -> *mut u8 {
    mmap_anon_flags(len, 0)
}

fn mmap_anon_flags(len: usize, extra: i32) -> *mut u8 {
    // SAFETY: a fresh anonymous mapping.
    let p = unsafe {
        syscall6(
            libc::SYS_mmap,
            0,
            len as i64,
            (libc::PROT_READ | libc::PROT_WRITE) as i64,
            (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra) as i64,
            -1,
            0,
        )
    };
    if p < 0 && p > -4096 {
        core::ptr::null_mut()
    } else {
        p as *mut u8
    }
}

/// # Safety
/// `p..p+len` must be a mapping the shim made and no longer uses.
pub unsafe fn munmap(p: *mut u8, len: usize) {
    // SAFETY: per the contract.
    unsafe { syscall3(libc::SYS_munmap, p as i64, len as i64, 0) };
}

/// The working directory into `buf`: its length (without the NUL), or 0 when it does not fit
/// or cannot be had.
pub fn getcwd(buf: &mut [u8]) -> usize {
    // SAFETY: buf is a valid buffer of its length.
    let n = unsafe {
        syscall3(
            libc::SYS_getcwd,
            buf.as_mut_ptr() as i64,
            buf.len() as i64,
            0,
        )
    };
    // The kernel's length counts the NUL.
    if n > 1 {
        n as usize - 1
    } else {
        0
    }
}

/// Reads a symlink into `buf`; returns the length or 0.
pub fn readlink(path: &[u8], buf: &mut [u8]) -> usize {
    // SAFETY: path is NUL-terminated, buf valid.
    let n = unsafe {
        syscall6(
            libc::SYS_readlinkat,
            libc::AT_FDCWD as i64,
            path.as_ptr() as i64,
            buf.as_mut_ptr() as i64,
            buf.len() as i64,
            0,
            0,
        )
    };
    if n > 0 {
        n as usize
    } else {
        0
    }
}

/// Reads up to `buf.len()` bytes of a file; returns the length read.
pub fn read_file(path: &[u8], buf: &mut [u8]) -> usize {
    let fd = open(path, libc::O_RDONLY | libc::O_CLOEXEC, 0);
    if fd < 0 {
        return 0;
    }
    let got = read_all(fd, buf);
    close(fd);
    got
}

/// Reads `fd` to its end or until `buf` is full, retrying after `EINTR`; the length read.
pub fn read_all(fd: i32, buf: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: the tail of buf is valid.
        let n = unsafe {
            syscall3(
                libc::SYS_read,
                fd as i64,
                buf[got..].as_mut_ptr() as i64,
                (buf.len() - got) as i64,
            )
        };
        if n == -(libc::EINTR as i64) {
            continue;
        }
        if n <= 0 {
            break;
        }
        got += n as usize;
    }
    got
}

pub fn exit_group(code: i32) -> ! {
    loop {
        // SAFETY: ends the process.
        unsafe { syscall3(libc::SYS_exit_group, code as i64, 0, 0) };
    }
}

/// This thread's `errno`.
#[inline]
pub fn errno() -> i32 {
    // SAFETY: errno is thread-local and always valid.
    unsafe { *libc::__errno_location() }
}

/// Sets this thread's `errno` (a hook answering for libc reports failures through it).
#[inline]
pub fn set_errno(e: i32) {
    // SAFETY: as in errno().
    unsafe { *libc::__errno_location() = e };
}

/// A fixed-size, stack-allocated byte string builder (for messages and paths).
pub struct StackBuf<const N: usize> {
    pub buf: [u8; N],
    pub len: usize,
}

impl<const N: usize> StackBuf<N> {
    pub const fn new() -> Self {
        StackBuf {
            buf: [0; N],
            len: 0,
        }
    }
    pub fn push(&mut self, s: &[u8]) -> &mut Self {
        let n = s.len().min(N.saturating_sub(self.len + 1));
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
        self
    }
    pub fn push_u64(&mut self, v: u64) -> &mut Self {
        let mut tmp = [0u8; 20];
        let n = seal_abi::write_u64(v, &mut tmp);
        self.push(&tmp[..n])
    }
    pub fn push_i64(&mut self, v: i64) -> &mut Self {
        if v < 0 {
            self.push(b"-");
        }
        self.push_u64(v.unsigned_abs())
    }
    pub fn push_hex(&mut self, v: u64) -> &mut Self {
        let mut tmp = [0u8; 16];
        for (i, t) in tmp.iter_mut().enumerate() {
            let d = ((v >> ((15 - i) * 4)) & 0xf) as u8;
            *t = if d < 10 { b'0' + d } else { b'a' + d - 10 };
        }
        self.push(&tmp)
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
    /// The contents with a trailing NUL (always room: `push` keeps one byte free).
    pub fn as_cstr(&mut self) -> &[u8] {
        self.buf[self.len] = 0;
        &self.buf[..=self.len]
    }
}

/// `write!` into the buffer; what does not fit is dropped, as with `push`.
impl<const N: usize> core::fmt::Write for StackBuf<N> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.push(s.as_bytes());
        Ok(())
    }
}

impl<const N: usize> Default for StackBuf<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// Set once at start-up when the run is quiet (`-q`). Held here, not read from `config`, so
/// this module of raw system calls depends on nothing else in the shim.
#[link_section = ".data.seal_hot"]
pub static QUIET: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Prints `libseal: <msg>` on stderr unless the run is quiet.
pub fn warn(msg: &[u8]) {
    if QUIET.load(core::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let mut b = StackBuf::<512>::new();
    b.push(b"libseal: ").push(msg).push(b"\n");
    write_all(2, b.as_bytes());
}

pub use seal_abi::settings::{parse_hex, parse_i64, parse_u64};

/// Length of a NUL-terminated C string.
///
/// # Safety
/// `p` must point to a NUL-terminated string.
pub unsafe fn cstr_len(p: *const libc::c_char) -> usize {
    // libc's vectorised strlen (a byte loop was ~1 ns a byte: a few µs per image start, over
    // the environment): pure, async-signal-safe, and never interposed by libseal.
    // SAFETY: per the contract.
    unsafe { libc::strlen(p) }
}

/// The bytes of a C string (without the NUL), or empty for null.
///
/// # Safety
/// `p` is null or a NUL-terminated string that outlives the returned slice.
pub unsafe fn cstr<'a>(p: *const libc::c_char) -> &'a [u8] {
    if p.is_null() {
        return &[];
    }
    // SAFETY: per the contract.
    unsafe { core::slice::from_raw_parts(p as *const u8, cstr_len(p)) }
}

/// Does the C string `p` start with `prefix`? Reads no further than `prefix` (an environment
/// entry can be the 32 KiB stack pad).
///
/// # Safety
/// `p` is null or a NUL-terminated string.
pub unsafe fn cstr_starts_with(p: *const libc::c_char, prefix: &[u8]) -> bool {
    if p.is_null() {
        return false;
    }
    for (i, &b) in prefix.iter().enumerate() {
        // SAFETY: every byte before the first NUL is readable, and we stop at a mismatch
        // (a NUL mismatches any prefix byte, which is never NUL).
        if unsafe { *(p as *const u8).add(i) } != b {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_numbers() {
        assert_eq!(parse_i64(b"-42"), Some(-42));
        assert_eq!(parse_i64(b""), None);
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_hex(b"ff"), Some(255));
    }

    #[test]
    fn stack_buf_keeps_room_for_nul() {
        let mut b = StackBuf::<8>::new();
        b.push(b"abcdefghij");
        assert_eq!(b.as_bytes(), b"abcdefg");
        assert_eq!(b.as_cstr(), b"abcdefg\0");
        let mut h = StackBuf::<40>::new();
        h.push_i64(-12).push(b" ").push_hex(0xbeef);
        assert_eq!(h.as_bytes(), b"-12 000000000000beef");
    }
}
