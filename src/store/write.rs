//! Writing the store: events in Parquet parts (a conversation never spans two parts), and one
//! row per run in the runs file of the same part (`events/part-NNNNN.parquet` beside
//! `runs/part-NNNNN.parquet`). Conversations are assigned to a part by a hash of their id, so
//! the fragments of one conversation that arrive from different files land in the same part.

use crate::model::digest::{DigestKind, DigestValue};
use crate::model::{Conversation, Event, EventKind, Run};
use crate::store::pieces::PieceWriter;
use crate::store::schema::{events_schema, runs_schema};
use crate::store::StoreSpec;
use arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, LargeStringBuilder, MapBuilder, MapFieldNames,
    StringBuilder, TimestampMillisecondBuilder, UInt32Builder, UInt64Builder,
};
use arrow::record_batch::RecordBatch;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use std::io;
use std::path::Path;
use std::sync::Arc;

/// Rows a batch holds at most. A part's batch is written as one row group, closed at once, so
/// that no part holds Parquet column writers (and their zstd contexts) between batches: a part
/// holds only its rows not yet encoded, however many parts are open.
const BATCH_ROWS: usize = 32 * 1024;
/// Bytes a part's batch of events may reach: its share of the budget
/// ([`StoreWriter::budget`]), at most this. Its runs wait up to half that.
const MAX_BATCH_BYTES: usize = 32 << 20;
/// What an event row takes in the builders beyond its text: each column's offset or value,
/// and validity bits (24 columns, 8 of them with 64-bit offsets).
const EVENT_ROW_BYTES: usize = 160;
/// What a run row takes in the builders beyond its texts and the 64 bytes [`run_bytes`] counts
/// for every run: the values and offsets of its 20 columns come to about 112 bytes. A run of an
/// agentfootprint log has short texts, and counted by them alone a part's runs held more than
/// twice their share.
const RUN_ROW_EXTRA: usize = 48;
/// Bytes of events all parts together hold before they are written, when parts are few.
/// Rows are held as Arrow builders, which hold up to twice what they are counted as (their
/// buffers double as they grow), and the allocator keeps what they free for the next batches.
const BUFFER_BUDGET: usize = 32 << 20;
/// The least share of the budget a part gets: with more than 64 parts the budget grows by
/// this a part, so that row groups stay at least this large however many parts there are. A
/// fixed budget split over ever more parts made row groups smaller as well as more numerous,
/// and the store slower to read; a larger floor makes the budget, and the ingest's memory,
/// grow with the night (a raw audit of 8 GB of tau2 has 60 parts: with a 1 MB floor its
/// builders held 60 MB, at this floor they share the 32 MB budget). Halving it doubles a large
/// night's row groups, which a store audit reads a few percent slower.
const PART_SHARE_FLOOR: usize = 1 << 19;
/// Column chunks whose metadata a writer's open files may hold together before the file that
/// holds most is closed as a piece ([`PieceWriter`]): about 650 bytes each in memory (424 of
/// them the chunk's metadata struct), so some 20 MB. A store's parts are all open until the
/// last input is read, and each part's row groups are its share of the buffer budget, so
/// without this bound the metadata grew with the input: 160 MB on an 8 GB tau2 night (9,913
/// row groups). The bench's 512 MB stores (56-208 row groups) never reach it; a part rolled
/// into pieces costs a small footer file a piece, read back when the part is closed.
const OPEN_CHUNKS: usize = 32 * 1024;

/// Parquet settings for corpus tables: zstd for every column unless said otherwise below.
pub fn writer_properties() -> WriterProperties {
    properties(zstd_level_1()).build()
}

/// Parquet settings for the store's events and runs parts.
/// - Only the long text columns are compressed: every compressed column chunk makes zstd
///   contexts of its own, and the other columns are short values that are dictionary- or
///   delta-encoded already.
/// - Statistics are kept per column chunk, and no page index is written: the store's readers
///   choose row groups (by the `part` column's range) and never pages, and a writer holds every
///   row group's page index in memory until its file is closed, which grew with the number of
///   row groups, so with the square of the input.
pub fn store_writer_properties() -> WriterProperties {
    properties(Compression::UNCOMPRESSED)
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_offset_index_disabled(true)
        // Version 2 data pages compress a page's values where they lie. Version 1 pages copy
        // the values after the levels, then compress them into a buffer the `parquet` crate
        // makes the page's size and grows to zstd's bound (a copy of untouched memory the size
        // of the page), then shrink it: three copies of every text page, and fresh pages
        // faulted in for each.
        .set_writer_version(WriterVersion::PARQUET_2_0)
        // Version 2 would otherwise choose other encodings where version 1 chose plain (delta
        // for text and integers, RLE for booleans); the columns that want delta say so above.
        .set_encoding(Encoding::PLAIN)
        .build()
}

fn zstd_level_1() -> Compression {
    Compression::ZSTD(ZstdLevel::try_new(1).expect("valid level"))
}

fn properties(
    default_compression: Compression,
) -> parquet::file::properties::WriterPropertiesBuilder {
    let mut builder = WriterProperties::builder()
        .set_compression(default_compression)
        .set_max_row_group_row_count(Some(BATCH_ROWS))
        // A row group's column writers each hold the page they fill until it is compressed,
        // and the store encodes a batch's columns all at once: smaller pages keep that small.
        .set_data_page_size_limit(256 << 10);
    use parquet::schema::types::ColumnPath;
    // Long, nearly unique text: a dictionary would only cost memory and time before Parquet
    // gives up on it, and so would min/max statistics (each value compared with both; no
    // reader prunes row groups by a text's range).
    for column in [
        "payload",
        "archived_payload",
        "text",
        "message_text",
        "result_text",
        "arguments",
        "user_message",
        "answer",
    ] {
        builder = builder
            .set_column_dictionary_enabled(ColumnPath::from(column), false)
            .set_column_statistics_enabled(ColumnPath::from(column), EnabledStatistics::None)
            .set_column_compression(ColumnPath::from(column), zstd_level_1());
    }
    // Every compressed column chunk makes zstd contexts of its own (about 190 KB a column) while
    // its row group is written, and a large store is written in many small row groups. Columns
    // that encode small without it are left uncompressed: counters and times delta-encoded,
    // low-cardinality names dictionary-encoded.
    for column in [
        "seq",
        "flags",
        "iteration",
        "evidence_offers",
        "answer_offers",
        "result_text_of",
        "timestamp",
        "turn",
        "landings",
        "events",
    ] {
        builder = builder
            .set_column_compression(ColumnPath::from(column), Compression::UNCOMPRESSED)
            .set_column_dictionary_enabled(ColumnPath::from(column), false)
            .set_column_encoding(ColumnPath::from(column), Encoding::DELTA_BINARY_PACKED);
    }
    // Evidence forms are mostly digits that zstd shrinks by about half, and the store writer is
    // one thread whose time is the ingest's: they are stored as they are.
    for column in ["evidence_forms", "answer_forms"] {
        builder = builder
            .set_column_dictionary_enabled(ColumnPath::from(column), false)
            .set_column_statistics_enabled(ColumnPath::from(column), EnabledStatistics::None)
            .set_column_compression(ColumnPath::from(column), Compression::UNCOMPRESSED);
    }
    for column in [
        "kind",
        "source_type",
        "role",
        "tool_name",
        "error",
        "duration_ms",
    ] {
        builder =
            builder.set_column_compression(ColumnPath::from(column), Compression::UNCOMPRESSED);
    }
    builder
}

