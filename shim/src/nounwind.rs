//! No libgcc_s: the unwinder entry points Rust's standard library refers to, as local stubs.
//!
//! The embedded shim is built with `panic=abort`, so nothing in it ever unwinds; yet the
//! precompiled standard library still names `_Unwind_Resume` (its landing pads), the
//! personality routine's `_Unwind_Get*`/`_Unwind_Set*` and `_Unwind_Backtrace` (backtraces in
//! the panic message). Those references alone made every sealed process load `libgcc_s.so.1`
//! (an extra `openat`, `mmap`s and relocations: about 0.1 ms per process image). Defined
//! here, hidden (never exported, so the process's own C++ or Rust unwinding keeps using the
//! real unwinder), they satisfy the link and `--as-needed` drops libgcc_s.
//!
//! What each does if ever reached: `_Unwind_Backtrace` reports the end of the stack at once
//! (a panic message without a backtrace), the getters return 0, the setters do nothing, and
//! `_Unwind_Resume` (only reachable while unwinding, which never starts) traps.
//!
//! Only with `panic=abort`: the unit-test build unwinds and needs the real unwinder.

core::arch::global_asm!(
    ".text",
    ".globl _Unwind_Backtrace",
    ".hidden _Unwind_Backtrace",
    ".type _Unwind_Backtrace,@function",
    "_Unwind_Backtrace:",
    "    mov eax, 5", // _URC_END_OF_STACK
    "    ret",
    ".size _Unwind_Backtrace, . - _Unwind_Backtrace",
    ".globl _Unwind_GetIP",
    ".hidden _Unwind_GetIP",
    ".type _Unwind_GetIP,@function",
    ".globl _Unwind_GetIPInfo",
    ".hidden _Unwind_GetIPInfo",
    ".type _Unwind_GetIPInfo,@function",
    ".globl _Unwind_GetDataRelBase",
    ".hidden _Unwind_GetDataRelBase",
    ".type _Unwind_GetDataRelBase,@function",
    ".globl _Unwind_GetTextRelBase",
    ".hidden _Unwind_GetTextRelBase",
    ".type _Unwind_GetTextRelBase,@function",
    ".globl _Unwind_GetRegionStart",
    ".hidden _Unwind_GetRegionStart",
    ".type _Unwind_GetRegionStart,@function",
    ".globl _Unwind_GetLanguageSpecificData",
    ".hidden _Unwind_GetLanguageSpecificData",
    ".type _Unwind_GetLanguageSpecificData,@function",
    "_Unwind_GetIP:",
    "_Unwind_GetIPInfo:",
    "_Unwind_GetDataRelBase:",
    "_Unwind_GetTextRelBase:",
    "_Unwind_GetRegionStart:",
    "_Unwind_GetLanguageSpecificData:",
    "    xor eax, eax",
    "    ret",
    ".globl _Unwind_SetGR",
    ".hidden _Unwind_SetGR",
    ".type _Unwind_SetGR,@function",
    ".globl _Unwind_SetIP",
    ".hidden _Unwind_SetIP",
    ".type _Unwind_SetIP,@function",
    "_Unwind_SetGR:",
    "_Unwind_SetIP:",
    "    ret",
    ".globl _Unwind_Resume",
    ".hidden _Unwind_Resume",
    ".type _Unwind_Resume,@function",
    "_Unwind_Resume:",
    "    ud2",
    ".size _Unwind_Resume, . - _Unwind_Resume",
);
