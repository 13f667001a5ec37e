//! The dynamic symbol table of a loaded object, read in place from its image (the
//! `dl_phdr_info` that `dl_iterate_phdr` hands the census's module walk): no file read, no
//! allocation. Used to find CPython's `_PyRuntime` (`crate::py`) and the spans of Node's libuv
//! and V8 clock helpers (`crate::runtime`).

/// `.dynsym` and `.dynstr` of one loaded object.
pub struct DynSyms {
    /// Load bias: a symbol's address is `bias + st_value`.
    pub bias: u64,
    syms: &'static [libc::Elf64_Sym],
    strtab: u64,
    strsz: u64,
}

impl DynSyms {
    /// The object's tables, if its dynamic section names them.
    ///
    /// # Safety
    /// `info` describes a loaded object whose dynamic section and symbol table are mapped (and
    /// stay mapped while the result is used).
    pub unsafe fn of(info: &libc::dl_phdr_info) -> Option<DynSyms> {
        let bias = info.dlpi_addr;
        let mut dynamic = 0u64;
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: dlpi_phdr has dlpi_phnum entries.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type == libc::PT_DYNAMIC {
                dynamic = bias.wrapping_add(ph.p_vaddr);
            }
        }
        if dynamic == 0 {
            return None;
        }
        // `Elf64_Dyn` entries and the tags used here (<elf.h>).
        const DT_NULL: i64 = 0;
        const DT_STRTAB: i64 = 5;
        const DT_SYMTAB: i64 = 6;
        const DT_STRSZ: i64 = 10;
        let (mut symtab, mut strtab, mut strsz) = (0u64, 0u64, 0u64);
        let mut d = dynamic as *const [i64; 2];
        // SAFETY: the dynamic section is an array of (tag, value) entries ended by DT_NULL.
        unsafe {
            while (*d)[0] != DT_NULL {
                match (*d)[0] {
                    DT_STRTAB => strtab = (*d)[1] as u64,
                    DT_SYMTAB => symtab = (*d)[1] as u64,
                    DT_STRSZ => strsz = (*d)[1] as u64,
                    _ => {}
                }
                d = d.add(1);
            }
        }
        // glibc relocates these in place; an unrelocated (read-only) section holds vaddrs.
        let fix = |p: u64| if p != 0 && p < bias { p + bias } else { p };
        let (symtab, strtab) = (fix(symtab), fix(strtab));
        // .dynsym sits right before .dynstr: the span between them is the symbol count.
        if symtab == 0 || strtab <= symtab || strsz == 0 {
            return None;
        }
        let n = ((strtab - symtab) as usize / core::mem::size_of::<libc::Elf64_Sym>()).min(1 << 20);
        // SAFETY: n symbols lie between symtab and strtab, mapped per the contract.
        let syms = unsafe { core::slice::from_raw_parts(symtab as *const libc::Elf64_Sym, n) };
        Some(DynSyms {
            bias,
            syms,
            strtab,
            strsz,
        })
    }

    /// Every symbol.
    pub fn all(&self) -> &[libc::Elf64_Sym] {
        self.syms
    }

    /// A symbol's name (empty when its offset lies outside the string table).
    pub fn name(&self, s: &libc::Elf64_Sym) -> &[u8] {
        if s.st_name as u64 >= self.strsz {
            return b"";
        }
        // SAFETY: st_name is an offset into the string table, NUL-terminated within strsz.
        unsafe { crate::sys::cstr((self.strtab + s.st_name as u64) as *const libc::c_char) }
    }
}
