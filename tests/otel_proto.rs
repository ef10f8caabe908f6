//! OTLP protobuf exports read into exactly the runs OTLP JSON gives: every OTLP JSON fixture of
//! the repository converted to protobuf, in both shapes the Collector writes (one request a
//! file, and its file exporter's length-prefixed requests), read and ingested, and compared
//! row for row with the JSON; and bad protobuf input (cut short, corrupt, over the limit).

mod common;

use common::*;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value, AnyValue, ArrayValue, KeyValue, KeyValueList,
};
use opentelemetry_proto::tonic::trace::v1::{span, ResourceSpans, ScopeSpans, Span, Status};
use prost::Message as _;
use serde_json::Value;
use std::path::{Path, PathBuf};
use traceaudit::read::{read_file, Input};
use traceaudit::read::{read_path, Collect, Severity};
use traceaudit::{ingest, Format, IngestOptions, Limits};

// ---------------------------------------------------------------------------------------------
// OTLP JSON to protobuf, as the JSON reader reads the JSON (test code only)
// ---------------------------------------------------------------------------------------------

/// Why a JSON document cannot be carried by protobuf unchanged (a shape only JSON can have).
type Carry<T> = Result<T, String>;

fn field<'a>(v: &'a Value, camel: &str, snake: &str) -> Option<&'a Value> {
    v.get(camel).or_else(|| v.get(snake))
}

