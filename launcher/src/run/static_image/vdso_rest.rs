//! The rest of a kept vDSO. A static Go image keeps its vDSO (its `__vdso_clock_gettime`
//! reads the image's clock page, `vdso_clock.rs`), but the kernel exports more entry points
//! that would give real values unseen: `__vdso_gettimeofday`, `__vdso_time`, `__vdso_getcpu`,
//! `__vdso_clock_getres` and, since Linux 6.11, `__vdso_getrandom` (used by Go ≥ 1.24's
//! runtime and `crypto/rand`, and by glibc ≥ 2.41). At the same exec stop each is overwritten:
//! - `__vdso_getrandom` returns `-ENOSYS`. Its callers first probe it (`NULL, 0, 0, params,
//!   ~0`, Go's `vgetrandomInit`, glibc's `__getrandom_vdso_init`); a non-zero answer leaves
//!   their state size 0, and every later draw is the `getrandom` system call, which the filter
//!   sends to the supervisor.
//! - the others make their system call (the filter sends the time ones to the supervisor;
//!   `getcpu` and `clock_getres` go to the kernel, as they would without a vDSO).
//!
//! The clock page's set-up writes these with its own code, in one write (`vdso_clock.rs`).
//! An exported function this module does not know, or an entry too small for its code, makes
//! the whole step fail: the caller then removes the vDSO from the auxiliary vector, as it
//! does for any image whose clock page could not be set up.

/// What replaces each known entry (other than `__vdso_clock_gettime`).
fn code_for(name: &str) -> Option<Vec<u8>> {
    let syscall = |nr: u32| {
        let mut c = vec![0xb8]; // mov eax, nr
        c.extend(nr.to_le_bytes());
        c.extend([0x0f, 0x05, 0xc3]); // syscall; ret
        c
    };
    Some(match name {
        // mov rax, -ENOSYS; ret
        "__vdso_getrandom" | "getrandom" => vec![0x48, 0xc7, 0xc0, 0xda, 0xff, 0xff, 0xff, 0xc3],
        "__vdso_gettimeofday" | "gettimeofday" => syscall(libc::SYS_gettimeofday as u32),
        "__vdso_time" | "time" => syscall(libc::SYS_time as u32),
        "__vdso_getcpu" | "getcpu" => syscall(libc::SYS_getcpu as u32),
        "__vdso_clock_getres" | "clock_getres" => syscall(libc::SYS_clock_getres as u32),
        _ => return None,
    })
}

/// An exported symbol of a vDSO image.
pub struct Sym {
    pub name: String,
    /// Its address in the image (from the image's start) and size.
    pub at: u64,
    pub size: u64,
    /// A function defined in the image.
    pub func: bool,
}

/// The exported symbols of the vDSO image `elf` (parsed once for every look-up of the exec
/// stop); `None` when it is not an ELF image or a name is not text.
pub fn symbols(elf: &[u8]) -> Option<Vec<Sym>> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let file = object::File::parse(elf).ok()?;
    file.dynamic_symbols()
        .map(|s| {
            Some(Sym {
                name: s.name().ok()?.to_owned(),
                at: s.address(),
                size: s.size(),
                func: s.kind() == SymbolKind::Text && !s.is_undefined(),
            })
        })
        .collect()
}

/// What overwrites every exported function of a vDSO image (its `symbols`, loaded at `base`)
/// other than the clock entry: (address, code) pairs; `None` when one is unknown or too small.
pub fn edits(symbols: &[Sym], base: u64) -> Option<Vec<(u64, Vec<u8>)>> {
    let mut done: Vec<(u64, Vec<u8>)> = Vec::new();
    for s in symbols.iter().filter(|s| s.func) {
        let at = base + s.at;
        let clock = matches!(s.name.as_str(), "__vdso_clock_gettime" | "clock_gettime");
        if clock || done.iter().any(|d| d.0 == at) {
            continue;
        }
        let code = code_for(&s.name)?;
        if s.size < code.len() as u64 {
            return None;
        }
        done.push((at, code));
    }
    Some(done)
}
