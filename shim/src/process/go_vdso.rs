//! A dynamically linked Go program's clock reads at native speed: libseal gives its runtime a
//! vDSO of its own making, whose one entry, `__vdso_clock_gettime` (version `LINUX_2.6`, what
//! Go's `runtime/vdso_linux.go` looks up), reads the process's clock `C` from a page shared
//! with its supervisor (`seal_abi::supervised::clock_page`). Nothing else is exported: any
//! other entry a runtime looks up (`__vdso_gettimeofday`, Go 1.24's `__vdso_getrandom`) is not
//! found, and the runtime makes the system call, which the filter sends to the supervisor.
//!
//! Order, in libseal's constructor (one thread, before the runtime starts): [`make_page`]
//! creates `go-clock-PID` in the run directory and maps it; the supervisor, started next,
//! maps it too, sets its clock words and marks it taken before it says READY; [`give`] then
//! checks the mark, writes the ELF image and points `AT_SYSINFO_EHDR` on the stack at it.
//! Anything missing on the way leaves the page unused: the caller hides the vDSO instead, and
//! the runtime's reads go by system call, as before.

use core::sync::atomic::{AtomicU64, Ordering};

use seal_abi::supervised::clock_page::{self as cp, CODE_LEN};
use seal_abi::Fid;

use crate::core::sys;
use crate::process::target::{in_run_dir, Path};

/// The page's file name in the run directory, for process `pid`: `RUN_DIR/go-clock-PID`.
fn page_path(pid: i32) -> Option<Path> {
    let mut p = in_run_dir(b"go-clock-")?;
    p.push_i64(pid as i64);
    Some(p)
}

/// Creates and maps this process's clock page (before its supervisor starts); null when it
/// could not.
pub fn make_page() -> *mut AtomicU64 {
    let Some(mut path) = page_path(sys::getpid()) else {
        return core::ptr::null_mut();
    };
    let fd = sys::create_private(path.as_cstr(), libc::O_RDWR, true);
    if fd < 0 {
        return core::ptr::null_mut();
    }
    let p = if sys::ftruncate(fd, 4096) == 0 {
        sys::mmap_shared(fd, 4096)
    } else {
        core::ptr::null_mut()
    };
    sys::close(fd);
    if p.is_null() {
        unlink_page();
    }
    p.cast()
}

/// Removes the page's file (each side keeps its mapping).
pub fn unlink_page() {
    if let Some(mut path) = page_path(sys::getpid()) {
        // SAFETY: a NUL-terminated path.
        unsafe { sys::syscall3(libc::SYS_unlink, path.as_cstr().as_ptr() as i64, 0, 0) };
    }
}

// The image's layout (one page), each part after the one before: the ELF header (64 bytes),
// two program headers (56 each), the dynamic table (9 entries of 16), a hash table (5 words),
// two symbols (24 each), their versions (2 each), two version definitions (28 each), the
// strings, the code (16-aligned).
const PHDRS: usize = 64;
const DYN: usize = PHDRS + 2 * 56;
const HASH: usize = DYN + 9 * 16;
const SYMTAB: usize = align8(HASH + 5 * 4);
const VERSYM: usize = SYMTAB + 2 * 24;
const VERDEF: usize = align8(VERSYM + 2 * 2);
const STRTAB: usize = VERDEF + 2 * 28;
const CODE: usize = (STRTAB + STRINGS.len() + 15) & !15;
const _: () = assert!(CODE + CODE_LEN <= 4096);

const fn align8(at: usize) -> usize {
    (at + 7) & !7
}
/// `\0__vdso_clock_gettime\0LINUX_2.6\0linux-vdso.so.1\0`: names at 1, 22 and 32.
const STRINGS: &[u8] = b"\0__vdso_clock_gettime\0LINUX_2.6\0linux-vdso.so.1\0";
const NAME_FN: u32 = 1;
const NAME_VERSION: u32 = 22;
const NAME_BASE: u32 = 32;
/// ELF hash of `LINUX_2.6` (what Go compares `vd_hash` with).
const LINUX_2_6_HASH: u32 = 0x3ae_75f6;

