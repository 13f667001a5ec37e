//! Start-up and per-process cost, side by side in one run: the floor (an empty preload),
//! libfaketime (preloaded, and its `faketime` command), libseal, `seal run`; whole-program
//! workloads (`true`, a loop of 500 `date`, a pyenv-style `python3 -c pass`, a loop of `stat`,
//! the JVM's and Node's start-up, a JIT-heavy Node loop), the run directory's bytes per
//! process image and resident memory per process and per thread.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::measure::{self, median, Launch, FAKETIME_SPEC};

/// How one workload is started.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum How {
    Bare,
    /// `LD_PRELOAD` of an empty shared object: what any preload costs.
    Floor,
    /// `LD_PRELOAD=libfaketime.so.1 FAKETIME=…`.
    Faketime,
    /// Debian's `faketime -f '@…' prog` command (a shell-free wrapper that execs).
    FaketimeCmd,
    /// libseal active, without the launcher: the environment a sealed root gets, taken from
    /// a long-lived `seal run` ([`ShimHolder`]), given to the program directly.
    Shim,
    /// `seal run -q -- prog`.
    Seal,
}

impl How {
    pub fn name(self) -> &'static str {
        match self {
            How::Bare => "bare",
            How::Floor => "empty preload",
            How::Faketime => "libfaketime preload",
            How::FaketimeCmd => "`faketime -f`",
            How::Shim => "libseal, no launcher",
            How::Seal => "`seal run`",
        }
    }
}

pub struct Env<'a> {
    pub launch: &'a Launch,
    pub empty_so: PathBuf,
    pub faketime_cmd: Option<PathBuf>,
    pub shim: Option<ShimHolder>,
}

/// A `seal run` kept alive (its root sleeps) so that its run directory exists, and the
/// environment its root was started with: libseal preloaded and the run's settings, the
/// stack pad included. A program given that environment is sealed in that run (a root of
/// its own, with a virtual pid of its own) and pays libseal's start, not the launcher's.
pub struct ShimHolder {
    seal: std::process::Child,
    env: Vec<(OsString, OsString)>,
}

impl ShimHolder {
    pub fn start(launch: &Launch) -> Result<ShimHolder, String> {
        use std::os::unix::ffi::OsStrExt;
        let file = launch.workdir.join("sealed-root.environ");
        let _ = std::fs::remove_file(&file);
        let seal = Command::new(&launch.seal)
            .args(["run", "-q", "--", "/bin/sh", "-c"])
            .arg("cat /proc/$$/environ > \"$1.tmp\" && mv \"$1.tmp\" \"$1\" && exec sleep 100000")
            .arg("sh")
            .arg(&file)
            .current_dir(&launch.workdir)
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start seal: {e}"))?;
        let mut holder = ShimHolder {
            seal,
            env: Vec::new(),
        };
        for _ in 0..500 {
            if let Ok(b) = std::fs::read(&file) {
                // The guard ties a root to its launcher: zeros (same length, same stack) let
                // these roots be started by the benchmark instead.
                let guard = "LIBSEAL_GUARD";
                holder.env = b
                    .split(|&c| c == 0)
                    .filter_map(|kv| {
                        let i = kv.iter().position(|&c| c == b'=')?;
                        let (k, v) = (&kv[..i], &kv[i + 1..]);
                        let v = if k == guard.as_bytes() {
                            vec![b'0'; v.len()]
                        } else {
                            v.to_vec()
                        };
                        Some((OsStr::from_bytes(k).into(), OsStr::from_bytes(&v).into()))
                    })
                    .collect();
                return Ok(holder);
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Err("the sealed root never wrote its environment".into())
    }
}

impl Drop for ShimHolder {
    fn drop(&mut self) {
        // SIGTERM: seal passes it on to its sleeping root and removes the run directory.
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.seal.id() as i32, libc::SIGTERM) };
        let _ = self.seal.wait();
    }
}

impl Env<'_> {
    fn command(&self, how: How, argv: &[OsString]) -> Command {
        let mut c = match how {
            How::Seal => {
                let mut c = Command::new(&self.launch.seal);
                c.args(["run", "-q", "--"]).args(argv);
                c
            }
            How::FaketimeCmd => {
                let mut c = Command::new(self.faketime_cmd.as_ref().expect("faketime command"));
                c.args(["-f", FAKETIME_SPEC]).args(argv);
                c
            }
            How::Shim => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]).env_clear();
                c.envs(
                    self.shim
                        .as_ref()
                        .expect("sealed environment")
                        .env
                        .iter()
                        .cloned(),
                );
                c
            }
            _ => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]);
                c
            }
        };
        match how {
            How::Floor => {
                c.env("LD_PRELOAD", &self.empty_so);
            }
            How::Faketime => {
                let lib = self.launch.faketime.as_ref().expect("libfaketime");
                c.env("LD_PRELOAD", lib).env("FAKETIME", FAKETIME_SPEC);
            }
            _ => {}
        }
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("SEAL_") {
                c.env_remove(&k);
            }
        }
        c.current_dir(&self.launch.workdir).stdin(Stdio::null());
        c
    }
}

