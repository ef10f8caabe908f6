//! Claude Code transcripts, Codex rollouts and bare message lists on real files: the excerpts in
//! `testdata/`, and (when the shared data set sits beside the checkout) its files. Each file's
//! tool calls are counted independently from the raw lines and compared with the landings read.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use traceaudit::read::{read_head, read_path, Collect, Severity};
use traceaudit::Format;

/// The file's non-blank lines: the JSON objects among them, and how many are not JSON objects
/// (the lines a reader drops).
fn raw_lines(path: &Path) -> (Vec<Value>, usize) {
    let text = String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
    let mut objects = Vec::new();
    let mut others = 0;
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Value>(l) {
            Ok(v @ Value::Object(_)) => objects.push(v),
            _ => others += 1,
        }
    }
    (objects, others)
}

fn lines(path: &Path) -> Vec<Value> {
    raw_lines(path).0
}

/// Distinct `tool_use` ids in the transcript's assistant entries, and how many of them a
/// `tool_result` block answers.
fn claude_calls(path: &Path) -> (usize, usize) {
    let mut calls = BTreeSet::new();
    let mut results = BTreeSet::new();
    for entry in lines(path) {
        if let Some(blocks) = entry["message"]["content"].as_array() {
            for b in blocks {
                if entry["type"] == "assistant" && b["type"] == "tool_use" {
                    calls.insert(b["id"].as_str().unwrap_or("").to_string());
                }
                if entry["type"] == "user" && b["type"] == "tool_result" {
                    results.insert(b["tool_use_id"].as_str().unwrap_or("").to_string());
                }
            }
        }
    }
    (calls.len(), calls.intersection(&results).count())
}

/// Call items of the rollout, in either layout (an envelope's payload or the bare item), each
/// call id once, and how many of them an output item answers.
fn codex_calls(path: &Path) -> (usize, usize) {
    let mut calls = Vec::new();
    let mut seen = BTreeSet::new();
    let mut results = BTreeSet::new();
    for l in lines(path) {
        let item = if l["type"] == "response_item" {
            &l["payload"]
        } else {
            &l
        };
        let id = item["call_id"].as_str().unwrap_or("").to_string();
        match item["type"].as_str() {
            Some("function_call" | "custom_tool_call" | "local_shell_call")
                if seen.insert(id.clone()) =>
            {
                calls.push(id)
            }
            Some("function_call" | "custom_tool_call" | "local_shell_call") => {}
            Some(t) if t.ends_with("_output") => {
                results.insert(id);
            }
            _ => {}
        }
    }
    let answered = calls.iter().filter(|c| results.contains(*c)).count();
    (calls.len(), answered)
}

fn landings(sink: &Collect) -> (usize, usize) {
    let all: Vec<_> = sink
        .conversations
        .iter()
        .flat_map(|(c, _)| c.runs.iter())
        .flat_map(|r| r.landings())
        .collect();
    let answered = all.iter().filter(|l| l.text.is_some()).count();
    (all.len(), answered)
}

fn dropped(sink: &Collect) -> usize {
    sink.quarantined
        .iter()
        .filter(|q| q.severity == Severity::Dropped)
        .count()
}

fn check(path: &Path, format: Format, count: fn(&Path) -> (usize, usize)) -> Collect {
    assert_eq!(
        Format::detect_file(path, &read_head(path).unwrap()),
        Some(format),
        "{}",
        path.display()
    );
    let sink = read_path(path, None).unwrap();
    let (objects, others) = raw_lines(path);
    assert_eq!(
        dropped(&sink),
        others,
        "each line that is not a JSON object, and no other, is dropped: {}: {:?}",
        path.display(),
        sink.quarantined
    );
    assert_eq!(sink.records as usize, objects.len() + others);
    assert_eq!(landings(&sink), count(path), "{}", path.display());
    sink
}

