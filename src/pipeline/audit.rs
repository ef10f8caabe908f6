//! The audit driver: every registered pass over every conversation of a store, in parallel
//! across conversations, results merged in a fixed order so the corpus does not depend on the
//! thread count. Checks themselves know nothing of threads.
//!
//! An audit of raw inputs does not read the store back: it checks each conversation during the
//! ingest, as soon as it is stored, and writes the corpus from those results (rereading from
//! the store only conversations stored in more than one piece). The corpus is byte for byte
//! the one an audit of the store would write.

pub use super::counts::CheckCounts;
use super::counts::{Contribution, PartAudit, RunKey};
use super::ingest::{ingest_tapped, IngestOptions};
use super::tables::{tables_of, PartTables};
use super::tap::{Tap, Tapped};
use crate::config::Config;
use crate::corpus::write::{CorpusTables, TableWriter};
use crate::corpus::{finding_id, DispositionRow, Finding, LedgerRow};
use crate::ingest::Format;
use crate::model::vocab::source_family;
use crate::model::Conversation;
use crate::passes::{agreement_rows, select, Pass, PassContext, RunOutcome};
use crate::store::atomic::{write_file, AtomicDir};
use crate::store::{Origin, Store, StoreManifest};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Debug, Clone, Default)]
pub struct AuditOptions {
    pub config: Config,
    /// The configuration file's text, recorded in the manifest.
    pub config_text: Option<String>,
    pub checks: Option<Vec<String>>,
    pub threads: usize,
    pub format: Option<Format>,
    pub progress: bool,
    pub include_values: bool,
    /// What an adapter may hold at once, for an audit of raw inputs.
    pub limits: crate::ingest::Limits,
    /// Audit only this generation of the store (the conversations it wrote or superseded);
    /// `None`: the whole store.
    pub generation: Option<crate::store::generations::Pick>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CorpusManifest {
    pub engine: String,
    pub engine_version: String,
    pub checks: Vec<String>,
    pub config: Option<String>,
    pub config_hash: String,
    pub store: String,
    pub store_manifest: StoreManifest,
    pub conversations: u64,
    pub runs: u64,
    pub findings: u64,
    pub counts: Vec<CheckCounts>,
    pub threads: usize,
    pub seconds: f64,
    pub ingest_seconds: Option<f64>,
    /// Every file of every table, for a corpus whose tables are written a part at a time;
    /// absent from the command line's, whose tables are `<table>.parquet`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tables: Option<Vec<crate::corpus::layout::TableFiles>>,
    /// The generation of the store audited (`--generation`); absent when the whole store was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_generation: Option<u32>,
}

impl Contribution {
    /// The dispositions table's rows, check by check (`checks`: the names of the checks run,
    /// in order), each check's runs in order.
    pub(super) fn disposition_rows<'a>(
        &'a self,
        checks: &'a [&'static str],
    ) -> impl Iterator<Item = DispositionRow<'a>> + 'a {
        self.dispositions
            .iter()
            .zip(checks)
            .flat_map(move |(outcomes, check)| {
                self.runs
                    .iter()
                    .zip(outcomes)
                    .map(move |(run, (disposition, reason))| DispositionRow {
                        run_id: &run.run_id,
                        conversation_id: &self.conversation_id,
                        turn: run.turn,
                        source: &run.source,
                        check,
                        disposition: *disposition,
                        reason,
                    })
            })
    }

    /// Does it come back the same from JSON? Every field does, except a non-finite number,
    /// which JSON writes as `null`.
    fn survives_json(&self) -> bool {
        self.findings
            .iter()
            .all(|f| f.columns.wasted_ms.is_none_or(f64::is_finite))
    }
}

/// Where an audit of raw inputs files what it checked during the ingest, inside the corpus
/// being written (removed before the corpus is complete).
const CHECKED_DIR: &str = "checked-during-ingest";

