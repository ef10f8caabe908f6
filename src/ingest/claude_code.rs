//! Claude Code session transcripts: `~/.claude/projects/<project>/<session>.jsonl`, one JSON
//! entry per line, linked by `uuid` / `parentUuid`.
//!
//! A file is one session: its main chain is one conversation (the entries' `sessionId`, else the
//! file name), and each sub-agent's side chain (`isSidechain: true`, the Task tool's work) is a
//! conversation of its own, `<session>/sidechain-<n>` in the order the chains start, so that its
//! prompt is a run of its own and does not count as a turn of the person's session. A chain whose
//! entries name their sub-agent (`agentId`) is `<session>/agent-<agentId>`, and a file holding
//! side chains only (a sub-agent's own file, `<session>/subagents/agent-<id>.jsonl`, under the
//! parent's `sessionId`) names its chain after the file, `<session>/<file stem>`: the parent's
//! own side chains keep their ids.
//! - A `user` entry whose content is text is the person's prompt and starts a run; one whose
//!   `isMeta` or `isCompactSummary` is set, a local command's echo and output (`<command-name>`,
//!   `<local-command-stdout>`) and an interruption notice (`[Request interrupted by user`) are
//!   system text. A slash command the model answers (its echo followed by its expansion, an
//!   `isMeta` text, or by a reply) is the person's prompt, read as typed: `/name args`. The
//!   `tool_result` blocks of a user entry are tool results, joined to their `tool_use` by
//!   `tool_use_id` (`is_error` kept).
//! - `assistant` entries are the model's messages; entries sharing one `message.id` (a reply
//!   written block by block) are one message. `text` blocks are its text, `tool_use` blocks its
//!   calls (`name`, `input`); `thinking` blocks are not read. The model is the first
//!   `message.model` other than `<synthetic>`.
//! - An entry seen again (the same `uuid` and `message`), or a `tool_use` id seen again, is read
//!   once.
//! - `summary`, `system`, `file-history-snapshot` and the other entry types of [`NOT_MESSAGES`]
//!   are not messages; an entry type never seen in Claude Code's files is a partial note, and so
//!   is a content block kind never seen there (reasoning, media, server-tool and model-fallback
//!   blocks are not read, silently). An entry that is not a message still links its side chain:
//!   the entries after it name it as their parent. A line that is not JSON, or over the record
//!   limit, is dropped with its reason.
//! - Token usage (`message.usage`) is not read: the run model has no place for it.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::io;

use serde_json::{Map, Value};

use crate::ingest::chat::joined_text;
use crate::ingest::json_pick::{dropped, non_empty_str, partial};
use crate::ingest::trajectory::{self, ChatMessage, ChatToolCall, RunTemplate};
use crate::ingest::{Input, Locator, Sink};
use crate::model::Role;

const FORMAT: &str = "claude-code";

/// Entry types Claude Code writes that are not messages.
const NOT_MESSAGES: &[&str] = &[
    "summary",
    "system",
    "file-history-snapshot",
    "queue-operation",
    "progress",
    "attachment",
    "custom-title",
    "ai-title",
    "tag",
    "agent-name",
    "last-prompt",
    "permission-mode",
    "mode",
    "pr-link",
    "frame-link",
    "worktree-state",
    "relocated",
    "bridge-session",
    "atis-latch",
    "started",
    "result",
];

/// Content block kinds Claude Code writes that are not read: reasoning, media, the server
/// tools whose results sit in the same reply, and the notice of a fallback to another model.
const NOT_READ_BLOCKS: &[&str] = &[
    "fallback",
    "thinking",
    "redacted_thinking",
    "image",
    "document",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
];

