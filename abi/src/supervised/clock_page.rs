//! A Go runtime's clock page and the `__vdso_clock_gettime` that reads it: what the
//! supervisor (which moves the clock) and the code in the image (static: written over the
//! vDSO at the exec stop; cgo: written by libseal into a vDSO of its own making) agree on.
//!
//! The page is one shared page of `u64` words ([`REALTIME`] … [`TICK`]). The code, for
//! `CLOCK_REALTIME` (0) and `CLOCK_MONOTONIC` (1) only, adds one to [`SINCE_MOVE`] and, past
//! [`SPIN_READS`] reads with the clock still, ticks both clock words (a goroutine spinning on
//! `time.Now()` ends); it adds one to the read counter whose address is in
//! [`COUNTER`]`+id` (a census counter, or the page's own [`READS`]`+id`) and returns the clock
//! word `id`. Any other clock id makes the `clock_gettime` system call (which the filter sends
//! to the supervisor). No stack, no other memory: it may run on any thread, in a signal
//! handler, on the runtime's small system stack.

/// Word: `epoch + C` (`CLOCK_REALTIME`, ns).
pub const REALTIME: usize = 0;
/// Word: `MONO_BASE + C` (`CLOCK_MONOTONIC`, ns).
pub const MONOTONIC: usize = 1;
/// Word: reads since the supervisor last moved `C` (it sets it back to 0 when it does).
pub const SINCE_MOVE: usize = 2;
/// Words `COUNTER + id`: the address, in the image, of the counter of clock `id`'s reads.
pub const COUNTER: usize = 3;
/// Words `READS + id`: the reads of clock `id`, where there is no census counter to count in.
pub const READS: usize = 5;
/// Word: [`TAKEN_MAGIC`] once the supervisor holds the page and moves its clock.
pub const TAKEN: usize = 7;
/// Word: what a spinning read adds (ns), set by the supervisor with [`TAKEN`] (libseal writes
/// it into the code it makes).
pub const TICK: usize = 8;
/// What [`TAKEN`] holds once the supervisor has the page.
pub const TAKEN_MAGIC: u64 = 0x5345_414c_434c_4b31; // "SEALCLK1"

/// The module the census names the page's reads after (the code is in no object of the image).
pub const MODULE_NAME: &str = "[seal clock page]";

/// Reads of the page with `C` still after which each read ticks it.
pub const SPIN_READS: u32 = 100_000;

/// Bytes of [`code`]'s output.
pub const CODE_LEN: usize = 92;
/// Offset of the `syscall` instruction in [`code`]'s output.
pub const SYSCALL_AT: usize = CODE_LEN - 3;

/// Words of a [`Kind::Ticking`] page: the address of the counter of `gettimeofday`'s reads and
/// of `time`'s (the clock words are [`REALTIME`], `epoch + L`, and [`MONOTONIC`],
/// `MONO_BASE + L + mono`; the counters of `clock_gettime`'s reads at [`COUNTER`]`+id`).
pub const COUNTER_GETTIMEOFDAY: usize = 9;
pub const COUNTER_TIME: usize = 10;

/// Most bytes [`generate`] writes.
pub const MAX_LEN: usize = 400;

/// Which clock model the code reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A Go runtime's: one clock `C` per process that reads do not move (past [`SPIN_READS`]
    /// reads with `C` still, each read ticks it); `__vdso_clock_gettime` only. `page` is the
    /// page's address.
    Still,
    /// A static C image's: a logical clock `L` per process that each wall-clock read moves one
    /// tick, and a monotonic read its own tick counter `mono` (what the supervisor serves by
    /// system call, `lock xadd` here); `__vdso_clock_gettime`, `__vdso_gettimeofday` and
    /// `__vdso_time`. `page` is the address of a private word that holds the page's address,
    /// 0 in a child after `fork` (the word's page is `MADV_WIPEONFORK`) or once the supervisor
    /// wants the process's reads itself: each entry then makes its system call.
    Ticking,
}

/// Where [`generate`]'s entries start in its output, and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entries {
    pub len: usize,
    pub clock_gettime: usize,
    /// `__vdso_gettimeofday`'s and `__vdso_time`'s code ([`Kind::Ticking`] only).
    pub gettimeofday: Option<usize>,
    pub time: Option<usize>,
    /// The `syscall` instruction of `clock_gettime`'s fallback (where a supervisor injects
    /// system calls into a stopped image).
    pub syscall_at: usize,
}

