//! A Go image's clock reads at native speed, from a page shared with the supervisor
//! (`seal_abi::supervised::clock_page`: the layout and the code that reads it). In a static Go
//! image, at the exec stop the supervisor maps the page into the image (system calls injected
//! while the image is stopped: `open` of a file in the run directory, `mmap`, `close`) and
//! writes the code over the vDSO's `__vdso_clock_gettime`. In a dynamically linked one (cgo),
//! libseal maps the page and gives the runtime a vDSO of its own making; the supervisor takes
//! its side of the page from the run directory ([`take`]). The supervisor moves `C` with
//! atomic adds on its own mapping of the page, and counts the page's reads in the census.

use std::sync::atomic::{AtomicU64, Ordering};

use seal_abi::supervised::clock_page::{self as cp, Kind, MAX_LEN};

use super::stop::Stop;
pub(super) use super::text::poke;
use super::vdso_rest::Sym;

/// The supervisor's mapping of one image's clock page.
pub struct Page {
    words: *const AtomicU64,
    /// Where the image's reads are counted in the census: the clock code's address, when the
    /// supervisor counts them (static), else `None` (libseal counts them in its own slot).
    pub site: Option<u64>,
    /// The page of the run table the image's counters are on, as mapped in the image: its
    /// offset in the table and its address there (a static Go image's entropy counts there
    /// too, `go_entropy.rs`).
    pub census: Option<(u64, u64)>,
}

impl Page {
    pub(super) fn word(&self, i: usize) -> &AtomicU64 {
        // SAFETY: a live shared mapping of one page (eight u64 words used), never unmapped.
        unsafe { &*self.words.add(i) }
    }

    /// `C`, as the image last saw it (`[MONOTONIC] - MONO_BASE`).
    pub fn c(&self, mono_base: i64) -> i64 {
        self.word(cp::MONOTONIC).load(Ordering::Acquire) as i64 - mono_base
    }

    /// Moves `C` by `d` ns and starts the read count again.
    pub fn advance(&self, d: i64) {
        self.word(cp::REALTIME)
            .fetch_add(d as u64, Ordering::AcqRel);
        self.word(cp::MONOTONIC)
            .fetch_add(d as u64, Ordering::AcqRel);
        self.word(cp::SINCE_MOVE).store(0, Ordering::Release);
    }

    /// The reads of `CLOCK_REALTIME` and `CLOCK_MONOTONIC` counted in the page itself.
    pub fn reads(&self) -> [u64; 2] {
        [0, 1].map(|id| self.word(cp::READS + id).load(Ordering::Acquire))
    }

    /// Lets the supervisor's mapping go (its image has gone): the one `Page` of a mapping,
    /// since a `Page` is never copied.
    pub fn unmap(self) {
        // SAFETY: our own one-page mapping, referred to by this `Page` alone (consumed).
        unsafe { libc::munmap(self.words as *mut libc::c_void, 4096) };
    }

    /// Maps the first page of `file` and sets its clock words to `first`.
    fn map(file: &std::fs::File, first: [i64; 2], site: Option<u64>) -> Option<Page> {
        // Kept for the supervisor's life.
        let map = super::page::map_shared(file, true)?;
        let page = Page {
            words: map.cast::<AtomicU64>(),
            site,
            census: None,
        };
        page.start_at(first);
        Some(page)
    }

    /// Sets the clock words to `first`.
    fn start_at(&self, first: [i64; 2]) {
        self.word(cp::REALTIME)
            .store(first[0] as u64, Ordering::Release);
        self.word(cp::MONOTONIC)
            .store(first[1] as u64, Ordering::Release);
    }
}

/// The clock words a Go image starts with: `[epoch + C, mono_base + C]`.
fn first_values(world: &super::world::World, mono_base: i64) -> [i64; 2] {
    [world.epoch_ns + world.clock, mono_base + world.clock]
}

/// A clock page made before the image's exec stop (in the supervisor's idle time before the
/// request where it can be: [`Prepared::ahead`]): its file in the run directory
/// (`go-clock-PID`, `go-clock-ahead-SUPERVISOR`), mapped here with its first values. The file
/// is removed when this is dropped, after the detach: the image has mapped it by then, or
/// never will.
pub struct Prepared {
    path: std::path::PathBuf,
    /// The run table, whose census page the image maps too.
    table: std::path::PathBuf,
    words: *const AtomicU64,
    taken: std::cell::Cell<bool>,
}

