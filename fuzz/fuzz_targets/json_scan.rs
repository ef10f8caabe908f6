//! The chunked JSON scanner against serde_json's streaming reader: the same values taken and
//! the same error, at the same place, at every chunk size.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    traceaudit::read::fuzz_scan_as_streamed(data);
});
