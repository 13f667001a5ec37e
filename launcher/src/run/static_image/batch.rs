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
        Batch {
            results,
            ..Batch::default()
        }
    }

    fn movabs(&mut self, reg: u8, v: u64) {
        self.code.push(if reg < 8 { 0x48 } else { 0x49 });
        self.code.push(0xb8 + (reg & 7));
        self.code.extend(v.to_le_bytes());
    }

    /// `mov reg, r12` (r12 holds the last `open`'s descriptor).
    fn mov_fd(&mut self, reg: u8) {
        let rex = 0x4c | u8::from(reg >= 8);
        self.code.extend([rex, 0x89, 0xe0 | (reg & 7)]);
    }

    /// Appends system call `nr`; its result is number [`Batch::calls`] − 1. An `open`'s
    /// result is kept for later [`Arg::Fd`]s.
    pub fn call(&mut self, nr: i64, args: [Arg; 6]) -> &mut Self {
        for (reg, a) in ARGS.into_iter().zip(args) {
            match a {
                Arg::Imm(v) => self.movabs(reg, v),
                Arg::Fd => self.mov_fd(reg),
            }
        }
        self.code.push(0xb8); // mov eax, nr
        self.code.extend((nr as u32).to_le_bytes());
        self.code.extend([0x0f, 0x05]); // syscall
        self.code.extend([0x48, 0xa3]); // mov [results + 8i], rax
        self.code
            .extend((self.results + 8 * self.calls as u64).to_le_bytes());
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

    /// Stops the batch when the last call failed (a negative result).
    pub fn or_stop(&mut self) -> &mut Self {
        self.code.extend([0x48, 0x85, 0xc0]); // test rax, rax
        self.jump_to_end(0x88); // js end
        self
    }

    /// Stops the batch unless the last call returned `v`.
    pub fn or_stop_unless(&mut self, v: u64) -> &mut Self {
        self.movabs(11, v); // movabs r11, v
        self.code.extend([0x4c, 0x39, 0xd8]); // cmp rax, r11
        self.jump_to_end(0x85); // jne end
        self
    }

    /// Runs the batch in `pid` (stopped, with registers `saved`, its entry point at
    /// `saved.rip`): the calls' results, `None` for one that did not run; `None` in all when
    /// the tracee did not come back to its `int3` (its text and registers are put back either
    /// way).
    pub fn run(mut self, pid: i32, saved: &libc::user_regs_struct) -> Option<Vec<Option<i64>>> {
        let end = self.code.len();
        for at in std::mem::take(&mut self.to_end) {
            let d = (end - (at + 4)) as u32;
            self.code[at..at + 4].copy_from_slice(&d.to_le_bytes());
        }
        self.code.push(0xcc); // int3
        let none = vec![i64::MIN; self.calls];
        let none_bytes: Vec<u8> = none.iter().flat_map(|v| v.to_le_bytes()).collect();
        if self.code.len() > 1024 || !super::remote::write(pid, self.results, &none_bytes) {
            return None;
        }
        let mut orig = [0u8; 1024];
        if !super::remote::read(pid, saved.rip, &mut orig) {
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
        let mut out = vec![0i64; self.calls];
        let mut raw = vec![0u8; 8 * self.calls];
        for (i, chunk) in raw.chunks_mut(8).enumerate() {
            let mut w = [0u8; 8];
            if !super::remote::read(pid, self.results + 8 * i as u64, &mut w) {
                return None;
            }
            chunk.copy_from_slice(&w);
            out[i] = i64::from_le_bytes(w);
        }
        Some(
            out.into_iter()
                .map(|v| (v != i64::MIN).then_some(v))
                .collect(),
        )
    }
}

/// Writes `data` over read-only text at `addr` of stopped tracee `pid`: one write to
/// `/proc/PID/mem` (which a tracer may write through read-only pages, as `PTRACE_POKEDATA`
/// does eight bytes at a time), else word by word.
pub(super) fn write_text(pid: i32, addr: u64, data: &[u8]) -> bool {
    use std::os::unix::fs::FileExt;
    let mem = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{pid}/mem"));
    mem.and_then(|f| f.write_all_at(data, addr)).is_ok() || super::text::poke(pid, addr, data)
}
