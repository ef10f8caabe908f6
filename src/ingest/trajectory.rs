//! Turning a chat trajectory (an ordered message list, as OpenAI-style logs keep it) into runs.
//!
//! Shared by every format that records a conversation as messages rather than as framework
//! events. The rules are those of `formats.md`:
//! - every user message without tool calls starts a new run (turn += 1); work before the first
//!   user message is turn 0 and becomes a run only when the agent did something there;
//! - except a user message that arrives while the agent's turn is still open: after the agent
//!   called a tool (its result came back, or not yet) and before it answered with text. No user
//!   has spoken there; the harness has (a token-usage notice after every tool result, a rejected
//!   submission, a file a tool returned, an announcement of new tools). Such a message stays in
//!   the run and is kept as system text, so that it is in the history without opening a turn.
//!   A system message after agent work (a restarted history) closes the turn, so the next user
//!   message is a new task again. In the recorded logs read so far (tau-bench, tau2, Inspect,
//!   pydantic-ai's cassettes) every genuine user message follows an answer, so the rule needs
//!   no switch;
//! - a user message that carries tool calls is the simulated user acting on its own device: it
//!   starts no turn, and neither it nor the results of its calls are part of the agent's history;
//! - an assistant tool call is paired with the first tool message answering the same id (else
//!   the first pending call: ids are reused in real files); a call that never got a result is
//!   kept as an unanswered landing; a tool result with no pending call is kept as a message and
//!   reported as a partial quarantine entry;
//! - the answer is the last assistant text with no tool calls before the next user message.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::ingest::{Locator, Quarantined, Sink};
use crate::model::{Conversation, Event, EventKind, LandingFlags, Role, Run};

/// One tool call requested in a message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatToolCall {
    pub id: Option<String>,
    pub name: String,
    /// Arguments as JSON text (a JSON object for well-formed calls).
    pub arguments: String,
}

/// One message of a chat-shaped recording (trajectories, and the request and response bodies
/// of HTTP recordings), format-neutral.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    pub role: Role,
    pub text: String,
    pub tool_calls: Vec<ChatToolCall>,
    /// For tool messages: the call this answers.
    pub call_id: Option<String>,
    /// For tool messages: the tool's name when recorded.
    pub tool_name: Option<String>,
    pub error: bool,
    /// The message (or tool result) belongs to the simulated user's own device, not the agent.
    pub by_user_device: bool,
    pub timestamp_ms: Option<i64>,
}

impl ChatMessage {
    pub fn new(role: Role, text: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role,
            text: text.into(),
            tool_calls: Vec::new(),
            call_id: None,
            tool_name: None,
            error: false,
            by_user_device: false,
            timestamp_ms: None,
        }
    }

    /// A tool result answering `call_id`.
    pub fn tool(
        call_id: Option<String>,
        name: Option<String>,
        text: String,
        error: bool,
    ) -> ChatMessage {
        ChatMessage {
            call_id,
            tool_name: name,
            error,
            ..ChatMessage::new(Role::Tool, text)
        }
    }
}

/// What a trajectory's runs share.
#[derive(Debug, Clone, Default)]
pub struct RunTemplate {
    pub format: String,
    pub source: String,
    pub agent: Option<String>,
    pub model: Option<String>,
}

struct Pending {
    run: usize,
    event: usize,
    id: Option<String>,
}

/// The calls still waiting for a result, oldest first. A result takes the first pending call
/// with its id, else the first pending call. Indexed by call id, with answered entries skipped
/// lazily, so that each result costs amortised constant time: a record may hold 100,000 calls
/// in one message.
#[derive(Default)]
struct PendingCalls {
    /// Every call since the last clear, in order; `None` once answered.
    calls: Vec<Option<Pending>>,
    /// The first entry of `calls` that may still be pending.
    head: usize,
    /// Per call id, the positions in `calls` of its calls, in order (answered ones included
    /// until they reach the front).
    by_id: HashMap<String, VecDeque<usize>>,
}

impl PendingCalls {
    fn push(&mut self, pending: Pending) {
        if let Some(id) = &pending.id {
            self.by_id
                .entry(id.clone())
                .or_default()
                .push_back(self.calls.len());
        }
        self.calls.push(Some(pending));
    }

