//! Per-thread state: the logical clock, the thread's place in the creation tree, its virtual
//! tid. `Copy` fields in a zero-initialised initial-exec TLS slot, so access never allocates,
//! never registers a destructor and never calls `__tls_get_addr`.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use seal_abi::{child_lineage, KIND_IMAGE, KIND_THREAD};

use crate::core::config;

#[derive(Clone, Copy)]
#[repr(C)]
pub struct ThreadState {
    pub ready: bool,
    /// The logical clock `L`, in nanoseconds since the epoch / the monotonic base.
    pub clock: i64,
    /// Key of this thread's place in the creation tree (streams and vtids derive from it).
    pub lineage: u64,
    /// Virtual tid; 0 until the pid family assigns one.
    pub vtid: i32,
    /// Threads this thread has created (the next child's index).
    pub threads: u64,
    /// The causal clock `W`: `L` as it stood after this thread's last wait that moved it
    /// (a timeout, a sleep) or its last adoption of another's clock; what it publishes to
    /// whoever it wakes (`crate::causal`). Clock reads alone do not move it.
    pub causal: i64,
    /// How far waits and adoptions (not reads) have moved `L` since the thread started, plus
    /// its `L` then: the CPU-time clocks read `L - waited`, so they advance with the thread's
    /// reads and never while it waits.
    pub waited: i64,
    /// Clock reads since a wait or an adoption last moved `L` (or since the thread began):
    /// while fewer than `LIBSEAL_SPIN_AFTER`, a read does not move `L`, so clock reads the
    /// program does not print leave every other value alone.
    pub streak: i64,
    /// The ticks of this thread's monotonic and CPU-time reads: those clocks read
    /// `L + mono`, so a duration measured with them is never zero, while the wall clock,
    /// which reads `L`, does not move with them.
    pub mono: i64,
    /// `mono` when the thread began (its CPU clock starts at 0).
    pub mono_start: i64,
    /// Where the census counts the hot calls of one call site each ([`HotSite`]).
    pub hot: [HotSite; HOT_SITES],
    /// `config::tick()` and `config::epoch_ns()`, copied when a [`HotSite`] entry is stored
    /// (the configuration is read by then and never changes after), so the fast clock read
    /// finds them next to the entry it just matched.
    pub hot_tick: i64,
    pub hot_epoch: i64,
}

/// The hot calls whose census counter a thread remembers: one entry each.
pub const HOT_SITES: usize = 5;

/// A thread's memory of where the census counted its last call from one hot entry point
/// (`census::learn`, `census::bump_hot`): the caller, and the counter the call went to. The next call from
/// the same caller is then one increment of that counter, no hashing or probing. Zero (the
/// state of a new thread, and after a fork) matches no caller.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct HotSite {
    pub caller: u64,
    pub count: *const core::sync::atomic::AtomicU64,
}

impl HotSite {
    pub const EMPTY: HotSite = HotSite {
        caller: 0,
        count: core::ptr::null(),
    };
}

impl ThreadState {
    pub const EMPTY: ThreadState = ThreadState {
        ready: false,
        clock: 0,
        lineage: 0,
        vtid: 0,
        threads: 0,
        causal: 0,
        waited: 0,
        streak: 0,
        mono: 0,
        mono_start: 0,
        hot: [HotSite::EMPTY; HOT_SITES],
        hot_tick: 0,
        hot_epoch: 0,
    };
}

