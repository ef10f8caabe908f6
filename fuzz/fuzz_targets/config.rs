//! The configuration loader (`--config traceaudit.toml`) on fuzzed TOML: parsed, its evidence
//! settings compiled, and its schemas resolved against a folder holding one real schema file.
//! Schema paths other than plain names in that folder are not followed (the fuzzer must not read
//! the machine's files); the loader bounds what it reads from any path itself.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The repository's folder of schema files, read in place (the loader only reads).
fn schema_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/schemas"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(mut config) = traceaudit::Config::from_toml(text) else {
        return;
    };
    let _ = config.evidence.compile();
    let plain = config.schemas.iter().all(|s| {
        s.schema.as_deref().is_none_or(|f| {
            !f.is_empty() && !f.contains(['/', '\\', '\0']) && f != ".." && f != "."
        })
    });
    if plain {
        if config.resolve_files(schema_dir()).is_ok() {
            // Every entry resolved holds its parsed schema, and the configuration still
            // serialises (its hash is taken over that text).
            assert!(config.schemas.iter().all(|s| s.resolved.is_some()));
            serde_json::to_string(&config).expect("a resolved configuration serialises");
        }
    }
});
