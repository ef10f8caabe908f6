//! OpenAI chat completions and its many compatible servers (Groq, Ollama, Mistral, Cerebras,
//! OpenRouter, Hugging Face, ...): `messages`, `tools`, `response_format`, `choices` in the
//! response, `choices[].delta` chunks in a stream. Cohere and xAI send requests of this shape.

use super::call::{
    args_text, arr, content_text, contract_of, normalise_stop, role_of, s, schema_value,
    ChatMessage, ChatToolCall, Provider, Request, Response,
};
use crate::model::Role;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// OpenAI chat completions and compatible servers (and Cohere v2, xAI samples).
pub(super) fn chat_request(body: &Value, req: &mut Request) {
    let mut instructions = Vec::new();
    for m in arr(body, "messages") {
        let Some(role) = role_of(m) else { continue };
        let text = content_text(m.get("content"));
        match role {
            Role::Tool => req.messages.push(ChatMessage::tool(
                s(m, "tool_call_id"),
                s(m, "name"),
                text,
                false,
            )),
            Role::Assistant => {
                let mut msg = ChatMessage::new(Role::Assistant, text);
                msg.tool_calls = chat_calls(arr(m, "tool_calls"));
                req.messages.push(msg);
            }
            Role::System => {
                instructions.push(text.clone());
                req.messages.push(ChatMessage::new(Role::System, text));
            }
            Role::User => req.messages.push(ChatMessage::new(Role::User, text)),
        }
    }
    let tools: Vec<(String, Value)> = arr(body, "tools")
        .iter()
        .filter_map(|t| {
            let f = t.get("function").unwrap_or(t);
            Some((s(f, "name")?, f.get("parameters").and_then(schema_value)?))
        })
        .collect();
    let rf = body.get("response_format");
    let native = rf
        .filter(|r| s(r, "type").as_deref() == Some("json_schema"))
        .and_then(|r| r.get("json_schema"))
        .and_then(|j| j.get("schema").and_then(schema_value))
        .or_else(|| {
            // xAI's gRPC form: `{format_type: FORMAT_TYPE_JSON_SCHEMA, schema: "<json>"}`.
            rf.filter(|r| s(r, "format_type").as_deref() == Some("FORMAT_TYPE_JSON_SCHEMA"))
                .and_then(|r| r.get("schema").and_then(schema_value))
        });
    let json_mode = rf.is_some_and(|r| s(r, "type").as_deref() == Some("json_object"));
    req.contract = contract_of(native, json_mode, &tools, &instructions);
}

pub(super) fn chat_calls(calls: &[Value]) -> Vec<ChatToolCall> {
    calls
        .iter()
        .filter_map(|c| {
            let f = c.get("function").unwrap_or(c);
            Some(ChatToolCall {
                id: s(c, "id"),
                name: s(f, "name")?,
                arguments: args_text(f.get("arguments")),
            })
        })
        .collect()
}

pub(super) struct OpenAiChat;

impl Provider for OpenAiChat {
    fn name(&self) -> &'static str {
        "openai-chat"
    }

    /// Any request with chat `messages` the providers before it did not take.
    fn matches(&self, body: &Value, _uri: &str) -> bool {
        body.get("messages").is_some()
    }

    fn parse_request(&self, body: &Value, req: &mut Request) {
        chat_request(body, req);
    }

    fn parse_response(&self, body: &Value, resp: &mut Response) {
        let choice = arr(body, "choices").first().cloned().unwrap_or(Value::Null);
        let m = choice.get("message").cloned().unwrap_or(Value::Null);
        let mut msg = ChatMessage::new(Role::Assistant, content_text(m.get("content")));
        msg.tool_calls = chat_calls(arr(&m, "tool_calls"));
        resp.message = Some(msg);
        resp.stop = if m.get("refusal").is_some_and(|r| !r.is_null()) {
            Some("refusal".into())
        } else {
            s(&choice, "finish_reason").map(|r| normalise_stop(&r))
        };
    }
    fn assemble_stream(&self, chunks: &[Value]) -> Value {
        assemble_deltas(chunks)
    }
}

/// The body a chat completion returns, from its streamed `choices[].delta` chunks.
pub(super) fn assemble_deltas(chunks: &[Value]) -> Value {
    let mut content = String::new();
    let mut calls: BTreeMap<u64, (Option<String>, String, String)> = BTreeMap::new();
    let mut finish = Value::Null;
    for c in chunks {
        let Some(choice) = arr(c, "choices").first() else {
            continue;
        };
        if let Some(f) = choice.get("finish_reason").filter(|f| !f.is_null()) {
            finish = f.clone();
        }
        let delta = choice.get("delta").cloned().unwrap_or(Value::Null);
        if let Some(t) = delta.get("content").and_then(Value::as_str) {
            content.push_str(t);
        }
        for tc in arr(&delta, "tool_calls") {
            let i = tc.get("index").and_then(Value::as_u64).unwrap_or(0);
            let e = calls.entry(i).or_default();
            if let Some(id) = s(tc, "id") {
                e.0 = Some(id);
            }
            if let Some(f) = tc.get("function") {
                if let Some(n) = f.get("name").and_then(Value::as_str) {
                    e.1.push_str(n);
                }
                if let Some(a) = f.get("arguments").and_then(Value::as_str) {
                    e.2.push_str(a);
                }
            }
        }
    }
    let tool_calls: Vec<Value> = calls
        .into_values()
        .map(|(id, name, args)| json!({"id": id, "function": {"name": name, "arguments": args}}))
        .collect();
    json!({"choices": [{"message": {"content": content, "tool_calls": tool_calls}, "finish_reason": finish}]})
}
