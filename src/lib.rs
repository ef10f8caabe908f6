//! traceaudit: audits recorded AI-agent runs offline, in batch.
//!
//! Data flows one way, and so do the modules: each uses only those below it (checked by
//! `tests/architecture.rs`).
//!
//! - [`ingest`]: one [`ingest::Adapter`] per source format, in one ordered registry; each reads
//!   a file into canonical rows ([`model`]) and quarantine records.
//! - [`store`]: the rows as Parquet parts (events and runs, a file each per part) with a
//!   manifest of generations, written atomically.
//! - [`passes`]: the checks, pure functions of one conversation and the configuration
//!   ([`config`]), using the evidence gate's machinery ([`evidence`]).
//! - [`corpus`]: findings, dispositions, ledgers, agreement, as Parquet.
//! - [`pipeline`]: the batch in stages (inputs, readers, writer, checking tap, audit of parts);
//!   [`ingest()`](fn@ingest) and [`audit()`](fn@audit) are its entry points.
//! - `report` (feature `reports`): what people read, from a corpus; one row model per report,
//!   laid out by each renderer.
//! - `error`: the library's [`Error`]; the front doors each map it in one match.
//! - [`cli`]: the command line, the only module that knows clap.

// Every module is private to the crate; what other programs may use is re-exported below.
pub mod cli;
pub(crate) mod config;
pub(crate) mod corpus;
pub(crate) mod error;
pub(crate) mod evidence;
pub(crate) mod ingest;
pub(crate) mod js;
pub mod model;
pub(crate) mod passes;
pub(crate) mod pipeline;
pub(crate) mod progress;
#[cfg(feature = "reports")]
pub(crate) mod report;
pub(crate) mod source;
pub(crate) mod store;
pub(crate) mod terminal;

// The library's front door: the jobs the CLI runs, for the benches, the tests and other
// programs that embed the engine (the Python module among them). `model` is public whole: its
// rows are what reading a file gives back.
pub use config::{Config, RepeatedWhen};
pub use corpus::{Disposition, Finding, CHECK_COLUMN};
pub use error::{Error, Result};
pub use ingest::{read_head, read_path, Collect, Format, Limits, Quarantined, Severity};
pub use passes::{registry as checks, Pass, PassContext, RunOutcome};
pub use pipeline::append::{
    append, append_store, compact, fresh_inputs, AppendSummary, CompactSummary,
};
pub use pipeline::audit::{audit, AuditOptions, AuditSummary};
// How a front door (the command line, the Python module) resolves what it was given.
pub use pipeline::ingest::{ingest, IngestOptions, IngestSummary};
pub use pipeline::inputs::expand_inputs;
pub use pipeline::options::{audit_options, threads as resolve_threads};
pub use store::Store;
pub use terminal::line as terminal_line;
// The ingest in shards and the audit a part at a time, for engines that distribute the work
// (the Python module and its Ray driver).
pub use pipeline::audit::{CheckCounts, CorpusManifest};
pub use pipeline::parts::{audit_batches, audit_part, finish_corpus, CorpusTable, PartAudit};
pub use pipeline::shards::{
    ingest_shard, join_keys, merge_part, merge_shards, plan_ingest, shard_duplicates, IngestPlan,
    PlannedInput,
};
// What those callers need to name besides: a store's manifest.
pub use store::generations::{GenerationEntry, Pick as GenerationPick};
pub use store::StoreManifest;
// Reading a corpus in either layout (one file per table, or the part files its manifest lists)
// without Polars, and the driver's `findings.jsonl` for a corpus written a part at a time.
pub use corpus::layout::{
    read_table as read_corpus_table, table_files, Layout as CorpusLayout, TableFile, TableFiles,
};
pub use corpus::write::findings_jsonl;

/// The framework's own fingerprints, to the byte: JavaScript's `JSON.stringify` and number and
/// string forms, its hashes, and the repeated-call key built from them.
pub mod fingerprint {
    pub use crate::js::*;
    pub use crate::passes::repeated_call::{call_key, CallKey};
}

/// Output directories written whole or not at all, and never over what traceaudit did not
/// write (for tools that write beside the engine's outputs, such as the corpus generator).
pub mod output {
    pub use crate::store::atomic::{remove_staging_on_signal, write_file, AtomicDir, Layout};
}

/// The allocator's settings, for the programs that make mimalloc their global allocator (the
/// `traceaudit` binary, and the benches' baseline so that it runs as the engine does).
pub mod allocator {
    /// Keep freed pages instead of giving them back to the kernel after mimalloc's purge delay
    /// (1 s): an audit frees and reallocates hundreds of MB of decoded text a second, and pages
    /// given back are faulted in and zeroed again, often as 2 MB transparent huge pages.
    /// Freed memory is reused, so the peak is what it would be anyway; the process keeps it
    /// until it exits. Call before starting threads.
    pub fn keep_freed_pages() {
        // `mi_option_purge_delay` in mimalloc's `mi_option_e` (its header numbers the options;
        // the Rust binding names only some); -1 is "never purge".
        const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
        // SAFETY: sets one integer option; not thread safe, hence before threads start.
        unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, -1) }
    }

    #[cfg(test)]
    mod tests {
        /// Option 15 is the purge delay: it is the option whose default is 1000 ms (no other
        /// option of mimalloc 3 defaults to 1000), and setting it reads back.
        #[test]
        fn the_option_set_is_the_purge_delay() {
            let get = || unsafe { libmimalloc_sys::mi_option_get(15) };
            if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
                assert_eq!(get(), 1000);
            }
            super::keep_freed_pages();
            assert_eq!(get(), -1);
        }
    }
}

/// Internals the micro-benchmarks, the fuzz targets and the integration tests reach into. Not
/// part of the library's interface: names here change without notice.
#[doc(hidden)]
pub mod internals {
    /// The evidence gate's tokenizer, value extractor and index.
    pub mod evidence {
        #[cfg(fuzzing)]
        pub use crate::evidence::index::assert_direct_walk_as_reference;
        pub use crate::evidence::index::is_framework_frame;
        pub use crate::evidence::{
            answer_values, answer_values_from_digest, build_index, build_watching_index,
            digest_result, digest_text, disposition, normalize_token, read_answer, tokenize,
            CompiledEvidence, EvidenceConfig, EvidenceIndex,
        };
    }
    pub use crate::ingest::agentfootprint::LATENESS_BYTES;
    #[cfg(fuzzing)]
    pub use crate::ingest::fuzz_scan_as_streamed;
    pub use crate::ingest::trajectory::parse_iso_ms;
    pub use crate::ingest::{read_file, Input, Sink};
    pub use crate::passes::prior_turn_evidence::PriorTurnEvidence;
    pub use crate::passes::repeated_call::RepeatedCall;
    pub use crate::passes::schema_attempt::SchemaAttempt;
}
