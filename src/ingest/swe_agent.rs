//! SWE-agent trajectories: one `.traj` JSON file per task,
//! `{environment, trajectory[{action, observation, thought, response, execution_time, ...}],
//! history[{role, content, agent, message_type, is_demo?, thought?, action?, tool_calls?,
//! tool_call_ids?}], info{exit_status, submission, model_stats, ...}, replay_config?}`.
//!
//! A file is one conversation (`<run folder>/<file stem>`, since every run folder names its
//! files after the task instance) and one record. Its messages are taken from:
//! - the `history`, when its messages carry `tool_calls` / `tool_call_ids` (function-calling
//!   agents): each call is a landing, answered by the tool message naming its id;
//! - otherwise the `trajectory` steps: each step's `action` is a call of the tool named by the
//!   command's first word (arguments `{"action": <the whole command>}`), answered by the step's
//!   `observation`; the system prompt, demonstrations and task come from the history up to its
//!   first assistant message;
//! - otherwise (no steps recorded) the history, pairing each assistant `action` with the user
//!   message that follows it.
//!
//! In SWE-agent the only real user message is the task: later user-role messages are the
//! environment talking (observations, format reminders). So one task is one run. A history
//! that restarts (a new `agent` name, or a new system prompt after the task) starts a new task
//! and so a new run. Demonstrations (`is_demo`) are part of the prompt, not the agent's work:
//! they are kept as system text, without landings. Environment messages that answer no action
//! are kept as system text too, so that they stay in the history without opening a turn.
//!
//! Landings get the step's `execution_time` as their duration. The model is `info.model` or the
//! replay config's `agent.model.name`, when present.

use crate::error::Error;
use std::collections::HashMap;
use std::io;
use std::path::Path;

use serde::de::{DeserializeSeed, MapAccess};
use serde_json::Value;

use crate::ingest::json_pick::{
    content_text, dropped, first_key, kind_of, non_empty, open_record_file, partial, scalar_text,
    skip, ListOf, Pick, Picked, Shape,
};
use crate::ingest::trajectory::{self, ChatMessage, ChatToolCall, RunTemplate};
use crate::ingest::{Input, Locator, Sink};
use crate::model::{Conversation, EventKind, Role};

const FORMAT: &str = "swe-agent";

/// Does the start of a file look like a SWE-agent trajectory? Its first key is one of the
/// trajectory's own, and steps or messages follow.
pub(crate) fn is_trajectory(text: &str) -> bool {
    matches!(
        first_key(text),
        Some("environment" | "trajectory" | "history")
    ) && (text.contains("\"action\"") || text.contains("\"role\""))
}

/// The file, reduced to what the adapter uses (per-step copies of the prompt, `query`, and the
/// environment state are skipped unread).
#[derive(Default)]
struct RawTrajectory {
    history: Option<Value>,
    trajectory: Option<Shape<Vec<Shape<Step>>>>,
    info: Option<Shape<Info>>,
    replay_config: Option<Value>,
}

impl Pick for RawTrajectory {
    fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "history" => self.history = Some(map.next_value()?),
            "trajectory" => self.trajectory = Some(map.next_value_seed(ListOf::new())?),
            "info" => self.info = Some(map.next_value_seed(Picked(Info::default()))?),
            "replay_config" => self.replay_config = Some(map.next_value()?),
            _ => skip(map)?,
        }
        Ok(())
    }
}

#[derive(Default)]
struct Step {
    action: Option<Value>,
    observation: Option<Value>,
    thought: Option<Value>,
    response: Option<Value>,
    execution_time: Option<Value>,
}

impl Pick for Step {
    fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        let slot = match key {
            "action" => &mut self.action,
            "observation" => &mut self.observation,
            "thought" => &mut self.thought,
            "response" => &mut self.response,
            "execution_time" => &mut self.execution_time,
            _ => return skip(map),
        };
        *slot = Some(map.next_value()?);
        Ok(())
    }
}

