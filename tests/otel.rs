//! OpenTelemetry GenAI and OpenInference spans end to end: the excerpts in `testdata/otel/`
//! always, and every file of the shared data set (`../shared/data/otel/`) when it is present,
//! checked against its `expected_counts.json`.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use traceaudit::checks::PriorTurnEvidence;
use traceaudit::checks::RepeatedCall;
use traceaudit::checks::SchemaAttempt;
use traceaudit::checks::{Pass, PassContext};
use traceaudit::model::{Conversation, Event, EventKind, LandingFlags, Run};
use traceaudit::read::{read_path, Severity};
use traceaudit::Config;
use traceaudit::Disposition;
use traceaudit::Format;
use traceaudit::Store;
use traceaudit::{audit, AuditOptions};
use traceaudit::{ingest, IngestOptions};

/// Read one file; conversations merged by id, runs in store order.
fn read(path: &Path) -> (Vec<Conversation>, traceaudit::read::Collect) {
    let collect = read_path(path, None).unwrap();
    let mut merged: Vec<Conversation> = Vec::new();
    for (c, _) in &collect.conversations {
        match merged.iter_mut().find(|m| m.id == c.id) {
            Some(m) => m.runs.extend(c.runs.iter().cloned()),
            None => merged.push(c.clone()),
        }
    }
    for c in &mut merged {
        c.runs.sort_by_key(|r| (r.turn, r.started_ms));
    }
    (merged, collect)
}

fn payload(e: &Event) -> Value {
    e.payload
        .as_deref()
        .and_then(|p| serde_json::from_str(p).ok())
        .unwrap_or(Value::Null)
}

fn is_output_tool(e: &Event) -> bool {
    payload(e)["output_tool"] == Value::Bool(true)
}

/// Backed by a tool span (not only by a tool call in the messages).
fn has_span(e: &Event) -> bool {
    payload(e).get("span_id").is_some()
}

/// Wasted landings the repeated-call pass reports for a run, with every tool judged on
/// arguments alone when `arguments_only`.
fn wasted(conv: &Conversation, arguments_only: bool) -> Vec<(Disposition, u32)> {
    let mut config = Config::default();
    if arguments_only {
        let tools: std::collections::BTreeSet<String> = conv
            .runs
            .iter()
            .flat_map(|r| r.landings())
            .filter_map(|l| l.tool_name.clone())
            .collect();
        let text: String = tools
            .iter()
            .map(|t| format!("[tools.{t}]\nrepeated_when = \"arguments\"\n"))
            .collect();
        config = Config::from_toml(&text).unwrap();
    }
    RepeatedCall
        .check(
            conv,
            &PassContext {
                config,
                ..PassContext::default()
            },
        )
        .into_iter()
        .map(|o| {
            let n = o
                .findings
                .iter()
                .map(|f| f.columns.wasted_landings.unwrap_or(0))
                .sum();
            (o.disposition, n)
        })
        .collect()
}

/// The run's identity, without where it was read from.
fn comparable(run: &Run) -> Run {
    Run {
        source: String::new(),
        ..run.clone()
    }
}

// ---------------------------------------------------------------------------------------------
// The excerpts in testdata/otel
// ---------------------------------------------------------------------------------------------

