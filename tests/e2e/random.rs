//! End-to-end tests: random.
#[allow(unused_imports)]
use crate::util::*;
