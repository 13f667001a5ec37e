//! The seccomp filter a static image runs under (the lists in `seal_abi::supervised` say
//! which calls it sends to the supervisor): its program, built at compile time, and the
//! interpreter its tests run it with.

use super::SIGCHLD;
use super::{go_sys, GROUP_CALLS, IMAGE_IP_LIMIT, IOCTL, OPEN_CALLS, PROC_CALLS, SIGACTION};
use super::{SockFilter, CALLS, EXEC, EXEC_AT, EXIT_GROUP, FUTEX, FUTEX_WAIT_PRIVATE, GETDENTS64};
use super::{BATCH_OPEN, MKDIR_CALLS, SYSINFO, TIMED_WAITS, TIOCGPGRP, TIOCSPGRP};

/// `AUDIT_ARCH_X86_64`.
const ARCH_X86_64: u32 = 0xC000_003E;
/// `SECCOMP_RET_ALLOW`, `SECCOMP_RET_USER_NOTIF`.
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_USER_NOTIF: u32 = 0x7fc0_0000;
/// Classic BPF opcodes: `BPF_LD|BPF_W|BPF_ABS`, `BPF_JMP|BPF_JEQ|BPF_K`, `BPF_JMP|BPF_JGE|BPF_K`,
/// `BPF_JMP|BPF_JSET|BPF_K`, `BPF_RET|BPF_K`.
const LD_ABS: u16 = 0x20;
const JEQ: u16 = 0x15;
const JGE: u16 = 0x35;
const JSET: u16 = 0x45;
const RET: u16 = 0x06;

/// `clone`, whose flags (its first argument) the filter reads: a thread is not sent.
const CLONE: u32 = 56;
/// `CLONE_THREAD`.
const CLONE_THREAD: u32 = 0x10000;

/// Where the filter sends a call once it has its number: [`RET_USER_NOTIF`], or the block of
/// instructions that looks further (its arguments, its address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Notify,
    /// [`TIMED_WAITS`]: the timeout.
    Wait,
    /// Sent from an image only: the instruction pointer.
    Image,
    /// `clone`: its flags, then the instruction pointer.
    Clone,
    /// [`OPEN_CALLS`]: the [`BATCH_OPEN`] mark, then the instruction pointer.
    Open,
    /// [`IOCTL`]: the request, then the instruction pointer.
    Ioctl,
    /// [`SIGACTION`]: the signal and the new disposition, then the instruction pointer.
    Sigaction,
    /// [`FUTEX`]: the operation and the timeout, then the instruction pointer.
    Futex,
    /// [`go_sys::MARKED`]: allowed with [`go_sys::MARK`] in its third argument.
    Marked,
}

/// How many call numbers the filter routes.
const ROUTES: usize = CALLS.len()
    + 2
    + TIMED_WAITS.len()
    + PROC_CALLS.len()
    + GROUP_CALLS.len()
    + OPEN_CALLS.len()
    + MKDIR_CALLS.len()
    + 6;

