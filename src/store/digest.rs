//! Where the store keeps tool results: their text in `result_text` (not `text`), once per run
//! when a tool message repeats its landing's, and beside it the digests the checks read
//! instead ([`crate::model::digest`]), so that an audit can leave the text undecoded. The text
//! of the other messages is kept apart in `message_text` for the same reason.

use crate::model::{Event, EventKind, Role, Run};

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

/// Is this event's text a message's other than a tool result (a person's, the system's or
/// the assistant's), stored in `message_text`? The checks read such text from digests, and
/// audits leave the column undecoded until one needs it.
pub fn is_message_text(e: &Event) -> bool {
    e.kind() == EventKind::Message && e.role != Some(Role::Tool)
}

/// Is this event a tool message of the history?
fn is_tool_message(e: &Event) -> bool {
    e.kind() == EventKind::Message && e.role == Some(Role::Tool)
}
