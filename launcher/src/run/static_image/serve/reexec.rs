//! The first image's own process exec'ing another image (`exec prog`, a shell's last command
//! run in place, Go's `syscall.Exec`): the new image is set up as one a forked child execs
//! (`follow_exec`, `exec_clock`), once what the supervisor kept for the old image is let go.

use super::super::vdso_clock::Page;
use super::{Supervisor, MONO_BASE_NS};

impl Supervisor {
    /// Process `pid` (the first image's) is stopped at its exec of another image: the reads
    /// its old image's clock page counted go into the old image's census slot, a Go image's
    /// one clock is carried on as the process's clock (the next image starts from it, as a
    /// child's starts from its parent's), and the descriptors the supervisor took from it (a
    /// Go image's epoll instances, whose numbers the new image may reuse) are closed.
    pub(super) fn first_image_left(&mut self, pid: i32) {
        self.count_page_reads();
        if let Some(page) = self.pages.remove(&pid) {
            self.ensure(pid);
            self.proc(pid).l = Page::c(&page, MONO_BASE_NS);
        }
        self.waits.forget(pid);
    }

    /// Says in process `pid`'s census that the static image it exec'd reads its clocks by
    /// system call: its clock page could not be set up at its exec (the values are still the
    /// sealed ones, each read a notification to the supervisor).
    pub(super) fn served_clock(&mut self, pid: i32) {
        if let Some(slot) = self.slot(pid) {
            slot.unsealed(
                seal_abi::unsealed::UNSUPPORTED_CALL,
                "clock reads are each a system call to seal's supervisor (~40 µs a read, \
                 values sealed): the image's clock page could not be set up at its exec",
            );
        }
    }
}
