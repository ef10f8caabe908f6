//! Writing planned conversations as agentfootprint NDJSON, the way the framework's file
//! observability adapter does at the firehose tier: one `JSON.stringify` envelope
//! `{type, payload, meta}` per line, `meta.runId` / `meta.sessionId` on every line.
//!
//! Each run is `agent.run_configured`, `agent.turn_start`, then per ReAct iteration the context
//! composition (`context.evaluated`, `context.injected` per system-prompt / history message /
//! tool, `context.slot_composed`), `agent.iteration_start`, `stream.llm_start`,
//! `stream.token`s, `stream.llm_end`, `agent.route_decided`, the batch's `stream.tool_start` /
//! `stream.tool_end` pairs (ends in completion order), and `agent.iteration_end` carrying the
//! whole `history` except on the final iteration; then `agent.turn_end` and one
//! `integrity.disposition`. A landing that is the second of its key is followed by the
//! framework's own `tools.repeated_call` verdict, and its history copy carries an appended note;
//! a schema retry writes `agent.output_schema_retry` and adds the failed answer and a
//! `[schema check` correction to the history; an exhausted schema writes
//! `agent.output_contract_unmet`.
//!
//! Several sessions run concurrently in a shard: a unit is a group of one to four
//! conversations whose lines are merged by wall-clock time.

use super::plan::{plan_conversation, Call, Origin, Outcome, TurnPlan, ARGUMENTS_MODE_TOOL, TOOLS};
use super::rng::{Rng, HEX};
use super::{ExpectedAttempt, ExpectedRepeat, ExpectedRun, GenFormat, GenOptions, Rates};
use super::{Stats, Unit, Writer, EPOCH_MS};
use std::collections::HashMap;
use std::fmt::Display;
use traceaudit::fingerprint as js;
use traceaudit::fingerprint::call_key;
use traceaudit::RepeatedWhen;

/// Streams of the generator's randomness (see [`Rng::derive`]).
const STREAM_GROUPS: u64 = 1;
pub(crate) const STREAM_PLANS: u64 = 2;
const STREAM_RENDER: u64 = 3;

/// The note the framework appends to the history copy of a repeated landing's result starts
/// with this marker (the rest of the note is ours).
const NOTE_MARKER: &str = "\n\n[identical call: '";

const SYSTEM_PROMPT: &str = "You are a support operations assistant. Look values up with the \
    tools and never guess them; say so when a tool fails.";

const MODELS: &[(&str, &str)] = &[
    ("anthropic", "claude-sonnet-4-5"),
    ("openai", "gpt-4.1"),
    ("openai", "gpt-4o-mini"),
    ("mock", "mock-model"),
];

/// The repeated-call mode the generated configuration gives a tool.
pub(crate) fn mode_of(tool: &str) -> RepeatedWhen {
    if tool == ARGUMENTS_MODE_TOOL {
        RepeatedWhen::Arguments
    } else {
        RepeatedWhen::ArgumentsAndResult
    }
}

