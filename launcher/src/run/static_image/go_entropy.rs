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

use super::batch::{Arg, Batch};
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

/// Sets the in-image entropy up in Go image `pid`, stopped at its exec: `site` from [`Site::biased`],
/// the stream keyed by `seed` and `lineage`, in-image reads counted at the u64 at offset
/// `count` of file `census` (else in the mapping's header). `mapped`: a page of that file
/// the image maps already (its offset and address in the image: the clock page's census
/// counters), used instead of mapping it again when it holds the count. `None` (and
/// `GetRandom` left alone) when any step fails.
pub fn install(
    pid: i32,
    run_dir: &std::path::Path,
    site: &Site,
    (seed, lineage): (u64, u64),
    census: Option<(&std::path::Path, u64)>,
    mapped: Option<(u64, u64)>,
) -> Option<Entropy> {
    let path = run_dir.join(format!("go-entropy-{pid}"));
    let file = super::page::create_shared_file(&path)?;
    let done = (|| {
        file.set_len(e::MAP_BYTES as u64).ok()?;
        let map = super::page::map_shared_len(&file, e::MAP_BYTES, true)?.cast::<u8>();
        let saved = super::remote::regs(pid)?;
        let placed = (|| {
            let name =
                |p: &std::path::Path, at: u64| super::remote::write_path(pid, at, p).then_some(at);
            // Path names and results on the new stack well below the stack pointer (inside
            // its mapping, which exec sets up with room to grow).
            let at = name(&path, (saved.rsp - 8192) & !15)?;
            let results = (saved.rsp - 16384) & !15;
            // Below the program (a static Go program starts at 4 MiB; nothing is mapped
            // under it), page-aligned, never over another mapping.
            let hint = site.low.checked_sub(e::MAP_BYTES as u64 + (64 << 10))? & !0xfff;
            let rw = (libc::PROT_READ | libc::PROT_WRITE) as u64;
            let fixed = (libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE) as u64;
            let rx = (libc::PROT_READ | libc::PROT_EXEC) as u64;
            let (i, z) = (Arg::Imm, Arg::Imm(0));
            let o_rdwr = i(libc::O_RDWR as u64);
            let mut b = Batch::new(results);
            b.call(libc::SYS_open, [i(at), o_rdwr, z, z, z, z])
                .or_stop();
            let len = i(e::MAP_BYTES as u64);
            b.call(libc::SYS_mmap, [i(hint), len, i(rw), i(fixed), Arg::Fd, z]);
            b.call(libc::SYS_close, [Arg::Fd, z, z, z, z, z]);
            b.or_stop_unless(0);
            let code = i(e::CODE_BYTES as u64);
            b.call(libc::SYS_mprotect, [i(hint), code, i(rx), z, z, z]);
            b.or_stop_unless(0);
            // The census pair's page, mapped too (unless the clock page's set-up mapped it):
            // the code counts there.
            let shared = match (census, mapped) {
                (Some((_, off)), Some((page, at))) if off & !0xfff == page => Some(at),
                _ => None,
            };
            if let (Some((table, off)), None) = (census, shared) {
                let at = name(table, (saved.rsp - 12288) & !15)?;
                let page = i(off & !0xfff);
                let shared = i(libc::MAP_SHARED as u64);
                b.call(libc::SYS_open, [i(at), o_rdwr, z, z, z, z])
                    .or_stop();
                b.call(libc::SYS_mmap, [z, i(4096), i(rw), shared, Arg::Fd, page]);
                b.call(libc::SYS_close, [Arg::Fd, z, z, z, z, z]);
            }
            let r = b.run(pid, &saved)?;
            if r.get(1).copied().flatten() != Some(hint as i64) || r.get(3) != Some(&Some(0)) {
                return None;
            }
            let count_at = match census {
                Some((_, off)) if shared.is_some() => shared? + (off & 0xfff),
                Some((_, off)) => {
                    let c = r.get(5).copied().flatten().filter(|&c| c > 0)?;
                    c as u64 + (off & 0xfff)
                }
                None => hint + (e::HEAD_AT + e::SERVED) as u64,
            };
            Some((hint, count_at))
        })();
        let (addr, count_at) = placed?;
        let call = seal_abi::supervised::entropy::call_rel32(site.call, addr)?;
        // SAFETY: the first CODE_BYTES of our mapping of MAP_BYTES bytes.
        let code = unsafe { std::slice::from_raw_parts_mut(map, e::CODE_BYTES) };
        e::getrandom_code(code, addr, count_at)?;
        let ent = Entropy {
            map,
            key: key(seed, lineage),
            range: (addr, addr + e::MAP_BYTES as u64),
            site: site.call,
        };
        ent.refill(0);
        poke(pid, site.call, &call).then_some(ent)
    })();
    let _ = std::fs::remove_file(&path);
    done
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
