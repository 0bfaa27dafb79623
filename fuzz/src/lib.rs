//! The request and command fuzz targets' logic (the verification targets are in `verify/`, on
//! hookclaim-verify alone), one module per target, so that each `fuzz_targets/*.rs` is one line
//! and the logic can be run outside libFuzzer (`cargo test` here replays the committed corpus).
//!
//! Every target asserts invariants with `assert!`: under libFuzzer a failed assertion is a
//! crash, saved under `fuzz/artifacts/<target>/` with the input that caused it.

pub mod fixtures;
pub mod request_to_delivery;
pub mod retention_command;
pub mod upstream;
