//! Writing corpus tables. Rows are serialised with serde into Arrow through arrow-json's
//! decoder against the explicit schemas below, so nested columns (subjects, witnesses) and
//! nulls come out typed; `schemas/corpus.md` documents every column and a test keeps the two
//! in step.

use crate::corpus::{AgreementRow, DispositionRow, Finding, LedgerRow};
use crate::store::write::{to_io, writer_properties};
use arrow::array::{ArrayRef, StringBuilder, UInt32Builder};
use arrow::datatypes::{DataType, Field, Fields, Schema};
use arrow::record_batch::RecordBatch;
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

/// Rows not yet made into a record batch. Most tables go through arrow-json's serde decoder;
/// the dispositions table (a row per run and check, by far the most numerous) is appended to
/// Arrow builders directly, which gives the same arrays without the decoder's tape.
struct Pending {
    schema: Arc<Schema>,
    decoder: arrow::json::reader::Decoder,
    dispositions: Option<DispositionColumns>,
}

impl Pending {
    fn new(schema: Arc<Schema>) -> io::Result<Pending> {
        let decoder = arrow::json::ReaderBuilder::new(schema.clone())
            .with_batch_size(TABLE_BATCH_ROWS)
            .build_decoder()
            .map_err(to_io)?;
        Ok(Pending {
            schema,
            decoder,
            dispositions: None,
        })
    }

    fn len(&self) -> usize {
        self.decoder.len() + self.dispositions.as_ref().map_or(0, |d| d.rows)
    }

    /// Rows are buffered a chunk at a time and made into a batch once `TABLE_BATCH_ROWS` are
    /// pending (so batches, and with them the Parquet pages, do not depend on how the rows
    /// were handed in).
    fn append<T: Serialize>(
        &mut self,
        rows: &[T],
        mut batch: impl FnMut(RecordBatch) -> io::Result<()>,
    ) -> io::Result<()> {
        for chunk in rows.chunks(TABLE_BATCH_ROWS) {
            self.decoder.serialize(chunk).map_err(to_io)?;
            if self.len() >= TABLE_BATCH_ROWS {
                self.flush(&mut batch)?;
            }
        }
        Ok(())
    }

    fn append_dispositions(
        &mut self,
        rows: &[DispositionRow],
        mut batch: impl FnMut(RecordBatch) -> io::Result<()>,
    ) -> io::Result<()> {
        for chunk in rows.chunks(TABLE_BATCH_ROWS) {
            let columns = self
                .dispositions
                .get_or_insert_with(DispositionColumns::default);
            for row in chunk {
                columns.push(row);
            }
            if self.len() >= TABLE_BATCH_ROWS {
                self.flush(&mut batch)?;
            }
        }
        Ok(())
    }

    fn flush(&mut self, mut batch: impl FnMut(RecordBatch) -> io::Result<()>) -> io::Result<()> {
        // A table is filled one way only; were both used, the serde rows would come first.
        while let Some(b) = self.decoder.flush().map_err(to_io)? {
            batch(b)?;
        }
        if let Some(columns) = self.dispositions.as_mut().filter(|d| d.rows > 0) {
            batch(columns.take(&self.schema)?)?;
        }
        Ok(())
    }
}

/// The dispositions table's columns as Arrow builders (see [`dispositions_schema`]).
#[derive(Default)]
struct DispositionColumns {
    run_id: StringBuilder,
    conversation_id: StringBuilder,
    turn: UInt32Builder,
    source: StringBuilder,
    check: StringBuilder,
    disposition: StringBuilder,
    reason: StringBuilder,
    rows: usize,
}

impl DispositionColumns {
    fn push(&mut self, row: &DispositionRow) {
        self.run_id.append_value(&row.run_id);
        self.conversation_id.append_value(&row.conversation_id);
        self.turn.append_value(row.turn);
        self.source.append_value(&row.source);
        self.check.append_value(&row.check);
        self.disposition.append_value(row.disposition.as_str());
        self.reason.append_value(&row.reason);
        self.rows += 1;
    }

    /// The rows pushed so far as a batch of `schema`; the builders start again empty.
    fn take(&mut self, schema: &Arc<Schema>) -> io::Result<RecordBatch> {
        self.rows = 0;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.run_id.finish()),
            Arc::new(self.conversation_id.finish()),
            Arc::new(self.turn.finish()),
            Arc::new(self.source.finish()),
            Arc::new(self.check.finish()),
            Arc::new(self.disposition.finish()),
            Arc::new(self.reason.finish()),
        ];
        RecordBatch::try_new(schema.clone(), columns).map_err(to_io)
    }
}

