//! `seal census --patch-targets FILE`: one row per user call site of a Python run, with the
//! dotted path `unittest.mock.patch` needs to pin what that line reads, classified from the
//! source line that ran and the imports of its module (docs/census.md, "Patch targets").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::census::{Census, Frame, Process, PyCall};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Row {
    pub file: String,
    pub line: u32,
    pub function: String,
    /// `time.time`, `datetime.datetime.now`, … or, for `native` rows, the C function.
    pub symbol: String,
    /// `module_attr`, `local_copy` or `native`.
    pub kind: String,
    pub patch_target: Option<String>,
    pub count: u64,
}

/// Functions whose reads seal counts, by their canonical dotted name (a trailing `.` means
/// every attribute of that module).
const KNOWN: &[&str] = &[
    "time.",
    "datetime.datetime.now",
    "datetime.datetime.utcnow",
    "datetime.datetime.today",
    "datetime.date.today",
    "random.",
    "uuid.uuid1",
    "uuid.uuid4",
    "os.urandom",
    "os.getrandom",
    "os.getpid",
    "os.getppid",
    "secrets.",
    "socket.gethostname",
    "platform.node",
    "tempfile.",
];

/// Methods of C types cannot be patched on the type: patch the type itself.
const C_TYPES: &[&str] = &["datetime.datetime", "datetime.date"];

/// Is `object` (a path) the Python interpreter (the executable or libpython)?
pub fn is_interpreter(object: &str) -> bool {
    let base = object.rsplit('/').next().unwrap_or(object);
    base.starts_with("libpython") || base.starts_with("python")
}

/// Is this call the interpreter's own bookkeeping? Its innermost frame is the import
/// machinery or start-up; or the interpreter made it with no user frame at all; or it was
/// made on a user's `import` line by the interpreter itself (the import lock).
pub fn is_bookkeeping(pc: &PyCall, sources: &mut Sources) -> bool {
    if pc.import {
        return true;
    }
    if !is_interpreter(&pc.object) {
        return false;
    }
    match &pc.user {
        None => true,
        Some(u) => pc.innermost.is_none() && sources.line(u).is_some_and(|t| is_import_line(&t)),
    }
}

/// The rows of a census, merged over processes.
pub fn rows(census: &Census) -> Vec<Row> {
    let mut sources = Sources::default();
    let mut merged: BTreeMap<Row, u64> = BTreeMap::new();
    for p in census.processes.iter().filter(|p| p.python.is_some()) {
        for call in &p.calls {
            let mut framed: BTreeMap<(&str, Option<&str>), u64> = BTreeMap::new();
            for pc in &call.python {
                *framed
                    .entry((pc.object.as_str(), pc.symbol.as_deref()))
                    .or_default() += pc.count;
                let Some(user) = &pc.user else {
                    continue;
                };
                if is_bookkeeping(pc, &mut sources) {
                    continue;
                }
                let row = sources.classify(p, user, &call.symbol);
                *merged.entry(row).or_default() += pc.count;
            }
            // C code with no Python frame at all (a C extension's own thread, a library).
            // Shared objects only: an executable's calls are a program of its own (a shell
            // that exec'd python has the same virtual pid).
            let shared = |o: &str| o.rsplit('/').next().unwrap_or(o).contains(".so");
            for c in call.callers.iter() {
                if is_interpreter(&c.object) || !shared(&c.object) {
                    continue;
                }
                let n = c.count - framed.get(&(&c.object, c.symbol.as_deref())).unwrap_or(&0);
                if n > 0 {
                    let row = Row {
                        file: c.object.clone(),
                        line: 0,
                        function: c.symbol.clone().unwrap_or_default(),
                        symbol: call.symbol.clone(),
                        kind: "native".into(),
                        patch_target: None,
                        count: 0,
                    };
                    *merged.entry(row).or_default() += n;
                }
            }
        }
    }
    merged
        .into_iter()
        .map(|(r, count)| Row { count, ..r })
        .collect()
}

/// Source files read so far.
#[derive(Default)]
pub struct Sources {
    files: BTreeMap<String, Option<Vec<String>>>,
}

impl Sources {
    fn lines(&mut self, file: &str) -> Option<&Vec<String>> {
        self.files
            .entry(file.to_string())
            .or_insert_with(|| {
                let text = std::fs::read_to_string(file).ok()?;
                Some(text.lines().map(str::to_string).collect())
            })
            .as_ref()
    }

