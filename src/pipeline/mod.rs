//! The orchestration of a batch, in named stages: finding the inputs ([`inputs`]), reading and
//! writing the store ([`ingest`]) through byte-bounded queues ([`queue`]), checking stored
//! conversations while the ingest goes on ([`tap`]), and the audit of raw inputs or of a store
//! ([`audit`]). Adapters (`crate::ingest`) read one file each; stages know nothing of formats,
//! and nothing here takes the command line's argument structs.

pub mod audit;
pub mod ingest;
pub mod inputs;
pub mod queue;
pub mod tap;