/// Every pass's outcomes for one conversation, as corpus rows; `elided`: the conversation was
/// read without the text of its tool results. `None` when it was and some pass needs that text
/// ([`Pass::check_digested`]).
fn try_audit_conversation(
    conversation: &Conversation,
    elided: bool,
    passes: &[&'static dyn Pass],
    ctx: &PassContext,
) -> Option<Contribution> {
    let mut out = Contribution {
        conversation_id: conversation.id.clone(),
        runs: conversation
            .runs
            .iter()
            .map(|run| RunKey {
                run_id: run.run_id.clone(),
                turn: run.turn,
                source: source_family(&run.format),
            })
            .collect(),
        ..Contribution::default()
    };
    for pass in passes {
        let outcomes = if elided {
            pass.check_digested(conversation, ctx)?
        } else {
            pass.check(conversation, ctx)
        };
        debug_assert_eq!(outcomes.len(), conversation.runs.len());
        let mut dispositions = Vec::with_capacity(outcomes.len());
        // Outcomes are moved into the rows: a part has a disposition for every run and check.
        for (i, (key, outcome)) in out.runs.iter().zip(outcomes).enumerate() {
            let source = &key.source;
            out.agreement.extend(agreement_rows(
                pass.name(),
                conversation,
                i,
                source,
                &outcome,
            ));
            let RunOutcome {
                disposition,
                reason,
                findings,
                rows,
                ..
            } = outcome;
            dispositions.push((disposition, reason));
            for draft in findings {
                out.findings.push(Finding {
                    finding_id: finding_id(pass.name(), &key.run_id, &draft),
                    check: pass.name().to_string(),
                    kind: draft.kind,
                    seam: draft.seam,
                    predicate: draft.predicate,
                    advisory: draft.advisory,
                    source: source.clone(),
                    conversation_id: conversation.id.clone(),
                    run_id: key.run_id.clone(),
                    turn: key.turn,
                    iteration: draft.iteration,
                    subjects: draft.subjects,
                    witnesses: draft.witnesses,
                    message: draft.message,
                    columns: draft.columns,
                });
            }
            out.rows.extend(
                rows.into_iter()
                    .map(|(table, row)| (table.to_string(), row)),
            );
        }
        out.dispositions.push(dispositions);
    }
    Some(out)
}

/// [`try_audit_conversation`] for a conversation read whole.
pub(super) fn audit_conversation(
    conversation: &Conversation,
    passes: &[&'static dyn Pass],
    ctx: &PassContext,
) -> Contribution {
    try_audit_conversation(conversation, false, passes, ctx)
        .expect("a whole conversation is checked")
}

/// The audit of raw inputs checks each conversation on the ingest's tap threads once the
/// writer has stored it, as the store will give it back ([`crate::store::read::into_stored`]).
/// So checking overlaps reading and writing, and the store is not read back except for
/// conversations that were not stored in one piece.
struct CheckWhileIngesting<'a> {
    passes: &'a [&'static dyn Pass],
    ctx: &'a PassContext,
}

impl Tap for CheckWhileIngesting<'_> {
    fn conversation(&self, conversation: Conversation) -> Option<Vec<u8>> {
        let stored = crate::store::read::into_stored(conversation, super::store_spec())?;
        let contribution = audit_conversation(&stored, self.passes, self.ctx);
        if !contribution.survives_json() {
            return None;
        }
        serde_json::to_vec(&contribution).ok()
    }
}

