//! How golden words a comparison (`observe::compare`): a title per part that differs, with its
//! unified diff (3 lines of context, no span marks: JUnit and CI logs read them as plain
//! `-`/`+` lines), and the census totals that drifted.

use crate::observe::compare::{self, Change};
use crate::observe::diff::{self, Kind, Line};
use crate::observe::{CensusTotals, Observed};

/// One thing that differs, with its diff lines.
#[derive(Debug, Clone)]
pub struct Difference {
    pub title: String,
    pub lines: Vec<Line>,
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

/// Three lines of context; at most 2000 changed lines shown (then a line says the diff was
/// cut): a golden of 80,000 lines against a one-line output is one screen, not 80,000 lines.
const OPTIONS: diff::Options = diff::Options {
    context: 3,
    max_changed: 2000,
};

/// A unified diff of two texts.
pub fn unified(old: &str, new: &str, old_label: &str, new_label: &str) -> Vec<Line> {
    diff::diff(old, new, old_label, new_label, OPTIONS)
}

/// A diff line as golden prints it (coloured on a terminal, never marked).
pub fn show(line: &Line, colour: bool) -> String {
    line.show(colour, false)
}

/// Everything that differs between `old` and `new`; `labels` name the two sides.
pub fn compare(old: &Observed, new: &Observed, labels: (&str, &str)) -> Comparison {
    let (l0, l1) = labels;
    let differences = compare::compare(old, new)
        .into_iter()
        .map(|d| {
            let what = d.part.to_string();
            let (title, lines) = match d.change {
                Change::Exit(a, b) => (format!("exit code differs: {l0} {a}, {l1} {b}"), vec![]),
                Change::Text(a, b) => (
                    format!("{what} differs"),
                    unified(&a, &b, &format!("{l0} {what}"), &format!("{l1} {what}")),
                ),
                Change::Opaque(a, b) => (
                    format!("{what} differs"),
                    vec![
                        Line {
                            kind: Kind::Removed,
                            parts: vec![(format!(" {l0}: {}", a.describe()), false)],
                        },
                        Line {
                            kind: Kind::Added,
                            parts: vec![(format!(" {l1}: {}", b.describe()), false)],
                        },
                    ],
                ),
                Change::Gone(a) => (
                    format!("{what} missing (in {l0}: {})", a.describe()),
                    vec![],
                ),
                Change::New(b) => (
                    format!("{what} new (not in {l0}: {})", b.describe()),
                    vec![],
                ),
            };
            Difference { title, lines }
        })
        .collect();
    Comparison {
        differences,
        census_drift: census_drift(&old.census, &new.census),
    }
}

/// Rows of census totals that differ, as `family/function before -> after`.
pub fn census_drift(old: &CensusTotals, new: &CensusTotals) -> Vec<String> {
    let (a, b) = (compare::total_rows(old), compare::total_rows(new));
    compare::moved_rows(&[&a, &b])
        .into_iter()
        .map(|((fam, f), n)| format!("{fam}/{f} {} -> {}", n[0].unwrap_or(0), n[1].unwrap_or(0)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::observe::stdout_only as obs;

    #[test]
    fn diff_shows_only_the_change() {
        let c = compare(&obs("a\nb\nc\n"), &obs("a\nB\nc\n"), ("golden", "actual"));
        assert_eq!(c.differences.len(), 1);
        assert_eq!(c.differences[0].title, "stdout differs");
        let l: Vec<String> = c.differences[0]
            .lines
            .iter()
            .map(|l| show(l, false))
            .collect();
        assert_eq!(l[..2], ["--- golden stdout", "+++ actual stdout"]);
        let changed: Vec<&String> = l[2..]
            .iter()
            .filter(|l| l.starts_with('+') || l.starts_with('-'))
            .collect();
        assert_eq!(changed, ["-b", "+B"]);
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
