//! Unit tests of the environment builder (`super`).
use super::*;
use seal_abi::pad::{LONG_PAD, SHORT_PAD};
use std::ffi::CString;

fn run(env: &[&str]) -> Option<Vec<String>> {
    let owned: Vec<CString> = env.iter().map(|s| CString::new(*s).unwrap()).collect();
    let mut ptrs: Vec<*const libc::c_char> = owned.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(core::ptr::null());
    let s = settings(63);
    let st = ImageState {
        clock: 1234,
        vpid: 1500,
        ppid: 1000,
        lineage: 0xabc,
        children: 2,
        gen: 1,
        exe: (0xab, 0xcd),
        names: 0x12,
    };
    // SAFETY: ptrs is a NULL-terminated array of C strings that outlive the call.
    let b = unsafe { build(ptrs.as_ptr(), &s, &st, None) }?;
    let out = entries(b.envp())
        .into_iter()
        // SAFETY: entries of the block, which is alive.
        .map(|e| String::from_utf8(unsafe { sys::cstr(e) }.to_vec()).unwrap())
        .collect();
    Some(out)
}

fn settings(flags: u32) -> Settings<'static> {
    Settings {
        run_dir: b"/run/x",
        shim: b"/c/libseal.so",
        epoch_ns: 5,
        tick_ns: 1000,
        seed: 7,
        flags,
        hostname: b"seal",
        only: b"",
        skip: b"",
        rate_ppm: 0,
        real_start_ns: 0,
        files_start_ns: 0,
        cpus: 4,
        spin_after: 1000,
    }
}

/// The entries of a NULL-terminated environment array.
fn entries(envp: *const *const libc::c_char) -> Vec<*const libc::c_char> {
    let mut out = Vec::new();
    // SAFETY: a NULL-terminated array (the callers' blocks are alive).
    unsafe {
        let mut p = envp;
        while !(*p).is_null() {
            out.push(*p);
            p = p.add(1);
        }
    }
    out
}

#[test]
fn cleaned_environment_gets_everything_back() {
    let e = run(&[]).unwrap();
    assert_eq!(
        e,
        [
            "LD_PRELOAD=/c/libseal.so",
            "LIBSEAL_RUN_DIR=/run/x",
            "LIBSEAL_SHIM=/c/libseal.so",
            "LIBSEAL_EPOCH_NS=5",
            "LIBSEAL_TICK_NS=1000",
            "LIBSEAL_SEED=7",
            "LIBSEAL_FLAGS=63",
            "LIBSEAL_HOSTNAME=seal",
            "LIBSEAL_ONLY=",
            "LIBSEAL_SKIP=",
            "LIBSEAL_RATE_PPM=0",
            "LIBSEAL_REAL_START=0",
            "LIBSEAL_FILES_START=0",
            "LIBSEAL_CPUS=4",
            "LIBSEAL_SPIN_AFTER=1000",
            "LIBSEAL_CLOCK=1234",
            "LIBSEAL_VPID=1500",
            "LIBSEAL_PPID=1000",
            "LIBSEAL_LINEAGE=0000000000000abc",
            "LIBSEAL_CHILDREN=2",
            "LIBSEAL_GEN=1",
            "LIBSEAL_EXE=00000000000000ab.00000000000000cd",
            "LIBSEAL_NAMES=0000000000000012",
        ]
    );
}

#[test]
fn inherited_environment_keeps_order_and_replaces_state() {
    let e = run(&[
        "A=1",
        "LIBSEAL_SEED=9",
        "LD_PRELOAD=/other.so",
        "LIBSEAL_VPID=1000",
        "SEAL_FOO=kept",
        "noequals",
    ])
    .unwrap();
    assert_eq!(&e[0], "A=1");
    assert_eq!(
        &e[1], "LIBSEAL_SEED=9",
        "a setting present is kept as given"
    );
    assert_eq!(&e[2], "LD_PRELOAD=/c/libseal.so:/other.so");
    assert_eq!(&e[3], "SEAL_FOO=kept");
    assert_eq!(&e[4], "noequals");
    assert!(e.contains(&"LIBSEAL_VPID=1500".to_string()));
    assert!(!e.contains(&"LIBSEAL_VPID=1000".to_string()));
    assert_eq!(
        e.iter().filter(|v| v.starts_with("LIBSEAL_SEED=")).count(),
        1
    );
}

#[test]
fn preload_already_there_is_untouched() {
    let e = run(&["LD_PRELOAD=/x.so /c/libseal.so"]).unwrap();
    assert_eq!(&e[0], "LD_PRELOAD=/x.so /c/libseal.so");
}

#[test]
fn another_run_is_left_alone() {
    assert!(run(&["LIBSEAL_RUN_DIR=/run/other"]).is_none());
    assert!(run(&["LIBSEAL_RUN_DIR=/run/x"]).is_some());
    assert_eq!(plan(None, b"/a"), Plan::Seal);
    assert_eq!(plan(Some(b""), b"/a"), Plan::Seal);
}