// SAFETY: a shared mapping of our own, used by one thread at a time (the supervisor's): moved
// once, from where the root's supervisor makes it ahead (`AHEAD`) to where it uses it.
unsafe impl Send for Prepared {}

/// The page the root's supervisor made while it waited for its request ([`Prepared::ahead`]),
/// with the run directory it is in.
static AHEAD: std::sync::Mutex<Option<(std::path::PathBuf, Prepared)>> =
    std::sync::Mutex::new(None);

impl Prepared {
    /// The page of traced image `pid` (about to exec), starting at the world's clock, when
    /// its clocks are sealed (`wanted`): the one made ahead when there is one
    /// ([`Prepared::ahead`]), which goes (its file with it) when it is not wanted.
    pub fn new(
        wanted: bool,
        pid: i32,
        world: &super::world::World,
        mono_base: i64,
    ) -> Option<Prepared> {
        let dir = world.run_dir.as_ref()?;
        let ahead = Prepared::take_ahead(dir);
        if !wanted {
            return None;
        }
        let first = first_values(world, mono_base);
        match ahead {
            Some(p) => {
                let page = Page {
                    words: p.words,
                    site: None,
                    census: None,
                };
                page.start_at(first);
                Some(p)
            }
            None => Prepared::at(pid, dir, first),
        }
    }

    /// Makes the next image's page in a supervisor's idle time, before its request (the
    /// root's supervisor's, a spare's), named after this process: the image's pid is not
    /// known yet. Its file, created and mapped, was ~20 µs of the request's way to the exec.
    pub fn ahead(dir: &std::path::Path) {
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        let name = format!("go-clock-ahead-{me}");
        if let Some(p) = Prepared::at_path(dir.join(name), dir, [0, 0]) {
            if let Ok(mut a) = AHEAD.lock() {
                *a = Some((dir.to_path_buf(), p));
            }
        }
    }

    /// The page [`Prepared::ahead`] made for run directory `dir`, if it did.
    fn take_ahead(dir: &std::path::Path) -> Option<Prepared> {
        match AHEAD.lock().ok()?.take() {
            Some((d, p)) if d == dir => Some(p),
            _ => None,
        }
    }

    /// The page of image `pid` in run directory `dir`, its clock words `first`.
    pub fn at(pid: i32, dir: &std::path::Path, first: [i64; 2]) -> Option<Prepared> {
        Prepared::at_path(dir.join(format!("go-clock-{pid}")), dir, first)
    }

    fn at_path(
        path: std::path::PathBuf,
        dir: &std::path::Path,
        first: [i64; 2],
    ) -> Option<Prepared> {
        let file = super::page::create_shared_file(&path)?;
        let page = file
            .set_len(4096)
            .ok()
            .and_then(|()| Page::map(&file, first, None));
        let Some(page) = page else {
            let _ = std::fs::remove_file(&path);
            return None;
        };
        Some(Prepared {
            path,
            table: dir.join(seal_abi::RUN_TABLE_NAME),
            words: page.words,
            taken: std::cell::Cell::new(false),
        })
    }

    /// The page, for the image's clock code at `site`.
    fn take(&self, site: Option<u64>) -> Page {
        self.taken.set(true);
        Page {
            words: self.words,
            site,
            census: None,
        }
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        if !self.taken.get() {
            // SAFETY: our own mapping of one page, which no `Page` refers to.
            unsafe { libc::munmap(self.words as *mut libc::c_void, 4096) };
        }
    }
}

/// The page of cgo program `pid` that libseal made (`go-clock-PID` in the run directory):
/// its clock words set, [`cp::TAKEN`] marked (libseal then gives the runtime its vDSO), the
/// file removed. `None` when there is none (libseal then hides the vDSO).
pub fn take(pid: i32, world: &super::world::World, mono_base: i64) -> Option<Page> {
    let path = world.run_dir.as_ref()?.join(format!("go-clock-{pid}"));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .ok()?;
    let page = Page::map(&file, first_values(world, mono_base), None);
    if let Some(p) = &page {
        let tick = world.tick_ns.clamp(0, i32::MAX as i64) as u64;
        p.word(cp::TICK).store(tick, Ordering::Release);
        p.word(cp::TAKEN).store(cp::TAKEN_MAGIC, Ordering::Release);
    }
    page
}

/// The code of `kind` reading the page at `page` (see the module) and where its entries are.
fn code(page: u64, tick: u32, kind: Kind, spin: u32) -> (Vec<u8>, cp::Entries) {
    let mut c = [0u8; MAX_LEN];
    let e = cp::generate_spin(&mut c, page, tick, kind, spin);
    (c[..e.len].to_vec(), e)
}

