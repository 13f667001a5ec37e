//! A static Go image's `crypto/rand` at native speed. At the exec stop the one call
//! `internal/syscall/unix.GetRandom` makes to `syscall.Syscall` (a 5-byte `call rel32`) is
//! pointed at code in a mapping injected next to the program (within ±2 GiB), shared with the
//! supervisor: the code (`seal_abi::supervised::entropy`) serves the read from a window of a
//! stream of the image's own, and makes the `getrandom` system call (answered here, at the
//! read's position) only when the window does not hold it. Go's function is otherwise left as
//! it is (its error handling, its `ENOSYS` latch); the call is rewritten while the image is
//! stopped at its exec, before any of its instructions ran, so no thread ever sees it
//! half-written. The code is not Go's: Go's asynchronous preemption never stops a thread
//! there (it finds no function for the PC), and a profiling signal counts it as external code.
//!
//! The in-image reads are counted in the process's census slot by the code itself (a
//! `lock inc` on the count word of a census pair mapped into the image), so the census is
//! exact without the supervisor seeing them.
//!
//! Any step that fails leaves `GetRandom` alone: the reads then go to the supervisor as
//! before.

use std::sync::atomic::{AtomicU64, Ordering};

use seal_abi::supervised::entropy as e;

use super::batch::{Arg, Batch, Calls};
use super::vdso_clock::poke;

/// What distinguishes this stream from the image's others.
const LABEL: u64 = 0x676f_2d65_6e74_7270;

/// One image's entropy mapping, as the supervisor holds it.
pub struct Entropy {
    /// The supervisor's mapping of it (never unmapped).
    map: *mut u8,
    key: u64,
    /// Where it is in the image.
    pub range: (u64, u64),
    /// The rewritten call's address (the census names the in-image reads' caller from it).
    pub site: u64,
}

/// Where the call to patch is, and where the image's mappings start.
pub struct Site {
    pub call: u64,
    /// The lowest address of the image's mappings, and the highest.
    low: u64,
}

impl Site {
    /// `GetRandom`'s one call to `syscall.Syscall` as `seal_abi::supervised::go_site` found
    /// it (which libseal uses too), in an image whose executable is mapped with load bias
    /// `bias`.
    pub fn biased(s: seal_abi::supervised::go_site::Site, bias: u64) -> Site {
        Site {
            call: bias + s.call,
            low: bias + s.low,
        }
    }
}

/// Sets the in-image entropy up in Go image `pid`, stopped at its exec, in a batch of its own
/// ([`plan`], then [`Planned::finish`]). `None` (and `GetRandom` left alone) when any step
/// fails.
pub fn install(
    pid: i32,
    run_dir: &std::path::Path,
    site: &Site,
    key: (u64, u64),
    census: Option<(&std::path::Path, u64)>,
    mapped: Option<(u64, u64)>,
) -> Option<Entropy> {
    let saved = super::remote::regs(pid)?;
    // Path names and results on the new stack well below the stack pointer (inside its
    // mapping, which exec sets up with room to grow).
    let mut b = Batch::new((saved.rsp - 16384) & !15);
    let paths = ((saved.rsp - 8192) & !15, (saved.rsp - 12288) & !15);
    let p = plan(pid, run_dir, site, key, census, mapped, paths, &mut b)?;
    match b.run(pid, &saved) {
        Some(r) => p.finish(pid, |i| r.get(i).copied().flatten()),
        None => {
            p.abandon();
            None
        }
    }
}

