//! One part's contributions made into the corpus tables' record batches, on the caller's
//! rayon pool, so that whoever writes the tables (one thread, in part order) only encodes
//! them. Every audit, whole-store, per part or in memory, makes its tables here, so they
//! hold the same rows in the same batches.

use super::audit::Contribution;
use super::parts::PartAudit;
use crate::corpus::write::{
    agreement_schema, dispositions_batch, dispositions_schema, findings_schema, jsonl_lines,
    rows_batch, TABLE_BATCH_ROWS,
};
use crate::passes::Pass;
use arrow::datatypes::Schema;
use arrow::record_batch::RecordBatch;
use rayon::prelude::*;
use serde::Serialize;
use std::io;
use std::sync::Arc;

/// The corpus tables a part of an audit fills, in this order: findings, dispositions,
/// agreement, then the checks' own tables.
pub(super) fn part_tables(passes: &[&'static dyn Pass]) -> Vec<(&'static str, Arc<Schema>)> {
    let mut tables = vec![
        ("findings", findings_schema()),
        ("dispositions", dispositions_schema()),
        ("agreement", agreement_schema()),
    ];
    for pass in passes {
        tables.extend(pass.tables());
    }
    tables
}

/// A corpus table in memory.
pub struct CorpusTable {
    pub name: String,
    pub schema: Arc<Schema>,
    pub batches: Vec<RecordBatch>,
}

/// A part's contributions as table batches.
pub(super) struct PartTables {
    /// Each table of [`part_tables`], in its order, with its batches (none without rows).
    pub tables: Vec<CorpusTable>,
    /// The findings as JSON lines, for `findings.jsonl`.
    pub findings_jsonl: Vec<u8>,
    /// What the part counted.
    pub counted: PartAudit,
}

impl PartTables {
    /// The batches of `table`.
    pub fn batches(&self, table: &str) -> &[RecordBatch] {
        self.tables
            .iter()
            .find(|t| t.name == table)
            .map_or(&[], |t| t.batches.as_slice())
    }
}

/// `rows` in batches of [`TABLE_BATCH_ROWS`], made in parallel, in order.
fn batches_of<T: Sync>(
    rows: &[T],
    make: impl Fn(&[T]) -> io::Result<RecordBatch> + Sync + Send,
) -> io::Result<Vec<RecordBatch>> {
    rows.par_chunks(TABLE_BATCH_ROWS).map(make).collect()
}

fn serde_batches<T: Serialize + Sync>(
    schema: &Arc<Schema>,
    rows: &[T],
) -> io::Result<Vec<RecordBatch>> {
    batches_of(rows, |chunk| rows_batch(schema, chunk))
}

/// The tables of one part's `results` (in the store's order), for `passes`. A part's rows
/// are batched on their own: a batch never spans two parts, so a part's batches are the same
/// whichever way the part is audited.
pub(super) fn tables_of(
    results: &[Contribution],
    passes: &[&'static dyn Pass],
) -> io::Result<PartTables> {
    let mut counted = PartAudit::new(passes);
    for r in results {
        counted.add(r);
    }
    let findings: Vec<_> = results.iter().flat_map(|r| &r.findings).collect();
    let checks: Vec<&'static str> = passes.iter().map(|p| p.name()).collect();
    let dispositions: Vec<_> = results
        .iter()
        .flat_map(|r| r.disposition_rows(&checks))
        .collect();
    let agreement: Vec<_> = results.iter().flat_map(|r| &r.agreement).collect();
    let mut tables = Vec::new();
    for (table, schema) in part_tables(passes) {
        let batches = match table {
            "findings" => serde_batches(&schema, &findings)?,
            "dispositions" => batches_of(&dispositions, dispositions_batch)?,
            "agreement" => serde_batches(&schema, &agreement)?,
            own => {
                let rows: Vec<&serde_json::Value> = results
                    .iter()
                    .flat_map(|r| &r.rows)
                    .filter(|(t, _)| t == own)
                    .map(|(_, row)| row)
                    .collect();
                serde_batches(&schema, &rows)?
            }
        };
        tables.push(CorpusTable {
            name: table.to_string(),
            schema,
            batches,
        });
    }
    let findings_jsonl = findings
        .par_chunks(TABLE_BATCH_ROWS)
        .map(jsonl_lines)
        .collect::<io::Result<Vec<Vec<u8>>>>()?
        .concat();
    Ok(PartTables {
        tables,
        findings_jsonl,
        counted,
    })
}