/// One part's contributions, in the order an audit of the store makes them (conversations by
/// origin, then id): those checked during the ingest, and, checked now from the store, the
/// conversations whose early result does not stand.
fn tapped_part(
    store: &Store,
    part: u32,
    tapped: &Tapped,
    passes: &[&'static dyn Pass],
    ctx: &PassContext,
) -> io::Result<Vec<Contribution>> {
    let stale = &tapped.stale[part as usize];
    let text = std::fs::read_to_string(&tapped.files[part as usize])?;
    let lines: Vec<&str> = text.lines().collect();
    type Kept = (Origin, String, Contribution);
    let mut list: Vec<Kept> = lines
        .par_iter()
        .map(|line| {
            let (input_index, record_index, id, contribution): (u32, u64, String, Contribution) =
                serde_json::from_str(line).map_err(io::Error::other)?;
            let origin = Origin {
                input_index,
                record_index,
            };
            Ok((origin, id, contribution))
        })
        .filter(|kept: &io::Result<Kept>| kept.as_ref().map_or(true, |k| !stale.contains(&k.1)))
        .collect::<io::Result<_>>()?;
    drop(text);
    if !stale.is_empty() {
        let again = store.read_part_where(part, Some(stale))?;
        list.par_extend(again.into_par_iter().map(|(origin, c)| {
            let contribution = audit_conversation(&c, passes, ctx);
            (origin, c.id, contribution)
        }));
    }
    list.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    Ok(list.into_iter().map(|(_, _, c)| c).collect())
}

/// Audit one part of a store: its conversations read without the text of their tool results,
/// which the checks mostly do without (they have digests of it), and those a check needs it
/// for read again whole and checked again. Contributions in the store's order.
pub(super) fn check_part(
    store: &Store,
    part: u32,
    passes: &[&'static dyn Pass],
    ctx: &PassContext,
) -> io::Result<Vec<Contribution>> {
    let convs = store.read_part_without_results(part)?;
    let mut results: Vec<Option<Contribution>> = convs
        .par_iter()
        .map(|(_, c)| try_audit_conversation(c, true, passes, ctx))
        .collect();
    let needy: HashSet<String> = convs
        .iter()
        .zip(&results)
        .filter(|(_, r)| r.is_none())
        .map(|((_, c), _)| c.id.clone())
        .collect();
    if !needy.is_empty() {
        let mut whole: HashMap<String, Contribution> = store
            .read_part_where(part, Some(&needy))?
            .into_par_iter()
            .map(|(_, c)| {
                let contribution = audit_conversation(&c, passes, ctx);
                (c.id, contribution)
            })
            .collect();
        for ((_, c), r) in convs.iter().zip(results.iter_mut()) {
            if r.is_none() {
                *r = whole.remove(&c.id);
            }
        }
    }
    let results = results
        .into_iter()
        .zip(&convs)
        .map(|(r, (_, c))| {
            r.ok_or_else(|| {
                io::Error::other(format!("conversation {} went missing from its part", c.id))
            })
        })
        .collect();
    // Freeing a part's conversations takes a tenth of its audit's time on one thread: the
    // pool does it while the caller goes on with the results.
    rayon::spawn(move || drop(convs));
    results
}

/// Is `path` a store written by `ingest`?
pub fn is_store(path: &Path) -> bool {
    crate::store::generations::looks_like_store(path)
}

/// The result of an audit.
pub struct AuditSummary {
    pub corpus: PathBuf,
    pub manifest: CorpusManifest,
}

/// Audit `inputs` (one store, or raw inputs) into the corpus directory `out`. A store may be
/// in object storage (a prefix holding its manifest): the files the audit reads are fetched
/// first (with `opts.generation`, that generation's only).
///
/// Raw inputs are read once, the checks running as each conversation is read; the corpus is
/// byte-identical whatever `opts.threads` is.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use traceaudit::{audit, AuditOptions, Config};
///
/// let work = tempfile::tempdir()?;
/// let inputs = ["testdata/agentfootprint/ndjson/b_polling_progress.ndjson".into()];
/// let one = AuditOptions { threads: 1, ..AuditOptions::default() };
/// let two = AuditOptions { threads: 2, ..AuditOptions::default() };
/// let plain = audit(&inputs, &work.path().join("one"), &one)?;
/// audit(&inputs, &work.path().join("two"), &two)?;
/// let findings = |dir: &str| std::fs::read(work.path().join(dir).join("findings.jsonl"));
/// assert_eq!(findings("one")?, findings("two")?);
///
/// // A configuration, as a `--config` file gives it: `job_status` reports progress,
/// // so polling it with the same arguments counts as a repeat.
/// let config = Config::from_toml("[tools.job_status]\nrepeated_when = \"arguments\"\n")?;
/// let opts = AuditOptions { config, ..AuditOptions::default() };
/// let configured = audit(&inputs, &work.path().join("configured"), &opts)?;
/// assert!(configured.manifest.findings > plain.manifest.findings);
/// # Ok(())
/// # }
/// ```
pub fn audit(inputs: &[PathBuf], out: &Path, opts: &AuditOptions) -> io::Result<AuditSummary> {
    if super::remote::is_url(out) {
        crate::store::atomic::refuse_overlap(out, inputs)?;
        return super::remote::write_to_bucket(out, |local| {
            let mut summary = audit(inputs, local, opts)?;
            summary.corpus = super::remote::shown(out);
            Ok(summary)
        });
    }
    let one_store = inputs.len() == 1 && is_store(&inputs[0]);
    if inputs.len() == 1 && super::remote::is_url(&inputs[0]) {
        if let Some((local, _copy)) = super::remote::fetched_store(&inputs[0], opts.generation)? {
            let shown = crate::source::object::redacted(&inputs[0].display().to_string());
            return audit_store_at(std::slice::from_ref(&local), out, opts, Some(shown));
        }
    }
    if opts.generation.is_some() && !one_store {
        return Err(not_a_store_for_generation());
    }
    audit_store_at(inputs, out, opts, None)
}

fn not_a_store_for_generation() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "--generation picks a generation of a store, and the inputs are not a store (ingest \
         them with `ingest --append` first)",
    )
}

