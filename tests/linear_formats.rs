//! Reading one record costs time and peak memory linear in its items, for every format.
//!
//! For each format a generator builds one record (see `ingest::limits` for what a record is in
//! each format) holding `n` items, each a tool call with its result, in the shape the format's
//! real files have. The record is read through the public reader at `n`, `4 n` and `16 n`
//! items; wall time is the best of three tries (a loaded machine only slows single tries down)
//! and memory is the peak of allocated bytes above what was allocated before the read. Linear
//! work takes about 16 times as long and as much at `16 n`; quadratic work about 256 times. The
//! bounds are 60 times for time and 40 times for memory.
//!
//! All measurements run in one test function: the allocator counts are process-wide, and a
//! test running beside them would add its allocations to the peak.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use traceaudit::read::{read_path, Collect};
use traceaudit::Format;

/// The system allocator, counting the bytes it holds now and the most it held since the last
/// [`reset_peak`].
struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn shrank(bytes: usize) {
    CURRENT.fetch_sub(bytes, Ordering::Relaxed);
}

// SAFETY: every call is passed on to `System` unchanged; the counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Start a measurement: the peak becomes what is allocated now, which is returned as the
/// baseline.
fn reset_peak() -> usize {
    let now = CURRENT.load(Ordering::Relaxed);
    PEAK.store(now, Ordering::Relaxed);
    now
}

fn peak_since(baseline: usize) -> usize {
    PEAK.load(Ordering::Relaxed).saturating_sub(baseline)
}

// ---------------------------------------------------------------------------------------------
// Item contents shared by every generator: call `k` asks `lookup` for item `k`, and its result
// names a dock, so that a landing's text shows it was paired with its own result.

fn call_id(k: usize) -> String {
    format!("call_{k:06}")
}

fn args(k: usize) -> Value {
    json!({ "id": k })
}

fn args_text(k: usize) -> String {
    args(k).to_string()
}

fn result_text(k: usize) -> String {
    format!("item {k} is at dock {}", k % 97)
}

const QUESTION: &str = "Where are the items?";
const ANSWER: &str = "All items are at their docks.";

fn bytes_of(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("a JSON value serialises")
}

// ---------------------------------------------------------------------------------------------
// Generators: one record holding `n` tool calls with their results.

/// An Inspect AI JSON log with one sample: assistant `tool_calls` answered by tool messages,
/// and the sample's tool events for the same calls.
fn inspect_ai(n: usize) -> Vec<u8> {
    let mut messages =
        vec![json!({ "id": "m-user", "role": "user", "source": "input", "content": QUESTION })];
    let mut events = Vec::with_capacity(n);
    for k in 0..n {
        messages.push(json!({
            "id": format!("m-a{k}"),
            "role": "assistant",
            "source": "generate",
            "content": "",
            "tool_calls": [{ "id": call_id(k), "function": "lookup", "arguments": args(k) }],
            "model": "gpt-4o-mini"
        }));
        messages.push(json!({
            "id": format!("m-t{k}"),
            "role": "tool",
            "content": result_text(k),
            "tool_call_id": call_id(k),
            "function": "lookup"
        }));
        events.push(json!({
            "event": "tool",
            "type": "function",
            "id": call_id(k),
            "function": "lookup",
            "arguments": args(k),
            "result": result_text(k),
            "timestamp": "2025-05-12T20:28:13.296345-04:00",
            "completed": "2025-05-12T20:28:13.396345-04:00",
            "working_time": 0.1
        }));
    }
    messages.push(
        json!({ "id": "m-final", "role": "assistant", "source": "generate", "content": ANSWER }),
    );
    bytes_of(&json!({
        "version": 2,
        "status": "success",
        "eval": {
            "eval_id": "LinearEval000000000000",
            "run_id": "LinearRun0000000000000",
            "created": "2025-05-12T20:28:13-04:00",
            "task": "linear",
            "task_id": "LinearTask000000000000",
            "task_version": 0,
            "model": "openai/gpt-4o-mini",
            "dataset": { "name": "linear", "samples": 1, "sample_ids": [1] },
            "config": {}
        },
        "plan": { "name": "plan", "steps": [] },
        "results": { "total_samples": 1, "completed_samples": 1, "scores": [] },
        "stats": { "started_at": "2025-05-12T20:28:13-04:00", "completed_at": "2025-05-12T20:28:15-04:00" },
        "samples": [{
            "id": 1,
            "epoch": 1,
            "input": QUESTION,
            "target": "docks",
            "messages": messages,
            "output": { "model": "gpt-4o-mini", "choices": [] },
            "scores": {},
            "metadata": {},
            "store": {},
            "events": events,
            "attachments": {}
        }]
    }))
}