/// Builds a padded environment for `/bin/prog prog` from one variable of `extra` bytes: the
/// block, its entries, and what the kernel copies for it (file name, argument, every entry
/// and the pointers, as `senv::pad_entry_len` counts them). The variable is leaked: the
/// entries point at it.
fn padded(
    s: &Settings,
    st: &ImageState,
    extra: usize,
) -> (EnvBlock, Vec<*const libc::c_char>, usize) {
    let arg: &CString = Box::leak(Box::new(CString::new("prog").unwrap()));
    let var: &CString = Box::leak(Box::new(
        CString::new(format!("A={}", "a".repeat(extra))).unwrap(),
    ));
    let argv = [arg.as_ptr(), core::ptr::null()];
    let envp = [var.as_ptr(), core::ptr::null()];
    let layout = Layout {
        file: b"/bin/prog",
        argv: argv.as_ptr(),
    };
    // SAFETY: NULL-terminated arrays of C strings that outlive the call.
    let b = unsafe { build(envp.as_ptr(), s, st, Some(layout)) }.unwrap();
    let list = entries(b.envp());
    // SAFETY: C strings.
    let strings: usize = list.iter().map(|&e| unsafe { sys::cstr_len(e) } + 1).sum();
    let n = list.len() + 1;
    let total = b"/bin/prog\0".len() + b"prog\0".len() + strings + 8 * (n + n % 2);
    (b, list, total)
}

const STATE: ImageState = ImageState {
    clock: 1,
    vpid: 1500,
    ppid: 1000,
    lineage: 1,
    children: 0,
    gen: 1,
    exe: (0, 0),
    names: 0,
};

/// The pad is the tail of constants (nothing written per exec), sized so that strings and
/// pointers make one fixed total, and recognised (without being measured) when the next
/// exec or the new image's constructor drops it again.
#[test]
fn pad_is_a_tail_of_the_constant_and_is_dropped_again() {
    let s = settings(63 | seal_abi::flags::LAYOUT);
    let mut totals = std::collections::BTreeSet::new();
    for extra in [0usize, 1, 100, 3000] {
        let (b, list, total) = padded(&s, &STATE, extra);
        totals.insert(total);
        // A long entry (its name first) and a short one, both tails of constants.
        let (pad, short) = (list[list.len() - 2], list[list.len() - 1]);
        assert!(
            LONG_PAD.as_ptr_range().contains(&(pad as *const u8))
                && SHORT_PAD.as_ptr_range().contains(&(short as *const u8)),
            "the pad is not the constants' tails"
        );
        // SAFETY: C strings.
        unsafe {
            assert!(sys::cstr(pad).starts_with(PAD_TAIL));
            assert!(sys::cstr(short).ends_with(PAD_TAIL));
            assert!(sys::cstr_len(pad) > 100);
        }
        let no_pad = |list: &[*const libc::c_char]| {
            list.iter().all(|&e| {
                // SAFETY: C strings.
                let e = unsafe { sys::cstr(e) };
                !e.ends_with(PAD_TAIL) && !e.starts_with(PAD_TAIL)
            })
        };
        // SAFETY: NULL-terminated arrays of C strings.
        unsafe {
            assert!(is_pad(pad) && is_pad(short));
            assert!(!is_pad(list[0]));
            // Passed on first, with a variable after them (a program that appends to the
            // initial stack's envp): still the pad.
            let moved: Vec<_> = [pad, short]
                .into_iter()
                .chain(list[..list.len() - 2].iter().copied())
                .chain([core::ptr::null()])
                .collect();
            let again = build(moved.as_ptr(), &s, &STATE, None).unwrap();
            assert!(no_pad(&entries(again.envp())));
            let clean = without_contract(b.envp(), b"/c/libseal.so").unwrap();
            assert!(no_pad(&entries(clean)));
            let again = build(b.envp(), &s, &STATE, None).unwrap();
            assert!(no_pad(&entries(again.envp())));
        }
    }
    // File name and argument plus every entry, and the pointers: one total whatever the
    // environment.
    assert_eq!(totals.len(), 1, "{totals:?}");
}

/// Near the end of a layout block the pad is one short entry; further on, the next block. The
/// strings and pointers make a whole number of blocks (plus 8) either way.
#[test]
fn pad_sizes_make_whole_blocks_with_one_or_two_entries() {
    let s = settings(63 | seal_abi::flags::LAYOUT);
    let block = seal_abi::settings::LAYOUT_BLOCK;
    let (mut one, mut two) = (0, 0);
    for extra in (block - 1200..block - 200).step_by(7) {
        let (_b, list, total) = padded(&s, &STATE, extra);
        // SAFETY: C strings.
        match list.iter().filter(|&&e| unsafe { is_pad(e) }).count() {
            1 => one += 1,
            2 => two += 1,
            n => panic!("{n} pad entries"),
        }
        assert_eq!((total - 8) % block, 0, "extra {extra}: total {total}");
    }
    assert!(one > 0 && two > 0, "one entry {one} times, two {two} times");
}

/// The constructor's copy lives in a static, any later one (or a larger one) in a mapping of
/// its own: both hold the same entries, and the first is not overwritten by the second.
#[test]
fn environ_copies_from_the_static_and_from_a_mapping_agree() {
    let owned: Vec<CString> = [
        "A=1",
        "LIBSEAL_SEED=9",
        "LD_PRELOAD=/c/libseal.so:/u.so",
        "B=2",
    ]
    .iter()
    .map(|s| CString::new(*s).unwrap())
    .collect();
    let mut ptrs: Vec<*const libc::c_char> = owned.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(core::ptr::null());
    let show = |envp| -> Vec<String> {
        entries(envp)
            .into_iter()
            // SAFETY: entries of a live environment copy.
            .map(|e| String::from_utf8(unsafe { sys::cstr(e) }.to_vec()).unwrap())
            .collect()
    };
    // SAFETY: a NULL-terminated array of C strings that outlive the copies.
    let (first, second) = unsafe {
        (
            without_contract(ptrs.as_ptr(), b"/c/libseal.so").unwrap(),
            without_contract(ptrs.as_ptr(), b"/c/libseal.so").unwrap(),
        )
    };
    assert_ne!(first, second);
    let want = ["A=1", "LD_PRELOAD=/u.so", "B=2"];
    assert_eq!(show(first), want);
    assert_eq!(show(second), want);
}
