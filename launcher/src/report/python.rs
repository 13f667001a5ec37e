//! The Python part of the census table: one row per user call site (`file:line function →
//! time.time`, `via` the library frame that made the call), and `--hide-bookkeeping`, which
//! drops the interpreter's own reads (start-up, imports) from the whole table.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::patch_targets::{is_bookkeeping, is_interpreter, Sources};
use crate::census::{Census, Frame, Process, Total};

/// Width of the CALLS column (as in the function rows).
const CALLS_W: usize = 10;
const INDENT: usize = 14;

/// Removes the interpreter's bookkeeping from a census: calls counted above, and calls the
/// interpreter made with no Python frame at all.
pub fn strip_bookkeeping(c: &mut Census) {
    let mut sources = Sources::default();
    for p in c.processes.iter_mut().filter(|p| p.python.is_some()) {
        for call in &mut p.calls {
            let mut framed: BTreeMap<(String, Option<String>), u64> = BTreeMap::new();
            let mut drop: BTreeMap<(String, Option<String>), u64> = BTreeMap::new();
            call.python.retain(|pc| {
                let who = (pc.object.clone(), pc.symbol.clone());
                *framed.entry(who.clone()).or_default() += pc.count;
                let book = is_bookkeeping(pc, &mut sources);
                if book {
                    *drop.entry(who).or_default() += pc.count;
                }
                !book
            });
            for caller in &mut call.callers {
                let who = (caller.object.clone(), caller.symbol.clone());
                let mut n = drop.get(&who).copied().unwrap_or(0);
                if is_interpreter(&caller.object) {
                    n += caller
                        .count
                        .saturating_sub(framed.get(&who).copied().unwrap_or(0));
                }
                caller.count = caller.count.saturating_sub(n);
            }
            call.callers.retain(|c| c.count > 0);
            call.count = call.callers.iter().map(|c| c.count).sum();
        }
        p.calls.retain(|c| c.count > 0);
    }
    let mut totals: BTreeMap<(String, String), u64> = BTreeMap::new();
    for p in &c.processes {
        for call in &p.calls {
            *totals
                .entry((call.family.clone(), call.symbol.clone()))
                .or_default() += call.count;
        }
    }
    c.totals = Total::list(totals);
}

/// `file:line function`, the file relative to the current directory when it is below it.
fn frame_text(f: &Frame) -> String {
    let cwd = std::env::current_dir().ok();
    let file = cwd
        .as_ref()
        .and_then(|d| std::path::Path::new(&f.file).strip_prefix(d).ok())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| f.file.clone());
    format!("{file}:{} {}", f.line, f.function)
}

/// The Python call sites of a process as table lines, most calls first (none for a non-Python
/// process).
pub fn block(p: &Process) -> Vec<String> {
    let mut out = Vec::new();
    let Some(version) = &p.python else {
        return out;
    };
    let mut sources = Sources::default();
    // (user frame, what was called) → (calls, innermost frames with their calls)
    type Via = BTreeMap<Option<Frame>, u64>;
    let mut rows: BTreeMap<(Option<Frame>, String), (u64, Via)> = BTreeMap::new();
    for call in &p.calls {
        let native = match &call.detail {
            Some(d) => format!("{} {d}", call.symbol),
            None => call.symbol.clone(),
        };
        for pc in &call.python {
            let what = match &pc.user {
                Some(u) => {
                    let row = sources.classify(p, u, &call.symbol);
                    if row.kind == "native" {
                        native.clone()
                    } else {
                        format!("{} ({native})", row.symbol)
                    }
                }
                None => native.clone(),
            };
            let e = rows.entry((pc.user.clone(), what)).or_default();
            e.0 += pc.count;
            *e.1.entry(pc.innermost.clone()).or_default() += pc.count;
        }
    }
    if rows.is_empty() {
        return out;
    }
    let mut rows: Vec<_> = rows.into_iter().collect();
    rows.sort_by(|a, b| (b.1).0.cmp(&(a.1).0).then_with(|| a.0.cmp(&b.0)));
    out.push(format!(
        "{:>CALLS_W$}  PYTHON {version} CALL SITE → CALL",
        "CALLS"
    ));
    for ((user, what), (count, via)) in rows {
        let site = match &user {
            Some(u) => frame_text(u),
            None => "[library code only]".to_string(),
        };
        out.push(format!("{count:>CALLS_W$}  {site} → {what}"));
        let mut via: Vec<_> = via.into_iter().filter_map(|(f, n)| Some((f?, n))).collect();
        via.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        if let Some((f, n)) = via.first() {
            let base = f.file.rsplit('/').next().unwrap_or(&f.file);
            let mut t = format!("{:INDENT$}via {base}:{} {}", "", f.line, f.function);
            if via.len() > 1 || *n != count {
                let _ = write!(t, " ({n} of {count})");
            }
            out.push(t);
        }
    }
    out
}
