//! The `attempts` corpus table: one row per ledger row, with what the pass concluded about it.

use super::judge::{Judgement, RowCheck};
use super::row::AttemptRow;
use crate::model::{vocab, Run};
use arrow::datatypes::{DataType, Field, Schema};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The corpus table this pass owns.
pub const TABLE: &str = "attempts";

/// One `attempts` table row.
pub(super) fn table_row(
    run: &Run,
    row: &AttemptRow,
    check: &RowCheck,
    ledger_source: &str,
) -> Value {
    // Room for every column at once: a ledger row is one map of 21 members.
    let mut m = Map::with_capacity(21);
    m.insert("run_id".into(), json!(run.run_id));
    m.insert("conversation_id".into(), json!(run.conversation_id));
    m.insert("turn".into(), json!(run.turn));
    m.insert("source".into(), json!(vocab::source_family(&run.format)));
    m.insert("attempt".into(), json!(row.attempt));
    m.insert("iteration".into(), json!(row.iteration));
    m.insert("outcome".into(), json!(row.outcome.as_str()));
    m.insert("stage".into(), json!(row.stage));
    m.insert("error".into(), json!(row.error));
    m.insert("path".into(), json!(row.path));
    m.insert(
        "corrective_message_hash".into(),
        json!(row.corrective_message_hash),
    );
    m.insert("broken_by".into(), json!(row.broken_by));
    m.insert("stop_reason".into(), json!(row.stop_reason));
    m.insert("hash_joined".into(), json!(check.hash_joined));
    m.insert("event_joined".into(), json!(check.event_joined));
    m.insert("joins".into(), json!(check.joins));
    m.insert(
        "revalidated".into(),
        json!(check.judgement.as_ref().map(Judgement::label)),
    );
    m.insert(
        "revalidation_detail".into(),
        json!(check.judgement.as_ref().and_then(Judgement::detail)),
    );
    m.insert("ledger".into(), json!(ledger_source));
    m.insert("outcome_inferred".into(), json!(row.inferred));
    m.insert("answer_fingerprint".into(), json!(check.answer_fingerprint));
    Value::Object(m)
}

/// The `attempts` table schema (documented in `schemas/corpus.md`).
pub fn attempts_schema() -> Arc<Schema> {
    let utf8 = |n: &str, nullable: bool| Field::new(n, DataType::Utf8, nullable);
    Arc::new(Schema::new(vec![
        utf8("run_id", false),
        utf8("conversation_id", false),
        Field::new("turn", DataType::UInt32, false),
        utf8("source", false),
        Field::new("attempt", DataType::UInt32, false),
        Field::new("iteration", DataType::UInt32, true),
        utf8("outcome", false),
        utf8("stage", true),
        utf8("error", true),
        utf8("path", true),
        utf8("corrective_message_hash", true),
        utf8("broken_by", true),
        utf8("stop_reason", true),
        Field::new("hash_joined", DataType::Boolean, true),
        Field::new("event_joined", DataType::Boolean, true),
        Field::new(
            "joins",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, false))),
            false,
        ),
        utf8("revalidated", true),
        utf8("revalidation_detail", true),
        utf8("ledger", false),
        Field::new("outcome_inferred", DataType::Boolean, false),
        utf8("answer_fingerprint", true),
    ]))
}