/// Prepares the in-image entropy of Go image `pid` (stopped at its exec): `site` from
/// [`Site::biased`], the stream keyed by `seed` and `lineage`, in-image reads counted at the
/// u64 at offset `count` of file `census` (else in the mapping's header). `mapped`: a page of
/// that file the image maps already (its offset and address in the image: the clock page's
/// census counters), used instead of mapping it again when it holds the count. Creates the
/// mapping's file and maps it here, writes its path and the census file's in the image at
/// `paths`, and adds the calls that map them there to `c` (a batch of its own, or the clock
/// page's). `None` when a step fails (nothing is left behind).
#[allow(clippy::too_many_arguments)]
pub fn plan(
    pid: i32,
    run_dir: &std::path::Path,
    site: &Site,
    (seed, lineage): (u64, u64),
    census: Option<(&std::path::Path, u64)>,
    mapped: Option<(u64, u64)>,
    (path_at, table_at): (u64, u64),
    c: &mut impl Calls,
) -> Option<Planned> {
    let path = run_dir.join(format!("go-entropy-{pid}"));
    let file = super::page::create_shared_file(&path)?;
    let map = (|| {
        file.set_len(e::MAP_BYTES as u64).ok()?;
        super::page::map_shared_len(&file, e::MAP_BYTES, true)
    })();
    let Some(map) = map.map(|m| m.cast::<u8>()) else {
        let _ = std::fs::remove_file(&path);
        return None;
    };
    let mut p = Planned {
        path,
        map,
        key: key(seed, lineage),
        call: site.call,
        hint: 0,
        first: 0,
        count: census.map(|c| c.1),
        shared: None,
        census_map: None,
    };
    let placed = (|| {
        let name =
            |f: &std::path::Path, at: u64| super::remote::write_path(pid, at, f).then_some(at);
        let at = name(&p.path, path_at)?;
        // Below the program (a static Go program starts at 4 MiB; nothing is mapped under
        // it), page-aligned, never over another mapping.
        let hint = site.low.checked_sub(e::MAP_BYTES as u64 + (64 << 10))? & !0xfff;
        let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        let fixed = (libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE) as u64;
        let rx = (libc::PROT_READ | libc::PROT_EXEC) as u64;
        let (i, z) = (Arg::Imm, Arg::Imm(0));
        let o_rdwr = i(libc::O_RDWR as u64);
        let first = c.add(libc::SYS_open, [i(at), o_rdwr, z, z, z, z]);
        c.stop_on_error();
        let len = i(e::MAP_BYTES as u64);
        c.add(libc::SYS_mmap, [i(hint), len, i(rw), i(fixed), Arg::Fd, z]);
        c.add(libc::SYS_close, [Arg::Fd, z, z, z, z, z]);
        c.stop_unless(0);
        let code = i(e::CODE_BYTES as u64);
        c.add(libc::SYS_mprotect, [i(hint), code, i(rx), z, z, z]);
        c.stop_unless(0);
        // The census pair's page, mapped too (unless the clock page's set-up mapped it):
        // the code counts there.
        let shared = match (census, mapped) {
            (Some((_, off)), Some((page, at))) if off & !0xfff == page => Some(at),
            _ => None,
        };
        let mut census_map = None;
        if let (Some((table, off)), None) = (census, shared) {
            let at = name(table, table_at)?;
            let page = i(off & !0xfff);
            let shared = i(libc::MAP_SHARED as u64);
            c.add(libc::SYS_open, [i(at), o_rdwr, z, z, z, z]);
            c.stop_on_error();
            census_map = Some(c.add(libc::SYS_mmap, [z, i(4096), i(rw), shared, Arg::Fd, page]));
            c.add(libc::SYS_close, [Arg::Fd, z, z, z, z, z]);
        }
        Some((hint, first, shared, census_map))
    })();
    match placed {
        Some((hint, first, shared, census_map)) => {
            (p.hint, p.first, p.shared, p.census_map) = (hint, first, shared, census_map);
            Some(p)
        }
        None => {
            p.abandon();
            None
        }
    }
}

/// An image's entropy mapping, prepared by [`plan`]; its calls are to run.
pub struct Planned {
    path: std::path::PathBuf,
    /// The supervisor's mapping of it.
    map: *mut u8,
    key: u64,
    /// The call to rewrite.
    call: u64,
    /// Where the mapping goes in the image.
    hint: u64,
    /// The number of its first call (the file's `open`), then `mmap`, `close`, `mprotect`.
    first: usize,
    /// The census pair's offset in the census file.
    count: Option<u64>,
    /// Where the image maps the census pair's page already.
    shared: Option<u64>,
    /// Else the number of the call that maps it.
    census_map: Option<usize>,
}

impl Planned {
    /// Did its calls run (`result`: a call's result by number, `None` for one that did not)?
    pub fn ran(&self, result: impl Fn(usize) -> Option<i64>) -> bool {
        result(self.first).is_some()
    }

    /// Once its calls ran (`result`: as for [`Planned::ran`]): the code written, the call
    /// rewritten. `None` (and `GetRandom` left alone) when a step failed.
    pub fn finish(self, pid: i32, result: impl Fn(usize) -> Option<i64>) -> Option<Entropy> {
        let done = (|| {
            let addr = self.hint;
            if result(self.first + 1) != Some(addr as i64) || result(self.first + 3) != Some(0) {
                return None;
            }
            let count_at = match (self.count, self.shared, self.census_map) {
                (Some(off), Some(at), _) => at + (off & 0xfff),
                (Some(off), None, Some(i)) => {
                    let c = result(i).filter(|&c| c > 0)?;
                    c as u64 + (off & 0xfff)
                }
                _ => addr + (e::HEAD_AT + e::SERVED) as u64,
            };
            let call = seal_abi::supervised::entropy::call_rel32(self.call, addr)?;
            // SAFETY: the first CODE_BYTES of our mapping of MAP_BYTES bytes.
            let code = unsafe { std::slice::from_raw_parts_mut(self.map, e::CODE_BYTES) };
            e::getrandom_code(code, addr, count_at)?;
            let ent = Entropy {
                map: self.map,
                key: self.key,
                range: (addr, addr + e::MAP_BYTES as u64),
                site: self.call,
            };
            ent.refill(0);
            poke(pid, self.call, &call).then_some(ent)
        })();
        let _ = std::fs::remove_file(&self.path);
        if done.is_none() {
            // SAFETY: our mapping of MAP_BYTES bytes, which nothing else refers to.
            unsafe { libc::munmap(self.map.cast(), e::MAP_BYTES) };
        }
        done
    }

