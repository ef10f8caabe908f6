//! OpenTelemetry GenAI spans (and OpenInference spans, see [`super::openinference`]) from OTLP
//! exports, JSON or protobuf.
//!
//! # Wire shapes
//! OTLP protobuf (the `otlp-proto` format) is read by [`proto`] into the same spans as JSON;
//! see there for its two shapes. Two JSON shapes are read, and give the same runs: one OTLP/JSON `ExportTraceServiceRequest`
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
//!   no agent ancestor are grouped by `gen_ai.agent.call.id`, else join an agent span beside
//!   them (a sibling of the span or of an ancestor: the one whose time they overlap most, the
//!   nearest if none), and failing that are split into runs by user turn (a model call's turn =
//!   the user messages in its input). An agent span that only wraps other agents (no model
//!   call, tool or message of its own) gives no run.
//! - Run id: the agent's `gen_ai.agent.call.id`, else `{trace id}:{span id}` of the agent span
//!   (`{trace id}#{turn}` for runs split by turn). Conversation: `gen_ai.conversation.id`, else
//!   `session.id`, else the trace id.
//! - Messages come from `gen_ai.input.messages` / `gen_ai.output.messages` (structured or JSON
//!   text; parts `text`, `tool_call`, `tool_call_response`; as span attributes or as attributes
//!   of a `gen_ai.client.inference.operation.details` event), the indexed `gen_ai.prompt.{i}.*`
//!   / `gen_ai.completion.{i}.*` attributes, OpenInference's flattened `llm.*_messages`, or the
//!   deprecated per-message span events (`gen_ai.user.message`, `gen_ai.choice`, ...; the
//!   message in the event's attributes, its `body`, or the JSON of `gen_ai.event.content`).
//!   Content may be a list of content blocks, also as JSON text (Bedrock / Strands `text`,
//!   `toolUse`, `toolResult`; Anthropic `tool_use`, `tool_result`). A `tool_call_response` part
//!   or a tool-result block is a tool message whatever role carries it.
//! - The run's own messages are the first model call's input from the run's user message on,
//!   then each model call's new input and its output, then the tail of pydantic-ai's
//!   `pydantic_ai.all_messages`. Every assistant tool call is a landing, paired with its tool
//!   message and merged with its tool span (`execute_tool` / `running tool`: name, call id,
//!   arguments, result, status, duration; Strands writes the arguments and the result as the
//!   span's `gen_ai.tool.message` and `gen_ai.choice` events). A tool span without a call id is
//!   merged with the first unmerged call of the same tool, one with the same arguments first. A
//!   tool span without a requesting message is a landing of its own. The span's arguments and
//!   result win over the messages' copies.
//! - The turn is the number of user messages in the first model call's input, up to the run's
//!   own. The answer is the agent span's `final_result` (pydantic-ai), else its `output.value`
//!   (OpenInference), else its own output messages (`gen_ai.output.messages`, Strands'
//!   `gen_ai.choice` event), else the last assistant text without tool calls.
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

use std::io;

use crate::ingest::openinference as oi;
use crate::ingest::{Format, Input, Sink};

mod assemble;
mod messages;
mod output;
pub mod proto;
mod run;
pub(crate) mod span;
mod stitch;
#[cfg(test)]
mod tests;
mod wire;

pub use span::{Span, SpanEvent};
#[cfg(test)]
pub use stitch::assemble_batch;
pub use stitch::Stitcher;
#[cfg(test)]
pub use wire::parse;

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

/// Build the runs of spans another reader has already parsed, grouped by trace: each trace is
/// built at once, as if no other input existed (a reader whose files each hold whole traces).
pub(crate) fn assemble_spans(traces: Vec<(String, Vec<Span>)>, sink: &mut dyn Sink) {
    let mut stitcher = Stitcher::default();
    stitcher.add(span::SpanBatch { traces }, sink);
    stitcher.finish(sink);
}

/// Input read, in one-request-per-line files, between two hand-offs of the traces completed so
/// far: what a file holds in memory at once is bounded by this plus its incomplete traces.
const FLUSH_BYTES: usize = 32 << 20;

/// Read one OTLP JSON file (a document, or one request per line) and hand its spans to the sink,
/// grouped by trace. One request per line is streamed: every 32 MiB of input, the traces
/// already complete are handed over; the rest follow at the end of the file.
pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    wire::read_flushing(input, sink, FLUSH_BYTES)
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

/// OTLP protobuf trace exports: one `ExportTraceServiceRequest` a file (the Collector's S3
/// exporter), or the Collector file exporter's length-prefixed messages. Read into the same
/// spans as JSON and joined by the same stitcher, so a trace split over JSON and protobuf files
/// is one trace; runs are stored as `otel` or `openinference` by their spans, as from JSON.
pub struct OtlpProtoAdapter;

impl crate::ingest::Adapter for OtlpProtoAdapter {
    fn name(&self) -> &'static str {
        "otlp-proto"
    }
    fn family(&self) -> &'static str {
        "otlp-proto"
    }
    fn about(&self) -> &'static str {
        "OpenTelemetry GenAI or OpenInference spans in an OTLP protobuf export (*.binpb, *.pb): \
         one request a file, or length-prefixed requests; runs are stored as otel or \
         openinference"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        proto::detect(head.bytes, head.path)
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
        proto::read(input, sink)
    }
    fn stitcher(&self) -> Option<Box<dyn crate::ingest::Stitch>> {
        Some(Box::new(Stitcher::default()))
    }
}

impl Format {
    #[allow(non_upper_case_globals)]
    pub const OtlpProto: Format = Format(&OtlpProtoAdapter);
    #[allow(non_upper_case_globals)]
    pub const Otel: Format = Format(&OtelAdapter);
    #[allow(non_upper_case_globals)]
    pub const OpenInference: Format = Format(&OpenInferenceAdapter);
}
