//! A static Go image's own random numbers (`seal_abi::supervised::go_rand`: map order and
//! hash seeds, `math/rand`'s global source, `os.MkdirTemp` names, `select` order), made one
//! sequence per process at its exec stop, and its `runtime.cputicks` made a constant: both
//! found by name in its symbol table, or through its `pclntab` when it is stripped
//! (`go_site`).
//!
//! The code and its counters are in a private anonymous mapping of two pages made below the
//! program (a fork copies it: the child goes on from its parent's count), the code page made
//! read-and-execute; the code is written through `/proc/PID/mem`, then the jumps and calls
//! that lead to it. Any step that fails leaves the runtime's functions as they are, and says
//! so in the process's census (`go-runtime-random`, which its `partly sealed` line shows).
//!
//! The census: the counters are the number of draws. They are read from the process (they are
//! private: nothing of them outlives it) when it calls `exit_group` or `execve` (both sent
//! here), and written into its census slot as `runtime.rand` / `fastrand` and `fastrand (Go
//! map code)` called from `[seal in-image rand]`; nothing is added to the draw itself. A
//! cgo program's mapping is libseal's (`shim/src/process/go_rand.rs`): the supervisor finds it
//! where libseal places it, and counts it only when the first jump to it is there.

use seal_abi::supervised::go_rand::{self, outcome};

use super::super::batch::{write_text, Along, Arg, Batch, Calls};
use super::super::rand_counts::Rands;
use super::Supervisor;

impl Supervisor {
    /// Seals the Go image just exec'd (stopped)'s `cputicks` and random numbers: whether its
    /// random numbers are one sequence now.
    /// `along`: the clock page's batch that made its mapping (`rand_along`'s), if one ran.
    pub(super) fn fast_runtime_rand(&mut self, along: Option<(&Along, RandAlong)>) -> bool {
        let lineage = self.world.lineage;
        let made = along.and_then(|(a, r)| r.made(a));
        self.runtime_rand_in(self.pid, self.bias, lineage, made)
    }

    /// Adds the mapping of the runtime's random functions' code that Go image `pid` (its
    /// program at `bias`) will need to `along` (the clock page's batch): where it goes, and
    /// its calls' numbers there; `None` when there is nothing to redirect (the rest is said
    /// when [`Supervisor::fast_runtime_rand`] finds it so).
    pub(super) fn rand_along(
        &mut self,
        pid: i32,
        bias: u64,
        along: &mut Along,
    ) -> Option<RandAlong> {
        let exe = self.go_exe(pid)?;
        let rand = exe.sites.rand?.biased(bias);
        let base = go_rand::place(bias + exe.low?)?;
        rand.patches(base)?;
        Some(RandAlong {
            base,
            first: map_calls(along, base),
        })
    }

    /// [`Supervisor::fast_runtime_rand`] for Go image `pid` (stopped at its exec, its program
    /// at `bias`), its sequence keyed by `lineage`. What it could not do is said in the
    /// process's census.
    pub(super) fn runtime_rand(&mut self, pid: i32, bias: u64, lineage: u64) -> bool {
        self.runtime_rand_in(pid, bias, lineage, None)
    }

