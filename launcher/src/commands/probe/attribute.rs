//! `seal probe --attribute`: which entropy families make a line vary. The command runs sealed
//! (the control), then sealed with exactly one family unsealed at a time; a line belongs to a
//! family when unsealing that family alone changes it. A line that varies even fully sealed is
//! real nondeterminism (thread interleaving) or a source seal cannot reach.

use std::ffi::OsString;

use anyhow::Result;

use super::classify::{align, is_permutation, LineReport, Status};
use super::perturb::{self, Perturbation};
use crate::config::Settings;
use crate::observe::masks::MaskSet;

/// The families `--attribute` tries, one at a time.
pub const ATTRIBUTED: &[&str] = &[
    "time", "random", "pid", "host", "tempname", "hashseed", "tz", "locale", "aslr", "layout",
    "cpu",
];

/// Runs per family (and for the fully sealed control).
const RUNS: usize = 2;

/// What each run of a family gets in its environment: an unsealed family takes its value from
/// the environment, so families that would read one constant value on this machine are given
/// two distinct ones.
fn family_env(family: &str, run: usize) -> Vec<(String, String)> {
    let pick = |a: &[(&str, &str)], b: &[(&str, &str)]| {
        let v = if run == 0 { a } else { b };
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    match family {
        "hashseed" => pick(&[("PYTHONHASHSEED", "4242")], &[("PYTHONHASHSEED", "1")]),
        "tz" => pick(
            &[("TZ", "Pacific/Kiritimati")],
            &[("TZ", "America/St_Johns")],
        ),
        "locale" => pick(
            &[("LC_ALL", "C"), ("LANG", "C")],
            &[("LC_ALL", "POSIX"), ("LANG", "POSIX")],
        ),
        // Without the fixed stack layout, the environment's size moves stack addresses.
        "layout" => {
            let n = if run == 0 { 10 } else { 3000 };
            vec![(perturb::PADDING_VAR.to_string(), "x".repeat(n))]
        }
        _ => Vec::new(),
    }
}

/// Attributes every non-stable line of `lines` (from the reference output `reference`) and
/// fills in `families` and `action`. Returns notes for the user.
pub fn attribute(
    base: &Settings,
    argv: &[OsString],
    tree: &super::tree::Tree,
    masks: &MaskSet,
    reference: &[String],
    lines: &mut [LineReport],
    mut progress: impl FnMut(&str),
) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    let baseline = Perturbation::env_only("sealed", "sealed", &[]);
    let mut control = Settings {
        unseal: Vec::new(),
        ..base.clone()
    };
    control.quiet = true;
    let run_lines = |settings: &Settings, extra: &[(String, String)]| -> Result<Vec<String>> {
        match perturb::run_sealed(settings, argv, tree, &baseline, extra)? {
            Ok(o) => Ok(split_lines(&o.stdout)),
            Err(e) => anyhow::bail!("{e}"),
        }
    };
    // The control: fully sealed, RUNS times.
    progress("sealed control");
    let mut control_runs = Vec::new();
    for _ in 0..RUNS {
        control_runs.push(run_lines(&control, &[])?);
    }
    let sealed_ref = control_runs[0].clone();
    // Reference (unsealed) line -> sealed line.
    let (to_sealed, _) = align(reference, &sealed_ref, masks);
    let value_in = |run: &[String], sealed_line: usize| -> Option<String> {
        let (map, _) = align(&sealed_ref, run, masks);
        map[sealed_line].map(|j| run[j].clone())
    };
    let mut per_family: Vec<(&str, Vec<Vec<String>>)> = Vec::new();
    for fam in ATTRIBUTED {
        progress(fam);
        let settings = Settings {
            unseal: vec![fam.to_string()],
            ..control.clone()
        };
        // Address-space randomisation off is a personality flag seal sets on itself (its
        // children inherit it): for the aslr family, clear it for the duration.
        let restore = (*fam == "aslr").then(aslr_on);
        let mut runs = Vec::new();
        for r in 0..RUNS {
            runs.push(run_lines(&settings, &family_env(fam, r)));
        }
        if let Some(Some(old)) = restore {
            set_personality(old);
        }
        let runs = runs.into_iter().collect::<Result<Vec<_>>>()?;
        per_family.push((fam, runs));
    }
    for line in lines.iter_mut().filter(|l| l.status != Status::Stable) {
        let Some(s) = to_sealed[line.line - 1] else {
            line.families = Some(Vec::new());
            line.action = Some("stop: the line has no counterpart in the sealed output".into());
            continue;
        };
        let sealed_value = sealed_ref[s].clone();
        let varies_sealed = control_runs[1..]
            .iter()
            .any(|r| value_in(r, s).as_deref() != Some(sealed_value.as_str()));
        let mut fams = Vec::new();
        // A line that varies in the control cannot be pinned on one family.
        for (fam, runs) in per_family.iter().filter(|_| !varies_sealed) {
            if runs
                .iter()
                .any(|r| value_in(r, s).as_deref() != Some(sealed_value.as_str()))
            {
                fams.push(fam.to_string());
            }
        }
        let variants: Vec<&str> = line.variants.iter().map(|v| v.text.as_str()).collect();
        let action = if varies_sealed {
            "stop: varies even sealed (real nondeterminism such as thread interleaving, or a source seal cannot reach: see seal census)".to_string()
        } else if is_permutation(&variants) {
            "sort before printing".to_string()
        } else if !fams.is_empty() && value_lost(&sealed_value, &variants) {
            // Sealed, the program printed the line without its value (`ps -p $$` finding no
            // process 1000): seal does not pin this value, it loses it.
            format!(
                "investigate: sealed, the line loses its value (prints {:?}); varies with {}",
                sealed_value,
                fams.join(", ")
            )
        } else if fams.is_empty() && !line.causes.is_empty() {
            format!(
                "investigate: depends on {} (varies with {}; no entropy family)",
                line.causes.join(", "),
                line.varies_under.join(", ")
            )
        } else if fams.is_empty() {
            format!(
                "investigate: varies with {} (no entropy family)",
                line.varies_under.join(", ")
            )
        } else if line.status == Status::Volatile {
            format!("pin with seal (or mask: {})", line.patterns.join(", "))
        } else {
            "pin with seal".to_string()
        };
        if varies_sealed {
            notes.push(format!(
                "line {}: varies between fully sealed runs: `seal verify` and `seal census` show what is still unsealed",
                line.line
            ));
        }
        line.families = Some(fams);
        line.action = Some(action);
    }
    Ok(notes)
}

