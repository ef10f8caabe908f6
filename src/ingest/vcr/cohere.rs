//! Cohere v2 chat: requests in the OpenAI chat shape, the answer under `message` in the response.

use super::openai_chat::{chat_calls, chat_request};
use super::{arr, content_text, normalise_stop, s, Msg, Provider, Request, Response};
use crate::model::Role;
use serde_json::Value;

pub(super) struct Cohere;

impl Provider for Cohere {
    fn name(&self) -> &'static str {
        "cohere"
    }

    /// Chat `messages` sent to a Cohere URI; asked before OpenAI chat, which takes any `messages`.
    fn matches(&self, body: &Value, uri: &str) -> bool {
        body.get("messages").is_some() && uri.contains("cohere")
    }

    fn parse_request(&self, body: &Value, req: &mut Request) {
        chat_request(body, req);
    }

    fn parse_response(&self, body: &Value, resp: &mut Response) {
        let m = body.get("message").cloned().unwrap_or(Value::Null);
        let mut msg = Msg::new(Role::Assistant, content_text(m.get("content")));
        msg.calls = chat_calls(arr(&m, "tool_calls"));
        resp.message = Some(msg);
        resp.stop = s(body, "finish_reason").map(|r| normalise_stop(&r));
    }
}
