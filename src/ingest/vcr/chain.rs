//! The history a cassette's requests re-send, rebuilt once: interactions joined into chains,
//! chains split into runs at user prompts, and their events.

use crate::ingest::trajectory::{ChatMessage, ChatToolCall};
use crate::js;
use crate::model::vocab;
use crate::model::{Event, EventKind, LandingFlags, Role, Run};
use serde_json::{json, Value};

use super::call::*;

// ---------------------------------------------------------------------------------------------
// Chains and runs

/// Where a message of a chain came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Origin {
    /// Sent in the request of interaction `k` (an index into the chain's interactions).
    Request(usize),
    /// The response of interaction `k`.
    Response(usize),
    /// Sent in the chain's first request, but a message the conversation's earlier chains
    /// already hold (the history re-sent in another shape, or an identical request again): part
    /// of what the model saw, not new work.
    Replay,
    /// Sent in the request of interaction `k`, an assistant message the previous model call did
    /// not return: history the framework wrote itself (a tool search it presents as a call).
    /// Kept as a message, never landed.
    Written(usize),
}

impl Origin {
    /// The request (index into the chain's interactions) that sent the message, if a request
    /// did.
    fn request(self) -> Option<usize> {
        match self {
            Origin::Request(k) | Origin::Written(k) => Some(k),
            Origin::Replay => Some(0),
            Origin::Response(_) => None,
        }
    }
}

pub(super) struct Exchange {
    pub(super) record: usize,
    pub(super) request: Request,
    pub(super) response: Response,
}

pub(super) struct Chain {
    pub(super) exchanges: Vec<Exchange>,
    /// The history in order, each message with its origin.
    pub(super) items: Vec<(ChatMessage, Origin)>,
}

pub(super) fn same_message(a: &ChatMessage, b: &ChatMessage) -> bool {
    a.role == b.role && (a.role != Role::User || a.text.trim() == b.text.trim())
}

/// A call's identity across wire shapes: its name and its arguments as a value (ids differ
/// between providers, and key order between serialisers).
pub(super) fn call_key(c: &ChatToolCall) -> (String, Value) {
    let args = js::parse_json(&c.arguments).unwrap_or_else(|_| Value::String(c.arguments.clone()));
    (c.name.clone(), args)
}

/// What the conversation already holds, to recognise it when a request sends it again in
/// another shape: user texts, assistant texts, assistant calls, and the calls that got a result.
#[derive(Default)]
pub(super) struct Known {
    pub(super) user: Vec<String>,
    pub(super) assistant: Vec<String>,
    pub(super) calls: Vec<(String, Value)>,
    pub(super) answered: Vec<(String, Value)>,
    /// The arguments of output-tool calls: a library that forced the call sends its answer
    /// back as assistant text holding them.
    pub(super) outputs: Vec<Value>,
}

impl Known {
    fn of<'m>(messages: impl IntoIterator<Item = &'m ChatMessage>) -> Known {
        let mut known = Known::default();
        let mut by_id: Vec<(String, (String, Value))> = Vec::new();
        for m in messages {
            let text = m.text.trim();
            match m.role {
                Role::User if !text.is_empty() => known.user.push(text.to_string()),
                Role::Assistant => {
                    if !text.is_empty() {
                        known.assistant.push(text.to_string());
                    }
                    for c in &m.tool_calls {
                        let key = call_key(c);
                        if let Some(id) = &c.id {
                            by_id.push((id.clone(), key.clone()));
                        }
                        if is_output_tool(&c.name) {
                            known.outputs.push(key.1.clone());
                        }
                        known.calls.push(key);
                    }
                }
                Role::Tool => {
                    let id = m.call_id.as_deref();
                    if let Some((_, key)) = by_id.iter().find(|(i, _)| Some(i.as_str()) == id) {
                        known.answered.push(key.clone());
                    }
                }
                _ => {}
            }
        }
        known
    }

    /// Is a user or assistant message one the conversation already holds?
    fn holds(&self, m: &ChatMessage) -> bool {
        let text = m.text.trim();
        match m.role {
            Role::User => !text.is_empty() && self.user.iter().any(|t| t == text),
            Role::Assistant => {
                (!text.is_empty() && self.assistant.iter().any(|t| t == text))
                    || self.is_output_echo(text)
                    || m.tool_calls
                        .iter()
                        .any(|c| self.calls.contains(&call_key(c)))
            }
            _ => false,
        }
    }
}

