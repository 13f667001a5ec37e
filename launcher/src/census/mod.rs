//! Reading side of the runtime census: turns the run's per-image census slots (in the run
//! table file, [`seal_abi::RunTable::census_offset`], decoded by `slots`) into one [`Census`]
//! (the JSON document of `--census FILE`), merged per virtual pid, with every raw return
//! address resolved to the object (and nearest symbol) that made the call.

mod bytes;
pub mod python;
mod slots;
pub mod symbols;

pub use slots::unsealed_warnings_in;
use slots::{process_lines, read_images, Image, Module};

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::mem::offset_of;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;

use anyhow::{Context, Result};
use seal_abi::{unsealed, Fid, FUNCTIONS};
use serde::{Deserialize, Serialize};

pub use crate::census::python::Frame;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Census {
    pub version: u32,
    pub command: Vec<String>,
    pub processes: Vec<Process>,
    pub totals: Vec<Total>,
    /// What this machine (CPU, hypervisor, kernel) could not seal for any process, each once
    /// (the processes' `unsealed` lists hold them too): docs/census.md, `seal doctor`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machine: Vec<Unsealed>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Process {
    pub vpid: i32,
    pub parent_vpid: Option<i32>,
    pub exe: String,
    pub argv: Vec<String>,
    /// Executables of earlier images of this process (before it called exec), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub execs: Vec<String>,
    pub exit: Option<Exit>,
    pub calls: Vec<Call>,
    pub unsealed: Vec<Unsealed>,
    /// CPython version of a process whose Python frames were recorded (docs/census.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Exit {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Call {
    pub family: String,
    pub symbol: String,
    pub detail: Option<String>,
    pub count: u64,
    pub callers: Vec<Caller>,
    /// The calls made while a Python thread ran Python code, per Python frame.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub python: Vec<PyCall>,
}

