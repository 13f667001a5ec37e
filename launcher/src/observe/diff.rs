//! The one line-diff renderer: a unified diff (`---`/`+++` names, GNU `@@` hunk headers) of two
//! texts as [`Line`]s, with the changed words of a paired line kept as spans, shown in colour
//! or, in plain text when asked, as `[-old-]`/`{+new+}`. verify and golden show text through it.

use anstyle::{AnsiColor, Effects, Style};
use similar::{Algorithm, ChangeTag, DiffOp, TextDiff};

/// What a diff line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    OldName,
    NewName,
    Hunk,
    Same,
    Removed,
    Added,
    /// `\ No newline at end of file`, after the line that has none.
    NoNewline,
    /// The diff was cut here.
    Cut,
    /// Any other text shown among diff lines (a note), never coloured.
    Note,
}

/// One line of a diff, without its sign, in pieces: `true` marks a changed span.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub kind: Kind,
    pub parts: Vec<(String, bool)>,
}

/// How much of a diff to show.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Unchanged lines shown around each change.
    pub context: usize,
    /// Changed lines shown before the rest is cut.
    pub max_changed: usize,
}

const OLD: Style = AnsiColor::Red.on_default();
const NEW: Style = AnsiColor::Green.on_default();
const HUNK: Style = Style::new().effects(Effects::DIMMED);
const OLD_SPAN: Style = Style::new()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::BrightWhite)))
    .bg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)))
    .effects(Effects::BOLD);
const NEW_SPAN: Style = Style::new()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Black)))
    .bg_color(Some(anstyle::Color::Ansi(AnsiColor::Green)))
    .effects(Effects::BOLD);

impl Line {
    fn new(kind: Kind, text: impl Into<String>) -> Line {
        Line {
            kind,
            parts: vec![(text.into(), false)],
        }
    }

    /// A note shown among diff lines.
    pub fn note(text: impl Into<String>) -> Line {
        Line::new(Kind::Note, text)
    }

    fn sign(&self) -> &'static str {
        match self.kind {
            Kind::OldName => "--- ",
            Kind::NewName => "+++ ",
            Kind::Same => " ",
            Kind::Removed => "-",
            Kind::Added => "+",
            _ => "",
        }
    }

    /// The line as plain text; with `marks`, changed spans as `[-…-]` / `{+…+}`.
    pub fn plain(&self, marks: bool) -> String {
        let mut s = self.sign().to_string();
        for (text, changed) in &self.parts {
            match (marks && *changed, self.kind) {
                (true, Kind::Removed) => s.push_str(&format!("[-{text}-]")),
                (true, _) => s.push_str(&format!("{{+{text}+}}")),
                (false, _) => s.push_str(text),
            }
        }
        s
    }

    /// The line with ANSI colours: names and whole lines red/green, changed spans reversed.
    pub fn painted(&self) -> String {
        let (line, span) = match self.kind {
            Kind::OldName | Kind::Removed => (OLD, OLD_SPAN),
            Kind::NewName | Kind::Added => (NEW, NEW_SPAN),
            Kind::Hunk | Kind::NoNewline => (HUNK, HUNK),
            Kind::Same | Kind::Cut | Kind::Note => return self.plain(false),
        };
        let mut s = format!("{line}{}", self.sign());
        for (text, changed) in &self.parts {
            if *changed {
                s.push_str(&format!("{span}{text}{span:#}{line}"));
            } else {
                s.push_str(text);
            }
        }
        s.push_str(&format!("{line:#}"));
        s
    }

    /// [`Line::painted`] with `colour`, else [`Line::plain`].
    pub fn show(&self, colour: bool, marks: bool) -> String {
        if colour {
            self.painted()
        } else {
            self.plain(marks)
        }
    }
}

/// Lines shown one per line.
pub fn to_text(lines: &[Line], colour: bool, marks: bool) -> String {
    lines.iter().map(|l| l.show(colour, marks) + "\n").collect()
}

/// How long a diff may look for the smallest edit before it takes a coarser one.
const DEADLINE: std::time::Duration = std::time::Duration::from_millis(500);

