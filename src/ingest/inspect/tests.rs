use super::sample::*;
use super::*;
use crate::ingest::trajectory::parse_iso_ms;
use crate::ingest::{Collect, Severity};
use crate::ingest::{Limits, Locator};
use crate::model::LandingFlags;
use serde_json::json;
use serde_json::Value;
use std::io::Write;

fn read_bytes(name: &str, bytes: &[u8]) -> Collect {
    read_limited(name, bytes, Limits::default().record_bytes)
}

fn read_limited(name: &str, bytes: &[u8], record_bytes: u64) -> Collect {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let mut sink = Collect::default();
    let mut input = Input::new(&path, name);
    input.limits.record_bytes = record_bytes;
    read(&input, &mut sink).unwrap();
    sink
}

fn log_with(samples: &[Value]) -> Vec<u8> {
    serde_json::to_vec_pretty(&json!({
        "version": 2,
        "status": "success",
        "eval": {"eval_id": "E1", "run_id": "R1", "task": "browse", "task_id": "T1",
                 "model": "openai/gpt-4o-mini", "dataset": {"samples": 2}},
        "plan": {"steps": [{"solver": "use_tools"}, {"solver": "generate"}]},
        "samples": samples,
        "reductions": []
    }))
    .unwrap()
}

/// A sample in the shape Inspect writes: messages inline, events with timings.
fn tool_sample(id: Value) -> Value {
    json!({
        "id": id, "epoch": 1, "input": "Find the page.", "target": "",
        "messages": [
            {"id": "m1", "content": "attachment://aaa", "source": "input", "role": "user"},
            {"id": "m2", "content": "", "source": "generate", "role": "assistant",
             "tool_calls": [{"id": "call_1", "function": "web_browser_go",
                             "arguments": {"url": "https://example.org/"}}],
             "model": "gpt-4o-mini-2024-07-18"},
            {"id": "m3", "content": "[1] page", "role": "tool", "tool_call_id": "call_1",
             "function": "web_browser_go"},
            {"id": "m4", "content": [{"type": "text", "text": "Summary."}], "source": "generate",
             "role": "assistant", "model": "gpt-4o-mini-2024-07-18"}
        ],
        "events": [
            {"event": "model", "timestamp": "2025-05-12T20:27:38.462180-04:00",
             "input": [{"content": "attachment://aaa", "role": "user"}],
             "output": {"choices": [{"message": {"role": "assistant", "content": "x"}}]}},
            {"event": "tool", "type": "function", "id": "call_1", "function": "web_browser_go",
             "arguments": {"url": "https://example.org/"}, "result": "[1] page",
             "events": [{"event": "sandbox", "action": "exec"}],
             "timestamp": "2025-05-12T20:27:39.762878-04:00",
             "completed": "2025-05-12T20:27:44.080452-04:00", "working_time": 4.31}
        ],
        "attachments": {"aaa": "Use the web browser to find the page."}
    })
}

