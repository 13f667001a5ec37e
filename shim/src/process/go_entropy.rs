//! A dynamically linked Go program's `crypto/rand` served in the process, as a static Go
//! image's is at its exec stop (`seal_abi::supervised::entropy`: the code, the mapping's
//! layout; `seal_abi::supervised::go_site`: the call to rewrite). The one call
//! `internal/syscall/unix.GetRandom` makes to `syscall.Syscall` is pointed at code in a
//! mapping shared with the supervisor, which copies the read from a window of the process's
//! stream and makes the `getrandom` system call (answered by the supervisor at the read's
//! position) only when the window does not hold it.
//!
//! Order, in libseal's constructor (one thread, before the Go runtime starts), as for the
//! clock page (`go_vdso`): [`prepare`] finds the call in the executable's symbol table (a
//! mapping of `/proc/self/exe`, unmapped at once; or the run directory's file `go_kept`
//! reads), creates `go-entropy-PID` in the run
//! directory and maps it just below the program (within a 32-bit displacement of the call),
//! and writes where into its header; the supervisor, started next, maps it too, fills the
//! window and marks it taken before it says READY; [`give`] then checks the mark, writes the
//! code and rewrites the call. Any step that fails leaves `GetRandom` alone: its reads stay
//! system calls served by the supervisor, as before.

use core::sync::atomic::{AtomicU64, Ordering};

use seal_abi::supervised::entropy as e;
use seal_abi::supervised::go_site;
use seal_abi::Fid;

use crate::core::sys;
use crate::process::target::{in_run_dir, Path};

/// This process's mapping, prepared and not yet given to the runtime.
pub struct Prepared {
    /// The mapping's address (in this process; the supervisor has its own).
    at: u64,
    /// The call to rewrite, and its target (`syscall.Syscall`), as loaded.
    call: u64,
    target: u64,
}

/// The mapping's file name in the run directory: `RUN_DIR/go-entropy-PID`.
fn file_path() -> Option<Path> {
    let mut p = in_run_dir(e::FILE_PREFIX.as_bytes())?;
    p.push_i64(sys::getpid() as i64);
    Some(p)
}

/// Removes the mapping's file (each side keeps its mapping).
pub fn unlink_file() {
    if let Some(mut path) = file_path() {
        // SAFETY: a NUL-terminated path.
        unsafe { sys::syscall3(libc::SYS_unlink, path.as_cstr().as_ptr() as i64, 0, 0) };
    }
}

fn failed(r: i64) -> bool {
    (-4095..0).contains(&r)
}

/// What this process's executable holds to rewrite (load bias added): the entropy call,
/// `runtime.cputicks` and the runtime's random numbers (found by name in its symbol table,
/// or in its `pclntab` when it is stripped; or kept in the run directory by an earlier
/// look-up: `go_kept`), and the lowest address it is mapped at; `None` when the executable
/// cannot be mapped.
pub fn find_sites() -> Option<(go_site::Sites, u64)> {
    let fd = sys::open(b"/proc/self/exe\0", libc::O_RDONLY | libc::O_CLOEXEC, 0);
    if fd < 0 {
        return None;
    }
    let kept = super::go_kept::read(fd)
        .and_then(|(s, low)| Some((s, low, super::go_kept::memory_bias()?)));
    if let Some((s, low, bias)) = kept {
        sys::close(fd);
        return Some((biased(&s, bias), low + bias));
    }
    let found = read_sites(fd);
    if let Some((s, _, _, low)) = &found {
        super::go_kept::keep(fd, s, *low);
    }
    sys::close(fd);
    let (s, pie, phdr, low) = found?;
    let bias = if pie {
        // SAFETY: getauxval has no preconditions.
        let at_phdr = unsafe { libc::getauxval(libc::AT_PHDR) };
        at_phdr.checked_sub(phdr)?
    } else {
        0
    };
    Some((biased(&s, bias), low + bias))
}

