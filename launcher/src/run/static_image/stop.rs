//! An image at its exec stop, read once: its registers, its auxiliary vector (on the stack),
//! its mappings (`/proc/PID/maps`: its code, its load bias, its vDSO, a free page) and the
//! head of its executable (the Go note, the ELF type). Each used to be read where it was
//! needed (`/proc/PID/maps` three to four times, `/proc/PID/auxv` twice, the stack a word per
//! system call, the executable's first 64 KiB), every read a share of the image's start-up.

use std::os::unix::fs::FileExt;

use super::auxv::Vector;
use super::maps::Maps;

/// What the supervisor knows of an image stopped at its exec.
pub struct Stop {
    pub regs: Option<libc::user_regs_struct>,
    /// The auxiliary vector on the stack (`None`: it could not be read).
    pub aux: Option<Vector>,
    /// Is it a Go runtime (its executable carries Go's build id note)?
    pub go: bool,
    /// Its executable's mappings with code.
    pub text: Vec<(u64, u64)>,
    /// Its load bias (0 for a fixed-address executable).
    pub bias: u64,
    /// Is its executable position-independent (`ET_DYN`: a static-pie one)?
    pub pie: bool,
    /// The `[vdso]` mapping.
    pub vdso: Option<(u64, u64)>,
    /// Every mapping.
    maps: Vec<(u64, u64)>,
}

impl Stop {
    /// Reads stopped image `pid`.
    pub fn read(pid: i32) -> Stop {
        let regs = super::remote::regs(pid);
        let aux = regs.as_ref().and_then(|r| Vector::read(pid, r.rsp));
        let mut head = [0u8; 4096];
        let n = std::fs::File::open(format!("/proc/{pid}/exe"))
            .and_then(|f| f.read_at(&mut head, 0))
            .unwrap_or(0);
        let head = &head[..n];
        let go = match super::auxv::notes_say_go(head) {
            Some(go) => go,
            None => super::auxv::is_go(pid),
        };
        const ET_DYN: u16 = 3;
        let pie = head.get(16..18) == Some(&ET_DYN.to_le_bytes()[..]);
        if let Some(l) = aux.as_ref().and_then(|a| Layout::of(pid, head, a)) {
            return Stop {
                regs,
                aux,
                go,
                text: l.text,
                bias: l.bias,
                pie,
                vdso: Some(l.vdso),
                maps: l.maps,
            };
        }
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        let maps = Maps::read(pid);
        let text = maps.text(exe.as_deref());
        let bias = if pie {
            maps.bias(exe.as_deref(), &text)
        } else {
            0
        };
        Stop {
            regs,
            aux,
            go,
            text,
            bias,
            pie,
            vdso: maps.vdso(),
            maps: maps.0.iter().map(|m| (m.start, m.end)).collect(),
        }
    }

    /// Where the vDSO's ELF image is (its `AT_SYSINFO_EHDR`).
    pub fn vdso_base(&self) -> Option<u64> {
        self.aux.as_ref().and_then(|a| a.vdso)
    }

    /// A page-aligned address at which the image has nothing mapped: 4 GiB up (above a
    /// non-PIE image's heap, below where the kernel places a PIE image and its mappings), or
    /// the next free one of a few further up.
    pub fn free_page(&self) -> Option<u64> {
        (0..16u64)
            .map(|k| (1 << 32) + k * (1 << 28))
            .find(|&at| self.maps.iter().all(|&(a, b)| b <= at || a >= at + 4096))
    }
}

/// What the kernel mapped of a static image at its exec, told from its program headers (in
/// the executable's first page) and its auxiliary vector instead of `/proc/PID/maps`: ~30 µs
/// of every static image's exec stop was that file's read. At the exec stop a static image
/// has its program's segments, its stack, its vDSO and `[vvar]`, nothing else; where the
/// headers say anything else (an interpreter, headers past the first page) the maps are read.
struct Layout {
    text: Vec<(u64, u64)>,
    /// As [`Maps::bias`] gives it: where the mapping of the file's first page starts.
    bias: u64,
    vdso: (u64, u64),
    maps: Vec<(u64, u64)>,
}

