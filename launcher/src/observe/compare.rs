//! The one comparison of two observations: which parts differ (exit code, stdout, stderr, each
//! artifact), and which census rows moved across any number of runs. Callers word the result
//! and show text differences through `observe::diff`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::{CensusTotals, Content, Observed};

/// A part of an observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Exit,
    Stdout,
    Stderr,
    Artifact(String),
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Part::Exit => f.write_str("exit code"),
            Part::Stdout => f.write_str("stdout"),
            Part::Stderr => f.write_str("stderr"),
            Part::Artifact(p) => write!(f, "artifact {p}"),
        }
    }
}

/// How a part differs.
#[derive(Debug, Clone, PartialEq)]
pub enum Change<'a> {
    Exit(i32, i32),
    /// Both sides are text: the two texts, to diff.
    Text(String, String),
    /// Not both sides are text.
    Opaque(&'a Content, &'a Content),
    /// Only the old side has it.
    Gone(&'a Content),
    /// Only the new side has it.
    New(&'a Content),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Difference<'a> {
    pub part: Part,
    pub change: Change<'a>,
}

/// Every part that differs between `old` and `new`, in order: exit code, stdout, stderr, then
/// artifacts by path. The census is compared apart ([`moved_rows`]).
pub fn compare<'a>(old: &'a Observed, new: &'a Observed) -> Vec<Difference<'a>> {
    let mut out = Vec::new();
    if old.exit_code != new.exit_code {
        out.push(Difference {
            part: Part::Exit,
            change: Change::Exit(old.exit_code, new.exit_code),
        });
    }
    let content = |part: Part, a: &'a Content, b: &'a Content| {
        (a != b).then(|| Difference {
            part,
            change: match (a.text(), b.text()) {
                (Some(x), Some(y)) => Change::Text(x, y),
                _ => Change::Opaque(a, b),
            },
        })
    };
    out.extend(content(Part::Stdout, &old.stdout, &new.stdout));
    out.extend(content(Part::Stderr, &old.stderr, &new.stderr));
    let paths: BTreeSet<&String> = old.artifacts.keys().chain(new.artifacts.keys()).collect();
    for p in paths {
        let part = Part::Artifact(p.clone());
        match (old.artifacts.get(p), new.artifacts.get(p)) {
            (Some(a), Some(b)) => out.extend(content(part, a, b)),
            (Some(a), None) => out.push(Difference {
                part,
                change: Change::Gone(a),
            }),
            (None, Some(b)) => out.push(Difference {
                part,
                change: Change::New(b),
            }),
            (None, None) => {}
        }
    }
    out
}

/// The rows whose count is not the same in every one of `runs`, each with its count in each
/// run (`None`: the run has no such row).
pub fn moved_rows<K: Ord + Clone>(runs: &[&BTreeMap<K, u64>]) -> Vec<(K, Vec<Option<u64>>)> {
    let keys: BTreeSet<&K> = runs.iter().flat_map(|r| r.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let counts: Vec<Option<u64>> = runs.iter().map(|r| r.get(k).copied()).collect();
            counts
                .iter()
                .any(|c| *c != counts[0])
                .then(|| (k.clone(), counts))
        })
        .collect()
}

/// Census totals as `(family, function) -> calls` rows.
pub fn total_rows(t: &CensusTotals) -> BTreeMap<(String, String), u64> {
    t.iter()
        .flat_map(|(fam, fns)| fns.iter().map(|(f, n)| ((fam.clone(), f.clone()), *n)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::observe::stdout_only as obs;

    #[test]
    fn only_what_differs() {
        let (a, b) = (obs("a\nb\n"), obs("a\nB\n"));
        let d = compare(&a, &b);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].part, Part::Stdout);
        assert_eq!(d[0].change, Change::Text("a\nb\n".into(), "a\nB\n".into()));
        assert!(compare(&a, &a).is_empty());
        let mut c = obs("a\nb\n");
        c.artifacts.insert("x".into(), Content::Text(vec![]));
        assert!(matches!(compare(&a, &c)[0].change, Change::New(_)));
    }

    #[test]
    fn rows_that_moved_in_any_run() {
        let m = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        let (a, b, c) = (
            m(&[("t", 2), ("r", 1)]),
            m(&[("t", 2), ("r", 1)]),
            m(&[("t", 3)]),
        );
        assert_eq!(
            moved_rows(&[&a, &b, &c]),
            [
                ("r".to_string(), vec![Some(1), Some(1), None]),
                ("t".to_string(), vec![Some(2), Some(2), Some(3)])
            ]
        );
        assert!(moved_rows(&[&a, &b]).is_empty());
    }
}