/// A Parquet, Arrow or JSON error as an `io::Error` with the same text, keeping the error itself
/// (and the `io::Error` it may hold) as its source.
pub fn to_io(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::other(e)
}

/// What a builder reserves for a column (rows or value bytes) whose last batch needed `last`:
/// a quarter more than that, at most `cap`. A column's share of a batch varies from batch to
/// batch, and a column that outgrows its buffer doubles it, copying all it holds. Room reserved
/// and not written is not free either: the allocator hands out pages earlier buffers touched,
/// so every byte reserved may be resident.
fn ahead(last: usize, cap: usize) -> usize {
    last.saturating_add(last / 4).min(cap)
}

/// Column builders for the events table.
pub struct EventsBuilder {
    conversation_id: StringBuilder,
    run_id: StringBuilder,
    seq: UInt32Builder,
    kind: StringBuilder,
    source_type: StringBuilder,
    role: StringBuilder,
    tool_name: StringBuilder,
    call_id: StringBuilder,
    arguments: LargeStringBuilder,
    text: LargeStringBuilder,
    message_text: LargeStringBuilder,
    result_text: LargeStringBuilder,
    result_text_of: UInt32Builder,
    arguments_fingerprint: StringBuilder,
    result_fingerprint: StringBuilder,
    evidence_forms: LargeStringBuilder,
    evidence_offers: UInt32Builder,
    error: BooleanBuilder,
    flags: UInt32Builder,
    iteration: UInt32Builder,
    timestamp: TimestampMillisecondBuilder,
    duration_ms: Float64Builder,
    payload: LargeStringBuilder,
    archived_payload: LargeStringBuilder,
    rows: usize,
    bytes: usize,
    /// The last batch's rows and value bytes per string column. The next batch's buffers are
    /// made that size at its first row instead of doubling up to it (regrowing a buffer copies
    /// it); a part that gets no rows holds nothing.
    last: Option<BatchShape>,
    /// Ceiling on the bytes reserved ahead for one column: the part's share of the writer's
    /// buffer budget.
    reserve_cap: usize,
    /// The digests written (by the column of their kind) and the envelopes kept in `payload`.
    spec: StoreSpec,
}

/// Rows and value bytes of the string columns (in field order) of a finished batch.
#[derive(Debug, Clone, Copy)]
struct BatchShape {
    rows: usize,
    values: [usize; 16],
}

impl EventsBuilder {
    /// An empty builder for `spec` that reserves at most `reserve_cap` bytes ahead for a
    /// column.
    pub fn new(spec: StoreSpec, reserve_cap: usize) -> Self {
        EventsBuilder {
            conversation_id: StringBuilder::new(),
            run_id: StringBuilder::new(),
            seq: UInt32Builder::new(),
            kind: StringBuilder::new(),
            source_type: StringBuilder::new(),
            role: StringBuilder::new(),
            tool_name: StringBuilder::new(),
            call_id: StringBuilder::new(),
            arguments: LargeStringBuilder::new(),
            text: LargeStringBuilder::new(),
            message_text: LargeStringBuilder::new(),
            result_text: LargeStringBuilder::new(),
            result_text_of: UInt32Builder::new(),
            arguments_fingerprint: StringBuilder::new(),
            result_fingerprint: StringBuilder::new(),
            evidence_forms: LargeStringBuilder::new(),
            evidence_offers: UInt32Builder::new(),
            error: BooleanBuilder::new(),
            flags: UInt32Builder::new(),
            iteration: UInt32Builder::new(),
            timestamp: TimestampMillisecondBuilder::new().with_timezone("UTC"),
            duration_ms: Float64Builder::new(),
            payload: LargeStringBuilder::new(),
            archived_payload: LargeStringBuilder::new(),
            rows: 0,
            bytes: 0,
            last: None,
            reserve_cap,
            spec,
        }
    }

    /// Make every column's buffers ready for what the last batch needed (see [`ahead`]).
    fn presize(&mut self, shape: BatchShape) {
        let rows = ahead(shape.rows, BATCH_ROWS);
        let v = shape.values.map(|bytes| ahead(bytes, self.reserve_cap));
        self.conversation_id = StringBuilder::with_capacity(rows, v[0]);
        self.run_id = StringBuilder::with_capacity(rows, v[1]);
        self.seq = UInt32Builder::with_capacity(rows);
        self.kind = StringBuilder::with_capacity(rows, v[2]);
        self.source_type = StringBuilder::with_capacity(rows, v[3]);
        self.role = StringBuilder::with_capacity(rows, v[4]);
        self.tool_name = StringBuilder::with_capacity(rows, v[5]);
        self.call_id = StringBuilder::with_capacity(rows, v[6]);
        self.arguments = LargeStringBuilder::with_capacity(rows, v[7]);
        self.text = LargeStringBuilder::with_capacity(rows, v[8]);
        self.message_text = LargeStringBuilder::with_capacity(rows, v[14]);
        self.result_text = LargeStringBuilder::with_capacity(rows, v[11]);
        self.result_text_of = UInt32Builder::with_capacity(rows);
        self.arguments_fingerprint = StringBuilder::with_capacity(rows, v[15]);
        self.result_fingerprint = StringBuilder::with_capacity(rows, v[12]);
        self.evidence_forms = LargeStringBuilder::with_capacity(rows, v[13]);
        self.evidence_offers = UInt32Builder::with_capacity(rows);
        self.error = BooleanBuilder::with_capacity(rows);
        self.flags = UInt32Builder::with_capacity(rows);
        self.iteration = UInt32Builder::with_capacity(rows);
        self.timestamp = TimestampMillisecondBuilder::with_capacity(rows).with_timezone("UTC");
        self.duration_ms = Float64Builder::with_capacity(rows);
        self.payload = LargeStringBuilder::with_capacity(rows, v[9]);
        self.archived_payload = LargeStringBuilder::with_capacity(rows, v[10]);
    }

