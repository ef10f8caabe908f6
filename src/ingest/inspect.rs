//! Inspect AI eval logs, in both of the shapes Inspect writes:
//! - a JSON log `{version, status, eval, plan, results, stats, samples[], reductions}`;
//! - an `.eval` ZIP archive with a `header.json` (or, while the eval runs,
//!   `_journal/start.json`) and one member `samples/<id>_epoch_<n>.json` per sample, each
//!   compressed with DEFLATE or zstd.
//!
//! A sample (id and epoch) is one conversation, `<task>/<eval id>/<sample id>/<epoch>`. Its
//! `messages` are the trajectory, built into runs by [`trajectory::build`]: assistant
//! `tool_calls[{id, function, arguments}]` paired with the tool messages that answer them
//! (`tool_call_id`, `function`, `error`) are the landings. The sample's tool events
//! (`{event: "tool", id, function, arguments, result, error, timestamp, completed,
//! working_time}`) add what the messages lack: when each call started, how long it took, and
//! whether it failed.
//!
//! Inspect keeps a sample compact in two ways, both undone here:
//! - content over a size limit is replaced by `attachment://<hash>` and stored once in the
//!   sample's `attachments` map. A reference the map does not hold is kept as it is written and
//!   reported as a partial quarantine entry.
//! - newer logs pool the messages that model events repeat (`events_data.messages`) and give
//!   each model event ranges into the pool (`input_refs: [[start, end), ...]`) instead of its
//!   input. A sample whose `messages` list is missing or empty is rebuilt from its last
//!   top-level model event (the pooled or inline input, then the output message), with a note.
//!
//! Logs reach gigabytes, so exactly one sample is held at a time: the JSON log is read with a
//! `json_scan::Scanner`, which hands each sample over as bytes in memory (unneeded keys are
//! skipped unread, model event inputs are kept only for the latest event), and archive members
//! are decompressed one after the other. Records are samples. A sample (or member) over the
//! record limit of [`Limits`] is quarantined unread and the next one is read; Python's `NaN` and
//! `Infinity` are read as `null`, with a note on the sample.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek};
use std::marker::PhantomData;
use std::path::Path;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::ingest::json_pick::{
    broken_at, content_text, drain_map, dropped, first_key, kind_of, non_empty, partial,
    python_note, scalar_text, scalars_are_wrong, skip, whole_file, Pick, Picked, Shape, Tracked,
};
use crate::ingest::json_scan::{parse_python_lenient, ScanError, Scanner};
use crate::ingest::limits::{read_bounded, size_text, strip_bom};
use crate::ingest::trajectory::{self, parse_iso_ms, ChatMessage, ChatToolCall, RunTemplate};
use crate::ingest::{Input, Limits, Locator, Sink};
use crate::model::{Conversation, EventKind, Role};

const FORMAT: &str = "inspect-ai";
const ATTACHMENT: &str = "attachment://";
/// How the earliest logs wrote the same references.
const OLD_ATTACHMENT: &str = "tc://";

/// Read one Inspect log, an `.eval` archive or a JSON log.
pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    let mut magic = [0u8; 2];
    let mut file = File::open(input.path)?;
    let mut got = 0;
    while got < magic.len() {
        let n = file.read(&mut magic[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    drop(file);
    if got == 2 && &magic == b"PK" {
        read_archive(input, sink)
    } else {
        read_json(input, sink)
    }
}

/// Does the start of a file look like an `.eval` archive: a ZIP whose first member is one that
/// Inspect writes?
pub(crate) fn is_eval_archive(head: &[u8]) -> bool {
    if !head.starts_with(b"PK\x03\x04") || head.len() < 30 {
        return false;
    }
    let name_len = u16::from_le_bytes([head[26], head[27]]) as usize;
    let Some(name) = head.get(30..30 + name_len) else {
        return false;
    };
    let name = String::from_utf8_lossy(name);
    matches!(
        name.as_ref(),
        "header.json" | "summaries.json" | "reductions.json"
    ) || name.starts_with("_journal/")
        || name.starts_with("samples/")
}

/// Does the start of a file look like a JSON log? Inspect writes `version` first and the `eval`
/// spec soon after it.
pub(crate) fn is_json_log(text: &str) -> bool {
    first_key(text) == Some("version")
        && text.contains("\"eval\"")
        && (text.contains("\"task\"") || text.contains("\"samples\""))
}

// ---------------------------------------------------------------------------------------------
// The eval header.
// ---------------------------------------------------------------------------------------------

/// What the log's `eval` spec says about every sample.
#[derive(Debug, Default, Clone)]
struct EvalSpec {
    task: Option<String>,
    eval_id: Option<String>,
    task_id: Option<String>,
    run_id: Option<String>,
    model: Option<String>,
    solver: Option<String>,
}

impl Pick for EvalSpec {
    fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        let slot = match key {
            "task" => &mut self.task,
            "eval_id" => &mut self.eval_id,
            "task_id" => &mut self.task_id,
            "run_id" => &mut self.run_id,
            "model" => &mut self.model,
            "solver" => &mut self.solver,
            _ => return skip(map),
        };
        let value: Value = map.next_value()?;
        *slot = non_empty(Some(&value));
        Ok(())
    }
}

/// `header.json` and `_journal/start.json`: the `eval` spec, and the log's `status` and
/// `error` (only the header has them).
#[derive(Default)]
struct HeaderDoc {
    eval: Option<Shape<EvalSpec>>,
    outcome: Outcome,
}

impl Pick for HeaderDoc {
    fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "eval" => self.eval = Some(map.next_value_seed(Picked(EvalSpec::default()))?),
            "status" | "error" => self.outcome.take(key, map.next_value()?),
            _ => skip(map)?,
        }
        Ok(())
    }
}

