//! The columnar store: Arrow schemas, Parquet parts, the manifest.
//!
//! A store is a directory:
//! - `events/part-NNNNN.parquet`: one row per event; a conversation never spans two parts;
//! - `runs/part-NNNNN.parquet`: one row per run of the same part (stores of schema 9 and
//!   earlier: one `runs.parquet`);
//! - `generations/NNNNN/`: the generations appended later, each laid out as the root is;
//! - `quarantine.jsonl`: every record that could not be used, with its reason;
//! - `manifest.json`: engine and schema version, inputs with size and checksum, counts. It is
//!   written last, and the directory is renamed into place only when complete.

pub mod atomic;
pub mod digest;
pub mod generations;
pub mod parquet_file;
pub mod partitions;
pub mod pieces;
pub mod read;
pub mod rebuild;
pub mod row_groups;
pub mod schema;
pub mod split;
pub mod write;

pub use read::Store;
pub use write::{Origin, StoreWriter};

use crate::model::digest::{Digest, DigestKind};
use crate::model::{vocab, EventKind};
use serde::{Deserialize, Serialize};

/// The entries of a store, for [`atomic::Layout`]: what an existing store may hold to be
/// replaced by a new one.
pub const STORE_ENTRIES: [&str; 16] = [
    "manifest.json",
    "quarantine.jsonl",
    "runs.parquet",
    "runs/",
    "runs/part-*.parquet",
    "events/",
    "events/part-*.parquet",
    "generations/",
    "generations/*/",
    "generations/*/quarantine.jsonl",
    "generations/*/runs.parquet",
    "generations/*/runs/",
    "generations/*/runs/part-*.parquet",
    "generations/*/superseded.jsonl",
    "generations/*/events/",
    "generations/*/events/part-*.parquet",
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
    /// How the file is compressed (`gzip`, `zstd`), when it is: `size` and `sha256` are then
    /// the compressed file's, as it is on disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
    /// The size of a compressed file's decompressed bytes (what its format was read from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decompressed_size: Option<u64>,
    /// The ETag object storage listed for an object (`path` is then its URL, without anything
    /// secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
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
    /// Input files that no format recognised: not records (listed in quarantine.jsonl as
    /// `skipped`, with why).
    #[serde(default)]
    pub unrecognised_files: u64,
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
    /// The digests of tool results the store holds, by name and version; `None` in a manifest
    /// written before stores named them (it holds `DIGESTS_BEFORE_MANIFEST`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digests: Option<Vec<DigestEntry>>,
    /// The source types of `other` rows whose envelope the store keeps in `payload`; `None`
    /// in a manifest written before stores named them (it holds
    /// `ENVELOPE_TYPES_BEFORE_MANIFEST`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope_types: Option<Vec<String>>,
    /// The store's id, kept by every append and compaction; `None` in a manifest written
    /// before stores had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_id: Option<String>,
    /// The generations the store holds, in order (`generations`); `None` in a manifest
    /// written before stores had them (one generation, at the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generations: Option<Vec<generations::GenerationEntry>>,
    /// Files and folders a compaction replaced, relative to the root: no reader opening the
    /// store reads them, and the next append or compaction deletes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired: Vec<String>,
}

/// A digest as a manifest names it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DigestEntry {
    pub name: String,
    pub version: u32,
}

/// The digests every store held before manifests named them: stores of that time were all
/// written with these.
pub const DIGESTS_BEFORE_MANIFEST: [(&str, u32); 2] = [("result-fingerprint", 1), ("evidence", 1)];

/// The `other` envelope types every store kept in `payload` before manifests named them.
pub const ENVELOPE_TYPES_BEFORE_MANIFEST: [&str; 2] = [
    crate::model::vocab::OUTPUT_CONTRACT,
    "agentfootprint.agent.route_decided",
];

impl StoreManifest {
    /// Does the store hold digest `name` at `version`?
    pub fn holds_digest(&self, name: &str, version: u32) -> bool {
        match &self.digests {
            Some(list) => list.iter().any(|d| d.name == name && d.version == version),
            None => DIGESTS_BEFORE_MANIFEST.contains(&(name, version)),
        }
    }

    /// Does the store keep the envelopes of `other` rows of this source type?
    pub fn holds_envelope_type(&self, source_type: &str) -> bool {
        match &self.envelope_types {
            Some(list) => list.iter().any(|t| t == source_type),
            None => ENVELOPE_TYPES_BEFORE_MANIFEST.contains(&source_type),
        }
    }
}