impl Known {
    /// Is an assistant text an output-tool call's arguments sent back as text (the same JSON
    /// object, however it is spaced)?
    fn is_output_echo(&self, text: &str) -> bool {
        !self.outputs.is_empty()
            && text.starts_with('{')
            && js::parse_json(text).is_ok_and(|v| self.outputs.contains(&v))
    }
}

/// How many leading messages of a request that does not continue its chain re-send what the
/// conversation already holds: up to its last user or assistant message the conversation holds
/// (a request sends the history first and new messages after it, so everything before that
/// message is history, however the framework reshaped it), then the tool results that answer
/// calls of that part which had their result already. Also the index of that last message held;
/// `None` when the request re-sends nothing.
pub(super) fn replayed_len(known: &Known, messages: &[ChatMessage]) -> Option<(usize, usize)> {
    // A history re-sent starts where the conversation started: its user messages are ones the
    // conversation holds, up to the first new one.
    let first_new_user = messages
        .iter()
        .position(|m| m.role == Role::User && !known.holds(m))
        .unwrap_or(messages.len());
    let last = messages[..first_new_user]
        .iter()
        .rposition(|m| known.holds(m))?;
    let mut end = last + 1;
    let mut answered = known.answered.clone();
    while let Some(m) = messages.get(end).filter(|m| m.role == Role::Tool) {
        let call = messages[..end]
            .iter()
            .flat_map(|a| &a.tool_calls)
            .find(|c| c.id.is_some() && c.id == m.call_id)
            .map(call_key);
        match call.and_then(|k| answered.iter().position(|a| *a == k)) {
            Some(i) => {
                answered.remove(i);
                end += 1;
            }
            None => break,
        }
    }
    Some((end, last))
}

pub(super) fn continues(prev: &Exchange, next: &Request) -> bool {
    if let (Some(p), Some(id)) = (&next.previous_response_id, &prev.response.id) {
        return p == id;
    }
    let old = &prev.request.messages;
    let new = &next.messages;
    new.len() > old.len() && old.iter().zip(new).all(|(a, b)| same_message(a, b))
}

/// How a request that does not strictly continue its chain relates to the conversation so far.
pub(super) enum Resend {
    /// It shares nothing with it: a chain of its own.
    Fresh,
    /// It re-sends this many leading messages of the conversation, up to and including the
    /// previous model call's answer (or re-sends all of it after a failed call): the same chain,
    /// in another shape; only the messages after them are new.
    Continues(usize),
    /// It re-sends this many leading messages but not the previous answer (an identical request
    /// again, or a new run handed the history): a chain of its own whose leading messages are
    /// not new.
    Replays(usize),
}

/// An answer with neither text nor calls (a queued background response, a refusal with no
/// content): nothing a later request could re-send.
pub(super) fn is_empty(m: &ChatMessage) -> bool {
    m.text.trim().is_empty() && m.tool_calls.is_empty()
}

pub(super) fn resend(chains: &[Chain], prev: &Exchange, request: &Request) -> Resend {
    let answer = prev.response.message.as_ref().filter(|a| !is_empty(a));
    let known = Known::of(
        chains
            .iter()
            .flat_map(|c| c.items.iter().map(|(m, _)| m))
            .chain(answer),
    );
    let Some((n, last)) = replayed_len(&known, &request.messages) else {
        return Resend::Fresh;
    };
    // The history re-sent ends with the previous answer: what follows continues from it.
    let ends_with_answer = answer.is_some_and(|a| {
        let m = &request.messages[last];
        m.role == a.role && Known::of([a]).holds(m)
    });
    if ends_with_answer || (answer.is_none() && n == request.messages.len()) {
        Resend::Continues(n)
    } else {
        Resend::Replays(n)
    }
}