/// Calls of one function made under one Python frame, from one native caller.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct PyCall {
    /// The innermost frame in the user's own code (`None`: every frame was library code).
    pub user: Option<Frame>,
    /// The innermost Python frame, when it is not `user` (library code between them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub innermost: Option<Frame>,
    /// The innermost frame is the import machinery or start-up (interpreter bookkeeping).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub import: bool,
    /// The native caller, as in [`Caller`].
    pub object: String,
    pub symbol: Option<String>,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Caller {
    pub object: String,
    pub symbol: Option<String>,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Unsealed {
    pub kind: String,
    pub detail: String,
}

impl Unsealed {
    /// A limit of the machine (CPU, hypervisor, kernel), not of the program.
    pub fn is_machine(&self) -> bool {
        self.kind == unsealed::name(unsealed::CPU_TRAP) && unsealed::is_machine_cause(&self.detail)
    }

    /// Whether the process is partly sealed (a supervised static or Go image: most calls
    /// served, what the detail lists stays real) rather than not sealed at all.
    pub fn is_partial(&self) -> bool {
        self.kind == unsealed::name(unsealed::STATIC_SUPERVISED)
            || self.kind == unsealed::name(unsealed::GO_SUPERVISED)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Total {
    pub family: String,
    pub symbol: String,
    pub count: u64,
}

impl Total {
    /// Totals from counts per (family, symbol).
    pub fn list(counts: BTreeMap<(String, String), u64>) -> Vec<Total> {
        counts
            .into_iter()
            .map(|((family, symbol), count)| Total {
                family,
                symbol,
                count,
            })
            .collect()
    }
}

/// Wait statuses recorded in the run table by sealed parents that reaped their children.
fn reaped_statuses(dir: &Path) -> BTreeMap<i32, i32> {
    let mut out = BTreeMap::new();
    use std::os::unix::fs::FileExt;
    // The table only: the census slots follow it in the same (sparse, large) file.
    let mut b = vec![0u8; std::mem::size_of::<seal_abi::RunTable>()];
    let Ok(file) = std::fs::File::open(dir.join(seal_abi::RUN_TABLE_NAME)) else {
        return out;
    };
    if file.read_exact_at(&mut b, 0).is_err() {
        return out;
    }
    let base = offset_of!(seal_abi::RunTable, status_of);
    for vpid in 0..seal_abi::VPID_LIMIT {
        if let Some(w) = b.get(base + vpid * 4..base + vpid * 4 + 4) {
            let v = i32::from_le_bytes(w.try_into().unwrap());
            if v != 0 {
                out.insert(vpid as i32, v - 1);
            }
        }
    }
    out
}

fn exit_of_wait_status(ws: i32) -> Exit {
    let st = ExitStatus::from_raw(ws);
    Exit {
        code: st.code(),
        signal: st.signal(),
    }
}

/// Resolves a return address to `(object path, nearest symbol)`.
pub fn resolve_caller(
    modules: &[Module],
    addr: u64,
    symbols: &mut crate::census::symbols::SymbolCache,
) -> (String, Option<String>) {
    // The return address points just after the call; look up the call instruction itself.
    let probe = addr.saturating_sub(1);
    match modules
        .iter()
        .filter(|m| m.start <= probe && probe < m.end)
        .max_by_key(|m| m.start)
    {
        Some(m) => (
            m.path.clone(),
            symbols.lookup(&m.path, probe.wrapping_sub(m.bias)),
        ),
        None => ("[unknown]".to_string(), None),
    }
}

/// `(object path, nearest symbol)` of a caller.
type CallerId = (String, Option<String>);
/// Calls of one `(fid, detail)`, per caller.
type CallerCounts = BTreeMap<CallerId, u64>;

/// Builds the census of a finished run. `root_status` is the status the launcher reaped.
pub fn collect(
    dir: &Path,
    command: &[OsString],
    root_status: Option<ExitStatus>,
) -> Result<Census> {
    let images = read_images(dir)?;
    let statuses = reaped_statuses(dir);
    let mut symbols = crate::census::symbols::SymbolCache::default();
    let mut by_vpid: BTreeMap<i32, Vec<&Image>> = BTreeMap::new();
    for img in &images {
        by_vpid.entry(img.vpid).or_default().push(img);
    }
    let mut processes = Vec::new();
    let mut totals: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (vpid, imgs) in by_vpid {
        let last = imgs.last().unwrap();
        let mut calls: BTreeMap<(u8, u8), CallerCounts> = BTreeMap::new();
        let mut unsealed_set = std::collections::BTreeSet::new();
        let mut py_calls: BTreeMap<(u8, u8), BTreeMap<PyCall, u64>> = BTreeMap::new();
        let mut python = None;
        for img in &imgs {
            if let Some(v) = img.py_version {
                python = Some(crate::census::python::version_text(v));
            }
            for (addr, fid, detail, c) in &img.py_counts {
                let (object, symbol) = resolve_caller(&img.modules, *addr, &mut symbols);
                let innermost = Some(c.inner.clone()).filter(|i| Some(i) != c.user.as_ref());
                let key = PyCall {
                    user: c.user.clone(),
                    innermost,
                    import: c.import,
                    object,
                    symbol,
                    count: 0,
                };
                *py_calls
                    .entry((*fid, *detail))
                    .or_default()
                    .entry(key)
                    .or_default() += c.count;
            }
            for &(addr, fid, detail, count) in &img.counts {
                let who = resolve_caller(&img.modules, addr, &mut symbols);
                *calls
                    .entry((fid, detail))
                    .or_default()
                    .entry(who)
                    .or_default() += count;
            }
            for &(fid, count) in &img.overflow {
                *calls
                    .entry((fid, seal_abi::NO_DETAIL))
                    .or_default()
                    .entry(("[table full]".into(), None))
                    .or_default() += count;
            }
            for (kind, detail) in &img.unsealed {
                unsealed_set.insert(Unsealed {
                    kind: unsealed::name(*kind).to_string(),
                    detail: detail.clone(),
                });
            }
        }
        let mut call_list = Vec::new();
        for ((fid_n, detail), callers) in calls {
            let Some(&(family, symbol)) = FUNCTIONS.get(fid_n as usize) else {
                continue;
            };
            let fid: Fid = fid_from(fid_n);
            let count: u64 = callers.values().sum();
            *totals
                .entry((family.name().to_string(), symbol.to_string()))
                .or_default() += count;
            let mut callers: Vec<Caller> = callers
                .into_iter()
                .map(|((object, symbol), count)| Caller {
                    object,
                    symbol,
                    count,
                })
                .collect();
            callers.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.cmp(b)));
            let mut python: Vec<PyCall> = py_calls
                .remove(&(fid_n, detail))
                .unwrap_or_default()
                .into_iter()
                .map(|(k, count)| PyCall { count, ..k })
                .collect();
            python.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.cmp(b)));
            call_list.push(Call {
                family: family.name().to_string(),
                symbol: symbol.to_string(),
                detail: seal_abi::detail_name(fid, detail).map(str::to_string),
                count,
                callers,
                python,
            });
        }
        call_list.sort_by(|a, b| {
            a.family
                .cmp(&b.family)
                .then(b.count.cmp(&a.count))
                .then(a.symbol.cmp(&b.symbol))
                .then(a.detail.cmp(&b.detail))
        });
        let exit = if vpid == seal_abi::ROOT_VPID {
            root_status.map(|s| Exit {
                code: s.code(),
                signal: s.signal(),
            })
        } else {
            statuses.get(&vpid).map(|&ws| exit_of_wait_status(ws))
        };
        processes.push(Process {
            vpid,
            parent_vpid: (last.parent_vpid >= seal_abi::VPID_MIN).then_some(last.parent_vpid),
            exe: last.exe.clone(),
            argv: last.argv.clone(),
            execs: imgs[..imgs.len() - 1]
                .iter()
                .map(|i| i.exe.clone())
                .collect(),
            exit,
            calls: call_list,
            unsealed: unsealed_set.into_iter().collect(),
            python,
        });
    }
    let mut totals = Total::list(totals);
    totals.sort_by(|a, b| {
        a.family
            .cmp(&b.family)
            .then(b.count.cmp(&a.count))
            .then(a.symbol.cmp(&b.symbol))
    });
    let mut census = Census {
        version: 1,
        command: command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        processes,
        totals,
        machine: Vec::new(),
    };
    census.machine = census.machine_limits();
    Ok(census)
}

