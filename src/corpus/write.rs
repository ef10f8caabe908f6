//! Writing corpus tables. Rows are serialised with serde into Arrow through arrow-json's
//! decoder against the explicit schemas below, so nested columns (subjects, witnesses) and
//! nulls come out typed; `schemas/corpus.md` documents every column and a test keeps the two
//! in step.

use crate::corpus::{AgreementRow, DispositionRow, Finding, LedgerRow};
use crate::store::write::{to_io, writer_properties};
use arrow::datatypes::{DataType, Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use serde::Serialize;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

fn utf8(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Utf8, nullable)
}

fn subject_fields() -> Fields {
    Fields::from(vec![utf8("kind", false), utf8("id", false)])
}

pub fn findings_schema() -> Arc<Schema> {
    let subject = DataType::Struct(subject_fields());
    let witness = DataType::Struct(Fields::from(vec![
        Field::new("subject", subject.clone(), false),
        utf8("predicate", false),
        utf8("value", false),
        utf8("stratum", false),
        utf8("provenance", false),
    ]));
    Arc::new(Schema::new(vec![
        utf8("finding_id", false),
        utf8("check", false),
        utf8("kind", false),
        utf8("seam", false),
        utf8("predicate", false),
        Field::new("advisory", DataType::Boolean, false),
        utf8("source", false),
        utf8("conversation_id", false),
        utf8("run_id", false),
        Field::new("turn", DataType::UInt32, false),
        Field::new("iteration", DataType::UInt32, true),
        Field::new(
            "subjects",
            DataType::List(Arc::new(Field::new("item", subject, false))),
            false,
        ),
        Field::new(
            "witnesses",
            DataType::List(Arc::new(Field::new("item", witness, false))),
            false,
        ),
        utf8("message", false),
        // repeated-call
        utf8("tool_name", true),
        utf8("tool_call_id", true),
        utf8("key", true),
        utf8("args_fingerprint", true),
        utf8("result_fingerprint", true),
        utf8("mode", true),
        Field::new("occurrences", DataType::UInt32, true),
        Field::new("wasted_landings", DataType::UInt32, true),
        Field::new("wasted_ms", DataType::Float64, true),
        // prior-turn-evidence
        Field::new("grounded_count", DataType::UInt32, true),
        Field::new(
            "grounded_values",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, false))),
            true,
        ),
        Field::new("latest_prior_turn", DataType::UInt32, true),
        Field::new("current_turn", DataType::UInt32, true),
        Field::new("turns_back", DataType::UInt32, true),
        Field::new("tool_results_this_turn", DataType::UInt32, true),
        // schema-attempt
        Field::new("schema_attempt", DataType::UInt32, true),
        utf8("schema_outcome", true),
        utf8("schema_stage", true),
        utf8("schema_path", true),
        utf8("schema_hash", true),
        Field::new("schema_retries", DataType::UInt32, true),
    ]))
}

pub fn dispositions_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        utf8("run_id", false),
        utf8("conversation_id", false),
        Field::new("turn", DataType::UInt32, false),
        utf8("source", false),
        utf8("check", false),
        utf8("disposition", false),
        utf8("reason", false),
    ]))
}

pub fn ledger_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        utf8("check", false),
        utf8("seam", false),
        Field::new("checked", DataType::UInt64, false),
        Field::new("findings", DataType::UInt64, false),
        Field::new("not_applicable", DataType::UInt64, false),
        Field::new("unreachable", DataType::UInt64, false),
        Field::new("passed", DataType::UInt64, false),
        Field::new("finding_rows", DataType::UInt64, false),
    ]))
}

pub fn agreement_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        utf8("check", false),
        utf8("conversation_id", false),
        utf8("run_id", false),
        utf8("source", false),
        utf8("key", false),
        utf8("status", false),
        utf8("detail", true),
    ]))
}

/// Where a table is written until it is complete: `findings.parquet.partial`.
fn partial_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".partial");
    std::path::PathBuf::from(name)
}

/// Rows handed to the Parquet writer at a time.
const TABLE_BATCH_ROWS: usize = 4096;