/// A SWE-agent trajectory of a function-calling agent: history `tool_calls` answered by tool
/// messages naming `tool_call_ids`, with one trajectory step per call.
fn swe_agent(n: usize) -> Vec<u8> {
    let mut history = vec![
        json!({ "role": "system", "content": "You are an autonomous programmer.", "agent": "main", "message_type": "system_prompt" }),
        json!({ "role": "user", "content": QUESTION, "agent": "main", "message_type": "observation" }),
    ];
    let mut trajectory = Vec::with_capacity(n);
    for k in 0..n {
        let action = format!("lookup {k}");
        history.push(json!({
            "role": "assistant",
            "content": format!("Looking up item {k}."),
            "thought": format!("Looking up item {k}."),
            "action": action,
            "agent": "main",
            "tool_calls": [{
                "function": { "arguments": args_text(k), "name": "lookup" },
                "id": call_id(k),
                "type": "function"
            }],
            "message_type": "action"
        }));
        history.push(json!({
            "role": "tool",
            "content": result_text(k),
            "agent": "main",
            "message_type": "observation",
            "tool_call_ids": [call_id(k)]
        }));
        trajectory.push(json!({
            "action": action,
            "observation": result_text(k),
            "response": format!("Looking up item {k}."),
            "thought": format!("Looking up item {k}."),
            "state": "{}",
            "execution_time": 0.1
        }));
    }
    bytes_of(&json!({
        "environment": "swe_main",
        "trajectory": trajectory,
        "history": history,
        "info": { "exit_status": "submitted", "submission": ANSWER, "model_stats": {} }
    }))
}

/// A mini-swe-agent 2.x trajectory with tool calls: the `bash` tool called through
/// `tool_calls`, answered by tool messages naming `tool_call_id`.
fn mini_swe_agent(n: usize) -> Vec<u8> {
    let mut messages = vec![
        json!({ "role": "system", "content": "You are a helpful assistant that can interact with a computer." }),
        json!({ "role": "user", "content": QUESTION }),
    ];
    for k in 0..n {
        let command = format!("cat item_{k}.txt");
        messages.push(json!({
            "role": "assistant",
            "content": format!("THOUGHT: read item {k}."),
            "tool_calls": [{
                "id": call_id(k),
                "type": "function",
                "function": { "name": "bash", "arguments": json!({ "command": command }).to_string() }
            }],
            "extra": { "actions": [{ "command": command, "tool_call_id": call_id(k) }], "cost": 1.0, "timestamp": 1796158657.23 }
        }));
        messages.push(json!({
            "role": "tool",
            "content": format!("<returncode>0</returncode>\n<output>\n{}\n</output>", result_text(k)),
            "tool_call_id": call_id(k),
            "extra": { "raw_output": result_text(k), "returncode": 0, "timestamp": 1796158657.72, "exception_info": "" }
        }));
    }
    messages.push(json!({ "role": "assistant", "content": ANSWER }));
    bytes_of(&json!({
        "info": {
            "model_stats": { "instance_cost": 1.0, "api_calls": n },
            "config": { "agent_type": "DefaultAgent", "model": { "model_name": "gpt-4o" } },
            "mini_version": "2.4.6",
            "exit_status": "Submitted",
            "submission": ""
        },
        "messages": messages,
        "trajectory_format": "mini-swe-agent-1.1"
    }))
}

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

fn otlp_str(v: &str) -> Value {
    json!({ "stringValue": v })
}

fn otlp_kv(key: &str, value: &str) -> Value {
    json!({ "key": key, "value": otlp_str(value) })
}

fn otlp_span(id: u64, parent: Option<u64>, name: &str, start_ms: u64, attrs: Vec<Value>) -> Value {
    let base = 1_700_000_000_000_000_000u64;
    let mut v = json!({
        "traceId": TRACE,
        "spanId": format!("{id:016x}"),
        "name": name,
        "kind": 1,
        "startTimeUnixNano": (base + start_ms * 1_000_000).to_string(),
        "endTimeUnixNano": (base + start_ms * 1_000_000 + 500_000).to_string(),
        "attributes": attrs,
        "status": {}
    });
    if let Some(p) = parent {
        v["parentSpanId"] = json!(format!("{p:016x}"));
    }
    v
}

fn otlp_document(spans: Vec<Value>) -> Vec<u8> {
    bytes_of(&json!({
        "resourceSpans": [{
            "resource": { "attributes": [otlp_kv("service.name", "linear")] },
            "scopeSpans": [{ "scope": { "name": "linear" }, "spans": spans }]
        }]
    }))
}

const AGENT_SPAN: u64 = 0xa1;

