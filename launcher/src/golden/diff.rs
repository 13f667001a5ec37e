//! Comparing two observations of a case (a golden and a run, or two passes): unified diffs of
//! stdout, stderr and text artifacts, exit codes, binary hashes, and census rows that moved.
//! Colour only on a terminal (and never with NO_COLOR).

use std::collections::BTreeSet;

use similar::TextDiff;

use super::file::{CensusTotals, Content, Observed};

/// One thing that differs, with its diff lines (already formatted, no colour).
#[derive(Debug, Clone)]
pub struct Difference {
    pub title: String,
    pub lines: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Comparison {
    pub differences: Vec<Difference>,
    /// `family/function before -> after` rows (a missing row counts 0).
    pub census_drift: Vec<String>,
}

impl Comparison {
    pub fn same_output(&self) -> bool {
        self.differences.is_empty()
    }
}

/// A unified diff of two texts (3 lines of context).
pub fn unified(old: &str, new: &str, old_label: &str, new_label: &str) -> Vec<String> {
    let diff = TextDiff::from_lines(old, new);
    diff.unified_diff()
        .context_radius(3)
        .header(old_label, new_label)
        .to_string()
        .lines()
        .map(str::to_string)
        .collect()
}

fn content_difference(
    what: &str,
    old: &Content,
    new: &Content,
    labels: (&str, &str),
) -> Option<Difference> {
    if old == new {
        return None;
    }
    let lines = match (old.text(), new.text()) {
        (Some(a), Some(b)) => unified(
            &a,
            &b,
            &format!("{} {what}", labels.0),
            &format!("{} {what}", labels.1),
        ),
        _ => vec![
            format!("- {}: {}", labels.0, old.describe()),
            format!("+ {}: {}", labels.1, new.describe()),
        ],
    };
    Some(Difference {
        title: format!("{what} differs"),
        lines,
    })
}

/// Rows of census totals that differ.
pub fn census_drift(old: &CensusTotals, new: &CensusTotals) -> Vec<String> {
    let mut rows = BTreeSet::new();
    for t in [old, new] {
        for (fam, fns) in t {
            for f in fns.keys() {
                rows.insert((fam.clone(), f.clone()));
            }
        }
    }
    let get = |t: &CensusTotals, fam: &str, f: &str| t.get(fam).and_then(|m| m.get(f)).copied();
    rows.into_iter()
        .filter_map(|(fam, f)| {
            let (a, b) = (get(old, &fam, &f), get(new, &fam, &f));
            (a != b).then(|| format!("{fam}/{f} {} -> {}", a.unwrap_or(0), b.unwrap_or(0)))
        })
        .collect()
}

/// Everything that differs between `old` and `new`; `labels` name the two sides.
pub fn compare(old: &Observed, new: &Observed, labels: (&str, &str)) -> Comparison {
    let mut differences = Vec::new();
    if old.exit_code != new.exit_code {
        differences.push(Difference {
            title: format!(
                "exit code differs: {} {}, {} {}",
                labels.0, old.exit_code, labels.1, new.exit_code
            ),
            lines: vec![],
        });
    }
    differences.extend(content_difference(
        "stdout",
        &old.stdout,
        &new.stdout,
        labels,
    ));
    differences.extend(content_difference(
        "stderr",
        &old.stderr,
        &new.stderr,
        labels,
    ));
    let paths: BTreeSet<&String> = old.artifacts.keys().chain(new.artifacts.keys()).collect();
    for p in paths {
        match (old.artifacts.get(p), new.artifacts.get(p)) {
            (Some(a), Some(b)) => {
                differences.extend(content_difference(&format!("artifact {p}"), a, b, labels))
            }
            (Some(a), None) => differences.push(Difference {
                title: format!("artifact {p} missing (in {}: {})", labels.0, a.describe()),
                lines: vec![],
            }),
            (None, Some(b)) => differences.push(Difference {
                title: format!("artifact {p} new (not in {}: {})", labels.0, b.describe()),
                lines: vec![],
            }),
            (None, None) => {}
        }
    }
    Comparison {
        differences,
        census_drift: census_drift(&old.census, &new.census),
    }
}

/// A diff line coloured for a terminal.
pub fn paint(line: &str, colour: bool) -> String {
    if !colour {
        return line.to_string();
    }
    let code = if line.starts_with("+++") || line.starts_with("---") {
        "1"
    } else if line.starts_with('+') {
        "32"
    } else if line.starts_with('-') {
        "31"
    } else if line.starts_with("@@") {
        "36"
    } else {
        return line.to_string();
    };
    format!("\x1b[{code}m{line}\x1b[0m")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn obs(out: &str) -> Observed {
        Observed {
            exit_code: 0,
            stdout: Content::from_bytes(out.as_bytes(), |s| s.to_string()),
            stderr: Content::Text(vec![]),
            artifacts: BTreeMap::new(),
            census: CensusTotals::new(),
        }
    }

    #[test]
    fn diff_shows_only_the_change() {
        let c = compare(&obs("a\nb\nc\n"), &obs("a\nB\nc\n"), ("golden", "actual"));
        assert_eq!(c.differences.len(), 1);
        let l = &c.differences[0].lines;
        assert_eq!(l.iter().filter(|l| l.starts_with("-b")).count(), 1, "{l:?}");
        assert_eq!(l.iter().filter(|l| l.starts_with("+B")).count(), 1, "{l:?}");
        assert_eq!(
            l.iter()
                .filter(|l| (l.starts_with('+') || l.starts_with('-'))
                    && !l.starts_with("+++")
                    && !l.starts_with("---"))
                .count(),
            2
        );
        assert!(compare(&obs("x\n"), &obs("x\n"), ("a", "b")).same_output());
    }

    #[test]
    fn census_rows_that_moved() {
        let mut a = CensusTotals::new();
        a.entry("time".into()).or_default().insert("time".into(), 2);
        let mut b = a.clone();
        b.get_mut("time").unwrap().insert("time".into(), 3);
        b.entry("random".into())
            .or_default()
            .insert("getrandom".into(), 1);
        assert_eq!(
            census_drift(&a, &b),
            ["random/getrandom 0 -> 1", "time/time 2 -> 3"]
        );
    }
}
