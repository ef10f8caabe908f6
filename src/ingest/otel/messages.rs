//! GenAI messages (structured parts, chat-completions shapes, indexed attributes, OpenInference's
//! flattened lists, the deprecated per-message events) into neutral messages, and the other span
//! attributes the run builder reads.

use serde_json::{Map, Value};

use super::wire::{unflatten, Span};
use crate::ingest::openinference as oi;
use crate::js;
use crate::model::Role;

/// pydantic-ai's retry prompt when it has no tool to answer: a user message that starts no turn.
pub(super) const RETRY_FRAME: &str = "Validation feedback:";

/// A tool call requested in a message.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Call {
    pub(super) id: Option<String>,
    pub(super) name: String,
    /// JSON text; `None` when the writer left the arguments out.
    pub(super) arguments: Option<String>,
}

/// A message in neutral form.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Msg {
    pub(super) role: Role,
    /// `None` when the writer kept the structure only.
    pub(super) text: Option<String>,
    pub(super) calls: Vec<Call>,
    /// For tool results: the call answered and the tool's name.
    pub(super) call_id: Option<String>,
    pub(super) tool_name: Option<String>,
    /// The writer dropped this message's content.
    pub(super) omitted: bool,
    /// A tool result that reports a failure (a validation-error list).
    pub(super) error: bool,
}

impl Msg {
    pub(super) fn new(role: Role, text: Option<String>) -> Msg {
        Msg {
            role,
            omitted: text.is_none(),
            text,
            calls: Vec::new(),
            call_id: None,
            tool_name: None,
            error: false,
        }
    }

    /// A user message that starts a turn (not pydantic-ai's text retry prompt).
    pub(super) fn is_user_turn(&self) -> bool {
        self.role == Role::User
            && !self
                .text
                .as_deref()
                .is_some_and(|t| t.starts_with(RETRY_FRAME))
    }
}

/// Text of a value as a model reads it: strings as they are, anything else as JSON.
pub(super) fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => js::stringify(other),
    }
}

/// pydantic's validation-error list: `[{type, loc, msg, ...}]`.
fn is_validation_errors(v: &Value) -> bool {
    match v {
        Value::Array(items) => {
            !items.is_empty()
                && items
                    .iter()
                    .all(|i| i.get("loc").is_some() && i.get("msg").is_some())
        }
        Value::String(s) if s.trim_start().starts_with('[') => {
            js::parse_json(s).is_ok_and(|v| v.is_array() && is_validation_errors(&v))
        }
        _ => false,
    }
}

/// A list of messages in any of the known shapes.
pub(super) fn messages_of(list: &Value, default_role: Role) -> Vec<Msg> {
    let mut out = Vec::new();
    match list {
        Value::Array(items) => {
            for item in items {
                message_of(item, default_role, &mut out);
            }
        }
        Value::Object(_) => message_of(list, default_role, &mut out),
        Value::String(s) => out.push(Msg::new(default_role, Some(s.clone()))),
        _ => {}
    }
    out
}

