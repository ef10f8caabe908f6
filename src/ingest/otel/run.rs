//! The spans of one run into a [`Run`]: its header, its messages, model calls and landings in
//! time order, and the answer, output and context rows.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::{Map, Value};

use super::messages::{
    conversation_of, input_messages, instructions, messages_of, model_of, output_declaration,
    output_messages, text_of, tool_arguments, tool_call_id, tool_name, tool_result, Msg,
};
use super::output;
use super::span::{Span, FORMAT, FORMAT_OPENINFERENCE};
use crate::ingest::openinference as oi;
use crate::js;
use crate::model::{Event, EventKind, LandingFlags, Role, Run};

/// The spans of one run.
pub(super) struct RunSpans<'a> {
    pub(super) run_id: String,
    pub(super) root: Option<&'a Span>,
    pub(super) chats: Vec<&'a Span>,
    pub(super) tools: Vec<&'a Span>,
    /// Every span of the run, root included.
    pub(super) all: Vec<&'a Span>,
}

/// Collects a run's events with a time key each; sorted (stably) at the end.
struct Builder<'a> {
    events: Vec<(i64, Event)>,
    /// The tool span merged into each event, if any.
    spans: Vec<Option<&'a Span>>,
    /// Landings waiting for their result: indexes into `events`, with those of each call id.
    open: BTreeSet<usize>,
    open_by_id: HashMap<String, BTreeSet<usize>>,
    /// Landings no tool span is merged into yet, indexed for the lookups a tool span makes: a run
    /// may hold 100,000 of each, so no lookup scans the run.
    unmerged: Unmerged,
}

/// The landings no tool span has been merged into, by call id, and by whether they carry a
/// call id and tool name (and then arguments too); each set in event order.
#[derive(Default)]
struct Unmerged {
    by_id: HashMap<String, BTreeSet<usize>>,
    by_name: HashMap<NameKey, BTreeSet<usize>>,
    by_arguments: HashMap<ArgumentsKey, BTreeSet<usize>>,
}

/// Whether the landing has a call id, and its tool name.
type NameKey = (bool, String);
/// Whether the landing has a call id, its tool name and its arguments as [`canonical`] text.
type ArgumentsKey = (bool, String, String);

impl Unmerged {
    fn keys(e: &Event) -> (Option<String>, Option<NameKey>, Option<ArgumentsKey>) {
        let has_id = e.call_id.is_some();
        let name = e.tool_name.clone().map(|n| (has_id, n));
        let arguments = match (&name, &e.arguments) {
            (Some((_, n)), Some(a)) => Some((has_id, n.clone(), canonical(&same_json(a)))),
            _ => None,
        };
        (e.call_id.clone(), name, arguments)
    }

    fn insert(&mut self, i: usize, e: &Event) {
        let (id, name, arguments) = Self::keys(e);
        if let Some(id) = id {
            self.by_id.entry(id).or_default().insert(i);
        }
        if let Some(name) = name {
            self.by_name.entry(name).or_default().insert(i);
        }
        if let Some(arguments) = arguments {
            self.by_arguments.entry(arguments).or_default().insert(i);
        }
    }

    fn remove(&mut self, i: usize, e: &Event) {
        let (id, name, arguments) = Self::keys(e);
        if let Some(set) = id.and_then(|k| self.by_id.get_mut(&k)) {
            set.remove(&i);
        }
        if let Some(set) = name.and_then(|k| self.by_name.get_mut(&k)) {
            set.remove(&i);
        }
        if let Some(set) = arguments.and_then(|k| self.by_arguments.get_mut(&k)) {
            set.remove(&i);
        }
    }
}

/// A JSON value as text with every object's keys sorted, so that two values equal as JSON
/// (key order aside) give the same text.
fn canonical(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v).to_string()
}

fn ms(key: i64) -> Option<i64> {
    (key > 0).then(|| key.div_euclid(1_000_000))
}

