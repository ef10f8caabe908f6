//! xAI's recorded gRPC samples (`request_sample.json` / `response_sample.json`): requests in the
//! OpenAI chat shape (tool parameters as JSON text), the answer under `outputs[0]`.

use super::call::{arr, content_text, normalise_stop, s, ChatMessage, Provider, Request, Response};
use super::openai_chat::{chat_calls, chat_request};
use crate::model::Role;
use serde_json::Value;

pub(super) struct Xai;

impl Provider for Xai {
    fn name(&self) -> &'static str {
        "xai"
    }

    /// Never an HTTP request: the samples are known by the interaction's shape, not by a request
    /// body, so this provider is not in the matching list.
    fn matches(&self, _body: &Value, _uri: &str) -> bool {
        false
    }

    fn parse_request(&self, body: &Value, req: &mut Request) {
        chat_request(body, req);
    }

    fn parse_response(&self, body: &Value, resp: &mut Response) {
        let out = arr(body, "outputs").first().cloned().unwrap_or(Value::Null);
        let m = out.get("message").cloned().unwrap_or(Value::Null);
        let mut msg = ChatMessage::new(Role::Assistant, content_text(m.get("content")));
        msg.tool_calls = chat_calls(arr(&m, "tool_calls"));
        resp.message = Some(msg);
        resp.stop = s(&out, "finish_reason").map(|r| normalise_stop(&r));
    }
    fn assemble_stream(&self, chunks: &[Value]) -> Value {
        super::openai_chat::assemble_deltas(chunks)
    }
}