/// One message, in the GenAI parts shape (`{role, parts}`), the chat-completions shape
/// (`{role, content, tool_calls, tool_call_id}`), or OpenInference's (`{message: {...}}`).
/// Tool results become tool messages whatever role carried them.
fn message_of(v: &Value, default_role: Role, out: &mut Vec<Msg>) {
    let v = match v.get("message") {
        Some(inner @ Value::Object(_)) => inner,
        Some(Value::String(s)) => match js::parse_json(s) {
            Ok(parsed @ Value::Object(_)) => return message_of(&parsed, default_role, out),
            _ => v,
        },
        _ => v,
    };
    if !v.is_object() {
        return;
    }
    let role = v
        .get("role")
        .and_then(Value::as_str)
        .map_or(Some(default_role), Role::parse);
    let Some(role) = role else {
        return;
    };
    if let Some(parts) = v.get("parts").and_then(Value::as_array) {
        parts_message(role, parts, out);
        return;
    }
    let content = v.get("content").filter(|c| !c.is_null());
    let text = match content {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .filter_map(|i| {
                    i.get("text")
                        .or_else(|| i.get("content"))
                        .and_then(Value::as_str)
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        Some(other) => Some(text_of(other)),
        None => v.get("contents").and_then(Value::as_array).map(|items| {
            items
                .iter()
                .filter_map(|i| {
                    let c = i.get("message_content").unwrap_or(i);
                    c.get("text").and_then(Value::as_str)
                })
                .collect::<Vec<_>>()
                .join("\n")
        }),
    };
    if role == Role::Tool {
        let mut m = Msg::new(Role::Tool, text);
        m.call_id = v
            .get("tool_call_id")
            .or_else(|| v.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string);
        m.tool_name = v.get("name").and_then(Value::as_str).map(str::to_string);
        m.error = content.is_some_and(is_validation_errors);
        out.push(m);
        return;
    }
    let mut calls = Vec::new();
    let listed = match v.get("tool_calls") {
        Some(Value::String(s)) => js::parse_json(s).ok(),
        Some(other) => Some(other.clone()),
        None => None,
    };
    for c in listed
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let c = c.get("tool_call").unwrap_or(c);
        let f = c.get("function").unwrap_or(c);
        calls.push(Call {
            id: c.get("id").and_then(Value::as_str).map(str::to_string),
            name: f
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            arguments: f.get("arguments").filter(|a| !a.is_null()).map(text_of),
        });
    }
    if let Some(f) = v.get("function_call").filter(|f| f.is_object()) {
        calls.push(Call {
            id: None,
            name: f
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            arguments: f.get("arguments").filter(|a| !a.is_null()).map(text_of),
        });
    }
    let mut m = Msg::new(role, text);
    if !calls.is_empty() {
        // An assistant message that only calls tools has no text to omit.
        m.omitted = false;
        m.calls = calls;
    }
    out.push(m);
}

/// A message in the GenAI parts shape.
fn parts_message(role: Role, parts: &[Value], out: &mut Vec<Msg>) {
    let mut texts: Vec<String> = Vec::new();
    let mut text_omitted = false;
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for p in parts {
        match p.get("type").and_then(Value::as_str).unwrap_or("text") {
            "text" => match p.get("content").filter(|c| !c.is_null()) {
                Some(c) => texts.push(text_of(c)),
                None => text_omitted = true,
            },
            "tool_call" => calls.push(Call {
                id: p.get("id").and_then(Value::as_str).map(str::to_string),
                name: p
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                arguments: p.get("arguments").filter(|a| !a.is_null()).map(text_of),
            }),
            "tool_call_response" => {
                let result = p.get("response").or_else(|| p.get("result"));
                let mut m = Msg::new(Role::Tool, result.map(text_of));
                m.call_id = p.get("id").and_then(Value::as_str).map(str::to_string);
                m.tool_name = p.get("name").and_then(Value::as_str).map(str::to_string);
                m.error = result.is_some_and(is_validation_errors);
                results.push(m);
            }
            // Reasoning, media and other parts carry nothing the checks read.
            _ => {}
        }
    }
    out.extend(results.iter().cloned());
    if role == Role::Tool && texts.is_empty() && calls.is_empty() {
        return;
    }
    let has_text = !texts.is_empty() || text_omitted;
    if !has_text && calls.is_empty() && !results.is_empty() {
        return;
    }
    let text = if texts.is_empty() && text_omitted {
        None
    } else {
        Some(texts.join("\n"))
    };
    let mut m = Msg::new(role, text);
    m.omitted = text_omitted && texts.is_empty() && calls.is_empty();
    m.calls = calls;
    out.push(m);
}

/// The deprecated per-message span events, in order, as one list.
fn event_messages(s: &Span, output: bool) -> Option<Vec<Msg>> {
    let mut out = Vec::new();
    let mut events: Vec<(String, Map<String, Value>)> = s
        .events
        .iter()
        .map(|e| (e.name.clone(), e.attrs.clone()))
        .collect();
    // pydantic-ai's first span format keeps its events as a JSON list in one attribute.
    if let Some(Value::Array(items)) = s.attr("events") {
        for item in items {
            if let (Some(name), Value::Object(map)) =
                (item.get("event.name").and_then(Value::as_str), item)
            {
                events.push((name.to_string(), map.clone()));
            }
        }
    }
    for (name, attrs) in &events {
        let role = match name.as_str() {
            "gen_ai.system.message" => Role::System,
            "gen_ai.user.message" => Role::User,
            "gen_ai.assistant.message" => Role::Assistant,
            "gen_ai.tool.message" => Role::Tool,
            "gen_ai.choice" => Role::Assistant,
            "gen_ai.content.prompt" | "gen_ai.content.completion" => {
                let key = if name.ends_with("prompt") {
                    "gen_ai.prompt"
                } else {
                    "gen_ai.completion"
                };
                if (name.ends_with("completion")) != output {
                    continue;
                }
                if let Some(v) = attrs.get(key) {
                    let parsed = match v {
                        Value::String(t) => js::parse_json(t).unwrap_or_else(|_| v.clone()),
                        other => other.clone(),
                    };
                    let default = if output { Role::Assistant } else { Role::User };
                    out.extend(messages_of(&parsed, default));
                }
                continue;
            }
            _ => continue,
        };
        if (name == "gen_ai.choice") != output {
            continue;
        }
        let mut body = Value::Object(attrs.clone());
        if let Some(Value::String(b)) = attrs.get("body") {
            if let Ok(parsed @ Value::Object(_)) = js::parse_json(b) {
                body = parsed;
            }
        }
        if body.get("role").is_none() {
            if let Value::Object(map) = &mut body {
                map.insert("role".into(), Value::String(role.as_str().into()));
            }
        }
        message_of(&body, role, &mut out);
    }
    (!out.is_empty()).then_some(out)
}

/// The messages a model call was given.
pub(super) fn input_messages(s: &Span) -> Option<Vec<Msg>> {
    if let Some(v) = s.attr("gen_ai.input.messages") {
        return Some(messages_of(v, Role::User));
    }
    if let Some(v) = s.attr("gen_ai.prompt") {
        return Some(messages_of(v, Role::User));
    }
    let indexed = unflatten(&s.attrs, "gen_ai.prompt.");
    if !indexed.is_empty() {
        return Some(messages_of(&Value::Array(indexed), Role::User));
    }
    if let Some(list) = oi::input_messages(s) {
        return Some(messages_of(&Value::Array(list), Role::User));
    }
    event_messages(s, false)
}

/// The messages a model call returned.
pub(super) fn output_messages(s: &Span) -> Option<Vec<Msg>> {
    if let Some(v) = s.attr("gen_ai.output.messages") {
        return Some(messages_of(v, Role::Assistant));
    }
    if let Some(v) = s.attr("gen_ai.completion") {
        return Some(messages_of(v, Role::Assistant));
    }
    let indexed = unflatten(&s.attrs, "gen_ai.completion.");
    if !indexed.is_empty() {
        return Some(messages_of(&Value::Array(indexed), Role::Assistant));
    }
    if let Some(list) = oi::output_messages(s) {
        return Some(messages_of(&Value::Array(list), Role::Assistant));
    }
    event_messages(s, true)
}

/// The system instructions recorded apart from the messages (`gen_ai.system_instructions`).
pub(super) fn instructions(s: &Span) -> Option<Msg> {
    let v = s.attr("gen_ai.system_instructions")?;
    let text = match v {
        Value::String(t) => Some(t.clone()),
        Value::Array(parts) => {
            let texts: Vec<String> = parts
                .iter()
                .filter_map(|p| match p {
                    Value::String(t) => Some(t.clone()),
                    other => other.get("content").filter(|c| !c.is_null()).map(text_of),
                })
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        other => Some(text_of(other)),
    };
    Some(Msg::new(Role::System, text))
}

pub(super) fn tool_name(s: &Span) -> Option<String> {
    s.str_attr("gen_ai.tool.name")
        .filter(|n| !n.is_empty())
        .or_else(|| oi::tool_name(s))
        .or_else(|| {
            s.name
                .strip_prefix("execute_tool ")
                .filter(|n| !n.is_empty())
        })
        .map(str::to_string)
}

pub(super) fn tool_call_id(s: &Span) -> Option<&str> {
    s.str_attr("gen_ai.tool.call.id")
        .filter(|n| !n.is_empty())
        .or_else(|| oi::tool_call_id(s))
}

pub(super) fn tool_arguments(s: &Span) -> Option<String> {
    s.attr("gen_ai.tool.call.arguments")
        .or_else(|| s.attr("tool_arguments"))
        .or_else(|| oi::tool_arguments(s))
        .map(text_of)
}

pub(super) fn tool_result(s: &Span) -> Option<String> {
    s.attr("gen_ai.tool.call.result")
        .or_else(|| s.attr("tool_response"))
        .or_else(|| oi::tool_result(s))
        .map(text_of)
}

pub(super) fn conversation_of(s: &Span) -> Option<&str> {
    s.str_attr("gen_ai.conversation.id")
        .filter(|c| !c.is_empty())
        .or_else(|| oi::session(s))
}

pub(super) fn model_of(s: &Span) -> Option<&str> {
    [
        "gen_ai.response.model",
        "gen_ai.request.model",
        "model_name",
    ]
    .iter()
    .find_map(|k| s.str_attr(k).filter(|m| !m.is_empty()))
    .or_else(|| oi::model(s))
}

/// pydantic-ai's output declaration: the output tools with their JSON Schemas.
pub(super) fn output_declaration(chats: &[&Span]) -> Option<Value> {
    chats.iter().find_map(|c| {
        let p = c.attr("model_request_parameters")?;
        let tools: Vec<Value> = p
            .get("output_tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|t| {
                serde_json::json!({
                    "name": t.get("name").cloned().unwrap_or(Value::Null),
                    "parameters_json_schema": t.get("parameters_json_schema").cloned().unwrap_or(Value::Null),
                })
            })
            .collect();
        let object = p.get("output_object").filter(|o| !o.is_null());
        if tools.is_empty() && object.is_none() {
            return None;
        }
        let mut decl = Map::new();
        if let Some(mode) = p.get("output_mode") {
            decl.insert("output_mode".into(), mode.clone());
        }
        decl.insert("output_tools".into(), Value::Array(tools));
        if let Some(o) = object {
            decl.insert("output_object".into(), o.clone());
        }
        decl.insert(
            "allow_text_output".into(),
            p.get("allow_text_output").cloned().unwrap_or(Value::Null),
        );
        Some(Value::Object(decl))
    })
}