/// Declares a zero-filled per-thread slot of type `$ty` in the static TLS block and a function
/// `$ptr()` returning this thread's slot, reached as `fs:0 + offset` (the initial-exec model).
///
/// Rust's `thread_local!` in a cdylib uses the general-dynamic model: a call to
/// `__tls_get_addr` on every access, about a fifth of a sealed `time()` (BENCHMARKS.md).
/// Initial-exec is sound here because libseal is loaded at start-up by LD_PRELOAD, so its TLS
/// is in the static block (were it ever `dlopen`ed, glibc serves small slots from its static
/// TLS surplus). `.tbss` is zero-filled for every new thread: all-zero bytes must be a valid
/// `$ty`, which its owner documents.
#[macro_export]
macro_rules! initial_exec_tls {
    ($sym:literal, $ty:ty, $ptr:ident) => {
        core::arch::global_asm!(
            concat!(".pushsection .tbss.", $sym, ",\"awT\",@nobits"),
            // Global so every codegen unit can reach it, hidden so libseal does not export it.
            concat!(".globl ", $sym),
            concat!(".hidden ", $sym),
            concat!(".type ", $sym, ",@object"),
            concat!(".size ", $sym, ",{size}"),
            ".p2align 4",
            concat!($sym, ":"),
            ".zero {size}",
            ".popsection",
            size = const core::mem::size_of::<$ty>(),
        );

        /// This thread's slot.
        #[inline(always)]
        fn $ptr() -> *mut $ty {
            let p: *mut $ty;
            // SAFETY: fs:0 holds the thread pointer on x86_64 Linux; the GOT entry holds the
            // slot's (negative) offset from it, filled by the loader (R_X86_64_TPOFF64).
            unsafe {
                core::arch::asm!(
                    "mov {p}, qword ptr fs:[0]",
                    concat!("add {p}, qword ptr [rip + ", $sym, "@GOTTPOFF]"),
                    p = out(reg) p,
                    options(nostack, pure, readonly),
                );
            }
            p
        }
    };
}

/// A per-thread `Cell<T>` in the static TLS block, declared with [`thread_cell!`]: what
/// `thread_local!` with a `const` initialiser gives, without std (the embedded libseal is
/// `no_std`) and without `__tls_get_addr`. Its value starts as all-zero bytes in every thread.
pub struct ThreadCell<T: 'static>(fn() -> *mut T);

impl<T: Copy> ThreadCell<T> {
    #[doc(hidden)]
    pub const fn new(slot: fn() -> *mut T) -> Self {
        ThreadCell(slot)
    }

    /// Runs `f` with this thread's cell.
    #[inline(always)]
    pub fn with<R>(&'static self, f: impl FnOnce(&core::cell::Cell<T>) -> R) -> R {
        // SAFETY: the slot is this thread's own and lives as long as the thread; `Cell<T>`
        // has `T`'s layout, and a `&Cell` cannot leave the thread (`Cell` is not `Sync`).
        f(unsafe { &*(self.0() as *const core::cell::Cell<T>) })
    }
}

