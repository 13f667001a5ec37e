//! Classifying output lines across runs: align every run with the reference run by masked
//! content (so a drifting line count shifts lines instead of mismatching everything after it),
//! then call each reference line `stable`, `volatile` (one set of masks collapses every
//! variant) or `unstable`, and record the drift (lines only some runs print).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use similar::{capture_diff_slices, Algorithm, DiffOp};

use crate::observe::masks::MaskSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Stable,
    Volatile,
    Unstable,
}

/// One run's output, split into lines, with the perturbation it ran under.
#[derive(Debug, Clone)]
pub struct RunLines {
    pub label: String,
    pub perturbation: String,
    pub lines: Vec<String>,
}

/// A distinct value of a line and how many runs printed it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Variant {
    pub text: String,
    pub count: usize,
    pub first_run: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LineReport {
    /// 1-based line number in the reference run.
    pub line: usize,
    pub text: String,
    /// The line with the masks of `patterns` applied (for unstable lines: every mask).
    pub masked: String,
    pub status: Status,
    pub patterns: Vec<String>,
    /// Up to [`MAX_VARIANTS`] distinct values, most frequent first.
    pub variants: Vec<Variant>,
    /// Perturbations under which some run printed a different value (or none).
    pub varies_under: Vec<String>,
    /// Runs in which the line is missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_in: Vec<String>,
    /// What the line depends on, from the perturbations it varies under that name a cause
    /// ("the checkout path", "environment size (heap layout)"); empty when it also varies
    /// between baseline runs (then no perturbation explains it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<String>,
    /// Entropy families that make this line vary (`--attribute`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub families: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

/// Lines a run printed that the reference does not have, or lacks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Drift {
    pub run: String,
    pub lines: usize,
    pub reference_lines: usize,
    /// Extra lines, with the reference line they follow (0 = before line 1).
    pub inserted: Vec<(usize, String)>,
    /// Reference lines (1-based) this run did not print.
    pub missing: Vec<usize>,
}

pub const MAX_VARIANTS: usize = 5;

/// For each line of `reference`, the index of the aligned line of `other` (or `None`), plus the
/// indices of `other`'s lines that align with nothing. Alignment is by masked content; lines in
/// a replaced block are paired in order.
pub fn align(
    reference: &[String],
    other: &[String],
    masks: &MaskSet,
) -> (Vec<Option<usize>>, Vec<(usize, usize)>) {
    let ma: Vec<String> = reference.iter().map(|l| masks.apply(l).0).collect();
    let mb: Vec<String> = other.iter().map(|l| masks.apply(l).0).collect();
    let mut map = vec![None; reference.len()];
    let mut extra = Vec::new();
    for op in capture_diff_slices(Algorithm::Patience, &ma, &mb) {
        match op {
            DiffOp::Equal {
                old_index,
                new_index,
                len,
            } => {
                for k in 0..len {
                    map[old_index + k] = Some(new_index + k);
                }
            }
            DiffOp::Delete { .. } => {}
            DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => {
                for k in 0..new_len {
                    extra.push((old_index, new_index + k));
                }
            }
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => {
                let paired = old_len.min(new_len);
                for k in 0..paired {
                    map[old_index + k] = Some(new_index + k);
                }
                for k in paired..new_len {
                    extra.push((old_index + paired, new_index + k));
                }
            }
        }
    }
    (map, extra)
}

/// The smallest subset (by dropping one pattern at a time) of the masks that collapses all
/// `variants` to one form, or `None` when even all masks leave two forms.
pub fn collapsing_patterns(variants: &[&str], masks: &MaskSet) -> Option<Vec<String>> {
    let collapses = |set: &MaskSet| {
        let first = set.apply(variants[0]).0;
        variants[1..].iter().all(|v| set.apply(v).0 == first)
    };
    if !collapses(masks) {
        return None;
    }
    let mut used: Vec<String> = Vec::new();
    for v in variants {
        for name in masks.apply(v).1 {
            if !used.contains(&name) {
                used.push(name);
            }
        }
    }
    let mut i = 0;
    while i < used.len() {
        let mut fewer = used.clone();
        fewer.remove(i);
        let set = masks.subset(&fewer).expect("names from the set");
        if collapses(&set) {
            used = fewer;
        } else {
            i += 1;
        }
    }
    // In the mask set's order.
    let set = masks.subset(&used).expect("names from the set");
    Some(set.masks.into_iter().map(|m| m.name).collect())
}

