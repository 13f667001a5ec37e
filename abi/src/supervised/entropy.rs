//! Entropy served inside a Go image: the code that stands in for Go's `syscall.Syscall` at
//! the one call `internal/syscall/unix.GetRandom` makes (`crypto/rand`), and the layout of the
//! mapping it reads, shared with the supervisor. No allocation: the code is written into the
//! caller's buffer, so that libseal could reuse it for a cgo program's runtime.
//!
//! The mapping (`MAP_BYTES`, page-aligned): a code page (read and execute), a header page, a
//! window of [`WINDOW`] bytes. The window holds part of one stream: absolute position `q`
//! always sits at `q % WINDOW` and always holds stream byte `q`, so a value never depends on
//! where a refill put the window. The header holds:
//! - [`NEXT`]: the next position to hand out; a read of `len` bytes claims `[o, o + len)` with
//!   `lock xadd`;
//! - [`LO`], [`HI`]: the positions the window holds, `[LO, HI)`. The supervisor moves it
//!   forward by storing `LO`, then the bytes, then `HI` (x86 keeps stores in order);
//! - [`SERVED`]: the reads served from the window, when no census word is given.
//!
//! A read whose claim lies inside `[LO, HI)` (checked before the copy, and `LO` again after
//! it: a refill meanwhile may have overwritten it) copies it out (`rep movsb`) and counts
//! itself; any other read makes the `getrandom` system call with its claim's position in
//! `r10` and [`MAGIC`] in `r8`. The supervisor writes stream bytes `[o, o + len)` into the
//! caller's buffer and moves the window to start at `o + len`. A read with flags other than
//! 0 or `GRND_NONBLOCK` makes the ordinary system call (`r8` = 0).
//!
//! Contract (Go's register ABI on amd64, as `GetRandom` calls `syscall.Syscall(SYS_getrandom,
//! p, len, flags)`): in `rax` = 318, `rbx` = buffer, `rcx` = length, `rdi` = flags; out `rax` =
//! the count (or -1), `rbx` = 0, `rcx` = 0 or the error number. The code uses no stack beyond
//! its return address and clobbers only registers Go's ABI lets a callee clobber (`rax`,
//! `rbx`, `rcx`, `rdx`, `rsi`, `rdi`, `r8`–`r13`): never `rsp`, `rbp`, `r14` (g), `r15`.

/// Bytes of the code page (the code is far shorter).
pub const CODE_BYTES: usize = 4096;
/// Where the header page starts in the mapping.
pub const HEAD_AT: usize = 4096;
/// Header words (byte offsets from the header).
pub const NEXT: usize = 0;
pub const LO: usize = 8;
pub const HI: usize = 16;
pub const SERVED: usize = 24;
/// Header words of a cgo program's mapping, which libseal makes and maps before its
/// supervisor starts: where the program maps it ([`BASE`]) and the call it will rewrite
/// ([`SITE`]), written by libseal; [`TAKEN_MAGIC`] in [`TAKEN`] once the supervisor holds it
/// and has filled the window (libseal rewrites the call only then).
pub const BASE: usize = 32;
pub const SITE: usize = 40;
pub const TAKEN: usize = 48;
/// What [`TAKEN`] holds once the supervisor has the mapping.
pub const TAKEN_MAGIC: u64 = 0x5345_414c_454e_5431; // "SEALENT1"
/// The mapping's file in the run directory, for a cgo program: `go-entropy-PID`.
pub const FILE_PREFIX: &str = "go-entropy-";
/// Where the window starts in the mapping, and its size (a power of two).
pub const WINDOW_AT: usize = 8192;
pub const WINDOW: usize = 1 << 16;
/// The whole mapping.
pub const MAP_BYTES: usize = WINDOW_AT + WINDOW;
/// `r8` of a read the window could not serve: "`r10` is my claim's position".
pub const MAGIC: u64 = 0x5ea1_e0e0_7261_6e64;

const SYS_GETRANDOM: u32 = 318;
const EINTR: u8 = 4;

/// A tiny assembler over the caller's buffer.
struct Asm<'a> {
    out: &'a mut [u8],
    at: usize,
    ok: bool,
}

