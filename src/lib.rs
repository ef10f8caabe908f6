//! traceaudit: audits recorded AI-agent runs offline, in batch.
//!
//! Data flows one way, and so do the modules: each uses only those below it (checked by
//! `tests/architecture.rs`). All of them are private; the names other programs use are
//! re-exported here.
//!
//! - `source`: where bytes come from (local files, object storage, compression).
//! - `ingest`: one adapter per source format, in one ordered registry; each reads a file into
//!   canonical rows ([`model`]) and quarantine records ([`read`]).
//! - `store`: the rows as Parquet parts (events and runs, a file each per part) with a
//!   manifest of generations, written atomically ([`Store`]).
//! - `passes`: the checks ([`checks`]), pure functions of one conversation and the
//!   configuration ([`Config`]), using the evidence gate ([`evidence`]).
//! - `corpus`: findings, dispositions, ledgers, agreement, as Parquet ([`tables`]).
//! - `pipeline`: the batch in stages (inputs, readers, writer, checking tap, audit of parts);
//!   [`ingest()`](fn@ingest) and [`audit()`](fn@audit) are its entry points, and
//!   [`distributed`] its pieces for engines that share the work out.
//! - `report` (feature `reports`): what people read, from a corpus; one row model per report,
//!   laid out by each renderer.
//! - `error`: the library's [`Error`]; the front doors each map it in one match.
//! - `cli`: the command line, the only module that knows clap ([`run_command_line`]).
//!
//! What other programs use is re-exported: the jobs at the root ([`ingest()`](fn@ingest),
//! [`audit()`](fn@audit), [`append`], [`compact`]) with their options and summaries, and one
//! facade module a topic: [`read`], [`model`], [`checks`], [`evidence`], [`fingerprint`],
//! [`tables`], [`distributed`], [`front_door`], [`output`] and [`allocator`].
//!
//! A night's audit, as `traceaudit ingest` then `traceaudit audit STORE` run it:
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use traceaudit::{audit, ingest, AuditOptions, IngestOptions};
//!
//! let work = tempfile::tempdir()?;
//! let (store, corpus) = (work.path().join("store"), work.path().join("corpus"));
//! // The recordings into a store of Parquet parts...
//! let night = ingest(
//!     &["testdata/agentfootprint/ndjson".into()],
//!     &store,
//!     &IngestOptions::default(),
//! )?;
//! assert_eq!(night.manifest.counts.files, 9);
//! // ...and every check over the store, into a corpus of Parquet tables.
//! let audited = audit(&[store], &corpus, &AuditOptions::default())?;
//! assert_eq!(audited.manifest.runs, night.manifest.counts.runs);
//! assert!(audited.manifest.findings > 0);
//! assert!(corpus.join("dispositions.parquet").is_file());
//! # Ok(())
//! # }
//! ```

// Every module is private to the crate; what other programs may use is re-exported below,
// at the root (the jobs) or in a facade module of one topic.
pub(crate) mod cli;
pub(crate) mod config;
pub(crate) mod corpus;
pub(crate) mod error;
pub mod evidence;
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

// The jobs the command line runs, their options and their summaries.
pub use config::{Config, RepeatedWhen};
pub use corpus::{Agreement, Disposition, Finding};
pub use error::{Error, Result};
pub use ingest::{Format, Limits};
pub use pipeline::append::{
    append, append_store, compact, fresh_inputs, AppendSummary, CompactSummary,
};
pub use pipeline::audit::{audit, AuditOptions, AuditSummary};
pub use pipeline::ingest::{ingest, IngestOptions, IngestSummary};
pub use pipeline::inputs::{expand_inputs, InputFile};
pub use store::generations::{GenerationEntry, Pick as GenerationPick};
pub use store::{Store, StoreManifest};

/// Run the command line on `args` (the program's name first, as [`std::env::args_os`] gives
/// them) and return its exit status: 0 done (or a gate passed), 1 a gate failed, 2 an error.
/// A usage error is printed as the binary prints it.
///
/// ```
/// use std::process::ExitCode;
/// let code = traceaudit::run_command_line(["traceaudit", "audit", "--no-such-flag"]);
/// assert_eq!(code, ExitCode::from(2));
/// ```
pub fn run_command_line<I, T>(args: I) -> std::process::ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    cli::run_args(args)
}