/// Writes the replacement of `__vdso_clock_gettime` reading the page mapped at `page` (in the
/// image), a spinning read adding `tick` ns, into `out`: [`CODE_LEN`] bytes ([`Kind::Still`]).
pub fn code(out: &mut [u8; CODE_LEN], page: u64, tick: u32) {
    let mut all = [0u8; MAX_LEN];
    let e = generate(&mut all, page, tick, Kind::Still);
    debug_assert!(e.len == CODE_LEN && e.syscall_at == SYSCALL_AT);
    out.copy_from_slice(&all[..CODE_LEN]);
}

/// Writes the code of `kind` reading the page at (or, [`Kind::Ticking`], named by the word
/// at) `page`, a tick being `tick` ns, into `out`: the entries and length it returns.
pub fn generate(out: &mut [u8; MAX_LEN], page: u64, tick: u32, kind: Kind) -> Entries {
    generate_spin(out, page, tick, kind, 0)
}

/// [`generate`], a [`Kind::Ticking`] page's wall-clock reads leaving the clock still for the
/// first `spin` reads after each move of its clock by a wait (`--spin-after`: the supervisor
/// zeroes [`SINCE_MOVE`] when a sleep, a reaped child or a served move moves `L`), as libseal's
/// do; 0: every read ticks.
pub fn generate_spin(
    out: &mut [u8; MAX_LEN],
    page: u64,
    tick: u32,
    kind: Kind,
    spin: u32,
) -> Entries {
    // `cmp rcx, imm32` sign-extends: a larger count is as good as never.
    let spin = spin.min(i32::MAX as u32);
    let mut c = Out { buf: out, at: 0 };
    match kind {
        Kind::Still => {
            let syscall_at = still(&mut c, page, tick);
            Entries {
                len: c.at,
                clock_gettime: 0,
                gettimeofday: None,
                time: None,
                syscall_at,
            }
        }
        Kind::Ticking => {
            let syscall_at = ticking_clock_gettime(&mut c, page, tick, spin);
            let gettimeofday = c.at;
            ticking_gettimeofday(&mut c, page, tick, spin);
            let time = c.at;
            ticking_time(&mut c, page, tick, spin);
            Entries {
                len: c.at,
                clock_gettime: 0,
                gettimeofday: Some(gettimeofday),
                time: Some(time),
                syscall_at,
            }
        }
    }
}

/// [`Kind::Still`]'s `clock_gettime`: the offset of its `syscall`.
fn still(c: &mut Out, page: u64, tick: u32) -> usize {
    c.put(&[0x83, 0xff, 0x01]); // cmp edi, 1
    let ja = c.jump(&[0x77]); // ja fallback
    c.put(&[0x49, 0xb8]); // movabs r8, page
    c.put(&page.to_le_bytes());
    c.put(&[0xb9, 0x01, 0x00, 0x00, 0x00]); // mov ecx, 1
    c.put(&[0xf0, 0x49, 0x0f, 0xc1, 0x48, (SINCE_MOVE * 8) as u8]); // lock xadd [r8+16], rcx
    c.put(&[0x48, 0x81, 0xf9]); // cmp rcx, SPIN_READS
    c.put(&SPIN_READS.to_le_bytes());
    let jb = c.jump(&[0x72]); // jb read
    c.put(&[0x48, 0xc7, 0xc1]); // mov rcx, tick
    c.put(&tick.to_le_bytes());
    c.put(&[0xf0, 0x49, 0x01, 0x08]); // lock add [r8], rcx
    c.put(&[0xf0, 0x49, 0x01, 0x48, 0x08]); // lock add [r8+8], rcx
    c.land(jb);
    c.put(&[0x49, 0x8b, 0x4c, 0xf8, (COUNTER * 8) as u8]); // read: mov rcx, [r8+rdi*8+24]
    c.put(&[0xf0, 0x48, 0xff, 0x01]); // lock inc qword [rcx]
    c.put(&[0x49, 0x8b, 0x04, 0xf8]); // mov rax, [r8+rdi*8]
    c.timespec_from_rax();
    c.land(ja);
    c.fallback(libc_nr::CLOCK_GETTIME)
}

/// System call numbers (x86_64) of the entries' fallbacks.
mod libc_nr {
    pub const CLOCK_GETTIME: u32 = 228;
    pub const GETTIMEOFDAY: u32 = 96;
    pub const TIME: u32 = 201;
}