/// Every routed call number with its route, in ascending order.
const fn routes() -> [(u32, Route); ROUTES] {
    /// Puts `nrs` (with `route`, or `Clone` for `clone`) at `r[n..]`: where the next go.
    const fn put(r: &mut [(u32, Route); ROUTES], n: usize, nrs: &[u32], route: Route) -> usize {
        let mut i = 0;
        while i < nrs.len() {
            let clone = matches!(route, Route::Image) && nrs[i] == CLONE;
            let marked = matches!(route, Route::Notify)
                && (nrs[i] == go_sys::MARKED[0] || nrs[i] == go_sys::MARKED[1]);
            r[n + i] = (
                nrs[i],
                match (clone, marked) {
                    (true, _) => Route::Clone,
                    (_, true) => Route::Marked,
                    _ => route,
                },
            );
            i += 1;
        }
        n + nrs.len()
    }
    let mut r = [(0u32, Route::Notify); ROUTES];
    let mut calls = [0u32; CALLS.len()];
    let mut i = 0;
    while i < CALLS.len() {
        calls[i] = CALLS[i].0;
        i += 1;
    }
    let n = put(&mut r, 0, &calls, Route::Notify);
    let n = put(&mut r, n, &[EXEC, EXEC_AT], Route::Notify);
    let n = put(&mut r, n, &TIMED_WAITS, Route::Wait);
    let n = put(&mut r, n, &PROC_CALLS, Route::Image);
    let n = put(&mut r, n, &GROUP_CALLS, Route::Image);
    let n = put(&mut r, n, &[SYSINFO, EXIT_GROUP, GETDENTS64], Route::Image);
    let n = put(&mut r, n, &MKDIR_CALLS, Route::Image);
    let n = put(&mut r, n, &OPEN_CALLS, Route::Open);
    let n = put(&mut r, n, &[IOCTL], Route::Ioctl);
    let n = put(&mut r, n, &[SIGACTION], Route::Sigaction);
    let n = put(&mut r, n, &[FUTEX], Route::Futex);
    assert!(n == ROUTES);
    // Insertion sort (a const fn); a number listed twice would be a mistake in the lists.
    let mut i = 1;
    while i < ROUTES {
        let mut j = i;
        while j > 0 && r[j - 1].0 > r[j].0 {
            let t = r[j - 1];
            r[j - 1] = r[j];
            r[j] = t;
            j -= 1;
        }
        assert!(j == 0 || r[j - 1].0 != r[j].0, "a call number routed twice");
        i += 1;
    }
    r
}

/// The most call numbers a leaf of the filter's tree compares one by one.
const LEAF: usize = 4;

/// Instructions of the tree that routes `n` sorted call numbers: a `JGE` splits them in
/// halves down to leaves of at most [`LEAF`] `JEQ`s, each leaf ending in `RET_ALLOW`.
const fn tree_len(n: usize) -> usize {
    if n <= LEAF {
        n + 1
    } else {
        1 + tree_len(n / 2) + tree_len(n - n / 2)
    }
}

/// Instructions after the tree: the blocks of [`Route`] (wait 3, clone 2, open 2, ioctl 3,
/// rt_sigaction 6, futex 6, marked 4, image 2) and the two returns.
const BLOCKS: usize = 3 + 2 + 2 + 3 + 6 + 6 + 4 + 2 + 2;

/// Instructions in [`filter`]: the architecture and x32 checks (4), the tree, the blocks.
pub const FILTER_LEN: usize = 4 + tree_len(ROUTES) + BLOCKS;

const fn op(code: u16, jt: u8, jf: u8, k: u32) -> SockFilter {
    SockFilter { code, jt, jf, k }
}

/// A jump from instruction `at` to `to` (jumps are forward, relative to the next one).
const fn to(at: usize, to: usize) -> u8 {
    assert!(
        to > at && to - at - 1 <= u8::MAX as usize,
        "a jump out of reach"
    );
    (to - at - 1) as u8
}

/// Where each block starts.
struct Blocks {
    wait: usize,
    clone: usize,
    open: usize,
    ioctl: usize,
    sigaction: usize,
    futex: usize,
    marked: usize,
    image: usize,
    notify: usize,
}

impl Blocks {
    const fn of(&self, r: Route) -> usize {
        match r {
            Route::Notify => self.notify,
            Route::Wait => self.wait,
            Route::Image => self.image,
            Route::Clone => self.clone,
            Route::Open => self.open,
            Route::Ioctl => self.ioctl,
            Route::Sigaction => self.sigaction,
            Route::Futex => self.futex,
            Route::Marked => self.marked,
        }
    }
}