/// The shared data set's files of a format, and those under `$TRACEAUDIT_CODING_SAMPLES/<dir>`
/// (more real files, when given).
fn shared(dir: &str) -> Vec<PathBuf> {
    let mut roots = vec![Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(dir)];
    if let Some(more) = std::env::var_os("TRACEAUDIT_CODING_SAMPLES") {
        roots.push(Path::new(&more).join(dir));
    }
    let mut out = Vec::new();
    for root in roots {
        let Ok(entries) = std::fs::read_dir(&root) else {
            eprintln!("note: {} is absent; testdata only", root.display());
            continue;
        };
        out.extend(
            entries
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "jsonl")),
        );
    }
    out.sort();
    out
}

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path)
}

fn notes(sink: &Collect) -> Vec<&str> {
    sink.quarantined.iter().map(|q| q.reason.as_str()).collect()
}

fn testdata(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(path)
}

#[test]
fn claude_code_transcripts() {
    let path = testdata("claude-code/agentcmd-full-session-two.excerpt.jsonl");
    let sink = check(&path, Format::ClaudeCode, claude_calls);
    assert_eq!(landings(&sink).0, 5);
    let (conversation, _) = &sink.conversations[0];
    assert_eq!(conversation.id, "8a2518dd-ff41-4d5f-83a1-407b03598cc6");
    let run = &conversation.runs[0];
    assert_eq!(run.model.as_deref(), Some("claude-sonnet-4-5-20250929"));
    assert!(run.user_message.is_some() && run.answer.is_some());
    for path in shared("claude-code") {
        let sink = check(&path, Format::ClaudeCode, claude_calls);
        eprintln!(
            "{}: (landings, answered) {:?}",
            path.display(),
            landings(&sink)
        );
    }
}

#[test]
fn codex_rollouts() {
    let path = testdata("codex/rollout-2025-09-24T20-12-23-01997ea4.excerpt.jsonl");
    let sink = check(&path, Format::Codex, codex_calls);
    assert_eq!(landings(&sink).0, 6);
    let (conversation, _) = &sink.conversations[0];
    assert_eq!(conversation.id, "01997ea4-a70d-7da3-8c20-c736db82a7c5");
    // The excerpt's first work has no prompt (left out for size): turn 0, then the second prompt.
    let turns: Vec<u32> = conversation.runs.iter().map(|r| r.turn).collect();
    assert_eq!(turns, [0, 1]);
    assert_eq!(conversation.runs[1].model.as_deref(), Some("gpt-5-codex"));
    assert!(conversation.runs[1].answer.is_some());
    for path in shared("codex") {
        let sink = check(&path, Format::Codex, codex_calls);
        eprintln!(
            "{}: (landings, answered) {:?}",
            path.display(),
            landings(&sink)
        );
    }
}

#[test]
fn older_codex_layout_and_broken_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rollout-2025-05-01T10-00-00-abc.jsonl");
    let text = [
        r#"{"id":"abc","timestamp":"2025-05-01T10:00:00.000Z","instructions":null,"git":null}"#,
        r#"{"record_type":"state"}"#,
        r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>cwd</environment_context>"}]}"#,
        r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"list files"}]}"#,
        r#"{"type":"local_shell_call","call_id":"c1","status":"completed","action":{"type":"exec","command":["ls"]}}"#,
        r#"{"type":"function_call_output","call_id":"c1","output":"{\"output\":\"no such dir\",\"metadata\":{\"exit_code\":1}}"}"#,
        r#"{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\",\"-a\"]}","call_id":"c2"}"#,
        "{not json",
        r#"{"type":"function_call_output","call_id":"c2","output":"a b"}"#,
        r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a and b"}]}"#,
    ]
    .join("\n");
    std::fs::write(&path, text).unwrap();
    assert_eq!(
        Format::detect(&read_head(&path).unwrap()),
        Some(Format::Codex)
    );
    let sink = read_path(&path, None).unwrap();
    assert_eq!(sink.records, 10);
    assert_eq!(dropped(&sink), 1);
    let (conversation, _) = &sink.conversations[0];
    assert_eq!(conversation.id, "abc");
    assert_eq!(conversation.runs.len(), 1);
    let run = &conversation.runs[0];
    assert_eq!(run.user_message.as_deref(), Some("list files"));
    assert_eq!(run.answer.as_deref(), Some("a and b"));
    let l: Vec<_> = run.landings().collect();
    assert_eq!(l.len(), 2);
    assert_eq!(l[0].tool_name.as_deref(), Some("local_shell"));
    assert!(l[0].error && !l[1].error);
}