impl Step {
    /// Seconds, written as a number or (in older files) a numeric string.
    fn seconds(&self) -> Option<f64> {
        match self.execution_time.as_ref()? {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
}

#[derive(Default)]
struct Info {
    model: Option<String>,
}

impl Pick for Info {
    fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "model" | "model_name" => {
                let value: Value = map.next_value()?;
                if self.model.is_none() {
                    self.model = non_empty(Some(&value));
                }
            }
            _ => skip(map)?,
        }
        Ok(())
    }
}

/// Read one `.traj` file: one record.
pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    // The trajectory is built whole, so the file is held to the record limit.
    let Some(mut doc) = open_record_file(input, sink, FORMAT)? else {
        return Ok(());
    };
    let parsed = Picked(RawTrajectory::default())
        .deserialize(&mut doc.de)
        .and_then(|raw| doc.de.end().map(|()| raw));
    let raw = match parsed {
        Err(e) if e.is_io() => return Err(e.into()),
        Err(e) => {
            let offset = doc.offset();
            sink.quarantine(dropped(
                input,
                FORMAT,
                Locator::File,
                format!("not a readable trajectory: {e} (near byte {offset})"),
            ));
            return Ok(());
        }
        Ok(Err(kind)) => {
            sink.quarantine(dropped(
                input,
                FORMAT,
                Locator::File,
                format!("the document is {kind}, not a trajectory object"),
            ));
            return Ok(());
        }
        Ok(Ok(raw)) => raw,
    };
    let id = conversation_id(Path::new(input.name));
    match convert(input, &id, raw, sink) {
        Ok(conversation) => sink.conversation(conversation, 0),
        Err(reason) => sink.quarantine(dropped(input, FORMAT, Locator::File, reason.to_string())),
    }
    Ok(())
}

