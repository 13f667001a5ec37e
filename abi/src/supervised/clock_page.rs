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

/// Writes the replacement of `__vdso_clock_gettime` reading the page mapped at `page` (in the
/// image), a spinning read adding `tick` ns, into `out`: [`CODE_LEN`] bytes.
pub fn code(out: &mut [u8; CODE_LEN], page: u64, tick: u32) {
    let mut c = Out { buf: out, at: 0 };
    c.put(&[0x83, 0xff, 0x01]); // cmp edi, 1
    c.put(&[0x77, 0x00]); // ja fallback (patched below)
    let ja = c.at - 1;
    c.put(&[0x49, 0xb8]); // movabs r8, page
    c.put(&page.to_le_bytes());
    c.put(&[0xb9, 0x01, 0x00, 0x00, 0x00]); // mov ecx, 1
    c.put(&[0xf0, 0x49, 0x0f, 0xc1, 0x48, (SINCE_MOVE * 8) as u8]); // lock xadd [r8+16], rcx
    c.put(&[0x48, 0x81, 0xf9]); // cmp rcx, SPIN_READS
    c.put(&SPIN_READS.to_le_bytes());
    c.put(&[0x72, 0x00]); // jb read (patched below)
    let jb = c.at - 1;
    c.put(&[0x48, 0xc7, 0xc1]); // mov rcx, tick
    c.put(&tick.to_le_bytes());
    c.put(&[0xf0, 0x49, 0x01, 0x08]); // lock add [r8], rcx
    c.put(&[0xf0, 0x49, 0x01, 0x48, 0x08]); // lock add [r8+8], rcx
    c.buf[jb] = (c.at - jb - 1) as u8;
    c.put(&[0x49, 0x8b, 0x4c, 0xf8, (COUNTER * 8) as u8]); // read: mov rcx, [r8+rdi*8+24]
    c.put(&[0xf0, 0x48, 0xff, 0x01]); // lock inc qword [rcx]
    c.put(&[0x49, 0x8b, 0x04, 0xf8]); // mov rax, [r8+rdi*8]
    c.put(&[0xb9, 0x00, 0xca, 0x9a, 0x3b]); // mov ecx, 1000000000
    c.put(&[0x31, 0xd2]); // xor edx, edx
    c.put(&[0x48, 0xf7, 0xf1]); // div rcx
    c.put(&[0x48, 0x89, 0x06]); // mov [rsi], rax
    c.put(&[0x48, 0x89, 0x56, 0x08]); // mov [rsi+8], rdx
    c.put(&[0x31, 0xc0]); // xor eax, eax
    c.put(&[0xc3]); // ret
    c.buf[ja] = (c.at - ja - 1) as u8;
    c.put(&[0xb8, 0xe4, 0x00, 0x00, 0x00]); // fallback: mov eax, 228 (clock_gettime)
    c.put(&[0x0f, 0x05]); // syscall
    c.put(&[0xc3]); // ret
    debug_assert!(c.at == CODE_LEN);
}

struct Out<'a> {
    buf: &'a mut [u8; CODE_LEN],
    at: usize,
}

impl Out<'_> {
    fn put(&mut self, b: &[u8]) {
        self.buf[self.at..self.at + b.len()].copy_from_slice(b);
        self.at += b.len();
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
