//! The census as a table for people: a summary line, then at most [`WIDTH`] columns: one block per process in
//! process-tree order (a child under its parent, indented; the widest sibling first), one row
//! per function with its call count (widest first), and the objects that made the calls below
//! each row. Everything here comes from the JSON [`Census`]; nothing is measured again.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::census::{Call, Census, Exit, Process};

/// Default width of the table.
pub const WIDTH: usize = 80;
/// Callers shown under each row before "… and N more callers".
const CALLERS_SHOWN: usize = 3;
/// Width of the CALLS column.
const CALLS_W: usize = 10;
/// Width of the FAMILY column ("tempname" is the longest family name).
const FAMILY_W: usize = 8;
/// Indentation of caller lines.
const CALLER_INDENT: usize = 14;

/// Renders `census`; `top` limits the rows per process (0 = all); `summary_width` cuts the
/// summary line (`None`: never, as when stderr is not a terminal).
pub fn render(census: &Census, top: usize, summary_width: Option<usize>) -> String {
    let mut out = String::new();
    let total: u64 = census.totals.iter().map(|t| t.count).sum();
    let mut families: BTreeMap<&str, u64> = BTreeMap::new();
    for t in &census.totals {
        *families.entry(t.family.as_str()).or_default() += t.count;
    }
    let mut families: Vec<(&str, u64)> = families.into_iter().collect();
    families.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let n = census.processes.len();
    let mut head = format!(
        "seal census: {n} process{}, {total} call{}",
        if n == 1 { "" } else { "es" },
        if total == 1 { "" } else { "s" },
    );
    if !families.is_empty() {
        let parts: Vec<String> = families.iter().map(|(f, c)| format!("{f} {c}")).collect();
        let _ = write!(head, " ({})", parts.join(", "));
    }
    line(&mut out, &head, summary_width.unwrap_or(usize::MAX));
    // The machine's limits once, under the summary (every process has them: `seal doctor`).
    for u in &census.machine {
        line(
            &mut out,
            &format!("machine: not sealed ({}): {}", u.kind, u.detail),
            summary_width.unwrap_or(usize::MAX),
        );
    }
    if !census.machine.is_empty() {
        line(
            &mut out,
            "machine: every sealed command here has this limit (seal doctor)",
            summary_width.unwrap_or(usize::MAX),
        );
    }

    for (depth, p) in tree_order(census) {
        out.push('\n');
        process_block(&mut out, p, depth, top, WIDTH);
    }
    out
}

fn process_block(out: &mut String, p: &Process, depth: usize, top: usize, width: usize) {
    let calls: u64 = p.calls.iter().map(|c| c.count).sum();
    let mut head = format!(
        "{}{}  {}",
        "  ".repeat(depth.min(8)),
        p.vpid,
        image_names(p)
    );
    if let Some(parent) = p.parent_vpid {
        let _ = write!(head, "  parent {parent}");
    }
    let _ = write!(
        head,
        "  {}  {calls} call{}",
        exit_text(p.exit.as_ref()),
        if calls == 1 { "" } else { "s" }
    );
    line(out, &head, width);

    let mut rows: Vec<&Call> = p.calls.iter().collect();
    rows.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.family.cmp(&b.family))
            .then_with(|| a.symbol.cmp(&b.symbol))
            .then_with(|| a.detail.cmp(&b.detail))
    });
    if !rows.is_empty() {
        line(
            out,
            &format!(
                "{:>CALLS_W$}  {:<FAMILY_W$}  FUNCTION / CALLERS",
                "CALLS", "FAMILY"
            ),
            width,
        );
    }
    let shown = if top == 0 {
        rows.len()
    } else {
        top.min(rows.len())
    };
    for call in &rows[..shown] {
        line(
            out,
            &format!(
                "{:>CALLS_W$}  {:<FAMILY_W$}  {}",
                call.count,
                call.family,
                function_text(call)
            ),
            width,
        );
        let w = call
            .callers
            .iter()
            .take(CALLERS_SHOWN)
            .map(|c| c.count.to_string().len())
            .max()
            .unwrap_or(1);
        for c in call.callers.iter().take(CALLERS_SHOWN) {
            let mut who = basename(&c.object).to_string();
            if let Some(s) = &c.symbol {
                who.push(' ');
                who.push_str(s);
            }
            line(
                out,
                &format!("{:CALLER_INDENT$}{:>w$} from {who}", "", c.count),
                width,
            );
        }
        if call.callers.len() > CALLERS_SHOWN {
            let rest = &call.callers[CALLERS_SHOWN..];
            let calls = rest.iter().map(|c| c.count).sum();
            let more = and_more(rest.len(), "caller", calls);
            line(out, &format!("{:CALLER_INDENT$}{more}", ""), width);
        }
    }
    if shown < rows.len() {
        let rest = &rows[shown..];
        let more = and_more(rest.len(), "function", rest.iter().map(|c| c.count).sum());
        line(out, &format!("{:>CALLS_W$}  {more}", ""), width);
    }
    for row in super::python::block(p) {
        line(out, &row, width);
    }
    for u in p.unsealed.iter().filter(|u| !u.is_machine()) {
        let verdict = if u.is_partial() {
            "partly sealed"
        } else {
            "not sealed"
        };
        line(out, &format!("  {verdict}: {} {}", u.kind, u.detail), width);
    }
}