/// The sites of the executable open at `fd` (as linked), whether it is position-independent,
/// where its program headers are linked, and its lowest load address.
fn read_sites(fd: i32) -> Option<(go_site::Sites, bool, u64, u64)> {
    // SAFETY: lseek on our own descriptor.
    let len = unsafe { sys::syscall3(libc::SYS_lseek, fd as i64, 0, libc::SEEK_END as i64) };
    let map = if len > 0 {
        // SAFETY: a new read-only private mapping of an open file, placed by the kernel;
        // unmapped below.
        unsafe {
            sys::syscall6(
                libc::SYS_mmap,
                0,
                len,
                libc::PROT_READ as i64,
                libc::MAP_PRIVATE as i64,
                fd as i64,
                0,
            )
        }
    } else {
        -1
    };
    if failed(map) {
        return None;
    }
    let found = {
        // SAFETY: `len` readable bytes of our mapping, unmapped only after this block. An
        // executable is not written while it runs (ETXTBSY).
        let f = unsafe { core::slice::from_raw_parts(map as *const u8, len as usize) };
        let sites = go_site::find_all(f);
        let phdr = if go_site::is_pie(f) {
            go_site::phdr_vaddr(f)
        } else {
            Some(0)
        };
        phdr.and_then(|phdr| Some((sites, go_site::is_pie(f), phdr, go_site::low(f)?)))
    };
    // SAFETY: our mapping, no longer read.
    unsafe { sys::munmap(map as *mut u8, len as usize) };
    found
}

/// `s` (as linked) at load bias `bias`.
fn biased(s: &go_site::Sites, bias: u64) -> go_site::Sites {
    go_site::Sites {
        random: s.random.map(|s| go_site::Site {
            call: s.call + bias,
            low: s.low + bias,
            target: s.target + bias,
        }),
        cputicks: s.cputicks.map(|(at, size)| (at + bias, size)),
        rand: s.rand.map(|r| r.biased(bias)),
        usleep: s.usleep.map(|at| at + bias),
        gettid: s.gettid.map(|at| at + bias),
        clone_gettid: s.clone_gettid.map(|at| at + bias),
        affinity: s.affinity.map(|at| at + bias),
    }
}

/// Makes `runtime.cputicks` (at `(address, size)`) return `ticks`, as the supervisor does in a
/// static Go image at its exec stop: the runtime seeds each thread's `fastrand` (map seeds
/// and iteration starts, `select` order, `os.MkdirTemp` names) from it, through `rdtsc`. Go
/// allows it to be anything ("not guaranteed to be monotonic"); its other users are the block
/// profiler and tracing. False when it is too small or cannot be written.
///
/// # Safety
/// Only one thread runs, and the Go runtime has not started.
pub unsafe fn seal_cputicks((at, size): (u64, u64), ticks: u64) -> bool {
    let mut code = [0u8; 11];
    code[..2].copy_from_slice(&[0x48, 0xb8]); // movabs rax, ticks
    code[2..10].copy_from_slice(&ticks.to_le_bytes());
    code[10] = 0xc3; // ret
                     // SAFETY: per the contract; `size` bytes of the executable's text at `at`.
    size >= code.len() as u64 && unsafe { rewrite(at, &code) }
}