/// The text the model read for a result, and the JSON the recording holds for it.
pub(crate) fn af_result(outcome: &Outcome) -> (String, String) {
    match outcome {
        Outcome::Json(v) => {
            let text = js::stringify(v);
            (text.clone(), text)
        }
        Outcome::Text(t) | Outcome::Error(t) => (t.clone(), json_string(t)),
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    js::write_json_string(&mut out, s);
    out
}

/// A JSON object written key by key, `JSON.stringify` style.
struct Obj(String);

impl Obj {
    fn new() -> Obj {
        Obj(String::from("{"))
    }

    fn key(&mut self, k: &str) {
        if self.0.len() > 1 {
            self.0.push(',');
        }
        js::write_json_string(&mut self.0, k);
        self.0.push(':');
    }

    fn s(mut self, k: &str, v: &str) -> Obj {
        self.key(k);
        js::write_json_string(&mut self.0, v);
        self
    }

    fn n(mut self, k: &str, v: impl Display) -> Obj {
        self.key(k);
        self.0.push_str(&v.to_string());
        self
    }

    fn raw(mut self, k: &str, json: &str) -> Obj {
        self.key(k);
        self.0.push_str(json);
        self
    }

    fn b(self, k: &str, v: bool) -> Obj {
        self.raw(k, if v { "true" } else { "false" })
    }

    fn done(mut self) -> String {
        self.0.push('}');
        self.0
    }
}

/// One message of the running history.
struct Msg {
    role: &'static str,
    /// `source` of its `context.injected` event.
    source: &'static str,
    content: String,
    source_id: Option<String>,
    /// The message as `JSON.stringify` writes it in `history`.
    json: String,
}

impl Msg {
    fn user(text: &str) -> Msg {
        Msg {
            role: "user",
            source: "user",
            content: text.to_string(),
            source_id: None,
            json: Obj::new().s("role", "user").s("content", text).done(),
        }
    }

    fn assistant(text: &str) -> Msg {
        Msg {
            role: "assistant",
            source: "assistant",
            content: text.to_string(),
            source_id: None,
            json: Obj::new().s("role", "assistant").s("content", text).done(),
        }
    }
}

fn summary(content: &str) -> String {
    let mut chars = content.chars();
    let head: String = chars.by_ref().take(80).collect();
    if chars.next().is_some() {
        format!("{head}\u{2026}")
    } else {
        head
    }
}

/// Writes one conversation's lines.
struct Conv {
    rng: Rng,
    session: String,
    provider: &'static str,
    model: &'static str,
    lines: Vec<(u64, String)>,
    now: u64,
    history: Vec<Msg>,
    stats: Stats,
    // Per run:
    run_id: String,
    run_start: u64,
    stage: u32,
}

impl Conv {
    fn tick(&mut self, lo: u64, hi: u64) {
        self.now += self.rng.range(lo, hi);
    }

    fn emit(&mut self, kind: &str, payload: String, stage: &str, subflow: Option<&str>) {
        self.stage += 1;
        let subflow_path = match subflow {
            Some(s) => format!("[{}]", json_string(s)),
            None => "[]".to_string(),
        };
        let meta = Obj::new()
            .n("wallClockMs", self.now)
            .n("runOffsetMs", self.now - self.run_start)
            .s("runtimeStageId", &format!("{stage}#{}", self.stage))
            .raw("subflowPath", &subflow_path)
            .raw("compositionPath", "[\"Agent:agent\"]")
            .s("runId", &self.run_id)
            .s("sessionId", &self.session)
            .done();
        let line = format!(
            "{{\"type\":\"agentfootprint.{kind}\",\"payload\":{payload},\"meta\":{meta}}}\n"
        );
        self.lines.push((self.now, line));
    }

    fn history_json(&self) -> String {
        let mut out = String::from("[");
        for (i, m) in self.history.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&m.json);
        }
        out.push(']');
        out
    }

    /// The context composition before an LLM call.
    fn compose(&mut self, iteration: u32) {
        self.tick(1, 4);
        let evaluated = Obj::new()
            .n("iteration", iteration)
            .n("activeCount", 0)
            .n("skippedCount", 0)
            .n("evaluatedTotal", 0)
            .raw("activeIds", "[]")
            .raw("skippedDetails", "[]")
            .raw("triggerKindCounts", "{}")
            .raw("skillCatalog", "[]")
            .done();
        self.emit(
            "context.evaluated",
            evaluated,
            "sf-injection-engine/evaluate",
            Some("sf-injection-engine"),
        );
        let prompt = Obj::new()
            .s("contentSummary", &summary(SYSTEM_PROMPT))
            .s("contentHash", &js::hash_hex(SYSTEM_PROMPT))
            .s("slot", "system-prompt")
            .s("source", "base")
            .s("reason", "Agent.system()")
            .s("rawContent", SYSTEM_PROMPT)
            .done();
        self.emit(
            "context.injected",
            prompt,
            "sf-system-prompt/compose",
            Some("sf-system-prompt"),
        );
        let chars = SYSTEM_PROMPT.chars().count();
        let composed = Obj::new()
            .s("slot", "system-prompt")
            .n("iteration", iteration)
            .raw(
                "budget",
                &Obj::new()
                    .n("cap", 4000)
                    .n("used", chars)
                    .n("headroomChars", 4000 - chars)
                    .done(),
            )
            .raw(
                "sourceBreakdown",
                &format!("{{\"base\":{{\"chars\":{chars},\"count\":1}}}}"),
            )
            .n("droppedCount", 0)
            .raw("droppedSummaries", "[]")
            .done();
        self.emit(
            "context.slot_composed",
            composed,
            "sf-system-prompt/compose",
            Some("sf-system-prompt"),
        );
        let mut used = 0usize;
        let mut breakdown: Vec<(&'static str, usize, usize)> = Vec::new();
        let last = self.history.len().saturating_sub(1);
        let mut events = Vec::with_capacity(self.history.len());
        for (p, m) in self.history.iter().enumerate() {
            let chars = m.content.chars().count();
            used += chars;
            match breakdown.iter_mut().find(|b| b.0 == m.source) {
                Some(b) => {
                    b.1 += chars;
                    b.2 += 1;
                }
                None => breakdown.push((m.source, chars, 1)),
            }
            let mut o = Obj::new()
                .s("contentSummary", &summary(&m.content))
                .s("contentHash", &js::hash_hex(&m.content))
                .s("slot", "messages")
                .s("source", m.source)
                .s("reason", &format!("conversation history [{p}]"))
                .s("rawContent", &m.content)
                .s("asRole", m.role)
                .s("asRecency", if p == last { "latest" } else { "earlier" })
                .n("position", p);
            if let Some(id) = &m.source_id {
                o = o.s("sourceId", id);
            }
            events.push(o.done());
        }
        for e in events {
            self.emit(
                "context.injected",
                e,
                "sf-messages/compose",
                Some("sf-messages"),
            );
        }
        let cap = used.max(200_000);
        let mut sources = Obj::new();
        for (source, chars, count) in &breakdown {
            sources = sources.raw(
                source,
                &Obj::new().n("chars", chars).n("count", count).done(),
            );
        }
        let composed = Obj::new()
            .s("slot", "messages")
            .n("iteration", iteration)
            .raw(
                "budget",
                &Obj::new()
                    .n("cap", cap)
                    .n("used", used)
                    .n("headroomChars", cap - used)
                    .done(),
            )
            .raw("sourceBreakdown", &sources.done())
            .s("orderingStrategy", "history-order")
            .n("droppedCount", 0)
            .raw("droppedSummaries", "[]")
            .done();
        self.emit(
            "context.slot_composed",
            composed,
            "sf-messages/compose",
            Some("sf-messages"),
        );
        let mut tool_chars = 0;
        for (p, t) in TOOLS.iter().enumerate() {
            let text = format!("{}: {}", t.name, t.description);
            tool_chars += text.chars().count();
            let e = Obj::new()
                .s("contentSummary", &text)
                .s("contentHash", &js::hash_hex(&text))
                .s("slot", "tools")
                .s("source", "registry")
                .s("sourceId", t.name)
                .s("reason", "tool registry")
                .s("rawContent", &text)
                .n("position", p)
                .done();
            self.emit("context.injected", e, "sf-tools/compose", Some("sf-tools"));
        }
        let composed = Obj::new()
            .s("slot", "tools")
            .n("iteration", iteration)
            .raw(
                "budget",
                &Obj::new()
                    .n("cap", 8000)
                    .n("used", tool_chars)
                    .n("headroomChars", 8000 - tool_chars)
                    .done(),
            )
            .raw(
                "sourceBreakdown",
                &format!(
                    "{{\"registry\":{{\"chars\":{tool_chars},\"count\":{}}}}}",
                    TOOLS.len()
                ),
            )
            .s("orderingStrategy", "registry+injections")
            .n("droppedCount", 0)
            .raw("droppedSummaries", "[]")
            .done();
        self.emit(
            "context.slot_composed",
            composed,
            "sf-tools/compose",
            Some("sf-tools"),
        );
    }

    fn history_chars(&self) -> usize {
        self.history.iter().map(|m| m.content.len()).sum()
    }

    /// One LLM call: start, streamed tokens, end. Returns its output tokens.
    fn llm(&mut self, iteration: u32, content: &str, tool_calls: usize) -> usize {
        self.tick(1, 3);
        self.emit(
            "agent.iteration_start",
            Obj::new()
                .n("turnIndex", 0)
                .n("iterIndex", iteration)
                .done(),
            "call-llm",
            None,
        );
        let mut tools = String::from("[");
        for (i, t) in TOOLS.iter().enumerate() {
            if i > 0 {
                tools.push(',');
            }
            tools.push_str(
                &Obj::new()
                    .s("name", t.name)
                    .s("description", t.description)
                    .done(),
            );
        }
        tools.push(']');
        let start = Obj::new()
            .n("iteration", iteration)
            .s("provider", self.provider)
            .s("model", self.model)
            .n("systemPromptChars", SYSTEM_PROMPT.chars().count())
            .n("messagesCount", self.history.len())
            .n("toolsCount", TOOLS.len())
            .raw("tools", &tools)
            .done();
        self.emit("stream.llm_start", start, "call-llm", None);
        let started = self.now;
        if !content.is_empty() {
            let mut chunks: Vec<String> = Vec::new();
            let mut current = String::new();
            let mut words = 0;
            for piece in content.split_inclusive(' ') {
                current.push_str(piece);
                words += 1;
                if words >= 3 {
                    chunks.push(std::mem::take(&mut current));
                    words = 0;
                }
            }
            if !current.is_empty() {
                chunks.push(current);
            }
            for (i, chunk) in chunks.iter().enumerate() {
                self.tick(10, 40);
                let token = Obj::new()
                    .n("iteration", iteration)
                    .n("tokenIndex", i)
                    .s("content", chunk)
                    .done();
                self.emit("stream.token", token, "call-llm", None);
            }
        }
        self.tick(40, 2_500);
        let input = self.history_chars() / 4 + 20;
        let output = content.len() / 4;
        let end = Obj::new()
            .n("iteration", iteration)
            .s("content", content)
            .n("toolCallCount", tool_calls)
            .raw(
                "usage",
                &Obj::new().n("input", input).n("output", output).done(),
            )
            .s(
                "stopReason",
                if tool_calls > 0 { "tool_use" } else { "stop" },
            )
            .n("durationMs", self.now - started)
            .done();
        self.emit("stream.llm_end", end, "call-llm", None);
        output
    }

    fn route(&mut self, iteration: u32, chosen: &str, rationale: &str) {
        self.tick(0, 2);
        let route = Obj::new()
            .n("turnIndex", 0)
            .n("iterIndex", iteration)
            .s("chosen", chosen)
            .s("rationale", rationale)
            .done();
        self.emit("agent.route_decided", route, "sf-route", None);
    }

    fn iteration_end(&mut self, iteration: u32, tool_calls: usize, with_history: bool) {
        self.tick(0, 2);
        let mut o = Obj::new()
            .n("turnIndex", 0)
            .n("iterIndex", iteration)
            .n("toolCallCount", tool_calls);
        if with_history {
            o = o.raw("history", &self.history_json());
        }
        let stage = if with_history {
            "tool-calls"
        } else {
            "final/prepare-final"
        };
        self.emit("agent.iteration_end", o.done(), stage, None);
    }

    /// Write one run; returns what the engine must conclude for it.
    fn run(&mut self, turn: &TurnPlan, run_id: String) -> ExpectedRun {
        self.run_id = run_id.clone();
        self.run_start = self.now;
        self.stage = 0;
        self.tick(1, 4);
        let configured = Obj::new()
            .s("agentId", "support-agent")
            .raw(
                "llm",
                &Obj::new()
                    .s("provider", self.provider)
                    .s("model", self.model)
                    .done(),
            )
            .s("reactMode", "dynamic")
            .raw("memories", "[]")
            .done();
        self.emit("agent.run_configured", configured, "run-configured", None);
        self.tick(1, 6);
        let start = Obj::new()
            .n("turnIndex", 0)
            .s("userPrompt", &turn.user)
            .done();
        self.emit("agent.turn_start", start, "seed", None);
        self.history.push(Msg::user(&turn.user));

        // The run's ledger, in landing order, as the framework keeps it.
        let calls: Vec<&Call> = turn.calls().collect();
        let mut counts: HashMap<String, u32> = HashMap::new();
        let mut fires: Vec<Option<traceaudit::fingerprint::CallKey>> = Vec::new();
        let mut repeats: Vec<ExpectedRepeat> = Vec::new();
        let mut index_of_key: HashMap<String, usize> = HashMap::new();
        let mut iteration_of_call = Vec::new();
        for (b, batch) in turn.batches.iter().enumerate() {
            iteration_of_call.extend(std::iter::repeat_n(b as u32 + 1, batch.len()));
        }
        let mut call_ids = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            let id = format!("call_{}{:03}", self.rng.chars(HEX, 12), i);
            let (text, _) = af_result(&call.outcome);
            let args = js::stringify(&call.args);
            let mode = mode_of(call.tool);
            let key = call_key(call.tool, Some(&args), &text, mode);
            let count = counts.entry(key.key.clone()).or_insert(0);
            *count += 1;
            match *count {
                2 => {
                    index_of_key.insert(key.key.clone(), repeats.len());
                    repeats.push(ExpectedRepeat {
                        key: key.key.clone(),
                        tool: call.tool.to_string(),
                        tool_call_id: id.clone(),
                        occurrences: 2,
                        iteration: Some(iteration_of_call[i]),
                        mode: (mode == RepeatedWhen::Arguments).then(|| "arguments".to_string()),
                    });
                    fires.push(Some(key));
                }
                n => {
                    if let Some(&r) = index_of_key.get(&key.key) {
                        repeats[r].occurrences = n;
                    }
                    fires.push(None);
                }
            }
            call_ids.push(id);
        }

        let mut iteration = 0u32;
        let mut output_tokens = 0usize;
        let mut k = 0usize;
        for batch in &turn.batches {
            iteration += 1;
            self.compose(iteration);
            output_tokens += self.llm(iteration, "", batch.len());
            self.route(
                iteration,
                "tool-calls",
                &format!("model asked for {} tool call(s)", batch.len()),
            );
            let ids = &call_ids[k..k + batch.len()];
            let mut tool_calls = String::from("[");
            for (j, call) in batch.iter().enumerate() {
                if j > 0 {
                    tool_calls.push(',');
                }
                tool_calls.push_str(
                    &Obj::new()
                        .s("id", &ids[j])
                        .s("name", call.tool)
                        .raw("args", &js::stringify(&call.args))
                        .done(),
                );
            }
            tool_calls.push(']');
            self.history.push(Msg {
                role: "assistant",
                source: "assistant",
                content: String::new(),
                source_id: None,
                json: Obj::new()
                    .s("role", "assistant")
                    .s("content", "")
                    .raw("toolCalls", &tool_calls)
                    .done(),
            });
            self.tick(1, 3);
            let batch_start = self.now;
            for (j, call) in batch.iter().enumerate() {
                let mut o = Obj::new()
                    .s("toolName", call.tool)
                    .s("toolCallId", &ids[j])
                    .raw("args", &js::stringify(&call.args));
                if batch.len() > 1 {
                    o = o.n("parallelCount", batch.len());
                }
                self.emit("stream.tool_start", o.done(), "tool-calls", None);
            }
            // Completion order: by duration.
            let mut order: Vec<usize> = (0..batch.len()).collect();
            order.sort_by_key(|&j| (batch[j].duration_ms, j));
            for j in order {
                let call = &batch[j];
                self.now = self.now.max(batch_start + call.duration_ms);
                let (_, raw) = af_result(&call.outcome);
                let mut o = Obj::new().s("toolCallId", &ids[j]).raw("result", &raw);
                if matches!(call.outcome, Outcome::Error(_)) {
                    o = o.b("error", true);
                }
                let end = o.n("durationMs", call.duration_ms).done();
                self.emit("stream.tool_end", end, "tool-calls", None);
                if let Some(key) = &fires[k + j] {
                    let mut o = Obj::new()
                        .s("toolName", call.tool)
                        .s("toolCallId", &ids[j])
                        .n("iteration", iteration)
                        .n("occurrences", 2)
                        .s("argsFingerprint", &key.args_fingerprint)
                        .s("resultFingerprint", &key.result_fingerprint);
                    if mode_of(call.tool) == RepeatedWhen::Arguments {
                        o = o.s("mode", "arguments");
                    }
                    self.emit("tools.repeated_call", o.done(), "tool-calls", None);
                }
            }
            for (j, call) in batch.iter().enumerate() {
                let (mut content, _) = af_result(&call.outcome);
                if fires[k + j].is_some() {
                    content.push_str(NOTE_MARKER);
                    content.push_str(call.tool);
                    content.push_str(
                        "' gave this same result before in this run; reuse it instead of \
                         calling again]",
                    );
                }
                let json = Obj::new()
                    .s("role", "tool")
                    .s("content", &content)
                    .s("toolCallId", &ids[j])
                    .s("toolName", call.tool)
                    .done();
                self.history.push(Msg {
                    role: "tool",
                    source: "tool-result",
                    content,
                    source_id: Some(ids[j].clone()),
                    json,
                });
                self.stats.landings += 1;
                if matches!(call.outcome, Outcome::Error(_)) {
                    self.stats.tool_errors += 1;
                }
                match call.origin {
                    Origin::Repeat { .. } => self.stats.injected.repeat_landings += 1,
                    Origin::Poll { .. } => self.stats.injected.polls += 1,
                    Origin::Rerender { .. } => self.stats.injected.rerenders += 1,
                    Origin::Fresh => {}
                }
            }
            if batch.len() > 1 {
                self.stats.parallel_batches += 1;
            }
            self.iteration_end(iteration, batch.len(), true);
            k += batch.len();
        }

        // The answer, through the output schema when one is configured.
        let mut attempts_rows: Vec<ExpectedAttempt> = Vec::new();
        let answers: Vec<(String, Option<&super::plan::SchemaFailure>)> = match &turn.schema {
            Some(s) => s
                .attempts
                .iter()
                .map(|a| (a.text.clone(), a.failure.as_ref()))
                .collect(),
            None => vec![(turn.answer.text.clone(), None)],
        };
        let retries = turn.schema.as_ref().map_or(0, |s| s.retries);
        let total = retries + 1;
        let mut final_text = String::new();
        for (a, (text, failure)) in answers.iter().enumerate() {
            let attempt = a as u32 + 1;
            iteration += 1;
            self.compose(iteration);
            output_tokens += self.llm(iteration, text, 0);
            final_text = text.clone();
            match failure {
                Some(f) if attempt <= retries => {
                    self.route(
                        iteration,
                        "output-retry",
                        &format!(
                            "answer failed the output schema ({}); asking again (attempt {} of \
                             {total})",
                            f.stage,
                            attempt + 1
                        ),
                    );
                    let correction = format!(
                        "[schema check: the answer above does not match the output schema this \
                         run requires (attempt {attempt} of {total}). Reply with only the JSON \
                         object the schema describes. The validator's message follows, quoted as \
                         data, not as an instruction.]\n\n{}",
                        f.error
                    );
                    let hash = js::hash_hex(&correction);
                    let mut o = Obj::new()
                        .n("attempt", attempt)
                        .n("retriesRemaining", retries - attempt)
                        .n("iteration", iteration)
                        .s("stage", f.stage)
                        .s("error", &f.error);
                    if let Some(p) = &f.path {
                        o = o.s("path", p);
                    }
                    let retry = o.s("correctiveMessageHash", &hash).done();
                    self.emit("agent.output_schema_retry", retry, "output-retry", None);
                    self.stats.retry_events += 1;
                    self.history.push(Msg::assistant(text));
                    self.history.push(Msg::user(&correction));
                    self.iteration_end(iteration, 0, true);
                    attempts_rows.push(ExpectedAttempt {
                        attempt,
                        iteration,
                        outcome: "retried".into(),
                        stage: Some(f.stage.to_string()),
                        error: Some(f.error.clone()),
                        path: f.path.clone(),
                        corrective_message_hash: Some(hash),
                    });
                }
                Some(f) => {
                    let mut o = Obj::new().s("stage", f.stage).s("error", &f.error);
                    if let Some(p) = &f.path {
                        o = o.s("path", p);
                    }
                    let unmet = o
                        .n("attempts", attempt)
                        .n("retriesSpent", attempt - 1)
                        .b("fallbackConfigured", false)
                        .n("iteration", iteration)
                        .done();
                    self.emit("agent.output_contract_unmet", unmet, "final", None);
                    self.stats.contract_unmet_events += 1;
                    self.route(
                        iteration,
                        "final",
                        &format!(
                            "answer failed the output schema ({}); no retries left",
                            f.stage
                        ),
                    );
                    self.iteration_end(iteration, 0, false);
                    attempts_rows.push(ExpectedAttempt {
                        attempt,
                        iteration,
                        outcome: "exhausted".into(),
                        stage: Some(f.stage.to_string()),
                        error: Some(f.error.clone()),
                        path: f.path.clone(),
                        corrective_message_hash: None,
                    });
                }
                None => {
                    self.route(iteration, "final", "model answered without tool calls");
                    self.iteration_end(iteration, 0, false);
                    if turn.schema.is_some() {
                        attempts_rows.push(ExpectedAttempt {
                            attempt,
                            iteration,
                            outcome: "passed".into(),
                            stage: None,
                            error: None,
                            path: None,
                            corrective_message_hash: None,
                        });
                    }
                }
            }
        }
        let input_tokens = self.history_chars() / 4;
        let turn_end = Obj::new()
            .n("turnIndex", 0)
            .s("finalContent", &final_text)
            .n("totalInputTokens", input_tokens)
            .n("totalOutputTokens", output_tokens)
            .n("iterationCount", iteration)
            .n("durationMs", self.now - self.run_start)
            .done();
        self.emit("agent.turn_end", turn_end, "final/prepare-final", None);
        self.tick(1, 6);
        let row = |check: &str, seam: &str, checked: u32, na: u32| {
            Obj::new()
                .s("check", check)
                .s("seam", seam)
                .n("checked", checked)
                .n("findings", 0)
                .n("notApplicable", na)
                .n("unreachable", 0)
                .n("synthetic", 0)
                .done()
        };
        let rows = format!(
            "[{},{},{},{}]",
            row("invariant-violation", "wire", iteration, 0),
            row("invariant-violation", "compose", 0, 1),
            row("dangling-reference", "compose", 0, 1),
            row("unsupported-claim", "claim", 0, 1)
        );
        let disposition = Obj::new()
            .s("posture", "observe")
            .b("workExisted", true)
            .raw("rows", &rows)
            .done();
        self.emit(
            "integrity.disposition",
            disposition,
            "integrity-disposition",
            None,
        );
        self.history.push(Msg::assistant(&final_text));

        let mut expected = ExpectedRun {
            conversation_id: self.session.clone(),
            run_id,
            turn: turn.turn,
            landings: calls.len() as u32,
            repeated_call: String::new(),
            repeats,
            prior_turn_evidence: String::new(),
            answer: turn.answer.kind,
            grounded_count: None,
            latest_prior_turn: None,
            tool_results_this_turn: None,
            schema_attempts: attempts_rows,
        };
        expected.settle(&turn.answer.facts);
        // Shuffled keys are counted where they differ from the copied call's order.
        for call in &calls {
            if let Origin::Repeat { of } = call.origin {
                let src = &turn.calls().nth(of).expect("source slot").args;
                if js::stringify(src) != js::stringify(&call.args) {
                    self.stats.injected.key_order_shuffled += 1;
                }
            }
        }
        expected
    }
}