fn message_event(m: &Msg, kind: EventKind) -> Event {
    let mut e = Event::new(kind);
    e.role = Some(m.role);
    e.text = m.text.clone();
    e.tool_name = m.tool_name.clone();
    e.call_id = m.call_id.clone();
    e.error = m.error;
    if m.omitted {
        e.flags |= LandingFlags::CONTENT_OMITTED;
    }
    if !m.calls.is_empty() {
        let list: Vec<Value> = m
            .calls
            .iter()
            .map(|c| {
                let args = match &c.arguments {
                    Some(a) => js::parse_json(a).unwrap_or_else(|_| Value::String(a.clone())),
                    None => Value::Null,
                };
                serde_json::json!({"id": c.id, "name": c.name, "arguments": args})
            })
            .collect();
        e.arguments = Some(js::stringify(&Value::Array(list)));
    }
    e
}

impl<'a> Builder<'a> {
    fn push(&mut self, key: i64, event: Event) -> usize {
        let i = self.events.len();
        if event.kind() == EventKind::Landing {
            self.unmerged.insert(i, &event);
        }
        self.events.push((key, event));
        self.spans.push(None);
        i
    }

    /// A landing waits for its result.
    fn open_landing(&mut self, i: usize) {
        self.open.insert(i);
        if let Some(id) = &self.events[i].1.call_id {
            self.open_by_id.entry(id.clone()).or_default().insert(i);
        }
    }

    /// A landing has its result (or its span).
    fn close_landing(&mut self, i: usize) {
        self.open.remove(&i);
        if let Some(set) = self.events[i]
            .1
            .call_id
            .as_ref()
            .and_then(|id| self.open_by_id.get_mut(id))
        {
            set.remove(&i);
        }
    }

    /// A message of the run; assistant tool calls open landings, tool results close them.
    fn message(&mut self, m: &Msg, key: i64, iteration: Option<u32>) {
        let mut e = message_event(m, EventKind::Message);
        e.iteration = iteration;
        e.timestamp_ms = ms(key);
        match m.role {
            Role::Assistant => {
                self.push(key, e);
                for call in &m.calls {
                    let mut l = Event::new(EventKind::Landing);
                    l.source_type = Some("tool_call".into());
                    l.role = Some(Role::Assistant);
                    l.tool_name = Some(call.name.clone());
                    l.call_id = call.id.clone();
                    l.arguments = call.arguments.clone();
                    l.flags = LandingFlags::UNANSWERED;
                    l.iteration = iteration;
                    l.timestamp_ms = ms(key);
                    let i = self.push(key, l);
                    self.open_landing(i);
                }
            }
            Role::Tool => {
                let slot = match &m.call_id {
                    Some(id) => self.open_by_id.get(id).and_then(|set| set.first().copied()),
                    None => self.open.first().copied(),
                };
                if let Some(i) = slot {
                    self.close_landing(i);
                    let l = &mut self.events[i].1;
                    l.flags &= !LandingFlags::UNANSWERED;
                    match &m.text {
                        Some(t) => l.text = Some(t.clone()),
                        None => l.flags |= LandingFlags::CONTENT_OMITTED,
                    }
                    l.error |= m.error;
                    if e.tool_name.is_none() {
                        e.tool_name = l.tool_name.clone();
                    }
                }
                self.push(key, e);
            }
            Role::System | Role::User => {
                self.push(key, e);
            }
        }
    }

    /// The landing a tool span without a matching call id ran: the first one of the same tool
    /// not yet merged with a span, preferring one with the same arguments. Only landings with
    /// no call id are candidates for a span that has one, so two distinct calls never merge.
    fn landing_by_name(&self, t: &Span, id: Option<&str>) -> Option<usize> {
        let name = tool_name(t)?;
        let with_id: &[bool] = if id.is_some() {
            &[false]
        } else {
            &[false, true]
        };
        let u = &self.unmerged;
        let same_arguments = tool_arguments(t).and_then(|a| {
            let a = canonical(&same_json(&a));
            with_id
                .iter()
                .filter_map(|&k| u.by_arguments.get(&(k, name.clone(), a.clone()))?.first())
                .min()
                .copied()
        });
        same_arguments.or_else(|| {
            with_id
                .iter()
                .filter_map(|&k| u.by_name.get(&(k, name.clone()))?.first())
                .min()
                .copied()
        })
    }

