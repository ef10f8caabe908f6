//! The JSON formats' readers fed arbitrary bytes: the first byte picks the format, the rest is
//! the file.
#![no_main]
use libfuzzer_sys::fuzz_target;
use traceaudit::Format;

const FORMATS: [Format; 6] = [
    Format::AgentfootprintNdjson,
    Format::AgentfootprintRecording,
    Format::TauBench,
    Format::Tau2,
    Format::SweAgent,
    Format::InspectAi,
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, file)) = data.split_first() else {
        return;
    };
    let format = FORMATS[selector as usize % FORMATS.len()];
    traceaudit_fuzz::read_and_check(format, "input.json", file);
});