/// One workload's wall times per mode (ms), from interleaved rounds.
pub struct Workload {
    pub name: String,
    /// Process images per run (for the per-process figure), when known.
    pub images: Option<f64>,
    pub hows: Vec<How>,
    pub wall: Vec<Vec<f64>>,
    pub target: Option<String>,
}

impl Workload {
    fn med(&self, h: How) -> Option<f64> {
        let i = self.hows.iter().position(|x| *x == h)?;
        Some(median(&self.wall[i]))
    }
    /// Median of per-round ratios `h / bare`.
    fn ratio(&self, h: How) -> Option<f64> {
        let i = self.hows.iter().position(|x| *x == h)?;
        let b = self.hows.iter().position(|x| *x == How::Bare)?;
        Some(median(
            &self.wall[i]
                .iter()
                .zip(&self.wall[b])
                .map(|(x, y)| x / y)
                .collect::<Vec<_>>(),
        ))
    }
}

fn measure_one(
    env: &Env,
    name: &str,
    argv: &[OsString],
    hows: &[How],
    rounds: usize,
    images: Option<f64>,
    target: Option<&str>,
) -> Result<Workload, String> {
    eprint!(
        "seal-bench: {name}, {rounds} rounds × {} modes ",
        hows.len()
    );
    let mut wall = vec![Vec::new(); hows.len()];
    for round in 0..rounds + 1 {
        for k in 0..hows.len() {
            let i = (round + k) % hows.len();
            let s = measure::run(env.command(hows[i], argv), false)?;
            if round > 0 {
                wall[i].push(s.wall_ms);
            }
        }
        eprint!(".");
    }
    eprintln!();
    Ok(Workload {
        name: name.into(),
        images,
        hows: hows.to_vec(),
        wall,
        target: target.map(str::to_string),
    })
}

fn sh(script: &str) -> Vec<OsString> {
    vec!["/bin/sh".into(), "-c".into(), script.into()]
}

pub struct Results {
    pub workloads: Vec<Workload>,
    /// After 200 short processes: census slots, bytes written to them, and to the run's
    /// two tables.
    pub run_dir: Option<(f64, f64, f64)>,
    /// VmRSS (KiB) of `cat /proc/self/status` per mode.
    pub rss: Vec<(How, f64)>,
    /// Extra VmRSS (KiB) per thread, per mode (16 idle threads in Python).
    pub rss_thread: Vec<(How, f64)>,
    pub skipped: Vec<String>,
}

