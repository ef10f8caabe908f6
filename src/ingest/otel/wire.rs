//! OTLP JSON as written: files (a document, or one request per line), requests, spans,
//! attribute values and ids, read into [`Span`]s grouped by trace.

use crate::error::Error;
use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::span::{is_complete, Span, SpanBatch, SpanEvent, FORMAT};
use crate::ingest::limits::{read_bounded, read_line_bounded, Line};
use crate::ingest::{Format, Input, Limits, Locator, Quarantined, Sink};
use crate::js;

/// Attributes dropped on reading: large, and never read (tool catalogues, Logfire hints).
const SKIPPED_KEYS: [&str; 2] = ["logfire.json_schema", "gen_ai.tool.definitions"];
const SKIPPED_PREFIXES: [&str; 1] = ["llm.tools."];
/// Event attributes dropped on reading.
const SKIPPED_EVENT_KEYS: [&str; 1] = ["exception.stacktrace"];
/// Attributes whose string value is the JSON text of a structure the builder reads.
const JSON_KEYS: [&str; 8] = [
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "pydantic_ai.all_messages",
    "gen_ai.prompt",
    "gen_ai.completion",
    "events",
    "model_request_parameters",
];
/// The members of pydantic-ai's `model_request_parameters` that declare the run's output.
const OUTPUT_KEYS: [&str; 4] = [
    "output_mode",
    "output_tools",
    "output_object",
    "allow_text_output",
];

pub(super) fn read_flushing(
    input: &Input<'_>,
    sink: &mut dyn Sink,
    flush_bytes: usize,
) -> io::Result<()> {
    let file = std::fs::File::open(input.path)?;
    let file_len = file.metadata()?.len();
    let mut file = io::BufReader::new(file);
    let limit = input.limits.record_bytes;
    let mut reader = Reader::new(input.display, sink);
    // Everything read so far, up to the first line with content.
    let mut head: Vec<u8> = Vec::new();
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    loop {
        let n = match read_line_bounded(&mut file, &mut buf, limit)? {
            Line::Held(0) => break,
            Line::Held(n) => n,
            Line::TooLong(n) => {
                // Whether a document or a request, it is over the limit: the rest is read as
                // one request per line.
                line_no += 1;
                reader.too_long(line_no, n, &input.limits);
                break;
            }
        };
        line_no += 1;
        let start = head.len();
        head.extend_from_slice(&buf[..n as usize]);
        let line = &head[start..];
        let line = if start == 0 {
            line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(line)
        } else {
            line
        };
        let line = trim_line(line);
        if line.is_empty() {
            continue;
        }
        let first = std::str::from_utf8(line)
            .ok()
            .and_then(|t| js::parse_json(t).ok());
        let Some(first) = first else {
            if file_len <= limit {
                // A document over several lines (or a broken first line): read it whole.
                match read_bounded(&mut file, limit, file_len)? {
                    Ok(rest) => head.extend_from_slice(&rest),
                    Err(_) => {
                        reader.sink.records_read(1);
                        reader.drop(
                            Locator::File,
                            format!("the file grew {} while it was read", input.limits.over()),
                        );
                        return Ok(());
                    }
                }
                reader.whole(&head);
                reader.flush(false);
                return Ok(());
            }
            // Too large to read whole: one request per line when the next line is one (the
            // first is then broken), else a document over the record limit.
            let first_no = line_no;
            let first_line = head[start..].to_vec();
            let second = loop {
                match read_line_bounded(&mut file, &mut buf, limit)? {
                    Line::Held(0) => break None,
                    Line::Held(_) if trim_line(&buf).is_empty() => line_no += 1,
                    Line::Held(_) => {
                        line_no += 1;
                        break Some(buf.clone());
                    }
                    Line::TooLong(_) => break None,
                }
            };
            let is_request = second.as_deref().is_some_and(|l| {
                std::str::from_utf8(trim_line(l))
                    .ok()
                    .is_some_and(|t| js::parse_json(t).is_ok())
            });
            let Some(second) = second.filter(|_| is_request) else {
                reader.sink.records_read(1);
                reader.drop(
                    Locator::File,
                    format!(
                        "the file is a document of {}; a document is read whole, as one record",
                        input.limits.too_large(file_len)
                    ),
                );
                return Ok(());
            };
            reader.line(first_no, &first_line);
            reader.line(line_no, &second);
            break;
        };
        reader.request(&first, Some(line_no));
        break;
    }
    drop(head);
    let mut since_flush = 0usize;
    loop {
        let n = match read_line_bounded(&mut file, &mut buf, limit)? {
            Line::Held(0) => break,
            Line::Held(n) => n,
            Line::TooLong(n) => {
                line_no += 1;
                reader.too_long(line_no, n, &input.limits);
                continue;
            }
        };
        line_no += 1;
        since_flush += n as usize;
        reader.line(line_no, &buf);
        if since_flush >= flush_bytes {
            reader.flush(true);
            since_flush = 0;
        }
    }
    reader.flush(false);
    Ok(())
}