#[test]
fn bare_message_lists() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let text = r#"[
      {"role": "system", "content": "You are a helpful assistant."},
      {"role": "user", "content": [{"type": "text", "text": "What is in a.txt?"}]},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "t1", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"a.txt\"}"}}]},
      {"role": "tool", "tool_call_id": "t1", "content": "hello"},
      {"role": "assistant", "content": "It says hello."},
      {"role": "user", "content": "And b.txt?"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"id": "t2", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"b.txt\"}"}}]},
      {"role": "tool", "tool_call_id": "t2", "content": "bye"},
      {"role": "critic", "content": "?"},
      {"role": "assistant", "content": "It says bye."}
    ]"#;
    std::fs::write(&path, text).unwrap();
    assert_eq!(
        Format::detect(&read_head(&path).unwrap()),
        Some(Format::MessageList)
    );
    let sink = read_path(&path, None).unwrap();
    assert_eq!(sink.records, 1);
    assert_eq!(dropped(&sink), 0);
    assert_eq!(sink.quarantined.len(), 1, "the unknown role is a note");
    let runs = &sink.conversations[0].0.runs;
    assert_eq!(runs.len(), 2, "each user message starts a run");
    assert_eq!(runs[1].answer.as_deref(), Some("It says bye."));
    assert_eq!(landings(&sink), (2, 2));
    // Lists other formats own are not taken.
    assert_eq!(
        Format::detect(br#"[{"task_id": 1, "traj": [{"role": "user"}]}]"#),
        Some(Format::TauBench)
    );
    assert_eq!(Format::detect(br#"[{"reward": 1.0, "info": {}}]"#), None);
}

#[test]
fn claude_side_chains_run_through_entries_that_are_not_messages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s1.jsonl");
    let entry = |v: Value| v.to_string();
    let base = |uuid: &str, parent: Option<&str>, side: bool| {
        serde_json::json!({
            "parentUuid": parent, "isSidechain": side, "userType": "external",
            "sessionId": "s1", "uuid": uuid, "timestamp": "2025-10-01T10:00:00.000Z"
        })
    };
    let with = |mut v: Value, kind: &str, message: Value| {
        v["type"] = Value::from(kind);
        v["message"] = message;
        v
    };
    let user = |text: &str| serde_json::json!({"role": "user", "content": text});
    let text = [
        entry(with(base("u1", None, false), "user", user("look at the repo"))),
        entry(with(
            base("a1", Some("u1"), false),
            "assistant",
            serde_json::json!({"id": "m1", "role": "assistant", "model": "claude-x", "content": [
                {"type": "tool_use", "id": "task1", "name": "Task", "input": {"prompt": "count files"}}
            ]}),
        )),
        // The sub-agent's side chain: its prompt, a system entry, then its call and result.
        entry(with(base("s-u1", None, true), "user", user("count files"))),
        entry({
            let mut v = base("s-sys", Some("s-u1"), true);
            v["type"] = Value::from("system");
            v["content"] = Value::from("a hook ran");
            v
        }),
        entry(with(
            base("s-a1", Some("s-sys"), true),
            "assistant",
            serde_json::json!({"id": "m2", "role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls | wc -l"}},
                {"type": "hologram", "data": "?"}
            ]}),
        )),
        entry(with(
            base("s-u2", Some("s-a1"), true),
            "user",
            serde_json::json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "3"}
            ]}),
        )),
        entry(with(
            base("s-a2", Some("s-u2"), true),
            "assistant",
            serde_json::json!({"id": "m3", "role": "assistant", "content": [
                {"type": "text", "text": "3 files"}
            ]}),
        )),
        entry(with(
            base("u2", Some("a1"), false),
            "user",
            serde_json::json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "task1", "content": "3 files"}
            ]}),
        )),
        entry(with(
            base("a2", Some("u2"), false),
            "assistant",
            serde_json::json!({"id": "m4", "role": "assistant", "content": [
                {"type": "text", "text": "The repo has 3 files."}
            ]}),
        )),
    ]
    .join("\n");
    std::fs::write(&path, text).unwrap();
    let sink = check(&path, Format::ClaudeCode, claude_calls);
    let ids: Vec<&str> = sink
        .conversations
        .iter()
        .map(|(c, _)| c.id.as_str())
        .collect();
    assert_eq!(ids, ["s1", "s1/sidechain-1"], "one side chain, not two");
    let side = &sink.conversations[1].0.runs;
    assert_eq!(side.len(), 1);
    assert_eq!(side[0].user_message.as_deref(), Some("count files"));
    assert_eq!(side[0].answer.as_deref(), Some("3 files"));
    assert_eq!(side[0].landings().count(), 1);
    let notes: Vec<&str> = sink.quarantined.iter().map(|q| q.reason.as_str()).collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("\"hologram\""), "{notes:?}");
}