/// An OTLP JSON export of one GenAI trace: an agent span, and under it per item a chat span
/// whose output asks for a tool call and the tool span answering it by call id.
fn otel(n: usize) -> Vec<u8> {
    let mut spans = vec![otlp_span(
        AGENT_SPAN,
        None,
        "invoke_agent helper",
        0,
        vec![
            otlp_kv("gen_ai.operation.name", "invoke_agent"),
            otlp_kv("gen_ai.agent.name", "helper"),
            otlp_kv("gen_ai.conversation.id", "conv-linear"),
        ],
    )];
    for k in 0..n {
        let output = json!([{ "role": "assistant", "parts": [{ "type": "tool_call", "id": call_id(k), "name": "lookup", "arguments": args(k) }] }]);
        let t = 1 + 2 * k as u64;
        spans.push(otlp_span(
            0x1_0000 + k as u64,
            Some(AGENT_SPAN),
            "chat gpt-4o",
            t,
            vec![
                otlp_kv("gen_ai.operation.name", "chat"),
                otlp_kv("gen_ai.request.model", "gpt-4o"),
                otlp_kv("gen_ai.output.messages", &output.to_string()),
            ],
        ));
        spans.push(otlp_span(
            0x2_0000 + k as u64,
            Some(AGENT_SPAN),
            "execute_tool lookup",
            t + 1,
            vec![
                otlp_kv("gen_ai.operation.name", "execute_tool"),
                otlp_kv("gen_ai.tool.name", "lookup"),
                otlp_kv("gen_ai.tool.call.id", &call_id(k)),
                otlp_kv("gen_ai.tool.call.arguments", &args_text(k)),
                otlp_kv("gen_ai.tool.call.result", &result_text(k)),
            ],
        ));
    }
    let answer = json!([{ "role": "assistant", "parts": [{ "type": "text", "content": ANSWER }] }]);
    spans.push(otlp_span(
        0x3_0000,
        Some(AGENT_SPAN),
        "chat gpt-4o",
        2 + 2 * n as u64,
        vec![
            otlp_kv("gen_ai.operation.name", "chat"),
            otlp_kv("gen_ai.request.model", "gpt-4o"),
            otlp_kv("gen_ai.output.messages", &answer.to_string()),
        ],
    ));
    otlp_document(spans)
}

/// The [`otel`] export as one OTLP protobuf request (the S3 exporter's shape, read whole like
/// the JSON document).
fn otlp_proto(n: usize) -> Vec<u8> {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    use prost::Message as _;
    let doc: Value = serde_json::from_slice(&otel(n)).unwrap();
    let id = |v: &Value| -> Vec<u8> {
        let hex = v.as_str().unwrap_or("");
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    };
    let time = |v: &Value| v.as_str().unwrap().parse::<u64>().unwrap();
    let spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| Span {
            trace_id: id(&s["traceId"]),
            span_id: id(&s["spanId"]),
            parent_span_id: id(&s["parentSpanId"]),
            name: s["name"].as_str().unwrap().to_string(),
            start_time_unix_nano: time(&s["startTimeUnixNano"]),
            end_time_unix_nano: time(&s["endTimeUnixNano"]),
            attributes: s["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|kv| KeyValue {
                    key: kv["key"].as_str().unwrap().to_string(),
                    value: Some(AnyValue {
                        value: Some(any_value::Value::StringValue(
                            kv["value"]["stringValue"].as_str().unwrap().to_string(),
                        )),
                    }),
                    ..KeyValue::default()
                })
                .collect(),
            ..Span::default()
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans,
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
    .encode_to_vec()
}

/// An any-agent trace: an `invoke_agent` span, and under it per item a `call_llm` span whose
/// output asks for a tool call and the `execute_tool` span answering it (paired by tool name and
/// arguments: any-agent's model outputs carry no call id).
fn any_agent(n: usize) -> Vec<u8> {
    let base = 1_700_000_000_000_000_000u64;
    let span = |id: u64, parent: Option<u64>, name: &str, start_ms: u64, attrs: Value| {
        let ids = |span_id: u64| json!({ "trace_id": 7, "span_id": span_id, "is_remote": false });
        json!({
            "name": name,
            "kind": "internal",
            "parent": parent.map(ids),
            "start_time": base + start_ms * 1_000_000,
            "end_time": base + start_ms * 1_000_000 + 500_000,
            "status": { "status_code": "ok", "description": null },
            "context": ids(id),
            "attributes": attrs,
            "links": [],
            "events": [],
            "resource": { "attributes": {}, "schema_url": "" }
        })
    };
    let mut spans = Vec::with_capacity(2 * n + 2);
    for k in 0..n {
        let t = 1 + 2 * k as u64;
        let output = json!([{ "tool.name": "lookup", "tool.args": args_text(k) }]);
        let mut attrs = json!({
            "gen_ai.operation.name": "call_llm",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.output": output.to_string(),
            "gen_ai.output.type": "json"
        });
        if k == 0 {
            let input = json!([{ "role": "user", "content": QUESTION }]);
            attrs["gen_ai.input.messages"] = json!(input.to_string());
        }
        spans.push(span(
            0x1_0000 + k as u64,
            Some(AGENT_SPAN),
            "call_llm gpt-4o",
            t,
            attrs,
        ));
        spans.push(span(
            0x2_0000 + k as u64,
            Some(AGENT_SPAN),
            "execute_tool lookup",
            t + 1,
            json!({
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.tool.args": args_text(k),
                "gen_ai.output": result_text(k),
                "gen_ai.output.type": "text"
            }),
        ));
    }
    spans.push(span(
        0x3_0000,
        Some(AGENT_SPAN),
        "call_llm gpt-4o",
        2 + 2 * n as u64,
        json!({
            "gen_ai.operation.name": "call_llm",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.output": ANSWER,
            "gen_ai.output.type": "text"
        }),
    ));
    spans.push(span(
        AGENT_SPAN,
        None,
        "invoke_agent [helper]",
        0,
        json!({ "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper" }),
    ));
    bytes_of(&json!({ "spans": spans, "final_output": ANSWER }))
}

