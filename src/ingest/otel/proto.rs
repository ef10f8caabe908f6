//! OTLP protobuf trace exports, read into the same [`Span`]s as OTLP JSON, so that everything
//! past the wire (the stitcher, the run builder) is shared.
//!
//! # Wire shapes
//! - One `ExportTraceServiceRequest` message a file, as the Collector's S3 exporter writes it
//!   with `marshaler: otlp_proto` (objects named `*.binpb`). The file is one message and is read
//!   whole, as one record, within the record limit.
//! - The Collector's file exporter with `format: proto`: messages one after another, each
//!   preceded by its length as a 4-byte big-endian unsigned integer. Each message is read on its
//!   own; a length over the record limit is refused before anything is allocated.
//!
//! The two are told apart by the first byte: a request starts with the key of its field 1
//! (`resource_spans`, length-delimited: `0x0A`); a length prefix starts with `0x00` for any
//! message under 16 MiB, and with `0x0A` only for one of 160 MiB or more.
//!
//! # Detection
//! Protobuf has no magic number. A file is taken for an OTLP protobuf export when its name ends
//! in `.binpb`, `.pb` or `.proto.bin` and its head decodes as the start of one of the shapes
//! above: the first message's first field is `resource_spans` and fits the file, and the first
//! resource-spans entry (or the whole first message) decodes when the head holds all of it. JSON
//! and the other text formats never pass: `{`, `[` and letters are no valid start of a request.
//! A head under such a name that starts like a request, is not text and does not decode (a file
//! cut short, a damaged message) is a weak match: reading it quarantines it with the reason,
//! unless another format recognises the file.
//!
//! # Mapping
//! Field by field as the JSON reader reads the JSON mapping: ids as lower-case hex (empty or
//! all-zero ids are no ids), `intValue` as an i64, doubles as numbers (NaN and the infinities as
//! the strings the JSON mapping spells), bytes as standard base64 (what the JSON mapping
//! writes), arrays and key-value lists as JSON lists and objects, the status code (0 unset,
//! 1 ok, 2 error; any other is unset), and the W3C remote-parent bits of `flags`. An event
//! without a name is left out, as a JSON event without one is; protobuf cannot tell an empty
//! name from a missing one. Resource and scope attributes, links, kinds and trace states are
//! not read, as in JSON.
//!
//! # Bad input
//! A message that does not decode (corrupt, or cut short inside) is one dropped record naming
//! the message's index and byte offset, and the next message is read. A length prefix cut
//! short, or one that runs past the end of the file, ends the file with one dropped record. A
//! message over the record limit is skipped without being held (one dropped record) when the
//! file holds it, so the messages after it are still read.

use crate::error::Error;
use std::io::{self, BufRead, Read};
use std::path::Path;
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1 as pb;
use prost::Message as _;
use serde_json::{Map, Value};

use super::span::{Span, SpanEvent};
use super::wire::{is_remote_parent, skipped_event_key, skipped_key, tidy_attrs, Reader};
use crate::ingest::limits::read_bounded;
use crate::ingest::{Input, Locator, Match, Sink};

/// The file names OTLP protobuf exports are written under.
pub const EXTENSIONS: [&str; 3] = [".binpb", ".pb", ".proto.bin"];

/// The key of `ExportTraceServiceRequest.resource_spans` (field 1, length-delimited): the first
/// byte of every request that holds spans.
const REQUEST_START: u8 = 0x0A;

/// Input read, in a file of length-prefixed messages, between two hand-offs of the traces
/// completed so far (as for one JSON request per line).
const FLUSH_BYTES: usize = 32 << 20;

/// How a file holds its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One request, the whole file.
    Single,
    /// Requests each preceded by a 4-byte big-endian length.
    Framed,
}

impl Shape {
    /// The shape of a file starting with `first`.
    pub fn of(first: u8) -> Shape {
        if first == REQUEST_START {
            Shape::Single
        } else {
            Shape::Framed
        }
    }
}

/// Has this file an OTLP protobuf export's name?
pub fn has_extension(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    EXTENSIONS.iter().any(|ext| name.ends_with(ext))
}

