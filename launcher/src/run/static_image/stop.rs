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
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        let mut head = [0u8; 4096];
        let n = std::fs::File::open(format!("/proc/{pid}/exe"))
            .and_then(|f| f.read_at(&mut head, 0))
            .unwrap_or(0);
        let head = &head[..n];
        let go = match super::auxv::notes_say_go(head) {
            Some(go) => go,
            None => super::auxv::is_go(pid),
        };
        let maps = Maps::read(pid);
        let text = maps.text(exe.as_deref());
        const ET_DYN: u16 = 3;
        let pie = head.get(16..18) == Some(&ET_DYN.to_le_bytes()[..]);
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