/// An OTLP JSON export of one OpenInference trace: an `AGENT` span, and under it per item an
/// `LLM` span whose flattened output message asks for a tool call and the `TOOL` span
/// answering it by call id.
fn openinference(n: usize) -> Vec<u8> {
    let mut spans = vec![otlp_span(
        AGENT_SPAN,
        None,
        "helper",
        0,
        vec![
            otlp_kv("openinference.span.kind", "AGENT"),
            otlp_kv("session.id", "conv-linear"),
            otlp_kv("input.value", QUESTION),
            otlp_kv("output.value", ANSWER),
        ],
    )];
    for k in 0..n {
        let t = 1 + 2 * k as u64;
        let out = "llm.output_messages.0.message";
        let call = format!("{out}.tool_calls.0.tool_call");
        spans.push(otlp_span(
            0x1_0000 + k as u64,
            Some(AGENT_SPAN),
            "ChatCompletion",
            t,
            vec![
                otlp_kv("openinference.span.kind", "LLM"),
                otlp_kv("session.id", "conv-linear"),
                otlp_kv("llm.model_name", "gpt-4o"),
                otlp_kv(&format!("{out}.role"), "assistant"),
                otlp_kv(&format!("{call}.id"), &call_id(k)),
                otlp_kv(&format!("{call}.function.name"), "lookup"),
                otlp_kv(&format!("{call}.function.arguments"), &args_text(k)),
            ],
        ));
        spans.push(otlp_span(
            0x2_0000 + k as u64,
            Some(AGENT_SPAN),
            "lookup",
            t + 1,
            vec![
                otlp_kv("openinference.span.kind", "TOOL"),
                otlp_kv("session.id", "conv-linear"),
                otlp_kv("tool.name", "lookup"),
                otlp_kv("tool_call.id", &call_id(k)),
                otlp_kv("input.value", &args_text(k)),
                otlp_kv("output.value", &result_text(k)),
            ],
        ));
    }
    otlp_document(spans)
}

/// The envelopes of one agentfootprint run: per item a `tool_start` and its `tool_end`, and an
/// `iteration_end` carrying the whole history the model saw.
fn agentfootprint_events(n: usize) -> (Vec<Value>, Vec<Value>) {
    let mut offset = 0u64;
    let mut envelope = |kind: &str, payload: Value| {
        offset += 1;
        json!({
            "type": format!("agentfootprint.{kind}"),
            "payload": payload,
            "meta": {
                "wallClockMs": 1_795_968_647_738u64 + offset,
                "runOffsetMs": offset,
                "runtimeStageId": format!("stage#{offset}"),
                "subflowPath": [],
                "compositionPath": ["Agent:agent"],
                "runId": "run-linear-1",
                "sessionId": "sess-linear"
            }
        })
    };
    let mut events = vec![
        envelope(
            "agent.run_configured",
            json!({ "agentId": "agent", "llm": { "provider": "mock", "model": "mock-model" }, "reactMode": "dynamic", "memories": [] }),
        ),
        envelope(
            "agent.turn_start",
            json!({ "turnIndex": 0, "userPrompt": QUESTION }),
        ),
    ];
    let mut history = vec![json!({ "role": "user", "content": QUESTION })];
    for k in 0..n {
        events.push(envelope(
            "stream.tool_start",
            json!({ "toolName": "lookup", "toolCallId": call_id(k), "args": args(k) }),
        ));
        events.push(envelope(
            "stream.tool_end",
            json!({ "toolCallId": call_id(k), "result": result_text(k), "durationMs": 1 }),
        ));
        history.push(json!({ "role": "assistant", "content": "", "toolCalls": [{ "id": call_id(k), "name": "lookup", "args": args(k) }] }));
        history.push(json!({ "role": "tool", "content": result_text(k), "toolCallId": call_id(k), "toolName": "lookup" }));
    }
    events.push(envelope(
        "agent.iteration_end",
        json!({ "turnIndex": 0, "iterIndex": 1, "toolCallCount": n, "history": history }),
    ));
    events.push(envelope(
        "agent.turn_end",
        json!({ "turnIndex": 0, "finalContent": ANSWER, "iterationCount": 1, "durationMs": 10 }),
    ));
    (events, history)
}

/// An agentfootprint NDJSON file holding one run, one envelope per line.
fn agentfootprint_ndjson(n: usize) -> Vec<u8> {
    let (events, _) = agentfootprint_events(n);
    let mut out = Vec::new();
    for e in &events {
        out.extend_from_slice(&bytes_of(e));
        out.push(b'\n');
    }
    out
}

/// An agentfootprint Recording document holding one run, with the history in its snapshot.
fn agentfootprint_recording(n: usize) -> Vec<u8> {
    let (events, history) = agentfootprint_events(n);
    bytes_of(&json!({
        "snapshot": {
            "sharedState": {
                "userMessage": QUESTION,
                "history": history,
                "runIdentity": { "conversationId": "sess-linear" }
            }
        },
        "events": events,
        "structure": { "name": "Initialize", "id": "seed", "type": "stage", "description": "Agent: ReAct loop" }
    }))
}

