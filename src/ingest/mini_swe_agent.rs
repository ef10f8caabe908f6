//! mini-swe-agent trajectories: one `<instance>.traj.json` file per task,
//! `{info{model_stats, config{agent, agent_type, model, ...}, mini_version, exit_status,
//! submission}, messages[], trajectory_format}`.
//!
//! A file is one conversation (named as SWE-agent's are: [`swe_agent::conversation_id`]) and one
//! record. `messages` is the chat the model saw, in one of the shapes mini-swe-agent writes:
//! - text actions (every 1.x file, and 2.x with a text-based model): the assistant writes one
//!   command in a fenced block (```` ```bash ```` in 1.x, ```` ```mswea_bash_command ```` in 2.x)
//!   and the next user message is its output. The command comes from the message's
//!   `extra.actions` when recorded (what was run), else from its single fenced block; a message
//!   with none or several blocks ran nothing (mini-swe-agent answers it with a format error);
//! - tool calls (2.x default): the assistant's `tool_calls` run the `bash` tool, and `tool`
//!   messages answer them by `tool_call_id`;
//! - OpenAI Responses items (2.x response models): an assistant `{object: "response",
//!   output[]}` whose `function_call` items are the calls, answered by `function_call_output`
//!   items.
//!
//! Each command is a landing of the tool named by the command's first word (as SWE-agent's text
//! actions are), with arguments `{"command": <the whole command>}` and the observation as its
//! result; an observation whose `extra.exception_info` is set (a timeout, a command not run)
//! marks the landing as an error. As in SWE-agent, the task is the only real user message:
//! later user messages that answer no command (format errors, limits) are the harness talking
//! and are kept as system text. The final `exit` message (exit status, submission) is not part
//! of the chat; when the submitting command got no observation (2.x ends the run on it), the
//! submission is that command's result. One task is one run. The model is `info.config.model.model_name`, the agent
//! `info.config.agent_type`.

use crate::error::Error;
use std::collections::VecDeque;
use std::io;

use serde::de::DeserializeSeed;
use serde_json::Value;

use crate::ingest::json_pick::{
    content_text, dropped, kind_of, non_empty, open_record_file, partial,
};
use crate::ingest::swe_agent::conversation_id;
use crate::ingest::trajectory::{self, ChatMessage, ChatToolCall, RunTemplate};
use crate::ingest::{Input, Locator, Sink};
use crate::model::Role;

const FORMAT: &str = "mini-swe-agent";

/// Does the start of a file look like a mini-swe-agent trajectory? An object whose first key is
/// `info` or `messages`, naming mini-swe-agent (its version, its classes, or its format).
pub(crate) fn is_trajectory(text: &str) -> bool {
    matches!(
        crate::ingest::json_pick::first_key(text),
        Some("info" | "messages" | "trajectory_format")
    ) && (text.contains("\"mini_version\"")
        || text.contains("\"minisweagent.")
        || text.contains("\"trajectory_format\": \"mini-swe-agent"))
        && text.contains("\"messages\"")
}

/// Do the skimmed top-level members of a file ([`skim_members`]) make a mini-swe-agent
/// trajectory? A `messages` member, beside an `info` holding `mini_version` or a
/// `trajectory_format` naming mini-swe-agent. Detection falls back on this when the head is cut
/// short before the marker keys: mini-swe-agent writes `info` first, its `submission` (a whole
/// patch) before `mini_version`, and `trajectory_format` last.
///
/// [`skim_members`]: crate::ingest::json_pick::skim_members
pub(crate) fn is_skimmed_trajectory(members: &[crate::ingest::json_pick::Member]) -> bool {
    let member = |key: &str| members.iter().find(|m| m.key == key);
    let info_marks = member("info").is_some_and(|m| m.has_key("mini_version"));
    let format_marks = member("trajectory_format")
        .and_then(|m| m.text.as_deref())
        .is_some_and(|t| t.starts_with("mini-swe-agent"));
    member("messages").is_some() && (info_marks || format_marks)
}

