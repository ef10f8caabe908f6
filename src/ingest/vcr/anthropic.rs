//! Anthropic Messages: `messages` of content blocks (`text`, `tool_use`, `tool_result`), a
//! `system` prompt, content blocks in the response; streams are content-block events.

use super::call::{
    args_text, arr, content_text, contract_of, normalise_stop, role_of, s, schema_value,
    ChatMessage, ChatToolCall, Provider, Request, Response,
};
use crate::js;
use crate::model::Role;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Anthropic content blocks of one message, split into neutral messages.
fn anthropic_blocks(role: Role, content: Option<&Value>, out: &mut Vec<ChatMessage>) {
    let blocks = match content {
        Some(Value::String(t)) => {
            out.push(ChatMessage::new(role, t.clone()));
            return;
        }
        Some(Value::Array(b)) => b,
        _ => return,
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    for b in blocks {
        match s(b, "type").as_deref() {
            Some("text") => text.push_str(b.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => calls.push(ChatToolCall {
                id: s(b, "id"),
                name: s(b, "name").unwrap_or_default(),
                arguments: args_text(b.get("input")),
            }),
            Some("tool_result") => out.push(ChatMessage::tool(
                s(b, "tool_use_id"),
                None,
                content_text(b.get("content")),
                b.get("is_error").and_then(Value::as_bool) == Some(true),
            )),
            _ => {}
        }
    }
    if !text.is_empty() || !calls.is_empty() || role == Role::Assistant {
        let mut m = ChatMessage::new(role, text);
        m.tool_calls = calls;
        if !(role == Role::User && m.text.is_empty()) {
            out.push(m);
        }
    }
}

fn anthropic_request(body: &Value, req: &mut Request) {
    let system = content_text(body.get("system"));
    let mut instructions = Vec::new();
    if !system.is_empty() {
        instructions.push(system.clone());
        req.messages.push(ChatMessage::new(Role::System, system));
    }
    for m in arr(body, "messages") {
        let Some(role) = role_of(m) else { continue };
        anthropic_blocks(role, m.get("content"), &mut req.messages);
    }
    let tools: Vec<(String, Value)> = arr(body, "tools")
        .iter()
        .filter_map(|t| Some((s(t, "name")?, t.get("input_schema").and_then(schema_value)?)))
        .collect();
    let format = body
        .get("output_format")
        .or_else(|| body.get("output_config").and_then(|c| c.get("format")));
    let native = format
        .filter(|f| s(f, "type").as_deref() == Some("json_schema"))
        .and_then(|f| f.get("schema").and_then(schema_value));
    req.contract = contract_of(native, false, &tools, &instructions);
}

pub(super) struct Anthropic;

impl Provider for Anthropic {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    /// Known by its URI (the host or the `/v1/messages` path).
    fn matches(&self, _body: &Value, uri: &str) -> bool {
        uri.contains("anthropic") || uri.contains("/v1/messages")
    }

    fn parse_request(&self, body: &Value, req: &mut Request) {
        anthropic_request(body, req);
    }

    fn parse_response(&self, body: &Value, resp: &mut Response) {
        let mut msgs = Vec::new();
        anthropic_blocks(Role::Assistant, body.get("content"), &mut msgs);
        resp.message = msgs.into_iter().find(|m| m.role == Role::Assistant);
        resp.stop = s(body, "stop_reason").map(|r| normalise_stop(&r));
    }

    fn assemble_stream(&self, chunks: &[Value]) -> Value {
        let mut blocks: Vec<Value> = Vec::new();
        let mut partial_json: BTreeMap<usize, String> = BTreeMap::new();
        let mut stop = Value::Null;
        for c in chunks {
            match s(c, "type").as_deref() {
                Some("content_block_start") => {
                    blocks.push(c.get("content_block").cloned().unwrap_or(Value::Null))
                }
                Some("content_block_delta") => {
                    let i = c.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
                    let d = c.get("delta").cloned().unwrap_or(Value::Null);
                    if let (Some(t), Some(Value::Object(b))) =
                        (d.get("text").and_then(Value::as_str), blocks.get_mut(i))
                    {
                        let old = b.get("text").and_then(Value::as_str).unwrap_or("");
                        let joined = format!("{old}{t}");
                        b.insert("text".into(), json!(joined));
                    }
                    if let Some(p) = d.get("partial_json").and_then(Value::as_str) {
                        partial_json.entry(i).or_default().push_str(p);
                    }
                }
                Some("message_delta") => {
                    if let Some(r) = c.get("delta").and_then(|d| d.get("stop_reason")) {
                        stop = r.clone();
                    }
                }
                _ => {}
            }
        }
        for (i, p) in partial_json {
            if let Some(Value::Object(b)) = blocks.get_mut(i) {
                b.insert("input".into(), js::parse_json(&p).unwrap_or(json!(p)));
            }
        }
        json!({"content": blocks, "stop_reason": stop})
    }
}
