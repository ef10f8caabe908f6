//! OpenInference span attributes (Arize Phoenix and the `openinference-instrumentation-*`
//! packages), as the OpenTelemetry reader (`otel/`) reads them.
//!
//! OpenInference marks every span with `openinference.span.kind` (`AGENT`, `LLM`, `TOOL`,
//! `CHAIN`, ...). The vocabulary the run builder needs:
//! - the conversation is `session.id`;
//! - an `AGENT` span is one agent run (a root `CHAIN` span stands in for it when a trace has no
//!   agent span); its `input.value` is the user's request and `output.value` the answer;
//! - an `LLM` span is one model call: its messages are flattened into
//!   `llm.input_messages.<i>.message.*` and `llm.output_messages.<i>.message.*` keys (`role`,
//!   `content`, `contents.<j>.message_content.text`, `tool_calls.<k>.tool_call.function.name` /
//!   `.function.arguments` / `.id`, `tool_call_id`); the model is `llm.model_name`;
//! - a `TOOL` span is one tool execution: `tool.name`, `tool_call.id`, the arguments in
//!   `input.value` and the result in `output.value`.
//!
//! Processors that rewrite GenAI spans in place (openinference-instrumentation-pydantic-ai) keep
//! the GenAI keys; the builder reads those first and falls back to the keys here.

use crate::ingest::otel::span::{unflatten, Span};
use serde_json::Value;

/// The span-kind attribute.
pub const SPAN_KIND: &str = "openinference.span.kind";

/// The span's OpenInference kind, upper-cased as the specification writes it.
pub fn kind(span: &Span) -> Option<String> {
    span.str_attr(SPAN_KIND).map(str::to_ascii_uppercase)
}

/// Does the span carry any OpenInference attribute?
pub fn is_openinference(span: &Span) -> bool {
    span.attrs.contains_key(SPAN_KIND)
}

fn is_kind(span: &Span, wanted: &str) -> bool {
    kind(span).as_deref() == Some(wanted)
}

pub fn is_agent(span: &Span) -> bool {
    is_kind(span, "AGENT")
}

pub fn is_llm(span: &Span) -> bool {
    is_kind(span, "LLM")
}

pub fn is_tool(span: &Span) -> bool {
    is_kind(span, "TOOL")
}

pub fn is_chain(span: &Span) -> bool {
    is_kind(span, "CHAIN")
}

/// `session.id`.
pub fn session(span: &Span) -> Option<&str> {
    span.str_attr("session.id").filter(|s| !s.is_empty())
}

/// The flattened input messages of an LLM span, rebuilt as objects (`{"message": {...}}`).
pub fn input_messages(span: &Span) -> Option<Vec<Value>> {
    let list = unflatten(&span.attrs, "llm.input_messages.");
    (!list.is_empty()).then_some(list)
}

/// The flattened output messages of an LLM span.
pub fn output_messages(span: &Span) -> Option<Vec<Value>> {
    let list = unflatten(&span.attrs, "llm.output_messages.");
    (!list.is_empty()).then_some(list)
}

/// `llm.model_name`.
pub fn model(span: &Span) -> Option<&str> {
    span.str_attr("llm.model_name").filter(|s| !s.is_empty())
}

/// A TOOL span's tool name.
pub fn tool_name(span: &Span) -> Option<&str> {
    span.str_attr("tool.name").filter(|s| !s.is_empty())
}

/// A TOOL span's call id.
pub fn tool_call_id(span: &Span) -> Option<&str> {
    span.str_attr("tool_call.id").filter(|s| !s.is_empty())
}

/// A TOOL span's arguments: `input.value`. (`tool.parameters` names the parameters' schema in
/// the specification, so it is not read as the arguments.)
pub fn tool_arguments(span: &Span) -> Option<&Value> {
    if is_tool(span) {
        span.attr("input.value")
    } else {
        None
    }
}

/// A TOOL span's result: `output.value`.
pub fn tool_result(span: &Span) -> Option<&Value> {
    if is_tool(span) {
        span.attr("output.value")
    } else {
        None
    }
}

/// An AGENT (or stand-in CHAIN) span's request: `input.value`.
pub fn run_input(span: &Span) -> Option<&str> {
    if is_agent(span) || is_chain(span) {
        span.str_attr("input.value")
    } else {
        None
    }
}

/// An AGENT (or stand-in CHAIN) span's answer: `output.value`.
pub fn run_output(span: &Span) -> Option<&Value> {
    if is_agent(span) || is_chain(span) {
        span.attr("output.value")
    } else {
        None
    }
}