    /// The source text of a line (trimmed), if the file can be read.
    pub fn line(&mut self, f: &Frame) -> Option<String> {
        let lines = self.lines(&f.file)?;
        Some(
            lines
                .get((f.line as usize).checked_sub(1)?)?
                .trim()
                .to_string(),
        )
    }

    /// Classifies the call on `f`'s line; `native` names the sealed C function it reached.
    pub fn classify(&mut self, p: &Process, f: &Frame, native: &str) -> Row {
        let mut row = Row {
            file: f.file.clone(),
            line: f.line,
            function: f.function.clone(),
            symbol: native.to_string(),
            kind: "native".into(),
            patch_target: None,
            count: 0,
        };
        let Some(text) = self.line(f) else {
            return row;
        };
        let imports = imports(self.lines(&f.file).map(Vec::as_slice).unwrap_or(&[]));
        // A line may call several known functions (`t, u = time.time(), uuid.uuid4()`): the
        // ones whose family is the read's come first.
        let mut chains = call_chains(&text);
        let want = native_family(native);
        chains.sort_by_key(|c| {
            let head = c.split('.').next().unwrap_or(c);
            let full = match (imports.get(head), c.split_once('.')) {
                (Some((t, _)), Some((_, rest))) => format!("{t}.{rest}"),
                (Some((t, _)), None) => t.clone(),
                (None, _) => c.clone(),
            };
            symbol_family(&full) != want
        });
        for chain in chains {
            let (head, rest) = chain.split_once('.').unwrap_or((&chain, ""));
            let Some((target, is_module)) = imports.get(head) else {
                continue;
            };
            let full = if rest.is_empty() {
                target.clone()
            } else {
                format!("{target}.{rest}")
            };
            if !KNOWN
                .iter()
                .any(|k| full == *k || (k.ends_with('.') && full.starts_with(k)))
            {
                continue;
            }
            let module = module_name(p, &f.file);
            let (kind, local) = if *is_module && !rest.is_empty() {
                // `import time; time.time()`: patch the attribute, through this module's name.
                let mut local = chain.clone();
                if C_TYPES.iter().any(|t| full.starts_with(&format!("{t}."))) {
                    let keep = chain.split('.').count() - (full.split('.').count() - 2);
                    local = chain.split('.').take(keep).collect::<Vec<_>>().join(".");
                }
                ("module_attr", local)
            } else {
                // `from time import time; time()`: the module holds its own copy of the name.
                ("local_copy", head.to_string())
            };
            row.symbol = full;
            row.kind = kind.into();
            row.patch_target = Some(format!("{module}.{local}"));
            return row;
        }
        row
    }
}

/// The family of a sealed C call as the census names it (`clock_gettime CLOCK_REALTIME`,
/// `getrandom`, `getpid`, …).
fn native_family(native: &str) -> &'static str {
    let n = native.to_ascii_lowercase();
    if n.contains("random") || n.contains("entropy") || n.contains("arc4") {
        "random"
    } else if n.contains("pid") {
        "pid"
    } else if n.contains("host") || n.contains("uname") {
        "host"
    } else if n.contains("time") || n.contains("clock") {
        "time"
    } else {
        ""
    }
}

/// The family of what a known Python function reads.
fn symbol_family(full: &str) -> &'static str {
    match full.split('.').next().unwrap_or("") {
        "time" | "datetime" => "time",
        "random" | "uuid" | "secrets" | "tempfile" => "random",
        "socket" | "platform" => "host",
        "os" if full.contains("pid") => "pid",
        "os" => "random",
        _ => "",
    }
}

/// Is the line an import statement (whose reads are the import machinery's)?
pub fn is_import_line(text: &str) -> bool {
    text.starts_with("import ") || (text.starts_with("from ") && text.contains(" import "))
}