/// Reads `pid`'s vDSO image (at `base`; `map`: its mapping, which bounds the read), in one
/// read.
pub(super) fn vdso_bytes(pid: i32, base: u64, map: Option<(u64, u64)>) -> Vec<u8> {
    let len = match map {
        Some((lo, hi)) if (lo..hi).contains(&base) => (hi - base) as usize,
        _ => 8 * 4096,
    };
    let mut out = vec![0u8; len.min(64 * 4096)];
    let n = super::batch::read_some(pid, base, &mut out);
    out.truncate(n);
    out
}

/// The address and size of `name` among the `symbols` of a vDSO image of `len` bytes (loaded
/// at `base`).
fn entry_in(symbols: &[Sym], len: usize, base: u64, name: &str) -> Option<(u64, u64)> {
    symbols
        .iter()
        .find(|s| s.name == name)
        .filter(|s| s.at < len as u64)
        .map(|s| (base + s.at, s.size))
}

/// Sets the fast clock up in image `pid`, stopped at its exec (`stop`: its vDSO, registers,
/// mappings), reading `prepared` (made while it exec'd), `tick` a tick, `counters` where in
/// the run table its reads are counted (mapped into the image too): `clock_gettime`'s of
/// `CLOCK_REALTIME` and `CLOCK_MONOTONIC`, then ([`Kind::Ticking`]) `gettimeofday`'s and
/// `time`'s. A [`Kind::Ticking`] image also gets a private page (`MADV_WIPEONFORK`) whose first
/// word holds the page's address, and its `__vdso_gettimeofday` and `__vdso_time` jump to
/// code of their own. The vDSO's other entries are sealed too (`vdso_rest.rs`), in the same
/// write as the clock code: one write through `/proc/PID/mem` for every change to the vDSO,
/// after the mappings are made (nothing in it to put back when they fail). The page, and ([`Kind::Ticking`]) that word's address in the image.
/// `spin`: `--spin-after` ([`Kind::Ticking`]: reads after a wait that leave the clock still).
/// `None` (nothing changed in the image, or only what the next exec throws away) when any
/// step fails: the caller then removes the vDSO, and reads go by system call.
#[allow(clippy::too_many_arguments)]
pub fn install(
    pid: i32,
    stop: &Stop,
    prepared: &Prepared,
    tick: i64,
    counters: Option<&[u64]>,
    kind: Kind,
    spin: u32,
    along: Option<&mut super::batch::Along>,
) -> Option<(Page, u64)> {
    let (vdso, saved) = (stop.vdso_base()?, stop.regs?);
    let elf = vdso_bytes(pid, vdso, stop.vdso);
    let symbols = super::vdso_rest::symbols(&elf)?;
    let (func, size) = entry_in(&symbols, elf.len(), vdso, "__vdso_clock_gettime")?;
    let rest = super::vdso_rest::edits(&symbols, vdso)?;
    let ticking = kind == Kind::Ticking;
    // The entries that jump to code of their own after `__vdso_clock_gettime`'s.
    let others: Vec<(u64, bool)> = if ticking {
        ["__vdso_gettimeofday", "__vdso_time"]
            .iter()
            .enumerate()
            .filter_map(|(i, n)| entry_in(&symbols, elf.len(), vdso, n).map(|(a, _)| (a, i == 0)))
            .collect()
    } else {
        Vec::new()
    };
    // Counted in the census, or (a Go image only) in the page.
    if ticking && counters.is_none_or(|c| c.len() < 4) {
        return None;
    }
    // The supervisor's side of the page: a file in the run directory, removed after the
    // detach.
    let (path, table) = (&prepared.path, &prepared.table);
    let (_, entries) = code(0, tick as u32, kind, spin);
    if (size as usize) < entries.len {
        return None;
    }
    let done = (|| {
        let page = prepared.take(Some(func));
        // The path, on the new stack well below the stack pointer (inside the stack's mapping,
        // which exec sets up with room to grow).
        let at = (saved.rsp - 8192) & !15;
        let table_at = at + 4096;
        for (p, to) in [(path, at), (table, table_at)] {
            if !super::remote::write_path(pid, to, p) {
                return None;
            }
        }
        let word = if ticking {
            Some(stop.free_page()?)
        } else {
            None
        };
        let result = maps(pid, &saved, [at, table_at], counters, word, along);
        // mmap's errors are -4095..-1.
        let (addr, census, pointer) = result?;
        let addr = (addr > 0).then_some(addr as u64)?;
        if ticking && census.is_none() {
            return None;
        }
        // The image's reads are counted in its census slot, or else in the page's own words
        // (which the supervisor writes to the census, `serve.rs`).
        let own = [0, 1].map(|id| addr + 8 * (cp::READS + id) as u64).to_vec();
        let mut page = page;
        if let (Some(c), Some(&off)) = (&census, counters.and_then(|c| c.first())) {
            page.site = None;
            page.census = Some((off & !4095, c[0] & !4095));
        }
        let words = [
            cp::COUNTER,
            cp::COUNTER + 1,
            cp::COUNTER_GETTIMEOFDAY,
            cp::COUNTER_TIME,
        ];
        for (&w, counter) in words.iter().zip(census.unwrap_or(own)) {
            page.word(w).store(counter, Ordering::Release);
        }
        if ticking && !super::remote::write(pid, pointer, &addr.to_le_bytes()) {
            return None;
        }
        let (real, _) = code(
            if ticking { pointer } else { addr },
            tick as u32,
            kind,
            spin,
        );
        // Every change to the vDSO in one write (a ticking image's code is ~280 bytes: 35
        // pokes; the other entries' were a few more).
        let mut image = elf.clone();
        let mut put = |at: u64, code: &[u8]| {
            let off = (at - vdso) as usize;
            image.get_mut(off..off + code.len())?.copy_from_slice(code);
            Some(())
        };
        // The other entries first: `__vdso_gettimeofday` and `__vdso_time` then jump to the
        // page's code.
        for (at, code) in &rest {
            put(*at, code)?;
        }
        put(func, &real)?;
        for &(entry, gtod) in &others {
            let to = func
                + if gtod {
                    entries.gettimeofday
                } else {
                    entries.time
                }? as u64;
            let rel = (to as i64 - (entry as i64 + 5)) as i32;
            let mut jmp = vec![0xe9]; // jmp rel32
            jmp.extend(rel.to_le_bytes());
            put(entry, &jmp)?;
        }
        let (lo, hi) = changed(&elf, &image)?;
        if !super::batch::write_text(pid, vdso + lo as u64, &image[lo..hi]) {
            return None;
        }
        Some((page, pointer))
    })();
    if done.is_none() {
        // The kernel's code back (the caller also removes the vDSO from the auxiliary vector,
        // so the runtime never calls it), where a write failed part-way.
        let spans = (others.iter().map(|o| (o.0, 5)))
            .chain(rest.iter().map(|r| (r.0, r.1.len())))
            .chain([(func, entries.len)]);
        let (lo, hi) = spans.fold((u64::MAX, 0), |(lo, hi), (at, len)| {
            (lo.min(at), hi.max(at + len as u64))
        });
        if let Some(orig) = elf.get((lo - vdso) as usize..(hi - vdso) as usize) {
            super::batch::write_text(pid, lo, orig);
        }
    }
    done
}