    /// Merge a tool span into the landing that requested it, or add it as a landing of its own.
    /// Landings are paired by call id; a span written without one (the OpenAI Agents SDK's
    /// bridges) is paired by tool name and arguments.
    fn tool_span(&mut self, t: &'a Span, iteration: Option<u32>) {
        let id = tool_call_id(t);
        let found = id
            .and_then(|id| self.unmerged.by_id.get(id)?.first().copied())
            .or_else(|| self.landing_by_name(t, id));
        let i = match found {
            Some(i) => i,
            None => {
                let mut l = Event::new(EventKind::Landing);
                l.role = Some(Role::Assistant);
                l.call_id = id.map(str::to_string);
                l.flags = LandingFlags::UNANSWERED;
                l.iteration = iteration;
                self.push(t.start_ns.unwrap_or(0), l)
            }
        };
        self.spans[i] = Some(t);
        self.unmerged.remove(i, &self.events[i].1);
        self.close_landing(i);
        let l = &mut self.events[i].1;
        if l.call_id.is_none() {
            l.call_id = id.map(str::to_string);
        }
        if let Some(name) = tool_name(t) {
            l.tool_name = Some(name);
        }
        if let Some(args) = tool_arguments(t) {
            l.arguments = Some(args);
        }
        match tool_result(t) {
            Some(result) => {
                l.text = Some(result);
                l.flags &= !(LandingFlags::UNANSWERED | LandingFlags::CONTENT_OMITTED);
            }
            // The tool ran and returned, but its result was not written.
            None if t.status != 2 && l.has_flag(LandingFlags::UNANSWERED) => {
                l.flags &= !LandingFlags::UNANSWERED;
                l.flags |= LandingFlags::CONTENT_OMITTED;
            }
            None => {}
        }
        if t.status == 2 {
            l.error = true;
        }
        l.source_type = Some(t.name.clone());
        l.timestamp_ms = t.start_ms();
        l.duration_ms = t.duration_ms();
    }
}