/// A Parquet table written as rows arrive (to `NAME.partial`, renamed when finished), so a
/// corpus never holds all its rows in memory.
pub struct TableWriter {
    path: std::path::PathBuf,
    tmp: std::path::PathBuf,
    writer: ArrowWriter<std::fs::File>,
    decoder: arrow::json::reader::Decoder,
}

impl TableWriter {
    pub fn create(path: &Path, schema: Arc<Schema>) -> io::Result<TableWriter> {
        TableWriter::create_via(path, &partial_path(path), schema)
    }

    /// [`TableWriter::create`], written at `tmp` until it is finished (a name of the caller's,
    /// for writers that may run more than once at the same time for one path).
    pub fn create_via(path: &Path, tmp: &Path, schema: Arc<Schema>) -> io::Result<TableWriter> {
        let tmp = tmp.to_path_buf();
        let file = std::fs::File::create(&tmp)?;
        let writer =
            ArrowWriter::try_new(file, schema.clone(), Some(writer_properties())).map_err(to_io)?;
        let decoder = arrow::json::ReaderBuilder::new(schema)
            .with_batch_size(TABLE_BATCH_ROWS)
            .build_decoder()
            .map_err(to_io)?;
        Ok(TableWriter {
            path: path.to_path_buf(),
            tmp,
            writer,
            decoder,
        })
    }

