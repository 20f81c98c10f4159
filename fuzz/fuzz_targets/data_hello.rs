#![no_main]
//! cargo-fuzz entry point; the body is landspeed_fuzzing::data_hello, which the stable tests also run.

libfuzzer_sys::fuzz_target!(|data: &[u8]| landspeed_fuzzing::data_hello(data));