/// The mappings an image's clock code reads, made in stopped image `pid` (registers `saved`;
/// `path` and `table` where the two paths are written in it) in one batch (`batch.rs`: one
/// stop, where a system call injected one by one, by a single step, cost a scheduling round
/// trip each): its clock page (the file whose path is at `path`), the page of the run table
/// (path at `table`) holding `counters` (a Go image's page works without it), and
/// ([`Kind::Ticking`]) the private page of the word naming the clock page, at `word`
/// (`MAP_FIXED_NOREPLACE`, so the batch needs no result of its own) with `MADV_WIPEONFORK`.
/// The clock page's address, the counters' addresses in the image, and the word's (0: none).
fn maps(
    pid: i32,
    saved: &libc::user_regs_struct,
    [path, table]: [u64; 2],
    counters: Option<&[u64]>,
    word: Option<u64>,
    along: Option<&mut super::batch::Along>,
) -> Option<(i64, Option<Vec<u64>>, u64)> {
    use super::batch::{Arg::Fd, Arg::Imm, Batch};
    // The counters on one page of the table, or none.
    let counters = counters.filter(|c| {
        let off = c.first().map_or(0, |o| o & !4095);
        c.iter().all(|&o| o & !4095 == off)
    });
    if word.is_some() && counters.is_none() {
        return None;
    }
    let (rw, shared) = (
        (libc::PROT_READ | libc::PROT_WRITE) as u64,
        libc::MAP_SHARED as u64,
    );
    let private = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE) as u64;
    let open = |at| {
        [
            Imm(at),
            Imm(libc::O_RDWR as u64),
            Imm(0),
            Imm(0),
            Imm(0),
            Imm(0),
        ]
    };
    let map = |off| [Imm(0), Imm(4096), Imm(rw), Imm(shared), Fd, Imm(off)];
    let close = [Fd, Imm(0), Imm(0), Imm(0), Imm(0), Imm(0)];
    let mut b = Batch::new(path + 3072);
    b.call(libc::SYS_open, open(path)).or_stop();
    b.call(libc::SYS_mmap, map(0)).or_stop();
    b.call(libc::SYS_close, close);
    let off = counters.map(|c| c[0] & !4095);
    if let Some(off) = off {
        b.call(libc::SYS_open, open(table)).or_stop();
        // Closed even when it could not be mapped.
        b.call(libc::SYS_mmap, map(off));
        b.call(libc::SYS_close, close);
    }
    if let Some(word) = word {
        let own = [
            Imm(word),
            Imm(4096),
            Imm(rw),
            Imm(private),
            Imm(u64::MAX),
            Imm(0),
        ];
        b.call(libc::SYS_mmap, own).or_stop_unless(word);
        let wipe = libc::MADV_WIPEONFORK as u64;
        let advise = [Imm(word), Imm(4096), Imm(wipe), Imm(0), Imm(0), Imm(0)];
        b.call(libc::SYS_madvise, advise).or_stop_unless(0);
    }
    // Last: a step of the batch that fails skips what follows it.
    let along_at = b.calls();
    if let Some(a) = &along {
        a.add_to(&mut b);
    }
    let r = b.run(pid, saved)?;
    if let Some(a) = along {
        a.ran(&r[along_at..]);
    }
    let page = r.first().copied()?.and(r.get(1).copied()?)?;
    if page <= 0 {
        return None;
    }
    // mmap's errors are -4095..-1.
    let census = counters.and_then(|c| {
        let m = r.get(4).copied()?.filter(|&m| m > 0)? as u64;
        Some(c.iter().map(|o| m + (o & 4095)).collect::<Vec<u64>>())
    });
    let at = if off.is_some() { 6 } else { 3 };
    let word = match word {
        Some(w) => {
            let ok = r.get(at).copied()?? == w as i64 && r.get(at + 1).copied()?? == 0;
            if !ok || census.is_none() {
                return None;
            }
            w
        }
        None => 0,
    };
    Some((page, census, word))
}

