//! VCR HTTP cassettes of model calls (the YAML files pydantic-ai's test suite records):
//! `interactions[{request{method, uri, parsed_body | body}, response{status, parsed_body | body}}]`.
//!
//! A cassette is one conversation (its id: the cassette's folder and file stem). Each interaction
//! is one model call, and each request re-sends the whole history, so the history is rebuilt once:
//! a request that repeats the previous request's messages and adds some continues the same chain
//! (only the added messages are new); an OpenAI Responses request naming the previous response
//! (`previous_response_id`) carries only the new items; any other request starts a new chain. A
//! chain splits into runs at user prompts: not at the framework's retry prompts, and not at user
//! messages the harness sends while the model's turn is still open (after a tool result, before
//! an answer), which are kept as system text.
//!
//! Providers differ in their wire shapes; each request and response is first mapped onto one
//! message form: OpenAI chat completions and its many compatible servers (Groq, Ollama, Mistral,
//! Cerebras, OpenRouter, Hugging Face, ...), OpenAI Responses, Anthropic Messages, Google Gemini,
//! Amazon Bedrock Converse, Cohere v1 and v2 and xAI's recorded gRPC samples. Streamed responses
//! (server-sent events, or one JSON event per line) are assembled, and gzip- or deflate-encoded
//! bodies decoded. What cannot be mapped is quarantined with the reason.
//!
//! Structured output is read from the request: an output tool (pydantic-ai's `final_result`,
//! or a library's forced output tool such as Mirascope's `__mirascope_formatted_output_tool__`,
//! whose answer a later request carries back as assistant text; its `parameters` the JSON
//! Schema), a native format (`response_format` json_schema, Responses `text.format`,
//! Gemini `responseJsonSchema` / `responseSchema`, Anthropic `output_format` /
//! `output_config.format`, Bedrock `outputConfig.textFormat`), or a prompted JSON instruction
//! (the schema is read out of the instruction). Each run with one gets an `output-contract` row;
//! each model call whose response is a would-be-final answer gets an `answer` mark in its payload;
//! each retry prompt that rejected such an answer (the next request ends with validation errors
//! and "Fix the errors and try again.") becomes a `schema-retry` verdict row. The schema-attempt
//! check reads only those neutral rows.

mod anthropic;
mod bedrock;
mod body;
mod cohere;
mod gemini;
mod openai_chat;
mod openai_responses;
mod xai;
mod yaml;

use body::{body_of, Body};
use yaml::{parse_yaml, yaml_to_json};

use crate::ingest::limits::read_document;
use crate::ingest::trajectory::{ChatMessage, ChatToolCall};
use crate::ingest::{Input, Locator, Quarantined, Sink};
use crate::js;
use crate::model::vocab;
use crate::model::{Conversation, Event, EventKind, LandingFlags, Role, Run};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The text pydantic-ai ends every retry prompt with.
const RETRY_SUFFIX: &str = "Fix the errors and try again.";
/// The prefix newer pydantic-ai versions put before a retry prompt's errors.
const FEEDBACK_PREFIX: &str = "Validation feedback:";
/// The name prefix of output tools.
const OUTPUT_TOOL_PREFIX: &str = "final_result";
/// Output tools other libraries force with `tool_choice` and whose call they hand back as the
/// answer, echoing its arguments as assistant text when the conversation goes on (Mirascope's).
const LIBRARY_OUTPUT_TOOLS: &[&str] = &["__mirascope_formatted_output_tool__"];

/// Is a tool of this name an output tool: its call's arguments the structured answer, not a
/// landing?
fn is_output_tool(name: &str) -> bool {
    name.starts_with(OUTPUT_TOOL_PREFIX) || LIBRARY_OUTPUT_TOOLS.contains(&name)
}

/// Does the head of a file look like a cassette?
pub fn looks_like_cassette(text: &str) -> bool {
    text.starts_with("interactions:") || text.contains("\ninteractions:")
}

/// A user or tool message that only asks the model to try again (a schema retry or a
/// validation error fed back): it starts no turn.
fn is_retry_prompt(m: &ChatMessage) -> bool {
    matches!(m.role, Role::User | Role::Tool) && is_retry_text(&m.text)
}

fn is_retry_text(text: &str) -> bool {
    let t = text.trim_end();
    t.ends_with(RETRY_SUFFIX) || t.starts_with(FEEDBACK_PREFIX)
}

/// The output contract a request declares.
#[derive(Debug, Clone, PartialEq, Default)]
struct ContractSpec {
    mode: String,
    schema: Option<Value>,
    tools: BTreeMap<String, Value>,
}

/// A request in neutral form.
#[derive(Debug, Clone)]
struct Request {
    messages: Vec<ChatMessage>,
    contract: Option<ContractSpec>,
    previous_response_id: Option<String>,
    model: Option<String>,
    /// The provider that read it, and reads its response.
    provider: &'static dyn Provider,
    uri: String,
    /// Not a model call (a token count).
    auxiliary: bool,
}

/// A response in neutral form.
#[derive(Debug, Clone, Default)]
struct Response {
    message: Option<ChatMessage>,
    stop: Option<String>,
    id: Option<String>,
    status: Option<i64>,
    /// Why the content could not be read, when it could not.
    unreadable: Option<String>,
}