/// Is the file at `path`, whose first bytes are `head`, an OTLP protobuf trace export?
pub fn detect(head: &[u8], path: Option<&Path>) -> Match {
    let Some(path) = path.filter(|p| has_extension(p)) else {
        return Match::No;
    };
    let Some(&first) = head.first() else {
        return Match::No;
    };
    let Ok(len) = std::fs::metadata(path).map(|m| m.len()) else {
        return Match::No;
    };
    let (message, total) = match Shape::of(first) {
        Shape::Single => (head, len),
        Shape::Framed => match head.get(..4) {
            Some(prefix) => {
                let n = u64::from(u32::from_be_bytes(prefix.try_into().expect("4 bytes")));
                let end = usize::try_from(4 + n).unwrap_or(usize::MAX).min(head.len());
                if 4 + n > len || n == 0 {
                    // A length prefix running past the end: a file cut short, at best.
                    return weak_if_binary(head, &head[4..]);
                }
                (&head[4..end], n)
            }
            None => return Match::No,
        },
    };
    if starts_a_request(message, total) {
        Match::Strong
    } else {
        weak_if_binary(head, message)
    }
}

/// A head that does not decode but starts like a request and is not text: a protobuf export
/// cut short or damaged, which reading quarantines with its reason. Weak, so that any other
/// format that recognises the file wins.
fn weak_if_binary(head: &[u8], message: &[u8]) -> Match {
    if message.first() == Some(&REQUEST_START) && std::str::from_utf8(head).is_err() {
        Match::Weak
    } else {
        Match::No
    }
}

/// Is `bytes` the start of an `ExportTraceServiceRequest` of `total` bytes with spans in it?
/// The whole request is decoded when `bytes` holds it; else its first field must be a
/// `resource_spans` entry that fits, decoded when `bytes` holds it, else starting with one of
/// that message's own fields.
fn starts_a_request(bytes: &[u8], total: u64) -> bool {
    use prost::encoding::{decode_key, decode_varint, WireType};
    if bytes.len() as u64 == total {
        return ExportTraceServiceRequest::decode(bytes)
            .is_ok_and(|r| !r.resource_spans.is_empty());
    }
    let mut rest = bytes;
    let Ok((1, WireType::LengthDelimited)) = decode_key(&mut rest) else {
        return false;
    };
    let Ok(entry) = decode_varint(&mut rest) else {
        return false;
    };
    let header = (bytes.len() - rest.len()) as u64;
    if header.saturating_add(entry) > total {
        return false;
    }
    match usize::try_from(entry) {
        Ok(entry) if entry <= rest.len() => pb::ResourceSpans::decode(&rest[..entry]).is_ok(),
        _ => matches!(
            decode_key(&mut rest),
            Ok((1..=3, WireType::LengthDelimited))
        ),
    }
}

/// Read one OTLP protobuf file (either shape) and hand its spans to the sink, grouped by trace.
pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    read_flushing(input, sink, FLUSH_BYTES)
}

pub(super) fn read_flushing(
    input: &Input<'_>,
    sink: &mut dyn Sink,
    flush_bytes: usize,
) -> io::Result<()> {
    let file = std::fs::File::open(input.path)?;
    let len = file.metadata()?.len();
    let mut file = io::BufReader::new(file);
    let mut reader = Reader::new(input.display, sink);
    let first = file.fill_buf()?.first().copied();
    match first.map(Shape::of) {
        None => {}
        Some(Shape::Single) => single(&mut file, len, input, &mut reader)?,
        Some(Shape::Framed) => framed(&mut file, len, input, &mut reader, flush_bytes)?,
    }
    reader.flush(false);
    Ok(())
}

/// A file that is one request, read whole within the record limit.
fn single(
    file: &mut impl Read,
    len: u64,
    input: &Input<'_>,
    reader: &mut Reader<'_>,
) -> io::Result<()> {
    let limits = &input.limits;
    let whole = "; a file of one OTLP protobuf message is read whole, as one record";
    let bytes = if len > limits.record_bytes {
        Err(format!("the file is {}{whole}", limits.too_large(len)))
    } else {
        read_bounded(file, limits.record_bytes, len)?
            .map_err(|_| format!("the file grew {}{whole}", limits.over()))
    };
    let decoded = bytes.and_then(|bytes| {
        ExportTraceServiceRequest::decode(bytes.as_slice()).map_err(|e| {
            format!(
                "message 0 ({} bytes, the whole file) is not an OTLP ExportTraceServiceRequest \
                 (corrupt or cut short): {e}",
                bytes.len()
            )
        })
    });
    match decoded {
        Ok(request) => request_spans(reader, request),
        Err(reason) => {
            reader.sink.records_read(1);
            reader.drop(Locator::File, reason);
        }
    }
    Ok(())
}