fn fid_from(n: u8) -> Fid {
    // SAFETY: Fid is repr(u8) with variants 0..FUNCTIONS.len(); callers check the bound.
    assert!((n as usize) < FUNCTIONS.len());
    unsafe { std::mem::transmute::<u8, Fid>(n) }
}

impl Census {
    /// Adds what a process's libseal would have recorded (the launcher's report for a root
    /// that loads no libseal), as the census reads it from a slot.
    pub fn add_unsealed(&mut self, vpid: i32, kind: u32, detail: &[u8]) {
        let Some(p) = self.processes.iter_mut().find(|p| p.vpid == vpid) else {
            return;
        };
        let u = Unsealed {
            kind: unsealed::name(kind).to_string(),
            detail: String::from_utf8_lossy(detail).into_owned(),
        };
        if let Err(at) = p.unsealed.binary_search(&u) {
            p.unsealed.insert(at, u);
        }
    }

    /// One line per distinct unsealable program or event, for stderr (not the machine's
    /// limits: [`Census::machine_limits`] has those).
    pub fn unsealed_warnings(&self) -> Vec<String> {
        let mut seen = std::collections::BTreeSet::new();
        for p in &self.processes {
            let events = (p.unsealed.iter())
                .filter(|u| !u.is_machine())
                .map(|u| (u.kind.as_str(), u.detail.as_str()));
            seen.extend(process_lines(&p.exe, events));
        }
        seen.into_iter().collect()
    }

    /// The distinct machine-level limits the processes met (each once, in the order of
    /// [`unsealed::CPU_TRAP_CAUSES`]).
    pub fn machine_limits(&self) -> Vec<Unsealed> {
        let mut seen: Vec<Unsealed> = Vec::new();
        for u in self.processes.iter().flat_map(|p| &p.unsealed) {
            if u.is_machine() && !seen.contains(u) {
                seen.push(u.clone());
            }
        }
        seen.sort_by_key(|u| {
            unsealed::CPU_TRAP_CAUSES
                .iter()
                .position(|c| *c == u.detail)
        });
        seen
    }

