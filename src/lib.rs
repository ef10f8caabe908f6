//! traceaudit: audits recorded AI-agent runs offline, in batch.
//!
//! Data flows one way: `ingest` (one file per source format) produces canonical rows
//! ([`model`]); `store` writes and reads them as Parquet; `passes` judge one conversation at a
//! time (the `evidence` module is the evidence gate's machinery they use); `corpus` writes
//! findings, dispositions and ledgers.

pub mod audit;
pub mod cli;
pub mod config;
pub mod corpus;
pub mod evidence;
pub mod gen;
pub mod ingest;
pub mod js;
pub mod model;
pub mod passes;
pub mod progress;
#[cfg(feature = "reports")]
pub mod report;
pub mod store;