/// How the eval ended, as the log says: `status` (`started`, `success`, `cancelled`, `error`)
/// and the error's message.
#[derive(Debug, Default, Clone)]
struct Outcome {
    status: Option<String>,
    error: Option<String>,
}

impl Outcome {
    fn take(&mut self, key: &str, value: Value) {
        match key {
            "status" => self.status = non_empty(Some(&value)),
            _ => {
                let message = match &value {
                    Value::Object(o) => non_empty(o.get("message")),
                    other => non_empty(Some(other)),
                };
                // The first line of the message: tracebacks follow it in some logs.
                self.error = message.map(|m| {
                    let line = m.lines().next().unwrap_or_default().trim();
                    let cut: String = line.chars().take(200).collect();
                    if cut.len() < line.len() {
                        format!("{cut}...")
                    } else {
                        cut
                    }
                });
            }
        }
    }

    /// Why a log without samples yields no conversation: one dropped record whose reason says
    /// how the eval ended, so that a cancelled or failed eval shows up in an audit of a folder
    /// of logs instead of reading as an empty success.
    fn no_samples(&self, written: &str) -> String {
        let why = match self.status.as_deref() {
            None | Some("started") => "the eval never finished (status \"started\": still \
                                       running when the log was copied, or its process was \
                                       stopped)"
                .to_string(),
            Some("cancelled") => {
                "the eval was cancelled before any sample was logged (status \"cancelled\")"
                    .to_string()
            }
            Some("error") => format!(
                "the eval failed before any sample was logged (status \"error\"{})",
                self.error
                    .as_ref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            ),
            Some("success") => "the eval succeeded but its samples were not logged (status \
                                \"success\": written with log_samples off, or the samples were \
                                removed)"
                .to_string(),
            Some(other) => format!("status {other:?}"),
        };
        format!("the log holds no samples ({written}): {why}")
    }
}

// ---------------------------------------------------------------------------------------------
// One sample, as read from the log.
// ---------------------------------------------------------------------------------------------

/// A sample reduced to what the adapter uses.
#[derive(Default)]
struct RawSample {
    id: Option<Value>,
    epoch: Option<Value>,
    messages: Option<Value>,
    /// Ranges into the message pool standing for `messages` (pooled form of the final list).
    message_refs: Option<Value>,
    events: Events,
    /// `events` was there but was not a list: what it was.
    events_kind: Option<&'static str>,
    attachments: Option<Value>,
    /// `events_data.messages`.
    pool: Option<Value>,
}

impl Pick for RawSample {
    fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "id" => self.id = Some(map.next_value()?),
            "epoch" => self.epoch = Some(map.next_value()?),
            "messages" => self.messages = Some(map.next_value()?),
            "message_refs" => self.message_refs = Some(map.next_value()?),
            "attachments" => self.attachments = Some(map.next_value()?),
            "events" => {
                let shape = map.next_value_seed(EventList {
                    events: &mut self.events,
                    depth: 0,
                })?;
                self.events_kind = shape.err();
            }
            "events_data" => {
                if let Ok(data) = map.next_value_seed(Picked(EventsData::default()))? {
                    self.pool = data.messages;
                }
            }
            _ => skip(map)?,
        }
        Ok(())
    }
}

#[derive(Default)]
struct EventsData {
    messages: Option<Value>,
}

impl Pick for EventsData {
    fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "messages" => self.messages = Some(map.next_value()?),
            _ => skip(map)?,
        }
        Ok(())
    }
}

/// What the sample's events add to its messages.
#[derive(Default)]
struct Events {
    /// Tool events by tool-call id.
    tools: HashMap<String, ToolTiming>,
    /// The latest model event at the top level (not inside a tool or subtask).
    last_model: Option<ModelCall>,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct ToolTiming {
    started_ms: Option<i64>,
    duration_ms: Option<f64>,
    /// The tool's error message when it failed.
    error: Option<String>,
}

struct ModelCall {
    input: Option<Value>,
    input_refs: Option<Value>,
    output: Option<Value>,
}

/// The `events` list (or a tool's nested `events`): each event is read and folded into
/// [`Events`] before the next one is parsed.
struct EventList<'x> {
    events: &'x mut Events,
    depth: u32,
}

impl<'de> DeserializeSeed<'de> for EventList<'_> {
    type Value = Shape<()>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Shape<()>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for EventList<'_> {
    type Value = Shape<()>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape<()>, A::Error> {
        loop {
            let event = RawEvent {
                events: &mut *self.events,
                depth: self.depth,
                fields: EventFields::default(),
            };
            match seq.next_element_seed(Picked(event))? {
                None => break,
                Some(Ok(event)) => event.fold(),
                // An event that is not an object carries nothing the adapter uses.
                Some(Err(_)) => {}
            }
        }
        Ok(Ok(()))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Shape<()>, A::Error> {
        drain_map(map)?;
        Ok(Err("an object"))
    }

    scalars_are_wrong!();
}

