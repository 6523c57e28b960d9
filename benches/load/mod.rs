//! The benchmark's load generator, which lives in the test support crate
//! (`tests/support/src/load.rs`) because the reliability suite drives it too.

pub use cideldill_test_support::load::*;