/// Does the head look like a Claude Code transcript? A first line that is an entry carrying the
/// session's links (`sessionId` with `parentUuid`, or a `user` / `assistant` entry with its
/// `uuid`), or one of the entries that are not messages (a `summary`, a `file-history-snapshot`,
/// or another of [`NOT_MESSAGES`] naming its `sessionId`). Its message, if any, holds Anthropic
/// `content`: the transcripts of Qwen Code (Gemini `parts`, a `systemPayload`) share the links
/// and are not Claude Code's.
pub(crate) fn is_transcript(text: &str) -> bool {
    let first = text.lines().next().unwrap_or("");
    if !first.starts_with('{') {
        return false;
    }
    let Ok(entry) = serde_json::from_str::<Map<String, Value>>(first) else {
        // Cut short by the head: the string test on what there is.
        return !first.contains("\"systemPayload\"")
            && !first.contains("\"parts\":[")
            && ((first.contains("\"parentUuid\"") && first.contains("\"sessionId\""))
                || (first.contains("\"type\":\"summary\"") && first.contains("\"leafUuid\""))
                || first.contains("\"type\":\"file-history-snapshot\""));
    };
    let kind = entry.get("type").and_then(Value::as_str).unwrap_or("");
    let session = entry.get("sessionId").is_some_and(Value::is_string);
    match kind {
        "summary" => entry.contains_key("leafUuid"),
        "file-history-snapshot" => true,
        k if NOT_MESSAGES.contains(&k) && k != "system" => session,
        _ => {
            let anthropic = match entry.get("message") {
                None => true,
                Some(Value::Object(m)) => m.contains_key("content") && !m.contains_key("parts"),
                Some(_) => false,
            };
            let linked = entry.contains_key("parentUuid")
                || (matches!(kind, "user" | "assistant") && entry.contains_key("uuid"));
            session && linked && anthropic && !entry.contains_key("systemPayload")
        }
    }
}

/// One chain of the session being rebuilt.
#[derive(Default)]
struct Chain {
    messages: Vec<ChatMessage>,
    /// `message.id` of an assistant reply -> its index in `messages`.
    replies: HashMap<String, usize>,
    /// A slash command's echo, the last message: the person's prompt if the model is what
    /// answers it (its expansion, or a reply, comes next), system text if a local command's
    /// output does.
    command: Option<(usize, String)>,
    /// The sub-agent whose chain this is (`agentId`), when the entries name it.
    agent: Option<String>,
    first_line: u64,
}

impl Chain {
    /// The next message of the chain has come: it settles a pending command echo.
    fn settle(&mut self, prompted: bool) {
        if let Some((at, prompt)) = self.command.take() {
            if prompted {
                let echo = &mut self.messages[at];
                echo.role = Role::User;
                echo.text = prompt;
            }
        }
    }
}

#[derive(Default)]
struct Session {
    id: Option<String>,
    model: Option<String>,
    main: Chain,
    /// Side chains in the order they start; `roots` maps an entry's uuid to its chain.
    sides: Vec<Chain>,
    side_of: HashMap<String, usize>,
    /// The uuid of each message entry read -> a hash of its `message`: an entry repeated is read
    /// once, another message under a uuid already seen is read.
    seen_uuids: HashMap<String, u64>,
    seen_calls: HashSet<String>,
    unknown_types: Vec<String>,
    unknown_blocks: Vec<String>,
}

pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    let mut session = Session::default();
    crate::ingest::jsonl::read_lines(input, sink, |line, value, sink| match value {
        Err(reason) => sink.quarantine(dropped(
            input,
            FORMAT,
            Locator::Line(line),
            reason.to_string(),
        )),
        Ok(Value::Object(entry)) => session.entry(line, &entry),
        Ok(other) => sink.quarantine(dropped(
            input,
            FORMAT,
            Locator::Line(line),
            format!(
                "the line is {}, not a transcript entry",
                crate::ingest::json_pick::kind_of(&other)
            ),
        )),
    })?;
    for kind in &session.unknown_blocks {
        sink.quarantine(partial(
            input,
            FORMAT,
            Locator::File,
            format!("content blocks of the unknown type {kind:?} are not read; left out"),
        ));
    }
    for kind in &session.unknown_types {
        let reason = if kind.is_empty() {
            "entries without a type are not messages; left out".to_string()
        } else {
            format!("entries of the unknown type {kind:?} are not messages; left out")
        };
        sink.quarantine(partial(input, FORMAT, Locator::File, reason));
    }
    let id = session.id.clone().unwrap_or_else(|| {
        std::path::Path::new(input.name)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| input.display.to_string())
    });
    let template = RunTemplate {
        format: FORMAT.to_string(),
        source: input.display.to_string(),
        agent: Some("claude-code".to_string()),
        model: session.model.clone(),
    };
    let Session { main, sides, .. } = session;
    // A sub-agent's own file (`<session>/subagents/agent-<id>.jsonl`) holds side-chain entries
    // only, under the parent's `sessionId`: named by its agent or file, its chain does not take
    // the id of the parent's first side chain.
    let own_file = main.messages.is_empty();
    let stem = std::path::Path::new(input.name)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned());
    let mut chains = vec![(id.clone(), main)];
    for (n, chain) in sides.into_iter().enumerate() {
        let name = match (&chain.agent, &stem) {
            (Some(agent), _) if id == format!("agent-{agent}") => id.clone(),
            (Some(agent), _) => format!("{id}/agent-{agent}"),
            (None, Some(stem)) if own_file && n == 0 => format!("{id}/{stem}"),
            (None, Some(stem)) if own_file => format!("{id}/{stem}/sidechain-{}", n + 1),
            _ => format!("{id}/sidechain-{}", n + 1),
        };
        chains.push((name, chain));
    }
    for (id, chain) in chains {
        if chain.messages.is_empty() {
            continue;
        }
        let locator = Locator::Line(chain.first_line);
        let conversation = trajectory::build(&id, chain.messages, &template, sink, locator);
        sink.conversation(conversation, chain.first_line);
    }
    Ok(())
}

