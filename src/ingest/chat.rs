//! Chat messages as the tau adapters record them: OpenAI chat-completions messages (tau-bench's
//! `traj`) and tau2's close cousin (its simulations' `messages`). A message is read with only the
//! keys either format uses ([`RawMessage`]) and mapped onto the builder's [`ChatMessage`].
//!
//! Assistant tool calls nest `name` and `arguments` under `function` (OpenAI) or keep them on
//! the call (tau2); tool messages name the call they answer with `tool_call_id` (OpenAI) or `id`
//! (tau2).

use crate::error::Error;
use serde::de::MapAccess;
use serde_json::Value;

use crate::ingest::json_pick::{kind_of, non_empty_str, scalar_text, skip, Pick, Shape};
use crate::ingest::trajectory::{self, ChatMessage, ChatToolCall};
use crate::model::Role;

/// One recorded chat message, reduced to the keys either tau format uses.
#[derive(Default)]
pub(crate) struct RawMessage {
    role: Option<Value>,
    content: Option<Value>,
    tool_calls: Option<Value>,
    /// tau-bench (OpenAI) tool messages: the call answered.
    tool_call_id: Option<Value>,
    /// tau2 tool messages: the call answered.
    id: Option<Value>,
    name: Option<Value>,
    /// tau2: who asked for the call a tool message answers (`assistant` or `user`).
    requestor: Option<Value>,
    error: Option<Value>,
    timestamp: Option<Value>,
}

impl Pick for RawMessage {
    fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        let slot = match key {
            "role" => &mut self.role,
            "content" => &mut self.content,
            "tool_calls" => &mut self.tool_calls,
            "tool_call_id" => &mut self.tool_call_id,
            "id" => &mut self.id,
            "name" => &mut self.name,
            "requestor" => &mut self.requestor,
            "error" => &mut self.error,
            "timestamp" => &mut self.timestamp,
            _ => return skip(map),
        };
        *slot = Some(map.next_value()?);
        Ok(())
    }
}

/// Map a recorded message list. `Err` names the first message that makes the record unusable.
pub(crate) fn chat_messages(
    list: Vec<Shape<RawMessage>>,
) -> crate::error::Result<Vec<ChatMessage>> {
    list.into_iter()
        .enumerate()
        .map(|(k, raw)| {
            raw.map_err(|what| Error::Malformed(format!("message {k} is {what}, not an object")))
                .and_then(chat_message)
                .map_err(|e| Error::Malformed(format!("message {k}: {e}")))
        })
        .collect()
}

/// Map one recorded message (either tau format) onto the builder's message.
fn chat_message(raw: RawMessage) -> crate::error::Result<ChatMessage> {
    let role = match &raw.role {
        Some(Value::String(s)) => {
            Role::parse(s).ok_or_else(|| Error::Malformed(format!("unknown role {s:?}")))?
        }
        None | Some(Value::Null) => return Err(Error::Malformed("no role".to_string())),
        Some(other) => return Err(Error::Malformed(format!("role is {}", kind_of(other)))),
    };
    let mut message = ChatMessage::new(role, content_text(raw.content));
    message.tool_calls = tool_calls(raw.tool_calls)?;
    if role == Role::Tool {
        message.call_id = raw
            .tool_call_id
            .as_ref()
            .and_then(scalar_text)
            .or_else(|| raw.id.as_ref().and_then(scalar_text));
        message.tool_name = raw.name.as_ref().and_then(non_empty_str);
        // tau2 files the simulated user's own calls (telecom) as tool messages it requested.
        message.by_user_device = matches!(&raw.requestor, Some(Value::String(r)) if r == "user");
    }
    message.error = matches!(raw.error, Some(Value::Bool(true)));
    message.timestamp_ms = match &raw.timestamp {
        Some(Value::String(s)) => trajectory::parse_iso_ms(s),
        _ => None,
    };
    Ok(message)
}

/// A message's text. Missing or null content is empty; a list of content parts is joined (the
/// `text` of every part that has one, one per line); any other value is kept as its JSON text.
/// (Not [`json_pick::content_text`](crate::ingest::json_pick::content_text), which keeps only
/// parts typed `text` and drops other values: the tau adapters have always read content this
/// way.)
fn content_text(content: Option<Value>) -> String {
    match content {
        Some(Value::String(s)) => s,
        other => joined_text(other.as_ref()),
    }
}

/// A content value's text under the rules above: empty when missing or null, a string as it is,
/// a list of parts joined (the `text` of every part that has one, one per line), any other value
/// as its JSON text.
pub(crate) fn joined_text(content: Option<&Value>) -> String {
    match content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| match part {
                Value::String(s) => Some(s.as_str()),
                Value::Object(o) => o.get("text").and_then(Value::as_str),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => other.to_string(),
    }
}

/// A message's tool calls: null or missing is none, otherwise a list of calls.
fn tool_calls(value: Option<Value>) -> crate::error::Result<Vec<ChatToolCall>> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(list)) => list
            .into_iter()
            .enumerate()
            .map(|(k, call)| {
                tool_call(call).map_err(|e| Error::Malformed(format!("tool call {k} {e}")))
            })
            .collect(),
        Some(other) => Err(Error::Malformed(format!(
            "tool_calls is {}, not a list",
            kind_of(&other)
        ))),
    }
}

/// One tool call. OpenAI nests `name` and `arguments` under `function`; tau2 keeps them on the
/// call itself. Arguments recorded as a string are kept verbatim (valid JSON or not: the checks
/// judge them); arguments recorded as JSON values become their JSON text, key order kept; missing
/// arguments are an empty object.
fn tool_call(call: Value) -> crate::error::Result<ChatToolCall> {
    let Value::Object(mut call) = call else {
        return Err(Error::Malformed(format!(
            "is {}, not an object",
            kind_of(&call)
        )));
    };
    let (name, arguments) = match call.remove("function") {
        Some(Value::Object(mut function)) => {
            (function.remove("name"), function.remove("arguments"))
        }
        _ => (call.remove("name"), call.remove("arguments")),
    };
    let name = match name {
        Some(Value::String(s)) => s,
        _ => return Err(Error::Malformed("has no name".to_string())),
    };
    let arguments = match arguments {
        Some(Value::String(s)) => s,
        None | Some(Value::Null) => "{}".to_string(),
        Some(other) => other.to_string(),
    };
    Ok(ChatToolCall {
        id: call.get("id").and_then(scalar_text),
        name,
        arguments,
    })
}
