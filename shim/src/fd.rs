//! Descriptors the shim makes for the program (raw system calls only): a memfd with fixed
//! contents (the sealed uuid, boot id and host name files), and raw results as errnos.

use crate::sys;

/// Result of a raw system call as `Result<value, errno>`.
pub fn check(r: i64) -> Result<i64, i32> {
    if (-4095..0).contains(&r) {
        Err(-r as i32)
    } else {
        Ok(r)
    }
}

/// A memfd holding `content`, positioned at its start.
pub fn memfd_with(name: &[u8], content: &[u8], cloexec: bool) -> Result<i32, i32> {
    let fl = if cloexec { libc::MFD_CLOEXEC } else { 0 };
    // SAFETY: name is NUL-terminated.
    let fd = check(unsafe {
        sys::syscall3(libc::SYS_memfd_create, name.as_ptr() as i64, fl as i64, 0)
    })? as i32;
    let mut done = 0;
    while done < content.len() {
        // SAFETY: the tail of content is valid.
        let r = unsafe {
            sys::syscall3(
                libc::SYS_write,
                fd as i64,
                content[done..].as_ptr() as i64,
                (content.len() - done) as i64,
            )
        };
        match check(r) {
            Ok(n) => done += n as usize,
            Err(libc::EINTR) => {}
            Err(e) => {
                sys::close(fd);
                return Err(e);
            }
        }
    }
    // SAFETY: plain integers.
    unsafe { sys::syscall3(libc::SYS_lseek, fd as i64, 0, libc::SEEK_SET as i64) };
    Ok(fd)
}