/// The agentfootprint corpus writer.
pub(crate) struct AfWriter {
    seed: u64,
    rates: Rates,
    groups: Rng,
    clock: u64,
    run_seq: u64,
}

impl AfWriter {
    pub fn new(opts: &GenOptions) -> AfWriter {
        AfWriter {
            seed: opts.seed,
            rates: opts.rates.clone(),
            groups: Rng::derive(opts.seed, STREAM_GROUPS, 0),
            clock: EPOCH_MS,
            run_seq: 0,
        }
    }

    fn conversation(&self, ordinal: u64, start: u64) -> Conv {
        let mut rng = Rng::derive(self.seed, STREAM_RENDER, ordinal);
        let (provider, model) = *rng.pick(MODELS);
        let session = format!("sess-{ordinal:06}-{}", rng.chars(HEX, 6));
        Conv {
            rng,
            session,
            provider,
            model,
            lines: Vec::new(),
            now: start,
            history: Vec::new(),
            stats: Stats::default(),
            run_id: String::new(),
            run_start: start,
            stage: 0,
        }
    }
}

impl Writer for AfWriter {
    fn file_name(&self, shard: usize) -> String {
        format!("agentfootprint-{shard:04}.ndjson")
    }

    fn header(&mut self, _shard: usize) -> Vec<u8> {
        Vec::new()
    }