#[test]
fn json_log_sample_becomes_a_conversation() {
    let sink = read_bytes("log.json", &log_with(&[tool_sample(json!(1))]));
    assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
    assert_eq!(sink.records, 1);
    let (conv, at) = &sink.conversations[0];
    assert_eq!(*at, 0);
    assert_eq!(conv.id, "browse/E1/1/1");
    assert_eq!(conv.runs.len(), 1);
    let run = &conv.runs[0];
    assert_eq!(run.turn, 1);
    assert_eq!(run.format, "inspect-ai");
    assert_eq!(run.model.as_deref(), Some("openai/gpt-4o-mini"));
    // The attachment was resolved into the user message.
    assert_eq!(
        run.user_message.as_deref(),
        Some("Use the web browser to find the page.")
    );
    assert_eq!(run.answer.as_deref(), Some("Summary."));
    let landings: Vec<_> = run.landings().collect();
    assert_eq!(landings.len(), 1);
    let l = landings[0];
    assert_eq!(l.tool_name.as_deref(), Some("web_browser_go"));
    assert_eq!(
        l.arguments.as_deref(),
        Some(r#"{"url":"https://example.org/"}"#)
    );
    assert_eq!(l.text.as_deref(), Some("[1] page"));
    assert!(!l.has_flag(LandingFlags::UNANSWERED));
    assert_eq!(l.duration_ms, Some(4318.0));
    assert_eq!(
        l.timestamp_ms,
        parse_iso_ms("2025-05-12T20:27:39.762878-04:00")
    );
    assert!(!l.error);
}

#[test]
fn unresolved_attachment_is_a_partial_note() {
    let mut sample = tool_sample(json!("s1"));
    sample["attachments"] = json!({});
    let sink = read_bytes("log.json", &log_with(&[sample]));
    assert_eq!(sink.conversations.len(), 1);
    assert_eq!(sink.quarantined.len(), 1);
    let q = &sink.quarantined[0];
    assert_eq!(q.severity, Severity::Partial);
    assert_eq!(q.locator, Locator::Record(0));
    assert!(q.reason.contains("attachment://aaa"), "{}", q.reason);
    assert!(q.reason.contains("message 0"), "{}", q.reason);
    let run = &sink.conversations[0].0.runs[0];
    assert_eq!(run.user_message.as_deref(), Some("attachment://aaa"));
}

#[test]
fn pooled_messages_rebuild_a_sample_without_messages() {
    // A condensed sample: model events point into events_data.messages; the final message
    // list is missing. The pool's long content sits in attachments.
    let sample = json!({
        "id": 7, "epoch": 2,
        "events": [
            {"event": "model", "input": [], "input_refs": [[0, 2]],
             "output": {"choices": [{"message": {"role": "assistant", "content": "",
                "tool_calls": [{"id": "c1", "function": "bash", "arguments": {"cmd": "ls"}}]}}]}},
            {"event": "tool", "id": "c1", "function": "bash", "arguments": {"cmd": "ls"},
             "result": "a.txt", "error": {"type": "timeout", "message": "timed out"},
             "working_time": 1.5},
            {"event": "model", "input": [], "input_refs": [[0, 4]],
             "output": {"choices": [{"message": {"role": "assistant", "content": "Done."}}]}}
        ],
        "events_data": {
            "messages": [
                {"role": "system", "content": "attachment://sys"},
                {"role": "user", "content": "List the files."},
                {"role": "assistant", "content": "",
                 "tool_calls": [{"id": "c1", "function": "bash", "arguments": {"cmd": "ls"}}]},
                {"role": "tool", "content": "", "tool_call_id": "c1", "function": "bash",
                 "error": {"type": "timeout", "message": "timed out"}}
            ],
            "calls": []
        },
        "attachments": {"sys": "You are a careful agent."}
    });
    let sink = read_bytes("log.json", &log_with(&[sample]));
    assert_eq!(sink.conversations.len(), 1);
    let notes: Vec<_> = sink.quarantined.iter().map(|q| q.reason.as_str()).collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("rebuilt from its last model event (4 input"));
    let conv = &sink.conversations[0].0;
    assert_eq!(conv.id, "browse/E1/7/2");
    let run = &conv.runs[0];
    assert_eq!(run.answer.as_deref(), Some("Done."));
    let history = conv.history_for(0);
    assert_eq!(history[0].text, "You are a careful agent.");
    let landing = run.landings().next().unwrap();
    assert!(landing.error);
    assert_eq!(landing.text.as_deref(), Some("timed out"));
    assert_eq!(landing.duration_ms, Some(1500.0));
}

