//! The launcher's half of keeping the machine's clock and names out of the run's reach: a
//! root libseal cannot load into (static, setuid) or that must be set up between fork and exec
//! gives up `CAP_SYS_TIME` and takes a UTS namespace of its own there, as libseal's
//! `process::confine` does for every other root. Without the privilege to (an ordinary user)
//! nothing happens, and nothing needs to: the kernel refuses such a user already.

/// `CAP_SYS_TIME`.
const CAP_SYS_TIME: libc::c_ulong = 25;

/// In the child, between fork and exec: async-signal-safe system calls only. `flags`: the
/// run's [`seal_abi::flags`] word (0: an unsealed command, left alone).
pub fn child(flags: u32) {
    use seal_abi::flags as f;
    // SAFETY (all calls): prctl with integers, unshare with a flags word, capget/capset on
    // buffers we own of the sizes version 3 describes.
    unsafe {
        if flags & f::TIME != 0 {
            if libc::prctl(libc::PR_CAPBSET_READ, CAP_SYS_TIME, 0, 0, 0) == 1 {
                libc::prctl(libc::PR_CAPBSET_DROP, CAP_SYS_TIME, 0, 0, 0);
            }
            let mut head = [0x2008_0522u32, 0];
            let mut data = [0u32; 6];
            if libc::syscall(libc::SYS_capget, head.as_mut_ptr(), data.as_mut_ptr()) == 0 {
                let bit = 1u32 << CAP_SYS_TIME;
                if (data[0] | data[1] | data[2]) & bit != 0 {
                    data[0] &= !bit;
                    data[1] &= !bit;
                    data[2] &= !bit;
                    libc::syscall(libc::SYS_capset, head.as_mut_ptr(), data.as_ptr());
                }
            }
        }
        if flags & f::HOST != 0 {
            libc::unshare(libc::CLONE_NEWUTS);
        }
    }
}

/// Does seal itself hold `CAP_SYS_TIME` (effective)? Then the run's processes that run as root
/// may set the sealed clock although the run gave the capability up
/// ([`seal_abi::run_flags::SYS_TIME_HELD`]).
pub fn holds_sys_time() -> bool {
    let mut head = [0x2008_0522u32, 0];
    let mut data = [0u32; 6];
    // SAFETY: capget on buffers we own, of the sizes version 3 describes.
    let r = unsafe { libc::syscall(libc::SYS_capget, head.as_mut_ptr(), data.as_mut_ptr()) };
    r == 0 && data[0] & (1 << CAP_SYS_TIME) != 0
}
