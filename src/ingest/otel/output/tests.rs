//! The neutral output rows on small pydantic-ai-shaped traces, and what the schema-attempt check
//! makes of them.

use super::*;
use crate::corpus::Disposition;
use crate::ingest::otel::{assemble_batch, parse};
use crate::ingest::Collect;
use crate::model::{Conversation, Run};
use crate::passes::schema_attempt::SchemaAttempt;
use crate::passes::{Pass, PassContext, RunOutcome};

const TRACE: &str = "5e1f0c0de0000000000000000000a001";
const SCHEMA: &str = r#"{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}"#;

fn kv(key: &str, value: &str) -> Value {
    json!({"key": key, "value": {"stringValue": value}})
}

fn span(
    id: u32,
    parent: Option<u32>,
    name: &str,
    at: u64,
    attrs: Vec<Value>,
    failed: bool,
) -> Value {
    let ns = |ms: u64| (1_700_000_000_000_000_000u64 + ms * 1_000_000).to_string();
    let mut v = json!({
        "traceId": TRACE,
        "spanId": format!("{id:016x}"),
        "name": name,
        "startTimeUnixNano": ns(at),
        "endTimeUnixNano": ns(at + 5),
        "attributes": attrs,
        "status": if failed { json!({"code": 2}) } else { json!({}) },
    });
    if let Some(p) = parent {
        v["parentSpanId"] = json!(format!("{p:016x}"));
    }
    v
}

/// An output tool call, as a model response.
fn call(id: &str, name: &str, args: &str) -> Value {
    json!({"role": "assistant", "parts": [{"type": "tool_call", "id": id, "name": name, "arguments": args}]})
}

/// What answered an output tool call.
fn reply(id: &str, name: &str, result: Value) -> Value {
    json!({"role": "user", "parts": [{"type": "tool_call_response", "id": id, "name": name, "result": result}]})
}

fn text(role: &str, content: &str) -> Value {
    json!({"role": role, "parts": [{"type": "text", "content": content}]})
}

/// A pydantic-ai run: the user asks, the model gives `outputs[i]`, `replies[i]` answers it (the
/// next request's last message; the last one lands only in the run's transcript). The agent
/// span holds `final_result` when given, and fails when it is `None`. Without `content`, the
/// messages keep their structure only.
struct Scripted {
    params: Value,
    outputs: Vec<Value>,
    replies: Vec<Value>,
    final_result: Option<String>,
    content: bool,
}

fn tool_mode() -> Value {
    json!({
        "output_mode": "tool",
        "output_tools": [{"name": "final_result", "parameters_json_schema": js::parse_json(SCHEMA).unwrap()}],
        "allow_text_output": false,
    })
}

fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "content" | "arguments" | "result"))
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
        other => other.clone(),
    }
}

impl Scripted {
    fn trace(&self) -> String {
        let keep = |v: Value| if self.content { v } else { strip(&v) };
        let mut history = vec![text("user", "Give me a.")];
        let mut spans = Vec::new();
        for (j, out) in self.outputs.iter().enumerate() {
            let at = 10 + 20 * j as u64;
            spans.push(span(
                10 + j as u32,
                Some(1),
                "chat m",
                at,
                vec![
                    kv("gen_ai.operation.name", "chat"),
                    kv("gen_ai.conversation.id", "conv"),
                    kv("gen_ai.input.messages", &keep(json!(history)).to_string()),
                    kv("gen_ai.output.messages", &keep(json!([out])).to_string()),
                    kv("model_request_parameters", &self.params.to_string()),
                ],
                false,
            ));
            history.push(out.clone());
            if let Some(r) = self.replies.get(j) {
                history.push(r.clone());
            }
        }
        let mut agent = vec![
            kv("gen_ai.operation.name", "invoke_agent"),
            kv("gen_ai.conversation.id", "conv"),
            kv(
                "pydantic_ai.all_messages",
                &keep(json!(history)).to_string(),
            ),
        ];
        if let (Some(r), true) = (&self.final_result, self.content) {
            agent.push(kv("final_result", r));
        }
        spans.push(span(
            1,
            None,
            "invoke_agent a",
            0,
            agent,
            self.final_result.is_none(),
        ));
        json!({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "pydantic-ai"}, "spans": spans}]}]})
            .to_string()
    }

    fn conversation(&self) -> Conversation {
        let mut sink = Collect::default();
        let batch = parse(self.trace().as_bytes(), "mem.json", &mut sink);
        assemble_batch(batch, &mut sink);
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        assert_eq!(sink.conversations.len(), 1);
        sink.conversations.remove(0).0
    }
}