/// A file of length-prefixed requests, read one request at a time.
fn framed(
    file: &mut impl Read,
    len: u64,
    input: &Input<'_>,
    reader: &mut Reader<'_>,
    flush_bytes: usize,
) -> io::Result<()> {
    let limits = &input.limits;
    let mut offset = 0u64;
    let mut since_flush = 0usize;
    let mut buf = Vec::new();
    for index in 0u64.. {
        let mut prefix = [0u8; 4];
        let got = read_up_to(file, &mut prefix)?;
        if got == 0 {
            break;
        }
        let at = Locator::Byte(offset);
        if got < 4 {
            reader.sink.records_read(1);
            reader.drop(
                at,
                format!(
                    "message {index} at byte {offset} is cut short: its 4-byte length prefix \
                     has {got} bytes"
                ),
            );
            break;
        }
        let n = u64::from(u32::from_be_bytes(prefix));
        let left = len.saturating_sub(offset + 4);
        if n > left {
            reader.sink.records_read(1);
            reader.drop(
                at,
                format!(
                    "message {index} at byte {offset} is cut short: its length prefix says {n} \
                     bytes and the file has {left} after it (a file cut short, or a corrupt \
                     prefix); the rest of the file is not read"
                ),
            );
            break;
        }
        if n > limits.record_bytes {
            reader.sink.records_read(1);
            reader.drop(
                at,
                format!(
                    "message {index} at byte {offset} is {}; it was skipped without being held",
                    limits.too_large(n)
                ),
            );
            let skipped = io::copy(&mut file.by_ref().take(n), &mut io::sink())?;
            if skipped < n {
                break;
            }
            offset += 4 + n;
            continue;
        }
        // n is at most the record limit, which bounds what is held.
        buf.clear();
        buf.resize(n as usize, 0);
        let got = read_up_to(file, &mut buf)?;
        if (got as u64) < n {
            reader.sink.records_read(1);
            reader.drop(
                at,
                format!(
                    "message {index} at byte {offset} is cut short: {got} of its {n} bytes \
                     could be read"
                ),
            );
            break;
        }
        match ExportTraceServiceRequest::decode(buf.as_slice()) {
            Ok(request) => request_spans(reader, request),
            Err(e) => {
                reader.sink.records_read(1);
                reader.drop(
                    at,
                    format!(
                        "message {index} at byte {offset} ({n} bytes) is not an OTLP \
                         ExportTraceServiceRequest (corrupt or cut short): {e}"
                    ),
                );
            }
        }
        offset += 4 + n;
        since_flush += n as usize;
        if since_flush >= flush_bytes {
            reader.flush(true);
            since_flush = 0;
        }
    }
    Ok(())
}