/// What the checks need a store to keep, handed down to the writer and the reader: the
/// digests of tool results they read (at most one of each [`DigestKind`]: the store has one
/// set of columns per kind), and the source types of `other` rows whose envelope they read.
#[derive(Clone, Default)]
pub struct StoreSpec {
    pub digests: Vec<&'static dyn Digest>,
    pub envelope_types: Vec<&'static str>,
}

impl StoreSpec {
    pub fn new(digests: Vec<&'static dyn Digest>, envelope_types: Vec<&'static str>) -> StoreSpec {
        for (i, d) in digests.iter().enumerate() {
            assert!(
                digests[..i].iter().all(|e| e.kind() != d.kind()),
                "two digests of one kind: the store has one column set per kind ({})",
                d.name()
            );
        }
        StoreSpec {
            digests,
            envelope_types,
        }
    }

    /// The digest of this kind, if the spec has one.
    pub fn digest_of(&self, kind: DigestKind) -> Option<&'static dyn Digest> {
        self.digests.iter().copied().find(|d| d.kind() == kind)
    }

    /// Does some check read the recorded envelope of an event of this kind and source type?
    /// Those envelopes are stored in the `payload` column, every other one in
    /// `archived_payload`, which audits leave undecoded. Checks read the envelope of verdicts,
    /// model calls (but an agentfootprint model call's start, whose request none reads) and
    /// the `other` rows they name; everything else they read from its own columns.
    pub fn envelope_is_checked(&self, kind: EventKind, source_type: Option<&str>) -> bool {
        match kind {
            EventKind::Verdict => true,
            EventKind::ModelCall => source_type != Some(vocab::AGENTFOOTPRINT_LLM_START),
            EventKind::Other => source_type.is_none_or(|t| self.envelope_types.contains(&t)),
            _ => false,
        }
    }

    /// What a manifest records of the spec.
    pub fn digest_entries(&self) -> Vec<DigestEntry> {
        self.digests
            .iter()
            .map(|d| DigestEntry {
                name: d.name().to_string(),
                version: d.version(),
            })
            .collect()
    }
}

pub const ENGINE: &str = "traceaudit";
pub const ENGINE_VERSION: &str = env!("CARGO_PKG_VERSION");

impl StoreManifest {
    /// The manifest of the store at `dir`. `Err` names the file, and says so when it is a
    /// corpus's manifest or not a store's.
    pub fn read(dir: &std::path::Path) -> std::io::Result<StoreManifest> {
        use std::io::{Error, ErrorKind};
        let path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::new(e.kind(), format!("cannot read {}: {e}", path.display())))?;
        serde_json::from_str(&text).map_err(|e| {
            let corpus = serde_json::from_str::<serde_json::Value>(&text)
                .is_ok_and(|v| v.get("store_manifest").is_some());
            let why = if corpus {
                "it is a corpus's manifest (written by `audit`), not a store's".to_string()
            } else {
                format!("it is not a traceaudit store's manifest ({e})")
            };
            Error::new(
                ErrorKind::InvalidData,
                format!("{} is not a traceaudit store: {why}", dir.display()),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::schema::*;
    use crate::model::{vocab, EventKind};

    /// The envelopes kept where audits read them: every verdict's and model call's but an
    /// agentfootprint model call's start, and the `other` rows' of the types the checks name.
    #[test]
    fn envelopes_are_checked_where_a_check_reads_them() {
        let spec = crate::pipeline::store_spec();
        let checked = |kind, source_type| spec.envelope_is_checked(kind, source_type);
        assert!(checked(
            EventKind::Verdict,
            Some("agentfootprint.agent.evidence_checked")
        ));
        assert!(checked(
            EventKind::ModelCall,
            Some(vocab::AGENTFOOTPRINT_LLM_END)
        ));
        assert!(!checked(
            EventKind::ModelCall,
            Some(vocab::AGENTFOOTPRINT_LLM_START)
        ));
        assert!(checked(EventKind::ModelCall, Some("chat")));
        assert!(checked(EventKind::ModelCall, None));
        assert!(checked(EventKind::Other, Some(vocab::OUTPUT_CONTRACT)));
        assert!(checked(
            EventKind::Other,
            Some("agentfootprint.agent.route_decided")
        ));
        assert!(!checked(
            EventKind::Other,
            Some("agentfootprint.agent.turn_start")
        ));
        assert!(!checked(
            EventKind::Landing,
            Some("agentfootprint.stream.tool_end")
        ));
    }

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
