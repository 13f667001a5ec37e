//! The stream's contract: position p is keystream byte p, whatever the request sizes.

use super::*;

#[test]
fn same_seed_and_id_same_bytes_any_split() {
    let mut a = EntropyStream::new(42, 7);
    let mut b = EntropyStream::new(42, 7);
    let mut x = [0u8; 700];
    a.fill(&mut x);
    let mut y = [0u8; 700];
    let (y1, y2) = y.split_at_mut(13);
    b.fill(y1);
    b.fill(y2);
    assert_eq!(x, y);
}

#[test]
fn position_p_is_keystream_byte_p() {
    // The stream is the ChaCha keystream in order (here computed four blocks at a time).
    let mut s = EntropyStream::new(9, 3);
    let mut got = [0u8; 1000];
    s.fill(&mut got[..5]);
    s.fill(&mut got[5..300]);
    s.fill(&mut got[300..]);
    let mut want = [0u8; 1024];
    for b in 0..4u64 {
        let mut batch = [0u8; 256];
        chacha::blocks4(&s.key, b * 4, s.nonce, chacha::STREAM_ROUNDS, &mut batch);
        want[b as usize * 256..][..256].copy_from_slice(&batch);
    }
    assert_eq!(got, want[..1000]);
}

#[test]
fn different_ids_differ() {
    let mut x = [0u8; 32];
    let mut y = [0u8; 32];
    EntropyStream::new(42, 7).fill(&mut x);
    EntropyStream::new(42, 8).fill(&mut y);
    assert_ne!(x, y);
    EntropyStream::new(43, 7).fill(&mut y);
    assert_ne!(x, y);
}

#[test]
fn uniform_in_range() {
    let mut s = EntropyStream::new(1, 1);
    for upper in [2u32, 3, 10, 1000, u32::MAX] {
        for _ in 0..100 {
            assert!(uniform(&mut s, upper) < upper);
        }
    }
    assert_eq!(uniform(&mut s, 0), 0);
}

/// FNV-1a (64-bit) over `bytes`, continuing from `h`.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}
const FNV0: u64 = 0xcbf2_9ce4_8422_2325;

/// The request sizes of the pinned sequence: the sizes programs use (1, 3, 16, 17, 100,
/// 4096), sizes around every power-of-two buffer boundary, then a long pseudo-random mix that
/// lands requests at every alignment and across many refills.
fn pinned_sizes() -> impl Iterator<Item = usize> {
    let fixed = [
        1usize, 3, 16, 17, 100, 4096, 16, 1, 16, 3, 255, 256, 257, 16, 17, 1000, 2, 16, 511, 513,
        1023, 1025, 16, 16, 16, 7, 4095, 1, 2047, 2049, 8, 24, 32, 15, 31, 33, 63, 64, 65,
    ];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mixed = (0..3000).map(move |i| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        match i % 10 {
            0..=4 => 16,
            5 => 1 + (x % 8) as usize,
            6 => 1 + (x % 64) as usize,
            7 => 1 + (x % 300) as usize,
            8 => 1 + (x % 5000) as usize,
            _ => 4,
        }
    });
    fixed.into_iter().chain(mixed)
}

/// Draws the pinned sequence from `s` (fills, with `next_u32` and `uniform` interleaved) and
/// returns the hash of everything drawn and the first 16 bytes.
fn draw_pinned(s: &mut EntropyStream) -> (u64, [u8; 16]) {
    let mut h = FNV0;
    let mut first = [0u8; 16];
    let mut buf = [0u8; 8192];
    for (i, n) in pinned_sizes().enumerate() {
        s.fill(&mut buf[..n]);
        if i == 0 {
            s.fill(&mut first);
            h = fnv(h, &first);
        }
        h = fnv(h, &buf[..n]);
        match i % 13 {
            3 => h = fnv(h, &s.next_u32().to_le_bytes()),
            9 => h = fnv(h, &uniform(s, 1000 + i as u32).to_le_bytes()),
            _ => {}
        }
    }
    (h, first)
}