fn int_of(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| n.as_u64().map(|u| u as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn time(v: &Value, camel: &str, snake: &str) -> u64 {
    field(v, camel, snake)
        .and_then(int_of)
        .filter(|&n| n > 0)
        .map_or(0, |n| n as u64)
}

fn hex_bytes(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// An id's bytes: hex (any case) as the reader takes it; an absent or blank id is empty.
fn id(v: &Value, camel: &str, snake: &str, len: usize) -> Carry<Vec<u8>> {
    use base64::Engine as _;
    let Some(s) = field(v, camel, snake)
        .and_then(Value::as_str)
        .map(str::trim)
    else {
        return Ok(Vec::new());
    };
    if s.is_empty() {
        return Ok(Vec::new());
    }
    if s.len() == len * 2 {
        if let Some(b) = hex_bytes(s) {
            return Ok(b);
        }
    }
    match base64::engine::general_purpose::STANDARD.decode(s) {
        Ok(b) if b.len() == len => Ok(b),
        _ => Err(format!("id {s:?} is neither hex nor base64 of {len} bytes")),
    }
}

fn any_value(v: &Value) -> Carry<AnyValue> {
    use any_value::Value as V;
    let value = |v| Ok(AnyValue { value: Some(v) });
    let empty = Ok(AnyValue { value: None });
    if !v.is_object() {
        return empty;
    }
    if let Some(s) = field(v, "stringValue", "string_value") {
        return match s.as_str() {
            Some(s) => value(V::StringValue(s.to_string())),
            None => empty,
        };
    }
    if let Some(i) = field(v, "intValue", "int_value") {
        return match int_of(i) {
            Some(i) => value(V::IntValue(i)),
            None => empty,
        };
    }
    if let Some(d) = field(v, "doubleValue", "double_value") {
        return match d {
            Value::Number(n) if n.is_f64() => value(V::DoubleValue(n.as_f64().unwrap())),
            Value::Number(n) => Err(format!("doubleValue {n} is written as an integer")),
            Value::String(s) if ["NaN", "Infinity", "-Infinity"].contains(&s.as_str()) => {
                value(V::DoubleValue(s.parse().unwrap()))
            }
            Value::String(s) => Err(format!("doubleValue {s:?}")),
            _ => empty,
        };
    }
    if let Some(b) = field(v, "boolValue", "bool_value") {
        return match b.as_bool() {
            Some(b) => value(V::BoolValue(b)),
            None => empty,
        };
    }
    if let Some(a) = field(v, "arrayValue", "array_value") {
        let values = a.get("values").and_then(Value::as_array);
        let values = values
            .into_iter()
            .flatten()
            .map(any_value)
            .collect::<Carry<_>>()?;
        return value(V::ArrayValue(ArrayValue { values }));
    }
    if let Some(kv) = field(v, "kvlistValue", "kvlist_value") {
        let values = key_values(kv.get("values"))?;
        return value(V::KvlistValue(KeyValueList { values }));
    }
    if let Some(b) = field(v, "bytesValue", "bytes_value") {
        use base64::Engine as _;
        let Some(s) = b.as_str() else { return empty };
        let standard = base64::engine::general_purpose::STANDARD;
        return match standard.decode(s) {
            Ok(raw) if standard.encode(&raw) == s => value(V::BytesValue(raw)),
            _ => Err(format!("bytesValue {s:?} is not canonical base64")),
        };
    }
    empty
}

fn key_values(list: Option<&Value>) -> Carry<Vec<KeyValue>> {
    let mut out = Vec::new();
    for kv in list.and_then(Value::as_array).into_iter().flatten() {
        let Some(key) = kv.get("key").and_then(Value::as_str) else {
            continue;
        };
        let value = match kv.get("value") {
            Some(v) => Some(any_value(v)?),
            None => None,
        };
        out.push(KeyValue {
            key: key.to_string(),
            value,
            ..KeyValue::default()
        });
    }
    Ok(out)
}

fn span(v: &Value) -> Carry<Span> {
    if !v.is_object() {
        return Err("a span that is not an object".into());
    }
    let status = v.get("status").map(|s| Status {
        message: s
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        code: match s.get("code") {
            Some(Value::String(c)) if c.ends_with("ERROR") => 2,
            Some(Value::String(c)) if c.ends_with("OK") => 1,
            Some(c) => int_of(c).filter(|n| (0..=2).contains(n)).unwrap_or(0) as i32,
            None => 0,
        },
    });
    let mut events = Vec::new();
    for e in v
        .get("events")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = e.get("name").and_then(Value::as_str) else {
            continue;
        };
        if name.is_empty() {
            return Err("an event named \"\"".into());
        }
        events.push(span::Event {
            name: name.to_string(),
            time_unix_nano: time(e, "timeUnixNano", "time_unix_nano"),
            attributes: key_values(e.get("attributes"))?,
            ..span::Event::default()
        });
    }
    Ok(Span {
        trace_id: id(v, "traceId", "trace_id", 16)?,
        span_id: id(v, "spanId", "span_id", 8)?,
        parent_span_id: id(v, "parentSpanId", "parent_span_id", 8)?,
        flags: v.get("flags").and_then(int_of).unwrap_or(0) as u32,
        name: v
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        start_time_unix_nano: time(v, "startTimeUnixNano", "start_time_unix_nano"),
        end_time_unix_nano: time(v, "endTimeUnixNano", "end_time_unix_nano"),
        attributes: key_values(v.get("attributes"))?,
        events,
        status,
        ..Span::default()
    })
}

/// One OTLP JSON request as its protobuf message, each `resourceSpans` entry a `ResourceSpans`.
fn request(doc: &Value) -> Carry<ExportTraceServiceRequest> {
    let list = field(doc, "resourceSpans", "resource_spans")
        .and_then(Value::as_array)
        .ok_or("a request without a resourceSpans list")?;
    let mut resource_spans = Vec::new();
    for resource in list {
        let scopes = field(resource, "scopeSpans", "scope_spans")
            .or_else(|| resource.get("instrumentationLibrarySpans"));
        let scopes = match scopes {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(s)) => s.as_slice(),
            Some(_) => return Err("a scopeSpans that is not a list".into()),
        };
        let mut scope_spans = Vec::new();
        for scope in scopes {
            let spans = match scope.get("spans") {
                None | Some(Value::Null) => &[][..],
                Some(Value::Array(s)) => s.as_slice(),
                Some(_) => return Err("a spans that is not a list".into()),
            };
            scope_spans.push(ScopeSpans {
                spans: spans.iter().map(span).collect::<Carry<_>>()?,
                ..ScopeSpans::default()
            });
        }
        resource_spans.push(ResourceSpans {
            scope_spans,
            ..ResourceSpans::default()
        });
    }
    Ok(ExportTraceServiceRequest { resource_spans })
}

/// An OTLP JSON file's requests: the document, or one a line.
fn requests(path: &Path) -> Carry<Vec<ExportTraceServiceRequest>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("not UTF-8: {e}"))?;
    let text = text.trim_start_matches('\u{feff}');
    if let Ok(doc) = serde_json::from_str::<Value>(text) {
        return Ok(vec![request(&doc)?]);
    }
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let doc: Value =
                serde_json::from_str(l).map_err(|e| format!("a line not JSON: {e}"))?;
            request(&doc)
        })
        .collect()
}

