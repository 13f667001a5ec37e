//! Build invariants of libseal, checked wherever the crate is built from.
//!
//! * Frame pointers: every hook reads its caller's return address from `[rbp+8]` (`caller!()`)
//!   and `clone`/`execl*` read stack-passed arguments from `[rbp+16]`; without
//!   `-C force-frame-pointers=yes` those reads return garbage. The workspace's
//!   `.cargo/config.toml` sets the flag; a `RUSTFLAGS` (or `CARGO_ENCODED_RUSTFLAGS`) in the
//!   environment replaces it, and this script then fails the build rather than produce a shim
//!   whose census attributes calls to random addresses.
//! * `panic=abort` is not checked: since Rust 1.81 a panic cannot unwind out of an
//!   `extern "C"` fn (it aborts there), so the launcher's `panic=abort` for the embedded shim
//!   is not what keeps unwinding out of FFI. It is what makes the embedded build `no_std`
//!   (lib.rs): a build that unwinds keeps std and works, only bigger. That embedded build also
//!   links without C start files and with `layout/hot.ld`, which puts the code and data that
//!   every sealed process touches on as few pages as possible.

use std::env;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    println!("cargo:rerun-if-changed=layout/hot.ld");
    if env::var("CARGO_CFG_PANIC").as_deref() == Ok("abort") {
        // The embedded (no_std) build. No C start files: libseal has no C++ constructors or
        // `atexit` handlers for crtbegin's `__do_global_dtors_aux` to run, and that function
        // alone wrote a `.bss` page in every exiting process.
        println!("cargo:rustc-cdylib-link-arg=-nostartfiles");
        // The hot code and data first and together (layout/hot.ld says how it is made).
        let dir = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-T,{dir}/layout/hot.ld");
    }
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if !has_frame_pointers(&flags) {
        eprintln!(
            "error: libseal must be built with `-C force-frame-pointers=yes` (its hooks read \
             their caller from [rbp+8]); the workspace's .cargo/config.toml sets it, but \
             RUSTFLAGS/CARGO_ENCODED_RUSTFLAGS replaced it: add `-C force-frame-pointers=yes`"
        );
        std::process::exit(1);
    }
}

/// Does the (0x1f-separated) flag list force frame pointers on? The last setting wins.
fn has_frame_pointers(encoded: &str) -> bool {
    let mut on = false;
    let mut after_c = false;
    for flag in encoded.split('\x1f') {
        let opt = if after_c {
            Some(flag)
        } else {
            flag.strip_prefix("-C").filter(|o| !o.is_empty())
        };
        after_c = flag == "-C" || flag == "--codegen";
        let opt = opt.or_else(|| flag.strip_prefix("--codegen="));
        if let Some(v) = opt.and_then(|o| o.strip_prefix("force-frame-pointers")) {
            on = matches!(v, "" | "=yes" | "=y" | "=on" | "=true");
        }
    }
    on
}
