//! End-to-end tests: verify.
#[allow(unused_imports)]
use crate::util::*;
