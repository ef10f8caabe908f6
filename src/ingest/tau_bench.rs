//! tau-bench v1 results: one JSON list of `{task_id, trial, reward, info, traj}` records, where
//! `traj` is an OpenAI chat-completions message list (assistant `tool_calls` nest the name and the
//! arguments, a JSON string, under `function`; tool messages answer with `tool_call_id`), mapped
//! by `chat` as tau2's messages are.
//!
//! The list is read as a stream, one record at a time: a `json_scan::Scanner` reads the file in
//! large chunks and hands each record over as bytes in memory, which are parsed (with the
//! `json_pick` seeds), turned into [`ChatMessage`]s, built into a conversation by
//! [`trajectory::build`] and handed to the sink before the next record is read. Only the keys a
//! record needs are kept; the rest is skipped by the parser without being built.

use crate::error::Error;
use std::cell::Cell;
use std::collections::HashMap;
use std::io::{self, Read, Seek};

use serde::de::MapAccess;
use serde_json::Value;

use crate::ingest::chat::{chat_messages, RawMessage};
use crate::ingest::json_pick::{
    broken_at, dropped, non_empty_str, partial, python_note, scalar_text, skip, whole_file, ListOf,
    Pick, Picked, Shape, Tracked,
};
use crate::ingest::json_scan::{ScanError, Scanner};
use crate::ingest::trajectory::{self, ChatMessage, RunTemplate};
use crate::ingest::{Input, Locator, Sink};

const FORMAT: &str = "tau-bench";

/// Read one tau-bench results file.
pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    let mut scan = match Scanner::open(input.path, &input.limits)? {
        Ok(scan) => scan,
        Err(not_json) => {
            let reason = not_json.reason("only whitespace", "a JSON list or object");
            whole_file(input, sink, FORMAT, reason);
            return Ok(());
        }
    };
    let mut state = State {
        input,
        sink,
        current: Cell::new(None),
        next: 0,
        seen: HashMap::new(),
        top_is_object: false,
        python_outside: 0,
    };
    let outcome = state.document(&mut scan).and_then(|()| scan.end());
    if let Some(sha256) = scan.file_digest() {
        state.sink.file_digest(sha256);
    }
    state.python_outside += scan.take_python_numbers();
    if state.python_outside > 0 {
        state.sink.quarantine(partial(
            input,
            FORMAT,
            Locator::File,
            python_note(state.python_outside, "outside the records"),
        ));
    }
    if let Err(err) = outcome {
        let (err, offset) = scan.describe(err)?;
        broken_at(
            input,
            state.sink,
            FORMAT,
            ["record", "document"],
            &err,
            state.current.get(),
            offset,
        );
        return Ok(());
    }
    if state.top_is_object {
        whole_file(
            input,
            state.sink,
            FORMAT,
            "the document is a JSON object; tau-bench results are a list of \
             {task_id, trial, info, traj} records",
        );
    }
    Ok(())
}

/// One record, reduced to the keys the adapter uses.
#[derive(Default)]
struct RawRecord {
    task_id: Option<Value>,
    trial: Option<Value>,
    info: Option<Shape<ModelInfo>>,
    traj: Option<Shape<Vec<Shape<RawMessage>>>>,
}

impl Pick for RawRecord {
    fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "task_id" => self.task_id = Some(map.next_value()?),
            "trial" => self.trial = Some(map.next_value()?),
            "info" => self.info = Some(map.next_value_seed(Picked(ModelInfo::default()))?),
            "traj" => self.traj = Some(map.next_value_seed(ListOf::new())?),
            _ => skip(map)?,
        }
        Ok(())
    }
}

/// The part of a record's `info` that names the model, when a writer recorded it there.
#[derive(Default)]
struct ModelInfo {
    model: Option<Value>,
}

impl Pick for ModelInfo {
    fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "model" => self.model = Some(map.next_value()?),
            _ => skip(map)?,
        }
        Ok(())
    }
}

struct State<'a, 'b> {
    input: &'a Input<'b>,
    sink: &'a mut dyn Sink,
    /// The record being parsed, while it is parsed.
    current: Cell<Option<u64>>,
    next: u64,
    /// Conversation ids already stored, with the record that stored them.
    seen: HashMap<String, u64>,
    top_is_object: bool,
    /// Python's special numbers read as `null` outside any record.
    python_outside: u64,
}

