//! End-to-end tests: waits.
#[allow(unused_imports)]
use crate::util::*;