/// The origin of a message request `k` adds after the previous answer: an assistant message
/// there was not returned by the previous model call, so the framework wrote it.
pub(super) fn new_origin(m: &ChatMessage, k: usize) -> Origin {
    if m.role == Role::Assistant {
        Origin::Written(k)
    } else {
        Origin::Request(k)
    }
}

/// Group exchanges into chains and rebuild each chain's history once.
pub(super) fn chains(exchanges: Vec<Exchange>) -> Vec<Chain> {
    let mut out: Vec<Chain> = Vec::new();
    for ex in exchanges {
        let prev = out.last().and_then(|c| c.exchanges.last());
        let how = match prev {
            Some(prev) if continues(prev, &ex.request) => None,
            Some(prev) => Some(resend(&out, prev, &ex.request)),
            None => Some(Resend::Fresh),
        };
        let replayed = match how {
            Some(Resend::Continues(n)) => {
                // The same chain in another shape: the previous answer as the provider returned
                // it, then what is new.
                let chain = out.last_mut().expect("a chain");
                let k = chain.exchanges.len();
                if let Some(m) = chain.exchanges[k - 1].response.message.clone() {
                    chain.items.push((m, Origin::Response(k - 1)));
                }
                for m in &ex.request.messages[n..] {
                    chain.items.push((m.clone(), new_origin(m, k)));
                }
                chain.exchanges.push(ex);
                continue;
            }
            Some(Resend::Replays(n)) => n,
            _ => 0,
        };
        if how.is_some() {
            out.push(Chain {
                exchanges: Vec::new(),
                items: Vec::new(),
            });
        }
        let chain = out.last_mut().expect("a chain");
        let k = chain.exchanges.len();
        if k == 0 {
            for (i, m) in ex.request.messages.iter().enumerate() {
                let origin = if i < replayed {
                    Origin::Replay
                } else {
                    Origin::Request(0)
                };
                chain.items.push((m.clone(), origin));
            }
        } else {
            let prev = &chain.exchanges[k - 1];
            let prev_len = prev.request.messages.len();
            let (mut added, appended): (Vec<ChatMessage>, bool) =
                if ex.request.previous_response_id.is_some()
                    && ex.request.previous_response_id == prev.response.id
                {
                    (ex.request.messages.clone(), true)
                } else {
                    (ex.request.messages[prev_len..].to_vec(), false)
                };
            // The previous response, as the framework re-sent it (its ids are the ones the tool
            // results answer), else as the provider returned it.
            let resent: Vec<ChatMessage> = if appended {
                Vec::new()
            } else {
                let n = added
                    .iter()
                    .take_while(|m| m.role == Role::Assistant)
                    .count();
                added.drain(..n).collect()
            };
            if !resent.is_empty() {
                // A failed call (Groq's `tool_use_failed`) has no answer of its own; the framework
                // re-sent what the model generated, so that is the answer.
                let answer = chain.exchanges[k - 1].response.message.as_ref();
                let returned = answer.filter(|a| !is_empty(a)).map(|a| Known::of([a]));
                if answer.is_none() {
                    chain.exchanges[k - 1].response.message = resent.first().cloned();
                }
                for m in resent {
                    // An assistant message the model did not return (a tool search the framework
                    // presents as a call) is the framework's.
                    let origin = match &returned {
                        Some(r) if !r.holds(&m) && !m.tool_calls.is_empty() => Origin::Written(k),
                        _ => Origin::Response(k - 1),
                    };
                    chain.items.push((m, origin));
                }
            } else if appended {
                // Chained by id: nothing is re-sent, so the provider's answer is the history.
                if let Some(m) = chain.exchanges[k - 1].response.message.clone() {
                    chain.items.push((m, Origin::Response(k - 1)));
                }
            }
            // Otherwise the framework dropped the previous answer (an empty one): it is not part
            // of the history, though its model call is still written.
            for m in added {
                let origin = new_origin(&m, k);
                chain.items.push((m, origin));
            }
        }
        chain.exchanges.push(ex);
    }
    for chain in &mut out {
        let last = chain.exchanges.len() - 1;
        if let Some(m) = chain.exchanges[last].response.message.clone() {
            chain.items.push((m, Origin::Response(last)));
        }
    }
    out
}