/// Parse an OTLP JSON file's bytes: count every span as a record, quarantine what cannot be
/// used, and return the usable spans grouped by trace.
#[cfg(test)]
pub fn parse(bytes: &[u8], display: &str, sink: &mut dyn Sink) -> SpanBatch {
    let mut reader = Reader::new(display, sink);
    reader.whole(bytes);
    group_by_trace(reader.spans)
}

/// One request per line? True when one of the first two non-blank lines is JSON on its own
/// (a pretty-printed or truncated document is not).
fn looks_like_lines(body: &[u8]) -> bool {
    body.split(|&b| b == b'\n')
        .map(trim_line)
        .filter(|l| !l.is_empty())
        .take(2)
        .any(|l| {
            std::str::from_utf8(l)
                .ok()
                .is_some_and(|t| js::parse_json(t).is_ok())
        })
}

fn trim_line(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    &line[start..]
}

/// One file's spans as they are read: records counted, what cannot be used quarantined, the
/// usable spans held until they are handed on.
pub(super) struct Reader<'a> {
    pub(super) file: Arc<str>,
    pub(super) sink: &'a mut dyn Sink,
    pub(super) spans: Vec<Span>,
    /// The next span's 0-based position among the spans of the file.
    pub(super) next_record: u64,
}

impl<'a> Reader<'a> {
    pub(super) fn new(display: &str, sink: &'a mut dyn Sink) -> Reader<'a> {
        Reader {
            file: Arc::from(display),
            sink,
            spans: Vec::new(),
            next_record: 0,
        }
    }

    pub(super) fn drop(&mut self, locator: Locator, reason: impl Into<String>) {
        let mut q = Quarantined::dropped(&self.file, locator, reason);
        q.format = Some(FORMAT);
        self.sink.quarantine(q);
    }

    /// A line over the record limit, read through without being held.
    fn too_long(&mut self, n: u64, bytes: u64, limits: &Limits) {
        self.sink.records_read(1);
        self.drop(
            Locator::Line(n),
            format!(
                "line is {}; it was read through without being held",
                limits.too_large(bytes)
            ),
        );
    }

    /// A whole file in memory: one document, else one request per line.
    fn whole(&mut self, bytes: &[u8]) {
        let body = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
        let whole = std::str::from_utf8(body)
            .map_err(|e| format!("the file is not valid UTF-8 (byte {})", e.valid_up_to()))
            .and_then(|text| {
                js::parse_json(text).map_err(|e| format!("the file is not JSON: {e}"))
            });
        match whole {
            Ok(doc) => self.request(&doc, None),
            Err(_) if looks_like_lines(body) => {
                for (i, raw) in body.split(|&b| b == b'\n').enumerate() {
                    self.line(i as u64 + 1, raw);
                }
            }
            Err(reason) => {
                self.sink.records_read(1);
                self.drop(Locator::File, reason);
            }
        }
    }

    /// One line of a one-request-per-line file (1-based number).
    fn line(&mut self, n: u64, raw: &[u8]) {
        let line = trim_line(raw);
        if line.is_empty() {
            return;
        }
        let parsed = std::str::from_utf8(line)
            .map_err(|e| format!("line is not valid UTF-8 (byte {})", e.valid_up_to()))
            .and_then(|t| js::parse_json(t).map_err(|e| format!("line is not JSON: {e}")));
        match parsed {
            Ok(doc) => self.request(&doc, Some(n)),
            Err(reason) => {
                self.sink.records_read(1);
                self.drop(Locator::Line(n), reason);
            }
        }
    }

    /// Hand the spans read so far to the sink: only the complete traces when `complete_only`
    /// (the others wait for more of the file), else all of them.
    pub(super) fn flush(&mut self, complete_only: bool) {
        let batch = group_by_trace(std::mem::take(&mut self.spans));
        let (ready, waiting): (Vec<_>, Vec<_>) = batch
            .traces
            .into_iter()
            .partition(|(_, spans)| !complete_only || is_complete(spans.iter()));
        self.spans = waiting.into_iter().flat_map(|(_, spans)| spans).collect();
        if !ready.is_empty() {
            self.sink.fragment(crate::ingest::Fragment {
                format: Format::Otel,
                data: Box::new(SpanBatch { traces: ready }),
            });
        }
    }

    /// One `ExportTraceServiceRequest`.
    fn request(&mut self, doc: &Value, line: Option<u64>) {
        let here = line.map_or(Locator::File, Locator::Line);
        let Some(list) = field(doc, "resourceSpans", "resource_spans").and_then(Value::as_array)
        else {
            self.sink.records_read(1);
            self.drop(
                here,
                "not an OTLP trace export request (no resourceSpans list)",
            );
            return;
        };
        for (r, resource) in list.iter().enumerate() {
            let scopes = field(resource, "scopeSpans", "scope_spans")
                .or_else(|| resource.get("instrumentationLibrarySpans"));
            let scopes = match scopes {
                None | Some(Value::Null) => None,
                Some(Value::Array(scopes)) => Some(scopes),
                Some(_) => {
                    // Its spans, if any, cannot be reached: one record, said so.
                    self.sink.records_read(1);
                    self.drop(
                        here.clone(),
                        format!("resourceSpans[{r}] has a scopeSpans that is not a list"),
                    );
                    None
                }
            };
            for (c, scope) in scopes.into_iter().flatten().enumerate() {
                let spans = match scope.get("spans") {
                    None | Some(Value::Null) => None,
                    Some(Value::Array(spans)) => Some(spans),
                    Some(_) => {
                        self.sink.records_read(1);
                        self.drop(
                            here.clone(),
                            format!(
                                "resourceSpans[{r}].scopeSpans[{c}].spans is not a list of spans"
                            ),
                        );
                        None
                    }
                };
                for span in spans.into_iter().flatten() {
                    let record = self.next_record;
                    self.next_record += 1;
                    self.sink.records_read(1);
                    let locator = line.map_or(Locator::Record(record), Locator::Line);
                    match parse_span(span, &self.file, locator.clone(), record) {
                        Ok(s) => self.spans.push(s),
                        Err(reason) => self.drop(locator, reason.to_string()),
                    }
                }
            }
        }
    }
}

/// `key` in lowerCamelCase, or the protobuf field name some writers use.
fn field<'a>(v: &'a Value, camel: &str, snake: &str) -> Option<&'a Value> {
    v.get(camel).or_else(|| v.get(snake))
}

