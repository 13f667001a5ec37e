//! Line diffs for people: which lines moved between two outputs, with the changed spans inside
//! a changed line highlighted (ANSI colour on a terminal, `[-old-]{+new+}` marks otherwise).
//! Used by `seal verify` (first differing run against run 1) and `seal probe`.

use similar::{ChangeTag, DiffOp, TextDiff};

const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const DIM: &str = "\x1b[2m";
const REV_RED: &str = "\x1b[1;41;97m";
const REV_GREEN: &str = "\x1b[1;42;30m";
const RESET: &str = "\x1b[0m";

/// How to show a diff.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// ANSI colours (a terminal) instead of plain `[-…-]`/`{+…+}` marks.
    pub color: bool,
    /// Unchanged lines shown around each change.
    pub context: usize,
    /// Largest number of changed lines shown before the rest is summarised.
    pub max_lines: usize,
}

impl Style {
    pub fn plain() -> Style {
        Style {
            color: false,
            context: 2,
            max_lines: 200,
        }
    }

    /// Colour as the colour policy says for stdout (see `term::colour`).
    pub fn for_stdout() -> Style {
        Style {
            color: crate::term::colour_stdout(),
            ..Style::plain()
        }
    }
}

/// A unified line diff of `old` against `new` with headers `--- old_name` / `+++ new_name` and
/// `@@ -a,b +c,d @@` hunks. A changed line paired with its replacement shows the changed spans.
/// Empty when the texts are equal.
pub fn render(old: &str, new: &str, old_name: &str, new_name: &str, style: Style) -> String {
    if old == new {
        return String::new();
    }
    let diff = TextDiff::configure()
        .algorithm(similar::Algorithm::Patience)
        .diff_lines(old, new);
    let old_lines: Vec<&str> = diff.old_slices().to_vec();
    let new_lines: Vec<&str> = diff.new_slices().to_vec();
    let mut out = String::new();
    let (pre_old, pre_new) = if style.color {
        (format!("{RED}--- "), format!("{GREEN}+++ "))
    } else {
        ("--- ".to_string(), "+++ ".to_string())
    };
    let reset = if style.color { RESET } else { "" };
    out.push_str(&format!(
        "{pre_old}{old_name}{reset}\n{pre_new}{new_name}{reset}\n"
    ));
    let mut shown = 0usize;
    for group in diff.grouped_ops(style.context) {
        let (first, last) = (&group[0], &group[group.len() - 1]);
        let o = first.old_range().start..last.old_range().end;
        let n = first.new_range().start..last.new_range().end;
        let header = format!(
            "@@ -{},{} +{},{} @@",
            o.start + 1,
            o.len(),
            n.start + 1,
            n.len()
        );
        if style.color {
            out.push_str(&format!("{DIM}{header}{RESET}\n"));
        } else {
            out.push_str(&header);
            out.push('\n');
        }
        for op in &group {
            if shown >= style.max_lines {
                break;
            }
            match *op {
                DiffOp::Equal { old_index, len, .. } => {
                    for l in &old_lines[old_index..old_index + len] {
                        out.push(' ');
                        out.push_str(&line_text(l));
                        out.push('\n');
                    }
                }
                DiffOp::Delete {
                    old_index, old_len, ..
                } => {
                    for l in &old_lines[old_index..old_index + old_len] {
                        push_whole(&mut out, '-', l, style);
                        shown += 1;
                    }
                }
                DiffOp::Insert {
                    new_index, new_len, ..
                } => {
                    for l in &new_lines[new_index..new_index + new_len] {
                        push_whole(&mut out, '+', l, style);
                        shown += 1;
                    }
                }
                DiffOp::Replace {
                    old_index,
                    old_len,
                    new_index,
                    new_len,
                } => {
                    let olds = &old_lines[old_index..old_index + old_len];
                    let news = &new_lines[new_index..new_index + new_len];
                    if old_len == new_len {
                        // Paired lines: show each pair with its changed spans.
                        for (a, b) in olds.iter().zip(news) {
                            let (ma, mb) = spans(&line_text(a), &line_text(b), style.color);
                            out.push_str(&format!("{}{ma}{reset}\n", sign('-', style)));
                            out.push_str(&format!("{}{mb}{reset}\n", sign('+', style)));
                            shown += 2;
                        }
                    } else {
                        for l in olds {
                            push_whole(&mut out, '-', l, style);
                        }
                        for l in news {
                            push_whole(&mut out, '+', l, style);
                        }
                        shown += old_len + new_len;
                    }
                }
            }
        }
        if shown >= style.max_lines {
            out.push_str(&format!(
                "… (diff cut after {} changed lines)\n",
                style.max_lines
            ));
            break;
        }
    }
    out
}