    /// Append one event row, counting its bytes: its text, the ids every row repeats, its
    /// digests and what every row takes.
    pub fn push(&mut self, run: &Run, e: &Event) {
        if self.rows == 0 {
            if let Some(shape) = self.last.take() {
                self.presize(shape);
            }
        }
        self.conversation_id.append_value(&run.conversation_id);
        self.run_id.append_value(&run.run_id);
        self.seq.append_value(e.seq);
        self.kind.append_value(e.kind().as_str());
        self.source_type.append_option(e.source_type.as_deref());
        self.role.append_option(e.role.map(|r| r.as_str()));
        self.tool_name.append_option(e.tool_name.as_deref());
        self.call_id.append_option(e.call_id.as_deref());
        self.arguments.append_option(e.arguments.as_deref());
        if crate::store::digest::is_result(e) {
            self.text.append_null();
            self.message_text.append_null();
            match crate::store::digest::landing_with_text_of(run, e) {
                Some(seq) => {
                    self.result_text.append_null();
                    self.result_text_of.append_value(seq);
                }
                None => {
                    self.result_text.append_option(e.text.as_deref());
                    self.result_text_of.append_null();
                }
            }
        } else if crate::store::digest::is_message_text(e) {
            self.text.append_null();
            self.message_text.append_option(e.text.as_deref());
            self.result_text.append_null();
            self.result_text_of.append_null();
        } else {
            self.text.append_option(e.text.as_deref());
            self.message_text.append_null();
            self.result_text.append_null();
            self.result_text_of.append_null();
        }
        let of_kind = |kind| {
            let digest = self.spec.digest_of(kind)?;
            e.digests.get(digest.name())
        };
        let mut fingerprints = 0;
        match of_kind(DigestKind::ArgumentsFingerprint) {
            Some(DigestValue::ArgumentsFingerprint(f)) => {
                self.arguments_fingerprint.append_value(f);
                fingerprints += f.len();
            }
            _ => self.arguments_fingerprint.append_null(),
        }
        match of_kind(DigestKind::Fingerprint) {
            Some(DigestValue::Fingerprint(f)) => {
                self.result_fingerprint.append_value(f);
                fingerprints += f.len();
            }
            _ => self.result_fingerprint.append_null(),
        }
        match of_kind(DigestKind::Evidence) {
            Some(DigestValue::Evidence(digest)) => {
                self.evidence_forms.append_value(&digest.forms);
                self.evidence_offers.append_value(digest.offered);
            }
            _ => {
                self.evidence_forms.append_null();
                self.evidence_offers.append_null();
            }
        }
        self.error.append_value(e.error);
        self.flags.append_value(e.flags);
        self.iteration.append_option(e.iteration);
        self.timestamp.append_option(e.timestamp_ms);
        self.duration_ms.append_option(e.duration_ms);
        if self
            .spec
            .envelope_is_checked(e.kind(), e.source_type.as_deref())
        {
            self.payload.append_option(e.payload.as_deref());
            self.archived_payload.append_null();
        } else {
            self.payload.append_null();
            self.archived_payload.append_option(e.payload.as_deref());
        }
        self.rows += 1;
        self.bytes += event_bytes(e)
            + run.run_id.len()
            + run.conversation_id.len()
            + fingerprints
            + EVENT_ROW_BYTES;
    }

    /// The bytes at which a batch is full: the part's share of the budget.
    fn batch_bytes(&self) -> usize {
        self.reserve_cap.min(MAX_BATCH_BYTES)
    }

    pub fn is_full(&self) -> bool {
        self.rows >= BATCH_ROWS || self.bytes >= self.batch_bytes()
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    pub fn finish(&mut self) -> io::Result<RecordBatch> {
        self.last = Some(BatchShape {
            rows: self.rows,
            values: [
                self.conversation_id.values_slice().len(),
                self.run_id.values_slice().len(),
                self.kind.values_slice().len(),
                self.source_type.values_slice().len(),
                self.role.values_slice().len(),
                self.tool_name.values_slice().len(),
                self.call_id.values_slice().len(),
                self.arguments.values_slice().len(),
                self.text.values_slice().len(),
                self.payload.values_slice().len(),
                self.archived_payload.values_slice().len(),
                self.result_text.values_slice().len(),
                self.result_fingerprint.values_slice().len(),
                self.evidence_forms.values_slice().len(),
                self.message_text.values_slice().len(),
                self.arguments_fingerprint.values_slice().len(),
            ],
        });
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.conversation_id.finish()),
            Arc::new(self.run_id.finish()),
            Arc::new(self.seq.finish()),
            Arc::new(self.kind.finish()),
            Arc::new(self.source_type.finish()),
            Arc::new(self.role.finish()),
            Arc::new(self.tool_name.finish()),
            Arc::new(self.call_id.finish()),
            Arc::new(self.arguments.finish()),
            Arc::new(self.text.finish()),
            Arc::new(self.message_text.finish()),
            Arc::new(self.result_text.finish()),
            Arc::new(self.result_text_of.finish()),
            Arc::new(self.arguments_fingerprint.finish()),
            Arc::new(self.result_fingerprint.finish()),
            Arc::new(self.evidence_forms.finish()),
            Arc::new(self.evidence_offers.finish()),
            Arc::new(self.error.finish()),
            Arc::new(self.flags.finish()),
            Arc::new(self.iteration.finish()),
            Arc::new(self.timestamp.finish()),
            Arc::new(self.duration_ms.finish()),
            Arc::new(self.payload.finish()),
            Arc::new(self.archived_payload.finish()),
        ];
        self.rows = 0;
        self.bytes = 0;
        RecordBatch::try_new(events_schema(), columns).map_err(to_io)
    }
}

/// Where a run came from, for a stable order whatever the thread count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Origin {
    pub input_index: u32,
    pub record_index: u64,
}

/// The bytes an event row is counted as in the writer's buffers: its long texts and a fixed
/// overhead for the rest.
pub fn event_bytes(e: &Event) -> usize {
    let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    let digest = match e.digests.of_kind(DigestKind::Evidence) {
        Some((_, DigestValue::Evidence(d))) => d.forms.len(),
        _ => 0,
    };
    text(&e.text) + text(&e.arguments) + text(&e.payload) + digest + 64
}

/// The bytes a run row (without its events) is counted as in the writer's buffers: its texts
/// and a fixed overhead for the rest.
pub fn run_bytes(run: &Run) -> usize {
    let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    let digest = match run.answer_digests.of_kind(DigestKind::Evidence) {
        Some((_, DigestValue::Evidence(d))) => d.forms.len(),
        _ => 0,
    };
    text(&run.user_message)
        + text(&run.answer)
        + digest
        + run.run_id.len()
        + run.conversation_id.len()
        + run.format.len()
        + run.source.len()
        + text(&run.agent)
        + text(&run.model)
        + 64
}

