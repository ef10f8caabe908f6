//! mozilla-ai any-agent traces: the `AgentTrace` JSON document any-agent writes for one agent
//! run (`{"spans": [...], "final_output": ...}`), its OpenTelemetry GenAI spans serialised as
//! plain JSON (not OTLP).
//!
//! # Shape
//! A span is `{name, kind, parent, start_time, end_time, status, context, attributes, links,
//! events, resource}`. `context` and `parent` are `{trace_id, span_id, is_remote, ...}` with the
//! ids as decimal integers (a trace id is 128 bits, past what a JSON number holds exactly, so
//! the ids are read from the document's text); times are nanoseconds; `status` is
//! `{status_code: "ok" | "error" | "unset", description}`; attribute values are plain JSON.
//!
//! # Mapping
//! Each span becomes one span of the OpenTelemetry reader ([`otel::Span`]) and the file's
//! spans are built into runs by its assembly, as one complete trace: the `invoke_agent` span
//! is the run, `call_llm` spans are model calls, `execute_tool` spans are landings. any-agent's
//! own attribute names are translated on the way:
//! - `gen_ai.operation.name = call_llm` is read as a chat call;
//! - a model call's `gen_ai.output` (with `gen_ai.output.type`) is its output message: a list of
//!   `{"tool.name", "tool.args"}` is an assistant message of tool calls, anything else its text;
//! - a tool span's `gen_ai.tool.args` and `gen_ai.output` are the call's arguments and result;
//! - `gen_ai.input.messages` (JSON text of `{role, content}` messages) is read as written;
//! - the document's `final_output` is the answer of the run of the root agent span.
//!
//! Every span is one record. A span without a trace or span id is dropped; a span kind,
//! operation, status or event of a shape not listed here is kept, with a partial note.

use crate::error::Error;
use std::io;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::ingest::json_pick::{dropped, partial};
use crate::ingest::limits::read_document;
use crate::ingest::otel::{self, Span, SpanEvent};
use crate::ingest::{Input, Locator, Quarantined, Sink};
use crate::js;
use crate::model::Conversation;

/// The format name of runs read from any-agent traces.
pub const FORMAT: &str = "any-agent";

/// OpenTelemetry's span kinds, as any-agent writes them.
const SPAN_KINDS: [&str; 5] = ["internal", "server", "client", "producer", "consumer"];
/// The operations any-agent writes.
const OPERATIONS: [&str; 3] = ["invoke_agent", "call_llm", "execute_tool"];

/// Is this the head of an any-agent trace? A top-level object whose `spans` list holds spans
/// with any-agent's `context` and `attributes` members, or (for a head cut short) whose first
/// key is `spans` followed by a span object with a `kind` written in lower case.
pub fn detect(head: &str) -> bool {
    let Some(rest) = head.strip_prefix('{').map(str::trim_start) else {
        return false;
    };
    let Some(rest) = rest.strip_prefix("\"spans\"") else {
        return false;
    };
    let Some(rest) = rest.trim_start().strip_prefix(':') else {
        return false;
    };
    let Some(rest) = rest.trim_start().strip_prefix('[') else {
        return false;
    };
    let rest = rest.trim_start();
    if rest.starts_with(']') {
        // An empty trace: only the document's other key tells it apart.
        return head.contains("\"final_output\"");
    }
    rest.starts_with('{')
        && rest.contains("\"context\"")
        && rest.contains("\"attributes\"")
        && SPAN_KINDS.iter().any(|k| {
            rest.contains(&format!("\"kind\": \"{k}\""))
                || rest.contains(&format!("\"kind\":\"{k}\""))
        })
}

#[derive(Deserialize)]
struct Doc<'a> {
    #[serde(borrow)]
    spans: Option<Vec<&'a RawValue>>,
    #[serde(borrow)]
    final_output: Option<&'a RawValue>,
}

/// The id members of a span, kept as written.
#[derive(Deserialize)]
struct Ids<'a> {
    #[serde(borrow)]
    context: Option<IdPair<'a>>,
    #[serde(borrow)]
    parent: Option<IdPair<'a>>,
}

