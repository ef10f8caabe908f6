//! OpenTelemetry GenAI spans (and OpenInference spans, see [`super::openinference`]) from OTLP
//! JSON exports.
//!
//! # Wire shapes
//! Two shapes are read, and give the same runs: one OTLP/JSON `ExportTraceServiceRequest`
//! document (`{"resourceSpans":[{resource, scopeSpans:[{scope, spans:[...]}]}]}`), and the
//! collector file exporter's output, one such request per line (streamed: the traces completed
//! so far are handed on every 32 MiB of input). Attribute values are
//! `{stringValue|intValue|doubleValue|boolValue|arrayValue|kvlistValue|bytesValue}` (int64 as
//! strings); a value of any other shape is ignored. Every span is one record. A line that is not
//! JSON, a request without `resourceSpans`, or a span without a trace or span id is quarantined.
//!
//! # Traces over several files
//! A run needs all the spans of its trace, and spans arrive out of order (children end, and are
//! exported, before their parents) and may be split over files. The adapter therefore does not
//! build runs itself: it hands each file's spans, grouped by trace, to
//! [`Sink::otel_spans`]. The ingest driver passes them, in
//! input order, to one [`Stitcher`] per ingest, which keeps each trace until it is complete (a
//! root span is present and every parent a span names has been read), builds it then, and
//! builds whatever is still incomplete once every input has been read (with a note). A sink that
//! keeps no state across files (the default) builds each file's traces at once.
//!
//! # Mapping
//! - A run is one agent invocation: a span with `gen_ai.operation.name = invoke_agent` (named
//!   `invoke_agent {agent}`, or `agent run` in pydantic-ai's format 2), or an OpenInference
//!   `AGENT` span. Model-call and tool spans belong to their nearest agent ancestor; spans with
//!   no agent ancestor are grouped by `gen_ai.agent.call.id`, and failing that split into runs
//!   by user turn (a model call's turn = the user messages in its input).
//! - Run id: the agent's `gen_ai.agent.call.id`, else `{trace id}:{span id}` of the agent span
//!   (`{trace id}#{turn}` for runs split by turn). Conversation: `gen_ai.conversation.id`, else
//!   `session.id`, else the trace id.
//! - Messages come from `gen_ai.input.messages` / `gen_ai.output.messages` (structured or JSON
//!   text; parts `text`, `tool_call`, `tool_call_response`), the indexed `gen_ai.prompt.{i}.*` /
//!   `gen_ai.completion.{i}.*` attributes, OpenInference's flattened `llm.*_messages`, or the
//!   deprecated per-message span events (`gen_ai.user.message`, `gen_ai.choice`, ...). A
//!   `tool_call_response` part is a tool message whatever role carries it.
//! - The run's own messages are the first model call's input from the run's user message on,
//!   then each model call's new input and its output, then the tail of pydantic-ai's
//!   `pydantic_ai.all_messages`. Every assistant tool call is a landing, paired with its tool
//!   message and merged with its tool span (`execute_tool` / `running tool`: name, call id,
//!   arguments, result, status, duration). A tool span without a requesting message is a
//!   landing of its own. The span's arguments and result win over the messages' copies.
//! - The turn is the number of user messages in the first model call's input, up to the run's
//!   own. The answer is the agent span's `final_result` (pydantic-ai), else its `output.value`
//!   (OpenInference), else the last assistant text without tool calls.
//! - The history the answer was judged against is written as context rows: the system
//!   instructions and the last model call's input messages plus its output.
//! - Content a writer dropped (`include_content=False`: arguments, results, texts) leaves the
//!   structure; landings then carry [`LandingFlags::CONTENT_OMITTED`].
//! - pydantic-ai's structured output: the output tools (`final_result`, output functions) and
//!   their JSON Schemas are one `pydantic_ai.output` event; their calls are landings (marked
//!   `"output_tool": true` in the payload) even when no span was written for them, and a
//!   validation-error list answering one marks its landing and tool message as errors. The
//!   attempts and their rejections are also written as the neutral rows the schema-attempt check
//!   reads (`output-contract`, answer marks, `schema-retry`, `contract-unmet`; see [`output`]).
//! - Besides messages, landings, the answer and context rows, a run keeps one model-call row per
//!   model-call span (model, token counts, status), one `exception` row per exception event, a
//!   `run_error` row when the agent span itself failed, and the tool span's retry markers
//!   (`pydantic_ai.tool.retry.*`) in its landing's payload. A run that answered without its
//!   content recorded has an answer row with no text, flagged `CONTENT_OMITTED`.
//!
//! Spans of a trace that gave runs count as stored, whatever their kind (HTTP or database spans
//! under an agent are kept only as part of the trace). A trace with no agent, model-call or tool
//! span at all gives nothing to audit: its spans are quarantined.
//!
//! Without an agent span and without `gen_ai.conversation.id` / `session.id`, each trace is a
//! conversation of its own: model calls that a writer exported as separate traces are not linked.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::ingest::limits::{read_bounded, read_line_bounded, Line};
use crate::ingest::openinference as oi;
use crate::ingest::{Format, Input, Limits, Locator, Quarantined, Severity, Sink};
use crate::js;
use crate::model::{Conversation, Event, EventKind, LandingFlags, Role, Run};

mod output;

/// The format name of runs read from GenAI spans.
pub const FORMAT: &str = "otel";
/// The format name of runs whose spans carry OpenInference attributes.
pub const FORMAT_OPENINFERENCE: &str = "openinference";

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
/// pydantic-ai's retry prompt when it has no tool to answer: a user message that starts no turn.
const RETRY_FRAME: &str = "Validation feedback:";

// ---------------------------------------------------------------------------------------------
// Spans as read
// ---------------------------------------------------------------------------------------------

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

    fn int_attr(&self, key: &str) -> Option<i64> {
        self.attrs.get(key).and_then(Value::as_i64)
    }

    fn op(&self) -> Option<&str> {
        self.str_attr("gen_ai.operation.name")
    }

    fn start_ms(&self) -> Option<i64> {
        self.start_ns.map(|n| n.div_euclid(1_000_000))
    }

    fn duration_ms(&self) -> Option<f64> {
        match (self.start_ns, self.end_ns) {
            (Some(s), Some(e)) if e >= s => Some((e - s) as f64 / 1e6),
            _ => None,
        }
    }

    fn is_root(&self, ids: &HashSet<&str>) -> bool {
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

impl SpanBatch {
    pub fn span_count(&self) -> usize {
        self.traces.iter().map(|(_, s)| s.len()).sum()
    }
}

/// Is this the start of an OTLP trace export (a document, or one per line)? Its first key is the
/// resource-spans list. Spans carrying OpenInference attributes make it [`Format::OpenInference`].
pub fn detect(head: &str) -> Option<Format> {
    let after_brace = head.strip_prefix('{')?.trim_start();
    if !(after_brace.starts_with("\"resourceSpans\"")
        || after_brace.starts_with("\"resource_spans\""))
    {
        return None;
    }
    if head.contains(&format!("\"{}\"", oi::SPAN_KIND)) {
        Some(Format::OpenInference)
    } else {
        Some(Format::Otel)
    }
}

/// Input read, in one-request-per-line files, between two hand-offs of the traces completed so
/// far: what a file holds in memory at once is bounded by this plus its incomplete traces.
const FLUSH_BYTES: usize = 32 << 20;

/// Read one OTLP JSON file (a document, or one request per line) and hand its spans to the sink,
/// grouped by trace. One request per line is streamed: every 32 MiB of input, the traces
/// already complete are handed over; the rest follow at the end of the file.
pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    read_flushing(input, sink, FLUSH_BYTES)
}

fn read_flushing(input: &Input<'_>, sink: &mut dyn Sink, flush_bytes: usize) -> io::Result<()> {
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

/// A trace whose spans are all present: a root, and every parent a span names.
fn is_complete<'a>(spans: impl Iterator<Item = &'a Span> + Clone) -> bool {
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

struct Reader<'a> {
    file: Arc<str>,
    sink: &'a mut dyn Sink,
    spans: Vec<Span>,
    next_record: u64,
}