/// The diff of `old` against `new` (no lines when they are equal). A changed line paired with
/// its replacement keeps the changed words as spans.
pub fn diff(old: &str, new: &str, old_name: &str, new_name: &str, opts: Options) -> Vec<Line> {
    if old == new {
        return Vec::new();
    }
    // Patience falls back to Myers, whose cost grows with the product of the sizes when
    // nothing matches (80,000 golden lines against one: 15 s); past the deadline `similar`
    // settles for a coarser diff, still correct, in near-linear time.
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Patience)
        .deadline(std::time::Instant::now() + DEADLINE)
        .diff_lines(old, new);
    let (olds, news) = (diff.old_slices(), diff.new_slices());
    let mut out = vec![
        Line::new(Kind::OldName, old_name),
        Line::new(Kind::NewName, new_name),
    ];
    let mut changed = 0usize;
    for group in diff.grouped_ops(opts.context) {
        let (first, last) = (&group[0], &group[group.len() - 1]);
        let o = first.old_range().start..last.old_range().end;
        let n = first.new_range().start..last.new_range().end;
        out.push(Line::new(
            Kind::Hunk,
            format!(
                "@@ -{} +{} @@",
                range(o.start, o.len()),
                range(n.start, n.len())
            ),
        ));
        for op in &group {
            if changed >= opts.max_changed {
                break;
            }
            match *op {
                DiffOp::Equal { old_index, len, .. } => {
                    for l in &olds[old_index..old_index + len] {
                        whole(&mut out, Kind::Same, l);
                    }
                }
                DiffOp::Delete { .. } | DiffOp::Insert { .. } => {
                    let (kind, lines) = match op {
                        DiffOp::Delete { .. } => (Kind::Removed, &olds[op.old_range()]),
                        _ => (Kind::Added, &news[op.new_range()]),
                    };
                    let room = opts.max_changed - changed;
                    lines
                        .iter()
                        .take(room)
                        .for_each(|l| whole(&mut out, kind, l));
                    changed += lines.len().min(room);
                }
                DiffOp::Replace { .. } => {
                    let (a, b) = (&olds[op.old_range()], &news[op.new_range()]);
                    if a.len() == b.len() {
                        for (x, y) in a.iter().zip(b) {
                            if changed >= opts.max_changed {
                                break;
                            }
                            paired(&mut out, x, y);
                            changed += 2;
                        }
                    } else {
                        // Both sides get room when the cut falls here: the added lines
                        // matter as much as the removed ones.
                        let room = opts.max_changed.saturating_sub(changed);
                        let na = a.len().min(room - b.len().min(room / 2));
                        let nb = b.len().min(room - na);
                        a[..na]
                            .iter()
                            .for_each(|l| whole(&mut out, Kind::Removed, l));
                        b[..nb].iter().for_each(|l| whole(&mut out, Kind::Added, l));
                        changed += na + nb;
                        if na + nb < a.len() + b.len() {
                            changed = opts.max_changed;
                        }
                    }
                }
            }
        }
        if changed >= opts.max_changed {
            out.push(Line::new(
                Kind::Cut,
                format!("… (diff cut after {} changed lines)", opts.max_changed),
            ));
            break;
        }
    }
    out
}

/// A hunk range as GNU diff writes it: `start,len`, just `start` for one line.
fn range(start: usize, len: usize) -> String {
    match len {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        _ => format!("{},{len}", start + 1),
    }
}

/// `l` without its line ending.
fn text_of(l: &str) -> &str {
    l.strip_suffix('\n')
        .map(|s| s.strip_suffix('\r').unwrap_or(s))
        .unwrap_or(l)
}

fn no_newline(out: &mut Vec<Line>, l: &str) {
    if !l.ends_with('\n') {
        out.push(Line::new(Kind::NoNewline, "\\ No newline at end of file"));
    }
}

fn whole(out: &mut Vec<Line>, kind: Kind, l: &str) {
    out.push(Line::new(kind, text_of(l)));
    no_newline(out, l);
}