/// [`Kind::Ticking`]'s `clock_gettime`: the offset of its `syscall`.
fn ticking_clock_gettime(c: &mut Out, pointer: u64, tick: u32, spin: u32) -> usize {
    c.put(&[0x83, 0xff, 0x01]); // cmp edi, 1
    let ja = c.jump(&[0x77]); // ja fallback
    let jz = c.page(pointer);
    c.put(&[0x49, 0x8b, 0x44, 0xf8, (COUNTER * 8) as u8]); // mov rax, [r8+rdi*8+24]
    c.put(&[0xf0, 0x48, 0xff, 0x00]); // lock inc qword [rax]
    c.tick_ecx(tick, spin);
    c.put(&[0x85, 0xff]); // test edi, edi
    let jnz = c.jump(&[0x75]); // jnz monotonic
    c.tick_realtime();
    let jmp = c.jump(&[0xeb]); // jmp out
    c.land(jnz);
    c.put(&[0x89, 0xca]); // monotonic: mov edx, ecx
    c.put(&[0xf0, 0x49, 0x0f, 0xc1, 0x48, 0x08]); // lock xadd [r8+8], rcx
    c.put(&[0x48, 0x01, 0xd1]); // add rcx, rdx
    c.land(jmp);
    c.put(&[0x48, 0x89, 0xc8]); // out: mov rax, rcx
    c.timespec_from_rax();
    c.land(ja);
    c.land(jz);
    c.fallback(libc_nr::CLOCK_GETTIME)
}

/// [`Kind::Ticking`]'s `gettimeofday(tv, tz)`: `tz` (if any) zeroed, `tv` (if any) from a
/// wall-clock read, which ticks either way, as served.
fn ticking_gettimeofday(c: &mut Out, pointer: u64, tick: u32, spin: u32) {
    let jz = c.page(pointer);
    c.put(&[0x48, 0x85, 0xf6]); // test rsi, rsi
    c.put(&[0x74, 0x07]); // jz +7
    c.put(&[0x48, 0xc7, 0x06, 0, 0, 0, 0]); // mov qword [rsi], 0
    c.count_at(COUNTER_GETTIMEOFDAY);
    c.tick_ecx(tick, spin);
    c.tick_realtime();
    c.put(&[0x48, 0x85, 0xff]); // test rdi, rdi
    let none = c.jump(&[0x74]); // jz done
    c.put(&[0x48, 0x89, 0xc8]); // mov rax, rcx
    c.put(&[0xb9, 0x00, 0xca, 0x9a, 0x3b]); // mov ecx, 1000000000
    c.put(&[0x31, 0xd2]); // xor edx, edx
    c.put(&[0x48, 0xf7, 0xf1]); // div rcx
    c.put(&[0x48, 0x89, 0x07]); // mov [rdi], rax
    c.put(&[0x48, 0x89, 0xd0]); // mov rax, rdx
    c.put(&[0xb9, 0xe8, 0x03, 0x00, 0x00]); // mov ecx, 1000
    c.put(&[0x31, 0xd2]); // xor edx, edx
    c.put(&[0x48, 0xf7, 0xf1]); // div rcx
    c.put(&[0x48, 0x89, 0x47, 0x08]); // mov [rdi+8], rax
    c.land(none);
    c.put(&[0x31, 0xc0]); // done: xor eax, eax
    c.put(&[0xc3]); // ret
    c.land(jz);
    c.fallback(libc_nr::GETTIMEOFDAY);
}

/// [`Kind::Ticking`]'s `time(tloc)`: whole seconds of a wall-clock read, stored at `tloc` if
/// it is not null.
fn ticking_time(c: &mut Out, pointer: u64, tick: u32, spin: u32) {
    let jz = c.page(pointer);
    c.count_at(COUNTER_TIME);
    c.tick_ecx(tick, spin);
    c.tick_realtime();
    c.put(&[0x48, 0x89, 0xc8]); // mov rax, rcx
    c.put(&[0xb9, 0x00, 0xca, 0x9a, 0x3b]); // mov ecx, 1000000000
    c.put(&[0x31, 0xd2]); // xor edx, edx
    c.put(&[0x48, 0xf7, 0xf1]); // div rcx
    c.put(&[0x48, 0x85, 0xff]); // test rdi, rdi
    c.put(&[0x74, 0x03]); // jz +3
    c.put(&[0x48, 0x89, 0x07]); // mov [rdi], rax
    c.put(&[0xc3]); // ret
    c.land(jz);
    c.fallback(libc_nr::TIME);
}

struct Out<'a> {
    buf: &'a mut [u8; MAX_LEN],
    at: usize,
}

