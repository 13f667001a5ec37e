//! Decoding the run's census slots (in the run table file, after the pid table): one
//! [`Image`] per process image, with its counts, modules, unsealed events and Python frames,
//! as the shim wrote them; or only the unsealed events, when no census was asked for.

use std::mem::offset_of;
use std::path::Path;

use anyhow::{Context, Result};
use seal_abi::{
    split_census_key, unsealed, CensusFile, ModuleRecord, CENSUS_MAGIC, MAX_MODULES, MAX_UNSEALED,
};

use super::bytes::{i32_at, u32_at, u64_at};

/// One process image's census slot, decoded.
#[derive(Debug, Clone)]
pub struct Image {
    pub vpid: i32,
    pub parent_vpid: i32,
    pub gen: u32,
    pub exe: String,
    pub argv: Vec<String>,
    pub unsealed: Vec<(u32, String)>,
    /// `(return address, fid, detail, count)`
    pub counts: Vec<(u64, u8, u8, u64)>,
    /// Calls counted without a caller (table full), per fid.
    pub overflow: Vec<(u8, u64)>,
    pub modules: Vec<Module>,
    /// CPython version and calls with Python frames: `(address, fid, detail, frames)`.
    pub py_version: Option<u32>,
    pub py_counts: Vec<(u64, u8, u8, crate::census::python::PyCount)>,
}

#[derive(Debug, Clone)]
pub struct Module {
    pub start: u64,
    pub end: u64,
    pub bias: u64,
    pub path: String,
}