    pub fn append<T: Serialize>(&mut self, rows: &[T]) -> io::Result<()> {
        for chunk in rows.chunks(TABLE_BATCH_ROWS) {
            self.decoder.serialize(chunk).map_err(to_io)?;
            if self.decoder.len() >= TABLE_BATCH_ROWS {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        while let Some(batch) = self.decoder.flush().map_err(to_io)? {
            self.writer.write(&batch).map_err(to_io)?;
        }
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<()> {
        self.flush()?;
        self.writer.close().map_err(to_io)?;
        std::fs::rename(&self.tmp, &self.path)
    }
}

/// Rows as record batches of `schema`, serialised as [`TableWriter`] writes them, for callers
/// that hand a table on in memory instead of writing it.
pub struct BatchBuilder {
    schema: Arc<Schema>,
    decoder: arrow::json::reader::Decoder,
    batches: Vec<arrow::record_batch::RecordBatch>,
}

impl BatchBuilder {
    pub fn new(schema: Arc<Schema>) -> io::Result<BatchBuilder> {
        let decoder = arrow::json::ReaderBuilder::new(schema.clone())
            .with_batch_size(TABLE_BATCH_ROWS)
            .build_decoder()
            .map_err(to_io)?;
        Ok(BatchBuilder {
            schema,
            decoder,
            batches: Vec::new(),
        })
    }

    pub fn append<T: Serialize>(&mut self, rows: &[T]) -> io::Result<()> {
        for chunk in rows.chunks(TABLE_BATCH_ROWS) {
            self.decoder.serialize(chunk).map_err(to_io)?;
            if self.decoder.len() >= TABLE_BATCH_ROWS {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        while let Some(batch) = self.decoder.flush().map_err(to_io)? {
            self.batches.push(batch);
        }
        Ok(())
    }

    /// The schema and the batches (none for a table without rows).
    pub fn finish(mut self) -> io::Result<(Arc<Schema>, Vec<arrow::record_batch::RecordBatch>)> {
        self.flush()?;
        Ok((self.schema, self.batches))
    }
}

/// Write `rows` as one Parquet file with `schema`.
pub fn write_parquet<T: Serialize>(path: &Path, schema: Arc<Schema>, rows: &[T]) -> io::Result<()> {
    let mut table = TableWriter::create(path, schema)?;
    table.append(rows)?;
    table.finish()
}

/// JSON lines written as rows arrive (to `NAME.partial`, renamed when finished).
pub struct JsonlWriter {
    path: std::path::PathBuf,
    tmp: std::path::PathBuf,
    out: io::BufWriter<std::fs::File>,
}

impl JsonlWriter {
    pub fn create(path: &Path) -> io::Result<JsonlWriter> {
        let tmp = partial_path(path);
        Ok(JsonlWriter {
            path: path.to_path_buf(),
            out: io::BufWriter::new(std::fs::File::create(&tmp)?),
            tmp,
        })
    }

    pub fn append<T: Serialize>(&mut self, rows: &[T]) -> io::Result<()> {
        for row in rows {
            serde_json::to_writer(&mut self.out, row).map_err(to_io)?;
            self.out.write_all(b"\n")?;
        }
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<()> {
        self.out.flush()?;
        drop(self.out);
        std::fs::rename(&self.tmp, &self.path)
    }
}

/// A corpus as an output directory, for [`crate::store::atomic::Layout`]: a traceaudit
/// manifest naming checks, the tables every audit writes, the checks' own tables
/// (`check_tables`, every registered check's, since an earlier audit may have run other
/// checks), and the store an audit of raw inputs keeps in `store/`.
pub fn corpus_layout(check_tables: &[&str]) -> crate::store::atomic::Layout {
    let mut entries: Vec<String> = [
        "manifest.json",
        "findings.parquet",
        "findings.jsonl",
        "dispositions.parquet",
        "agreement.parquet",
        "ledger.parquet",
        "store/",
    ]
    .iter()
    .map(|e| e.to_string())
    .collect();
    entries.extend(check_tables.iter().map(|t| format!("{t}.parquet")));
    entries.extend(
        crate::store::STORE_ENTRIES
            .iter()
            .map(|e| format!("store/{e}")),
    );
    crate::store::atomic::Layout {
        what: "corpus",
        manifest: "manifest.json",
        claims: |m| {
            m.get("engine").and_then(serde_json::Value::as_str) == Some(crate::store::ENGINE)
                && m.get("checks").is_some()
        },
        entries,
    }
}

/// The corpus tables every audit writes, filled as conversations are audited.
pub struct CorpusTables {
    findings: TableWriter,
    findings_jsonl: JsonlWriter,
    dispositions: TableWriter,
    agreement: TableWriter,
}

impl CorpusTables {
    pub fn create(dir: &Path) -> io::Result<CorpusTables> {
        Ok(CorpusTables {
            findings: TableWriter::create(&dir.join("findings.parquet"), findings_schema())?,
            findings_jsonl: JsonlWriter::create(&dir.join("findings.jsonl"))?,
            dispositions: TableWriter::create(
                &dir.join("dispositions.parquet"),
                dispositions_schema(),
            )?,
            agreement: TableWriter::create(&dir.join("agreement.parquet"), agreement_schema())?,
        })
    }

    pub fn append(
        &mut self,
        findings: &[Finding],
        dispositions: &[DispositionRow],
        agreement: &[AgreementRow],
    ) -> io::Result<()> {
        self.findings.append(findings)?;
        self.findings_jsonl.append(findings)?;
        self.dispositions.append(dispositions)?;
        self.agreement.append(agreement)
    }

    /// Close the tables and write the ledger.
    pub fn finish(self, dir: &Path, ledger: &[LedgerRow]) -> io::Result<()> {
        self.findings.finish()?;
        self.findings_jsonl.finish()?;
        self.dispositions.finish()?;
        self.agreement.finish()?;
        write_parquet(&dir.join("ledger.parquet"), ledger_schema(), ledger)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::schema::{doc_drift, parse_schema_doc};

    #[test]
    fn schema_document_matches_code() {
        let doc = include_str!("../../schemas/corpus.md");
        let tables = parse_schema_doc(doc);
        for (name, schema) in [
            ("findings", findings_schema()),
            ("dispositions", dispositions_schema()),
            ("ledger", ledger_schema()),
            ("agreement", agreement_schema()),
            ("attempts", crate::passes::schema_attempt::attempts_schema()),
        ] {
            let documented = tables
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("schemas/corpus.md has no `## {name}` table"));
            let drift = doc_drift(&schema, &documented.1);
            assert!(drift.is_empty(), "table {name}: {drift:#?}");
        }
    }
}