fn parse_span(
    v: &Value,
    file: &Arc<str>,
    locator: Locator,
    record: u64,
) -> crate::error::Result<Span> {
    if !v.is_object() {
        return Err(Error::Malformed("span is not a JSON object".into()));
    }
    let trace_id = field(v, "traceId", "trace_id")
        .and_then(Value::as_str)
        .and_then(|s| normalize_id(s, 16))
        .ok_or_else(|| Error::Malformed("span has no traceId".into()))?;
    let span_id = field(v, "spanId", "span_id")
        .and_then(Value::as_str)
        .and_then(|s| normalize_id(s, 8))
        .ok_or_else(|| Error::Malformed(format!("span in trace {trace_id} has no spanId")))?;
    let parent_id = field(v, "parentSpanId", "parent_span_id")
        .and_then(Value::as_str)
        .and_then(|s| normalize_id(s, 8));
    let flags = v.get("flags").and_then(int_of).unwrap_or(0);
    let status = v.get("status");
    let status_code = status
        .and_then(|s| s.get("code"))
        .map(|c| match c {
            Value::String(s) if s.ends_with("ERROR") => 2,
            Value::String(s) if s.ends_with("OK") => 1,
            other => int_of(other).filter(|n| (0..=2).contains(n)).unwrap_or(0) as u8,
        })
        .unwrap_or(0);
    let status_message = status
        .and_then(|s| s.get("message"))
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .map(str::to_string);
    let mut attrs = attributes(v.get("attributes"), skipped_key);
    tidy_attrs(&mut attrs);
    let events = v
        .get("events")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|e| {
                    Some(SpanEvent {
                        name: e.get("name")?.as_str()?.to_string(),
                        time_ns: field(e, "timeUnixNano", "time_unix_nano").and_then(time_of),
                        attrs: attributes(e.get("attributes"), skipped_event_key),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Span {
        trace_id,
        span_id,
        parent_id,
        remote_parent: is_remote_parent(flags),
        name: v
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        start_ns: field(v, "startTimeUnixNano", "start_time_unix_nano").and_then(time_of),
        end_ns: field(v, "endTimeUnixNano", "end_time_unix_nano").and_then(time_of),
        status: status_code,
        status_message,
        attrs,
        events,
        file: file.clone(),
        locator,
        record,
    })
}

/// A span attribute dropped on reading.
pub(super) fn skipped_key(k: &str) -> bool {
    SKIPPED_KEYS.contains(&k) || SKIPPED_PREFIXES.iter().any(|p| k.starts_with(p))
}

/// A span event attribute dropped on reading.
pub(super) fn skipped_event_key(k: &str) -> bool {
    SKIPPED_EVENT_KEYS.contains(&k)
}

/// The W3C remote flag of a span's `flags` (its "has remote" and "is remote" bits both set).
pub(super) fn is_remote_parent(flags: i64) -> bool {
    flags & 0x300 == 0x300
}

/// A span's attributes as read, whatever the wire: the JSON text of the structures the builder
/// reads parsed, and pydantic-ai's request parameters cut down to the output declaration.
pub(super) fn tidy_attrs(attrs: &mut Map<String, Value>) {
    for key in JSON_KEYS {
        if let Some(Value::String(text)) = attrs.get(key) {
            if let Ok(parsed @ (Value::Array(_) | Value::Object(_))) = js::parse_json(text) {
                attrs.insert(key.to_string(), parsed);
            }
        }
    }
    // pydantic-ai's request parameters repeat the whole tool catalogue on every model call:
    // only the output declaration is read.
    if let Some(Value::Object(params)) = attrs.get_mut("model_request_parameters") {
        params.retain(|k, _| OUTPUT_KEYS.contains(&k.as_str()));
        if let Some(Value::Array(tools)) = params.get_mut("output_tools") {
            for tool in tools.iter_mut() {
                if let Value::Object(t) = tool {
                    t.retain(|k, _| k == "name" || k == "parameters_json_schema");
                }
            }
        }
    }
}

/// A trace or span id as lower-case hex. Hex ids are lower-cased; base64 ids (the plain
/// protobuf JSON mapping) of the right length are converted; anything else is kept as an opaque
/// id. Empty and all-zero ids are no ids.
pub(super) fn normalize_id(s: &str, bytes: usize) -> Option<String> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let hex = if s.len() == bytes * 2 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        s.to_ascii_lowercase()
    } else if let Some(raw) =
        crate::ingest::encoding::base64_lenient(s).filter(|raw| raw.len() == bytes)
    {
        raw.iter().map(|b| format!("{b:02x}")).collect()
    } else {
        s.to_string()
    };
    if hex.bytes().all(|b| b == b'0') {
        None
    } else {
        Some(hex)
    }
}

