//! Another process's memory, read and written with `process_vm_readv`/`process_vm_writev`
//! (the supervisor has ptrace access to the processes it serves).

/// Copies `data` into thread `tid`'s memory at `addr`.
pub fn write(tid: i32, addr: u64, data: &[u8]) -> bool {
    let local = libc::iovec {
        iov_base: data.as_ptr() as *mut _,
        iov_len: data.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut _,
        iov_len: data.len(),
    };
    // SAFETY: one local buffer we own; the remote side is checked by the kernel.
    let n = unsafe { libc::process_vm_writev(tid, &local, 1, &remote, 1, 0) };
    n == data.len() as isize
}

/// Reads `out` from thread `tid`'s memory at `addr`.
pub fn read<T: Copy>(tid: i32, addr: u64, out: &mut T) -> bool {
    let len = std::mem::size_of::<T>();
    let local = libc::iovec {
        iov_base: (out as *mut T).cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut _,
        iov_len: len,
    };
    // SAFETY: one local buffer we own of `len` bytes; the remote side is checked.
    let n = unsafe { libc::process_vm_readv(tid, &local, 1, &remote, 1, 0) };
    n == len as isize
}

/// Detaches from a tracee that is running (not in a ptrace stop): interrupt, wait, detach.
pub fn detach_running(pid: i32) {
    // SAFETY: ptrace requests on our tracee; waitpid on it.
    unsafe {
        libc::ptrace(libc::PTRACE_INTERRUPT, pid, 0, 0);
        let mut st = 0;
        libc::waitpid(pid, &mut st, libc::__WALL);
        libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0);
    }
}