    /// [`Supervisor::runtime_rand`], its mapping made already at `made.0` when `made` says so
    /// (the `mmap` and `mprotect` results).
    fn runtime_rand_in(
        &mut self,
        pid: i32,
        bias: u64,
        lineage: u64,
        made: Option<(u64, (i64, i64))>,
    ) -> bool {
        self.rands.remove(&pid);
        let Some(exe) = self.go_exe(pid) else {
            self.rand_stays(pid, outcome::UNREAD);
            return false;
        };
        let sites = exe.sites;
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
        let Some(rand) = sites.rand.map(|r| r.biased(bias)) else {
            self.rand_stays(pid, outcome::NOT_FOUND);
            return false;
        };
        let key = go_rand::key(w.seed, lineage);
        let placed = exe.low.and_then(|low| go_rand::place(bias + low));
        let done = placed.ok_or(outcome::NO_ROOM).and_then(|base| {
            let made = made.filter(|m| m.0 == base).map(|m| m.1);
            install(pid, &rand, base, key, made)
        });
        if let Ok(base) = done {
            self.keep_sys_calls(pid, bias, base, &sites);
        }
        match done.map(|base| Rands::new(base, &rand, false)) {
            Ok(r) => {
                self.rands.extend(r.map(|r| (pid, r)));
                if !rand.maps && rand.inlined[0].0 == 0 {
                    self.rand_said(pid, outcome::MAPS);
                }
                true
            }
            Err(why) => {
                self.rand_stays(pid, why);
                false
            }
        }
    }

    /// A cgo program's mapping, made by its libseal (`shim/src/process/go_rand.rs`) where the
    /// supervisor finds it the same way (looked for at its first count, not while the program
    /// starts): counted once its first jump is seen in place.
    fn cgo_rands(&mut self) {
        self.cgo_rands = false;
        let pid = self.pid;
        let Some(exe) = self.go_exe(pid) else {
            return;
        };
        let Some(rand) = exe.sites.rand.map(|r| r.biased(self.bias)) else {
            return;
        };
        let base = exe.low.and_then(|low| go_rand::place(self.bias + low));
        if let Some(r) = base.and_then(|base| Rands::new(base, &rand, true)) {
            self.rands.insert(pid, r);
        }
    }

    /// What process `pid`'s Go executable has to redirect (`go_exe.rs`: read once, kept in
    /// the run and in the user's cache).
    pub(super) fn go_exe(&mut self, pid: i32) -> Option<super::super::go_exe::GoExe> {
        let dir = self.world.run_dir.as_deref();
        // Looked for once per process (`user_cache` keeps its answer).
        let cache = super::super::go_exe::user_cache();
        self.go_exes.of(pid, dir, cache.as_deref())
    }

    /// Go image `pid` was left as it is: the random family is unsealed.
    pub(super) fn rand_left(&mut self, pid: i32) {
        self.rands.remove(&pid);
        self.rand_stays(pid, outcome::UNSEALED);
    }

    /// Says in process `pid`'s census that its runtime's random numbers stay per thread, and
    /// why.
    fn rand_stays(&mut self, pid: i32, why: &str) {
        let detail = format!("{}{}{why}", outcome::NONE, outcome::BECAUSE);
        self.rand_said(pid, &detail);
    }

    fn rand_said(&mut self, pid: i32, detail: &str) {
        if let Some(slot) = self.slot(pid) {
            slot.unsealed(seal_abi::unsealed::GO_RANDOM, detail);
        }
    }

    /// Whether process `tgid` may have in-image draws to count.
    pub(super) fn has_rands(&self, tgid: i32) -> bool {
        self.rands.contains_key(&tgid) || (self.cgo_rands && tgid == self.pid)
    }

    /// Writes the draws process `tgid` made from its in-image sequence into its census slot
    /// (at its `exit_group` or `execve`: the counters are private to it, and gone after).
    pub(super) fn count_rands(&mut self, tgid: i32) {
        if self.cgo_rands && tgid == self.pid {
            self.cgo_rands();
        }
        self.count_in_image_calls(tgid);
        let Some(r) = self.rands.get(&tgid).copied() else {
            return;
        };
        let Some(d) = r.draws(tgid) else {
            return;
        };
        let Some(slot) = self.slot(tgid) else {
            return;
        };
        let (lo, hi) = r.range();
        slot.add_module(go_rand::MODULE_NAME, lo, hi);
        for (fid, ip, n) in r.rows(d) {
            slot.set(fid, 0, ip, n);
        }
    }

