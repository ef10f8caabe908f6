//! One part's contributions made into the corpus tables' record batches, on the caller's
//! rayon pool, so that whoever writes the tables (one thread, in part order) only encodes
//! them. Every audit, whole-store, per part or in memory, makes its tables here, so they
//! hold the same rows in the same batches.

use super::counts::{Contribution, PartAudit};
use crate::corpus::write::{
    agreement_schema, dispositions_batch, dispositions_schema, findings_batch, findings_schema,
    jsonl_lines, rows_batch, TABLE_BATCH_ROWS,
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
    /// The findings as JSON lines, for `findings.jsonl`: one buffer for each batch of rows,
    /// written one after another (joining them would copy every line once more).
    pub findings_jsonl: Vec<Vec<u8>>,
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
            "findings" => batches_of(&findings, findings_batch)?,
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
        .collect::<io::Result<Vec<Vec<u8>>>>()?;
    Ok(PartTables {
        tables,
        findings_jsonl,
        counted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::vocab::Disposition;
    use crate::pipeline::counts::RunKey;
    use arrow::array::AsArray;

    /// Conversation `c` with `runs` runs, each disposed of by each of `checks` checks.
    fn contribution(c: usize, runs: usize, checks: usize) -> Contribution {
        Contribution {
            conversation_id: format!("conv-{c}"),
            runs: (0..runs)
                .map(|r| RunKey {
                    run_id: format!("run-{c}-{r}"),
                    turn: r as u32,
                    source: "tau2".into(),
                })
                .collect(),
            dispositions: (0..checks)
                .map(|k| {
                    (0..runs)
                        .map(|r| {
                            let reason = if r % 2 == 0 {
                                String::new()
                            } else {
                                format!("why {c}")
                            };
                            (Disposition::ALL[(c + r + k) % 4], reason)
                        })
                        .collect()
                })
                .collect(),
            ..Contribution::default()
        }
    }

    #[test]
    fn a_parts_dispositions_come_in_full_batches_in_the_tables_order() {
        let passes = crate::passes::registry();
        let results: Vec<Contribution> = (0..1500)
            .map(|c| contribution(c, 1 + c % 4, passes.len()))
            .collect();
        let runs: usize = results.iter().map(|r| r.runs.len()).sum();
        let tables = tables_of(&results, &passes).unwrap();

        let batches = tables.batches("dispositions");
        let sizes: Vec<usize> = batches.iter().map(RecordBatch::num_rows).collect();
        assert_eq!(sizes.iter().sum::<usize>(), runs * passes.len());
        assert!(sizes.len() > 2, "{sizes:?}");
        assert!(sizes[..sizes.len() - 1]
            .iter()
            .all(|&n| n == TABLE_BATCH_ROWS));
        // Conversation by conversation, each check's rows for the conversation's runs in turn.
        let all = arrow::compute::concat_batches(&dispositions_schema(), batches).unwrap();
        let column = |name: &str| all.column_by_name(name).unwrap().as_string::<i32>().clone();
        let (run_id, conversation, check, disposition, reason) = (
            column("run_id"),
            column("conversation_id"),
            column(crate::corpus::CHECK_COLUMN),
            column("disposition"),
            column("reason"),
        );
        let mut row = 0;
        for r in &results {
            for (pass, outcomes) in passes.iter().zip(&r.dispositions) {
                for (key, (d, why)) in r.runs.iter().zip(outcomes) {
                    assert_eq!(run_id.value(row), key.run_id);
                    assert_eq!(conversation.value(row), r.conversation_id);
                    assert_eq!(check.value(row), pass.name());
                    assert_eq!(disposition.value(row), d.as_str());
                    assert_eq!(reason.value(row), why);
                    row += 1;
                }
            }
        }

        assert_eq!(tables.counted.conversations, 1500);
        assert_eq!(tables.counted.runs, runs as u64);
        let counted: u64 = tables.counted.counts.iter().map(|c| c.runs).sum();
        assert_eq!(counted, (runs * passes.len()) as u64);
        assert!(tables.batches("findings").is_empty());
        assert!(tables.findings_jsonl.is_empty());
    }
}