#[derive(Deserialize)]
struct IdPair<'a> {
    #[serde(borrow)]
    trace_id: Option<&'a RawValue>,
    #[serde(borrow)]
    span_id: Option<&'a RawValue>,
    #[serde(default)]
    is_remote: Option<bool>,
}

/// An id as lower-case hex (`digits` wide): a decimal integer as any-agent writes it, or a
/// string (hex as OTLP writes it, or decimal digits).
fn id_text(raw: &RawValue, digits: usize) -> Option<String> {
    let text = raw.get().trim();
    let number = if text.starts_with('"') {
        let s: String = serde_json::from_str(text).ok()?;
        let s = s.trim();
        if s.is_empty() {
            return None;
        }
        let hex = s.strip_prefix("0x").unwrap_or(s);
        if hex.len() == digits && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Some(hex.to_ascii_lowercase());
        }
        s.parse::<u128>().ok()?
    } else {
        text.parse::<u128>().ok()?
    };
    if number == 0 {
        return None;
    }
    Some(format!("{number:0digits$x}"))
}

/// Read one any-agent trace file: its spans go to the OpenTelemetry assembly as one trace.
pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    let bytes = match read_document(input.path, &input.limits)? {
        Ok(bytes) => bytes,
        Err(reason) => {
            sink.records_read(1);
            sink.quarantine(dropped(input, FORMAT, Locator::File, reason.to_string()));
            return Ok(());
        }
    };
    let doc = std::str::from_utf8(&bytes)
        .map_err(|e| format!("the file is not valid UTF-8 (byte {})", e.valid_up_to()))
        .and_then(|text| {
            serde_json::from_str::<Doc<'_>>(text)
                .map_err(|e| format!("the file is not an any-agent trace: {e}"))
        });
    let doc = match doc {
        Ok(Doc {
            spans: Some(spans),
            final_output,
        }) => (spans, final_output),
        Ok(Doc { spans: None, .. }) => {
            sink.records_read(1);
            sink.quarantine(dropped(
                input,
                FORMAT,
                Locator::File,
                "the document has no `spans` list",
            ));
            return Ok(());
        }
        Err(reason) => {
            sink.records_read(1);
            sink.quarantine(dropped(input, FORMAT, Locator::File, reason));
            return Ok(());
        }
    };
    let (raw_spans, final_output) = doc;
    sink.records_read(raw_spans.len() as u64);
    let file: Arc<str> = Arc::from(input.display);
    let mut spans = Vec::with_capacity(raw_spans.len());
    let mut notes = Vec::new();
    for (i, raw) in raw_spans.iter().enumerate() {
        let locator = Locator::Record(i as u64);
        match span_of(raw, i as u64, &file, &mut |reason| {
            notes.push(partial(input, FORMAT, locator.clone(), reason))
        }) {
            Ok(span) => spans.push(span),
            Err(reason) => {
                sink.quarantine(dropped(input, FORMAT, locator.clone(), reason.to_string()))
            }
        }
    }
    if let Some(answer) = final_output.and_then(|raw| js::parse_json(raw.get()).ok()) {
        if !answer.is_null() {
            set_answer(&mut spans, answer);
        }
    }
    for q in notes {
        sink.quarantine(q);
    }
    if spans.is_empty() {
        return Ok(());
    }
    // One document holds one trace; spans of another trace id (none in what any-agent writes)
    // are built as traces of their own.
    let mut traces: Vec<(String, Vec<Span>)> = Vec::new();
    let mut trace_at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for span in spans {
        match trace_at.get(&span.trace_id) {
            Some(&at) => traces[at].1.push(span),
            None => {
                trace_at.insert(span.trace_id.clone(), traces.len());
                traces.push((span.trace_id.clone(), vec![span]));
            }
        }
    }
    let mut renamed = Renamed { inner: sink };
    otel::assemble_spans(traces, &mut renamed);
    Ok(())
}

/// The root agent span carries the document's final output (as pydantic-ai's `final_result`,
/// which the assembly reads as the run's answer).
fn set_answer(spans: &mut [Span], answer: Value) {
    let ids: std::collections::HashSet<String> = spans.iter().map(|s| s.span_id.clone()).collect();
    let root = spans.iter_mut().find(|s| {
        s.str_attr("gen_ai.operation.name") == Some("invoke_agent")
            && s.parent_id.as_ref().is_none_or(|p| !ids.contains(p))
    });
    if let Some(root) = root {
        root.attrs.entry("final_result").or_insert(answer);
    }
}

