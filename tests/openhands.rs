//! OpenHands trajectories read end to end: the fixture excerpts (and the full files in the
//! shared data folder, when present), their landings checked against a count made here from the
//! raw JSON, without the engine's reader.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use traceaudit::read::{read_head, read_path, Severity};
use traceaudit::Format;

/// Action types that call no tool.
const NOT_TOOLS: &[&str] = &[
    "message",
    "system",
    "finish",
    "reject",
    "change_agent_state",
    "null",
    "recall",
    "condensation",
];

/// What the raw JSON of one conversation says: its user messages, and per tool call, in order,
/// the text of the observation answering it (`None` when none does).
struct Expected {
    user_messages: usize,
    results: Vec<Option<String>>,
}

fn expected(events: &[Value]) -> Expected {
    let events: Vec<&Value> = events
        .iter()
        .flat_map(|e| match e {
            Value::Array(pair) => pair.iter().collect::<Vec<_>>(),
            other => vec![other],
        })
        .collect();
    let mut user_messages = 0;
    let mut results = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let Some(action) = e.get("action").and_then(Value::as_str) else {
            continue;
        };
        let source = e.get("source").and_then(Value::as_str);
        if action == "message" && (source == Some("user") || (source.is_none() && i == 0)) {
            user_messages += 1;
        }
        if NOT_TOOLS.contains(&action) || source == Some("user") {
            continue;
        }
        let answer = match e.get("id") {
            Some(id) => events
                .iter()
                .find(|o| o.get("observation").is_some() && o.get("cause") == Some(id)),
            None => events.get(i + 1).filter(|o| o.get("observation").is_some()),
        };
        results.push(answer.map(|o| o["content"].as_str().unwrap().to_string()));
    }
    Expected {
        user_messages,
        results,
    }
}

/// Read `path` through detection and compare each conversation with the raw count; returns the
/// landings per conversation.
fn check(path: &Path, format: Format, conversations: Vec<Vec<Value>>) -> Vec<usize> {
    let head = read_head(path).unwrap();
    assert_eq!(Format::detect(&head), Some(format), "{}", path.display());
    let sink = read_path(path, None).unwrap();
    assert_eq!(sink.records, conversations.len() as u64);
    assert!(
        sink.quarantined
            .iter()
            .all(|q| q.severity == Severity::Partial),
        "{:?}",
        sink.quarantined
    );
    assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
    assert_eq!(sink.conversations.len(), conversations.len());
    let mut counts = Vec::new();
    for ((conv, _), events) in sink.conversations.iter().zip(&conversations) {
        let want = expected(events);
        assert_eq!(conv.runs.len(), want.user_messages, "{}", conv.id);
        let landings: Vec<_> = conv.runs.iter().flat_map(|r| r.landings()).collect();
        assert_eq!(landings.len(), want.results.len(), "{}", conv.id);
        for (landing, result) in landings.iter().zip(&want.results) {
            if let Some(text) = result {
                assert_eq!(landing.text.as_deref(), Some(text.as_str()), "{}", conv.id);
            }
            assert!(landing.arguments.as_deref().unwrap().starts_with('{'));
        }
        assert!(conv.runs.last().unwrap().answer.is_some(), "{}", conv.id);
        counts.push(landings.len());
    }
    counts
}

fn event_stream(path: &Path) -> Vec<Vec<Value>> {
    let value: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    vec![value.as_array().unwrap().clone()]
}

fn output_lines(path: &Path) -> Vec<Vec<Value>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let line: Value = serde_json::from_str(l).unwrap();
            line["history"].as_array().unwrap().clone()
        })
        .collect()
}

fn fixture(name: &str) -> std::path::PathBuf {
    crate_dir().join("testdata/openhands").join(name)
}

#[test]
fn event_stream_excerpt() {
    let path = fixture("basic.json");
    let counts = check(&path, Format::OpenHandsEvents, event_stream(&path));
    assert_eq!(counts, vec![1]);
    let sink = read_path(&path, None).unwrap();
    let run = &sink.conversations[0].0.runs[0];
    let landing = run.landings().next().unwrap();
    assert_eq!(landing.tool_name.as_deref(), Some("str_replace_editor"));
    assert_eq!(
        landing.call_id.as_deref(),
        Some("toolu_017nBp7UfiGqyrA7j77HgtFP")
    );
    // The arguments are the model's own, not OpenHands' rewrite of them.
    let args: Value = serde_json::from_str(landing.arguments.as_deref().unwrap()).unwrap();
    assert_eq!(args["command"], "create");
    assert_eq!(run.model.as_deref(), Some("claude-3-5-sonnet-20241022"));
    assert!(run.answer.as_deref().unwrap().starts_with("I've created"));
}

#[test]
fn three_user_messages_are_three_turns() {
    let path = fixture("basic_interactions.json");
    let counts = check(&path, Format::OpenHandsEvents, event_stream(&path));
    assert_eq!(counts, vec![0]);
    let sink = read_path(&path, None).unwrap();
    let runs = &sink.conversations[0].0.runs;
    let turns: Vec<_> = runs.iter().map(|r| r.turn).collect();
    assert_eq!(turns, vec![1, 2, 3]);
    let answers: Vec<_> = runs.iter().map(|r| r.answer.as_deref().unwrap()).collect();
    assert_eq!(answers[0], "1 + 1 equals 2.");
    assert!(answers[1].starts_with("Goldbach's conjecture is"));
    assert_eq!(answers[2], "All done! What's next on the agenda?");
    assert_eq!(runs[2].user_message.as_deref(), Some("Finish please"));
}

#[test]
fn resolver_output_excerpt() {
    let path = fixture("resolver_output.jsonl");
    let counts = check(&path, Format::OpenHandsOutput, output_lines(&path));
    assert_eq!(counts, vec![3, 4]);
    let sink = read_path(&path, None).unwrap();
    let ids: Vec<_> = sink
        .conversations
        .iter()
        .map(|(c, _)| c.id.rsplit('/').next().unwrap().to_string())
        .collect();
    assert_eq!(ids, vec!["pr-viewer#5", "pr-viewer#1"]);
}

#[test]
#[ignore = "needs ../shared/data; CI runs it with --ignored"]
fn full_shared_files() {
    if let Some(path) = shared_data("openhands/basic.json") {
        let counts = check(&path, Format::OpenHandsEvents, event_stream(&path));
        assert_eq!(counts, vec![1]);
    }
    if let Some(path) = shared_data("openhands/resolver_mock_output.jsonl") {
        let counts = check(&path, Format::OpenHandsOutput, output_lines(&path));
        assert_eq!(counts, vec![3, 21]);
    }
}