/// Local name → (what it names, whether `import` bound a module to it).
fn imports(lines: &[String]) -> BTreeMap<String, (String, bool)> {
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let mut l = lines[i].trim().to_string();
        if l.starts_with("from ") && l.contains('(') && !l.contains(')') {
            while i + 1 < lines.len() && !l.contains(')') {
                i += 1;
                l.push(' ');
                l.push_str(lines[i].trim());
            }
        }
        i += 1;
        let l = l.split('#').next().unwrap_or("").replace(['(', ')'], " ");
        if let Some(names) = l.strip_prefix("import ") {
            for n in names.split(',') {
                let w: Vec<&str> = n.split_whitespace().collect();
                match w.as_slice() {
                    [m, "as", a] => out.insert(a.to_string(), (m.to_string(), true)),
                    [m] => {
                        let head = m.split('.').next().unwrap_or(m);
                        out.insert(head.to_string(), (head.to_string(), true))
                    }
                    _ => None,
                };
            }
        } else if let Some(rest) = l.strip_prefix("from ") {
            let Some((m, names)) = rest.split_once(" import ") else {
                continue;
            };
            let m = m.trim();
            for n in names.split(',') {
                let w: Vec<&str> = n.split_whitespace().collect();
                let (name, alias) = match w.as_slice() {
                    [x, "as", a] => (*x, *a),
                    [x] => (*x, *x),
                    _ => continue,
                };
                out.insert(alias.to_string(), (format!("{m}.{name}"), false));
            }
        }
    }
    out
}

/// Dotted names called on a line (`a.b.c(`), left to right.
fn call_chains(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'.';
    let mut i = 0;
    while i < b.len() {
        if word(b[i]) && (i == 0 || !word(b[i - 1])) && !b[i].is_ascii_digit() && b[i] != b'.' {
            let start = i;
            while i < b.len() && word(b[i]) {
                i += 1;
            }
            let mut j = i;
            while j < b.len() && b[j] == b' ' {
                j += 1;
            }
            if j < b.len() && b[j] == b'(' && (start == 0 || b[start - 1] != b'.') {
                out.push(text[start..i].trim_matches('.').to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The dotted module name of a source file in process `p`: `__main__` for its script, else
/// the file's name under its outermost package (directories with an `__init__.py`).
fn module_name(p: &Process, file: &str) -> String {
    let path = Path::new(file);
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let mut parts = vec![];
    if stem != "__init__" {
        parts.push(stem.to_string());
    }
    let mut dir: Option<PathBuf> = path.parent().map(Path::to_path_buf);
    while let Some(d) = dir {
        if !d.join("__init__.py").is_file() {
            break;
        }
        if let Some(n) = d.file_name().and_then(|n| n.to_str()) {
            parts.push(n.to_string());
        }
        dir = d.parent().map(Path::to_path_buf);
    }
    parts.reverse();
    let dotted = parts.join(".");
    let args = &p.argv;
    let script = args.iter().skip(1).find(|a| !a.starts_with('-'));
    let run_module = args
        .windows(2)
        .find(|w| w[0] == "-m")
        .map(|w| w[1].as_str());
    let is_script = script.is_some_and(|s| {
        let s = Path::new(s);
        s.canonicalize().ok() == path.canonicalize().ok() && run_module.is_none()
    });
    if is_script || run_module == Some(dotted.as_str()) {
        "__main__".into()
    } else {
        dotted
    }
}

pub fn write(path: &Path, rows: &[Row]) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut s = serde_json::to_string_pretty(rows)?;
    s.push('\n');
    crate::files::outfile::write(path, s)
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_and_imports() {
        assert_eq!(
            call_chains("x = datetime.now() + f(time.time ())"),
            ["datetime.now", "f", "time.time"]
        );
        assert_eq!(call_chains("a.b().c()"), ["a.b"]);
        let lines: Vec<String> = [
            "import time, os.path as p",
            "from datetime import (datetime,",
            "   date as d)",
            "from time import time as now  # x",
        ]
        .map(String::from)
        .to_vec();
        let m = imports(&lines);
        assert_eq!(m["time"], ("time".into(), true));
        assert_eq!(m["p"], ("os.path".into(), true));
        assert_eq!(m["datetime"], ("datetime.datetime".into(), false));
        assert_eq!(m["d"], ("datetime.date".into(), false));
        assert_eq!(m["now"], ("time.time".into(), false));
        assert!(is_import_line("from a import b") && !is_import_line("fromage = 1"));
    }

    #[test]
    fn a_line_with_several_calls_names_the_one_of_the_reads_family() {
        assert_eq!(native_family("clock_gettime CLOCK_REALTIME"), "time");
        assert_eq!(native_family("getrandom"), "random");
        assert_eq!(native_family("read /dev/urandom"), "random");
        assert_eq!(native_family("getpid"), "pid");
        assert_eq!(symbol_family("uuid.uuid4"), "random");
        assert_eq!(symbol_family("datetime.datetime.now"), "time");
        assert_eq!(symbol_family("os.getpid"), "pid");
        assert_eq!(symbol_family("os.urandom"), "random");
    }
}
