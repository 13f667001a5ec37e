//! Builds libseal (the `shim` crate) in release mode into its own target directory and hands
//! its path and content hash to the launcher, which embeds it with `include_bytes!`. A missing
//! or failed shim build fails this build: `seal` never ships without its shim.
//!
//! The shim is built with frame pointers (the census reads each hook's return address from
//! the frame) and `panic=abort`, which also makes it `no_std` (shim/src/lib.rs says why).

use std::env;
use std::path::PathBuf;
use std::process::Command;

use sha2::{Digest, Sha256};

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    for p in [
        "shim/src",
        "shim/Cargo.toml",
        "shim/build.rs",
        ".cargo/config.toml",
        "abi/src",
        "abi/Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    println!("cargo:rerun-if-env-changed=SEAL_PREBUILT_SHIM");
    // `seal` is linked as a position-dependent executable: a PIE of its size carries ~15,000
    // relative relocations that the loader applies (and faults in) on every start, ~0.15 ms
    // of a sealed `true`. It is an ordinary unprivileged CLI (never setuid), so address-space
    // randomisation of its own code buys little; the commands it runs are unaffected.
    println!("cargo:rustc-link-arg-bins=-no-pie");
    // The unwinder comes from libgcc_eh.a, linked in, instead of libgcc_s.so.1: loading
    // libgcc_s runs its constructor, which probes the CPU with ~17 `cpuid` instructions, each a
    // VM exit in a guest (~0.1 ms of every `seal` start). std names gcc_s after this, and
    // `--as-needed` then leaves it out: nothing is still unresolved.
    println!("cargo:rustc-link-lib=static:-bundle=gcc_eh");

    let so = if let Ok(prebuilt) = env::var("SEAL_PREBUILT_SHIM") {
        PathBuf::from(prebuilt)
    } else {
        let target_dir = out_dir.join("shim-target");
        let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(&root)
            .args(["build", "--release", "-p", "seal-shim", "--lib"])
            .arg("--target-dir")
            .arg(&target_dir)
            .args(["--config", "profile.release.panic=\"abort\""])
            .args(["--config", "profile.release.codegen-units=1"])
            // The workspace's LTO is for `seal`; libseal's hot paths are measured without it.
            .args(["--config", "profile.release.lto=false"])
            .args(["--config", "profile.release.debug=false"]);
        // The outer build's flags (coverage, sanitizers, the target dir) must not leak in.
        for (k, _) in env::vars() {
            if k.starts_with("CARGO_") && k != "CARGO_HOME"
                || k == "RUSTFLAGS"
                || k == "RUSTC_WRAPPER"
            {
                cmd.env_remove(k);
            }
        }
        // `-Cpanic=abort` here as well as in the profile: only a flag makes `cfg(panic)` (and
        // so CARGO_CFG_PANIC, which the shim's build.rs reads) say "abort". Shrink-wrapping
        // off: a hook reads its return address at `[rbp + 8]` (`caller!`), which holds only
        // once its prologue has run, and LLVM would otherwise sink the prologue below a hook's
        // early fast path.
        cmd.env(
            "CARGO_ENCODED_RUSTFLAGS",
            "-Cforce-frame-pointers=yes\x1f-Cpanic=abort\x1f-Cllvm-args=-enable-shrink-wrap=false",
        );
        let status = cmd.status().expect("failed to run cargo to build the shim");
        assert!(status.success(), "building libseal (the shim crate) failed");
        target_dir.join("release/libseal.so")
    };
    let bytes = std::fs::read(&so)
        .unwrap_or_else(|e| panic!("cannot read built shim {}: {e}", so.display()));
    assert!(
        bytes.len() > 4096 && bytes.starts_with(b"\x7fELF"),
        "{} is not a shared object",
        so.display()
    );
    let hash = Sha256::digest(&bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    let dest = out_dir.join("libseal.so");
    std::fs::write(&dest, &bytes).unwrap();
    println!("cargo:rustc-env=SEAL_SHIM_SHA256={hex}");
    println!("cargo:rustc-env=SEAL_SHIM_FILE={}", dest.display());
}