/// Clears ADDR_NO_RANDOMIZE on this process; returns the previous personality to restore.
fn aslr_on() -> Option<libc::c_ulong> {
    // SAFETY: personality(0xffffffff) only queries.
    let cur = unsafe { libc::personality(0xffff_ffff) };
    if cur == -1 {
        return None;
    }
    let cur = cur as libc::c_ulong;
    set_personality(cur & !(libc::ADDR_NO_RANDOMIZE as libc::c_ulong));
    Some(cur)
}

fn set_personality(p: libc::c_ulong) {
    // SAFETY: sets a flag word on this process; no memory is involved.
    unsafe {
        libc::personality(p);
    }
}

/// Is `sealed` what the unsealed `variants` print with their varying value cut out (blank, or
/// each variant's head and tail with nothing between)?
pub fn value_lost(sealed: &str, variants: &[&str]) -> bool {
    if sealed.trim().is_empty() {
        return variants.iter().any(|v| !v.trim().is_empty());
    }
    !variants.is_empty()
        && variants.iter().all(|v| {
            let (s, v) = (sealed.as_bytes(), v.as_bytes());
            let head = s.iter().zip(v).take_while(|(a, b)| a == b).count();
            let tail = s[head..]
                .iter()
                .rev()
                .zip(v.iter().rev())
                .take_while(|(a, b)| a == b)
                .count();
            v.len() > s.len() && head + tail == s.len()
        })
}

pub fn split_lines(b: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(b)
        .lines()
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::value_lost;

    #[test]
    fn a_line_printed_without_its_value_is_lost_not_pinned() {
        assert!(value_lost("", &["5361", "5362"]));
        assert!(value_lost("pid=", &["pid=5361", "pid=5362"]));
        assert!(value_lost("[] sh", &["[5361] sh", "[77] sh"]));
        assert!(!value_lost(
            " 1000   999 sh",
            &[" 5361  5300 sh", "  77  70 sh"]
        ));
        assert!(!value_lost("pid=1000", &["pid=5361", "pid=5362"]));
        assert!(!value_lost("", &["", " "]));
    }
}