pub fn measure_all(env: &Env, quick: bool) -> Result<Results, String> {
    let r = |n: usize| if quick { 3 } else { n };
    let mut all = vec![How::Bare, How::Floor];
    let ft = env.launch.faketime.is_some();
    if ft {
        all.push(How::Faketime);
    }
    if env.shim.is_some() {
        all.push(How::Shim);
    }
    all.push(How::Seal);
    let mut w = Vec::new();
    let mut skipped = Vec::new();
    let true_bin: OsString = "/bin/true".into();
    let mut true_hows = all.clone();
    if env.faketime_cmd.is_some() {
        true_hows.push(How::FaketimeCmd);
    }
    w.push(measure_one(
        env,
        "`true`",
        &[true_bin],
        &true_hows,
        r(150),
        Some(1.0),
        Some("`seal run -- true` ≤ bare + 1.0 ms"),
    )?);
    let loop500 = "i=0; while [ $i -lt 500 ]; do date >/dev/null; i=$((i+1)); done";
    w.push(measure_one(
        env,
        "500 × `date` (sh loop)",
        &sh(loop500),
        &all,
        r(7),
        Some(501.0),
        Some("≤ 1.10× bare; per process ≤ libfaketime's preload"),
    )?);
    let stat_loop = "i=0; while [ $i -lt 200 ]; do stat /etc/hostname >/dev/null; i=$((i+1)); done";
    w.push(measure_one(
        env,
        "200 × `stat` (sh loop)",
        &sh(stat_loop),
        &all,
        r(7),
        Some(201.0),
        Some("≤ 1.2× bare"),
    )?);
    let pyenv = Path::new(&std::env::var("HOME").unwrap_or_default()).join(".pyenv/shims/python3");
    if pyenv.is_file() {
        w.push(measure_one(
            env,
            "pyenv shim `python3 -c pass`",
            &[pyenv.into(), "-c".into(), "pass".into()],
            &all,
            r(15),
            None,
            Some("≤ 1.10× bare"),
        )?);
    } else {
        skipped.push("pyenv-style Python (no ~/.pyenv/shims/python3)".into());
    }
    let bs = vec![How::Bare, How::Seal];
    match crate::which("java") {
        Some(java) => w.push(measure_one(
            env,
            "JVM start-up (`java -version`)",
            &[java.into(), "-version".into()],
            &bs,
            r(9),
            None,
            Some("≤ 1.10× bare"),
        )?),
        None => skipped.push("JVM (java not on PATH)".into()),
    }
    match crate::which("node") {
        Some(node) => {
            w.push(measure_one(
                env,
                "Node start-up (`node -e 0`)",
                &[node.clone().into(), "-e".into(), "0".into()],
                &bs,
                r(9),
                None,
                Some("≤ 1.10× bare"),
            )?);
            let jit = "let s=0; for (let i=0;i<1.5e8;i++) { s=(s+i*i)%1000003; } \
                       const a=[]; for (let i=0;i<2e6;i++) a.push({i, t: Date.now()}); \
                       console.log(s, a.length)";
            w.push(measure_one(
                env,
                "JIT-heavy Node loop",
                &[node.into(), "-e".into(), jit.into()],
                &bs,
                r(5),
                None,
                Some("≤ 1.10× bare"),
            )?);
        }
        None => skipped.push("Node (node not on PATH)".into()),
    }
    let run_dir = run_dir_bytes(env).ok();
    let mut rss = Vec::new();
    let mut rss_thread = Vec::new();
    for &h in &all {
        if let Some(kb) = vm_rss(env, h, &["/bin/cat".into(), "/proc/self/status".into()]) {
            rss.push((h, kb));
        }
        if let Some(py) = crate::python_exe() {
            let script = "import threading,re\n\
                def rss(): return int(re.search(r'VmRSS:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n\
                e=threading.Event(); a=rss()\n\
                ts=[threading.Thread(target=e.wait) for _ in range(16)]\n\
                [t.start() for t in ts]\n\
                b=rss(); e.set(); [t.join() for t in ts]\n\
                print('VmRSS:', (b-a)/16)";
            if let Some(kb) = vm_rss(env, h, &[py.into(), "-c".into(), script.into()]) {
                rss_thread.push((h, kb));
            }
        }
    }
    Ok(Results {
        workloads: w,
        run_dir,
        rss,
        rss_thread,
        skipped,
    })
}

/// Median over 5 runs of the VmRSS (KiB) line the command prints.
fn vm_rss(env: &Env, h: How, argv: &[OsString]) -> Option<f64> {
    let mut v = Vec::new();
    for _ in 0..5 {
        let s = measure::run(env.command(h, argv), true).ok()?;
        let line = s.stdout.lines().find(|l| l.starts_with("VmRSS:"))?;
        v.push(line.split_whitespace().nth(1)?.parse::<f64>().ok()?);
    }
    Some(median(&v))
}

/// Census slots and the bytes allocated to them and to the run's tables after a sealed `sh`
/// ran 200 `true`. The run dir's path is hidden from sealed programs' environment; the run
/// table mapped into `grep` shows it. `od` reads how many slots were claimed (its own the
/// last), then `fixtures/python/census_slots.py` measures the written bytes of the slots
/// before it and of the table itself (the run table file is sparse).
fn run_dir_bytes(env: &Env) -> Result<(f64, f64, f64), String> {
    let measure = crate::workspace_root().join("fixtures/python/census_slots.py");
    let script = format!(
        "i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i+1)); done; \
         t=$(grep -o '/[^ ]*/seal-run-[0-9a-f]*/run.table' /proc/self/maps | head -n 1); \
         used=$(od -An -tu4 -j16 -N4 \"$t\"); \
         python3 '{measure}' {off} {slot} $((used - 1)); \
         du -B1 \"${{t%/*}}/files.table\"",
        measure = measure.display(),
        off = seal_abi::RunTable::REAL_MAP_OFFSET,
        slot = seal_abi::CENSUS_SLOT_BYTES,
    );
    let s = measure::run(env.command(How::Seal, &sh(&script)), true)?;
    let (mut slots, mut bytes, mut tables) = (0.0, 0.0, 0.0);
    for line in s.stdout.lines() {
        let mut w = line.split_whitespace();
        match (w.next(), w.next()) {
            (Some("table"), Some(n)) => tables += n.parse::<f64>().map_err(|e| e.to_string())?,
            (Some(n), None) => {
                slots += 1.0;
                bytes += n.parse::<f64>().map_err(|e| e.to_string())?;
            }
            // du: the file-time table's bytes, then its path.
            (Some(n), Some(_)) => tables += n.parse::<f64>().map_err(|e| e.to_string())?,
            (None, _) => {}
        }
    }
    if slots == 0.0 {
        return Err(format!("no census slots measured in {:?}", s.stdout));
    }
    Ok((slots, bytes, tables))
}