/// Writes the vDSO image reading `page` into the page at `img` (which holds zeroes).
fn write_image(img: &mut [u8; 4096], page: u64, tick: u32) {
    let mut put = |at: usize, b: &[u8]| img[at..at + b.len()].copy_from_slice(b);
    // ELF header: 64-bit, little-endian, ET_DYN, x86-64, program headers at 64.
    put(0, b"\x7fELF\x02\x01\x01");
    put(16, &3u16.to_le_bytes());
    put(18, &62u16.to_le_bytes());
    put(20, &1u32.to_le_bytes());
    put(32, &(PHDRS as u64).to_le_bytes());
    put(52, &64u16.to_le_bytes());
    put(54, &56u16.to_le_bytes());
    put(56, &2u16.to_le_bytes());
    put(58, &64u16.to_le_bytes());
    // PT_LOAD of the whole page (R+X), then PT_DYNAMIC.
    let phdr = |kind: u32, flags: u32, off: u64, len: u64, align: u64| {
        let mut h = [0u8; 56];
        h[0..4].copy_from_slice(&kind.to_le_bytes());
        h[4..8].copy_from_slice(&flags.to_le_bytes());
        for (i, v) in [off, off, off, len, len, align].iter().enumerate() {
            h[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        h
    };
    put(PHDRS, &phdr(1, 5, 0, 4096, 4096));
    put(PHDRS + 56, &phdr(2, 4, DYN as u64, (HASH - DYN) as u64, 8));
    let dyns: [(u64, u64); 9] = [
        (4, HASH as u64),             // DT_HASH
        (5, STRTAB as u64),           // DT_STRTAB
        (6, SYMTAB as u64),           // DT_SYMTAB
        (10, STRINGS.len() as u64),   // DT_STRSZ
        (11, 24),                     // DT_SYMENT
        (0x6fff_fff0, VERSYM as u64), // DT_VERSYM
        (0x6fff_fffc, VERDEF as u64), // DT_VERDEF
        (0x6fff_fffd, 2),             // DT_VERDEFNUM
        (0, 0),                       // DT_NULL
    ];
    for (i, (tag, val)) in dyns.iter().enumerate() {
        put(DYN + 16 * i, &tag.to_le_bytes());
        put(DYN + 16 * i + 8, &val.to_le_bytes());
    }
    // One bucket: symbol 1, then the end of its chain.
    for (i, w) in [1u32, 2, 1, 0, 0].iter().enumerate() {
        put(HASH + 4 * i, &w.to_le_bytes());
    }
    // Symbol 1: the function, global, in a section that is not SHN_UNDEF.
    let sym = SYMTAB + 24;
    put(sym, &NAME_FN.to_le_bytes());
    put(sym + 4, &[0x12, 0]);
    put(sym + 6, &0xfff1u16.to_le_bytes());
    put(sym + 8, &(CODE as u64).to_le_bytes());
    put(sym + 16, &(CODE_LEN as u64).to_le_bytes());
    put(VERSYM, &[1, 0, 2, 0]);
    // Version definitions: the base (the library's name), then LINUX_2.6 (index 2).
    let verdef = |flags: u16, ndx: u16, hash: u32, next: u32, name: u32| {
        let mut d = [0u8; 28];
        d[0..2].copy_from_slice(&1u16.to_le_bytes());
        d[2..4].copy_from_slice(&flags.to_le_bytes());
        d[4..6].copy_from_slice(&ndx.to_le_bytes());
        d[6..8].copy_from_slice(&1u16.to_le_bytes());
        d[8..12].copy_from_slice(&hash.to_le_bytes());
        d[12..16].copy_from_slice(&20u32.to_le_bytes());
        d[16..20].copy_from_slice(&next.to_le_bytes());
        d[20..24].copy_from_slice(&name.to_le_bytes());
        d
    };
    put(VERDEF, &verdef(1, 1, 0, 28, NAME_BASE));
    put(VERDEF + 28, &verdef(0, 2, LINUX_2_6_HASH, 0, NAME_VERSION));
    put(STRTAB, STRINGS);
    let mut code = [0u8; CODE_LEN];
    cp::code(&mut code, page, tick);
    put(CODE, &code);
}

/// Gives the Go runtime the vDSO reading `page`, if its supervisor took the page; its reads
/// are counted in this image's census. False when it did not (the caller hides the vDSO).
///
/// # Safety
/// `entry` is the `AT_SYSINFO_EHDR` entry of the auxiliary vector on the initial stack;
/// `page` a live mapping of the page; only one thread runs.
pub unsafe fn give(entry: *mut u64, page: *mut AtomicU64) -> bool {
    // SAFETY: `page` maps 512 words.
    let word = |i: usize| unsafe { &*page.add(i) };
    if word(cp::TAKEN).load(Ordering::Acquire) != cp::TAKEN_MAGIC {
        return false;
    }
    let tick = word(cp::TICK).load(Ordering::Acquire).min(i32::MAX as u64) as u32;
    let img = sys::mmap_anon(4096);
    if img.is_null() {
        return false;
    }
    // SAFETY: a fresh private page of ours, zero-filled.
    write_image(unsafe { &mut *(img as *mut [u8; 4096]) }, page as u64, tick);
    let code = img as u64 + CODE as u64;
    // The census names the reads after the page (listed first: the counters' call site is then
    // in a known module, and no walk of the loaded objects looks for it).
    let img_end = img as u64 + 4096;
    crate::core::census::add_module(cp::MODULE_NAME.as_bytes(), img as u64, img_end);
    for id in 0..2 {
        // The census counter of this clock's page reads (counted from the code's address);
        // without one, the page's own word.
        let own = word(cp::READS + id) as *const AtomicU64 as u64;
        let counter = crate::core::census::counter(Fid::ClockGettime, id as u8, code + 1)
            .map_or(own, |c| c as *const AtomicU64 as u64);
        word(cp::COUNTER + id).store(counter, Ordering::Release);
    }
    // SAFETY: our own page, made read-only and executable.
    let r = unsafe {
        sys::syscall3(
            libc::SYS_mprotect,
            img as i64,
            4096,
            (libc::PROT_READ | libc::PROT_EXEC) as i64,
        )
    };
    if r != 0 {
        // SAFETY: our page, unused.
        unsafe { sys::munmap(img, 4096) };
        return false;
    }
    // SAFETY: per the contract.
    unsafe { *entry.add(1) = img as u64 };
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parts of the image where the Go runtime's parser (and the e2e cgo tests) found
    /// them when the offsets were written out by hand.
    #[test]
    fn the_image_layout_is_the_one_go_was_checked_against() {
        assert_eq!(
            [PHDRS, DYN, HASH, SYMTAB, VERSYM, VERDEF, STRTAB, CODE],
            [64, 176, 320, 344, 392, 400, 456, 512]
        );
    }
}
