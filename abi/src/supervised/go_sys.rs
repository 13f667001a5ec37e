//! A Go runtime's own `usleep` and `gettid` system calls kept in the image, past the
//! supervisor: each was a notification (two context switches and the supervisor's work,
//! ~25 µs), 7 `gettid` and 3–5 `usleep` in a hello world's start-up alone, and sysmon's
//! `usleep` every 20 µs–10 ms for as long as the program runs.
//!
//! - `runtime.usleep` (sysmon's naps, a spinning thread's 3 µs) is answered `CONTINUE` by the
//!   supervisor: the runtime's own waits leave its clock where it is. Its
//!   `mov eax, SYS_nanosleep; syscall` is rewritten to call [`USLEEP_AT`], which makes the
//!   same call with [`MARK`] in its third argument (`rdx`, which `nanosleep` does not read):
//!   the filter lets a marked call through (`filter.rs`).
//! - `runtime.gettid` (each thread's `minit`, and a signal to a thread) is answered with the
//!   thread's virtual tid: the main thread's is its process's virtual pid, another thread's is
//!   numbered by the supervisor: the first [`LEFT`] new threads take a number it left in the
//!   table ([`LEFT_AT`]) at their first `gettid` (in `runtime.clone`'s new thread, rewritten to
//!   call the code's copy at [`CLONE_GETTID_AT`]), later ones ask it. Its `mov eax,
//!   SYS_gettid; syscall` is rewritten to call [`GETTID_AT`],
//!   which makes a marked `gettid` for the real tid and answers from the mapping: the
//!   process's virtual pid when the real tid is the real pid the supervisor wrote at the exec
//!   stop ([`REAL_AT`], [`VPID_AT`]), a thread's virtual tid from the table the supervisor
//!   fills as it numbers threads ([`TIDS_AT`]: `(real, virtual)` pairs, the virtual written
//!   first); anything else makes the unmarked call, which the supervisor answers (in a cgo
//!   program, whose supervisor leaves other threads' tids real, [`MISS_REAL_AT`] says to
//!   answer the real tid at once). A forked child's copy of the mapping holds its parent's
//!   real pid and pairs: it would ask, or take a pair of its copy, but a Go program's forked
//!   child runs no Go code before it execs.
//!
//! Both live in the runtime's random functions' mapping (`go_rand`): the code in its code
//! page, the numbers in its counters page. The code clobbers `rax`, `rcx`, `rdx`, `r11` and
//! the flags (Go's ABI0 assembly functions it is called from keep nothing there), uses its
//! return address's 8 bytes of stack below the caller's, and is not Go code: asynchronous
//! preemption finds no function at its PC and leaves the thread be.

/// The mark in a call's third argument (`rdx`) that the filter lets through.
pub const MARK: u64 = 0x5ea1_0000_5ca1_1ed0;
/// `nanosleep`, `gettid` (x86_64): the calls the filter lets through when marked.
pub const MARKED: [u32; 2] = [35, 186];

/// Where the code is in the code page (past `go_rand`'s, its trampolines' and their keys).
pub const USLEEP_AT: usize = 3712;
pub const GETTID_AT: usize = 3776;
/// The same code again, called from `runtime.clone`'s new thread: a call it sends is named
/// after that site in the census.
pub const CLONE_GETTID_AT: usize = GETTID_AT + 128;
const _: () = assert!(USLEEP_AT >= super::go_select::KEY_AT + 16);
/// Where the numbers are in the counters page (offsets in the mapping): the real pid at the
/// exec, the virtual pid, and [`TIDS`] `(real tid, virtual tid)` pairs of `i32`s.
pub const REAL_AT: usize = 4096 + 1024;
pub const VPID_AT: usize = REAL_AT + 4;
/// Not 0: a thread the table does not hold is answered its real tid (a cgo program, whose
/// supervisor numbers no thread: libseal gives its C code's `gettid` the virtual one).
pub const MISS_REAL_AT: usize = REAL_AT + 8;
/// Pairs left for new threads: the first [`LEFT_AT`] pairs of the table are written by the
/// supervisor as `(0, virtual tid)` before the count is (a new thread's first `gettid` in
/// `runtime.clone`, sent to the supervisor, was ~30–60 µs of each thread's start, on the
/// path of a hello world's `main`, which waits for the threads the runtime starts). The
/// code takes the next with an atomic add on [`CLAIMS_AT`] and writes its real tid into it;
/// past the count it asks the supervisor.
pub const CLAIMS_AT: usize = REAL_AT + 12;
pub const LEFT_AT: usize = REAL_AT + 16;
/// How many pairs the supervisor leaves (a hello world starts 3–4 threads, a busier program
/// its `GOMAXPROCS` and a few more).
pub const LEFT: usize = 8;
pub const TIDS_AT: usize = REAL_AT + 64;
pub const TIDS: usize = 64;