#[test]
fn older_codex_layout_with_long_instructions_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rollout-2025-05-01T10-00-00-long.jsonl");
    let meta = serde_json::json!({
        "id": "long",
        "timestamp": "2025-05-01T10:00:00.000Z",
        "instructions": "Follow the project rules.\n".repeat(4_000),
    });
    let text = [
        meta.to_string(),
        r#"{"record_type":"state"}"#.to_string(),
        r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"list files"}]}"#.to_string(),
        r#"{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"c1"}"#.to_string(),
        r#"{"type":"function_call_output","call_id":"c1","output":"a b"}"#.to_string(),
        r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a and b"}]}"#.to_string(),
    ]
    .join("\n");
    std::fs::write(&path, text).unwrap();
    let head = read_head(&path).unwrap();
    assert_eq!(
        Format::detect(&head),
        None,
        "the head holds the first line only"
    );
    assert_eq!(Format::detect_file(&path, &head), Some(Format::Codex));
    let sink = read_path(&path, None).unwrap();
    assert_eq!(dropped(&sink), 0);
    assert_eq!(landings(&sink), (1, 1));
}

/// Assistant replies holding exactly one fenced command block, and how many a user message
/// answers (the next message is the user's): mini-swe-agent's own rule, counted on the raw list.
fn fenced_calls(path: &Path) -> (usize, usize) {
    let list: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut calls = 0;
    let mut answered = 0;
    for (i, m) in list.iter().enumerate() {
        let text = m["content"].as_str().unwrap_or("");
        let blocks =
            text.matches("```bash\n").count() + text.matches("```mswea_bash_command\n").count();
        if m["role"] == "assistant" && blocks == 1 {
            calls += 1;
            if list.get(i + 1).is_some_and(|n| n["role"] == "user") {
                answered += 1;
            }
        }
    }
    (calls, answered)
}

#[test]
fn bare_message_lists_as_early_mini_swe_agent_saved_them() {
    let path = testdata("message-list/github_issue.traj.json");
    assert_eq!(
        Format::detect_file(&path, &read_head(&path).unwrap()),
        Some(Format::MessageList)
    );
    let sink = read_path(&path, None).unwrap();
    assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
    assert_eq!(sink.records, 1);
    assert_eq!(landings(&sink), fenced_calls(&path));
    assert_eq!(landings(&sink), (10, 10));
    let runs = &sink.conversations[0].0.runs;
    assert_eq!(runs.len(), 1, "the observations are no new prompts");
    assert_eq!(runs[0].format, "message-list");
    let first = runs[0].landings().next().unwrap();
    assert_eq!(first.tool_name.as_deref(), Some("cat"));
    assert!(first
        .text_or_empty()
        .starts_with("<returncode>1</returncode>"));
}

