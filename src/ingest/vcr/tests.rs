use super::*;
use crate::ingest::{read_path, Collect, Format, Severity};
use std::io::Write;
use std::path::PathBuf;

fn testdata(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/cassettes")
        .join(rel)
}

fn read_text(yaml: &str) -> Collect {
    let mut f = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    f.write_all(yaml.as_bytes()).unwrap();
    let mut sink = Collect::default();
    read(&Input::new(f.path(), "dir/case.yaml"), &mut sink).unwrap();
    sink
}

fn payload(e: &Event) -> Value {
    js::parse_json(e.payload.as_deref().unwrap()).unwrap()
}

#[test]
fn detection_and_ids() {
    assert_eq!(
        Format::detect(b"interactions:\n- request:\n    method: POST\n"),
        Some(Format::Vcr)
    );
    assert_eq!(
        Format::detect(b"version: 1\ninteractions:\n- request_sample:\n"),
        Some(Format::Vcr)
    );
    assert_eq!(Format::detect(b"name: not a cassette\n"), None);
    assert_eq!(
        conversation_id("/a/b/test_groq/test_x[y-z].yaml"),
        "test_groq/test_x[y-z]"
    );
    assert_eq!(base64_decode("aGk=").unwrap(), b"hi");
}

#[test]
fn retry_prompts_are_read() {
    let listed = "1 validation error:\n```json\n[\n  {\n    \"type\": \"json_invalid\",\n    \"loc\": [],\n    \"msg\": \"Invalid JSON\"\n  }\n]\n```\n\nFix the errors and try again.";
    let (stage, error, path) = retry_details(listed);
    assert_eq!(stage, "json-parse");
    assert!(error.starts_with("1 validation error:") && error.ends_with("```"));
    assert_eq!(path, None);
    let typed = "Validation feedback:\n2 validation errors:\n```json\n[{\"type\": \"missing\", \"loc\": [\"city\", 0], \"msg\": \"Field required\"}]\n```\n\nFix the errors and try again.";
    let (stage, error, path) = retry_details(typed);
    assert_eq!(
        (stage.as_str(), path.as_deref()),
        ("schema-validate", Some("city.0"))
    );
    assert!(error.starts_with("2 validation errors:"));
    let plain = "Please include your response in a tool call.\n\nFix the errors and try again.";
    assert_eq!(
        retry_details(plain),
        (
            "json-parse".into(),
            "Please include your response in a tool call.".into(),
            None
        )
    );
    assert!(is_retry_text(plain));
    assert!(!is_retry_text("Paris"));
}

#[test]
fn schemas_from_gemini_and_prompts() {
    let gemini = json!({"type": "OBJECT", "property_ordering": ["a"], "properties": {
        "a": {"type": "STRING", "nullable": true},
        "b": {"any_of": [{"type": "INTEGER"}, {"type": "ARRAY", "items": {"type": "NUMBER"}}]}}});
    assert_eq!(
        gemini_schema(&gemini),
        json!({"type": "object", "properties": {
            "a": {"type": ["string", "null"]},
            "b": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "number"}}]}}})
    );
    let prompt = "Always respond with a JSON object that's compatible with this schema:\n\n{\"type\": \"object\", \"required\": [\"city\"]}\n\nDon't include any text.";
    assert_eq!(
        prompted_schema(prompt),
        Some(json!({"type": "object", "required": ["city"]}))
    );
    assert_eq!(prompted_schema("Answer briefly."), None);
}

/// The one real structured-output retry the brief names: a text answer where the output tool
/// was expected, rejected as invalid JSON, then the tool call.
#[test]
fn ollama_tool_output_retry() {
    let sink = read_path(
        &testdata("test_ollama/test_ollama_cloud_tool_output.yaml"),
        None,
    )
    .unwrap();
    assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
    assert_eq!(sink.records, 2);
    let conv = &sink.conversations[0].0;
    assert_eq!(conv.id, "test_ollama/test_ollama_cloud_tool_output");
    assert_eq!(conv.runs.len(), 1);
    let run = &conv.runs[0];
    assert_eq!(run.format, "vcr");
    assert_eq!(
        run.user_message.as_deref(),
        Some("What is the capital of France?")
    );
    let contract: Vec<&Event> = run
        .events
        .iter()
        .filter(|e| e.source_type.as_deref() == Some("output-contract"))
        .collect();
    assert_eq!(contract.len(), 1);
    let c = payload(contract[0]);
    assert_eq!(c["mode"], "tool");
    assert_eq!(
        c["tools"]["final_result"]["required"],
        json!(["city", "country"])
    );
    let calls: Vec<&Event> = run.events_of(EventKind::ModelCall).collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(payload(calls[0])["answer"]["text"], "Paris.");
    assert_eq!(
        payload(calls[1])["answer"],
        json!({"text": "{\"city\":\"Paris\",\"country\":\"France\"}", "tool": "final_result"})
    );
    let retries: Vec<&Event> = run.events_of(EventKind::Verdict).collect();
    assert_eq!(retries.len(), 1);
    let r = &payload(retries[0])["payload"];
    assert_eq!(r["attempt"], 1);
    assert_eq!(r["iteration"], 1);
    assert_eq!(r["stage"], "json-parse");
    // The hash is the one of the correction as the history holds it.
    let correction = run
        .events_of(EventKind::Context)
        .find(|e| e.text.as_deref().is_some_and(is_retry_text))
        .unwrap();
    assert_eq!(
        r["correctiveMessageHash"],
        js::hash_hex(correction.text.as_deref().unwrap())
    );
    assert_eq!(
        run.answer.as_deref(),
        Some("{\"city\":\"Paris\",\"country\":\"France\"}")
    );
    // The output tool is the answer's channel, not a tool that ran.
    assert_eq!(run.landings().count(), 0);
}