/// A Parquet table written as rows arrive (to `NAME.partial`, renamed when finished), so a
/// corpus never holds all its rows in memory.
pub struct TableWriter {
    path: std::path::PathBuf,
    tmp: std::path::PathBuf,
    writer: ArrowWriter<std::fs::File>,
    pending: Pending,
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
        Ok(TableWriter {
            path: path.to_path_buf(),
            tmp,
            writer,
            pending: Pending::new(schema)?,
        })
    }

    pub fn append<T: Serialize>(&mut self, rows: &[T]) -> io::Result<()> {
        let writer = &mut self.writer;
        self.pending
            .append(rows, |b| writer.write(&b).map_err(to_io))
    }

    /// Rows of the dispositions table (a writer made with [`dispositions_schema`]).
    pub fn append_dispositions(&mut self, rows: &[DispositionRow]) -> io::Result<()> {
        let writer = &mut self.writer;
        self.pending
            .append_dispositions(rows, |b| writer.write(&b).map_err(to_io))
    }

    pub fn finish(mut self) -> io::Result<()> {
        let writer = &mut self.writer;
        self.pending.flush(|b| writer.write(&b).map_err(to_io))?;
        self.writer.close().map_err(to_io)?;
        std::fs::rename(&self.tmp, &self.path)
    }
}

/// Rows as record batches of `schema`, serialised as [`TableWriter`] writes them, for callers
/// that hand a table on in memory instead of writing it.
pub struct BatchBuilder {
    pending: Pending,
    batches: Vec<RecordBatch>,
}

impl BatchBuilder {
    pub fn new(schema: Arc<Schema>) -> io::Result<BatchBuilder> {
        Ok(BatchBuilder {
            pending: Pending::new(schema)?,
            batches: Vec::new(),
        })
    }

    pub fn append<T: Serialize>(&mut self, rows: &[T]) -> io::Result<()> {
        let batches = &mut self.batches;
        self.pending.append(rows, |b| {
            batches.push(b);
            Ok(())
        })
    }

    /// Rows of the dispositions table (a builder made with [`dispositions_schema`]).
    pub fn append_dispositions(&mut self, rows: &[DispositionRow]) -> io::Result<()> {
        let batches = &mut self.batches;
        self.pending.append_dispositions(rows, |b| {
            batches.push(b);
            Ok(())
        })
    }

    /// The schema and the batches (none for a table without rows).
    pub fn finish(mut self) -> io::Result<(Arc<Schema>, Vec<RecordBatch>)> {
        let batches = &mut self.batches;
        self.pending.flush(|b| {
            batches.push(b);
            Ok(())
        })?;
        Ok((self.pending.schema, self.batches))
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
        self.dispositions.append_dispositions(dispositions)?;
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

    fn disposition(i: u32) -> DispositionRow {
        use crate::model::vocab::Disposition;
        DispositionRow {
            run_id: format!("run-{i}"),
            conversation_id: format!("conv-{}", i / 3),
            turn: i % 7,
            source: if i.is_multiple_of(2) {
                "tau2"
            } else {
                "agentfootprint"
            }
            .to_string(),
            check: ["repeated-call", "prior-turn-evidence", "schema-attempt"][i as usize % 3]
                .to_string(),
            disposition: Disposition::ALL[i as usize % 4],
            reason: if i.is_multiple_of(5) {
                String::new()
            } else {
                format!("reason \u{e9} {i}")
            },
        }
    }

    #[test]
    fn dispositions_appended_to_builders_make_the_serde_paths_batches() {
        // Handed in as an audit hands them in: a conversation's rows at a time, sometimes more
        // than a batch at once.
        let rows: Vec<DispositionRow> = (0..9000).map(disposition).collect();
        let pieces: Vec<&[DispositionRow]> =
            vec![&rows[..5], &rows[5..4100], &rows[4100..8800], &rows[8800..]];
        let mut serde_path = BatchBuilder::new(dispositions_schema()).unwrap();
        let mut columnar = BatchBuilder::new(dispositions_schema()).unwrap();
        for piece in pieces {
            serde_path.append(piece).unwrap();
            columnar.append_dispositions(piece).unwrap();
        }
        let (_, expected) = serde_path.finish().unwrap();
        let (_, got) = columnar.finish().unwrap();
        let sizes = |b: &[RecordBatch]| b.iter().map(|b| b.num_rows()).collect::<Vec<_>>();
        assert_eq!(sizes(&got), sizes(&expected));
        assert_eq!(sizes(&got), vec![4100, 4096, 804]);
        assert_eq!(got, expected);
    }

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
