//! Unit tests of the census table: exact counts, threads, the head, a full table.

use super::*;

/// A zeroed census slot on the heap (it is too big for a test thread's stack).
struct Zeroed(*mut CensusFile);
impl Zeroed {
    fn new() -> Zeroed {
        let layout = std::alloc::Layout::new::<CensusFile>();
        // SAFETY: non-zero size; all-zero bytes are a valid CensusFile (atomics and arrays).
        Zeroed(unsafe { std::alloc::alloc_zeroed(layout) as *mut CensusFile })
    }
    fn file(&self) -> &CensusFile {
        // SAFETY: allocated and zeroed in new(), freed only in drop.
        unsafe { &*self.0 }
    }
}
impl Drop for Zeroed {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in new().
        unsafe { std::alloc::dealloc(self.0 as *mut u8, std::alloc::Layout::new::<CensusFile>()) }
    }
}

fn all_slots(file: &CensusFile) -> impl Iterator<Item = &seal_abi::CensusSlot> {
    (0..CensusFile::ALL_SLOTS).map(|i| file.slot(i))
}

fn total(file: &CensusFile) -> u64 {
    let slots: u64 = all_slots(file).map(|s| s.count.load(Relaxed)).sum();
    slots + file.overflow.iter().map(|c| c.load(Relaxed)).sum::<u64>()
}

#[test]
fn counts_exactly_and_reports_new_sites_once() {
    let z = Zeroed::new();
    let f = z.file();
    let a = census_key(0x5555_0000_1234, Fid::TimeFn, 0);
    let b = census_key(0x5555_0000_1234, Fid::Getrandom, seal_abi::NO_DETAIL);
    assert!(matches!(count_in(f, a, 0, true), Counted::NewSite(_)));
    for _ in 0..6 {
        assert!(matches!(count_in(f, a, 0, true), Counted::Counted(_)));
    }
    assert!(matches!(count_in(f, b, 3, false), Counted::NewSite(_)));
    assert!(matches!(count_in(f, b, 3, false), Counted::Counted(_)));
    assert!(matches!(count_in(f, b, 3, true), Counted::Counted(_)));
    let find = |k| all_slots(f).find(|s| s.key.load(Relaxed) == k).unwrap();
    assert_eq!(find(a).count.load(Relaxed), 7);
    assert_eq!(find(b).count.load(Relaxed), 3);
}

/// `n` census keys of call sites `base`, `base + step`, …, all of function `fid` with `detail`.
fn sites(n: u64, base: u64, step: u64, fid: Fid, detail: u8) -> Vec<u64> {
    (0..n)
        .map(|i| census_key(base + i * step, fid, detail))
        .collect()
}

/// A short single-threaded process counts in the first page only; a key that finds its
/// head window full goes to the table and is found there again.
#[test]
fn a_few_call_sites_stay_in_the_first_page() {
    let z = Zeroed::new();
    let f = z.file();
    let keys = sites(12, 0x5555_0000_1000, 0x40, Fid::ClockGettime, 1);
    for &k in &keys {
        match count_in(f, k, 0, true) {
            Counted::NewSite(i) => assert!(i < HEAD_SLOTS, "{i}"),
            other => panic!("{other:?}"),
        }
    }
    // Fill the head: later keys spill to the table, and each is found where it went.
    let many = sites(200, 0x6666_0000_0000, 8, Fid::TimeFn, 0);
    let first: Vec<usize> = many
        .iter()
        .map(|&k| match count_in(f, k, 0, true) {
            Counted::NewSite(i) => i,
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(first.iter().any(|&i| i >= HEAD_SLOTS));
    for (&k, &i) in many.iter().zip(&first) {
        assert_eq!(count_in(f, k, 0, true), Counted::Counted(i));
    }
    assert_eq!(total(f), 12 + 400);
}

#[test]
fn threads_lose_no_counts() {
    let z = Zeroed::new();
    let f = z.file();
    let keys = sites(8, 0x4000, 5, Fid::ClockGettime, 1);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for n in 0..50_000 {
                    count_in(f, keys[n % keys.len()], thread_shard(), false);
                }
            });
        }
    });
    assert_eq!(total(f), 200_000);
    for &k in &keys {
        let per_key: u64 = all_slots(f)
            .filter(|s| s.key.load(Relaxed) == k)
            .map(|s| s.count.load(Relaxed))
            .sum();
        assert_eq!(per_key, 25_000);
    }
}

#[test]
fn a_full_table_still_counts_every_call_per_function() {
    let z = Zeroed::new();
    let f = z.file();
    let calls = CensusFile::ALL_SLOTS as u64 + 5_000;
    let mut overflowed = 0;
    for i in 0..calls {
        if count_in(
            f,
            census_key(0x1000 + i * 3, Fid::Gettimeofday, 0),
            i % 3,
            true,
        ) == Counted::Overflow
        {
            overflowed += 1;
        }
    }
    assert!(overflowed >= 5_000, "{overflowed}");
    assert_eq!(total(f), calls);
    assert_eq!(
        f.overflow[Fid::Gettimeofday as usize].load(Relaxed),
        overflowed
    );
    assert_eq!(f.dropped_calls.load(Relaxed), overflowed);
}
