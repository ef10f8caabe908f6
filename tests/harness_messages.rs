//! User-role messages a harness sends inside the agent's turn (after a tool result, before an
//! answer) are not user turns: real logs of two harnesses, read end to end.

mod common;

use common::*;
use traceaudit::checks::PriorTurnEvidence;
use traceaudit::checks::RepeatedCall;
use traceaudit::checks::{Pass, PassContext};
use traceaudit::model::{Conversation, EventKind, Role};
use traceaudit::read::read_path;

fn only_conversation(path: &std::path::Path) -> Conversation {
    let sink = read_path(path, None).unwrap();
    assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
    assert_eq!(sink.conversations.len(), 1);
    sink.conversations[0].0.clone()
}

/// METR's agent in Inspect writes `[usage] Tokens used so far: N/M.` as a user message after
/// every tool result. The sample is one task: one run holding all eleven landings, so the
/// command it ran twice with the same (empty) output is a repeated call.
#[test]
fn inspect_usage_notices_stay_in_the_turn() {
    let conv = only_conversation(&testdata(
        "inspect-ai/harness/metr-oxdna-usage-notices.json",
    ));
    assert_eq!(conv.runs.len(), 1, "one task, one run");
    let run = &conv.runs[0];
    assert_eq!(run.turn, 1);
    assert!(run
        .user_message
        .as_deref()
        .unwrap()
        .contains("Your task is to run a short simulation"));
    assert!(run.answer.as_deref().unwrap().starts_with("Perfect!"));
    assert_eq!(run.landings().count(), 11);
    assert!(run
        .landings()
        .all(|l| l.tool_name.as_deref() == Some("bash")));
    // The notices stay in the history, as system text.
    let notices: Vec<_> = run
        .events_of(EventKind::Message)
        .filter(|e| e.text_or_empty().starts_with("[usage] Tokens used so far"))
        .collect();
    assert_eq!(notices.len(), 11);
    assert!(notices.iter().all(|e| e.role == Some(Role::System)));

    let ctx = PassContext::default();
    let outcomes = RepeatedCall.check(&conv, &ctx);
    let findings: Vec<_> = outcomes.iter().flat_map(|o| &o.findings).collect();
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].columns.tool_name.as_deref(), Some("bash"));
    assert_eq!(findings[0].columns.occurrences, Some(2));
    // The answer is judged against the turn it belongs to: its values came from this turn's
    // results, not from "earlier turns" opened by the notices.
    let evidence = PriorTurnEvidence.check(&conv, &ctx);
    assert_ne!(
        evidence[0].disposition.as_str(),
        "checked-fail",
        "{}",
        evidence[0].reason
    );
}

/// pydantic-ai sends a file a tool returned as a user message right after the tool result
/// (`This is file bd38f5:` and the image): one question, one run, one landing, one answer.
#[test]
fn vcr_file_from_a_tool_stays_in_the_turn() {
    let conv = only_conversation(&testdata(
        "cassettes/test_openai/test_image_url_tool_response.yaml",
    ));
    assert_eq!(conv.runs.len(), 1);
    let run = &conv.runs[0];
    assert_eq!(
        run.user_message.as_deref(),
        Some("What food is in the image you can get from the get_image tool?")
    );
    let landings: Vec<_> = run.landings().collect();
    assert_eq!(landings.len(), 1);
    assert_eq!(landings[0].tool_name.as_deref(), Some("get_image"));
    assert_eq!(landings[0].text.as_deref(), Some("See file bd38f5"));
    assert_eq!(run.answer.as_deref(), Some("The image shows a potato."));
    // In the history the model saw, the file's caption is system text.
    let caption: Vec<_> = run
        .events_of(EventKind::Context)
        .filter(|e| e.text_or_empty().starts_with("This is file bd38f5:"))
        .collect();
    assert_eq!(caption.len(), 1);
    assert_eq!(caption[0].role, Some(Role::System));
}

/// pydantic-ai announces tools that became available (`<system>The following tool(s) are now
/// available: ...</system>`) as a user message after the tool call that loaded them.
#[test]
fn vcr_tool_announcement_stays_in_the_turn() {
    let conv = only_conversation(&testdata(
        "cassettes/test_tool_search/test_google_deferred_capability_announcement_live.yaml",
    ));
    assert_eq!(conv.runs.len(), 1);
    let run = &conv.runs[0];
    assert!(run
        .user_message
        .as_deref()
        .unwrap()
        .starts_with("First load the refunds capability."));
    let tools: Vec<_> = run
        .landings()
        .map(|l| l.tool_name.clone().unwrap_or_default())
        .collect();
    assert_eq!(tools, ["load_capability", "lookup_refund_policy"]);
    assert_eq!(run.answer.as_deref(), Some("A-4417: refund allowed"));
}
