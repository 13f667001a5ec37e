//! The one unwinder symbol the embedded libseal still names, as a local stub.
//!
//! The embedded shim is `no_std` and built with `panic=abort`, so nothing in it ever unwinds;
//! yet the precompiled `core` it links was built to unwind, and its landing pads name the
//! personality routine `rust_eh_personality`, which std would define. Left undefined, the
//! loader would refuse libseal (`BIND_NOW`). Defined here, hidden (never exported, so the
//! process's own Rust unwinding keeps its own), it satisfies the link. No `_Unwind_*` call
//! remains, so libseal loads no `libgcc_s.so.1` (its constructor probes the CPU with
//! `cpuid`, each a VM exit in a guest: about 0.1 ms per process image).
//!
//! If ever reached (a foreign exception unwinding through a `core` frame with a cleanup), it
//! says "no handler here, go on" (`_URC_CONTINUE_UNWIND`).
//!
//! Only with `panic=abort`: the unit-test build has std, which defines the real one.

core::arch::global_asm!(
    ".text",
    ".globl rust_eh_personality",
    ".hidden rust_eh_personality",
    ".type rust_eh_personality,@function",
    "rust_eh_personality:",
    "    mov eax, 8", // _URC_CONTINUE_UNWIND
    "    ret",
    ".size rust_eh_personality, . - rust_eh_personality",
);
