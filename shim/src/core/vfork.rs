//! Is the caller a vfork child, still running on its parent's memory? One word of this
//! thread's static TLS, set by `process::vfork` in the parent right before the system call
//! and cleared once the child has exec'd or exited.
//!
//! It lives in `core` because every floor asks it: a vfork child must not change what the
//! parent's memory holds about the parent (its descriptor caches in `fd`, the causal and
//! listing classifications, its `SIGSEGV` chain, its identity), and `core::fd` is where a
//! closed descriptor is forgotten. Reading it is one TLS load, as before it moved here.

crate::initial_exec_tls!("seal_vfork_child", u64, flag_ptr);

/// Is the caller a vfork child (on its parent's memory)?
#[inline]
pub fn in_child() -> bool {
    // SAFETY: this thread's zero-initialised word; only this thread, or the vfork child
    // running on this thread's memory while the thread sleeps, touches it.
    unsafe { *flag_ptr() != 0 }
}

/// The parent thread is about to vfork (every signal blocked), or is back from it: until
/// `set_in_child(false)`, code running on this thread's memory is the child's.
#[inline]
pub fn set_in_child(on: bool) {
    // SAFETY: as in `in_child`.
    unsafe { *flag_ptr() = on as u64 };
}