/// One request holding every request's resource spans, in order (the S3 exporter's shape).
fn single_message(requests: &[ExportTraceServiceRequest]) -> Vec<u8> {
    ExportTraceServiceRequest {
        resource_spans: requests
            .iter()
            .flat_map(|r| r.resource_spans.iter().cloned())
            .collect(),
    }
    .encode_to_vec()
}

/// Each request after its length, a 4-byte big-endian integer (the file exporter's shape).
fn framed(messages: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        out.extend_from_slice(&(m.len() as u32).to_be_bytes());
        out.extend_from_slice(m);
    }
    out
}

/// The framed shape of a file's requests: one message a request, and a document's request one
/// message a resource (so that a document gives several messages too).
fn framed_messages(requests: &[ExportTraceServiceRequest]) -> Vec<Vec<u8>> {
    if requests.len() > 1 {
        return requests.iter().map(|r| r.encode_to_vec()).collect();
    }
    requests[0]
        .resource_spans
        .iter()
        .map(|rs| {
            ExportTraceServiceRequest {
                resource_spans: vec![rs.clone()],
            }
            .encode_to_vec()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The fixtures
// ---------------------------------------------------------------------------------------------

/// Every file of the repository's test data that is an OTLP JSON export (detected as `otel` or
/// `openinference`), under `testdata/` and `tests/fixtures/`.
fn otlp_json_fixtures() -> Vec<PathBuf> {
    let mut all = Vec::new();
    files_under(&crate_dir().join("testdata"), &mut all);
    files_under(&crate_dir().join("tests/fixtures"), &mut all);
    all.into_iter()
        .filter(|p| {
            let head = traceaudit::read::read_head(p).unwrap();
            matches!(
                Format::detect_file(p, &head),
                Some(f) if f == Format::Otel || f == Format::OpenInference
            )
        })
        .collect()
}

/// Comparable: runs with the source file name taken out.
fn runs(c: &Collect) -> Vec<(u64, String, Vec<traceaudit::model::Run>)> {
    c.conversations
        .iter()
        .map(|(conv, record)| {
            let runs = conv
                .runs
                .iter()
                .map(|r| traceaudit::model::Run {
                    source: String::new(),
                    ..r.clone()
                })
                .collect();
            (*record, conv.id.clone(), runs)
        })
        .collect()
}

/// Comparable: the quarantine notes without the file name and the locator (a JSON line number
/// where protobuf has a span index).
fn notes(c: &Collect) -> Vec<(Severity, String)> {
    c.quarantined
        .iter()
        .map(|q| (q.severity, q.reason.clone()))
        .collect()
}

struct Converted {
    json: PathBuf,
    /// Relative to the fixture roots, as the converted copies are laid out.
    rel: PathBuf,
    single: Vec<u8>,
    framed: Vec<u8>,
}

fn convert_all() -> Vec<Converted> {
    let root = crate_dir();
    let fixtures = otlp_json_fixtures();
    assert!(fixtures.len() >= 19, "{fixtures:?}");
    let mut out = Vec::new();
    let mut not_carried = Vec::new();
    for json in fixtures {
        match requests(&json) {
            Ok(reqs) => out.push(Converted {
                rel: json.strip_prefix(&root).unwrap().to_path_buf(),
                single: single_message(&reqs),
                framed: framed(&framed_messages(&reqs)),
                json,
            }),
            Err(why) => not_carried.push(format!("{}: {why}", json.display())),
        }
    }
    // Every fixture's shape is one protobuf can carry, except the fuzz findings: mutated bytes
    // (not UTF-8), whose JSON reading is a dropped record and which hold no request to carry.
    let fuzz = root.join("tests/fixtures/fuzz-findings");
    assert!(
        not_carried
            .iter()
            .all(|n| n.starts_with(&*fuzz.to_string_lossy())),
        "{not_carried:#?}"
    );
    assert!(out.len() >= 19, "{}", out.len());
    out
}

fn with_suffix(rel: &Path, suffix: &str) -> PathBuf {
    let mut name = rel.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Each fixture read as JSON and as protobuf in both shapes gives the same conversations, runs,
/// events, record counts and quarantine notes; the protobuf files are detected as `otlp-proto`.
#[test]
fn every_otlp_json_fixture_reads_the_same_as_protobuf_in_both_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let converted = convert_all();
    let mut compared = 0;
    for c in &converted {
        let json = read_path(&c.json, None).unwrap();
        for (bytes, suffix) in [(&c.single, ".binpb"), (&c.framed, ".pb")] {
            let path = dir.path().join(with_suffix(&c.rel, suffix));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, bytes).unwrap();
            let head = traceaudit::read::read_head(&path).unwrap();
            assert_eq!(
                Format::detect_file(&path, &head),
                Some(Format::OtlpProto),
                "{}",
                path.display()
            );
            let proto = read_path(&path, None).unwrap();
            let what = format!("{} as {suffix}", c.rel.display());
            assert_eq!(proto.records, json.records, "{what}: records");
            assert_eq!(runs(&proto), runs(&json), "{what}: runs");
            assert_eq!(notes(&proto), notes(&json), "{what}: quarantine");
            assert!(proto
                .conversations
                .iter()
                .flat_map(|(c, _)| &c.runs)
                .all(|r| r.source == path.display().to_string()));
            compared += 1;
        }
    }
    assert!(compared >= 38, "{compared}");
}

/// All the fixtures ingested together, as JSON and as protobuf in each shape, make the same
/// store: every table row for row, the quarantine, and the counts (records read = stored +
/// dropped in each).
#[test]
fn the_stores_of_json_and_protobuf_inputs_are_equal_row_for_row() {
    let dir = tempfile::tempdir().unwrap();
    let converted = convert_all();
    let json_in = dir.path().join("json");
    let shapes = [("single", ".binpb"), ("framed", ".pb")];
    for c in &converted {
        let to = json_in.join(&c.rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&c.json, &to).unwrap();
        for (shape, suffix) in shapes {
            let to = dir.path().join(shape).join(with_suffix(&c.rel, suffix));
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            let bytes = if shape == "single" {
                &c.single
            } else {
                &c.framed
            };
            std::fs::write(&to, bytes).unwrap();
        }
    }
    let store = |inputs: &Path, name: &str| {
        let out = dir.path().join(name);
        let summary = ingest(
            &[inputs.to_path_buf()],
            &out,
            &IngestOptions {
                threads: 2,
                ..IngestOptions::default()
            },
        )
        .unwrap();
        (out, summary.manifest)
    };
    let (json_store, json_manifest) = store(&json_in, "store-json");
    let json_tables = store_tables(&json_store, &json_in, ".json-never");
    assert!(json_tables.iter().any(|(_, rows)| !rows.is_empty()));
    let runs_table = &json_tables
        .iter()
        .find(|(p, _)| p == Path::new("runs/part-00000.parquet"))
        .unwrap()
        .1;
    assert!(
        runs_table.iter().all(|r| r.contains("<inputs>/")),
        "{runs_table:?}"
    );
    let json_notes = store_notes(&json_store, &json_in, ".json-never");
    for (shape, suffix) in shapes {
        let inputs = dir.path().join(shape);
        let (proto_store, proto_manifest) = store(&inputs, &format!("store-{shape}"));
        let counts = &proto_manifest.counts;
        // Every count but the input bytes (protobuf is the smaller encoding).
        let without_bytes = |c: &traceaudit::StoreManifest| {
            let mut v = serde_json::to_value(&c.counts).unwrap();
            v.as_object_mut().unwrap().remove("bytes");
            v
        };
        assert_eq!(
            without_bytes(&proto_manifest),
            without_bytes(&json_manifest),
            "{shape}: counts"
        );
        assert_eq!(
            counts.records_read,
            counts.records_stored + counts.records_quarantined,
            "{shape}: counts reconcile"
        );
        let tables = store_tables(&proto_store, &inputs, suffix);
        assert_eq!(tables.len(), json_tables.len(), "{shape}: tables");
        for ((path, rows), (json_path, json_rows)) in tables.iter().zip(&json_tables) {
            assert_eq!(path, json_path);
            assert_eq!(rows.len(), json_rows.len(), "{shape}: {}", path.display());
            for (k, (row, json_row)) in rows.iter().zip(json_rows).enumerate() {
                assert_eq!(row, json_row, "{shape}: {} row {k}", path.display());
            }
        }
        assert_eq!(
            store_notes(&proto_store, &inputs, suffix),
            json_notes,
            "{shape}: quarantine"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------------------------

/// The requests of one fixture, one message each.
fn fixture_messages() -> Vec<Vec<u8>> {
    let reqs = requests(&testdata(
        "otel/pydantic-ai-v5-content/s1_repeated_identical_call.jsonl",
    ))
    .unwrap();
    assert_eq!(reqs.len(), 8);
    reqs.iter().map(|r| r.encode_to_vec()).collect()
}

fn read_with(path: &Path, record_bytes: u64) -> Collect {
    let display = path.display().to_string();
    let mut input = Input::new(path, &display);
    input.limits = Limits {
        record_bytes,
        ..Limits::default()
    };
    let mut sink = Collect::default();
    read_file(Format::OtlpProto, &input, &mut sink).unwrap();
    sink
}

fn stored_spans(c: &Collect) -> u64 {
    c.records
        - c.quarantined
            .iter()
            .filter(|q| q.severity == Severity::Dropped)
            .count() as u64
}

fn dropped(c: &Collect) -> Vec<&str> {
    c.quarantined
        .iter()
        .filter(|q| q.severity == Severity::Dropped)
        .map(|q| q.reason.as_str())
        .collect()
}

/// A message whose bytes are corrupt is one dropped record naming its index; the messages after
/// it are read; the counts reconcile.
#[test]
fn a_corrupt_message_is_dropped_and_the_file_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut messages = fixture_messages();
    // Message 2 becomes a field-1 key whose length runs past the message's end.
    let len = messages[2].len();
    messages[2] = std::iter::once(0x0A)
        .chain(std::iter::once(0x7F))
        .chain(std::iter::repeat_n(0u8, len - 2))
        .collect();
    let path = dir.path().join("traces.pb");
    std::fs::write(&path, framed(&messages)).unwrap();
    let got = read_path(&path, Some(Format::OtlpProto)).unwrap();
    let reasons = dropped(&got);
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].starts_with("message 2 at byte ") && reasons[0].contains("is not an OTLP"),
        "{}",
        reasons[0]
    );
    assert!(got
        .quarantined
        .iter()
        .all(|q| q.file == path.display().to_string()));
    // 7 messages of one span each read, plus the corrupt one.
    assert_eq!(got.records, 8);
    assert_eq!(stored_spans(&got), 7);
}

/// A file cut inside a message, or inside a length prefix: what came before is read, the piece
/// is one dropped record, and the counts reconcile.
#[test]
fn a_truncated_file_keeps_the_messages_before_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let messages = fixture_messages();
    let whole = framed(&messages);
    let last_start = whole.len() - messages[7].len() - 4;
    for (cut, words) in [
        (whole.len() - 10, "is cut short: its length prefix says"),
        (
            last_start + 2,
            "is cut short: its 4-byte length prefix has 2 bytes",
        ),
    ] {
        let path = dir.path().join("cut.pb");
        std::fs::write(&path, &whole[..cut]).unwrap();
        let got = read_path(&path, Some(Format::OtlpProto)).unwrap();
        let reasons = dropped(&got);
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(
            reasons[0].starts_with(&format!("message 7 at byte {last_start} ")),
            "{}",
            reasons[0]
        );
        assert!(reasons[0].contains(words), "{}", reasons[0]);
        assert_eq!((got.records, stored_spans(&got)), (8, 7));
    }
    // One request a file, cut short: the file is one dropped record.
    let single =
        single_message(&requests(&testdata("otel/strands-1.14/get_user_location.json")).unwrap());
    let path = dir.path().join("cut.binpb");
    std::fs::write(&path, &single[..single.len() / 2]).unwrap();
    let got = read_path(&path, None).unwrap();
    let reasons = dropped(&got);
    assert_eq!((got.records, reasons.len()), (1, 1), "{reasons:?}");
    assert!(
        reasons[0].starts_with("message 0 (") && reasons[0].contains("is not an OTLP"),
        "{}",
        reasons[0]
    );
    assert!(got.conversations.is_empty());
}

/// A length prefix over the record limit is refused before anything is allocated: the message is
/// skipped when the file holds it (the next is read), and a prefix past the end of the file
/// ends it. A one-message file over the limit is refused as a file read whole.
#[test]
fn a_length_over_the_record_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut messages = fixture_messages();
    let biggest = messages.iter().map(Vec::len).max().unwrap();
    let small = messages.iter().map(Vec::len).min().unwrap();
    assert!(small < biggest);
    // Under this limit the largest message is over it, and the others are not all.
    let limit = (biggest - 1) as u64;
    let path = dir.path().join("big.pb");
    std::fs::write(&path, framed(&messages)).unwrap();
    let got = read_with(&path, limit);
    let reasons = dropped(&got);
    let over = messages.iter().filter(|m| m.len() as u64 > limit).count();
    assert_eq!(reasons.len(), over, "{reasons:?}");
    assert!(reasons
        .iter()
        .all(|r| r.contains("over the") && r.contains("skipped without being held")));
    assert_eq!(got.records, 8);
    assert_eq!(stored_spans(&got), 8 - over as u64);

    // A prefix of 4 GiB in a small file: refused at once (no 4 GiB buffer), nothing after it.
    messages.truncate(2);
    let mut bytes = framed(&messages);
    bytes.extend_from_slice(&u32::MAX.to_be_bytes());
    bytes.extend_from_slice(&[0u8; 64]);
    std::fs::write(&path, &bytes).unwrap();
    let got = read_path(&path, Some(Format::OtlpProto)).unwrap();
    let reasons = dropped(&got);
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].starts_with("message 2 at byte ")
            && reasons[0].contains(&format!("says {} bytes", u32::MAX)),
        "{}",
        reasons[0]
    );
    assert_eq!((got.records, stored_spans(&got)), (3, 2));

    // One request a file over the limit.
    let path = dir.path().join("big.binpb");
    let single =
        single_message(&requests(&testdata("otel/strands-1.14/get_user_location.json")).unwrap());
    std::fs::write(&path, &single).unwrap();
    let got = read_with(&path, (single.len() - 1) as u64);
    let reasons = dropped(&got);
    assert_eq!((got.records, reasons.len()), (1, 1));
    assert!(
        reasons[0].contains("over the") && reasons[0].contains("read whole, as one record"),
        "{}",
        reasons[0]
    );
}