/// Reading one recorded file into canonical rows ([`model`]) and quarantine records, as the
/// ingest reads each input: collected in memory ([`read_path`](read::read_path)), or handed
/// to a [`Sink`](read::Sink) of the caller's conversation by conversation.
///
/// ```
/// use traceaudit::model::Conversation;
/// use traceaudit::read::{read_file, read_path, Input, Quarantined, Sink};
/// use traceaudit::Format;
/// use std::path::Path;
///
/// let path = Path::new("testdata/agentfootprint/ndjson/a_repeated_identical_call.ndjson");
/// // In memory: the format found from the file's first bytes.
/// let read = read_path(path, None).unwrap();
/// assert!(read.quarantined.is_empty());
/// let runs: usize = read.conversations.iter().map(|(c, _)| c.runs.len()).sum();
///
/// // Or streamed: a sink that keeps only what it needs.
/// #[derive(Default)]
/// struct CountRuns(usize);
/// impl Sink for CountRuns {
///     fn conversation(&mut self, conversation: Conversation, _record: u64) {
///         self.0 += conversation.runs.len();
///     }
///     fn quarantine(&mut self, _item: Quarantined) {}
///     fn records_read(&mut self, _n: u64) {}
/// }
/// let mut sink = CountRuns::default();
/// read_file(Format::AgentfootprintNdjson, &Input::new(path, "a.ndjson"), &mut sink).unwrap();
/// assert_eq!(sink.0, runs);
/// ```
pub mod read {
    pub use crate::ingest::{
        read_file, read_head, read_path, Collect, Input, Quarantined, Severity, Sink,
    };
    // The scanner's streamed and whole-buffer paths side by side, for the fuzz targets only.
    #[cfg(fuzzing)]
    pub use crate::ingest::fuzz_scan_as_streamed;
}

/// The checks, in the order they run and report: each a pure function of one conversation
/// and the configuration.
///
/// ```
/// use traceaudit::checks::{Pass, PassContext, RepeatedCall};
/// use traceaudit::Disposition;
///
/// let path = "testdata/agentfootprint/ndjson/a_repeated_identical_call.ndjson";
/// let read = traceaudit::read::read_path(path.as_ref(), None).unwrap();
/// let (conversation, _) = &read.conversations[0];
/// // One outcome per run of the conversation.
/// let outcomes = RepeatedCall.check(conversation, &PassContext::default());
/// assert_eq!(outcomes.len(), conversation.runs.len());
/// assert!(outcomes.iter().any(|o| o.disposition == Disposition::CheckedFail));
///
/// let names: Vec<&str> = traceaudit::checks::all().iter().map(|c| c.name()).collect();
/// assert_eq!(names, ["repeated-call", "prior-turn-evidence", "schema-attempt"]);
/// ```
pub mod checks {
    pub use crate::passes::prior_turn_evidence::PriorTurnEvidence;
    pub use crate::passes::repeated_call::RepeatedCall;
    pub use crate::passes::schema_attempt::SchemaAttempt;
    pub use crate::passes::{registry as all, Pass, PassContext, RunOutcome};
}

/// A corpus's tables read back without Polars, in either layout (one file per table, or the
/// part files its manifest lists), and what its `manifest.json` holds.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use traceaudit::tables::{read_table, CHECK_COLUMN};
/// use traceaudit::{audit, AuditOptions};
///
/// let work = tempfile::tempdir()?;
/// let corpus = work.path().join("corpus");
/// let inputs = ["testdata/agentfootprint/ndjson/a_repeated_identical_call.ndjson".into()];
/// let audited = audit(&inputs, &corpus, &AuditOptions::default())?;
/// // One row per run and check.
/// let (schema, batches) = read_table(&corpus, "dispositions")?;
/// assert!(schema.field_with_name(CHECK_COLUMN).is_ok());
/// let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
/// assert_eq!(rows as u64, audited.manifest.runs * 3);
/// # Ok(())
/// # }
/// ```
pub mod tables {
    pub use crate::corpus::layout::{read_table, table_files, Layout, TableFile, TableFiles};
    pub use crate::corpus::write::findings_jsonl;
    pub use crate::corpus::CHECK_COLUMN;
    pub use crate::pipeline::audit::{CheckCounts, CorpusManifest};
}