/// The `unsealed` events of every image in a run directory, as warning lines, reading only the
/// file headers: what `seal run` needs when no census was asked for (no symbol tables, no
/// counter tables, so the launcher adds next to nothing to a short command's run time).
pub fn unsealed_warnings_in(dir: &Path, root: Option<&[u8]>) -> Result<Vec<String>> {
    use std::os::unix::fs::FileExt;
    // Each process's events (its images' slots share its virtual pid), and its executable.
    let mut by_vpid: std::collections::BTreeMap<i32, (String, Vec<(String, String)>)> =
        Default::default();
    if let Some(detail) = root {
        let kind = unsealed::name(unsealed::STATIC_SUPERVISED).to_string();
        let e = by_vpid.entry(seal_abi::ROOT_VPID).or_default();
        e.1.push((kind, String::from_utf8_lossy(detail).into_owned()));
    }
    let (file, slots) = census_slots(dir)?;
    for off in slots {
        // The header first (it holds the causes every image may have); the events (16 KiB
        // past the text) only when there are some.
        let mut b = vec![0u8; offset_of!(CensusFile, head_slots)];
        if file.read_exact_at(&mut b, off).is_err()
            || u64_at(&b, offset_of!(CensusFile, magic)) != CENSUS_MAGIC
        {
            continue;
        }
        b.resize(offset_of!(CensusFile, more_modules), 0);
        let events = offset_of!(CensusFile, unsealed);
        if u32_at(&b, offset_of!(CensusFile, n_unsealed)) > 0
            && file
                .read_exact_at(&mut b[events..], off + events as u64)
                .is_err()
        {
            continue;
        }
        let vpid = i32_at(&b, offset_of!(CensusFile, vpid));
        let text = offset_of!(CensusFile, text);
        let exe_len =
            (u32_at(&b, offset_of!(CensusFile, exe_len)) as usize).min(seal_abi::EXE_BYTES);
        let e = by_vpid.entry(vpid).or_default();
        let events = unsealed_events(&b);
        // The executable a `go-runtime-random` line names: its image's (past the header).
        if e.0.is_empty() || events.iter().any(|(k, _)| *k == unsealed::GO_RANDOM) {
            let mut exe = vec![0u8; exe_len];
            if file.read_exact_at(&mut exe, off + text as u64).is_ok() {
                e.0 = String::from_utf8_lossy(&exe).into_owned();
            }
        }
        for (kind, detail) in events {
            if kind != unsealed::SCOPED_OUT && !is_machine_event(kind, &detail) {
                e.1.push((unsealed::name(kind).to_string(), detail));
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for (exe, events) in by_vpid.values() {
        seen.extend(process_lines(
            exe,
            events.iter().map(|(k, d)| (k.as_str(), d.as_str())),
        ));
    }
    Ok(seen.into_iter().collect())
}

/// The warning lines of one process (executable `exe`), from its `(kind, detail)` events
/// (families off and machine limits are not lines): a Go image's `go-runtime-random` event
/// goes into its `partly sealed` line (or, with no such line of a Go program, is a line of its
/// own), and so does the random family left unsealed.
pub(super) fn process_lines<'a>(
    exe: &str,
    events: impl Iterator<Item = (&'a str, &'a str)> + Clone,
) -> Vec<String> {
    use seal_abi::supervised::go_rand::outcome;
    let go_random = unsealed::name(unsealed::GO_RANDOM);
    let family_off = unsealed::name(unsealed::FAMILY_OFF);
    // A line that says what stays real of a Go runtime's random numbers.
    let go_partial = |(k, d): (&str, &str)| {
        k == unsealed::name(unsealed::GO_SUPERVISED)
            || (k == unsealed::name(unsealed::STATIC_SUPERVISED)
                && crate::run::static_image::is_go_program(d))
    };
    let unsealed_random = events
        .clone()
        .any(|(k, d)| k == family_off && d == "random")
        .then(|| format!("{}{}{}", outcome::NONE, outcome::BECAUSE, outcome::UNSEALED));
    let random = unsealed_random.or_else(|| {
        let recorded = events.clone().find(|(k, _)| *k == go_random);
        recorded.map(|(_, d)| d.to_string())
    });
    let any_partial = events.clone().any(go_partial);
    let mut lines = Vec::new();
    for (kind, detail) in events {
        if kind == family_off {
            continue;
        }
        if kind == go_random {
            if !any_partial {
                lines.push(format!("not sealed ({kind}): {exe}: {detail}"));
            }
            continue;
        }
        lines.push(warning_line(kind, detail, random.as_deref()));
    }
    lines
}

/// The run table file of a run directory and the offsets of the census slots its images
/// claimed (a slot whose image never wrote its header reads as zeros and is skipped).
fn census_slots(dir: &Path) -> Result<(std::fs::File, Vec<u64>)> {
    use std::os::unix::fs::FileExt;
    let path = dir.join(seal_abi::RUN_TABLE_NAME);
    let file = std::fs::File::open(&path)
        .with_context(|| format!("cannot read the run table {}", path.display()))?;
    let mut head = [0u8; 24];
    file.read_exact_at(&mut head, 0)
        .with_context(|| format!("cannot read the run table {}", path.display()))?;
    let pid_max = u32_at(&head, offset_of!(seal_abi::RunTable, pid_max)) as usize;
    let next = u32_at(&head, offset_of!(seal_abi::RunTable, census_next)) as usize;
    let cap = u32_at(&head, offset_of!(seal_abi::RunTable, census_cap)) as usize;
    let slots = (0..next.min(cap))
        .map(|k| seal_abi::RunTable::census_offset(pid_max, k) as u64)
        .collect();
    Ok((file, slots))
}

/// The unsealed events of a census slot, `(kind, detail)`: the families off and the causes of
/// a `cpu` trap (bits of the header), then the recorded events.
fn unsealed_events(b: &[u8]) -> Vec<(u32, String)> {
    let off = u32_at(b, offset_of!(CensusFile, families_off));
    let families = seal_abi::settings::FAMILIES
        .iter()
        .enumerate()
        .filter(move |(i, _)| off >> i & 1 == 1)
        .map(|(_, f)| (unsealed::FAMILY_OFF, f.name.to_string()));
    let cpu = u32_at(b, offset_of!(CensusFile, cpu_unsealed));
    let causes = unsealed::CPU_TRAP_CAUSES
        .iter()
        .enumerate()
        .filter(move |(i, _)| cpu >> i & 1 == 1)
        .map(|(_, t)| (unsealed::CPU_TRAP, t.to_string()));
    let ev_size = std::mem::size_of::<seal_abi::UnsealedEvent>();
    let n = (u32_at(b, offset_of!(CensusFile, n_unsealed)) as usize).min(MAX_UNSEALED);
    let events = (0..n).filter_map(|i| {
        let base = offset_of!(CensusFile, unsealed) + i * ev_size;
        let kind = u32_at(b, base);
        let len = (u32_at(b, base + 4) as usize).min(248);
        let detail = String::from_utf8_lossy(&b[base + 8..base + 8 + len]).into_owned();
        (kind != 0).then_some((kind, detail))
    });
    families.chain(causes).chain(events).collect()
}

/// A `cpu-trap-unavailable` event whose cause is the machine, not the program: said once by
/// `seal census` and `seal doctor`, never on every run's stderr.
fn is_machine_event(kind: u32, detail: &str) -> bool {
    kind == unsealed::CPU_TRAP && unsealed::is_machine_cause(detail)
}

/// The line of one event; `random`: what its process's census says stayed per thread of a
/// Go image's random numbers, for a `partly sealed` line.
pub(super) fn warning_line(kind: &str, detail: &str, random: Option<&str>) -> String {
    if kind == unsealed::name(unsealed::STATIC_SUPERVISED) {
        return crate::run::static_image::partly_sealed_line(detail, random);
    }
    if kind == unsealed::name(unsealed::GO_SUPERVISED) {
        return crate::run::static_image::go_line(detail, random);
    }
    if kind == unsealed::name(unsealed::TMP_LEFTOVER) {
        return format!(
            "not sealed ({kind}): {detail} was there before the run (left by an earlier one?): \
             a temp name taken instead of it, what the program draws after that, or what it \
             finds there differ from a run without it (--private-tmp gives each run an empty \
             /tmp)"
        );
    }
    format!("not sealed ({kind}): {detail}")
}

/// Decodes one census slot (`None` if its header never got written).
fn read_image(b: &[u8]) -> Option<Image> {
    if b.len() < std::mem::size_of::<CensusFile>()
        || u64_at(b, offset_of!(CensusFile, magic)) != CENSUS_MAGIC
    {
        return None;
    }
    let text_off = offset_of!(CensusFile, text);
    let text = &b[text_off..text_off + seal_abi::TEXT_BYTES];
    let exe_len = (u32_at(b, offset_of!(CensusFile, exe_len)) as usize).min(seal_abi::EXE_BYTES);
    let exe = String::from_utf8_lossy(&text[..exe_len]).into_owned();
    let argv_len = (u32_at(b, offset_of!(CensusFile, argv_len)) as usize).min(seal_abi::ARGV_BYTES);
    let argv_bytes = &text[exe_len..exe_len + argv_len];
    let argv = argv_bytes
        .strip_suffix(b"\0")
        .unwrap_or(argv_bytes)
        .split(|&c| c == 0)
        .filter(|_| argv_len > 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();

    let unsealed = unsealed_events(b);

    let n_modules = (u32_at(b, offset_of!(CensusFile, n_modules)) as usize).min(MAX_MODULES);
    let mut modules = Vec::new();
    for i in 0..n_modules {
        let base = CensusFile::module_offset(i);
        let name_off = u32_at(b, base + offset_of!(ModuleRecord, name_off)) as usize;
        let name_len = u32_at(b, base + offset_of!(ModuleRecord, name_len)) as usize;
        let name = text.get(name_off..name_off + name_len).unwrap_or(&[]);
        modules.push(Module {
            start: u64_at(b, base + offset_of!(ModuleRecord, start)),
            end: u64_at(b, base + offset_of!(ModuleRecord, end)),
            bias: u64_at(b, base + offset_of!(ModuleRecord, bias)),
            path: String::from_utf8_lossy(name).into_owned(),
        });
    }

    let mut counts = Vec::new();
    let mut slot_keys = vec![0u64; CensusFile::ALL_SLOTS];
    for (i, k) in slot_keys.iter_mut().enumerate() {
        let at = CensusFile::slot_offset(i);
        let key = u64_at(b, at);
        let count = u64_at(b, at + 8);
        *k = key;
        if key != 0 && count != 0 {
            let (addr, fid, detail) = split_census_key(key);
            counts.push((addr, fid, detail, count));
        }
    }
    let py = super::python::read(b);
    let py_version = py.as_ref().map(|p| p.version);
    let py_counts = py
        .map(|p| p.counts)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| {
            let key = *slot_keys.get(c.slot)?;
            let (addr, fid, detail) = split_census_key(key);
            (key != 0).then_some((addr, fid, detail, c))
        })
        .collect();
    let ov_off = offset_of!(CensusFile, overflow);
    let overflow = (0..256usize)
        .map(|i| (i as u8, u64_at(b, ov_off + i * 8)))
        .filter(|&(_, c)| c != 0)
        .collect();
    Some(Image {
        vpid: i32_at(b, offset_of!(CensusFile, vpid)),
        parent_vpid: i32_at(b, offset_of!(CensusFile, parent_vpid)),
        gen: u32_at(b, offset_of!(CensusFile, gen)),
        exe,
        argv,
        unsealed,
        counts,
        overflow,
        modules,
        py_version,
        py_counts,
    })
}

/// Every image in a run directory, ordered by (vpid, generation).
pub fn read_images(dir: &Path) -> Result<Vec<Image>> {
    use std::os::unix::fs::FileExt;
    let mut images = Vec::new();
    let (file, slots) = census_slots(dir)?;
    let mut b = vec![0u8; std::mem::size_of::<CensusFile>()];
    for off in slots {
        file.read_exact_at(&mut b, off)
            .with_context(|| format!("cannot read the census slot at {off} of the run table"))?;
        if let Some(mut img) = read_image(&b) {
            if is_trampoline(&img, dir) {
                img.drop_calls();
            }
            images.push(img);
        }
    }
    images.sort_by_key(|i| (i.vpid, i.gen));
    Ok(images)
}

/// Is `img` seal's own trampoline in run `dir` (`RUN_DIR/seal __exec-static PATH ...`), which
/// execs a static root the launcher could not exec itself (a launcher running other threads:
/// `golden check`'s workers, `--jobs`)? Its calls are seal's, not the command's: its `execv`
/// of the program and a `poll` of its own start were counted as the root's, so a golden
/// recorded in one thread (the launcher's child execs the root) met a census drift
/// `exec/execv 0 -> 1` at every `golden check`.
fn is_trampoline(img: &Image, dir: &Path) -> bool {
    use seal_abi::supervised::{EXEC_STATIC_ARG, SUPERVISOR_LINK};
    img.argv.get(1).map(String::as_str) == Some(EXEC_STATIC_ARG)
        && img.argv.first().map(Path::new) == Some(&dir.join(SUPERVISOR_LINK))
}

impl Image {
    /// Forgets the image's counted calls; what it says unsealed stays.
    fn drop_calls(&mut self) {
        self.counts.clear();
        self.overflow.clear();
        self.py_counts.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_u32(b: &mut [u8], off: usize, v: u32) {
        b[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }

    #[test]
    fn only_the_run_directorys_trampoline_is_seals_own() {
        let dir = Path::new("/dev/shm/seal-run-1");
        let img = |argv: &[&str]| Image {
            vpid: 1000,
            parent_vpid: 999,
            gen: 0,
            exe: "/usr/bin/seal".into(),
            argv: argv.iter().map(|a| a.to_string()).collect(),
            unsealed: vec![(1, "x".into())],
            counts: vec![(1, 2, 0, 1)],
            overflow: vec![(2, 1)],
            modules: Vec::new(),
            py_version: None,
            py_counts: Vec::new(),
        };
        let t = img(&[
            "/dev/shm/seal-run-1/seal",
            "__exec-static",
            "/bin/prog",
            "prog",
        ]);
        assert!(is_trampoline(&t, dir));
        // Another run's, or a command that happens to take that argument.
        assert!(!is_trampoline(
            &img(&["/dev/shm/seal-run-2/seal", "__exec-static", "/bin/prog"]),
            dir
        ));
        assert!(!is_trampoline(&img(&["/bin/prog", "__exec-static"]), dir));
        let mut t = t;
        t.drop_calls();
        assert!(t.counts.is_empty() && t.overflow.is_empty());
        assert_eq!(t.unsealed.len(), 1, "what it says unsealed stays");
    }

    /// The families off and the cpu causes are header bits, read back as the events they
    /// stand for, before the recorded events.
    #[test]
    fn header_bits_read_as_unsealed_events() {
        let mut b = vec![0u8; offset_of!(CensusFile, more_modules)];
        let fams = seal_abi::settings::FAMILIES;
        let time = fams.iter().position(|f| f.name == "time").unwrap();
        put_u32(&mut b, offset_of!(CensusFile, families_off), 1 << time);
        put_u32(
            &mut b,
            offset_of!(CensusFile, cpu_unsealed),
            unsealed::cpu_cause::NO_CPUID_FAULTING | unsealed::cpu_cause::GO_PROGRAM,
        );
        let ev = offset_of!(CensusFile, unsealed);
        put_u32(&mut b, offset_of!(CensusFile, n_unsealed), 1);
        put_u32(&mut b, ev, unsealed::SETUID);
        put_u32(&mut b, ev + 4, 3);
        b[ev + 8..ev + 11].copy_from_slice(b"su!");
        let got = unsealed_events(&b);
        let want = vec![
            (unsealed::FAMILY_OFF, "time".to_string()),
            (unsealed::CPU_TRAP, unsealed::CPU_TRAP_CAUSES[1].to_string()),
            (unsealed::CPU_TRAP, unsealed::CPU_TRAP_CAUSES[2].to_string()),
            (unsealed::SETUID, "su!".to_string()),
        ];
        assert_eq!(got, want);
    }

    /// A `go-runtime-random` event goes into its process's Go `partly sealed` line; with no
    /// such line (a non-Go image's line, or none) it is a line of its own, naming the
    /// executable; the random family left unsealed is said as such.
    #[test]
    fn a_go_images_random_outcome_is_said_once_where_it_belongs() {
        use seal_abi::supervised::go_rand::outcome;
        let failed = format!("{}{}{}", outcome::NONE, outcome::BECAUSE, outcome::MMAP);
        let (go, random) = ("go-runtime-supervised", "go-runtime-random");
        let lines = process_lines(
            "/x/p",
            [(go, "/x/p"), (random, failed.as_str())].into_iter(),
        );
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("partly sealed (go-runtime-supervised): /x/p"));
        assert!(lines[0].contains(&format!("not redirected: {}", outcome::MMAP)));
        let lines = process_lines("/x/p", [(go, "/x/p")].into_iter());
        assert!(lines[0].contains("real: select order"), "{lines:?}");
        let off = [(go, "/x/p"), ("family-off", "random")];
        let lines = process_lines("/x/p", off.into_iter());
        assert!(lines[0].contains(outcome::UNSEALED), "{lines:?}");
        // A static shell's line (not a Go program) and the Go image it exec'd.
        let shell = ("static-binary-supervised", "/nonexistent/sh");
        let lines = process_lines("/x/p", [shell, (random, failed.as_str())].into_iter());
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines.contains(&format!("not sealed ({random}): /x/p: {failed}")));
    }
}
