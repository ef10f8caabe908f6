//! The audit a part at a time, for engines that run the parts of a store in other processes or
//! on other machines: one part of a store into a part of each corpus table ([`audit_part`]),
//! a store's tables held in memory into corpus tables in memory ([`audit_batches`]), and the
//! ledger and manifest made from the parts' counts ([`finish_corpus`]).
//!
//! A corpus made so holds the rows the command line's corpus of the same store holds, table by
//! table and in the same order once its parts are read in part order: each table is a folder of
//! `part-NNNNN.parquet` files instead of one file, which its manifest lists (see
//! [`crate::corpus::layout`]). `findings.jsonl` is the driver's to write, before the manifest:
//! the lines each part's audit gives back ([`AuditedPart::findings_jsonl`]), in part order.

use super::audit::{
    audit_conversation, check_part, ledger_rows, refuse_missing_envelopes, AuditOptions,
    CorpusManifest,
};
use super::counts::Contribution;
pub use super::counts::PartAudit;
pub use super::tables::CorpusTable;
use super::tables::{part_tables, tables_of};
use crate::corpus::layout::{describe, TableFiles};
use crate::corpus::write::{ledger_schema, BatchBuilder, TableWriter};
use crate::error::Error;
use crate::passes::{select, Pass, PassContext};
use crate::store::atomic::write_file;
use crate::store::read::conversations_from_batches;
use crate::store::write::part_file_name;
use crate::store::{Store, StoreManifest};
use arrow::record_batch::RecordBatch;
use rayon::prelude::*;
use std::io;
use std::path::{Path, PathBuf};

/// The checks `opts` selects, and their context.
fn checks_of(opts: &AuditOptions) -> io::Result<(Vec<&'static dyn Pass>, PassContext)> {
    let passes = select(opts.checks.as_deref())?;
    let ctx = PassContext {
        evidence: opts.config.evidence.compile()?,
        config: opts.config.clone(),
        include_values: opts.include_values,
    };
    Ok((passes, ctx))
}

/// Refuse to write into `out` when it holds anything a corpus made a part at a time does not:
/// its table folders, `findings.jsonl` (or the driver's unfinished one), `ledger.parquet` and
/// `manifest.json`. Parts are written by many tasks
/// into one folder, so an existing folder is expected; a folder of someone else's files is not
/// one to add files to (or replace a same-named one in).
fn refuse_foreign(out: &Path, passes: &[&'static dyn Pass]) -> io::Result<()> {
    let entries = match std::fs::read_dir(out) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let tables = part_tables(passes);
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = if entry.file_type()?.is_dir() {
            tables.iter().any(|(table, _)| *table == name)
        } else {
            matches!(
                name.as_str(),
                "findings.jsonl" | "ledger.parquet" | "manifest.json"
            ) || is_driver_staging(&name)
        };
        if !ours {
            return Err(io::Error::from(Error::Refused(format!(
                "{} holds {name:?}, which is not part of a traceaudit corpus; refusing to \
                     write into it: give an empty or new directory",
                out.display()
            ))));
        }
    }
    Ok(())
}

/// Whether `name` is the driver's `findings.jsonl` while it is written (`traceaudit.ray` writes
/// it under a hidden temporary name as the parts finish, so later parts' audits find it there).
fn is_driver_staging(name: &str) -> bool {
    name.starts_with(".findings.jsonl.") && name.ends_with(".partial")
}

