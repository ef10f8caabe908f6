//! Writing corpus tables. Rows are serialised with serde into Arrow through arrow-json's
//! decoder against the explicit schemas below, so nested columns (subjects, witnesses) and
//! nulls come out typed; `schemas/corpus.md` documents every column and a test keeps the two
//! in step. The two tables every part fills, findings and dispositions, are built column by
//! column instead ([`findings_batch`], [`dispositions_batch`]), and tests hold each to the
//! decoder's batch.

use crate::corpus::{DispositionRow, Finding, LedgerRow, Subject, CHECK_COLUMN};
use crate::store::write::{to_io, writer_properties};
use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, ListArray, StringArray, StringBuilder, StructArray,
    UInt32Array,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema};
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
        utf8(CHECK_COLUMN, false),
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
        utf8(CHECK_COLUMN, false),
        utf8("disposition", false),
        utf8("reason", false),
    ]))
}

pub fn ledger_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        utf8(CHECK_COLUMN, false),
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
        utf8(CHECK_COLUMN, false),
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
pub const TABLE_BATCH_ROWS: usize = 4096;

/// Rows not yet made into a record batch, gone through arrow-json's serde decoder: a batch is
/// made once `TABLE_BATCH_ROWS` are pending, so batches, and with them the Parquet pages, do
/// not depend on how the rows were handed in.
struct Pending {
    schema: Arc<Schema>,
    decoder: arrow::json::reader::Decoder,
}

impl Pending {
    fn new(schema: Arc<Schema>) -> io::Result<Pending> {
        let decoder = arrow::json::ReaderBuilder::new(schema.clone())
            .with_batch_size(TABLE_BATCH_ROWS)
            .build_decoder()
            .map_err(to_io)?;
        Ok(Pending { schema, decoder })
    }

    fn append<T: Serialize>(
        &mut self,
        rows: &[T],
        mut batch: impl FnMut(RecordBatch) -> io::Result<()>,
    ) -> io::Result<()> {
        for chunk in rows.chunks(TABLE_BATCH_ROWS) {
            self.decoder.serialize(chunk).map_err(to_io)?;
            if self.decoder.len() >= TABLE_BATCH_ROWS {
                self.flush(&mut batch)?;
            }
        }
        Ok(())
    }

    fn flush(&mut self, mut batch: impl FnMut(RecordBatch) -> io::Result<()>) -> io::Result<()> {
        while let Some(b) = self.decoder.flush().map_err(to_io)? {
            batch(b)?;
        }
        Ok(())
    }
}

/// `rows` as one record batch of `schema`, through arrow-json's serde decoder (which types
/// nested columns and nulls by the schema).
pub fn rows_batch<T: Serialize>(schema: &Arc<Schema>, rows: &[T]) -> io::Result<RecordBatch> {
    let mut decoder = arrow::json::ReaderBuilder::new(schema.clone())
        .with_batch_size(rows.len().max(1))
        .build_decoder()
        .map_err(to_io)?;
    decoder.serialize(rows).map_err(to_io)?;
    Ok(decoder
        .flush()
        .map_err(to_io)?
        .unwrap_or_else(|| RecordBatch::new_empty(schema.clone())))
}

/// Dispositions as one record batch of [`dispositions_schema`]. They are by far the most
/// numerous rows (one per run and check), so they go into Arrow builders sized to the rows
/// up front rather than through the serde decoder's tape: one allocation per column, no
/// growth by doubling, the same arrays.
pub fn dispositions_batch(rows: &[DispositionRow<'_>]) -> io::Result<RecordBatch> {
    let text = |f: for<'r> fn(&'r DispositionRow<'_>) -> &'r str| -> ArrayRef {
        Arc::new(strings(rows.iter().map(|r| f(r))))
    };
    let columns: Vec<ArrayRef> = vec![
        text(|r| r.run_id),
        text(|r| r.conversation_id),
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.turn))),
        text(|r| r.source),
        text(|r| r.check),
        text(|r| r.disposition.as_str()),
        text(|r| r.reason),
    ];
    RecordBatch::try_new(dispositions_schema(), columns).map_err(to_io)
}