/// Column builders for the runs table.
pub struct RunsBuilder {
    bytes: usize,
    run_id: StringBuilder,
    conversation_id: StringBuilder,
    turn: UInt32Builder,
    format: StringBuilder,
    source: StringBuilder,
    agent: StringBuilder,
    model: StringBuilder,
    started_at: TimestampMillisecondBuilder,
    ended_at: TimestampMillisecondBuilder,
    duration_ms: Float64Builder,
    user_message: LargeStringBuilder,
    answer: LargeStringBuilder,
    answer_forms: LargeStringBuilder,
    answer_offers: UInt32Builder,
    landings: UInt32Builder,
    events: UInt32Builder,
    part: UInt32Builder,
    input_index: UInt32Builder,
    record_index: UInt64Builder,
    partitions: MapBuilder<StringBuilder, StringBuilder>,
    rows: usize,
    /// The last batch's rows and bytes of its long texts (person's message, answer, answer
    /// forms), for the next batch's buffers, as [`EventsBuilder`] keeps them.
    last: Option<(usize, [usize; 3])>,
    /// Ceiling on the bytes reserved ahead for one column.
    reserve_cap: usize,
}

fn partitions_builder() -> MapBuilder<StringBuilder, StringBuilder> {
    let names = MapFieldNames {
        entry: "entries".into(),
        key: "key".into(),
        value: "value".into(),
    };
    MapBuilder::new(Some(names), StringBuilder::new(), StringBuilder::new())
}

impl RunsBuilder {
    /// An empty builder that reserves at most `reserve_cap` bytes ahead for a column.
    pub fn new(reserve_cap: usize) -> Self {
        RunsBuilder {
            bytes: 0,
            run_id: StringBuilder::new(),
            conversation_id: StringBuilder::new(),
            turn: UInt32Builder::new(),
            format: StringBuilder::new(),
            source: StringBuilder::new(),
            agent: StringBuilder::new(),
            model: StringBuilder::new(),
            started_at: TimestampMillisecondBuilder::new().with_timezone("UTC"),
            ended_at: TimestampMillisecondBuilder::new().with_timezone("UTC"),
            duration_ms: Float64Builder::new(),
            user_message: LargeStringBuilder::new(),
            answer: LargeStringBuilder::new(),
            answer_forms: LargeStringBuilder::new(),
            answer_offers: UInt32Builder::new(),
            landings: UInt32Builder::new(),
            events: UInt32Builder::new(),
            part: UInt32Builder::new(),
            input_index: UInt32Builder::new(),
            record_index: UInt64Builder::new(),
            partitions: partitions_builder(),
            rows: 0,
            last: None,
            reserve_cap,
        }
    }

    /// Make the long texts' buffers ready for what the last batch needed (see [`ahead`]).
    fn presize(&mut self, (rows, values): (usize, [usize; 3])) {
        let rows = ahead(rows, BATCH_ROWS);
        let [user_message, answer, answer_forms] =
            values.map(|bytes| ahead(bytes, self.reserve_cap));
        self.user_message = LargeStringBuilder::with_capacity(rows, user_message);
        self.answer = LargeStringBuilder::with_capacity(rows, answer);
        self.answer_forms = LargeStringBuilder::with_capacity(rows, answer_forms);
    }

    pub fn push(&mut self, run: &Run, part: u32, origin: Origin) {
        if self.rows == 0 {
            if let Some(shape) = self.last.take() {
                self.presize(shape);
            }
        }
        self.run_id.append_value(&run.run_id);
        self.conversation_id.append_value(&run.conversation_id);
        self.turn.append_value(run.turn);
        self.format.append_value(&run.format);
        self.source.append_value(&run.source);
        self.agent.append_option(run.agent.as_deref());
        self.model.append_option(run.model.as_deref());
        self.started_at.append_option(run.started_ms);
        self.ended_at.append_option(run.ended_ms);
        self.duration_ms.append_option(run.duration_ms);
        self.user_message.append_option(run.user_message.as_deref());
        self.answer.append_option(run.answer.as_deref());
        match run.answer_digests.of_kind(DigestKind::Evidence) {
            Some((_, DigestValue::Evidence(d))) => {
                self.answer_forms.append_value(&d.forms);
                self.answer_offers.append_value(d.offered);
            }
            _ => {
                self.answer_forms.append_null();
                self.answer_offers.append_null();
            }
        }
        self.landings.append_value(
            run.events
                .iter()
                .filter(|e| e.kind() == EventKind::Landing)
                .count() as u32,
        );
        self.events.append_value(run.events.len() as u32);
        self.part.append_value(part);
        self.input_index.append_value(origin.input_index);
        self.record_index.append_value(origin.record_index);
        let mut partition_bytes = 0;
        for (key, value) in crate::store::partitions::partition_values(&run.source) {
            self.partitions.keys().append_value(key);
            self.partitions.values().append_value(value);
            partition_bytes += key.len() + value.len() + 8;
        }
        self.partitions
            .append(true)
            .expect("keys and values are appended in pairs");
        self.rows += 1;
        self.bytes += run_bytes(run) + partition_bytes + RUN_ROW_EXTRA;
    }

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    pub fn finish(&mut self) -> io::Result<RecordBatch> {
        self.last = Some((
            self.rows,
            [
                self.user_message.values_slice().len(),
                self.answer.values_slice().len(),
                self.answer_forms.values_slice().len(),
            ],
        ));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.run_id.finish()),
            Arc::new(self.conversation_id.finish()),
            Arc::new(self.turn.finish()),
            Arc::new(self.format.finish()),
            Arc::new(self.source.finish()),
            Arc::new(self.agent.finish()),
            Arc::new(self.model.finish()),
            Arc::new(self.started_at.finish()),
            Arc::new(self.ended_at.finish()),
            Arc::new(self.duration_ms.finish()),
            Arc::new(self.user_message.finish()),
            Arc::new(self.answer.finish()),
            Arc::new(self.answer_forms.finish()),
            Arc::new(self.answer_offers.finish()),
            Arc::new(self.landings.finish()),
            Arc::new(self.events.finish()),
            Arc::new(self.part.finish()),
            Arc::new(self.input_index.finish()),
            Arc::new(self.record_index.finish()),
            Arc::new(self.partitions.finish()),
        ];
        self.rows = 0;
        self.bytes = 0;
        RecordBatch::try_new(runs_schema(), columns).map_err(to_io)
    }
}

struct Part {
    writer: PieceWriter,
    builder: EventsBuilder,
    /// This part's runs not yet handed to `runs_writer`.
    runs: RunsBuilder,
    runs_writer: PieceWriter,
    /// Rows copied from another store, waiting for the next row group of their table (events,
    /// then runs) together with the builders' rows, in the order they came; and their bytes.
    copied: [Vec<RecordBatch>; 2],
    copied_bytes: [usize; 2],
}