impl Asm<'_> {
    fn b(&mut self, bytes: &[u8]) {
        match self.out.get_mut(self.at..self.at + bytes.len()) {
            Some(d) => d.copy_from_slice(bytes),
            None => self.ok = false,
        }
        self.at += bytes.len();
    }
    fn u32(&mut self, v: u32) {
        self.b(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.b(&v.to_le_bytes());
    }
    /// A short jump's opcode and a placeholder: its offset, to [`Asm::land`].
    fn jump(&mut self, op: u8) -> usize {
        self.b(&[op, 0]);
        self.at - 1
    }
    /// Points the short jump at `from` here.
    fn land(&mut self, from: usize) {
        let d = self.at - from - 1;
        match self.out.get_mut(from) {
            Some(x) if d < 128 => *x = d as u8,
            _ => self.ok = false,
        }
    }
}

/// Writes the code into `out` for a mapping at `base` (the code page's address; the header
/// and window follow it as laid out above); each read served from the window adds one to the
/// u64 at `count_at` (`base + HEAD_AT + SERVED` when there is no census word). Returns the
/// code's length, or `None` when `out` is too short.
pub fn getrandom_code(out: &mut [u8], base: u64, count_at: u64) -> Option<usize> {
    const JA: u8 = 0x77;
    const JB: u8 = 0x72;
    const JE: u8 = 0x74;
    const JAE: u8 = 0x73;
    let head = base + HEAD_AT as u64;
    let window = (WINDOW_AT - HEAD_AT) as u32;
    let mut a = Asm {
        out,
        at: 0,
        ok: true,
    };
    a.b(&[0x49, 0x89, 0xfc]); // mov r12, rdi (flags)
    a.b(&[0x49, 0x89, 0xcd]); // mov r13, rcx (len)
    a.b(&[0x49, 0xb8]); // movabs r8, head
    a.u64(head);
    a.b(&[0x48, 0x83, 0xff, 0x01]); // cmp rdi, 1
    let plain = a.jump(JA);
    a.b(&[0x4d, 0x89, 0xeb]); // mov r11, r13
    a.b(&[0xf0, 0x4d, 0x0f, 0xc1, 0x58, NEXT as u8]); // lock xadd [r8+NEXT], r11
    a.b(&[0x4d, 0x89, 0xda]); // mov r10, r11 (o; kept across system calls)
    a.b(&[0x49, 0x81, 0xfd]); // cmp r13, WINDOW
    a.u32(WINDOW as u32);
    let slow1 = a.jump(JA);
    a.b(&[0x4f, 0x8d, 0x0c, 0x2a]); // lea r9, [r10+r13]
    a.b(&[0x4d, 0x3b, 0x48, HI as u8]); // cmp r9, [r8+HI]
    let slow2 = a.jump(JA);
    a.b(&[0x4d, 0x3b, 0x50, LO as u8]); // cmp r10, [r8+LO]
    let slow3 = a.jump(JB);
    a.b(&[0x4d, 0x89, 0xd1]); // mov r9, r10
    a.b(&[0x49, 0x81, 0xe1]); // and r9, WINDOW-1
    a.u32(WINDOW as u32 - 1);
    a.b(&[0xb9]); // mov ecx, WINDOW
    a.u32(WINDOW as u32);
    a.b(&[0x4c, 0x29, 0xc9]); // sub rcx, r9 (room to the window's end)
    a.b(&[0x4c, 0x39, 0xe9]); // cmp rcx, r13
    a.b(&[0x49, 0x0f, 0x47, 0xcd]); // cmova rcx, r13 (first part)
    a.b(&[0x4c, 0x89, 0xea]); // mov rdx, r13
    a.b(&[0x48, 0x29, 0xca]); // sub rdx, rcx (the rest, from the window's start)
    a.b(&[0x4b, 0x8d, 0xb4, 0x08]); // lea rsi, [r8+r9+window]
    a.u32(window);
    a.b(&[0x48, 0x89, 0xdf]); // mov rdi, rbx
    a.b(&[0xf3, 0xa4]); // rep movsb
    a.b(&[0x48, 0x89, 0xd1]); // mov rcx, rdx
    a.b(&[0x49, 0x8d, 0xb0]); // lea rsi, [r8+window]
    a.u32(window);
    a.b(&[0xf3, 0xa4]); // rep movsb
    a.b(&[0x4d, 0x3b, 0x50, LO as u8]); // cmp r10, [r8+LO] (overwritten meanwhile?)
    let slow4 = a.jump(JB);
    a.b(&[0x49, 0xb9]); // movabs r9, count_at
    a.u64(count_at);
    a.b(&[0xf0, 0x49, 0xff, 0x01]); // lock inc qword [r9]
    a.b(&[0x4c, 0x89, 0xe8]); // mov rax, r13
    a.b(&[0x31, 0xdb]); // xor ebx, ebx
    a.b(&[0x31, 0xc9]); // xor ecx, ecx
    a.b(&[0xc3]); // ret
    a.land(plain);
    a.b(&[0x45, 0x31, 0xd2]); // xor r10d, r10d
    a.b(&[0x45, 0x31, 0xc0]); // xor r8d, r8d
    let call = a.jump(0xeb); // jmp call
    for j in [slow1, slow2, slow3, slow4] {
        a.land(j);
    }
    a.b(&[0x49, 0xb8]); // movabs r8, MAGIC
    a.u64(MAGIC);
    a.land(call);
    a.b(&[0x48, 0x89, 0xdf]); // mov rdi, rbx
    a.b(&[0x4c, 0x89, 0xee]); // mov rsi, r13
    a.b(&[0x4c, 0x89, 0xe2]); // mov rdx, r12
    let again = a.at;
    a.b(&[0xb8]); // mov eax, SYS_getrandom
    a.u32(SYS_GETRANDOM);
    a.b(&[0x0f, 0x05]); // syscall
    a.b(&[0x48, 0x83, 0xf8, (-(EINTR as i8)) as u8]); // cmp rax, -EINTR
    let back = (again as isize - (a.at as isize + 2)) as i8;
    a.b(&[JE, back as u8]); // je again
    a.b(&[0x48, 0x3d]); // cmp rax, -4095
    a.u32((-4095i32) as u32);
    let err = a.jump(JAE);
    a.b(&[0x31, 0xdb]); // xor ebx, ebx
    a.b(&[0x31, 0xc9]); // xor ecx, ecx
    a.b(&[0xc3]); // ret
    a.land(err);
    a.b(&[0x48, 0x89, 0xc1]); // mov rcx, rax
    a.b(&[0x48, 0xf7, 0xd9]); // neg rcx
    a.b(&[0x48, 0xc7, 0xc0, 0xff, 0xff, 0xff, 0xff]); // mov rax, -1
    a.b(&[0x31, 0xdb]); // xor ebx, ebx
    a.b(&[0xc3]); // ret
    (a.ok && a.at <= CODE_BYTES).then_some(a.at)
}

