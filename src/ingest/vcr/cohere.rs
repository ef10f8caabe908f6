//! Cohere chat, both versions.
//!
//! v2: requests in the OpenAI chat shape, the answer under `message` in the response.
//!
//! v1: the turn's text in `message`, earlier turns in `chat_history` (`{role: USER | CHATBOT |
//! SYSTEM | TOOL, message, tool_calls?, tool_results?}`), the system prompt in `preamble`, and
//! tool output in `tool_results` (`[{call: {name, parameters}, outputs: [..]}]`, sent with an
//! empty `message` after the model asked for the calls). The answer is `text` and `tool_calls`
//! (`[{name, parameters}]`, no ids: results pair with calls by name). A streamed v1 answer is one
//! JSON event per line; its `stream-end` event holds the whole response.

use super::call::{
    args_text, arr, content_text, contract_of, normalise_stop, s, schema_value, ChatMessage,
    ChatToolCall, Provider, Request, Response,
};
use super::openai_chat::{chat_calls, chat_request};
use crate::js;
use crate::model::Role;
use serde_json::Value;

pub(super) struct Cohere;

/// Is a request body Cohere v1's (a `message` string rather than a `messages` list)?
fn is_v1(body: &Value) -> bool {
    body.get("message").is_some_and(Value::is_string) && body.get("messages").is_none()
}

/// v1 calls: `[{name, parameters}]`.
fn v1_calls(calls: &[Value]) -> Vec<ChatToolCall> {
    calls
        .iter()
        .filter_map(|c| {
            Some(ChatToolCall {
                id: None,
                name: s(c, "name")?,
                arguments: args_text(c.get("parameters")),
            })
        })
        .collect()
}

/// v1 tool results as tool messages, one per result (its outputs as JSON text).
fn v1_results(results: &[Value], out: &mut Vec<ChatMessage>) {
    for r in results {
        let call = r.get("call").cloned().unwrap_or(Value::Null);
        let outputs = r.get("outputs").cloned().unwrap_or(Value::Null);
        out.push(ChatMessage::tool(
            None,
            s(&call, "name"),
            js::stringify(&outputs),
            false,
        ));
    }
}

fn v1_request(body: &Value, req: &mut Request) {
    let mut instructions = Vec::new();
    let preamble = content_text(body.get("preamble"));
    if !preamble.is_empty() {
        instructions.push(preamble.clone());
        req.messages.push(ChatMessage::new(Role::System, preamble));
    }
    for m in arr(body, "chat_history") {
        let text = content_text(m.get("message"));
        match s(m, "role").map(|r| r.to_ascii_uppercase()).as_deref() {
            Some("USER") => req.messages.push(ChatMessage::new(Role::User, text)),
            Some("CHATBOT") => {
                let mut msg = ChatMessage::new(Role::Assistant, text);
                msg.tool_calls = v1_calls(arr(m, "tool_calls"));
                req.messages.push(msg);
            }
            Some("SYSTEM") => {
                instructions.push(text.clone());
                req.messages.push(ChatMessage::new(Role::System, text));
            }
            Some("TOOL") => v1_results(arr(m, "tool_results"), &mut req.messages),
            _ => {}
        }
    }
    let results = arr(body, "tool_results");
    if !results.is_empty() {
        // The calls these results answer are the previous answer's; the history sent with them
        // need not hold it, so it is stated from the results' own `call`s.
        let holds_calls = req
            .messages
            .last()
            .is_some_and(|m| m.role == Role::Assistant && !m.tool_calls.is_empty());
        if !holds_calls {
            let mut asked = ChatMessage::new(Role::Assistant, "");
            asked.tool_calls = results
                .iter()
                .filter_map(|r| r.get("call"))
                .filter_map(|c| {
                    Some(ChatToolCall {
                        id: None,
                        name: s(c, "name")?,
                        arguments: args_text(c.get("parameters")),
                    })
                })
                .collect();
            req.messages.push(asked);
        }
        v1_results(results, &mut req.messages);
    }
    let message = content_text(body.get("message"));
    if !message.trim().is_empty() {
        req.messages.push(ChatMessage::new(Role::User, message));
    }
    let format = body.get("response_format");
    let native = format.and_then(|f| f.get("schema")).and_then(schema_value);
    let json_mode = format.is_some_and(|f| s(f, "type").as_deref() == Some("json_object"));
    req.contract = contract_of(native, json_mode, &[], &instructions);
}

impl Provider for Cohere {
    fn name(&self) -> &'static str {
        "cohere"
    }

    /// v2: chat `messages` sent to a Cohere URI (asked before OpenAI chat, which takes any
    /// `messages`); v1: a `message` string with a `chat_history`, or sent to a Cohere URI.
    fn matches(&self, body: &Value, uri: &str) -> bool {
        let cohere = uri.contains("cohere");
        (body.get("messages").is_some() && cohere)
            || (is_v1(body) && (cohere || body.get("chat_history").is_some()))
    }

    fn parse_request(&self, body: &Value, req: &mut Request) {
        if is_v1(body) {
            v1_request(body, req);
        } else {
            chat_request(body, req);
        }
    }

    fn parse_response(&self, body: &Value, resp: &mut Response) {
        let stop = s(body, "finish_reason").map(|r| normalise_stop(&r));
        match body.get("message") {
            Some(m @ Value::Object(_)) => {
                let mut msg = ChatMessage::new(Role::Assistant, content_text(m.get("content")));
                msg.tool_calls = chat_calls(arr(m, "tool_calls"));
                resp.message = Some(msg);
            }
            // v1: `text` and `tool_calls` at the top.
            _ => {
                let mut msg = ChatMessage::new(Role::Assistant, content_text(body.get("text")));
                msg.tool_calls = v1_calls(arr(body, "tool_calls"));
                resp.message = Some(msg);
            }
        }
        resp.stop = stop;
        if resp.id.is_none() {
            resp.id = s(body, "response_id");
        }
    }

    /// A v1 stream's `stream-end` event holds the whole response; v2 streams are read as chat
    /// deltas.
    fn assemble_stream(&self, chunks: &[Value]) -> Value {
        chunks
            .iter()
            .rev()
            .find(|c| s(c, "event_type").as_deref() == Some("stream-end"))
            .and_then(|c| c.get("response").cloned())
            .unwrap_or_else(|| super::openai_chat::assemble_deltas(chunks))
    }
}
