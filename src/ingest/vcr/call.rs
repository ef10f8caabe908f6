//! A model call read from its wire shape into one neutral form: the request (messages, output
//! contract), the response (message, stop) and the retry prompts; the providers map onto it.

pub(super) use crate::ingest::trajectory::{ChatMessage, ChatToolCall};
use crate::js;
use crate::model::Role;
use serde_json::Value;
use std::collections::BTreeMap;

/// The text pydantic-ai ends every retry prompt with.
pub(super) const RETRY_SUFFIX: &str = "Fix the errors and try again.";
/// The prefix newer pydantic-ai versions put before a retry prompt's errors.
pub(super) const FEEDBACK_PREFIX: &str = "Validation feedback:";
/// The name prefix of output tools.
pub(super) const OUTPUT_TOOL_PREFIX: &str = "final_result";
/// Output tools other libraries force with `tool_choice` and whose call they hand back as the
/// answer, echoing its arguments as assistant text when the conversation goes on (Mirascope's).
pub(super) const LIBRARY_OUTPUT_TOOLS: &[&str] = &["__mirascope_formatted_output_tool__"];

/// Is a tool of this name an output tool: its call's arguments the structured answer, not a
/// landing?
pub(super) fn is_output_tool(name: &str) -> bool {
    name.starts_with(OUTPUT_TOOL_PREFIX) || LIBRARY_OUTPUT_TOOLS.contains(&name)
}

/// Does the head of a file look like a cassette?
pub fn looks_like_cassette(text: &str) -> bool {
    text.starts_with("interactions:") || text.contains("\ninteractions:")
}

/// A user or tool message that only asks the model to try again (a schema retry or a
/// validation error fed back): it starts no turn.
pub(super) fn is_retry_prompt(m: &ChatMessage) -> bool {
    matches!(m.role, Role::User | Role::Tool) && is_retry_text(&m.text)
}

pub(super) fn is_retry_text(text: &str) -> bool {
    let t = text.trim_end();
    t.ends_with(RETRY_SUFFIX) || t.starts_with(FEEDBACK_PREFIX)
}

/// The output contract a request declares.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct ContractSpec {
    pub(super) mode: String,
    pub(super) schema: Option<Value>,
    pub(super) tools: BTreeMap<String, Value>,
}

/// A request in neutral form.
#[derive(Debug, Clone)]
pub(super) struct Request {
    pub(super) messages: Vec<ChatMessage>,
    pub(super) contract: Option<ContractSpec>,
    pub(super) previous_response_id: Option<String>,
    pub(super) model: Option<String>,
    /// The provider that read it, and reads its response.
    pub(super) provider: &'static dyn Provider,
    pub(super) uri: String,
    /// Not a model call (a token count).
    pub(super) auxiliary: bool,
}

/// A response in neutral form.
#[derive(Debug, Clone, Default)]
pub(super) struct Response {
    pub(super) message: Option<ChatMessage>,
    pub(super) stop: Option<String>,
    pub(super) id: Option<String>,
    pub(super) status: Option<i64>,
    /// Why the content could not be read, when it could not.
    pub(super) unreadable: Option<String>,
}

pub(super) fn s(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

pub(super) fn arr<'v>(v: &'v Value, key: &str) -> &'v [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Arguments as JSON text (providers send a string or an object).
pub(super) fn args_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => js::stringify(other),
    }
}

/// Text of a content value: a string, or a list of parts with `text`.
pub(super) fn content_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.clone()),
                other => other
                    .get("text")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .filter(|_| {
                        !matches!(
                            other.get("type").and_then(Value::as_str),
                            Some("thinking" | "reasoning" | "redacted_thinking")
                        )
                    }),
            })
            .collect::<Vec<_>>()
            .join(""),
        Some(Value::Null) | None => String::new(),
        Some(other) => js::stringify(other),
    }
}

// ---------------------------------------------------------------------------------------------
// Output contracts

/// A schema given as JSON text (Bedrock, xAI) or as a value.
pub(super) fn schema_value(v: &Value) -> Option<Value> {
    match v {
        Value::String(t) => js::parse_json(t).ok(),
        Value::Object(_) => Some(v.clone()),
        _ => None,
    }
}

/// The JSON Schema a prompted-output instruction quotes: the first JSON object after the word
/// `schema`.
pub(super) fn prompted_schema(text: &str) -> Option<Value> {
    let lower = text.to_lowercase();
    let at = lower.find("respond with a json object")?;
    let rest = &text[at..];
    let brace = rest.find('{')?;
    let mut stream = serde_json::Deserializer::from_str(&rest[brace..]).into_iter::<Value>();
    match stream.next() {
        Some(Ok(v @ Value::Object(_))) => Some(v),
        _ => None,
    }
}

pub(super) fn output_tools(tools: &[(String, Value)]) -> BTreeMap<String, Value> {
    tools
        .iter()
        .filter(|(name, _)| is_output_tool(name))
        .map(|(n, s)| (n.clone(), s.clone()))
        .collect()
}