    fn clear(&mut self) {
        self.calls.clear();
        self.head = 0;
        self.by_id.clear();
    }

    /// The position of the first pending call with this id.
    fn find_id(&mut self, id: &str) -> Option<usize> {
        let queue = self.by_id.get_mut(id)?;
        while let Some(&k) = queue.front() {
            if self.calls[k].is_some() {
                return Some(k);
            }
            queue.pop_front();
        }
        None
    }

    /// The position of the first pending call.
    fn first(&mut self) -> Option<usize> {
        while self.head < self.calls.len() {
            if self.calls[self.head].is_some() {
                return Some(self.head);
            }
            self.head += 1;
        }
        None
    }

    fn take(&mut self, k: usize) -> Pending {
        self.calls[k].take().expect("a pending call")
    }
}

/// Build the conversation's runs from its messages. Partial problems (orphan results) are
/// reported to `sink` against `locator`.
pub fn build(
    conversation_id: &str,
    messages: Vec<ChatMessage>,
    template: &RunTemplate,
    sink: &mut dyn Sink,
    locator: Locator,
) -> Conversation {
    let mut runs: Vec<Run> = Vec::new();
    let new_run = |turn: u32| Run {
        run_id: format!("{conversation_id}#{turn}"),
        conversation_id: conversation_id.to_string(),
        turn,
        format: template.format.clone(),
        source: template.source.clone(),
        agent: template.agent.clone(),
        model: template.model.clone(),
        ..Run::default()
    };
    // Messages seen before the first run exists (system prompt): they join whichever run opens.
    let mut preamble: Vec<Event> = Vec::new();
    let mut pending = PendingCalls::default();
    let mut turn = 0u32;
    // A set: every tool message asks whether it answers one of them.
    let mut device_call_ids: HashSet<String> = HashSet::new();
    // The agent called a tool since the last user turn and has not answered with text yet.
    let mut turn_open = false;

    for mut msg in messages {
        // The simulated user's device: not the agent's history, no turn, no landings.
        if msg.by_user_device || (msg.role == Role::User && !msg.tool_calls.is_empty()) {
            for call in &msg.tool_calls {
                if let Some(id) = &call.id {
                    device_call_ids.insert(id.clone());
                }
            }
            continue;
        }
        match msg.role {
            Role::User if turn_open => {
                // The harness talking inside the agent's turn, not a user turn.
                msg.role = Role::System;
            }
            // A system message after agent work restarts the history: the next user message is a
            // new task.
            Role::User | Role::System => turn_open = false,
            Role::Assistant => turn_open = !msg.tool_calls.is_empty(),
            // The result of a call the simulated user made on its own device is not the agent's.
            Role::Tool => turn_open |= !answers_device_call(&msg, &device_call_ids),
        }
        if msg.role == Role::User {
            turn += 1;
            // Calls still pending belong to the finished run and stay unanswered.
            pending.clear();
            let mut run = new_run(turn);
            run.user_message = Some(msg.text.clone());
            run.started_ms = msg.timestamp_ms;
            run.events.append(&mut preamble);
            runs.push(run);
        }
        let needs_run = runs.is_empty() && matches!(msg.role, Role::Assistant | Role::Tool);
        if needs_run {
            let mut run = new_run(0);
            run.started_ms = msg.timestamp_ms;
            run.events.append(&mut preamble);
            runs.push(run);
        }
        let mut event = message_event(&msg);
        let Some(run_index) = runs.len().checked_sub(1) else {
            preamble.push(event);
            continue;
        };
        let run = &mut runs[run_index];
        if let Some(ts) = msg.timestamp_ms {
            run.ended_ms = Some(run.ended_ms.map_or(ts, |e: i64| e.max(ts)));
        }
        match msg.role {
            Role::Assistant => {
                run.events.push(event);
                if msg.tool_calls.is_empty() {
                    run.answer = Some(msg.text);
                } else {
                    push_landings(
                        run,
                        run_index,
                        msg.tool_calls,
                        msg.timestamp_ms,
                        &mut pending,
                    );
                }
            }
            Role::Tool => {
                let by_id = msg.call_id.as_ref().and_then(|id| pending.find_id(id));
                let answers_device = answers_device_call(&msg, &device_call_ids);
                let slot = match by_id {
                    Some(i) => Some(i),
                    None if answers_device => None,
                    None => pending.first(),
                };
                match slot {
                    Some(i) => {
                        let p = pending.take(i);
                        let landing = &mut runs[p.run].events[p.event];
                        landing.text = Some(msg.text.clone());
                        landing.error = msg.error;
                        landing.flags &= !LandingFlags::UNANSWERED;
                        if let (Some(done), Some(start)) = (msg.timestamp_ms, landing.timestamp_ms)
                        {
                            landing.duration_ms = Some((done - start) as f64);
                        }
                        if event.tool_name.is_none() {
                            event.tool_name = landing.tool_name.clone();
                        }
                        runs[run_index].events.push(event);
                    }
                    None if answers_device => {
                        // The result of a call the simulated user made on its own device.
                        continue;
                    }
                    None => {
                        sink.quarantine(orphan_result(
                            conversation_id,
                            template,
                            &locator,
                            msg.call_id.as_deref(),
                        ));
                        runs[run_index].events.push(event);
                    }
                }
            }
            Role::System | Role::User => run.events.push(event),
        }
    }
    if !preamble.is_empty() {
        // A trajectory with no user message and no agent work: keep its messages in a turn-0 run.
        let mut run = new_run(0);
        run.events.append(&mut preamble);
        runs.push(run);
    }
    for run in &mut runs {
        run.renumber();
        if let (Some(s), Some(e)) = (run.started_ms, run.ended_ms) {
            run.duration_ms = Some((e - s) as f64);
        }
    }
    Conversation {
        id: conversation_id.to_string(),
        runs,
    }
}

