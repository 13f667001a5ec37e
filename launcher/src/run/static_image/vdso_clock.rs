//! A static Go image's clock reads at native speed. At the exec stop the supervisor maps a
//! page shared with it into the image (system calls injected while the image is stopped:
//! `open` of a file in the run directory, `mmap`, `close`) and replaces the vDSO's
//! `__vdso_clock_gettime` with a few instructions that read the image's clock `C` from that
//! page: `[0]` is `epoch + C` (`CLOCK_REALTIME`), `[1]` is `MONO_BASE + C`
//! (`CLOCK_MONOTONIC`), `[2]` counts the reads since the supervisor last moved `C`. Past
//! [`SPIN_READS`] reads with `C` still, each read ticks both (a goroutine spinning on
//! `time.Now()` ends). Other clock ids go to the kernel (the filter sends them here). The
//! supervisor moves `C` with atomic adds on its own mapping of the page.

use std::sync::atomic::{AtomicU64, Ordering};

use super::remote::read;

/// Reads of the page with `C` still after which each read ticks it.
pub const SPIN_READS: u32 = 100_000;

/// The supervisor's mapping of one image's clock page.
pub struct Page {
    words: *const AtomicU64,
}

impl Page {
    fn word(&self, i: usize) -> &AtomicU64 {
        // SAFETY: a live shared mapping of one page (three u64 words used), never unmapped.
        unsafe { &*self.words.add(i) }
    }

    /// `C`, as the image last saw it (`[1] - MONO_BASE`).
    pub fn c(&self, mono_base: i64) -> i64 {
        self.word(1).load(Ordering::Acquire) as i64 - mono_base
    }

    /// Moves `C` by `d` ns and starts the read count again.
    pub fn advance(&self, d: i64) {
        self.word(0).fetch_add(d as u64, Ordering::AcqRel);
        self.word(1).fetch_add(d as u64, Ordering::AcqRel);
        self.word(2).store(0, Ordering::Release);
    }
}

/// The replacement of `__vdso_clock_gettime` reading the page at `page` (see the module).
fn code(page: u64, tick: u32) -> Vec<u8> {
    let mut c = Vec::new();
    c.extend([0x83, 0xff, 0x01]); // cmp edi, 1
    c.extend([0x77, 0x00]); // ja fallback (patched below)
    let ja = c.len() - 1;
    c.extend([0x49, 0xb8]); // movabs r8, page
    c.extend(page.to_le_bytes());
    c.extend([0xb9, 0x01, 0x00, 0x00, 0x00]); // mov ecx, 1
    c.extend([0xf0, 0x49, 0x0f, 0xc1, 0x48, 0x10]); // lock xadd [r8+16], rcx
    c.extend([0x48, 0x81, 0xf9]); // cmp rcx, SPIN_READS
    c.extend(SPIN_READS.to_le_bytes());
    c.extend([0x72, 0x00]); // jb read (patched below)
    let jb = c.len() - 1;
    c.extend([0x48, 0xc7, 0xc1]); // mov rcx, tick
    c.extend(tick.to_le_bytes());
    c.extend([0xf0, 0x49, 0x01, 0x08]); // lock add [r8], rcx
    c.extend([0xf0, 0x49, 0x01, 0x48, 0x08]); // lock add [r8+8], rcx
    c[jb] = (c.len() - jb - 1) as u8;
    c.extend([0x49, 0x8b, 0x04, 0xf8]); // mov rax, [r8+rdi*8]
    c.extend([0xb9, 0x00, 0xca, 0x9a, 0x3b]); // mov ecx, 1000000000
    c.extend([0x31, 0xd2]); // xor edx, edx
    c.extend([0x48, 0xf7, 0xf1]); // div rcx
    c.extend([0x48, 0x89, 0x06]); // mov [rsi], rax
    c.extend([0x48, 0x89, 0x56, 0x08]); // mov [rsi+8], rdx
    c.extend([0x31, 0xc0]); // xor eax, eax
    c.push(0xc3); // ret
    c[ja] = (c.len() - ja - 1) as u8;
    c.extend([0xb8, 0xe4, 0x00, 0x00, 0x00]); // fallback: mov eax, 228 (clock_gettime)
    c.extend([0x0f, 0x05]); // syscall
    c.push(0xc3); // ret
    c
}

