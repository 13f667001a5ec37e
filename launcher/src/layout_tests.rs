//! The layout rules (docs/contributing.md), checked on the sources: no launcher module imports
//! one that imports it back, no import cycle of the shim spans more than 8 files (its `core/`
//! imports no family, and families register in `lib.rs` instead of being called), and no `.rs`
//! file of the workspace is over 700 lines.
//!
//! An import is a `crate::` or `super::` path (use trees expanded), or a module's own child
//! (`mod x;`) used by a bare `x::` path; `super::` inside an inline `mod tests { .. }` is the
//! file's own module, not an import. Each resolves to the file of its longest module prefix.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

/// Module path (`["run", "supervise"]`) → file, relative to `src/`.
fn modules(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(src).unwrap().with_extension("");
                let mut parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if matches!(parts.last().map(String::as_str), Some("mod" | "main")) {
                    parts.pop();
                }
                out.insert(parts, p.strip_prefix(src).unwrap().to_path_buf());
            }
        }
    }
    out
}

/// The paths of a use tree's text (`a::{b, c::{d}}` → `a::b`, `a::c::d`).
fn expand(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let (mut depth, mut item, mut items) = (0, String::new(), Vec::new());
    for ch in tree.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if ch == ',' && depth == 0 {
            items.push(std::mem::take(&mut item));
        } else {
            item.push(ch);
        }
    }
    items.push(item);
    for it in items.iter().filter(|i| !i.is_empty()) {
        let segs = |s: &str| -> Vec<String> {
            s.split("::")
                .filter(|x| !x.is_empty() && *x != "self")
                .map(String::from)
                .collect()
        };
        let mut path = prefix.to_vec();
        match (it.find('{'), it.rfind('}')) {
            (Some(open), Some(close)) => {
                path.extend(segs(&it[..open]));
                expand(&it[open + 1..close], &path, out);
            }
            _ => {
                path.extend(segs(it));
                out.push(path);
            }
        }
    }
}

/// The byte ranges of inline `mod name { .. }` blocks.
fn inline_mods(text: &str) -> Vec<(usize, usize)> {
    let re = Regex::new(r"\bmod\s+\w+\s*\{").unwrap();
    re.find_iter(text)
        .map(|m| {
            let mut depth = 0;
            let mut end = text.len();
            for (i, b) in text.bytes().enumerate().skip(m.end() - 1) {
                match b {
                    b'{' => depth += 1,
                    b'}' => depth -= 1,
                    _ => continue,
                }
                if depth == 0 {
                    end = i;
                    break;
                }
            }
            (m.start(), end)
        })
        .collect()
}

/// File → the files it imports.
fn imports(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mods = modules(src);
    let resolve = |path: &[String]| {
        (1..=path.len())
            .rev()
            .find_map(|n| mods.get(&path[..n]))
            .cloned()
    };
    let comment = Regex::new(r"//[^\n]*").unwrap();
    let path_re = |head: &str| {
        Regex::new(&format!(
            r"(?s)(?:^|[^\w:]){head}::(\{{[^;]*?\}}|\w[\w:]*(?:\{{[^;]*?\}})?)"
        ))
        .unwrap()
    };
    let (crate_re, super_re) = (path_re("crate"), path_re("super"));
    let child_re = Regex::new(r"(?m)^\s*(?:pub(?:\(\w+\))?\s+)?mod\s+(\w+)\s*;").unwrap();
    let mut graph = BTreeMap::new();
    for (key, file) in &mods {
        let text = std::fs::read_to_string(src.join(file)).unwrap();
        let text = comment.replace_all(&text, "");
        let inline = inline_mods(&text);
        let mut paths: Vec<Vec<String>> = Vec::new();
        let mut add = |re: &Regex, base: &[String], skip_inline: bool| {
            for c in re.captures_iter(&text) {
                let m = c.get(1).unwrap();
                if skip_inline && inline.iter().any(|&(a, b)| (a..=b).contains(&m.start())) {
                    continue;
                }
                let t = m.as_str();
                expand(t, base, &mut paths);
            }
        };
        add(&crate_re, &[], false);
        add(&super_re, &key[..key.len().saturating_sub(1)], true);
        for c in child_re.captures_iter(&text) {
            let mut child = key.clone();
            child.push(c[1].to_string());
            if mods.contains_key(&child) {
                add(&path_re(&c[1]), &child, false);
            }
        }
        let deps: BTreeSet<PathBuf> = paths
            .iter()
            .filter_map(|p| resolve(p))
            .filter(|f| f != file)
            .collect();
        graph.insert(file.clone(), deps);
    }
    graph
}