/// The ingest in shards and the audit a part at a time, for engines that distribute the work
/// (the Python module's Ray driver): plan the inputs into parts, ingest each shard, survey the
/// runs read twice, merge the parts into one store; then audit each part and finish the
/// corpus from the parts' results. Each step is a function of files, so each may run in a
/// task of its own on another machine that sees the same folders.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use traceaudit::distributed::*;
/// use traceaudit::{AuditOptions, IngestOptions};
///
/// let work = tempfile::tempdir()?;
/// let at = |name: &str| work.path().join(name);
/// let opts = IngestOptions::default();
/// let plan = plan_ingest(&["testdata/agentfootprint/ndjson".into()], 0)?;
/// // Two shards, each ingesting half of the files (the plan's input numbers).
/// let numbers: Vec<u32> = (0..plan.inputs.len() as u32).collect();
/// let (first, second) = numbers.split_at(numbers.len() / 2);
/// let shards = vec![(at("shard-0"), first.to_vec()), (at("shard-1"), second.to_vec())];
/// for (dir, files) in &shards {
///     ingest_shard(&plan, files, dir, &opts)?;
/// }
/// // The runs read twice, then the shards joined into one store.
/// let dropped = shard_duplicates(&plan, &shards, None)?;
/// let dirs: Vec<_> = shards.iter().map(|(dir, _)| dir.clone()).collect();
/// for part in 0..plan.parts {
///     merge_part(&dirs, &dropped, part, &at("merged"))?;
/// }
/// let store = merge_shards(&plan, &shards, &at("store"), &opts, 0.0, Some(&at("merged")))?;
///
/// // The audit a part at a time, then the corpus finished from the parts' results.
/// let audit = AuditOptions::default();
/// let mut parts = Vec::new();
/// for part in 0..plan.parts {
///     parts.push(audit_part(&at("store"), part, &at("corpus"), &audit)?.counted);
/// }
/// let manifest_text = std::fs::read_to_string(at("store").join("manifest.json"))?;
/// let corpus = finish_corpus(&at("corpus"), "store", &manifest_text, &parts, &audit, 0.0)?;
/// assert_eq!(corpus.runs, store.manifest.counts.runs);
/// # Ok(())
/// # }
/// ```
pub mod distributed {
    pub use crate::pipeline::parts::{
        audit_batches, audit_part, finish_corpus, AuditedPart, CorpusTable, PartAudit,
    };
    pub use crate::pipeline::shards::{
        ingest_shard, join_keys, merge_part, merge_shards, plan_ingest, shard_duplicates,
        IngestPlan, PlannedInput,
    };
}

/// What the front doors (the command line, the Python module) share: options resolved once
/// from what a user gave, and text bounded for a terminal.
///
/// ```
/// use traceaudit::front_door::{audit_options, terminal_line, threads};
///
/// // A configuration file that cannot be read is an error that names it.
/// let missing = std::path::Path::new("no/such/traceaudit.toml");
/// let refused = audit_options(Some(missing), None, None).unwrap_err();
/// assert!(refused.to_string().contains("no/such/traceaudit.toml"));
/// let (opts, _notes) = audit_options(None, Some(vec!["repeated-call".into()]), Some(1)).unwrap();
/// assert_eq!(opts.threads, 1);
/// assert!(threads(None).0 >= 1);
/// // Recorded text is untrusted: control characters are not passed to the terminal.
/// assert!(!terminal_line("a\x1b[2Jb", 80).contains('\x1b'));
/// ```
pub mod front_door {
    pub use crate::pipeline::options::{audit_options, threads};
    pub use crate::terminal::line as terminal_line;
}

