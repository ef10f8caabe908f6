//! A complete trace into runs: spans classified, grouped by their agent (or call id, or user
//! turn), and each group built into a run; the runs merged into conversations.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::messages::{input_messages, output_messages, tool_call_id};
use super::run::{build_run, RunSpans};
use super::span::{Span, FORMAT};
use crate::ingest::openinference as oi;
use crate::ingest::{Quarantined, Severity, Sink};
use crate::model::{Conversation, Run};

pub(super) fn note(span: &Span, severity: Severity, reason: String) -> Quarantined {
    let mut q = Quarantined::dropped(&span.file, span.locator.clone(), reason);
    q.severity = severity;
    q.format = Some(FORMAT);
    q
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Agent,
    Chat,
    Tool,
    Other,
}

fn classify(s: &Span) -> Class {
    let op = s.op().unwrap_or("");
    if op == "invoke_agent"
        || s.name.starts_with("invoke_agent")
        || s.name == "agent run"
        || oi::is_agent(s)
    {
        return Class::Agent;
    }
    if op == "execute_tool"
        || s.name.starts_with("execute_tool")
        || s.name == "running tool"
        || s.name == "running output function"
        || oi::is_tool(s)
    {
        return Class::Tool;
    }
    if matches!(
        op,
        "chat" | "text_completion" | "generate_content" | "completion" | "chat.completions"
    ) || oi::is_llm(s)
        || matches!(s.str_attr("llm.request.type"), Some("chat" | "completion"))
        || s.attrs.contains_key("gen_ai.input.messages")
        || s.attrs.contains_key("gen_ai.output.messages")
        || s.attrs.keys().any(|k| is_indexed_message_key(k))
    {
        return Class::Chat;
    }
    Class::Other
}

