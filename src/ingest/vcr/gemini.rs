//! Google Gemini (`generateContent`): `contents` of `parts`, a `systemInstruction`, function
//! declarations in OpenAPI-flavoured or JSON Schema form, `candidates` in the response.

use super::call::{
    args_text, arr, content_text, contract_of, normalise_stop, s, ChatMessage, ChatToolCall,
    Provider, Request, Response,
};
use crate::js;
use crate::model::Role;
use serde_json::{json, Map, Value};

/// Gemini's OpenAPI-flavoured schema as JSON Schema: lower-case types, `any_of` -> `anyOf`,
/// `property_ordering` dropped.
pub(super) fn gemini_schema(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, val) in m {
                match k.as_str() {
                    "property_ordering" | "propertyOrdering" => {}
                    "type" => {
                        out.insert(
                            "type".into(),
                            match val {
                                Value::String(t) => Value::String(t.to_lowercase()),
                                other => other.clone(),
                            },
                        );
                    }
                    "any_of" | "anyOf" => {
                        out.insert("anyOf".into(), gemini_schema(val));
                    }
                    "nullable" if val == &Value::Bool(true) => {
                        out.insert("nullable".into(), val.clone());
                    }
                    _ => {
                        out.insert(k.clone(), gemini_schema(val));
                    }
                }
            }
            // `nullable: true` means null is allowed too.
            if out.remove("nullable").is_some() {
                if let Some(Value::String(t)) = out.get("type").cloned() {
                    out.insert("type".into(), json!([t, "null"]));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(gemini_schema).collect()),
        other => other.clone(),
    }
}

/// Gemini parts of one content, split into neutral messages.
fn google_parts(role: Role, parts: &[Value], out: &mut Vec<ChatMessage>) {
    let mut text = String::new();
    let mut calls = Vec::new();
    for p in parts {
        if p.get("thought").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        if let Some(t) = p.get("text").and_then(Value::as_str) {
            text.push_str(t);
        }
        if let Some(fc) = p.get("functionCall").or_else(|| p.get("function_call")) {
            calls.push(ChatToolCall {
                id: s(fc, "id"),
                name: s(fc, "name").unwrap_or_default(),
                arguments: args_text(fc.get("args")),
            });
        }
        if let Some(fr) = p
            .get("functionResponse")
            .or_else(|| p.get("function_response"))
        {
            let response = fr.get("response").cloned().unwrap_or(Value::Null);
            let (text, error) = match (&response.get("return_value"), &response.get("error")) {
                (Some(v), _) => (content_text(Some(v)), false),
                (None, Some(e)) => (content_text(Some(e)), true),
                _ => (js::stringify(&response), false),
            };
            out.push(ChatMessage::tool(s(fr, "id"), s(fr, "name"), text, error));
        }
    }
    if !text.is_empty() || !calls.is_empty() || (role == Role::Assistant && parts.is_empty()) {
        let mut m = ChatMessage::new(role, text);
        m.tool_calls = calls;
        out.push(m);
    }
}

fn google_request(body: &Value, req: &mut Request) {
    let mut instructions = Vec::new();
    let system = body
        .get("systemInstruction")
        .or_else(|| body.get("system_instruction"));
    if let Some(sys) = system {
        let text = content_text(sys.get("parts"));
        if !text.is_empty() {
            instructions.push(text.clone());
            req.messages.push(ChatMessage::new(Role::System, text));
        }
    }
    for c in arr(body, "contents") {
        let role = match s(c, "role").as_deref() {
            Some("model") => Role::Assistant,
            _ => Role::User,
        };
        google_parts(role, arr(c, "parts"), &mut req.messages);
    }
    let tools: Vec<(String, Value)> = arr(body, "tools")
        .iter()
        .flat_map(|t| {
            t.get("functionDeclarations")
                .or_else(|| t.get("function_declarations"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|d| {
            let schema = d
                .get("parameters_json_schema")
                .or_else(|| d.get("parametersJsonSchema"))
                .cloned()
                .or_else(|| d.get("parameters").map(gemini_schema))?;
            Some((s(&d, "name")?, schema))
        })
        .collect();
    let config = body
        .get("generationConfig")
        .or_else(|| body.get("generation_config"));
    let native = config.and_then(|g| {
        g.get("responseJsonSchema")
            .or_else(|| g.get("response_json_schema"))
            .cloned()
            .or_else(|| {
                g.get("responseSchema")
                    .or_else(|| g.get("response_schema"))
                    .map(gemini_schema)
            })
    });
    let json_mode = config.is_some_and(|g| {
        s(g, "responseMimeType").or_else(|| s(g, "response_mime_type"))
            == Some("application/json".into())
    });
    req.contract = contract_of(native, json_mode, &tools, &instructions);
}

pub(super) struct Gemini;

impl Provider for Gemini {
    fn name(&self) -> &'static str {
        "google"
    }

    /// Known by its `contents`, whatever the URI.
    fn matches(&self, body: &Value, _uri: &str) -> bool {
        body.get("contents").is_some()
    }

    fn parse_request(&self, body: &Value, req: &mut Request) {
        google_request(body, req);
    }

    fn parse_response(&self, body: &Value, resp: &mut Response) {
        let cand = arr(body, "candidates")
            .first()
            .cloned()
            .unwrap_or(Value::Null);
        let mut msgs = Vec::new();
        let parts = cand.get("content").map(|c| arr(c, "parts")).unwrap_or(&[]);
        google_parts(Role::Assistant, parts, &mut msgs);
        resp.message = msgs.into_iter().find(|m| m.role == Role::Assistant);
        resp.stop = s(&cand, "finishReason").map(|r| normalise_stop(&r));
    }

    fn assemble_stream(&self, chunks: &[Value]) -> Value {
        let mut parts = Vec::new();
        let mut finish = Value::Null;
        for c in chunks {
            if let Some(cand) = arr(c, "candidates").first() {
                if let Some(p) = cand.get("content").map(|c| arr(c, "parts")) {
                    parts.extend(p.iter().cloned());
                }
                if let Some(f) = cand.get("finishReason") {
                    finish = f.clone();
                }
            }
        }
        json!({"candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": finish}]})
    }
}