/// The census's name of the code (the callers it names are the runtime's).
pub const NAME: &str = "[seal in-image gettid]";

/// `runtime.sched_getaffinity` (the runtime's processor count, `osinit`, on a hello world's
/// path: a notification) answered in the image too: its `mov eax, SYS_sched_getaffinity;
/// syscall` is rewritten to call [`AFFINITY_AT`], which writes the sealed mask the supervisor
/// put at [`MASK_AT`] ([`MASK_LEN_AT`] bytes, 0 while it has not) for the caller's own process
/// (`pid` 0) into a buffer large enough, counts the call at [`AFFINITY_COUNT_AT`] and returns
/// the mask's length, as the supervisor answers; anything else makes the call.
pub const AFFINITY_AT: usize = 4024;
pub const MASK_LEN_AT: usize = REAL_AT + 20;
pub const AFFINITY_COUNT_AT: usize = REAL_AT + 24;
pub const MASK_AT: usize = TIDS_AT + 8 * TIDS;
/// The largest mask kept in the page (4096 processors).
pub const MASK_MAX: usize = 512;
const _: () = assert!(MASK_AT + MASK_MAX <= 8192);
/// The census's name of that code.
pub const AFFINITY_NAME: &str = "[seal in-image sched_getaffinity]";

/// `mov eax, NR; syscall`: what is rewritten, in `runtime.usleep` (NR 35) and
/// `runtime.gettid` (186).
pub const fn site_bytes(nr: u32) -> [u8; 7] {
    let n = nr.to_le_bytes();
    [0xb8, n[0], n[1], n[2], n[3], 0x0f, 0x05]
}

/// The one `mov eax, nr; syscall` in `body` (a function's bytes): its offset.
pub fn find(body: &[u8], nr: u32) -> Option<usize> {
    let want = site_bytes(nr);
    let mut found = None;
    for (i, w) in body.windows(want.len()).enumerate() {
        if w == want {
            if found.is_some() {
                return None;
            }
            found = Some(i);
        }
    }
    found
}

/// The 7 bytes written at `site` (a [`site_bytes`]): `call rel32` to `target`, then a 2-byte
/// `nop`. `None` when the target is out of reach.
pub fn call_at(site: u64, target: u64) -> Option<[u8; 7]> {
    let d = (target as i64).wrapping_sub(site as i64 + 5);
    let d = i32::try_from(d).ok()?.to_le_bytes();
    Some([0xe8, d[0], d[1], d[2], d[3], 0x66, 0x90])
}

/// Writes both pieces of code into `code` (the code page of a mapping at `base`).
pub fn code(code: &mut [u8]) -> Option<()> {
    let mark = MARK.to_le_bytes();
    let mut usleep = [0u8; 18];
    usleep[..5].copy_from_slice(&site_bytes(35)[..5]); // mov eax, 35
    usleep[5..7].copy_from_slice(&[0x48, 0xba]); // movabs rdx, MARK
    usleep[7..15].copy_from_slice(&mark);
    usleep[15..18].copy_from_slice(&[0x0f, 0x05, 0xc3]); // syscall; ret
    code.get_mut(USLEEP_AT..USLEEP_AT + usleep.len())?
        .copy_from_slice(&usleep);

    put_gettid(code, GETTID_AT)?;
    put_gettid(code, CLONE_GETTID_AT)?;
    put_affinity(code)
}