/// The offset of the `syscall` instruction in [`code`].
fn syscall_at(code: &[u8]) -> usize {
    code.len() - 3
}

/// Reads `pid`'s vDSO (at `base`), page by page.
pub(super) fn vdso_bytes(pid: i32, base: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..8u64 {
        let mut page = [0u8; 4096];
        if !read(pid, base + i * 4096, &mut page) {
            break;
        }
        out.extend_from_slice(&page);
    }
    out
}

/// The address and size of `__vdso_clock_gettime` in the vDSO image `elf` (loaded at `base`).
fn clock_gettime_in(elf: &[u8], base: u64) -> Option<(u64, u64)> {
    use object::{Object, ObjectSymbol};
    let file = object::File::parse(elf).ok()?;
    file.dynamic_symbols()
        .find(|s| s.name() == Ok("__vdso_clock_gettime"))
        .filter(|s| s.address() < elf.len() as u64)
        .map(|s| (base + s.address(), s.size()))
}

/// One system call run in stopped tracee `pid`, from the `syscall` instruction at `at`, with
/// registers `saved` otherwise; its result, or `None` when the tracee did not stop after it.
pub(super) fn inject(
    pid: i32,
    saved: &libc::user_regs_struct,
    at: u64,
    nr: u64,
    a: [u64; 6],
) -> Option<i64> {
    let mut want = *saved;
    (want.rax, want.orig_rax, want.rip) = (nr, u64::MAX, at);
    (want.rdi, want.rsi, want.rdx) = (a[0], a[1], a[2]);
    (want.r10, want.r8, want.r9) = (a[3], a[4], a[5]);
    // The first step out of the exec's system call stops before any instruction runs, and
    // the exec's return value (0) has then overwritten `rax`: the registers are set again
    // until the `syscall` instruction has run.
    for _ in 0..3 {
        let mut r = want;
        let mut st = 0;
        // SAFETY: ptrace requests on our stopped tracee, with a regs struct we own; waitpid
        // on it.
        let ok = unsafe {
            libc::ptrace(libc::PTRACE_SETREGS, pid, 0, &want) == 0
                && libc::ptrace(libc::PTRACE_SINGLESTEP, pid, 0, 0) == 0
                && libc::waitpid(pid, &mut st, libc::__WALL) == pid
                && libc::WIFSTOPPED(st)
                && libc::WSTOPSIG(st) == libc::SIGTRAP
                && libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut r) == 0
        };
        if !ok {
            return None;
        }
        if r.rip == at + 2 {
            return Some(r.rax as i64);
        }
        if r.rip != at {
            return None;
        }
    }
    None
}

/// Writes `data` at `addr` in stopped tracee `pid` with `PTRACE_POKEDATA` (which writes
/// read-only text, as a debugger's breakpoints do).
pub(super) fn poke(pid: i32, addr: u64, data: &[u8]) -> bool {
    for (i, chunk) in data.chunks(8).enumerate() {
        let at = addr + 8 * i as u64;
        let mut word = [0u8; 8];
        if chunk.len() < 8 && !read(pid, at, &mut word) {
            return false;
        }
        word[..chunk.len()].copy_from_slice(chunk);
        // SAFETY: POKEDATA on our stopped tracee.
        if unsafe { libc::ptrace(libc::PTRACE_POKEDATA, pid, at, u64::from_le_bytes(word)) } != 0 {
            return false;
        }
    }
    true
}

/// [`install`] for Go image `pid`, stopped at its exec, with the run's settings (`mono_base`:
/// what `CLOCK_MONOTONIC` reads at `C = 0`).
pub fn set_up(pid: i32, world: &super::world::World, mono_base: i64) -> Option<Page> {
    let base = super::auxv::vdso_base(pid)?;
    let dir = world.run_dir.as_ref()?;
    let c = world.clock;
    let first = [world.epoch_ns + c, mono_base + c];
    install(
        pid,
        dir,
        base,
        first,
        world.tick_ns.clamp(0, i32::MAX as i64),
    )
}