impl<'a> Reader<'a> {
    fn new(display: &str, sink: &'a mut dyn Sink) -> Reader<'a> {
        Reader {
            file: Arc::from(display),
            sink,
            spans: Vec::new(),
            next_record: 0,
        }
    }

    fn drop(&mut self, locator: Locator, reason: impl Into<String>) {
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
    fn flush(&mut self, complete_only: bool) {
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
                        Err(reason) => self.drop(locator, reason),
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

fn parse_span(v: &Value, file: &Arc<str>, locator: Locator, record: u64) -> Result<Span, String> {
    if !v.is_object() {
        return Err("span is not a JSON object".into());
    }
    let trace_id = field(v, "traceId", "trace_id")
        .and_then(Value::as_str)
        .and_then(|s| normalize_id(s, 16))
        .ok_or("span has no traceId")?;
    let span_id = field(v, "spanId", "span_id")
        .and_then(Value::as_str)
        .and_then(|s| normalize_id(s, 8))
        .ok_or_else(|| format!("span in trace {trace_id} has no spanId"))?;
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
    let mut attrs = attributes(v.get("attributes"), |k| {
        SKIPPED_KEYS.contains(&k) || SKIPPED_PREFIXES.iter().any(|p| k.starts_with(p))
    });
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
    let events = v
        .get("events")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|e| {
                    Some(SpanEvent {
                        name: e.get("name")?.as_str()?.to_string(),
                        time_ns: field(e, "timeUnixNano", "time_unix_nano").and_then(time_of),
                        attrs: attributes(e.get("attributes"), |k| SKIPPED_EVENT_KEYS.contains(&k)),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Span {
        trace_id,
        span_id,
        parent_id,
        remote_parent: flags & 0x300 == 0x300,
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

/// A trace or span id as lower-case hex. Hex ids are lower-cased; base64 ids (the plain
/// protobuf JSON mapping) of the right length are converted; anything else is kept as an opaque
/// id. Empty and all-zero ids are no ids.
fn normalize_id(s: &str, bytes: usize) -> Option<String> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let hex = if s.len() == bytes * 2 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        s.to_ascii_lowercase()
    } else if let Some(raw) = base64_decode(s).filter(|raw| raw.len() == bytes) {
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

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0u32;
    for c in s.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        } as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
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
fn attributes(list: Option<&Value>, skip: impl Fn(&str) -> bool) -> Map<String, Value> {
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

// ---------------------------------------------------------------------------------------------
// Traces across files
// ---------------------------------------------------------------------------------------------

/// Joins the spans of each trace across the files of one ingest, and builds a trace's runs once
/// it is complete. Batches must be given in input order; the output then does not depend on
/// how files were read.
#[derive(Debug, Default)]
pub struct Stitcher {
    /// Incomplete traces, by arrival.
    pending: BTreeMap<u64, Pending>,
    by_trace: HashMap<String, u64>,
    next: u64,
    /// The span ids of every trace already built.
    built: HashMap<String, HashSet<String>>,
}

#[derive(Debug)]
struct Pending {
    trace_id: String,
    spans: Vec<Span>,
    ids: HashSet<String>,
}

impl Pending {
    fn is_complete(&self) -> bool {
        is_complete(self.spans.iter())
    }
}

impl Stitcher {
    /// Take one file's spans; build every trace that is now complete.
    pub fn add(&mut self, batch: SpanBatch, sink: &mut dyn Sink) {
        let mut built = Built::default();
        for (trace_id, spans) in batch.traces {
            if let Some(seen) = self.built.get(&trace_id) {
                let late: Vec<&Span> = spans
                    .iter()
                    .filter(|s| !seen.contains(&s.span_id))
                    .collect();
                if late.is_empty() {
                    // The same spans again (one export given twice, or as JSON and as JSONL):
                    // build them again; the ingest keeps the first copy of each run and says so.
                    assemble(&trace_id, spans, sink, &mut built);
                } else {
                    for s in late {
                        sink.quarantine(note(
                            s,
                            Severity::Dropped,
                            format!(
                                "span {} ({:?}) of trace {trace_id} was read after the trace had \
                                 been assembled from earlier input; it is not merged",
                                s.span_id, s.name
                            ),
                        ));
                    }
                }
                continue;
            }
            let key = match self.by_trace.get(&trace_id) {
                Some(&k) => k,
                None => {
                    let k = self.next;
                    self.next += 1;
                    self.by_trace.insert(trace_id.clone(), k);
                    self.pending.insert(
                        k,
                        Pending {
                            trace_id: trace_id.clone(),
                            spans: Vec::new(),
                            ids: HashSet::new(),
                        },
                    );
                    k
                }
            };
            let piece = self.pending.get_mut(&key).expect("pending trace");
            for s in spans {
                // A span read twice inside one trace: the first copy is kept.
                if piece.ids.insert(s.span_id.clone()) {
                    piece.spans.push(s);
                }
            }
            if piece.is_complete() {
                let piece = self.pending.remove(&key).expect("pending trace");
                self.close(piece, sink, &mut built);
            }
        }
        built.flush(sink);
    }

    /// Every input has been read: build the traces that never became complete.
    pub fn finish(&mut self, sink: &mut dyn Sink) {
        let mut built = Built::default();
        for (_, piece) in std::mem::take(&mut self.pending) {
            let ids: HashSet<&str> = piece.ids.iter().map(String::as_str).collect();
            let orphans: Vec<&Span> = piece
                .spans
                .iter()
                .filter(|s| {
                    !s.remote_parent
                        && s.parent_id
                            .as_ref()
                            .is_some_and(|p| !ids.contains(p.as_str()))
                })
                .collect();
            if let Some(first) = orphans.first() {
                let mut parents: Vec<&str> = orphans
                    .iter()
                    .filter_map(|s| s.parent_id.as_deref())
                    .collect();
                parents.sort_unstable();
                parents.dedup();
                sink.quarantine(note(
                    first,
                    Severity::Partial,
                    format!(
                        "trace {}: {} span(s) name parent span(s) {} that no input held; the \
                         trace was assembled from the spans present (a part of it may be in a \
                         file not given to this ingest)",
                        piece.trace_id,
                        orphans.len(),
                        parents.join(", ")
                    ),
                ));
            }
            self.close(piece, sink, &mut built);
        }
        self.by_trace.clear();
        built.flush(sink);
    }

    fn close(&mut self, piece: Pending, sink: &mut dyn Sink, built: &mut Built) {
        self.by_trace.remove(&piece.trace_id);
        self.built.insert(piece.trace_id.clone(), piece.ids);
        assemble(&piece.trace_id, piece.spans, sink, built);
    }
}

/// Build one file's traces at once, as if no other input existed.
pub fn assemble_batch(batch: SpanBatch, sink: &mut dyn Sink) {
    let mut stitcher = Stitcher::default();
    stitcher.add(batch, sink);
    stitcher.finish(sink);
}

fn note(span: &Span, severity: Severity, reason: String) -> Quarantined {
    let mut q = Quarantined::dropped(&span.file, span.locator.clone(), reason);
    q.severity = severity;
    q.format = Some(FORMAT);
    q
}

// ---------------------------------------------------------------------------------------------
// Traces into runs
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Agent,
    Chat,
    Tool,
    Other,
}

fn classify(s: &Span) -> Class {
    let op = s.op().unwrap_or("");
    if op == "invoke_agent"
        || s.name.starts_with("invoke_agent")
        || s.name == "agent run"
        || oi::is_agent(s)
    {
        return Class::Agent;
    }
    if op == "execute_tool"
        || s.name.starts_with("execute_tool")
        || s.name == "running tool"
        || s.name == "running output function"
        || oi::is_tool(s)
    {
        return Class::Tool;
    }
    if matches!(
        op,
        "chat" | "text_completion" | "generate_content" | "completion"
    ) || oi::is_llm(s)
        || s.attrs.contains_key("gen_ai.input.messages")
        || s.attrs.contains_key("gen_ai.output.messages")
        || s.attrs.contains_key("gen_ai.prompt.0.role")
        || s.attrs.contains_key("gen_ai.completion.0.role")
    {
        return Class::Chat;
    }
    Class::Other
}

/// The spans of one run.
struct RunSpans<'a> {
    run_id: String,
    root: Option<&'a Span>,
    chats: Vec<&'a Span>,
    tools: Vec<&'a Span>,
    /// Every span of the run, root included.
    all: Vec<&'a Span>,
}

fn call_id_of(s: &Span) -> Option<&str> {
    s.str_attr("gen_ai.agent.call.id").filter(|c| !c.is_empty())
}

/// Conversations built during one call of the stitcher, merged by conversation id.
#[derive(Default)]
struct Built {
    conversations: Vec<(Conversation, u64)>,
}

impl Built {
    fn add(&mut self, run: Run, record: u64) {
        match self
            .conversations
            .iter_mut()
            .find(|(c, _)| c.id == run.conversation_id)
        {
            Some((c, r)) => {
                *r = (*r).min(record);
                c.runs.push(run);
            }
            None => self.conversations.push((
                Conversation {
                    id: run.conversation_id.clone(),
                    runs: vec![run],
                },
                record,
            )),
        }
    }

    /// Hand everything to the sink, runs in the order the store reads them back.
    fn flush(self, sink: &mut dyn Sink) {
        for (mut conversation, record) in self.conversations {
            conversation.runs.sort_by(|a, b| {
                (a.turn, a.started_ms, &a.run_id).cmp(&(b.turn, b.started_ms, &b.run_id))
            });
            sink.conversation(conversation, record);
        }
    }
}

/// Build the runs of one trace.
fn assemble(trace_id: &str, mut spans: Vec<Span>, sink: &mut dyn Sink, built: &mut Built) {
    spans.sort_by(|a, b| {
        (
            a.start_ns.unwrap_or(i64::MAX),
            a.end_ns.unwrap_or(i64::MAX),
            &a.span_id,
        )
            .cmp(&(
                b.start_ns.unwrap_or(i64::MAX),
                b.end_ns.unwrap_or(i64::MAX),
                &b.span_id,
            ))
    });
    let n = spans.len();
    let index: HashMap<&str, usize> = spans
        .iter()
        .enumerate()
        .map(|(i, s)| (s.span_id.as_str(), i))
        .collect();
    let ids: HashSet<&str> = index.keys().copied().collect();
    let mut class: Vec<Class> = spans.iter().map(classify).collect();
    // OpenInference traces without an agent span: a root CHAIN span is the run.
    let promoted: Vec<usize> = if class.contains(&Class::Agent) {
        Vec::new()
    } else {
        (0..n)
            .filter(|&i| oi::is_chain(&spans[i]) && spans[i].is_root(&ids))
            .collect()
    };
    for &i in &promoted {
        class[i] = Class::Agent;
    }
    let parent_of = |i: usize| -> Option<usize> {
        let s = &spans[i];
        if s.remote_parent {
            return None;
        }
        s.parent_id.as_deref().and_then(|p| index.get(p).copied())
    };
    let owner: Vec<Option<usize>> = (0..n)
        .map(|i| {
            let mut cur = Some(i);
            let mut steps = 0;
            while let Some(c) = cur {
                if class[c] == Class::Agent {
                    return Some(c);
                }
                steps += 1;
                if steps > n {
                    break;
                }
                cur = parent_of(c);
            }
            None
        })
        .collect();
    let agent_by_call: HashMap<&str, usize> = (0..n)
        .filter(|&i| class[i] == Class::Agent)
        .filter_map(|i| call_id_of(&spans[i]).map(|c| (c, i)))
        .collect();

    #[derive(PartialEq, Eq, Hash, Clone)]
    enum Key {
        Agent(usize),
        Call(String),
        Turns,
    }
    let mut groups: Vec<(Key, Vec<usize>)> = Vec::new();
    let mut group_of: HashMap<Key, usize> = HashMap::new();
    for i in 0..n {
        let key = match (class[i], owner[i]) {
            (_, Some(a)) => Key::Agent(a),
            (Class::Other, None) => continue,
            (_, None) => match call_id_of(&spans[i]) {
                Some(c) => match agent_by_call.get(c) {
                    Some(&a) => Key::Agent(a),
                    None => Key::Call(c.to_string()),
                },
                None => Key::Turns,
            },
        };
        match group_of.get(&key) {
            Some(&g) => groups[g].1.push(i),
            None => {
                group_of.insert(key.clone(), groups.len());
                groups.push((key, vec![i]));
            }
        }
    }

    let mut runs: Vec<(Run, u64)> = Vec::new();
    for (key, members) in &groups {
        let pick = |c: Class| -> Vec<&Span> {
            members
                .iter()
                .filter(|&&i| class[i] == c && !matches!(key, Key::Agent(a) if *a == i))
                .map(|&i| &spans[i])
                .collect()
        };
        let record = members.iter().map(|&i| spans[i].record).min().unwrap_or(0);
        let all: Vec<&Span> = members.iter().map(|&i| &spans[i]).collect();
        match key {
            Key::Agent(a) => {
                let root = &spans[*a];
                let chats = pick(Class::Chat);
                let tools = pick(Class::Tool);
                if promoted.contains(a) && chats.is_empty() && tools.is_empty() {
                    continue;
                }
                let run_id = call_id_of(root)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{trace_id}:{}", root.span_id));
                let rs = RunSpans {
                    run_id,
                    root: Some(root),
                    chats,
                    tools,
                    all,
                };
                runs.push((build_run(trace_id, &rs), record));
            }
            Key::Call(call) => {
                let rs = RunSpans {
                    run_id: call.clone(),
                    root: None,
                    chats: pick(Class::Chat),
                    tools: pick(Class::Tool),
                    all,
                };
                runs.push((build_run(trace_id, &rs), record));
            }
            Key::Turns => {
                for rs in split_by_turn(trace_id, pick(Class::Chat), pick(Class::Tool)) {
                    let record = rs.all.iter().map(|s| s.record).min().unwrap_or(record);
                    runs.push((build_run(trace_id, &rs), record));
                }
            }
        }
    }

    if runs.is_empty() {
        for s in &spans {
            sink.quarantine(note(
                s,
                Severity::Dropped,
                format!(
                    "span {} ({:?}) belongs to trace {trace_id}, which holds no agent, model-call \
                     or tool span (no GenAI or OpenInference attributes): nothing to audit",
                    s.span_id, s.name
                ),
            ));
        }
        return;
    }
    for (run, record) in runs {
        built.add(run, record);
    }
}

/// Model-call and tool spans with no agent around them: one run per user turn, the turn of a
/// model call being the number of user messages in its input.
fn split_by_turn<'a>(
    trace_id: &str,
    chats: Vec<&'a Span>,
    tools: Vec<&'a Span>,
) -> Vec<RunSpans<'a>> {
    let mut by_turn: BTreeMap<usize, Vec<&'a Span>> = BTreeMap::new();
    for chat in &chats {
        let turn = input_messages(chat)
            .map(|m| m.iter().filter(|m| m.is_user_turn()).count())
            .unwrap_or(0);
        by_turn.entry(turn).or_default().push(chat);
    }
    if by_turn.is_empty() {
        by_turn.insert(0, Vec::new());
    }
    let mut tools_by_turn: BTreeMap<usize, Vec<&'a Span>> = BTreeMap::new();
    for tool in tools {
        let call = tool_call_id(tool);
        let by_call = call.and_then(|id| {
            by_turn.iter().find_map(|(turn, chats)| {
                chats
                    .iter()
                    .any(|c| {
                        output_messages(c).is_some_and(|out| {
                            out.iter()
                                .any(|m| m.calls.iter().any(|k| k.id.as_deref() == Some(id)))
                        })
                    })
                    .then_some(*turn)
            })
        });
        let by_time = || {
            by_turn
                .iter()
                .filter(|(_, chats)| {
                    chats
                        .iter()
                        .any(|c| c.end_ns.unwrap_or(i64::MIN) <= tool.start_ns.unwrap_or(i64::MAX))
                })
                .map(|(t, _)| *t)
                .next_back()
        };
        let turn = by_call
            .or_else(by_time)
            .unwrap_or_else(|| *by_turn.keys().next().expect("one turn at least"));
        tools_by_turn.entry(turn).or_default().push(tool);
    }
    by_turn
        .into_iter()
        .map(|(turn, chats)| {
            let tools = tools_by_turn.remove(&turn).unwrap_or_default();
            let mut all: Vec<&Span> = chats.iter().chain(tools.iter()).copied().collect();
            all.sort_by_key(|s| (s.start_ns.unwrap_or(i64::MAX), s.record));
            RunSpans {
                run_id: format!("{trace_id}#{turn}"),
                root: None,
                chats,
                tools,
                all,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

/// A tool call requested in a message.
#[derive(Debug, Clone, PartialEq)]
struct Call {
    id: Option<String>,
    name: String,
    /// JSON text; `None` when the writer left the arguments out.
    arguments: Option<String>,
}

/// A message in neutral form.
#[derive(Debug, Clone, PartialEq)]
struct Msg {
    role: Role,
    /// `None` when the writer kept the structure only.
    text: Option<String>,
    calls: Vec<Call>,
    /// For tool results: the call answered and the tool's name.
    call_id: Option<String>,
    tool_name: Option<String>,
    /// The writer dropped this message's content.
    omitted: bool,
    /// A tool result that reports a failure (a validation-error list).
    error: bool,
}

impl Msg {
    fn new(role: Role, text: Option<String>) -> Msg {
        Msg {
            role,
            omitted: text.is_none(),
            text,
            calls: Vec::new(),
            call_id: None,
            tool_name: None,
            error: false,
        }
    }

    /// A user message that starts a turn (not pydantic-ai's text retry prompt).
    fn is_user_turn(&self) -> bool {
        self.role == Role::User
            && !self
                .text
                .as_deref()
                .is_some_and(|t| t.starts_with(RETRY_FRAME))
    }
}

/// Text of a value as a model reads it: strings as they are, anything else as JSON.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => js::stringify(other),
    }
}

/// pydantic's validation-error list: `[{type, loc, msg, ...}]`.
fn is_validation_errors(v: &Value) -> bool {
    match v {
        Value::Array(items) => {
            !items.is_empty()
                && items
                    .iter()
                    .all(|i| i.get("loc").is_some() && i.get("msg").is_some())
        }
        Value::String(s) if s.trim_start().starts_with('[') => {
            js::parse_json(s).is_ok_and(|v| v.is_array() && is_validation_errors(&v))
        }
        _ => false,
    }
}

/// A list of messages in any of the known shapes.
fn messages_of(list: &Value, default_role: Role) -> Vec<Msg> {
    let mut out = Vec::new();
    match list {
        Value::Array(items) => {
            for item in items {
                message_of(item, default_role, &mut out);
            }
        }
        Value::Object(_) => message_of(list, default_role, &mut out),
        Value::String(s) => out.push(Msg::new(default_role, Some(s.clone()))),
        _ => {}
    }
    out
}

/// One message, in the GenAI parts shape (`{role, parts}`), the chat-completions shape
/// (`{role, content, tool_calls, tool_call_id}`), or OpenInference's (`{message: {...}}`).
/// Tool results become tool messages whatever role carried them.
fn message_of(v: &Value, default_role: Role, out: &mut Vec<Msg>) {
    let v = match v.get("message") {
        Some(inner @ Value::Object(_)) => inner,
        Some(Value::String(s)) => match js::parse_json(s) {
            Ok(parsed @ Value::Object(_)) => return message_of(&parsed, default_role, out),
            _ => v,
        },
        _ => v,
    };
    if !v.is_object() {
        return;
    }
    let role = v
        .get("role")
        .and_then(Value::as_str)
        .map_or(Some(default_role), Role::parse);
    let Some(role) = role else {
        return;
    };
    if let Some(parts) = v.get("parts").and_then(Value::as_array) {
        parts_message(role, parts, out);
        return;
    }
    let content = v.get("content").filter(|c| !c.is_null());
    let text = match content {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .filter_map(|i| {
                    i.get("text")
                        .or_else(|| i.get("content"))
                        .and_then(Value::as_str)
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        Some(other) => Some(text_of(other)),
        None => v.get("contents").and_then(Value::as_array).map(|items| {
            items
                .iter()
                .filter_map(|i| {
                    let c = i.get("message_content").unwrap_or(i);
                    c.get("text").and_then(Value::as_str)
                })
                .collect::<Vec<_>>()
                .join("\n")
        }),
    };
    if role == Role::Tool {
        let mut m = Msg::new(Role::Tool, text);
        m.call_id = v
            .get("tool_call_id")
            .or_else(|| v.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string);
        m.tool_name = v.get("name").and_then(Value::as_str).map(str::to_string);
        m.error = content.is_some_and(is_validation_errors);
        out.push(m);
        return;
    }
    let mut calls = Vec::new();
    let listed = match v.get("tool_calls") {
        Some(Value::String(s)) => js::parse_json(s).ok(),
        Some(other) => Some(other.clone()),
        None => None,
    };
    for c in listed
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let c = c.get("tool_call").unwrap_or(c);
        let f = c.get("function").unwrap_or(c);
        calls.push(Call {
            id: c.get("id").and_then(Value::as_str).map(str::to_string),
            name: f
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            arguments: f.get("arguments").filter(|a| !a.is_null()).map(text_of),
        });
    }
    if let Some(f) = v.get("function_call").filter(|f| f.is_object()) {
        calls.push(Call {
            id: None,
            name: f
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            arguments: f.get("arguments").filter(|a| !a.is_null()).map(text_of),
        });
    }
    let mut m = Msg::new(role, text);
    if !calls.is_empty() {
        // An assistant message that only calls tools has no text to omit.
        m.omitted = false;
        m.calls = calls;
    }
    out.push(m);
}

/// A message in the GenAI parts shape.
fn parts_message(role: Role, parts: &[Value], out: &mut Vec<Msg>) {
    let mut texts: Vec<String> = Vec::new();
    let mut text_omitted = false;
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for p in parts {
        match p.get("type").and_then(Value::as_str).unwrap_or("text") {
            "text" => match p.get("content").filter(|c| !c.is_null()) {
                Some(c) => texts.push(text_of(c)),
                None => text_omitted = true,
            },
            "tool_call" => calls.push(Call {
                id: p.get("id").and_then(Value::as_str).map(str::to_string),
                name: p
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                arguments: p.get("arguments").filter(|a| !a.is_null()).map(text_of),
            }),
            "tool_call_response" => {
                let result = p.get("response").or_else(|| p.get("result"));
                let mut m = Msg::new(Role::Tool, result.map(text_of));
                m.call_id = p.get("id").and_then(Value::as_str).map(str::to_string);
                m.tool_name = p.get("name").and_then(Value::as_str).map(str::to_string);
                m.error = result.is_some_and(is_validation_errors);
                results.push(m);
            }
            // Reasoning, media and other parts carry nothing the checks read.
            _ => {}
        }
    }
    out.extend(results.iter().cloned());
    if role == Role::Tool && texts.is_empty() && calls.is_empty() {
        return;
    }
    let has_text = !texts.is_empty() || text_omitted;
    if !has_text && calls.is_empty() && !results.is_empty() {
        return;
    }
    let text = if texts.is_empty() && text_omitted {
        None
    } else {
        Some(texts.join("\n"))
    };
    let mut m = Msg::new(role, text);
    m.omitted = text_omitted && texts.is_empty() && calls.is_empty();
    m.calls = calls;
    out.push(m);
}

/// The deprecated per-message span events, in order, as one list.
fn event_messages(s: &Span, output: bool) -> Option<Vec<Msg>> {
    let mut out = Vec::new();
    let mut events: Vec<(String, Map<String, Value>)> = s
        .events
        .iter()
        .map(|e| (e.name.clone(), e.attrs.clone()))
        .collect();
    // pydantic-ai's first span format keeps its events as a JSON list in one attribute.
    if let Some(Value::Array(items)) = s.attr("events") {
        for item in items {
            if let (Some(name), Value::Object(map)) =
                (item.get("event.name").and_then(Value::as_str), item)
            {
                events.push((name.to_string(), map.clone()));
            }
        }
    }
    for (name, attrs) in &events {
        let role = match name.as_str() {
            "gen_ai.system.message" => Role::System,
            "gen_ai.user.message" => Role::User,
            "gen_ai.assistant.message" => Role::Assistant,
            "gen_ai.tool.message" => Role::Tool,
            "gen_ai.choice" => Role::Assistant,
            "gen_ai.content.prompt" | "gen_ai.content.completion" => {
                let key = if name.ends_with("prompt") {
                    "gen_ai.prompt"
                } else {
                    "gen_ai.completion"
                };
                if (name.ends_with("completion")) != output {
                    continue;
                }
                if let Some(v) = attrs.get(key) {
                    let parsed = match v {
                        Value::String(t) => js::parse_json(t).unwrap_or_else(|_| v.clone()),
                        other => other.clone(),
                    };
                    let default = if output { Role::Assistant } else { Role::User };
                    out.extend(messages_of(&parsed, default));
                }
                continue;
            }
            _ => continue,
        };
        if (name == "gen_ai.choice") != output {
            continue;
        }
        let mut body = Value::Object(attrs.clone());
        if let Some(Value::String(b)) = attrs.get("body") {
            if let Ok(parsed @ Value::Object(_)) = js::parse_json(b) {
                body = parsed;
            }
        }
        if body.get("role").is_none() {
            if let Value::Object(map) = &mut body {
                map.insert("role".into(), Value::String(role.as_str().into()));
            }
        }
        message_of(&body, role, &mut out);
    }
    (!out.is_empty()).then_some(out)
}

/// The messages a model call was given.
fn input_messages(s: &Span) -> Option<Vec<Msg>> {
    if let Some(v) = s.attr("gen_ai.input.messages") {
        return Some(messages_of(v, Role::User));
    }
    if let Some(v) = s.attr("gen_ai.prompt") {
        return Some(messages_of(v, Role::User));
    }
    let indexed = unflatten(&s.attrs, "gen_ai.prompt.");
    if !indexed.is_empty() {
        return Some(messages_of(&Value::Array(indexed), Role::User));
    }
    if let Some(list) = oi::input_messages(s) {
        return Some(messages_of(&Value::Array(list), Role::User));
    }
    event_messages(s, false)
}

/// The messages a model call returned.
fn output_messages(s: &Span) -> Option<Vec<Msg>> {
    if let Some(v) = s.attr("gen_ai.output.messages") {
        return Some(messages_of(v, Role::Assistant));
    }
    if let Some(v) = s.attr("gen_ai.completion") {
        return Some(messages_of(v, Role::Assistant));
    }
    let indexed = unflatten(&s.attrs, "gen_ai.completion.");
    if !indexed.is_empty() {
        return Some(messages_of(&Value::Array(indexed), Role::Assistant));
    }
    if let Some(list) = oi::output_messages(s) {
        return Some(messages_of(&Value::Array(list), Role::Assistant));
    }
    event_messages(s, true)
}

/// The system instructions recorded apart from the messages (`gen_ai.system_instructions`).
fn instructions(s: &Span) -> Option<Msg> {
    let v = s.attr("gen_ai.system_instructions")?;
    let text = match v {
        Value::String(t) => Some(t.clone()),
        Value::Array(parts) => {
            let texts: Vec<String> = parts
                .iter()
                .filter_map(|p| match p {
                    Value::String(t) => Some(t.clone()),
                    other => other.get("content").filter(|c| !c.is_null()).map(text_of),
                })
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        other => Some(text_of(other)),
    };
    Some(Msg::new(Role::System, text))
}

fn tool_name(s: &Span) -> Option<String> {
    s.str_attr("gen_ai.tool.name")
        .filter(|n| !n.is_empty())
        .or_else(|| oi::tool_name(s))
        .or_else(|| {
            s.name
                .strip_prefix("execute_tool ")
                .filter(|n| !n.is_empty())
        })
        .map(str::to_string)
}

fn tool_call_id(s: &Span) -> Option<&str> {
    s.str_attr("gen_ai.tool.call.id")
        .filter(|n| !n.is_empty())
        .or_else(|| oi::tool_call_id(s))
}

fn tool_arguments(s: &Span) -> Option<String> {
    s.attr("gen_ai.tool.call.arguments")
        .or_else(|| s.attr("tool_arguments"))
        .or_else(|| oi::tool_arguments(s))
        .map(text_of)
}

fn tool_result(s: &Span) -> Option<String> {
    s.attr("gen_ai.tool.call.result")
        .or_else(|| s.attr("tool_response"))
        .or_else(|| oi::tool_result(s))
        .map(text_of)
}

fn conversation_of(s: &Span) -> Option<&str> {
    s.str_attr("gen_ai.conversation.id")
        .filter(|c| !c.is_empty())
        .or_else(|| oi::session(s))
}

fn model_of(s: &Span) -> Option<&str> {
    [
        "gen_ai.response.model",
        "gen_ai.request.model",
        "model_name",
    ]
    .iter()
    .find_map(|k| s.str_attr(k).filter(|m| !m.is_empty()))
    .or_else(|| oi::model(s))
}

/// pydantic-ai's output declaration: the output tools with their JSON Schemas.
fn output_declaration(chats: &[&Span]) -> Option<Value> {
    chats.iter().find_map(|c| {
        let p = c.attr("model_request_parameters")?;
        let tools: Vec<Value> = p
            .get("output_tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|t| {
                serde_json::json!({
                    "name": t.get("name").cloned().unwrap_or(Value::Null),
                    "parameters_json_schema": t.get("parameters_json_schema").cloned().unwrap_or(Value::Null),
                })
            })
            .collect();
        let object = p.get("output_object").filter(|o| !o.is_null());
        if tools.is_empty() && object.is_none() {
            return None;
        }
        let mut decl = Map::new();
        if let Some(mode) = p.get("output_mode") {
            decl.insert("output_mode".into(), mode.clone());
        }
        decl.insert("output_tools".into(), Value::Array(tools));
        if let Some(o) = object {
            decl.insert("output_object".into(), o.clone());
        }
        decl.insert(
            "allow_text_output".into(),
            p.get("allow_text_output").cloned().unwrap_or(Value::Null),
        );
        Some(Value::Object(decl))
    })
}

// ---------------------------------------------------------------------------------------------
// One run
// ---------------------------------------------------------------------------------------------

/// Collects a run's events with a time key each; sorted (stably) at the end.
struct Builder<'a> {
    events: Vec<(i64, Event)>,
    /// The tool span merged into each event, if any.
    spans: Vec<Option<&'a Span>>,
    /// Landings waiting for their result: indexes into `events`.
    open: Vec<usize>,
}

fn ms(key: i64) -> Option<i64> {
    (key > 0).then(|| key.div_euclid(1_000_000))
}

fn message_event(m: &Msg, kind: EventKind) -> Event {
    let mut e = Event::new(kind);
    e.role = Some(m.role);
    e.text = m.text.clone();
    e.tool_name = m.tool_name.clone();
    e.call_id = m.call_id.clone();
    e.error = m.error;
    if m.omitted {
        e.flags |= LandingFlags::CONTENT_OMITTED;
    }
    if !m.calls.is_empty() {
        let list: Vec<Value> = m
            .calls
            .iter()
            .map(|c| {
                let args = match &c.arguments {
                    Some(a) => js::parse_json(a).unwrap_or_else(|_| Value::String(a.clone())),
                    None => Value::Null,
                };
                serde_json::json!({"id": c.id, "name": c.name, "arguments": args})
            })
            .collect();
        e.arguments = Some(js::stringify(&Value::Array(list)));
    }
    e
}

impl<'a> Builder<'a> {
    fn push(&mut self, key: i64, event: Event) -> usize {
        self.events.push((key, event));
        self.spans.push(None);
        self.events.len() - 1
    }

    /// A message of the run; assistant tool calls open landings, tool results close them.
    fn message(&mut self, m: &Msg, key: i64, iteration: Option<u32>) {
        let mut e = message_event(m, EventKind::Message);
        e.iteration = iteration;
        e.timestamp_ms = ms(key);
        match m.role {
            Role::Assistant => {
                self.push(key, e);
                for call in &m.calls {
                    let mut l = Event::new(EventKind::Landing);
                    l.source_type = Some("tool_call".into());
                    l.role = Some(Role::Assistant);
                    l.tool_name = Some(call.name.clone());
                    l.call_id = call.id.clone();
                    l.arguments = call.arguments.clone();
                    l.flags = LandingFlags::UNANSWERED;
                    l.iteration = iteration;
                    l.timestamp_ms = ms(key);
                    let i = self.push(key, l);
                    self.open.push(i);
                }
            }
            Role::Tool => {
                let slot = match &m.call_id {
                    Some(id) => self
                        .open
                        .iter()
                        .position(|&i| self.events[i].1.call_id.as_deref() == Some(id.as_str())),
                    None => (!self.open.is_empty()).then_some(0),
                };
                if let Some(p) = slot {
                    let i = self.open.remove(p);
                    let l = &mut self.events[i].1;
                    l.flags &= !LandingFlags::UNANSWERED;
                    match &m.text {
                        Some(t) => l.text = Some(t.clone()),
                        None => l.flags |= LandingFlags::CONTENT_OMITTED,
                    }
                    l.error |= m.error;
                    if e.tool_name.is_none() {
                        e.tool_name = l.tool_name.clone();
                    }
                }
                self.push(key, e);
            }
            Role::System | Role::User => {
                self.push(key, e);
            }
        }
    }

    /// Merge a tool span into the landing that requested it, or add it as a landing of its own.
    fn tool_span(&mut self, t: &'a Span, iteration: Option<u32>) {
        let id = tool_call_id(t);
        let found = id.and_then(|id| {
            (0..self.events.len()).find(|&i| {
                let e = &self.events[i].1;
                e.kind() == EventKind::Landing
                    && self.spans[i].is_none()
                    && e.call_id.as_deref() == Some(id)
            })
        });
        let i = match found {
            Some(i) => i,
            None => {
                let mut l = Event::new(EventKind::Landing);
                l.role = Some(Role::Assistant);
                l.call_id = id.map(str::to_string);
                l.flags = LandingFlags::UNANSWERED;
                l.iteration = iteration;
                self.push(t.start_ns.unwrap_or(0), l)
            }
        };
        self.spans[i] = Some(t);
        self.open.retain(|&o| o != i);
        let l = &mut self.events[i].1;
        if let Some(name) = tool_name(t) {
            l.tool_name = Some(name);
        }
        if let Some(args) = tool_arguments(t) {
            l.arguments = Some(args);
        }
        match tool_result(t) {
            Some(result) => {
                l.text = Some(result);
                l.flags &= !(LandingFlags::UNANSWERED | LandingFlags::CONTENT_OMITTED);
            }
            // The tool ran and returned, but its result was not written.
            None if t.status != 2 && l.has_flag(LandingFlags::UNANSWERED) => {
                l.flags &= !LandingFlags::UNANSWERED;
                l.flags |= LandingFlags::CONTENT_OMITTED;
            }
            None => {}
        }
        if t.status == 2 {
            l.error = true;
        }
        l.source_type = Some(t.name.clone());
        l.timestamp_ms = t.start_ms();
        l.duration_ms = t.duration_ms();
    }
}

fn span_payload(t: Option<&Span>, output_tool: bool) -> Option<String> {
    let mut p = Map::new();
    if let Some(t) = t {
        p.insert("span_id".into(), Value::String(t.span_id.clone()));
        p.insert("span".into(), Value::String(t.name.clone()));
        if t.status != 0 {
            p.insert(
                "status".into(),
                Value::String(if t.status == 2 { "error" } else { "ok" }.into()),
            );
        }
        if let Some(m) = &t.status_message {
            p.insert("status_message".into(), Value::String(m.clone()));
        }
        let retry: Map<String, Value> = t
            .attrs
            .iter()
            .filter_map(|(k, v)| {
                k.strip_prefix("pydantic_ai.tool.retry.")
                    .map(|k| (k.to_string(), v.clone()))
            })
            .collect();
        if !retry.is_empty() {
            p.insert("retry".into(), Value::Object(retry));
        }
        if let Some(e) = t.events.iter().find(|e| e.name == "exception") {
            let mut x = Map::new();
            for key in ["exception.type", "exception.message"] {
                if let Some(v) = e.attrs.get(key) {
                    x.insert(key["exception.".len()..].to_string(), v.clone());
                }
            }
            p.insert("exception".into(), Value::Object(x));
        }
    }
    if output_tool {
        p.insert("output_tool".into(), Value::Bool(true));
    }
    (!p.is_empty()).then(|| js::stringify(&Value::Object(p)))
}

/// Messages after the last assistant message: what a model call's input added when it does not
/// extend the previous call's history.
fn after_last_assistant(input: &[Msg]) -> &[Msg] {
    match input.iter().rposition(|m| m.role == Role::Assistant) {
        Some(i) => &input[i + 1..],
        None => input,
    }
}

fn build_run(trace_id: &str, rs: &RunSpans<'_>) -> Run {
    let root = rs.root;
    let first = rs.all.first().copied();
    let mut run = Run {
        run_id: rs.run_id.clone(),
        ..Run::default()
    };
    run.conversation_id = root
        .and_then(conversation_of)
        .or_else(|| rs.all.iter().find_map(|s| conversation_of(s)))
        .unwrap_or(trace_id)
        .to_string();
    run.format = if rs.all.iter().any(|s| oi::is_openinference(s)) {
        FORMAT_OPENINFERENCE
    } else {
        FORMAT
    }
    .to_string();
    run.source = root
        .or(first)
        .map(|s| s.file.to_string())
        .unwrap_or_default();
    run.agent = root
        .and_then(|r| r.str_attr("gen_ai.agent.name").or(r.str_attr("agent_name")))
        .or_else(|| rs.all.iter().find_map(|s| s.str_attr("gen_ai.agent.name")))
        .or_else(|| root.filter(|r| oi::is_agent(r)).map(|r| r.name.as_str()))
        .filter(|a| !a.is_empty())
        .map(str::to_string);
    run.model = rs
        .chats
        .iter()
        .rev()
        .find_map(|c| model_of(c))
        .or_else(|| root.and_then(model_of))
        .map(str::to_string);
    let (start_ns, end_ns) = match root {
        Some(r) => (r.start_ns, r.end_ns),
        None => (
            rs.all.iter().filter_map(|s| s.start_ns).min(),
            rs.all.iter().filter_map(|s| s.end_ns).max(),
        ),
    };
    run.started_ms = start_ns.map(|n| n.div_euclid(1_000_000));
    run.ended_ms = end_ns.map(|n| n.div_euclid(1_000_000));
    run.duration_ms = match (start_ns, end_ns) {
        (Some(s), Some(e)) if e >= s => Some((e - s) as f64 / 1e6),
        _ => None,
    };

    let inputs: Vec<Vec<Msg>> = rs
        .chats
        .iter()
        .map(|c| input_messages(c).unwrap_or_default())
        .collect();
    let outputs: Vec<Vec<Msg>> = rs
        .chats
        .iter()
        .map(|c| output_messages(c).unwrap_or_default())
        .collect();
    let transcript: Option<Vec<Msg>> = root
        .and_then(|r| r.attr("pydantic_ai.all_messages"))
        .map(|v| messages_of(v, Role::User));
    let opening: &[Msg] = match (inputs.first(), &transcript) {
        (Some(first), _) => first,
        (None, Some(all)) => all,
        (None, None) => &[],
    };
    // Where the run's own messages begin: pydantic-ai says so when history was passed;
    // otherwise at the last user message of the first model call's input.
    let start = root
        .and_then(|r| r.int_attr("pydantic_ai.new_message_index"))
        .and_then(|i| usize::try_from(i).ok())
        .filter(|&i| i < opening.len())
        .or_else(|| opening.iter().rposition(Msg::is_user_turn))
        .unwrap_or(0);
    if opening.is_empty() {
        run.turn = u32::from(root.is_some());
    } else {
        run.turn = opening[..=start]
            .iter()
            .filter(|m| m.is_user_turn())
            .count() as u32;
        run.user_message = opening
            .get(start)
            .filter(|m| m.is_user_turn())
            .and_then(|m| m.text.clone());
    }
    if run.user_message.is_none() {
        run.user_message = root
            .and_then(oi::run_input)
            .filter(|t| !t.is_empty())
            .map(str::to_string);
    }

    let output_decl = output_declaration(&rs.chats);
    let mut output_tools: HashSet<String> = output_decl
        .as_ref()
        .and_then(|d| d.get("output_tools"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    for t in &rs.tools {
        if t.name == "running output function" {
            if let Some(n) = tool_name(t) {
                output_tools.insert(n);
            }
        }
    }

    let mut b = Builder {
        events: Vec::new(),
        spans: Vec::new(),
        open: Vec::new(),
    };
    let begin = rs
        .chats
        .first()
        .and_then(|c| c.start_ns)
        .or(start_ns)
        .unwrap_or(0);
    let system = rs
        .chats
        .first()
        .and_then(|c| instructions(c))
        .or_else(|| root.and_then(instructions));
    if let Some(sys) = &system {
        b.message(sys, begin, None);
    }
    if let Some(decl) = &output_decl {
        let mut e = Event::new(EventKind::Other);
        e.source_type = Some("pydantic_ai.output".into());
        e.payload = Some(js::stringify(decl));
        b.push(begin, e);
    }
    let mut seen: Vec<Msg> = Vec::new();
    let mut key = begin;
    for (j, chat) in rs.chats.iter().enumerate() {
        let input = &inputs[j];
        let new: &[Msg] = if j == 0 {
            &input[start.min(input.len())..]
        } else if input.len() >= seen.len() && input[..seen.len()] == seen[..] {
            &input[seen.len()..]
        } else {
            after_last_assistant(input)
        };
        key = chat.start_ns.unwrap_or(key);
        let step = j as u32 + 1;
        for m in new {
            b.message(m, key, (j > 0).then_some(j as u32));
        }
        let mut call = Event::new(EventKind::ModelCall);
        call.source_type = Some(chat.name.clone());
        call.role = Some(Role::Assistant);
        call.iteration = Some(step);
        call.timestamp_ms = chat.start_ms();
        call.duration_ms = chat.duration_ms();
        call.error = chat.status == 2;
        let mut p = Map::new();
        p.insert("span_id".into(), Value::String(chat.span_id.clone()));
        for k in [
            "gen_ai.request.model",
            "gen_ai.response.model",
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "gen_ai.response.finish_reasons",
            "llm.model_name",
            "llm.token_count.prompt",
            "llm.token_count.completion",
        ] {
            if let Some(v) = chat.attr(k) {
                p.insert(k.into(), v.clone());
            }
        }
        if let Some(m) = &chat.status_message {
            p.insert("status_message".into(), Value::String(m.clone()));
        }
        call.payload = Some(js::stringify(&Value::Object(p)));
        b.push(key, call);
        key = chat.end_ns.unwrap_or(key);
        for m in &outputs[j] {
            b.message(m, key, Some(step));
        }
        seen = input.iter().chain(outputs[j].iter()).cloned().collect();
    }
    // What the run's transcript holds beyond the last model call (the output tool's own result).
    if let Some(all) = &transcript {
        if rs.chats.is_empty() {
            for m in &all[start.min(all.len())..] {
                b.message(m, key, None);
            }
        } else if all.len() > seen.len() && all[..seen.len()] == seen[..] {
            let tail_key = end_ns.unwrap_or(key).max(key);
            for m in &all[seen.len()..] {
                b.message(m, tail_key, Some(rs.chats.len() as u32));
            }
        }
    }
    for t in &rs.tools {
        let done_before = rs
            .chats
            .iter()
            .filter(|c| match (c.end_ns, t.start_ns) {
                (Some(e), Some(s)) => e <= s,
                _ => false,
            })
            .count() as u32;
        b.tool_span(t, (done_before > 0).then_some(done_before));
    }
    for s in &rs.all {
        for ev in s.events.iter().filter(|e| e.name == "exception") {
            let mut e = Event::new(EventKind::Other);
            e.source_type = Some("exception".into());
            e.error = true;
            let kind = ev.attrs.get("exception.type").and_then(Value::as_str);
            let message = ev.attrs.get("exception.message").and_then(Value::as_str);
            e.text = match (kind, message) {
                (Some(k), Some(m)) => Some(format!("{k}: {m}")),
                (Some(k), None) => Some(k.to_string()),
                (None, Some(m)) => Some(m.to_string()),
                (None, None) => None,
            };
            let at = ev.time_ns.or(s.end_ns).unwrap_or(key);
            e.timestamp_ms = ms(at);
            let mut p = Map::new();
            p.insert("span_id".into(), Value::String(s.span_id.clone()));
            p.insert("span".into(), Value::String(s.name.clone()));
            for (k, v) in &ev.attrs {
                p.insert(k.clone(), v.clone());
            }
            e.payload = Some(js::stringify(&Value::Object(p)));
            b.push(at, e);
        }
    }

    // Every landing: flags, payload.
    let failed: HashSet<String> = b
        .events
        .iter()
        .filter(|(_, e)| e.kind() == EventKind::Landing && e.error)
        .filter_map(|(_, e)| e.call_id.clone())
        .collect();
    for (_, e) in b.events.iter_mut() {
        if e.kind() == EventKind::Message
            && e.role == Some(Role::Tool)
            && e.call_id.as_ref().is_some_and(|id| failed.contains(id))
        {
            e.error = true;
        }
    }
    for i in 0..b.events.len() {
        if b.events[i].1.kind() != EventKind::Landing {
            continue;
        }
        let output_tool = b.events[i]
            .1
            .tool_name
            .as_ref()
            .is_some_and(|n| output_tools.contains(n));
        let payload = span_payload(b.spans[i], output_tool);
        let l = &mut b.events[i].1;
        if l.arguments.is_none() {
            l.flags |= LandingFlags::CONTENT_OMITTED;
        }
        l.payload = payload;
    }
    let Builder { mut events, .. } = b;
    events.sort_by_key(|(k, _)| *k);
    let mut events: Vec<Event> = events.into_iter().map(|(_, e)| e).collect();

    run.answer = answer(root, &outputs);
    let accepted = run.answer.is_some() && root.is_none_or(|r| r.status != 2);
    output::add_rows(&mut events, output_decl.as_ref(), &output_tools, accepted);
    let end_key = end_ns.map(|n| n.div_euclid(1_000_000));
    // The agent run itself failed.
    if let Some(r) = root.filter(|r| r.status == 2) {
        let mut e = Event::new(EventKind::Other);
        e.source_type = Some("run_error".into());
        e.error = true;
        e.text = r.status_message.clone();
        e.timestamp_ms = end_key;
        events.push(e);
    }
    let failed = root.is_some_and(|r| r.status == 2);
    let omitted = inputs
        .iter()
        .chain(outputs.iter())
        .flatten()
        .any(|m| m.omitted || m.calls.iter().any(|c| c.arguments.is_none()));
    if run.answer.is_some() || (omitted && !failed) {
        // Without content, the run still answered: an answer row that says its text is missing.
        let mut e = Event::new(EventKind::Answer);
        e.role = Some(Role::Assistant);
        e.text = run.answer.clone();
        if run.answer.is_none() {
            e.flags = LandingFlags::CONTENT_OMITTED;
        }
        e.timestamp_ms = end_key;
        events.push(e);
    }
    // The history the answer was judged against.
    let last = rs.chats.len().checked_sub(1);
    let context: Vec<Msg> = match last {
        Some(l) => {
            let sys = instructions(rs.chats[l]).or_else(|| root.and_then(instructions));
            sys.into_iter()
                .chain(inputs[l].iter().cloned())
                .chain(outputs[l].iter().cloned())
                .collect()
        }
        None => match &transcript {
            Some(all) => root
                .and_then(instructions)
                .into_iter()
                .chain(all.iter().cloned())
                .collect(),
            None => Vec::new(),
        },
    };
    events.extend(context.iter().map(|m| message_event(m, EventKind::Context)));
    run.events = events;
    run.renumber();
    run
}

/// The run's answer: pydantic-ai's `final_result`, OpenInference's agent `output.value`, the
/// agent span's own output messages, else the last assistant text without tool calls.
fn answer(root: Option<&Span>, outputs: &[Vec<Msg>]) -> Option<String> {
    let last_text = |msgs: &[Msg]| -> Option<String> {
        msgs.iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .filter(|m| m.calls.is_empty())
            .and_then(|m| m.text.clone())
            .filter(|t| !t.is_empty())
    };
    if let Some(r) = root {
        if let Some(v) = r.attr("final_result") {
            return Some(text_of(v));
        }
        if let Some(v) = oi::run_output(r) {
            return Some(text_of(v));
        }
        if let Some(out) = output_messages(r) {
            if let Some(t) = last_text(&out) {
                return Some(t);
            }
        }
    }
    outputs.last().and_then(|o| last_text(o))
}

/// OpenTelemetry GenAI spans: an OTLP JSON export, or one export request per line.
pub struct OtelAdapter;

/// OpenInference (Arize Phoenix) spans in an OTLP JSON export; read by the same reader, and
/// joined across files by the same stitcher.
pub struct OpenInferenceAdapter;

impl crate::ingest::Adapter for OtelAdapter {
    fn name(&self) -> &'static str {
        "otel"
    }
    fn family(&self) -> &'static str {
        "otel"
    }
    fn about(&self) -> &'static str {
        "OpenTelemetry GenAI spans: an OTLP JSON export, or one export request per line"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        crate::ingest::Match::strong_if(detect(head.text) == Some(Format::Otel))
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
        read(input, sink)
    }
    fn stitcher(&self) -> Option<Box<dyn crate::ingest::Stitch>> {
        Some(Box::new(Stitcher::default()))
    }
}

impl crate::ingest::Adapter for OpenInferenceAdapter {
    fn name(&self) -> &'static str {
        "openinference"
    }
    fn family(&self) -> &'static str {
        "openinference"
    }
    fn about(&self) -> &'static str {
        "OpenInference (Arize Phoenix) spans in an OTLP JSON export"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        crate::ingest::Match::strong_if(detect(head.text) == Some(Format::OpenInference))
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
        read(input, sink)
    }
    fn stitcher(&self) -> Option<Box<dyn crate::ingest::Stitch>> {
        Some(Box::new(Stitcher::default()))
    }
}

impl Format {
    #[allow(non_upper_case_globals)]
    pub const Otel: Format = Format(&OtelAdapter);
    #[allow(non_upper_case_globals)]
    pub const OpenInference: Format = Format(&OpenInferenceAdapter);
}

impl crate::ingest::Stitch for Stitcher {
    fn add(&mut self, fragment: crate::ingest::Fragment, sink: &mut dyn Sink) {
        match fragment.data.downcast::<SpanBatch>() {
            Ok(batch) => Stitcher::add(self, *batch, sink),
            Err(_) => {
                unreachable!("only the OpenTelemetry reader hands fragments to this stitcher")
            }
        }
    }
    fn finish(&mut self, sink: &mut dyn Sink) {
        Stitcher::finish(self, sink)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn spans_of_the_wrong_type_are_a_quarantined_record() {
        let text = r#"{"resourceSpans":[{"scopeSpans":[{"spans":"x"}]},{"scopeSpans":7}]}"#;
        let mut sink = crate::ingest::Collect::default();
        let batch = parse(text.as_bytes(), "bad.json", &mut sink);
        assert!(batch.traces.is_empty());
        assert_eq!(sink.records, 2);
        let reasons: Vec<&str> = sink.quarantined.iter().map(|q| q.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "resourceSpans[0].scopeSpans[0].spans is not a list of spans",
                "resourceSpans[1] has a scopeSpans that is not a list"
            ]
        );
    }

    use super::*;
    use crate::ingest::Collect;
    use serde_json::json;

    const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

    fn s(v: &str) -> Value {
        json!({ "stringValue": v })
    }

    fn kv(key: &str, value: Value) -> Value {
        json!({ "key": key, "value": value })
    }

    /// A structured value as OTLP writes it (`kvlistValue` / `arrayValue`).
    fn any(v: &Value) -> Value {
        match v {
            Value::String(t) => s(t),
            Value::Bool(b) => json!({ "boolValue": b }),
            Value::Number(n) if n.is_i64() => json!({ "intValue": n.to_string() }),
            Value::Number(n) => json!({ "doubleValue": n }),
            Value::Array(items) => {
                json!({ "arrayValue": { "values": items.iter().map(any).collect::<Vec<_>>() } })
            }
            Value::Object(map) => {
                json!({ "kvlistValue": { "values": map.iter().map(|(k, v)| kv(k, any(v))).collect::<Vec<_>>() } })
            }
            Value::Null => json!({}),
        }
    }

    fn span(id: &str, parent: Option<&str>, name: &str, start: u64, attrs: Vec<Value>) -> Value {
        let mut v = json!({
            "traceId": TRACE,
            "spanId": id,
            "name": name,
            "kind": 1,
            "startTimeUnixNano": (1_700_000_000_000_000_000u64 + start * 1_000_000).to_string(),
            "endTimeUnixNano": (1_700_000_000_000_000_000u64 + start * 1_000_000 + 500_000).to_string(),
            "attributes": attrs,
            "status": {},
        });
        if let Some(p) = parent {
            v["parentSpanId"] = json!(p);
        }
        v
    }

    fn request(spans: &[Value]) -> String {
        json!({ "resourceSpans": [{ "resource": {}, "scopeSpans": [{ "scope": { "name": "t" }, "spans": spans }] }] })
            .to_string()
    }

    fn read_text(text: &str) -> Collect {
        let mut sink = Collect::default();
        let batch = parse(text.as_bytes(), "mem.json", &mut sink);
        assemble_batch(batch, &mut sink);
        sink
    }

    fn only_run(c: &Collect) -> &Run {
        assert_eq!(c.conversations.len(), 1, "{:?}", c.quarantined);
        assert_eq!(c.conversations[0].0.runs.len(), 1);
        &c.conversations[0].0.runs[0]
    }

    const AGENT: &str = "00000000000000a1";
    const CHAT1: &str = "00000000000000c1";
    const TOOL: &str = "00000000000000d1";
    const CHAT2: &str = "00000000000000c2";

    fn messages_in(structured: bool, key: &str, v: Value) -> Value {
        if structured {
            kv(key, any(&v))
        } else {
            kv(key, s(&v.to_string()))
        }
    }

    /// One agent run: a model call asks for `lookup`, the tool runs, a second call answers.
    fn small_trace(structured: bool, tool_attrs: Vec<Value>) -> Vec<Value> {
        let user =
            json!([{ "role": "user", "parts": [{ "type": "text", "content": "where is 42?" }] }]);
        let call = json!([{ "role": "assistant", "parts": [{ "type": "tool_call", "id": "c1", "name": "lookup", "arguments": { "id": 42 } }] }]);
        let mut second_input = user.as_array().unwrap().clone();
        second_input.extend(call.as_array().unwrap().iter().cloned());
        second_input.push(json!({ "role": "tool", "parts": [{ "type": "tool_call_response", "id": "c1", "response": { "at": "dock 7" } }] }));
        let answer = json!([{ "role": "assistant", "parts": [{ "type": "text", "content": "It is at dock 7." }] }]);
        let common = |mut v: Vec<Value>| {
            v.push(kv("gen_ai.conversation.id", s("conv-1")));
            v
        };
        vec![
            span(
                TOOL,
                Some(AGENT),
                "execute_tool lookup",
                20,
                common(tool_attrs),
            ),
            span(
                CHAT2,
                Some(AGENT),
                "chat m",
                30,
                common(vec![
                    kv("gen_ai.operation.name", s("chat")),
                    messages_in(
                        structured,
                        "gen_ai.input.messages",
                        Value::Array(second_input),
                    ),
                    messages_in(structured, "gen_ai.output.messages", answer),
                ]),
            ),
            span(
                CHAT1,
                Some(AGENT),
                "chat m",
                10,
                common(vec![
                    kv("gen_ai.operation.name", s("chat")),
                    kv("gen_ai.request.model", s("m-1")),
                    messages_in(structured, "gen_ai.input.messages", user),
                    messages_in(structured, "gen_ai.output.messages", call),
                ]),
            ),
            span(
                AGENT,
                None,
                "invoke_agent helper",
                0,
                common(vec![
                    kv("gen_ai.operation.name", s("invoke_agent")),
                    kv("gen_ai.agent.name", s("helper")),
                ]),
            ),
        ]
    }

    fn full_tool(structured: bool) -> Vec<Value> {
        let args = json!({ "id": 42 });
        let result = json!({ "at": "dock 7" });
        vec![
            kv("gen_ai.operation.name", s("execute_tool")),
            kv("gen_ai.tool.name", s("lookup")),
            kv("gen_ai.tool.call.id", s("c1")),
            if structured {
                kv("gen_ai.tool.call.arguments", any(&args))
            } else {
                kv("gen_ai.tool.call.arguments", s(&args.to_string()))
            },
            if structured {
                kv("gen_ai.tool.call.result", any(&result))
            } else {
                kv("gen_ai.tool.call.result", s(&result.to_string()))
            },
        ]
    }

    #[test]
    fn string_encoded_and_structured_attributes_agree() {
        let a = read_text(&request(&small_trace(false, full_tool(false))));
        let b = read_text(&request(&small_trace(true, full_tool(true))));
        assert_eq!(a.records, 4);
        assert!(a.quarantined.is_empty() && b.quarantined.is_empty());
        let (ra, rb) = (only_run(&a), only_run(&b));
        assert_eq!(ra, rb);
        assert_eq!(ra.run_id, format!("{TRACE}:{AGENT}"));
        assert_eq!(ra.conversation_id, "conv-1");
        assert_eq!(ra.turn, 1);
        assert_eq!(ra.answer.as_deref(), Some("It is at dock 7."));
        assert_eq!(ra.user_message.as_deref(), Some("where is 42?"));
        assert_eq!(ra.model.as_deref(), Some("m-1"));
        let l: Vec<&Event> = ra.landings().collect();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].arguments.as_deref(), Some(r#"{"id":42}"#));
        assert_eq!(l[0].text.as_deref(), Some(r#"{"at":"dock 7"}"#));
        assert_eq!((l[0].flags, l[0].iteration), (0, Some(1)));
        assert_eq!(l[0].duration_ms, Some(0.5));
    }

    #[test]
    fn spans_in_any_order_give_the_same_run() {
        let spans = small_trace(false, full_tool(false));
        let forward = read_text(&request(&spans));
        let mut reversed = spans.clone();
        reversed.reverse();
        let backward = read_text(&request(&reversed));
        let mut mixed = spans.clone();
        mixed.swap(0, 2);
        mixed.swap(1, 3);
        let shuffled = read_text(&request(&mixed));
        assert_eq!(only_run(&forward), only_run(&backward));
        assert_eq!(only_run(&forward), only_run(&shuffled));
    }

    #[test]
    fn missing_results() {
        // The tool returned, but neither its span nor the messages kept the result.
        let mut spans = small_trace(
            false,
            vec![
                kv("gen_ai.tool.name", s("lookup")),
                kv("gen_ai.tool.call.id", s("c1")),
                kv("gen_ai.tool.call.arguments", s(r#"{"id":42}"#)),
            ],
        );
        // The second model call never happened: no tool message either.
        spans.remove(1);
        let c = read_text(&request(&spans));
        let l: Vec<&Event> = only_run(&c).landings().collect();
        assert!(l[0].has_flag(LandingFlags::CONTENT_OMITTED));
        assert!(!l[0].has_flag(LandingFlags::UNANSWERED));
        assert!(l[0].text.is_none());

        // The tool failed and nothing answered the call: unanswered, an error.
        let mut failed = spans.clone();
        failed[0]["status"] = json!({ "code": 2, "message": "boom" });
        let c = read_text(&request(&failed));
        let l: Vec<&Event> = only_run(&c).landings().collect();
        assert!(l[0].error && l[0].has_flag(LandingFlags::UNANSWERED));
        assert!(!l[0].has_flag(LandingFlags::CONTENT_OMITTED));

        // No tool span at all: the call is kept from the messages, unanswered.
        let c = read_text(&request(&spans[1..]));
        let l: Vec<&Event> = only_run(&c).landings().collect();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].source_type.as_deref(), Some("tool_call"));
        assert!(l[0].has_flag(LandingFlags::UNANSWERED));
        assert_eq!(l[0].arguments.as_deref(), Some(r#"{"id":42}"#));
    }

    #[test]
    fn a_trace_split_over_two_files() {
        let spans = small_trace(false, full_tool(false));
        let mut stitcher = Stitcher::default();
        let mut out = Collect::default();
        // File 1: the children only (they end first); nothing can be built yet.
        let first = parse(request(&spans[..3]).as_bytes(), "a.json", &mut out);
        stitcher.add(first, &mut out);
        assert!(out.conversations.is_empty() && out.quarantined.is_empty());
        // File 2: the root completes the trace.
        let second = parse(request(&spans[3..]).as_bytes(), "b.json", &mut out);
        stitcher.add(second, &mut out);
        stitcher.finish(&mut out);
        assert_eq!(out.records, 4);
        assert!(out.quarantined.is_empty());
        let whole = read_text(&request(&spans));
        let joined = only_run(&out);
        assert_eq!(joined.source, "b.json");
        assert_eq!(
            Run {
                source: String::new(),
                ..joined.clone()
            },
            Run {
                source: String::new(),
                ..only_run(&whole).clone()
            }
        );
        // A span of that trace arriving later is not merged, and said so; a full copy is
        // built again (the ingest then skips its runs as duplicates).
        let late = span(
            "00000000000000e1",
            Some(AGENT),
            "chat late",
            40,
            vec![kv("gen_ai.operation.name", s("chat"))],
        );
        let mut later = Collect::default();
        let batch = parse(request(&[late]).as_bytes(), "c.json", &mut later);
        stitcher.add(batch, &mut later);
        assert!(later.conversations.is_empty());
        assert_eq!(later.quarantined.len(), 1);
        assert_eq!(later.quarantined[0].severity, Severity::Dropped);
        assert!(later.quarantined[0]
            .reason
            .contains("after the trace had been assembled"));
        let mut copy = Collect::default();
        let batch = parse(request(&spans).as_bytes(), "d.json", &mut copy);
        stitcher.add(batch, &mut copy);
        assert_eq!(copy.conversations.len(), 1);
        assert_eq!(copy.conversations[0].0.runs[0].run_id, joined.run_id);
    }

    #[test]
    fn a_trace_never_completed_is_built_at_the_end_with_a_note() {
        let spans = small_trace(false, full_tool(false));
        let mut stitcher = Stitcher::default();
        let mut out = Collect::default();
        let batch = parse(request(&spans[..3]).as_bytes(), "a.json", &mut out);
        stitcher.add(batch, &mut out);
        stitcher.finish(&mut out);
        // Without the agent span the spans still name their run by conversation and turn.
        let run = only_run(&out);
        assert_eq!(run.run_id, format!("{TRACE}#1"));
        assert_eq!(run.landings().count(), 1);
        assert_eq!(out.quarantined.len(), 1);
        assert_eq!(out.quarantined[0].severity, Severity::Partial);
        assert!(out.quarantined[0].reason.contains(AGENT));
    }

    #[test]
    fn bad_records_are_quarantined_never_fatal() {
        let good = small_trace(false, full_tool(false));
        let mut no_ids = good[0].clone();
        no_ids.as_object_mut().unwrap().remove("spanId");
        let mut odd_attr = good[1].clone();
        odd_attr["attributes"]
            .as_array_mut()
            .unwrap()
            .push(json!({ "key": "weird", "value": { "someFutureValue": 1 } }));
        let lines = [
            request(&[odd_attr]),
            "{not json".to_string(),
            String::new(),
            r#"{"hello": "world"}"#.to_string(),
            request(&[no_ids]),
            request(&good[2..]),
            "[1, 2".to_string(),
        ];
        let c = read_text(&lines.join("\n"));
        // 4 spans, 3 lines that are not requests.
        assert_eq!(c.records, 7);
        let dropped: Vec<(&Locator, &str)> = c
            .quarantined
            .iter()
            .filter(|q| q.severity == Severity::Dropped)
            .map(|q| (&q.locator, q.reason.as_str()))
            .collect();
        assert_eq!(dropped.len(), 4, "{dropped:?}");
        assert_eq!(dropped[0].0, &Locator::Line(2));
        assert!(dropped[0].1.starts_with("line is not JSON"));
        assert_eq!(dropped[1].0, &Locator::Line(4));
        assert!(dropped[1].1.contains("no resourceSpans"));
        assert_eq!(dropped[2].0, &Locator::Line(5));
        assert!(dropped[2].1.contains("no spanId"));
        assert_eq!(dropped[3].0, &Locator::Line(7));
        // The three good spans still make the run (its tool span was the one without ids).
        let run = only_run(&c);
        assert_eq!(run.answer.as_deref(), Some("It is at dock 7."));
        assert_eq!(run.landings().count(), 1);
        // A document that is not JSON at all is one record.
        let c = read_text("{\n  \"resourceSpans\": [\n");
        assert_eq!(c.records, 1);
        assert_eq!(c.quarantined[0].locator, Locator::File);
    }

    #[test]
    fn indexed_attributes_and_message_events_without_an_agent() {
        // An older writer: indexed prompt/completion attributes, two user turns in one trace,
        // no agent span and no conversation id.
        let chat1 = span(
            "00000000000000b1",
            None,
            "openai.chat",
            0,
            vec![
                kv("gen_ai.operation.name", s("chat")),
                kv("gen_ai.prompt.0.role", s("system")),
                kv("gen_ai.prompt.0.content", s("be brief")),
                kv("gen_ai.prompt.1.role", s("user")),
                kv("gen_ai.prompt.1.content", s("weather in Oslo?")),
                kv("gen_ai.completion.0.role", s("assistant")),
                kv("gen_ai.completion.0.tool_calls.0.id", s("t1")),
                kv("gen_ai.completion.0.tool_calls.0.name", s("weather")),
                kv(
                    "gen_ai.completion.0.tool_calls.0.arguments",
                    s(r#"{"city":"Oslo"}"#),
                ),
            ],
        );
        let chat2 = span(
            "00000000000000b2",
            None,
            "openai.chat",
            10,
            vec![
                kv("gen_ai.operation.name", s("chat")),
                kv("gen_ai.prompt.0.role", s("system")),
                kv("gen_ai.prompt.0.content", s("be brief")),
                kv("gen_ai.prompt.1.role", s("user")),
                kv("gen_ai.prompt.1.content", s("weather in Oslo?")),
                kv("gen_ai.prompt.2.role", s("assistant")),
                kv("gen_ai.prompt.2.tool_calls.0.id", s("t1")),
                kv("gen_ai.prompt.2.tool_calls.0.name", s("weather")),
                kv(
                    "gen_ai.prompt.2.tool_calls.0.arguments",
                    s(r#"{"city":"Oslo"}"#),
                ),
                kv("gen_ai.prompt.3.role", s("tool")),
                kv("gen_ai.prompt.3.tool_call_id", s("t1")),
                kv("gen_ai.prompt.3.content", s("rain, 4 C")),
                kv("gen_ai.completion.0.role", s("assistant")),
                kv("gen_ai.completion.0.content", s("Rainy, 4 C.")),
            ],
        );
        // The second turn records its messages as the deprecated span events.
        let mut chat3 = span(
            "00000000000000b3",
            None,
            "chat",
            20,
            vec![kv("gen_ai.operation.name", s("chat"))],
        );
        let event = |name: &str, attrs: Vec<Value>| json!({ "name": name, "timeUnixNano": "1", "attributes": attrs });
        chat3["events"] = json!([
            event("gen_ai.system.message", vec![kv("content", s("be brief"))]),
            event(
                "gen_ai.user.message",
                vec![kv("content", s("weather in Oslo?"))]
            ),
            event(
                "gen_ai.assistant.message",
                vec![kv(
                    "tool_calls",
                    s(
                        r#"[{"id":"t1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]"#
                    )
                )]
            ),
            event(
                "gen_ai.tool.message",
                vec![kv("id", s("t1")), kv("content", s("rain, 4 C"))]
            ),
            event(
                "gen_ai.assistant.message",
                vec![kv("content", s("Rainy, 4 C."))]
            ),
            event(
                "gen_ai.user.message",
                vec![kv("content", s("and tomorrow?"))]
            ),
            event(
                "gen_ai.choice",
                vec![
                    kv("index", json!({"intValue": "0"})),
                    kv(
                        "message",
                        any(&json!({"role": "assistant", "content": "Sunny."}))
                    )
                ]
            ),
        ]);
        let c = read_text(&request(&[chat3, chat2, chat1]));
        assert!(c.quarantined.is_empty(), "{:?}", c.quarantined);
        assert_eq!(c.conversations.len(), 1);
        let conv = &c.conversations[0].0;
        assert_eq!(conv.id, TRACE);
        let runs: Vec<(u32, &str, Option<&str>, usize)> = conv
            .runs
            .iter()
            .map(|r| {
                (
                    r.turn,
                    r.run_id.as_str(),
                    r.answer.as_deref(),
                    r.landings().count(),
                )
            })
            .collect();
        let first = format!("{TRACE}#1");
        let second = format!("{TRACE}#2");
        assert_eq!(
            runs,
            vec![
                (1, first.as_str(), Some("Rainy, 4 C."), 1),
                (2, second.as_str(), Some("Sunny."), 0),
            ]
        );
        let l = conv.runs[0].landings().next().unwrap();
        assert_eq!(l.text.as_deref(), Some("rain, 4 C"));
        assert_eq!(l.arguments.as_deref(), Some(r#"{"city":"Oslo"}"#));
        // Turn 2's history reaches back to the tool result of turn 1.
        let history = conv.history_for(1);
        assert!(history
            .iter()
            .any(|m| m.role == Role::Tool && m.text == "rain, 4 C"));
        assert_eq!(history.last().unwrap().text, "Sunny.");
    }

    /// The OpenInference attributes alone (the GenAI ones removed) give the same landings.
    #[test]
    fn openinference_attributes_alone() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/testdata/otel/openinference-v5-content/s3_followup_from_history.json"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let both = read_text(&text);
        let mut doc: Value = serde_json::from_str(&text).unwrap();
        for span in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
            .as_array_mut()
            .unwrap()
        {
            let attrs = span["attributes"].as_array_mut().unwrap();
            attrs.retain(|a| {
                let k = a["key"].as_str().unwrap();
                k.starts_with("llm.")
                    || k.starts_with("input.")
                    || k.starts_with("output.")
                    || k.starts_with("tool")
                    || k == "session.id"
                    || k == "openinference.span.kind"
            });
        }
        let alone = read_text(&doc.to_string());
        assert!(alone.quarantined.is_empty());
        let (a, b) = (&both.conversations[0].0, &alone.conversations[0].0);
        assert_eq!(b.id, "conv-s3-followup");
        assert_eq!(a.runs.len(), 2);
        assert_eq!(b.runs.len(), 2);
        for (x, y) in a.runs.iter().zip(&b.runs) {
            assert_eq!(y.format, FORMAT_OPENINFERENCE);
            assert_eq!(
                (x.turn, &x.answer, &x.user_message),
                (y.turn, &y.answer, &y.user_message)
            );
            // The same JSON, whichever writer serialised it.
            let canonical = |t: &Option<String>| {
                t.as_deref()
                    .map(|t| js::stable_string(&js::parse_json(t).unwrap()))
            };
            let lx: Vec<&Event> = x.landings().collect();
            let ly: Vec<&Event> = y.landings().collect();
            assert_eq!(lx.len(), ly.len());
            for (p, q) in lx.iter().zip(&ly) {
                assert_eq!((&p.tool_name, &p.call_id), (&q.tool_name, &q.call_id));
                assert_eq!(canonical(&p.arguments), canonical(&q.arguments));
                assert_eq!(canonical(&p.text), canonical(&q.text));
            }
        }
        // The follow-up's history holds the earlier turn's tool result.
        let history = b.history_for(1);
        assert!(history
            .iter()
            .any(|m| m.role == Role::Tool && m.text.contains("41200")));
    }

    fn read_file_text(text: &str, flush_bytes: usize) -> Collect {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spans.jsonl");
        std::fs::write(&path, text).unwrap();
        let mut sink = Collect::default();
        let input = Input::new(&path, "spans.jsonl");
        read_flushing(&input, &mut sink, flush_bytes).unwrap();
        sink
    }

    #[test]
    fn files_are_streamed_and_complete_traces_handed_over_early() {
        // Two traces, one span per line, children before their parents.
        let first = small_trace(false, full_tool(false));
        let second: Vec<Value> = first
            .iter()
            .map(|s| {
                let mut s = s.clone();
                s["traceId"] = json!("1af7651916cd43dd8448eb211c80319c");
                s
            })
            .collect();
        let lines: Vec<String> = first
            .iter()
            .chain(&second)
            .map(|s| request(std::slice::from_ref(s)))
            .collect();
        let text = format!("\u{feff}\n{}\n", lines.join("\n"));
        let whole = read_text(&request(&first));
        for flush_bytes in [1, FLUSH_BYTES] {
            let c = read_file_text(&text, flush_bytes);
            assert_eq!(c.records, 8);
            assert!(c.quarantined.is_empty(), "{:?}", c.quarantined);
            // Handed over early or at the end, each trace is whole.
            assert_eq!(c.conversations.len(), if flush_bytes == 1 { 2 } else { 1 });
            let runs: Vec<&Run> = c.conversations.iter().flat_map(|(c, _)| &c.runs).collect();
            assert_eq!(runs.len(), 2);
            assert_eq!(runs[0].events, only_run(&whole).events);
        }
        // A pretty-printed document, and a broken first line, are read whole.
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<Value>(&request(&first)).unwrap())
                .unwrap();
        let c = read_file_text(&pretty, 1);
        assert_eq!(only_run(&c).events, only_run(&whole).events);
        let c = read_file_text(&format!("oops\n{}", lines.join("\n")), 1);
        assert_eq!(c.records, 9);
        assert_eq!(c.quarantined.len(), 1);
        assert_eq!(c.quarantined[0].locator, Locator::Line(1));
    }

    #[test]
    fn lines_and_documents_over_the_record_limit() {
        let spans = small_trace(false, full_tool(false));
        let lines: Vec<String> = spans
            .iter()
            .map(|s| request(std::slice::from_ref(s)))
            .collect();
        let longest = lines.iter().map(String::len).max().unwrap() as u64;
        let limit = longest + 16;
        let read_limited = |text: &str| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("spans.jsonl");
            std::fs::write(&path, text).unwrap();
            let mut sink = Collect::default();
            let mut input = Input::new(&path, "spans.jsonl");
            input.limits.record_bytes = limit;
            read(&input, &mut sink).unwrap();
            sink
        };
        let whole = read_text(&request(&spans));
        let long = "x".repeat(limit as usize + 10);
        for at in [0, 1] {
            let mut text = lines.clone();
            text.insert(at, long.clone());
            let c = read_limited(&text.join("\n"));
            assert_eq!(c.records, lines.len() as u64 + 1);
            assert_eq!(c.quarantined.len(), 1, "{:?}", c.quarantined);
            assert_eq!(c.quarantined[0].locator, Locator::Line(at as u64 + 1));
            assert!(c.quarantined[0].reason.starts_with(&format!(
                "line is {} B ({} bytes), over the",
                limit + 11,
                limit + 11
            )));
            assert_eq!(only_run(&c).events, only_run(&whole).events);
        }
        // A broken first line in a file too large to read whole: the rest is read by lines.
        let text = format!("oops\n{}", lines.join("\n"));
        assert!(text.len() as u64 > limit);
        let c = read_limited(&text);
        assert_eq!(c.records, lines.len() as u64 + 1);
        assert_eq!(c.quarantined.len(), 1);
        assert_eq!(c.quarantined[0].locator, Locator::Line(1));
        assert_eq!(only_run(&c).events, only_run(&whole).events);
        // A document over the limit is not read.
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<Value>(&request(&spans)).unwrap())
                .unwrap();
        let c = read_limited(&pretty);
        assert_eq!(c.records, 1);
        assert!(c.conversations.is_empty());
        assert_eq!(c.quarantined[0].locator, Locator::File);
        assert!(
            c.quarantined[0]
                .reason
                .starts_with("the file is a document of"),
            "{}",
            c.quarantined[0].reason
        );
    }

    #[test]
    fn ids_and_values() {
        assert_eq!(
            normalize_id("0AF7651916CD43DD8448EB211C80319C", 16).as_deref(),
            Some(TRACE)
        );
        // The plain protobuf JSON mapping writes ids in base64.
        assert_eq!(
            normalize_id("CvdlGRbNQ92ESOshHIAxnA==", 16).as_deref(),
            Some(TRACE)
        );
        assert_eq!(normalize_id("0000000000000000", 8), None);
        assert_eq!(normalize_id("", 8), None);
        assert_eq!(
            any_value(&json!({"intValue": "9007199254740993"})),
            Some(json!(9007199254740993i64))
        );
        assert_eq!(any_value(&json!({"intValue": 7})), Some(json!(7)));
        assert_eq!(
            any_value(&json!({"doubleValue": "NaN"})),
            Some(json!("NaN"))
        );
        assert_eq!(any_value(&json!({"boolValue": true})), Some(json!(true)));
        assert_eq!(any_value(&json!({"arrayValue": {}})), Some(json!([])));
        assert_eq!(any_value(&json!({"somethingElse": 1})), None);
        assert_eq!(any_value(&json!("bare")), None);
        let attrs = attributes(
            Some(&json!([
                kv("a.0.b", s("x")),
                kv("a.0.c.1.d", s("z")),
                kv("a.0.c.0.d", s("y")),
                kv("a.2.b", s("w"))
            ])),
            |_| false,
        );
        assert_eq!(
            unflatten(&attrs, "a."),
            vec![
                json!({"b": "x", "c": [{"d": "y"}, {"d": "z"}]}),
                json!({"b": "w"})
            ]
        );
    }
}