/// Every sealed random byte is pinned: same seed and stream id, same bytes, for every pattern
/// of request sizes. A change here changes what every sealed program sees (users pin goldens
/// on those bytes): it must be deliberate.
#[test]
fn stream_bytes_are_pinned() {
    let cases: [(u64, u64, u64, [u8; 16]); 3] = [
        (
            42,
            7,
            0xdaee_1782_37bd_2c85,
            [
                42, 50, 193, 143, 151, 65, 14, 204, 67, 172, 166, 242, 150, 76, 137, 11,
            ],
        ),
        (
            0,
            1,
            0xbda3_310e_c889_2098,
            [
                199, 134, 140, 194, 254, 21, 35, 47, 175, 142, 103, 253, 60, 80, 109, 78,
            ],
        ),
        (
            u64::MAX,
            0x1234_5678_9abc_def0,
            0x6726_052f_d8e1_4b11,
            [
                191, 217, 182, 131, 144, 126, 186, 159, 199, 44, 176, 189, 47, 49, 66, 81,
            ],
        ),
    ];
    // Both block functions: the AVX2 one where the CPU has it, and the SSE2 fallback.
    for sse2_only in [false, true] {
        chacha::tests::SSE2_ONLY.set(sse2_only);
        for (seed, id, hash, first) in cases {
            let got = draw_pinned(&mut EntropyStream::new(seed, id));
            assert_eq!(
                got,
                (hash, first),
                "seed {seed} id {id:#x}, SSE2 only: {sse2_only}"
            );
        }
    }
}

/// The block counter is 64 bits: positions beyond 2^38 bytes (2^32 blocks, where a 32-bit
/// counter would wrap) are pinned too, as is the start of a draw just before that crossing.
#[test]
fn stream_bytes_past_the_32_bit_block_counter_are_pinned() {
    for sse2_only in [false, true] {
        chacha::tests::SSE2_ONLY.set(sse2_only);
        let mut s = EntropyStream::new(42, 7);
        s.pos = (1u64 << 38) - 1000;
        let mut h = FNV0;
        let mut buf = [0u8; 3000];
        for n in [1usize, 3, 16, 17, 100, 2000, 16, 16, 3000, 1] {
            s.fill(&mut buf[..n]);
            h = fnv(h, &buf[..n]);
        }
        assert_eq!(h, 0x8e28_fb97_a62a_7199, "SSE2 only: {sse2_only}");
    }
}

/// Keystream bytes `at .. at + out.len()` of (`key`, `nonce`), computed four blocks at a time
/// by `chacha::blocks4` (none of the stream's own code).
fn keystream(key: &[u32; 8], nonce: [u32; 2], at: u64, out: &mut [u8]) {
    let mut done = 0;
    while done < out.len() {
        let p = at + done as u64;
        let mut batch = [0u8; 256];
        chacha::blocks4(key, p / 256 * 4, nonce, chacha::STREAM_ROUNDS, &mut batch);
        let within = (p % 256) as usize;
        let n = (out.len() - done).min(256 - within);
        out[done..done + n].copy_from_slice(&batch[within..within + n]);
        done += n;
    }
}

