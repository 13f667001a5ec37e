//! Several system calls run in a tracee stopped at its exec, in one go: a few instructions
//! written over its entry point (saved first, put back after), run to an `int3` with one
//! `PTRACE_CONT`, each call's result stored in the tracee's memory. One stop instead of one
//! single-step (and scheduling round trip) per call: at load each round trip costs up to a
//! millisecond of the image's start-up.

/// An argument: a number, or the descriptor the last `open` of the batch returned.
#[derive(Clone, Copy)]
pub enum Arg {
    Imm(u64),
    Fd,
}

/// The instructions, built up call by call.
#[derive(Default)]
pub struct Batch {
    code: Vec<u8>,
    /// Offsets of `rel32` jumps to the end, patched by [`Batch::run`].
    to_end: Vec<usize>,
    calls: usize,
    results: u64,
}

/// `rdi`, `rsi`, `rdx`, `r10`, `r8`, `r9`: the argument registers, as register numbers.
const ARGS: [u8; 6] = [7, 6, 2, 10, 8, 9];

impl Batch {
    /// A batch storing call `i`'s result at `results + 8 * i` (memory the caller reserved).
    pub fn new(results: u64) -> Batch {
        let mut b = Batch {
            results,
            ..Batch::default()
        };
        b.movabs(13, results); // r13: where the results go
        b
    }

    fn movabs(&mut self, reg: u8, v: u64) {
        self.code.push(if reg < 8 { 0x48 } else { 0x49 });
        self.code.push(0xb8 + (reg & 7));
        self.code.extend(v.to_le_bytes());
    }

    /// `reg = v` in as few bytes as it takes: `mov r32, imm32` (which clears the upper half)
    /// for a 32-bit value, `mov r64, simm32` for a small negative one, else `movabs`. Most
    /// arguments are small (flags, lengths, descriptors), and a batch may write only 1 KiB
    /// over the image's entry point: every argument a 10-byte `movabs` was ~77 bytes a call.
    fn mov_imm(&mut self, reg: u8, v: u64) {
        if v <= u32::MAX as u64 {
            if reg >= 8 {
                self.code.push(0x41);
            }
            self.code.push(0xb8 + (reg & 7));
            self.code.extend((v as u32).to_le_bytes());
        } else if let Ok(small) = i32::try_from(v as i64) {
            self.code.push(if reg < 8 { 0x48 } else { 0x49 });
            self.code.extend([0xc7, 0xc0 + (reg & 7)]);
            self.code.extend(small.to_le_bytes());
        } else {
            self.movabs(reg, v);
        }
    }

    /// `mov reg, r12` (r12 holds the last `open`'s descriptor).
    fn mov_fd(&mut self, reg: u8) {
        let rex = 0x4c | u8::from(reg >= 8);
        self.code.extend([rex, 0x89, 0xe0 | (reg & 7)]);
    }

    /// Appends system call `nr`; its result is number [`Batch::calls`] − 1. An `open`'s
    /// result is kept for later [`Arg::Fd`]s.
    pub fn call(&mut self, nr: i64, mut args: [Arg; 6]) -> &mut Self {
        // An `open` here is the supervisor's own, which the filter must not send it (it waits
        // for the batch): its flags carry the mark the filter lets through.
        if let (libc::SYS_open, Arg::Imm(flags)) = (nr, &mut args[1]) {
            *flags |= (seal_abi::supervised::BATCH_OPEN as u64) << 32;
        }
        for (reg, a) in ARGS.into_iter().zip(args) {
            match a {
                Arg::Imm(v) => self.mov_imm(reg, v),
                Arg::Fd => self.mov_fd(reg),
            }
        }
        self.code.push(0xb8); // mov eax, nr
        self.code.extend((nr as u32).to_le_bytes());
        self.code.extend([0x0f, 0x05]); // syscall
                                        // mov [r13 + 8i], rax
        match u8::try_from(8 * self.calls).ok().filter(|&d| d < 0x80) {
            Some(d) => self.code.extend([0x49, 0x89, 0x45, d]),
            None => {
                self.code.extend([0x49, 0x89, 0x85]);
                self.code.extend((8 * self.calls as u32).to_le_bytes());
            }
        }
        if nr == libc::SYS_open {
            self.code.extend([0x49, 0x89, 0xc4]); // mov r12, rax
        }
        self.calls += 1;
        self
    }

