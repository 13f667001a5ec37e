//! Names the function that contains an address in an ELF object (the nearest preceding
//! symbol from `.symtab`, else `.dynsym`), for census callers. Objects are read once per run.
//!
//! A stripped object keeps only its exported (`.dynsym`) symbols; when a separate debug file
//! is installed (`/usr/lib/debug/.build-id/xx/yyyy.debug`, as Debian's `-dbgsym` packages do)
//! its `.symtab` is used instead. An address outside every sized symbol has no name (`None`),
//! the same on every run.

use std::collections::HashMap;

use object::{Object, ObjectSymbol, SymbolKind};

/// A function symbol: file virtual address, size (0 = unknown), name.
struct FnSymbol {
    start: u64,
    size: u64,
    name: String,
}

#[derive(Default)]
pub struct SymbolCache {
    objects: HashMap<String, Option<Vec<FnSymbol>>>,
}

impl SymbolCache {
    /// The symbol containing `vaddr` (a file virtual address) in the object at `path`.
    pub fn lookup(&mut self, path: &str, vaddr: u64) -> Option<String> {
        let syms = self
            .objects
            .entry(path.to_string())
            .or_insert_with(|| load(path))
            .as_ref()?;
        let i = syms.partition_point(|s| s.start <= vaddr);
        let s = syms.get(i.checked_sub(1)?)?;
        // A sized symbol must contain the address; an unsized one is accepted as "nearest".
        if s.size != 0 && vaddr >= s.start + s.size {
            return None;
        }
        Some(s.name.clone())
    }
}

fn load(path: &str) -> Option<Vec<FnSymbol>> {
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let mut syms = text_symbols(&file);
    if file.symbols().next().is_none() {
        // Stripped: a separate debug file has the full table at the same addresses.
        if let Some(debug) = build_id_debug_file(&file) {
            if let Ok(ddata) = std::fs::read(&debug) {
                if let Ok(dfile) = object::File::parse(&*ddata) {
                    syms.extend(text_symbols(&dfile));
                }
            }
        }
    }
    syms.sort_by(|a, b| {
        (a.start, std::cmp::Reverse(a.size), &a.name).cmp(&(
            b.start,
            std::cmp::Reverse(b.size),
            &b.name,
        ))
    });
    syms.dedup_by(|a, b| a.start == b.start);
    Some(syms)
}

fn text_symbols(file: &object::File) -> Vec<FnSymbol> {
    file.symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
        .filter_map(|s| {
            Some(FnSymbol {
                start: s.address(),
                size: s.size(),
                name: s.name().ok()?.to_string(),
            })
        })
        .filter(|s| !s.name.is_empty())
        .collect()
}

/// `/usr/lib/debug/.build-id/ab/cdef….debug` for an object with a GNU build id, if present.
fn build_id_debug_file(file: &object::File) -> Option<std::path::PathBuf> {
    let id = file.build_id().ok()??;
    if id.len() < 2 {
        return None;
    }
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let p = std::path::PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &hex[..2],
        &hex[2..]
    ));
    p.is_file().then_some(p)
}