/// The bytes in which `new` differs from `old` (of the same length): `None` when none do.
fn changed(old: &[u8], new: &[u8]) -> Option<(usize, usize)> {
    let lo = old.iter().zip(new).position(|(a, b)| a != b)?;
    let hi = old.len()
        - old
            .iter()
            .rev()
            .zip(new.iter().rev())
            .position(|(a, b)| a != b)?;
    Some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(dir: &std::path::Path) -> super::super::world::World {
        let vars = [(
            seal_abi::settings::RUN_DIR.into(),
            dir.as_os_str().to_owned(),
        )];
        super::super::world::World::from_vars(&vars)
    }

    fn files(dir: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_page_made_ahead_is_the_next_images_or_goes() {
        let me = unsafe { libc::getpid() };
        let dir = tempfile::tempdir().unwrap();
        let w = world(dir.path());
        Prepared::ahead(dir.path());
        assert_eq!(files(dir.path()), [format!("go-clock-ahead-{me}")]);
        let p = Prepared::new(true, 7, &w, 1000).unwrap();
        assert!(p.path.ends_with(format!("go-clock-ahead-{me}")));
        let page = p.take(None);
        let first = first_values(&w, 1000);
        assert_eq!(
            page.word(cp::MONOTONIC).load(Ordering::Acquire),
            first[1] as u64
        );
        assert_eq!(
            page.word(cp::REALTIME).load(Ordering::Acquire),
            first[0] as u64
        );
        drop(p);
        assert!(files(dir.path()).is_empty(), "{:?}", files(dir.path()));
        // None made ahead: made now, under the image's pid.
        let p = Prepared::new(true, 7, &w, 1000).unwrap();
        assert_eq!(files(dir.path()), ["go-clock-7"]);
        drop(p);
        // Not wanted: none, and the one made ahead goes.
        Prepared::ahead(dir.path());
        assert!(Prepared::new(false, 7, &w, 1000).is_none());
        assert!(files(dir.path()).is_empty());
        // Made ahead for another run directory: not this one's.
        let other = tempfile::tempdir().unwrap();
        Prepared::ahead(other.path());
        let p = Prepared::new(true, 8, &w, 1000).unwrap();
        assert!(p.path.ends_with("go-clock-8"));
    }
}
