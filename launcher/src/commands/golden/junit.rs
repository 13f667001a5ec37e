//! JUnit XML for CI systems: one `<testcase>` per golden case; a changed output is a
//! `<failure>`, a case that could not be checked (invalid golden file, seal failure) an `<error>`.

use std::fmt::Write;
use std::time::Duration;

pub enum Verdict {
    Passed,
    Failed { message: String, detail: String },
    Error { message: String, detail: String },
}

impl Verdict {
    /// A failure whose detail is its message.
    pub fn failed(message: String) -> Verdict {
        Verdict::Failed {
            detail: message.clone(),
            message,
        }
    }

    /// An error whose detail is its message.
    pub fn error(message: String) -> Verdict {
        Verdict::Error {
            detail: message.clone(),
            message,
        }
    }
}

pub struct TestCase {
    pub name: String,
    pub time: Duration,
    pub verdict: Verdict,
    /// Notes (census drift, changed settings), as system-out.
    pub notes: Vec<String>,
}

/// Escapes text for XML content and attributes; drops characters XML 1.0 cannot carry.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// How many of `verdicts` are failures, and how many errors.
pub fn tally<'a>(verdicts: impl Iterator<Item = &'a Verdict>) -> (usize, usize) {
    verdicts.fold((0, 0), |(f, e), v| match v {
        Verdict::Failed { .. } => (f + 1, e),
        Verdict::Error { .. } => (f, e + 1),
        Verdict::Passed => (f, e),
    })
}

/// A `<testsuites>` of one `<testsuite>` named `suite`; each case's classname is `classname`
/// (the same in every shard, so a CI tool keeps a case's history when the matrix changes).
pub fn render(suite: &str, classname: &str, cases: &[TestCase], total: Duration) -> String {
    let (failures, errors) = tally(cases.iter().map(|c| &c.verdict));
    let mut x = String::new();
    let _ = writeln!(x, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let head = format!(
        r#"name="{}" tests="{}" failures="{failures}" errors="{errors}" time="{:.3}""#,
        escape(suite),
        cases.len(),
        total.as_secs_f64()
    );
    let _ = writeln!(x, "<testsuites {head}>");
    let _ = writeln!(x, r#"  <testsuite {head} skipped="0">"#);
    for c in cases {
        let attrs = format!(
            r#"classname="{}" name="{}" time="{:.3}""#,
            escape(classname),
            escape(&c.name),
            c.time.as_secs_f64()
        );
        let body = match &c.verdict {
            Verdict::Passed => String::new(),
            Verdict::Failed { message, detail } => format!(
                "      <failure type=\"golden-mismatch\" message=\"{}\">{}</failure>\n",
                escape(message),
                escape(detail)
            ),
            Verdict::Error { message, detail } => format!(
                "      <error type=\"golden-error\" message=\"{}\">{}</error>\n",
                escape(message),
                escape(detail)
            ),
        };
        let out = if c.notes.is_empty() {
            String::new()
        } else {
            format!(
                "      <system-out>{}</system-out>\n",
                escape(&c.notes.join("\n"))
            )
        };
        if body.is_empty() && out.is_empty() {
            let _ = writeln!(x, "    <testcase {attrs}/>");
        } else {
            let _ = write!(x, "    <testcase {attrs}>\n{body}{out}    </testcase>\n");
        }
    }
    let _ = writeln!(x, "  </testsuite>");
    let _ = writeln!(x, "</testsuites>");
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_failing_case_and_escapes() {
        let x = render(
            "seal golden",
            "seal golden",
            &[
                TestCase {
                    name: "ok-case".into(),
                    time: Duration::from_millis(5),
                    verdict: Verdict::Passed,
                    notes: vec![],
                },
                TestCase {
                    name: "bad<case>".into(),
                    time: Duration::from_millis(5),
                    verdict: Verdict::Failed {
                        message: "stdout differs".into(),
                        detail: "-a & b\n+\u{1b}[0m".into(),
                    },
                    notes: vec!["census drift: time/time 1 -> 2".into()],
                },
            ],
            Duration::from_millis(10),
        );
        assert!(x.contains(r#"tests="2" failures="1" errors="0""#), "{x}");
        assert!(x.contains(r#"name="bad&lt;case&gt;""#), "{x}");
        assert!(x.contains("-a &amp; b\n+\\x1b[0m"), "{x}");
        assert!(x.contains(r#"<testcase classname="seal golden" name="ok-case" time="0.005"/>"#));
    }
}
