//! Amazon Bedrock Converse: `messages` of content blocks (`text`, `toolUse`, `toolResult`), a
//! `toolConfig`, `output.message` in the response.

use super::call::{
    args_text, arr, content_text, contract_of, normalise_stop, role_of, s, schema_value,
    ChatMessage, ChatToolCall, Provider, Request, Response,
};
use crate::js;
use crate::model::Role;
use serde_json::Value;

fn bedrock_blocks(role: Role, blocks: &[Value], out: &mut Vec<ChatMessage>) {
    let mut text = String::new();
    let mut calls = Vec::new();
    for b in blocks {
        if let Some(t) = b.get("text").and_then(Value::as_str) {
            text.push_str(t);
        }
        // A server-side tool (run by the provider inside the answer) is not the agent's call.
        let server_side = role == Role::Assistant
            && (b.get("toolResult").is_some()
                || b.get("toolUse")
                    .is_some_and(|tu| s(tu, "type").as_deref() == Some("server_tool_use")));
        if server_side {
            continue;
        }
        if let Some(tu) = b.get("toolUse") {
            calls.push(ChatToolCall {
                id: s(tu, "toolUseId"),
                name: s(tu, "name").unwrap_or_default(),
                arguments: args_text(tu.get("input")),
            });
        }
        if let Some(tr) = b.get("toolResult") {
            let text = arr(tr, "content")
                .iter()
                .map(|c| match c.get("json") {
                    Some(j) => js::stringify(j),
                    None => c
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                })
                .collect::<Vec<_>>()
                .join("");
            out.push(ChatMessage::tool(
                s(tr, "toolUseId"),
                None,
                text,
                s(tr, "status").as_deref() == Some("error"),
            ));
        }
    }
    if !text.is_empty() || !calls.is_empty() {
        let mut m = ChatMessage::new(role, text);
        m.tool_calls = calls;
        out.push(m);
    }
}

fn bedrock_request(body: &Value, req: &mut Request) {
    let mut instructions = Vec::new();
    let system = content_text(body.get("system"));
    if !system.is_empty() {
        instructions.push(system.clone());
        req.messages.push(ChatMessage::new(Role::System, system));
    }
    for m in arr(body, "messages") {
        let Some(role) = role_of(m) else { continue };
        bedrock_blocks(role, arr(m, "content"), &mut req.messages);
    }
    let tools: Vec<(String, Value)> = body
        .get("toolConfig")
        .map(|c| arr(c, "tools"))
        .unwrap_or(&[])
        .iter()
        .filter_map(|t| {
            let spec = t.get("toolSpec")?;
            let schema = spec
                .get("inputSchema")?
                .get("json")
                .and_then(schema_value)?;
            Some((s(spec, "name")?, schema))
        })
        .collect();
    let native = body
        .get("outputConfig")
        .and_then(|c| c.get("textFormat"))
        .filter(|f| s(f, "type").as_deref() == Some("json_schema"))
        .and_then(|f| f.get("structure"))
        .and_then(|st| st.get("jsonSchema"))
        .and_then(|j| j.get("schema").and_then(schema_value));
    req.contract = contract_of(native, false, &tools, &instructions);
}

pub(super) struct Bedrock;

impl Provider for Bedrock {
    fn name(&self) -> &'static str {
        "bedrock"
    }

    /// Known by the `/converse` path or a `toolConfig`; asked before Anthropic, whose test a
    /// Bedrock URI naming an Anthropic model would pass.
    fn matches(&self, body: &Value, uri: &str) -> bool {
        uri.contains("/converse") || body.get("toolConfig").is_some()
    }

    fn parse_request(&self, body: &Value, req: &mut Request) {
        bedrock_request(body, req);
    }

    fn parse_response(&self, body: &Value, resp: &mut Response) {
        let blocks = body
            .get("output")
            .and_then(|o| o.get("message"))
            .map(|m| arr(m, "content"))
            .unwrap_or(&[]);
        let mut msgs = Vec::new();
        bedrock_blocks(Role::Assistant, blocks, &mut msgs);
        resp.message = Some(
            msgs.into_iter()
                .find(|m| m.role == Role::Assistant)
                .unwrap_or_else(|| ChatMessage::new(Role::Assistant, "")),
        );
        resp.stop = s(body, "stopReason").map(|r| normalise_stop(&r));
    }
    fn assemble_stream(&self, chunks: &[Value]) -> Value {
        super::openai_chat::assemble_deltas(chunks)
    }
}
