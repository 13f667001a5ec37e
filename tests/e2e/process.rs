//! End-to-end tests: process.
#[allow(unused_imports)]
use crate::util::*;