/// Write `pending` and then `last` to `writer` as one row group and close it. Returns the
/// column chunks written (none when there were no rows).
fn write_row_group(
    writer: &mut PieceWriter,
    pending: &mut Vec<RecordBatch>,
    last: Option<RecordBatch>,
) -> io::Result<usize> {
    pending.extend(last);
    let batch = match pending.len() {
        0 => return Ok(0),
        1 => pending.pop().expect("one batch"),
        _ => {
            let batch = arrow::compute::concat_batches(&pending[0].schema(), pending.iter())
                .map_err(to_io)?;
            pending.clear();
            batch
        }
    };
    writer.write_row_group(&batch)
}

impl Part {
    /// Write the buffered events (and events copied before them) as a row group. Returns the
    /// column chunks written.
    fn flush_batch(&mut self) -> io::Result<usize> {
        let last = match self.builder.is_empty() {
            true => None,
            false => Some(self.builder.finish()?),
        };
        self.copied_bytes[0] = 0;
        write_row_group(&mut self.writer, &mut self.copied[0], last)
    }

    /// Write the buffered runs (and runs copied before them) as a row group. Returns the
    /// column chunks written.
    fn flush_runs(&mut self) -> io::Result<usize> {
        let last = match self.runs.is_empty() {
            true => None,
            false => Some(self.runs.finish()?),
        };
        self.copied_bytes[1] = 0;
        write_row_group(&mut self.runs_writer, &mut self.copied[1], last)
    }

    /// Write the buffered events and runs, and close both files.
    fn close(mut self) -> io::Result<()> {
        self.flush_batch()?;
        self.flush_runs()?;
        self.writer.close()?;
        self.runs_writer.close()
    }

    /// The bytes of events waiting for their row group.
    fn events_held(&self) -> usize {
        self.builder.bytes + self.copied_bytes[0]
    }

    /// The bytes of runs waiting for their row group.
    fn runs_held(&self) -> usize {
        self.runs.bytes + self.copied_bytes[1]
    }

    /// The bytes at which the part's runs are written: half its events' (a run row is
    /// mostly the person's message and the answer, a third of what its events take).
    fn runs_batch_bytes(&self) -> usize {
        self.builder.batch_bytes() / 2
    }

    /// Hold rows copied from another store (`table` 0 for events, 1 for runs) for the next
    /// row group, after the rows built so far; write it when it is full. Returns the column
    /// chunks written.
    fn copy(&mut self, table: usize, batch: RecordBatch) -> io::Result<usize> {
        if batch.num_rows() == 0 {
            return Ok(0);
        }
        let built = match table {
            0 if !self.builder.is_empty() => Some(self.builder.finish()?),
            1 if !self.runs.is_empty() => Some(self.runs.finish()?),
            _ => None,
        };
        for batch in built.into_iter().chain([batch]) {
            self.copied_bytes[table] += batch.get_array_memory_size();
            self.copied[table].push(batch);
        }
        let (held, limit) = match table {
            0 => (self.events_held(), self.builder.batch_bytes()),
            _ => (self.runs_held(), self.runs_batch_bytes()),
        };
        let rows: usize = self.copied[table].iter().map(RecordBatch::num_rows).sum();
        if held >= limit || rows >= BATCH_ROWS {
            return match table {
                0 => self.flush_batch(),
                _ => self.flush_runs(),
            };
        }
        Ok(0)
    }
}

/// The rows of `batch` (a store's runs or events) whose run `keep` says to keep: a row
/// without a run id is kept when `keep("")` is.
pub fn rows_of_runs(batch: &RecordBatch, keep: impl Fn(&str) -> bool) -> io::Result<RecordBatch> {
    use arrow::array::{AsArray, BooleanArray};
    let ids = batch
        .column_by_name("run_id")
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| io::Error::other("rows have no `run_id` column"))?;
    let mask: BooleanArray = ids.iter().map(|id| Some(keep(id.unwrap_or("")))).collect();
    arrow::compute::filter_record_batch(batch, &mask).map_err(to_io)
}

/// The part a conversation belongs to.
pub fn part_of(conversation_id: &str, parts: u32) -> u32 {
    if parts <= 1 {
        0
    } else {
        crate::js::fnv1a(conversation_id) % parts
    }
}

/// Streams conversations into a store directory (the caller owns atomicity).
///
/// Each part has a runs file of its own, so neither the writer nor a reader of one part holds
/// every run, and a store's parts can be written (and merged) on separate machines.
pub struct StoreWriter {
    dir: std::path::PathBuf,
    parts: Vec<Part>,
    /// The column chunks the parts' open pieces hold, and how many they may ([`OPEN_CHUNKS`]).
    open_chunks: usize,
    open_chunk_limit: usize,
    pub runs_written: u64,
    pub events_written: u64,
    pub landings_written: u64,
}

pub fn part_file_name(part: u32) -> String {
    format!("part-{part:05}.parquet")
}

/// The runs file of a store's part `part`, relative to its folder.
pub fn runs_part_name(part: u32) -> String {
    format!("{RUNS_DIR}/{}", part_file_name(part))
}

/// The folder of a store's (or a generation's) runs files.
pub const RUNS_DIR: &str = "runs";

/// The manifest's names of a store's `parts` parts.
pub fn part_names(parts: u32) -> Vec<String> {
    (0..parts)
        .map(|p| format!("events/{}", part_file_name(p)))
        .collect()
}

impl StoreWriter {
    /// A store of `parts` parts in `dir` that keeps what `spec` names.
    pub fn create(dir: &Path, parts: u32, spec: &StoreSpec) -> io::Result<StoreWriter> {
        let parts = parts.max(1);
        std::fs::create_dir_all(dir.join("events"))?;
        std::fs::create_dir_all(dir.join(RUNS_DIR))?;
        let share = Self::budget(parts) / parts as usize;
        let mut list = Vec::with_capacity(parts as usize);
        for p in 0..parts {
            let writer = PieceWriter::create(
                &dir.join("events").join(part_file_name(p)),
                events_schema(),
                store_writer_properties(),
            )?;
            let runs_writer = PieceWriter::create(
                &dir.join(runs_part_name(p)),
                runs_schema(),
                store_writer_properties(),
            )?;
            list.push(Part {
                writer,
                builder: EventsBuilder::new(spec.clone(), share),
                runs: RunsBuilder::new(share),
                runs_writer,
                copied: [Vec::new(), Vec::new()],
                copied_bytes: [0, 0],
            });
        }
        Ok(StoreWriter {
            dir: dir.to_path_buf(),
            parts: list,
            open_chunks: 0,
            open_chunk_limit: OPEN_CHUNKS,
            runs_written: 0,
            events_written: 0,
            landings_written: 0,
        })
    }

    /// The bytes of events a writer of `parts` parts holds at most before writing them (and
    /// half as much again of runs): each part writes its rows when they reach its share, so
    /// the parts together never hold more, whatever the input.
    fn budget(parts: u32) -> usize {
        BUFFER_BUDGET.max(parts as usize * PART_SHARE_FLOOR)
    }