/// An int64 written as a JSON string or number.
fn int_of(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| n.as_u64().map(|u| u as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A `*UnixNano` timestamp; 0 means unset.
fn time_of(v: &Value) -> Option<i64> {
    int_of(v).filter(|&n| n > 0)
}

/// OTLP `[{key, value: AnyValue}]` as a JSON object. Values of unknown shape are left out.
pub(super) fn attributes(list: Option<&Value>, skip: impl Fn(&str) -> bool) -> Map<String, Value> {
    let mut out = Map::new();
    for kv in list.and_then(Value::as_array).into_iter().flatten() {
        let Some(key) = kv.get("key").and_then(Value::as_str) else {
            continue;
        };
        if skip(key) {
            continue;
        }
        if let Some(value) = kv.get("value").and_then(any_value) {
            out.insert(key.to_string(), value);
        }
    }
    out
}

/// An OTLP `AnyValue` as plain JSON; `None` for a shape this reader does not know.
pub fn any_value(v: &Value) -> Option<Value> {
    v.as_object()?;
    if let Some(s) = field(v, "stringValue", "string_value") {
        return s.as_str().map(|s| Value::String(s.to_string()));
    }
    if let Some(i) = field(v, "intValue", "int_value") {
        return int_of(i).map(Value::from);
    }
    if let Some(d) = field(v, "doubleValue", "double_value") {
        return match d {
            Value::Number(_) => Some(d.clone()),
            // NaN and the infinities are written as strings.
            Value::String(s) => Some(
                s.parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map_or_else(|| Value::String(s.clone()), Value::Number),
            ),
            _ => None,
        };
    }
    if let Some(b) = field(v, "boolValue", "bool_value") {
        return b.as_bool().map(Value::Bool);
    }
    if let Some(a) = field(v, "arrayValue", "array_value") {
        let values = a.get("values").and_then(Value::as_array);
        return Some(Value::Array(
            values.into_iter().flatten().filter_map(any_value).collect(),
        ));
    }
    if let Some(kv) = field(v, "kvlistValue", "kvlist_value") {
        return Some(Value::Object(attributes(kv.get("values"), |_| false)));
    }
    if let Some(b) = field(v, "bytesValue", "bytes_value") {
        return b.as_str().map(|s| Value::String(s.to_string()));
    }
    None
}

fn group_by_trace(spans: Vec<Span>) -> SpanBatch {
    let mut traces: Vec<(String, Vec<Span>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for span in spans {
        match index.get(&span.trace_id) {
            Some(&i) => traces[i].1.push(span),
            None => {
                index.insert(span.trace_id.clone(), traces.len());
                traces.push((span.trace_id.clone(), vec![span]));
            }
        }
    }
    SpanBatch { traces }
}