/// One any-agent span as an OpenTelemetry span; `Err` when it cannot be placed in a trace.
fn span_of(
    raw: &RawValue,
    record: u64,
    file: &Arc<str>,
    note: &mut dyn FnMut(String),
) -> crate::error::Result<Span> {
    let ids: Ids<'_> = serde_json::from_str(raw.get())
        .map_err(|e| Error::Malformed(format!("the span's context is not readable: {e}")))?;
    let value = js::parse_json(raw.get())
        .map_err(|e| Error::Malformed(format!("the span is not JSON: {e}")))?;
    let Value::Object(mut obj) = value else {
        return Err(Error::Malformed(format!(
            "the span is {}, not an object",
            crate::ingest::json_pick::kind_of(&value)
        )));
    };
    let context = ids
        .context
        .ok_or_else(|| Error::Malformed("the span has no `context`".to_string()))?;
    let trace_id = context
        .trace_id
        .and_then(|t| id_text(t, 32))
        .ok_or_else(|| Error::Malformed("the span has no trace id".to_string()))?;
    let span_id = context
        .span_id
        .and_then(|t| id_text(t, 16))
        .ok_or_else(|| Error::Malformed("the span has no span id".to_string()))?;
    let (parent_id, remote_parent) = match &ids.parent {
        Some(p) => (
            p.span_id.and_then(|t| id_text(t, 16)),
            p.is_remote.unwrap_or(false),
        ),
        None => (None, false),
    };
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    match obj.get("kind") {
        Some(Value::String(k)) if SPAN_KINDS.contains(&k.to_ascii_lowercase().as_str()) => {}
        None | Some(Value::Null) => {}
        Some(other) => note(format!(
            "span `{name}`: kind {} is not an OpenTelemetry span kind; the span is read as internal",
            js::stringify(other)
        )),
    }
    let start_ns = obj.get("start_time").and_then(Value::as_i64);
    let end_ns = obj.get("end_time").and_then(Value::as_i64);
    let (status, status_message) = status_of(obj.get("status"), &name, note);
    let mut attrs = match obj.remove("attributes") {
        Some(Value::Object(a)) => a,
        None | Some(Value::Null) => Map::new(),
        Some(other) => {
            note(format!(
                "span `{name}`: attributes are {}, not an object; they were not read",
                crate::ingest::json_pick::kind_of(&other)
            ));
            Map::new()
        }
    };
    translate(&mut attrs, &name, note);
    let events = events_of(obj.get("events"), &name, note);
    Ok(Span {
        trace_id,
        span_id,
        parent_id,
        remote_parent,
        name,
        start_ns,
        end_ns,
        status,
        status_message,
        attrs,
        events,
        file: file.clone(),
        locator: Locator::Record(record),
        record,
    })
}

fn status_of(v: Option<&Value>, name: &str, note: &mut dyn FnMut(String)) -> (u8, Option<String>) {
    let Some(Value::Object(s)) = v else {
        if v.is_some_and(|v| !v.is_null()) {
            note(format!(
                "span `{name}`: its status is not an object; read as unset"
            ));
        }
        return (0, None);
    };
    let message = s
        .get("description")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .map(str::to_string);
    let code = match s.get("status_code") {
        Some(Value::String(c)) => match c.to_ascii_lowercase().as_str() {
            "unset" => 0,
            "ok" => 1,
            "error" => 2,
            _ => {
                note(format!(
                    "span `{name}`: status code {c:?} is not OpenTelemetry's; read as unset"
                ));
                0
            }
        },
        None | Some(Value::Null) => 0,
        Some(other) => {
            note(format!(
                "span `{name}`: status code {} is not OpenTelemetry's; read as unset",
                js::stringify(other)
            ));
            0
        }
    };
    (code, message)
}