/// [`audit`] of inputs on this machine; `store_named`: how the corpus names the store it was
/// audited from when that is not where it was read (a store fetched from a bucket).
fn audit_store_at(
    inputs: &[PathBuf],
    out: &Path,
    opts: &AuditOptions,
    store_named: Option<String>,
) -> io::Result<AuditSummary> {
    let started = Instant::now();
    let passes = select(opts.checks.as_deref())?;
    crate::store::atomic::refuse_overlap(out, inputs)?;
    let check_tables: Vec<&str> = crate::passes::registry()
        .iter()
        .flat_map(|p| p.tables())
        .map(|(name, _)| name)
        .collect();
    let staging = AtomicDir::create(out, &crate::corpus::write::corpus_layout(&check_tables))?;
    let ctx = PassContext {
        evidence: opts.config.evidence.compile()?,
        config: opts.config.clone(),
        include_values: opts.include_values,
    };
    let source = store_of(inputs, staging.path(), opts, &passes, &ctx)?;
    let spec = super::spec_of(&passes);
    let (store, store_generation) = match opts.generation {
        Some(_) if source.tapped.is_some() => return Err(not_a_store_for_generation()),
        Some(pick) => {
            let (store, number) = Store::open_generation(&source.dir, pick)?;
            (store, Some(number))
        }
        None => (Store::open(&source.dir)?, None),
    };
    let store = store.with_digests(&spec.digests);
    refuse_missing_envelopes(&source.dir, &store.manifest, &passes)?;
    let store_manifest = store.manifest.clone();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads.max(1))
        .build()
        .map_err(io::Error::other)?;
    let progress = crate::progress::counter(opts.progress, store_manifest.counts.runs, "audit");
    // Tables are written as each part is audited: memory holds one part and its results.
    let mut out_tables = OutTables {
        tables: CorpusTables::create(staging.path())?,
        extra: check_table_writers(staging.path(), &passes)?,
        totals: PartAudit::new(&passes),
    };
    let parts = Parts {
        store: &store,
        pool: &pool,
        passes: &passes,
        ctx: &ctx,
        tapped: &source.tapped,
    };
    audit_parts(&parts, &mut out_tables, &progress)?;
    progress.finish_and_clear();
    if source.tapped.is_some() {
        std::fs::remove_dir_all(staging.path().join(CHECKED_DIR))?;
    }

    let OutTables {
        tables,
        extra,
        totals,
    } = out_tables;
    let ledger = ledger_rows(&passes, &totals.counts);
    tables.finish(staging.path(), &ledger)?;
    for (_, table) in extra {
        table.finish()?;
    }
    let manifest = CorpusManifest {
        engine: crate::store::ENGINE.into(),
        engine_version: crate::store::ENGINE_VERSION.into(),
        checks: passes.iter().map(|p| p.name().to_string()).collect(),
        config: opts.config_text.clone(),
        config_hash: opts.config.hash(),
        store: match store_named {
            Some(name) => name,
            None if source.dir.starts_with(staging.path()) => "store".into(),
            None => source.dir.display().to_string(),
        },
        store_manifest,
        conversations: totals.conversations,
        runs: totals.runs,
        findings: totals.findings,
        counts: totals.counts,
        threads: opts.threads,
        seconds: started.elapsed().as_secs_f64(),
        ingest_seconds: source.ingest_seconds,
        tables: None,
        store_generation,
    };
    let text = serde_json::to_string_pretty(&manifest).map_err(io::Error::other)?;
    write_file(&staging.path().join("manifest.json"), text.as_bytes())?;
    let corpus = staging.commit()?;
    Ok(AuditSummary { corpus, manifest })
}