/// The conversation id of a trajectory file: `<run>/<instance>`, where the instance is the file
/// name without `.traj` / `.traj.json` and the run is the nearest folder above the file that is
/// neither the instance's own folder (SWE-agent 1.x and mini-swe-agent write
/// `<run>/<instance>/<instance>.traj`) nor a folder of trajectories named generically (`trajs`,
/// `trajectories`). In SWE-bench experiments' layout,
/// `evaluation/<split>/<submission>/trajs/<instance>.traj`, the split is kept as well
/// (`<split>/<submission>/<instance>`): one submission folder name can sit in several splits.
///
/// The path is resolved first, so the id is the same whether the ingest was pointed at the
/// experiments root, the submission, its `trajs` folder or the file itself; copied elsewhere
/// without its experiments folders, a submission's ids lose the split.
pub(crate) fn conversation_id(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let instance = name
        .strip_suffix(".json")
        .unwrap_or(&name)
        .strip_suffix(".traj")
        .or_else(|| Path::new(&name).file_stem().and_then(|s| s.to_str()))
        .filter(|s| !s.is_empty())
        .unwrap_or("trajectory")
        .to_string();
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let folders: Vec<String> = resolved
        .parent()
        .map(|p| {
            p.components()
                .rev()
                .filter_map(|c| match c {
                    std::path::Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let run_at = folders
        .iter()
        .position(|f| *f != instance && !matches!(f.as_str(), "trajs" | "traj" | "trajectories"));
    let Some(at) = run_at else {
        return instance;
    };
    let run = &folders[at];
    match (folders.get(at + 1), folders.get(at + 2)) {
        (Some(split), Some(evaluation)) if evaluation == "evaluation" => {
            format!("{split}/{run}/{instance}")
        }
        _ => format!("{run}/{instance}"),
    }
}

fn convert(
    input: &Input<'_>,
    id: &str,
    raw: RawTrajectory,
    sink: &mut dyn Sink,
) -> crate::error::Result<Conversation> {
    let mut notes = Vec::new();
    let history: Vec<Value> = match raw.history {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list,
        Some(other) => {
            notes.push(format!(
                "history is {}, not a list; it is not used",
                kind_of(&other)
            ));
            Vec::new()
        }
    };
    let steps: Vec<(usize, Step)> = match raw.trajectory {
        None | Some(Err("null")) => Vec::new(),
        Some(Err(kind)) => {
            notes.push(format!("trajectory is {kind}, not a list; it is not used"));
            Vec::new()
        }
        Some(Ok(list)) => list
            .into_iter()
            .enumerate()
            .filter_map(|(i, step)| match step {
                Ok(step) => Some((i, step)),
                Err(kind) => {
                    notes.push(format!(
                        "trajectory step {i} is {kind}, not an object; left out"
                    ));
                    None
                }
            })
            .collect(),
    };

    let mut mapper = Mapper::default();
    let mut durations: HashMap<String, f64> = HashMap::new();
    let with_calls = history
        .iter()
        .any(|m| has_items(m.get("tool_calls")) || has_items(m.get("tool_call_ids")));
    if with_calls {
        for (i, message) in history.iter().enumerate() {
            mapper.message(i, message, false);
        }
        // The k-th calling message is the k-th step while their actions agree. SWE-agent saves
        // the history before the last step's result, so steps past the history (typically the
        // final `submit`) are added after it as text-mode calls.
        let mut matched = 0;
        for (call, action) in &mapper.first_calls {
            let Some((_, step)) = steps.get(matched) else {
                break;
            };
            let step_action = step.action.as_ref().and_then(Value::as_str).map(str::trim);
            if action.is_some() && action.as_deref() != step_action {
                break;
            }
            if let Some(s) = step.seconds() {
                durations.insert(call.clone(), s * 1000.0);
            }
            matched += 1;
        }
        if matched == mapper.first_calls.len() {
            for (i, step) in &steps[matched..] {
                mapper.step(*i, step);
                if let Some(s) = step.seconds() {
                    durations.insert(step_call_id(*i), s * 1000.0);
                }
            }
        }
    } else if !steps.is_empty() {
        for (i, message) in history.iter().enumerate() {
            let is_agent_turn = message.get("role").and_then(Value::as_str) == Some("assistant")
                && !is_demo(message);
            if is_agent_turn {
                break;
            }
            mapper.message(i, message, false);
        }
        for (i, step) in &steps {
            mapper.step(*i, step);
            if let Some(s) = step.seconds() {
                durations.insert(step_call_id(*i), s * 1000.0);
            }
        }
    } else if !history.is_empty() {
        for (i, message) in history.iter().enumerate() {
            mapper.message(i, message, true);
        }
    } else {
        return Err(Error::Malformed(
            "the file holds neither history messages nor trajectory steps".to_string(),
        ));
    }
    notes.append(&mut mapper.notes);
    for note in notes {
        sink.quarantine(partial(input, FORMAT, Locator::File, note));
    }

    let replay = replay_config(raw.replay_config);
    let info_model = match raw.info {
        Some(Ok(info)) => info.model,
        _ => None,
    };
    let template = RunTemplate {
        format: FORMAT.to_string(),
        source: input.display.to_string(),
        agent: mapper.first_agent.clone().or_else(|| {
            replay
                .as_ref()
                .and_then(|r| non_empty(r.pointer("/agent/name")))
        }),
        model: info_model.or_else(|| {
            replay.as_ref().and_then(|r| {
                non_empty(r.pointer("/agent/model/name"))
                    .or_else(|| non_empty(r.pointer("/agent/model/model_name")))
            })
        }),
    };
    let mut conversation = trajectory::build(id, mapper.out, &template, sink, Locator::File);
    for run in &mut conversation.runs {
        for event in &mut run.events {
            if event.kind() != EventKind::Landing || event.duration_ms.is_some() {
                continue;
            }
            if let Some(ms) = event.call_id.as_ref().and_then(|c| durations.get(c)) {
                event.duration_ms = Some(*ms);
            }
        }
    }
    Ok(conversation)
}

/// The replay config, an object or (in some versions) the object's JSON text.
fn replay_config(value: Option<Value>) -> Option<Value> {
    match value? {
        Value::String(text) => serde_json::from_str::<Value>(&text)
            .ok()
            .filter(Value::is_object),
        v @ Value::Object(_) => Some(v),
        _ => None,
    }
}

fn has_items(value: Option<&Value>) -> bool {
    match value {
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::String(s)) => !s.trim().is_empty() && s.trim() != "[]",
        _ => false,
    }
}

/// A demonstration: flagged `is_demo` (a boolean, or its text in some files), or of
/// `message_type` "demonstration".
fn is_demo(message: &Value) -> bool {
    let flagged = match message.get("is_demo") {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
        _ => false,
    };
    flagged || message.get("message_type").and_then(Value::as_str) == Some("demonstration")
}

fn step_call_id(step: usize) -> String {
    format!("step-{step}")
}

/// A text-mode action as a tool call: the command's first word names the tool.
fn action_call(action: Option<&Value>, id: String) -> Option<ChatToolCall> {
    let command = action.and_then(Value::as_str).map(str::trim)?;
    let name = command.split_whitespace().next()?;
    Some(ChatToolCall {
        id: Some(id),
        name: name.to_string(),
        arguments: serde_json::json!({ "action": command }).to_string(),
    })
}

/// Turns SWE-agent messages into format-neutral ones.
#[derive(Default)]
struct Mapper {
    out: Vec<ChatMessage>,
    notes: Vec<String>,
    /// The current history segment has had its task message.
    task_seen: bool,
    /// The agent writing the current segment.
    agent: Option<String>,
    first_agent: Option<String>,
    /// The synthetic call of the last text-mode action, until its observation comes.
    pending_action: Option<String>,
    /// How many text-mode actions were turned into calls.
    actions: usize,
    /// The first call id of each assistant message that calls tools, with the message's
    /// `action` text, in order.
    first_calls: Vec<(String, Option<String>)>,
}

impl Mapper {
    /// One history message. `actions`: turn text-mode `action`s into calls answered by the next
    /// user message.
    fn message(&mut self, index: usize, message: &Value, actions: bool) {
        let Value::Object(m) = message else {
            self.notes.push(format!(
                "history message {index} is {}, not an object; left out",
                kind_of(message)
            ));
            return;
        };
        let agent = non_empty(m.get("agent"));
        if let Some(agent) = agent {
            if self.agent.as_ref().is_some_and(|a| *a != agent) {
                self.task_seen = false;
                self.pending_action = None;
            }
            if self.first_agent.is_none() {
                self.first_agent = Some(agent.clone());
            }
            self.agent = Some(agent);
        }
        let text = content_text(m.get("content"));
        if is_demo(message) {
            self.out.push(ChatMessage::new(Role::System, text));
            return;
        }
        match m.get("role").and_then(Value::as_str) {
            Some("system") => {
                // A new system prompt after a task: the history starts over with a new task.
                self.task_seen = false;
                self.pending_action = None;
                self.out.push(ChatMessage::new(Role::System, text));
            }
            Some("user") => {
                if !self.task_seen {
                    self.task_seen = true;
                    self.pending_action = None;
                    self.out.push(ChatMessage::new(Role::User, text));
                } else if let Some(id) = self.pending_action.take() {
                    let mut observation = ChatMessage::new(Role::Tool, text);
                    observation.call_id = Some(id);
                    self.out.push(observation);
                } else {
                    // The environment talking (a reminder, an error notice): not a new task.
                    self.out.push(ChatMessage::new(Role::System, text));
                }
            }
            Some("assistant") => {
                let mut chat = ChatMessage::new(Role::Assistant, text);
                chat.tool_calls = self.tool_calls(index, m.get("tool_calls"));
                if chat.tool_calls.is_empty() && actions {
                    let id = step_call_id(self.actions);
                    if let Some(call) = action_call(m.get("action"), id.clone()) {
                        self.actions += 1;
                        self.pending_action = Some(id);
                        chat.tool_calls.push(call);
                    }
                }
                if let Some(id) = chat.tool_calls.first().and_then(|c| c.id.clone()) {
                    let action = non_empty(m.get("action"));
                    self.first_calls.push((id, action));
                }
                self.out.push(chat);
            }
            Some("tool") => {
                let ids = call_ids(m.get("tool_call_ids").or_else(|| m.get("tool_call_id")));
                let ids = if ids.is_empty() {
                    vec![self.pending_action.take()]
                } else {
                    ids.into_iter().map(Some).collect()
                };
                for id in ids {
                    let mut observation = ChatMessage::new(Role::Tool, text.clone());
                    observation.call_id = id;
                    self.out.push(observation);
                }
                self.pending_action = None;
            }
            other => self.notes.push(format!(
                "history message {index} has {}; left out",
                match other {
                    Some(r) => format!("the unknown role {r:?}"),
                    None => "no role".to_string(),
                }
            )),
        }
    }

    /// One trajectory step: the agent's output with its action as a call, then the observation.
    fn step(&mut self, index: usize, step: &Step) {
        let text = non_empty(step.response.as_ref())
            .or_else(|| non_empty(step.thought.as_ref()))
            .unwrap_or_default();
        let mut chat = ChatMessage::new(Role::Assistant, text);
        let id = step_call_id(index);
        let call = action_call(step.action.as_ref(), id.clone());
        let called = call.is_some();
        chat.tool_calls.extend(call);
        self.out.push(chat);
        if !called {
            return;
        }
        // A step without an observation leaves its call unanswered.
        if let Some(observation) = step.observation.as_ref().and_then(Value::as_str) {
            let mut result = ChatMessage::new(Role::Tool, observation);
            result.call_id = Some(id);
            self.out.push(result);
        }
    }

    /// `tool_calls: [{id, type, function: {name, arguments}}]` (a list, or its JSON text).
    fn tool_calls(&mut self, index: usize, value: Option<&Value>) -> Vec<ChatToolCall> {
        let parsed;
        let list = match value {
            None | Some(Value::Null) => return Vec::new(),
            Some(Value::Array(list)) => list,
            Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Array(list)) => {
                    parsed = list;
                    &parsed
                }
                _ => {
                    self.notes.push(format!(
                        "history message {index}: tool_calls is text that is not a JSON list; \
                         its calls are left out"
                    ));
                    return Vec::new();
                }
            },
            Some(other) => {
                self.notes.push(format!(
                    "history message {index}: tool_calls is {}, not a list; its calls are left out",
                    kind_of(other)
                ));
                return Vec::new();
            }
        };
        let mut calls = Vec::with_capacity(list.len());
        for (k, call) in list.iter().enumerate() {
            let function = call.get("function");
            let name = match function {
                Some(Value::Object(f)) => non_empty(f.get("name")),
                other => non_empty(other).or_else(|| non_empty(call.get("name"))),
            };
            let Some(name) = name else {
                self.notes.push(format!(
                    "history message {index}: tool call {k} names no function; left out"
                ));
                continue;
            };
            let arguments = match function
                .and_then(|f| f.get("arguments"))
                .or(call.get("arguments"))
            {
                None | Some(Value::Null) => "{}".to_string(),
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
            };
            calls.push(ChatToolCall {
                id: call.get("id").and_then(scalar_text),
                name,
                arguments,
            });
        }
        calls
    }
}

/// `tool_call_ids`: a list of ids, or one id.
fn call_ids(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(list)) => list.iter().filter_map(scalar_text).collect(),
        Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// SWE-agent `.traj` trajectories.
pub struct SweAgentAdapter;

impl crate::ingest::Adapter for SweAgentAdapter {
    fn name(&self) -> &'static str {
        "swe-agent"
    }
    fn family(&self) -> &'static str {
        "swe-agent"
    }
    fn about(&self) -> &'static str {
        "SWE-agent .traj trajectories"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        crate::ingest::Match::strong_if(is_trajectory(head.text))
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> std::io::Result<()> {
        read(input, sink)
    }
}

