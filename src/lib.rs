//! traceaudit: audits recorded AI-agent runs offline, in batch.

pub mod ingest;
pub mod js;
pub mod model;
