//! Names the function that contains an address in an ELF object (the nearest preceding
//! symbol from `.symtab`, else `.dynsym`), for census callers. Objects are read once per run.

use std::collections::HashMap;

use object::{Object, ObjectSymbol, SymbolKind};

#[derive(Default)]
pub struct SymbolCache {
    objects: HashMap<String, Option<Vec<(u64, u64, String)>>>,
}

impl SymbolCache {
    /// The symbol containing `vaddr` (a file virtual address) in the object at `path`.
    pub fn lookup(&mut self, path: &str, vaddr: u64) -> Option<String> {
        let syms = self
            .objects
            .entry(path.to_string())
            .or_insert_with(|| load(path))
            .as_ref()?;
        let i = syms.partition_point(|s| s.0 <= vaddr);
        let (start, size, name) = syms.get(i.checked_sub(1)?)?;
        // A sized symbol must contain the address; an unsized one is accepted as "nearest".
        if *size != 0 && vaddr >= start + size {
            return None;
        }
        Some(name.clone())
    }
}

fn load(path: &str) -> Option<Vec<(u64, u64, String)>> {
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let mut syms: Vec<(u64, u64, String)> = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
        .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_string())))
        .filter(|s| !s.2.is_empty())
        .collect();
    syms.sort();
    syms.dedup_by(|a, b| a.0 == b.0);
    Some(syms)
}