/// Arguments compared as JSON values when they parse (key order and spacing differ between a
/// model's text and a span's re-serialised copy), else as text.
fn same_json(text: &str) -> Value {
    js::parse_json(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

fn span_payload(t: Option<&Span>, output_tool: bool) -> Option<String> {
    let mut p = Map::new();
    if let Some(t) = t {
        p.insert("span_id".into(), Value::String(t.span_id.clone()));
        p.insert("span".into(), Value::String(t.name.clone()));
        if t.status != 0 {
            p.insert(
                "status".into(),
                Value::String(if t.status == 2 { "error" } else { "ok" }.into()),
            );
        }
        if let Some(m) = &t.status_message {
            p.insert("status_message".into(), Value::String(m.clone()));
        }
        let retry: Map<String, Value> = t
            .attrs
            .iter()
            .filter_map(|(k, v)| {
                k.strip_prefix("pydantic_ai.tool.retry.")
                    .map(|k| (k.to_string(), v.clone()))
            })
            .collect();
        if !retry.is_empty() {
            p.insert("retry".into(), Value::Object(retry));
        }
        if let Some(e) = t.events.iter().find(|e| e.name == "exception") {
            let mut x = Map::new();
            for key in ["exception.type", "exception.message"] {
                if let Some(v) = e.attrs.get(key) {
                    x.insert(key["exception.".len()..].to_string(), v.clone());
                }
            }
            p.insert("exception".into(), Value::Object(x));
        }
    }
    if output_tool {
        p.insert("output_tool".into(), Value::Bool(true));
    }
    (!p.is_empty()).then(|| js::stringify(&Value::Object(p)))
}

/// Messages after the last assistant message: what a model call's input added when it does not
/// extend the previous call's history.
fn after_last_assistant(input: &[Msg]) -> &[Msg] {
    match input.iter().rposition(|m| m.role == Role::Assistant) {
        Some(i) => &input[i + 1..],
        None => input,
    }
}

/// Build one run from its spans: the header, the messages its model calls exchanged, its
/// landings and other rows in time order, then the rows that close it.
pub(super) fn build_run(trace_id: &str, rs: &RunSpans<'_>) -> Run {
    let (start_ns, end_ns) = bounds(rs);
    let mut run = header(trace_id, rs, start_ns, end_ns);
    let ex = Exchange::read(rs);
    ex.set_turn(&mut run, rs.root);
    let output_decl = output_declaration(&rs.chats);
    let output_tools = output_tool_names(output_decl.as_ref(), &rs.tools);

    let mut b = Builder {
        events: Vec::new(),
        spans: Vec::new(),
        open: BTreeSet::new(),
        open_by_id: HashMap::new(),
        unmerged: Unmerged::default(),
    };
    let begin = rs
        .chats
        .first()
        .and_then(|c| c.start_ns)
        .or(start_ns)
        .unwrap_or(0);
    b.opening(rs, output_decl.as_ref(), begin);
    let (seen, key) = b.model_calls(rs, &ex, begin);
    b.transcript_tail(rs, &ex, &seen, key, end_ns);
    b.tool_spans(rs);
    b.exceptions(rs, key);
    b.close_landings(&output_tools);
    let mut events = b.into_events();

    run.answer = answer(rs.root, &ex.outputs);
    let accepted = run.answer.is_some() && rs.root.is_none_or(|r| r.status != 2);
    output::add_rows(&mut events, output_decl.as_ref(), &output_tools, accepted);
    outcome_rows(&run, rs.root, &ex, end_ns, &mut events);
    events.extend(
        context(rs, &ex)
            .iter()
            .map(|m| message_event(m, EventKind::Context)),
    );
    run.events = events;
    run.renumber();
    run
}

/// The run's start and end: the agent span's, else the earliest start and latest end of its
/// spans.
fn bounds(rs: &RunSpans<'_>) -> (Option<i64>, Option<i64>) {
    match rs.root {
        Some(r) => (r.start_ns, r.end_ns),
        None => (
            rs.all.iter().filter_map(|s| s.start_ns).min(),
            rs.all.iter().filter_map(|s| s.end_ns).max(),
        ),
    }
}

/// The run's identity, conversation, format, source, agent, model and times.
fn header(trace_id: &str, rs: &RunSpans<'_>, start_ns: Option<i64>, end_ns: Option<i64>) -> Run {
    let root = rs.root;
    let first = rs.all.first().copied();
    let mut run = Run {
        run_id: rs.run_id.clone(),
        ..Run::default()
    };
    run.conversation_id = root
        .and_then(conversation_of)
        .or_else(|| rs.all.iter().find_map(|s| conversation_of(s)))
        .unwrap_or(trace_id)
        .to_string();
    run.format = if rs.all.iter().any(|s| oi::is_openinference(s)) {
        FORMAT_OPENINFERENCE
    } else {
        FORMAT
    }
    .to_string();
    run.source = root
        .or(first)
        .map(|s| s.file.to_string())
        .unwrap_or_default();
    run.agent = root
        .and_then(|r| r.str_attr("gen_ai.agent.name").or(r.str_attr("agent_name")))
        .or_else(|| rs.all.iter().find_map(|s| s.str_attr("gen_ai.agent.name")))
        .or_else(|| root.filter(|r| oi::is_agent(r)).map(|r| r.name.as_str()))
        .filter(|a| !a.is_empty())
        .map(str::to_string);
    run.model = rs
        .chats
        .iter()
        .rev()
        .find_map(|c| model_of(c))
        .or_else(|| root.and_then(model_of))
        .map(str::to_string);
    run.started_ms = start_ns.map(|n| n.div_euclid(1_000_000));
    run.ended_ms = end_ns.map(|n| n.div_euclid(1_000_000));
    run.duration_ms = match (start_ns, end_ns) {
        (Some(s), Some(e)) if e >= s => Some((e - s) as f64 / 1e6),
        _ => None,
    };
    run
}

/// What a run's model calls were given and returned, pydantic-ai's whole transcript on the agent
/// span, and where the run's own messages begin.
struct Exchange {
    /// One list per model call, in call order.
    inputs: Vec<Vec<Msg>>,
    outputs: Vec<Vec<Msg>>,
    transcript: Option<Vec<Msg>>,
    /// Index of the run's first own message in [`Exchange::opening`].
    start: usize,
}

impl Exchange {
    fn read(rs: &RunSpans<'_>) -> Exchange {
        let root = rs.root;
        let inputs: Vec<Vec<Msg>> = rs
            .chats
            .iter()
            .map(|c| input_messages(c).unwrap_or_default())
            .collect();
        let outputs: Vec<Vec<Msg>> = rs
            .chats
            .iter()
            .map(|c| output_messages(c).unwrap_or_default())
            .collect();
        let transcript: Option<Vec<Msg>> = root
            .and_then(|r| r.attr("pydantic_ai.all_messages"))
            .map(|v| messages_of(v, Role::User));
        let mut ex = Exchange {
            inputs,
            outputs,
            transcript,
            start: 0,
        };
        let opening = ex.opening();
        // Where the run's own messages begin: pydantic-ai says so when history was passed;
        // otherwise at the last user message of the first model call's input.
        let start = root
            .and_then(|r| r.int_attr("pydantic_ai.new_message_index"))
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| i < opening.len())
            .or_else(|| opening.iter().rposition(Msg::is_user_turn))
            .unwrap_or(0);
        ex.start = start;
        ex
    }

    /// The messages the run opened with: the first model call's input, else the transcript.
    fn opening(&self) -> &[Msg] {
        match (self.inputs.first(), &self.transcript) {
            (Some(first), _) => first,
            (None, Some(all)) => all,
            (None, None) => &[],
        }
    }

    /// The run's turn (the user messages up to its own) and its user message.
    fn set_turn(&self, run: &mut Run, root: Option<&Span>) {
        let opening = self.opening();
        let start = self.start;
        if opening.is_empty() {
            run.turn = u32::from(root.is_some());
        } else {
            run.turn = opening[..=start]
                .iter()
                .filter(|m| m.is_user_turn())
                .count() as u32;
            run.user_message = opening
                .get(start)
                .filter(|m| m.is_user_turn())
                .and_then(|m| m.text.clone());
        }
        if run.user_message.is_none() {
            run.user_message = root
                .and_then(oi::run_input)
                .filter(|t| !t.is_empty())
                .map(str::to_string);
        }
    }
}

/// The run's output tools: those declared, and those run as an output function.
fn output_tool_names(decl: Option<&Value>, tools: &[&Span]) -> HashSet<String> {
    let mut output_tools: HashSet<String> = decl
        .and_then(|d| d.get("output_tools"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    for t in tools {
        if t.name == "running output function" {
            if let Some(n) = tool_name(t) {
                output_tools.insert(n);
            }
        }
    }
    output_tools
}

/// One model-call span as a model-call row: model, token counts, finish reasons, status.
fn model_call_event(chat: &Span, step: u32) -> Event {
    let mut call = Event::new(EventKind::ModelCall);
    call.source_type = Some(chat.name.clone());
    call.role = Some(Role::Assistant);
    call.iteration = Some(step);
    call.timestamp_ms = chat.start_ms();
    call.duration_ms = chat.duration_ms();
    call.error = chat.status == 2;
    let mut p = Map::new();
    p.insert("span_id".into(), Value::String(chat.span_id.clone()));
    for k in [
        "gen_ai.request.model",
        "gen_ai.response.model",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.response.finish_reasons",
        "llm.model_name",
        "llm.token_count.prompt",
        "llm.token_count.completion",
    ] {
        if let Some(v) = chat.attr(k) {
            p.insert(k.into(), v.clone());
        }
    }
    if let Some(m) = &chat.status_message {
        p.insert("status_message".into(), Value::String(m.clone()));
    }
    call.payload = Some(js::stringify(&Value::Object(p)));
    call
}

impl<'a> Builder<'a> {
    /// The system instructions and pydantic-ai's output declaration, at the run's beginning.
    fn opening(&mut self, rs: &RunSpans<'_>, decl: Option<&Value>, begin: i64) {
        let system = rs
            .chats
            .first()
            .and_then(|c| instructions(c))
            .or_else(|| rs.root.and_then(instructions));
        if let Some(sys) = &system {
            self.message(sys, begin, None);
        }
        if let Some(decl) = decl {
            let mut e = Event::new(EventKind::Other);
            e.source_type = Some("pydantic_ai.output".into());
            e.payload = Some(js::stringify(decl));
            self.push(begin, e);
        }
    }

    /// Each model call: the messages its input added, the call, and its output. Returns what the
    /// last call saw (its input and output) and the time key reached.
    fn model_calls(&mut self, rs: &RunSpans<'_>, ex: &Exchange, begin: i64) -> (Vec<Msg>, i64) {
        let mut seen: Vec<Msg> = Vec::new();
        let mut key = begin;
        for (j, chat) in rs.chats.iter().enumerate() {
            let input = &ex.inputs[j];
            let new: &[Msg] = if j == 0 {
                &input[ex.start.min(input.len())..]
            } else if input.len() >= seen.len() && input[..seen.len()] == seen[..] {
                &input[seen.len()..]
            } else {
                after_last_assistant(input)
            };
            key = chat.start_ns.unwrap_or(key);
            let step = j as u32 + 1;
            for m in new {
                self.message(m, key, (j > 0).then_some(j as u32));
            }
            self.push(key, model_call_event(chat, step));
            key = chat.end_ns.unwrap_or(key);
            for m in &ex.outputs[j] {
                self.message(m, key, Some(step));
            }
            seen = input.iter().chain(ex.outputs[j].iter()).cloned().collect();
        }
        (seen, key)
    }

    /// What the run's transcript holds beyond the last model call (the output tool's own
    /// result); the whole transcript from the run's start when there was no model call.
    fn transcript_tail(
        &mut self,
        rs: &RunSpans<'_>,
        ex: &Exchange,
        seen: &[Msg],
        key: i64,
        end_ns: Option<i64>,
    ) {
        let Some(all) = &ex.transcript else {
            return;
        };
        if rs.chats.is_empty() {
            for m in &all[ex.start.min(all.len())..] {
                self.message(m, key, None);
            }
        } else if all.len() > seen.len() && all[..seen.len()] == seen[..] {
            let tail_key = end_ns.unwrap_or(key).max(key);
            for m in &all[seen.len()..] {
                self.message(m, tail_key, Some(rs.chats.len() as u32));
            }
        }
    }

    /// Every tool span, in the iteration of the model calls that ended before it started.
    fn tool_spans(&mut self, rs: &RunSpans<'a>) {
        let mut ends: Vec<i64> = rs.chats.iter().filter_map(|c| c.end_ns).collect();
        ends.sort_unstable();
        for &t in &rs.tools {
            let done_before = t.start_ns.map_or(0, |s| ends.partition_point(|&e| e <= s)) as u32;
            self.tool_span(t, (done_before > 0).then_some(done_before));
        }
    }

    /// One `exception` row per exception event of any span of the run.
    fn exceptions(&mut self, rs: &RunSpans<'_>, key: i64) {
        for s in &rs.all {
            for ev in s.events.iter().filter(|e| e.name == "exception") {
                let mut e = Event::new(EventKind::Other);
                e.source_type = Some("exception".into());
                e.error = true;
                let kind = ev.attrs.get("exception.type").and_then(Value::as_str);
                let message = ev.attrs.get("exception.message").and_then(Value::as_str);
                e.text = match (kind, message) {
                    (Some(k), Some(m)) => Some(format!("{k}: {m}")),
                    (Some(k), None) => Some(k.to_string()),
                    (None, Some(m)) => Some(m.to_string()),
                    (None, None) => None,
                };
                let at = ev.time_ns.or(s.end_ns).unwrap_or(key);
                e.timestamp_ms = ms(at);
                let mut p = Map::new();
                p.insert("span_id".into(), Value::String(s.span_id.clone()));
                p.insert("span".into(), Value::String(s.name.clone()));
                for (k, v) in &ev.attrs {
                    p.insert(k.clone(), v.clone());
                }
                e.payload = Some(js::stringify(&Value::Object(p)));
                self.push(at, e);
            }
        }
    }

    /// Every landing: a failed one marks its tool message as an error; each gets its flags and
    /// payload.
    fn close_landings(&mut self, output_tools: &HashSet<String>) {
        let failed: HashSet<String> = self
            .events
            .iter()
            .filter(|(_, e)| e.kind() == EventKind::Landing && e.error)
            .filter_map(|(_, e)| e.call_id.clone())
            .collect();
        for (_, e) in self.events.iter_mut() {
            if e.kind() == EventKind::Message
                && e.role == Some(Role::Tool)
                && e.call_id.as_ref().is_some_and(|id| failed.contains(id))
            {
                e.error = true;
            }
        }
        for i in 0..self.events.len() {
            if self.events[i].1.kind() != EventKind::Landing {
                continue;
            }
            let output_tool = self.events[i]
                .1
                .tool_name
                .as_ref()
                .is_some_and(|n| output_tools.contains(n));
            let payload = span_payload(self.spans[i], output_tool);
            let l = &mut self.events[i].1;
            if l.arguments.is_none() {
                l.flags |= LandingFlags::CONTENT_OMITTED;
            }
            l.payload = payload;
        }
    }

    /// The events in time order (stable: rows of one key keep the order they were added in).
    fn into_events(self) -> Vec<Event> {
        let Builder { mut events, .. } = self;
        events.sort_by_key(|(k, _)| *k);
        events.into_iter().map(|(_, e)| e).collect()
    }
}

/// The rows that close a run: `run_error` when the agent run itself failed, and the answer row
/// (without text when the run answered but its content was not recorded).
fn outcome_rows(
    run: &Run,
    root: Option<&Span>,
    ex: &Exchange,
    end_ns: Option<i64>,
    events: &mut Vec<Event>,
) {
    let end_key = end_ns.map(|n| n.div_euclid(1_000_000));
    // The agent run itself failed.
    if let Some(r) = root.filter(|r| r.status == 2) {
        let mut e = Event::new(EventKind::Other);
        e.source_type = Some("run_error".into());
        e.error = true;
        e.text = r.status_message.clone();
        e.timestamp_ms = end_key;
        events.push(e);
    }
    let failed = root.is_some_and(|r| r.status == 2);
    let omitted = ex
        .inputs
        .iter()
        .chain(ex.outputs.iter())
        .flatten()
        .any(|m| m.omitted || m.calls.iter().any(|c| c.arguments.is_none()));
    if run.answer.is_some() || (omitted && !failed) {
        // Without content, the run still answered: an answer row that says its text is missing.
        let mut e = Event::new(EventKind::Answer);
        e.role = Some(Role::Assistant);
        e.text = run.answer.clone();
        if run.answer.is_none() {
            e.flags = LandingFlags::CONTENT_OMITTED;
        }
        e.timestamp_ms = end_key;
        events.push(e);
    }
}

/// The history the answer was judged against: the last model call's instructions, input and
/// output, else the instructions and pydantic-ai's transcript.
fn context(rs: &RunSpans<'_>, ex: &Exchange) -> Vec<Msg> {
    let root = rs.root;
    match rs.chats.len().checked_sub(1) {
        Some(l) => {
            let sys = instructions(rs.chats[l]).or_else(|| root.and_then(instructions));
            sys.into_iter()
                .chain(ex.inputs[l].iter().cloned())
                .chain(ex.outputs[l].iter().cloned())
                .collect()
        }
        None => match &ex.transcript {
            Some(all) => root
                .and_then(instructions)
                .into_iter()
                .chain(all.iter().cloned())
                .collect(),
            None => Vec::new(),
        },
    }
}

/// The run's answer: pydantic-ai's `final_result`, OpenInference's agent `output.value`, the
/// agent span's own output messages, else the last assistant text without tool calls.
fn answer(root: Option<&Span>, outputs: &[Vec<Msg>]) -> Option<String> {
    let last_text = |msgs: &[Msg]| -> Option<String> {
        msgs.iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .filter(|m| m.calls.is_empty())
            .and_then(|m| m.text.clone())
            .filter(|t| !t.is_empty())
    };
    if let Some(r) = root {
        if let Some(v) = r.attr("final_result") {
            return Some(text_of(v));
        }
        if let Some(v) = oi::run_output(r) {
            return Some(text_of(v));
        }
        if let Some(out) = output_messages(r) {
            if let Some(t) = last_text(&out) {
                return Some(t);
            }
        }
    }
    outputs.last().and_then(|o| last_text(o))
}