/// Bad, then good, through `final_result`; `rejected` answers the first call.
fn retried(rejected: Value) -> Scripted {
    Scripted {
        params: tool_mode(),
        outputs: vec![
            call("o1", "final_result", r#"{"a": "one"}"#),
            call("o2", "final_result", r#"{"a": 1}"#),
        ],
        replies: vec![
            reply("o1", "final_result", rejected),
            reply("o2", "final_result", json!("Final result processed.")),
        ],
        final_result: Some(r#"{"a":1}"#.into()),
        content: true,
    }
}

fn int_parsing() -> Value {
    json!([{"type": "int_parsing", "loc": ["a"], "msg": "Input should be a valid integer", "input": "one"}])
}

fn rows<'r>(run: &'r Run, name: &str) -> Vec<&'r Event> {
    run.events
        .iter()
        .filter(|e| e.text.as_deref() == Some(name) && e.kind() == EventKind::Verdict)
        .collect()
}

fn contract(run: &Run) -> Value {
    run.events
        .iter()
        .find(|e| e.source_type.as_deref() == Some("output-contract"))
        .and_then(|e| js::parse_json(e.payload.as_deref()?).ok())
        .expect("an output-contract row")
}

fn inner(e: &Event) -> Value {
    js::parse_json(e.payload.as_deref().unwrap()).unwrap()["payload"].clone()
}

fn marks(run: &Run) -> Vec<Value> {
    run.events_of(EventKind::ModelCall)
        .filter_map(|e| js::parse_json(e.payload.as_deref()?).ok())
        .filter_map(|p| p.get("answer").cloned())
        .collect()
}

fn check(conv: &Conversation) -> RunOutcome {
    SchemaAttempt.check(conv, &PassContext::default()).remove(0)
}

fn column(out: &RunOutcome, key: &str) -> Vec<Value> {
    out.rows.iter().map(|(_, r)| r[key].clone()).collect()
}

#[test]
fn a_validation_retry_becomes_a_retry_verdict_without_a_hash() {
    let conv = retried(int_parsing()).conversation();
    let run = &conv.runs[0];
    let c = contract(run);
    assert_eq!(c["mode"], "tool");
    assert_eq!(c["tools"]["final_result"]["required"], json!(["a"]));
    assert_eq!(
        (
            &c["terminalVerdicts"],
            &c["correctionHashes"],
            &c["contentOmitted"]
        ),
        (&json!(true), &json!(false), &json!(false))
    );
    assert_eq!(
        marks(run),
        [
            json!({"text": r#"{"a": "one"}"#, "tool": "final_result"}),
            json!({"text": r#"{"a": 1}"#, "tool": "final_result"})
        ]
    );
    let retries = rows(run, "schema-retry");
    assert_eq!(retries.len(), 1);
    let p = inner(retries[0]);
    assert_eq!(p["attempt"], 1);
    assert_eq!(p["iteration"], 1);
    assert_eq!(p["stage"], "schema-validate");
    assert_eq!(p["path"], "a");
    assert_eq!(p["error"], js::stringify(&int_parsing()));
    assert!(p["correctiveMessageHash"].is_null());
    assert_eq!(retries[0].call_id.as_deref(), Some("o1"));
    // Right after the message that rejected the answer.
    let at = run
        .events
        .iter()
        .position(|e| std::ptr::eq(e, retries[0]))
        .unwrap();
    let before = &run.events[at - 1];
    assert_eq!(
        (before.role, before.call_id.as_deref()),
        (Some(Role::Tool), Some("o1"))
    );
    assert!(rows(run, "contract-unmet").is_empty());

    let out = check(&conv);
    assert_eq!(out.disposition, Disposition::CheckedPass, "{}", out.reason);
    assert_eq!(column(&out, "outcome"), [json!("retried"), json!("passed")]);
    assert_eq!(column(&out, "event_joined"), [json!(true), Value::Null]);
    // No hash is defined, so the correction-hash join does not apply and is not counted broken.
    assert_eq!(column(&out, "hash_joined"), [Value::Null, Value::Null]);
    assert_eq!(column(&out, "joins"), [json!(["retry-verdict"]), json!([])]);
    assert_eq!(
        column(&out, "revalidated"),
        [json!("invalid"), json!("valid")]
    );
    assert_eq!(
        column(&out, "outcome_inferred"),
        [json!(false), json!(false)]
    );
}

#[test]
fn a_rejection_by_the_application_is_a_custom_stage_not_drift() {
    // An output validator raised ModelRetry: plain text answers the output call.
    let conv = retried(json!("a must be even")).conversation();
    let run = &conv.runs[0];
    let p = inner(rows(run, "schema-retry")[0]);
    assert_eq!(p["stage"], "custom-validate");
    assert!(p["path"].is_null());
    // The failed attempt and the message rejecting it are marked as failures.
    let landing = run
        .landings()
        .find(|l| l.call_id.as_deref() == Some("o1"))
        .unwrap();
    assert!(landing.error);
    let message = run
        .events_of(EventKind::Message)
        .find(|m| m.role == Some(Role::Tool) && m.call_id.as_deref() == Some("o1"))
        .unwrap();
    assert!(message.error);
    let out = check(&conv);
    // `{"a": "one"}` fails the schema, yet the record says it passed the schema and failed the
    // application's own check: the validator contradicts the recorded stage.
    assert_eq!(out.disposition, Disposition::CheckedFail);
    assert_eq!(out.findings.len(), 1);
    assert_eq!(out.findings[0].kind, "verdict-drift");

    // An answer the schema accepts, rejected by the application: no drift.
    let mut s = retried(json!("a must be even"));
    s.outputs[0] = call("o1", "final_result", r#"{"a": 3}"#);
    let out = check(&s.conversation());
    assert_eq!(
        out.disposition,
        Disposition::CheckedPass,
        "{:?}",
        out.findings
    );
    assert_eq!(
        column(&out, "stage"),
        [json!("custom-validate"), Value::Null]
    );
    assert_eq!(
        column(&out, "revalidated"),
        [json!("valid"), json!("valid")]
    );
}

#[test]
fn the_last_answer_rejected_is_an_unmet_contract() {
    let s = Scripted {
        params: tool_mode(),
        outputs: vec![call("o1", "final_result", r#"{"a": "one"}"#)],
        replies: vec![reply("o1", "final_result", int_parsing())],
        final_result: None,
        content: true,
    };
    let conv = s.conversation();
    let run = &conv.runs[0];
    assert!(rows(run, "schema-retry").is_empty());
    let unmet = rows(run, "contract-unmet");
    assert_eq!(unmet.len(), 1);
    let p = inner(unmet[0]);
    assert_eq!((&p["attempts"], &p["retriesSpent"]), (&json!(1), &json!(0)));
    assert_eq!(contract(run)["terminalVerdicts"], true);
    let out = check(&conv);
    assert_eq!(out.disposition, Disposition::CheckedFail);
    assert_eq!(column(&out, "outcome"), [json!("exhausted")]);
    assert_eq!(column(&out, "event_joined"), [json!(true)]);
    assert_eq!(column(&out, "joins"), [json!(["unmet-verdict"])]);
    let kinds: Vec<&str> = out.findings.iter().map(|f| f.kind.as_str()).collect();
    assert_eq!(kinds, ["contract-unmet"]);
}

#[test]
fn an_unanswered_last_answer_of_a_failed_run_is_left_to_the_validator() {
    // pydantic-ai gave up without replying (retries exhausted): no verdict was recorded, so the
    // validator judges the last answer.
    let s = Scripted {
        params: tool_mode(),
        outputs: vec![call("o1", "final_result", r#"{"a": "one"}"#)],
        replies: vec![],
        final_result: None,
        content: true,
    };
    let conv = s.conversation();
    let run = &conv.runs[0];
    assert_eq!(contract(run)["terminalVerdicts"], false);
    assert!(run.events_of(EventKind::Verdict).next().is_none());
    let out = check(&conv);
    assert_eq!(column(&out, "outcome"), [json!("exhausted")]);
    assert_eq!(column(&out, "outcome_inferred"), [json!(true)]);
    assert_eq!(column(&out, "joins"), [json!([])]);
}

#[test]
fn json_that_does_not_parse_fails_at_json_parse() {
    let conv = retried(json!([{"type": "json_invalid", "loc": [], "msg": "Invalid JSON: EOF"}]))
        .conversation();
    let p = inner(rows(&conv.runs[0], "schema-retry")[0]);
    assert_eq!(p["stage"], "json-parse");
    assert!(p["path"].is_null());
}

#[test]
fn native_output_text_answers_and_their_feedback() {
    let feedback = "Validation feedback:\n```json\n[{\"type\":\"missing\",\"loc\":[\"a\"],\"msg\":\"Field required\"}]\n```\n\nFix the errors and try again.";
    let s = Scripted {
        params: json!({
            "output_mode": "native",
            "output_tools": [],
            "output_object": {"name": "A", "json_schema": js::parse_json(SCHEMA).unwrap()},
            "allow_text_output": true,
        }),
        outputs: vec![text("assistant", "{}"), text("assistant", r#"{"a": 2}"#)],
        replies: vec![text("user", feedback)],
        final_result: Some(r#"{"a":2}"#.into()),
        content: true,
    };
    let conv = s.conversation();
    let run = &conv.runs[0];
    let c = contract(run);
    assert_eq!(c["mode"], "native");
    assert_eq!(c["schema"]["required"], json!(["a"]));
    assert_eq!(
        marks(run),
        [
            json!({"text": "{}", "tool": null}),
            json!({"text": r#"{"a": 2}"#, "tool": null})
        ]
    );
    let p = inner(rows(run, "schema-retry")[0]);
    assert_eq!(
        (&p["stage"], &p["path"]),
        (&json!("schema-validate"), &json!("a"))
    );
    assert_eq!(p["error"], feedback);
    let out = check(&conv);
    assert_eq!(
        out.disposition,
        Disposition::CheckedPass,
        "{:?}",
        out.findings
    );
    assert_eq!(
        column(&out, "revalidated"),
        [json!("invalid"), json!("valid")]
    );
}

#[test]
fn without_content_only_the_contract_and_the_marks_are_written() {
    let mut s = retried(int_parsing());
    s.content = false;
    let conv = s.conversation();
    let run = &conv.runs[0];
    let c = contract(run);
    assert_eq!(
        (&c["contentOmitted"], &c["terminalVerdicts"]),
        (&json!(true), &json!(false))
    );
    assert_eq!(
        marks(run),
        [
            json!({"text": null, "tool": "final_result"}),
            json!({"text": null, "tool": "final_result"})
        ]
    );
    assert!(run.events_of(EventKind::Verdict).next().is_none());
    let out = check(&conv);
    assert_eq!(out.disposition, Disposition::NotApplicable);
    assert!(out.reason.contains("2 answer(s)"), "{}", out.reason);
    assert!(out.rows.is_empty());
}

#[test]
fn a_run_without_structured_output_gets_no_rows() {
    let s = Scripted {
        params: json!({"output_mode": "text", "output_tools": [], "allow_text_output": true}),
        outputs: vec![text("assistant", "a is 1")],
        replies: vec![],
        final_result: Some("a is 1".into()),
        content: true,
    };
    let conv = s.conversation();
    let run = &conv.runs[0];
    assert!(run
        .events
        .iter()
        .all(|e| e.source_type.as_deref() != Some("output-contract")));
    assert!(marks(run).is_empty());
    assert_eq!(check(&conv).disposition, Disposition::NotApplicable);
}

#[test]
fn rejection_messages() {
    let r = |t: &str, a: Option<&str>| rejection(t, a);
    let listed = r#"[{"type":"int_parsing","loc":["items",0,"qty"],"msg":"m"}]"#;
    assert_eq!(
        r(listed, None),
        Rejection {
            stage: "schema-validate",
            path: Some("items.0.qty".into())
        }
    );
    let fenced = format!("{RETRY_FRAME}\n```json\n{listed}\n```\n\n{RETRY_SUFFIX}");
    assert_eq!(r(&fenced, None), r(listed, None));
    let invalid = r#"[{"type":"json_invalid","loc":[],"msg":"EOF"}]"#;
    assert_eq!(
        r(invalid, None),
        Rejection {
            stage: "json-parse",
            path: None
        }
    );
    // Plain text: the application's own check, unless the answer was not JSON at all.
    assert_eq!(r("too big", Some("{\"a\":1}")).stage, "custom-validate");
    assert_eq!(
        r(
            &format!("{RETRY_FRAME}\nPlease answer in JSON\n\n{RETRY_SUFFIX}"),
            Some("hello")
        )
        .stage,
        "json-parse"
    );
    // A JSON list that is not pydantic's error list is plain text.
    assert_eq!(r("[1, 2]", Some("{}")).stage, "custom-validate");
}
