//! The span as every part of the OpenTelemetry reader sees it, whatever wire it came from (OTLP
//! JSON, OTLP protobuf, any-agent's JSON): its fields and attribute accessors, the batch of one
//! file's spans by trace, when a trace is whole, and the format names runs are stored under.
//! Everything else in `otel/` builds on this file, and it on nothing of theirs.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::ingest::Locator;

/// The format name of runs read from GenAI spans.
pub const FORMAT: &str = "otel";
/// The format name of runs whose spans carry OpenInference attributes.
pub const FORMAT_OPENINFERENCE: &str = "openinference";

/// One span, reduced to what the run builder reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub trace_id: String,
    pub span_id: String,
    pub parent_id: Option<String>,
    /// The parent lives in another process (W3C remote flag): the span is a local root.
    pub remote_parent: bool,
    pub name: String,
    pub start_ns: Option<i64>,
    pub end_ns: Option<i64>,
    /// 0 unset, 1 ok, 2 error.
    pub status: u8,
    pub status_message: Option<String>,
    pub attrs: Map<String, Value>,
    pub events: Vec<SpanEvent>,
    /// The file the span was read from (as written into the store).
    pub file: Arc<str>,
    pub locator: Locator,
    /// 0-based position of the span among the spans of its file.
    pub record: u64,
}

/// A span event (`exception`, or a deprecated per-message GenAI event).
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    pub name: String,
    pub time_ns: Option<i64>,
    pub attrs: Map<String, Value>,
}

impl Span {
    pub fn attr(&self, key: &str) -> Option<&Value> {
        self.attrs.get(key).filter(|v| !v.is_null())
    }

    pub fn str_attr(&self, key: &str) -> Option<&str> {
        self.attrs.get(key).and_then(Value::as_str)
    }

    pub(super) fn int_attr(&self, key: &str) -> Option<i64> {
        self.attrs.get(key).and_then(Value::as_i64)
    }

    pub(super) fn op(&self) -> Option<&str> {
        self.str_attr("gen_ai.operation.name")
    }

    pub(super) fn start_ms(&self) -> Option<i64> {
        self.start_ns.map(|n| n.div_euclid(1_000_000))
    }

    pub(super) fn duration_ms(&self) -> Option<f64> {
        match (self.start_ns, self.end_ns) {
            (Some(s), Some(e)) if e >= s => Some((e - s) as f64 / 1e6),
            _ => None,
        }
    }

    pub(super) fn is_root(&self, ids: &HashSet<&str>) -> bool {
        match &self.parent_id {
            None => true,
            Some(p) => self.remote_parent || !ids.contains(p.as_str()),
        }
    }
}

/// The spans one input file held, grouped by trace in order of first appearance.
#[derive(Debug, Default)]
pub struct SpanBatch {
    pub traces: Vec<(String, Vec<Span>)>,
}

/// A trace whose spans are all present: a root, and every parent a span names.
pub(super) fn is_complete<'a>(spans: impl Iterator<Item = &'a Span> + Clone) -> bool {
    let ids: HashSet<&str> = spans.clone().map(|s| s.span_id.as_str()).collect();
    let mut roots = 0;
    for s in spans {
        match &s.parent_id {
            None => roots += 1,
            Some(_) if s.remote_parent => roots += 1,
            Some(p) if ids.contains(p.as_str()) => {}
            Some(_) => return false,
        }
    }
    roots > 0
}

/// Rebuild the list a writer flattened into `{prefix}{i}.{path}` keys: one object per index, in
/// index order, with dotted paths turned back into nested objects and numbered members into
/// lists (`llm.input_messages.0.message.tool_calls.1.tool_call.id`).
pub fn unflatten(attrs: &Map<String, Value>, prefix: &str) -> Vec<Value> {
    let mut items: BTreeMap<u64, Value> = BTreeMap::new();
    for (key, value) in attrs {
        let Some(rest) = key.strip_prefix(prefix) else {
            continue;
        };
        let Some((index, path)) = rest.split_once('.') else {
            continue;
        };
        let Ok(index) = index.parse::<u64>() else {
            continue;
        };
        let item = items
            .entry(index)
            .or_insert_with(|| Value::Object(Map::new()));
        let segments: Vec<&str> = path.split('.').collect();
        insert_path(item, &segments, value.clone());
    }
    items.into_values().map(listify).collect()
}

fn insert_path(target: &mut Value, segments: &[&str], value: Value) {
    let Value::Object(map) = target else {
        return;
    };
    match segments {
        [] => {}
        [last] => {
            map.entry(last.to_string()).or_insert(value);
        }
        [first, rest @ ..] => {
            let child = map
                .entry(first.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            insert_path(child, rest, value);
        }
    }
}

/// Objects whose keys are all numbers become lists in numeric order.
fn listify(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            let numeric = !map.is_empty() && map.keys().all(|k| k.parse::<u64>().is_ok());
            if numeric {
                let mut entries: Vec<(u64, Value)> = map
                    .into_iter()
                    .map(|(k, v)| (k.parse().unwrap_or(0), listify(v)))
                    .collect();
                entries.sort_by_key(|e| e.0);
                Value::Array(entries.into_iter().map(|e| e.1).collect())
            } else {
                Value::Object(map.into_iter().map(|(k, v)| (k, listify(v))).collect())
            }
        }
        other => other,
    }
}
