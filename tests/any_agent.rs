//! any-agent traces (mozilla-ai any-agent's `AgentTrace` JSON) read from the real samples in
//! testdata/any-agent: every count is checked against the raw document, scanned here on its own.

use std::path::Path;

use serde_json::Value;
use traceaudit::model::{EventKind, Role};
use traceaudit::read::{read_head, read_path, Severity};
use traceaudit::Format;

const FILES: [&str; 3] = [
    "AGNO_trace.json",
    "LANGCHAIN_trace.json",
    "OPENAI_trace.json",
];

/// What the raw document holds, by operation.
struct Raw {
    agents: usize,
    model_calls: usize,
    /// (tool name, arguments, result) of each `execute_tool` span, in file order.
    tools: Vec<(String, String, String)>,
    final_output: Value,
}

fn scan(path: &Path) -> Raw {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let spans = doc["spans"].as_array().expect("a spans list");
    let op = |s: &Value| {
        s["attributes"]["gen_ai.operation.name"]
            .as_str()
            .map(str::to_string)
    };
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Raw {
        agents: spans
            .iter()
            .filter(|s| op(s).as_deref() == Some("invoke_agent"))
            .count(),
        model_calls: spans
            .iter()
            .filter(|s| op(s).as_deref() == Some("call_llm"))
            .count(),
        tools: spans
            .iter()
            .filter(|s| op(s).as_deref() == Some("execute_tool"))
            .map(|s| {
                let a = &s["attributes"];
                (
                    text(&a["gen_ai.tool.name"]),
                    text(&a["gen_ai.tool.args"]),
                    text(&a["gen_ai.output"]),
                )
            })
            .collect(),
        final_output: doc["final_output"].clone(),
    }
}

#[test]
fn real_any_agent_traces_give_one_landing_per_tool_span() {
    for name in FILES {
        let path = Path::new("testdata/any-agent").join(name);
        let head = read_head(&path).unwrap();
        assert_eq!(
            Format::detect(&head),
            Some(Format::AnyAgent),
            "{name}: detected"
        );
        let raw = scan(&path);
        let got = read_path(&path, None).unwrap();
        assert!(got.quarantined.is_empty(), "{name}: {:?}", got.quarantined);
        assert_eq!(
            got.conversations.len(),
            1,
            "{name}: one trace, one conversation"
        );
        let runs: Vec<_> = got
            .conversations
            .iter()
            .flat_map(|(c, _)| &c.runs)
            .collect();
        assert_eq!(
            runs.len(),
            raw.agents,
            "{name}: one run per invoke_agent span"
        );
        assert_eq!(raw.agents, 1, "{name}: the sample has one agent span");
        let run = runs[0];
        assert_eq!(run.format, "any-agent", "{name}");
        assert_eq!(run.agent.as_deref(), Some("any_agent"), "{name}");

        let landings: Vec<_> = run.landings().collect();
        eprintln!(
            "{name}: {} execute_tool spans, {} landings; {} call_llm spans",
            raw.tools.len(),
            landings.len(),
            raw.model_calls
        );
        assert_eq!(landings.len(), raw.tools.len(), "{name}: landings");
        for (l, (tool, args, result)) in landings.iter().zip(&raw.tools) {
            assert_eq!(
                l.tool_name.as_deref(),
                Some(tool.as_str()),
                "{name}: tool name"
            );
            assert_eq!(
                l.arguments.as_deref(),
                Some(args.as_str()),
                "{name}: {tool} arguments"
            );
            assert_eq!(
                l.text.as_deref(),
                Some(result.as_str()),
                "{name}: {tool} result"
            );
            assert!(!l.error, "{name}: {tool} ran without error");
        }

        let model_calls = run
            .events
            .iter()
            .filter(|e| e.kind() == EventKind::ModelCall)
            .count();
        assert_eq!(model_calls, raw.model_calls, "{name}: model calls");

        // The requests for each tool, from the model's outputs, are the landings' own: no
        // assistant tool call is left without its tool span.
        let requested: usize = run
            .events
            .iter()
            .filter(|e| e.kind() == EventKind::Message && e.role == Some(Role::Assistant))
            .filter_map(|e| e.arguments.as_deref())
            .map(|a| serde_json::from_str::<Vec<Value>>(a).map_or(0, |v| v.len()))
            .sum();
        assert!(
            requested <= landings.len(),
            "{name}: {requested} requested calls"
        );

        let answer = run
            .events
            .iter()
            .find(|e| e.kind() == EventKind::Answer)
            .and_then(|e| e.text.clone())
            .expect("an answer");
        let expected = match &raw.final_output {
            Value::String(s) => s.clone(),
            other => serde_json::from_value::<Value>(other.clone())
                .unwrap()
                .to_string(),
        };
        let same = serde_json::from_str::<Value>(&answer).ok()
            == serde_json::from_str(&expected).ok()
            || answer == expected;
        assert!(same, "{name}: answer {answer:?}, final output {expected:?}");
        assert_eq!(
            got.records as usize,
            raw.agents + raw.model_calls + raw.tools.len(),
            "{name}: records"
        );
    }
}

#[test]
fn unknown_kinds_and_operations_are_notes_not_a_failed_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("odd.json");
    let span = |id: u64, parent: Option<u64>, name: &str, kind: &str, attrs: Value| {
        serde_json::json!({
            "name": name, "kind": kind,
            "parent": parent.map(|p| serde_json::json!({"trace_id": 7, "span_id": p, "is_remote": false})),
            "start_time": 1_000 + id, "end_time": 2_000 + id,
            "status": {"status_code": "ok", "description": null},
            "context": {"trace_id": 7, "span_id": id, "is_remote": false},
            "attributes": attrs, "links": [], "events": [], "resource": {"attributes": {}}
        })
    };
    let doc = serde_json::json!({
        "spans": [
            span(2, Some(1), "execute_tool f", "internal", serde_json::json!({
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "f",
                "gen_ai.tool.args": "{\"a\": 1}", "gen_ai.output": "done"})),
            span(3, Some(1), "plan", "sideways", serde_json::json!({"gen_ai.operation.name": "plan"})),
            {"name": "no context", "attributes": {}},
            span(1, None, "invoke_agent [x]", "internal", serde_json::json!({
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "x"})),
        ],
        "final_output": "fine"
    });
    std::fs::write(&path, doc.to_string()).unwrap();
    let got = read_path(&path, Some(Format::AnyAgent)).unwrap();
    let of = |s: Severity| got.quarantined.iter().filter(|q| q.severity == s).count();
    assert_eq!(of(Severity::Dropped), 1, "{:?}", got.quarantined);
    assert_eq!(of(Severity::Partial), 2, "{:?}", got.quarantined);
    assert_eq!(got.records, 4);
    let runs: Vec<_> = got
        .conversations
        .iter()
        .flat_map(|(c, _)| &c.runs)
        .collect();
    assert_eq!(runs.len(), 1);
    let landings: Vec<_> = runs[0].landings().collect();
    assert_eq!(landings.len(), 1);
    assert_eq!(landings[0].text.as_deref(), Some("done"));
}