/// Writes the `sched_getaffinity` code at [`AFFINITY_AT`] in `code`. `rdi` the pid, `rsi`
/// the buffer's length, `rdx` the buffer (as `runtime.sched_getaffinity` loads them); it
/// clobbers `rax`, `rcx`, `rsi`, `rdi`, `r11` and the flags.
fn put_affinity(code: &mut [u8]) -> Option<()> {
    let mut g = [0u8; 64];
    let mut n = 0;
    let mut put = |b: &[u8]| {
        g[n..n + b.len()].copy_from_slice(b);
        n += b.len();
        n
    };
    let rel = |from: usize, to: usize| ((to as i64) - (AFFINITY_AT + from) as i64) as i32;
    put(&[0x48, 0x85, 0xff, 0x75, 47]); // test rdi, rdi; jnz ask
    let to = put(&[0x8b, 0x0d]); // mov ecx, [rip + MASK_LEN]
    put(&rel(to + 4, MASK_LEN_AT).to_le_bytes());
    // test ecx, ecx; jz ask; cmp rsi, rcx; jb ask; test sil, 7; jnz ask
    put(&[
        0x85, 0xc9, 0x74, 37, 0x48, 0x39, 0xce, 0x72, 32, 0x40, 0xf6, 0xc6, 0x07, 0x75, 26,
    ]);
    put(&[0x48, 0x89, 0xd7]); // mov rdi, rdx
    let to = put(&[0x48, 0x8d, 0x35]); // lea rsi, [rip + MASK]
    put(&rel(to + 4, MASK_AT).to_le_bytes());
    put(&[0xf3, 0xa4]); // rep movsb
    let to = put(&[0xf0, 0xff, 0x05]); // lock inc dword [rip + AFFINITY_COUNT]
    put(&rel(to + 4, AFFINITY_COUNT_AT).to_le_bytes());
    let to = put(&[0x8b, 0x05]); // mov eax, [rip + MASK_LEN]
    put(&rel(to + 4, MASK_LEN_AT).to_le_bytes());
    put(&[0xc3]); // ret
    put(&site_bytes(204)); // ask: mov eax, 204; syscall
    let n = put(&[0xc3]); // ret
    code.get_mut(AFFINITY_AT..AFFINITY_AT + n)?
        .copy_from_slice(&g[..n]);
    Some(())
}

/// Writes the `gettid` code at `at` in `code` (its code page): its `rip`-relative reads are
/// relative to where it is.
fn put_gettid(code: &mut [u8], at: usize) -> Option<()> {
    let mark = MARK.to_le_bytes();
    let mut g = [0u8; 160];
    let mut n = 0;
    let mut put = |b: &[u8]| {
        g[n..n + b.len()].copy_from_slice(b);
        n += b.len();
        n
    };
    put(&[0x48, 0xba]); // movabs rdx, MARK
    put(&mark);
    put(&site_bytes(186)[..5]); // mov eax, 186
    put(&[0x0f, 0x05]); // syscall: the real tid
                        // cmp eax, [rip + REAL]: rel32 from the end of the 6-byte instruction.
    let to = put(&[0x3b, 0x05]);
    let rel = |from: usize, to: usize| ((to as i64) - (at + from) as i64) as i32;
    put(&rel(to + 4, REAL_AT).to_le_bytes());
    put(&[0x75, 7]); // jne table (past the next 7 bytes)
    let to = put(&[0x8b, 0x05]); // mov eax, [rip + VPID]
    put(&rel(to + 4, VPID_AT).to_le_bytes());
    put(&[0xc3]); // ret
    let to = put(&[0x48, 0x8d, 0x0d]); // table: lea rcx, [rip + TIDS]
    put(&rel(to + 4, TIDS_AT).to_le_bytes());
    put(&[0xba]); // mov edx, TIDS
    put(&(TIDS as u32).to_le_bytes());
    // loop: cmp eax, [rcx]; je found; add rcx, 8; dec edx; jnz loop
    put(&[
        0x3b, 0x01, 0x74, 64, 0x48, 0x83, 0xc1, 0x08, 0xff, 0xca, 0x75, 0xf4,
    ]);
    // Not there: the real tid where the process's supervisor would give it anyway (a cgo
    // program's), else one of the pairs the supervisor left for new threads (a new thread's
    // first `gettid`, in `runtime.clone`), else the call the supervisor answers (rdx
    // unmarked).
    let to = put(&[0x83, 0x3d]); // cmp dword [rip + MISS_REAL], 0
    put(&rel(to + 5, MISS_REAL_AT).to_le_bytes());
    put(&[0x00, 0x74, 0x01, 0xc3]); // je claim; ret
    put(&[0xb9, 1, 0, 0, 0]); // claim: mov ecx, 1
    let to = put(&[0xf0, 0x0f, 0xc1, 0x0d]); // lock xadd [rip + CLAIMS], ecx
    put(&rel(to + 4, CLAIMS_AT).to_le_bytes());
    let to = put(&[0x3b, 0x0d]); // cmp ecx, [rip + LEFT]
    put(&rel(to + 4, LEFT_AT).to_le_bytes());
    put(&[0x73, 15]); // jae ask (past the next 15 bytes)
    let to = put(&[0x48, 0x8d, 0x15]); // lea rdx, [rip + TIDS]
    put(&rel(to + 4, TIDS_AT).to_le_bytes());
    // mov [rdx + rcx*8], eax (the pair's real tid); mov eax, [rdx + rcx*8 + 4]; ret
    put(&[0x89, 0x04, 0xca, 0x8b, 0x44, 0xca, 0x04, 0xc3]);
    put(&site_bytes(186)[..5]); // ask: mov eax, 186
    put(&[0x31, 0xd2, 0x0f, 0x05, 0xc3]); // xor edx, edx; syscall; ret
    let n = put(&[0x8b, 0x41, 0x04, 0xc3]); // found: mov eax, [rcx + 4]; ret
    code.get_mut(at..at + n)?.copy_from_slice(&g[..n]);
    Some(())
}

