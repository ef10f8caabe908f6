//! What the checks read of a tool result, kept beside its text so that an audit of a store can
//! leave the text of every tool result undecoded (it is most of a store's bytes).
//!
//! - A tool message's evidence digest ([`EvidenceDigest`]): the forms the evidence gate could
//!   ever look up in it, and how many forms its walk offers.
//! - A landing's result fingerprint, for the landings whose run calls the same tool with the
//!   same arguments text again: only a landing that shares its call with another has its
//!   result compared (`repeated-call`).
//!
//! The text of both kinds of row is stored in `result_text`, not `text`; a check that needs it
//! after all declines the digested conversation
//! ([`Pass::check_digested`](crate::passes::Pass::check_digested)) and the conversation is
//! read again with it.
//!
//! Digests are worked out before the store writer, a conversation at a time on the ingest's
//! digest pool ([`fill`]); the writer works out any that are missing ([`evidence_of`]).

use crate::evidence::{digest_result, EvidenceDigest};
use crate::model::{Conversation, Event, EventKind, Role, Run};
use crate::passes::repeated_call::result_fingerprint;
use std::borrow::Cow;
use std::collections::HashMap;

/// Is this event's text a tool result (a landing's, or a tool message's), stored in
/// `result_text`?
pub fn is_result(e: &Event) -> bool {
    e.kind() == EventKind::Landing || is_tool_message(e)
}

/// The landing of `run` whose result text a tool message repeats: the last one before it with
/// its call id and the same text. The store keeps the text once (trajectory formats record
/// each tool result twice: as the landing's result and as the `tool` message).
pub fn landing_with_text_of(run: &Run, e: &Event) -> Option<u32> {
    if !is_tool_message(e) {
        return None;
    }
    let (call_id, text) = (e.call_id.as_ref()?, e.text.as_ref()?);
    run.events
        .iter()
        .rev()
        .find(|l| {
            l.kind() == EventKind::Landing
                && l.seq < e.seq
                && l.call_id.as_ref() == Some(call_id)
                && l.text.as_ref() == Some(text)
        })
        .map(|l| l.seq)
}

/// Does this event carry an evidence digest: is it a tool message of the history?
fn is_tool_message(e: &Event) -> bool {
    e.kind() == EventKind::Message && e.role == Some(Role::Tool)
}

/// The evidence digest of a tool message: the one it carries, or worked out from its text.
/// `None` for any other event.
pub fn evidence_of(e: &Event) -> Option<Cow<'_, EvidenceDigest>> {
    if !is_tool_message(e) {
        return None;
    }
    Some(match &e.evidence {
        Some(d) => Cow::Borrowed(d),
        None => Cow::Owned(digest_result(e.text_or_empty())),
    })
}

/// Give every tool message of the conversation its evidence digest, and every landing that
/// shares its tool and arguments text with another landing of its run its result
/// fingerprint.
pub fn fill(conversation: &mut Conversation) {
    for run in &mut conversation.runs {
        let mut calls: HashMap<(&str, &str), u32> = HashMap::new();
        for e in run.events.iter().filter(|e| e.kind() == EventKind::Landing) {
            *calls.entry(call_of(e)).or_default() += 1;
        }
        let shared: Vec<bool> = run
            .events
            .iter()
            .map(|e| e.kind() == EventKind::Landing && calls[&call_of(e)] > 1)
            .collect();
        for (e, shared) in run.events.iter_mut().zip(shared) {
            if shared && e.result_fingerprint.is_none() {
                e.result_fingerprint = Some(result_fingerprint(e.text_or_empty()));
            }
            if is_tool_message(e) && e.evidence.is_none() {
                e.evidence = Some(digest_result(e.text_or_empty()));
            }
        }
    }
}

/// A landing's tool and arguments text.
fn call_of(e: &Event) -> (&str, &str) {
    (
        e.tool_name.as_deref().unwrap_or(""),
        e.arguments.as_deref().unwrap_or(""),
    )
}
