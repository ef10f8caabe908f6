//! The orchestration of a batch, in named stages: finding the inputs ([`inputs`]), reading and
//! writing the store ([`ingest`]) through byte-bounded queues ([`queue`]), checking stored
//! conversations while the ingest goes on ([`tap`]), and the audit of raw inputs or of a store
//! ([`audit`]), whose results become the corpus tables' batches on the pool ([`tables`]); and for engines that distribute the work, the ingest in shards ([`shards`]) and
//! the audit a part at a time ([`parts`]).
//! Adapters (`crate::ingest`) read one file each; stages know nothing of formats,
//! and nothing here takes the command line's argument structs.

pub mod append;
pub mod audit;
pub mod counts;
pub mod ingest;
pub mod inputs;
pub mod options;
pub mod parts;
pub mod queue;
pub mod reader;
pub mod remote;
mod run_keys;
pub mod shards;
pub mod tables;
pub mod tap;
pub mod writer;

use crate::model::Conversation;
use crate::passes::Pass;
use crate::store::StoreSpec;

/// What `passes` need a store to keep: the digests they declare and the `other` envelope
/// types they read, each once, in registry order.
pub fn spec_of(passes: &[&'static dyn Pass]) -> StoreSpec {
    let mut digests: Vec<&'static dyn crate::model::digest::Digest> = Vec::new();
    let mut envelope_types: Vec<&'static str> = Vec::new();
    for pass in passes {
        for &d in pass.digests() {
            if !digests.iter().any(|k| k.name() == d.name()) {
                digests.push(d);
            }
        }
        for &t in pass.other_payloads() {
            if !envelope_types.contains(&t) {
                envelope_types.push(t);
            }
        }
    }
    StoreSpec::new(digests, envelope_types)
}

/// What every registered check needs a store to keep: what an ingest writes (gathered once).
pub fn store_spec() -> &'static StoreSpec {
    static SPEC: std::sync::OnceLock<StoreSpec> = std::sync::OnceLock::new();
    SPEC.get_or_init(|| spec_of(&crate::passes::registry()))
}

/// Give the events of a conversation the values of the store's digests
/// ([`crate::model::digest::fill`]).
pub fn fill_digests(conversation: &mut Conversation) {
    for run in &mut conversation.runs {
        crate::model::digest::fill(run, &store_spec().digests);
    }
}