/// The conversation id of a cassette: its folder and file stem.
pub(super) fn conversation_id(display: &str) -> String {
    let path = std::path::Path::new(display);
    let stem = path
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_default();
    let stem = stem
        .strip_suffix(".yaml")
        .or_else(|| stem.strip_suffix(".yml"))
        .unwrap_or(&stem)
        .to_string();
    match path
        .parent()
        .and_then(|p| p.file_name())
        .map(|f| f.to_string_lossy().to_string())
    {
        Some(dir) => format!("{dir}/{stem}"),
        None => stem,
    }
}

pub(super) fn calls_json(calls: &[ChatToolCall]) -> String {
    let list: Vec<Value> = calls
        .iter()
        .map(|c| {
            json!({"id": c.id, "name": c.name,
                   "arguments": js::parse_json(&c.arguments).unwrap_or_else(|_| json!(c.arguments))})
        })
        .collect();
    js::stringify(&Value::Array(list))
}

pub(super) fn message_event(kind: EventKind, m: &ChatMessage) -> Event {
    let mut e = Event::new(kind);
    e.role = Some(m.role);
    e.text = Some(m.text.clone());
    e.call_id = m.call_id.clone();
    e.tool_name = m.tool_name.clone();
    e.error = m.error;
    if !m.tool_calls.is_empty() {
        e.arguments = Some(calls_json(&m.tool_calls));
    }
    e
}

/// Which of a chain's items are the harness talking inside the agent's turn: a user message
/// (not a retry prompt) sent in a later request while the turn is still open, after the model
/// called a tool and before it answered (with text, or by calling an output tool). pydantic-ai
/// sends such messages after tool results (a file a tool returned, `This is file 241a70:`; an
/// announcement of tools that became available); no user has spoken there. The first request's
/// messages are the history the run was given and are taken as written.
pub(super) fn harness_items(chain: &Chain) -> Vec<bool> {
    let output: Vec<&String> = chain
        .exchanges
        .iter()
        .filter_map(|ex| ex.request.contract.as_ref())
        .flat_map(|c| c.tools.keys())
        .collect();
    let is_output = |name: &str| output.iter().any(|n| *n == name);
    let mut output_ids: Vec<&str> = Vec::new();
    let mut open = false;
    let mut out = Vec::with_capacity(chain.items.len());
    for (m, origin) in &chain.items {
        let mut harness = false;
        match m.role {
            Role::Assistant => {
                for c in m.tool_calls.iter().filter(|c| is_output(&c.name)) {
                    if let Some(id) = &c.id {
                        output_ids.push(id);
                    }
                }
                open = m.tool_calls.iter().any(|c| !is_output(&c.name));
            }
            Role::Tool => {
                let to_output = m.tool_name.as_deref().is_some_and(is_output)
                    || m.call_id
                        .as_deref()
                        .is_some_and(|id| output_ids.contains(&id));
                open |= !to_output;
            }
            Role::User if is_retry_prompt(m) => {}
            Role::User => {
                harness = open && matches!(origin, Origin::Request(k) if *k > 0);
                open &= harness;
            }
            Role::System => open = false,
        }
        out.push(harness);
    }
    out
}

/// A chain item as the run keeps it: a harness message is system text.
pub(super) fn as_kept(m: &ChatMessage, harness: bool) -> std::borrow::Cow<'_, ChatMessage> {
    if harness {
        std::borrow::Cow::Owned(ChatMessage {
            role: Role::System,
            ..m.clone()
        })
    } else {
        std::borrow::Cow::Borrowed(m)
    }
}

