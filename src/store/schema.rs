//! The Arrow schemas of the store, in one place. `schemas/store.md` documents every column; a
//! test compares the two so that code and document cannot drift apart.

use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use std::sync::Arc;

/// Bumped when a column is added, removed or changes type, or the layout changes (version 9:
/// generations, which an engine that does not know them would read only the first of;
/// version 10: a runs file per part, which an engine that reads `runs.parquet` would miss).
pub const STORE_SCHEMA_VERSION: u32 = 10;

/// The store versions this engine audits: version 7 lacks only the runs' `partitions`, which
/// no check reads (a report grouping by partition asks for a newer store); version 8 is 9
/// without generations (one, at the root); version 9 is 10 with one runs file per generation.
pub const READABLE_STORE_VERSIONS: std::ops::RangeInclusive<u32> = 7..=STORE_SCHEMA_VERSION;

/// The runs' columns an audit does not need, which older stores lack.
pub const RUNS_OPTIONAL: &[&str] = &["partitions"];

/// The runs' partition values (see [`crate::store::partitions`]): a map from key to value.
pub fn partitions_type() -> DataType {
    let entries = Field::new(
        "entries",
        DataType::Struct(
            vec![
                Field::new("key", DataType::Utf8, false),
                Field::new("value", DataType::Utf8, true),
            ]
            .into(),
        ),
        false,
    );
    DataType::Map(Arc::new(entries), false)
}

pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// One row per recorded event, in the store's `events/part-NNNNN.parquet` files.
pub fn events_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("conversation_id", DataType::Utf8, false),
        Field::new("run_id", DataType::Utf8, false),
        Field::new("seq", DataType::UInt32, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("source_type", DataType::Utf8, true),
        Field::new("role", DataType::Utf8, true),
        Field::new("tool_name", DataType::Utf8, true),
        Field::new("call_id", DataType::Utf8, true),
        Field::new("arguments", DataType::LargeUtf8, true),
        Field::new("text", DataType::LargeUtf8, true),
        Field::new("message_text", DataType::LargeUtf8, true),
        Field::new("result_text", DataType::LargeUtf8, true),
        Field::new("result_text_of", DataType::UInt32, true),
        Field::new("arguments_fingerprint", DataType::Utf8, true),
        Field::new("result_fingerprint", DataType::Utf8, true),
        Field::new("evidence_forms", DataType::LargeUtf8, true),
        Field::new("evidence_offers", DataType::UInt32, true),
        Field::new("error", DataType::Boolean, false),
        Field::new("flags", DataType::UInt32, false),
        Field::new("iteration", DataType::UInt32, true),
        Field::new("timestamp", timestamp_type(), true),
        Field::new("duration_ms", DataType::Float64, true),
        Field::new("payload", DataType::LargeUtf8, true),
        Field::new("archived_payload", DataType::LargeUtf8, true),
    ]))
}

/// One row per run, in the runs file of its part (`runs/part-NNNNN.parquet`).
pub fn runs_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("run_id", DataType::Utf8, false),
        Field::new("conversation_id", DataType::Utf8, false),
        Field::new("turn", DataType::UInt32, false),
        Field::new("format", DataType::Utf8, false),
        Field::new("source", DataType::Utf8, false),
        Field::new("agent", DataType::Utf8, true),
        Field::new("model", DataType::Utf8, true),
        Field::new("started_at", timestamp_type(), true),
        Field::new("ended_at", timestamp_type(), true),
        Field::new("duration_ms", DataType::Float64, true),
        Field::new("user_message", DataType::LargeUtf8, true),
        Field::new("answer", DataType::LargeUtf8, true),
        Field::new("answer_forms", DataType::LargeUtf8, true),
        Field::new("answer_offers", DataType::UInt32, true),
        Field::new("landings", DataType::UInt32, false),
        Field::new("events", DataType::UInt32, false),
        Field::new("part", DataType::UInt32, false),
        Field::new("input_index", DataType::UInt32, false),
        Field::new("record_index", DataType::UInt64, false),
        Field::new("partitions", partitions_type(), false),
    ]))
}

/// The runs' columns a reader of the store requires: all but [`RUNS_OPTIONAL`].
pub fn runs_read_schema() -> Arc<Schema> {
    let all = runs_schema();
    Arc::new(Schema::new(
        all.fields()
            .iter()
            .filter(|f| !RUNS_OPTIONAL.contains(&f.name().as_str()))
            .cloned()
            .collect::<Vec<_>>(),
    ))
}

// What follows checks `schemas/*.md` against the code (tests of the store and the corpus).

/// The type name as `schemas/*.md` writes it.
#[cfg(test)]
pub fn type_name(t: &DataType) -> String {
    match t {
        DataType::Utf8 => "utf8".into(),
        DataType::LargeUtf8 => "large_utf8".into(),
        DataType::Boolean => "bool".into(),
        DataType::UInt32 => "uint32".into(),
        DataType::UInt64 => "uint64".into(),
        DataType::Int64 => "int64".into(),
        DataType::Float64 => "float64".into(),
        DataType::Timestamp(TimeUnit::Millisecond, Some(tz)) => format!("timestamp[ms, {tz}]"),
        DataType::List(f) | DataType::LargeList(f) => format!("list<{}>", type_name(f.data_type())),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => format!(
                "map<{}, {}>",
                type_name(kv[0].data_type()),
                type_name(kv[1].data_type())
            ),
            other => format!("{other:?}"),
        },
        DataType::Struct(fields) => format!(
            "struct<{}>",
            fields
                .iter()
                .map(|f| format!("{}: {}", f.name(), type_name(f.data_type())))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => format!("{other:?}"),
    }
}

/// A documented table: its name and its `(column, type, nullable)` rows.
#[cfg(test)]
pub type DocTable = (String, Vec<(String, String, bool)>);

/// Parse the column tables of a schema document: for each `## table` heading, the rows
/// `| column | type | nullable | meaning |` that follow it.
#[cfg(test)]
pub fn parse_schema_doc(doc: &str) -> Vec<DocTable> {
    let mut tables: Vec<DocTable> = Vec::new();
    for line in doc.lines() {
        if let Some(name) = line.strip_prefix("## ") {
            let name = name.trim().trim_matches('`').to_string();
            tables.push((name, Vec::new()));
            continue;
        }
        let Some((_, rows)) = tables.last_mut() else {
            continue;
        };
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 5 || !cells[1].starts_with('`') {
            continue;
        }
        let column = cells[1].trim_matches('`').to_string();
        let ty = cells[2].trim_matches('`').to_string();
        let nullable = cells[3] == "yes";
        rows.push((column, ty, nullable));
    }
    tables
}

/// Compare a schema with its documented table; returns the differences in words.
#[cfg(test)]
pub fn doc_drift(schema: &Schema, documented: &[(String, String, bool)]) -> Vec<String> {
    let mut problems = Vec::new();
    let code: Vec<(String, String, bool)> = schema
        .fields()
        .iter()
        .map(|f| (f.name().clone(), type_name(f.data_type()), f.is_nullable()))
        .collect();
    for (i, c) in code.iter().enumerate() {
        match documented.get(i) {
            Some(d) if d == c => {}
            Some(d) => problems.push(format!("column {i}: code has {c:?}, document has {d:?}")),
            None => problems.push(format!("column {i}: code has {c:?}, document has nothing")),
        }
    }
    for d in documented.iter().skip(code.len()) {
        problems.push(format!("document lists {d:?}, code has no such column"));
    }
    problems
}