/// Writes the tree routing `r[lo..hi]` at instruction `at` (see [`tree_len`]).
const fn tree(
    f: &mut [SockFilter; FILTER_LEN],
    r: &[(u32, Route); ROUTES],
    (lo, hi): (usize, usize),
    at: usize,
    b: &Blocks,
) {
    let n = hi - lo;
    if n <= LEAF {
        let mut i = 0;
        while i < n {
            let (nr, route) = r[lo + i];
            f[at + i] = op(JEQ, to(at + i, b.of(route)), 0, nr);
            i += 1;
        }
        f[at + n] = op(RET, 0, 0, RET_ALLOW);
        return;
    }
    // The lower half falls through; the upper half is a jump on.
    let mid = lo + n / 2;
    let upper = at + 1 + tree_len(n / 2);
    f[at] = op(JGE, to(at, upper), 0, r[mid].0);
    tree(f, r, (lo, mid), at + 1, b);
    tree(f, r, (mid, hi), upper, b);
}

/// The filter: another architecture's calls (`int 0x80`) and x32 calls are allowed; a call in
/// [`CALLS`] is a user notification, and so is a call in [`TIMED_WAITS`] whose timeout (its
/// fourth argument, an `int`) is positive, and a call in [`PROC_CALLS`] made below
/// [`IMAGE_IP_LIMIT`] (a `clone` only without `CLONE_THREAD`), and one in [`GROUP_CALLS`],
/// [`OPEN_CALLS`] (unless marked [`BATCH_OPEN`]), [`MKDIR_CALLS`], [`SYSINFO`], [`EXIT_GROUP`] or
/// [`GETDENTS64`], an
/// [`IOCTL`] of [`TIOCGPGRP`] or [`TIOCSPGRP`], a [`SIGACTION`] that sets [`SIGCHLD`]'s
/// disposition or a timed [`FUTEX`] wait made there; a `nanosleep` or `gettid` marked
/// [`go_sys::MARK`] (a Go runtime's, rewritten) is allowed; everything else is allowed.
///
/// The call number is looked up in a binary tree of its routed numbers, not compared with
/// each in turn: when a filter is attached, the kernel runs it for every call number (to find
/// those it always allows, which then skip it), and a chain of 64 comparisons made attaching
/// it cost ~150 µs of every static image's start-up (~40 µs as a tree); each call the image
/// makes runs it too.
pub const fn filter() -> [SockFilter; FILTER_LEN] {
    filter_below(IMAGE_IP_LIMIT)
}

/// [`PROC_CALLS`] are sent from every address below this (the upper 32 bits of the
/// instruction pointer): every user address. For a static-pie image, which the kernel maps
/// top-down among where shared libraries go (`0x7ffff7…` with the layout sealed): its calls
/// cannot be told from a dynamic descendant's libc's by address, so all are sent, and the
/// supervisor answers those from outside the image `CONTINUE` (each such fork pays one
/// notification).
pub const NO_IP_LIMIT: u32 = 0xffff_ffff;