    /// The census as the JSON document of `--census FILE` and `seal census --json FILE`.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a census serializes");
        s.push('\n');
        s
    }

    pub fn write_json(&self, path: &Path) -> Result<()> {
        crate::files::outfile::write(path, self.to_json())
            .with_context(|| format!("cannot write census to {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `seal census` shows the collected census itself, no longer the one read back from its
    /// JSON: they are the same value (every optional field set and unset, Python frames too).
    #[test]
    fn json_reads_back_as_the_same_census() {
        let frame = |line| Frame {
            file: "/src/app.py".into(),
            line,
            function: "main".into(),
        };
        let py = |user: Option<Frame>, innermost: Option<Frame>, import| PyCall {
            user,
            innermost,
            import,
            object: "/usr/bin/python3".into(),
            symbol: None,
            count: 2,
        };
        let call = |detail: Option<&str>, python: Vec<PyCall>| Call {
            family: "time".into(),
            symbol: "clock_gettime".into(),
            detail: detail.map(Into::into),
            count: 3,
            callers: vec![Caller {
                object: "/lib/libc.so.6".into(),
                symbol: Some("time".into()),
                count: 3,
            }],
            python,
        };
        let unsealed = Unsealed {
            kind: "cpu".into(),
            detail: "rdtsc".into(),
        };
        let census = Census {
            version: 3,
            command: vec!["python3".into(), "app.py".into()],
            processes: vec![
                Process {
                    vpid: 1,
                    parent_vpid: None,
                    exe: "/usr/bin/python3".into(),
                    argv: vec!["python3".into()],
                    execs: vec!["/bin/sh".into()],
                    exit: Some(Exit {
                        code: Some(0),
                        signal: None,
                    }),
                    calls: vec![call(
                        Some("CLOCK_REALTIME"),
                        vec![
                            py(Some(frame(3)), Some(frame(9)), false),
                            py(None, None, true),
                        ],
                    )],
                    unsealed: vec![unsealed.clone()],
                    python: Some("3.12.1".into()),
                },
                Process {
                    vpid: 2,
                    parent_vpid: Some(1),
                    exe: "/bin/true".into(),
                    argv: vec![],
                    execs: vec![],
                    exit: Some(Exit {
                        code: None,
                        signal: Some(9),
                    }),
                    calls: vec![call(None, vec![])],
                    unsealed: vec![],
                    python: None,
                },
            ],
            totals: vec![Total {
                family: "time".into(),
                symbol: "clock_gettime".into(),
                count: 6,
            }],
            machine: vec![unsealed],
        };
        let back: Census = serde_json::from_str(&census.to_json()).unwrap();
        assert_eq!(back, census);
        assert_eq!(back.to_json(), census.to_json());
        let empty = Census::default();
        assert_eq!(
            serde_json::from_str::<Census>(&empty.to_json()).unwrap(),
            empty
        );
    }

    /// The machine's cpu causes stay in the data (each process, and `machine` once) but not in
    /// the stderr warnings; a program's own cause (a Go program) and other events still warn.
    #[test]
    fn machine_causes_are_data_not_warnings() {
        let ev = |kind: &str, detail: &str| Unsealed {
            kind: kind.into(),
            detail: detail.into(),
        };
        let cpu = unsealed::name(unsealed::CPU_TRAP);
        let no_fault = unsealed::CPU_TRAP_CAUSES[2];
        let go = unsealed::CPU_TRAP_CAUSES[1];
        let process = |vpid, unsealed| Process {
            vpid,
            parent_vpid: None,
            exe: "/bin/x".into(),
            argv: vec![],
            execs: vec![],
            exit: None,
            calls: vec![],
            unsealed,
            python: None,
        };
        let mut c = Census {
            processes: vec![
                process(1, vec![ev(cpu, no_fault), ev("static-binary", "/bin/s")]),
                process(2, vec![ev(cpu, no_fault), ev(cpu, go)]),
            ],
            ..Default::default()
        };
        c.machine = c.machine_limits();
        assert_eq!(c.machine, vec![ev(cpu, no_fault)]);
        assert_eq!(
            c.unsealed_warnings(),
            vec![
                format!("not sealed ({cpu}): {go}"),
                "not sealed (static-binary): /bin/s".to_string(),
            ]
        );
        for (i, cause) in unsealed::CPU_TRAP_CAUSES.iter().enumerate() {
            assert_eq!(
                unsealed::is_machine_cause(cause),
                unsealed::cpu_cause::MACHINE >> i & 1 == 1
            );
        }
        assert!(!unsealed::is_machine_cause(go));
        assert!(unsealed::is_machine_cause(no_fault));
    }
}