/// A message of the trajectory as its `message` event (an assistant message's tool calls as its
/// arguments).
fn message_event(msg: &ChatMessage) -> Event {
    let mut event = Event::new(EventKind::Message);
    event.role = Some(msg.role);
    event.text = Some(msg.text.clone());
    event.timestamp_ms = msg.timestamp_ms;
    event.error = msg.error;
    event.call_id = msg.call_id.clone();
    event.tool_name = msg.tool_name.clone();
    if !msg.tool_calls.is_empty() {
        event.arguments = Some(tool_calls_json(&msg.tool_calls));
    }
    event
}

/// A landing for each tool call of an assistant message of run `run_index`, unanswered until a
/// tool message answers it, each waiting in `pending`.
fn push_landings(
    run: &mut Run,
    run_index: usize,
    calls: Vec<ChatToolCall>,
    timestamp_ms: Option<i64>,
    pending: &mut PendingCalls,
) {
    for call in calls {
        let mut landing = Event::new(EventKind::Landing);
        landing.role = Some(Role::Assistant);
        landing.tool_name = Some(call.name);
        landing.call_id = call.id.clone();
        landing.arguments = Some(call.arguments);
        landing.flags = LandingFlags::UNANSWERED;
        landing.timestamp_ms = timestamp_ms;
        run.events.push(landing);
        pending.push(Pending {
            run: run_index,
            event: run.events.len() - 1,
            id: call.id,
        });
    }
}

/// The note for a tool result that answers no pending call: it is kept as a message.
fn orphan_result(
    conversation_id: &str,
    template: &RunTemplate,
    locator: &Locator,
    call_id: Option<&str>,
) -> Quarantined {
    Quarantined::partial(
        &template.source,
        locator.clone(),
        format!(
            "conversation {conversation_id}: tool result{} has no pending tool call; kept as a \
             message, not as a landing",
            call_id
                .map(|id| format!(" for call id {id:?}"))
                .unwrap_or_default()
        ),
    )
}

/// Does a tool message answer a call the simulated user made on its own device?
fn answers_device_call(msg: &ChatMessage, device_call_ids: &HashSet<String>) -> bool {
    msg.call_id
        .as_ref()
        .is_some_and(|id| device_call_ids.contains(id))
}

/// An assistant message's tool calls as JSON text: `[{"id":..,"name":..,"arguments":..}]`.
fn tool_calls_json(calls: &[ChatToolCall]) -> String {
    let list: Vec<serde_json::Value> = calls
        .iter()
        .map(|c| {
            let args = serde_json::from_str::<serde_json::Value>(&c.arguments)
                .unwrap_or_else(|_| serde_json::Value::String(c.arguments.clone()));
            serde_json::json!({"id": c.id, "name": c.name, "arguments": args})
        })
        .collect();
    serde_json::Value::Array(list).to_string()
}