/// Read one trajectory file: one record.
pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    let Some(mut doc) = open_record_file(input, sink, FORMAT)? else {
        return Ok(());
    };
    let parsed = std::marker::PhantomData::<Value>
        .deserialize(&mut doc.de)
        .and_then(|v| doc.de.end().map(|()| v));
    let value = match parsed {
        Err(e) if e.is_io() => return Err(e.into()),
        Err(e) => {
            let reason = format!(
                "not a readable trajectory: {e} (near byte {})",
                doc.offset()
            );
            sink.quarantine(dropped(input, FORMAT, Locator::File, reason));
            return Ok(());
        }
        Ok(value) => value,
    };
    match convert(input, value, sink) {
        Ok(conversation) => sink.conversation(conversation, 0),
        Err(reason) => sink.quarantine(dropped(input, FORMAT, Locator::File, reason.to_string())),
    }
    Ok(())
}

fn convert(
    input: &Input<'_>,
    value: Value,
    sink: &mut dyn Sink,
) -> crate::error::Result<crate::model::Conversation> {
    let Value::Object(mut doc) = value else {
        return Err(Error::Malformed(format!(
            "the document is {}, not a trajectory object",
            kind_of(&value)
        )));
    };
    let messages = match doc.remove("messages") {
        Some(Value::Array(list)) if !list.is_empty() => list,
        Some(Value::Array(_)) => {
            return Err(Error::Malformed(
                "the trajectory's messages list is empty".into(),
            ))
        }
        None | Some(Value::Null) => {
            return Err(Error::Malformed(
                "the trajectory has no messages list".into(),
            ))
        }
        Some(other) => {
            return Err(Error::Malformed(format!(
                "the trajectory's messages is {}, not a list",
                kind_of(&other)
            )))
        }
    };
    let info = doc.remove("info").unwrap_or(Value::Null);
    Ok(conversation_of(input, &messages, &info, FORMAT, sink))
}

/// A trajectory's messages (and its `info`, `null` when there is none) as the conversation of
/// the file, its runs and notes under `format`: mini-swe-agent's own files, and the bare message
/// lists its early versions saved ([`is_bare_trajectory`]).
pub(crate) fn conversation_of(
    input: &Input<'_>,
    messages: &[Value],
    info: &Value,
    format: &'static str,
    sink: &mut dyn Sink,
) -> crate::model::Conversation {
    let mut mapper = Mapper::default();
    for (i, message) in messages.iter().enumerate() {
        mapper.message(i, message);
    }
    for note in mapper.notes {
        sink.quarantine(partial(input, format, Locator::File, note));
    }
    let template = RunTemplate {
        format: format.to_string(),
        source: input.display.to_string(),
        agent: non_empty(info.pointer("/config/agent_type")),
        model: non_empty(info.pointer("/config/model/model_name"))
            .or_else(|| non_empty(info.pointer("/config/model/model"))),
    };
    let id = conversation_id(std::path::Path::new(input.name));
    trajectory::build(&id, mapper.out, &template, sink, Locator::File)
}

/// Is a bare list of chat messages a mini-swe-agent trajectory, as its early versions saved one
/// (the message list alone)? Its commands are fenced blocks in the assistant's text, not tool
/// calls, and a user message answers each with mini-swe-agent's observation, which opens with
/// `<returncode>`.
pub(crate) fn is_bare_trajectory(messages: &[Value]) -> bool {
    let no_tool_calls = messages.iter().all(|m| {
        m.get("tool_calls")
            .and_then(Value::as_array)
            .is_none_or(|c| c.is_empty())
    });
    let observation = messages.iter().any(|m| {
        m.get("role").and_then(Value::as_str) == Some("user")
            && m.get("content")
                .and_then(Value::as_str)
                .is_some_and(|t| t.trim_start().starts_with("<returncode>"))
    });
    no_tool_calls && observation
}

/// Turns mini-swe-agent messages into format-neutral ones.
#[derive(Default)]
struct Mapper {
    out: Vec<ChatMessage>,
    notes: Vec<String>,
    /// The task message has been seen.
    task_seen: bool,
    /// Text-mode commands waiting for their observation, oldest first.
    pending: VecDeque<String>,
    /// Calls of either mode not answered yet, in order.
    open: Vec<String>,
    /// How many text-mode commands were turned into calls.
    actions: usize,
}