/// `gen_ai.prompt.{i}.*` / `gen_ai.completion.{i}.*`, the indexed message attributes of
/// OpenLLMetry and older GenAI writers (whatever members a writer sets: `role`, `content`,
/// `tool_calls.*`, or Bedrock's `user`).
fn is_indexed_message_key(k: &str) -> bool {
    ["gen_ai.prompt.", "gen_ai.completion."].iter().any(|p| {
        k.strip_prefix(p)
            .and_then(|rest| rest.split_once('.'))
            .is_some_and(|(i, _)| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Does the agent span record anything of its own run (messages, an answer, a request)?
fn has_own_content(s: &Span) -> bool {
    input_messages(s).is_some_and(|m| !m.is_empty())
        || output_messages(s).is_some_and(|m| !m.is_empty())
        || s.attrs.contains_key("pydantic_ai.all_messages")
        || s.attrs.contains_key("final_result")
        || oi::run_input(s).is_some_and(|t| !t.is_empty())
        || oi::run_output(s).is_some()
}

fn call_id_of(s: &Span) -> Option<&str> {
    s.str_attr("gen_ai.agent.call.id").filter(|c| !c.is_empty())
}

/// Conversations built during one call of the stitcher, merged by conversation id.
#[derive(Default)]
pub(super) struct Built {
    conversations: Vec<(Conversation, u64)>,
}

impl Built {
    fn add(&mut self, run: Run, record: u64) {
        match self
            .conversations
            .iter_mut()
            .find(|(c, _)| c.id == run.conversation_id)
        {
            Some((c, r)) => {
                *r = (*r).min(record);
                c.runs.push(run);
            }
            None => self.conversations.push((
                Conversation {
                    id: run.conversation_id.clone(),
                    runs: vec![run],
                },
                record,
            )),
        }
    }

    /// Hand everything to the sink, runs in the order the store reads them back.
    pub(super) fn flush(self, sink: &mut dyn Sink) {
        for (mut conversation, record) in self.conversations {
            conversation.runs.sort_by(|a, b| {
                (a.turn, a.started_ms, &a.run_id).cmp(&(b.turn, b.started_ms, &b.run_id))
            });
            sink.conversation(conversation, record);
        }
    }
}

/// Build the runs of one trace.
pub(super) fn assemble(
    trace_id: &str,
    mut spans: Vec<Span>,
    sink: &mut dyn Sink,
    built: &mut Built,
) {
    spans.sort_by(|a, b| {
        (
            a.start_ns.unwrap_or(i64::MAX),
            a.end_ns.unwrap_or(i64::MAX),
            &a.span_id,
        )
            .cmp(&(
                b.start_ns.unwrap_or(i64::MAX),
                b.end_ns.unwrap_or(i64::MAX),
                &b.span_id,
            ))
    });
    let (class, promoted) = classes(&spans);
    let parent = parents(trace_id, &spans, sink);
    let groups = group_spans(&spans, &class, &parent);
    let wraps_an_agent = wrappers(&class, &parent);
    let runs = runs_of(
        trace_id,
        &spans,
        &class,
        &groups,
        &promoted,
        &wraps_an_agent,
    );
    if runs.is_empty() {
        for s in &spans {
            sink.quarantine(note(
                s,
                Severity::Dropped,
                format!(
                    "span {} ({:?}) belongs to trace {trace_id}, which holds no agent, model-call \
                     or tool span (no GenAI or OpenInference attributes): nothing to audit",
                    s.span_id, s.name
                ),
            ));
        }
        return;
    }
    for (run, record) in runs {
        built.add(run, record);
    }
}

/// Each span's class, and the spans promoted to agents: in OpenInference traces without an
/// agent span, a root CHAIN span is the run.
fn classes(spans: &[Span]) -> (Vec<Class>, HashSet<usize>) {
    let ids: HashSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    let mut class: Vec<Class> = spans.iter().map(classify).collect();
    let promoted: Vec<usize> = if class.contains(&Class::Agent) {
        Vec::new()
    } else {
        (0..spans.len())
            .filter(|&i| oi::is_chain(&spans[i]) && spans[i].is_root(&ids))
            .collect()
    };
    for &i in &promoted {
        class[i] = Class::Agent;
    }
    (class, promoted.into_iter().collect())
}

/// Each span's parent within the trace (none for a root, or a parent in another process), with
/// every cycle of parent links cut and noted.
fn parents(trace_id: &str, spans: &[Span], sink: &mut dyn Sink) -> Vec<Option<usize>> {
    let index: HashMap<&str, usize> = spans
        .iter()
        .enumerate()
        .map(|(i, s)| (s.span_id.as_str(), i))
        .collect();
    let mut parent: Vec<Option<usize>> = spans
        .iter()
        .map(|s| match (s.remote_parent, s.parent_id.as_deref()) {
            (false, Some(p)) => index.get(p).copied(),
            _ => None,
        })
        .collect();
    for span in cut_cycles(&mut parent) {
        let s = &spans[span];
        sink.quarantine(note(
            s,
            Severity::Partial,
            format!(
                "span {} names a parent that descends from it (a cycle of parent links): it \
                 is read as a root of trace {trace_id}",
                s.span_id
            ),
        ));
    }
    parent
}

/// Which spans are an ancestor of some agent span. Marking stops at a span already marked,
/// whose ancestors are then marked too.
fn wrappers(class: &[Class], parent: &[Option<usize>]) -> Vec<bool> {
    let mut wraps_an_agent = vec![false; class.len()];
    for b in (0..class.len()).filter(|&i| class[i] == Class::Agent) {
        let mut cur = parent[b];
        while let Some(c) = cur {
            if wraps_an_agent[c] {
                break;
            }
            wraps_an_agent[c] = true;
            cur = parent[c];
        }
    }
    wraps_an_agent
}

/// What a group of a trace's spans makes: the run of an agent span, the run of a call id no
/// agent span names, or the turns of spans with neither.
#[derive(PartialEq, Eq, Hash, Clone)]
enum Key {
    Agent(usize),
    Call(String),
    Turns,
}

/// The trace's spans grouped by the run they belong to, in order of first member.
fn group_spans(
    spans: &[Span],
    class: &[Class],
    parent: &[Option<usize>],
) -> Vec<(Key, Vec<usize>)> {
    let n = spans.len();
    // Every walk up the span tree below is memoised, so a trace costs time linear in its spans
    // however deep its chain of parents.
    let owner = nearest_up(parent, |c| (class[c] == Class::Agent).then_some(c));
    // Model-call and tool spans with no agent around them may sit beside one: a writer that
    // starts the agent span without making it current (the Microsoft Agent Framework's
    // streaming path) leaves them siblings of the agent span, under the caller's span. Such a
    // span belongs to the sibling agent whose time it overlaps most (nearest, if none); a
    // descendant of such a span belongs to the agent beside its nearest ancestor that has one.
    let agents: Vec<usize> = (0..n).filter(|&i| class[i] == Class::Agent).collect();
    let mut agents_under: HashMap<Option<&str>, Vec<usize>> = HashMap::new();
    for &a in &agents {
        agents_under
            .entry(spans[a].parent_id.as_deref())
            .or_default()
            .push(a);
    }
    // Only asked of spans with no agent above them, so the sibling agents found are never the
    // span itself nor one of its ancestors.
    let level = nearest_up(parent, |c| {
        agents_under
            .contains_key(&spans[c].parent_id.as_deref())
            .then_some(c)
    });
    let beside = |i: usize| -> Option<usize> {
        let interval = |k: usize| {
            let s = &spans[k];
            let start = s.start_ns.unwrap_or(i64::MIN);
            (start, s.end_ns.unwrap_or(start))
        };
        let (start, end) = interval(i);
        let c = level[i]?;
        let siblings = &agents_under[&spans[c].parent_id.as_deref()];
        siblings.iter().copied().max_by_key(|&a| {
            let (a_start, a_end) = interval(a);
            let overlap = end.min(a_end).saturating_sub(start.max(a_start)).max(0);
            let gap = start
                .saturating_sub(a_end)
                .max(a_start.saturating_sub(end))
                .max(0);
            (overlap, std::cmp::Reverse(gap), std::cmp::Reverse(a_start))
        })
    };
    let agent_by_call: HashMap<&str, usize> = agents
        .iter()
        .filter_map(|&i| call_id_of(&spans[i]).map(|c| (c, i)))
        .collect();
    let mut groups: Vec<(Key, Vec<usize>)> = Vec::new();
    let mut group_of: HashMap<Key, usize> = HashMap::new();
    for i in 0..n {
        let key = match (class[i], owner[i]) {
            (_, Some(a)) => Key::Agent(a),
            (Class::Other, None) => continue,
            (_, None) => match call_id_of(&spans[i]) {
                Some(c) => match agent_by_call.get(c) {
                    Some(&a) => Key::Agent(a),
                    None => Key::Call(c.to_string()),
                },
                None => match beside(i) {
                    Some(a) => Key::Agent(a),
                    None => Key::Turns,
                },
            },
        };
        match group_of.get(&key) {
            Some(&g) => groups[g].1.push(i),
            None => {
                group_of.insert(key.clone(), groups.len());
                groups.push((key, vec![i]));
            }
        }
    }
    groups
}

/// The runs the groups make, each with its earliest record. An agent span with nothing of its
/// own (a promoted chain without calls, or one that only wraps other agents) makes none.
fn runs_of(
    trace_id: &str,
    spans: &[Span],
    class: &[Class],
    groups: &[(Key, Vec<usize>)],
    promoted: &HashSet<usize>,
    wraps_an_agent: &[bool],
) -> Vec<(Run, u64)> {
    let mut runs: Vec<(Run, u64)> = Vec::new();
    for (key, members) in groups {
        let pick = |c: Class| -> Vec<&Span> {
            members
                .iter()
                .filter(|&&i| class[i] == c && !matches!(key, Key::Agent(a) if *a == i))
                .map(|&i| &spans[i])
                .collect()
        };
        let record = members.iter().map(|&i| spans[i].record).min().unwrap_or(0);
        let all: Vec<&Span> = members.iter().map(|&i| &spans[i]).collect();
        match key {
            Key::Agent(a) => {
                let root = &spans[*a];
                let chats = pick(Class::Chat);
                let tools = pick(Class::Tool);
                if promoted.contains(a) && chats.is_empty() && tools.is_empty() {
                    continue;
                }
                // An agent span that only wraps other agents (a workflow span of the OpenAI
                // Agents SDK's bridges): no model call, tool or message of its own, no run.
                if chats.is_empty()
                    && tools.is_empty()
                    && !has_own_content(root)
                    && wraps_an_agent[*a]
                {
                    continue;
                }
                let run_id = call_id_of(root)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{trace_id}:{}", root.span_id));
                let rs = RunSpans {
                    run_id,
                    root: Some(root),
                    chats,
                    tools,
                    all,
                };
                runs.push((build_run(trace_id, &rs), record));
            }
            Key::Call(call) => {
                let rs = RunSpans {
                    run_id: call.clone(),
                    root: None,
                    chats: pick(Class::Chat),
                    tools: pick(Class::Tool),
                    all,
                };
                runs.push((build_run(trace_id, &rs), record));
            }
            Key::Turns => {
                for rs in split_by_turn(trace_id, pick(Class::Chat), pick(Class::Tool)) {
                    let record = rs.all.iter().map(|s| s.record).min().unwrap_or(record);
                    runs.push((build_run(trace_id, &rs), record));
                }
            }
        }
    }
    runs
}

/// Cuts every cycle of `parent` links (a span whose parent chain comes back to it): the span a
/// walk comes back to becomes a root, walks starting from the earliest span. Returns those
/// spans; linear in the spans.
fn cut_cycles(parent: &mut [Option<usize>]) -> Vec<usize> {
    const UNSEEN: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![UNSEEN; parent.len()];
    let mut cut = Vec::new();
    let mut path = Vec::new();
    for start in 0..parent.len() {
        let mut cur = Some(start);
        while let Some(c) = cur {
            match state[c] {
                UNSEEN => {
                    state[c] = ON_PATH;
                    path.push(c);
                    cur = parent[c];
                }
                ON_PATH => {
                    parent[c] = None;
                    cut.push(c);
                    break;
                }
                _ => break,
            }
        }
        for c in path.drain(..) {
            state[c] = DONE;
        }
    }
    cut
}

/// For each span, `own` of the nearest span among itself and its ancestors for which `own` is
/// some value, in time linear in the spans: each span's answer is kept and shared by every
/// walk that reaches it. `parent` must hold no cycle.
fn nearest_up<T: Copy>(
    parent: &[Option<usize>],
    own: impl Fn(usize) -> Option<T>,
) -> Vec<Option<T>> {
    let mut known: Vec<Option<Option<T>>> = vec![None; parent.len()];
    let mut path = Vec::new();
    for start in 0..parent.len() {
        let mut cur = Some(start);
        let found = loop {
            let Some(c) = cur else { break None };
            if let Some(answer) = known[c] {
                break answer;
            }
            path.push(c);
            if let Some(value) = own(c) {
                break Some(value);
            }
            cur = parent[c];
        };
        for c in path.drain(..) {
            known[c] = Some(found);
        }
    }
    known.into_iter().map(Option::flatten).collect()
}

/// Model-call and tool spans with no agent around them: one run per user turn, the turn of a
/// model call being the number of user messages in its input.
fn split_by_turn<'a>(
    trace_id: &str,
    chats: Vec<&'a Span>,
    tools: Vec<&'a Span>,
) -> Vec<RunSpans<'a>> {
    let mut by_turn: BTreeMap<usize, Vec<&'a Span>> = BTreeMap::new();
    for chat in &chats {
        let turn = input_messages(chat)
            .map(|m| m.iter().filter(|m| m.is_user_turn()).count())
            .unwrap_or(0);
        by_turn.entry(turn).or_default().push(chat);
    }
    if by_turn.is_empty() {
        by_turn.insert(0, Vec::new());
    }
    let mut tools_by_turn: BTreeMap<usize, Vec<&'a Span>> = BTreeMap::new();
    for tool in tools {
        let call = tool_call_id(tool);
        let by_call = call.and_then(|id| {
            by_turn.iter().find_map(|(turn, chats)| {
                chats
                    .iter()
                    .any(|c| {
                        output_messages(c).is_some_and(|out| {
                            out.iter()
                                .any(|m| m.calls.iter().any(|k| k.id.as_deref() == Some(id)))
                        })
                    })
                    .then_some(*turn)
            })
        });
        let by_time = || {
            by_turn
                .iter()
                .filter(|(_, chats)| {
                    chats
                        .iter()
                        .any(|c| c.end_ns.unwrap_or(i64::MIN) <= tool.start_ns.unwrap_or(i64::MAX))
                })
                .map(|(t, _)| *t)
                .next_back()
        };
        let turn = by_call
            .or_else(by_time)
            .unwrap_or_else(|| *by_turn.keys().next().expect("one turn at least"));
        tools_by_turn.entry(turn).or_default().push(tool);
    }
    by_turn
        .into_iter()
        .map(|(turn, chats)| {
            let tools = tools_by_turn.remove(&turn).unwrap_or_default();
            let mut all: Vec<&Span> = chats.iter().chain(tools.iter()).copied().collect();
            all.sort_by_key(|s| (s.start_ns.unwrap_or(i64::MAX), s.record));
            RunSpans {
                run_id: format!("{trace_id}#{turn}"),
                root: None,
                chats,
                tools,
                all,
            }
        })
        .collect()
}
