//! End-to-end tests: probe.
#[allow(unused_imports)]
use crate::util::*;
