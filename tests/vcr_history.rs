//! The VCR history rebuild on real cassettes: each real tool call lands once, in the turn it
//! happened, however the history is re-sent (in another provider's shape, or the same request
//! again after a failure).

mod common;

use common::*;
use traceaudit::model::{Conversation, EventKind};
use traceaudit::read::read_path;

fn only_conversation(rel: &str) -> Conversation {
    let sink = read_path(&testdata(rel), None).unwrap();
    assert_eq!(sink.conversations.len(), 1, "{:?}", sink.quarantined);
    sink.conversations[0].0.clone()
}

/// (turn, user message, [(tool, arguments)], answer) per run.
type Shape = Vec<(u32, String, Vec<(String, String)>, String)>;

fn shape(conv: &Conversation) -> Shape {
    conv.runs
        .iter()
        .map(|r| {
            (
                r.turn,
                r.user_message.clone().unwrap_or_default(),
                r.landings()
                    .map(|l| {
                        (
                            l.tool_name.clone().unwrap_or_default(),
                            l.arguments.clone().unwrap_or_default(),
                        )
                    })
                    .collect(),
                r.answer.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn calls(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(t, a)| (t.to_string(), a.to_string()))
        .collect()
}

/// Gemini answers the first question (loading a capability, then the tool it announced); the
/// second question goes to Anthropic, which gets the whole history again in its own shape (the
/// announcement rewritten as a `search_tools` call the model never made). Three real calls:
/// two in turn 1, one in turn 2.
#[test]
fn history_resent_to_another_provider_lands_each_call_once() {
    let conv = only_conversation(
        "cassettes/test_tool_search/test_cross_provider_capability_replay[google-gemini-3-flash-preview-anthropic-claude-sonnet-4-5].yaml",
    );
    let runs = shape(&conv);
    assert_eq!(runs.len(), 2, "{runs:#?}");
    assert_eq!(runs[0].0, 1);
    assert_eq!(runs[0].1, "Can I get a refund on order-123?");
    assert_eq!(
        runs[0].2,
        calls(&[
            ("load_capability", r#"{"id":"refunds"}"#),
            ("lookup_refund_policy", r#"{"order_id":"order-123"}"#),
        ])
    );
    assert!(runs[0]
        .3
        .starts_with("Yes, a refund is allowed for order-123"));
    assert_eq!(runs[1].0, 2);
    assert_eq!(runs[1].1, "And what about order-456?");
    assert_eq!(
        runs[1].2,
        calls(&[("lookup_refund_policy", r#"{"order_id":"order-456"}"#)])
    );
    assert!(runs[1].3.contains("order-456"));
    // Turn 2's model calls are Anthropic's two; the history they were sent with is its context.
    let model_calls = conv.runs[1].events_of(EventKind::ModelCall).count();
    assert_eq!(model_calls, 2);
}

/// Anthropic, then OpenAI Responses, then Anthropic again, one question each: every switch
/// re-sends the conversation in the new provider's shape.
#[test]
fn provider_handoffs_land_each_call_in_its_turn() {
    let conv = only_conversation(
        "cassettes/test_tool_search/test_live_tool_search_handoff_anthropic_openai_anthropic.yaml",
    );
    let runs = shape(&conv);
    let summary: Vec<_> = runs
        .iter()
        .map(|(turn, _, landings, _)| (*turn, landings.clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, calls(&[("get_exchange_rate", r#"{"pair":"USD/EUR"}"#)])),
            (2, calls(&[("get_exchange_rate", r#"{"pair":"GBP/USD"}"#)])),
            (3, calls(&[("get_exchange_rate", r#"{"pair":"CAD/USD"}"#)])),
        ],
        "{runs:#?}"
    );
    assert_eq!(
        runs[2].1,
        "Now call get_exchange_rate for CAD/USD without searching again."
    );
}

/// The same request sent three times, each refused with HTTP 429: one question, retried.
#[test]
fn a_request_retried_after_a_failure_is_the_same_run() {
    let sink = read_path(
        &testdata("cassettes/test_openrouter/test_openrouter_errors_raised.yaml"),
        None,
    )
    .unwrap();
    assert_eq!(sink.records, 3);
    let conv = &sink.conversations[0].0;
    assert_eq!(conv.runs.len(), 1);
    let run = &conv.runs[0];
    assert_eq!(run.user_message.as_deref(), Some("Tell me a joke."));
    let failed: Vec<_> = run
        .events_of(EventKind::ModelCall)
        .map(|e| e.error)
        .collect();
    assert_eq!(failed, [true, true, true]);
    assert_eq!(run.answer, None);
}

/// The whole conversation sent again, word for word, after it was answered (the test compares
/// the two requests' bytes): a new model call whose history holds nothing new, so the weather
/// call of turn 1 is not landed again.
#[test]
fn an_identical_request_after_an_answer_lands_nothing_again() {
    let conv = only_conversation(
        "cassettes/test_cache_prefix_stability/test_openai_tool_call_roundtrip_wire_stable[ag_ui].yaml",
    );
    let runs = shape(&conv);
    let summary: Vec<_> = runs
        .iter()
        .map(|(turn, user, landings, answer)| {
            (*turn, user.as_str(), landings.len(), answer.as_str())
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                1,
                "What is the weather in Paris? Use the tool.",
                1,
                "The weather in Paris is currently sunny."
            ),
            (2, "Reply with exactly: OK", 0, "OK"),
            (3, "Reply with exactly: OK", 0, "OK"),
        ],
        "{runs:#?}"
    );
    // The repeated call saw the whole history: its context holds the weather result.
    assert!(conv.runs[2]
        .events_of(EventKind::Context)
        .any(|e| e.text_or_empty() == "sunny in Paris"));
}
