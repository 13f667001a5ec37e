//! A static Go image's own random numbers (`seal_abi::supervised::go_rand`: map order and
//! hash seeds, `math/rand`'s global source, `os.MkdirTemp` names, `select` order), made one
//! sequence per process at its exec stop, and its `runtime.cputicks` made a constant: both
//! found by name in its symbol table, or through its `pclntab` when it is stripped
//! (`go_site`).
//!
//! The code and its counters are in a private anonymous mapping of two pages made below the
//! program (a fork copies it: the child goes on from its parent's count), the code page made
//! read-and-execute; the code is written through `/proc/PID/mem`, then the jumps and calls
//! that lead to it. Any step that fails leaves the runtime's functions as they are.

use seal_abi::supervised::{go_rand, go_site};

use super::super::batch::{write_text, Arg, Batch};
use super::Supervisor;

impl Supervisor {
    /// Seals the Go image just exec'd (stopped)'s `cputicks` and random numbers: whether its
    /// random numbers are one sequence now.
    pub(super) fn fast_runtime_rand(&mut self) -> bool {
        let lineage = self.world.lineage;
        self.runtime_rand(self.pid, self.bias, lineage)
    }

    /// [`Supervisor::fast_runtime_rand`] for Go image `pid` (stopped at its exec, its program
    /// at `bias`), its sequence keyed by `lineage`.
    pub(super) fn runtime_rand(&mut self, pid: i32, bias: u64, lineage: u64) -> bool {
        let Some(exe) = super::super::exe_map::ExeMap::of(pid) else {
            return false;
        };
        let sites = go_site::find_all(&exe);
        let w = &self.world;
        // `cputicks` seeds each thread's `fastrand` and `cheaprand` (work stealing; select
        // and Go 1.19's map order where their inlined copies are not redirected) through `rdtsc`; Go allows it to be anything ("not guaranteed to be
        // monotonic"); its only other users are the block profiler and tracing.
        if let Some((at, size)) = sites.cputicks {
            let ticks = seal_abi::mix64(w.seed ^ lineage ^ 0x0074_7363) >> 1;
            let mut code = vec![0x48, 0xb8]; // movabs rax, ticks
            code.extend(ticks.to_le_bytes());
            code.push(0xc3); // ret
            if size >= code.len() as u64 {
                super::super::text::poke(pid, bias + at, &code);
            }
        }
        let (Some(rand), Some(low)) = (sites.rand, go_site::low(&exe)) else {
            return false;
        };
        let key = go_rand::key(w.seed, lineage);
        install(pid, &rand.biased(bias), bias + low, key).is_some()
    }
}

/// Maps the code below `low` in `pid` (stopped at its exec), writes it and points `sites` at
/// it: the mapping's address.
fn install(pid: i32, sites: &go_rand::Sites, low: u64, key: u64) -> Option<u64> {
    let hint = low.checked_sub(256 << 10)? & !0xfff;
    let patches = sites.patches(hint)?;
    let saved = super::super::remote::regs(pid)?;
    let mut b = Batch::new((saved.rsp - 16384) & !15);
    let (i, z) = (Arg::Imm, Arg::Imm(0));
    let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
    let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE) as u64;
    let len = i(go_rand::MAP_BYTES as u64);
    b.call(
        libc::SYS_mmap,
        [i(hint), len, i(rw), i(flags), i(u64::MAX), z],
    );
    b.or_stop_unless(hint);
    let rx = (libc::PROT_READ | libc::PROT_EXEC) as u64;
    let code_len = i(go_rand::CODE_BYTES as u64);
    b.call(libc::SYS_mprotect, [i(hint), code_len, i(rx), z, z, z]);
    let r = b.run(pid, &saved)?;
    if r.first().copied().flatten() != Some(hint as i64) || r.get(1) != Some(&Some(0)) {
        return None;
    }
    let mut code = vec![0u8; go_rand::CODE_BYTES];
    go_rand::code(&mut code, hint, key, sites)?;
    if !write_text(pid, hint, &code) {
        return None;
    }
    for (at, bytes) in patches.iter().filter(|p| p.0 != 0) {
        if !write_text(pid, *at, bytes) {
            return None;
        }
    }
    Some(hint)
}
