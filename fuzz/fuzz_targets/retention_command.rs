//! Fuzz target `retention_command`: see `hookclaim_fuzz::retention_command`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hookclaim_fuzz::retention_command::run(data));