/// One cycle of the graph, if it has any (a path that ends where it started).
fn a_cycle(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Option<Vec<PathBuf>> {
    fn visit(
        f: &PathBuf,
        graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        stack: &mut Vec<PathBuf>,
        done: &mut BTreeSet<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        if let Some(i) = stack.iter().position(|s| s == f) {
            let mut cycle = stack[i..].to_vec();
            cycle.push(f.clone());
            return Some(cycle);
        }
        if !done.insert(f.clone()) {
            return None;
        }
        stack.push(f.clone());
        for d in graph.get(f).into_iter().flatten() {
            if let Some(c) = visit(d, graph, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|f| visit(f, graph, &mut Vec::new(), &mut done))
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The workspace root (the launcher's parent directory).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The strongly connected components of `graph` (Tarjan), largest first.
fn components(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct T<'g> {
        graph: &'g BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'g PathBuf, (usize, usize)>,
        stack: Vec<&'g PathBuf>,
        on: BTreeSet<&'g PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit<'g>(t: &mut T<'g>, v: &'g PathBuf) {
        let n = t.index.len();
        t.index.insert(v, (n, n));
        t.stack.push(v);
        t.on.insert(v);
        for w in t.graph.get(v).into_iter().flatten() {
            let Some((w, _)) = t.graph.get_key_value(w) else {
                continue;
            };
            if !t.index.contains_key(w) {
                visit(t, w);
                let low = t.index[w].1.min(t.index[v].1);
                t.index.get_mut(v).unwrap().1 = low;
            } else if t.on.contains(w) {
                let low = t.index[w].0.min(t.index[v].1);
                t.index.get_mut(v).unwrap().1 = low;
            }
        }
        if t.index[v].0 == t.index[v].1 {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            t.out.push(comp);
        }
    }
    let mut t = T {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out.sort_by_key(|c| std::cmp::Reverse(c.len()));
    t.out
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let graph = imports(&src());
    // The checker sees the imports it is meant to see.
    let run = &graph[Path::new("run/mod.rs")];
    assert!(run.contains(Path::new("run/supervise.rs")), "{run:?}");
    assert!(run.contains(Path::new("census/mod.rs")), "{run:?}");
    if let Some(cycle) = a_cycle(&graph) {
        let names: Vec<String> = cycle.iter().map(|p| p.display().to_string()).collect();
        panic!("import cycle: {}", names.join(" -> "));
    }
}

#[test]
fn a_cycle_is_found() {
    let g: BTreeMap<PathBuf, BTreeSet<PathBuf>> = [
        ("a.rs", vec!["b.rs"]),
        ("b.rs", vec!["c.rs"]),
        ("c.rs", vec!["a.rs"]),
    ]
    .into_iter()
    .map(|(f, ds)| (f.into(), ds.into_iter().map(PathBuf::from).collect()))
    .collect();
    assert_eq!(a_cycle(&g).map(|c| c.len()), Some(4));
    let mut paths = Vec::new();
    expand("a::{b, c::{d, self}}", &[], &mut paths);
    assert_eq!(paths, [vec!["a", "b"], vec!["a", "c", "d"], vec!["a", "c"]]);
}

#[test]
fn the_shims_largest_import_cycle_spans_at_most_8_files() {
    let shim = root().join("shim/src");
    let graph = imports(&shim);
    // The checker sees the shim's imports: the clock hooks use the census, core's thread
    // state uses its configuration.
    assert!(graph[Path::new("clock/hooks.rs")].contains(Path::new("core/census/mod.rs")));
    let largest = components(&graph).into_iter().next().unwrap_or_default();
    assert!(
        largest.len() <= 8,
        "an import cycle of {} files: {largest:?}",
        largest.len()
    );
    // The base imports no family.
    for (file, deps) in &graph {
        if file.starts_with("core") {
            for d in deps {
                assert!(
                    d.starts_with("core"),
                    "{} imports {}",
                    file.display(),
                    d.display()
                );
            }
        }
    }
}

#[test]
fn components_are_found() {
    let g: BTreeMap<PathBuf, BTreeSet<PathBuf>> = [
        ("a.rs", vec!["b.rs"]),
        ("b.rs", vec!["a.rs", "c.rs"]),
        ("c.rs", vec!["d.rs"]),
        ("d.rs", vec!["c.rs"]),
        ("e.rs", vec![]),
    ]
    .into_iter()
    .map(|(f, ds)| (f.into(), ds.into_iter().map(PathBuf::from).collect()))
    .collect();
    let sizes: Vec<usize> = components(&g).iter().map(Vec::len).collect();
    assert_eq!(sizes, [2, 2, 1]);
}

#[test]
fn no_file_is_over_700_lines() {
    let mut dirs: Vec<PathBuf> = ["abi", "shim", "launcher", "bench", "tests"]
        .iter()
        .map(|d| root().join(d))
        .collect();
    let mut seen = 0;
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "target") {
                    dirs.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                seen += 1;
                let n = std::fs::read_to_string(&p).unwrap().lines().count();
                assert!(
                    n <= 700,
                    "{} has {n} lines: split it by concern",
                    p.display()
                );
            }
        }
    }
    assert!(seen > 100, "only {seen} .rs files found");
}
