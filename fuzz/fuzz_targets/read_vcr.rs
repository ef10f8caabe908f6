//! The VCR cassette reader (YAML) fed arbitrary bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use traceaudit::Format;

fuzz_target!(|data: &[u8]| {
    traceaudit_fuzz::read_and_check(Format::Vcr, "input.yaml", data);
});
