use super::yaml::{yaml_shape, YamlShape};
use super::*;
use crate::ingest::limits::NESTING_LIMIT;
use crate::ingest::Limits;
use crate::ingest::{read_path, Collect, Format, Severity};
use crate::js;
use crate::model::{Event, EventKind};
use serde_json::json;
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
    let input = Input {
        name: "dir/case.yaml",
        ..Input::new(f.path(), "dir/case.yaml")
    };
    read(&input, &mut sink).unwrap();
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
    // A `!!binary` scalar is its decoded text.
    let tagged = serde_norway::Value::Tagged(Box::new(serde_norway::value::TaggedValue {
        tag: serde_norway::value::Tag::new("binary"),
        value: serde_norway::Value::String("aGk=\n".into()),
    }));
    assert_eq!(yaml_to_json(tagged), json!("hi"));
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
        gemini::gemini_schema(&gemini),
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

/// A cassette's text read under a record limit of `record_bytes`.
fn read_limited(yaml: &[u8], record_bytes: u64) -> Collect {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("case.yaml");
    std::fs::write(&path, yaml).unwrap();
    let mut input = Input::new(&path, "dir/case.yaml");
    input.name = "dir/case.yaml";
    input.limits.record_bytes = record_bytes;
    let mut sink = Collect::default();
    read(&input, &mut sink).unwrap();
    sink
}

#[test]
fn flow_depth_is_found_in_one_pass() {
    let depth = |text: &str| yaml_shape(text).flow_depth;
    for (text, want) in [
        ("a: [[1], {b: [2]}]\n", 3),
        ("a: '[[[['\nb: \"[[[\\\"[[\"\n", 0),
        ("a: 'it''s [[[['\n", 0),
        // Brackets and quotes inside a plain scalar are text.
        ("a: it's [here] [[\n", 0),
        ("a: 1 # [[[ '\nb: [x]\n", 1),
        ("a: |\n  [[[[\n  'x\nb: [[y]]\n", 2),
        ("a: !!binary |\n  W1tb\n  [[[\nb: {c: [1]}\n", 2),
        // A sibling key of the block scalar's key is not its content.
        ("- key: |\n    [[[\n  other: [[1]]\n", 2),
        ("- |\n  [[[[\n- [1]\n", 1),
        ("a: [\n  [\n   1 ] ]\n", 2),
        // A plain scalar continued on the next line: its quote opens nothing.
        ("k: value\n  'x\nk2: [[1]]\n", 2),
        ("- '[' \n- \"]]]\"\n- [a, '[', \"{\"]\n", 1),
        ("a: \"multi\n  line [[[\n  \\\" still\"\nb: [[[1]]]\n", 3),
        ("--- [[1]]\n", 2),
    ] {
        assert_eq!(depth(text), want, "{text:?}");
        // Whatever the pass counts is at most the parsed nesting.
        let parsed: serde_norway::Value = serde_norway::from_str(text).unwrap();
        assert!(want <= nesting(&parsed), "{text:?}");
    }
    let shape = yaml_shape("a: &x [1]\nb: *x\nc: [*x, *x]\nd: '*x'\n");
    assert_eq!(
        shape,
        YamlShape {
            flow_depth: 1,
            aliases: 3
        }
    );
    // Deep: counted one past the limit, then given up.
    assert_eq!(depth(&"[".repeat(1_000_000)), NESTING_LIMIT + 1);
}

fn nesting(v: &serde_norway::Value) -> usize {
    use serde_norway::Value as Y;
    match v {
        Y::Sequence(items) => 1 + items.iter().map(nesting).max().unwrap_or(0),
        Y::Mapping(m) => {
            1 + m
                .iter()
                .map(|(k, v)| nesting(k).max(nesting(v)))
                .max()
                .unwrap_or(0)
        }
        Y::Tagged(t) => nesting(&t.value),
        _ => 0,
    }
}

#[test]
fn bundled_cassettes_pass_the_depth_look() {
    let mut found = 0;
    for dir in std::fs::read_dir(testdata("")).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&dir).unwrap() {
            let path = file.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let shape = yaml_shape(&text);
            let parsed: serde_norway::Value = serde_norway::from_str(&text).unwrap();
            assert!(shape.flow_depth <= nesting(&parsed), "{}", path.display());
            assert_eq!(shape.aliases, 0);
            found += 1;
        }
    }
    assert_eq!(found, 15);
}

#[test]
fn deeply_nested_cassettes_are_refused_unparsed() {
    // A million nested flow sequences: the YAML parser's time grows with the square of it.
    let flow = format!("interactions:\n- request: {}\n", "[".repeat(1_000_000));
    let block = format!("interactions:\n- {}x\n", "- ".repeat(300));
    for (text, reason) in [
        (
            flow,
            "the cassette nests lists and objects deeper than 127 levels; it was not parsed",
        ),
        (
            block,
            "the cassette nests lists and objects deeper than 127 levels at line 2 column",
        ),
    ] {
        let sink = read_text(&text);
        assert_eq!(sink.records, 1);
        assert_eq!(sink.quarantined.len(), 1);
        assert_eq!(sink.quarantined[0].locator, Locator::File);
        assert!(
            sink.quarantined[0].reason.starts_with(reason),
            "{}",
            sink.quarantined[0].reason
        );
    }
}