#[test]
fn codex_rollouts_of_claude_code_log() {
    // Content items as a custom tool's output; an envelope entry of an unknown type.
    let sink = check(
        &fixture("codex/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl"),
        Format::Codex,
        codex_calls,
    );
    assert_eq!(landings(&sink), (3, 3));
    let run = &sink.conversations[0].0.runs[0];
    assert_eq!(
        run.user_message.as_deref(),
        Some("List the synthetic files.")
    );
    let patch = run.landings().nth(1).unwrap();
    assert_eq!(patch.tool_name.as_deref(), Some("apply_patch"));
    assert_eq!(patch.text_or_empty(), "Done!");
    assert_eq!(
        notes(&sink),
        ["entries of the unknown type \"future_synthetic_record\" are not read; left out"]
    );

    // The older layout, its session meta without `instructions`.
    let path = fixture("codex/rollout-44444444-4444-4444-8444-444444444444.jsonl");
    let sink = check(&path, Format::Codex, codex_calls);
    let run = &sink.conversations[0].0.runs[0];
    assert_eq!(
        sink.conversations[0].0.id,
        "44444444-4444-4444-8444-444444444444"
    );
    assert_eq!(
        run.answer.as_deref(),
        Some("The synthetic legacy session is open.")
    );

    // A prompt held only as an event; then the same with a line that is not JSON.
    for (name, prompt) in [
        (
            "codex/rollout-55555555-5555-4555-8555-555555555555.jsonl",
            "Archived synthetic prompt.",
        ),
        (
            "codex/rollout-66666666-6666-4666-8666-666666666666.jsonl",
            "Safe line before malformed input.",
        ),
    ] {
        let sink = check(&fixture(name), Format::Codex, codex_calls);
        let runs = &sink.conversations[0].0.runs;
        assert_eq!(runs.len(), 1, "{name}");
        assert_eq!(runs[0].user_message.as_deref(), Some(prompt));
    }
}

#[test]
fn codex_record_shapes_of_agent_sessions() {
    let sink = check(
        &fixture("codex/agent-sessions-small.excerpt.jsonl"),
        Format::Codex,
        codex_calls,
    );
    assert!(sink.quarantined.is_empty(), "{:?}", notes(&sink));
    let run = &sink.conversations[0].0.runs[0];
    assert_eq!(run.user_message.as_deref(), Some("List the files"));
    assert_eq!(run.answer.as_deref(), Some("Found 2 files."));
    // The outputs: a list of content items, and one content item.
    let texts: Vec<&str> = run.landings().map(|l| l.text_or_empty()).collect();
    assert_eq!(texts, ["a.txt\nb.txt\n", "a.txt\n"]);
}