/// Span events: `{name, timestamp, attributes}`.
fn events_of(v: Option<&Value>, name: &str, note: &mut dyn FnMut(String)) -> Vec<SpanEvent> {
    let items = match v {
        Some(Value::Array(items)) => items,
        None | Some(Value::Null) => return Vec::new(),
        Some(_) => {
            note(format!(
                "span `{name}`: its events are not a list; they were not read"
            ));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for e in items {
        let event_name = e.get("name").and_then(Value::as_str);
        let Some(event_name) = event_name else {
            note(format!(
                "span `{name}`: an event without a name was not read"
            ));
            continue;
        };
        let attrs = match e.get("attributes") {
            Some(Value::Object(a)) => a.clone(),
            _ => Map::new(),
        };
        out.push(SpanEvent {
            name: event_name.to_string(),
            time_ns: e.get("timestamp").and_then(Value::as_i64),
            attrs,
        });
    }
    out
}

/// any-agent's attribute names and shapes into those the OpenTelemetry assembly reads.
fn translate(attrs: &mut Map<String, Value>, name: &str, note: &mut dyn FnMut(String)) {
    // Message lists written as JSON text are read as the structures they hold.
    if let Some(Value::String(text)) = attrs.get("gen_ai.input.messages") {
        match js::parse_json(text) {
            Ok(parsed @ (Value::Array(_) | Value::Object(_))) => {
                attrs.insert("gen_ai.input.messages".into(), parsed);
            }
            _ => note(format!(
                "span `{name}`: gen_ai.input.messages is not a JSON message list; read as one message's text"
            )),
        }
    }
    let op = attrs
        .get("gen_ai.operation.name")
        .and_then(Value::as_str)
        .map(str::to_string);
    match op.as_deref() {
        Some("call_llm") => {
            attrs.insert("gen_ai.operation.name".into(), Value::String("chat".into()));
            if let Some(output) = attrs.remove("gen_ai.output") {
                let json = attrs.get("gen_ai.output.type").and_then(Value::as_str) == Some("json");
                if let Some(message) = output_message(&output, json, name, note) {
                    attrs
                        .entry("gen_ai.output.messages")
                        .or_insert(Value::Array(vec![message]));
                }
            }
        }
        Some("execute_tool") => {
            if let Some(args) = attrs.remove("gen_ai.tool.args") {
                attrs.entry("gen_ai.tool.call.arguments").or_insert(args);
            }
            if let Some(result) = attrs.remove("gen_ai.output") {
                attrs.entry("gen_ai.tool.call.result").or_insert(result);
            }
        }
        Some("invoke_agent") => {}
        Some(other) => note(format!(
            "span `{name}`: operation {other:?} is none of any-agent's ({}); the span is kept only as part of the trace",
            OPERATIONS.join(", ")
        )),
        None => {}
    }
}

/// A model call's output as one assistant message in the GenAI parts shape.
fn output_message(
    output: &Value,
    json: bool,
    name: &str,
    note: &mut dyn FnMut(String),
) -> Option<Value> {
    let parsed = match output {
        Value::String(text) if json => js::parse_json(text).ok(),
        Value::Null => return None,
        Value::String(_) => None,
        other => Some(other.clone()),
    };
    let calls = parsed.as_ref().and_then(tool_calls);
    let parts = match calls {
        Some(calls) => calls,
        None => {
            let text = match output {
                Value::String(s) => s.clone(),
                other => js::stringify(other),
            };
            if parsed
                .as_ref()
                .and_then(Value::as_array)
                .is_some_and(|items| items.iter().any(|i| i.get("tool.name").is_some()))
            {
                note(format!(
                    "span `{name}`: a tool call in gen_ai.output has no tool name; the output is read as text"
                ));
            }
            vec![part("text", [("content", Value::String(text))])]
        }
    };
    let mut message = Map::new();
    message.insert("role".into(), Value::String("assistant".into()));
    message.insert("parts".into(), Value::Array(parts));
    Some(Value::Object(message))
}

/// `[{"tool.name", "tool.args"}, ...]` as `tool_call` parts; `None` when it is not that list.
fn tool_calls(v: &Value) -> Option<Vec<Value>> {
    let items = v.as_array()?;
    if items.is_empty() {
        return None;
    }
    items
        .iter()
        .map(|c| {
            let tool = c.get("tool.name")?.as_str()?;
            let mut fields = vec![("name", Value::String(tool.to_string()))];
            if let Some(args) = c.get("tool.args").filter(|a| !a.is_null()) {
                fields.push(("arguments", args.clone()));
            }
            Some(part("tool_call", fields))
        })
        .collect()
}

fn part(kind: &str, fields: impl IntoIterator<Item = (&'static str, Value)>) -> Value {
    let mut p = Map::new();
    p.insert("type".into(), Value::String(kind.into()));
    for (k, v) in fields {
        p.insert(k.into(), v);
    }
    Value::Object(p)
}

/// Hands on what the OpenTelemetry assembly built, under this format's name.
struct Renamed<'s> {
    inner: &'s mut dyn Sink,
}

impl Sink for Renamed<'_> {
    fn conversation(&mut self, mut conversation: Conversation, record: u64) {
        for run in &mut conversation.runs {
            run.format = FORMAT.to_string();
        }
        self.inner.conversation(conversation, record);
    }
    fn quarantine(&mut self, mut item: Quarantined) {
        if item.format.is_some() {
            item.format = Some(FORMAT);
        }
        self.inner.quarantine(item);
    }
    fn records_read(&mut self, n: u64) {
        self.inner.records_read(n);
    }
}

/// mozilla-ai any-agent `AgentTrace` JSON documents.
pub struct AnyAgentAdapter;

impl crate::ingest::Adapter for AnyAgentAdapter {
    fn name(&self) -> &'static str {
        FORMAT
    }
    fn family(&self) -> &'static str {
        "any-agent"
    }
    fn about(&self) -> &'static str {
        "mozilla-ai any-agent traces: an AgentTrace JSON document of OpenTelemetry GenAI spans"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        crate::ingest::Match::strong_if(detect(head.text))
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
        read(input, sink)
    }
}

