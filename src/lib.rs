//! traceaudit: audits recorded AI-agent runs offline, in batch.

pub mod evidence;
pub mod ingest;
pub mod js;
pub mod model;