impl State<'_, '_> {
    /// The document's top level: a list of records (an object is read through and reported by
    /// [`read`]).
    fn document<R: Read + Seek>(&mut self, scan: &mut Scanner<R>) -> Result<(), ScanError> {
        if scan.peek()? != Some(b'[') {
            scan.drain_object()?;
            self.top_is_object = true;
            return Ok(());
        }
        let mut list = scan.enter();
        while scan.next_element(&mut list)? {
            let index = self.next;
            self.python_outside += scan.take_python_numbers();
            let item = scan.parse(Tracked {
                current: &self.current,
                index,
                inner: Picked(RawRecord::default()),
            });
            match item {
                Ok(item) => {
                    self.next += 1;
                    let python = scan.take_python_numbers();
                    self.record(index, item, python);
                }
                Err(ScanError::Skipped(reason)) => {
                    self.next += 1;
                    self.current.set(None);
                    self.sink.records_read(1);
                    self.sink.quarantine(dropped(
                        self.input,
                        FORMAT,
                        Locator::Record(index),
                        format!("record {index} {reason}; it was passed over"),
                    ));
                }
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    fn record(&mut self, index: u64, record: Shape<RawRecord>, python: u64) {
        self.sink.records_read(1);
        match self.prepare(index, record) {
            Ok((id, messages, model)) => {
                if python > 0 {
                    self.sink.quarantine(partial(
                        self.input,
                        FORMAT,
                        Locator::Record(index),
                        python_note(python, &format!("in record {index} ({id})")),
                    ));
                }
                let template = RunTemplate {
                    format: FORMAT.to_string(),
                    source: self.input.display.to_string(),
                    agent: None,
                    model,
                };
                let conversation = trajectory::build(
                    &id,
                    messages,
                    &template,
                    &mut *self.sink,
                    Locator::Record(index),
                );
                self.seen.insert(id, index);
                self.sink.conversation(conversation, index);
            }
            Err(reason) => self.sink.quarantine(dropped(
                self.input,
                FORMAT,
                Locator::Record(index),
                reason.to_string(),
            )),
        }
    }

    /// Check a record and map its messages; `Err` is the reason it is dropped.
    fn prepare(
        &self,
        index: u64,
        record: Shape<RawRecord>,
    ) -> crate::error::Result<(String, Vec<ChatMessage>, Option<String>)> {
        let record = record
            .map_err(|what| Error::Malformed(format!("record {index} is {what}, not an object")))?;
        let task_id = record
            .task_id
            .as_ref()
            .and_then(scalar_text)
            .ok_or_else(|| Error::Malformed(format!("record {index} has no task_id")))?;
        let trial = record.trial.as_ref().and_then(scalar_text).ok_or_else(|| {
            Error::Malformed(format!("record {index} (task {task_id}) has no trial"))
        })?;
        let id = format!("{task_id}-{trial}");
        if let Some(first) = self.seen.get(&id) {
            return Err(Error::Malformed(format!(
                "conversation {id} (task_id {task_id}, trial {trial}) repeats record {first} of \
                 this file; the first copy is kept"
            )));
        }
        let traj = match record.traj {
            None => {
                return Err(Error::Malformed(format!(
                    "record {index} ({id}) has no traj list"
                )))
            }
            Some(Err(what)) => {
                return Err(Error::Malformed(format!(
                    "record {index} ({id}): traj is {what}, not a message list"
                )))
            }
            Some(Ok(list)) => list,
        };
        let messages = chat_messages(traj)
            .map_err(|e| Error::Malformed(format!("record {index} ({id}): {e}")))?;
        let model = match record.info {
            Some(Ok(info)) => info.model.as_ref().and_then(non_empty_str),
            _ => None,
        };
        Ok((id, messages, model))
    }
}

/// tau-bench v1: a JSON list of `{task_id, trial, reward, info, traj}`.
pub struct TauBenchAdapter;

impl crate::ingest::Adapter for TauBenchAdapter {
    fn name(&self) -> &'static str {
        "tau-bench"
    }
    fn family(&self) -> &'static str {
        "tau-bench"
    }
    fn about(&self) -> &'static str {
        "tau-bench v1: a JSON list of {task_id, trial, reward, info, traj}"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        crate::ingest::Match::strong_if(
            head.text.starts_with('[') && head.text.contains("\"traj\""),
        )
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> std::io::Result<()> {
        read(input, sink)
    }
    fn input_bytes_per_row(&self) -> Option<u64> {
        // The shared results hold 517 bytes a row (4,115,366 bytes, 7,962 runs and events);
        // an eighth less leaves room for denser ones.
        Some(450)
    }
}

impl crate::ingest::Format {
    #[allow(non_upper_case_globals)]
    pub const TauBench: crate::ingest::Format = crate::ingest::Format(&TauBenchAdapter);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::{Collect, Severity};
    use crate::model::{EventKind, LandingFlags, Role};
    use std::io::Write;