const PAGE: u64 = 4096;
const PT_LOAD: u32 = 1;
const PT_INTERP: u32 = 3;
const PT_PHDR: u32 = 6;
const PF_X: u32 = 1;

fn page_down(a: u64) -> u64 {
    a & !(PAGE - 1)
}

fn page_up(a: u64) -> u64 {
    a.checked_add(PAGE - 1).map_or(u64::MAX, page_down)
}

/// One program header: type, flags, file offset, address, file size, memory size.
type Phdr = (u32, u32, u64, u64, u64, u64);

impl Layout {
    fn of(pid: i32, head: &[u8], aux: &Vector) -> Option<Layout> {
        let (bias, loads) = program(head, aux.phdr)?;
        let mut text: Vec<(u64, u64)> = Vec::new();
        let mut maps = Vec::new();
        let mut first = None;
        for &(_, flags, offset, vaddr, filesz, memsz) in &loads {
            let at = bias.checked_add(vaddr)?;
            let (start, end) = (page_down(at), page_up(at.checked_add(filesz)?));
            maps.push((start, page_up(at.checked_add(memsz)?)));
            if page_down(offset) == 0 {
                first.get_or_insert(start);
            }
            if flags & PF_X == 0 || end <= start {
                continue;
            }
            // Two executable segments back to back would be one mapping.
            match text.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => text.push((start, end)),
            }
        }
        let vdso = vdso_of(pid, aux.vdso?)?;
        maps.push(vdso);
        Some(Layout {
            text,
            bias: if bias == 0 { 0 } else { first? },
            vdso,
            maps,
        })
    }
}

/// The load bias and the loadable segments of the ELF executable whose first bytes are
/// `head`, its headers mapped at `at_phdr`; `None` unless all is as a static image's is.
fn program(head: &[u8], at_phdr: Option<u64>) -> Option<(u64, Vec<Phdr>)> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(head.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(head.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(head.get(o..o + 8)?.try_into().ok()?));
    // 64-bit, little-endian, x86_64.
    if !head.starts_with(b"\x7fELF\x02\x01") || u16_at(18)? != 62 {
        return None;
    }
    let (kind, phoff, phentsize, phnum) = (u16_at(16)?, u64_at(32)?, u16_at(54)?, u16_at(56)?);
    if phentsize != 56 || phnum == 0 {
        return None;
    }
    let mut all = Vec::new();
    for i in 0..phnum as usize {
        let o = usize::try_from(phoff).ok()?.checked_add(56 * i)?;
        let p: Phdr = (
            u32_at(o)?,
            u32_at(o + 4)?,
            u64_at(o + 8)?,
            u64_at(o + 16)?,
            u64_at(o + 32)?,
            u64_at(o + 40)?,
        );
        if p.0 == PT_INTERP {
            return None;
        }
        all.push(p);
    }
    let loads: Vec<Phdr> = all.iter().copied().filter(|p| p.0 == PT_LOAD).collect();
    let bias = match kind {
        2 => 0,
        3 => {
            // The headers' own address in the file's terms, from PT_PHDR or the segment
            // that holds them.
            let at_phdr = at_phdr?;
            let vaddr = match all.iter().find(|p| p.0 == PT_PHDR) {
                Some(p) => p.3,
                None => {
                    let l = loads
                        .iter()
                        .find(|l| (l.2..l.2.saturating_add(l.4)).contains(&phoff))?;
                    l.3 + (phoff - l.2)
                }
            };
            at_phdr.checked_sub(vaddr)?
        }
        _ => return None,
    };
    (!loads.is_empty()).then_some((bias, loads))
}

