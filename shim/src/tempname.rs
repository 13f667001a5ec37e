//! Temp names: `mkstemp` & co. draw their names from the seeded stream.
//!
//! TODO(tempname): not implemented yet.