impl crate::ingest::Format {
    #[allow(non_upper_case_globals)]
    pub const SweAgent: crate::ingest::Format = crate::ingest::Format(&SweAgentAdapter);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::{Collect, Severity};
    use crate::model::LandingFlags;
    use serde_json::json;

    fn read_at(rel: &str, bytes: &[u8]) -> Collect {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        let mut sink = Collect::default();
        read(&Input::new(&path, rel), &mut sink).unwrap();
        sink
    }

    #[test]
    fn trajectories_over_the_record_limit_are_not_read() {
        let bytes = serde_json::to_vec_pretty(&text_mode()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.traj");
        std::fs::write(&path, &bytes).unwrap();
        let mut sink = Collect::default();
        let mut input = Input::new(&path, "t.traj");
        input.limits.record_bytes = 100;
        read(&input, &mut sink).unwrap();
        assert_eq!(sink.records, 1);
        assert!(sink.conversations.is_empty());
        assert_eq!(
            sink.quarantined[0].reason,
            format!(
                "the file is {} ({} bytes), over the 100 B record limit; a file of this format \
                 is read whole, as one record",
                crate::ingest::limits::size_text(bytes.len() as u64),
                bytes.len()
            )
        );
    }

    fn read_value(v: &Value) -> Collect {
        read_at("run-a/task-1.traj", &serde_json::to_vec_pretty(v).unwrap())
    }

    fn text_mode() -> Value {
        json!({
            "environment": "swe_main",
            "trajectory": [
                {"action": "ls -F\n", "observation": "a.py\nb.py\n", "response": "List.\n```\nls -F\n```",
                 "thought": "List.", "state": "{}", "execution_time": 0.25,
                 "query": [{"role": "system", "content": "huge prompt"}]},
                {"action": "open a.py\n", "observation": "[File: a.py]", "response": "Open.",
                 "thought": "Open.", "execution_time": "0.5"},
                {"action": "open a.py\n", "observation": "[File: a.py]", "response": "Again.",
                 "thought": "Again."},
                {"action": "submit\n", "observation": null, "response": "Done.", "thought": "Done."}
            ],
            "history": [
                {"role": "system", "content": "SETTING: you are an agent.", "agent": "primary"},
                {"role": "user", "content": "Here is a demonstration.", "agent": "primary", "is_demo": true},
                {"role": "user", "content": "ISSUE: fix a.py", "agent": "primary"},
                {"role": "assistant", "content": "List.", "action": "ls -F\n", "agent": "primary"},
                {"role": "user", "content": "a.py\nb.py\n(Open file: n/a)", "agent": "primary"}
            ],
            "info": {"exit_status": "submitted", "submission": "diff", "model_stats": {"api_calls": 4}},
            "replay_config": "{\"agent\": {\"name\": \"main\", \"model\": {\"name\": \"gpt-4o\"}}}"
        })
    }

    #[test]
    fn trajectory_steps_become_landings() {
        let sink = read_value(&text_mode());
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        assert_eq!(sink.records, 1);
        let conv = &sink.conversations[0].0;
        assert_eq!(conv.id, "run-a/task-1");
        assert_eq!(conv.runs.len(), 1);
        let run = &conv.runs[0];
        assert_eq!(run.turn, 1);
        assert_eq!(run.format, "swe-agent");
        assert_eq!(run.user_message.as_deref(), Some("ISSUE: fix a.py"));
        assert_eq!(run.model.as_deref(), Some("gpt-4o"));
        assert_eq!(run.agent.as_deref(), Some("primary"));
        let landings: Vec<_> = run.landings().collect();
        let names: Vec<_> = landings
            .iter()
            .map(|l| l.tool_name.as_deref().unwrap())
            .collect();
        assert_eq!(names, vec!["ls", "open", "open", "submit"]);
        assert_eq!(
            landings[0].arguments.as_deref(),
            Some(r#"{"action":"ls -F"}"#)
        );
        assert_eq!(landings[0].text.as_deref(), Some("a.py\nb.py\n"));
        assert_eq!(landings[0].duration_ms, Some(250.0));
        assert_eq!(landings[1].duration_ms, Some(500.0));
        assert!(landings[3].has_flag(LandingFlags::UNANSWERED));
        // The demonstration is prompt text: in the history, but no turn of its own.
        let history = conv.history_for(0);
        assert!(history
            .iter()
            .any(|m| m.role == Role::System && m.text == "Here is a demonstration."));
    }

    #[test]
    fn function_calling_history() {
        let v = json!({
            "trajectory": [
                {"action": "find_file a.py", "observation": "Found 1", "response": "", "thought": "Find.",
                 "execution_time": 0.28},
                {"action": "submit", "observation": "diff", "response": "", "thought": "Submit.",
                 "execution_time": 0.1}
            ],
            "history": [
                {"role": "system", "content": "SETTING", "agent": "main", "message_type": "system_prompt"},
                {"role": "user", "content": [{"type": "text", "text": "ISSUE: fix a.py"}], "agent": "main",
                 "message_type": "observation"},
                {"role": "assistant", "content": "Find.", "thought": "Find.", "action": "find_file a.py",
                 "agent": "main", "message_type": "action",
                 "tool_calls": [{"function": {"arguments": "{\"file_name\":\"a.py\"}", "name": "find_file"},
                                 "id": "call_1", "type": "function"}]},
                {"role": "tool", "content": "Found 1", "agent": "main", "message_type": "observation",
                 "tool_call_ids": ["call_1"]},
                {"role": "user", "content": "Your last output did not use any tool calls!", "agent": "main"},
                {"role": "assistant", "content": "Submit.", "thought": "Submit.", "action": "submit",
                 "agent": "main", "message_type": "action",
                 "tool_calls": [{"function": {"arguments": "{}", "name": "submit"}, "id": "call_2",
                                 "type": "function"}]},
                {"role": "tool", "content": "diff", "agent": "main", "message_type": "observation",
                 "tool_call_ids": ["call_2"]}
            ],
            "info": {"model": "claude-x"}
        });
        let sink = read_value(&v);
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        let conv = &sink.conversations[0].0;
        assert_eq!(conv.runs.len(), 1);
        let run = &conv.runs[0];
        assert_eq!(run.model.as_deref(), Some("claude-x"));
        assert_eq!(run.user_message.as_deref(), Some("ISSUE: fix a.py"));
        let landings: Vec<_> = run.landings().collect();
        assert_eq!(landings.len(), 2);
        assert_eq!(landings[0].call_id.as_deref(), Some("call_1"));
        assert_eq!(
            landings[0].arguments.as_deref(),
            Some(r#"{"file_name":"a.py"}"#)
        );
        assert_eq!(landings[0].text.as_deref(), Some("Found 1"));
        assert_eq!(landings[0].duration_ms, Some(280.0));
        assert_eq!(landings[1].text.as_deref(), Some("diff"));
        // The reminder stays in the history as system text.
        assert!(conv
            .history_for(0)
            .iter()
            .any(|m| m.role == Role::System && m.text.starts_with("Your last output")));
    }

    #[test]
    fn steps_past_the_history_are_added() {
        let v = json!({
            "trajectory": [
                {"action": "ls", "observation": "a.py", "thought": "Look.", "execution_time": 0.1},
                {"action": "submit", "observation": "diff --git a", "thought": "Done.",
                 "execution_time": 0.2}
            ],
            "history": [
                {"role": "user", "content": "ISSUE", "agent": "main"},
                {"role": "assistant", "content": "Look.", "action": "ls", "agent": "main",
                 "tool_calls": [{"id": "c1", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
                {"role": "tool", "content": "a.py", "agent": "main", "tool_call_ids": ["c1"]}
            ]
        });
        let sink = read_value(&v);
        let run = &sink.conversations[0].0.runs[0];
        let landings: Vec<_> = run
            .landings()
            .map(|l| (l.tool_name.clone().unwrap(), l.duration_ms, l.text.clone()))
            .collect();
        assert_eq!(
            landings,
            vec![
                ("bash".to_string(), Some(100.0), Some("a.py".to_string())),
                (
                    "submit".to_string(),
                    Some(200.0),
                    Some("diff --git a".to_string())
                )
            ]
        );
        // A history that disagrees with the steps gets no timings and no additions.
        let mut v = v;
        v["trajectory"][0]["action"] = json!("cat a.py");
        let sink = read_value(&v);
        let run = &sink.conversations[0].0.runs[0];
        assert_eq!(run.landings().count(), 1);
        assert_eq!(run.landings().next().unwrap().duration_ms, None);
    }

    #[test]
    fn history_pairing_without_steps() {
        let mut v = text_mode();
        v.as_object_mut().unwrap().remove("trajectory");
        v["history"].as_array_mut().unwrap().extend([
            json!({"role": "assistant", "content": "Submit.", "action": "submit", "agent": "primary"}),
        ]);
        let sink = read_value(&v);
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        let run = &sink.conversations[0].0.runs[0];
        let landings: Vec<_> = run.landings().collect();
        assert_eq!(landings.len(), 2);
        assert_eq!(landings[0].tool_name.as_deref(), Some("ls"));
        assert_eq!(
            landings[0].text.as_deref(),
            Some("a.py\nb.py\n(Open file: n/a)")
        );
        assert!(landings[1].has_flag(LandingFlags::UNANSWERED));
    }

    #[test]
    fn a_second_agent_starts_a_second_run() {
        let v = json!({"history": [
            {"role": "system", "content": "S", "agent": "main"},
            {"role": "user", "content": "task one", "agent": "main"},
            {"role": "assistant", "content": "", "agent": "main",
             "tool_calls": [{"id": "a", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
            {"role": "tool", "content": "x", "agent": "main", "tool_call_ids": ["a"]},
            {"role": "system", "content": "S2", "agent": "reviewer"},
            {"role": "user", "content": "review it", "agent": "reviewer"},
            {"role": "assistant", "content": "looks fine", "agent": "reviewer"}
        ]});
        let sink = read_value(&v);
        let conv = &sink.conversations[0].0;
        let turns: Vec<_> = conv.runs.iter().map(|r| r.turn).collect();
        assert_eq!(turns, vec![1, 2]);
        assert_eq!(conv.runs[1].answer.as_deref(), Some("looks fine"));
    }

    #[test]
    fn bad_files_are_one_dropped_record() {
        for (bytes, expect) in [
            (&b""[..], "empty"),
            (&b"{\"trajectory\": [1, 2"[..], "not a readable trajectory"),
            (&b"[1]"[..], "is a list"),
            (
                &b"{\"environment\": \"x\", \"info\": {}}"[..],
                "neither history",
            ),
            (
                &b"{\"trajectory\": [{\"action\": \"ls\"}]} trailing"[..],
                "trailing characters",
            ),
        ] {
            let sink = read_at("d/f.traj", bytes);
            assert_eq!(sink.records, 1, "{expect}");
            assert!(sink.conversations.is_empty(), "{expect}");
            assert_eq!(
                sink.quarantined.len(),
                1,
                "{expect}: {:?}",
                sink.quarantined
            );
            let q = &sink.quarantined[0];
            assert_eq!(
                (q.severity, q.locator.clone()),
                (Severity::Dropped, Locator::File)
            );
            assert!(q.reason.contains(expect), "{expect}: {}", q.reason);
        }
    }

    #[test]
    fn odd_parts_are_noted_and_skipped() {
        let v = json!({
            "trajectory": [{"action": "ls", "observation": "x"}, "junk", {"action": "", "response": "Hmm."}],
            "history": "not a list"
        });
        let sink = read_value(&v);
        assert_eq!(sink.conversations.len(), 1);
        let reasons: Vec<_> = sink.quarantined.iter().map(|q| q.reason.as_str()).collect();
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(reasons[0].contains("history is a string"));
        assert!(reasons[1].contains("trajectory step 1 is a string"));
        let conv = &sink.conversations[0].0;
        // No task message: the work is turn 0.
        assert_eq!(conv.runs[0].turn, 0);
        assert_eq!(conv.runs[0].landings().count(), 1);
        assert_eq!(conv.runs[0].answer.as_deref(), Some("Hmm."));
    }

    #[test]
    fn detection() {
        assert!(is_trajectory(
            "{\n  \"environment\": \"swe_main\",\n  \"trajectory\": [{\"action\": \"ls\""
        ));
        assert!(is_trajectory("{\"history\": [{\"role\": \"system\""));
        assert!(!is_trajectory("{\"simulations\": [{\"role\": \"x\"}]}"));
    }
}