    /// Run the adapter over `text` written to a temporary file.
    fn read_text(text: &[u8]) -> Collect {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text).unwrap();
        let mut sink = Collect::default();
        read(&Input::new(file.path(), "fixture.json"), &mut sink).unwrap();
        sink
    }

    /// A small well-formed record.
    fn record(task: u32, trial: u32) -> String {
        format!(
            r#"{{"task_id": {task}, "trial": {trial}, "reward": 1.0, "info": {{"source": "user"}},
            "traj": [
              {{"role": "system", "content": "policy"}},
              {{"role": "user", "content": "hello"}},
              {{"content": null, "role": "assistant", "tool_calls": [{{"id": "c1", "type": "function",
                 "function": {{"name": "get_user", "arguments": "{{\"user_id\": \"u1\"}}"}}}}]}},
              {{"role": "tool", "tool_call_id": "c1", "name": "get_user", "content": "{{\"name\": \"U\"}}"}},
              {{"content": "Found you.", "role": "assistant"}},
              {{"role": "user", "content": "thanks ###STOP###"}}
            ]}}"#
        )
    }

    fn dropped_at(sink: &Collect) -> Vec<Locator> {
        sink.quarantined
            .iter()
            .filter(|q| q.severity == Severity::Dropped)
            .map(|q| q.locator.clone())
            .collect()
    }

    fn read_limited(text: &[u8], record_bytes: u64) -> Collect {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text).unwrap();
        let mut sink = Collect::default();
        let mut input = Input::new(file.path(), "fixture.json");
        input.limits.record_bytes = record_bytes;
        read(&input, &mut sink).unwrap();
        sink
    }

    #[test]
    fn python_numbers_are_read_as_null_and_noted() {
        let first = record(1, 0).replace("\"reward\": 1.0", "\"reward\": NaN");
        let second = record(2, 0).replace("\"reward\": 1.0", "\"reward\": -Infinity");
        let text = format!("[{first}, {second}, {}]", record(3, 0));
        let sink = read_text(text.as_bytes());
        assert_eq!(sink.records, 3);
        assert_eq!(sink.conversations.len(), 3);
        let notes: Vec<_> = sink
            .quarantined
            .iter()
            .map(|q| (q.severity, q.locator.clone()))
            .collect();
        assert_eq!(
            notes,
            vec![
                (Severity::Partial, Locator::Record(0)),
                (Severity::Partial, Locator::Record(1))
            ]
        );
        assert!(sink.quarantined[1].reason.starts_with(
            "1 number(s) in record 1 (2-0) written as NaN or Infinity were read as null"
        ));
    }

    #[test]
    fn records_too_large_or_too_deep_are_passed_over() {
        let source = "\"source\": \"user\"";
        let big = record(2, 0).replace(source, &format!("\"source\": \"{}\"", "x".repeat(5000)));
        // Nested in a value the adapter keeps (a skipped one is passed over unbuilt).
        let deep = record(3, 0).replace(
            "\"content\": \"hello\"",
            &format!("\"content\": {}{}", "[".repeat(200), "]".repeat(200)),
        );
        let text = format!("[{}, {big}, {deep}, {}]", record(1, 0), record(4, 0));
        let sink = read_limited(text.as_bytes(), 4096);
        assert_eq!(sink.records, 4);
        let ids: Vec<_> = sink
            .conversations
            .iter()
            .map(|(c, _)| c.id.as_str())
            .collect();
        assert_eq!(ids, vec!["1-0", "4-0"]);
        assert_eq!(
            dropped_at(&sink),
            vec![Locator::Record(1), Locator::Record(2)]
        );
        assert!(
            sink.quarantined[0]
                .reason
                .contains("over the 4 KiB record limit"),
            "{}",
            sink.quarantined[0].reason
        );
        assert!(sink.quarantined[1]
            .reason
            .contains("nests lists and objects deeper than 127 levels"));
    }

    #[test]
    fn maps_records_to_conversations() {
        let sink = read_text(format!("[{}, {}]", record(7, 2), record(8, 0)).as_bytes());
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        assert_eq!(sink.records, 2);
        assert_eq!(sink.conversations.len(), 2);
        let (conv, at) = &sink.conversations[0];
        assert_eq!((conv.id.as_str(), *at), ("7-2", 0));
        assert_eq!(sink.conversations[1].0.id, "8-0");
        assert_eq!(conv.runs.len(), 2);
        let run = &conv.runs[0];
        assert_eq!(run.turn, 1);
        assert_eq!(run.format, "tau-bench");
        assert_eq!(run.source, "fixture.json");
        assert_eq!(run.model, None);
        assert_eq!(run.user_message.as_deref(), Some("hello"));
        assert_eq!(run.answer.as_deref(), Some("Found you."));
        let landings: Vec<_> = run.landings().collect();
        assert_eq!(landings.len(), 1);
        assert_eq!(landings[0].tool_name.as_deref(), Some("get_user"));
        assert_eq!(landings[0].call_id.as_deref(), Some("c1"));
        // The recorded JSON string is kept byte for byte.
        assert_eq!(
            landings[0].arguments.as_deref(),
            Some(r#"{"user_id": "u1"}"#)
        );
        assert_eq!(landings[0].text.as_deref(), Some(r#"{"name": "U"}"#));
        assert!(!landings[0].has_flag(LandingFlags::UNANSWERED));
        // The system prompt opens turn 1's history.
        assert_eq!(conv.history_for(0)[0].role, Role::System);
        assert_eq!(conv.runs[1].turn, 2);
    }

    #[test]
    fn model_comes_from_info_when_recorded() {
        let text = record(1, 0).replace(r#""source": "user""#, r#""model": "gpt-4o""#);
        let sink = read_text(format!("[{text}]").as_bytes());
        assert_eq!(
            sink.conversations[0].0.runs[0].model.as_deref(),
            Some("gpt-4o")
        );
    }

    #[test]
    fn arguments_that_are_not_json_are_kept_as_recorded() {
        let text = r#"[{"task_id": 1, "trial": 0, "traj": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": null, "tool_calls": [
              {"id": "a", "type": "function", "function": {"name": "t", "arguments": "{user: 1"}},
              {"id": "b", "type": "function", "function": {"name": "u", "arguments": {"k": 2, "a": 1}}},
              {"id": "c", "type": "function", "function": {"name": "v"}}]}]}]"#;
        let sink = read_text(text.as_bytes());
        let args: Vec<_> = sink.conversations[0].0.runs[0]
            .landings()
            .map(|l| l.arguments.clone().unwrap())
            .collect();
        assert_eq!(args, vec!["{user: 1", r#"{"k":2,"a":1}"#, "{}"]);
        // Never answered: kept, flagged.
        assert!(sink.conversations[0].0.runs[0]
            .landings()
            .all(|l| l.has_flag(LandingFlags::UNANSWERED)));
    }

    #[test]
    fn malformed_records_are_dropped_and_the_batch_goes_on() {
        let text = format!(
            r#"[{},
            42,
            "text",
            [1, 2, {{"nested": true}}],
            {{"task_id": 5, "trial": 0}},
            {{"task_id": 6, "trial": 0, "traj": [{{"content": "no role"}}]}},
            {{"task_id": 7, "trial": 0, "traj": "not a list"}},
            {{"trial": 0, "traj": []}},
            {{"task_id": 9, "trial": 0, "traj": [{{"role": "narrator", "content": "?"}}]}},
            {{"task_id": 10, "trial": 0, "traj": [{{"role": "assistant", "tool_calls": [{{"id": "x"}}]}}]}},
            {{"task_id": 11, "trial": 0, "traj": [7]}},
            {}]"#,
            record(1, 0),
            record(2, 0)
        );
        let sink = read_text(text.as_bytes());
        assert_eq!(sink.records, 12);
        let ids: Vec<_> = sink
            .conversations
            .iter()
            .map(|(c, at)| (c.id.as_str(), *at))
            .collect();
        assert_eq!(ids, vec![("1-0", 0), ("2-0", 11)]);
        assert_eq!(
            dropped_at(&sink),
            (1..=10).map(Locator::Record).collect::<Vec<_>>()
        );
        let reasons: Vec<&str> = sink.quarantined.iter().map(|q| q.reason.as_str()).collect();
        assert!(reasons[0].contains("is a number, not an object"));
        assert!(reasons[1].contains("is a string"));
        assert!(reasons[2].contains("is a list"));
        assert!(reasons[3].contains("(5-0) has no traj list"));
        assert!(reasons[4].contains("message 0: no role"));
        assert!(reasons[5].contains("traj is a string"));
        assert!(reasons[6].contains("has no task_id"));
        assert!(reasons[7].contains("unknown role \"narrator\""));
        assert!(reasons[8].contains("tool call 0 has no name"));
        assert!(reasons[9].contains("message 0 is a number"));
        assert!(sink
            .quarantined
            .iter()
            .all(|q| q.format == Some("tau-bench")));
    }

    #[test]
    fn repeated_conversation_id_keeps_the_first() {
        let later = record(1, 0).replace("Found you.", "Second copy.");
        let sink = read_text(format!("[{}, {later}]", record(1, 0)).as_bytes());
        assert_eq!(sink.records, 2);
        assert_eq!(sink.conversations.len(), 1);
        assert_eq!(
            sink.conversations[0].0.runs[0].answer.as_deref(),
            Some("Found you.")
        );
        assert_eq!(dropped_at(&sink), vec![Locator::Record(1)]);
        assert!(sink.quarantined[0].reason.contains("1-0"));
    }

    #[test]
    fn truncated_inside_a_record_keeps_what_came_before() {
        let text = format!(
            r#"[{}, {}, {{"task_id": 3, "trial": 0, "traj": [{{"role": "user", "cont"#,
            record(1, 0),
            record(2, 0)
        );
        let sink = read_text(text.as_bytes());
        assert_eq!(sink.conversations.len(), 2);
        assert_eq!(sink.records, 3);
        assert_eq!(dropped_at(&sink), vec![Locator::Record(2)]);
        assert!(
            sink.quarantined[0].reason.contains("EOF"),
            "{:?}",
            sink.quarantined
        );
    }

    #[test]
    fn syntax_error_between_records_names_a_byte() {
        // A missing comma: the parser fails looking for the next element, not inside one.
        let good = format!("[{} ", record(1, 0));
        let text = format!("{good}}} ]");
        let sink = read_text(text.as_bytes());
        assert_eq!(sink.conversations.len(), 1);
        assert_eq!(sink.records, 2);
        let Locator::Byte(at) = dropped_at(&sink)[0] else {
            panic!("{:?}", sink.quarantined)
        };
        // Within the parser's one byte of look-ahead of the stray brace.
        assert!((good.len() as u64..=good.len() as u64 + 1).contains(&at));
        assert!(sink.quarantined[0].reason.contains("expected `,` or `]`"));
    }

    #[test]
    fn trailing_garbage_after_the_list_is_reported() {
        let sink = read_text(format!("[{}]\n#trailer", record(1, 0)).as_bytes());
        assert_eq!(sink.conversations.len(), 1);
        assert!(matches!(dropped_at(&sink)[..], [Locator::Byte(_)]));
        assert!(sink.quarantined[0].reason.contains("trailing"));
    }

    #[test]
    fn empty_and_non_json_files_are_one_dropped_record() {
        for (text, expect) in [
            (&b""[..], "empty"),
            (&b"  \n\t "[..], "only whitespace"),
            (&b"hello, world"[..], "not a JSON list or object"),
            (&b"\"a string\""[..], "not a JSON list or object"),
            (&b"{\"task_id\": 1, \"traj\": []}"[..], "is a JSON object"),
        ] {
            let sink = read_text(text);
            assert!(sink.conversations.is_empty());
            assert_eq!(sink.records, 1);
            assert_eq!(dropped_at(&sink), vec![Locator::File]);
            assert!(
                sink.quarantined[0].reason.contains(expect),
                "{:?}",
                sink.quarantined
            );
        }
    }

    #[test]
    fn byte_order_mark_and_empty_list() {
        let sink = read_text(format!("\u{feff}\n[{}]", record(4, 1)).as_bytes());
        assert_eq!(sink.conversations[0].0.id, "4-1");
        assert!(sink.quarantined.is_empty());
        let sink = read_text(b"[]");
        assert_eq!((sink.records, sink.conversations.len()), (0, 0));
        assert!(sink.quarantined.is_empty());
    }

    #[test]
    fn content_parts_and_string_ids() {
        let text = r#"[{"task_id": "t-9", "trial": "0", "traj": [
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}, "b"]},
            {"role": "assistant", "content": "ok"}]}]"#;
        let sink = read_text(text.as_bytes());
        let conv = &sink.conversations[0].0;
        assert_eq!(conv.id, "t-9-0");
        assert_eq!(conv.runs[0].user_message.as_deref(), Some("a\nb"));
        assert_eq!(conv.runs[0].events_of(EventKind::Message).count(), 2);
    }
}