impl Out<'_> {
    fn put(&mut self, b: &[u8]) {
        self.buf[self.at..self.at + b.len()].copy_from_slice(b);
        self.at += b.len();
    }

    /// A short jump `op rel8` whose target [`Out::land`] sets: the offset of its `rel8`.
    fn jump(&mut self, op: &[u8]) -> usize {
        self.put(op);
        self.put(&[0]);
        self.at - 1
    }

    /// Points the short jump whose `rel8` is at `from` here.
    fn land(&mut self, from: usize) {
        debug_assert!(self.at - from - 1 < 128);
        self.buf[from] = (self.at - from - 1) as u8;
    }

    /// `r8` = the page named by the word at `pointer`; the `jz` taken when there is none.
    fn page(&mut self, pointer: u64) -> usize {
        self.put(&[0x49, 0xb8]); // movabs r8, pointer
        self.put(&pointer.to_le_bytes());
        self.put(&[0x4d, 0x8b, 0x00]); // mov r8, [r8]
        self.put(&[0x4d, 0x85, 0xc0]); // test r8, r8
        self.jump(&[0x74]) // jz fallback
    }

    /// `ecx` = what this read moves the clock by: `tick`, or, with `spin`, 0 while fewer than
    /// `spin` reads were made since the clock last moved by a wait ([`SINCE_MOVE`], counted
    /// here, zeroed by the supervisor). Clobbers the flags only besides `rcx`.
    fn tick_ecx(&mut self, tick: u32, spin: u32) {
        if spin != 0 {
            self.put(&[0xb9, 0x01, 0x00, 0x00, 0x00]); // mov ecx, 1
            self.put(&[0xf0, 0x49, 0x0f, 0xc1, 0x48, (SINCE_MOVE * 8) as u8]); // lock xadd [r8+16], rcx
            self.put(&[0x48, 0x81, 0xf9]); // cmp rcx, spin
            self.put(&spin.to_le_bytes());
            self.put(&[0xb9, 0x00, 0x00, 0x00, 0x00]); // mov ecx, 0 (flags kept)
            self.put(&[0x72, 0x05]); // jb +5 (past the tick)
        }
        self.put(&[0xb9]); // mov ecx, tick
        self.put(&tick.to_le_bytes());
    }

    /// Adds one to the counter whose address is in word `word` of the page at `r8`.
    fn count_at(&mut self, word: usize) {
        self.put(&[0x49, 0x8b, 0x40, (word * 8) as u8]); // mov rax, [r8+word*8]
        self.put(&[0xf0, 0x48, 0xff, 0x00]); // lock inc qword [rax]
    }

    /// A wall-clock read of a ticking page at `r8`, `rcx` holding the tick: `L` moves one
    /// tick (both clock words), `rcx` = `epoch + L` before it.
    fn tick_realtime(&mut self) {
        self.put(&[0x89, 0xca]); // mov edx, ecx
        self.put(&[0xf0, 0x49, 0x01, 0x50, 0x08]); // lock add [r8+8], rdx
        self.put(&[0xf0, 0x49, 0x0f, 0xc1, 0x08]); // lock xadd [r8], rcx
    }

    /// `rax` ns as the timespec at `rsi`; returns 0.
    fn timespec_from_rax(&mut self) {
        self.put(&[0xb9, 0x00, 0xca, 0x9a, 0x3b]); // mov ecx, 1000000000
        self.put(&[0x31, 0xd2]); // xor edx, edx
        self.put(&[0x48, 0xf7, 0xf1]); // div rcx
        self.put(&[0x48, 0x89, 0x06]); // mov [rsi], rax
        self.put(&[0x48, 0x89, 0x56, 0x08]); // mov [rsi+8], rdx
        self.put(&[0x31, 0xc0]); // xor eax, eax
        self.put(&[0xc3]); // ret
    }

    /// `mov eax, nr; syscall; ret`: the offset of the `syscall`.
    fn fallback(&mut self, nr: u32) -> usize {
        self.put(&[0xb8]); // mov eax, nr
        self.put(&nr.to_le_bytes());
        let at = self.at;
        self.put(&[0x0f, 0x05]); // syscall
        self.put(&[0xc3]); // ret
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_fills_its_length_and_ends_in_the_system_call() {
        let mut c = [0u8; CODE_LEN];
        code(&mut c, 0x1234_5678_9abc, 1000);
        assert_eq!(&c[SYSCALL_AT..], &[0x0f, 0x05, 0xc3]);
        assert_eq!(&c[7..15], &0x1234_5678_9abcu64.to_le_bytes());
        // Both jumps land inside the code: `ja` on the fallback's `mov eax, 228`.
        assert_eq!(c[5 + c[4] as usize], 0xb8);
    }
}