#[derive(Default)]
struct EventFields {
    event: Option<String>,
    id: Option<String>,
    timestamp: Option<String>,
    completed: Option<String>,
    working_time: Option<f64>,
    error: Option<Value>,
    input: Option<Value>,
    input_refs: Option<Value>,
    output: Option<Value>,
}

struct RawEvent<'x> {
    events: &'x mut Events,
    depth: u32,
    fields: EventFields,
}

impl Pick for RawEvent<'_> {
    fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        let f = &mut self.fields;
        match key {
            "event" => f.event = map.next_value::<Value>()?.as_str().map(str::to_string),
            "id" => f.id = scalar_text(&map.next_value::<Value>()?),
            "timestamp" => f.timestamp = map.next_value::<Value>()?.as_str().map(str::to_string),
            "completed" => f.completed = map.next_value::<Value>()?.as_str().map(str::to_string),
            "working_time" => f.working_time = map.next_value::<Value>()?.as_f64(),
            "error" => f.error = Some(map.next_value()?),
            "input" => f.input = Some(map.next_value()?),
            "input_refs" => f.input_refs = Some(map.next_value()?),
            "output" => f.output = Some(map.next_value()?),
            // A tool that ran an agent (or a subtask) records that agent's events inside it.
            "events" => {
                let _nested = map.next_value_seed(EventList {
                    events: &mut *self.events,
                    depth: self.depth + 1,
                })?;
            }
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl RawEvent<'_> {
    fn fold(self) {
        let f = self.fields;
        match f.event.as_deref() {
            Some("tool") => {
                let Some(id) = f.id else { return };
                let started_ms = f.timestamp.as_deref().and_then(parse_iso_ms);
                let done_ms = f.completed.as_deref().and_then(parse_iso_ms);
                let duration_ms = match (started_ms, done_ms) {
                    (Some(s), Some(d)) if d >= s => Some((d - s) as f64),
                    _ => f.working_time.map(|w| w * 1000.0),
                };
                let error = match f.error {
                    None | Some(Value::Null) | Some(Value::Bool(false)) => None,
                    Some(Value::Object(o)) => Some(
                        non_empty(o.get("message")).unwrap_or_else(|| "tool error".to_string()),
                    ),
                    Some(Value::String(s)) => Some(s),
                    Some(other) => Some(other.to_string()),
                };
                let timing = ToolTiming {
                    started_ms,
                    duration_ms,
                    error,
                };
                // A later event for the same call (a pending one completed) wins when it knows more.
                match self.events.tools.get(&id) {
                    Some(known) if known.duration_ms.is_some() || timing.duration_ms.is_none() => {}
                    _ => {
                        self.events.tools.insert(id, timing);
                    }
                }
            }
            Some("model") if self.depth == 0 => {
                self.events.last_model = Some(ModelCall {
                    input: f.input,
                    input_refs: f.input_refs,
                    output: f.output,
                });
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// From a sample to a conversation.
// ---------------------------------------------------------------------------------------------

/// Everything shared by the samples of one log.
struct Log<'a, 'b> {
    input: &'a Input<'b>,
    sink: &'a mut dyn Sink,
    spec: EvalSpec,
    outcome: Outcome,
    /// Conversation ids already stored, with their record.
    seen: HashMap<String, u64>,
}

impl Log<'_, '_> {
    /// The first part of every conversation id: the task and the eval's unique id.
    fn id_prefix(&self) -> String {
        let unique = self
            .spec
            .eval_id
            .as_ref()
            .or(self.spec.task_id.as_ref())
            .or(self.spec.run_id.as_ref());
        match (&self.spec.task, unique) {
            (Some(task), Some(unique)) => format!("{task}/{unique}"),
            (Some(task), None) => task.clone(),
            (None, Some(unique)) => unique.clone(),
            (None, None) => file_stem(Path::new(self.input.name)),
        }
    }

    /// One sample read from the log (already counted as a record). `what` names it for reasons
    /// ("sample 3", "member samples/3_epoch_1.json").
    /// `python` counts Python's special numbers that were read as `null` in it.
    fn sample(&mut self, index: u64, what: &str, sample: Shape<RawSample>, python: u64) {
        let locator = Locator::Record(index);
        match self.convert(index, what, sample) {
            Ok(conversation) => {
                if python > 0 {
                    let note = python_note(python, &format!("in {what}"));
                    self.sink
                        .quarantine(partial(self.input, FORMAT, locator, note));
                }
                self.sink.conversation(conversation, index)
            }
            Err(reason) => self
                .sink
                .quarantine(dropped(self.input, FORMAT, locator, reason)),
        }
    }

    fn convert(
        &mut self,
        index: u64,
        what: &str,
        sample: Shape<RawSample>,
    ) -> Result<Conversation, String> {
        let mut sample = sample.map_err(|kind| format!("{what} is {kind}, not an object"))?;
        let id = sample
            .id
            .as_ref()
            .and_then(scalar_text)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| format!("{what} has no id"))?;
        let epoch = match &sample.epoch {
            None | Some(Value::Null) => "1".to_string(),
            Some(v) => scalar_text(v)
                .ok_or_else(|| format!("{what} (id {id}): epoch is {}", kind_of(v)))?,
        };
        let conversation_id = format!("{}/{id}/{epoch}", self.id_prefix());
        if let Some(first) = self.seen.get(&conversation_id) {
            return Err(format!(
                "{what}: sample {id} epoch {epoch} repeats record {first} of this log; the first \
                 copy is kept"
            ));
        }
        let label = format!("{what} (id {id}, epoch {epoch})");
        let mut notes = Vec::new();
        let limits = self.input.limits;
        let messages = sample_messages(&mut sample, &label, &mut notes, &limits)?;
        let attachments = attachment_map(sample.attachments.take());
        let mut resolved = Vec::with_capacity(messages.len());
        // References repeat their attachment's text: what they add is held to the record limit.
        let mut budget = Budget {
            left: limits.record_bytes,
            refused: 0,
        };
        for (i, mut message) in messages.into_iter().enumerate() {
            let mut missing = Vec::new();
            resolve_attachments(&mut message, &attachments, &mut missing, &mut budget);
            if !missing.is_empty() {
                notes.push(format!(
                    "{label}: message {i} refers to {}, which the sample's attachments do not \
                     hold; the reference text is kept",
                    missing.join(", ")
                ));
            }
            resolved.push(message);
        }
        if budget.refused > 0 {
            notes.push(format!(
                "{label}: its attachment references would add more than the {} record limit; \
                 {} reference(s) past it are kept as written",
                size_text(limits.record_bytes),
                budget.refused
            ));
        }
        if let Some(kind) = sample.events_kind {
            notes.push(format!(
                "{label}: events is {kind}, not a list; landings carry no timing"
            ));
        }
        let first_model = resolved.iter().find_map(|m| {
            (m.get("role").and_then(Value::as_str) == Some("assistant"))
                .then(|| non_empty(m.get("model")))
                .flatten()
        });
        let chat = chat_messages(&resolved, &label, &mut notes);
        for note in notes {
            self.sink
                .quarantine(partial(self.input, FORMAT, Locator::Record(index), note));
        }
        let template = RunTemplate {
            format: FORMAT.to_string(),
            source: self.input.display.to_string(),
            agent: self.spec.solver.clone(),
            model: self.spec.model.clone().or(first_model),
        };
        let mut conversation = trajectory::build(
            &conversation_id,
            chat,
            &template,
            &mut *self.sink,
            Locator::Record(index),
        );
        add_tool_timing(&mut conversation, &sample.events.tools);
        self.seen.insert(conversation_id, index);
        Ok(conversation)
    }
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "inspect".to_string())
}

/// The sample's message list: `messages`, else the pooled `message_refs`, else the last model
/// event's input and output. `Err` when there is nothing to build a trajectory from.
fn sample_messages(
    sample: &mut RawSample,
    label: &str,
    notes: &mut Vec<String>,
    limits: &Limits,
) -> Result<Vec<Value>, String> {
    let pool = match sample.pool.take() {
        Some(Value::Array(pool)) => pool,
        _ => Vec::new(),
    };
    // A solver that calls the model itself leaves `messages` holding the prompt alone; the
    // replies are then only in the model events, and the conversation is rebuilt from them.
    let mut prompt_only = None;
    match sample.messages.take() {
        Some(Value::Array(list)) if !list.is_empty() => {
            let replied = list
                .iter()
                .any(|m| m.get("role").and_then(Value::as_str) == Some("assistant"));
            let model_replied = sample
                .events
                .last_model
                .as_ref()
                .is_some_and(|m| model_reply(m).is_some());
            if replied || !model_replied {
                return Ok(list);
            }
            prompt_only = Some(list);
        }
        Some(Value::Array(_)) | Some(Value::Null) | None => {}
        Some(other) => {
            return Err(format!(
                "{label}: messages is {}, not a list",
                kind_of(&other)
            ))
        }
    }
    if prompt_only.is_none() {
        if let Some(refs) = sample.message_refs.take().filter(|r| !r.is_null()) {
            return expand_refs(&refs, &pool, limits)
                .map_err(|e| format!("{label}: message_refs cannot be resolved: {e}"));
        }
    }
    let Some(model) = sample.events.last_model.take() else {
        return Err(format!(
            "{label} has no messages and no model event to rebuild them from"
        ));
    };
    let reply = model_reply(&model).cloned();
    let mut list = match (model.input, model.input_refs) {
        (Some(Value::Array(input)), _) if !input.is_empty() => input,
        (_, Some(refs)) if !refs.is_null() => expand_refs(&refs, &pool, limits).map_err(|e| {
            format!("{label} has no messages, and its last model event's input_refs cannot be resolved: {e}")
        })?,
        _ => Vec::new(),
    };
    if list.is_empty() {
        // The model was called without recorded input: the prompt comes from `messages`.
        list = prompt_only.clone().unwrap_or_default();
    }
    let inputs = list.len();
    let replied = reply.is_some();
    list.extend(reply);
    if list.is_empty() {
        return Err(format!(
            "{label} has no messages, and its last model event has neither input nor output"
        ));
    }
    let why = if prompt_only.is_some() {
        "messages hold no reply of the model"
    } else {
        "has no messages list"
    };
    notes.push(format!(
        "{label} {why}; rebuilt from its last model event ({inputs} input \
         message(s){})",
        if replied {
            " and the output message"
        } else {
            ", no output message"
        }
    ));
    Ok(list)
}

/// The message a model event's output gives (its first choice).
fn model_reply(model: &ModelCall) -> Option<&Value> {
    model
        .output
        .as_ref()
        .and_then(|o| o.get("choices"))
        .and_then(|c| c.get(0))
        .and_then(|c| c.get("message"))
}

/// Expand range references `[[start, end), ...]` against the message pool. Ranges can repeat
/// messages: what they expand to is held to the record limit.
fn expand_refs(refs: &Value, pool: &[Value], limits: &Limits) -> Result<Vec<Value>, String> {
    let Value::Array(ranges) = refs else {
        return Err(format!("the references are {}, not a list", kind_of(refs)));
    };
    let mut out = Vec::new();
    let mut expanded = 0u64;
    for range in ranges {
        let bounds = match range {
            Value::Array(pair) if pair.len() == 2 => pair[0].as_u64().zip(pair[1].as_u64()),
            _ => None,
        };
        let Some((start, end)) = bounds else {
            return Err(format!("{range} is not a [start, end] pair"));
        };
        let (start, end) = (start as usize, end as usize);
        if start > end || end > pool.len() {
            return Err(format!(
                "range [{start}, {end}) does not fit the {} pooled message(s)",
                pool.len()
            ));
        }
        for message in &pool[start..end] {
            expanded = expanded.saturating_add(value_size(message));
            if expanded > limits.record_bytes {
                return Err(format!("they expand {}", limits.over()));
            }
            out.push(message.clone());
        }
    }
    Ok(out)
}

/// About how many bytes a value holds: its text, and a little for each node.
fn value_size(value: &Value) -> u64 {
    match value {
        Value::String(s) => 16 + s.len() as u64,
        Value::Array(items) => items.iter().map(value_size).fold(16, u64::saturating_add),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| k.len() as u64 + value_size(v))
            .fold(16, u64::saturating_add),
        _ => 16,
    }
}

/// What attachment references may still add to a sample, and how many were left unresolved
/// for want of room.
struct Budget {
    left: u64,
    refused: usize,
}

fn attachment_map(attachments: Option<Value>) -> HashMap<String, String> {
    match attachments {
        Some(Value::Object(map)) => map
            .into_iter()
            .filter_map(|(k, v)| match v {
                Value::String(s) => Some((k, s)),
                _ => None,
            })
            .collect(),
        _ => HashMap::new(),
    }
}

/// Replace every string that is exactly an attachment reference by the attachment's text.
/// References the map does not hold are left as they are and listed in `missing`.
fn resolve_attachments(
    value: &mut Value,
    attachments: &HashMap<String, String>,
    missing: &mut Vec<String>,
    budget: &mut Budget,
) {
    match value {
        Value::String(s) => {
            let key = s
                .strip_prefix(ATTACHMENT)
                .or_else(|| s.strip_prefix(OLD_ATTACHMENT));
            if let Some(key) = key {
                match attachments.get(key) {
                    Some(text) if text.len() as u64 <= budget.left => {
                        budget.left -= text.len() as u64;
                        *s = text.clone();
                    }
                    Some(_) => budget.refused += 1,
                    None => missing.push(s.clone()),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                resolve_attachments(item, attachments, missing, budget);
            }
        }
        Value::Object(map) => {
            for (_, item) in map.iter_mut() {
                resolve_attachments(item, attachments, missing, budget);
            }
        }
        _ => {}
    }
}

/// Map Inspect chat messages onto the format-neutral ones. Messages that cannot be used are
/// left out with a note.
fn chat_messages(messages: &[Value], label: &str, notes: &mut Vec<String>) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(messages.len());
    // The position in `out` of the last tool message answering each call id: a user message
    // naming calls joins the latest of them, and a sample may hold 100,000 messages.
    let mut last_tool: HashMap<String, usize> = HashMap::new();
    for (i, message) in messages.iter().enumerate() {
        let Value::Object(m) = message else {
            notes.push(format!(
                "{label}: message {i} is {}, not an object; left out",
                kind_of(message)
            ));
            continue;
        };
        let role_text = m.get("role").and_then(Value::as_str);
        let Some(role) = role_text.and_then(Role::parse) else {
            notes.push(format!(
                "{label}: message {i} has {}; left out",
                match role_text {
                    Some(r) => format!("the unknown role {r:?}"),
                    None => "no role".to_string(),
                }
            ));
            continue;
        };
        let mut chat = ChatMessage::new(role, content_text(m.get("content")));
        chat.timestamp_ms = m
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_iso_ms);
        match role {
            Role::Assistant => chat.tool_calls = tool_calls(m.get("tool_calls"), label, i, notes),
            Role::Tool => {
                chat.call_id = m.get("tool_call_id").and_then(scalar_text);
                chat.tool_name = non_empty(m.get("function"));
                if let Some(error) = m.get("error").filter(|e| !e.is_null()) {
                    chat.error = true;
                    if chat.text.is_empty() {
                        chat.text = match error {
                            Value::Object(o) => non_empty(o.get("message")).unwrap_or_default(),
                            Value::String(s) => s.clone(),
                            _ => String::new(),
                        };
                    }
                }
            }
            Role::User => {
                // A user message naming tool calls carries part of their results (for example
                // an image a tool returned): it goes with the tool message it belongs to.
                let ids: Vec<String> = match m.get("tool_call_id") {
                    Some(Value::String(s)) => vec![s.clone()],
                    Some(Value::Array(list)) => list.iter().filter_map(scalar_text).collect(),
                    _ => Vec::new(),
                };
                if let Some(first) = ids.first() {
                    let owner = ids.iter().filter_map(|id| last_tool.get(id)).max();
                    match owner {
                        Some(&k) => {
                            let tool = &mut out[k];
                            if !chat.text.is_empty() {
                                if !tool.text.is_empty() {
                                    tool.text.push('\n');
                                }
                                tool.text.push_str(&chat.text);
                            }
                        }
                        None => {
                            chat.role = Role::Tool;
                            chat.call_id = Some(first.clone());
                            last_tool.insert(first.clone(), out.len());
                            out.push(chat);
                        }
                    }
                    continue;
                }
            }
            Role::System => {}
        }
        if let (Role::Tool, Some(id)) = (chat.role, &chat.call_id) {
            last_tool.insert(id.clone(), out.len());
        }
        out.push(chat);
    }
    out
}