fn s(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn arr<'v>(v: &'v Value, key: &str) -> &'v [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Arguments as JSON text (providers send a string or an object).
fn args_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => js::stringify(other),
    }
}

/// Text of a content value: a string, or a list of parts with `text`.
fn content_text(v: Option<&Value>) -> String {
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
fn schema_value(v: &Value) -> Option<Value> {
    match v {
        Value::String(t) => js::parse_json(t).ok(),
        Value::Object(_) => Some(v.clone()),
        _ => None,
    }
}

/// The JSON Schema a prompted-output instruction quotes: the first JSON object after the word
/// `schema`.
fn prompted_schema(text: &str) -> Option<Value> {
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

fn output_tools(tools: &[(String, Value)]) -> BTreeMap<String, Value> {
    tools
        .iter()
        .filter(|(name, _)| is_output_tool(name))
        .map(|(n, s)| (n.clone(), s.clone()))
        .collect()
}

/// Decide the contract from what a request carries: a native schema wins, then output tools,
/// then a prompted instruction.
fn contract_of(
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
trait Provider: Sync {
    /// The name each model call's payload records.
    fn name(&self) -> &'static str;
    /// Does a request (its JSON body and URI) have this provider's shape? Asked in the order of
    /// [`PROVIDERS`]; a request can pass more than one test, so the order is part of the rule.
    fn matches(&self, body: &Value, uri: &str) -> bool;
    /// Read the request's messages and output contract.
    fn parse_request(&self, body: &Value, req: &mut Request);
    /// Read the response's message and stop (its id is read before, the same for all).
    fn parse_response(&self, body: &Value, resp: &mut Response);
    /// The body a non-streamed call returns, from a streamed response's event chunks. A provider
    /// without a stream form of its own is read as OpenAI chat deltas.
    fn assemble_stream(&self, chunks: &[Value]) -> Value {
        openai_chat::assemble_deltas(chunks)
    }
}

impl std::fmt::Debug for dyn Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The HTTP providers in matching order: the first whose test a request passes reads it and its
/// response. (xAI's gRPC samples are known by the interaction's shape instead.)
const PROVIDERS: &[&dyn Provider] = &[
    &gemini::Gemini,
    &openai_responses::OpenAiResponses,
    &bedrock::Bedrock,
    &anthropic::Anthropic,
    &cohere::Cohere,
    &openai_chat::OpenAiChat,
];

// ---------------------------------------------------------------------------------------------
// Requests

fn parse_request(body: &Value, uri: &str) -> Result<Request, String> {
    let provider = PROVIDERS
        .iter()
        .copied()
        .find(|p| p.matches(body, uri))
        .ok_or_else(|| {
            "request body is neither chat messages, Responses input, Anthropic messages, \
             Gemini contents nor Bedrock messages"
                .to_string()
        })?;
    Ok(request_as(provider, body, uri))
}

/// A request read by the given provider.
fn request_as(provider: &'static dyn Provider, body: &Value, uri: &str) -> Request {
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

fn role_of(v: &Value) -> Option<Role> {
    let r = v.get("role").and_then(Value::as_str)?;
    Role::parse(r.trim_start_matches("ROLE_").to_lowercase().as_str())
}

// ---------------------------------------------------------------------------------------------
// Responses

/// The provider's stop in the framework's vocabulary when it is one of the stops under which a
/// structured answer fails; otherwise as recorded.
fn normalise_stop(raw: &str) -> String {
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

fn parse_response(provider: &dyn Provider, body: &Value) -> Response {
    let mut resp = Response {
        id: s(body, "id").or_else(|| s(body, "responseId")),
        ..Response::default()
    };
    provider.parse_response(body, &mut resp);
    resp
}

/// Assemble a streamed (server-sent events) response into the body a non-streamed call returns.
fn assemble_stream(provider: &dyn Provider, text: &str) -> Option<Value> {
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
fn retry_details(text: &str) -> (String, String, Option<String>) {
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

// ---------------------------------------------------------------------------------------------
// Chains and runs

/// Where a message of a chain came from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Origin {
    /// Sent in the request of interaction `k` (an index into the chain's interactions).
    Request(usize),
    /// The response of interaction `k`.
    Response(usize),
    /// Sent in the chain's first request, but a message the conversation's earlier chains
    /// already hold (the history re-sent in another shape, or an identical request again): part
    /// of what the model saw, not new work.
    Replay,
    /// Sent in the request of interaction `k`, an assistant message the previous model call did
    /// not return: history the framework wrote itself (a tool search it presents as a call).
    /// Kept as a message, never landed.
    Written(usize),
}

impl Origin {
    /// The request (index into the chain's interactions) that sent the message, if a request
    /// did.
    fn request(self) -> Option<usize> {
        match self {
            Origin::Request(k) | Origin::Written(k) => Some(k),
            Origin::Replay => Some(0),
            Origin::Response(_) => None,
        }
    }
}

struct Exchange {
    record: usize,
    request: Request,
    response: Response,
}

struct Chain {
    exchanges: Vec<Exchange>,
    /// The history in order, each message with its origin.
    items: Vec<(ChatMessage, Origin)>,
}

fn same_message(a: &ChatMessage, b: &ChatMessage) -> bool {
    a.role == b.role && (a.role != Role::User || a.text.trim() == b.text.trim())
}

/// A call's identity across wire shapes: its name and its arguments as a value (ids differ
/// between providers, and key order between serialisers).
fn call_key(c: &ChatToolCall) -> (String, Value) {
    let args = js::parse_json(&c.arguments).unwrap_or_else(|_| Value::String(c.arguments.clone()));
    (c.name.clone(), args)
}

/// What the conversation already holds, to recognise it when a request sends it again in
/// another shape: user texts, assistant texts, assistant calls, and the calls that got a result.
#[derive(Default)]
struct Known {
    user: Vec<String>,
    assistant: Vec<String>,
    calls: Vec<(String, Value)>,
    answered: Vec<(String, Value)>,
    /// The arguments of output-tool calls: a library that forced the call sends its answer
    /// back as assistant text holding them.
    outputs: Vec<Value>,
}

impl Known {
    fn of<'m>(messages: impl IntoIterator<Item = &'m ChatMessage>) -> Known {
        let mut known = Known::default();
        let mut by_id: Vec<(String, (String, Value))> = Vec::new();
        for m in messages {
            let text = m.text.trim();
            match m.role {
                Role::User if !text.is_empty() => known.user.push(text.to_string()),
                Role::Assistant => {
                    if !text.is_empty() {
                        known.assistant.push(text.to_string());
                    }
                    for c in &m.tool_calls {
                        let key = call_key(c);
                        if let Some(id) = &c.id {
                            by_id.push((id.clone(), key.clone()));
                        }
                        if is_output_tool(&c.name) {
                            known.outputs.push(key.1.clone());
                        }
                        known.calls.push(key);
                    }
                }
                Role::Tool => {
                    let id = m.call_id.as_deref();
                    if let Some((_, key)) = by_id.iter().find(|(i, _)| Some(i.as_str()) == id) {
                        known.answered.push(key.clone());
                    }
                }
                _ => {}
            }
        }
        known
    }

    /// Is a user or assistant message one the conversation already holds?
    fn holds(&self, m: &ChatMessage) -> bool {
        let text = m.text.trim();
        match m.role {
            Role::User => !text.is_empty() && self.user.iter().any(|t| t == text),
            Role::Assistant => {
                (!text.is_empty() && self.assistant.iter().any(|t| t == text))
                    || self.is_output_echo(text)
                    || m.tool_calls
                        .iter()
                        .any(|c| self.calls.contains(&call_key(c)))
            }
            _ => false,
        }
    }
}

impl Known {
    /// Is an assistant text an output-tool call's arguments sent back as text (the same JSON
    /// object, however it is spaced)?
    fn is_output_echo(&self, text: &str) -> bool {
        !self.outputs.is_empty()
            && text.starts_with('{')
            && js::parse_json(text).is_ok_and(|v| self.outputs.contains(&v))
    }
}

/// How many leading messages of a request that does not continue its chain re-send what the
/// conversation already holds: up to its last user or assistant message the conversation holds
/// (a request sends the history first and new messages after it, so everything before that
/// message is history, however the framework reshaped it), then the tool results that answer
/// calls of that part which had their result already. Also the index of that last message held;
/// `None` when the request re-sends nothing.
fn replayed_len(known: &Known, messages: &[ChatMessage]) -> Option<(usize, usize)> {
    // A history re-sent starts where the conversation started: its user messages are ones the
    // conversation holds, up to the first new one.
    let first_new_user = messages
        .iter()
        .position(|m| m.role == Role::User && !known.holds(m))
        .unwrap_or(messages.len());
    let last = messages[..first_new_user]
        .iter()
        .rposition(|m| known.holds(m))?;
    let mut end = last + 1;
    let mut answered = known.answered.clone();
    while let Some(m) = messages.get(end).filter(|m| m.role == Role::Tool) {
        let call = messages[..end]
            .iter()
            .flat_map(|a| &a.tool_calls)
            .find(|c| c.id.is_some() && c.id == m.call_id)
            .map(call_key);
        match call.and_then(|k| answered.iter().position(|a| *a == k)) {
            Some(i) => {
                answered.remove(i);
                end += 1;
            }
            None => break,
        }
    }
    Some((end, last))
}

fn continues(prev: &Exchange, next: &Request) -> bool {
    if let (Some(p), Some(id)) = (&next.previous_response_id, &prev.response.id) {
        return p == id;
    }
    let old = &prev.request.messages;
    let new = &next.messages;
    new.len() > old.len() && old.iter().zip(new).all(|(a, b)| same_message(a, b))
}

/// How a request that does not strictly continue its chain relates to the conversation so far.
enum Resend {
    /// It shares nothing with it: a chain of its own.
    Fresh,
    /// It re-sends this many leading messages of the conversation, up to and including the
    /// previous model call's answer (or re-sends all of it after a failed call): the same chain,
    /// in another shape; only the messages after them are new.
    Continues(usize),
    /// It re-sends this many leading messages but not the previous answer (an identical request
    /// again, or a new run handed the history): a chain of its own whose leading messages are
    /// not new.
    Replays(usize),
}

/// An answer with neither text nor calls (a queued background response, a refusal with no
/// content): nothing a later request could re-send.
fn is_empty(m: &ChatMessage) -> bool {
    m.text.trim().is_empty() && m.tool_calls.is_empty()
}

fn resend(chains: &[Chain], prev: &Exchange, request: &Request) -> Resend {
    let answer = prev.response.message.as_ref().filter(|a| !is_empty(a));
    let known = Known::of(
        chains
            .iter()
            .flat_map(|c| c.items.iter().map(|(m, _)| m))
            .chain(answer),
    );
    let Some((n, last)) = replayed_len(&known, &request.messages) else {
        return Resend::Fresh;
    };
    // The history re-sent ends with the previous answer: what follows continues from it.
    let ends_with_answer = answer.is_some_and(|a| {
        let m = &request.messages[last];
        m.role == a.role && Known::of([a]).holds(m)
    });
    if ends_with_answer || (answer.is_none() && n == request.messages.len()) {
        Resend::Continues(n)
    } else {
        Resend::Replays(n)
    }
}

/// The origin of a message request `k` adds after the previous answer: an assistant message
/// there was not returned by the previous model call, so the framework wrote it.
fn new_origin(m: &ChatMessage, k: usize) -> Origin {
    if m.role == Role::Assistant {
        Origin::Written(k)
    } else {
        Origin::Request(k)
    }
}

/// Group exchanges into chains and rebuild each chain's history once.
fn chains(exchanges: Vec<Exchange>) -> Vec<Chain> {
    let mut out: Vec<Chain> = Vec::new();
    for ex in exchanges {
        let prev = out.last().and_then(|c| c.exchanges.last());
        let how = match prev {
            Some(prev) if continues(prev, &ex.request) => None,
            Some(prev) => Some(resend(&out, prev, &ex.request)),
            None => Some(Resend::Fresh),
        };
        let replayed = match how {
            Some(Resend::Continues(n)) => {
                // The same chain in another shape: the previous answer as the provider returned
                // it, then what is new.
                let chain = out.last_mut().expect("a chain");
                let k = chain.exchanges.len();
                if let Some(m) = chain.exchanges[k - 1].response.message.clone() {
                    chain.items.push((m, Origin::Response(k - 1)));
                }
                for m in &ex.request.messages[n..] {
                    chain.items.push((m.clone(), new_origin(m, k)));
                }
                chain.exchanges.push(ex);
                continue;
            }
            Some(Resend::Replays(n)) => n,
            _ => 0,
        };
        if how.is_some() {
            out.push(Chain {
                exchanges: Vec::new(),
                items: Vec::new(),
            });
        }
        let chain = out.last_mut().expect("a chain");
        let k = chain.exchanges.len();
        if k == 0 {
            for (i, m) in ex.request.messages.iter().enumerate() {
                let origin = if i < replayed {
                    Origin::Replay
                } else {
                    Origin::Request(0)
                };
                chain.items.push((m.clone(), origin));
            }
        } else {
            let prev = &chain.exchanges[k - 1];
            let prev_len = prev.request.messages.len();
            let (mut added, appended): (Vec<ChatMessage>, bool) =
                if ex.request.previous_response_id.is_some()
                    && ex.request.previous_response_id == prev.response.id
                {
                    (ex.request.messages.clone(), true)
                } else {
                    (ex.request.messages[prev_len..].to_vec(), false)
                };
            // The previous response, as the framework re-sent it (its ids are the ones the tool
            // results answer), else as the provider returned it.
            let resent: Vec<ChatMessage> = if appended {
                Vec::new()
            } else {
                let n = added
                    .iter()
                    .take_while(|m| m.role == Role::Assistant)
                    .count();
                added.drain(..n).collect()
            };
            if !resent.is_empty() {
                // A failed call (Groq's `tool_use_failed`) has no answer of its own; the framework
                // re-sent what the model generated, so that is the answer.
                let answer = chain.exchanges[k - 1].response.message.as_ref();
                let returned = answer.filter(|a| !is_empty(a)).map(|a| Known::of([a]));
                if answer.is_none() {
                    chain.exchanges[k - 1].response.message = resent.first().cloned();
                }
                for m in resent {
                    // An assistant message the model did not return (a tool search the framework
                    // presents as a call) is the framework's.
                    let origin = match &returned {
                        Some(r) if !r.holds(&m) && !m.tool_calls.is_empty() => Origin::Written(k),
                        _ => Origin::Response(k - 1),
                    };
                    chain.items.push((m, origin));
                }
            } else if appended {
                // Chained by id: nothing is re-sent, so the provider's answer is the history.
                if let Some(m) = chain.exchanges[k - 1].response.message.clone() {
                    chain.items.push((m, Origin::Response(k - 1)));
                }
            }
            // Otherwise the framework dropped the previous answer (an empty one): it is not part
            // of the history, though its model call is still written.
            for m in added {
                let origin = new_origin(&m, k);
                chain.items.push((m, origin));
            }
        }
        chain.exchanges.push(ex);
    }
    for chain in &mut out {
        let last = chain.exchanges.len() - 1;
        if let Some(m) = chain.exchanges[last].response.message.clone() {
            chain.items.push((m, Origin::Response(last)));
        }
    }
    out
}

/// The conversation id of a cassette: its folder and file stem.
fn conversation_id(display: &str) -> String {
    let path = std::path::Path::new(display);
    let stem = path
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_default();
    let stem = stem
        .strip_suffix(".yaml")
        .or_else(|| stem.strip_suffix(".yml"))
        .unwrap_or(&stem)
        .to_string();
    match path
        .parent()
        .and_then(|p| p.file_name())
        .map(|f| f.to_string_lossy().to_string())
    {
        Some(dir) => format!("{dir}/{stem}"),
        None => stem,
    }
}

fn calls_json(calls: &[ChatToolCall]) -> String {
    let list: Vec<Value> = calls
        .iter()
        .map(|c| {
            json!({"id": c.id, "name": c.name,
                   "arguments": js::parse_json(&c.arguments).unwrap_or_else(|_| json!(c.arguments))})
        })
        .collect();
    js::stringify(&Value::Array(list))
}

fn message_event(kind: EventKind, m: &ChatMessage) -> Event {
    let mut e = Event::new(kind);
    e.role = Some(m.role);
    e.text = Some(m.text.clone());
    e.call_id = m.call_id.clone();
    e.tool_name = m.tool_name.clone();
    e.error = m.error;
    if !m.tool_calls.is_empty() {
        e.arguments = Some(calls_json(&m.tool_calls));
    }
    e
}

/// Which of a chain's items are the harness talking inside the agent's turn: a user message
/// (not a retry prompt) sent in a later request while the turn is still open, after the model
/// called a tool and before it answered (with text, or by calling an output tool). pydantic-ai
/// sends such messages after tool results (a file a tool returned, `This is file 241a70:`; an
/// announcement of tools that became available); no user has spoken there. The first request's
/// messages are the history the run was given and are taken as written.
fn harness_items(chain: &Chain) -> Vec<bool> {
    let output: Vec<&String> = chain
        .exchanges
        .iter()
        .filter_map(|ex| ex.request.contract.as_ref())
        .flat_map(|c| c.tools.keys())
        .collect();
    let is_output = |name: &str| output.iter().any(|n| *n == name);
    let mut output_ids: Vec<&str> = Vec::new();
    let mut open = false;
    let mut out = Vec::with_capacity(chain.items.len());
    for (m, origin) in &chain.items {
        let mut harness = false;
        match m.role {
            Role::Assistant => {
                for c in m.tool_calls.iter().filter(|c| is_output(&c.name)) {
                    if let Some(id) = &c.id {
                        output_ids.push(id);
                    }
                }
                open = m.tool_calls.iter().any(|c| !is_output(&c.name));
            }
            Role::Tool => {
                let to_output = m.tool_name.as_deref().is_some_and(is_output)
                    || m.call_id
                        .as_deref()
                        .is_some_and(|id| output_ids.contains(&id));
                open |= !to_output;
            }
            Role::User if is_retry_prompt(m) => {}
            Role::User => {
                harness = open && matches!(origin, Origin::Request(k) if *k > 0);
                open &= harness;
            }
            Role::System => open = false,
        }
        out.push(harness);
    }
    out
}

/// A chain item as the run keeps it: a harness message is system text.
fn as_kept(m: &ChatMessage, harness: bool) -> std::borrow::Cow<'_, ChatMessage> {
    if harness {
        std::borrow::Cow::Owned(ChatMessage {
            role: Role::System,
            ..m.clone()
        })
    } else {
        std::borrow::Cow::Borrowed(m)
    }
}

/// Build the runs of one chain. `first_turn` numbers the chain's first run.
fn chain_runs(chain: &Chain, conv_id: &str, source: &str, first_turn: u32) -> Vec<Run> {
    // Run boundaries: the first request's messages open run 0; a user prompt (not a retry
    // prompt, not the harness talking inside the turn) sent in a later request opens the next.
    let harness = harness_items(chain);
    let mut starts = vec![0usize];
    for (i, (m, origin)) in chain.items.iter().enumerate() {
        if let Origin::Request(k) = origin {
            if *k > 0 && m.role == Role::User && !is_retry_prompt(m) && !harness[i] {
                starts.push(i);
            }
        }
    }
    let run_of_item = |i: usize| starts.iter().rposition(|&s| s <= i).unwrap_or(0);
    // Each model call belongs to the run where its request's new messages start (a request
    // that added nothing stays with the run before it).
    let mut owner = vec![0usize; chain.exchanges.len()];
    for k in 1..chain.exchanges.len() {
        // The run in force when the request was sent: where its newest message sits.
        owner[k] = chain
            .items
            .iter()
            .rposition(|(_, o)| matches!(o, Origin::Request(j) | Origin::Written(j) if *j == k))
            .map(run_of_item)
            .unwrap_or(owner[k - 1]);
    }
    let mut runs = Vec::new();
    for (r, &start) in starts.iter().enumerate() {
        let end = starts.get(r + 1).copied().unwrap_or(chain.items.len());
        let items = &chain.items[start..end];
        let ks: Vec<usize> = (0..chain.exchanges.len())
            .filter(|k| owner[*k] == r)
            .collect();
        let turn = first_turn + r as u32;
        let mut b = RunBuilder::new(chain, &ks);
        b.run.run_id = format!("{conv_id}#{turn}");
        b.run.conversation_id = conv_id.to_string();
        b.run.turn = turn;
        b.run.format = crate::ingest::Format::Vcr.name().to_string();
        b.run.source = source.to_string();
        b.run.user_message = items
            .iter()
            .zip(&harness[start..end])
            .rfind(|((m, _), h)| m.role == Role::User && !is_retry_prompt(m) && !**h)
            .map(|((m, _), _)| m.text.clone());
        b.run.model = ks
            .first()
            .and_then(|k| chain.exchanges[*k].request.model.clone());
        for ((m, origin), h) in items.iter().zip(&harness[start..end]) {
            match origin {
                // Already written where the conversation first held it.
                Origin::Replay => continue,
                Origin::Request(j) => b.calls_before(*j),
                Origin::Written(j) => {
                    b.calls_before(*j);
                    b.framework_message(m);
                    continue;
                }
                Origin::Response(k) => b.calls_before(*k + 1),
            }
            b.message(&as_kept(m, *h));
        }
        b.calls_before(usize::MAX);
        // The history the model saw at the run's last model call.
        if let Some(&last_k) = ks.last() {
            let seen = chain
                .items
                .iter()
                .zip(&harness)
                .take_while(|((_, o), _)| *o != Origin::Response(last_k))
                .filter(|((_, o), _)| match o.request() {
                    Some(k) => k <= last_k,
                    None => matches!(o, Origin::Response(k) if *k < last_k),
                });
            for ((m, _), h) in seen {
                b.run
                    .events
                    .push(message_event(EventKind::Context, &as_kept(m, *h)));
            }
        }
        let mut run = b.run;
        run.answer = b.answer;
        run.renumber();
        runs.push(run);
    }
    runs
}

/// Writes one run's rows in order.
struct RunBuilder<'c> {
    chain: &'c Chain,
    run: Run,
    /// This run's model calls (indexes into the chain's exchanges) and how many were written.
    ks: Vec<usize>,
    written: usize,
    contract: Option<ContractSpec>,
    output_names: Vec<String>,
    /// Open landings: (event index, call id, tool name).
    pending: Vec<(usize, Option<String>, String)>,
    /// Calls the framework wrote into the history, not yet answered: (call id, tool name).
    framework_calls: Vec<(Option<String>, String)>,
    attempts: u32,
    /// The latest judged answer not yet followed by anything: (output call id, attempt,
    /// iteration); the call id is `None` for a text answer.
    open: Option<(Option<String>, u32, u32)>,
    answer: Option<String>,
}

impl<'c> RunBuilder<'c> {
    fn new(chain: &'c Chain, ks: &[usize]) -> RunBuilder<'c> {
        let contract = ks
            .iter()
            .find_map(|k| chain.exchanges[*k].request.contract.clone());
        let mut run = Run::default();
        if let Some(c) = &contract {
            let mut e = Event::new(EventKind::Other);
            e.source_type = Some(vocab::OUTPUT_CONTRACT.into());
            e.text = Some(c.mode.clone());
            e.payload = Some(js::stringify(&json!({
                "mode": c.mode,
                "schema": c.schema,
                "tools": c.tools,
                "terminalVerdicts": false,
            })));
            run.events.push(e);
        }
        RunBuilder {
            chain,
            run,
            ks: ks.to_vec(),
            written: 0,
            output_names: contract
                .as_ref()
                .map(|c| c.tools.keys().cloned().collect())
                .unwrap_or_default(),
            contract,
            pending: Vec::new(),
            framework_calls: Vec::new(),
            attempts: 0,
            open: None,
            answer: None,
        }
    }

    /// Write the model-call rows of this run's exchanges numbered below `limit`.
    fn calls_before(&mut self, limit: usize) {
        while self.written < self.ks.len() && self.ks[self.written] < limit {
            let k = self.ks[self.written];
            self.written += 1;
            let iteration = self.written as u32;
            self.model_call(k, iteration);
        }
    }

    fn model_call(&mut self, k: usize, iteration: u32) {
        let ex = &self.chain.exchanges[k];
        let m = ex.response.message.clone();
        let mut call = Event::new(EventKind::ModelCall);
        call.source_type = Some("http.response".into());
        call.role = Some(Role::Assistant);
        call.iteration = Some(iteration);
        call.error = ex.response.status.is_some_and(|c| c >= 400);
        if let Some(m) = &m {
            call.text = Some(m.text.clone());
            if !m.tool_calls.is_empty() {
                call.arguments = Some(calls_json(&m.tool_calls));
            }
        }
        let mut payload = json!({
            "provider": ex.request.provider.name(),
            "uri": ex.request.uri,
            "status": ex.response.status,
            "stopReason": ex.response.stop,
            "interaction": ex.record,
        });
        self.open = None;
        if let (Some(_), Some(m)) = (&self.contract, &m) {
            let out_call = m
                .tool_calls
                .iter()
                .find(|c| self.output_names.contains(&c.name));
            if out_call.is_some() || m.tool_calls.is_empty() {
                self.attempts += 1;
                let text = out_call
                    .map(|c| c.arguments.clone())
                    .unwrap_or_else(|| m.text.clone());
                self.answer = Some(text.clone());
                payload["answer"] = json!({"text": text, "tool": out_call.map(|c| c.name.clone())});
                self.open = Some((
                    out_call.and_then(|c| c.id.clone()),
                    self.attempts,
                    iteration,
                ));
            }
        }
        if self.contract.is_none() {
            if let Some(m) = m.as_ref().filter(|m| m.tool_calls.is_empty()) {
                self.answer = Some(m.text.clone());
            }
        }
        call.payload = Some(js::stringify(&payload));
        self.run.events.push(call);
    }

    /// An assistant message the framework wrote into the history: a message, and its calls are
    /// not landings (their results are not paired with the model's calls either).
    fn framework_message(&mut self, m: &ChatMessage) {
        self.run.events.push(message_event(EventKind::Message, m));
        for c in &m.tool_calls {
            self.framework_calls.push((c.id.clone(), c.name.clone()));
        }
    }

    fn is_output(&self, name: &str) -> bool {
        self.output_names.iter().any(|n| n == name)
    }

    fn message(&mut self, m: &ChatMessage) {
        let mut e = message_event(EventKind::Message, m);
        match m.role {
            Role::Assistant => {
                self.run.events.push(e);
                for c in &m.tool_calls {
                    if self.is_output(&c.name) {
                        continue;
                    }
                    let mut l = Event::new(EventKind::Landing);
                    l.role = Some(Role::Assistant);
                    l.tool_name = Some(c.name.clone());
                    l.call_id = c.id.clone();
                    l.arguments = Some(c.arguments.clone());
                    l.flags = LandingFlags::UNANSWERED;
                    self.run.events.push(l);
                    self.pending
                        .push((self.run.events.len() - 1, c.id.clone(), c.name.clone()));
                }
            }
            Role::Tool => {
                let to_output = m.tool_name.as_deref().is_some_and(|n| self.is_output(n))
                    || self
                        .open
                        .as_ref()
                        .is_some_and(|(id, ..)| id.is_some() && *id == m.call_id);
                if to_output {
                    // A retry prompt answering the output call rejects that attempt.
                    if is_retry_prompt(m) {
                        if let Some((Some(_), attempt, iteration)) = self.open.take() {
                            self.run.events.push(retry_verdict(m, attempt, iteration));
                        }
                    }
                    self.run.events.push(e);
                    return;
                }
                let by_id = m
                    .call_id
                    .as_ref()
                    .and_then(|id| self.pending.iter().position(|p| p.1.as_ref() == Some(id)));
                let to_written =
                    self.framework_calls
                        .iter()
                        .position(|(id, name)| match &m.call_id {
                            Some(c) => id.as_ref() == Some(c),
                            None => m.tool_name.as_ref() == Some(name),
                        });
                if let (None, Some(i)) = (by_id, to_written) {
                    // The result of a call the framework wrote: history, not a landing's.
                    self.framework_calls.remove(i);
                    self.run.events.push(e);
                    return;
                }
                let slot = by_id
                    .or_else(|| {
                        m.tool_name
                            .as_ref()
                            .and_then(|n| self.pending.iter().position(|p| p.2 == *n))
                    })
                    .or_else(|| (!self.pending.is_empty()).then_some(0));
                if let Some(i) = slot {
                    let (index, _, name) = self.pending.remove(i);
                    let landing = &mut self.run.events[index];
                    landing.text = Some(m.text.clone());
                    landing.error = m.error || is_retry_prompt(m);
                    landing.flags &= !LandingFlags::UNANSWERED;
                    if e.tool_name.is_none() {
                        e.tool_name = Some(name);
                    }
                }
                self.run.events.push(e);
            }
            Role::User => {
                if is_retry_prompt(m) {
                    if let Some((None, attempt, iteration)) = self.open.clone() {
                        self.run.events.push(retry_verdict(m, attempt, iteration));
                        self.open = None;
                    }
                }
                self.run.events.push(e);
            }
            Role::System => self.run.events.push(e),
        }
    }
}

fn retry_verdict(m: &ChatMessage, attempt: u32, iteration: u32) -> Event {
    let (stage, error, path) = retry_details(&m.text);
    let mut v = Event::new(EventKind::Verdict);
    v.source_type = Some("http.retry_prompt".into());
    v.text = Some(vocab::SCHEMA_RETRY.into());
    v.iteration = Some(iteration);
    v.call_id = m.call_id.clone();
    v.payload = Some(js::stringify(&json!({
        "type": "http.retry_prompt",
        "payload": {
            "attempt": attempt,
            "iteration": iteration,
            "stage": stage,
            "error": error,
            "path": path,
            "correctiveMessageHash": js::hash_hex(&m.text),
        }
    })));
    v
}

// ---------------------------------------------------------------------------------------------
// Reading a file

/// Read one cassette: each interaction is a record.
pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> std::io::Result<()> {
    // The YAML parser resolves `!!binary` to the base64 text; whether the cassette holds any
    // tells the body reader to look for it.
    let mut binary = false;
    let parsed = read_document(input.path, &input.limits)?.and_then(|bytes| {
        let text = String::from_utf8(bytes).map_err(|e| {
            let at = e.utf8_error().valid_up_to();
            format!("cassette is not valid UTF-8 (byte {at})")
        })?;
        binary = text.contains("!!binary");
        parse_yaml(&text, &input.limits)
    });
    let doc = match parsed {
        Ok(v) => yaml_to_json(v),
        Err(reason) => {
            sink.records_read(1);
            sink.quarantine(Quarantined::dropped(input.display, Locator::File, reason));
            return Ok(());
        }
    };
    let Some(interactions) = doc.get("interactions").and_then(Value::as_array) else {
        sink.records_read(1);
        sink.quarantine(Quarantined::dropped(
            input.display,
            Locator::File,
            "YAML document has no `interactions` list",
        ));
        return Ok(());
    };
    if interactions.is_empty() {
        sink.records_read(1);
        sink.quarantine(Quarantined::dropped(
            input.display,
            Locator::File,
            "cassette records no interaction",
        ));
        return Ok(());
    }
    sink.records_read(interactions.len() as u64);
    let mut exchanges = Vec::new();
    for (i, it) in interactions.iter().enumerate() {
        match exchange(i, it, binary, input, sink) {
            Ok(Some(ex)) => exchanges.push(ex),
            Ok(None) => {}
            Err(reason) => sink.quarantine(Quarantined::dropped(
                input.display,
                Locator::Record(i as u64),
                reason,
            )),
        }
    }
    if exchanges.is_empty() {
        return Ok(());
    }
    let conv_id = conversation_id(input.name);
    let first_record = exchanges[0].record as u64;
    let mut runs = Vec::new();
    for chain in chains(exchanges) {
        let first_turn = runs.len() as u32 + 1;
        runs.extend(chain_runs(&chain, &conv_id, input.display, first_turn));
    }
    sink.conversation(Conversation { id: conv_id, runs }, first_record);
    Ok(())
}

/// One interaction as an exchange; `Ok(None)` when it is kept as nothing (a non-model call that
/// was reported).
fn exchange(
    i: usize,
    it: &Value,
    binary: bool,
    input: &Input<'_>,
    sink: &mut dyn Sink,
) -> Result<Option<Exchange>, String> {
    // xAI's gRPC recordings keep JSON samples of both sides.
    if let (Some(rq), Some(rs)) = (
        it.get("request_sample").and_then(|r| r.get("json")),
        it.get("response_sample").and_then(|r| r.get("json")),
    ) {
        let request = request_as(&xai::Xai, rq, "xai-grpc");
        let response = parse_response(&xai::Xai, rs);
        return Ok(Some(Exchange {
            record: i,
            request,
            response,
        }));
    }
    let Some(req_side) = it.get("request") else {
        return Err("interaction has no request".into());
    };
    let uri = s(req_side, "uri").unwrap_or_default();
    let req_body = match body_of(req_side, binary, &input.limits) {
        Body::Json(v) => v,
        Body::Text(_) => return Err(format!("request body to {uri} is not JSON")),
        Body::Missing => return Err(format!("request to {uri} has no body")),
        Body::Unreadable(why) => return Err(format!("request to {uri}: its {why}")),
    };
    let request = parse_request(&req_body, &uri)?;
    let resp_side = it.get("response").cloned().unwrap_or(Value::Null);
    let status = resp_side
        .get("status")
        .and_then(|st| st.get("code").or(Some(st)))
        .and_then(Value::as_i64);
    let mut response = match body_of(&resp_side, binary, &input.limits) {
        Body::Json(b) => parse_response(request.provider, &b),
        Body::Text(raw) => match assemble_stream(request.provider, &raw) {
            Some(b) => parse_response(request.provider, &b),
            None => Response {
                unreadable: Some(
                    "response body is neither JSON nor a readable event stream".into(),
                ),
                ..Response::default()
            },
        },
        Body::Missing => Response {
            unreadable: Some("response has no body".into()),
            ..Response::default()
        },
        Body::Unreadable(why) => Response {
            unreadable: Some(format!("response {why}")),
            ..Response::default()
        },
    };
    response.status = status;
    if request.auxiliary {
        return Err(format!("{uri} is a token count, not a model call"));
    }
    if status.is_some_and(|c| c >= 400) {
        response.message = None;
        sink.quarantine(Quarantined::partial(
            input.display,
            Locator::Record(i as u64),
            format!(
                "the model call failed with HTTP status {}; its answer is taken from the next \
                 request when the framework re-sent it",
                status.unwrap_or(0)
            ),
        ));
    } else if let Some(why) = &response.unreadable {
        sink.quarantine(Quarantined::partial(
            input.display,
            Locator::Record(i as u64),
            format!("{why}; the model call is kept without its answer"),
        ));
    }
    Ok(Some(Exchange {
        record: i,
        request,
        response,
    }))
}

/// VCR HTTP cassettes of model calls (YAML `interactions`), as pydantic-ai records them.
pub struct VcrAdapter;

impl crate::ingest::Adapter for VcrAdapter {
    fn name(&self) -> &'static str {
        "vcr"
    }
    fn family(&self) -> &'static str {
        "vcr"
    }
    fn about(&self) -> &'static str {
        "VCR HTTP cassettes of model calls (YAML interactions)"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        // A JSON object is never a cassette, whatever its strings say.
        crate::ingest::Match::strong_if(
            !head.text.starts_with('{') && looks_like_cassette(head.text),
        )
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> std::io::Result<()> {
        read(input, sink)
    }
}

impl crate::ingest::Format {
    #[allow(non_upper_case_globals)]
    pub const Vcr: crate::ingest::Format = crate::ingest::Format(&VcrAdapter);
}

#[cfg(test)]
mod tests;
