//! End-to-end tests: what libseal costs every sealed process to load. It adds one object and
//! needs libc alone (no std, no libgcc_s).
use std::collections::BTreeSet;

use object::Object;

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
    assert_eq!(gained, [shim.clone()], "objects gained");
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
    // answer for a Rust program's own unwinding.
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
}
