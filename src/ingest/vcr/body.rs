//! Recorded bodies: text, JSON, or `!!binary` bytes decoded by their content encoding, within
//! the record limit.

use crate::error::Error;
use crate::ingest::encoding::base64_lenient;
use crate::ingest::Limits;
use crate::js;
use serde_json::Value;

/// A request or response body as recorded.
#[derive(Debug, PartialEq)]
pub(super) enum Body {
    /// JSON (`parsed_body`, or a body text that parses).
    Json(Value),
    /// Text that is not JSON (a server-sent event stream, ...).
    Text(String),
    /// No body, or an empty one.
    Missing,
    /// Bytes that could not be made text, and why.
    Unreadable(String),
}

/// A request or response body: `parsed_body`, else `body` (a string, or `{string}`) parsed as
/// JSON. In a cassette that holds `!!binary` scalars (`binary`), a body that is not JSON and is
/// base64 is such a scalar: its bytes are decoded by the side's `Content-Encoding` (gzip or
/// deflate, what vcrpy records when it does not decode responses; gzip is known by its magic
/// number too), and the decoded text may not exceed the record limit.
pub(super) fn body_of(side: &Value, binary: bool, limits: &Limits) -> Body {
    if let Some(parsed) = side.get("parsed_body").filter(|b| !b.is_null()) {
        return Body::Json(parsed.clone());
    }
    let text = match side.get("body") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Object(m)) => match m.get("string") {
            Some(inner) => inner.as_str().map(str::to_string),
            // Some cassettes keep the decoded body itself under `body`.
            None => return Body::Json(Value::Object(m.clone())),
        },
        _ => None,
    };
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return Body::Missing;
    };
    if let Ok(v) = js::parse_json(&text) {
        return Body::Json(v);
    }
    let bytes = binary
        .then(|| looks_base64(&text).then(|| base64_lenient(&text)).flatten())
        .flatten();
    let Some(bytes) = bytes else {
        return Body::Text(text);
    };
    match decode_binary(bytes, &content_encodings(side), limits) {
        Ok(decoded) => match js::parse_json(&decoded) {
            Ok(v) => Body::Json(v),
            Err(_) => Body::Text(decoded),
        },
        Err(why) => Body::Unreadable(why.to_string()),
    }
}

/// Is a text nothing but base64 (and line breaks), as a `!!binary` scalar is?
pub(super) fn looks_base64(text: &str) -> bool {
    let mut n = 0usize;
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'+' | b'/' | b'=' | b'-' | b'_' => n += 1,
            b'\n' | b'\r' | b' ' => {}
            _ => return false,
        }
    }
    n > 0 && n.is_multiple_of(4)
}

/// The content codings a side's headers name, in the order they were applied (lower case).
pub(super) fn content_encodings(side: &Value) -> Vec<String> {
    let Some(Value::Object(headers)) = side.get("headers") else {
        return Vec::new();
    };
    let values: Vec<&Value> = headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("content-encoding"))
        .flat_map(|(_, v)| match v {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        })
        .collect();
    values
        .iter()
        .filter_map(|v| v.as_str())
        .flat_map(|v| v.split(','))
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty() && c != "identity")
        .collect()
}

/// The text of a binary body: its bytes undone coding by coding, last applied first, each
/// read no further than the record limit.
pub(super) fn decode_binary(
    mut bytes: Vec<u8>,
    codings: &[String],
    limits: &Limits,
) -> crate::error::Result<String> {
    let gzip_magic = bytes.starts_with(&[0x1f, 0x8b]);
    let codings: Vec<&str> = match (codings.is_empty(), gzip_magic) {
        // The header was filtered out when the cassette was recorded; the bytes say gzip.
        (true, true) => vec!["gzip"],
        (true, false) => {
            return String::from_utf8(bytes).map_err(|_| {
                Error::Malformed("body is not text (a binary event stream)".to_string())
            })
        }
        (false, _) => codings.iter().map(String::as_str).collect(),
    };
    for coding in codings.iter().rev() {
        bytes = inflate(&bytes, coding, limits)?;
    }
    String::from_utf8(bytes).map_err(|e| {
        Error::Malformed(format!(
            "body is not text once decoded (not UTF-8 at byte {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Undo one content coding, reading at most one byte past the record limit.
pub(super) fn inflate(
    bytes: &[u8],
    coding: &str,
    limits: &Limits,
) -> crate::error::Result<Vec<u8>> {
    use flate2::read::{DeflateDecoder, MultiGzDecoder, ZlibDecoder};
    use std::io::Read;
    let cap = limits.record_bytes.saturating_add(1);
    let read = |reader: &mut dyn Read| -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        reader.take(cap).read_to_end(&mut out)?;
        Ok(out)
    };
    let out = match coding {
        "gzip" | "x-gzip" => read(&mut MultiGzDecoder::new(bytes)),
        // HTTP's deflate is zlib-wrapped; some servers send the raw stream.
        "deflate" => {
            read(&mut ZlibDecoder::new(bytes)).or_else(|_| read(&mut DeflateDecoder::new(bytes)))
        }
        other => {
            return Err(Error::Malformed(format!(
                "body is {other}-encoded, a coding this reader does not decode"
            )))
        }
    }
    .map_err(|e| Error::Malformed(format!("body is {coding}-encoded and does not decode: {e}")))?;
    if out.len() as u64 > limits.record_bytes {
        return Err(Error::Malformed(format!(
            "body is {coding}-encoded and decodes past the {} record limit",
            crate::ingest::limits::size_text(limits.record_bytes)
        )));
    }
    Ok(out)
}
