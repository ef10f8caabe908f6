//! The OpenTelemetry reader (OTLP JSON exports, one export request per line; OpenInference
//! spans go through the same adapter) fed arbitrary bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use traceaudit::Format;

fuzz_target!(|data: &[u8]| {
    traceaudit_fuzz::read_and_check(Format::Otel, "input.json", data);
});