/// Finds the call and maps the process's entropy file below the program (before its
/// supervisor starts, which takes it). `None` when any step fails (nothing is left behind).
pub fn prepare(site: Option<go_site::Site>) -> Option<Prepared> {
    let site = site?;
    let hint = site.low.checked_sub(e::MAP_BYTES as u64 + (64 << 10))? & !0xfff;
    e::call_rel32(site.call, hint)?;
    let mut path = file_path()?;
    let fd = sys::create_private(path.as_cstr(), libc::O_RDWR, true);
    if fd < 0 {
        return None;
    }
    let r = if sys::ftruncate(fd, e::MAP_BYTES) == 0 {
        // SAFETY: a new shared mapping of our file at an address nothing holds
        // (MAP_FIXED_NOREPLACE: the kernel refuses rather than replace a mapping).
        unsafe {
            sys::syscall6(
                libc::SYS_mmap,
                hint as i64,
                e::MAP_BYTES as i64,
                (libc::PROT_READ | libc::PROT_WRITE) as i64,
                (libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE) as i64,
                fd as i64,
                0,
            )
        }
    } else {
        -1
    };
    sys::close(fd);
    if failed(r) || r as u64 != hint {
        if !failed(r) {
            // A kernel without MAP_FIXED_NOREPLACE placed it elsewhere.
            // SAFETY: our mapping, unused.
            unsafe { sys::munmap(r as *mut u8, e::MAP_BYTES) };
        }
        unlink_file();
        return None;
    }
    let p = Prepared {
        at: hint,
        call: site.call,
        target: site.target,
    };
    p.head(e::BASE).store(hint, Ordering::SeqCst);
    p.head(e::SITE).store(site.call, Ordering::SeqCst);
    Some(p)
}

impl Prepared {
    fn head(&self, word: usize) -> &AtomicU64 {
        // SAFETY: a header word of our live mapping, 8-aligned.
        unsafe { &*((self.at as usize + e::HEAD_AT + word) as *const AtomicU64) }
    }

    /// Unmaps it: no supervisor started.
    pub fn forget(self) {
        self.drop_map();
    }

    /// Unmaps it (the supervisor did not take it, or the call could not be rewritten).
    fn drop_map(self) {
        // SAFETY: our mapping, which nothing runs or reads.
        unsafe { sys::munmap(self.at as *mut u8, e::MAP_BYTES) };
    }
}

/// Points `GetRandom`'s call at the code, if the supervisor took the mapping; its in-process
/// reads are counted in this image's census at the call's address + 1 (inside `GetRandom`).
/// False when it did not (the call is left alone).
///
/// # Safety
/// Only one thread runs, and the Go runtime has not started.
pub unsafe fn give(p: Prepared) -> bool {
    if p.head(e::TAKEN).load(Ordering::SeqCst) != e::TAKEN_MAGIC {
        p.drop_map();
        return false;
    }
    // The call must still be the one the file holds.
    // SAFETY: five bytes of the executable's mapped text.
    let now = unsafe { core::ptr::read_unaligned(p.call as *const [u8; 5]) };
    let d = i32::from_le_bytes([now[1], now[2], now[3], now[4]]);
    let (Some(call), true) = (
        e::call_rel32(p.call, p.at),
        now[0] == 0xe8 && (p.call as i64 + 5 + d as i64) as u64 == p.target,
    ) else {
        p.drop_map();
        return false;
    };
    let own = p.at + (e::HEAD_AT + e::SERVED) as u64;
    let count_at = crate::core::census::counter(Fid::Getrandom, 0, p.call + 1)
        .map_or(own, |c| c as *const AtomicU64 as u64);
    // SAFETY: the first page of our mapping, writable until the mprotect below.
    let code = unsafe { core::slice::from_raw_parts_mut(p.at as *mut u8, e::CODE_BYTES) };
    let rx = (libc::PROT_READ | libc::PROT_EXEC) as i64;
    // SAFETY: our own mapping's first page, made read-only and executable.
    let made = e::getrandom_code(code, p.at, count_at).is_some()
        && unsafe { sys::syscall3(libc::SYS_mprotect, p.at as i64, e::CODE_BYTES as i64, rx) } == 0;
    // SAFETY: per the contract: no thread runs the call while it is rewritten.
    if !made || !unsafe { rewrite(p.call, &call) } {
        p.drop_map();
        return false;
    }
    true
}

