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
    /// `DT_GNU_HASH` (0 when the object has none).
    gnu_hash: u64,
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
        const DT_GNU_HASH: i64 = 0x6fff_fef5;
        let (mut symtab, mut strtab, mut strsz, mut gnu_hash) = (0u64, 0u64, 0u64, 0u64);
        let mut d = dynamic as *const [i64; 2];
        // SAFETY: the dynamic section is an array of (tag, value) entries ended by DT_NULL.
        unsafe {
            while (*d)[0] != DT_NULL {
                match (*d)[0] {
                    DT_STRTAB => strtab = (*d)[1] as u64,
                    DT_SYMTAB => symtab = (*d)[1] as u64,
                    DT_STRSZ => strsz = (*d)[1] as u64,
                    DT_GNU_HASH => gnu_hash = (*d)[1] as u64,
                    _ => {}
                }
                d = d.add(1);
            }
        }
        // glibc relocates these in place; an unrelocated (read-only) section holds vaddrs.
        let fix = |p: u64| if p != 0 && p < bias { p + bias } else { p };
        let (symtab, strtab, gnu_hash) = (fix(symtab), fix(strtab), fix(gnu_hash));
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
            gnu_hash,
        })
    }

    /// Every symbol.
    pub fn all(&self) -> &[libc::Elf64_Sym] {
        self.syms
    }

    /// The defined symbol `name`, found through the object's GNU hash table as the loader
    /// finds it (a few probes, not a pass over every symbol); by a pass without such a table.
    pub fn lookup(&self, name: &[u8]) -> Option<&libc::Elf64_Sym> {
        if self.gnu_hash == 0 {
            return self
                .syms
                .iter()
                .find(|s| s.st_shndx != 0 && self.name_is(s, name));
        }
        let h = name
            .iter()
            .fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(c as u32));
        let t = self.gnu_hash as *const u32;
        // SAFETY: DT_GNU_HASH's layout (nbuckets, symoffset, bloom_size, bloom_shift, the
        // 64-bit bloom words, the buckets, then one chain word per symbol from symoffset on),
        // mapped with the object; indices are checked against the symbol count.
        unsafe {
            let (nbuckets, symoffset, bloom_size) = (t.read(), t.add(1).read(), t.add(2).read());
            if nbuckets == 0 {
                return None;
            }
            let buckets = t.add(4 + 2 * bloom_size as usize);
            let chain = buckets.add(nbuckets as usize);
            let mut i = buckets.add((h % nbuckets) as usize).read();
            if i < symoffset {
                return None;
            }
            while (i as usize) < self.syms.len() {
                let h2 = chain.add((i - symoffset) as usize).read();
                let s = &self.syms[i as usize];
                if h | 1 == h2 | 1 && s.st_shndx != 0 && self.name_is(s, name) {
                    return Some(s);
                }
                if h2 & 1 != 0 {
                    return None;
                }
                i += 1;
            }
        }
        None
    }

    /// Does a symbol's name start with `prefix`? Compares only the bytes it needs (never a
    /// `strlen` of the name: a pass over Node's 75 000 names must stay cheap).
    pub fn name_starts_with(&self, s: &libc::Elf64_Sym, prefix: &[u8]) -> bool {
        let off = s.st_name as u64;
        if off >= self.strsz || self.strsz - off < prefix.len() as u64 {
            return false;
        }
        let p = (self.strtab + off) as *const u8;
        // SAFETY: the string table is mapped over strsz bytes, and the loop stops at the
        // first difference (a name's NUL differs from every non-NUL prefix byte) before
        // reading past `off + prefix.len()`, which lies within it (checked above).
        prefix
            .iter()
            .enumerate()
            .all(|(i, &b)| unsafe { p.add(i).read() } == b)
    }

    /// Is a symbol's name exactly `name`?
    pub fn name_is(&self, s: &libc::Elf64_Sym, name: &[u8]) -> bool {
        let off = s.st_name as u64;
        // The terminating NUL must lie within the table too.
        self.strsz - off.min(self.strsz) > name.len() as u64
            && self.name_starts_with(s, name)
            // SAFETY: within strsz (checked above).
            && unsafe { ((self.strtab + off) as *const u8).add(name.len()).read() } == 0
    }
}

#[cfg(test)]
mod tests {
    use super::DynSyms;

    /// Looks `name` up in libc's table, through the hash table and by a full pass.
    fn in_libc(name: &[u8]) -> (Option<u64>, Option<u64>) {
        let mut out = (None, None, name);
        unsafe extern "C" fn cb(
            info: *mut libc::dl_phdr_info,
            _: libc::size_t,
            data: *mut libc::c_void,
        ) -> libc::c_int {
            // SAFETY: dl_iterate_phdr's arguments; data is `out` below.
            let (info, out) = unsafe {
                (
                    &*info,
                    &mut *(data as *mut (Option<u64>, Option<u64>, &[u8])),
                )
            };
            // SAFETY: a loaded object's name.
            let path = unsafe { crate::core::sys::cstr(info.dlpi_name) };
            if !path.ends_with(b"/libc.so.6") {
                return 0;
            }
            // SAFETY: a loaded object, mapped for the whole test.
            let t = unsafe { DynSyms::of(info) }.expect("libc has a dynamic symbol table");
            let name = out.2;
            out.0 = t.lookup(name).map(|s| t.bias + s.st_value);
            out.1 = t
                .all()
                .iter()
                .find(|s| s.st_shndx != 0 && t.name_is(s, name))
                .map(|s| t.bias + s.st_value);
            1
        }
        // SAFETY: the callback only reads the loader's records.
        unsafe { libc::dl_iterate_phdr(Some(cb), &mut out as *mut _ as *mut libc::c_void) };
        (out.0, out.1)
    }

    #[test]
    fn the_hash_table_finds_what_a_full_pass_finds() {
        for name in [&b"clock_gettime"[..], b"getrandom", b"malloc", b"qsort"] {
            let (hashed, scanned) = in_libc(name);
            assert!(hashed.is_some(), "{}", String::from_utf8_lossy(name));
            assert_eq!(hashed, scanned, "{}", String::from_utf8_lossy(name));
        }
        assert_eq!(in_libc(b"no_such_symbol_in_libc"), (None, None));
        // A prefix of a name is not the name.
        assert_eq!(in_libc(b"clock_get").0, None);
    }
}