/// `… and N more THINGs (M calls)`.
fn and_more(n: usize, thing: &str, calls: u64) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("… and {n} more {thing}{s} ({calls} calls)")
}

/// Processes in tree order with their depth: each child right after its parent's subtree
/// starts, siblings widest (most calls) first, then by virtual pid.
fn tree_order(census: &Census) -> Vec<(usize, &Process)> {
    let known: std::collections::BTreeSet<i32> = census.processes.iter().map(|p| p.vpid).collect();
    let weight = |p: &Process| p.calls.iter().map(|c| c.count).sum::<u64>();
    let mut children: BTreeMap<Option<i32>, Vec<&Process>> = BTreeMap::new();
    for p in &census.processes {
        let parent = p.parent_vpid.filter(|v| known.contains(v) && *v != p.vpid);
        children.entry(parent).or_default().push(p);
    }
    for list in children.values_mut() {
        list.sort_by(|a, b| weight(b).cmp(&weight(a)).then(a.vpid.cmp(&b.vpid)));
    }
    let mut out = Vec::new();
    let mut stack: Vec<(usize, &Process)> = children
        .get(&None)
        .map(|l| l.iter().rev().map(|p| (0, *p)).collect())
        .unwrap_or_default();
    let mut seen = std::collections::BTreeSet::new();
    while let Some((depth, p)) = stack.pop() {
        if !seen.insert(p.vpid) {
            continue;
        }
        out.push((depth, p));
        if let Some(kids) = children.get(&Some(p.vpid)) {
            stack.extend(kids.iter().rev().map(|k| (depth + 1, *k)));
        }
    }
    // A parent cycle (impossible from the shim, but the JSON is input): list the rest flat.
    for p in &census.processes {
        if !seen.contains(&p.vpid) {
            out.push((0, p));
        }
    }
    out
}

/// `python3.11`, or `bash > python3.11` for a process that exec'd.
fn image_names(p: &Process) -> String {
    let mut names: Vec<&str> = p.execs.iter().map(|e| basename(e)).collect();
    names.push(basename(&p.exe));
    if names.len() > 3 {
        let last = names[names.len() - 1];
        names.truncate(2);
        names.push("…");
        names.push(last);
    }
    names.join(" > ")
}

fn function_text(c: &Call) -> String {
    match &c.detail {
        Some(d) => format!("{} {d}", c.symbol),
        None => c.symbol.clone(),
    }
}

fn exit_text(exit: Option<&Exit>) -> String {
    match exit {
        Some(Exit {
            signal: Some(sig), ..
        }) => match signal_name(*sig) {
            Some(name) => format!("killed by {name} ({sig})"),
            None => format!("killed by signal {sig}"),
        },
        Some(Exit {
            code: Some(code), ..
        }) => format!("exit {code}"),
        _ => "exit unknown".to_string(),
    }
}