    fn jump_to_end(&mut self, op: u8) {
        self.code.extend([0x0f, op, 0, 0, 0, 0]);
        self.to_end.push(self.code.len() - 4);
    }

    /// Points the jumps to the end at it, and ends the code with `int3`.
    fn resolve(&mut self) {
        let end = self.code.len();
        for at in std::mem::take(&mut self.to_end) {
            let d = (end - (at + 4)) as u32;
            self.code[at..at + 4].copy_from_slice(&d.to_le_bytes());
        }
        self.code.push(0xcc); // int3
    }

    /// How many calls the batch has so far (the next one's result is number this).
    pub fn calls(&self) -> usize {
        self.calls
    }

    /// Stops the batch when the last call failed (a negative result).
    pub fn or_stop(&mut self) -> &mut Self {
        self.code.extend([0x48, 0x85, 0xc0]); // test rax, rax
        self.jump_to_end(0x88); // js end
        self
    }

    /// Stops the batch unless the last call returned `v`.
    pub fn or_stop_unless(&mut self, v: u64) -> &mut Self {
        self.mov_imm(11, v); // mov r11, v
        self.code.extend([0x4c, 0x39, 0xd8]); // cmp rax, r11
        self.jump_to_end(0x85); // jne end
        self
    }

    /// Runs the batch in `pid` (stopped, with registers `saved`, its entry point at
    /// `saved.rip`): the calls' results, `None` for one that did not run; `None` in all when
    /// the tracee did not come back to its `int3` (its text and registers are put back either
    /// way).
    pub fn run(mut self, pid: i32, saved: &libc::user_regs_struct) -> Option<Vec<Option<i64>>> {
        self.resolve();
        let none = vec![i64::MIN; self.calls];
        let none_bytes: Vec<u8> = none.iter().flat_map(|v| v.to_le_bytes()).collect();
        if self.code.len() > 1024 || !super::remote::write(pid, self.results, &none_bytes) {
            return None;
        }
        let mut orig = [0u8; 1024];
        if read_some(pid, saved.rip, &mut orig[..self.code.len()]) != self.code.len() {
            return None;
        }
        if !write_text(pid, saved.rip, &self.code) {
            write_text(pid, saved.rip, &orig[..self.code.len()]);
            return None;
        }
        let mut regs = *saved;
        regs.orig_rax = u64::MAX; // no system call to restart
        let mut after = *saved;
        // A signal sent meanwhile stops the tracee on its way: held back, and sent again once
        // the batch is done (it is then pending when the image runs).
        let mut held = Vec::new();
        // SAFETY: ptrace requests on our stopped tracee with regs structs we own; waitpid
        // on it.
        let mut ok = unsafe { libc::ptrace(libc::PTRACE_SETREGS, pid, 0, &regs) == 0 };
        for _ in 0..8 {
            let mut st = 0;
            // SAFETY: as above.
            let stopped = ok
                && unsafe {
                    libc::ptrace(libc::PTRACE_CONT, pid, 0, 0) == 0
                        && libc::waitpid(pid, &mut st, libc::__WALL) == pid
                        && libc::WIFSTOPPED(st)
                };
            if stopped && libc::WSTOPSIG(st) != libc::SIGTRAP {
                held.push(libc::WSTOPSIG(st));
                continue;
            }
            // SAFETY: as above.
            ok = stopped && unsafe { libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut after) } == 0;
            break;
        }
        let back = write_text(pid, saved.rip, &orig[..self.code.len()]);
        // SAFETY: restores the registers of our stopped tracee; sends back what was held.
        unsafe {
            libc::ptrace(libc::PTRACE_SETREGS, pid, 0, saved);
            for sig in held {
                libc::syscall(libc::SYS_tgkill, pid, pid, sig);
            }
        }
        if !ok || !back || after.rip != saved.rip + self.code.len() as u64 {
            return None;
        }
        let mut raw = vec![0u8; 8 * self.calls];
        if read_some(pid, self.results, &mut raw) != raw.len() {
            return None;
        }
        let out = raw
            .chunks(8)
            .map(|w| i64::from_le_bytes(w.try_into().unwrap_or_default()));
        Some(out.map(|v| (v != i64::MIN).then_some(v)).collect())
    }
}