/// Decide the contract from what a request carries: a native schema wins, then output tools,
/// then a prompted instruction.
pub(super) fn contract_of(
    native: Option<Value>,
    json_mode: bool,
    tools: &[(String, Value)],
    instructions: &[String],
) -> Option<ContractSpec> {
    if let Some(schema) = native {
        return Some(ContractSpec {
            mode: "native".into(),
            schema: Some(schema),
            tools: BTreeMap::new(),
        });
    }
    let out_tools = output_tools(tools);
    if !out_tools.is_empty() {
        return Some(ContractSpec {
            mode: "tool".into(),
            schema: None,
            tools: out_tools,
        });
    }
    let prompted = instructions.iter().find_map(|t| prompted_schema(t));
    if prompted.is_some() || json_mode {
        return Some(ContractSpec {
            mode: "prompted".into(),
            schema: prompted,
            tools: BTreeMap::new(),
        });
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Providers

/// One provider's wire shapes, each mapped onto the neutral request and response.
pub(super) trait Provider: Sync {
    /// The name each model call's payload records.
    fn name(&self) -> &'static str;
    /// Does a request (its JSON body and URI) have this provider's shape? Asked in the order of
    /// `PROVIDERS` (in `vcr/mod.rs`); a request can pass more than one test, so the order is
    /// part of the rule.
    fn matches(&self, body: &Value, uri: &str) -> bool;
    /// Read the request's messages and output contract.
    fn parse_request(&self, body: &Value, req: &mut Request);
    /// Read the response's message and stop (its id is read before, the same for all).
    fn parse_response(&self, body: &Value, resp: &mut Response);
    /// The body a non-streamed call returns, from a streamed response's event chunks (OpenAI
    /// chat deltas for a provider without a stream form of its own).
    fn assemble_stream(&self, chunks: &[Value]) -> Value;
}

impl std::fmt::Debug for dyn Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A request read by the given provider.
pub(super) fn request_as(provider: &'static dyn Provider, body: &Value, uri: &str) -> Request {
    let mut req = Request {
        messages: Vec::new(),
        contract: None,
        previous_response_id: None,
        model: s(body, "model"),
        provider,
        uri: uri.to_string(),
        // Token counts (Anthropic's `count_tokens`, Gemini's `:countTokens`, OpenAI Responses'
        // `input_tokens`) are not model calls.
        auxiliary: uri.contains("count_tokens")
            || uri.contains(":countTokens")
            || uri.ends_with("/input_tokens"),
    };
    provider.parse_request(body, &mut req);
    req
}

pub(super) fn role_of(v: &Value) -> Option<Role> {
    let r = v.get("role").and_then(Value::as_str)?;
    Role::parse(r.trim_start_matches("ROLE_").to_lowercase().as_str())
}

// ---------------------------------------------------------------------------------------------
// Responses

/// The provider's stop in the framework's vocabulary when it is one of the stops under which a
/// structured answer fails; otherwise as recorded.
pub(super) fn normalise_stop(raw: &str) -> String {
    match raw {
        "length" | "max_tokens" | "MAX_TOKENS" | "max_output_tokens" | "MAX_TOKENS_REACHED" => {
            "max_tokens".into()
        }
        "content_filter"
        | "refusal"
        | "SAFETY"
        | "RECITATION"
        | "PROHIBITED_CONTENT"
        | "BLOCKLIST"
        | "SPII"
        | "guardrail_intervened"
        | "content_filtered" => "refusal".into(),
        "model_context_window_exceeded" => "model_context_window_exceeded".into(),
        other => other.to_string(),
    }
}

pub(super) fn parse_response(provider: &dyn Provider, body: &Value) -> Response {
    let mut resp = Response {
        id: s(body, "id").or_else(|| s(body, "responseId")),
        ..Response::default()
    };
    provider.parse_response(body, &mut resp);
    resp
}

/// Assemble a streamed (server-sent events) response into the body a non-streamed call returns.
pub(super) fn assemble_stream(provider: &dyn Provider, text: &str) -> Option<Value> {
    let mut chunks: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| !d.is_empty() && *d != "[DONE]")
        .filter_map(|d| js::parse_json(d).ok())
        .collect();
    if chunks.is_empty() {
        // A stream of one JSON event per line (Cohere v1), without server-sent event framing.
        chunks = text
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with('{'))
            .filter_map(|l| js::parse_json(l).ok())
            .collect();
    }
    if chunks.is_empty() {
        return None;
    }
    // OpenAI Responses: the completed event holds the whole response.
    if let Some(done) = chunks
        .iter()
        .rev()
        .find_map(|c| c.get("response").filter(|r| r.get("output").is_some()))
    {
        return Some(done.clone());
    }
    Some(provider.assemble_stream(&chunks))
}

// ---------------------------------------------------------------------------------------------
// Retry prompts

/// What a retry prompt says: stage, the validator's words, the first failing path.
pub(super) fn retry_details(text: &str) -> (String, String, Option<String>) {
    let mut body = text.trim_end();
    body = body.strip_suffix(RETRY_SUFFIX).unwrap_or(body).trim_end();
    body = body
        .strip_prefix(FEEDBACK_PREFIX)
        .unwrap_or(body)
        .trim_start();
    let error = body.to_string();
    // A list of validation errors in a ```json fence.
    let listed = body
        .find("```json")
        .and_then(|at| {
            let rest = &body[at + "```json".len()..];
            let end = rest.find("```")?;
            js::parse_json(rest[..end].trim()).ok()
        })
        .and_then(|v| v.as_array().cloned());
    match listed {
        Some(items) => {
            let json_invalid = items
                .iter()
                .any(|i| s(i, "type").as_deref() == Some("json_invalid"));
            let path = items.first().map(|i| {
                arr(i, "loc")
                    .iter()
                    .map(|p| match p {
                        Value::String(s) => s.clone(),
                        other => js::stringify(other),
                    })
                    .collect::<Vec<_>>()
                    .join(".")
            });
            let stage = if json_invalid {
                "json-parse"
            } else {
                "schema-validate"
            };
            (stage.into(), error, path.filter(|p| !p.is_empty()))
        }
        // A plain request to answer in the required shape: no structured value could be read.
        None => ("json-parse".into(), error, None),
    }
}
