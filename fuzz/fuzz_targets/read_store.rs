//! The store reader (what `audit STORE` opens) on a store of traceaudit's own with one file
//! replaced by fuzzed bytes: the first byte picks the events part, its runs file or
//! `manifest.json`. Seeds are the real files of a store ingested from testdata (seed.sh).
//!
//! The store reader catches a panic of the Parquet decoder (the parquet crate, or arrow-buffer
//! under it) and refuses the part by name, but libfuzzer-sys's panic hook aborts before any
//! unwinding, so the hook set here lets a panic raised inside a dependency unwind to that
//! catch. A panic in traceaudit's own code, or one of a dependency's that nothing catches,
//! still ends the run as a crash.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        let abort_after_report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_dependency = info.location().is_some_and(|at| {
                let file = at.file().replace('\\', "/");
                file.contains("/registry/src/")
            });
            if !in_dependency {
                abort_after_report(info);
            }
        }));
    },
    |data: &[u8]| {
        if let Some((&selector, rest)) = data.split_first() {
            traceaudit_fuzz::read_store_with(selector, rest);
        }
    }
);