#[test]
fn chains_by_previous_response_id_and_tool_retries() {
    let sink = read_path(
        &testdata(
            "test_openai_responses/test_openai_previous_response_id_seed_auto_chains_through_retries.yaml",
        ),
        None,
    )
    .unwrap();
    let conv = &sink.conversations[0].0;
    let turns: Vec<(u32, usize)> = conv
        .runs
        .iter()
        .map(|r| (r.turn, r.events_of(EventKind::ModelCall).count()))
        .collect();
    assert_eq!(turns, [(1, 1), (2, 3)]);
    let landings: Vec<(bool, String)> = conv.runs[1]
        .landings()
        .map(|l| (l.error, l.arguments.clone().unwrap()))
        .collect();
    assert_eq!(
        landings,
        [
            (true, "{\"city\":\"New York\"}".to_string()),
            (false, "{\"city\":\"NYC\"}".to_string())
        ]
    );
    // The second turn's history holds the first turn, which was never re-sent.
    let history = conv.history_for(1);
    assert_eq!(history[0].text, "Say hi in one word, no punctuation.");
    assert_eq!(history[1].text, "Hello");
}

#[test]
fn a_failed_call_takes_the_answer_the_framework_resent() {
    let sink = read_path(
        &testdata("test_groq/test_tool_use_failed_error_with_text.yaml"),
        None,
    )
    .unwrap();
    assert_eq!(sink.quarantined.len(), 1);
    assert_eq!(sink.quarantined[0].severity, Severity::Partial);
    let run = &sink.conversations[0].0.runs[0];
    let calls: Vec<&Event> = run.events_of(EventKind::ModelCall).collect();
    assert_eq!(payload(calls[0])["answer"]["text"], "maybe");
    assert_eq!(payload(calls[0])["status"], 400);
}

#[test]
fn independent_requests_start_new_chains_and_bad_input_is_quarantined() {
    let two = r#"interactions:
- request:
    method: POST
    uri: https://api.openai.com/v1/chat/completions
    parsed_body:
      messages:
      - {role: user, content: first}
  response:
    status: {code: 200, message: OK}
    parsed_body:
      choices:
      - {finish_reason: stop, message: {role: assistant, content: one}}
- request:
    method: POST
    uri: https://api.openai.com/v1/chat/completions
    parsed_body:
      messages:
      - {role: user, content: second}
  response:
    status: {code: 200, message: OK}
    parsed_body:
      choices:
      - {finish_reason: length, message: {role: assistant, content: two}}
- request:
    method: GET
    uri: https://example.invalid/health
  response:
    status: {code: 200, message: OK}
"#;
    let sink = read_text(two);
    assert_eq!(sink.records, 3);
    let conv = &sink.conversations[0].0;
    assert_eq!(conv.id, "dir/case");
    let answers: Vec<_> = conv
        .runs
        .iter()
        .map(|r| r.answer.clone().unwrap())
        .collect();
    assert_eq!(answers, ["one", "two"]);
    let stop = payload(conv.runs[1].events_of(EventKind::ModelCall).next().unwrap());
    assert_eq!(stop["stopReason"], "max_tokens");
    assert_eq!(sink.quarantined.len(), 1);
    assert!(sink.quarantined[0].reason.contains("has no body"));

    for (text, reason) in [
        ("interactions: [\n", "not valid YAML"),
        ("version: 1\n", "no `interactions` list"),
        ("interactions: []\n", "no interaction"),
    ] {
        let sink = read_text(text);
        assert_eq!(sink.records, 1);
        assert!(sink.conversations.is_empty());
        assert!(sink.quarantined[0].reason.contains(reason), "{text}");
    }
}
