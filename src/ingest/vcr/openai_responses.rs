//! OpenAI Responses: `input` items (messages, function calls and their outputs), `instructions`,
//! `previous_response_id` chaining, `output` items in the response.

use super::call::{
    args_text, arr, content_text, contract_of, normalise_stop, role_of, s, schema_value,
    ChatMessage, ChatToolCall, Provider, Request, Response,
};
use crate::model::Role;
use serde_json::{json, Value};

fn responses_request(body: &Value, req: &mut Request) {
    let mut instructions: Vec<String> = s(body, "instructions").into_iter().collect();
    req.previous_response_id = s(body, "previous_response_id");
    let input = match body.get("input") {
        Some(Value::String(t)) => vec![json!({"role": "user", "content": t})],
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    for item in &input {
        match s(item, "type").as_deref() {
            Some("function_call") => {
                let call = ChatToolCall {
                    id: s(item, "call_id"),
                    name: s(item, "name").unwrap_or_default(),
                    arguments: args_text(item.get("arguments")),
                };
                // Consecutive calls belong to one assistant turn.
                match req.messages.last_mut() {
                    Some(m) if m.role == Role::Assistant && m.text.is_empty() => {
                        m.tool_calls.push(call)
                    }
                    _ => {
                        let mut m = ChatMessage::new(Role::Assistant, "");
                        m.tool_calls.push(call);
                        req.messages.push(m);
                    }
                }
            }
            Some("function_call_output") => req.messages.push(ChatMessage::tool(
                s(item, "call_id"),
                None,
                content_text(item.get("output")),
                false,
            )),
            Some("message") | None => {
                let Some(role) = role_of(item) else { continue };
                let text = content_text(item.get("content"));
                if role == Role::System {
                    instructions.push(text.clone());
                }
                req.messages.push(ChatMessage::new(role, text));
            }
            // Reasoning items, server tool calls: not messages.
            Some(_) => {}
        }
    }
    let tools: Vec<(String, Value)> = arr(body, "tools")
        .iter()
        .filter(|t| s(t, "type").as_deref() == Some("function"))
        .filter_map(|t| Some((s(t, "name")?, t.get("parameters").and_then(schema_value)?)))
        .collect();
    let format = body.get("text").and_then(|t| t.get("format"));
    let native = format
        .filter(|f| s(f, "type").as_deref() == Some("json_schema"))
        .and_then(|f| f.get("schema").and_then(schema_value));
    let json_mode = format.is_some_and(|f| s(f, "type").as_deref() == Some("json_object"));
    req.contract = contract_of(native, json_mode, &tools, &instructions);
}

pub(super) struct OpenAiResponses;

impl Provider for OpenAiResponses {
    fn name(&self) -> &'static str {
        "openai-responses"
    }

    /// Known by its `input` or by the `/responses` path.
    fn matches(&self, body: &Value, uri: &str) -> bool {
        body.get("input").is_some() || uri.ends_with("/responses")
    }

    fn parse_request(&self, body: &Value, req: &mut Request) {
        responses_request(body, req);
    }

    fn parse_response(&self, body: &Value, resp: &mut Response) {
        let mut m = ChatMessage::new(Role::Assistant, "");
        for item in arr(body, "output") {
            match s(item, "type").as_deref() {
                Some("message") => {
                    for c in arr(item, "content") {
                        match s(c, "type").as_deref() {
                            Some("output_text") => m
                                .text
                                .push_str(c.get("text").and_then(Value::as_str).unwrap_or("")),
                            Some("refusal") => resp.stop = Some("refusal".into()),
                            _ => {}
                        }
                    }
                }
                Some("function_call") => m.tool_calls.push(ChatToolCall {
                    id: s(item, "call_id"),
                    name: s(item, "name").unwrap_or_default(),
                    arguments: args_text(item.get("arguments")),
                }),
                _ => {}
            }
        }
        resp.message = Some(m);
        if resp.stop.is_none() {
            resp.stop = body
                .get("incomplete_details")
                .and_then(|d| s(d, "reason"))
                .map(|r| normalise_stop(&r))
                .or_else(|| s(body, "status"));
        }
    }
    fn assemble_stream(&self, chunks: &[Value]) -> Value {
        super::openai_chat::assemble_deltas(chunks)
    }
}
