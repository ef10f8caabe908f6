//! The evidence tokenizer and normaliser, and the index built from them. The first byte picks a
//! form budget and the digits a number needs; the rest, as text, is NUL-separated parts: the
//! answer, then history messages whose first character is the role (`u` user, `s` system, `a`
//! assistant, anything else a tool result).
//!
//! Checked: every token is non-empty, made of token characters, and its own normal form; a
//! watching index, whether it reads messages from their text or from their digests, answers
//! every lookup as the full index does until it says it overflowed; an answer's values from its
//! digest, where it stands for the text, are the values of its text; and the direct walk of a
//! JSON result indexes what the reference walk over the parsed value indexes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use traceaudit::evidence::assert_direct_walk_as_reference;
use traceaudit::evidence::{
    answer_values, answer_values_from_digest, build_index, build_watching_index, digest_result,
    digest_text, is_framework_frame, normalize_token, read_answer, tokenize, EvidenceConfig,
    EvidenceIndex,
};
use traceaudit::model::{HistoryMessage, Role};

const BUDGETS: [usize; 8] = [1, 2, 3, 5, 8, 16, 64, 200_000];

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b':' | b'_' | b'-' | b'/' | b'.' | b',' | b'%' | b'+' | b'@' | b'#' | b'$'
        )
}

/// Panic unless `index` answers every lookup of `values`, and reads `answer`, as `full` does.
fn same_answers(
    what: &str,
    index: &EvidenceIndex,
    full: &EvidenceIndex,
    values: &[String],
    answer: &str,
    cfg: &traceaudit::evidence::CompiledEvidence,
) {
    assert!(
        !full.truncated(),
        "{what}: fits, but the full index ran out"
    );
    assert_eq!(index.current_turn(), full.current_turn(), "{what}");
    assert_eq!(
        index.tool_results_this_turn(),
        full.tool_results_this_turn(),
        "{what}"
    );
    for v in values {
        assert_eq!(index.lookup(v), full.lookup(v), "{what}: lookup {v:?}");
        assert_eq!(
            index.is_exempt(v),
            full.is_exempt(v),
            "{what}: exempt {v:?}"
        );
    }
    assert_eq!(
        read_answer(answer, index, cfg),
        read_answer(answer, full, cfg),
        "{what}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&settings, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let cfg = EvidenceConfig {
        max_forms: BUDGETS[settings as usize % BUDGETS.len()],
        min_digits: 1 + (settings as usize / BUDGETS.len()) % 4,
        ..EvidenceConfig::default()
    }
    .compile()
    .expect("a valid configuration");

    let mut parts = text.split('\0');
    let answer = parts.next().unwrap_or("");
    let history: Vec<HistoryMessage<'_>> = parts
        .map(|part| {
            let mut chars = part.chars();
            let role = match chars.next() {
                Some('u') => Role::User,
                Some('s') => Role::System,
                Some('a') => Role::Assistant,
                _ => Role::Tool,
            };
            HistoryMessage {
                role,
                text: chars.as_str(),
                tool_name: None,
                call_id: None,
            }
        })
        .collect();

    for part in std::iter::once(answer).chain(history.iter().map(|m| m.text)) {
        for token in tokenize(part) {
            assert!(!token.is_empty());
            assert!(token.bytes().all(is_token_byte), "token {token:?}");
            assert_eq!(normalize_token(&token), token, "not its own normal form");
        }
    }

    let results: Vec<&str> = history
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text)
        .collect();
    assert_direct_walk_as_reference(cfg.max_forms, &results);

    let candidates = answer_values(answer, &cfg);
    if let Some(from_digest) = answer_values_from_digest(&digest_text(answer), &cfg) {
        assert_eq!(from_digest, candidates, "answer values from the digest");
    }
    let values: Vec<String> = candidates.into_iter().map(|c| c.value).collect();
    let full = build_index(&history, &[], &cfg);
    let watching = build_watching_index(&history, &[], &cfg, values.iter().map(String::as_str));
    if !watching.overflowed() {
        same_answers("watching", &watching, &full, &values, answer, &cfg);
    }
    let mut digested = EvidenceIndex::watching(&cfg, values.iter().map(String::as_str));
    for msg in &history {
        let digest = match msg.role {
            Role::Tool => Some(digest_result(msg.text)),
            Role::User | Role::System if !is_framework_frame(msg.text) => {
                Some(digest_text(msg.text))
            }
            _ => None,
        };
        if digest.is_some_and(|d| digested.push_digest(msg.role, &d)) {
            continue;
        }
        digested.push(msg);
    }
    if !digested.overflowed() {
        same_answers("digested", &digested, &full, &values, answer, &cfg);
    }
});