/// Writes every `(address, bytes)` of `patches` (an address of 0 is none) over the
/// executable's text, the pages they span made writable once for all of them where they lie
/// in one executable segment of the program: two `mprotect`s where each patch made two (a
/// cgo program has a dozen: the runtime's random functions, its inlined copies, `usleep`,
/// `gettid`; each `mprotect` of its text splits and merges a mapping of megabytes). One at a
/// time otherwise. False if one could not be written.
///
/// # Safety
/// No thread runs the bytes at the addresses meanwhile.
pub(crate) unsafe fn rewrite_all(patches: &[(u64, &[u8])]) -> bool {
    let live = || patches.iter().filter(|p| p.0 != 0);
    let Some(lo) = live().map(|p| p.0 & !4095).min() else {
        return true;
    };
    let hi = live()
        .map(|p| (p.0 + p.1.len() as u64 + 4095) & !4095)
        .max()
        .unwrap_or(lo);
    let prot = |p: i32| {
        // SAFETY: the pages are mapped text of the executable (checked below).
        unsafe { sys::syscall3(libc::SYS_mprotect, lo as i64, (hi - lo) as i64, p as i64) }
    };
    if in_one_text_segment(lo, hi)
        && prot(libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) == 0
    {
        for &(at, bytes) in live() {
            // SAFETY: the pages are writable now; bytes of the runtime's functions.
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut u8, bytes.len()) };
        }
        prot(libc::PROT_READ | libc::PROT_EXEC);
        return true;
    }
    // SAFETY: per the contract.
    live().all(|&(at, bytes)| unsafe { rewrite(at, bytes) })
}

/// Do `lo..hi` lie in one executable `PT_LOAD` of the program (its program headers in
/// memory, load bias added)?
fn in_one_text_segment(lo: u64, hi: u64) -> bool {
    const PT_LOAD: u32 = 1;
    const PF_X: u32 = 1;
    let Some(bias) = super::go_kept::memory_bias() else {
        return false;
    };
    let (_, mut headers) = super::go_kept::memory_phdrs();
    headers.any(|(kind, flags, vaddr, size)| {
        let start = (vaddr + bias) & !4095;
        let end = (vaddr + bias + size + 4095) & !4095;
        kind == PT_LOAD && flags & PF_X != 0 && start <= lo && hi <= end
    })
}

/// Writes `bytes` over the executable's text at `at`, making its pages writable for the write
/// and executable, not writable, again after. False if the kernel refused the first change.
///
/// # Safety
/// No thread runs the bytes at `at` meanwhile.
pub(crate) unsafe fn rewrite(at: u64, bytes: &[u8]) -> bool {
    let page = at & !4095;
    let len = ((at + bytes.len() as u64 + 4095) & !4095) - page;
    let prot = |p: i32| {
        // SAFETY: the pages are mapped text of the executable.
        unsafe { sys::syscall3(libc::SYS_mprotect, page as i64, len as i64, p as i64) }
    };
    if prot(libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) != 0 {
        return false;
    }
    // SAFETY: the pages are writable now; bytes of the function.
    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut u8, bytes.len()) };
    prot(libc::PROT_READ | libc::PROT_EXEC);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_span_of_the_programs_own_code_is_changed_at_once() {
        // This test's own function is in the test program's executable segment; its stack
        // and a span past the end of the address space are not.
        let f = only_a_span_of_the_programs_own_code_is_changed_at_once as fn() as usize as u64;
        assert!(in_one_text_segment(f & !4095, (f & !4095) + 4096));
        let local = 0u8;
        let s = &local as *const u8 as u64 & !4095;
        assert!(!in_one_text_segment(s, s + 4096));
        assert!(!in_one_text_segment(f & !4095, !4095));
        // Nothing to write is done at once.
        // SAFETY: no patch.
        assert!(unsafe { rewrite_all(&[(0, &[0x90])]) });
    }

    #[test]
    fn the_programs_load_bias_is_read_from_its_headers_in_memory() {
        // The test program is position-independent: its bias is where its first page went.
        let bias = super::super::go_kept::memory_bias().unwrap();
        // SAFETY: getauxval has no preconditions.
        let phdr = unsafe { libc::getauxval(libc::AT_PHDR) };
        assert!(bias > 0 && bias <= phdr, "{bias:#x} {phdr:#x}");
        assert_eq!(bias & 4095, 0);
    }
}