/// Findings as one record batch of [`findings_schema`], the batch arrow-json's decoder makes
/// of them ([`rows_batch`]) without going through JSON: a part files thousands of findings,
/// each with nested lists and some thirty columns, and the decoder's tape cost more than
/// everything else the corpus does with them. A time that is not finite stays what it is, as
/// the decoder keeps it (only the JSON line has it `null`).
pub fn findings_batch(rows: &[&Finding]) -> io::Result<RecordBatch> {
    let schema = findings_schema();
    let text = |f: for<'r> fn(&'r Finding) -> &'r str| -> ArrayRef {
        Arc::new(strings(rows.iter().map(|r| f(r))))
    };
    let maybe_text = |f: for<'r> fn(&'r Finding) -> Option<&'r str>| -> ArrayRef {
        Arc::new(rows.iter().map(|r| f(r)).collect::<StringArray>())
    };
    let maybe_u32 = |f: fn(&Finding) -> Option<u32>| -> ArrayRef {
        Arc::new(rows.iter().map(|r| f(r)).collect::<UInt32Array>())
    };
    let item = |name: &str| -> io::Result<FieldRef> {
        match schema.field_with_name(name).map_err(to_io)?.data_type() {
            DataType::List(item) => Ok(item.clone()),
            other => Err(to_io(format!(
                "findings column {name} is {other}, not a list"
            ))),
        }
    };
    let struct_fields = |field: &Field| -> io::Result<Fields> {
        match field.data_type() {
            DataType::Struct(fields) => Ok(fields.clone()),
            other => Err(to_io(format!("{} is {other}, not a struct", field.name()))),
        }
    };

    let subjects = {
        let item = item("subjects")?;
        let all = rows.iter().flat_map(|r| &r.subjects);
        let values = subjects_array(struct_fields(&item)?, all);
        let lengths = rows.iter().map(|r| r.subjects.len());
        ListArray::try_new(item, OffsetBuffer::from_lengths(lengths), values, None)
            .map_err(to_io)?
    };
    let witnesses = {
        let item = item("witnesses")?;
        let fields = struct_fields(&item)?;
        let all = || rows.iter().flat_map(|r| &r.witnesses);
        let subject = subjects_array(struct_fields(&fields[0])?, all().map(|w| &w.subject));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(subject),
            Arc::new(strings(all().map(|w| w.predicate.as_str()))),
            Arc::new(strings(all().map(|w| w.value.as_str()))),
            Arc::new(strings(all().map(|w| w.stratum.as_str()))),
            Arc::new(strings(all().map(|w| w.provenance.as_str()))),
        ];
        let values = StructArray::try_new(fields, columns, None).map_err(to_io)?;
        let lengths = rows.iter().map(|r| r.witnesses.len());
        ListArray::try_new(
            item,
            OffsetBuffer::from_lengths(lengths),
            Arc::new(values),
            None,
        )
        .map_err(to_io)?
    };
    let grounded_values = {
        let item = item("grounded_values")?;
        let lists = || rows.iter().map(|r| r.columns.grounded_values.as_deref());
        let values = strings(lists().flatten().flatten().map(String::as_str));
        let lengths = lists().map(|l| l.map_or(0, <[String]>::len));
        let present = NullBuffer::from_iter(lists().map(|l| l.is_some()));
        let nulls = (present.null_count() > 0).then_some(present);
        let offsets = OffsetBuffer::from_lengths(lengths);
        ListArray::try_new(item, offsets, Arc::new(values), nulls).map_err(to_io)?
    };

    let columns: Vec<ArrayRef> = vec![
        text(|r| &r.finding_id),
        text(|r| &r.check),
        text(|r| &r.kind),
        text(|r| &r.seam),
        text(|r| &r.predicate),
        Arc::new(
            rows.iter()
                .map(|r| Some(r.advisory))
                .collect::<BooleanArray>(),
        ),
        text(|r| &r.source),
        text(|r| &r.conversation_id),
        text(|r| &r.run_id),
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.turn))),
        maybe_u32(|r| r.iteration),
        Arc::new(subjects),
        Arc::new(witnesses),
        text(|r| &r.message),
        maybe_text(|r| r.columns.tool_name.as_deref()),
        maybe_text(|r| r.columns.tool_call_id.as_deref()),
        maybe_text(|r| r.columns.key.as_deref()),
        maybe_text(|r| r.columns.args_fingerprint.as_deref()),
        maybe_text(|r| r.columns.result_fingerprint.as_deref()),
        maybe_text(|r| r.columns.mode.as_deref()),
        maybe_u32(|r| r.columns.occurrences),
        maybe_u32(|r| r.columns.wasted_landings),
        Arc::new(
            rows.iter()
                .map(|r| r.columns.wasted_ms)
                .collect::<Float64Array>(),
        ),
        maybe_u32(|r| r.columns.grounded_count),
        Arc::new(grounded_values),
        maybe_u32(|r| r.columns.latest_prior_turn),
        maybe_u32(|r| r.columns.current_turn),
        maybe_u32(|r| r.columns.turns_back),
        maybe_u32(|r| r.columns.tool_results_this_turn),
        maybe_u32(|r| r.columns.schema_attempt),
        maybe_text(|r| r.columns.schema_outcome.as_deref()),
        maybe_text(|r| r.columns.schema_stage.as_deref()),
        maybe_text(|r| r.columns.schema_path.as_deref()),
        maybe_text(|r| r.columns.schema_hash.as_deref()),
        maybe_u32(|r| r.columns.schema_retries),
    ];
    RecordBatch::try_new(schema, columns).map_err(to_io)
}

