//! traceaudit: audits recorded AI-agent runs offline, in batch.
//!
//! Data flows one way, and so do the modules: each uses only those below it (checked by
//! `tests/architecture.rs`).
//!
//! - [`ingest`]: one [`ingest::Adapter`] per source format, in one ordered registry; each reads
//!   a file into canonical rows ([`model`]) and quarantine records.
//! - [`store`]: the rows as Parquet parts with a manifest, written atomically.
//! - [`passes`]: the checks, pure functions of one conversation and the configuration
//!   ([`config`]), using the evidence gate's machinery ([`evidence`]).
//! - [`corpus`]: findings, dispositions, ledgers, agreement, as Parquet.
//! - [`pipeline`]: the batch in stages (inputs, readers, writer, checking tap, audit of parts);
//!   [`ingest()`](fn@ingest) and [`audit()`](fn@audit) are its entry points.
//! - `report` (feature `reports`): what people read, from a corpus.
//! - [`cli`]: the command line, the only module that knows clap.

pub mod cli;
pub mod config;
pub mod corpus;
pub mod evidence;
pub mod ingest;
pub mod js;
pub mod model;
pub mod passes;
pub mod pipeline;
pub mod progress;
#[cfg(feature = "reports")]
pub mod report;
pub mod store;
pub mod terminal;

// The library's front door: the jobs the CLI runs, for the benches, the tests and other
// programs that embed the engine.
pub use pipeline::audit::{audit, AuditOptions, AuditSummary};
pub use pipeline::ingest::{ingest, IngestOptions, IngestSummary};
pub use pipeline::inputs::expand_inputs;
// The ingest in shards and the audit a part at a time, for engines that distribute the work
// (the Python module and its Ray driver).
pub use pipeline::audit::{CheckCounts, CorpusManifest};
pub use pipeline::parts::{audit_batches, audit_part, finish_corpus, CorpusTable, PartAudit};
pub use pipeline::shards::{
    ingest_shard, join_keys, merge_part, merge_shards, plan_ingest, shard_duplicates, IngestPlan,
    PlannedInput,
};
// What those callers need to name: a configuration file, a format, a store's manifest.
pub use config::Config;
pub use ingest::Format;
pub use store::StoreManifest;