/// A tau-bench results list holding one record: OpenAI-style `tool_calls` answered by tool
/// messages naming `tool_call_id`.
fn tau_bench(n: usize) -> Vec<u8> {
    let mut traj = vec![
        json!({ "role": "system", "content": "You are an airline agent." }),
        json!({ "role": "user", "content": QUESTION }),
    ];
    for k in 0..n {
        traj.push(json!({
            "content": null,
            "role": "assistant",
            "tool_calls": [{
                "function": { "arguments": args_text(k), "name": "lookup" },
                "id": call_id(k),
                "type": "function"
            }]
        }));
        traj.push(json!({ "role": "tool", "tool_call_id": call_id(k), "name": "lookup", "content": result_text(k) }));
    }
    traj.push(json!({ "role": "assistant", "content": ANSWER }));
    bytes_of(&json!([{
        "task_id": 0,
        "reward": 1.0,
        "info": { "task": { "user_id": "user_1", "actions": [], "instruction": QUESTION, "outputs": [] }, "source": "user" },
        "traj": traj,
        "trial": 0
    }]))
}

/// A tau2 list holding one simulation: assistant `tool_calls` answered by tool messages naming
/// the call's `id`.
fn tau2(n: usize) -> Vec<u8> {
    let mut messages = vec![
        json!({ "role": "assistant", "content": "Hi! How can I help you today?", "tool_calls": null, "turn_idx": 0 }),
        json!({ "role": "user", "content": QUESTION, "tool_calls": null, "turn_idx": 1 }),
    ];
    for k in 0..n {
        messages.push(json!({
            "role": "assistant",
            "content": "",
            "tool_calls": [{ "id": call_id(k), "name": "lookup", "arguments": args(k), "requestor": "assistant" }],
            "turn_idx": 2 + 2 * k
        }));
        messages.push(json!({
            "id": call_id(k),
            "role": "tool",
            "content": result_text(k),
            "requestor": "assistant",
            "error": false,
            "turn_idx": 3 + 2 * k
        }));
    }
    messages.push(json!({ "role": "assistant", "content": ANSWER, "tool_calls": null, "turn_idx": 2 + 2 * n }));
    bytes_of(&json!([{
        "id": "sim-linear-1",
        "task_id": "1",
        "trial": 0,
        "termination_reason": "user_stop",
        "reward_info": { "reward": 1.0 },
        "messages": messages
    }]))
}

/// An OpenHands event list: `run` actions asked for through tool calls, each answered by a `run`
/// observation naming it as its `cause`, then `finish`.
fn openhands_event_list(n: usize) -> Vec<Value> {
    let mut events = vec![json!({
        "id": 0, "timestamp": "2025-01-27T22:44:56.900854", "source": "user",
        "message": QUESTION, "action": "message",
        "args": { "content": QUESTION, "image_urls": null, "wait_for_response": false }
    })];
    for k in 0..n {
        let command = format!("cat item_{k}.txt");
        let id = 2 * k + 1;
        events.push(json!({
            "id": id, "timestamp": "2025-01-27T22:45:13.764487", "source": "agent",
            "message": format!("Running command: {command}"), "action": "run",
            "tool_call_metadata": {
                "function_name": "execute_bash", "tool_call_id": call_id(k),
                "model_response": {
                    "id": format!("chatcmpl-{k}"), "model": "gpt-4o",
                    "choices": [{ "index": 0, "message": {
                        "role": "assistant", "content": format!("Read item {k}."),
                        "tool_calls": [{ "id": call_id(k), "type": "function", "function": {
                            "name": "execute_bash",
                            "arguments": json!({ "command": command }).to_string()
                        } }]
                    } }]
                },
                "total_calls_in_response": 1
            },
            "args": { "command": command, "is_input": false, "thought": format!("Read item {k}."),
                      "blocking": false, "hidden": false, "confirmation_state": "confirmed" }
        }));
        events.push(json!({
            "id": id + 1, "timestamp": "2025-01-27T22:45:13.801384", "source": "agent",
            "message": format!("Command `{command}` executed with exit code 0."),
            "cause": id, "observation": "run",
            "tool_call_metadata": { "function_name": "execute_bash", "tool_call_id": call_id(k) },
            "content": result_text(k),
            "extras": { "command": command, "metadata": { "exit_code": 0 } }
        }));
    }
    events.push(json!({
        "id": 2 * n + 1, "source": "agent", "message": ANSWER, "action": "finish",
        "args": { "outputs": {}, "thought": ANSWER, "final_thought": ANSWER }
    }));
    events
}

/// An OpenHands event stream file: one event list.
fn openhands_events(n: usize) -> Vec<u8> {
    bytes_of(&Value::Array(openhands_event_list(n)))
}

