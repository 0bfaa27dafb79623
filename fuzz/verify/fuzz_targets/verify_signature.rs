//! Fuzz target `verify_signature`: see `hookclaim_verify_fuzz::verify_signature`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hookclaim_verify_fuzz::verify_signature::run(data));
