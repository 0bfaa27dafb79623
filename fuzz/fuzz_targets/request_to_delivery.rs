//! Fuzz target `request_to_delivery`: see `hookclaim_fuzz::request_to_delivery`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hookclaim_fuzz::request_to_delivery::run(data));