/// Sets the fast clock up in Go image `pid`, stopped at its exec, whose vDSO is at `vdso`:
/// `[realtime, monotonic]` are the page's first values, `tick` what a spinning read adds.
/// `None` (nothing changed in the image, or only what the next exec throws away) when any
/// step fails: the caller then removes the vDSO, and reads go by system call.
pub fn install(
    pid: i32,
    run_dir: &std::path::Path,
    vdso: u64,
    first: [i64; 2],
    tick: i64,
) -> Option<Page> {
    let elf = vdso_bytes(pid, vdso);
    let (func, size) = clock_gettime_in(&elf, vdso)?;
    // The supervisor's side of the page: a file in the run directory, removed once mapped.
    let path = run_dir.join(format!("go-clock-{pid}"));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .ok()?;
    let done = (|| {
        file.set_len(4096).ok()?;
        // Kept for the supervisor's life.
        let map = super::page::map_shared(&file, true)?;
        let page = Page {
            words: map.cast::<AtomicU64>(),
        };
        page.word(0).store(first[0] as u64, Ordering::Release);
        page.word(1).store(first[1] as u64, Ordering::Release);
        // SAFETY: user_regs_struct is plain data; GETREGS fills it for our stopped tracee.
        let mut saved: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut saved) } != 0 {
            return None;
        }
        // The path, on the new stack well below the stack pointer (inside the stack's mapping,
        // which exec sets up with room to grow).
        let mut name = path.as_os_str().as_encoded_bytes().to_vec();
        name.push(0);
        let at = (saved.rsp - 4096) & !15;
        if name.len() > 2048 || !super::remote::write(pid, at, &name) {
            return None;
        }
        // The code is written first: its `syscall` instruction is where calls are injected.
        let placeholder = code(0, tick as u32);
        if (size as usize) < placeholder.len() || !poke(pid, func, &placeholder) {
            return None;
        }
        let sys = func + syscall_at(&placeholder) as u64;
        let result = (|| {
            let fd = inject(pid, &saved, sys, 2, [at, libc::O_RDWR as u64, 0, 0, 0, 0])?;
            if fd < 0 {
                return None;
            }
            let prot = (libc::PROT_READ | libc::PROT_WRITE) as u64;
            let shared = libc::MAP_SHARED as u64;
            let addr = inject(pid, &saved, sys, 9, [0, 4096, prot, shared, fd as u64, 0]);
            inject(pid, &saved, sys, 3, [fd as u64, 0, 0, 0, 0, 0]);
            addr
        })();
        // SAFETY: restores the registers of our stopped tracee.
        unsafe { libc::ptrace(libc::PTRACE_SETREGS, pid, 0, &saved) };
        // mmap's errors are -4095..-1.
        let addr = result.filter(|&a| a > 0)? as u64;
        poke(pid, func, &code(addr, tick as u32)).then_some(page)
    })();
    let _ = std::fs::remove_file(&path);
    if done.is_none() {
        // The kernel's code back (the caller also removes the vDSO from the auxiliary vector,
        // so the runtime never calls it).
        let at = (func - vdso) as usize;
        if let Some(orig) = elf.get(at..at + code(0, 0).len()) {
            poke(pid, func, orig);
        }
    }
    done
}

/// Makes `runtime.cputicks` of Go image `pid` (stopped at its exec; its program mapped at
/// `bias`) return `ticks`: the runtime seeds each thread's `fastrand` (map order, `select`
/// order, `os.MkdirTemp` names) from it, through `rdtsc`. Go allows it to be anything ("not
/// guaranteed to be monotonic"); its only other users are the block profiler and tracing.
/// False when the symbol is not there (a stripped binary) or cannot be written.
pub fn seal_cputicks(pid: i32, bias: u64, ticks: u64) -> bool {
    use object::{Object, ObjectSymbol};
    let Some(exe) = super::exe_map::ExeMap::of(pid) else {
        return false;
    };
    let Ok(file) = object::File::parse(&*exe) else {
        return false;
    };
    let Some((at, size)) = file
        .symbols()
        .find(|s| matches!(s.name(), Ok("runtime.cputicks" | "runtime.cputicks.abi0")))
        .map(|s| (s.address(), s.size()))
    else {
        return false;
    };
    let mut code = vec![0x48, 0xb8]; // movabs rax, ticks
    code.extend(ticks.to_le_bytes());
    code.push(0xc3); // ret
    size >= code.len() as u64 && poke(pid, bias + at, &code)
}
