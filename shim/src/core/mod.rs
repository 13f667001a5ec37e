//! The shim's ground floor: what every family stands on, and which names no family.
//!
//! `config` (process settings), `thread` (per-thread state), `sys` (raw system calls), `real`
//! (real symbols, re-entry guard), `backing` (the lazily backed shared arrays), `table` (the
//! run-wide table of pids and of the sealed world), `world` (what the run's clock and name
//! setters changed, instead of the machine), `hook` (the `hook!` macro every exported entry
//! point is written with), `census` (recording), `fd` (descriptors the shim makes, and the
//! per-process descriptor table), `descriptors` (the hooks of a descriptor's life: `read`,
//! `close`, `fclose`, `dup*`), `streams` (per-stream slot tables), `vfork` (is this a vfork
//! child?), `panic` and `nounwind` (the `no_std` build's panic handler and unwinding stubs).

pub mod backing;
pub mod census;
pub mod config;
#[cfg(not(test))]
pub mod descriptors;
pub mod fd;
pub mod hook;
#[cfg(all(panic = "abort", not(test)))]
mod nounwind;
pub mod panic;
pub mod real;
pub mod streams;
pub mod sys;
pub mod table;
#[cfg(test)]
pub mod testing;
pub mod thread;
pub mod vfork;
pub mod world;
