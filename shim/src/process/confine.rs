//! The machine's clock and names out of every process's reach, by the kernel: the run's root
//! gives up `CAP_SYS_TIME` (from its bounding set, so no image of the run regains it, and from
//! its own sets) while time is sealed, and takes a UTS namespace of its own while host names
//! are sealed. A process the seal does not reach (`--skip`, a static or Go binary, a raw
//! `syscall` instruction, a write to `/proc/sys/kernel/hostname`) then gets `EPERM` from the
//! kernel, or renames only the run's namespace, while sealed setters keep working in the shim.
//!
//! Without the capability to do so (an ordinary user) neither step happens, and neither is
//! needed: such a process cannot set the clock or the host name in the first place (a setuid
//! or file-capability binary aside: docs/design.md#security). The launcher does the same
//! between fork and exec for a root libseal cannot load into.

use crate::core::sys;

/// `CAP_SYS_TIME`, bit 25 of the first capability word.
const CAP_SYS_TIME: i64 = 25;
const CAPS_V3: u32 = 0x2008_0522;

/// Confines the run's root (its first image) as the run's families say (`flags`: the run's
/// [`seal_abi::flags`] word, whatever this image's scope).
pub fn root(flags: u32) {
    use seal_abi::flags as f;
    if flags & f::TIME != 0 {
        drop_sys_time();
    }
    if flags & f::HOST != 0 {
        // SAFETY: unshare takes a flags word; EPERM without CAP_SYS_ADMIN, then nothing changes.
        unsafe { sys::syscall3(libc::SYS_unshare, libc::CLONE_NEWUTS as i64, 0, 0) };
    }
}

fn drop_sys_time() {
    // SAFETY (all calls): prctl with integer arguments; capget/capset on buffers we own, of
    // the sizes version 3 describes (two 32-bit words of each set).
    unsafe {
        if sys::syscall3(
            libc::SYS_prctl,
            libc::PR_CAPBSET_READ as i64,
            CAP_SYS_TIME,
            0,
        ) == 1
        {
            sys::syscall3(
                libc::SYS_prctl,
                libc::PR_CAPBSET_DROP as i64,
                CAP_SYS_TIME,
                0,
            );
        }
        let mut head = [CAPS_V3, 0u32];
        let mut data = [0u32; 6];
        if sys::syscall3(
            libc::SYS_capget,
            head.as_mut_ptr() as i64,
            data.as_mut_ptr() as i64,
            0,
        ) != 0
        {
            return;
        }
        let bit = 1u32 << CAP_SYS_TIME;
        // Effective, permitted and inheritable of the first word (the ambient set follows
        // the permitted one).
        if (data[0] | data[1] | data[2]) & bit == 0 {
            return;
        }
        data[0] &= !bit;
        data[1] &= !bit;
        data[2] &= !bit;
        sys::syscall3(
            libc::SYS_capset,
            head.as_mut_ptr() as i64,
            data.as_ptr() as i64,
            0,
        );
    }
}