/// The framework's own fingerprints, to the byte: JavaScript's `JSON.stringify` and number and
/// string forms, its hashes, and the repeated-call key built from them.
///
/// ```
/// use traceaudit::fingerprint::{call_key, fingerprint, stable_string};
/// use traceaudit::RepeatedWhen;
///
/// // 32-bit FNV-1a over UTF-16 code units, as 8 zero-padded hex digits (spec section 3).
/// assert_eq!(fingerprint("x2"), "0f630cef");
/// // Arguments as the framework writes them: keys sorted, numbers as JavaScript prints them.
/// let args: serde_json::Value = serde_json::from_str(r#"{"b":1.0,"a":[1e21]}"#).unwrap();
/// assert_eq!(stable_string(&args), r#"{"a":[1e+21],"b":1}"#);
/// let key = call_key("lookup", Some(r#"{"b":1.0,"a":[1e21]}"#), "ok", RepeatedWhen::Arguments);
/// assert_eq!(key.key, format!("lookup:{}:*", fingerprint(r#"{"a":[1e+21],"b":1}"#)));
/// ```
pub mod fingerprint {
    pub use crate::js::*;
    pub use crate::passes::repeated_call::{call_key, CallKey};
}

/// Output directories written whole or not at all, and never over what traceaudit did not
/// write (for tools that write beside the engine's outputs, such as the corpus generator).
pub mod output {
    pub use crate::store::atomic::{remove_staging_on_signal, write_file, AtomicDir, Layout};
}

/// The allocator's settings, for the programs that make mimalloc their global allocator.
///
/// The command line sets them before a command starts its threads: for an ingest, audit or
/// compaction ([`for_batch`](allocator::for_batch)) and for a report
/// ([`for_reports`](allocator::for_reports)). Both keep memory in 4 KB pages, never in 2 MB
/// transparent huge pages, and shorten the delay after which mimalloc gives freed pages back
/// to the kernel (a second by default): 250 ms for a batch, 10 ms for a report. Huge pages and
/// pages kept longer make an audit a little faster and its peak higher (docs/performance.md has
/// both). An operator's `MIMALLOC_ALLOW_THP` (1 allows huge pages) and `MIMALLOC_PURGE_DELAY`
/// (milliseconds; -1 keeps freed pages), read by mimalloc itself, win everywhere.
pub mod allocator {
    /// `mi_option_purge_delay` in mimalloc's `mi_option_e` (its header numbers the options; the
    /// Rust binding names only some), in milliseconds; -1 is "never purge".
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

    /// The settings of a report (`report`, `diff`, `explain`, `trend`): a short command that
    /// reads a little of many regions (each slice, each Polars thread) and whose steps free
    /// what the next does not reuse. Call before the work starts its threads.
    /// - No transparent huge pages ([`small_pages_only`]).
    /// - Freed pages go back to the kernel after 10 ms instead of being kept: kept, each
    ///   step's pages added to the next one's peak. An operator's `MIMALLOC_PURGE_DELAY` wins.
    pub fn for_reports() {
        small_pages_only();
        purge_after(10);
    }

    /// The settings of an ingest, audit or compaction. Call before the work starts its threads.
    /// - No transparent huge pages ([`small_pages_only`]): the readers, builders and parts
    ///   each touch a little of many 2 MB regions, and a region backed by a huge page is
    ///   resident whole. Without them a 2 GB audit peaks 15-40 MB lower, for 2-6% more CPU
    ///   time (more TLB misses).
    /// - Freed pages go back to the kernel after 250 ms instead of mimalloc's 1,000: the
    ///   readers, builders and parts free memory in bursts that the next burst does not all
    ///   reuse; kept for a second, those pages added 15-50 MB to a 2 GB audit's peak, for 1-6%
    ///   of a raw audit's time and 6-22% of a store audit's.
    /// - The C heap keeps freed blocks up to 16 MB for reuse ([`c_heap_keeps_blocks`]).
    pub fn for_batch() {
        small_pages_only();
        purge_after(250);
        c_heap_keeps_blocks();
    }