/// Refuse a store that does not keep the envelopes of an `other` row type a check reads: the
/// store would give those rows back without them and the check would see nothing. Stores
/// whose manifest names no types kept those of
/// [`ENVELOPE_TYPES_BEFORE_MANIFEST`](crate::store::ENVELOPE_TYPES_BEFORE_MANIFEST).
pub(super) fn refuse_missing_envelopes(
    dir: &Path,
    manifest: &StoreManifest,
    passes: &[&'static dyn Pass],
) -> io::Result<()> {
    for pass in passes {
        if let Some(t) = pass
            .other_payloads()
            .iter()
            .find(|t| !manifest.holds_envelope_type(t))
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} does not keep the envelopes of `{t}` rows, which check {} reads: \
                     ingest its inputs again",
                    dir.display(),
                    pass.name()
                ),
            ));
        }
    }
    Ok(())
}

/// The store an audit reads: the one given, or one ingested from raw inputs into the corpus
/// being written (checked during the ingest, see [`CheckWhileIngesting`]).
struct Source {
    dir: PathBuf,
    ingest_seconds: Option<f64>,
    tapped: Option<Tapped>,
}

/// The store given as the only input, or the ingest of the raw inputs into `staging/store`.
fn store_of(
    inputs: &[PathBuf],
    staging: &Path,
    opts: &AuditOptions,
    passes: &[&'static dyn Pass],
    ctx: &PassContext,
) -> io::Result<Source> {
    if inputs.len() == 1 && is_store(&inputs[0]) {
        return Ok(Source {
            dir: inputs[0].clone(),
            ingest_seconds: None,
            tapped: None,
        });
    }
    let target = staging.join("store");
    let checker = CheckWhileIngesting { passes, ctx };
    let (summary, tapped) = ingest_tapped(
        inputs,
        &target,
        &IngestOptions {
            format: opts.format,
            threads: opts.threads,
            progress: opts.progress,
            limits: opts.limits,
            ..IngestOptions::default()
        },
        Some((&checker, &staging.join(CHECKED_DIR))),
    )?;
    Ok(Source {
        dir: target,
        ingest_seconds: Some(summary.manifest.seconds),
        tapped,
    })
}

/// A writer for each check's own corpus tables.
fn check_table_writers(
    dir: &Path,
    passes: &[&'static dyn Pass],
) -> io::Result<Vec<(&'static str, TableWriter)>> {
    let mut extra = Vec::new();
    for pass in passes {
        for (table, schema) in pass.tables() {
            let path = dir.join(format!("{table}.parquet"));
            extra.push((table, TableWriter::create(&path, schema)?));
        }
    }
    Ok(extra)
}

/// What the audit of each part needs.
struct Parts<'a> {
    store: &'a Store,
    pool: &'a rayon::ThreadPool,
    passes: &'a [&'static dyn Pass],
    ctx: &'a PassContext,
    tapped: &'a Option<Tapped>,
}