#[test]
fn json_and_jsonl_give_identical_runs() {
    let (a, qa) = read(&testdata(
        "otel/pydantic-ai-v5-content/s1_repeated_identical_call.json",
    ));
    let (b, qb) = read(&testdata(
        "otel/pydantic-ai-v5-content/s1_repeated_identical_call.jsonl",
    ));
    assert_eq!((qa.records, qb.records), (8, 8));
    assert!(qa.quarantined.is_empty() && qb.quarantined.is_empty());
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].id, "conv-s1-repeated-lookup");
    let ra: Vec<Run> = a[0].runs.iter().map(comparable).collect();
    let rb: Vec<Run> = b[0].runs.iter().map(comparable).collect();
    assert_eq!(ra, rb);
    let run = &a[0].runs[0];
    assert_eq!(run.format, "otel");
    assert_eq!(run.turn, 1);
    assert_eq!(run.agent.as_deref(), Some("logistics_assistant"));
    assert_eq!(run.model.as_deref(), Some("scripted-loop-model"));
    assert_eq!(
        run.user_message.as_deref(),
        Some("What was the top shipment in Q3?")
    );
    assert!(run.answer.as_deref().unwrap().starts_with("Top Q3 result"));
    let landings: Vec<&Event> = run.landings().collect();
    assert_eq!(landings.len(), 3);
    for (i, l) in landings.iter().enumerate() {
        assert_eq!(l.tool_name.as_deref(), Some("lookup"));
        assert_eq!(
            l.call_id.as_deref(),
            Some(format!("call_s1_lookup_{}", i + 1).as_str())
        );
        assert_eq!(l.arguments.as_deref(), Some(r#"{"q":"Q3","n":1}"#));
        assert_eq!(
            l.text.as_deref(),
            Some("Q3 top 1: SHPMAXDLVAP001 weight_kg=41200 carrier=NordFreight")
        );
        assert_eq!(l.iteration, Some(i as u32 + 1));
        assert_eq!(l.flags, 0);
        assert!(l.duration_ms.is_some());
    }
    assert_eq!(wasted(&a[0], false), vec![(Disposition::CheckedFail, 2)]);
    // The history the answer was judged against: instructions, the last call's input, output.
    let history = a[0].history_for(0);
    assert_eq!(history.len(), 9);
    assert_eq!(history[0].role, traceaudit::model::Role::System);
}

#[test]
fn content_left_out_is_flagged_not_passed() {
    let (c, q) = read(&testdata(
        "otel/pydantic-ai-v5-nocontent/s1_repeated_identical_call.json",
    ));
    assert!(q.quarantined.is_empty());
    let run = &c[0].runs[0];
    assert_eq!(run.landings().count(), 3);
    assert!(run
        .landings()
        .all(|l| l.has_flag(LandingFlags::CONTENT_OMITTED)
            && l.arguments.is_none()
            && l.text.is_none()
            && !l.has_flag(LandingFlags::UNANSWERED)));
    assert_eq!(run.answer, None);
    // The run did answer; the answer row says its text was not recorded.
    let answer = run.events_of(EventKind::Answer).next().unwrap();
    assert!(answer.text.is_none() && answer.has_flag(LandingFlags::CONTENT_OMITTED));
    assert_eq!(wasted(&c[0], false), vec![(Disposition::NotApplicable, 0)]);
}

#[test]
fn format_2_running_tool_spans() {
    let (c, q) = read(&testdata(
        "otel/pydantic-ai-v2-content/s4b_output_function_retry.json",
    ));
    assert!(q.quarantined.is_empty());
    let run = &c[0].runs[0];
    let landings: Vec<&Event> = run.landings().collect();
    let names: Vec<(&str, &str)> = landings
        .iter()
        .map(|l| {
            (
                l.tool_name.as_deref().unwrap(),
                l.source_type.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![
            ("get_shipment", "running tool"),
            ("submit_summary", "running output function"),
            ("submit_summary", "running output function"),
        ]
    );
    assert!(landings[0].text.as_deref().unwrap().contains("NordFreight"));
    // The failed output-function call: no result on its span; the retry text comes from the
    // next model call's input, and the span's retry markers are kept.
    let failed = landings[1];
    assert!(failed.error && is_output_tool(failed));
    assert!(failed.text.as_deref().unwrap().contains("not \"Unknown\""));
    assert_eq!(payload(failed)["retry"]["cause"], "model_retry");
    assert!(!landings[2].error);
    assert!(run
        .answer
        .as_deref()
        .unwrap()
        .contains("\"carrier\":\"NordFreight\""));
}

#[test]
fn structured_output_retry_is_kept_for_the_schema_pass() {
    let (c, q) = read(&testdata(
        "otel/pydantic-ai-v6-content/s4_structured_output_retry.jsonl",
    ));
    assert!(q.quarantined.is_empty());
    let run = &c[0].runs[0];
    let declaration = run
        .events
        .iter()
        .find(|e| e.source_type.as_deref() == Some("pydantic_ai.output"))
        .map(payload)
        .expect("the output declaration");
    assert_eq!(declaration["output_tools"][0]["name"], "final_result");
    assert_eq!(
        declaration["output_tools"][0]["parameters_json_schema"]["title"],
        "ShipmentSummary"
    );
    let attempts: Vec<&Event> = run.landings().filter(|l| is_output_tool(l)).collect();
    assert_eq!(attempts.len(), 2);
    assert!(attempts[0]
        .arguments
        .as_deref()
        .unwrap()
        .contains("forty-one tonnes"));
    assert!(attempts[0].error);
    assert!(attempts[0].text.as_deref().unwrap().contains("int_parsing"));
    assert!(!attempts[1].error);
    assert_eq!(attempts[1].text.as_deref(), Some("Final result processed."));
    // The retry prompt is a tool message (role `tool` in format 6, `user` before).
    let prompt = run
        .events_of(EventKind::Message)
        .find(|m| m.call_id.as_deref() == Some("call_s4_output_1"))
        .unwrap();
    assert_eq!(prompt.role, Some(traceaudit::model::Role::Tool));
    assert!(prompt.error);
    assert_eq!(run.landings().filter(|l| has_span(l)).count(), 1);
}

/// The schema-attempt check on one file: (disposition, reason, attempt rows) per run.
fn schema_attempts(path: &Path) -> Vec<(Disposition, String, Vec<Value>)> {
    let (convs, q) = read(path);
    assert!(q.quarantined.is_empty());
    convs
        .iter()
        .flat_map(|c| SchemaAttempt.check(c, &PassContext::default()))
        .map(|o| {
            let rows = o.rows.into_iter().map(|(_, r)| r).collect();
            (o.disposition, o.reason, rows)
        })
        .collect()
}

/// `attempt:outcome:stage` of each row.
fn ledger_line(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            format!(
                "{}:{}:{}",
                r["attempt"],
                r["outcome"].as_str().unwrap(),
                r["stage"].as_str().unwrap_or("-")
            )
        })
        .collect()
}

#[test]
fn structured_output_retries_feed_the_schema_attempt_check() {
    for (file, stage) in [
        (
            "otel/pydantic-ai-v5-content/s4_structured_output_retry.json",
            "schema-validate",
        ),
        (
            "otel/pydantic-ai-v6-content/s4_structured_output_retry.jsonl",
            "schema-validate",
        ),
        (
            "otel/pydantic-ai-v5-content/s4b_output_function_retry.json",
            "custom-validate",
        ),
        (
            "otel/pydantic-ai-v2-content/s4b_output_function_retry.json",
            "custom-validate",
        ),
    ] {
        let outcomes = schema_attempts(&testdata(file));
        assert_eq!(outcomes.len(), 1, "{file}");
        let (disposition, reason, rows) = &outcomes[0];
        assert_eq!(*disposition, Disposition::CheckedPass, "{file}: {reason}");
        assert_eq!(
            ledger_line(rows),
            [format!("1:retried:{stage}"), "2:passed:-".to_string()],
            "{file}"
        );
        let first = &rows[0];
        assert_eq!(first["ledger"], "rebuilt");
        assert_eq!(first["event_joined"], true);
        // pydantic-ai defines no corrective-message hash: that join does not apply.
        assert_eq!(first["joins"], serde_json::json!(["retry-verdict"]));
        assert!(first["corrective_message_hash"].is_null() && first["hash_joined"].is_null());
        // Re-judged against the schema the spans carry.
        let revalidated: Vec<&str> = rows
            .iter()
            .map(|r| r["revalidated"].as_str().unwrap())
            .collect();
        if stage == "schema-validate" {
            assert_eq!(revalidated, ["invalid", "valid"], "{file}");
            assert_eq!(first["path"], "weight_kg");
            assert!(first["error"].as_str().unwrap().contains("int_parsing"));
        } else {
            // ModelRetry from the output function: the schema had accepted the answer.
            assert_eq!(revalidated, ["valid", "valid"], "{file}");
            assert!(first["error"].as_str().unwrap().contains("not \"Unknown\""));
        }
    }
    for file in [
        "otel/pydantic-ai-v5-nocontent/s4b_output_function_retry.json",
        "otel/openinference-v5-nocontent/s4_structured_output_retry.json",
    ] {
        let outcomes = schema_attempts(&testdata(file));
        let (disposition, reason, rows) = &outcomes[0];
        assert_eq!(*disposition, Disposition::NotApplicable, "{file}");
        assert!(reason.contains("omitted"), "{file}: {reason}");
        assert!(rows.is_empty(), "{file}");
    }
    for file in [
        "otel/pydantic-ai-v5-content/s1_repeated_identical_call.json",
        "otel/openinference-v5-content/s3_followup_from_history.json",
    ] {
        for (disposition, reason, _) in schema_attempts(&testdata(file)) {
            assert_eq!(disposition, Disposition::NotApplicable, "{file}");
            assert!(reason.starts_with("no output contract"), "{file}: {reason}");
        }
    }
}

#[test]
fn openinference_follow_up_is_judged_against_the_earlier_turn() {
    for (file, format) in [
        (
            "otel/openinference-v5-content/s3_followup_from_history.json",
            "openinference",
        ),
        (
            "otel/pydantic-ai-v5-content/s3_followup_from_history.json",
            "otel",
        ),
    ] {
        let (c, q) = read(&testdata(file));
        assert!(q.quarantined.is_empty());
        assert_eq!(c.len(), 1);
        let conv = &c[0];
        assert_eq!(conv.id, "conv-s3-followup");
        assert_eq!(conv.runs.iter().map(|r| r.turn).collect::<Vec<_>>(), [1, 2]);
        assert!(conv.runs.iter().all(|r| r.format == format));
        assert_eq!(conv.runs[0].landings().count(), 1);
        assert_eq!(conv.runs[1].landings().count(), 0);
        assert_eq!(
            conv.runs[1].user_message.as_deref(),
            Some("How heavy was it, and which carrier handled it?")
        );
        let outcomes = PriorTurnEvidence.check(conv, &PassContext::default());
        assert_eq!(outcomes[1].disposition, Disposition::CheckedFail, "{file}");
        assert_eq!(outcomes[1].findings[0].columns.latest_prior_turn, Some(1));
    }
}

#[test]
fn openinference_processor_error_spans_are_not_run_failures() {
    let (c, q) = read(&testdata(
        "otel/openinference-v5-nocontent/s4_structured_output_retry.json",
    ));
    assert!(q.quarantined.is_empty());
    let run = &c[0].runs[0];
    assert_eq!(run.format, "openinference");
    let failed_calls = run
        .events_of(EventKind::ModelCall)
        .filter(|e| e.error)
        .count();
    assert_eq!(failed_calls, 2);
    assert!(!run
        .events
        .iter()
        .any(|e| e.source_type.as_deref() == Some("run_error")));
    assert_eq!(run.landings().count(), 3);
    assert!(run
        .landings()
        .all(|l| l.has_flag(LandingFlags::CONTENT_OMITTED)));
}

#[test]
fn detection_and_format_names() {
    let head = |rel: &str| traceaudit::read::read_head(&testdata(rel)).unwrap();
    assert_eq!(
        Format::detect(&head(
            "otel/pydantic-ai-v5-content/s1_repeated_identical_call.jsonl"
        )),
        Some(Format::Otel)
    );
    assert_eq!(
        Format::detect(&head(
            "otel/openinference-v5-content/s3_followup_from_history.json"
        )),
        Some(Format::OpenInference)
    );
    assert_eq!(Format::Otel.family(), "otel");
    assert_eq!(Format::OpenInference.family(), "openinference");
    assert!(Format::ALL.contains(&Format::Otel) && Format::ALL.contains(&Format::OpenInference));
}

/// A trace whose spans are split over two files is joined when both are ingested together.
#[test]
fn a_trace_split_over_two_files_is_joined_by_the_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let source = std::fs::read_to_string(testdata(
        "otel/pydantic-ai-v5-content/s1_repeated_identical_call.jsonl",
    ))
    .unwrap();
    let lines: Vec<&str> = source.lines().collect();
    assert_eq!(lines.len(), 8);
    // The root (agent) span ends last; the first file holds children only.
    let inputs = dir.path().join("inputs");
    std::fs::create_dir(&inputs).unwrap();
    std::fs::write(inputs.join("a.jsonl"), lines[..5].join("\n")).unwrap();
    std::fs::write(inputs.join("b.jsonl"), lines[5..].join("\n")).unwrap();
    for threads in [1, 3] {
        let out = dir.path().join(format!("store{threads}"));
        let summary = ingest(
            std::slice::from_ref(&inputs),
            &out,
            &IngestOptions {
                threads,
                ..IngestOptions::default()
            },
        )
        .unwrap();
        let c = &summary.manifest.counts;
        assert_eq!((c.records_read, c.records_quarantined), (8, 0));
        assert_eq!((c.conversations, c.runs, c.landings), (1, 1, 3));
        let store = Store::open(&out).unwrap();
        let convs = store.read_part(0).unwrap();
        let run = &convs[0].runs[0];
        assert_eq!(
            run.answer.as_deref().map(|a| a.starts_with("Top Q3")),
            Some(true)
        );
        assert!(run.landings().all(|l| l.text.is_some() && l.flags == 0));
    }
    // Read alone, each file gives what it can, and says that a part is missing.
    let alone = read_path(&inputs.join("a.jsonl"), None).unwrap();
    assert_eq!(alone.records, 5);
    assert!(alone
        .quarantined
        .iter()
        .any(|q| q.severity == Severity::Partial && q.reason.contains("no input held")));
}