/// `thread_cell!(static NAME: T = "symbol";)` declares a [`ThreadCell<T>`] whose slot is the
/// hidden TLS symbol `symbol` (unique in libseal). All-zero bytes must be a valid `T`, and
/// are its starting value in every thread.
#[macro_export]
macro_rules! thread_cell {
    ($(#[$m:meta])* $vis:vis static $name:ident: $ty:ty = $sym:literal;) => {
        #[allow(non_snake_case)]
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $crate::initial_exec_tls!($sym, $ty, slot_ptr);
            #[inline(always)]
            pub(super) fn slot() -> *mut $ty {
                slot_ptr()
            }
        }
        $(#[$m])*
        $vis static $name: $crate::core::thread::ThreadCell<$ty> =
            $crate::core::thread::ThreadCell::new($name::slot);
    };
}

// All zeros is `ThreadState::EMPTY`.
crate::initial_exec_tls!("seal_thread_state", ThreadState, state_ptr);

/// Threads that started without our `pthread_create` trampoline (glibc helper threads, raw
/// `clone`): numbered in the order they first reach the shim.
static STRAYS: AtomicU64 = AtomicU64::new(0);

/// Lineage key of this process image's main thread: the process's lineage and the image's
/// ordinal (its program and how many earlier images of the process ran that program), never
/// the number of images before it (`seal_abi::settings::NAMES`).
pub fn image_lineage() -> u64 {
    child_lineage(
        config::LINEAGE.load(Relaxed),
        KIND_IMAGE,
        config::IMAGE_ORD.load(Relaxed),
    )
}

#[cold]
fn init_thread(t: &mut ThreadState) {
    let main = crate::core::sys::gettid() == crate::core::sys::getpid();
    let lineage = if main {
        image_lineage()
    } else {
        child_lineage(
            image_lineage(),
            KIND_THREAD ^ 0x5757,
            STRAYS.fetch_add(1, Relaxed),
        )
    };
    let clock = config::START_CLOCK.load(Relaxed);
    *t = ThreadState {
        ready: true,
        clock,
        lineage,
        vtid: if main { config::VPID.load(Relaxed) } else { 0 },
        causal: clock,
        waited: clock,
        ..ThreadState::EMPTY
    };
}

/// Runs `f` on this thread's state (initialising it on first use).
#[inline(always)]
pub fn with<R>(f: impl FnOnce(&mut ThreadState) -> R) -> R {
    // SAFETY: the slot is only touched by its own thread, and no caller holds the reference
    // across a call that could re-enter `with`. A signal handler may run between any two
    // instructions of `f`: the logical clock is therefore only changed through `update_clock`
    // (one instruction claims the change), never by a read-modify-write in `f`. All-zero bytes
    // are a valid `ThreadState` (`EMPTY`).
    let t = unsafe { &mut *state_ptr() };
    if !t.ready {
        init_thread(t);
    }
    f(t)
}

mod hot;
pub use hot::*;

/// Replaces this thread's logical clock `c` by `f(c)` and returns `c`, as one claim that a
/// signal handler on this thread cannot split: the new value is installed with a single
/// `cmpxchg` (no `lock` prefix: the slot is this thread's own, and a signal is delivered
/// between instructions, never inside one). If a handler changed the clock between the load
/// and the `cmpxchg`, the exchange fails and the update is recomputed from the handler's
/// value. So a handler's read and the read it interrupted never return the same value, and a
/// handler's advance is never lost.
#[inline(always)]
fn update_clock(f: impl Fn(i64) -> i64) -> i64 {
    update_field(with(|t| core::ptr::addr_of_mut!(t.clock)), f)
}

/// [`update_clock`] on any `i64` field of this thread's state.
#[inline(always)]
fn update_field(clock: *mut i64, f: impl Fn(i64) -> i64) -> i64 {
    loop {
        // SAFETY: `clock` is this thread's live, aligned TLS slot.
        let old = unsafe { clock.read_volatile() };
        let new = f(old);
        let seen: i64;
        // SAFETY: one compare-and-exchange on the aligned i64 slot; rax holds the expected
        // value in and the value found out.
        unsafe {
            core::arch::asm!(
                "cmpxchg qword ptr [{p}], {new}",
                p = in(reg) clock,
                new = in(reg) new,
                inout("rax") old => seen,
                options(nostack),
            );
        }
        if seen == old {
            return old;
        }
    }
}

/// Reads the logical clock: the value every clock read returns. The first
/// `LIBSEAL_SPIN_AFTER` reads after a wait leave it where it is (time moves with waits, not
/// with reads); every later read of the same stretch advances it one tick, so a loop that
/// spins on the clock (`while time() < deadline`) still gets there. With `SPIN_AFTER` 0
/// every read ticks. Saturates at `i64::MAX` (a huge tick, a far epoch): reads at the cap
/// stay at the cap, and time never wraps to negative.
#[inline(always)]
pub fn read_and_tick() -> i64 {
    read_after(config::spin_after())
}

/// [`read_and_tick`] with `still` reads of each stretch leaving the clock where it is.
#[inline(always)]
fn read_after(still: i64) -> i64 {
    if still > 0 {
        let before = update_field(with(|t| core::ptr::addr_of_mut!(t.streak)), |v| {
            v.saturating_add(1)
        });
        if before < still {
            return peek();
        }
    }
    let tick = config::tick().max(0);
    update_clock(|v| v.saturating_add(tick))
}

/// A read of a monotonic clock: `mono` advances one tick, and the read returns `L + mono`.
/// (Advancing first makes a deadline computed from the read, `now + 2 s`, sit exactly 2 s
/// past `L`: a wait to it moves the wall clock by exactly 2 s.) `L` is read first: a signal
/// handler that reads between the two finds `mono` already claimed and returns more, never
/// the same value.
#[inline(always)]
pub fn mono_read_and_tick() -> i64 {
    let tick = config::tick().max(0);
    // One TLS access for both: `L` as it is now, and where `mono` lives.
    let (l, mono) = with(|t| (t.clock, core::ptr::addr_of_mut!(t.mono)));
    let m = update_field(mono, |v| v.saturating_add(tick));
    l.saturating_add(m).saturating_add(tick)
}

/// This thread's monotonic ticks (what its monotonic clocks read above `L`).
#[inline(always)]
pub fn mono() -> i64 {
    with(|t| t.mono)
}

/// A read of a CPU-time clock: the ticks of this thread's reads, never its waits
/// (`L - waited` plus its monotonic ticks), after which `mono` advances one tick as for a
/// monotonic read.
#[inline(always)]
pub fn cpu_read_and_tick() -> i64 {
    let (waited, start) = with(|t| (t.waited, t.mono_start));
    let l = peek();
    let tick = config::tick().max(0);
    let m = update_field(with(|t| core::ptr::addr_of_mut!(t.mono)), |v| {
        v.saturating_add(tick)
    });
    l.saturating_sub(waited)
        .saturating_add(m.saturating_sub(start))
        .max(0)
}

/// The CPU clock without advancing it.
#[inline(always)]
pub fn cpu_peek() -> i64 {
    with(|t| {
        t.clock
            .saturating_sub(t.waited)
            .saturating_add(t.mono.saturating_sub(t.mono_start))
            .max(0)
    })
}

/// `L` moved by `f` because of a wait or an adoption: `waited` takes the move, so the CPU
/// clock stays where it was. (`waited` is raised first: a signal handler that reads the CPU
/// clock between the two sees it a little early, never ahead.)
#[inline]
fn wait_move(target: i64) {
    let delta = target.saturating_sub(peek());
    if delta <= 0 {
        return;
    }
    with(|t| t.waited = t.waited.saturating_add(delta));
    advance_to(target);
    // A new stretch: its first reads are still again. (A wait of zero, a `poll` with no
    // timeout, does not start one: a loop of those and clock reads still gets to its end.)
    update_field(with(|t| core::ptr::addr_of_mut!(t.streak)), |_| 0);
}

/// The causal clock `W` (what this thread publishes to those it wakes).
#[inline(always)]
pub fn causal() -> i64 {
    with(|t| t.causal)
}

/// A wait moved `L`, another's clock was adopted, or the thread did something others learn of
/// (set the clock): `W` catches up with `L`.
#[inline]
pub fn mark_causal() {
    let l = peek();
    update_field(with(|t| core::ptr::addr_of_mut!(t.causal)), |v| v.max(l));
}

/// A wait ran to its deadline: `L` moves to `to` (never back) and `W` follows.
#[inline]
pub fn waited_to(to: i64) {
    wait_move(to);
    mark_causal();
}

/// A relative wait ran `ns`: `L` moves by it and `W` follows.
#[inline]
pub fn waited_by(ns: i64) {
    wait_move(peek().saturating_add(ns.max(0)));
    mark_causal();
}

/// Lamport's receive: this thread was woken by one whose causal clock was `v`. `L` and `W`
/// become at least `v`. Returns whether `L` moved.
#[inline]
pub fn adopt(v: i64) -> bool {
    let before = peek();
    wait_move(v);
    update_field(with(|t| core::ptr::addr_of_mut!(t.causal)), |c| c.max(v));
    v > before
}

/// Takes back the tick of this thread's last read, whose value only a runtime's own wait saw
/// (CPython reads the monotonic clock to compute each GIL wait's deadline, as often as its
/// threads contend): the program's next read returns what that read returned, so the
/// program's values do not depend on how often it waited for the GIL.
#[inline]
pub fn refund_tick() {
    let tick = config::tick().max(0);
    if config::RATE_PPM.load(Relaxed) == 0 {
        // The runtimes' deadline reads are monotonic: their tick went to `mono`.
        let start = with(|t| t.mono_start);
        update_field(with(|t| core::ptr::addr_of_mut!(t.mono)), |v| {
            v.saturating_sub(tick).max(start)
        });
        return;
    }
    update_clock(|v| v.saturating_sub(tick));
}

/// The logical clock without advancing it (for deadline translation).
#[inline(always)]
pub fn peek() -> i64 {
    with(|t| t.clock)
}

/// This thread's clock without the ticks of its reads: where it started plus what its waits
/// and adoptions moved it by (what a new image of the process starts from).
pub fn waited() -> i64 {
    with(|t| t.waited)
}

/// Moves the logical clock forward to `to` (never backwards): a wait that timed out.
#[inline]
pub fn advance_to(to: i64) {
    update_clock(|v| v.max(to));
}

/// Moves the logical clock forward by `ns` (a relative sleep that ran to its end).
#[inline]
pub fn advance_by(ns: i64) {
    update_clock(|v| v.saturating_add(ns.max(0)));
}

/// State a new thread starts from: the creator's clock, the next child lineage.
pub fn spawn_child_state() -> ThreadState {
    with(|t| {
        let idx = t.threads;
        t.threads += 1;
        ThreadState {
            ready: true,
            clock: t.clock,
            lineage: child_lineage(t.lineage, KIND_THREAD, idx),
            vtid: 0,
            threads: 0,
            // Creating a thread carries no wait: its causal clock is its creator's.
            causal: t.causal,
            // A new thread's CPU clock starts at 0.
            waited: t.clock,
            streak: 0,
            // Its monotonic clock goes on from its creator's; its CPU clock starts at 0.
            mono: t.mono,
            mono_start: t.mono,
            // Its census counters are found afresh (it counts in its own shard).
            hot: [HotSite::EMPTY; HOT_SITES],
            hot_tick: 0,
            hot_epoch: 0,
        }
    })
}

/// Installs `s` as this thread's state (a thread started by our trampoline, a fork child).
pub fn install(s: ThreadState) {
    with(|t| *t = s);
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::thread_cell! {
        static CELL: (u64, bool) = "seal_tls_test_cell";
    }

    #[test]
    fn a_thread_cell_starts_zeroed_in_every_thread_and_is_its_own() {
        CELL.with(|c| c.set((7, true)));
        let other = std::thread::spawn(|| {
            let start = CELL.with(|c| c.get());
            CELL.with(|c| c.set((9, false)));
            (start, CELL.with(|c| c.get()))
        })
        .join()
        .unwrap();
        assert_eq!(other, ((0, false), (9, false)));
        assert_eq!(CELL.with(|c| c.get()), (7, true));
    }

    #[test]
    fn each_thread_has_its_own_zeroed_state() {
        // The TLS slot must start as EMPTY (all zero) in every thread, then hold its own clock.
        let here = with(|t| {
            t.clock = 42;
            t.ready
        });
        assert!(here);
        let other = std::thread::spawn(|| with(|t| t.clock == config::START_CLOCK.load(Relaxed)))
            .join()
            .unwrap();
        assert!(other);
        assert_eq!(peek(), 42);
        advance_to(41);
        assert_eq!(peek(), 42);
        advance_by(8);
        assert_eq!(peek(), 50);
    }

    #[test]
    fn monotonic_reads_never_move_the_wall_clock() {
        std::thread::spawn(|| {
            let tick = config::tick();
            let l = peek();
            let a = mono_read_and_tick();
            let b = mono_read_and_tick();
            assert_eq!((a - l, b - a), (tick, tick));
            assert_eq!(peek(), l, "the wall clock moved");
            assert_eq!(cpu_peek(), 2 * tick);
            // A wait moves both clocks and no CPU time.
            waited_by(1000);
            assert_eq!(peek(), l + 1000);
            assert_eq!(mono_read_and_tick(), l + 1000 + 3 * tick);
            assert_eq!(cpu_peek(), 3 * tick);
            // A runtime's deadline read is taken back from the monotonic count, never below
            // where the thread began.
            refund_tick();
            assert_eq!(mono(), 2 * tick);
            for _ in 0..5 {
                refund_tick();
            }
            assert_eq!(mono(), 0);
            // A new thread goes on from its creator's monotonic clock with a CPU clock at 0.
            let child = spawn_child_state();
            assert_eq!((child.mono, child.mono_start), (0, 0));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_first_reads_after_a_wait_leave_the_clock_still() {
        std::thread::spawn(|| {
            let tick = config::tick();
            let l = peek();
            let reads: [i64; 5] = core::array::from_fn(|_| read_after(3));
            // Three still reads, then a spin: every later read ticks (after it is read).
            assert_eq!(reads, [l, l, l, l, l + tick]);
            // A wait that moves the clock starts a new stretch; one of zero does not.
            waited_by(0);
            assert_eq!(read_after(3), l + 2 * tick);
            waited_by(500);
            let after = peek();
            assert_eq!([read_after(3), read_after(3)], [after, after]);
            // 0: every read ticks.
            assert_eq!([read_after(0), read_after(0)], [after, after + tick]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_clock_saturates_instead_of_wrapping() {
        std::thread::spawn(|| {
            with(|t| t.clock = i64::MAX - 3);
            let tick = config::tick();
            assert!(tick > 3);
            assert_eq!(read_and_tick(), i64::MAX - 3);
            assert_eq!(read_and_tick(), i64::MAX);
            assert_eq!(read_and_tick(), i64::MAX);
            advance_by(i64::MAX);
            advance_to(5);
            assert_eq!(peek(), i64::MAX);
        })
        .join()
        .unwrap();
    }
}