    /// glibc's `malloc` (which C libraries use, not the global allocator) serves blocks up to
    /// 16 MB from its heap and gives its heap's top back to the kernel only past 64 MB, unless
    /// the operator set `MALLOC_MMAP_THRESHOLD_` or `MALLOC_TRIM_THRESHOLD_` (glibc's own
    /// variables). zstd's contexts come from it: the `parquet` crate makes a compression and a
    /// decompression context for every compressed column chunk it writes or reads, and their
    /// workspaces, over glibc's 128 KB default, were each mapped, faulted in page by page and
    /// unmapped again (every unmap stopping the other cores to flush their TLBs). Elsewhere
    /// than glibc on Linux, nothing.
    pub fn c_heap_keeps_blocks() {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            // SAFETY: mallopt sets a parameter of glibc's allocator; no memory is passed.
            if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
                unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 16 << 20) };
            }
            if std::env::var_os("MALLOC_TRIM_THRESHOLD_").is_none() {
                unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20) };
            }
        }
    }

    /// Memory is faulted in as 4 KB pages only for the rest of the process and its children
    /// (Linux's `PR_SET_THP_DISABLE`; elsewhere nothing), unless the operator set
    /// `MIMALLOC_ALLOW_THP`. mimalloc asks for huge pages on its arenas, and where the kernel
    /// grants them (`enabled` set to `always`, or `madvise` as here) every region touched is
    /// backed by a whole 2 MB page.
    pub fn small_pages_only() {
        #[cfg(target_os = "linux")]
        if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
            // SAFETY: sets a flag of this process; no memory is passed.
            unsafe {
                libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
            }
        }
    }

    /// mimalloc's purge delay, unless the operator set `MIMALLOC_PURGE_DELAY`.
    fn purge_after(milliseconds: std::ffi::c_long) {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            // SAFETY: sets one integer option; not thread safe, hence before threads start.
            unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, milliseconds) }
        }
    }

    #[cfg(test)]
    mod tests {
        /// Whether glibc serves a C block of `size` bytes by a mapping of its own: the flag
        /// glibc keeps in the size word before every block (`IS_MMAPPED`, 2).
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        fn c_block_is_mapped(size: usize) -> bool {
            // SAFETY: the word read is the block's header, which glibc puts before it.
            unsafe {
                let block = libc::malloc(size);
                assert!(!block.is_null());
                let mapped = *(block as *const usize).sub(1) & 2 != 0;
                libc::free(block);
                mapped
            }
        }

        /// Option 15 is the purge delay: it is the option whose default is 1000 ms (no other
        /// option of mimalloc 3 defaults to 1000), which the settings of a batch and then of a
        /// report read back as theirs; an operator's delay stands through both. Huge pages are
        /// off after a batch's settings, unless the operator allowed them or they were off
        /// already (the flag is inherited from the parent process), and a 4 MB block of the C
        /// heap is not mapped alone, unless the operator set glibc's threshold. One test, since
        /// a setting holds for the rest of the process.
        #[test]
        fn a_batch_and_a_report_set_the_allocator() {
            let get = || unsafe { libmimalloc_sys::mi_option_get(15) };
            let operator = std::env::var("MIMALLOC_PURGE_DELAY")
                .ok()
                .and_then(|v| v.parse::<std::ffi::c_long>().ok());
            assert_eq!(get(), operator.unwrap_or(1000));
            #[cfg(target_os = "linux")]
            let huge_pages_off = || unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
            #[cfg(target_os = "linux")]
            let operator_thp = std::env::var_os("MIMALLOC_ALLOW_THP").is_some();
            #[cfg(target_os = "linux")]
            let inherited = huge_pages_off();
            super::for_batch();
            assert_eq!(get(), operator.unwrap_or(250));
            #[cfg(target_os = "linux")]
            assert_eq!(huge_pages_off(), if operator_thp { inherited } else { 1 });
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
                assert!(
                    !c_block_is_mapped(4 << 20),
                    "a 4 MB C block is mapped alone"
                );
            }
            super::for_reports();
            assert_eq!(get(), operator.unwrap_or(10));
            #[cfg(target_os = "linux")]
            assert_eq!(huge_pages_off(), if operator_thp { inherited } else { 1 });
        }
    }
}
