//! Fuzz target `verify_providers`: see `hookclaim_verify_fuzz::verify_providers`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hookclaim_verify_fuzz::verify_providers::run(data));