/// Where a set-up puts the calls it needs made in a stopped image: a batch of its own, or
/// another's ([`Along`]). Each gives the call's number among its results.
pub trait Calls {
    fn add(&mut self, nr: i64, args: [Arg; 6]) -> usize;
    /// Stops the batch when the last call failed.
    fn stop_on_error(&mut self);
    /// Stops the batch unless the last call returned `v`.
    fn stop_unless(&mut self, v: u64);
}

impl Calls for Batch {
    fn add(&mut self, nr: i64, args: [Arg; 6]) -> usize {
        self.call(nr, args);
        self.calls - 1
    }
    fn stop_on_error(&mut self) {
        self.or_stop();
    }
    fn stop_unless(&mut self, v: u64) {
        self.or_stop_unless(v);
    }
}

/// Where a batch stops after one of [`Along`]'s calls.
#[derive(Clone, Copy)]
enum Stop {
    Never,
    /// When it failed.
    OnError,
    /// Unless it returned this.
    Unless(u64),
}

/// Calls other parts of a Go image's exec stop need (the runtime's random functions' mapping,
/// the `crypto/rand` window's: `serve/go_rand.rs`, `go_entropy.rs`), made at the end of the
/// clock page's batch (`vdso_clock.rs`): one stop of the image for all of them, where each
/// was a stop and a scheduling round trip of its own (~70–110 µs of a hello world's
/// start-up). A step of the batch that fails skips every call after it: those find their
/// results `None` (not run), and their set-up runs a batch of its own.
#[derive(Default)]
pub struct Along {
    /// Each call, and where the batch stops after it.
    calls: Vec<(i64, [Arg; 6], Stop)>,
    results: Option<Vec<Option<i64>>>,
}

impl Along {
    /// Appends the calls to `b`.
    pub fn add_to(&self, b: &mut Batch) {
        for &(nr, args, stop) in &self.calls {
            b.call(nr, args);
            match stop {
                Stop::OnError => {
                    b.or_stop();
                }
                Stop::Unless(v) => {
                    b.or_stop_unless(v);
                }
                Stop::Never => {}
            }
        }
    }

    /// The results of the calls, as the batch gave them (from the first of them on).
    pub fn ran(&mut self, r: &[Option<i64>]) {
        self.results = Some(r.to_vec());
    }

    /// Call `i`'s result: `None` when it did not run.
    pub fn result(&self, i: usize) -> Option<i64> {
        self.results.as_ref()?.get(i).copied().flatten()
    }
}

impl Calls for Along {
    fn add(&mut self, nr: i64, args: [Arg; 6]) -> usize {
        self.calls.push((nr, args, Stop::Never));
        self.calls.len() - 1
    }
    fn stop_on_error(&mut self) {
        if let Some(c) = self.calls.last_mut() {
            c.2 = Stop::OnError;
        }
    }
    fn stop_unless(&mut self, v: u64) {
        if let Some(c) = self.calls.last_mut() {
            c.2 = Stop::Unless(v);
        }
    }
}

/// The tracee whose `/proc/PID/mem` is open: the exec stop reads and writes it several times
/// (the stack, the batch's code and its undoing, the vDSO), each open a path look-up.
static MEM: std::sync::Mutex<Option<(i32, std::fs::File)>> = std::sync::Mutex::new(None);

/// Runs `f` on `/proc/PID/mem` of `pid` (opened once, again after a failure); false when it
/// cannot be opened or `f` fails twice.
fn with_mem(pid: i32, mut f: impl FnMut(&std::fs::File) -> bool) -> bool {
    let mut mem = MEM.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..2 {
        if mem.as_ref().is_none_or(|m| m.0 != pid) {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(format!("/proc/{pid}/mem"));
            *mem = file.ok().map(|f| (pid, f));
        }
        match mem.as_ref() {
            Some((_, file)) if f(file) => return true,
            Some(_) => *mem = None,
            None => return false,
        }
    }
    false
}