    /// Process `child` was forked (a copy) by `parent`: it draws from a copy of its parent's
    /// mapping, from the counts the copy holds (read now: a Go program's forked child runs no
    /// Go code before it execs).
    pub(super) fn forked_rands(&mut self, parent: i32, child: i32) {
        if self.cgo_rands && parent == self.pid {
            self.cgo_rands();
        }
        let Some(r) = self.rands.get(&parent).copied() else {
            return;
        };
        if let Some(r) = r.forked(child) {
            self.rands.insert(child, r);
        }
    }
}

/// Maps the code at `hint` (below the program) in `pid` (stopped at its exec), writes it and
/// points `sites` at it: the mapping's address, or the step that failed (the functions are
/// then left as they are, unless it is the last: rewriting them). `made`: the `mmap` and
/// `mprotect` results of the clock page's batch, which made the mapping already ([`Along`]).
fn install(
    pid: i32,
    sites: &go_rand::Sites,
    hint: u64,
    key: u64,
    made: Option<(i64, i64)>,
) -> Result<u64, &'static str> {
    let patches = sites.patches(hint).ok_or(outcome::NO_ROOM)?;
    let (map, prot) = match made {
        Some(m) => m,
        None => map_code(pid, hint)?,
    };
    if map != hint as i64 {
        return Err(outcome::MMAP);
    }
    if prot != 0 {
        return Err(outcome::MPROTECT);
    }
    let mut code = vec![0u8; go_rand::CODE_BYTES];
    go_rand::code(&mut code, hint, key, sites).ok_or(outcome::NO_ROOM)?;
    if !write_text(pid, hint, &code) {
        return Err(outcome::WRITE_CODE);
    }
    for (at, bytes) in patches.iter().filter(|p| p.0 != 0) {
        if !write_text(pid, *at, bytes) {
            return Err(outcome::REWRITE);
        }
    }
    Ok(hint)
}

/// The code's mapping at `hint`, in a batch of its own: the `mmap` and `mprotect` results.
fn map_code(pid: i32, hint: u64) -> Result<(i64, i64), &'static str> {
    let saved = super::super::remote::regs(pid).ok_or(outcome::MMAP)?;
    let mut b = Batch::new((saved.rsp - 16384) & !15);
    let first = map_calls(&mut b, hint);
    let r = b.run(pid, &saved).ok_or(outcome::MMAP)?;
    let result = |i: usize| r.get(i).copied().flatten();
    let map = result(first).ok_or(outcome::MMAP)?;
    Ok((map, result(first + 1).unwrap_or(i64::MIN)))
}

/// The code's mapping at `hint`'s calls (a private anonymous `mmap` there, then its code page
/// made read-only and executable), added to `c`: the first's number.
fn map_calls(c: &mut impl Calls, hint: u64) -> usize {
    let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
    let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE) as u64;
    let (i, z) = (Arg::Imm, Arg::Imm(0));
    let len = i(go_rand::MAP_BYTES as u64);
    let first = c.add(
        libc::SYS_mmap,
        [i(hint), len, i(rw), i(flags), i(u64::MAX), z],
    );
    c.stop_unless(hint);
    let rx = (libc::PROT_READ | libc::PROT_EXEC) as u64;
    let code = i(go_rand::CODE_BYTES as u64);
    c.add(libc::SYS_mprotect, [i(hint), code, i(rx), z, z, z]);
    first
}

/// Where the clock page's batch maps a Go image's random functions' code, and its calls'
/// first number there ([`Supervisor::rand_along`]).
#[derive(Clone, Copy)]
pub(super) struct RandAlong {
    base: u64,
    first: usize,
}

impl RandAlong {
    /// The mapping's address and its `mmap` and `mprotect` results, when the batch ran them.
    fn made(self, a: &Along) -> Option<(u64, (i64, i64))> {
        let map = a.result(self.first)?;
        Some((
            self.base,
            (map, a.result(self.first + 1).unwrap_or(i64::MIN)),
        ))
    }
}