/// An assistant message's `tool_calls`: `[{id, function, arguments}]` (Inspect), or the OpenAI
/// shape `[{id, function: {name, arguments}}]`.
fn tool_calls(
    calls: Option<&Value>,
    label: &str,
    index: usize,
    notes: &mut Vec<String>,
) -> Vec<ChatToolCall> {
    let list = match calls {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(list)) => list,
        Some(other) => {
            notes.push(format!(
                "{label}: message {index}: tool_calls is {}, not a list; its calls are left out",
                kind_of(other)
            ));
            return Vec::new();
        }
    };
    let mut out = Vec::with_capacity(list.len());
    for (k, call) in list.iter().enumerate() {
        let (name, arguments) = match call.get("function") {
            Some(Value::Object(f)) => (non_empty(f.get("name")), f.get("arguments")),
            other => (non_empty(other), call.get("arguments")),
        };
        let Some(name) = name else {
            notes.push(format!(
                "{label}: message {index}: tool call {k} names no function; left out"
            ));
            continue;
        };
        let arguments = match arguments {
            None | Some(Value::Null) => "{}".to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
        };
        out.push(ChatToolCall {
            id: call.get("id").and_then(scalar_text),
            name,
            arguments,
        });
    }
    out
}

/// Give each landing the start, duration and error of the tool event with its call id.
fn add_tool_timing(conversation: &mut Conversation, tools: &HashMap<String, ToolTiming>) {
    if tools.is_empty() {
        return;
    }
    for run in &mut conversation.runs {
        for event in &mut run.events {
            if event.kind() != EventKind::Landing {
                continue;
            }
            let Some(timing) = event.call_id.as_ref().and_then(|id| tools.get(id)) else {
                continue;
            };
            if timing.started_ms.is_some() {
                event.timestamp_ms = timing.started_ms;
            }
            if timing.duration_ms.is_some() {
                event.duration_ms = timing.duration_ms;
            }
            if timing.error.is_some() {
                event.error = true;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// JSON logs.
// ---------------------------------------------------------------------------------------------

fn read_json(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    let mut scan = match Scanner::open(input.path, &input.limits)? {
        Ok(scan) => scan,
        Err(not_json) => {
            whole_file(
                input,
                sink,
                FORMAT,
                not_json.reason("nothing but blanks", "a JSON document"),
            );
            return Ok(());
        }
    };
    let mut log = Log {
        input,
        sink,
        spec: EvalSpec::default(),
        outcome: Outcome::default(),
        seen: HashMap::new(),
    };
    let mut top = TopState {
        current: Cell::new(None),
        next: 0,
        samples: None,
        top_kind: None,
        python_outside: 0,
    };
    let outcome = top.document(&mut scan, &mut log).and_then(|()| scan.end());
    top.python_outside += scan.take_python_numbers();
    if top.python_outside > 0 {
        log.sink.quarantine(partial(
            input,
            FORMAT,
            Locator::File,
            python_note(top.python_outside, "outside the samples"),
        ));
    }
    if let Err(err) = outcome {
        let (err, offset) = scan.describe(err)?;
        broken_at(
            input,
            log.sink,
            FORMAT,
            ["sample", "log"],
            &err,
            top.current.get(),
            offset,
        );
        return Ok(());
    }
    if let Some(kind) = top.top_kind {
        whole_file(
            input,
            log.sink,
            FORMAT,
            format!("the document is {kind}, not an Inspect log object"),
        );
        return Ok(());
    }
    match top.samples {
        Some(Ok(())) if top.next > 0 => {}
        Some(Ok(())) => {
            let reason = log.outcome.no_samples("its samples list is empty");
            whole_file(input, log.sink, FORMAT, reason)
        }
        None | Some(Err("null")) => {
            let reason = log.outcome.no_samples("it has no samples list");
            whole_file(input, log.sink, FORMAT, reason)
        }
        Some(Err(kind)) => whole_file(
            input,
            log.sink,
            FORMAT,
            format!("the log's samples is {kind}, not a list"),
        ),
    }
    Ok(())
}

/// Where the walk of a JSON log stands.
struct TopState {
    /// The sample being parsed, while it is parsed.
    current: Cell<Option<u64>>,
    next: u64,
    samples: Option<Shape<()>>,
    top_kind: Option<&'static str>,
    /// Python's special numbers read as `null` outside any sample.
    python_outside: u64,
}

impl TopState {
    /// The log's top level: an object whose `eval` names the task and whose `samples` are read
    /// one at a time; everything else is skipped unbuilt.
    fn document<R: Read + Seek>(
        &mut self,
        scan: &mut Scanner<R>,
        log: &mut Log<'_, '_>,
    ) -> Result<(), ScanError> {
        if scan.peek()? == Some(b'[') {
            scan.drain_list()?;
            self.top_kind = Some("a list");
            return Ok(());
        }
        let mut object = scan.enter();
        while let Some(key) = scan.next_key(&mut object)? {
            match key.as_str() {
                "eval" => match scan.parse(Picked(EvalSpec::default())) {
                    Ok(Ok(spec)) => log.spec = spec,
                    Ok(Err(_)) => {}
                    Err(ScanError::Skipped(reason)) => log.sink.quarantine(partial(
                        log.input,
                        FORMAT,
                        Locator::File,
                        format!(
                            "the log's eval {reason}; it was passed over, and the task and model \
                             are unknown"
                        ),
                    )),
                    Err(err) => return Err(err),
                },
                "samples" => {
                    let shape = self.samples(scan, log)?;
                    self.samples = Some(shape);
                }
                "status" | "error" => match scan.parse(PhantomData::<Value>) {
                    Ok(value) => log.outcome.take(&key, value),
                    Err(ScanError::Skipped(_)) => {}
                    Err(err) => return Err(err),
                },
                _ => scan.skip()?,
            }
        }
        Ok(())
    }

    /// The `samples` list, one sample at a time.
    fn samples<R: Read + Seek>(
        &mut self,
        scan: &mut Scanner<R>,
        log: &mut Log<'_, '_>,
    ) -> Result<Shape<()>, ScanError> {
        let kind = match scan.peek()? {
            Some(b'[') => None,
            Some(b'{') => Some("an object"),
            Some(b'"') => Some("a string"),
            Some(b'n') => Some("null"),
            Some(b't' | b'f') => Some("a boolean"),
            _ => Some("a number"),
        };
        if let Some(kind) = kind {
            scan.skip()?;
            return Ok(Err(kind));
        }
        let mut list = scan.enter();
        while scan.next_element(&mut list)? {
            let index = self.next;
            self.python_outside += scan.take_python_numbers();
            let item = scan.parse(Tracked {
                current: &self.current,
                index,
                inner: Picked(RawSample::default()),
            });
            match item {
                Ok(sample) => {
                    self.next += 1;
                    log.sink.records_read(1);
                    let python = scan.take_python_numbers();
                    log.sample(index, &format!("sample {index}"), sample, python);
                }
                Err(ScanError::Skipped(reason)) => {
                    self.next += 1;
                    self.current.set(None);
                    log.sink.records_read(1);
                    log.sink.quarantine(dropped(
                        log.input,
                        FORMAT,
                        Locator::Record(index),
                        format!("sample {index} {reason}; it was passed over"),
                    ));
                }
                Err(err) => return Err(err),
            }
        }
        Ok(Ok(()))
    }
}

// ---------------------------------------------------------------------------------------------
// `.eval` archives.
// ---------------------------------------------------------------------------------------------

/// Is this archive member a sample (`samples/<id>_epoch_<n>.json`)? Inspect writes the sample
/// id into the name as it is, so an id holding `/` (`suite/task/issue_3603`) nests folders under
/// `samples/`: everything between `samples/` and the last `_epoch_<n>.json` is the id.
fn is_sample_member(name: &str) -> bool {
    name.strip_prefix("samples/")
        .and_then(|rest| rest.strip_suffix(".json"))
        .and_then(|stem| stem.rsplit_once("_epoch_"))
        .is_some_and(|(id, epoch)| {
            !id.is_empty() && !epoch.is_empty() && epoch.bytes().all(|b| b.is_ascii_digit())
        })
}

/// The prefix `samples/<id>_epoch_<n>` of a sample stored in Inspect's chunked layout, from
/// its shell member `samples/<id>_epoch_<n>/sample.json` (its messages, events and attachments
/// are numbered chunks under the same prefix).
fn chunked_sample(name: &str) -> Option<&str> {
    let prefix = name.strip_suffix("/sample.json")?;
    is_sample_member(&format!("{prefix}.json")).then_some(prefix)
}

/// Read one JSON member into a `T`: the value, and how many of Python's special numbers were
/// read as `null` in it. `Err` is why it could not be read. The member is decompressed into
/// memory only when it fits the record limit (its declared size is checked first, and the read
/// is bounded whatever it declares).
fn read_member<R, T>(
    zip: &mut zip::ZipArchive<R>,
    index: usize,
    limits: &Limits,
) -> Result<(Shape<T>, u64), String>
where
    R: Read + io::Seek,
    T: Pick + Default,
{
    let member = zip
        .by_index(index)
        .map_err(|e| format!("cannot be opened: {e}"))?;
    let declared = member.size();
    if declared > limits.record_bytes {
        return Err(format!("decompresses to {}", limits.too_large(declared)));
    }
    let bytes = match read_bounded(member, limits.record_bytes, declared) {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            return Err(format!(
                "decompresses to more than it declares ({declared} bytes), {}",
                limits.over()
            ))
        }
        Err(e) => return Err(format!("cannot be decompressed: {e}")),
    };
    let text = strip_bom(&bytes);
    parse_python_lenient(text, || Picked(T::default()))
        .map_err(|e| format!("is not readable JSON: {e}"))
}

fn read_archive(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    let file = File::open(input.path)?;
    let mut zip = match zip::ZipArchive::new(BufReader::new(file)) {
        Ok(zip) => zip,
        Err(e) => {
            whole_file(
                input,
                sink,
                FORMAT,
                format!("not a readable .eval archive: {e}"),
            );
            return Ok(());
        }
    };
    let mut log = Log {
        input,
        sink,
        spec: EvalSpec::default(),
        outcome: Outcome::default(),
        seen: HashMap::new(),
    };
    // The header is written last (when the eval finishes); a running eval has only its journal.
    let mut problems = Vec::new();
    let mut found = false;
    for name in ["header.json", "_journal/start.json"] {
        let Some(index) = zip.index_for_name(name) else {
            continue;
        };
        let problem = match read_member::<_, HeaderDoc>(&mut zip, index, &input.limits) {
            Ok((
                Ok(HeaderDoc {
                    eval: Some(Ok(spec)),
                    outcome,
                }),
                _,
            )) => {
                log.spec = spec;
                log.outcome = outcome;
                found = true;
                break;
            }
            Ok((Ok(_), _)) => "holds no eval spec".to_string(),
            Ok((Err(kind), _)) => format!("is {kind}, not an object"),
            Err(reason) => reason,
        };
        problems.push(format!("{name} {problem}"));
    }
    if !problems.is_empty() {
        let outcome = if found {
            "the eval spec was read from the journal instead"
        } else {
            "the task and model are unknown"
        };
        log.sink.quarantine(partial(
            input,
            FORMAT,
            Locator::File,
            format!("{}; {outcome}", problems.join("; ")),
        ));
    }
    let names: Vec<(usize, String)> = (0..zip.len())
        .filter_map(|i| zip.name_for_index(i).map(|n| (i, n.to_string())))
        .filter(|(_, name)| name.starts_with("samples/"))
        .collect();
    let chunked: Vec<&str> = names
        .iter()
        .filter_map(|(_, n)| chunked_sample(n))
        .collect();
    // Samples, whole or chunked, in the archive's order; a chunked sample is one record.
    let mut samples = Vec::new();
    let mut unknown = Vec::new();
    for (index, name) in &names {
        if is_sample_member(name) {
            samples.push((*index, name.as_str(), false));
        } else if chunked_sample(name).is_some() {
            samples.push((*index, name.as_str(), true));
        } else if !chunked.iter().any(|prefix| {
            name.strip_prefix(prefix)
                .is_some_and(|r| r.starts_with('/'))
        }) {
            unknown.push(name.as_str());
        }
    }
    if !unknown.is_empty() {
        log.sink.quarantine(partial(
            input,
            FORMAT,
            Locator::File,
            format!(
                "{} member(s) under samples/ are not named samples/<id>_epoch_<n>.json and \
                 belong to no chunked sample; not read: {}",
                unknown.len(),
                unknown
                    .iter()
                    .take(3)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    if samples.is_empty() {
        let reason = log
            .outcome
            .no_samples("it has no samples/<id>_epoch_<n>.json member");
        whole_file(input, log.sink, FORMAT, reason);
        return Ok(());
    }
    for (record, (index, name, chunks)) in samples.into_iter().enumerate() {
        let record = record as u64;
        log.sink.records_read(1);
        let what = format!("member {name}");
        if chunks {
            log.sink.quarantine(dropped(
                input,
                FORMAT,
                Locator::Record(record),
                format!(
                    "{what}: the sample is stored in Inspect's chunked layout (this shell, with \
                     its messages, events and attachments in numbered chunks beside it), which \
                     this reader does not read"
                ),
            ));
            continue;
        }
        match read_member::<_, RawSample>(&mut zip, index, &input.limits) {
            Ok((sample, python)) => log.sample(record, &what, sample, python),
            Err(reason) => {
                log.sink.quarantine(dropped(
                    input,
                    FORMAT,
                    Locator::Record(record),
                    format!("{what} {reason}"),
                ));
            }
        }
    }
    Ok(())
}

/// Inspect AI eval logs: a JSON log or an `.eval` ZIP archive.
pub struct InspectAdapter;

impl crate::ingest::Adapter for InspectAdapter {
    fn name(&self) -> &'static str {
        "inspect-ai"
    }
    fn family(&self) -> &'static str {
        "inspect-ai"
    }
    fn about(&self) -> &'static str {
        "Inspect AI eval logs: a JSON log or an .eval ZIP archive"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        crate::ingest::Match::strong_if(is_eval_archive(head.bytes) || is_json_log(head.text))
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> std::io::Result<()> {
        read(input, sink)
    }
}

impl crate::ingest::Format {
    #[allow(non_upper_case_globals)]
    pub const InspectAi: crate::ingest::Format = crate::ingest::Format(&InspectAdapter);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::{Collect, Severity};
    use crate::model::LandingFlags;
    use serde_json::json;
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
            sink.quarantined[0].reason.ends_with(
                "message_refs cannot be resolved: they expand over the 64 KiB record limit"
            ),
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
}