/// Build the runs of one chain. `first_turn` numbers the chain's first run.
pub(super) fn chain_runs(chain: &Chain, conv_id: &str, source: &str, first_turn: u32) -> Vec<Run> {
    // Run boundaries: the first request's messages open run 0; a user prompt (not a retry
    // prompt, not the harness talking inside the turn) sent in a later request opens the next.
    let harness = harness_items(chain);
    let mut starts = vec![0usize];
    for (i, (m, origin)) in chain.items.iter().enumerate() {
        if let Origin::Request(k) = origin {
            if *k > 0 && m.role == Role::User && !is_retry_prompt(m) && !harness[i] {
                starts.push(i);
            }
        }
    }
    let run_of_item = |i: usize| starts.iter().rposition(|&s| s <= i).unwrap_or(0);
    // Each model call belongs to the run where its request's new messages start (a request
    // that added nothing stays with the run before it).
    let mut owner = vec![0usize; chain.exchanges.len()];
    for k in 1..chain.exchanges.len() {
        // The run in force when the request was sent: where its newest message sits.
        owner[k] = chain
            .items
            .iter()
            .rposition(|(_, o)| matches!(o, Origin::Request(j) | Origin::Written(j) if *j == k))
            .map(run_of_item)
            .unwrap_or(owner[k - 1]);
    }
    let mut runs = Vec::new();
    for (r, &start) in starts.iter().enumerate() {
        let end = starts.get(r + 1).copied().unwrap_or(chain.items.len());
        let items = &chain.items[start..end];
        let ks: Vec<usize> = (0..chain.exchanges.len())
            .filter(|k| owner[*k] == r)
            .collect();
        let turn = first_turn + r as u32;
        let mut b = RunBuilder::new(chain, &ks);
        b.run.run_id = format!("{conv_id}#{turn}");
        b.run.conversation_id = conv_id.to_string();
        b.run.turn = turn;
        b.run.format = crate::ingest::Format::Vcr.name().to_string();
        b.run.source = source.to_string();
        b.run.user_message = items
            .iter()
            .zip(&harness[start..end])
            .rfind(|((m, _), h)| m.role == Role::User && !is_retry_prompt(m) && !**h)
            .map(|((m, _), _)| m.text.clone());
        b.run.model = ks
            .first()
            .and_then(|k| chain.exchanges[*k].request.model.clone());
        for ((m, origin), h) in items.iter().zip(&harness[start..end]) {
            match origin {
                // Already written where the conversation first held it.
                Origin::Replay => continue,
                Origin::Request(j) => b.calls_before(*j),
                Origin::Written(j) => {
                    b.calls_before(*j);
                    b.framework_message(m);
                    continue;
                }
                Origin::Response(k) => b.calls_before(*k + 1),
            }
            b.message(&as_kept(m, *h));
        }
        b.calls_before(usize::MAX);
        // The history the model saw at the run's last model call.
        if let Some(&last_k) = ks.last() {
            let seen = chain
                .items
                .iter()
                .zip(&harness)
                .take_while(|((_, o), _)| *o != Origin::Response(last_k))
                .filter(|((_, o), _)| match o.request() {
                    Some(k) => k <= last_k,
                    None => matches!(o, Origin::Response(k) if *k < last_k),
                });
            for ((m, _), h) in seen {
                b.run
                    .events
                    .push(message_event(EventKind::Context, &as_kept(m, *h)));
            }
        }
        let mut run = b.run;
        run.answer = b.answer;
        run.renumber();
        runs.push(run);
    }
    runs
}

