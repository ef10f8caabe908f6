//! GenAI messages (structured parts, chat-completions shapes, indexed attributes, OpenInference's
//! flattened lists, the deprecated per-message events) into neutral messages, and the other span
//! attributes the run builder reads.

use serde_json::{Map, Value};

use super::span::{unflatten, Span};
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
/// (`{role, content, tool_calls, tool_call_id}`), OpenInference's (`{message: {...}}`), or a
/// choice whose `message` is the content itself (text, or a JSON list of content blocks).
/// Content may be a list of blocks (see [`Blocks`]). Tool results become tool messages whatever
/// role carried them.
fn message_of(v: &Value, default_role: Role, out: &mut Vec<Msg>) {
    let v = match v.get("message") {
        Some(inner @ Value::Object(_)) => inner,
        Some(Value::String(s)) => {
            return match js::parse_json(s) {
                Ok(parsed @ Value::Object(_)) => message_of(&parsed, default_role, out),
                Ok(Value::Array(items)) => {
                    message_of(&with_content(v, Value::Array(items)), default_role, out)
                }
                _ => message_of(
                    &with_content(v, Value::String(s.clone())),
                    default_role,
                    out,
                ),
            };
        }
        Some(items @ Value::Array(_)) => {
            return message_of(&with_content(v, items.clone()), default_role, out);
        }
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
    // OpenLLMetry's Bedrock form: the text under the role's own key (`gen_ai.prompt.0.user`).
    let content = v
        .get("content")
        .filter(|c| !c.is_null())
        .or_else(|| v.get(role.as_str()).filter(|c| c.is_string()))
        .map(block_list);
    let listed = match &content {
        Some(Value::Array(items)) => Some(items.as_slice()),
        None => v
            .get("contents")
            .and_then(Value::as_array)
            .map(Vec::as_slice),
        Some(_) => None,
    };
    let found = listed.map(blocks);
    let text = match (&content, &found) {
        (_, Some(b)) => Some(b.texts.join("\n")),
        (Some(Value::String(s)), None) => Some(s.clone()),
        (Some(other), None) => Some(text_of(other)),
        (None, None) => None,
    };
    let (calls_in_blocks, results) = match found {
        Some(b) => (b.calls, b.results),
        None => (Vec::new(), Vec::new()),
    };
    if !results.is_empty() {
        // Tool results carried in a content list (Bedrock/Strands `toolResult`, Anthropic
        // `tool_result`): tool messages of their own; whatever text came with them stays with
        // the message's role.
        out.extend(results);
        let has_text = text.as_deref().is_some_and(|t| !t.is_empty());
        if role == Role::Tool || (!has_text && calls_in_blocks.is_empty()) {
            return;
        }
    } else if role == Role::Tool {
        let mut m = Msg::new(Role::Tool, text);
        m.call_id = v
            .get("tool_call_id")
            .or_else(|| v.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string);
        m.tool_name = v.get("name").and_then(Value::as_str).map(str::to_string);
        m.error = v.get("content").is_some_and(is_validation_errors);
        out.push(m);
        return;
    }
    let mut calls = calls_in_blocks;
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

/// The message `v` with `content` in place of its `message` member.
fn with_content(v: &Value, content: Value) -> Value {
    let mut map = v.as_object().cloned().unwrap_or_default();
    map.remove("message");
    map.insert("content".into(), content);
    Value::Object(map)
}

/// Content blocks a writer may use (Bedrock Converse and Strands, Anthropic, OpenAI content
/// parts, OpenInference contents). A block names its kind by a key of its own (`text`,
/// `toolUse`, ...) or by `type`.
const BLOCK_KEYS: [&str; 11] = [
    "text",
    "toolUse",
    "toolResult",
    "reasoningContent",
    "image",
    "document",
    "video",
    "json",
    "cachePoint",
    "guardContent",
    "citationsContent",
];
const BLOCK_TYPES: [&str; 10] = [
    "text",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "image",
    "document",
    "input_text",
    "output_text",
    "reasoning",
];

fn is_block(v: &Value) -> bool {
    let Some(map) = v.as_object() else {
        return false;
    };
    map.get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| BLOCK_TYPES.contains(&t))
        || BLOCK_KEYS.iter().any(|k| map.contains_key(*k))
}

/// Content as a list when it is the JSON text of a list of content blocks (Strands writes
/// `[{"text": ...}]` as the content of its message events); anything else as it is.
fn block_list(v: &Value) -> Value {
    if let Value::String(s) = v {
        if s.trim_start().starts_with('[') {
            if let Ok(Value::Array(items)) = js::parse_json(s) {
                if !items.is_empty() && items.iter().all(is_block) {
                    return Value::Array(items);
                }
            }
        }
    }
    v.clone()
}

/// One message's content list, read block by block.
struct Blocks {
    texts: Vec<String>,
    calls: Vec<Call>,
    /// Tool results, as tool messages.
    results: Vec<Msg>,
}

fn blocks(items: &[Value]) -> Blocks {
    let mut b = Blocks {
        texts: Vec::new(),
        calls: Vec::new(),
        results: Vec::new(),
    };
    for item in items {
        let item = item.get("message_content").unwrap_or(item);
        let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let args = |v: Option<&Value>| v.filter(|a| !a.is_null()).map(text_of);
        if let Some(u) = item.get("toolUse") {
            b.calls.push(Call {
                id: str_of(u, "toolUseId"),
                name: str_of(u, "name").unwrap_or_default(),
                arguments: args(u.get("input")),
            });
            continue;
        }
        if let Some(r) = item.get("toolResult") {
            let mut m = Msg::new(Role::Tool, r.get("content").map(result_text));
            m.call_id = str_of(r, "toolUseId");
            m.error = r.get("status").and_then(Value::as_str) == Some("error");
            b.results.push(m);
            continue;
        }
        match item.get("type").and_then(Value::as_str) {
            Some("tool_use") => {
                b.calls.push(Call {
                    id: str_of(item, "id"),
                    name: str_of(item, "name").unwrap_or_default(),
                    arguments: args(item.get("input")),
                });
                continue;
            }
            Some("tool_result") => {
                let mut m = Msg::new(Role::Tool, item.get("content").map(result_text));
                m.call_id = str_of(item, "tool_use_id");
                m.error = item.get("is_error").and_then(Value::as_bool) == Some(true);
                b.results.push(m);
                continue;
            }
            _ => {}
        }
        let text = item
            .get("text")
            .or_else(|| item.get("content"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| item.get("json").map(text_of));
        if let Some(t) = text {
            b.texts.push(t);
        }
    }
    b
}

/// A tool result's text: the text of its content blocks when it is a list of them (Bedrock,
/// Strands, Anthropic), else the value as a model reads it.
fn result_text(v: &Value) -> String {
    match block_list(v) {
        Value::Array(items) if items.iter().all(is_block) => blocks(&items).texts.join("\n"),
        other => text_of(&other),
    }
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
                let text = result.map(|r| {
                    if is_validation_errors(r) {
                        text_of(r)
                    } else {
                        result_text(r)
                    }
                });
                let mut m = Msg::new(Role::Tool, text);
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

/// The span event in which the current GenAI conventions record a call's messages when they are
/// not span attributes (`gen_ai.input.messages`, `gen_ai.output.messages`,
/// `gen_ai.system_instructions` as event attributes).
const DETAILS_EVENT: &str = "gen_ai.client.inference.operation.details";

/// A member of the details event, JSON text parsed.
fn details(s: &Span, key: &str) -> Option<Value> {
    s.events
        .iter()
        .filter(|e| e.name == DETAILS_EVENT)
        .find_map(|e| e.attrs.get(key).filter(|v| !v.is_null()))
        .map(|v| match v {
            Value::String(t) => js::parse_json(t).unwrap_or_else(|_| v.clone()),
            other => other.clone(),
        })
}

/// What a per-message event says: its `body` (the semantic conventions' event body), the JSON
/// of `gen_ai.event.content` (Azure AI Inference, Semantic Kernel), else its attributes.
fn event_body(attrs: &Map<String, Value>) -> Value {
    for key in ["body", "gen_ai.event.content"] {
        if let Some(Value::String(b)) = attrs.get(key) {
            if let Ok(parsed @ Value::Object(_)) = js::parse_json(b) {
                return parsed;
            }
        }
        if let Some(body @ Value::Object(_)) = attrs.get(key) {
            return body.clone();
        }
    }
    Value::Object(attrs.clone())
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
        let mut body = event_body(attrs);
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
    if let Some(v) = details(s, "gen_ai.input.messages") {
        return Some(messages_of(&v, Role::User));
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
    if let Some(v) = details(s, "gen_ai.output.messages") {
        return Some(messages_of(&v, Role::Assistant));
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

/// The system instructions recorded apart from the messages (`gen_ai.system_instructions`, as
/// a span attribute or in the details event).
pub(super) fn instructions(s: &Span) -> Option<Msg> {
    let detailed;
    let v = match s.attr("gen_ai.system_instructions") {
        Some(v) => v,
        None => {
            detailed = details(s, "gen_ai.system_instructions")?;
            &detailed
        }
    };
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

/// A tool span's event of this name: its attributes.
fn tool_event<'a>(s: &'a Span, name: &str) -> Option<&'a Map<String, Value>> {
    s.events.iter().find(|e| e.name == name).map(|e| &e.attrs)
}

/// The first part of this type in a details-event message list.
fn details_part(s: &Span, key: &str, part: &str) -> Option<Value> {
    let list = details(s, key)?;
    list.as_array()?
        .iter()
        .filter_map(|m| m.get("parts").and_then(Value::as_array))
        .flatten()
        .find(|p| p.get("type").and_then(Value::as_str) == Some(part))
        .cloned()
}

/// A tool span's arguments: its attributes, else the span events the Strands tracer writes (a
/// `gen_ai.tool.message` holding the input, or a details event with a `tool_call` part).
pub(super) fn tool_arguments(s: &Span) -> Option<String> {
    s.attr("gen_ai.tool.call.arguments")
        .or_else(|| s.attr("tool_arguments"))
        .or_else(|| oi::tool_arguments(s))
        .map(text_of)
        .or_else(|| {
            tool_event(s, "gen_ai.tool.message")
                .and_then(|a| a.get("content"))
                .filter(|c| !c.is_null())
                .map(text_of)
        })
        .or_else(|| {
            details_part(s, "gen_ai.input.messages", "tool_call")
                .and_then(|p| p.get("arguments").filter(|a| !a.is_null()).map(text_of))
        })
}

/// A tool span's result: its attributes, else its `gen_ai.choice` event (Strands) or a details
/// event with a `tool_call_response` part.
pub(super) fn tool_result(s: &Span) -> Option<String> {
    s.attr("gen_ai.tool.call.result")
        .or_else(|| s.attr("tool_response"))
        .or_else(|| oi::tool_result(s))
        .map(text_of)
        .or_else(|| {
            tool_event(s, "gen_ai.choice")
                .and_then(|a| a.get("message"))
                .filter(|m| !m.is_null())
                .map(result_text)
        })
        .or_else(|| {
            details_part(s, "gen_ai.output.messages", "tool_call_response").and_then(|p| {
                p.get("response")
                    .or_else(|| p.get("result"))
                    .filter(|r| !r.is_null())
                    .map(result_text)
            })
        })
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
