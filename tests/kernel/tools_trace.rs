//! (filled in below)

#[allow(unused_imports)]
use crate::common::*;