impl Session {
    fn entry(&mut self, line: u64, entry: &Map<String, Value>) {
        let kind = entry.get("type").and_then(Value::as_str).unwrap_or("");
        if kind != "user" && kind != "assistant" {
            if !NOT_MESSAGES.contains(&kind) && !self.unknown_types.iter().any(|k| k == kind) {
                self.unknown_types.push(kind.to_string());
            }
            self.pass_through(entry);
            return;
        }
        if let Some(uuid) = entry.get("uuid").and_then(Value::as_str) {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            hash_value(entry.get("message").unwrap_or(&Value::Null), &mut hasher);
            let hash = hasher.finish();
            if self.seen_uuids.insert(uuid.to_string(), hash) == Some(hash) {
                return;
            }
        }
        if self.id.is_none() {
            self.id = entry.get("sessionId").and_then(non_empty_str);
        }
        let Some(message) = entry.get("message").and_then(Value::as_object) else {
            self.pass_through(entry);
            return;
        };
        let timestamp_ms = entry
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(trajectory::parse_iso_ms);
        let chain = self.chain(line, entry);
        let mut out: Vec<ChatMessage> = Vec::new();
        if kind == "assistant" {
            if self.model.is_none() {
                self.model = message
                    .get("model")
                    .and_then(non_empty_str)
                    .filter(|m| m != "<synthetic>");
            }
            let mut text = Vec::new();
            let mut calls = Vec::new();
            for block in blocks(message.get("content")) {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(t) = block.get("text").and_then(Value::as_str) {
                            text.push(t.to_string());
                        }
                    }
                    Some("tool_use") => {
                        let id = block.get("id").and_then(non_empty_str);
                        if let Some(id) = &id {
                            if !self.seen_calls.insert(id.clone()) {
                                continue;
                            }
                        }
                        calls.push(ChatToolCall {
                            id,
                            name: block
                                .get("name")
                                .and_then(non_empty_str)
                                .unwrap_or_default(),
                            arguments: block
                                .get("input")
                                .map(Value::to_string)
                                .unwrap_or_else(|| "{}".to_string()),
                        });
                    }
                    other => self.block_kind(other),
                }
            }
            if let Some(s) = message.get("content").and_then(Value::as_str) {
                text.push(s.to_string());
            }
            let chain = self.chain_mut(chain);
            chain.settle(true);
            let reply = message.get("id").and_then(non_empty_str);
            if let Some(&at) = reply.as_ref().and_then(|r| chain.replies.get(r)) {
                let merged = &mut chain.messages[at];
                for t in text {
                    if !merged.text.is_empty() {
                        merged.text.push('\n');
                    }
                    merged.text.push_str(&t);
                }
                merged.tool_calls.extend(calls);
                return;
            }
            let mut chat = ChatMessage::new(Role::Assistant, text.join("\n"));
            chat.tool_calls = calls;
            chat.timestamp_ms = timestamp_ms;
            if let Some(r) = reply {
                chain.replies.insert(r, chain.messages.len());
            }
            chain.messages.push(chat);
            return;
        }
        let meta = entry.get("isMeta").and_then(Value::as_bool) == Some(true);
        let summary = entry.get("isCompactSummary").and_then(Value::as_bool) == Some(true);
        let mut text = Vec::new();
        match message.get("content") {
            Some(Value::String(s)) => text.push(s.clone()),
            content => {
                for block in blocks(content) {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            if let Some(t) = block.get("text").and_then(Value::as_str) {
                                text.push(t.to_string());
                            }
                        }
                        Some("tool_result") => {
                            let mut result = ChatMessage::tool(
                                block.get("tool_use_id").and_then(non_empty_str),
                                None,
                                joined_text(block.get("content")),
                                block.get("is_error").and_then(Value::as_bool) == Some(true),
                            );
                            result.timestamp_ms = timestamp_ms;
                            out.push(result);
                        }
                        other => self.block_kind(other),
                    }
                }
            }
        }
        let mut command = None;
        let mut prompted = false;
        if !text.is_empty() {
            let text = text.join("\n");
            let harness = is_harness_text(&text);
            let role = if meta || summary || harness || !out.is_empty() {
                Role::System
            } else {
                Role::User
            };
            // A command's expansion, written as meta text after its echo, is the model's prompt.
            prompted = meta && !harness && out.is_empty();
            if harness && out.is_empty() {
                command = command_prompt(&text);
            }
            let mut chat = ChatMessage::new(role, text);
            chat.timestamp_ms = timestamp_ms;
            out.push(chat);
        }
        let chain = self.chain_mut(chain);
        chain.settle(prompted);
        if let Some(prompt) = command {
            chain.command = Some((chain.messages.len(), prompt));
        }
        chain.messages.extend(out);
    }

    /// Which chain an entry belongs to: `None` for the main chain, else the side chain its
    /// `parentUuid` continues (a side-chain entry whose parent is in no side chain starts one).
    fn chain(&mut self, line: u64, entry: &Map<String, Value>) -> Option<usize> {
        if entry.get("isSidechain").and_then(Value::as_bool) != Some(true) {
            if self.main.messages.is_empty() {
                self.main.first_line = line;
            }
            return None;
        }
        let parent = entry.get("parentUuid").and_then(Value::as_str);
        let at = match parent.and_then(|p| self.side_of.get(p)) {
            Some(&at) => at,
            None => {
                self.sides.push(Chain {
                    first_line: line,
                    agent: entry.get("agentId").and_then(non_empty_str),
                    ..Chain::default()
                });
                self.sides.len() - 1
            }
        };
        if let Some(uuid) = entry.get("uuid").and_then(Value::as_str) {
            self.side_of.insert(uuid.to_string(), at);
        }
        Some(at)
    }

    /// A content block that is neither text, a tool call nor a tool result: one of the kinds
    /// not read ([`NOT_READ_BLOCKS`]), or an unknown one, named once in a partial note.
    fn block_kind(&mut self, kind: Option<&str>) {
        let kind = kind.unwrap_or("");
        if !NOT_READ_BLOCKS.contains(&kind) && !self.unknown_blocks.iter().any(|k| k == kind) {
            self.unknown_blocks.push(kind.to_string());
        }
    }

    /// An entry that is not a message but sits in a side chain (a `system` entry, progress):
    /// the entries after it name it as their parent, so it belongs to its parent's chain. It
    /// starts no chain of its own.
    fn pass_through(&mut self, entry: &Map<String, Value>) {
        if entry.get("isSidechain").and_then(Value::as_bool) != Some(true) {
            return;
        }
        let parent = entry.get("parentUuid").and_then(Value::as_str);
        let at = parent.and_then(|p| self.side_of.get(p)).copied();
        if let (Some(at), Some(uuid)) = (at, entry.get("uuid").and_then(Value::as_str)) {
            self.side_of.insert(uuid.to_string(), at);
        }
    }

    fn chain_mut(&mut self, at: Option<usize>) -> &mut Chain {
        match at {
            None => &mut self.main,
            Some(at) => &mut self.sides[at],
        }
    }
}

