//! End-to-end tests: clocks.
#[allow(unused_imports)]
use crate::util::*;