/// Where a table of a part is written while it is incomplete: a hidden name (dataset readers
/// skip names starting with a dot) unique to this writer, since a retried task may write the
/// same part while an earlier attempt is still running.
fn staging_name(table_dir: &Path, part: u32) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    table_dir.join(format!(
        ".{}.{}-{nanos}-{}.partial",
        part_file_name(part),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// What the audit of one part gives back to the driver that finishes the corpus.
#[derive(Debug)]
pub struct AuditedPart {
    /// What the part counted, for [`finish_corpus`].
    pub counted: PartAudit,
    /// The part's lines of `findings.jsonl`, byte for byte the command line's for these
    /// findings: the corpus's `findings.jsonl` is every part's lines, in part order. Made from
    /// the findings in memory, so a driver need not read the findings parts back to write it.
    pub findings_jsonl: Vec<u8>,
}

/// Audit part `part` of the store `store` into `out/TABLE/part-NNNNN.parquet`, one file per
/// corpus table (findings, dispositions, agreement, the checks' own tables), and give back
/// what it counted and its findings' JSON lines. Each file is written under a temporary name
/// and renamed into place, and its content depends on the store and the options only: a part
/// audited again, or twice at once, leaves the same files and never a partial one.
pub fn audit_part(
    store: &Path,
    part: u32,
    out: &Path,
    opts: &AuditOptions,
) -> io::Result<AuditedPart> {
    let (passes, ctx) = checks_of(opts)?;
    let spec = super::spec_of(&passes);
    let opened = Store::open(store)?.with_digests(&spec.digests);
    refuse_missing_envelopes(store, &opened.manifest, &passes)?;
    if part >= opened.parts {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} has {} part(s); there is no part {part}",
                store.display(),
                opened.parts
            ),
        ));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads.max(1))
        .build()
        .map_err(io::Error::other)?;
    refuse_foreign(out, &passes)?;
    let tables = pool.install(|| {
        let results = check_part(&opened, part, &passes, &ctx)?;
        tables_of(&results, &passes)
    })?;
    let mut counted = tables.counted;
    for table in &tables.tables {
        let dir = out.join(&table.name);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(part_file_name(part));
        let mut writer =
            TableWriter::create_via(&path, &staging_name(&dir, part), table.schema.clone())?;
        writer.write_batches(&table.batches)?;
        writer.finish()?;
        let rel = format!("{}/{}", table.name, part_file_name(part));
        counted.files.push(TableFiles {
            table: table.name.clone(),
            files: vec![describe(out, &rel)?],
        });
    }
    Ok(AuditedPart {
        counted,
        findings_jsonl: tables.findings_jsonl.concat(),
    })
}

/// The checks over the conversations of a store's tables held in memory, in the store's schema
/// (see `conversations_from_batches`: text columns may be utf8, large_utf8 or utf8_view; the
/// tables must hold whole conversations). Gives the corpus tables, findings, dispositions,
/// agreement, ledger and the checks' own tables, with the rows the command line's audit writes
/// for those conversations, in its order, and what was counted.
pub fn audit_batches(
    events: &[RecordBatch],
    runs: &[RecordBatch],
    opts: &AuditOptions,
) -> io::Result<(Vec<CorpusTable>, PartAudit)> {
    let (passes, ctx) = checks_of(opts)?;
    let spec = super::spec_of(&passes);
    let conversations = conversations_from_batches(runs, events, &spec)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads.max(1))
        .build()
        .map_err(io::Error::other)?;
    let part = pool.install(|| {
        let results: Vec<Contribution> = conversations
            .par_iter()
            .map(|(_, _, c)| audit_conversation(c, &passes, &ctx))
            .collect();
        tables_of(&results, &passes)
    })?;
    let mut ledger = BatchBuilder::new(ledger_schema())?;
    ledger.append(&ledger_rows(&passes, &part.counted.counts))?;
    let (_, ledger) = ledger.finish()?;
    let mut tables = part.tables;
    // The tables every audit writes, the ledger, then the checks' own.
    let after_common = tables
        .iter()
        .position(|t| t.name == "agreement")
        .map_or(tables.len(), |i| i + 1);
    tables.insert(
        after_common,
        CorpusTable {
            name: "ledger".to_string(),
            schema: ledger_schema(),
            batches: ledger,
        },
    );
    Ok((tables, part.counted))
}

