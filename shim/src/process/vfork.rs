//! `vfork` as `vfork`: the child runs on its parent's memory and stack until it execs or
//! exits, and the parent sleeps meanwhile. Converted to a fork, every `sh -c 'cmd'` and every
//! Python `subprocess.run` copied its parent's page tables and faulted its pages back in: in a
//! shell loop that was a third of what seal added to each command (BENCHMARKS.md).
//!
//! What a fork child gets from its own copy of memory, the vfork child gets from this thread's
//! slot ([`Slot`], set up by [`prepare`] in the parent with every signal blocked):
//!
//! * its identity: hooks that find a new process ([`vpid`]'s `adopt`, `gettid`) ask
//!   [`child`] first and answer with the virtual pid the parent allocated, leaving the
//!   process-wide identity (which the parent's other threads read) alone;
//! * its thread state and entropy stream: the slot keeps the parent thread's, and the thread
//!   takes the child's lineage, so the child draws the bytes a fork child would and the parent
//!   resumes exactly where it was ([`parent_done`] puts them back);
//! * its exec: the environment names the child (`exec_env`), image 1 of its process as after
//!   a fork; the environment block and argument list the exec hooks map in the child would
//!   outlive a successful exec in the parent's address space, so they are noted here
//!   ([`keep`]) and unmapped by the parent;
//! * what it must not change: the parent's descriptor caches (`fd::forget`, the causal and
//!   listing classifications) and its `SIGSEGV` chain (`sigaction`) are left as they are
//!   (the child's descriptors and dispositions are its own, and exec resets the latter).
//!
//! The child's calls before its exec are counted in its parent's census image: they ran on
//! its memory. Nothing here allocates or locks: a vfork child may not.

use seal_abi::{child_lineage, KIND_IMAGE};

use crate::core::thread::{self, ThreadState};
use crate::core::{config, sys};
#[cfg(not(test))]
use crate::cpu::signals::{program_blocked, set_program_blocked};
use crate::process::vpid::{self, Pending};
use crate::random;

#[cfg(test)]
fn program_blocked() -> bool {
    false
}
#[cfg(test)]
fn set_program_blocked(_: bool) {}

/// Mappings a vfork child made for its exec, at most this many at once.
const KEPT: usize = 2;

/// This thread's vfork in progress. All-zero bytes: none.
#[repr(C)]
pub struct Slot {
    // Whether a vfork is active (from [`prepare`] until [`parent_done`], seen only by the
    // child, because the parent thread runs none of the program's code meanwhile) is
    // `core::vfork`'s word, which the floors below this one read.
    /// vforks made by the vfork child itself before it exec'd (kernel vforks, nothing more).
    nested: u64,
    pending: Pending,
    thread: ThreadState,
    stream: random::StreamMark,
    segv_blocked: u64,
    /// The program's signal mask at the call.
    mask: u64,
    kept: [(usize, usize); KEPT],
}

crate::initial_exec_tls!("seal_vfork", Slot, slot_ptr);

fn slot() -> &'static mut Slot {
    // SAFETY: this thread's zero-initialised slot; all-zero is a valid `Slot` (Pending, the
    // thread state and the stream mark are plain integers). Only this thread, or the vfork
    // child running on this thread's memory while the thread sleeps, touches it.
    unsafe { &mut *slot_ptr() }
}

/// The child being created, when the caller is a vfork child that has not exec'd yet.
#[inline]
pub fn child() -> Option<Pending> {
    in_child().then_some(slot().pending)
}

use crate::core::vfork::in_child;

fn sigmask(how: i32, set: u64) -> u64 {
    let mut old = 0u64;
    // SAFETY: 8-byte kernel sigsets on the stack.
    unsafe {
        sys::syscall6(
            libc::SYS_rt_sigprocmask,
            how as i64,
            &set as *const u64 as i64,
            &mut old as *mut u64 as i64,
            8,
            0,
            0,
        )
    };
    old
}

/// In the parent, before the system call: count the call and, in a run, allocate the child
/// and switch this thread to it. Returns with every signal blocked when it did.
pub extern "C" fn prepare(caller: u64) {
    crate::core::census::count(seal_abi::Fid::Vfork, seal_abi::NO_DETAIL, caller);
    let s = slot();
    if in_child() {
        // A vfork child vforking: the kernel's vfork, nothing more.
        s.nested += 1;
        return;
    }
    if !config::in_run() {
        return;
    }
    #[cfg(not(test))]
    super::hooks::resolve_early();
    s.mask = sigmask(libc::SIG_SETMASK, !0);
    let p = vpid::next_child();
    s.pending = p;
    s.thread = thread::with(|t| *t);
    s.stream = random::mark();
    s.segv_blocked = program_blocked() as u64;
    s.kept = [(0, 0); KEPT];
    // The child's main thread, as `set_identity` makes it in a fork child.
    let lineage = child_lineage(p.lineage, KIND_IMAGE, 0);
    thread::with(|t| {
        t.lineage = lineage;
        t.vtid = p.vpid;
        t.threads = 0;
    });
    crate::core::vfork::set_in_child(true);
}

/// In the child, right after the system call: the program's signal mask back.
pub extern "C" fn child_started() {
    let s = slot();
    if in_child() && s.nested == 0 {
        sigmask(libc::SIG_SETMASK, s.mask);
    }
}

/// In the parent, once the child exec'd or exited (`r` its real pid) or the call failed (`r`
/// a negated errno): this thread as it was, the child's leftovers unmapped, the child
/// registered. Returns what `vfork` returns to the program.
pub extern "C" fn parent_done(r: i64) -> i32 {
    let s = slot();
    if s.nested != 0 {
        s.nested -= 1;
        return crate::core::fd::libc_result(r) as i32;
    }
    if !in_child() {
        return crate::core::fd::libc_result(r) as i32;
    }
    thread::with(|t| *t = s.thread);
    random::restore(&s.stream);
    set_program_blocked(s.segv_blocked != 0);
    for (base, len) in core::mem::take(&mut s.kept) {
        if len != 0 {
            // SAFETY: a mapping the child made for an exec that succeeded (it forgets the ones
            // it unmapped itself), which nothing references any more.
            unsafe { sys::munmap(base as *mut u8, len) };
        }
    }
    crate::core::vfork::set_in_child(false);
    let real = crate::core::fd::libc_result(r) as i32;
    let shown = vpid::parent_done(&s.pending, real);
    sigmask(libc::SIG_SETMASK, s.mask);
    if real < 0 {
        return -1; // errno set by libc_result (parent_done and sigmask keep it)
    }
    shown
}

/// A vfork child is about to exec with `len` bytes mapped at `base`: if the exec succeeds,
/// the parent unmaps them. No-op outside a vfork child.
pub fn keep(base: *mut u8, len: usize) {
    if !in_child() {
        return;
    }
    if let Some(k) = slot().kept.iter_mut().find(|k| k.1 == 0) {
        *k = (base as usize, len);
    }
}

/// The exec failed: the child unmaps `base` itself (and may map something else there).
pub fn unkeep(base: *mut u8) {
    if !in_child() {
        return;
    }
    if let Some(k) = slot().kept.iter_mut().find(|k| k.0 == base as usize) {
        *k = (0, 0);
    }
}