fn line_text(l: &str) -> String {
    l.strip_suffix('\n')
        .map(|s| s.strip_suffix('\r').unwrap_or(s))
        .unwrap_or(l)
        .to_string()
}

fn sign(c: char, style: Style) -> String {
    match (style.color, c) {
        (true, '-') => format!("{RED}-"),
        (true, _) => format!("{GREEN}+"),
        (false, c) => c.to_string(),
    }
}

fn push_whole(out: &mut String, c: char, l: &str, style: Style) {
    let reset = if style.color { RESET } else { "" };
    let missing_nl = if l.ends_with('\n') {
        ""
    } else {
        " (no newline at end)"
    };
    out.push_str(&format!(
        "{}{}{reset}{missing_nl}\n",
        sign(c, style),
        line_text(l)
    ));
}

/// The two sides of a changed line with the changed words marked.
pub fn spans(old: &str, new: &str, color: bool) -> (String, String) {
    let diff = TextDiff::from_words(old, new);
    let (mut a, mut b) = (String::new(), String::new());
    for change in diff.iter_all_changes() {
        let v = change.value();
        match change.tag() {
            ChangeTag::Equal => {
                a.push_str(v);
                b.push_str(v);
            }
            ChangeTag::Delete => a.push_str(&mark(v, color, true)),
            ChangeTag::Insert => b.push_str(&mark(v, color, false)),
        }
    }
    (merge_marks(a), merge_marks(b))
}

fn mark(v: &str, color: bool, old: bool) -> String {
    match (color, old) {
        (true, true) => format!("{REV_RED}{v}{RESET}{RED}"),
        (true, false) => format!("{REV_GREEN}{v}{RESET}{GREEN}"),
        (false, true) => format!("[-{v}-]"),
        (false, false) => format!("{{+{v}+}}"),
    }
}

/// `[-a-][- -][-b-]` → `[-a b-]`: adjacent marks read as one span.
fn merge_marks(s: String) -> String {
    s.replace("-][-", "").replace("+}{+", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_have_no_diff() {
        assert_eq!(render("a\nb\n", "a\nb\n", "x", "y", Style::plain()), "");
    }

    #[test]
    fn changed_span_is_marked_plain() {
        let d = render(
            "head\nat 12:00:01 ok\ntail\n",
            "head\nat 12:00:02 ok\ntail\n",
            "run 1",
            "run 2",
            Style::plain(),
        );
        assert!(
            d.starts_with("--- run 1\n+++ run 2\n@@ -1,3 +1,3 @@\n"),
            "{d}"
        );
        assert!(d.contains("-at [-12:00:01-] ok\n"), "{d}");
        assert!(d.contains("+at {+12:00:02+} ok\n"), "{d}");
        assert!(d.contains(" head\n") && d.contains(" tail\n"), "{d}");
    }

    #[test]
    fn moved_lines_show_as_delete_and_insert() {
        let d = render("a\nb\nc\n", "b\na\nc\n", "1", "2", Style::plain());
        assert!(d.contains("\n+b\n a\n-b\n c\n"), "{d}");
    }

    #[test]
    fn colour_uses_ansi() {
        let style = Style {
            color: true,
            ..Style::plain()
        };
        let d = render("x 1\n", "x 2\n", "1", "2", style);
        assert!(d.contains("\x1b[1;41;97m1"), "{d:?}");
    }
}
