//! End-to-end tests: census.
#[allow(unused_imports)]
use crate::util::*;