#[test]
fn replies_only_in_model_events_rebuild_the_conversation() {
    // A solver that calls the model itself: `messages` holds the prompt, the replies are in
    // the model events only. Before, the run had no assistant message and no answer.
    let sample = json!({
        "id": "q1", "epoch": 1,
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "What is 6 x 7?"}
        ],
        "events": [
            {"event": "model",
             "input": [
                {"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": "What is 6 x 7?"}
             ],
             "output": {"choices": [{"message": {"role": "assistant", "content": "42"}}]}}
        ]
    });
    let sink = read_bytes("log.json", &log_with(&[sample]));
    assert_eq!(sink.conversations.len(), 1);
    let run = &sink.conversations[0].0.runs[0];
    assert_eq!(run.answer.as_deref(), Some("42"));
    assert_eq!(run.user_message.as_deref(), Some("What is 6 x 7?"));
    let notes: Vec<&str> = sink.quarantined.iter().map(|q| q.reason.as_str()).collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("messages hold no reply of the model"),
        "{notes:?}"
    );
    assert_eq!(sink.quarantined[0].severity, Severity::Partial);
    // A model event without input takes the prompt from `messages`.
    let sample = json!({
        "id": "q2", "epoch": 1,
        "messages": [{"role": "user", "content": "Name a prime."}],
        "events": [{"event": "model", "input": [],
             "output": {"choices": [{"message": {"role": "assistant", "content": "7"}}]}}]
    });
    let sink = read_bytes("log.json", &log_with(&[sample]));
    let run = &sink.conversations[0].0.runs[0];
    assert_eq!(run.user_message.as_deref(), Some("Name a prime."));
    assert_eq!(run.answer.as_deref(), Some("7"));
    // A sample whose messages hold the replies is read as written, without a note.
    let sink = read_bytes("log.json", &log_with(&[tool_sample(json!("s1"))]));
    assert!(sink.quarantined.is_empty());
}

#[test]
fn pooled_final_messages_and_bad_refs() {
    let pool = json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"}
    ]);
    let good = json!({"id": "a", "epoch": 1, "message_refs": [[0, 2]],
                      "events_data": {"messages": pool.clone(), "calls": []}});
    let bad = json!({"id": "b", "epoch": 1, "message_refs": [[1, 5]],
                     "events_data": {"messages": pool, "calls": []}});
    let sink = read_bytes("log.json", &log_with(&[good, bad]));
    assert_eq!(sink.records, 2);
    assert_eq!(sink.conversations.len(), 1);
    assert_eq!(
        sink.conversations[0].0.runs[0].answer.as_deref(),
        Some("hello")
    );
    assert_eq!(sink.quarantined.len(), 1);
    assert_eq!(sink.quarantined[0].severity, Severity::Dropped);
    assert_eq!(sink.quarantined[0].locator, Locator::Record(1));
    assert!(sink.quarantined[0]
        .reason
        .contains("range [1, 5) does not fit the 2 pooled"));
}

#[test]
fn bad_samples_are_dropped_one_by_one() {
    let sink = read_bytes(
        "log.json",
        &log_with(&[
            json!(null),
            json!({"epoch": 1, "messages": []}),
            json!({"id": "empty", "epoch": 1, "messages": [], "events": []}),
            json!({"id": "str", "epoch": 1, "messages": "oops"}),
            tool_sample(json!("ok")),
            tool_sample(json!("ok")),
        ]),
    );
    assert_eq!(sink.records, 6);
    assert_eq!(sink.conversations.len(), 1);
    assert_eq!(sink.conversations[0].1, 4);
    let dropped: Vec<_> = sink
        .quarantined
        .iter()
        .filter(|q| q.severity == Severity::Dropped)
        .map(|q| (q.locator.clone(), q.reason.as_str()))
        .collect();
    assert_eq!(dropped.len(), 5, "{dropped:?}");
    assert!(dropped[0].1.contains("sample 0 is null"));
    assert!(dropped[1].1.contains("sample 1 has no id"));
    assert!(dropped[2].1.contains("no messages and no model event"));
    assert!(dropped[3].1.contains("messages is a string"));
    assert!(dropped[4].1.contains("repeats record 4"));
    assert_eq!(dropped[4].0, Locator::Record(5));
}

#[test]
fn truncated_log_keeps_earlier_samples() {
    let full = log_with(&[tool_sample(json!(1)), tool_sample(json!(2))]);
    let text = String::from_utf8(full).unwrap();
    let cut = text.rfind("\"web_browser_go\"").unwrap();
    let sink = read_bytes("log.json", &text.as_bytes()[..cut]);
    assert_eq!(sink.conversations.len(), 1);
    assert_eq!(sink.records, 2);
    let q = sink.quarantined.last().unwrap();
    assert_eq!(q.locator, Locator::Record(1));
    assert!(q.reason.contains("EOF while parsing"), "{}", q.reason);
}