/// Where the `i`th pair of the table is (an offset in the mapping), `None` past its end.
pub const fn tid_at(i: usize) -> Option<usize> {
    if i < TIDS {
        Some(TIDS_AT + 8 * i)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_site_is_found_once_and_a_call_replaces_it_byte_for_byte() {
        let mut body = [0x90u8; 64];
        body[10..17].copy_from_slice(&site_bytes(186));
        assert_eq!(find(&body, 186), Some(10));
        assert_eq!(find(&body, 35), None);
        body[30..37].copy_from_slice(&site_bytes(186));
        assert_eq!(find(&body, 186), None, "two: neither is taken");
        let c = call_at(0x40_1000, 0x3c_0000 + GETTID_AT as u64).unwrap();
        assert_eq!(c[0], 0xe8);
        let d = i32::from_le_bytes([c[1], c[2], c[3], c[4]]) as i64;
        assert_eq!(0x40_1000 + 5 + d, 0x3c_0000 + GETTID_AT as i64);
        assert_eq!(call_at(0x7fff_0000_0000, 0x1000), None, "out of reach");
    }

    #[test]
    fn the_code_fits_its_place_and_its_jumps_land_on_instructions() {
        let mut page = [0u8; 4096];
        code(&mut page).unwrap();
        let g = &page[GETTID_AT..];
        // The jne over the main thread's answer lands on the table's lea.
        let jne = 2 + 8 + 5 + 2 + 6;
        assert_eq!(g[jne], 0x75);
        let after = jne + 2 + g[jne + 1] as usize;
        assert_eq!(&g[after..after + 3], &[0x48, 0x8d, 0x0d]);
        // The loop's je lands on `found`, its jnz back on its cmp.
        let lp = after + 7 + 5;
        assert_eq!(&g[lp..lp + 2], &[0x3b, 0x01]);
        let found = lp + 4 + g[lp + 3] as usize;
        assert_eq!(&g[found..found + 4], &[0x8b, 0x41, 0x04, 0xc3]);
        let jnz = lp + 10;
        assert_eq!(jnz + 2 - (0x100 - g[jnz + 1] as usize), lp);
        // It ends before its copy for `runtime.clone` starts, which ends in the page, and
        // the rip-relative words point at the numbers.
        assert!(GETTID_AT + found + 4 <= CLONE_GETTID_AT);
        assert!(CLONE_GETTID_AT + found + 4 <= AFFINITY_AT);
        // The sched_getaffinity code's last byte, its `ret`, ends the page at most.
        let a = &page[AFFINITY_AT..];
        let end = (0..a.len()).rev().find(|&i| a[i] != 0).unwrap();
        assert_eq!(a[end], 0xc3);
        assert!(AFFINITY_AT + end < 4096);
        assert_eq!(&a[end - 7..end], &site_bytes(204));
        assert_eq!(
            page[GETTID_AT..GETTID_AT + 17],
            page[CLONE_GETTID_AT..CLONE_GETTID_AT + 17]
        );
        let cmp = 2 + 8 + 5 + 2;
        let d = i32::from_le_bytes(g[cmp + 2..cmp + 6].try_into().unwrap()) as i64;
        assert_eq!((GETTID_AT + cmp + 6) as i64 + d, REAL_AT as i64);
        assert_eq!(tid_at(TIDS), None);
        assert!(tid_at(TIDS - 1).unwrap() + 8 <= 8192);
    }

    /// The code, run here (no filter: the marked and unmarked calls are both the kernel's).
    #[test]
    fn gettid_answers_the_main_thread_the_table_and_else_the_kernel() {
        extern "C" {
            fn syscall(n: i64, ...) -> i64;
        }
        let page = super::super::go_wyrand::rwx_pages();
        code(&mut page[..4096]).unwrap();
        let base = page.as_mut_ptr() as usize;
        // SAFETY: the code page we just wrote, as a function of no arguments returning eax.
        let gettid: extern "C" fn() -> i32 = unsafe { core::mem::transmute(base + GETTID_AT) };
        // SAFETY: a system call with no arguments.
        let real = unsafe { syscall(186) } as i32;
        let put = |page: &mut [u8], at: usize, v: i32| {
            page[at..at + 4].copy_from_slice(&v.to_le_bytes());
        };
        put(page, REAL_AT, real);
        put(page, VPID_AT, 1000);
        assert_eq!(gettid(), 1000, "the main thread: the virtual pid");
        put(page, REAL_AT, real + 1);
        assert_eq!(
            gettid(),
            real,
            "no pair: the kernel's (the supervisor's) answer"
        );
        let at = tid_at(5).unwrap();
        put(page, at + 4, 1003);
        put(page, at, real);
        assert_eq!(gettid(), 1003, "its pair");
        put(page, at, 0);
        put(page, MISS_REAL_AT, 1);
        assert_eq!(gettid(), real, "a cgo program's other thread: its real tid");
        put(page, MISS_REAL_AT, 0);
        put(page, CLAIMS_AT, 0);
        let get = |page: &[u8], at: usize| i32::from_le_bytes(page[at..at + 4].try_into().unwrap());
        assert_eq!(gettid(), real, "no pair left: the supervisor's answer");
        assert_eq!(get(page, CLAIMS_AT), 1, "a claim past the pairs left");
        put(page, CLAIMS_AT, 0);
        for k in 0..3 {
            put(page, tid_at(k).unwrap() + 4, 2000 + k as i32);
        }
        put(page, LEFT_AT, 2);
        // SAFETY: as above, the copy `runtime.clone` calls.
        let from_clone: extern "C" fn() -> i32 =
            unsafe { core::mem::transmute(base + CLONE_GETTID_AT) };
        assert_eq!(from_clone(), 2000, "a new thread: the first pair left");
        assert_eq!(get(page, tid_at(0).unwrap()), real, "its real tid written");
        assert_eq!(gettid(), 2000, "its next: found");
        assert_eq!(get(page, CLAIMS_AT), 1);
        put(page, tid_at(0).unwrap(), 0);
        assert_eq!(gettid(), 2001, "the next pair");
        put(page, tid_at(1).unwrap(), 0);
        assert_eq!(gettid(), real, "none left: asked");
        assert_eq!(
            get(page, tid_at(2).unwrap()),
            0,
            "past the count: untouched"
        );
        // sched_getaffinity: pid 0 into a large enough buffer from the mask, else the kernel.
        // SAFETY: as above, a function of (pid, len, buf) returning eax (System V passes
        // them in rdi, rsi, rdx, as the rewritten call finds them).
        let affinity: extern "C" fn(u64, u64, *mut u8) -> i32 =
            unsafe { core::mem::transmute(base + AFFINITY_AT) };
        let mut buf = [0u8; 64];
        let real = affinity(0, 64, buf.as_mut_ptr());
        assert!(
            real > 0 && real % 8 == 0,
            "no mask yet: the kernel's ({real})"
        );
        page[MASK_AT..MASK_AT + 16]
            .copy_from_slice(&[0xff, 0x03, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        put(page, MASK_LEN_AT, 16);
        let mut buf = [0xeeu8; 64];
        assert_eq!(affinity(0, 64, buf.as_mut_ptr()), 16);
        assert_eq!(buf[..16], page[MASK_AT..MASK_AT + 16]);
        assert_eq!(buf[16], 0xee, "nothing past the mask");
        assert_eq!(get(page, AFFINITY_COUNT_AT), 1);
        let mut small = [0u8; 8];
        // SAFETY: sched_getaffinity into our 8 bytes.
        let kernel = unsafe { syscall(204, 0, 8, small.as_mut_ptr()) } as i32;
        assert_eq!(
            affinity(0, 8, small.as_mut_ptr()),
            kernel,
            "too small: the kernel's"
        );
        assert_eq!(
            affinity(0, 20, small.as_mut_ptr()),
            -22,
            "not whole words: EINVAL"
        );
        // SAFETY: getpid, no arguments.
        let pid = unsafe { syscall(39) } as u64;
        assert!(affinity(pid, 64, buf.as_mut_ptr()) > 0, "another pid");
        assert_eq!(
            get(page, AFFINITY_COUNT_AT),
            1,
            "only its own answers counted"
        );
        // SAFETY: as above, a function of (timespec, NULL).
        let usleep: extern "C" fn(*const [i64; 2], usize) -> i64 =
            unsafe { core::mem::transmute(base + USLEEP_AT) };
        assert_eq!(usleep(&[0, 1000], 0), 0);
    }
}