/// Fill `buf` from `file` as far as the file goes: the number of bytes read.
fn read_up_to(file: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(k) => filled += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Every span of one request: each a record, each usable one kept.
fn request_spans(reader: &mut Reader<'_>, request: ExportTraceServiceRequest) {
    for resource in request.resource_spans {
        for scope in resource.scope_spans {
            for span in scope.spans {
                let record = reader.next_record;
                reader.next_record += 1;
                reader.sink.records_read(1);
                let locator = Locator::Record(record);
                match convert_span(span, &reader.file, locator.clone(), record) {
                    Ok(s) => reader.spans.push(s),
                    Err(reason) => reader.drop(locator, reason.to_string()),
                }
            }
        }
    }
}

fn convert_span(
    s: pb::Span,
    file: &Arc<str>,
    locator: Locator,
    record: u64,
) -> crate::error::Result<Span> {
    let trace_id =
        hex_id(&s.trace_id).ok_or_else(|| Error::Malformed("span has no traceId".into()))?;
    let span_id = hex_id(&s.span_id)
        .ok_or_else(|| Error::Malformed(format!("span in trace {trace_id} has no spanId")))?;
    let (status, status_message) = match s.status {
        Some(st) => (
            u8::try_from(st.code).ok().filter(|c| *c <= 2).unwrap_or(0),
            Some(st.message).filter(|m| !m.is_empty()),
        ),
        None => (0, None),
    };
    let mut attrs = attributes(s.attributes, skipped_key);
    tidy_attrs(&mut attrs);
    let events = s
        .events
        .into_iter()
        .filter(|e| !e.name.is_empty())
        .map(|e| SpanEvent {
            name: e.name,
            time_ns: time_of(e.time_unix_nano),
            attrs: attributes(e.attributes, skipped_event_key),
        })
        .collect();
    Ok(Span {
        trace_id,
        span_id,
        parent_id: hex_id(&s.parent_span_id),
        remote_parent: is_remote_parent(i64::from(s.flags)),
        name: s.name,
        start_ns: time_of(s.start_time_unix_nano),
        end_ns: time_of(s.end_time_unix_nano),
        status,
        status_message,
        attrs,
        events,
        file: file.clone(),
        locator,
        record,
    })
}

/// An id as lower-case hex; an empty or all-zero id is no id.
fn hex_id(bytes: &[u8]) -> Option<String> {
    if bytes.iter().all(|&b| b == 0) {
        return None;
    }
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A `*_unix_nano` timestamp; 0 means unset (and one past i64 is no time, as in JSON).
fn time_of(n: u64) -> Option<i64> {
    i64::try_from(n).ok().filter(|&n| n > 0)
}

/// OTLP key-values as a JSON object, as [`super::wire::attributes`] reads them.
fn attributes(list: Vec<KeyValue>, skip: impl Fn(&str) -> bool) -> Map<String, Value> {
    let mut out = Map::new();
    for kv in list {
        if skip(&kv.key) {
            continue;
        }
        if let Some(value) = kv.value.and_then(any_value) {
            out.insert(kv.key, value);
        }
    }
    out
}

/// An `AnyValue` as the JSON reader gives it; `None` for an empty value, or one of a kind trace
/// exports do not hold (a profile's string-table index).
fn any_value(v: AnyValue) -> Option<Value> {
    use any_value::Value as V;
    use base64::Engine as _;
    Some(match v.value? {
        V::StringValue(s) => Value::String(s),
        V::BoolValue(b) => Value::Bool(b),
        V::IntValue(i) => Value::from(i),
        V::DoubleValue(d) => match serde_json::Number::from_f64(d) {
            Some(n) => Value::Number(n),
            None if d.is_nan() => Value::String("NaN".into()),
            None if d > 0.0 => Value::String("Infinity".into()),
            None => Value::String("-Infinity".into()),
        },
        V::ArrayValue(a) => Value::Array(a.values.into_iter().filter_map(any_value).collect()),
        V::KvlistValue(kv) => Value::Object(attributes(kv.values, |_| false)),
        V::BytesValue(b) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        V::StringValueStrindex(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::Collect;
    use opentelemetry_proto::tonic::common::v1::{ArrayValue, KeyValueList};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Status};

    fn kv(key: &str, v: any_value::Value) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(v) }),
            ..KeyValue::default()
        }
    }

    /// Every kind of value, the status, events, remote flags and a parent, as protobuf and as
    /// the JSON an exporter writes for the same span, read into equal spans.
    #[test]
    fn every_value_kind_reads_as_the_json_mapping_reads() {
        use any_value::Value as V;
        let span = pb::Span {
            trace_id: (1..=16).collect(),
            span_id: vec![0xAB; 8],
            parent_span_id: vec![0, 0, 0, 0, 0, 0, 0, 7],
            flags: 0x301,
            name: "chat m".into(),
            start_time_unix_nano: 1_700_000_000_000_000_000,
            end_time_unix_nano: 1_700_000_000_500_000_000,
            attributes: vec![
                kv("s", V::StringValue("text".into())),
                kv("i", V::IntValue(-9_007_199_254_740_993)),
                kv("d", V::DoubleValue(0.25)),
                kv("nan", V::DoubleValue(f64::NAN)),
                kv("inf", V::DoubleValue(f64::NEG_INFINITY)),
                kv("b", V::BoolValue(true)),
                kv("raw", V::BytesValue(vec![0xfb, 0xff, 0x00])),
                kv(
                    "list",
                    V::ArrayValue(ArrayValue {
                        values: vec![
                            AnyValue {
                                value: Some(V::IntValue(1)),
                            },
                            AnyValue { value: None },
                            AnyValue {
                                value: Some(V::StringValue("x".into())),
                            },
                        ],
                    }),
                ),
                kv(
                    "map",
                    V::KvlistValue(KeyValueList {
                        values: vec![kv("k", V::BoolValue(false))],
                    }),
                ),
                KeyValue {
                    key: "empty".into(),
                    value: Some(AnyValue { value: None }),
                    ..KeyValue::default()
                },
                kv("gen_ai.tool.definitions", V::StringValue("[]".into())),
                kv(
                    "gen_ai.input.messages",
                    V::StringValue(r#"[{"role":"user","parts":[]}]"#.into()),
                ),
            ],
            events: vec![
                pb::span::Event {
                    time_unix_nano: 1_700_000_000_100_000_000,
                    name: "exception".into(),
                    attributes: vec![
                        kv("exception.message", V::StringValue("boom".into())),
                        kv("exception.stacktrace", V::StringValue("...".into())),
                    ],
                    ..Default::default()
                },
                pb::span::Event::default(),
            ],
            status: Some(Status {
                message: "failed".into(),
                code: 2,
            }),
            ..pb::Span::default()
        };
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![span],
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        };
        let json = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{
            "traceId":"0102030405060708090A0B0C0D0E0F10","spanId":"q6urq6urq6s=",
            "parentSpanId":"0000000000000007","flags":769,"name":"chat m",
            "startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000000500000000",
            "attributes":[
              {"key":"s","value":{"stringValue":"text"}},
              {"key":"i","value":{"intValue":"-9007199254740993"}},
              {"key":"d","value":{"doubleValue":0.25}},
              {"key":"nan","value":{"doubleValue":"NaN"}},
              {"key":"inf","value":{"doubleValue":"-Infinity"}},
              {"key":"b","value":{"boolValue":true}},
              {"key":"raw","value":{"bytesValue":"+/8A"}},
              {"key":"list","value":{"arrayValue":{"values":[{"intValue":1},{},{"stringValue":"x"}]}}},
              {"key":"map","value":{"kvlistValue":{"values":[{"key":"k","value":{"boolValue":false}}]}}},
              {"key":"empty","value":{}},
              {"key":"gen_ai.tool.definitions","value":{"stringValue":"[]"}},
              {"key":"gen_ai.input.messages","value":{"stringValue":"[{\"role\":\"user\",\"parts\":[]}]"}}
            ],
            "events":[{"timeUnixNano":"1700000000100000000","name":"exception","attributes":[
              {"key":"exception.message","value":{"stringValue":"boom"}},
              {"key":"exception.stacktrace","value":{"stringValue":"..."}}]},
              {"timeUnixNano":"0"}],
            "status":{"code":"STATUS_CODE_ERROR","message":"failed"}}]}]}]}"#;
        let mut sink = Collect::default();
        let from_json = super::super::wire::parse(json.as_bytes(), "f", &mut sink);
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        let mut reader = Reader::new("f", &mut sink);
        request_spans(&mut reader, request);
        let from_proto = std::mem::take(&mut reader.spans);
        assert_eq!(sink.records, 2);
        let json_spans: Vec<&Span> = from_json.traces.iter().flat_map(|(_, s)| s).collect();
        assert_eq!(json_spans.len(), 1);
        assert_eq!(from_proto.len(), 1);
        let got = &from_proto[0];
        assert_eq!(got, json_spans[0]);
        assert_eq!(got.trace_id, "0102030405060708090a0b0c0d0e0f10");
        assert_eq!(got.parent_id.as_deref(), Some("0000000000000007"));
        assert!(got.remote_parent);
        assert_eq!(
            (got.status, got.status_message.as_deref()),
            (2, Some("failed"))
        );
        assert_eq!(got.attrs["raw"], "+/8A");
        assert_eq!(got.attrs["nan"], "NaN");
        assert_eq!(got.attrs["list"], serde_json::json!([1, "x"]));
        assert!(got.attrs["gen_ai.input.messages"].is_array());
        assert!(
            !got.attrs.contains_key("empty") && !got.attrs.contains_key("gen_ai.tool.definitions")
        );
        assert_eq!(got.events.len(), 1);
        assert!(!got.events[0].attrs.contains_key("exception.stacktrace"));
    }

    /// A span without a trace or span id is a dropped record, as in JSON.
    #[test]
    fn a_span_without_ids_is_dropped() {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![
                        pb::Span::default(),
                        pb::Span {
                            trace_id: vec![1; 16],
                            span_id: vec![0; 8],
                            ..pb::Span::default()
                        },
                    ],
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        };
        let mut sink = Collect::default();
        let mut reader = Reader::new("f", &mut sink);
        request_spans(&mut reader, request);
        assert!(reader.spans.is_empty());
        let reasons: Vec<&str> = sink.quarantined.iter().map(|q| q.reason.as_str()).collect();
        assert_eq!(sink.records, 2);
        assert_eq!(
            reasons,
            [
                "span has no traceId",
                "span in trace 01010101010101010101010101010101 has no spanId"
            ]
        );
        assert_eq!(sink.quarantined[1].locator, Locator::Record(1));
    }
}
