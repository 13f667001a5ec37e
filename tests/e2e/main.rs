//! End-to-end tests: real programs (C, Python, bash, Node, Rust, Java) under the built `seal`,
//! run several times, asserting byte-identical output, bounded wall time and exact census
//! counts. One test binary (like ripgrep's tests/tests.rs); one module per area.

mod dirs;
#[macro_use]
mod util;

mod causal;
mod census;
mod cli;
mod clocks;
mod cpu;
mod cpython;
mod devices;
mod doctor;
mod go_images;
mod go_rand;
mod go_rand_census;
mod go_server;
mod go_sys;
mod golden;
mod golden_travel;
mod hardening;
mod hermetic;
mod hotpath;
mod kernel_answers;
mod kernel_values;
mod machine;
mod machine_dirorder;
mod names;
mod openssl_random;
mod probe;
mod proc_listing;
mod process;
mod procfs;
mod pyframes;
mod pytest_plugin;
mod random;
mod realworld;
mod refactor;
mod runtimes;
mod runtimes_realworld;
mod safety;
mod setters;
mod shim_hardening;
mod shim_layout;
mod static_clock;
mod static_dyn;
mod static_exec;
mod static_files;
mod static_images;
mod static_pids;
mod static_root;
mod stress;
mod time_control;
mod travel;
mod travel_matrix;
mod verify;
mod waits;
mod warp;