/// Signal safety: a handler that draws on the thread it interrupted, at any instruction of a
/// draw (the claim, the copy, a refill, a store of the buffer), takes its own bytes. Every
/// draw, the interrupted thread's and the handlers', is one stretch of the keystream, and the
/// stretches tile it in claim order: nothing is handed out twice, nothing is skipped.
///
/// Another thread sends SIGUSR2 to the drawing thread as fast as it can; the drawing thread
/// draws in rounds, checking each round's draws (and the handler draws so far) along the
/// keystream, until enough signals landed or time is up (a loaded machine may starve the
/// sender).
#[test]
fn handler_draws_mid_draw_tile_the_keystream() {
    use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
    const SLOTS: usize = 1 << 16;
    const HANDLED_LEN: usize = 16;
    const WANTED: usize = 3000;
    static SLOT_BUF: AtomicPtr<[u8; HANDLED_LEN]> = AtomicPtr::new(core::ptr::null_mut());
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    static DONE: AtomicBool = AtomicBool::new(false);
    static STOPPED: AtomicBool = AtomicBool::new(false);
    static TARGET: AtomicU64 = AtomicU64::new(0);

    extern "C" fn on_signal(_: libc::c_int) {
        let k = NEXT.fetch_add(1, Relaxed);
        if k < SLOTS {
            // SAFETY: slot k of the leaked buffer, written by this handler only.
            fill(unsafe { &mut *SLOT_BUF.load(Relaxed).add(k) });
        }
    }

    let slots: &'static mut [[u8; HANDLED_LEN]] = vec![[0u8; HANDLED_LEN]; SLOTS].leak();
    let slots: &'static [[u8; HANDLED_LEN]] = {
        SLOT_BUF.store(slots.as_mut_ptr(), Relaxed);
        slots
    };
    // SAFETY: installs a handler for SIGUSR2, which nothing else in this test binary uses.
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        assert_eq!(
            libc::sigaction(libc::SIGUSR2, &sa, core::ptr::null_mut()),
            0
        );
    }
    let handled = || NEXT.load(Relaxed).min(SLOTS);

    /// Tells the sender to stop however the drawing thread ends (a failed check panics).
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            DONE.store(true, Release);
        }
    }
    let drawer = std::thread::spawn(move || {
        let done = Done;
        let sizes = [
            16usize, 8, 16, 24, 100, 16, 300, 13, 1000, 16, 9, 255, 16, 257, 16, 4096,
        ];
        let lens: Vec<usize> = (0..5000).map(|i| sizes[i % sizes.len()]).collect();
        // All memory up front: the thread spends its time drawing, where the signals should
        // land.
        let mut out = vec![0u8; lens.iter().sum()];
        let mut first = [0u8; 16];
        fill(&mut first); // keys the stream before the storm
        let (key, nonce) = with_stream(|s| (s.key, s.nonce));
        // The merge: `at` bytes of the keystream accounted for, `j` handler draws among them.
        let (mut at, mut j) = (0u64, 0usize);
        let mut want = vec![0u8; 4096];
        let mut take = |d: &[u8], at: &mut u64| {
            keystream(&key, nonce, *at, &mut want[..d.len()]);
            let yes = want[..d.len()] == *d;
            if yes {
                *at += d.len() as u64;
            }
            yes
        };
        let mut check = |draws: &mut dyn Iterator<Item = &[u8]>, j: &mut usize, at: &mut u64| {
            for d in draws {
                while !take(d, at) {
                    let k = *j;
                    assert!(
                        k < handled() && take(&slots[k], at),
                        "at byte {at}: neither the next draw nor handler draw {k} is there"
                    );
                    *j += 1;
                }
            }
        };
        check(&mut core::iter::once(&first[..]), &mut j, &mut at);
        // SAFETY: pthread_self has no preconditions.
        TARGET.store(unsafe { libc::pthread_self() } as u64, Release);
        let start = std::time::Instant::now();
        while handled() < WANTED && start.elapsed() < std::time::Duration::from_secs(20) {
            let mut p = 0;
            for &n in &lens {
                fill(&mut out[p..p + n]);
                p += n;
            }
            let mut p = 0;
            let mut round = lens.iter().map(|&n| {
                p += n;
                &out[p - n..p]
            });
            check(&mut round, &mut j, &mut at);
        }
        drop(done);
        while !STOPPED.load(Acquire) {
            std::hint::spin_loop();
        }
        // A system call: a signal still pending is delivered on its way back.
        // SAFETY: no arguments.
        unsafe { libc::sched_yield() };
        while j < handled() {
            assert!(
                take(&slots[j], &mut at),
                "at byte {at}: handler draw {j} is not there"
            );
            j += 1;
        }
        assert_eq!(
            at,
            with_stream(|s| s.pos),
            "the stream moved past its draws"
        );
        j
    });
    let sender = std::thread::spawn(|| {
        while TARGET.load(Acquire) == 0 && !DONE.load(Acquire) {
            std::hint::spin_loop();
        }
        let mut sent = 0u64;
        while !DONE.load(Acquire) {
            // SAFETY: the drawing thread is alive until it sees STOPPED.
            unsafe { libc::pthread_kill(TARGET.load(Relaxed) as libc::pthread_t, libc::SIGUSR2) };
            sent += 1;
            for _ in 0..(sent % 31) * 4 {
                std::hint::spin_loop();
            }
        }
        STOPPED.store(true, Release);
    });
    sender.join().unwrap();
    let checked = drawer.join().unwrap();
    assert!(checked > 100, "only {checked} handler draws");
}