pub fn render(r: &Results, faketime: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Start-up and per-process cost\n\n\
         Wall time in ms, median of interleaved rounds (the order of modes rotating each \
         round); ratios are medians of the per-round ratio to bare. *Empty preload* is \
         `LD_PRELOAD` of an empty shared object, the floor any preload pays; per process = \
         (mode − bare) / process images of the workload.\n"
    );
    let cols = [
        How::Bare,
        How::Floor,
        How::Faketime,
        How::FaketimeCmd,
        How::Shim,
        How::Seal,
    ];
    let cols: Vec<How> = cols
        .into_iter()
        .filter(|h| faketime || !matches!(h, How::Faketime | How::FaketimeCmd))
        .filter(|h| r.workloads.iter().any(|w| w.hows.contains(h)))
        .collect();
    let _ = write!(s, "| workload |");
    for h in &cols {
        let _ = write!(s, " {} |", h.name());
    }
    let _ = writeln!(s, " target |");
    let _ = write!(s, "|---|");
    for _ in &cols {
        let _ = write!(s, "---:|");
    }
    let _ = writeln!(s, "---|");
    for w in &r.workloads {
        let _ = write!(s, "| {} |", w.name);
        for h in &cols {
            match (w.med(*h), w.ratio(*h)) {
                (Some(m), Some(x)) if *h != How::Bare => {
                    let _ = write!(s, " {m:.2} ({x:.3}×) |");
                }
                (Some(m), _) => {
                    let _ = write!(s, " {m:.2} |");
                }
                _ => {
                    let _ = write!(s, " |");
                }
            }
        }
        let _ = writeln!(s, " {} |", w.target.as_deref().unwrap_or(""));
    }
    let _ = writeln!(
        s,
        "\nPer process image (ms over bare, (mode − bare) / images):\n"
    );
    let _ = writeln!(s, "| workload | images | {} |", {
        cols.iter()
            .filter(|h| **h != How::Bare && **h != How::FaketimeCmd)
            .map(|h| h.name())
            .collect::<Vec<_>>()
            .join(" | ")
    });
    let n = cols
        .iter()
        .filter(|h| **h != How::Bare && **h != How::FaketimeCmd)
        .count();
    let _ = writeln!(s, "|---|---:|{}", "---:|".repeat(n));
    for w in r
        .workloads
        .iter()
        .filter(|w| w.images.is_some_and(|i| i > 1.0))
    {
        let images = w.images.unwrap_or(1.0);
        let bare = w.med(How::Bare).unwrap_or(f64::NAN);
        let _ = write!(s, "| {} | {images:.0} |", w.name);
        for h in cols
            .iter()
            .filter(|h| **h != How::Bare && **h != How::FaketimeCmd)
        {
            match w.med(*h) {
                Some(m) => {
                    let _ = write!(s, " +{:.3} |", (m - bare) / images);
                }
                None => {
                    let _ = write!(s, " |");
                }
            }
        }
        let _ = writeln!(s);
    }
    if let Some((files, bytes, tables)) = r.run_dir {
        let _ = writeln!(
            s,
            "\nRun directory after a sealed `sh` ran 200 `/bin/true`: {files:.0} census slots \
             (the shell's and each `true`'s) holding {:.0} KiB of written pages: **{:.1} KiB \
             per process image** (target ≤ 4 KiB); the run table itself and the file-time \
             table hold {:.0} KiB for the whole run.",
            bytes / 1024.0,
            bytes / 1024.0 / files.max(1.0),
            tables / 1024.0
        );
    }
    if !r.rss.is_empty() {
        let _ = writeln!(
            s,
            "\nResident memory (VmRSS, KiB, median of 5): per process (`cat /proc/self/status`) \
             and per extra thread (16 idle Python threads): {}.",
            r.rss
                .iter()
                .map(|(h, kb)| {
                    let t = r
                        .rss_thread
                        .iter()
                        .find(|(x, _)| x == h)
                        .map_or(String::new(), |(_, t)| format!(", {t:.0} per thread"));
                    format!("{} {kb:.0}{t}", h.name())
                })
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    for k in &r.skipped {
        let _ = writeln!(s, "\nSkipped: {k}.");
    }
    s
}

/// An empty shared object (the floor of any preload), compiled into `dir`.
pub fn empty_so(dir: &Path) -> Result<PathBuf, String> {
    let src = dir.join("empty.c");
    std::fs::write(&src, "").map_err(|e| e.to_string())?;
    let out = dir.join("empty.so");
    let ok = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .map_err(|e| format!("cannot run cc: {e}"))?
        .success();
    if !ok {
        return Err("cc failed to build empty.so".into());
    }
    Ok(out)
}