#[test]
fn a_byte_order_mark_changes_nothing() {
    let path = testdata("test_openai/test_openai_native_output.yaml");
    let bytes = std::fs::read(&path).unwrap();
    let plain = read_limited(&bytes, 1 << 30);
    let marked = read_limited(&[&b"\xEF\xBB\xBF"[..], &bytes].concat(), 1 << 30);
    assert!(!plain.conversations.is_empty());
    assert_eq!(marked.records, plain.records);
    assert_eq!(marked.quarantined, plain.quarantined);
    assert_eq!(marked.conversations, plain.conversations);
}

#[test]
fn cassettes_over_the_record_limit_are_not_read() {
    let path = testdata("test_openai/test_openai_native_output.yaml");
    let bytes = std::fs::read(&path).unwrap();
    let sink = read_limited(&bytes, 1024);
    assert_eq!(sink.records, 1);
    assert!(sink.conversations.is_empty());
    assert!(
        sink.quarantined[0]
            .reason
            .contains("over the 1 KiB record limit; a file of this format is read whole"),
        "{}",
        sink.quarantined[0].reason
    );
    // Aliases that repeat a large node past the limit: refused before the value is built.
    let text = String::from_utf8(bytes).unwrap();
    let anchored = text.replacen(
        "interactions:\n",
        &format!(
            "padding: &big '{}'\nrepeats: [{}]\ninteractions:\n",
            "p".repeat(10_000),
            vec!["*big"; 20].join(", ")
        ),
        1,
    );
    let sink = read_limited(anchored.as_bytes(), 64 << 10);
    assert_eq!(sink.records, 1);
    assert!(sink.conversations.is_empty());
    assert_eq!(
        sink.quarantined[0].reason,
        "the cassette's 20 alias(es) expand it past the 64 KiB record limit; it was not read"
    );
    // Under the limit, the same aliases are read.
    let sink = read_limited(anchored.as_bytes(), 1 << 20);
    assert!(!sink.conversations.is_empty(), "{:?}", sink.quarantined);
}

#[test]
fn binary_bodies_decode_by_their_coding_within_the_limit() {
    use flate2::write::{GzEncoder, ZlibEncoder};
    use flate2::Compression;
    use std::io::Write as _;
    let json = br#"{"ok": true}"#;
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(json).unwrap();
    let gz = gz.finish().unwrap();
    let mut zl = ZlibEncoder::new(Vec::new(), Compression::default());
    zl.write_all(json).unwrap();
    let zl = zl.finish().unwrap();
    let limits = Limits::default();
    let side = |b64: String, coding: &str| json!({"headers": {"Content-Encoding": [coding]}, "body": {"string": b64}});
    use base64::Engine as _;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    assert_eq!(
        body_of(&side(b64(&gz), "gzip"), true, &limits),
        Body::Json(json!({"ok": true}))
    );
    assert_eq!(
        body_of(&side(b64(&zl), "deflate"), true, &limits),
        Body::Json(json!({"ok": true}))
    );
    // gzip known by its magic number when the header was filtered out.
    let bare = json!({"body": {"string": b64(&gz)}});
    assert_eq!(
        body_of(&bare, true, &limits),
        Body::Json(json!({"ok": true}))
    );
    // A coding this reader does not decode, and a body past the record limit, say so.
    assert_eq!(
        body_of(&side(b64(&gz), "br"), true, &limits),
        Body::Unreadable("body is br-encoded, a coding this reader does not decode".into())
    );
    let tiny = Limits {
        record_bytes: 4,
        ..Limits::default()
    };
    match body_of(&side(b64(&gz), "gzip"), true, &tiny) {
        Body::Unreadable(why) => assert!(why.contains("decodes past the"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Without `!!binary` in the cassette, a base64-looking text stays text.
    assert_eq!(
        body_of(&side(b64(&gz), "gzip"), false, &limits),
        Body::Text(b64(&gz))
    );
}

#[test]
fn cohere_v1_tool_calls_and_results() {
    // The documented v1 round trip (written by hand): the model asks for a call, the next
    // request sends its result in `tool_results` with an empty `message`.
    let yaml = r#"interactions:
- request:
    body: '{"message": "How many orders shipped late?", "preamble": "Be brief.", "chat_history": [], "tools": [{"name": "query_orders", "parameter_definitions": {"status": {"type": "str"}}}]}'
    uri: https://api.cohere.com/v1/chat
  response:
    body:
      string: '{"text": "", "tool_calls": [{"name": "query_orders", "parameters": {"status": "late"}}], "finish_reason": "COMPLETE"}'
    status: {code: 200}
- request:
    body: '{"message": "", "chat_history": [{"role": "USER", "message": "How many orders shipped late?"}], "tool_results": [{"call": {"name": "query_orders", "parameters": {"status": "late"}}, "outputs": [{"count": 1188}]}]}'
    uri: https://api.cohere.com/v1/chat
  response:
    body:
      string: '{"text": "1188 orders shipped late.", "finish_reason": "COMPLETE"}'
    status: {code: 200}
"#;
    let sink = read_text(yaml);
    assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
    let conv = &sink.conversations[0].0;
    assert_eq!(conv.runs.len(), 1);
    let run = &conv.runs[0];
    let landings: Vec<_> = run.landings().collect();
    assert_eq!(landings.len(), 1);
    assert_eq!(landings[0].tool_name.as_deref(), Some("query_orders"));
    assert_eq!(
        landings[0].arguments.as_deref(),
        Some(r#"{"status":"late"}"#)
    );
    assert_eq!(landings[0].text.as_deref(), Some(r#"[{"count":1188}]"#));
    assert_eq!(run.answer.as_deref(), Some("1188 orders shipped late."));
    assert_eq!(
        run.user_message.as_deref(),
        Some("How many orders shipped late?")
    );
}