/// Parse an ISO-8601 timestamp (`2025-10-05T07:52:53.055084`, optional `Z` or offset) to
/// milliseconds since the Unix epoch. A timestamp without a zone is read as UTC.
pub fn parse_iso_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, rest) = s.split_once(['T', ' '])?;
    let mut dp = date.split('-');
    let y: i64 = dp.next()?.parse().ok()?;
    let mo: i64 = dp.next()?.parse().ok()?;
    let d: i64 = dp.next()?.parse().ok()?;
    let (time, offset_min) = split_zone(rest)?;
    let mut tp = time.split(':');
    let h: i64 = tp.next()?.parse().ok()?;
    let mi: i64 = tp.next()?.parse().ok()?;
    let sec_text = tp.next().unwrap_or("0");
    let (sec, frac) = sec_text.split_once('.').unwrap_or((sec_text, ""));
    let sec: i64 = sec.parse().ok()?;
    let ms: i64 = if frac.is_empty() {
        0
    } else {
        let digits: String = frac.chars().chain("000".chars()).take(3).collect();
        digits.parse().ok()?
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    // Days from civil (proleptic Gregorian), Howard Hinnant's algorithm.
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = if y2 >= 0 { y2 } else { y2 - 399 } / 400;
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    Some(((days * 24 + h) * 60 + mi - offset_min) * 60_000 + sec * 1000 + ms)
}