#[test]
fn codex_calls_seen_twice_and_rollouts_without_messages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rollout-2026-01-01T00-00-00-dup.jsonl");
    let item = |v: Value| {
        serde_json::json!({"timestamp": "2026-01-01T00:00:00.000Z", "type": "response_item", "payload": v})
            .to_string()
    };
    let text = [
        r#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"dup"}}"#
            .to_string(),
        item(serde_json::json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]})),
        item(serde_json::json!({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"})),
        item(serde_json::json!({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"})),
        item(serde_json::json!({"type": "function_call_output", "call_id": "c1", "output": "ok"})),
        item(serde_json::json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]})),
    ]
    .join("\n");
    std::fs::write(&path, text).unwrap();
    let sink = check(&path, Format::Codex, codex_calls);
    assert_eq!(landings(&sink), (1, 1));
    assert!(sink.quarantined.is_empty(), "{:?}", notes(&sink));

    // Token counts only, and no session meta line: still a rollout, with a note that it holds
    // nothing to read.
    let path = dir.path().join("rollout-2026-01-01T00-00-00-tokens.jsonl");
    let text = [
        r#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"turn_context","payload":{"model":"gpt-5"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:01.000Z","type":"event_msg","payload":{"type":"token_count","info":null}}"#,
    ]
    .join("\n");
    std::fs::write(&path, text).unwrap();
    let sink = check(&path, Format::Codex, codex_calls);
    assert!(sink.conversations.is_empty());
    assert_eq!(notes(&sink).len(), 1);
    assert!(notes(&sink)[0].contains("no message"), "{:?}", notes(&sink));
}

#[test]
fn claude_slash_command_prompts() {
    let sink = check(
        &fixture("claude-code/claude-code-viewer-init.excerpt.jsonl"),
        Format::ClaudeCode,
        claude_calls,
    );
    assert_eq!(landings(&sink), (6, 6));
    let runs = &sink.conversations[0].0.runs;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].turn, 1);
    assert_eq!(runs[0].user_message.as_deref(), Some("/init"));

    // A command the model answers is a prompt, with its arguments; a local command (its output
    // follows) is not, nor is a compaction summary.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s2.jsonl");
    let entry = |uuid: &str, kind: &str, extra: Value, message: Value| {
        let mut v = serde_json::json!({
            "parentUuid": null, "isSidechain": false, "sessionId": "s2", "uuid": uuid,
            "type": kind, "timestamp": "2025-10-01T10:00:00.000Z", "message": message
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v.to_string()
    };
    let user = |text: &str| serde_json::json!({"role": "user", "content": text});
    let reply = |id: &str, text: &str| serde_json::json!({"id": id, "role": "assistant", "content": [{"type": "text", "text": text}]});
    let none = serde_json::json!({});
    let meta = serde_json::json!({"isMeta": true});
    let text = [
        entry("u1", "user", none.clone(), user("<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>")),
        entry("u2", "user", none.clone(), user("<local-command-stdout></local-command-stdout>")),
        entry("u3", "user", none.clone(), user("<command-message>review is running…</command-message>\n<command-name>/review</command-name>\n<command-args>src/lib.rs</command-args>")),
        entry("u4", "user", meta, user("Review the file named in the arguments.")),
        entry("a1", "assistant", none.clone(), reply("m1", "It looks fine.")),
        entry("u5", "user", serde_json::json!({"isCompactSummary": true}), user("Summary of the conversation so far.")),
        entry("u6", "user", none.clone(), user("<command-name>/cost</command-name>")),
        entry("a2", "assistant", none, reply("m2", "Nothing was spent.")),
    ]
    .join("\n");
    std::fs::write(&path, text).unwrap();
    let sink = check(&path, Format::ClaudeCode, claude_calls);
    let prompts: Vec<Option<&str>> = sink.conversations[0]
        .0
        .runs
        .iter()
        .map(|r| r.user_message.as_deref())
        .collect();
    assert_eq!(prompts, [Some("/review src/lib.rs"), Some("/cost")]);

    let sink = check(
        &fixture("claude-code/inspect-scout-compaction_session.jsonl"),
        Format::ClaudeCode,
        claude_calls,
    );
    let prompts: Vec<Option<&str>> = sink.conversations[0]
        .0
        .runs
        .iter()
        .map(|r| r.user_message.as_deref())
        .collect();
    assert_eq!(
        prompts,
        [
            Some("Start a long conversation"),
            Some("Continue where we left off")
        ]
    );
}

#[test]
fn claude_record_shapes_of_agent_sessions() {
    let sink = check(
        &fixture("claude-code/agent-sessions-small.excerpt.jsonl"),
        Format::ClaudeCode,
        claude_calls,
    );
    // Every entry type is known; the messages sharing one trimmed uuid are each read.
    let found = notes(&sink);
    assert!(
        found.iter().all(|n| !n.contains("unknown type")),
        "{found:?}"
    );
    assert_eq!(landings(&sink).0, 3);

    // Entries without parentUuid, and entry types no Claude Code writes: read, with notes.
    let sink = check(
        &fixture("claude-code/agent-sessions-schema_drift.jsonl"),
        Format::ClaudeCode,
        claude_calls,
    );
    let runs = &sink.conversations[0].0.runs;
    assert_eq!(runs[0].user_message.as_deref(), Some("Open README"));
    assert_eq!(
        notes(&sink),
        [
            "entries of the unknown type \"tool_use\" are not messages; left out",
            "entries of the unknown type \"tool_result\" are not messages; left out"
        ]
    );
}

#[test]
fn qwen_code_transcripts_are_not_claude_code() {
    // Qwen Code's transcripts carry Claude Code's links, with Gemini `parts` for content.
    let user = r#"{"uuid":"q1","parentUuid":null,"sessionId":"s","timestamp":"2026-01-01T00:00:00.000Z","type":"user","cwd":"/w","version":"0.21.0","message":{"role":"user","parts":[{"text":"hi"}]}}"#;
    let system = r#"{"uuid":"q2","parentUuid":"q1","sessionId":"s","timestamp":"2026-01-01T00:00:00.000Z","type":"system","subtype":"ui_telemetry","systemPayload":{"uiEvent":{}}}"#;
    for head in [user, system] {
        assert_ne!(
            Format::detect(head.as_bytes()),
            Some(Format::ClaudeCode),
            "{head}"
        );
    }
    // Claude Code's own first lines: a message entry, and entries that are not messages.
    for head in [
        r#"{"parentUuid":null,"isSidechain":false,"sessionId":"s","type":"user","message":{"role":"user","content":"hi"},"uuid":"u1"}"#,
        r#"{"type":"queue-operation","operation":"dequeue","timestamp":"2026-01-01T00:00:00.000Z","sessionId":"s"}"#,
        r#"{"type":"permission-mode","permissionMode":"default","sessionId":"s"}"#,
        r#"{"type":"summary","summary":"A title","leafUuid":"u9"}"#,
    ] {
        assert_eq!(
            Format::detect(head.as_bytes()),
            Some(Format::ClaudeCode),
            "{head}"
        );
    }
}

#[test]
fn claude_sub_agent_files_keep_their_own_ids() {
    // The session and its sub-agent's own file, both under the session's id: the sub-agent's
    // chain and the session's own side chain are distinct conversations.
    let dir = tempfile::tempdir().unwrap();
    let entry = |uuid: &str, parent: Option<&str>, side: bool, kind: &str, extra: Value| {
        let mut v = serde_json::json!({
            "parentUuid": parent, "isSidechain": side, "sessionId": "s3", "uuid": uuid,
            "type": kind, "timestamp": "2025-10-01T10:00:00.000Z"
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v.to_string()
    };
    let user = |text: &str| serde_json::json!({"message": {"role": "user", "content": text}});
    let reply = |id: &str, text: &str| serde_json::json!({"message": {"id": id, "role": "assistant", "content": [{"type": "text", "text": text}]}});
    let session = dir.path().join("s3.jsonl");
    let text = [
        entry("u1", None, false, "user", user("survey the repo")),
        entry(
            "a1",
            Some("u1"),
            false,
            "assistant",
            reply("m1", "Surveying."),
        ),
        entry("s1", None, true, "user", user("list the modules")),
        entry(
            "s2",
            Some("s1"),
            true,
            "assistant",
            reply("m2", "api, core"),
        ),
    ]
    .join("\n");
    std::fs::write(&session, text).unwrap();
    let subagents = dir.path().join("s3/subagents");
    std::fs::create_dir_all(&subagents).unwrap();
    let with_agent = |mut v: Value, agent: Option<&str>| {
        if let Some(agent) = agent {
            v["agentId"] = Value::from(agent);
        }
        v
    };
    for (file, agent) in [("agent-x1.jsonl", Some("x1")), ("agent-x2.jsonl", None)] {
        let text = [
            entry(
                "g1",
                None,
                true,
                "user",
                with_agent(user("count files"), agent),
            ),
            entry(
                "g2",
                Some("g1"),
                true,
                "assistant",
                with_agent(reply("m3", "3 files"), agent),
            ),
        ]
        .join("\n");
        std::fs::write(subagents.join(file), text).unwrap();
    }
    let mut ids = Vec::new();
    for path in [
        session,
        subagents.join("agent-x1.jsonl"),
        subagents.join("agent-x2.jsonl"),
    ] {
        let sink = check(&path, Format::ClaudeCode, claude_calls);
        ids.extend(sink.conversations.iter().map(|(c, _)| c.id.clone()));
    }
    assert_eq!(
        ids,
        ["s3", "s3/sidechain-1", "s3/agent-x1", "s3/agent-x2"],
        "each chain its own conversation"
    );
}