    /// Its calls did not run: the file removed, the supervisor's mapping let go.
    pub fn abandon(self) {
        let _ = std::fs::remove_file(&self.path);
        // SAFETY: our mapping of MAP_BYTES bytes, which nothing else refers to.
        unsafe { libc::munmap(self.map.cast(), e::MAP_BYTES) };
    }

    /// The census pair's offset it counts at (its fallback installs with the same).
    pub fn count(&self) -> Option<u64> {
        self.count
    }
}

/// The entropy mapping libseal made for cgo program `pid` (`go-entropy-PID` in the run
/// directory, mapped in the program at the header's `BASE`, for the call at `SITE`): the
/// window filled and `TAKEN` marked (libseal then rewrites the call). `None` when there is
/// none (libseal leaves `GetRandom` alone). libseal removes the file.
pub fn take(pid: i32, world: &super::world::World) -> Option<Entropy> {
    let name = format!("{}{pid}", e::FILE_PREFIX);
    let path = world.run_dir.as_ref()?.join(name);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .ok()?;
    if file.metadata().ok()?.len() != e::MAP_BYTES as u64 {
        return None;
    }
    let map = super::page::map_shared_len(&file, e::MAP_BYTES, true)?.cast::<u8>();
    let mut ent = Entropy {
        map,
        key: key(world.seed, world.lineage),
        range: (0, 0),
        site: 0,
    };
    let (base, site) = (
        ent.head(e::BASE).load(Ordering::SeqCst),
        ent.head(e::SITE).load(Ordering::SeqCst),
    );
    if base == 0 || site == 0 {
        return None;
    }
    (ent.range, ent.site) = ((base, base + e::MAP_BYTES as u64), site);
    ent.refill(0);
    ent.head(e::TAKEN).store(e::TAKEN_MAGIC, Ordering::SeqCst);
    Some(ent)
}

/// The key of an image's in-image stream: its seed and lineage, with this stream's label.
fn key(seed: u64, lineage: u64) -> u64 {
    seal_abi::mix64(seed ^ seal_abi::mix64(lineage ^ LABEL))
}

impl Entropy {
    fn head(&self, word: usize) -> &AtomicU64 {
        // SAFETY: a header word of our live mapping, 8-aligned.
        unsafe { &*self.map.add(e::HEAD_AT + word).cast::<AtomicU64>() }
    }

    /// Moves the window to hold positions `[lo, lo + WINDOW)`: `LO` first, then the bytes,
    /// then `HI`, so that a reader never copies a byte that is not its position's.
    fn refill(&self, lo: u64) {
        self.head(e::LO).store(lo, Ordering::SeqCst);
        // SAFETY: the window of our mapping; the image only reads it.
        let win = unsafe { std::slice::from_raw_parts_mut(self.map.add(e::WINDOW_AT), e::WINDOW) };
        let end = lo + e::WINDOW as u64;
        let mut q = lo;
        // Byte by byte to the first whole block, then whole blocks (the window's size is a
        // multiple of 8, so a block never wraps), then the last bytes.
        while q < end {
            let at = (q % e::WINDOW as u64) as usize;
            if q.is_multiple_of(8) && q + 8 <= end {
                win[at..at + 8].copy_from_slice(&e::block(self.key, q / 8));
                q += 8;
            } else {
                win[at] = e::block(self.key, q / 8)[(q % 8) as usize];
                q += 1;
            }
        }
        std::sync::atomic::fence(Ordering::SeqCst);
        self.head(e::HI)
            .store(lo + e::WINDOW as u64, Ordering::SeqCst);
    }

    /// A read the window did not hold: stream bytes `[pos, pos + len)`, written to `buf` of
    /// thread `tid` by `write`; the window then moves past it. The read's count, or `EFAULT`.
    pub fn draw(
        &self,
        pos: u64,
        len: usize,
        write: impl Fn(u64, &[u8]) -> bool,
        buf: u64,
    ) -> Result<i64, i32> {
        let len = len.min(33_554_431);
        let mut chunk = vec![0u8; len.min(1 << 16)];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(chunk.len());
            e::fill_at(self.key, pos + done as u64, &mut chunk[..n]);
            if !write(buf + done as u64, &chunk[..n]) {
                return if done == 0 {
                    Err(libc::EFAULT)
                } else {
                    Ok(done as i64)
                };
            }
            done += n;
        }
        let end = pos + len as u64;
        if end > self.head(e::LO).load(Ordering::SeqCst) {
            self.refill(end);
        }
        Ok(len as i64)
    }
}