fn split_zone(rest: &str) -> Option<(&str, i64)> {
    if let Some(t) = rest.strip_suffix('Z').or_else(|| rest.strip_suffix('z')) {
        return Some((t, 0));
    }
    if let Some(pos) = rest.rfind(['+', '-']) {
        if pos >= 5 {
            let (t, z) = rest.split_at(pos);
            let sign = if z.starts_with('-') { -1 } else { 1 };
            let z = &z[1..];
            let (zh, zm) = z
                .split_once(':')
                .unwrap_or((&z[..z.len().min(2)], &z[z.len().min(2)..]));
            let zh: i64 = zh.parse().ok()?;
            let zm: i64 = if zm.is_empty() { 0 } else { zm.parse().ok()? };
            return Some((t, sign * (zh * 60 + zm)));
        }
    }
    Some((rest, 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::Collect;

    fn call(id: &str, name: &str) -> ChatToolCall {
        ChatToolCall {
            id: Some(id.into()),
            name: name.into(),
            arguments: "{}".into(),
        }
    }

    fn tool(id: &str, text: &str) -> ChatMessage {
        let mut m = ChatMessage::new(Role::Tool, text);
        m.call_id = Some(id.into());
        m
    }

    fn assistant_calls(calls: Vec<ChatToolCall>) -> ChatMessage {
        let mut m = ChatMessage::new(Role::Assistant, "");
        m.tool_calls = calls;
        m
    }

    fn build_simple(msgs: Vec<ChatMessage>) -> (Conversation, Collect) {
        let mut sink = Collect::default();
        let c = build(
            "c1",
            msgs,
            &RunTemplate::default(),
            &mut sink,
            Locator::Record(0),
        );
        (c, sink)
    }

    #[test]
    fn splits_runs_at_user_messages_and_pairs_results() {
        let (c, sink) = build_simple(vec![
            ChatMessage::new(Role::System, "policy"),
            ChatMessage::new(Role::User, "hi"),
            assistant_calls(vec![call("a", "lookup"), call("b", "other")]),
            tool("b", "B"),
            tool("a", "A"),
            ChatMessage::new(Role::Assistant, "answer 1"),
            ChatMessage::new(Role::User, "more"),
            ChatMessage::new(Role::Assistant, "answer 2"),
        ]);
        assert!(sink.quarantined.is_empty());
        assert_eq!(c.runs.len(), 2);
        assert_eq!(c.runs[0].turn, 1);
        assert_eq!(c.runs[0].answer.as_deref(), Some("answer 1"));
        let landings: Vec<_> = c.runs[0].landings().collect();
        assert_eq!(landings.len(), 2);
        assert_eq!(landings[0].text.as_deref(), Some("A"));
        assert_eq!(landings[1].text.as_deref(), Some("B"));
        // The system prompt is part of turn 1's history.
        assert_eq!(c.history_for(0)[0].role, Role::System);
        assert_eq!(c.history_for(1).len(), 8);
    }

    #[test]
    fn reused_ids_pair_with_first_pending() {
        let (c, _) = build_simple(vec![
            ChatMessage::new(Role::User, "go"),
            assistant_calls(vec![call("x", "t1")]),
            tool("x", "r1"),
            assistant_calls(vec![call("x", "t2"), call("x", "t3")]),
            tool("x", "r2"),
            tool("x", "r3"),
        ]);
        let results: Vec<_> = c.runs[0]
            .landings()
            .map(|l| (l.tool_name.clone().unwrap(), l.text.clone().unwrap()))
            .collect();
        assert_eq!(
            results,
            vec![
                ("t1".into(), "r1".into()),
                ("t2".into(), "r2".into()),
                ("t3".into(), "r3".into())
            ]
        );
    }

    #[test]
    fn unanswered_and_orphans_are_kept_and_reported() {
        let (c, sink) = build_simple(vec![
            ChatMessage::new(Role::User, "go"),
            tool("nobody", "orphan"),
            assistant_calls(vec![call("q", "never")]),
            ChatMessage::new(Role::User, "next"),
        ]);
        let l: Vec<_> = c.runs[0].landings().collect();
        assert_eq!(l.len(), 1);
        assert!(l[0].has_flag(LandingFlags::UNANSWERED));
        assert_eq!(sink.quarantined.len(), 1);
        assert!(sink.quarantined[0].reason.contains("no pending tool call"));
        // The orphan result is still part of the history.
        assert!(c.history_for(0).iter().any(|m| m.text == "orphan"));
    }

    #[test]
    fn user_device_calls_are_not_turns_or_landings() {
        let mut device = ChatMessage::new(Role::User, "");
        device.tool_calls = vec![call("d1", "toggle_airplane_mode")];
        let mut device_result = tool("d1", "ok");
        device_result.by_user_device = true;
        let (c, sink) = build_simple(vec![
            ChatMessage::new(Role::Assistant, "Hi! How can I help?"),
            ChatMessage::new(Role::User, "my phone"),
            device,
            device_result,
            ChatMessage::new(Role::Assistant, "done"),
        ]);
        assert!(sink.quarantined.is_empty());
        assert_eq!(c.runs.len(), 2);
        assert_eq!(c.runs[0].turn, 0);
        assert_eq!(c.runs[1].turn, 1);
        assert_eq!(c.runs[1].landings().count(), 0);
        assert!(c.history_for(1).iter().all(|m| m.text != "ok"));
    }

    #[test]
    fn harness_messages_inside_an_open_turn_start_no_run() {
        let (c, sink) = build_simple(vec![
            ChatMessage::new(Role::System, "policy"),
            ChatMessage::new(Role::User, "run the simulation"),
            assistant_calls(vec![call("a", "bash")]),
            tool("a", ""),
            ChatMessage::new(Role::User, "[usage] Tokens used so far: 1,297/8,000,000."),
            assistant_calls(vec![call("b", "bash")]),
            // A notice before the result arrives is inside the turn as well.
            ChatMessage::new(Role::User, "Your submission was incorrect."),
            tool("b", ""),
            ChatMessage::new(Role::User, "[usage] Tokens used so far: 2,958/8,000,000."),
            ChatMessage::new(Role::Assistant, "done"),
            // After an answer, a user message is a new turn.
            ChatMessage::new(Role::User, "and now?"),
            ChatMessage::new(Role::Assistant, "nothing else"),
        ]);
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        assert_eq!(c.runs.len(), 2);
        let first = &c.runs[0];
        assert_eq!(first.turn, 1);
        assert_eq!(first.user_message.as_deref(), Some("run the simulation"));
        assert_eq!(first.answer.as_deref(), Some("done"));
        assert_eq!(first.landings().count(), 2);
        assert!(first.landings().all(|l| l.text.as_deref() == Some("")));
        // The notices stay in the history, as system text: they open no turn.
        let notices: Vec<_> = c
            .history_for(0)
            .into_iter()
            .filter(|m| m.text.starts_with("[usage]") || m.text.starts_with("Your submission"))
            .collect();
        assert_eq!(notices.len(), 3);
        assert!(notices.iter().all(|m| m.role == Role::System));
        assert_eq!(c.runs[1].turn, 2);
        assert_eq!(c.runs[1].user_message.as_deref(), Some("and now?"));
    }

    #[test]
    fn a_restarted_history_closes_the_open_turn() {
        // A trajectory whose agent stopped after a tool result and started over with a new
        // system prompt and task: the task is a new turn.
        let (c, _) = build_simple(vec![
            ChatMessage::new(Role::User, "task one"),
            assistant_calls(vec![call("a", "submit")]),
            tool("a", "diff"),
            ChatMessage::new(Role::System, "you are a reviewer"),
            ChatMessage::new(Role::User, "task two"),
            ChatMessage::new(Role::Assistant, "ok"),
        ]);
        assert_eq!(c.runs.len(), 2);
        assert_eq!(c.runs[1].user_message.as_deref(), Some("task two"));
    }

    #[test]
    fn the_user_device_does_not_open_the_agent_turn() {
        // The simulated user acts on its device (no requestor flag on the result: it is known by
        // the call id), then speaks: that is a user turn, whatever came before it.
        let mut device = ChatMessage::new(Role::User, "");
        device.tool_calls = vec![call("d1", "check_status_bar")];
        let (c, _) = build_simple(vec![
            ChatMessage::new(Role::User, "my phone"),
            ChatMessage::new(Role::Assistant, "please check the status bar"),
            device,
            tool("d1", "no signal"),
            ChatMessage::new(Role::User, "it says no signal"),
            ChatMessage::new(Role::Assistant, "let me look"),
        ]);
        assert_eq!(c.runs.len(), 2);
        assert_eq!(c.runs[1].user_message.as_deref(), Some("it says no signal"));
    }

    /// One message asking for `n` calls, answered by `n` tool messages: by id in reverse order,
    /// without ids in order, and after `n` calls made on the simulated user's device.
    #[test]
    fn pairing_results_is_linear_in_the_calls() {
        use crate::ingest::linear_cost::assert_linear;
        let answer = |n: usize, with_ids: bool, reverse: bool, device: bool| {
            let id = |k: usize| with_ids.then(|| format!("c{k}"));
            let mut msgs = vec![ChatMessage::new(Role::User, "go")];
            if device {
                let mut own = ChatMessage::new(Role::User, "");
                own.tool_calls = (0..n).map(|k| call(&format!("d{k}"), "toggle")).collect();
                msgs.push(own);
            }
            let calls = (0..n)
                .map(|k| ChatToolCall {
                    id: id(k),
                    name: "t".into(),
                    arguments: "{}".into(),
                })
                .collect();
            msgs.push(assistant_calls(calls));
            let order: Vec<usize> = if reverse {
                (0..n).rev().collect()
            } else {
                (0..n).collect()
            };
            msgs.extend(
                order
                    .into_iter()
                    .map(|k| ChatMessage::tool(id(k), None, format!("r{k}"), false)),
            );
            let (conv, _) = build_simple(msgs);
            let landings = conv.runs[0]
                .events
                .iter()
                .filter(|e| e.kind == Some(EventKind::Landing))
                .filter(|e| e.flags & LandingFlags::UNANSWERED == 0)
                .count();
            assert_eq!(landings, n);
        };
        assert_linear("results by id, newest call first", 2_000, |n| {
            answer(n, true, true, false)
        });
        assert_linear("results without ids", 2_000, |n| {
            answer(n, false, false, false)
        });
        assert_linear("results beside device calls", 2_000, |n| {
            answer(n, true, false, true)
        });
    }

    #[test]
    fn iso_timestamps() {
        assert_eq!(parse_iso_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_iso_ms("1970-01-02T00:00:01.5"), Some(86_401_500));
        assert_eq!(
            parse_iso_ms("2025-10-05T07:52:53.055084"),
            Some(1_759_650_773_055)
        );
        assert_eq!(
            parse_iso_ms("2025-10-05T09:52:53+02:00"),
            Some(1_759_650_773_000)
        );
        assert_eq!(parse_iso_ms("nonsense"), None);
    }
}