/// Classifies every line of `runs[0]` (the reference) against all runs.
pub fn classify(runs: &[RunLines], masks: &MaskSet) -> (Vec<LineReport>, Vec<Drift>) {
    let reference = &runs[0];
    let n = reference.lines.len();
    // values[i][r] = the line aligned with reference line i in run r.
    let mut values: Vec<Vec<Option<&str>>> = vec![Vec::with_capacity(runs.len()); n];
    let mut drift = Vec::new();
    for run in runs {
        let (map, extra) = align(&reference.lines, &run.lines, masks);
        for (i, m) in map.iter().enumerate() {
            values[i].push(m.map(|j| run.lines[j].as_str()));
        }
        let missing: Vec<usize> = map
            .iter()
            .enumerate()
            .filter(|(_, m)| m.is_none())
            .map(|(i, _)| i + 1)
            .collect();
        if !extra.is_empty() || !missing.is_empty() {
            drift.push(Drift {
                run: run.label.clone(),
                lines: run.lines.len(),
                reference_lines: n,
                inserted: extra
                    .iter()
                    .map(|&(after, j)| (after, run.lines[j].clone()))
                    .collect(),
                missing,
            });
        }
    }
    let mut lines = Vec::with_capacity(n);
    for (i, vals) in values.iter().enumerate() {
        let text = reference.lines[i].clone();
        let missing_in: Vec<String> = vals
            .iter()
            .zip(runs)
            .filter(|(v, _)| v.is_none())
            .map(|(_, r)| r.label.clone())
            .collect();
        let mut varies_under: Vec<String> = Vec::new();
        for (v, r) in vals.iter().zip(runs) {
            if *v != Some(text.as_str()) && !varies_under.contains(&r.perturbation) {
                varies_under.push(r.perturbation.clone());
            }
        }
        let mut variants: Vec<Variant> = Vec::new();
        for (v, r) in vals.iter().zip(runs) {
            let Some(v) = v else { continue };
            match variants.iter_mut().find(|x| x.text == *v) {
                Some(x) => x.count += 1,
                None => variants.push(Variant {
                    text: v.to_string(),
                    count: 1,
                    first_run: r.label.clone(),
                }),
            }
        }
        let present: Vec<&str> = variants.iter().map(|v| v.text.as_str()).collect();
        let (status, patterns) = if variants.len() == 1 && missing_in.is_empty() {
            (Status::Stable, Vec::new())
        } else if missing_in.is_empty() {
            match collapsing_patterns(&present, masks) {
                Some(p) => (Status::Volatile, p),
                None => (Status::Unstable, Vec::new()),
            }
        } else {
            (Status::Unstable, Vec::new())
        };
        let masked = match status {
            Status::Stable => text.clone(),
            Status::Volatile => masks.subset(&patterns).unwrap().apply(&text).0,
            Status::Unstable => masks.apply(&text).0,
        };
        variants.sort_by_key(|v| std::cmp::Reverse(v.count));
        variants.truncate(MAX_VARIANTS);
        lines.push(LineReport {
            line: i + 1,
            text,
            masked,
            status,
            patterns,
            variants,
            varies_under,
            missing_in,
            causes: Vec::new(),
            families: None,
            action: None,
        });
    }
    (lines, drift)
}

/// What grew in `now` against `before`: volatile lines (matched by masked content, wherever
/// they are) that were not volatile before, or that need patterns they did not need before.
pub fn mask_growth(before: &[LineReport], now: &[LineReport]) -> Vec<String> {
    let mut known: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for l in before.iter().filter(|l| l.status == Status::Volatile) {
        known
            .entry(l.masked.as_str())
            .or_default()
            .extend(l.patterns.iter().map(String::as_str));
    }
    let mut grew = Vec::new();
    for l in now.iter().filter(|l| l.status == Status::Volatile) {
        match known.get(l.masked.as_str()) {
            None => grew.push(format!("line {}: newly volatile: {}", l.line, l.masked)),
            Some(pats) => {
                let new: Vec<&String> = l
                    .patterns
                    .iter()
                    .filter(|p| !pats.contains(&p.as_str()))
                    .collect();
                if !new.is_empty() {
                    grew.push(format!(
                        "line {}: new patterns {:?}: {}",
                        l.line, new, l.masked
                    ));
                }
            }
        }
    }
    grew
}