    pub fn part_count(&self) -> u32 {
        self.parts.len() as u32
    }

    /// Write one conversation (or a fragment of one).
    pub fn write(&mut self, conversation: &Conversation, origin: Origin) -> io::Result<()> {
        let p = part_of(&conversation.id, self.part_count()) as usize;
        let mut written = 0;
        for run in &conversation.runs {
            let part = &mut self.parts[p];
            for e in &run.events {
                part.builder.push(run, e);
                if part.builder.is_full() {
                    written += part.flush_batch()?;
                }
            }
            part.runs.push(run, p as u32, origin);
            self.runs_written += 1;
            self.events_written += run.events.len() as u64;
            self.landings_written += run.landings().count() as u64;
            if part.runs.len() >= BATCH_ROWS || part.runs_held() >= part.runs_batch_bytes() {
                written += part.flush_runs()?;
            }
        }
        self.opened(written)
    }

    /// Count `chunks` column chunks just written; while the open pieces hold more than their
    /// limit, close the piece that holds most. Files are rolled in turn as they fill, so no
    /// part's file is cut into many more pieces than another's.
    fn opened(&mut self, chunks: usize) -> io::Result<()> {
        self.open_chunks += chunks;
        while self.open_chunks > self.open_chunk_limit {
            let Some((fullest, _)) = self
                .parts
                .iter()
                .enumerate()
                .flat_map(|(i, part)| {
                    [
                        ((i, 0), part.writer.open_chunks()),
                        ((i, 1), part.runs_writer.open_chunks()),
                    ]
                })
                .max_by_key(|&((i, table), chunks)| (chunks, std::cmp::Reverse((i, table))))
                .filter(|&(_, chunks)| chunks > 0)
            else {
                break;
            };
            let part = &mut self.parts[fullest.0];
            let file = match fullest.1 {
                0 => &mut part.writer,
                _ => &mut part.runs_writer,
            };
            self.open_chunks -= file.open_chunks();
            file.roll()?;
        }
        Ok(())
    }

    /// Write rows copied from a store of this schema into part `part`: `runs` and `events` hold
    /// whole conversations that belong there ([`part_of`]), every column as the store writes it.
    /// The runs' `part` column is set to `part`; their origins are kept. Copied rows are not
    /// counted in `runs_written` and the others (the caller counts what it copied).
    pub fn copy_rows(
        &mut self,
        part: u32,
        runs: &RecordBatch,
        events: &RecordBatch,
    ) -> io::Result<()> {
        let p = part as usize;
        if p >= self.parts.len() {
            return Err(io::Error::other(format!(
                "copied rows go to part {part}, and the store has {}",
                self.parts.len()
            )));
        }
        let columns = match runs.num_rows() {
            0 => None,
            _ => {
                let at = runs
                    .schema()
                    .index_of("part")
                    .map_err(|_| io::Error::other("copied runs have no `part` column"))?;
                let mut columns = runs.columns().to_vec();
                columns[at] =
                    Arc::new(arrow::array::UInt32Array::from(vec![part; runs.num_rows()]));
                Some(columns)
            }
        };
        let target = &mut self.parts[p];
        let mut written = target.copy(0, events.clone())?;
        if let Some(columns) = columns {
            let batch = RecordBatch::try_new(runs_schema(), columns).map_err(to_io)?;
            written += target.copy(1, batch)?;
        }
        self.opened(written)
    }