/// An OpenHands `output.jsonl` of one instance whose `history` is the event list.
fn openhands_output(n: usize) -> Vec<u8> {
    let mut line = bytes_of(&json!({
        "instance_id": "linear__1",
        "instruction": QUESTION,
        "metadata": { "agent_class": "CodeActAgent", "llm_config": { "model": "gpt-4o" } },
        "history": openhands_event_list(n),
        "metrics": { "accumulated_cost": 1.0 },
        "error": null
    }));
    line.push(b'\n');
    line
}

/// A VCR cassette of OpenAI Responses calls chained by `previous_response_id`: each request
/// carries only the previous call's tool output, each response asks for the next tool call,
/// and the last response answers. Written as block YAML, as vcrpy writes cassettes.
fn vcr(n: usize) -> Vec<u8> {
    use std::fmt::Write;
    let q = |s: &str| serde_json::to_string(s).expect("a string serialises");
    let mut y = String::from("interactions:\n");
    for k in 0..=n {
        y.push_str("- request:\n    method: POST\n    uri: https://api.openai.com/v1/responses\n");
        y.push_str("    parsed_body:\n      model: gpt-4o\n      stream: false\n");
        if k == 0 {
            writeln!(
                y,
                "      input:\n      - role: user\n        content: {}",
                q(QUESTION)
            )
            .unwrap();
        } else {
            writeln!(y, "      previous_response_id: resp_{:06}", k - 1).unwrap();
            writeln!(
                y,
                "      input:\n      - type: function_call_output\n        call_id: {}\n        output: {}",
                call_id(k - 1),
                q(&result_text(k - 1))
            )
            .unwrap();
        }
        y.push_str("  response:\n    status:\n      code: 200\n      message: OK\n");
        writeln!(
            y,
            "    parsed_body:\n      id: resp_{k:06}\n      object: response\n      model: gpt-4o-2024-08-06\n      status: completed\n      output:"
        )
        .unwrap();
        if k < n {
            writeln!(
                y,
                "      - type: function_call\n        id: fc_{k:06}\n        call_id: {}\n        name: lookup\n        arguments: {}\n        status: completed",
                call_id(k),
                q(&args_text(k))
            )
            .unwrap();
        } else {
            writeln!(
                y,
                "      - type: message\n        id: msg_{k:06}\n        role: assistant\n        status: completed\n        content:\n        - type: output_text\n          text: {}",
                q(ANSWER)
            )
            .unwrap();
        }
    }
    y.push_str("version: 1\n");
    y.into_bytes()
}

/// JSON lines: each value on a line of its own.
fn json_lines(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        out.extend(bytes_of(v));
        out.push(b'\n');
    }
    out
}

/// A Claude Code session: the prompt, then per call an assistant entry with its `tool_use` and
/// a user entry with its `tool_result`, each linked to the one before by `parentUuid`, and the
/// answer.
fn claude_code(n: usize) -> Vec<u8> {
    let mut lines = Vec::with_capacity(2 * n + 2);
    let mut parent: Option<String> = None;
    let mut push = |kind: &str, message: Value, lines: &mut Vec<Value>| {
        let uuid = format!("uuid-{:06}", lines.len());
        lines.push(json!({
            "parentUuid": parent, "isSidechain": false, "userType": "external",
            "cwd": "/work", "sessionId": "linear-session", "version": "2.0.0",
            "type": kind, "message": message, "uuid": uuid,
            "timestamp": "2025-10-01T10:00:00.000Z"
        }));
        parent = Some(uuid);
    };
    push(
        "user",
        json!({ "role": "user", "content": QUESTION }),
        &mut lines,
    );
    for k in 0..n {
        let call = json!({
            "id": format!("msg_{k:06}"), "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{ "type": "tool_use", "id": call_id(k), "name": "lookup", "input": args(k) }]
        });
        push("assistant", call, &mut lines);
        let result = json!({ "role": "user", "content": [
            { "type": "tool_result", "tool_use_id": call_id(k), "content": result_text(k) }
        ]});
        push("user", result, &mut lines);
    }
    let answer = json!({
        "id": "msg_answer", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{ "type": "text", "text": ANSWER }]
    });
    push("assistant", answer, &mut lines);
    json_lines(&lines)
}

/// A Codex CLI rollout in the envelope layout: the session meta, the turn context, the prompt,
/// per call a `function_call` and its `function_call_output`, and the answer.
fn codex(n: usize) -> Vec<u8> {
    let at = "2025-10-01T10:00:00.000Z";
    let item =
        |payload: Value| json!({ "timestamp": at, "type": "response_item", "payload": payload });
    let mut lines = vec![
        json!({ "timestamp": at, "type": "session_meta", "payload": {
            "id": "linear-rollout", "timestamp": at, "cwd": "/work", "originator": "codex_cli_rs",
            "cli_version": "0.40.0", "instructions": null
        }}),
        json!({ "timestamp": at, "type": "turn_context", "payload": {
            "cwd": "/work", "approval_policy": "never", "model": "gpt-5-codex"
        }}),
        item(json!({ "type": "message", "role": "user", "content": [
            { "type": "input_text", "text": QUESTION }
        ]})),
    ];
    for k in 0..n {
        lines.push(item(json!({
            "type": "function_call", "name": "lookup", "arguments": args_text(k), "call_id": call_id(k)
        })));
        lines.push(item(json!({
            "type": "function_call_output", "call_id": call_id(k), "output": result_text(k)
        })));
    }
    lines.push(item(
        json!({ "type": "message", "role": "assistant", "content": [
            { "type": "output_text", "text": ANSWER }
        ]}),
    ));
    json_lines(&lines)
}