impl Mapper {
    fn message(&mut self, index: usize, message: &Value) {
        let Value::Object(m) = message else {
            self.notes.push(format!(
                "message {index} is {}, not an object; left out",
                kind_of(message)
            ));
            return;
        };
        let timestamp_ms = m
            .get("extra")
            .and_then(|e| e.get("timestamp"))
            .and_then(Value::as_f64)
            .map(|s| (s * 1000.0) as i64);
        // OpenAI Responses items.
        if m.get("object").and_then(Value::as_str) == Some("response") {
            let mut chat = self.response_output(m.get("output"));
            self.open
                .extend(chat.tool_calls.iter().filter_map(|c| c.id.clone()));
            chat.timestamp_ms = timestamp_ms;
            self.out.push(chat);
            return;
        }
        if m.get("type").and_then(Value::as_str) == Some("function_call_output") {
            let mut result = ChatMessage::new(Role::Tool, response_text(m.get("output")));
            result.call_id = non_empty(m.get("call_id"));
            self.answered(result.call_id.as_deref());
            result.error = failed(m);
            result.timestamp_ms = timestamp_ms;
            self.out.push(result);
            return;
        }
        let text = match m.get("content") {
            Some(Value::Array(parts)) => parts_text(parts),
            other => content_text(other),
        };
        let role = m.get("role").and_then(Value::as_str);
        let mut chat = match role {
            Some("system") | Some("developer") => ChatMessage::new(Role::System, text),
            Some("user") if !self.task_seen => {
                self.task_seen = true;
                self.pending.clear();
                ChatMessage::new(Role::User, text)
            }
            Some("user") => match self.pending.pop_front() {
                // The output of the command asked for before it.
                Some(id) => {
                    self.answered(Some(&id));
                    let mut observation = ChatMessage::new(Role::Tool, text);
                    observation.call_id = Some(id);
                    observation.error = failed(m);
                    observation
                }
                // The harness talking (a format error, a limit): no new task.
                None => ChatMessage::new(Role::System, text),
            },
            Some("assistant") => {
                let mut chat = ChatMessage::new(Role::Assistant, text);
                chat.tool_calls = self.calls(index, m);
                self.open
                    .extend(chat.tool_calls.iter().filter_map(|c| c.id.clone()));
                chat
            }
            Some("tool") => {
                let mut result = ChatMessage::new(Role::Tool, text);
                result.call_id = non_empty(m.get("tool_call_id"));
                self.answered(result.call_id.as_deref());
                result.error = failed(m);
                result
            }
            // The run's end: not a message the model saw. A submitting command ends the run
            // without an observation; what it submitted is its result.
            Some("exit") => {
                let submission = m
                    .get("extra")
                    .and_then(|e| e.get("submission"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                if let (Some(id), Some(text)) = (self.open.pop(), submission) {
                    self.pending.retain(|p| *p != id);
                    let mut result = ChatMessage::new(Role::Tool, text);
                    result.call_id = Some(id);
                    result.timestamp_ms = timestamp_ms;
                    self.out.push(result);
                }
                return;
            }
            other => {
                self.notes.push(format!(
                    "message {index} has {}; left out",
                    match other {
                        Some(r) => format!("the unknown role {r:?}"),
                        None => "no role".to_string(),
                    }
                ));
                return;
            }
        };
        chat.timestamp_ms = timestamp_ms;
        self.out.push(chat);
    }

    /// A call was answered: it no longer waits.
    fn answered(&mut self, id: Option<&str>) {
        if let Some(id) = id {
            self.open.retain(|open| open != id);
        }
    }

    /// An assistant message's calls: its `tool_calls`, else its text-mode commands.
    fn calls(&mut self, index: usize, m: &serde_json::Map<String, Value>) -> Vec<ChatToolCall> {
        match m.get("tool_calls") {
            Some(Value::Array(calls)) if !calls.is_empty() => {
                return calls
                    .iter()
                    .enumerate()
                    .filter_map(|(k, call)| {
                        let function = call.get("function");
                        let arguments = match function.and_then(|f| f.get("arguments")) {
                            Some(Value::String(s)) => s.clone(),
                            Some(other) => other.to_string(),
                            None => "{}".to_string(),
                        };
                        let made = command_call(
                            non_empty(call.get("id")),
                            &arguments,
                            non_empty(function.and_then(|f| f.get("name"))),
                        );
                        if made.is_none() {
                            self.notes.push(format!(
                                "message {index}: tool call {k} names no command; left out"
                            ));
                        }
                        made
                    })
                    .collect();
            }
            _ => {}
        }
        let commands: Vec<String> = match m.get("extra").and_then(|e| e.get("actions")) {
            Some(Value::Array(actions)) => actions
                .iter()
                .filter_map(|a| non_empty(a.get("command")))
                .collect(),
            _ => {
                let text = content_text(m.get("content"));
                let blocks = fenced_commands(&text);
                if blocks.len() == 1 {
                    blocks
                } else {
                    Vec::new()
                }
            }
        };
        commands
            .into_iter()
            .filter_map(|command| {
                let id = format!("action-{}", self.actions);
                let call = text_call(&command, id.clone())?;
                self.actions += 1;
                self.pending.push_back(id);
                Some(call)
            })
            .collect()
    }

    /// An assistant turn recorded as a Responses API object: its message text and its
    /// `function_call` items.
    fn response_output(&mut self, output: Option<&Value>) -> ChatMessage {
        let mut chat = ChatMessage::new(Role::Assistant, String::new());
        let Some(Value::Array(items)) = output else {
            return chat;
        };
        let mut texts = Vec::new();
        for item in items {
            match item.get("type").and_then(Value::as_str) {
                Some("message") => {
                    if let Some(Value::Array(parts)) = item.get("content") {
                        texts.push(parts_text(parts));
                    }
                }
                Some("function_call") => {
                    let arguments = match item.get("arguments") {
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                        None => "{}".to_string(),
                    };
                    let id = non_empty(item.get("call_id")).or_else(|| non_empty(item.get("id")));
                    if let Some(call) = command_call(id, &arguments, non_empty(item.get("name"))) {
                        chat.tool_calls.push(call);
                    }
                }
                _ => {}
            }
        }
        chat.text = texts.join("\n");
        chat
    }
}

/// The text of a list of content parts: chat `text` parts and Responses `input_text` /
/// `output_text` parts, one per line.
fn parts_text(parts: &[Value]) -> String {
    parts
        .iter()
        .filter_map(|part| match part {
            Value::String(s) => Some(s.as_str()),
            Value::Object(o) => match o.get("type").and_then(Value::as_str) {
                None | Some("text" | "input_text" | "output_text") => {
                    o.get("text").and_then(Value::as_str)
                }
                _ => None,
            },
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A Responses `function_call_output`'s text: a string, or a list of parts.
fn response_text(output: Option<&Value>) -> String {
    match output {
        Some(Value::Array(parts)) => parts_text(parts),
        other => content_text(other),
    }
}

/// The observation says the command did not run to its end (`extra.exception_info`).
fn failed(m: &serde_json::Map<String, Value>) -> bool {
    m.get("extra")
        .and_then(|e| e.get("exception_info"))
        .is_some_and(|x| match x {
            Value::Null => false,
            Value::String(s) => !s.trim().is_empty(),
            _ => true,
        })
}

/// A call of the `bash` tool (`{"command": ...}`) as a landing of the command's first word.
/// Arguments that hold no command keep the recorded tool name.
fn command_call(id: Option<String>, arguments: &str, name: Option<String>) -> Option<ChatToolCall> {
    let command = serde_json::from_str::<Value>(arguments)
        .ok()
        .and_then(|v| non_empty(v.get("command")));
    match command {
        Some(command) => {
            let mut call = text_call(&command, id.unwrap_or_default())?;
            call.id = call.id.filter(|id| !id.is_empty());
            Some(call)
        }
        None => name.map(|name| ChatToolCall {
            id,
            name,
            arguments: arguments.to_string(),
        }),
    }
}

/// A command as a call of the tool its first word names, arguments `{"command": <command>}`.
fn text_call(command: &str, id: String) -> Option<ChatToolCall> {
    let command = command.trim();
    let name = command.split_whitespace().next()?;
    Some(ChatToolCall {
        id: Some(id),
        name: name.to_string(),
        arguments: serde_json::json!({ "command": command }).to_string(),
    })
}

/// The commands of the fenced blocks mini-swe-agent runs: ```` ```bash ```` (1.x) and
/// ```` ```mswea_bash_command ```` (2.x).
fn fenced_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("```") {
        let after = &rest[at + 3..];
        let Some(line_end) = after.find('\n') else {
            break;
        };
        let lang = after[..line_end].trim();
        let body = &after[line_end + 1..];
        let Some(close) = body.find("```") else {
            break;
        };
        if matches!(lang, "bash" | "mswea_bash_command") {
            let command = body[..close].trim();
            if !command.is_empty() {
                out.push(command.to_string());
            }
        }
        rest = &body[close + 3..];
    }
    out
}

/// mini-swe-agent trajectories (`*.traj.json`).
pub struct MiniSweAgentAdapter;

impl crate::ingest::Adapter for MiniSweAgentAdapter {
    fn name(&self) -> &'static str {
        FORMAT
    }
    fn family(&self) -> &'static str {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "mini-swe-agent trajectories (*.traj.json: info and a messages list)"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        crate::ingest::Match::strong_if(is_trajectory(head.text))
    }
    fn detect_past_head(
        &self,
        head: &crate::ingest::Head<'_>,
        path: &std::path::Path,
    ) -> crate::ingest::Match {
        crate::ingest::Match::strong_if(crate::ingest::json_pick::skim_if_first_key(
            head.text,
            path,
            crate::ingest::DETECT_LIMIT,
            &["info", "messages", "trajectory_format"],
            is_skimmed_trajectory,
        ))
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
        read(input, sink)
    }
}

impl crate::ingest::Format {
    #[allow(non_upper_case_globals)]
    pub const MiniSweAgent: crate::ingest::Format = crate::ingest::Format(&MiniSweAgentAdapter);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::Collect;
    use serde_json::json;

    fn read_value(value: &Value) -> Collect {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run-a").join("inst-1");
        std::fs::create_dir_all(&path).unwrap();
        let path = path.join("inst-1.traj.json");
        std::fs::write(&path, serde_json::to_vec(value).unwrap()).unwrap();
        let mut sink = Collect::default();
        read(&Input::new(&path, "inst-1.traj.json"), &mut sink).unwrap();
        sink
    }

    #[test]
    fn fenced_blocks() {
        let text = "THOUGHT: look.\n\n```bash\nls -la\n```\nthen\n```python\nx\n```";
        assert_eq!(fenced_commands(text), vec!["ls -la"]);
        let two = "```mswea_bash_command\ncat a\n```\n```mswea_bash_command\ncat b\n```";
        assert_eq!(fenced_commands(two), vec!["cat a", "cat b"]);
        assert!(fenced_commands("no block").is_empty());
    }

    #[test]
    fn text_actions_and_harness_messages() {
        let doc = json!({
            "info": {"config": {"agent_type": "minisweagent.agents.default.DefaultAgent",
                                "model": {"model_name": "gpt-x"}}, "mini_version": "1.9.0"},
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Fix the bug."},
                {"role": "assistant", "content": "THOUGHT: look.\n\n```bash\nls\n```"},
                {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
                {"role": "assistant", "content": "Two at once:\n```bash\nls\n```\n```bash\npwd\n```"},
                {"role": "user", "content": "Please always provide EXACTLY ONE action."},
                {"role": "assistant", "content": "```bash\nls\n```"},
                {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
                {"role": "assistant", "content": "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
                {"role": "user", "content": "diff --git a/a.py b/a.py"},
                {"role": "exit", "content": "Submitted", "extra": {"exit_status": "Submitted"}}
            ],
            "trajectory_format": "mini-swe-agent-1"
        });
        let sink = read_value(&doc);
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        let conv = &sink.conversations[0].0;
        assert_eq!(conv.id, "run-a/inst-1");
        assert_eq!(conv.runs.len(), 1);
        let run = &conv.runs[0];
        assert_eq!(run.model.as_deref(), Some("gpt-x"));
        assert_eq!(run.user_message.as_deref(), Some("Fix the bug."));
        let landings: Vec<_> = run.landings().collect();
        let tools: Vec<_> = landings
            .iter()
            .map(|l| l.tool_name.as_deref().unwrap())
            .collect();
        assert_eq!(tools, vec!["ls", "ls", "echo"]);
        assert_eq!(
            landings[0].arguments.as_deref(),
            Some(r#"{"command":"ls"}"#)
        );
        assert!(landings[0].text.as_deref().unwrap().contains("a.py"));
        assert!(landings[2]
            .text
            .as_deref()
            .unwrap()
            .starts_with("diff --git"));
    }

    #[test]
    fn tool_calls_and_errors() {
        let call = |id: &str, cmd: &str| {
            json!({"id": id, "type": "function",
                   "function": {"name": "bash", "arguments": json!({"command": cmd}).to_string()}})
        };
        let doc = json!({
            "info": {"mini_version": "2.4.6"},
            "messages": [
                {"role": "user", "content": "Task."},
                {"role": "assistant", "content": null, "tool_calls": [call("c1", "sleep 999"), call("c2", "ls")]},
                {"role": "tool", "tool_call_id": "c1", "content": "timed out",
                 "extra": {"exception_info": "timeout after 60 s"}},
                {"role": "tool", "tool_call_id": "c2", "content": "a.py", "extra": {"exception_info": ""}},
                {"role": "assistant", "content": "Done."}
            ]
        });
        let sink = read_value(&doc);
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        let run = &sink.conversations[0].0.runs[0];
        let landings: Vec<_> = run.landings().collect();
        assert_eq!(landings.len(), 2);
        assert_eq!(landings[0].tool_name.as_deref(), Some("sleep"));
        assert!(landings[0].error);
        assert!(!landings[1].error);
        assert_eq!(run.answer.as_deref(), Some("Done."));
    }

    #[test]
    fn unusable_files_are_one_dropped_record() {
        for (doc, expect) in [
            (json!([1]), "is a list"),
            (json!({"info": {}}), "no messages list"),
            (
                json!({"info": {}, "messages": []}),
                "messages list is empty",
            ),
            (json!({"messages": "x"}), "messages is a string"),
        ] {
            let sink = read_value(&doc);
            assert_eq!(sink.records, 1);
            assert!(sink.conversations.is_empty());
            assert!(sink.quarantined[0].reason.contains(expect), "{expect}");
        }
    }

    #[test]
    fn detection() {
        assert!(is_trajectory(
            "{\n  \"info\": {\n    \"model_stats\": {}, \"mini_version\": \"2.4.6\"}, \"messages\": []"
        ));
        assert!(!is_trajectory("{\"info\": {}, \"messages\": []}"));
        assert!(!is_trajectory("{\"history\": [], \"mini_version\": \"1\""));
    }

    /// A 1.x trajectory whose `info.submission` (over 1 MB) pushes every marker key out of the
    /// 64 KiB head is still detected, by a skim of its top-level keys, and read.
    #[test]
    fn a_large_submission_before_the_messages_does_not_hide_the_trajectory() {
        let submission = format!(
            "diff --git a/big.txt b/big.txt\n{}",
            "+a line of the patch\n".repeat(60_000)
        );
        assert!(submission.len() > 1 << 20);
        let trajectory = json!({
            "info": {
                "exit_status": "Submitted",
                "submission": submission,
                "model_stats": {"instance_cost": 0.01, "api_calls": 2},
                "mini_version": "1.14.2",
                "config": {"agent": {"step_limit": 250}}
            },
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Fix the bug in big.txt."},
                {"role": "assistant", "content": "THOUGHT: look first.\n\n```bash\nls\n```"},
                {"role": "user", "content": "<returncode>0</returncode>\n<output>\nbig.txt\n</output>"},
                {"role": "assistant", "content": "THOUGHT: done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"}
            ],
            "trajectory_format": "mini-swe-agent-1"
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big__1.traj.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&trajectory).unwrap()).unwrap();
        let head = crate::ingest::read_head(&path).unwrap();
        assert_eq!(head.len(), 64 * 1024);
        assert!(!String::from_utf8_lossy(&head).contains("\"messages\""));
        assert_eq!(crate::ingest::Format::detect(&head), None);
        assert_eq!(
            crate::ingest::Format::detect_file(&path, &head),
            Some(crate::ingest::Format::MiniSweAgent)
        );
        let sink = crate::ingest::read_path(&path, None).unwrap();
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        assert_eq!(sink.conversations.len(), 1);
        let run = &sink.conversations[0].0.runs[0];
        assert_eq!(run.format, FORMAT);
        assert_eq!(run.landings().count(), 2);

        // The same shape without mini-swe-agent's marks is not taken for one.
        let mut other = trajectory.clone();
        other["info"]
            .as_object_mut()
            .unwrap()
            .remove("mini_version");
        other.as_object_mut().unwrap().remove("trajectory_format");
        std::fs::write(&path, serde_json::to_vec_pretty(&other).unwrap()).unwrap();
        let head = crate::ingest::read_head(&path).unwrap();
        assert_eq!(crate::ingest::Format::detect_file(&path, &head), None);
    }
}