/// Writes one run's rows in order.
pub(super) struct RunBuilder<'c> {
    pub(super) chain: &'c Chain,
    pub(super) run: Run,
    /// This run's model calls (indexes into the chain's exchanges) and how many were written.
    pub(super) ks: Vec<usize>,
    pub(super) written: usize,
    pub(super) contract: Option<ContractSpec>,
    pub(super) output_names: Vec<String>,
    /// Open landings: (event index, call id, tool name).
    pub(super) pending: Vec<(usize, Option<String>, String)>,
    /// Calls the framework wrote into the history, not yet answered: (call id, tool name).
    pub(super) framework_calls: Vec<(Option<String>, String)>,
    pub(super) attempts: u32,
    /// The latest judged answer not yet followed by anything: (output call id, attempt,
    /// iteration); the call id is `None` for a text answer.
    pub(super) open: Option<(Option<String>, u32, u32)>,
    pub(super) answer: Option<String>,
}

impl<'c> RunBuilder<'c> {
    fn new(chain: &'c Chain, ks: &[usize]) -> RunBuilder<'c> {
        let contract = ks
            .iter()
            .find_map(|k| chain.exchanges[*k].request.contract.clone());
        let mut run = Run::default();
        if let Some(c) = &contract {
            let mut e = Event::new(EventKind::Other);
            e.source_type = Some(vocab::OUTPUT_CONTRACT.into());
            e.text = Some(c.mode.clone());
            e.payload = Some(js::stringify(&json!({
                "mode": c.mode,
                "schema": c.schema,
                "tools": c.tools,
                "terminalVerdicts": false,
            })));
            run.events.push(e);
        }
        RunBuilder {
            chain,
            run,
            ks: ks.to_vec(),
            written: 0,
            output_names: contract
                .as_ref()
                .map(|c| c.tools.keys().cloned().collect())
                .unwrap_or_default(),
            contract,
            pending: Vec::new(),
            framework_calls: Vec::new(),
            attempts: 0,
            open: None,
            answer: None,
        }
    }

    /// Write the model-call rows of this run's exchanges numbered below `limit`.
    fn calls_before(&mut self, limit: usize) {
        while self.written < self.ks.len() && self.ks[self.written] < limit {
            let k = self.ks[self.written];
            self.written += 1;
            let iteration = self.written as u32;
            self.model_call(k, iteration);
        }
    }

    fn model_call(&mut self, k: usize, iteration: u32) {
        let ex = &self.chain.exchanges[k];
        let m = ex.response.message.clone();
        let mut call = Event::new(EventKind::ModelCall);
        call.source_type = Some("http.response".into());
        call.role = Some(Role::Assistant);
        call.iteration = Some(iteration);
        call.error = ex.response.status.is_some_and(|c| c >= 400);
        if let Some(m) = &m {
            call.text = Some(m.text.clone());
            if !m.tool_calls.is_empty() {
                call.arguments = Some(calls_json(&m.tool_calls));
            }
        }
        let mut payload = json!({
            "provider": ex.request.provider.name(),
            "uri": ex.request.uri,
            "status": ex.response.status,
            "stopReason": ex.response.stop,
            "interaction": ex.record,
        });
        self.open = None;
        if let (Some(_), Some(m)) = (&self.contract, &m) {
            let out_call = m
                .tool_calls
                .iter()
                .find(|c| self.output_names.contains(&c.name));
            if out_call.is_some() || m.tool_calls.is_empty() {
                self.attempts += 1;
                let text = out_call
                    .map(|c| c.arguments.clone())
                    .unwrap_or_else(|| m.text.clone());
                self.answer = Some(text.clone());
                payload["answer"] = json!({"text": text, "tool": out_call.map(|c| c.name.clone())});
                self.open = Some((
                    out_call.and_then(|c| c.id.clone()),
                    self.attempts,
                    iteration,
                ));
            }
        }
        if self.contract.is_none() {
            if let Some(m) = m.as_ref().filter(|m| m.tool_calls.is_empty()) {
                self.answer = Some(m.text.clone());
            }
        }
        call.payload = Some(js::stringify(&payload));
        self.run.events.push(call);
    }

    /// An assistant message the framework wrote into the history: a message, and its calls are
    /// not landings (their results are not paired with the model's calls either).
    fn framework_message(&mut self, m: &ChatMessage) {
        self.run.events.push(message_event(EventKind::Message, m));
        for c in &m.tool_calls {
            self.framework_calls.push((c.id.clone(), c.name.clone()));
        }
    }

    fn is_output(&self, name: &str) -> bool {
        self.output_names.iter().any(|n| n == name)
    }

    fn message(&mut self, m: &ChatMessage) {
        let mut e = message_event(EventKind::Message, m);
        match m.role {
            Role::Assistant => {
                self.run.events.push(e);
                for c in &m.tool_calls {
                    if self.is_output(&c.name) {
                        continue;
                    }
                    let mut l = Event::new(EventKind::Landing);
                    l.role = Some(Role::Assistant);
                    l.tool_name = Some(c.name.clone());
                    l.call_id = c.id.clone();
                    l.arguments = Some(c.arguments.clone());
                    l.flags = LandingFlags::UNANSWERED;
                    self.run.events.push(l);
                    self.pending
                        .push((self.run.events.len() - 1, c.id.clone(), c.name.clone()));
                }
            }
            Role::Tool => {
                let to_output = m.tool_name.as_deref().is_some_and(|n| self.is_output(n))
                    || self
                        .open
                        .as_ref()
                        .is_some_and(|(id, ..)| id.is_some() && *id == m.call_id);
                if to_output {
                    // A retry prompt answering the output call rejects that attempt.
                    if is_retry_prompt(m) {
                        if let Some((Some(_), attempt, iteration)) = self.open.take() {
                            self.run.events.push(retry_verdict(m, attempt, iteration));
                        }
                    }
                    self.run.events.push(e);
                    return;
                }
                let by_id = m
                    .call_id
                    .as_ref()
                    .and_then(|id| self.pending.iter().position(|p| p.1.as_ref() == Some(id)));
                let to_written =
                    self.framework_calls
                        .iter()
                        .position(|(id, name)| match &m.call_id {
                            Some(c) => id.as_ref() == Some(c),
                            None => m.tool_name.as_ref() == Some(name),
                        });
                if let (None, Some(i)) = (by_id, to_written) {
                    // The result of a call the framework wrote: history, not a landing's.
                    self.framework_calls.remove(i);
                    self.run.events.push(e);
                    return;
                }
                let slot = by_id
                    .or_else(|| {
                        m.tool_name
                            .as_ref()
                            .and_then(|n| self.pending.iter().position(|p| p.2 == *n))
                    })
                    .or_else(|| (!self.pending.is_empty()).then_some(0));
                if let Some(i) = slot {
                    let (index, _, name) = self.pending.remove(i);
                    let landing = &mut self.run.events[index];
                    landing.text = Some(m.text.clone());
                    landing.error = m.error || is_retry_prompt(m);
                    landing.flags &= !LandingFlags::UNANSWERED;
                    if e.tool_name.is_none() {
                        e.tool_name = Some(name);
                    }
                }
                self.run.events.push(e);
            }
            Role::User => {
                if is_retry_prompt(m) {
                    if let Some((None, attempt, iteration)) = self.open.clone() {
                        self.run.events.push(retry_verdict(m, attempt, iteration));
                        self.open = None;
                    }
                }
                self.run.events.push(e);
            }
            Role::System => self.run.events.push(e),
        }
    }
}

pub(super) fn retry_verdict(m: &ChatMessage, attempt: u32, iteration: u32) -> Event {
    let (stage, error, path) = retry_details(&m.text);
    let mut v = Event::new(EventKind::Verdict);
    v.source_type = Some("http.retry_prompt".into());
    v.text = Some(vocab::SCHEMA_RETRY.into());
    v.iteration = Some(iteration);
    v.call_id = m.call_id.clone();
    v.payload = Some(js::stringify(&json!({
        "type": "http.retry_prompt",
        "payload": {
            "attempt": attempt,
            "iteration": iteration,
            "stage": stage,
            "error": error,
            "path": path,
            "correctiveMessageHash": js::hash_hex(&m.text),
        }
    })));
    v
}
