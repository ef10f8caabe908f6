//! traceaudit: audits recorded AI-agent runs offline, in batch.
//!
//! Data flows one way: `ingest` (one file per source format) produces canonical rows
//! ([`model`]); `store` writes and reads them as Parquet; `passes` judge one conversation at a
//! time (the `evidence` module is the evidence gate's machinery they use); `corpus` writes
//! findings, dispositions and ledgers.

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