std::thread_local! {
    /// Interrupt points passed so far on this thread, and which of them draws (`u64::MAX`:
    /// none, `u64::MAX - 1`: all).
    static POINTS: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
    static FIRE: core::cell::Cell<u64> = const { core::cell::Cell::new(u64::MAX) };
    /// Set while an injected draw runs (injected draws do not nest).
    static NESTED: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    /// Injected draws: the index of the draw they interrupted, and their bytes.
    static INJECTED: core::cell::RefCell<Vec<(usize, Vec<u8>)>> =
        const { core::cell::RefCell::new(Vec::new()) };
    /// The index of the draw in progress.
    static CURRENT: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// Called at every interrupt point of the stream's code in test builds: draws from this
/// thread's stream when this is the point the test chose, as a signal handler arriving there
/// would.
pub(super) fn interrupt_point() {
    if NESTED.get() {
        return;
    }
    let k = POINTS.get();
    POINTS.set(k + 1);
    let fire = FIRE.get();
    if fire != k && fire != u64::MAX - 1 {
        return;
    }
    NESTED.set(true);
    let n = [16usize, 9, 600, 1024, 8, 40][(k % 6) as usize];
    let mut b = vec![0u8; n];
    fill(&mut b);
    INJECTED.with(|v| v.borrow_mut().push((CURRENT.get(), b)));
    NESTED.set(false);
}

/// Runs the draw sequence on a fresh thread with a handler draw injected at point `fire`;
/// returns the points passed, and whether every draw got its own stretch of the keystream in
/// claim order (an injected draw comes right after the draw it interrupted: every point is
/// after that draw's claim).
fn run_with_injection(fire: u64) -> (u64, Result<(), String>) {
    std::thread::spawn(move || {
        let sizes = [
            16usize, 3, 16, 1, 600, 16, 32, 17, 512, 7, 16, 1024, 100, 2, 31, 4096, 16, 16, 5,
        ];
        let mut draws = Vec::new();
        for (i, &n) in sizes.iter().chain(&sizes).enumerate() {
            // The first draw keys the stream; injection starts after it.
            if i == 1 {
                FIRE.set(fire);
            }
            CURRENT.set(i);
            let mut b = vec![0u8; n];
            fill(&mut b);
            draws.push(b);
        }
        FIRE.set(u64::MAX);
        let (key, nonce, pos) = with_stream(|s| (s.key, s.nonce, s.pos));
        let injected = INJECTED.with(|v| v.take());
        let mut keystream = vec![0u8; (pos as usize).next_multiple_of(256)];
        for (b, batch) in keystream.chunks_exact_mut(256).enumerate() {
            let batch: &mut [u8; 256] = batch.try_into().unwrap();
            chacha::blocks4(&key, b as u64 * 4, nonce, chacha::STREAM_ROUNDS, batch);
        }
        let mut at = 0;
        let mut check = |what: String, d: &[u8]| {
            if keystream.get(at..at + d.len()) != Some(d) {
                return Err(format!(
                    "{what} ({} bytes) is not the keystream at {at}",
                    d.len()
                ));
            }
            at += d.len();
            Ok(())
        };
        let result = (|| {
            for (i, d) in draws.iter().enumerate() {
                check(format!("draw {i}"), d)?;
                for (j, (_, e)) in injected.iter().enumerate().filter(|(_, (k, _))| *k == i) {
                    check(format!("handler draw {j} during draw {i}"), e)?;
                }
            }
            check("the end".into(), &[])
        })();
        let result = result.and_then(|()| match at as u64 == pos {
            true => Ok(()),
            false => Err(format!("draws took {at} bytes, the stream moved {pos}")),
        });
        (POINTS.get(), result)
    })
    .join()
    .unwrap()
}

/// A handler draw at every place inside a draw where a signal could deliver one (claim, the
/// small copy's check and loads, the slow path's copy, store and generation), one at a time and
/// all at once: every draw still gets its own stretch of the keystream, in claim order.
#[test]
fn a_handler_draw_at_any_point_of_a_draw_takes_its_own_bytes() {
    let (points, clean) = run_with_injection(u64::MAX);
    clean.unwrap();
    assert!(points > 60, "only {points} interrupt points");
    for fire in 0..points {
        let (_, r) = run_with_injection(fire);
        r.unwrap_or_else(|e| panic!("handler draw at point {fire}: {e}"));
    }
    run_with_injection(u64::MAX - 1)
        .1
        .unwrap_or_else(|e| panic!("handler draws at every point: {e}"));
}