#[test]
fn not_a_log() {
    for (bytes, expect) in [
        (&b""[..], "empty"),
        (&b"hello"[..], "not a JSON document"),
        (&b"[1, 2]"[..], "is a list"),
        (
            &br#"{"version": 2, "eval": {"task": "t"}}"#[..],
            "holds no samples",
        ),
        (
            &br#"{"version": 2, "samples": {"a": 1}}"#[..],
            "samples is an object",
        ),
        (&br#"{"version": 2, "eval": {"#[..], "breaks near byte"),
    ] {
        let sink = read_bytes("x.json", bytes);
        assert!(sink.conversations.is_empty());
        assert_eq!(sink.records, 1);
        assert_eq!(sink.quarantined.len(), 1, "{expect}");
        assert!(
            sink.quarantined[0].reason.contains(expect),
            "{expect}: {:?}",
            sink.quarantined
        );
    }
}

/// Build an `.eval` archive from (name, JSON text, method) members.
fn archive(members: &[(&str, &[u8], zip::CompressionMethod)]) -> Vec<u8> {
    let mut buf = io::Cursor::new(Vec::new());
    {
        let mut w = zip::ZipWriter::new(&mut buf);
        for (name, bytes, method) in members {
            let opts = zip::write::SimpleFileOptions::default().compression_method(*method);
            w.start_file(*name, opts).unwrap();
            w.write_all(bytes).unwrap();
        }
        w.finish().unwrap();
    }
    buf.into_inner()
}

fn header() -> Vec<u8> {
    serde_json::to_vec(&json!({"version": 2, "status": "success",
        "eval": {"task": "browse", "eval_id": "EV", "model": "ollama/gemma3"},
        "plan": {}, "results": {}, "stats": {}}))
    .unwrap()
}

#[test]
fn archive_members_deflate_and_zstd() {
    use zip::CompressionMethod::{Deflated, Stored, Zstd};
    let a = serde_json::to_vec(&tool_sample(json!(1))).unwrap();
    let b = serde_json::to_vec(&tool_sample(json!(2))).unwrap();
    let h = header();
    let bytes = archive(&[
        ("_journal/start.json", &h, Deflated),
        ("samples/1_epoch_1.json", &a, Deflated),
        ("samples/2_epoch_1.json", &b, Zstd),
        ("summaries.json", b"[]", Stored),
        ("header.json", &h, Zstd),
    ]);
    let sink = read_bytes("x.eval", &bytes);
    assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
    assert_eq!(sink.records, 2);
    let ids: Vec<_> = sink
        .conversations
        .iter()
        .map(|(c, at)| (c.id.as_str(), *at))
        .collect();
    assert_eq!(ids, vec![("browse/EV/1/1", 0), ("browse/EV/2/1", 1)]);
    let run = &sink.conversations[1].0.runs[0];
    assert_eq!(run.model.as_deref(), Some("ollama/gemma3"));
    assert_eq!(run.landings().count(), 1);
}

#[test]
fn archive_member_problems_are_records() {
    use zip::CompressionMethod::{Deflated, Zstd};
    let good = serde_json::to_vec(&tool_sample(json!(1))).unwrap();
    let h = header();
    let bytes = archive(&[
        ("samples/1_epoch_1.json", &good, Zstd),
        ("samples/2_epoch_1.json", b"this is not json", Deflated),
        ("samples/3_epoch_1.json", b"[1, 2, 3]", Deflated),
        (
            "samples/4_epoch_1.json",
            br#"{"id": 4, "epoch": 1, "messages": [{"role": "user""#,
            Zstd,
        ),
        // A sample id holding `/` nests the member: a sample like any other.
        ("samples/nested/5_epoch_1.json", b"{}", Deflated),
        ("header.json", &h, Deflated),
    ]);
    let sink = read_bytes("x.eval", &bytes);
    assert_eq!(sink.records, 5);
    assert_eq!(sink.conversations.len(), 1);
    let dropped: Vec<_> = sink
        .quarantined
        .iter()
        .map(|q| (q.locator.clone(), q.reason.as_str()))
        .collect();
    assert_eq!(dropped.len(), 4, "{dropped:?}");
    assert_eq!(dropped[0].0, Locator::Record(1));
    assert!(dropped[0]
        .1
        .contains("member samples/2_epoch_1.json is not readable JSON"));
    assert!(dropped[1].1.contains("is a list, not an object"));
    assert!(dropped[2].1.contains("EOF while parsing"));
    assert_eq!(dropped[3].0, Locator::Record(4));
    assert_eq!(
        dropped[3].1,
        "member samples/nested/5_epoch_1.json has no id"
    );
}

#[test]
fn nested_chunked_and_stray_members() {
    use zip::CompressionMethod::Deflated;
    let mut nested = tool_sample(json!("suite/task/issue_3603/457f8"));
    nested["epoch"] = json!(2);
    let nested = serde_json::to_vec(&nested).unwrap();
    let h = header();
    let bytes = archive(&[
        (
            "samples/suite/task/issue_3603/457f8_epoch_2.json",
            &nested,
            Deflated,
        ),
        ("samples/big_epoch_1/sample.json", b"{}", Deflated),
        ("samples/big_epoch_1/messages/0.json", b"[]", Deflated),
        ("samples/big_epoch_1/events/stats.json", b"{}", Deflated),
        ("samples/notes.txt", b"x", Deflated),
        ("header.json", &h, Deflated),
    ]);
    let sink = read_bytes("x.eval", &bytes);
    assert_eq!(sink.records, 2);
    let ids: Vec<_> = sink
        .conversations
        .iter()
        .map(|(c, _)| c.id.as_str())
        .collect();
    assert_eq!(ids, vec!["browse/EV/suite/task/issue_3603/457f8/2"]);
    let notes: Vec<_> = sink
        .quarantined
        .iter()
        .map(|q| (q.severity, q.locator.clone(), q.reason.as_str()))
        .collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert_eq!(notes[0].0, Severity::Partial);
    assert!(
        notes[0].2.ends_with("not read: samples/notes.txt"),
        "{}",
        notes[0].2
    );
    assert_eq!(notes[1].0, Severity::Dropped);
    assert_eq!(notes[1].1, Locator::Record(1));
    assert!(
        notes[1]
            .2
            .starts_with("member samples/big_epoch_1/sample.json: the sample is stored in Inspect's chunked layout"),
        "{}",
        notes[1].2
    );
}

#[test]
fn logs_without_samples_say_how_the_eval_ended() {
    let log = |status: &str, samples: &str| {
        format!(
            r#"{{"version": 2, "status": "{status}", "eval": {{"task": "t"}}, "error": {{"message": "ValueError: bad\nTraceback..."}}{samples}}}"#
        )
    };
    for (text, expect) in [
        (log("error", r#", "samples": []"#), "(its samples list is empty): the eval failed before any sample was logged (status \"error\": ValueError: bad)"),
        (log("cancelled", r#", "samples": null"#), "(it has no samples list): the eval was cancelled"),
        (log("success", ""), "status \"success\": written with log_samples off"),
    ] {
        let sink = read_bytes("x.json", text.as_bytes());
        assert_eq!(sink.records, 1);
        assert_eq!(sink.quarantined.len(), 1);
        assert_eq!(sink.quarantined[0].severity, Severity::Dropped);
        assert!(sink.quarantined[0].reason.contains(expect), "{}", sink.quarantined[0].reason);
    }
    // An archive whose header says it failed, and one with only its journal.
    let header = serde_json::to_vec(&json!({"version": 2, "status": "error",
        "eval": {"task": "t"}, "error": {"message": "RuntimeError('boom')", "traceback": "..."}}))
    .unwrap();
    let failed = archive(&[("header.json", &header, zip::CompressionMethod::Deflated)]);
    let sink = read_bytes("x.eval", &failed);
    assert!(sink.quarantined[0]
        .reason
        .ends_with("(status \"error\": RuntimeError('boom'))"));
    let start = br#"{"version": 2, "eval": {"task": "t"}, "plan": {}}"#;
    let started = archive(&[(
        "_journal/start.json",
        start,
        zip::CompressionMethod::Deflated,
    )]);
    let sink = read_bytes("x.eval", &started);
    assert!(sink.quarantined[0]
        .reason
        .contains("never finished (status \"started\""));
}

#[test]
fn corrupt_member_data_is_a_dropped_record() {
    use zip::CompressionMethod::Stored;
    let good = serde_json::to_vec(&tool_sample(json!(1))).unwrap();
    let mut bytes = archive(&[
        ("samples/1_epoch_1.json", &good, Stored),
        ("header.json", &header(), Stored),
    ]);
    // Flip a byte inside the stored sample: the CRC no longer matches.
    let at = bytes.windows(8).position(|w| w == b"web_brow").unwrap();
    bytes[at] = b'W';
    let sink = read_bytes("x.eval", &bytes);
    assert_eq!(sink.records, 1);
    assert!(sink.conversations.is_empty());
    assert!(
        sink.quarantined[0]
            .reason
            .contains("cannot be decompressed"),
        "{:?}",
        sink.quarantined
    );
}

#[test]
fn broken_archives() {
    let good = archive(&[(
        "samples/1_epoch_1.json",
        &serde_json::to_vec(&tool_sample(json!(1))).unwrap(),
        zip::CompressionMethod::Deflated,
    )]);
    // Cut before the central directory: nothing can be listed.
    let sink = read_bytes("x.eval", &good[..good.len() / 2]);
    assert_eq!(sink.records, 1);
    assert_eq!(sink.quarantined[0].locator, Locator::File);
    assert!(sink.quarantined[0]
        .reason
        .contains("not a readable .eval archive"));
    // An archive that is not an Inspect log.
    let other = archive(&[("readme.txt", b"hi", zip::CompressionMethod::Stored)]);
    let sink = read_bytes("x.eval", &other);
    assert_eq!(sink.records, 1);
    assert!(sink.quarantined[0].reason.contains("no samples/"));
    // A good archive without a header: the task is unknown, the file stem names the log.
    let sink = read_bytes("nohead.eval", &good);
    assert_eq!(sink.conversations[0].0.id, "nohead/1/1");
    assert!(sink.quarantined.is_empty());
}

/// A sample's JSON text with `score` written as Python writes a NaN.
fn nan_sample(id: u32) -> String {
    let mut sample = tool_sample(json!(id));
    sample["scores"] = json!({"match": {"value": "SCORE"}});
    serde_json::to_string(&sample)
        .unwrap()
        .replace("\"SCORE\"", "NaN")
}

#[test]
fn python_numbers_in_a_log_cost_no_sample() {
    let good = serde_json::to_string(&tool_sample(json!(2))).unwrap();
    let log = String::from_utf8(log_with(&[json!("FIRST"), json!("SECOND")])).unwrap();
    let log = log
        .replace("\"FIRST\"", &nan_sample(1))
        .replace("\"SECOND\"", &good);
    let sink = read_bytes("log.json", log.as_bytes());
    assert_eq!(sink.records, 2);
    assert_eq!(sink.conversations.len(), 2);
    let notes: Vec<_> = sink
        .quarantined
        .iter()
        .map(|q| (q.severity, q.locator.clone(), q.reason.as_str()))
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0].0, Severity::Partial);
    assert_eq!(notes[0].1, Locator::Record(0));
    assert!(notes[0]
        .2
        .starts_with("1 number(s) in sample 0 written as NaN or Infinity were read as null"));

    // The same in an archive member.
    let bytes = archive(&[
        (
            "samples/1_epoch_1.json",
            nan_sample(1).as_bytes(),
            zip::CompressionMethod::Deflated,
        ),
        ("header.json", &header(), zip::CompressionMethod::Deflated),
    ]);
    let sink = read_bytes("x.eval", &bytes);
    assert_eq!(sink.records, 1);
    assert_eq!(sink.conversations.len(), 1);
    assert_eq!(sink.quarantined.len(), 1);
    assert!(sink.quarantined[0]
        .reason
        .starts_with("1 number(s) in member samples/1_epoch_1.json written as NaN"));
}

#[test]
fn byte_order_marks_on_members_are_skipped() {
    let with_bom = |bytes: &[u8]| [&b"\xEF\xBB\xBF"[..], bytes].concat();
    let sample = with_bom(&serde_json::to_vec(&tool_sample(json!(1))).unwrap());
    let head = with_bom(&header());
    let bytes = archive(&[
        (
            "samples/1_epoch_1.json",
            &sample,
            zip::CompressionMethod::Deflated,
        ),
        ("header.json", &head, zip::CompressionMethod::Zstd),
    ]);
    let sink = read_bytes("x.eval", &bytes);
    assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
    assert_eq!(sink.conversations[0].0.id, "browse/EV/1/1");
    // A JSON log with one is read too.
    let sink = read_bytes("log.json", &with_bom(&log_with(&[tool_sample(json!(1))])));
    assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
    assert_eq!(sink.conversations.len(), 1);
}

#[test]
fn samples_over_the_record_limit_are_passed_over() {
    let mut big = tool_sample(json!(2));
    big["input"] = json!("x".repeat(20_000));
    let mut deep = tool_sample(json!(3));
    deep["messages"][0]["content"] = json!("DEEP CONTENT");
    let nested = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let deep_text = serde_json::to_string(&deep)
        .unwrap()
        .replace("\"DEEP CONTENT\"", &nested);
    let log = String::from_utf8(log_with(&[
        tool_sample(json!(1)),
        big.clone(),
        json!("DEEP"),
        tool_sample(json!(4)),
    ]))
    .unwrap()
    .replace("\"DEEP\"", &deep_text);
    let sink = read_limited("log.json", log.as_bytes(), 8192);
    assert_eq!(sink.records, 4);
    let ids: Vec<_> = sink
        .conversations
        .iter()
        .map(|(c, _)| c.id.as_str())
        .collect();
    assert_eq!(ids, vec!["browse/E1/1/1", "browse/E1/4/1"]);
    let dropped: Vec<_> = sink
        .quarantined
        .iter()
        .map(|q| (q.locator.clone(), q.reason.as_str()))
        .collect();
    assert_eq!(dropped.len(), 2, "{dropped:?}");
    assert_eq!(dropped[0].0, Locator::Record(1));
    assert!(
        dropped[0].1.contains("over the 8 KiB record limit"),
        "{}",
        dropped[0].1
    );
    assert_eq!(dropped[1].0, Locator::Record(2));
    assert!(
        dropped[1].1.contains("deeper than 127 levels"),
        "{}",
        dropped[1].1
    );
}

#[test]
fn archive_members_over_the_record_limit_are_not_decompressed() {
    use zip::CompressionMethod::Deflated;
    let good = serde_json::to_vec(&tool_sample(json!(1))).unwrap();
    // A member that inflates far beyond its compressed size: declared honestly...
    let mut bomb = tool_sample(json!(2));
    bomb["input"] = json!("0".repeat(1 << 20));
    let bomb = serde_json::to_vec(&bomb).unwrap();
    let mut big_header: Value = serde_json::from_slice(&header()).unwrap();
    big_header["plan"] = json!("p".repeat(1 << 20));
    let big_header = serde_json::to_vec(&big_header).unwrap();
    let bytes = archive(&[
        ("samples/1_epoch_1.json", &good, Deflated),
        ("samples/2_epoch_1.json", &bomb, Deflated),
        ("header.json", &big_header, Deflated),
    ]);
    assert!(bytes.len() < 64 << 10);
    let sink = read_limited("x.eval", &bytes, 64 << 10);
    assert_eq!(sink.records, 2);
    assert_eq!(sink.conversations.len(), 1);
    let reasons: Vec<_> = sink.quarantined.iter().map(|q| q.reason.as_str()).collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons[0].starts_with("header.json decompresses to 1.0 MiB (1048"),
        "{}",
        reasons[0]
    );
    assert!(reasons[0].ends_with("the task and model are unknown"));
    assert!(reasons[1].starts_with("member samples/2_epoch_1.json decompresses to 1.0 MiB"));
    assert!(reasons[1].contains("over the 64 KiB record limit"));

    // ... and declaring less than it holds: the read stops at the limit.
    let mut lying = archive(&[("samples/2_epoch_1.json", &bomb, Deflated)]);
    let declared = (bomb.len() as u32).to_le_bytes();
    let small = 1000u32.to_le_bytes();
    let mut patched = 0;
    for at in 0..lying.len() - 4 {
        if lying[at..at + 4] == declared {
            lying[at..at + 4].copy_from_slice(&small);
            patched += 1;
        }
    }
    assert_eq!(patched, 2, "the local and the central header");
    let sink = read_limited("x.eval", &lying, 64 << 10);
    assert_eq!(sink.records, 1);
    assert!(
        sink.quarantined[0].reason.contains(
            "decompresses to more than it declares (1000 bytes), over the 64 KiB record limit"
        ),
        "{:?}",
        sink.quarantined
    );
}

#[test]
fn references_cannot_expand_a_sample_past_the_record_limit() {
    // One 10 KB attachment referenced by 50 messages: 500 KB if all were resolved.
    let messages: Vec<Value> = (0..50)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": "attachment://big"})
        })
        .collect();
    let sample = json!({"id": 1, "epoch": 1, "messages": messages,
                        "attachments": {"big": "b".repeat(10_000)}});
    let sink = read_limited("log.json", &log_with(&[sample]), 64 << 10);
    assert_eq!(sink.conversations.len(), 1);
    let runs = &sink.conversations[0].0.runs;
    let resolved = runs
        .iter()
        .filter(|r| r.user_message.as_deref().is_some_and(|m| m.len() == 10_000))
        .count();
    assert_eq!(
        resolved, 3,
        "user messages resolved before the budget ran out"
    );
    let note = &sink.quarantined.last().unwrap().reason;
    assert!(
        note.ends_with(
            "its attachment references would add more than the 64 KiB record limit; 44 \
             reference(s) past it are kept as written"
        ),
        "{note}"
    );

    // Pooled messages repeated by their ranges.
    let pool = vec![json!({"role": "user", "content": "p".repeat(1000)})];
    let refs: Vec<Value> = (0..1000).map(|_| json!([0, 1])).collect();
    let sample = json!({"id": 2, "epoch": 1, "message_refs": refs,
                        "events_data": {"messages": pool}});
    let sink = read_limited("log.json", &log_with(&[sample]), 64 << 10);
    assert!(sink.conversations.is_empty());
    assert!(
        sink.quarantined[0]
            .reason
            .ends_with("message_refs cannot be resolved: they expand over the 64 KiB record limit"),
        "{}",
        sink.quarantined[0].reason
    );
}

