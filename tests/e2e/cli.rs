//! End-to-end tests: cli.
#[allow(unused_imports)]
use crate::util::*;
