//! The reader, stitcher and run builder together, on OTLP text made up in each test.

use serde_json::{json, Value};

use super::span::{unflatten, FORMAT_OPENINFERENCE};
use super::wire::{any_value, attributes, normalize_id, read_flushing};
use super::*;
use crate::ingest::{Collect, Input, Locator, Severity};
use crate::js;
use crate::model::{Event, LandingFlags, Role, Run};

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
fn a_span_read_twice_before_its_trace_is_built_is_dropped_with_a_note() {
    // Every span is a record: the second copy of one is not stored, so it must be said to be
    // dropped, or the records read would not reconcile with those stored and dropped.
    let spans = small_trace(false, full_tool(false));
    let mut changed = spans[1].clone();
    changed["name"] = json!("chat changed");
    let mut stitcher = Stitcher::default();
    let mut out = Collect::default();
    // One file holding a span twice (the copy differs), then one more copy in the next file
    // before the root arrives; the first copy read is the one kept.
    let mut first: Vec<Value> = spans[..3].to_vec();
    first.push(changed);
    let batch = parse(request(&first).as_bytes(), "a.json", &mut out);
    stitcher.add(batch, &mut out);
    let mut second = vec![spans[1].clone()];
    second.extend_from_slice(&spans[3..]);
    let batch = parse(request(&second).as_bytes(), "b.json", &mut out);
    stitcher.add(batch, &mut out);
    stitcher.finish(&mut out);
    assert_eq!(out.records, 6);
    let dropped: Vec<_> = out
        .quarantined
        .iter()
        .filter(|q| q.severity == Severity::Dropped)
        .collect();
    assert_eq!(dropped.len(), 2, "{:?}", out.quarantined);
    assert_eq!(dropped[0].file, "a.json");
    assert_eq!(dropped[1].file, "b.json");
    for q in &dropped {
        assert!(q.reason.contains("was read before"), "{}", q.reason);
    }
    assert_eq!(out.quarantined.len(), 2);
    // The run is the one the spans give without the copies.
    let whole = read_text(&request(&spans));
    assert_eq!(
        Run {
            source: String::new(),
            ..only_run(&out).clone()
        },
        Run {
            source: String::new(),
            ..only_run(&whole).clone()
        }
    );
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

/// A span event with these attributes.
fn event(name: &str, attrs: Vec<Value>) -> Value {
    json!({ "name": name, "timeUnixNano": "1", "attributes": attrs })
}

/// The span made by [`span`], ending `end` ms after the test epoch.
fn ending(mut v: Value, end: u64) -> Value {
    v["endTimeUnixNano"] = json!((1_700_000_000_000_000_000u64 + end * 1_000_000).to_string());
    v
}

/// Strands' tracer under the current conventions: each span's messages are attributes of a
/// `gen_ai.client.inference.operation.details` event (the tool span's input and output too),
/// and a tool result is a list of content blocks.
#[test]
fn messages_in_the_operation_details_event() {
    const DETAILS: &str = "gen_ai.client.inference.operation.details";
    let user = r#"[{"role":"user","parts":[{"type":"text","content":"where is 42?"}]}]"#;
    let call = r#"[{"role":"assistant","parts":[{"type":"tool_call","id":"t1","name":"lookup","arguments":{"id":42}}],"finish_reason":"tool_use"}]"#;
    let result = r#"[{"role":"tool","parts":[{"type":"tool_call_response","id":"t1","response":[{"text":"dock 7"}]}]}]"#;
    let answer = r#"[{"role":"assistant","parts":[{"type":"text","content":"It is at dock 7."}],"finish_reason":"end_turn"}]"#;
    let op = |name: &str| kv("gen_ai.operation.name", s(name));
    let mut agent = span(
        AGENT,
        None,
        "invoke_agent helper",
        0,
        vec![op("invoke_agent")],
    );
    agent["events"] = json!([
        event(DETAILS, vec![kv("gen_ai.input.messages", s(user))]),
        event(DETAILS, vec![kv("gen_ai.output.messages", s(answer))]),
    ]);
    let mut chat1 = span(CHAT1, Some(AGENT), "chat", 10, vec![op("chat")]);
    chat1["events"] = json!([event(
        DETAILS,
        vec![
            kv(
                "gen_ai.system_instructions",
                s(r#"[{"type":"text","content":"be brief"}]"#)
            ),
            kv("gen_ai.input.messages", s(user)),
            kv("gen_ai.output.messages", s(call)),
        ]
    )]);
    let mut tool = span(
        TOOL,
        Some(AGENT),
        "execute_tool lookup",
        20,
        vec![
            op("execute_tool"),
            kv("gen_ai.tool.name", s("lookup")),
            kv("gen_ai.tool.call.id", s("t1")),
        ],
    );
    tool["events"] = json!([
        event(
            DETAILS,
            vec![kv(
                "gen_ai.input.messages",
                s(
                    r#"[{"role":"tool","parts":[{"type":"tool_call","name":"lookup","id":"t1","arguments":{"id":42}}]}]"#
                )
            )]
        ),
        event(DETAILS, vec![kv("gen_ai.output.messages", s(result))]),
    ]);
    let second_input = {
        let mut all: Vec<Value> = js::parse_json(user).unwrap().as_array().unwrap().clone();
        all.extend(
            js::parse_json(call)
                .unwrap()
                .as_array()
                .unwrap()
                .iter()
                .cloned(),
        );
        all.extend(
            js::parse_json(result)
                .unwrap()
                .as_array()
                .unwrap()
                .iter()
                .cloned(),
        );
        Value::Array(all).to_string()
    };
    let mut chat2 = span(CHAT2, Some(AGENT), "chat", 30, vec![op("chat")]);
    chat2["events"] = json!([event(
        DETAILS,
        vec![
            kv("gen_ai.input.messages", s(&second_input)),
            kv("gen_ai.output.messages", s(answer)),
        ]
    )]);
    let c = read_text(&request(&[chat1, tool, chat2, agent]));
    assert!(c.quarantined.is_empty(), "{:?}", c.quarantined);
    let run = only_run(&c);
    assert_eq!(run.user_message.as_deref(), Some("where is 42?"));
    assert_eq!(run.answer.as_deref(), Some("It is at dock 7."));
    let system = run.events.iter().find(|e| e.role == Some(Role::System));
    assert_eq!(system.and_then(|e| e.text.as_deref()), Some("be brief"));
    let l: Vec<&Event> = run.landings().collect();
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].arguments.as_deref(), Some(r#"{"id":42}"#));
    assert_eq!(l[0].text.as_deref(), Some("dock 7"));
    assert_eq!(l[0].flags, 0);
}

/// Per-message events as other writers fill them: Azure AI Inference and Semantic Kernel put
/// the message in `gen_ai.event.content` (JSON text); a choice may hold the message object as
/// JSON text, or a list of content blocks; Bedrock-style blocks carry tool calls and results.
#[test]
fn per_message_event_bodies_and_content_blocks() {
    let op = kv("gen_ai.operation.name", s("chat"));
    let content = |v: &str| kv("gen_ai.event.content", s(v));
    let mut chat1 = span(CHAT1, Some(AGENT), "chat", 10, vec![op.clone()]);
    chat1["events"] = json!([
        event(
            "gen_ai.user.message",
            vec![content(r#"{"role":"user","content":"weather in Oslo?"}"#)]
        ),
        event(
            "gen_ai.choice",
            vec![content(
                r#"{"message":{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]},"finish_reason":"tool_calls","index":0}"#
            )]
        ),
    ]);
    let mut chat2 = span(CHAT2, Some(AGENT), "chat", 30, vec![op]);
    chat2["events"] = json!([
        event(
            "gen_ai.user.message",
            vec![kv("content", s(r#"[{"text": "weather in Oslo?"}]"#))]
        ),
        event(
            "gen_ai.assistant.message",
            vec![kv(
                "content",
                s(
                    r#"[{"toolUse": {"toolUseId": "t1", "name": "weather", "input": {"city": "Oslo"}}}]"#
                )
            )]
        ),
        event(
            "gen_ai.tool.message",
            vec![kv(
                "content",
                s(
                    r#"[{"toolResult": {"toolUseId": "t1", "status": "success", "content": [{"text": "rain, 4 C"}]}}]"#
                )
            )]
        ),
        event(
            "gen_ai.choice",
            vec![
                kv("index", json!({"intValue": "0"})),
                kv(
                    "message",
                    s(r#"{"role": "assistant", "content": "Rainy, 4 C."}"#)
                )
            ]
        ),
    ]);
    let agent = span(
        AGENT,
        None,
        "invoke_agent helper",
        0,
        vec![kv("gen_ai.operation.name", s("invoke_agent"))],
    );
    let c = read_text(&request(&[chat1, chat2, agent]));
    assert!(c.quarantined.is_empty(), "{:?}", c.quarantined);
    let run = only_run(&c);
    assert_eq!(run.user_message.as_deref(), Some("weather in Oslo?"));
    assert_eq!(run.answer.as_deref(), Some("Rainy, 4 C."));
    let l: Vec<&Event> = run.landings().collect();
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].call_id.as_deref(), Some("t1"));
    assert_eq!(l[0].arguments.as_deref(), Some(r#"{"city":"Oslo"}"#));
    assert_eq!(l[0].text.as_deref(), Some("rain, 4 C"));
    assert_eq!(l[0].flags, 0);
    // The block-form user message is the same message as the plain one: one user turn.
    assert_eq!(run.turn, 1);
    assert_eq!(
        run.events
            .iter()
            .filter(|e| e.role == Some(Role::User) && e.kind() == crate::model::EventKind::Message)
            .count(),
        1
    );
}

/// OpenLLMetry's Bedrock spans name the prompt's role by its key (`gen_ai.prompt.0.user`) and
/// set no role on the completion: still a model call, read as one.
#[test]
fn indexed_attributes_without_roles() {
    let chat = span(
        CHAT1,
        None,
        "bedrock.completion",
        0,
        vec![
            kv("gen_ai.system", s("AWS")),
            kv("gen_ai.prompt.0.user", s("weather in Oslo?")),
            kv("gen_ai.completion.0.content", s("Rainy, 4 C.")),
        ],
    );
    let c = read_text(&request(&[chat]));
    assert!(c.quarantined.is_empty(), "{:?}", c.quarantined);
    let run = only_run(&c);
    assert_eq!(run.user_message.as_deref(), Some("weather in Oslo?"));
    assert_eq!(run.answer.as_deref(), Some("Rainy, 4 C."));
}

/// Tool spans written without a call id are paired with the requested call of the same tool
/// and arguments, whatever order they ran in; a call id on both sides still decides first.
#[test]
fn tool_spans_without_call_ids_pair_by_name_and_arguments() {
    let op = |name: &str| kv("gen_ai.operation.name", s(name));
    let calls = json!([{ "role": "assistant", "parts": [
        { "type": "tool_call", "id": "c1", "name": "lookup", "arguments": { "id": 42 } },
        { "type": "tool_call", "id": "c2", "name": "lookup", "arguments": { "id": 7 } }
    ] }]);
    let chat = span(
        CHAT1,
        Some(AGENT),
        "chat",
        10,
        vec![
            op("chat"),
            kv(
                "gen_ai.input.messages",
                s(r#"[{"role":"user","parts":[{"type":"text","content":"42 and 7?"}]}]"#),
            ),
            kv("gen_ai.output.messages", s(&calls.to_string())),
        ],
    );
    let tool = |id: &str, start: u64, args: &str, result: &str| {
        span(
            id,
            Some(AGENT),
            "lookup.tool",
            start,
            vec![
                op("execute_tool"),
                kv("gen_ai.tool.name", s("lookup")),
                kv("gen_ai.tool.call.arguments", s(args)),
                kv("gen_ai.tool.call.result", s(result)),
            ],
        )
    };
    let agent = span(
        AGENT,
        None,
        "invoke_agent helper",
        0,
        vec![op("invoke_agent")],
    );
    let c = read_text(&request(&[
        chat,
        tool("00000000000000d1", 20, r#"{"id":7}"#, "seven"),
        tool("00000000000000d2", 21, r#"{"id":42}"#, "forty-two"),
        agent,
    ]));
    let run = only_run(&c);
    let l: Vec<(Option<&str>, Option<&str>, bool)> = run
        .landings()
        .map(|l| {
            (
                l.call_id.as_deref(),
                l.text.as_deref(),
                l.payload.as_deref().is_some_and(|p| p.contains("span_id")),
            )
        })
        .collect();
    assert_eq!(
        l,
        [
            (Some("c1"), Some("forty-two"), true),
            (Some("c2"), Some("seven"), true)
        ]
    );
}

/// Agents run one after another beside their model-call and tool spans (siblings under one
/// caller span, a model call starting just before its agent): each span joins the agent whose
/// time it overlaps.
#[test]
fn sibling_spans_join_the_agent_they_overlap() {
    let op = |name: &str| kv("gen_ai.operation.name", s(name));
    let chat = |id: &str, start: u64, end: u64, q: &str, a: &str| {
        ending(
            span(
                id,
                Some("00000000000000f0"),
                "chat m",
                start,
                vec![
                    op("chat"),
                    kv(
                        "gen_ai.input.messages",
                        s(&json!([{ "role": "user", "parts": [{ "type": "text", "content": q }] }])
                            .to_string()),
                    ),
                    kv(
                        "gen_ai.output.messages",
                        s(&json!([{ "role": "assistant", "parts": [{ "type": "text", "content": a }] }])
                            .to_string()),
                    ),
                ],
            ),
            end,
        )
    };
    let agent = |id: &str, name: &str, start: u64, end: u64| {
        ending(
            span(
                id,
                Some("00000000000000f0"),
                &format!("invoke_agent {name}"),
                start,
                vec![op("invoke_agent"), kv("gen_ai.agent.name", s(name))],
            ),
            end,
        )
    };
    let c = read_text(&request(&[
        ending(span("00000000000000f0", None, "outer", 0, vec![]), 100),
        chat("00000000000000c1", 9, 15, "first?", "one"),
        agent("00000000000000a1", "first", 10, 20),
        chat("00000000000000c2", 29, 35, "second?", "two"),
        agent("00000000000000a2", "second", 30, 40),
    ]));
    assert!(c.quarantined.is_empty(), "{:?}", c.quarantined);
    let runs = &c.conversations[0].0.runs;
    let got: Vec<(Option<&str>, Option<&str>, Option<&str>)> = runs
        .iter()
        .map(|r| {
            (
                r.agent.as_deref(),
                r.user_message.as_deref(),
                r.answer.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (Some("first"), Some("first?"), Some("one")),
            (Some("second"), Some("second?"), Some("two"))
        ]
    );
}

/// A span id of 16 hex digits for the `k`th made-up span.
fn nth_id(prefix: u64, k: usize) -> String {
    format!("{:016x}", (prefix << 40) + k as u64 + 1)
}

/// Every walk up the span tree is memoised: deep chains of spans (under an agent, under
/// nothing with an agent beside the chain's top, and of agents each wrapping the next) cost
/// time linear in their depth.
#[test]
fn deep_chains_of_spans_are_read_in_linear_time() {
    use crate::ingest::linear_cost::assert_linear;
    let op = |name: &str| kv("gen_ai.operation.name", s(name));
    let chat = |id: &str, parent: &str| {
        span(
            id,
            Some(parent),
            "chat m",
            5,
            vec![
                op("chat"),
                kv(
                    "gen_ai.output.messages",
                    s(r#"[{"role":"assistant","parts":[{"type":"text","content":"ok"}]}]"#),
                ),
            ],
        )
    };
    // `agents`: whether every link of the chain is an agent span.
    let chain = |n: usize, top_agent: bool, agents: bool| -> String {
        let mut spans = vec![span(
            &nth_id(1, 0),
            None,
            if top_agent { "invoke_agent a" } else { "outer" },
            0,
            if top_agent {
                vec![op("invoke_agent")]
            } else {
                vec![]
            },
        )];
        if !top_agent {
            spans.push(span(
                &nth_id(9, 0),
                None,
                "invoke_agent beside",
                0,
                vec![op("invoke_agent")],
            ));
        }
        for k in 1..n {
            let attrs = if agents {
                vec![op("invoke_agent")]
            } else {
                vec![]
            };
            spans.push(span(
                &nth_id(1, k),
                Some(&nth_id(1, k - 1)),
                "step",
                1,
                attrs,
            ));
        }
        spans.push(chat(&nth_id(2, 0), &nth_id(1, n - 1)));
        request(&spans)
    };
    let read = |text: &str| {
        let c = read_text(text);
        assert!(!c.conversations.is_empty());
    };
    for (what, top_agent, agents) in [
        ("a chain under an agent", true, false),
        ("a chain beside an agent", false, false),
        ("a chain of agents", true, true),
    ] {
        let texts: Vec<(usize, String)> = [500, 8_000]
            .iter()
            .map(|&n| (n, chain(n, top_agent, agents)))
            .collect();
        assert_linear(what, 500, |n| {
            read(&texts.iter().find(|(m, _)| *m == n).expect("made above").1)
        });
    }
    // The chain's spans beside the agent are one run of that agent.
    let c = read_text(&chain(50, false, false));
    let runs: Vec<&Run> = c.conversations.iter().flat_map(|(c, _)| &c.runs).collect();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].answer.as_deref(), Some("ok"));
}

/// Tool spans find their landing through indexes: `n` calls in one model call's output, their
/// spans in reverse order, by call id or (without one) by name and arguments.
#[test]
fn many_tool_spans_pair_with_their_calls_in_linear_time() {
    use crate::ingest::linear_cost::assert_linear;
    let op = |name: &str| kv("gen_ai.operation.name", s(name));
    let trace = |n: usize, with_ids: bool| -> String {
        let calls: Vec<Value> = (0..n)
            .map(|k| json!({ "type": "tool_call", "id": format!("c{k}"), "name": "lookup", "arguments": { "id": k } }))
            .collect();
        let output = json!([{ "role": "assistant", "parts": calls }]);
        let mut spans = vec![
            span(
                AGENT,
                None,
                "invoke_agent helper",
                0,
                vec![op("invoke_agent")],
            ),
            span(
                CHAT1,
                Some(AGENT),
                "chat",
                1,
                vec![
                    op("chat"),
                    kv("gen_ai.output.messages", s(&output.to_string())),
                ],
            ),
        ];
        for k in (0..n).rev() {
            let mut attrs = vec![
                op("execute_tool"),
                kv("gen_ai.tool.name", s("lookup")),
                kv(
                    "gen_ai.tool.call.arguments",
                    s(&format!(r#"{{"id": {k}}}"#)),
                ),
                kv("gen_ai.tool.call.result", s(&format!("r{k}"))),
            ];
            if with_ids {
                attrs.push(kv("gen_ai.tool.call.id", s(&format!("c{k}"))));
            }
            spans.push(span(
                &nth_id(3, k),
                Some(AGENT),
                "lookup",
                2 + (n - k) as u64,
                attrs,
            ));
        }
        request(&spans)
    };
    for with_ids in [true, false] {
        let texts: Vec<(usize, String)> = [300, 4_800]
            .iter()
            .map(|&n| (n, trace(n, with_ids)))
            .collect();
        assert_linear(
            if with_ids {
                "tool spans by call id"
            } else {
                "tool spans by arguments"
            },
            300,
            |n| {
                let c = read_text(&texts.iter().find(|(m, _)| *m == n).expect("made above").1);
                let run = only_run(&c);
                assert_eq!(run.landings().count(), n);
            },
        );
        let c = read_text(&trace(3, with_ids));
        let got: Vec<(Option<&str>, Option<&str>)> = only_run(&c)
            .landings()
            .map(|l| (l.call_id.as_deref(), l.text.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (Some("c0"), Some("r0")),
                (Some("c1"), Some("r1")),
                (Some("c2"), Some("r2"))
            ]
        );
    }
}

/// Parent links that loop (no valid writer makes them) are cut, with a note naming the span,
/// and the trace is read.
#[test]
fn a_cycle_of_parent_links_is_cut_with_a_note() {
    let op = |name: &str| kv("gen_ai.operation.name", s(name));
    let a = nth_id(4, 0);
    let b = nth_id(4, 1);
    let c = read_text(&request(&[
        span(&a, Some(&b), "invoke_agent x", 0, vec![op("invoke_agent")]),
        span(
            &b,
            Some(&a),
            "chat",
            1,
            vec![
                op("chat"),
                kv(
                    "gen_ai.output.messages",
                    s(r#"[{"role":"assistant","parts":[{"type":"text","content":"done"}]}]"#),
                ),
            ],
        ),
    ]));
    let run = only_run(&c);
    assert_eq!(run.answer.as_deref(), Some("done"));
    let notes: Vec<&str> = c.quarantined.iter().map(|q| q.reason.as_str()).collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("a cycle of parent links"), "{notes:?}");
    assert_eq!(c.quarantined[0].severity, Severity::Partial);
}