/// Detection claims protobuf only under its names and only when the head decodes: JSON named
/// `.pb` is still JSON, bytes that are no request are nothing, a request under another name is
/// not claimed, and bytes alone (no file) are never protobuf.
#[test]
fn detection_needs_the_name_and_a_decoding_head() {
    let dir = tempfile::tempdir().unwrap();
    let detect = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let head = traceaudit::read::read_head(&path).unwrap();
        Format::detect_file(&path, &head)
    };
    let json = std::fs::read(testdata("otel/strands-1.14/get_user_location.json")).unwrap();
    assert_eq!(detect("json.pb", &json), Some(Format::Otel));
    let single =
        single_message(&requests(&testdata("otel/strands-1.14/get_user_location.json")).unwrap());
    assert_eq!(detect("a.binpb", &single), Some(Format::OtlpProto));
    assert_eq!(detect("a.PROTO.BIN", &single), Some(Format::OtlpProto));
    assert_eq!(detect("a.bin", &single), None);
    assert_eq!(Format::detect(&single), None);
    assert_eq!(
        detect("noise.pb", b"\x0a\x05hello world, not a request"),
        None
    );
    assert_eq!(detect("zeros.pb", &[0u8; 4096]), None);
    assert_eq!(detect("text.pb", b"plain text\n"), None);
    // A head that holds only the start of a large first message is still recognised.
    let mut big = fixture_messages();
    let pad = KeyValue {
        key: "padding".into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue("x".repeat(200_000))),
        }),
        ..KeyValue::default()
    };
    let mut req = ExportTraceServiceRequest::decode(big[0].as_slice()).unwrap();
    req.resource_spans[0].scope_spans[0].spans[0]
        .attributes
        .push(pad);
    big[0] = req.encode_to_vec();
    assert_eq!(detect("big.pb", &framed(&big)), Some(Format::OtlpProto));
    assert_eq!(detect("big.binpb", &big[0]), Some(Format::OtlpProto));
}