/// The vDSO's mapping, from its ELF header at `base`: its image ends with its section
/// headers, and the kernel maps it whole, page-aligned.
fn vdso_of(pid: i32, base: u64) -> Option<(u64, u64)> {
    let mut h = [0u8; 64];
    if !super::remote::read(pid, base, &mut h) || !h.starts_with(b"\x7fELF") {
        return None;
    }
    let shoff = u64::from_le_bytes(h[40..48].try_into().ok()?);
    let (shentsize, shnum) = (
        u16::from_le_bytes([h[58], h[59]]) as u64,
        u16::from_le_bytes([h[60], h[61]]) as u64,
    );
    let len = page_up(shoff.checked_add(shentsize * shnum)?);
    (PAGE..=64 * PAGE)
        .contains(&len)
        .then_some((base, base + len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    /// Starts `program` stopped at its exec (traced by this test thread).
    fn stopped_at_exec(program: &std::path::Path) -> Option<std::process::Child> {
        let mut cmd = std::process::Command::new(program);
        cmd.arg("--help")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: PTRACE_TRACEME between fork and exec: one system call.
        unsafe {
            cmd.pre_exec(|| {
                libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
                Ok(())
            });
        }
        let child = cmd.spawn().ok()?;
        let mut st = 0;
        // SAFETY: waiting for our own child's stop.
        let r = unsafe { libc::waitpid(child.id() as i32, &mut st, 0) };
        (r > 0 && libc::WIFSTOPPED(st)).then_some(child)
    }

    /// Static programs at hand: busybox, and C built static and static-pie.
    fn programs(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out: Vec<std::path::PathBuf> = ["/bin/busybox", "/usr/bin/busybox"]
            .iter()
            .map(std::path::PathBuf::from)
            .filter(|p| p.exists())
            .take(1)
            .collect();
        let src = dir.join("p.c");
        std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
        for (flag, name) in [("-static", "static"), ("-static-pie", "spie")] {
            let out_path = dir.join(name);
            let built = std::process::Command::new("cc")
                .args([flag, "-O1", "-o"])
                .arg(&out_path)
                .arg(&src)
                .status()
                .is_ok_and(|s| s.success());
            if built {
                out.push(out_path);
            }
        }
        out
    }

    #[test]
    fn the_headers_tell_what_the_maps_say_at_the_exec_stop() {
        let dir = tempfile::tempdir().unwrap();
        let programs = programs(dir.path());
        if programs.is_empty() {
            eprintln!("SKIPPED: no static program (busybox) and no cc");
            return;
        }
        for p in std::env::var_os("SEAL_TEST_STATIC_MORE")
            .map(|v| std::env::split_paths(&v).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .chain(programs)
        {
            let Some(mut child) = stopped_at_exec(&p) else {
                panic!("{} did not stop at its exec", p.display());
            };
            let pid = child.id() as i32;
            let stop = Stop::read(pid);
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
            let maps = Maps::read(pid);
            let text = maps.text(exe.as_deref());
            let bias = match stop.pie {
                true => maps.bias(exe.as_deref(), &text),
                false => 0,
            };
            let aux = stop.aux.as_ref().expect("the vector");
            let head = std::fs::read(&p).unwrap();
            let layout = Layout::of(pid, &head[..4096.min(head.len())], aux);
            // SAFETY: our traced child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = child.wait();
            let layout = layout.unwrap_or_else(|| panic!("{}: no layout", p.display()));
            assert_eq!(layout.text, text, "{}", p.display());
            assert_eq!(layout.bias, bias, "{}", p.display());
            assert_eq!(Some(layout.vdso), maps.vdso(), "{}", p.display());
            assert_eq!(stop.text, text, "{}", p.display());
            // Each segment starts a mapping, and the free page is the same either way.
            for &(a, _) in &layout.maps {
                assert!(
                    maps.0.iter().any(|m| m.start == a),
                    "{}: {a:x}",
                    p.display()
                );
            }
            let all: Vec<(u64, u64)> = maps.0.iter().map(|m| (m.start, m.end)).collect();
            let free = |maps: &[(u64, u64)]| {
                Stop {
                    maps: maps.to_vec(),
                    ..Stop::read(-1)
                }
                .free_page()
            };
            assert_eq!(free(&layout.maps), free(&all), "{}", p.display());
        }
    }
}
