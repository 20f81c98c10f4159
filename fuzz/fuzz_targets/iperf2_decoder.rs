#![no_main]
//! cargo-fuzz entry point; the body is landspeed_fuzzing::iperf2_decoder, which the stable tests also run.

libfuzzer_sys::fuzz_target!(|data: &[u8]| landspeed_fuzzing::iperf2_decoder(data));
