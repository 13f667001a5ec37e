//! `seal golden junit-merge A.xml B.xml -o all.xml`: the JUnit reports of the shards of a CI
//! matrix (`check --shard K/N --junit FILE` on each machine) as one file: every
//! `<testsuite>` of every input, verbatim, under one `<testsuites>` whose totals are their sums.
//! Reads what `check --junit` writes and any JUnit file whose suites are `<testsuite>` elements.

use std::fmt::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::junit::escape;
use crate::cli::GoldenJunitMergeArgs;
use crate::usage::UsageError;

/// The totals of one or more `<testsuite>` elements.
#[derive(Default)]
struct Totals {
    tests: u64,
    failures: u64,
    errors: u64,
    skipped: u64,
    time: f64,
}

pub fn run(args: &GoldenJunitMergeArgs) -> Result<ExitCode> {
    let mut suites: Vec<String> = Vec::new();
    let mut totals = Totals::default();
    for path in &args.files {
        let text = crate::files::infile::read_string(path)
            .map_err(|e| UsageError(format!("{}: cannot read: {e}", path.display())))?;
        let found =
            testsuites(&text).map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
        for (element, t) in found {
            totals.tests += t.tests;
            totals.failures += t.failures;
            totals.errors += t.errors;
            totals.skipped += t.skipped;
            totals.time += t.time;
            suites.push(element.to_string());
        }
    }
    let mut x = String::new();
    let _ = writeln!(x, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        x,
        r#"<testsuites name="{}" tests="{}" failures="{}" errors="{}" time="{:.3}">"#,
        escape(&args.name),
        totals.tests,
        totals.failures,
        totals.errors,
        totals.time
    );
    for s in &suites {
        let _ = writeln!(x, "  {s}");
    }
    let _ = writeln!(x, "</testsuites>");
    crate::files::outfile::write(&args.output, x)
        .with_context(|| format!("cannot write JUnit XML to {}", args.output.display()))?;
    say!(
        "{} suite(s) from {} file(s), {} test(s): {} failure(s), {} error(s), {} skipped -> {}",
        suites.len(),
        args.files.len(),
        totals.tests,
        totals.failures,
        totals.errors,
        totals.skipped,
        super::load::shown(&args.output)
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Every `<testsuite>` element of a JUnit document (text from its `<` to its end tag), with
/// the totals its attributes declare.
fn testsuites(text: &str) -> Result<Vec<(&str, Totals)>, String> {
    if !text.trim_start().starts_with('<') {
        return Err("not an XML file".into());
    }
    let mut out = Vec::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some(at) = find_open(rest) {
        let start = offset + at;
        let head_end = text[start..]
            .find('>')
            .ok_or("a <testsuite> tag is not closed")?
            + start;
        let head = &text[start..=head_end];
        let end = if head.ends_with("/>") {
            head_end + 1
        } else {
            text[head_end..]
                .find("</testsuite>")
                .ok_or("a <testsuite> has no </testsuite>")?
                + head_end
                + "</testsuite>".len()
        };
        out.push((&text[start..end], totals(head)?));
        offset = end;
        rest = &text[end..];
    }
    if out.is_empty() {
        return Err("no <testsuite> element (not a JUnit report)".into());
    }
    Ok(out)
}

/// Where the next `<testsuite` start tag is (not `<testsuites`).
fn find_open(s: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find("<testsuite") {
        let at = from + i;
        let next = s[at + "<testsuite".len()..].chars().next();
        if matches!(next, Some(c) if c.is_whitespace() || c == '>' || c == '/') {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// The `tests`, `failures`, `errors`, `skipped` and `time` attributes of a start tag (0 when
/// absent).
fn totals(head: &str) -> Result<Totals, String> {
    let attr = |name: &str| -> Option<&str> {
        let key = format!(" {name}=\"");
        let at = head.find(&key)? + key.len();
        head[at..].split('"').next()
    };
    let count = |name: &str| -> Result<u64, String> {
        attr(name).map_or(Ok(0), |v| {
            v.trim()
                .parse()
                .map_err(|_| format!("<testsuite {name}=\"{v}\"> is not a count"))
        })
    };
    Ok(Totals {
        tests: count("tests")?,
        failures: count("failures")?,
        errors: count("errors")?,
        skipped: count("skipped")?,
        time: attr("time")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_suite_and_sums() {
        let a = "<?xml version=\"1.0\"?>\n<testsuites name=\"x\" tests=\"2\">\n  \
                 <testsuite name=\"s (shard 1/2)\" tests=\"2\" failures=\"1\" errors=\"0\" time=\"0.5\">\n    \
                 <testcase name=\"a\"/>\n  </testsuite>\n  <testsuite name=\"e\" tests=\"0\"/>\n</testsuites>\n";
        let found = testsuites(a).unwrap();
        assert_eq!(found.len(), 2);
        assert!(found[0].0.starts_with("<testsuite name=\"s (shard 1/2)\""));
        assert!(found[0].0.ends_with("</testsuite>"));
        assert_eq!((found[0].1.tests, found[0].1.failures), (2, 1));
        assert_eq!(found[1].0, "<testsuite name=\"e\" tests=\"0\"/>");
        assert!(testsuites("{}").is_err());
        assert!(testsuites("<testsuites></testsuites>").is_err());
        assert!(testsuites("<testsuite tests=\"many\"></testsuite>").is_err());
    }
}