fn signal_name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => return None,
    })
}

fn basename(path: &str) -> &str {
    path.rsplit('/')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or(path)
}

/// Appends `s` as one line, cut with "…" to `width` characters.
fn line(out: &mut String, s: &str, width: usize) {
    let s = s.trim_end();
    if s.chars().count() <= width {
        out.push_str(s);
    } else {
        out.extend(s.chars().take(width.saturating_sub(1)));
        out.push('…');
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::census::{Caller, Total};

    fn call(
        family: &str,
        symbol: &str,
        detail: Option<&str>,
        callers: &[(&str, &str, u64)],
    ) -> Call {
        Call {
            family: family.into(),
            symbol: symbol.into(),
            detail: detail.map(Into::into),
            count: callers.iter().map(|c| c.2).sum(),
            callers: callers
                .iter()
                .map(|&(o, s, n)| Caller {
                    object: o.into(),
                    symbol: (!s.is_empty()).then(|| s.into()),
                    count: n,
                })
                .collect(),
            python: vec![],
        }
    }

    fn process(vpid: i32, parent: Option<i32>, exe: &str, exit: Exit, calls: Vec<Call>) -> Process {
        Process {
            vpid,
            parent_vpid: parent,
            exe: exe.into(),
            argv: vec![exe.into()],
            execs: vec![],
            exit: Some(exit),
            calls,
            unsealed: vec![],
            python: None,
        }
    }

    fn sample() -> Census {
        let code = |c| Exit {
            code: Some(c),
            signal: None,
        };
        let mut child = process(
            1002,
            Some(1001),
            "/tmp/census_counts",
            Exit {
                code: None,
                signal: Some(9),
            },
            vec![call(
                "time",
                "time",
                None,
                &[("/tmp/census_counts", "child_reads", 2)],
            )],
        );
        child.execs = vec!["/usr/bin/bash".into()];
        Census {
            version: 1,
            command: vec!["bash".into()],
            processes: vec![
                process(
                    1000,
                    None,
                    "/usr/bin/bash",
                    code(0),
                    vec![call(
                        "random",
                        "getrandom",
                        None,
                        &[("/usr/lib/libc.so.6", "", 1)],
                    )],
                ),
                process(
                    1001,
                    Some(1000),
                    "/usr/bin/python3.11",
                    code(3),
                    vec![
                        call(
                            "random",
                            "getrandom",
                            None,
                            &[("/usr/bin/python3.11", "pyurandom", 1)],
                        ),
                        call(
                            "time",
                            "clock_gettime",
                            Some("CLOCK_MONOTONIC"),
                            &[
                                (
                                    "/usr/lib/libpython3.11.so.1.0",
                                    "_PyTime_GetMonotonicClockWithInfo_and_a_very_long_tail",
                                    50,
                                ),
                                ("/usr/lib/libpython3.11.so.1.0", "b", 5),
                                ("/usr/lib/libpython3.11.so.1.0", "c", 4),
                                ("/usr/lib/libpython3.11.so.1.0", "d", 3),
                                ("/usr/lib/libpython3.11.so.1.0", "e", 2),
                            ],
                        ),
                    ],
                ),
                child,
            ],
            totals: vec![
                Total {
                    family: "time".into(),
                    symbol: "clock_gettime".into(),
                    count: 64,
                },
                Total {
                    family: "random".into(),
                    symbol: "getrandom".into(),
                    count: 2,
                },
            ],
            machine: vec![],
        }
    }

    /// A machine limit (no cpuid faulting) is said once under the summary, not in every
    /// process's block; a program's own limit stays in its block.
    #[test]
    fn the_machine_limit_is_said_once() {
        use crate::census::Unsealed;
        let cpu = seal_abi::unsealed::name(seal_abi::unsealed::CPU_TRAP).to_string();
        let machine = Unsealed {
            kind: cpu.clone(),
            detail: seal_abi::unsealed::CPU_TRAP_CAUSES[2].into(),
        };
        let go = Unsealed {
            kind: cpu,
            detail: seal_abi::unsealed::CPU_TRAP_CAUSES[1].into(),
        };
        let mut c = sample();
        for p in &mut c.processes {
            p.unsealed.push(machine.clone());
        }
        c.processes[0].unsealed.push(go.clone());
        c.machine = c.machine_limits();
        let t = render(&c, 0, None);
        let count = |needle: &str| t.lines().filter(|l| l.contains(needle)).count();
        assert_eq!(count(&machine.detail), 1, "{t}");
        assert_eq!(
            count("machine: not sealed (cpu-trap-unavailable)"),
            1,
            "{t}"
        );
        assert_eq!(count("(seal doctor)"), 1, "{t}");
        assert_eq!(
            count("  not sealed: cpu-trap-unavailable rdtsc gives real values in Go"),
            1,
            "{t}"
        );
        assert!(t.lines().nth(1).unwrap().starts_with("machine: "), "{t}");
    }

    /// A supervised static image is partly sealed, as the run's stderr says, not "not sealed".
    #[test]
    fn a_supervised_image_is_partly_sealed_in_the_table() {
        use crate::census::Unsealed;
        use seal_abi::unsealed::{name, STATIC_BINARY, STATIC_SUPERVISED};
        let mut c = sample();
        c.processes[0].unsealed.push(Unsealed {
            kind: name(STATIC_SUPERVISED).into(),
            detail: "map order".into(),
        });
        c.processes[1].unsealed.push(Unsealed {
            kind: name(STATIC_BINARY).into(),
            detail: "no listener".into(),
        });
        let t = render(&c, 0, None);
        assert!(
            t.contains("  partly sealed: static-binary-supervised map order"),
            "{t}"
        );
        assert!(t.contains("  not sealed: static-binary no listener"), "{t}");
        assert!(!t.contains("not sealed: static-binary-supervised"), "{t}");
    }

    #[test]
    fn table_is_a_tree_widest_first_within_80_columns() {
        let t = render(&sample(), 0, Some(WIDTH));
        for l in t.lines() {
            assert!(l.chars().count() <= WIDTH, "too wide: {l:?}");
        }
        let expected = "\
seal census: 3 processes, 66 calls (time 64, random 2)

1000  bash  exit 0  1 call
     CALLS  FAMILY    FUNCTION / CALLERS
         1  random    getrandom
              1 from libc.so.6

  1001  python3.11  parent 1000  exit 3  65 calls
     CALLS  FAMILY    FUNCTION / CALLERS
        64  time      clock_gettime CLOCK_MONOTONIC
              50 from libpython3.11.so.1.0 _PyTime_GetMonotonicClockWithInfo_an…
               5 from libpython3.11.so.1.0 b
               4 from libpython3.11.so.1.0 c
              … and 2 more callers (5 calls)
         1  random    getrandom
              1 from python3.11 pyurandom

    1002  bash > census_counts  parent 1001  killed by SIGKILL (9)  2 calls
     CALLS  FAMILY    FUNCTION / CALLERS
         2  time      time
              2 from census_counts child_reads
";
        assert_eq!(t, expected, "\n--- got ---\n{t}\n-----------");
    }

    #[test]
    fn top_limits_rows_per_process() {
        let t = render(&sample(), 1, None);
        assert!(t.contains("… and 1 more function (1 calls)"), "{t}");
        assert!(!t.contains("pyurandom"), "{t}");
    }

    #[test]
    fn the_summary_is_cut_only_on_a_terminal() {
        let mut c = sample();
        for f in [
            "tempname",
            "hostname",
            "pid",
            "hashseed",
            "locale",
            "environment",
        ] {
            c.totals.push(Total {
                family: f.into(),
                symbol: f.into(),
                count: 1_000_000,
            });
        }
        let head = |w| render(&c, 0, w).lines().next().unwrap().to_string();
        assert!(head(None).chars().count() > WIDTH && head(None).ends_with("random 2)"));
        assert_eq!(head(Some(100)).chars().count(), 100);
        assert!(head(Some(100)).ends_with('…'));
    }
}