/// Reads what it can of `buf.len()` bytes at `addr` in stopped tracee `pid` (up to the first
/// page it cannot read): the bytes read.
pub(super) fn read_some(pid: i32, addr: u64, buf: &mut [u8]) -> usize {
    use std::os::unix::fs::FileExt;
    let n = std::cell::Cell::new(0);
    // A descriptor of a process that has exec'd since reads nothing (its memory is gone).
    with_mem(pid, |f| match f.read_at(buf, addr) {
        Ok(k) if k > 0 || buf.is_empty() => {
            n.set(k);
            true
        }
        _ => false,
    });
    n.get()
}

/// Writes `data` over read-only text at `addr` of stopped tracee `pid`: one write to
/// `/proc/PID/mem` (which a tracer may write through read-only pages, as `PTRACE_POKEDATA`
/// does eight bytes at a time), else word by word.
pub(super) fn write_text(pid: i32, addr: u64, data: &[u8]) -> bool {
    use std::os::unix::fs::FileExt;
    with_mem(pid, |f| f.write_all_at(data, addr).is_ok()) || super::text::poke(pid, addr, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `b`'s code in this process (in a page of its own, `r12` and `r13` saved around
    /// it, a `ret` for its `int3`): the results it stored in `out`.
    fn run_here(mut b: Batch, out: &mut [i64]) {
        b.resolve();
        b.code.pop();
        let mut code = vec![0x41, 0x54, 0x41, 0x55]; // push r12; push r13
        code.extend(&b.code);
        code.extend([0x41, 0x5d, 0x41, 0x5c, 0xc3]); // pop r13; pop r12; ret
                                                     // SAFETY: a new private anonymous mapping, read-write-execute, unmapped below.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                8192,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(page, libc::MAP_FAILED);
        assert!(code.len() <= 8192);
        out.fill(i64::MIN);
        // SAFETY: our mapping, large enough; then called as a function of no arguments that
        // keeps every callee-saved register (it writes r12 and r13 between the push and pop).
        unsafe {
            std::ptr::copy_nonoverlapping(code.as_ptr(), page.cast::<u8>(), code.len());
            let f: extern "C" fn() = std::mem::transmute(page);
            f();
            libc::munmap(page, 8192);
        }
    }

    #[test]
    fn a_batch_makes_its_calls_stores_their_results_and_stops_where_told() {
        let mut out = [0i64; 40];
        let at = out.as_ptr() as u64;
        let mut b = Batch::new(at);
        b.call(libc::SYS_getpid, [Arg::Imm(0); 6]);
        // A small negative and a 64-bit argument (ignored by getppid), and a descriptor.
        let args = [
            Arg::Imm(u64::MAX),
            Arg::Imm(1 << 40),
            Arg::Fd,
            Arg::Imm(7),
            Arg::Imm(0),
            Arg::Imm(0),
        ];
        b.call(libc::SYS_getppid, args);
        // Results past the short displacement's reach.
        for _ in 0..20 {
            b.call(libc::SYS_getpid, [Arg::Imm(0); 6]);
        }
        let pid = std::process::id() as i64;
        b.or_stop_unless(pid as u64);
        // close(-1): EBADF, and the batch stops there.
        b.call(
            libc::SYS_close,
            [
                Arg::Imm(u64::MAX),
                Arg::Imm(0),
                Arg::Imm(0),
                Arg::Imm(0),
                Arg::Imm(0),
                Arg::Imm(0),
            ],
        )
        .or_stop();
        b.call(libc::SYS_getpid, [Arg::Imm(0); 6]);
        let n = b.calls();
        run_here(b, &mut out);
        // SAFETY: getppid has no preconditions.
        let ppid = unsafe { libc::getppid() } as i64;
        assert_eq!(&out[..2], &[pid, ppid]);
        assert!(out[2..22].iter().all(|&r| r == pid), "{out:?}");
        assert_eq!(out[22], -(libc::EBADF as i64));
        assert_eq!(out[23], i64::MIN, "after the stop: not run");
        assert_eq!(n, 24);
    }

    #[test]
    fn an_argument_takes_the_shortest_move_that_holds_it() {
        let len = |v: u64, reg: u8| {
            let mut b = Batch::default();
            b.mov_imm(reg, v);
            b.code.len()
        };
        assert_eq!((len(5, 7), len(5, 10)), (5, 6));
        assert_eq!(len(u32::MAX as u64, 2), 5);
        assert_eq!(len(u64::MAX, 9), 7);
        assert_eq!(len(1 << 40, 6), 10);
    }
}