/// A `call rel32` at `site` to `target`, when it reaches (±2 GiB).
pub fn call_rel32(site: u64, target: u64) -> Option<[u8; 5]> {
    let d = (target as i64).wrapping_sub(site as i64 + 5);
    let d = i32::try_from(d).ok()?;
    let mut c = [0xe8, 0, 0, 0, 0];
    c[1..].copy_from_slice(&d.to_le_bytes());
    Some(c)
}

/// Stream byte position `pos`'s 8-byte block `pos / 8` for stream `key`, as the supervisor
/// fills the window: `mix64(key ^ mix64(block))`, little-endian.
pub fn block(key: u64, block: u64) -> [u8; 8] {
    crate::mix64(key ^ crate::mix64(block)).to_le_bytes()
}

/// Fills `out` with stream bytes `[pos, pos + out.len())` of stream `key`.
pub fn fill_at(key: u64, pos: u64, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        let q = pos + i as u64;
        *b = block(key, q / 8)[(q % 8) as usize];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_fits_its_page_and_a_short_buffer_is_refused() {
        let mut buf = [0u8; CODE_BYTES];
        let n = getrandom_code(&mut buf, 0x10000, 0x10000 + 4096 + 24).unwrap();
        assert!(n > 100 && n < 400, "{n}");
        assert_eq!(getrandom_code(&mut buf[..n - 1], 0x10000, 0), None);
        // The one system call is there, once.
        assert_eq!(
            buf[..n].windows(2).filter(|w| w == &[0x0f, 0x05]).count(),
            1
        );
    }

    #[test]
    fn a_call_reaches_two_gib_and_no_further() {
        assert_eq!(call_rel32(0x1000, 0x1005), Some([0xe8, 0, 0, 0, 0]));
        assert!(call_rel32(0x400000, 0x400000 + (1 << 31) + 10).is_none());
        assert!(call_rel32(0x400000, 0x300000).is_some());
    }

    #[test]
    fn positions_are_stream_bytes_wherever_they_are_read_from() {
        let mut a = [0u8; 40];
        fill_at(7, 0, &mut a);
        let mut b = [0u8; 13];
        fill_at(7, 21, &mut b);
        assert_eq!(&a[21..34], &b);
    }
}
