//! What both shapes of an Inspect log hold: the eval spec, a sample and its events, and how a
//! sample becomes a conversation.

use crate::error::Error;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::ingest::json_pick::{
    content_text, drain_map, dropped, kind_of, non_empty, partial, python_note, scalar_text,
    scalars_are_wrong, skip, Pick, Picked, Shape,
};
use crate::ingest::limits::size_text;
use crate::ingest::trajectory::{self, parse_iso_ms, ChatMessage, ChatToolCall, RunTemplate};
use crate::ingest::{Input, Limits, Locator, Sink};
use crate::model::{Conversation, EventKind, Role};

pub(super) const FORMAT: &str = "inspect-ai";
pub(super) const ATTACHMENT: &str = "attachment://";
/// How the earliest logs wrote the same references.
pub(super) const OLD_ATTACHMENT: &str = "tc://";

// ---------------------------------------------------------------------------------------------
// The eval header.
// ---------------------------------------------------------------------------------------------

/// What the log's `eval` spec says about every sample.
#[derive(Debug, Default, Clone)]
pub(super) struct EvalSpec {
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
pub(super) struct HeaderDoc {
    pub(super) eval: Option<Shape<EvalSpec>>,
    pub(super) outcome: Outcome,
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
pub(super) struct Outcome {
    status: Option<String>,
    error: Option<String>,
}

impl Outcome {
    pub(super) fn take(&mut self, key: &str, value: Value) {
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
    pub(super) fn no_samples(&self, written: &str) -> String {
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
pub(super) struct RawSample {
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
pub(super) struct EventsData {
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
pub(super) struct Events {
    /// Tool events by tool-call id.
    tools: HashMap<String, ToolTiming>,
    /// The latest model event at the top level (not inside a tool or subtask).
    last_model: Option<ModelCall>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct ToolTiming {
    started_ms: Option<i64>,
    duration_ms: Option<f64>,
    /// The tool's error message when it failed.
    error: Option<String>,
}

pub(super) struct ModelCall {
    input: Option<Value>,
    input_refs: Option<Value>,
    output: Option<Value>,
}

/// The `events` list (or a tool's nested `events`): each event is read and folded into
/// [`Events`] before the next one is parsed.
pub(super) struct EventList<'x> {
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
pub(super) struct EventFields {
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

pub(super) struct RawEvent<'x> {
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
pub(super) struct Log<'a, 'b> {
    pub(super) input: &'a Input<'b>,
    pub(super) sink: &'a mut dyn Sink,
    pub(super) spec: EvalSpec,
    pub(super) outcome: Outcome,
    /// Conversation ids already stored, with their record.
    pub(super) seen: HashMap<String, u64>,
}

impl Log<'_, '_> {
    /// The first part of every conversation id: the task and the eval's unique id.
    pub(super) fn id_prefix(&self) -> String {
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
    pub(super) fn sample(&mut self, index: u64, what: &str, sample: Shape<RawSample>, python: u64) {
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
            Err(reason) => {
                self.sink
                    .quarantine(dropped(self.input, FORMAT, locator, reason.to_string()))
            }
        }
    }

    pub(super) fn convert(
        &mut self,
        index: u64,
        what: &str,
        sample: Shape<RawSample>,
    ) -> crate::error::Result<Conversation> {
        let mut sample =
            sample.map_err(|kind| Error::Malformed(format!("{what} is {kind}, not an object")))?;
        let id = sample
            .id
            .as_ref()
            .and_then(scalar_text)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| Error::Malformed(format!("{what} has no id")))?;
        let epoch = match &sample.epoch {
            None | Some(Value::Null) => "1".to_string(),
            Some(v) => scalar_text(v).ok_or_else(|| {
                Error::Malformed(format!("{what} (id {id}): epoch is {}", kind_of(v)))
            })?,
        };
        let conversation_id = format!("{}/{id}/{epoch}", self.id_prefix());
        if let Some(first) = self.seen.get(&conversation_id) {
            return Err(Error::Malformed(format!(
                "{what}: sample {id} epoch {epoch} repeats record {first} of this log; the first \
                 copy is kept"
            )));
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

pub(super) fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "inspect".to_string())
}

/// The sample's message list: `messages`, else the pooled `message_refs`, else the last model
/// event's input and output. `Err` when there is nothing to build a trajectory from.
pub(super) fn sample_messages(
    sample: &mut RawSample,
    label: &str,
    notes: &mut Vec<String>,
    limits: &Limits,
) -> crate::error::Result<Vec<Value>> {
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
            return Err(Error::Malformed(format!(
                "{label}: messages is {}, not a list",
                kind_of(&other)
            )))
        }
    }
    if prompt_only.is_none() {
        if let Some(refs) = sample.message_refs.take().filter(|r| !r.is_null()) {
            return expand_refs(&refs, &pool, limits).map_err(|e| {
                Error::Malformed(format!("{label}: message_refs cannot be resolved: {e}"))
            });
        }
    }
    let Some(model) = sample.events.last_model.take() else {
        return Err(Error::Malformed(format!(
            "{label} has no messages and no model event to rebuild them from"
        )));
    };
    let reply = model_reply(&model).cloned();
    let mut list = match (model.input, model.input_refs) {
        (Some(Value::Array(input)), _) if !input.is_empty() => input,
        (_, Some(refs)) if !refs.is_null() => expand_refs(&refs, &pool, limits).map_err(|e| {
            Error::Malformed(format!("{label} has no messages, and its last model event's input_refs cannot be resolved: {e}"))
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
        return Err(Error::Malformed(format!(
            "{label} has no messages, and its last model event has neither input nor output"
        )));
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
pub(super) fn model_reply(model: &ModelCall) -> Option<&Value> {
    model
        .output
        .as_ref()
        .and_then(|o| o.get("choices"))
        .and_then(|c| c.get(0))
        .and_then(|c| c.get("message"))
}

/// Expand range references `[[start, end), ...]` against the message pool. Ranges can repeat
/// messages: what they expand to is held to the record limit.
pub(super) fn expand_refs(
    refs: &Value,
    pool: &[Value],
    limits: &Limits,
) -> crate::error::Result<Vec<Value>> {
    let Value::Array(ranges) = refs else {
        return Err(Error::Malformed(format!(
            "the references are {}, not a list",
            kind_of(refs)
        )));
    };
    let mut out = Vec::new();
    let mut expanded = 0u64;
    for range in ranges {
        let bounds = match range {
            Value::Array(pair) if pair.len() == 2 => pair[0].as_u64().zip(pair[1].as_u64()),
            _ => None,
        };
        let Some((start, end)) = bounds else {
            return Err(Error::Malformed(format!(
                "{range} is not a [start, end] pair"
            )));
        };
        let (start, end) = (start as usize, end as usize);
        if start > end || end > pool.len() {
            return Err(Error::Malformed(format!(
                "range [{start}, {end}) does not fit the {} pooled message(s)",
                pool.len()
            )));
        }
        for message in &pool[start..end] {
            expanded = expanded.saturating_add(value_size(message));
            if expanded > limits.record_bytes {
                return Err(Error::Malformed(format!("they expand {}", limits.over())));
            }
            out.push(message.clone());
        }
    }
    Ok(out)
}

/// About how many bytes a value holds: its text, and a little for each node.
pub(super) fn value_size(value: &Value) -> u64 {
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
pub(super) struct Budget {
    left: u64,
    refused: usize,
}

pub(super) fn attachment_map(attachments: Option<Value>) -> HashMap<String, String> {
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
pub(super) fn resolve_attachments(
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
pub(super) fn chat_messages(
    messages: &[Value],
    label: &str,
    notes: &mut Vec<String>,
) -> Vec<ChatMessage> {
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
pub(super) fn tool_calls(
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
pub(super) fn add_tool_timing(
    conversation: &mut Conversation,
    tools: &HashMap<String, ToolTiming>,
) {
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