    /// The store directory being written.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Flush everything and close the files. Returns the part file names.
    /// Parts are closed in parallel: each encodes its last rows and joins its pieces, if any.
    pub fn finish(self) -> io::Result<Vec<String>> {
        use rayon::prelude::*;
        let parts = self.parts.len() as u32;
        self.parts.into_par_iter().try_for_each(Part::close)?;
        Ok(part_names(parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    fn run(id: &str) -> Run {
        Run {
            run_id: id.to_string(),
            conversation_id: format!("conversation of {id}"),
            ..Run::default()
        }
    }

    /// A row is counted with the ids it repeats and what every row takes, not its text alone:
    /// counted by text, a part's batch of short events held twice what the budget saw.
    #[test]
    fn an_event_row_counts_its_ids_and_columns() {
        let mut builder = EventsBuilder::new(crate::pipeline::store_spec().clone(), 1 << 20);
        let run = run("a-run-id");
        let mut e = Event::new(EventKind::Message);
        e.text = Some("hello".into());
        builder.push(&run, &e);
        assert_eq!(
            builder.bytes,
            event_bytes(&e) + run.run_id.len() + run.conversation_id.len() + EVENT_ROW_BYTES
        );
    }

    /// A run row is counted as what its columns take, not by its long texts alone: the runs of
    /// an agentfootprint log have short texts, and a part's runs held twice their count.
    #[test]
    fn a_run_row_counts_what_its_columns_take() {
        let mut builder = RunsBuilder::new(1 << 20);
        for i in 0..2_000 {
            let mut run = run(&format!("run-{i:05}"));
            run.format = "agentfootprint".into();
            run.source = format!("logs/date=2026-12-0{}/agent-{}.ndjson", i % 7, i % 13);
            run.agent = Some("support-bot".into());
            run.user_message = Some("where is my order?".into());
            run.answer = Some("It left the warehouse on Monday.".into());
            builder.push(
                &run,
                3,
                Origin {
                    input_index: 0,
                    record_index: i,
                },
            );
        }
        assert_counts_what_it_uses(builder, "made-up runs");
    }

    /// A runs builder's count is within 0.9-1.3x of the bytes its finished batch's columns use.
    fn assert_counts_what_it_uses(mut builder: RunsBuilder, what: &str) {
        let counted = builder.bytes;
        let batch = builder.finish().unwrap();
        let used: usize = batch
            .columns()
            .iter()
            .map(|c| c.to_data().get_slice_memory_size().unwrap())
            .sum();
        assert!(
            counted * 10 >= used * 9 && counted * 10 <= used * 13,
            "{what}: counted {counted} bytes for {used} used"
        );
    }

    /// Every part holds a batch at once, so a batch is smaller when parts are many: the part's
    /// share of the budget, which grows past 64 parts so that a share is never under the floor.
    #[test]
    fn a_part_s_share_shrinks_to_a_floor() {
        let spec = crate::pipeline::store_spec();
        let batch = |parts: u32| {
            let share = StoreWriter::budget(parts) / parts as usize;
            EventsBuilder::new(spec.clone(), share).batch_bytes()
        };
        assert_eq!(batch(1), MAX_BATCH_BYTES);
        assert_eq!(batch(2), BUFFER_BUDGET / 2);
        assert_eq!(batch(16), BUFFER_BUDGET / 16);
        assert_eq!(batch(60), BUFFER_BUDGET / 60);
        assert_eq!(batch(64), PART_SHARE_FLOOR);
        assert_eq!(batch(100), PART_SHARE_FLOOR);
        assert_eq!(StoreWriter::budget(100), 100 * PART_SHARE_FLOOR);

        // A builder of a 16-part writer is full at its batch's bytes, before BATCH_ROWS.
        let mut builder = EventsBuilder::new(spec.clone(), BUFFER_BUDGET / 16);
        let run = run("r");
        let mut e = Event::new(EventKind::Message);
        e.text = Some("x".repeat(10_000));
        let mut rows = 0;
        while !builder.is_full() {
            builder.push(&run, &e);
            rows += 1;
        }
        assert!(rows < BATCH_ROWS);
        assert!(builder.bytes >= BUFFER_BUDGET / 16);
        assert!(builder.bytes < BUFFER_BUDGET / 16 + 11_000);
    }

    fn conversation(id: &str, runs: usize, text: usize) -> Conversation {
        let runs = (0..runs)
            .map(|t| {
                let mut run = run(&format!("{id}-r{t}"));
                run.conversation_id = id.to_string();
                let mut e = Event::new(EventKind::Message);
                e.text = Some(format!("{id}/{t}/{}", "x".repeat(text)));
                run.events.push(e);
                run
            })
            .collect();
        Conversation {
            id: id.to_string(),
            runs,
        }
    }

    fn column(dir: &Path, file: &str, name: &str) -> Vec<String> {
        use arrow::array::{Array, AsArray};
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            File::open(dir.join(file)).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        let mut out = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            let c = batch.column_by_name(name).unwrap().as_string::<i32>();
            out.extend((0..c.len()).map(|i| c.value(i).to_string()));
        }
        out
    }

    /// Between batches a part holds only its rows not yet encoded: each batch is written as a
    /// row group and closed, so no part keeps Parquet's column writers (and their zstd
    /// contexts) open, however many parts there are.
    #[test]
    fn no_part_holds_an_open_row_group_between_writes() {
        let dir = tempfile::tempdir().unwrap();
        let spec = crate::pipeline::store_spec();
        let mut writer = StoreWriter::create(dir.path(), 40, spec).unwrap();
        let share = StoreWriter::budget(40) / 40;
        let mut groups_written = false;
        for i in 0..400 {
            let origin = Origin {
                input_index: 0,
                record_index: i,
            };
            writer
                .write(&conversation(&format!("c{i}"), 2, 200_000), origin)
                .unwrap();
            // A part holds at most its share, and half that of runs, past which one row
            // (about 200 KB here) goes before the batch is written.
            for part in &writer.parts {
                assert_eq!(part.writer.in_progress_size(), 0);
                assert_eq!(part.runs_writer.in_progress_size(), 0);
                groups_written |= part.writer.open_chunks() > 0;
                assert!(part.events_held() < share + 210_000);
                assert!(part.runs_held() < share / 2 + 210_000);
            }
        }
        assert!(groups_written);
        writer.finish().unwrap();
    }

    /// Write `conversations` to a store of 6 parts in `dir`, its open pieces held to `limit`
    /// column chunks and, when `share` is given, each part's events written every `share`
    /// bytes. Checks the limit after every conversation; returns the most column chunks held at
    /// once and whether a piece's footer was ever seen beside a part.
    fn write_cut(
        dir: &Path,
        conversations: impl Iterator<Item = Conversation>,
        limit: usize,
        share: Option<usize>,
    ) -> (usize, bool) {
        let spec = crate::pipeline::store_spec();
        let mut writer = StoreWriter::create(dir, 6, spec).unwrap();
        writer.open_chunk_limit = limit;
        if let Some(share) = share {
            for part in &mut writer.parts {
                part.builder = EventsBuilder::new(spec.clone(), share);
            }
        }
        let (mut most, mut pieces_seen) = (0, false);
        for (i, conversation) in conversations.enumerate() {
            let origin = Origin {
                input_index: 0,
                record_index: i as u64,
            };
            writer.write(&conversation, origin).unwrap();
            let held: usize = writer
                .parts
                .iter()
                .map(|p| p.writer.open_chunks() + p.runs_writer.open_chunks())
                .sum();
            assert_eq!(held, writer.open_chunks);
            assert!(held <= limit, "{held} column chunks open, limit {limit}");
            most = most.max(held);
            pieces_seen |= std::fs::read_dir(dir.join("events"))
                .unwrap()
                .any(|e| e.unwrap().file_name().to_string_lossy().contains(".piece-"));
        }
        writer.finish().unwrap();
        (most, pieces_seen)
    }

    /// The stores in `whole` and `cut` have the same 6 part files of each table, byte for byte,
    /// and nothing else (no piece's footer is left beside a part).
    fn assert_same_parts(whole: &Path, cut: &Path) {
        for table in ["events", "runs"] {
            let names = |dir: &Path| {
                let mut names: Vec<_> = std::fs::read_dir(dir.join(table))
                    .unwrap()
                    .map(|e| e.unwrap().file_name())
                    .collect();
                names.sort();
                names
            };
            assert_eq!(names(whole), names(cut));
            assert_eq!(names(cut).len(), 6);
            for name in names(whole) {
                let read = |dir: &Path| std::fs::read(dir.join(table).join(&name)).unwrap();
                assert!(read(whole) == read(cut), "{table}/{name:?} differs");
            }
        }
    }

    /// The parts' open pieces hold at most their limit of column chunks' metadata: past it, the
    /// fullest file is closed as a piece. The store written is the same, byte for byte, as one
    /// whose files were never cut, and no piece is left beside its part.
    #[test]
    fn open_pieces_stay_under_their_limit_and_the_store_is_the_same() {
        let conversations = || {
            (0..600).map(|i| {
                let text = 20_000 + (i * 7919) % 60_000;
                conversation(&format!("c{i}"), 1 + i % 4, text)
            })
        };
        let whole = tempfile::tempdir().unwrap();
        let (most, pieces) = write_cut(whole.path(), conversations(), usize::MAX, None);
        assert!(!pieces);
        let cut = tempfile::tempdir().unwrap();
        // A twentieth of what the uncut writer held at its most: files are cut many times.
        let limit = most / 20;
        let (_, pieces) = write_cut(cut.path(), conversations(), limit, None);
        assert!(pieces);
        assert_same_parts(whole.path(), cut.path());
    }

    /// Every recording under testdata (hostile files and schemas left out), read, with the
    /// names of the formats read.
    fn real_recordings() -> (
        crate::ingest::Collect,
        std::collections::BTreeSet<&'static str>,
    ) {
        use crate::ingest::{read_file, read_head, Collect, Format, Input};
        let mut files = Vec::new();
        let mut folders = vec![std::path::PathBuf::from("testdata")];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if path.is_dir() {
                    // Hostile files and schemas are not recordings.
                    if !matches!(name.as_str(), "bad" | "schemas") {
                        folders.push(path);
                    }
                } else {
                    files.push(path);
                }
            }
        }
        files.sort();
        let mut read = Collect::default();
        let mut formats = std::collections::BTreeSet::new();
        for path in &files {
            let head = read_head(path).unwrap();
            let Some(format) = Format::detect_file(path, &head) else {
                continue;
            };
            formats.insert(format.name());
            let display = path.display().to_string();
            read_file(format, &Input::new(path, &display), &mut read).unwrap();
        }
        (read, formats)
    }