impl crate::ingest::Format {
    #[allow(non_upper_case_globals)]
    pub const AnyAgent: crate::ingest::Format = crate::ingest::Format(&AnyAgentAdapter);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_hex_of_the_written_integers() {
        let raw = |t: &str| serde_json::from_str::<&RawValue>(t).unwrap().to_owned();
        assert_eq!(
            id_text(&raw("100927429609276267646756448943279827607"), 32),
            Some(format!(
                "{:032x}",
                100927429609276267646756448943279827607u128
            ))
        );
        assert_eq!(id_text(&raw("1"), 16).as_deref(), Some("0000000000000001"));
        assert_eq!(
            id_text(&raw("\"00f067aa0ba902b7\""), 16).as_deref(),
            Some("00f067aa0ba902b7")
        );
        assert_eq!(id_text(&raw("0"), 16), None);
        assert_eq!(id_text(&raw("null"), 16), None);
        assert_eq!(id_text(&raw("-3"), 16), None);
    }

    #[test]
    fn detects_its_own_shape_only() {
        let span = r#"{"spans": [{"name": "call_llm m", "kind": "internal", "parent": null, "context": {"trace_id": 1, "span_id": 2}, "attributes": {}}]}"#;
        assert!(detect(span));
        assert!(detect(r#"{"spans": [], "final_output": null}"#));
        assert!(!detect(r#"{"spans": []}"#));
        assert!(!detect(r#"{"resourceSpans": []}"#));
        assert!(!detect(
            r#"{"spans": [{"name": "x", "kind": "SPAN_KIND_INTERNAL", "attributes": {}}]}"#
        ));
    }

    #[test]
    fn model_output_is_tool_calls_or_text() {
        let mut none = |_: String| panic!("no note expected");
        let calls = output_message(
            &Value::String(r#"[{"tool.name": "f", "tool.args": "{\"a\": 1}"}]"#.into()),
            true,
            "s",
            &mut none,
        )
        .unwrap();
        assert_eq!(calls["parts"][0]["type"], "tool_call");
        assert_eq!(calls["parts"][0]["name"], "f");
        assert_eq!(calls["parts"][0]["arguments"], r#"{"a": 1}"#);
        let text = output_message(
            &Value::String(r#"{"steps": []}"#.into()),
            true,
            "s",
            &mut none,
        )
        .unwrap();
        assert_eq!(text["parts"][0]["type"], "text");
        assert_eq!(text["parts"][0]["content"], r#"{"steps": []}"#);
    }
}