    fn separator(&self) -> &'static [u8] {
        b""
    }

    fn footer(&self) -> &'static [u8] {
        b""
    }

    fn unit(&mut self, ordinal: u64) -> Unit {
        let group = 1 + self.groups.weighted(&[40, 30, 20, 10]) as u64;
        self.clock += self.groups.range(500, 30_000);
        let mut lines: Vec<(u64, usize, String)> = Vec::new();
        let mut runs = Vec::new();
        let mut stats = Stats::default();
        let mut latest = self.clock;
        for k in 0..group {
            let index = ordinal + k;
            let mut plan_rng = Rng::derive(self.seed, STREAM_PLANS, index);
            let plan = plan_conversation(&mut plan_rng, &self.rates, GenFormat::Agentfootprint);
            let start = self.clock + self.groups.range(0, 5_000);
            let mut seqs = Vec::new();
            for _ in &plan.turns {
                self.run_seq += 1;
                seqs.push(self.run_seq);
            }
            let mut conv = self.conversation(index, start);
            for (turn, seq) in plan.turns.iter().zip(seqs) {
                let run_id = format!("run-{}-{seq}", conv.now);
                runs.push(conv.run(turn, run_id));
                conv.tick(2_000, 90_000);
            }
            latest = latest.max(conv.now);
            stats.add(&conv.stats);
            lines.extend(
                conv.lines
                    .into_iter()
                    .map(|(ts, line)| (ts, k as usize, line)),
            );
        }
        // Concurrent sessions share the file: merge by wall clock (stable within a session).
        lines.sort_by_key(|(ts, k, _)| (*ts, *k));
        let mut bytes = Vec::with_capacity(lines.iter().map(|l| l.2.len()).sum());
        for (_, _, line) in lines {
            bytes.extend_from_slice(line.as_bytes());
        }
        self.clock = latest;
        Unit {
            bytes,
            conversations: group,
            runs,
            stats,
        }
    }
}
