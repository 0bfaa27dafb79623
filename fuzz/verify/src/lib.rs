//! The verification fuzz targets' logic, one module per target, so that each
//! `fuzz_targets/*.rs` is one line and the logic can be run outside libFuzzer (`cargo test` here
//! replays the committed corpus). They depend on hookclaim-verify alone.
//!
//! Every target asserts invariants with `assert!`: under libFuzzer a failed assertion is a
//! crash, saved under `fuzz/artifacts/<target>/` with the input that caused it.

pub mod fixtures;
pub mod verify_providers;
pub mod verify_signature;
