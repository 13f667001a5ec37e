//! End-to-end tests: golden.
#[allow(unused_imports)]
use crate::util::*;