impl Parts<'_> {
    /// One part's contributions, in the store's order, made into table batches.
    fn audit(&self, part: u32) -> io::Result<PartTables> {
        self.pool.install(|| {
            let results = match self.tapped {
                Some(tapped) => tapped_part(self.store, part, tapped, self.passes, self.ctx),
                None => check_part(self.store, part, self.passes, self.ctx),
            }?;
            tables_of(&results, self.passes)
        })
    }
}

/// The corpus tables being written, and the totals so far.
struct OutTables {
    tables: CorpusTables,
    extra: Vec<(&'static str, TableWriter)>,
    totals: PartAudit,
}

impl OutTables {
    /// Write one part's tables and count them.
    fn write(&mut self, part: &PartTables) -> io::Result<()> {
        self.totals.merge(&part.counted)?;
        self.tables.write(
            part.batches("findings"),
            &part.findings_jsonl,
            part.batches("dispositions"),
            part.batches("agreement"),
        )?;
        for (name, table) in self.extra.iter_mut() {
            table.write_batches(part.batches(name))?;
        }
        Ok(())
    }
}

/// Audit every part of the store and write its contributions, in part order.
///
/// One part at a time: read, audited and made into table batches in parallel, written in
/// order; memory holds one part's conversations (reading two parts ahead would hold two). The
/// next part is audited while this one's batches are written, so the single writer only
/// encodes and compresses, and no core waits on it.
fn audit_parts(
    parts: &Parts<'_>,
    out: &mut OutTables,
    progress: &indicatif::ProgressBar,
) -> io::Result<()> {
    let count = parts.store.parts;
    std::thread::scope(|scope| -> io::Result<()> {
        let (ready_tx, ready) = std::sync::mpsc::sync_channel::<io::Result<PartTables>>(0);
        scope.spawn(move || {
            for part in 0..count {
                let tables = parts.audit(part);
                let failed = tables.is_err();
                if ready_tx.send(tables).is_err() || failed {
                    break;
                }
            }
        });
        for _ in 0..count {
            let tables: PartTables = ready
                .recv()
                .map_err(|_| io::Error::other("the checked results of a part went missing"))??;
            progress.inc(tables.counted.runs);
            out.write(&tables)?;
        }
        Ok(())
    })
}

pub(super) fn ledger_rows(passes: &[&'static dyn Pass], counts: &[CheckCounts]) -> Vec<LedgerRow> {
    passes
        .iter()
        .zip(counts)
        .map(|(p, c)| LedgerRow {
            check: p.name().to_string(),
            seam: p.seam().to_string(),
            checked: c.checked_pass + c.checked_fail,
            findings: c.checked_fail,
            not_applicable: c.not_applicable,
            unreachable: c.unreachable,
            passed: c.checked_pass,
            finding_rows: c.findings,
        })
        .collect()
}

/// The check x disposition table printed at the end of an audit.
pub fn disposition_table(counts: &[CheckCounts]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<22} {:>7} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8}\n",
        "check", "runs", "pass", "fail", "n/a", "unreach", "findings", "fail %"
    ));
    for c in counts {
        let rate = c
            .fail_rate()
            .map(|r| format!("{:.1}", r * 100.0))
            .unwrap_or_else(|| "-".into());
        out.push_str(&format!(
            "{:<22} {:>7} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8}\n",
            c.check,
            c.runs,
            c.checked_pass,
            c.checked_fail,
            c.not_applicable,
            c.unreachable,
            c.findings,
            rate
        ));
    }
    out.push_str("fail % = checked-fail among checked runs (pass + fail)\n");
    let agreement: Vec<String> = counts
        .iter()
        .filter(|c| !c.agreement.is_empty())
        .map(|c| {
            let parts: Vec<String> = c
                .agreement
                .iter()
                .map(|(status, n)| format!("{n} {status}"))
                .collect();
            format!("{}: {}", c.check, parts.join(", "))
        })
        .collect();
    if !agreement.is_empty() {
        out.push_str(&format!(
            "agreement with recorded framework verdicts: {}\n",
            agreement.join("; ")
        ));
    }
    out
}
