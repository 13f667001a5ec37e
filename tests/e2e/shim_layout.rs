//! End-to-end tests: what libseal costs every sealed process to load. It adds one object and
//! needs libc alone (no std, no libgcc_s, no C start files), and the code and data every
//! image touches at start lie together at the front of their segments (`shim/layout/hot.ld`).
use std::collections::BTreeSet;

use object::{Object, ObjectSection, ObjectSymbol};

use crate::util::*;

/// The shared objects mapped into a process that runs `cat /proc/self/maps`.
fn objects(maps: &str) -> BTreeSet<String> {
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.contains(".so"))
        .map(str::to_owned)
        .collect()
}

/// The path of the libseal a sealed process maps, and the objects it gained over a bare one.
fn sealed_shim() -> (String, Vec<String>) {
    let mut cat = command("cat");
    cat.arg("/proc/self/maps");
    let bare = run_timeout(cat, TIMEOUT);
    bare.ok();
    let sealed = run_timeout(seal(["--", "cat", "/proc/self/maps"]), TIMEOUT);
    sealed.ok();
    let gained: Vec<String> = objects(&sealed.stdout)
        .difference(&objects(&bare.stdout))
        .cloned()
        .collect();
    let shim = gained
        .iter()
        .find(|p| p.contains("libseal-"))
        .unwrap_or_else(|| panic!("no libseal mapped\n{}", sealed.show()))
        .clone();
    (shim, gained)
}

#[test]
fn libseal_is_the_only_object_a_sealed_process_gains_and_exports_no_unwinder() {
    // No libgcc_s (whose constructor probes the CPU), no second dependency on the loader: a
    // sealed process maps exactly one object more than a bare one, and libseal needs libc alone.
    let (shim, gained) = sealed_shim();
    assert_eq!(gained, std::slice::from_ref(&shim), "objects gained");
    let bytes = std::fs::read(&shim).unwrap();
    let elf = object::File::parse(&*bytes).unwrap();
    let needed: Vec<String> = elf
        .imports()
        .unwrap()
        .iter()
        .map(|i| String::from_utf8_lossy(i.library()).into_owned())
        .filter(|l| !l.is_empty())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(
        needed,
        ["libc.so.6"],
        "libraries libseal's symbols come from"
    );
    // The personality stub that satisfies precompiled `core` stays hidden: exported, it would
    // answer for a Rust program's own unwinding. No C start files: no `.init`/`.fini` to run.
    let exported: Vec<String> = elf
        .exports()
        .unwrap()
        .iter()
        .map(|e| String::from_utf8_lossy(e.name()).into_owned())
        .collect();
    for name in ["rust_eh_personality", "_Unwind_Resume", "rust_begin_unwind"] {
        assert!(
            !exported.iter().any(|e| e == name),
            "libseal exports {name}"
        );
    }
    for section in [".init", ".fini"] {
        assert!(
            elf.section_by_name(section).is_none(),
            "libseal has {section}"
        );
    }
    // One destructor of its own, nothing from start files: the flush of standard output
    // before glibc's own at exit, whose bytes carry the writer's clock (causal::stdio).
    if let Some(fini) = elf.section_by_name(".fini_array") {
        assert_eq!(fini.size(), 8, "libseal's .fini_array has one entry");
    }
}

#[test]
fn libseal_start_up_code_is_together() {
    // The code every sealed image runs before `main` (and `date`'s clock read) lies in one
    // page-aligned group at the front of the code, and the hot statics in one page-aligned
    // group: a short process faults in one or two 64 KiB windows of code, not six. A function
    // renamed or inlined away drops out of shim/layout/hot.ld's group silently; this names it.
    let (shim, _) = sealed_shim();
    let bytes = std::fs::read(&shim).unwrap();
    let elf = object::File::parse(&*bytes).unwrap();
    let range = |name: &str| {
        let s = elf
            .section_by_name(name)
            .unwrap_or_else(|| panic!("libseal has no {name} section"));
        assert_eq!(s.address() % 4096, 0, "{name} is page-aligned");
        s.address()..s.address() + s.size()
    };
    let code = range(".text.seal_hot");
    let data = range(".data.seal_hot");
    // Mangled names up to their hash: `_ZN` + length-prefixed path + `17h`.
    let start_up = [
        "_ZN4seal9seal_init17h",
        "_ZN4seal4core6config9init_slow17h",
        "_ZN4seal7process4vpid8on_start17h",
        "_ZN4seal4core5table3map17h",
        "_ZN4seal4core6census10open_image17h",
        "_ZN4seal4core6thread11init_thread17h",
        "_ZN4seal7process3env16without_contract17h",
        "_ZN4seal3cpu8on_start17h",
        "clock_gettime",
    ];
    let hot_statics = [
        "_ZN4seal4core6config4VPID17h",
        "_ZN4seal4core6census4FILE17h",
        "_ZN4seal7runtime9N_OBJECTS17h",
        "_ZN4seal5dlsym15SEAL_REAL_DLSYM17h",
    ];
    let symbols: Vec<(String, u64)> = elf
        .symbols()
        .chain(elf.dynamic_symbols())
        .filter_map(|s| Some((s.name().ok()?.to_owned(), s.address())))
        .collect();
    let mut outside = Vec::new();
    for (want, range) in start_up
        .iter()
        .map(|w| (w, &code))
        .chain(hot_statics.iter().map(|w| (w, &data)))
    {
        let found: Vec<u64> = symbols
            .iter()
            .filter(|(n, _)| n == want || n.starts_with(want) && want.ends_with("17h"))
            .map(|(_, a)| *a)
            .collect();
        if found.is_empty() || !found.iter().all(|a| range.contains(a)) {
            outside.push(*want);
        }
    }
    assert!(
        outside.is_empty(),
        "outside their hot group (regenerate shim/layout/hot.ld, or mark the static \
         `.data.seal_hot`): {outside:?}"
    );
}