/// The corpus's ledger and manifest, written into `out` once every part of the store named
/// `store_name` (whose manifest is `store_manifest`, its JSON text) has been audited: the
/// ledger from the parts' counts summed in part order, as the command line writes it, and the
/// manifest last, since a corpus is complete once it has one, listing every file of every
/// table as the parts reported them. `seconds` is the time the whole audit took.
pub fn finish_corpus(
    out: &Path,
    store_name: &str,
    store_manifest: &str,
    parts: &[PartAudit],
    opts: &AuditOptions,
    seconds: f64,
) -> io::Result<CorpusManifest> {
    let (passes, _) = checks_of(opts)?;
    let store_manifest: StoreManifest = serde_json::from_str(store_manifest).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the manifest of store {store_name} cannot be read: {e}"),
        )
    })?;
    let mut total = PartAudit::new(&passes);
    for part in parts {
        total.merge(part)?;
    }
    refuse_foreign(out, &passes)?;
    let mut tables = listed_tables(parts, &passes, store_manifest.parts.len())?;
    refuse_miscounted(&tables, &total)?;
    std::fs::create_dir_all(out)?;
    crate::corpus::write::write_parquet(
        &out.join("ledger.parquet"),
        ledger_schema(),
        &ledger_rows(&passes, &total.counts),
    )?;
    let ledger = TableFiles {
        table: "ledger".into(),
        files: vec![describe(out, "ledger.parquet")?],
    };
    let after_common = tables
        .iter()
        .position(|t| t.table == "agreement")
        .map_or(tables.len(), |i| i + 1);
    tables.insert(after_common, ledger);
    let manifest = CorpusManifest {
        engine: crate::store::ENGINE.into(),
        engine_version: crate::store::ENGINE_VERSION.into(),
        checks: passes.iter().map(|p| p.name().to_string()).collect(),
        config: opts.config_text.clone(),
        config_hash: opts.config.hash(),
        store: store_name.to_string(),
        store_manifest,
        conversations: total.conversations,
        runs: total.runs,
        findings: total.findings,
        counts: total.counts,
        threads: opts.threads,
        seconds,
        ingest_seconds: None,
        tables: Some(tables),
        store_generation: None,
    };
    let text = serde_json::to_string_pretty(&manifest).map_err(io::Error::other)?;
    write_file(&out.join("manifest.json"), text.as_bytes())?;
    Ok(manifest)
}

/// The tables of `passes` with the file each of the store's `store_parts` parts reported for
/// it, in part order. A part that reported none, or another file than its own, is refused: the
/// manifest must list exactly the files the parts' audits wrote.
fn listed_tables(
    parts: &[PartAudit],
    passes: &[&'static dyn Pass],
    store_parts: usize,
) -> io::Result<Vec<TableFiles>> {
    let refuse = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
    if parts.len() != store_parts {
        return Err(refuse(format!(
            "the store has {store_parts} part(s), and {} were audited",
            parts.len()
        )));
    }
    let mut tables = Vec::new();
    for (table, _) in part_tables(passes) {
        let mut files = Vec::with_capacity(parts.len());
        for (p, part) in (0u32..).zip(parts) {
            let expected = format!("{table}/{}", part_file_name(p));
            let reported = part
                .files
                .iter()
                .find(|t| t.table == table)
                .map_or(&[][..], |t| t.files.as_slice());
            match reported {
                [one] if one.path == expected => files.push(one.clone()),
                _ => {
                    return Err(refuse(format!(
                        "the audit of part {p} did not report writing {expected} (a part's \
                         counts from another kind of audit?); audit the part again"
                    )))
                }
            }
        }
        tables.push(TableFiles {
            table: table.to_string(),
            files,
        });
    }
    Ok(tables)
}

/// Refuse files whose rows are not what the parts counted: every finding a row of the
/// findings files, every run and check a row of the dispositions files.
fn refuse_miscounted(tables: &[TableFiles], total: &PartAudit) -> io::Result<()> {
    let rows = |name: &str| -> u64 {
        tables
            .iter()
            .filter(|t| t.table == name)
            .flat_map(|t| &t.files)
            .map(|f| f.rows)
            .sum()
    };
    let dispositions: u64 = total.counts.iter().map(|c| c.runs).sum();
    for (table, counted, held) in [
        ("findings", total.findings, rows("findings")),
        ("dispositions", dispositions, rows("dispositions")),
    ] {
        if counted != held {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the parts counted {counted} {table} rows, and their files hold {held}; \
                     refusing to write a manifest for them"
                ),
            ));
        }
    }
    Ok(())
}
