//! The store reader (what `audit STORE` opens) on a store of traceaudit's own with one file
//! replaced by fuzzed bytes: the first byte picks the events part, `runs.parquet` or
//! `manifest.json`. Seeds are the real files of a store ingested from testdata (seed.sh).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&selector, rest)) = data.split_first() {
        traceaudit_fuzz::read_store_with(selector, rest);
    }
});