/// Text the person did not write as a prompt: a slash command's echo or output, an interruption
/// notice.
fn is_harness_text(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("<command-name>")
        || t.starts_with("<command-message>")
        || t.starts_with("<local-command-stdout>")
        || t.starts_with("<local-command-stderr>")
        || t.starts_with("[Request interrupted by user")
}

/// A slash command's echo (`<command-name>/review</command-name>`, its `<command-args>`): the
/// command as the person typed it.
fn command_prompt(text: &str) -> Option<String> {
    let inner = |tag: &str| {
        let open = format!("<{tag}>");
        let close = format!("</{tag}>");
        let start = text.find(&open)? + open.len();
        let end = start + text[start..].find(&close)?;
        Some(text[start..end].trim())
    };
    let name = inner("command-name").filter(|n| !n.is_empty())?;
    let mut prompt = if name.starts_with('/') {
        name.to_string()
    } else {
        format!("/{name}")
    };
    if let Some(args) = inner("command-args").filter(|a| !a.is_empty()) {
        prompt.push(' ');
        prompt.push_str(args);
    }
    Some(prompt)
}

/// Feed a JSON value to a hasher, members in their order.
fn hash_value(value: &Value, state: &mut impl Hasher) {
    match value {
        Value::Null => 0u8.hash(state),
        Value::Bool(b) => (1u8, b).hash(state),
        Value::Number(n) => (2u8, n.to_string()).hash(state),
        Value::String(s) => (3u8, s).hash(state),
        Value::Array(items) => {
            (4u8, items.len()).hash(state);
            for item in items {
                hash_value(item, state);
            }
        }
        Value::Object(members) => {
            (5u8, members.len()).hash(state);
            for (key, member) in members {
                key.hash(state);
                hash_value(member, state);
            }
        }
    }
}

/// The content blocks of a message: its list, or none.
fn blocks(content: Option<&Value>) -> impl Iterator<Item = &Map<String, Value>> {
    content
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

/// Claude Code session transcripts (`<session>.jsonl`).
pub struct ClaudeCodeAdapter;

impl crate::ingest::Adapter for ClaudeCodeAdapter {
    fn name(&self) -> &'static str {
        FORMAT
    }
    fn family(&self) -> &'static str {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "Claude Code session transcripts (~/.claude/projects/*/<session>.jsonl)"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        crate::ingest::Match::strong_if(is_transcript(head.text))
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
        read(input, sink)
    }
}

impl crate::ingest::Format {
    #[allow(non_upper_case_globals)]
    pub const ClaudeCode: crate::ingest::Format = crate::ingest::Format(&ClaudeCodeAdapter);
}