/// True when every variant has the same words in another order (a set or a map printed in
/// hash order).
pub fn is_permutation(variants: &[&str]) -> bool {
    let words = |s: &str| {
        let mut w: Vec<String> = s
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|w| !w.is_empty())
            .map(|w| w.trim_matches(|c| "[]{}()'\"".contains(c)).to_string())
            .collect();
        w.sort();
        w
    };
    let first = words(variants[0]);
    variants.len() > 1 && variants[1..].iter().all(|v| words(v) == first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(label: &str, text: &str) -> RunLines {
        RunLines {
            label: label.into(),
            perturbation: label.split('#').next().unwrap().into(),
            lines: text.lines().map(str::to_string).collect(),
        }
    }

    /// [`classify`] with the built-in masks, of runs given as (label, text).
    fn classified(runs: &[(&str, &str)]) -> (Vec<LineReport>, Vec<Drift>) {
        let runs: Vec<RunLines> = runs.iter().map(|(l, t)| run(l, t)).collect();
        classify(&runs, &MaskSet::builtin())
    }

    #[test]
    fn lines_are_stable_volatile_or_unstable() {
        let (lines, drift) = classified(&[
            ("baseline#1", "const\nat 2026-01-01T00:00:01\npid 100\n"),
            ("baseline#2", "const\nat 2026-01-01T00:00:02\npid 200\n"),
            ("tz#1", "const\nat 2026-01-01T10:00:00\npid 300\n"),
        ]);
        assert!(drift.is_empty());
        assert_eq!(lines[0].status, Status::Stable);
        assert_eq!(lines[1].status, Status::Volatile);
        assert_eq!(lines[1].patterns, ["iso8601"]);
        assert_eq!(lines[1].masked, "at [iso8601]");
        assert_eq!(lines[2].status, Status::Unstable);
        assert_eq!(lines[2].varies_under, ["baseline", "tz"]);
    }

    #[test]
    fn drift_aligns_by_content() {
        let (lines, drift) = classified(&[
            ("a#1", "head\nx\ntail\n"),
            ("a#2", "head\nextra\nx\ntail\n"),
            ("b#1", "head\ntail\n"),
        ]);
        assert_eq!(lines[0].status, Status::Stable);
        assert_eq!(lines[2].status, Status::Stable, "{lines:?}");
        assert_eq!(lines[1].status, Status::Unstable);
        assert_eq!(lines[1].missing_in, ["b#1"]);
        assert_eq!(drift.len(), 2);
        assert_eq!(drift[0].inserted, [(1, "extra".to_string())]);
        assert_eq!(drift[1].missing, [2]);
    }

    #[test]
    fn minimal_patterns_are_recorded() {
        let m = MaskSet::builtin();
        let p = collapsing_patterns(
            &[
                "took 10ms at 2026-01-01T00:00:01",
                "took 10ms at 2026-01-01T00:00:09",
            ],
            &m,
        );
        assert_eq!(p.unwrap(), ["iso8601"]);
        assert!(collapsing_patterns(&["pid 1", "pid 2"], &m).is_none());
    }

    #[test]
    fn growth_is_matched_by_content() {
        let before = classified(&[
            ("a#1", "x\nat 2026-01-01T00:00:01\n"),
            ("a#2", "x\nat 2026-01-01T00:00:02\n"),
        ])
        .0;
        // Same volatile line, moved down by one: no growth.
        let moved = classified(&[
            ("a#1", "new\nx\nat 2026-01-01T00:00:01\n"),
            ("a#2", "new\nx\nat 2026-01-01T00:00:03\n"),
        ])
        .0;
        assert!(mask_growth(&before, &moved).is_empty());
        let grew = classified(&[
            (
                "a#1",
                "x\nat 2026-01-01T00:00:01\nid 0b6e1a2c-1f0e-4a4e-9f43-3d2b7c1a9e10\n",
            ),
            (
                "a#2",
                "x\nat 2026-01-01T00:00:02\nid 1b6e1a2c-1f0e-4a4e-9f43-3d2b7c1a9e10\n",
            ),
        ])
        .0;
        let g = mask_growth(&before, &grew);
        assert_eq!(g.len(), 1, "{g:?}");
        assert!(g[0].contains("line 3"));
    }

    #[test]
    fn set_order_is_a_permutation() {
        assert!(is_permutation(&["tags a b c", "tags c a b"]));
        assert!(is_permutation(&["{'a', 'b'}", "{'b', 'a'}"]));
        assert!(!is_permutation(&["pid 1", "pid 2"]));
    }
}