/// A changed line and its replacement, with the changed words as spans.
fn paired(out: &mut Vec<Line>, old: &str, new: &str) {
    let words = TextDiff::from_words(text_of(old), text_of(new));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for change in words.iter_all_changes() {
        let v = change.value();
        match change.tag() {
            ChangeTag::Equal => {
                push_part(&mut a, v, false);
                push_part(&mut b, v, false);
            }
            ChangeTag::Delete => push_part(&mut a, v, true),
            ChangeTag::Insert => push_part(&mut b, v, true),
        }
    }
    out.push(Line {
        kind: Kind::Removed,
        parts: a,
    });
    no_newline(out, old);
    out.push(Line {
        kind: Kind::Added,
        parts: b,
    });
    no_newline(out, new);
}

/// Appends `v` to `parts`, joining it with the last part when both are changed or both not.
fn push_part(parts: &mut Vec<(String, bool)>, v: &str, changed: bool) {
    match parts.last_mut() {
        Some((text, c)) if *c == changed => text.push_str(v),
        _ => parts.push((v.to_string(), changed)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: Options = Options {
        context: 2,
        max_changed: 200,
    };

    fn plain(old: &str, new: &str, marks: bool) -> String {
        to_text(&diff(old, new, "run 1", "run 2", OPTS), false, marks)
    }

    #[test]
    fn equal_texts_have_no_diff() {
        assert!(diff("a\nb\n", "a\nb\n", "x", "y", OPTS).is_empty());
    }

    #[test]
    fn changed_span_is_marked_plain() {
        let d = plain(
            "head\nat 12:00:01 ok\ntail\n",
            "head\nat 12:00:02 ok\ntail\n",
            true,
        );
        assert!(
            d.starts_with("--- run 1\n+++ run 2\n@@ -1,3 +1,3 @@\n"),
            "{d}"
        );
        assert!(d.contains("-at [-12:00:01-] ok\n"), "{d}");
        assert!(d.contains("+at {+12:00:02+} ok\n"), "{d}");
        assert!(d.contains(" head\n") && d.contains(" tail\n"), "{d}");
        // Without marks a paired line reads as in any unified diff.
        let d = plain("total 3\n", "sum 3\n", false);
        assert!(d.ends_with("@@ -1 +1 @@\n-total 3\n+sum 3\n"), "{d}");
    }

    #[test]
    fn each_changed_word_is_a_span() {
        let d = plain("a b c\n", "x y c\n", true);
        assert!(
            d.contains("-[-a-] [-b-] c\n") && d.contains("+{+x+} {+y+} c\n"),
            "{d}"
        );
        let mut parts = Vec::new();
        for (v, c) in [("a", true), (" ", true), ("b", true), (" c", false)] {
            push_part(&mut parts, v, c);
        }
        assert_eq!(
            parts,
            [("a b".to_string(), true), (" c".to_string(), false)]
        );
    }

    #[test]
    fn moved_lines_and_missing_newlines() {
        let d = plain("a\nb\nc\n", "b\na\nc\n", false);
        assert!(d.contains("\n+b\n a\n-b\n c\n"), "{d}");
        let d = plain("x\n", "x\ny", false);
        assert!(d.ends_with("+y\n\\ No newline at end of file\n"), "{d}");
    }

    #[test]
    fn colour_marks_spans() {
        let d = to_text(&diff("x 1\n", "x 2\n", "1", "2", OPTS), true, true);
        assert!(d.contains(&format!("{OLD_SPAN}1{OLD_SPAN:#}")), "{d:?}");
        assert!(!d.contains("[-"), "{d:?}");
    }

    #[test]
    fn long_diffs_are_cut() {
        let old: String = (0..10).map(|i| format!("{i}\n")).collect();
        let opts = Options {
            context: 0,
            max_changed: 4,
        };
        let d = to_text(&diff(&old, "", "a", "b", opts), false, false);
        assert!(d.ends_with("… (diff cut after 4 changed lines)\n"), "{d}");
    }
}
