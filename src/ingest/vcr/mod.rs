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
mod call;
mod chain;
mod cohere;
mod gemini;
mod openai_chat;
mod openai_responses;
mod xai;
mod yaml;

use crate::error::Error;
use body::{body_of, Body};
use yaml::{parse_yaml, yaml_to_json};

use crate::ingest::limits::read_document;
use crate::ingest::{Input, Locator, Quarantined, Sink};
use crate::model::Conversation;
use serde_json::Value;

use call::*;
use chain::*;

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

fn parse_request(body: &Value, uri: &str) -> crate::error::Result<Request> {
    let provider = PROVIDERS
        .iter()
        .copied()
        .find(|p| p.matches(body, uri))
        .ok_or_else(|| {
            Error::Malformed(
                "request body is neither chat messages, Responses input, Anthropic messages, \
                 Gemini contents nor Bedrock messages"
                    .to_string(),
            )
        })?;
    Ok(request_as(provider, body, uri))
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
            Error::Malformed(format!("cassette is not valid UTF-8 (byte {at})"))
        })?;
        binary = text.contains("!!binary");
        parse_yaml(&text, &input.limits)
    });
    let doc = match parsed {
        Ok(v) => yaml_to_json(v),
        Err(reason) => {
            sink.records_read(1);
            sink.quarantine(Quarantined::dropped(
                input.display,
                Locator::File,
                reason.to_string(),
            ));
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
                reason.to_string(),
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
) -> crate::error::Result<Option<Exchange>> {
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
        return Err(Error::Malformed("interaction has no request".into()));
    };
    let uri = s(req_side, "uri").unwrap_or_default();
    let req_body = match body_of(req_side, binary, &input.limits) {
        Body::Json(v) => v,
        Body::Text(_) => {
            return Err(Error::Malformed(format!(
                "request body to {uri} is not JSON"
            )))
        }
        Body::Missing => return Err(Error::Malformed(format!("request to {uri} has no body"))),
        Body::Unreadable(why) => {
            return Err(Error::Malformed(format!("request to {uri}: its {why}")))
        }
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
        return Err(Error::Malformed(format!(
            "{uri} is a token count, not a model call"
        )));
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
