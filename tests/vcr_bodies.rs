//! VCR bodies as other instrumentation projects record them: gzip-encoded `!!binary` responses
//! (vcrpy's default), and Cohere's v1 chat (`message` + `chat_history`, a JSON-lines stream).

mod common;

use common::*;
use traceaudit::model::{Conversation, EventKind};
use traceaudit::read::read_path;

fn read(rel: &str) -> (Conversation, Vec<String>) {
    let sink = read_path(&testdata(rel), None).unwrap();
    assert_eq!(sink.conversations.len(), 1, "{:?}", sink.quarantined);
    let notes = sink.quarantined.iter().map(|q| q.reason.clone()).collect();
    (sink.conversations[0].0.clone(), notes)
}

/// openllmetry: three recordings of one request, each answered (gzip) with a weather call.
#[test]
fn gzip_responses_are_decoded() {
    let (conv, notes) = read("cassettes-other/openllmetry/test_open_ai_function_calls_tools.yaml");
    assert!(notes.is_empty(), "{notes:?}");
    let calls: Vec<_> = conv
        .runs
        .iter()
        .flat_map(|r| r.landings())
        .map(|l| (l.tool_name.clone().unwrap(), l.arguments.clone().unwrap()))
        .collect();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(calls.iter().all(|(t, _)| t == "get_current_weather"));
    assert!(calls[0].1.contains("\"Boston\""));
    assert!(calls[1].1.contains("\"Boston, MA\""));
}

/// langchain-cohere: Cohere v2 answers, gzip-encoded: a tool call, then the answer.
#[test]
fn gzip_cohere_v2_answers_are_read() {
    let (conv, notes) =
        read("cassettes-other/langchain-cohere/test_langchain_tool_calling_agent.yaml");
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(conv.runs.len(), 1);
    let run = &conv.runs[0];
    let landings: Vec<_> = run.landings().collect();
    assert_eq!(landings.len(), 1);
    assert_eq!(landings[0].tool_name.as_deref(), Some("magic_function"));
    let args: serde_json::Value =
        serde_json::from_str(landings[0].arguments.as_deref().unwrap()).unwrap();
    assert_eq!(args, serde_json::json!({"input": 3}));
    assert_eq!(
        run.answer.as_deref(),
        Some("The value of magic_function(3) is 5.")
    );
}

/// openllmetry: Cohere v1 chat, answered whole and as a stream of JSON lines.
#[test]
fn cohere_v1_chat_is_read() {
    for (file, opening) in [
        ("test_cohere_chat_legacy.yaml", "Arrrr, matey!"),
        ("test_cohere_chat_legacy_with_streaming.yaml", "Arrr"),
    ] {
        let (conv, notes) = read(&format!("cassettes-other/openllmetry/{file}"));
        assert!(notes.is_empty(), "{file}: {notes:?}");
        assert_eq!(conv.runs.len(), 1, "{file}");
        let run = &conv.runs[0];
        assert_eq!(
            run.user_message.as_deref(),
            Some("Tell me a joke, pirate style"),
            "{file}"
        );
        let answer = run.answer.as_deref().unwrap_or("");
        assert!(answer.starts_with(opening), "{file}: {answer:?}");
        assert!(answer.len() > 100, "{file}: {answer:?}");
        let provider = run
            .events_of(EventKind::ModelCall)
            .filter_map(|e| e.payload.as_deref())
            .all(|p| p.contains("\"provider\":\"cohere\""));
        assert!(provider, "{file}");
    }
}