/// A bare chat message list: the prompt, per call an assistant message with its `tool_calls`
/// and the tool message answering it, and the answer.
fn message_list(n: usize) -> Vec<u8> {
    let mut messages = vec![json!({ "role": "user", "content": QUESTION })];
    for k in 0..n {
        messages.push(
            json!({ "role": "assistant", "content": null, "tool_calls": [{
                "id": call_id(k), "type": "function",
                "function": { "name": "lookup", "arguments": args_text(k) }
            }]}),
        );
        messages
            .push(json!({ "role": "tool", "tool_call_id": call_id(k), "content": result_text(k) }));
    }
    messages.push(json!({ "role": "assistant", "content": ANSWER }));
    bytes_of(&Value::Array(messages))
}

// ---------------------------------------------------------------------------------------------

struct Case {
    name: &'static str,
    /// The file name the record is written under (some readers name conversations after it).
    file: &'static str,
    make: fn(usize) -> Vec<u8>,
    /// Runs the record is read as: one, except tau2, whose agent greets before the user's
    /// first message (that greeting is a run of its own, turn 0).
    runs: usize,
    /// Items at 1x: the 16x record takes a fraction of a second to a few in a debug build.
    n: usize,
}

const CASES: &[Case] = &[
    Case {
        name: "inspect-ai",
        file: "linear.json",
        make: inspect_ai,
        runs: 1,
        n: 800,
    },
    Case {
        name: "swe-agent",
        file: "linear.traj",
        make: swe_agent,
        runs: 1,
        n: 800,
    },
    Case {
        name: "mini-swe-agent",
        file: "linear.traj.json",
        make: mini_swe_agent,
        runs: 1,
        n: 800,
    },
    Case {
        name: "otel",
        file: "linear.json",
        make: otel,
        runs: 1,
        n: 400,
    },
    Case {
        name: "openinference",
        file: "linear.json",
        make: openinference,
        runs: 1,
        n: 400,
    },
    Case {
        name: "otlp-proto",
        file: "linear.binpb",
        make: otlp_proto,
        runs: 1,
        n: 400,
    },
    Case {
        name: "any-agent",
        file: "linear.json",
        make: any_agent,
        runs: 1,
        n: 400,
    },
    Case {
        name: "agentfootprint-ndjson",
        file: "linear.ndjson",
        make: agentfootprint_ndjson,
        runs: 1,
        n: 1_000,
    },
    Case {
        name: "agentfootprint-recording",
        file: "linear.json",
        make: agentfootprint_recording,
        runs: 1,
        n: 600,
    },
    Case {
        name: "tau-bench",
        file: "linear.json",
        make: tau_bench,
        runs: 1,
        n: 1_500,
    },
    Case {
        name: "tau2",
        file: "linear.json",
        make: tau2,
        runs: 2,
        n: 1_500,
    },
    Case {
        name: "openhands-events",
        file: "linear.json",
        make: openhands_events,
        runs: 1,
        n: 800,
    },
    Case {
        name: "openhands-output",
        file: "output.jsonl",
        make: openhands_output,
        runs: 1,
        n: 800,
    },
    Case {
        name: "vcr",
        file: "linear.yaml",
        make: vcr,
        runs: 1,
        n: 250,
    },
    Case {
        name: "claude-code",
        file: "linear.jsonl",
        make: claude_code,
        runs: 1,
        n: 800,
    },
    Case {
        name: "codex",
        file: "rollout-linear.jsonl",
        make: codex,
        runs: 1,
        n: 800,
    },
    Case {
        name: "message-list",
        file: "linear.json",
        make: message_list,
        runs: 1,
        n: 1_000,
    },
];

const TRIES: usize = 3;
const TIME_LIMIT: f64 = 60.0;
const PEAK_LIMIT: f64 = 40.0;