/// `n` tool messages, then `n` user messages naming calls: the oldest tool message's, or
/// calls no tool message answers.
#[test]
fn tool_payloads_join_their_tool_messages_in_linear_time() {
    use crate::ingest::linear_cost::assert_linear;
    let convert = |n: usize, unknown: bool| {
        let mut messages: Vec<Value> = (0..n)
            .map(|k| json!({"role": "tool", "content": "r", "tool_call_id": format!("t{k}")}))
            .collect();
        messages.extend((0..n).map(|k| {
            let id = if unknown {
                format!("x{k}")
            } else {
                "t0".to_string()
            };
            json!({"role": "user", "content": "p", "tool_call_id": [id]})
        }));
        let out = chat_messages(&messages, "sample", &mut Vec::new());
        assert_eq!(out.len(), if unknown { 2 * n } else { n });
    };
    assert_linear("payloads for the oldest call", 2_000, |n| convert(n, false));
    assert_linear("payloads for unknown calls", 2_000, |n| convert(n, true));
}

#[test]
fn tool_payload_in_a_user_message_joins_its_tool_message() {
    let sample = json!({"id": 1, "epoch": 1, "messages": [
        {"role": "user", "content": "Take a screenshot."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "s1", "function": "computer", "arguments": {"action": "screenshot"}}]},
        {"role": "tool", "content": "see image", "tool_call_id": "s1", "function": "computer"},
        {"role": "user", "content": [{"type": "image", "image": "data:x"},
                                      {"type": "text", "text": "(image)"}], "tool_call_id": ["s1"]},
        {"role": "assistant", "content": "A desktop."}
    ]});
    let sink = read_bytes("log.json", &log_with(&[sample]));
    assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
    let conv = &sink.conversations[0].0;
    assert_eq!(conv.runs.len(), 1);
    let landing = conv.runs[0].landings().next().unwrap();
    assert_eq!(landing.text.as_deref(), Some("see image\n(image)"));
}
