//! What is shown of a census for people: the table (`seal census` writes it to stderr after
//! the command has finished, so the command's own stdout stays intact and separable), its
//! Python call sites with `--hide-bookkeeping`, and the `--patch-targets` rows.

pub mod patch_targets;
mod python;
mod table;

pub use python::strip_bookkeeping;
pub use table::render;