/// A file under the temp dir, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn write(case: &Case, items: usize, bytes: &[u8]) -> TempFile {
        let dir = std::env::temp_dir().join(format!(
            "traceaudit-linear-{}-{}-{items}",
            std::process::id(),
            case.name
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(case.file);
        std::fs::write(&path, bytes).expect("temp file written");
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

fn read(path: &Path, format: Format) -> Collect {
    read_path(path, Some(format)).expect("the generated record is read")
}

/// The record of `items` items is read as one conversation of one run with one landing per
/// item, each paired with its own result.
fn check_shape(case: &Case, format: Format, items: usize) {
    let bytes = (case.make)(items);
    let file = TempFile::write(case, items, &bytes);
    let got = read(&file.0, format);
    let reasons: Vec<&str> = got.quarantined.iter().map(|q| q.reason.as_str()).collect();
    assert_eq!(
        got.conversations.len(),
        1,
        "{}: {items} items: conversations; quarantined: {reasons:?}",
        case.name
    );
    let runs = got
        .conversations
        .iter()
        .map(|(c, _)| c.runs.len())
        .sum::<usize>();
    assert_eq!(
        runs, case.runs,
        "{}: {items} items: runs; quarantined: {reasons:?}",
        case.name
    );
    let landings: Vec<_> = got
        .conversations
        .iter()
        .flat_map(|(c, _)| &c.runs)
        .flat_map(|r| r.landings())
        .collect();
    assert_eq!(
        landings.len(),
        items,
        "{}: {items} items: landings; quarantined: {reasons:?}",
        case.name
    );
    for (k, l) in landings.iter().enumerate() {
        assert!(
            l.text_or_empty().contains(&result_text(k)),
            "{}: landing {k} has the result {:?}; quarantined: {reasons:?}",
            case.name,
            l.text
        );
    }
}

struct Measure {
    time: Duration,
    peak: usize,
}

fn measure(case: &Case, format: Format, items: usize) -> Measure {
    let bytes = (case.make)(items);
    let file = TempFile::write(case, items, &bytes);
    drop(bytes);
    let mut best = Measure {
        time: Duration::MAX,
        peak: usize::MAX,
    };
    for _ in 0..TRIES {
        let baseline = reset_peak();
        let start = Instant::now();
        let got = read(&file.0, format);
        let time = start.elapsed();
        let peak = peak_since(baseline);
        assert_eq!(got.conversations.len(), 1, "{}: {items} items", case.name);
        drop(got);
        best.time = best.time.min(time);
        best.peak = best.peak.min(peak);
    }
    best
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn mb(bytes: usize) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

#[test]
fn every_format_reads_a_record_in_time_and_memory_linear_in_its_items() {
    let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
    let covered: Vec<&str> = CASES.iter().map(|c| c.name).collect();
    assert_eq!(names, covered, "one case per format, in registry order");

    let started = Instant::now();
    let mut failures = Vec::new();
    eprintln!(
        "{:<26} {:>6} {:>7} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>7} {:>7}",
        "format",
        "n",
        "16n",
        "t 1x s",
        "t 4x s",
        "t 16x s",
        "MB 1x",
        "MB 4x",
        "MB 16x",
        "t ratio",
        "MB rat"
    );
    for case in CASES {
        let format = Format::named(case.name).expect("a registered format");
        for items in [1, 3] {
            check_shape(case, format, items);
        }
        let at = |m: usize| measure(case, format, case.n * m);
        let (one, four, sixteen) = (at(1), at(4), at(16));
        let floor = Duration::from_micros(100);
        let t = |m: &Measure| secs(m.time.max(floor));
        let p = |m: &Measure| m.peak.max(1) as f64;
        let time_ratio = t(&sixteen) / t(&one);
        let peak_ratio = p(&sixteen) / p(&one);
        eprintln!(
            "{:<26} {:>6} {:>7} {:>9.4} {:>9.4} {:>9.4} {:>8.2} {:>8.2} {:>8.2} {:>7.1} {:>7.1}",
            case.name,
            case.n,
            case.n * 16,
            secs(one.time),
            secs(four.time),
            secs(sixteen.time),
            mb(one.peak),
            mb(four.peak),
            mb(sixteen.peak),
            time_ratio,
            peak_ratio
        );
        if time_ratio >= TIME_LIMIT {
            failures.push(format!(
                "{}: {} items took {:?}, {} took {:?} ({time_ratio:.0}x, linear is about 16x)",
                case.name,
                case.n * 16,
                sixteen.time,
                case.n,
                one.time
            ));
        }
        if peak_ratio >= PEAK_LIMIT {
            failures.push(format!(
                "{}: {} items peaked at {:.2} MB, {} at {:.2} MB ({peak_ratio:.0}x, linear is about 16x)",
                case.name,
                case.n * 16,
                mb(sixteen.peak),
                case.n,
                mb(one.peak)
            ));
        }
        // 4n sits between 1x and 16x (with room for noise), and under what quadratic work
        // takes at 4n (16 times 1x).
        let lenient = 1.5;
        if t(&four) * lenient < t(&one)
            || t(&four) > t(&sixteen) * lenient
            || t(&four) / t(&one) >= 15.0
        {
            failures.push(format!(
                "{}: time at 4x ({:?}) is not between 1x ({:?}) and 16x ({:?})",
                case.name, four.time, one.time, sixteen.time
            ));
        }
        if p(&four) * lenient < p(&one)
            || p(&four) > p(&sixteen) * lenient
            || p(&four) / p(&one) >= 12.0
        {
            failures.push(format!(
                "{}: peak at 4x ({:.2} MB) is not between 1x ({:.2} MB) and 16x ({:.2} MB)",
                case.name,
                mb(four.peak),
                mb(one.peak),
                mb(sixteen.peak)
            ));
        }
    }
    eprintln!("all formats measured in {:.1} s", secs(started.elapsed()));
    assert!(failures.is_empty(), "not linear:\n{}", failures.join("\n"));
}