    /// A run row is counted as what its columns take in every format's recordings in
    /// `testdata`, not only in runs made up: each format's runs are a batch of their own.
    #[test]
    fn real_run_rows_count_what_their_columns_take() {
        let (read, formats) = real_recordings();
        let mut by_format: std::collections::BTreeMap<&str, RunsBuilder> = Default::default();
        for run in read.conversations.iter().flat_map(|(c, _)| &c.runs) {
            let origin = Origin {
                input_index: 0,
                record_index: 0,
            };
            by_format
                .entry(run.format.as_str())
                .or_insert_with(|| RunsBuilder::new(1 << 20))
                .push(run, 0, origin);
        }
        assert_eq!(by_format.len(), formats.len());
        for (format, builder) in by_format {
            assert_counts_what_it_uses(builder, format);
        }
    }

    /// A store cut into pieces is the store written whole on real recordings too: every excerpt
    /// in `testdata` (each format's, with their payloads, arguments, verdicts and times), read by
    /// its adapter. They are a few MB, so each part writes its events every 16 KB to make row
    /// groups enough to cut.
    #[test]
    fn real_recordings_cut_into_pieces_make_the_same_store() {
        let (read, formats) = real_recordings();
        assert_eq!(formats.len(), 16, "formats read: {formats:?}");
        let conversations = || read.conversations.iter().map(|(c, _)| c.clone());
        let share = Some(16 << 10);
        let whole = tempfile::tempdir().unwrap();
        let (most, pieces) = write_cut(whole.path(), conversations(), usize::MAX, share);
        assert!(!pieces);
        assert!(
            most > 20 * 24,
            "{most} column chunks: too few row groups to cut"
        );
        let cut = tempfile::tempdir().unwrap();
        let (_, pieces) = write_cut(cut.path(), conversations(), most / 20, share);
        assert!(pieces);
        assert_same_parts(whole.path(), cut.path());
    }

    /// Rows copied from another store wait for the part's next row group with the rows built
    /// so far, and keep their place among them.
    #[test]
    fn copied_rows_keep_their_place_among_built_rows() {
        let source = tempfile::tempdir().unwrap();
        let spec = crate::pipeline::store_spec();
        let mut writer = StoreWriter::create(source.path(), 1, spec).unwrap();
        let origin = Origin {
            input_index: 0,
            record_index: 0,
        };
        writer
            .write(&conversation("copied", 2, 10), origin)
            .unwrap();
        writer.finish().unwrap();
        let read = |file: &str| {
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                File::open(source.path().join(file)).unwrap(),
            )
            .unwrap()
            .build()
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
        };
        let (runs, events) = (read(&runs_part_name(0)), read("events/part-00000.parquet"));

        let dir = tempfile::tempdir().unwrap();
        let mut writer = StoreWriter::create(dir.path(), 1, spec).unwrap();
        writer
            .write(&conversation("before", 1, 10), origin)
            .unwrap();
        writer.copy_rows(0, &runs, &events).unwrap();
        writer.write(&conversation("after", 1, 10), origin).unwrap();
        writer.finish().unwrap();
        let expected = ["before-r0", "copied-r0", "copied-r1", "after-r0"];
        assert_eq!(column(dir.path(), &runs_part_name(0), "run_id"), expected);
        assert_eq!(
            column(dir.path(), "events/part-00000.parquet", "run_id"),
            expected
        );
    }

    /// A store of one part holding one conversation of three runs.
    fn one_part_store() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = StoreWriter::create(dir.path(), 1, crate::pipeline::store_spec()).unwrap();
        let origin = Origin {
            input_index: 0,
            record_index: 0,
        };
        writer.write(&conversation("c", 3, 10), origin).unwrap();
        writer.finish().unwrap();
        dir
    }

    /// Parts are written in version 2 data pages (compressed where they lie) with the
    /// encodings version 1 pages had.
    #[test]
    fn parts_are_written_in_version_2_pages_with_plain_text() {
        use parquet::basic::{Encoding, PageType};
        use parquet::file::reader::FileReader;
        let dir = one_part_store();
        let file = dir.path().join("events/part-00000.parquet");
        let reader =
            parquet::file::serialized_reader::SerializedFileReader::new(File::open(file).unwrap())
                .unwrap();
        let group = reader.get_row_group(0).unwrap();
        // Each column's data pages: their kind and value encoding.
        let pages = |name: &str| -> Vec<(PageType, Encoding)> {
            let column = group
                .metadata()
                .columns()
                .iter()
                .position(|c| c.column_path().string() == name)
                .unwrap();
            group
                .get_column_page_reader(column)
                .unwrap()
                .map(|page| page.unwrap())
                .filter(|page| page.page_type() != PageType::DICTIONARY_PAGE)
                .map(|page| (page.page_type(), page.encoding()))
                .collect()
        };
        let v2 = PageType::DATA_PAGE_V2;
        // Long text and booleans plain, as version 1 stored them; counters delta-encoded and
        // names dictionary-encoded, as asked.
        assert_eq!(pages("text"), [(v2, Encoding::PLAIN)]);
        assert_eq!(pages("error"), [(v2, Encoding::PLAIN)]);
        assert_eq!(pages("seq"), [(v2, Encoding::DELTA_BINARY_PACKED)]);
        assert_eq!(pages("run_id"), [(v2, Encoding::RLE_DICTIONARY)]);
    }

    /// The store's parts keep statistics per column chunk (readers choose row groups by the
    /// `part` column's range) and no page index, which a writer holds for every row group
    /// until its file is closed.
    #[test]
    fn parts_have_chunk_statistics_and_no_page_index() {
        let dir = one_part_store();
        for file in ["events/part-00000.parquet".to_string(), runs_part_name(0)] {
            let reader = parquet::file::serialized_reader::SerializedFileReader::new(
                File::open(dir.path().join(&file)).unwrap(),
            )
            .unwrap();
            use parquet::file::reader::FileReader;
            let group = reader.metadata().row_group(0);
            for chunk in group.columns() {
                assert!(chunk.offset_index_offset().is_none(), "{file}");
                assert!(chunk.column_index_offset().is_none(), "{file}");
            }
            let run_id = group
                .columns()
                .iter()
                .find(|c| c.column_path().string() == "run_id")
                .unwrap();
            assert!(run_id.statistics().is_some(), "{file}");
        }
    }
}