/// Texts, none null, as one array, its value buffer made its final size up front.
fn strings<'a>(values: impl Iterator<Item = &'a str> + Clone) -> StringArray {
    let (count, bytes) = values
        .clone()
        .fold((0, 0), |(n, b), v| (n + 1, b + v.len()));
    let mut b = StringBuilder::with_capacity(count, bytes);
    for v in values {
        b.append_value(v);
    }
    b.finish()
}

/// Subjects as a struct array of `fields` (kind, id).
fn subjects_array<'a>(
    fields: Fields,
    subjects: impl Iterator<Item = &'a Subject> + Clone,
) -> ArrayRef {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(strings(subjects.clone().map(|s| s.kind.as_str()))),
        Arc::new(strings(subjects.map(|s| s.id.as_str()))),
    ];
    Arc::new(StructArray::new(fields, columns, None))
}

/// `rows` as JSON lines.
pub fn jsonl_lines<T: Serialize>(rows: &[T]) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    for row in rows {
        serde_json::to_writer(&mut out, row).map_err(to_io)?;
        out.push(b'\n');
    }
    Ok(out)
}

/// The `findings.jsonl` lines of findings table batches (of `findings_schema`): the lines the
/// audit writes for those findings, byte for byte. Each row goes through arrow-json's writer
/// (every float in its shortest form that reads back to the same double, a non-finite one as
/// `null`, as serde_json writes it) and is read back as a [`Finding`], so the keys, their order
/// and the columns left out when null are the audit's own.
pub fn findings_jsonl(batches: &[RecordBatch]) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    for batch in batches {
        let mut text = Vec::new();
        let mut writer = arrow::json::LineDelimitedWriter::new(&mut text);
        writer.write(batch).map_err(to_io)?;
        writer.finish().map_err(to_io)?;
        drop(writer);
        let mut findings = Vec::with_capacity(batch.num_rows());
        for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let finding: Finding = serde_json::from_slice(line).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a findings row is not a finding: {e}"),
                )
            })?;
            findings.push(finding);
        }
        out.extend(jsonl_lines(&findings)?);
    }
    Ok(out)
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

    /// Batches made already (of the writer's schema), after the rows appended so far.
    pub fn write_batches(&mut self, batches: &[RecordBatch]) -> io::Result<()> {
        let writer = &mut self.writer;
        self.pending.flush(|b| writer.write(&b).map_err(to_io))?;
        for batch in batches {
            self.writer.write(batch).map_err(to_io)?;
        }
        Ok(())
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

    /// Lines made already ([`jsonl_lines`]).
    pub fn write_lines(&mut self, lines: &[u8]) -> io::Result<()> {
        self.out.write_all(lines)
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

    /// A part's rows made into batches already (see [`rows_batch`], [`dispositions_batch`]
    /// and [`jsonl_lines`]), written after those before.
    pub fn write(
        &mut self,
        findings: &[RecordBatch],
        findings_jsonl: &[Vec<u8>],
        dispositions: &[RecordBatch],
        agreement: &[RecordBatch],
    ) -> io::Result<()> {
        self.findings.write_batches(findings)?;
        for lines in findings_jsonl {
            self.findings_jsonl.write_lines(lines)?;
        }
        self.dispositions.write_batches(dispositions)?;
        self.agreement.write_batches(agreement)
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

    /// The texts of a disposition row: run id, conversation id, reason.
    fn texts(i: u32) -> (String, String, String) {
        let reason = if i.is_multiple_of(5) {
            String::new()
        } else {
            format!("reason \u{e9} {i}")
        };
        (format!("run-{i}"), format!("conv-{}", i / 3), reason)
    }

    fn disposition(i: u32, texts: &(String, String, String)) -> DispositionRow<'_> {
        use crate::model::vocab::Disposition;
        DispositionRow {
            run_id: &texts.0,
            conversation_id: &texts.1,
            turn: i % 7,
            source: if i.is_multiple_of(2) {
                "tau2"
            } else {
                "agentfootprint"
            },
            check: ["repeated-call", "prior-turn-evidence", "schema-attempt"][i as usize % 3],
            disposition: Disposition::ALL[i as usize % 4],
            reason: &texts.2,
        }
    }

    fn dispositions(texts: &[(String, String, String)]) -> Vec<DispositionRow<'_>> {
        (0..).zip(texts).map(|(i, t)| disposition(i, t)).collect()
    }

    #[test]
    fn dispositions_built_directly_are_the_serde_paths_batch() {
        let texts: Vec<_> = (0..5000).map(texts).collect();
        let rows = dispositions(&texts);
        let expected = rows_batch(&dispositions_schema(), &rows).unwrap();
        let got = dispositions_batch(&rows).unwrap();
        assert_eq!(got.num_rows(), 5000);
        assert_eq!(got, expected);
        assert_eq!(dispositions_batch(&[]).unwrap().num_rows(), 0);
    }

    #[test]
    fn rows_appended_in_pieces_make_batches_of_table_batch_rows() {
        // Handed in as callers hand them in: a few rows at a time, sometimes more than a batch.
        let texts: Vec<_> = (0..9000).map(texts).collect();
        let rows = dispositions(&texts);
        let mut pieces = BatchBuilder::new(dispositions_schema()).unwrap();
        for piece in [&rows[..5], &rows[5..4100], &rows[4100..8800], &rows[8800..]] {
            pieces.append(piece).unwrap();
        }
        let (_, got) = pieces.finish().unwrap();
        let sizes: Vec<usize> = got.iter().map(|b| b.num_rows()).collect();
        assert_eq!(sizes, vec![4100, 4096, 804]);
        let whole = rows_batch(&dispositions_schema(), &rows).unwrap();
        assert_eq!(
            arrow::compute::concat_batches(&whole.schema(), &got).unwrap(),
            whole
        );
    }

    /// Findings that exercise what a JSON line can get wrong: floats of every kind, a
    /// non-finite one, a check's columns left out when null, nested lists, text to escape.
    fn awkward_findings() -> Vec<Finding> {
        use crate::corpus::{FindingColumns, Subject, Witness};
        let base = Finding {
            finding_id: "0123456789abcdef".into(),
            check: "repeated-call".into(),
            kind: "repeated-call".into(),
            seam: "tool-result".into(),
            predicate: "same-call".into(),
            advisory: false,
            source: "tau2".into(),
            conversation_id: "conv \u{e9}\u{1f600}".into(),
            run_id: "run\"1\"\n\u{7f}".into(),
            turn: 3,
            iteration: None,
            subjects: vec![Subject::new("tool", "get</script>")],
            witnesses: vec![Witness::asserted(
                Subject::new("call", "c1"),
                "args",
                serde_json::json!({"a": [1.5, "x"]}),
                "history",
            )],
            message: "tab\there \u{2028} and \\".into(),
            columns: FindingColumns::default(),
        };
        let floats = [0.1 + 0.2, 1e300, 5e-324, 3.0, -0.0, f64::NAN, f64::INFINITY];
        let mut out: Vec<Finding> = floats
            .iter()
            .enumerate()
            .map(|(i, &ms)| Finding {
                iteration: Some(i as u32),
                columns: FindingColumns {
                    tool_name: Some("get".into()),
                    occurrences: Some(2),
                    wasted_ms: Some(ms),
                    ..FindingColumns::default()
                },
                ..base.clone()
            })
            .collect();
        out.push(Finding {
            check: "prior-turn-evidence".into(),
            subjects: vec![],
            witnesses: vec![],
            columns: FindingColumns {
                grounded_count: Some(2),
                grounded_values: Some(vec!["a".into(), String::new()]),
                ..FindingColumns::default()
            },
            ..base.clone()
        });
        out.push(Finding {
            check: "schema-attempt".into(),
            columns: FindingColumns {
                schema_attempt: Some(1),
                schema_outcome: Some("retried".into()),
                schema_path: Some("/a/0".into()),
                schema_retries: Some(0),
                ..FindingColumns::default()
            },
            ..base
        });
        out
    }

    /// A Parquet file of `batch`, as the corpus writes it.
    fn parquet_bytes(batch: &RecordBatch) -> Vec<u8> {
        let mut out = Vec::new();
        let props = Some(writer_properties());
        let mut w = ArrowWriter::try_new(&mut out, batch.schema(), props).unwrap();
        w.write(batch).unwrap();
        w.close().unwrap();
        out
    }

    #[test]
    fn findings_built_directly_are_the_serde_paths_batch() {
        use crate::corpus::{FindingColumns, Subject};
        let mut findings = awkward_findings();
        // Grounded values absent, empty and present side by side, several subjects and
        // witnesses in one finding, none in the next.
        let first = findings[0].clone();
        findings.push(Finding {
            subjects: vec![Subject::new("answer", "final"), Subject::new("turn", "2")],
            witnesses: [first.witnesses.clone(), first.witnesses.clone()].concat(),
            columns: FindingColumns {
                grounded_values: Some(vec![]),
                latest_prior_turn: Some(2),
                ..FindingColumns::default()
            },
            ..first.clone()
        });
        findings.push(Finding {
            subjects: vec![],
            witnesses: vec![],
            columns: FindingColumns {
                grounded_values: Some(vec!["41,200".into(), "x\u{0}y".into()]),
                ..FindingColumns::default()
            },
            ..first
        });
        let rows: Vec<&Finding> = findings.iter().collect();
        let schema = findings_schema();
        let expected = rows_batch(&schema, &rows).unwrap();
        let got = findings_batch(&rows).unwrap();
        assert_eq!(got.num_rows(), findings.len());
        assert_eq!(got, expected);
        assert_eq!(parquet_bytes(&got), parquet_bytes(&expected));
        // Each finding alone, and none.
        for row in &rows {
            let one = std::slice::from_ref(row);
            assert_eq!(
                findings_batch(one).unwrap(),
                rows_batch(&schema, one).unwrap()
            );
        }
        let none: Vec<&Finding> = Vec::new();
        assert_eq!(
            findings_batch(&none).unwrap(),
            rows_batch(&schema, &none).unwrap()
        );
    }

    #[test]
    fn findings_back_from_arrow_are_the_audits_json_lines() {
        let findings = awkward_findings();
        let expected = jsonl_lines(&findings).unwrap();
        // The non-finite times are `null` in both.
        assert_eq!(
            String::from_utf8_lossy(&expected)
                .matches("\"wasted_ms\":null")
                .count(),
            2 + 2
        );
        let schema = findings_schema();
        let batches: Vec<RecordBatch> = findings
            .chunks(3)
            .map(|c| rows_batch(&schema, c).unwrap())
            .collect();
        let got = findings_jsonl(&batches).unwrap();
        assert_eq!(
            String::from_utf8(got).unwrap(),
            String::from_utf8(expected).unwrap()
        );
        assert!(findings_jsonl(&[]).unwrap().is_empty());
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
