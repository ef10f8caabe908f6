//! The columnar store: Arrow schemas, Parquet parts, the manifest.
//!
//! A store is a directory:
//! - `events/part-NNNNN.parquet`: one row per event; a conversation never spans two parts;
//! - `runs.parquet`: one row per run;
//! - `quarantine.jsonl`: every record that could not be used, with its reason;
//! - `manifest.json`: engine and schema version, inputs with size and checksum, counts. It is
//!   written last, and the directory is renamed into place only when complete.

pub mod atomic;
pub mod digest;
pub mod read;
pub mod schema;
pub mod write;

pub use read::Store;
pub use write::{Origin, StoreWriter};

use serde::{Deserialize, Serialize};

/// The entries of a store, for [`atomic::Layout`]: what an existing store may hold to be
/// replaced by a new one.
pub const STORE_ENTRIES: [&str; 5] = [
    "manifest.json",
    "quarantine.jsonl",
    "runs.parquet",
    "events/",
    "events/part-*.parquet",
];

/// A store as an output directory: a traceaudit manifest with a schema version, and only the
/// files a store holds.
pub fn store_layout() -> atomic::Layout {
    atomic::Layout {
        what: "store",
        manifest: "manifest.json",
        claims: |m| {
            m.get("engine").and_then(serde_json::Value::as_str) == Some(ENGINE)
                && m.get("store_schema_version").is_some()
        },
        entries: STORE_ENTRIES.iter().map(|e| e.to_string()).collect(),
    }
}

/// One input file as the manifest records it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct InputEntry {
    pub path: String,
    pub size: u64,
    pub sha256: String,
    /// The format it was read as; `None` when it was not recognised.
    pub format: Option<String>,
    pub records: u64,
    pub quarantined: u64,
}

/// The counts an ingest reconciles.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Counts {
    pub files: u64,
    pub bytes: u64,
    pub conversations: u64,
    pub runs: u64,
    /// Runs with turn >= 1 (answering a user message).
    pub user_turn_runs: u64,
    pub events: u64,
    pub landings: u64,
    /// Records read = records stored + records quarantined.
    pub records_read: u64,
    pub records_stored: u64,
    pub records_quarantined: u64,
    /// Records kept with a part that could not be used (listed in quarantine.jsonl).
    pub partial_notes: u64,
    /// Runs whose id had already been read from an earlier input, skipped.
    pub duplicate_runs: u64,
    /// Entries under the inputs that were not read (listed in quarantine.jsonl as `skipped`).
    #[serde(default)]
    pub skipped_inputs: u64,
}

/// `manifest.json` of a store.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StoreManifest {
    pub engine: String,
    pub engine_version: String,
    pub store_schema_version: u32,
    pub parts: Vec<String>,
    pub inputs: Vec<InputEntry>,
    pub counts: Counts,
    pub seconds: f64,
}

/// Does some check read the recorded envelope of an event of this kind and source type? Those
/// envelopes are stored in the `payload` column, every other one in `archived_payload`, which
/// audits leave undecoded. Checks read the envelope of verdicts, model calls and the `other`
/// rows they name ([`Pass::other_payloads`](crate::passes::Pass::other_payloads)); everything
/// else they read from its own columns.
pub fn envelope_is_checked(kind: crate::model::EventKind, source_type: Option<&str>) -> bool {
    use crate::model::EventKind;
    match kind {
        EventKind::Verdict | EventKind::ModelCall => true,
        EventKind::Other => {
            source_type.is_none_or(|t| crate::passes::other_payload_types().contains(&t))
        }
        _ => false,
    }
}

pub const ENGINE: &str = "traceaudit";
pub const ENGINE_VERSION: &str = env!("CARGO_PKG_VERSION");

impl StoreManifest {
    pub fn read(dir: &std::path::Path) -> std::io::Result<StoreManifest> {
        let text = std::fs::read_to_string(dir.join("manifest.json"))?;
        serde_json::from_str(&text).map_err(std::io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use super::schema::*;

    #[test]
    fn schema_document_matches_code() {
        let doc = include_str!("../../schemas/store.md");
        let tables = parse_schema_doc(doc);
        for (name, schema) in [("events", events_schema()), ("runs", runs_schema())] {
            let documented = tables
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("schemas/store.md has no `## {name}` table"));
            let drift = doc_drift(&schema, &documented.1);
            assert!(drift.is_empty(), "table {name}: {drift:#?}");
        }
    }
}