/// [`filter`] with `limit` in place of [`IMAGE_IP_LIMIT`].
pub const fn filter_below(limit: u32) -> [SockFilter; FILTER_LEN] {
    let routes = routes();
    let wait = 4 + tree_len(ROUTES);
    let (clone, open) = (wait + 3, wait + 5);
    let (ioctl, sigaction) = (open + 2, open + 5);
    let futex = sigaction + 6;
    let marked = futex + 6;
    let image = marked + 4;
    let (allow, notify) = (image + 2, image + 3);
    let b = Blocks {
        wait,
        clone,
        open,
        ioctl,
        sigaction,
        futex,
        marked,
        image,
        notify,
    };
    let mut f = [op(0, 0, 0, 0); FILTER_LEN];
    f[0] = op(LD_ABS, 0, 0, 4); // seccomp_data.arch
    f[1] = op(JEQ, 0, to(1, allow), ARCH_X86_64);
    f[2] = op(LD_ABS, 0, 0, 0); // seccomp_data.nr
    f[3] = op(JGE, to(3, allow), 0, 0x4000_0000); // __X32_SYSCALL_BIT
    tree(&mut f, &routes, (0, ROUTES), 4, &b);
    f[wait] = op(LD_ABS, 0, 0, 16 + 3 * 8); // seccomp_data.args[3], low word
    f[wait + 1] = op(JEQ, to(wait + 1, allow), 0, 0);
    f[wait + 2] = op(JGE, to(wait + 2, allow), to(wait + 2, notify), 0x8000_0000);
    f[clone] = op(LD_ABS, 0, 0, 16); // seccomp_data.args[0], low word
    f[clone + 1] = op(
        JSET,
        to(clone + 1, allow),
        to(clone + 1, image),
        CLONE_THREAD,
    );
    f[open] = op(LD_ABS, 0, 0, 16 + 8 + 4); // seccomp_data.args[1], high word
    f[open + 1] = op(JEQ, to(open + 1, allow), to(open + 1, image), BATCH_OPEN);
    f[ioctl] = op(LD_ABS, 0, 0, 16 + 8); // seccomp_data.args[1], low word
    f[ioctl + 1] = op(JEQ, to(ioctl + 1, image), 0, TIOCGPGRP);
    f[ioctl + 2] = op(JEQ, to(ioctl + 2, image), to(ioctl + 2, allow), TIOCSPGRP);
    f[sigaction] = op(LD_ABS, 0, 0, 16); // seccomp_data.args[0], low word: the signal
    f[sigaction + 1] = op(JEQ, 0, to(sigaction + 1, allow), SIGCHLD);
    f[sigaction + 2] = op(LD_ABS, 0, 0, 16 + 8); // args[1], low word: the new disposition
    f[sigaction + 3] = op(JEQ, 0, to(sigaction + 3, image), 0);
    f[sigaction + 4] = op(LD_ABS, 0, 0, 16 + 8 + 4); // its high word
    f[sigaction + 5] = op(JEQ, to(sigaction + 5, allow), to(sigaction + 5, image), 0);
    f[futex] = op(LD_ABS, 0, 0, 16 + 8); // args[1], low word: the operation
    f[futex + 1] = op(JEQ, 0, to(futex + 1, allow), FUTEX_WAIT_PRIVATE);
    f[futex + 2] = op(LD_ABS, 0, 0, 16 + 3 * 8); // args[3], low word: the timeout
    f[futex + 3] = op(JEQ, 0, to(futex + 3, image), 0);
    f[futex + 4] = op(LD_ABS, 0, 0, 16 + 3 * 8 + 4); // its high word
    f[futex + 5] = op(JEQ, to(futex + 5, allow), to(futex + 5, image), 0);
    let (mark_low, mark_high) = (go_sys::MARK as u32, (go_sys::MARK >> 32) as u32);
    f[marked] = op(LD_ABS, 0, 0, 16 + 2 * 8); // args[2], low word
    f[marked + 1] = op(JEQ, 0, to(marked + 1, notify), mark_low);
    f[marked + 2] = op(LD_ABS, 0, 0, 16 + 2 * 8 + 4); // its high word
    f[marked + 3] = op(
        JEQ,
        to(marked + 3, allow),
        to(marked + 3, notify),
        mark_high,
    );
    f[image] = op(LD_ABS, 0, 0, 8 + 4); // seccomp_data.instruction_pointer, high word
    f[image + 1] = op(JGE, to(image + 1, allow), to(image + 1, notify), limit);
    f[allow] = op(RET, 0, 0, RET_ALLOW);
    f[notify] = op(RET, 0, 0, RET_USER_NOTIF);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the filter on one (arch, nr) as the kernel would.
    fn run(arch: u32, nr: u32) -> u32 {
        run_with(arch, nr, 0)
    }

    /// Runs the filter on one (arch, nr, fourth argument's low word).
    fn run_with(arch: u32, nr: u32, arg3: u32) -> u32 {
        run_full(arch, nr, arg3, 0, 0)
    }

    /// Runs the filter on one (arch, nr, fourth and first arguments' low words, the
    /// instruction pointer's high word).
    fn run_full(arch: u32, nr: u32, arg3: u32, arg0: u32, ip_high: u32) -> u32 {
        run_below(IMAGE_IP_LIMIT, arch, nr, arg3, arg0, ip_high)
    }

    fn run_below(limit: u32, arch: u32, nr: u32, arg3: u32, arg0: u32, ip_high: u32) -> u32 {
        run_arg1_high(limit, arch, nr, arg3, arg0, 0, 0, ip_high)
    }

    /// [`run_below`] with the second argument's low and high words too.
    #[allow(clippy::too_many_arguments)]
    fn run_arg1_high(
        limit: u32,
        arch: u32,
        nr: u32,
        arg3: u32,
        arg0: u32,
        arg1: u32,
        arg1_high: u32,
        ip_high: u32,
    ) -> u32 {
        exec(limit, &|k| match k {
            4 => arch,
            0 => nr,
            40 => arg3,
            16 => arg0,
            24 => arg1,
            28 => arg1_high,
            32 | 36 => 0,
            12 => ip_high,
            _ => panic!("bad load"),
        })
    }

    /// Runs the filter below `limit` as the kernel would, `load` giving the word at each
    /// offset of `struct seccomp_data` it loads.
    fn exec(limit: u32, load: &dyn Fn(u32) -> u32) -> u32 {
        let f = filter_below(limit);
        let mut pc = 0;
        let mut acc = 0u32;
        loop {
            let i = f[pc];
            match i.code {
                LD_ABS => acc = load(i.k),
                JEQ => pc += if acc == i.k { i.jt } else { i.jf } as usize,
                JGE => pc += if acc >= i.k { i.jt } else { i.jf } as usize,
                JSET => pc += if acc & i.k != 0 { i.jt } else { i.jf } as usize,
                RET => return i.k,
                _ => panic!("bad op"),
            }
            pc += 1;
        }
    }

    #[test]
    fn only_an_images_timed_private_futex_waits_notify() {
        // (operation, the timeout pointer's low and high words, the address's high word)
        let futex = |op: u32, low: u32, high: u32, ip: u32| {
            exec(IMAGE_IP_LIMIT, &|k| match k {
                4 => ARCH_X86_64,
                0 => FUTEX,
                24 => op,
                40 => low,
                44 => high,
                12 => ip,
                _ => panic!("bad load {k}"),
            })
        };
        // Go's notetsleep: a timespec on its stack (0xc000…) or a thread's (0x7fff…).
        assert_eq!(
            futex(FUTEX_WAIT_PRIVATE, 0x0005_9e48, 0xc0, 0),
            RET_USER_NOTIF
        );
        assert_eq!(futex(FUTEX_WAIT_PRIVATE, 0, 0x7fff, 0), RET_USER_NOTIF);
        assert_eq!(futex(FUTEX_WAIT_PRIVATE, 0x10, 0, 0x5555), RET_USER_NOTIF);
        // No timeout (a lock), a wake, glibc's absolute waits, a library's call: never.
        assert_eq!(futex(FUTEX_WAIT_PRIVATE, 0, 0, 0), RET_ALLOW);
        assert_eq!(futex(129, 0x10, 0, 0), RET_ALLOW);
        assert_eq!(futex(9 | 128 | 256, 0x10, 0, 0), RET_ALLOW);
        assert_eq!(futex(FUTEX_WAIT_PRIVATE, 0x10, 0, 0x7f12), RET_ALLOW);
    }

    /// How many instructions the filter runs for call `nr` (no argument looked at).
    fn steps(nr: u32) -> usize {
        let f = filter();
        let (mut pc, mut acc, mut n) = (0, 0u32, 0);
        loop {
            let i = f[pc];
            n += 1;
            match i.code {
                LD_ABS => acc = if i.k == 4 { ARCH_X86_64 } else { nr },
                JEQ => pc += if acc == i.k { i.jt } else { i.jf } as usize,
                JGE => pc += if acc >= i.k { i.jt } else { i.jf } as usize,
                RET => return n,
                _ => return n + 100,
            }
            pc += 1;
        }
    }

    #[test]
    fn a_call_is_routed_in_a_few_steps_not_a_chain() {
        // The architecture and x32 checks (4), a tree of depth 4 over the routed numbers, a
        // leaf of at most 4 comparisons and its return: 13 at most for a call allowed at once
        // (the chain of comparisons it replaced ran up to 64, for every call number when the
        // kernel attached it, and for most calls an image makes).
        let routed = routes().map(|r| r.0);
        let most = (0..500).filter(|nr| !routed.contains(nr)).map(steps).max();
        assert!(most.is_some_and(|m| m <= 13), "{most:?}");
        const { assert!(FILTER_LEN < 128) };
        // In ascending order, each once, and every list's numbers in it.
        assert!(routed.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(routed.len(), ROUTES);
    }

    #[test]
    fn the_filter_notifies_exactly_the_listed_calls() {
        for nr in 0..500 {
            let listed = CALLS.iter().any(|c| c.0 == nr)
                || nr == EXEC
                || nr == EXEC_AT
                || PROC_CALLS.contains(&nr)
                || GROUP_CALLS.contains(&nr)
                || OPEN_CALLS.contains(&nr)
                || MKDIR_CALLS.contains(&nr)
                || nr == SYSINFO
                || nr == EXIT_GROUP
                || nr == GETDENTS64;
            let want = if listed { RET_USER_NOTIF } else { RET_ALLOW };
            assert_eq!(run(ARCH_X86_64, nr), want, "{nr}");
            assert_eq!(run(0x4000_0003, nr), RET_ALLOW, "i386 {nr}");
        }
        assert_eq!(run(ARCH_X86_64, 0x4000_0000 | 228), RET_ALLOW);
    }

    #[test]
    fn a_go_runtimes_marked_nanosleep_and_gettid_are_let_through() {
        let call = |nr: u32, low: u32, high: u32| {
            exec(IMAGE_IP_LIMIT, &|k| match k {
                4 => ARCH_X86_64,
                0 => nr,
                32 => low,
                36 => high,
                _ => panic!("bad load {k}"),
            })
        };
        let (low, high) = (go_sys::MARK as u32, (go_sys::MARK >> 32) as u32);
        for nr in go_sys::MARKED {
            assert_eq!(call(nr, low, high), RET_ALLOW, "{nr}");
            assert_eq!(call(nr, 0, 0), RET_USER_NOTIF, "{nr}");
            assert_eq!(call(nr, low, 0), RET_USER_NOTIF, "{nr}: half a mark");
            assert_eq!(call(nr, 0, high), RET_USER_NOTIF, "{nr}: half a mark");
        }
        // Another call with the mark is sent as ever.
        assert_eq!(call(228, low, high), RET_USER_NOTIF);
    }

    #[test]
    fn process_calls_notify_only_from_an_image_and_clone_only_for_a_process() {
        for nr in PROC_CALLS
            .into_iter()
            .chain(GROUP_CALLS)
            .chain(OPEN_CALLS)
            .chain(MKDIR_CALLS)
            .chain([SYSINFO, EXIT_GROUP, GETDENTS64])
        {
            assert_eq!(run_full(ARCH_X86_64, nr, 0, 0, 0), RET_USER_NOTIF, "{nr}");
            assert_eq!(
                run_full(ARCH_X86_64, nr, 0, 0, 0x5555),
                RET_USER_NOTIF,
                "pie {nr}"
            );
            assert_eq!(
                run_full(ARCH_X86_64, nr, 0, 0, 0x7f12),
                RET_ALLOW,
                "lib {nr}"
            );
        }
        // glibc's fork (SIGCHLD | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID) and a thread.
        assert_eq!(
            run_full(ARCH_X86_64, CLONE, 0, 0x0120_0011, 0),
            RET_USER_NOTIF
        );
        assert_eq!(run_full(ARCH_X86_64, CLONE, 0, 0x003d_0f00, 0), RET_ALLOW);
        // The other calls do not look at the address.
        assert_eq!(run_full(ARCH_X86_64, 39, 0, 0, 0x7f12), RET_USER_NOTIF);
        // A static-pie image's filter sends them from every user address.
        for nr in PROC_CALLS
            .into_iter()
            .chain(GROUP_CALLS)
            .chain(OPEN_CALLS)
            .chain([SYSINFO])
        {
            let pie = |ip| run_below(NO_IP_LIMIT, ARCH_X86_64, nr, 0, 0, ip);
            assert_eq!(pie(0x7fff), RET_USER_NOTIF, "static-pie {nr}");
            assert_eq!(pie(0), RET_USER_NOTIF, "static-pie {nr}");
        }
        assert_eq!(
            run_below(NO_IP_LIMIT, ARCH_X86_64, CLONE, 0, 0x003d_0f00, 0x7fff),
            RET_ALLOW
        );
    }

    #[test]
    fn the_supervisors_own_opens_in_a_stopped_image_are_not_sent() {
        let open = |high, ip| run_arg1_high(IMAGE_IP_LIMIT, ARCH_X86_64, 2, 0, 0, 2, high, ip);
        assert_eq!(open(0, 0), RET_USER_NOTIF);
        assert_eq!(open(BATCH_OPEN, 0), RET_ALLOW);
        assert_eq!(open(0, 0x7f12), RET_ALLOW);
    }

    #[test]
    fn only_an_images_setting_of_sigchld_notifies() {
        let set = |sig, low, high, ip| {
            run_arg1_high(
                IMAGE_IP_LIMIT,
                ARCH_X86_64,
                SIGACTION,
                0,
                sig,
                low,
                high,
                ip,
            )
        };
        // A stack address (its low word 0 too) and a static image's data.
        assert_eq!(set(SIGCHLD, 0, 0x7ffd, 0), RET_USER_NOTIF);
        assert_eq!(set(SIGCHLD, 0x4c_d0e0, 0, 0), RET_USER_NOTIF);
        assert_eq!(set(SIGCHLD, 0x4c_d0e0, 0, 0x5555), RET_USER_NOTIF);
        // Only a look (no new disposition), another signal, a library's call: never.
        assert_eq!(set(SIGCHLD, 0, 0, 0), RET_ALLOW);
        assert_eq!(set(14, 0x4c_d0e0, 0, 0), RET_ALLOW);
        assert_eq!(set(SIGCHLD, 0x4c_d0e0, 0, 0x7f12), RET_ALLOW);
        let pie = run_below(NO_IP_LIMIT, ARCH_X86_64, SIGACTION, 0, SIGCHLD, 0x7fff);
        assert_eq!(pie, RET_ALLOW, "a NULL disposition from anywhere");
    }

    #[test]
    fn only_the_terminals_process_group_ioctls_notify_and_only_from_an_image() {
        let ioctl = |arg1, ip| run_arg1_high(IMAGE_IP_LIMIT, ARCH_X86_64, IOCTL, 0, 0, arg1, 0, ip);
        for req in [TIOCGPGRP, TIOCSPGRP] {
            assert_eq!(ioctl(req, 0), RET_USER_NOTIF, "{req:#x}");
            assert_eq!(ioctl(req, 0x7f12), RET_ALLOW, "lib {req:#x}");
        }
        // TCGETS (isatty), FIONREAD: never.
        assert_eq!(ioctl(0x5401, 0), RET_ALLOW);
        assert_eq!(ioctl(0x541B, 0), RET_ALLOW);
    }

    #[test]
    fn timed_waits_notify_only_with_a_positive_timeout() {
        for nr in TIMED_WAITS {
            assert_eq!(run_with(ARCH_X86_64, nr, 0), RET_ALLOW, "poll {nr}");
            assert_eq!(
                run_with(ARCH_X86_64, nr, u32::MAX),
                RET_ALLOW,
                "infinite {nr}"
            );
            assert_eq!(run_with(ARCH_X86_64, nr, 1), RET_USER_NOTIF, "1 ms {nr}");
            assert_eq!(
                run_with(ARCH_X86_64, nr, 0x7fff_ffff),
                RET_USER_NOTIF,
                "{nr}"
            );
            assert_eq!(run_with(0x4000_0003, nr, 5), RET_ALLOW, "i386 {nr}");
        }
    }
}
