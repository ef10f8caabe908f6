//! Format detection on a file's head, then the detected format's reader on the whole file: the
//! path every input takes when no `--format` is given.
#![no_main]
use libfuzzer_sys::fuzz_target;
use traceaudit::Format;

fuzz_target!(|data: &[u8]| {
    if let Some(format) = Format::detect(data) {
        traceaudit_fuzz::read_and_check(format, "input", data);
    }
});
