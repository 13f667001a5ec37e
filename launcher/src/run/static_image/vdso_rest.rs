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
///
/// Read by hand, not with `object`: its name look-ups call the `memchr` crate, whose first
/// call probes the CPU (`cpuid`, a trap to the hypervisor in a VM: ~70 µs of a fresh
/// supervisor's exec stop, on the image's start-up path). The vDSO is a small ELF64 image:
/// `.dynsym` (its section header of type `SHT_DYNSYM`) and the string table it links to.
pub fn symbols(elf: &[u8]) -> Option<Vec<Sym>> {
    const SHT_DYNSYM: u32 = 11;
    const STT_FUNC: u8 = 2;
    const STT_GNU_IFUNC: u8 = 10;
    // Every offset is checked: a field that points past the image is `None`, never a panic.
    let bytes = |at: usize, n: usize| elf.get(at..at.checked_add(n)?);
    let u16_at = |at: usize| Some(u16::from_le_bytes(bytes(at, 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(bytes(at, 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(bytes(at, 8)?.try_into().ok()?));
    // ELF64, little-endian.
    if elf.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let (shoff, shentsize, shnum) = (
        u64_at(0x28)? as usize,
        u16_at(0x3a)? as usize,
        u16_at(0x3c)?,
    );
    if shentsize < 64 {
        return None;
    }
    let section = |i: usize| {
        let at = shoff.checked_add(i.checked_mul(shentsize)?)?;
        // (type, offset, size, link, entry size)
        let field = |k: usize| at.checked_add(k);
        Some((
            u32_at(field(4)?)?,
            u64_at(field(24)?)? as usize,
            u64_at(field(32)?)? as usize,
            u32_at(field(40)?)? as usize,
            u64_at(field(56)?)? as usize,
        ))
    };
    let (_, off, size, link, entsize) = (0..shnum as usize)
        .filter_map(section)
        .find(|s| s.0 == SHT_DYNSYM)?;
    let (_, str_off, str_size, _, _) = section(link)?;
    let strings = bytes(str_off, str_size)?;
    if entsize < 24 {
        return None;
    }
    // Entry 0 is the null symbol.
    (1..size / entsize)
        .map(|i| {
            let at = off.checked_add(i.checked_mul(entsize)?)?;
            let sym = bytes(at, 24)?;
            let name_at = u32_at(at)? as usize;
            let info = sym[4];
            let shndx = u16_at(at + 6)?;
            let name = strings.get(name_at..)?;
            let end = name.iter().position(|&b| b == 0)?;
            Some(Sym {
                name: std::str::from_utf8(&name[..end]).ok()?.to_owned(),
                at: u64_at(at + 8)?,
                size: u64_at(at + 16)?,
                func: matches!(info & 0xf, STT_FUNC | STT_GNU_IFUNC) && shndx != 0,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's own vDSO, as the kernel maps it.
    fn own_vdso() -> Vec<u8> {
        // SAFETY: getauxval reads the auxiliary vector.
        let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) } as usize;
        assert_ne!(base, 0, "no vDSO");
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps.lines().find(|l| l.ends_with("[vdso]")).unwrap();
        let (a, b) = line
            .split_whitespace()
            .next()
            .unwrap()
            .split_once('-')
            .unwrap();
        let len = usize::from_str_radix(b, 16).unwrap() - usize::from_str_radix(a, 16).unwrap();
        // SAFETY: the mapping is readable and `len` long.
        unsafe { std::slice::from_raw_parts(base as *const u8, len) }.to_vec()
    }

    #[test]
    fn the_vdsos_symbols_are_what_object_reads() {
        use object::{Object, ObjectSymbol, SymbolKind};
        let elf = own_vdso();
        let ours = symbols(&elf).unwrap();
        let file = object::File::parse(&*elf).unwrap();
        let theirs: Vec<_> = file
            .dynamic_symbols()
            .map(|s| {
                let func = s.kind() == SymbolKind::Text && !s.is_undefined();
                (s.name().unwrap().to_owned(), s.address(), s.size(), func)
            })
            .collect();
        let ours: Vec<_> = ours
            .into_iter()
            .map(|s| (s.name, s.at, s.size, s.func))
            .collect();
        assert_eq!(ours, theirs);
        assert!(
            ours.iter().any(|s| s.0 == "__vdso_clock_gettime" && s.3),
            "{ours:?}"
        );
    }

    #[test]
    fn a_cut_or_foreign_image_is_none() {
        let elf = own_vdso();
        assert!(symbols(&elf[..100]).is_none());
        assert!(symbols(b"not an ELF image at all").is_none());
        let mut big = elf.clone();
        big[5] = 2; // big-endian
        assert!(symbols(&big).is_none());
        // Section headers said to lie at the very end of the address space.
        let mut far = elf.clone();
        far[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(symbols(&far).is_none());
    }
}
