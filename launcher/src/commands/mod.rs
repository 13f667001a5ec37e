//! One module per subcommand (`seal census`, `verify`, `probe`, `golden`, `demo`, `time`,
//! `doctor`); `seal run` itself is [`crate::run::run_interactive`], called from `main.rs`.
//! Each turns its parsed arguments into a status, with errors as `anyhow`
//! (`UsageError`/`ConfigError` for what the user gave).

pub mod census;
pub mod demo;
pub mod doctor;
pub mod golden;
pub mod probe;
pub mod timectl;
pub mod verify;