// ---------------------------------------------------------------------------------------------
// Other SDKs' captures (testdata/otel/SOURCE.txt says where each came from)
// ---------------------------------------------------------------------------------------------

/// The disposition each check gives each run of a conversation, by check name.
fn dispositions(conv: &Conversation) -> Vec<(&'static str, Disposition)> {
    let ctx = PassContext::default();
    let mut out = Vec::new();
    for (name, pass) in [
        ("repeated-call", &RepeatedCall as &dyn Pass),
        ("prior-turn-evidence", &PriorTurnEvidence),
    ] {
        out.extend(
            pass.check(conv, &ctx)
                .into_iter()
                .map(|o| (name, o.disposition)),
        );
    }
    out
}

/// `(tool, arguments, result)` of each landing of a run, in order.
fn landing_table(run: &Run) -> Vec<(String, String, String)> {
    run.landings()
        .map(|l| {
            (
                l.tool_name.clone().unwrap_or_default(),
                l.arguments.clone().unwrap_or_default(),
                l.text.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// Strands Agents writes a call's messages as span events whose content is a JSON list of
/// content blocks (`{"text"}`, `{"toolUse"}`, `{"toolResult"}`), and a tool span's input and
/// result as its own `gen_ai.tool.message` / `gen_ai.choice` events.
#[test]
fn strands_span_events_carry_the_content() {
    let (c, q) = read(&testdata("otel/strands-1.14/get_user_location.json"));
    assert_eq!(q.records, 8);
    assert!(q.quarantined.is_empty(), "{:?}", q.quarantined);
    assert_eq!(c.len(), 1);
    let conv = &c[0];
    assert_eq!(conv.id, "4152d1fb2c48ff87d75abb96470b13d3");
    assert_eq!(conv.runs.len(), 1);
    let run = &conv.runs[0];
    assert_eq!(
        run.run_id,
        "4152d1fb2c48ff87d75abb96470b13d3:6c1738ba1c1d8275"
    );
    assert_eq!(run.format, "otel");
    assert_eq!(run.agent.as_deref(), Some("Strands Agents"));
    assert_eq!(run.model.as_deref(), Some("openai/gpt-5-mini"));
    assert_eq!(run.turn, 1);
    assert_eq!(run.user_message.as_deref(), Some("testing"));
    assert_eq!(
        landing_table(run),
        [(
            "get_user_location".to_string(),
            "{}".to_string(),
            "London, UK".to_string()
        )]
    );
    let l = run.landings().next().unwrap();
    assert_eq!(l.call_id.as_deref(), Some("call_hdzL5ISsJA4mCJ1mWBGkqtzz"));
    assert_eq!((l.flags, l.iteration, has_span(l)), (0, Some(1), true));
    assert!(run.answer.as_deref().unwrap().starts_with(
        "Test received — I called the location tool and show your location as London, UK."
    ));
    assert!(!run
        .events
        .iter()
        .any(|e| e.has_flag(LandingFlags::CONTENT_OMITTED)));
    assert_eq!(run.events_of(EventKind::ModelCall).count(), 2);
    // The second model call's input re-sends the tool result as a `gen_ai.tool.message`.
    let tool_message = run
        .events_of(EventKind::Message)
        .find(|m| m.role == Some(traceaudit::model::Role::Tool))
        .unwrap();
    assert_eq!(
        (
            tool_message.call_id.as_deref(),
            tool_message.text.as_deref()
        ),
        (Some("call_hdzL5ISsJA4mCJ1mWBGkqtzz"), Some("London, UK"))
    );
    let d = dispositions(conv);
    assert_eq!(d[0], ("repeated-call", Disposition::CheckedPass));
    assert!(
        d.iter().all(|(_, d)| *d != Disposition::NotApplicable),
        "{d:?}"
    );
}

/// OpenLLMetry's indexed attributes: `gen_ai.prompt.{i}.*` and `gen_ai.completion.{i}.*`
/// (content, role, `tool_calls.{j}.*`), on a span without an agent around it.
#[test]
fn openllmetry_indexed_attributes_are_read() {
    let (c, q) = read(&testdata("otel/openllmetry-openai-0.33/chat.json"));
    assert_eq!(q.records, 1);
    assert!(q.quarantined.is_empty());
    let run = &c[0].runs[0];
    assert_eq!(c[0].id, "e4ef45025c9b40924bff175e2b125b5b");
    assert_eq!(run.run_id, "e4ef45025c9b40924bff175e2b125b5b#1");
    assert_eq!(run.turn, 1);
    assert_eq!(run.model.as_deref(), Some("gpt-3.5-turbo-0125"));
    assert_eq!(
        run.user_message.as_deref(),
        Some("What is LLM Observability?")
    );
    assert!(run.answer.as_deref().unwrap().starts_with(
        "LLM Observability (Logs, Metrics, and Traces Observability) is a strategy for monitoring"
    ));
    assert_eq!(run.landings().count(), 0);
    let d = dispositions(&c[0]);
    assert!(
        d.iter().all(|(_, d)| *d != Disposition::NotApplicable),
        "{d:?}"
    );

    let (c, q) = read(&testdata(
        "otel/openllmetry-openai-rebuilt/responses_tool_calls.json",
    ));
    assert!(q.quarantined.is_empty());
    let run = &c[0].runs[0];
    assert_eq!(
        run.user_message.as_deref(),
        Some("What's the weather in London?")
    );
    let l: Vec<&Event> = run.landings().collect();
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].tool_name.as_deref(), Some("get_weather"));
    assert_eq!(l[0].arguments.as_deref(), Some(r#"{"location":"London"}"#));
    assert_eq!(
        l[0].call_id.as_deref(),
        Some("fc_685ff89422ec819a977b2ea385bc9b6601c537ddeff5c2a2")
    );
    // The span ends with the model's call: no result was recorded because none existed yet.
    assert_eq!(l[0].flags, LandingFlags::UNANSWERED);
    assert_eq!(run.answer, None);
    let d = dispositions(&c[0]);
    assert!(
        d.iter().all(|(_, d)| *d != Disposition::NotApplicable),
        "{d:?}"
    );
}

/// The OpenAI Agents SDK's traces as three bridges export them: OpenLLMetry's and
/// OpenTelemetry's own instrumentations (GenAI spans) and OpenInference's. None writes a call id
/// on its tool spans; each tool span is the landing its model call requested, not a second one.
/// Agents called as tools are runs of their own; a workflow span that only wraps agents is none.
#[test]
fn openai_agents_tool_spans_pair_with_the_calls_that_requested_them() {
    type Expected = (
        &'static str,
        Vec<(&'static str, &'static str)>,
        &'static str,
    );
    let cases: [(&str, &str, usize, Vec<Expected>); 3] = [
        (
            "otel/openllmetry-openai-agents-0.62/stock_coordinator.json",
            "otel",
            17,
            vec![
                (
                    "math_specialist",
                    vec![
                        ("multiply_numbers", r#"{"a":240,"b":1000}"#),
                        ("multiply_numbers", r#"{"a":0,"b":1000}"#),
                    ],
                    "To calculate \\( 240.98 \\times 1000 \\)",
                ),
                (
                    "research_specialist",
                    vec![("lookup_stock_price", r#"{"ticker":"AMZN"}"#)],
                    "The current stock price of Amazon (AMZN) is $240.98.",
                ),
                (
                    "coordinator",
                    vec![
                        (
                            "ask_research_specialist",
                            r#"{"query":"current stock price of AMZN"}"#,
                        ),
                        (
                            "ask_math_specialist",
                            r#"{"query":"240.98 multiplied by 1000"}"#,
                        ),
                    ],
                    "The current stock price of Amazon (AMZN) is $240.98. Therefore, 1,000 shares",
                ),
            ],
        ),
        (
            "otel/otel-contrib-openai-agents-v2/math_coordinator.json",
            "otel",
            19,
            vec![
                (
                    "math_specialist",
                    vec![
                        ("multiply_numbers", r#"{"a":42,"b":17}"#),
                        ("divide_numbers", r#"{"a":0,"b":3}"#),
                        ("divide_numbers", r#"{"a":714,"b":3}"#),
                    ],
                    "To solve \\( 42 \\times 17 \\div 3 \\)",
                ),
                (
                    "coordinator",
                    vec![("ask_math_specialist", r#"{"query":"42 * 17 / 3"}"#)],
                    "The result of \\( 42 \\) multiplied by \\( 17 \\)",
                ),
            ],
        ),
        (
            "otel/openinference-openai-agents/math_coordinator.json",
            "openinference",
            19,
            vec![
                (
                    "math_specialist",
                    vec![
                        ("multiply_numbers", r#"{"a":42,"b":17}"#),
                        ("divide_numbers", r#"{"a":0,"b":3}"#),
                        ("divide_numbers", r#"{"a":714,"b":3}"#),
                    ],
                    "First, I calculated \\( 42 \\times 17 \\)",
                ),
                (
                    "coordinator",
                    vec![(
                        "ask_math_specialist",
                        r#"{"query":"42 multiplied by 17, then divided by 3"}"#,
                    )],
                    "The result of \\( 42 \\) multiplied by \\( 17 \\), then divided by \\( 3 \\)",
                ),
            ],
        ),
    ];
    for (file, format, spans, want) in cases {
        let (c, q) = read(&testdata(file));
        assert_eq!(q.records, spans as u64, "{file}");
        // The excerpt lacks the caller's span above the workflow: built with a note.
        assert_eq!(q.quarantined.len(), 1, "{file}: {:?}", q.quarantined);
        assert_eq!(q.quarantined[0].severity, Severity::Partial, "{file}");
        assert_eq!(c.len(), 1, "{file}");
        let conv = &c[0];
        let mut runs: Vec<&Run> = conv.runs.iter().collect();
        runs.sort_by_key(|r| r.started_ms.map(std::cmp::Reverse));
        assert_eq!(runs.len(), want.len(), "{file}");
        for (run, (agent, landings, answer)) in runs.iter().zip(&want) {
            assert_eq!(run.format, format, "{file}");
            assert_eq!(run.agent.as_deref(), Some(*agent), "{file}");
            assert_eq!(run.turn, 1, "{file}");
            let got: Vec<(String, String)> = run
                .landings()
                .map(|l| {
                    let args: Value =
                        serde_json::from_str(l.arguments.as_deref().unwrap()).unwrap();
                    (l.tool_name.clone().unwrap(), args.to_string())
                })
                .collect();
            let want_landings: Vec<(String, String)> = landings
                .iter()
                .map(|(t, a)| {
                    let args: Value = serde_json::from_str(a).unwrap();
                    (t.to_string(), args.to_string())
                })
                .collect();
            assert_eq!(got, want_landings, "{file}: {agent}");
            // Every landing ran as a tool span and has its result.
            assert!(
                run.landings()
                    .all(|l| has_span(l) && l.flags == 0 && l.text.is_some()),
                "{file}: {agent}"
            );
            assert!(
                run.answer.as_deref().unwrap().starts_with(answer),
                "{file}: {agent}: {:?}",
                run.answer
            );
        }
        // No repeat is seen where each call ran once.
        assert!(
            dispositions(conv)
                .iter()
                .filter(|(check, _)| *check == "repeated-call")
                .all(|(_, d)| *d == Disposition::CheckedPass),
            "{file}: {:?}",
            dispositions(conv)
        );
    }
}

/// The Microsoft Agent Framework's streaming path (Python, up to 1.2) started the agent span
/// without making it current: the model-call and tool spans are its siblings under the caller's
/// span. They belong to the agent's run, not to a run of their own.
#[test]
fn agent_framework_sibling_spans_join_the_agent_run() {
    let (c, q) = read(&testdata(
        "otel/agent-framework-1.2-rebuilt/streaming_get_weather.json",
    ));
    assert_eq!(q.records, 5);
    assert!(q.quarantined.is_empty());
    assert_eq!(c.len(), 1);
    let conv = &c[0];
    assert_eq!(conv.runs.len(), 1);
    let run = &conv.runs[0];
    assert_eq!(
        run.run_id,
        "6d6166000000000000000000000000a1:00000000000000b1"
    );
    assert_eq!(run.agent.as_deref(), Some("tool_agent"));
    assert_eq!(run.turn, 1);
    assert_eq!(
        run.user_message.as_deref(),
        Some("What's the weather in Seattle?")
    );
    assert_eq!(run.events_of(EventKind::ModelCall).count(), 2);
    assert_eq!(
        landing_table(run),
        [(
            "get_weather".to_string(),
            r#"{"location": "Seattle"}"#.to_string(),
            "The weather in Seattle is sunny.".to_string()
        )]
    );
    let l = run.landings().next().unwrap();
    assert_eq!(
        (l.call_id.as_deref(), l.iteration),
        (Some("call_123"), Some(1))
    );
    assert_eq!(
        run.answer.as_deref(),
        Some("The weather in Seattle is sunny!")
    );
    let d = dispositions(conv);
    assert_eq!(d[0], ("repeated-call", Disposition::CheckedPass));
    assert!(
        d.iter().all(|(_, d)| *d != Disposition::NotApplicable),
        "{d:?}"
    );
}

/// pydantic-ai 2.9 against Bedrock (a real model, a real tool).
#[test]
fn pydantic_ai_bedrock_run() {
    let (c, q) = read(&testdata("otel/pydantic-ai-2.9/get_weather.json"));
    assert_eq!(q.records, 4);
    assert!(q.quarantined.is_empty());
    let conv = &c[0];
    assert_eq!(conv.id, "019f8b0c-5147-74b5-b1e4-f9b086da98e0");
    let run = &conv.runs[0];
    assert_eq!(conv.runs.len(), 1);
    assert_eq!(run.turn, 1);
    assert_eq!(
        run.user_message.as_deref(),
        Some("What's the weather like in Seattle right now?")
    );
    assert_eq!(
        landing_table(run),
        [(
            "get_weather".to_string(),
            r#"{"city":"Seattle"}"#.to_string(),
            "62°F, cloudy with light rain".to_string()
        )]
    );
    assert!(run
        .answer
        .as_deref()
        .unwrap()
        .starts_with("The current weather in Seattle is 62°F and cloudy with light rain."));
    let d = dispositions(conv);
    assert_eq!(d[0], ("repeated-call", Disposition::CheckedPass));
    assert!(
        d.iter().all(|(_, d)| *d != Disposition::NotApplicable),
        "{d:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The shared data set
// ---------------------------------------------------------------------------------------------

fn expected() -> Option<(PathBuf, Value)> {
    let root = shared_data("otel")?;
    let text = std::fs::read_to_string(root.join("expected_counts.json")).ok()?;
    Some((root, serde_json::from_str(&text).unwrap()))
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json" || e == "jsonl"))
        .collect();
    files.sort();
    files
}

#[test]
#[ignore = "needs ../shared/data; CI runs it with --ignored"]
fn every_shared_file_gives_the_expected_counts() {
    let Some((root, expected)) = expected() else {
        eprintln!("note: ../shared/data/otel is absent; the shared-data check is skipped");
        return;
    };
    let formats = expected["formats"].as_object().unwrap();
    let mut table: BTreeMap<String, [u64; 6]> = BTreeMap::new();
    let mut files = 0;
    for (dir, settings) in formats {
        let content = settings["include_content"].as_bool().unwrap();
        let openinference = settings["openinference"].as_bool().unwrap();
        let mut json_runs: BTreeMap<String, Vec<Run>> = BTreeMap::new();
        for path in files_in(&root.join(dir)) {
            files += 1;
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            let what = format!("{dir}/{}", path.file_name().unwrap().to_string_lossy());
            let e = &expected["scenarios"][&stem];
            let (convs, collect) = read(&path);
            assert_eq!(
                collect.records,
                e["spans"].as_u64().unwrap(),
                "{what}: records"
            );
            assert!(
                collect
                    .quarantined
                    .iter()
                    .all(|q| q.severity != Severity::Dropped),
                "{what}: {:?}",
                collect.quarantined
            );
            assert_eq!(convs.len(), 1, "{what}");
            let conv = &convs[0];
            assert_eq!(conv.id, e["conversation_id"].as_str().unwrap(), "{what}");
            let runs = &conv.runs;
            assert_eq!(
                runs.len() as u64,
                e["runs"].as_u64().unwrap(),
                "{what}: runs"
            );
            let format = if openinference {
                "openinference"
            } else {
                "otel"
            };
            assert!(runs.iter().all(|r| r.format == format), "{what}");

            let landings: Vec<&Event> = runs.iter().flat_map(|r| r.landings()).collect();
            let mut by_name: BTreeMap<String, u64> = BTreeMap::new();
            for l in &landings {
                *by_name.entry(l.tool_name.clone().unwrap()).or_default() += 1;
            }
            let want: BTreeMap<String, u64> = e["model_tool_calls_by_name"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
                .collect();
            assert_eq!(by_name, want, "{what}: landings by tool");
            let spans = landings.iter().filter(|l| has_span(l)).count() as u64;
            assert_eq!(
                spans,
                e["tool_spans"].as_u64().unwrap(),
                "{what}: tool spans"
            );
            let model_calls: u64 = runs
                .iter()
                .map(|r| r.events_of(EventKind::ModelCall).count() as u64)
                .sum();
            assert_eq!(
                model_calls,
                e["chat_spans"].as_u64().unwrap(),
                "{what}: chat spans"
            );
            if let Some(turns) = e["turns"].as_array() {
                for (run, t) in runs.iter().zip(turns) {
                    assert_eq!(
                        run.events_of(EventKind::ModelCall).count() as u64,
                        t["chat_spans"].as_u64().unwrap()
                    );
                    assert_eq!(
                        run.landings().filter(|l| has_span(l)).count() as u64,
                        t["tool_spans"].as_u64().unwrap()
                    );
                }
                assert_eq!(runs.iter().map(|r| r.turn).collect::<Vec<_>>(), [1, 2]);
            }

            // Retries: a tool span's retry markers; an output tool called again.
            let tool_retries = landings
                .iter()
                .filter(|l| !is_output_tool(l) && payload(l).get("retry").is_some())
                .count() as u64;
            assert_eq!(tool_retries, e["tool_retries"].as_u64().unwrap(), "{what}");
            let run_failed = runs.iter().any(|r| {
                r.events
                    .iter()
                    .any(|x| x.source_type.as_deref() == Some("run_error"))
            });
            assert_eq!(run_failed, e["run_failed"].as_bool().unwrap(), "{what}");
            let output_calls = landings.iter().filter(|l| is_output_tool(l)).count() as u64;
            let output_retries = output_calls.saturating_sub(u64::from(!run_failed));
            assert_eq!(
                output_retries,
                e["output_retries"].as_u64().unwrap(),
                "{what}"
            );
            if content && output_retries > 0 {
                let failed = landings
                    .iter()
                    .filter(|l| is_output_tool(l) && l.error)
                    .count() as u64;
                assert_eq!(failed, output_retries, "{what}: failed output attempts");
            }
            let exceptions = runs
                .iter()
                .flat_map(|r| r.events.iter())
                .filter(|x| x.source_type.as_deref() == Some("exception"))
                .count() as u64;
            assert_eq!(
                exceptions,
                e["exception_events"].as_u64().unwrap(),
                "{what}"
            );
            let error_spans = runs
                .iter()
                .flat_map(|r| r.events.iter())
                .filter(|x| {
                    x.error
                        && (x.kind() == EventKind::ModelCall
                            || x.source_type.as_deref() == Some("run_error")
                            || (x.kind() == EventKind::Landing && has_span(x)))
                })
                .count() as u64;
            let extra = settings["extra_error_spans"][&stem].as_u64().unwrap_or(0);
            assert_eq!(
                error_spans,
                e["error_spans"].as_u64().unwrap() + extra,
                "{what}"
            );

            // Content, and what the repeated-call pass makes of it.
            let identical = wasted(conv, false);
            let same_args = wasted(conv, true);
            if content {
                assert!(landings
                    .iter()
                    .all(|l| !l.has_flag(LandingFlags::CONTENT_OMITTED)));
                let sum = |v: &[(Disposition, u32)]| v.iter().map(|x| x.1 as u64).sum::<u64>();
                assert_eq!(
                    sum(&identical),
                    e["identical_result_repeats"].as_u64().unwrap(),
                    "{what}"
                );
                assert_eq!(
                    sum(&same_args),
                    e["same_args_repeats"].as_u64().unwrap(),
                    "{what}"
                );
                let answered = runs.iter().filter(|r| r.answer.is_some()).count();
                assert_eq!(
                    answered,
                    runs.len() - usize::from(run_failed),
                    "{what}: answers"
                );
            } else {
                assert!(
                    landings
                        .iter()
                        .all(|l| l.has_flag(LandingFlags::CONTENT_OMITTED)),
                    "{what}"
                );
                assert!(
                    identical.iter().all(|(d, n)| *n == 0
                        && matches!(d, Disposition::NotApplicable | Disposition::Unreachable)),
                    "{what}: {identical:?}"
                );
            }
            let row = table.entry(dir.clone()).or_default();
            row[0] += 1;
            row[1] += runs.len() as u64;
            row[2] += landings.len() as u64;
            row[3] += spans;
            row[4] += identical.iter().map(|x| x.1 as u64).sum::<u64>();
            row[5] += same_args.iter().map(|x| x.1 as u64).sum::<u64>();

            // The JSON document and the JSONL file of a scenario give the same runs.
            let comparable_runs: Vec<Run> = runs.iter().map(comparable).collect();
            match json_runs.get(&stem) {
                Some(other) => assert_eq!(other, &comparable_runs, "{what}: JSON vs JSONL"),
                None => {
                    json_runs.insert(stem, comparable_runs);
                }
            }
        }
    }
    assert_eq!(files, 12 * 14);
    eprintln!("directory                    files runs landings tool-spans identical-repeats same-args-repeats");
    for (dir, r) in &table {
        eprintln!(
            "{dir:<28} {:>5} {:>4} {:>8} {:>10} {:>17} {:>17}",
            r[0], r[1], r[2], r[3], r[4], r[5]
        );
    }
}

/// The audit over one directory: repeated-call findings where the scenario repeats.
#[test]
#[ignore = "needs ../shared/data; CI runs it with --ignored"]
fn audit_files_repeated_call_findings_for_the_shared_data() {
    let Some((root, expected)) = expected() else {
        eprintln!("note: ../shared/data/otel is absent; the shared-data audit is skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for sub in [
        "pydantic-ai-v5-content",
        "openinference-v5-content",
        "pydantic-ai-v2-nocontent",
    ] {
        let out = dir.path().join(sub);
        let summary = audit(
            &[root.join(sub)],
            &out,
            &AuditOptions {
                threads: 2,
                ..AuditOptions::default()
            },
        )
        .unwrap();
        let _ = summary;
        let lines = std::fs::read_to_string(out.join("findings.jsonl")).unwrap();
        let findings: Vec<Value> = lines
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|f: &Value| f["check_name"] == "repeated-call")
            .collect();
        let content = !sub.ends_with("nocontent");
        let mut by_conversation: BTreeMap<String, u64> = BTreeMap::new();
        for f in &findings {
            *by_conversation
                .entry(f["conversation_id"].as_str().unwrap().to_string())
                .or_default() += f["wasted_landings"].as_u64().unwrap();
        }
        let mut want: BTreeMap<String, u64> = BTreeMap::new();
        if content {
            for (_, e) in expected["scenarios"].as_object().unwrap() {
                let n = e["identical_result_repeats"].as_u64().unwrap();
                if n > 0 {
                    want.insert(e["conversation_id"].as_str().unwrap().to_string(), n);
                }
            }
        }
        assert_eq!(by_conversation, want, "{sub}");
        let sources: Vec<&str> = findings
            .iter()
            .filter_map(|f| f["source"].as_str())
            .collect();
        let family = if sub.starts_with("openinference") {
            "openinference"
        } else {
            "otel"
        };
        assert!(sources.iter().all(|s| *s == family), "{sub}: {sources:?}");
    }
}

/// The rows of one corpus table, as JSON objects (null columns left out).
fn table_rows(path: &Path) -> Vec<Value> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let file = std::fs::File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for batch in reader {
        let mut writer = arrow::json::ArrayWriter::new(Vec::new());
        writer.write_batches(&[&batch.unwrap()]).unwrap();
        writer.finish().unwrap();
        let text = writer.into_inner();
        if !text.is_empty() {
            let parsed: Vec<Value> = serde_json::from_slice(&text).unwrap();
            rows.extend(parsed);
        }
    }
    rows
}

/// The scenarios that declare structured output, and its output tool (the shared README: s4's
/// `output_type=ShipmentSummary` through `final_result`, s4b's `ToolOutput(submit_summary)`).
const OUTPUT_TOOLS: [(&str, &str); 2] = [
    ("s4_structured_output_retry", "final_result"),
    ("s4b_output_function_retry", "submit_summary"),
];

/// The audit of every shared directory: the schema-attempt ledger holds the runs with an output
/// contract, their attempts and retries as `expected_counts.json` states them; without content,
/// no run is ever a pass.
#[test]
#[ignore = "needs ../shared/data; CI runs it with --ignored"]
fn audit_schema_attempts_for_every_shared_directory() {
    let Some((root, expected)) = expected() else {
        eprintln!(
            "note: ../shared/data/otel is absent; the shared-data schema-attempt audit is skipped"
        );
        return;
    };
    let scenarios = expected["scenarios"].as_object().unwrap();
    // Expected per directory with content: runs with a contract, attempts, retries.
    let mut want = [0u64; 3];
    let mut want_by_conversation: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (stem, tool) in OUTPUT_TOOLS {
        let e = &scenarios[stem];
        let attempts = e["model_tool_calls_by_name"][tool].as_u64().unwrap();
        let retries = e["output_retries"].as_u64().unwrap();
        want[0] += e["runs"].as_u64().unwrap();
        want[1] += attempts;
        want[2] += retries;
        want_by_conversation.insert(
            e["conversation_id"].as_str().unwrap().to_string(),
            (attempts, retries),
        );
    }
    let all_retries: u64 = scenarios
        .values()
        .map(|e| e["output_retries"].as_u64().unwrap())
        .sum();
    assert_eq!(
        all_retries, want[2],
        "an output retry outside the contract scenarios"
    );

    let dir = tempfile::tempdir().unwrap();
    let mut report = Vec::new();
    for (sub, settings) in expected["formats"].as_object().unwrap() {
        let content = settings["include_content"].as_bool().unwrap();
        let out = dir.path().join(sub);
        audit(
            &[root.join(sub)],
            &out,
            &AuditOptions {
                threads: 2,
                checks: Some(vec!["schema-attempt".into()]),
                ..AuditOptions::default()
            },
        )
        .unwrap();
        let dispositions: Vec<Value> = table_rows(&out.join("dispositions.parquet"))
            .into_iter()
            .filter(|d| d["check_name"] == "schema-attempt")
            .collect();
        let attempts = table_rows(&out.join("attempts.parquet"));
        let runs = dispositions.len() as u64;
        let contract_runs: std::collections::BTreeSet<&str> = attempts
            .iter()
            .map(|r| r["run_id"].as_str().unwrap())
            .collect();
        let retries = attempts
            .iter()
            .filter(|r| r["outcome"] == "retried")
            .count() as u64;
        let got = [contract_runs.len() as u64, attempts.len() as u64, retries];
        // Runs with a contract whose content the source omitted.
        let omitted = dispositions
            .iter()
            .filter(|d| d["reason"].as_str().unwrap().contains("omitted"))
            .count() as u64;
        let mut by_disposition: BTreeMap<String, u64> = BTreeMap::new();
        for d in &dispositions {
            *by_disposition
                .entry(d["disposition"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        if content {
            assert_eq!(got, want, "{sub}: runs with a contract, attempts, retries");
            let mut by_conversation: BTreeMap<String, (u64, u64)> = BTreeMap::new();
            for r in &attempts {
                let entry = by_conversation
                    .entry(r["conversation_id"].as_str().unwrap().to_string())
                    .or_default();
                entry.0 += 1;
                entry.1 += u64::from(r["outcome"] == "retried");
                assert_eq!(
                    r["joins"].as_array().unwrap().len(),
                    usize::from(r["outcome"] == "retried"),
                    "{sub}: {r}"
                );
            }
            assert_eq!(by_conversation, want_by_conversation, "{sub}");
            // Every contract run holds its invariants and ends with a passing answer.
            for d in &dispositions {
                let with_contract = contract_runs.contains(d["run_id"].as_str().unwrap());
                let want = if with_contract {
                    "checked-pass"
                } else {
                    "not-applicable"
                };
                assert_eq!(d["disposition"], want, "{sub}: {d}");
            }
        } else {
            assert!(attempts.is_empty(), "{sub}: {attempts:?}");
            assert_eq!(omitted, want[0], "{sub}: contract runs without content");
            for d in &dispositions {
                assert_ne!(d["disposition"], "checked-pass", "{sub}: {d}");
                if want_by_conversation.contains_key(d["conversation_id"].as_str().unwrap()) {
                    assert!(
                        d["reason"].as_str().unwrap().contains("omitted"),
                        "{sub}: {d}"
                    );
                }
            }
        }
        let findings = std::fs::read_to_string(out.join("findings.jsonl")).unwrap();
        assert!(findings.trim().is_empty(), "{sub}: {findings}");
        report.push(format!(
            "{sub:<28} {runs:>4} {:>9} {:>8} {:>7} {omitted:>7}  {by_disposition:?}",
            got[0], got[1], got[2]
        ));
    }
    eprintln!("directory                    runs contracts attempts retries omitted  dispositions");
    for line in report {
        eprintln!("{line}");
    }
}
