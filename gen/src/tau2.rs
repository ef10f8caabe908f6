//! Writing planned conversations as tau2-bench results documents
//! `{timestamp, info, tasks, simulations}`, pretty-printed the way tau2 writes them (Python
//! `json.dumps(indent=2)`, ASCII escapes). Tool results are Python dumps of the result object
//! (`", "` and `": "` separators), as tau2's environment returns them.
//!
//! A simulation opens with the agent's greeting (a turn-0 run), has one run per user message,
//! and ends with the simulated user's `###STOP###` (a run without an answer). Assistant tool
//! calls carry `arguments` as an object and `requestor: "assistant"`; some turns end with the
//! simulated user acting on its own device (`requestor: "user"`), which is never the agent's.
//! A few calls reuse an earlier call's id, as some real files do.

use super::agentfootprint::{mode_of, STREAM_PLANS};
use super::plan::{plan_conversation, AnswerKind, Origin, Outcome, TurnPlan};
use super::rng::{Rng, DIGITS, HEX};
use super::{iso_time, ExpectedRepeat, ExpectedRun, GenFormat, GenOptions, Rates};
use super::{Stats, Unit, Writer, EPOCH_MS};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::fmt::Write as _;
use traceaudit::fingerprint as js;
use traceaudit::fingerprint::call_key;
use traceaudit::RepeatedWhen;

const STREAM_FILES: u64 = 11;
const STREAM_RENDER: u64 = 12;
const TASKS_PER_FILE: u64 = 24;

/// Python's `json.dumps` string: `"` `\` and control characters escaped, every non-ASCII
/// character as `\uXXXX` (surrogate pairs beyond the BMP).
fn py_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{:04x}", u);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn py_number(out: &mut String, n: &serde_json::Number) {
    if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
    } else if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
    } else {
        // Python's float repr and Rust's Debug are both the shortest round-trip text, with
        // `.0` on integral values, for the magnitudes generated here.
        let _ = write!(out, "{:?}", n.as_f64().unwrap_or(0.0));
    }
}

/// `json.dumps(v)`: compact with Python's default separators.
fn py_compact(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => py_number(out, n),
        Value::String(s) => py_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_compact(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_string(out, k);
                out.push_str(": ");
                py_compact(out, item);
            }
            out.push('}');
        }
    }
}

/// `json.dumps(v, indent=2)` of a value nested `level` deep.
fn py_pretty(out: &mut String, v: &Value, level: usize) {
    let pad = |out: &mut String, n: usize| {
        for _ in 0..n {
            out.push_str("  ");
        }
    };
    match v {
        Value::Array(items) if !items.is_empty() => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                pad(out, level + 1);
                py_pretty(out, item, level + 1);
            }
            out.push('\n');
            pad(out, level);
            out.push(']');
        }
        Value::Object(map) if !map.is_empty() => {
            out.push_str("{\n");
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                pad(out, level + 1);
                py_string(out, k);
                out.push_str(": ");
                py_pretty(out, item, level + 1);
            }
            out.push('\n');
            pad(out, level);
            out.push('}');
        }
        other => py_compact(out, other),
    }
}

/// The content string of a tool message for a planned outcome.
fn tool_content(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Json(v) => {
            let mut s = String::new();
            py_compact(&mut s, v);
            s
        }
        Outcome::Text(t) | Outcome::Error(t) => t.clone(),
    }
}

fn obj(pairs: Vec<(&str, Value)>) -> Value {
    let mut m = Map::new();
    for (k, v) in pairs {
        m.insert(k.to_string(), v);
    }
    Value::Object(m)
}

const POLICY: &str = "# Support policy\nYou help customers with orders, refunds and devices. \
    Look values up with the tools before you state them. Confirm before any action that changes \
    an account. Transfer to a human agent when a request is out of scope.";

const GUIDELINES: &str = "# User simulation guidelines\nYou play a customer contacting a \
    support agent. Share what the scenario tells you when asked, one message at a time, and end \
    the conversation with ###STOP### when your request is handled.";

/// Writes one simulation.
struct Sim<'a> {
    rng: Rng,
    rates: &'a Rates,
    id: String,
    now_ms: u64,
    turn_idx: u64,
    messages: Vec<Value>,
    used_ids: Vec<String>,
    stats: Stats,
}

impl Sim<'_> {
    fn stamp(&mut self, lo: u64, hi: u64) -> Value {
        self.now_ms += self.rng.range(lo, hi);
        let us = self.rng.below(1000);
        Value::String(iso_time(self.now_ms, us))
    }

    fn cost(&mut self) -> Value {
        json!(self.rng.range(100, 60_000) as f64 / 1_000_000.0)
    }

    fn usage(&mut self, completion: u64) -> Value {
        json!({"completion_tokens": completion, "prompt_tokens": self.rng.range(500, 9_000)})
    }

    fn call_id(&mut self, batch: &[String]) -> (String, bool) {
        if !self.used_ids.is_empty() && self.rng.chance(self.rates.id_reuse) {
            let id = self.rng.pick(&self.used_ids).clone();
            if !batch.contains(&id) {
                return (id, true);
            }
        }
        (format!("call_{}", self.rng.chars(DIGITS, 8)), false)
    }

    /// A message written by the agent or the simulated user, with the provider's raw data.
    fn chat(
        &mut self,
        role: &str,
        content: &str,
        calls: Option<Vec<(String, &str, Value, &str)>>,
        gap: (u64, u64),
    ) {
        let turn_idx = self.turn_idx;
        self.turn_idx += 1;
        let timestamp = self.stamp(gap.0, gap.1);
        let cost = self.cost();
        let usage = self.usage(content.len() as u64 / 4 + 3);
        let (tool_calls, raw_calls) = match &calls {
            None => (Value::Null, Value::Null),
            Some(calls) => (
                Value::Array(
                    calls
                        .iter()
                        .map(|(id, name, args, requestor)| {
                            obj(vec![
                                ("id", json!(id)),
                                ("name", json!(name)),
                                ("arguments", args.clone()),
                                ("requestor", json!(requestor)),
                            ])
                        })
                        .collect(),
                ),
                Value::Array(
                    calls
                        .iter()
                        .map(|(id, name, args, _)| {
                            obj(vec![
                                (
                                    "function",
                                    obj(vec![
                                        ("arguments", json!(args.to_string())),
                                        ("name", json!(name)),
                                    ]),
                                ),
                                ("id", json!(id)),
                                ("type", json!("function")),
                            ])
                        })
                        .collect(),
                ),
            ),
        };
        let finish = if calls.is_some() {
            "tool_calls"
        } else {
            "stop"
        };
        let raw = obj(vec![
            ("finish_reason", json!(finish)),
            ("index", json!(0)),
            (
                "message",
                obj(vec![
                    ("content", json!(content)),
                    ("role", json!("assistant")),
                    ("tool_calls", raw_calls),
                    ("function_call", Value::Null),
                ]),
            ),
            ("provider_specific_fields", json!({})),
        ]);
        self.messages.push(obj(vec![
            ("role", json!(role)),
            ("content", json!(content)),
            ("tool_calls", tool_calls),
            ("turn_idx", json!(turn_idx)),
            ("timestamp", timestamp),
            ("cost", cost),
            ("usage", usage),
            ("raw_data", raw),
        ]));
    }

    fn tool_message(&mut self, id: &str, content: String, requestor: &str, error: bool, ms: u64) {
        let turn_idx = self.turn_idx;
        self.turn_idx += 1;
        let timestamp = self.stamp(ms, ms + 1);
        self.messages.push(obj(vec![
            ("id", json!(id)),
            ("role", json!("tool")),
            ("content", json!(content)),
            ("requestor", json!(requestor)),
            ("error", json!(error)),
            ("turn_idx", json!(turn_idx)),
            ("timestamp", timestamp),
        ]));
    }

    /// Write one user turn; returns the expected run.
    fn turn(&mut self, turn: &TurnPlan, run_id: String) -> ExpectedRun {
        self.chat("user", &turn.user, None, (3_000, 40_000));
        let mut counts: HashMap<String, u32> = HashMap::new();
        let mut index_of_key: HashMap<String, usize> = HashMap::new();
        let mut repeats: Vec<ExpectedRepeat> = Vec::new();
        for batch in &turn.batches {
            let mut ids: Vec<String> = Vec::new();
            for _ in batch {
                let (id, reused) = self.call_id(&ids);
                if reused {
                    self.stats.injected.reused_call_ids += 1;
                }
                ids.push(id);
            }
            let preface = *self
                .rng
                .pick(&["", "", "Let me check that for you.", "One moment."]);
            let calls: Vec<(String, &str, Value, &str)> = batch
                .iter()
                .zip(&ids)
                .map(|(c, id)| (id.clone(), c.tool, c.args.clone(), "assistant"))
                .collect();
            self.chat("assistant", preface, Some(calls), (800, 6_000));
            for (call, id) in batch.iter().zip(&ids) {
                let content = tool_content(&call.outcome);
                let mode = mode_of(call.tool);
                let key = call_key(call.tool, Some(&js::stringify(&call.args)), &content, mode);
                let count = counts.entry(key.key.clone()).or_insert(0);
                *count += 1;
                if *count == 2 {
                    index_of_key.insert(key.key.clone(), repeats.len());
                    repeats.push(ExpectedRepeat {
                        key: key.key.clone(),
                        tool: call.tool.to_string(),
                        tool_call_id: id.clone(),
                        occurrences: 2,
                        iteration: None,
                        mode: (mode == RepeatedWhen::Arguments).then(|| "arguments".to_string()),
                    });
                } else if let Some(&r) = index_of_key.get(&key.key) {
                    repeats[r].occurrences = *count;
                }
                let error = matches!(call.outcome, Outcome::Error(_));
                self.tool_message(id, content, "assistant", error, call.duration_ms);
                self.stats.landings += 1;
                if error {
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
            self.used_ids.extend(ids);
        }
        self.chat("assistant", &turn.answer.text, None, (800, 8_000));
        for device in &turn.device {
            let id = format!("call_{}", self.rng.chars(DIGITS, 8));
            self.chat(
                "user",
                "",
                Some(vec![(id.clone(), device.tool, json!({}), "user")]),
                (2_000, 15_000),
            );
            self.tool_message(&id, device.result.clone(), "user", false, 1);
            self.stats.injected.device_calls += 1;
        }
        let mut expected = ExpectedRun {
            conversation_id: self.id.clone(),
            run_id,
            turn: turn.turn,
            landings: turn.landings() as u32,
            repeated_call: String::new(),
            repeats,
            prior_turn_evidence: String::new(),
            answer: turn.answer.kind,
            grounded_count: None,
            latest_prior_turn: None,
            tool_results_this_turn: None,
            schema_attempts: Vec::new(),
        };
        expected.settle(&turn.answer.facts);
        expected
    }
}

fn bare_run(conversation: &str, turn: u32, answer: AnswerKind) -> ExpectedRun {
    let mut r = ExpectedRun {
        conversation_id: conversation.to_string(),
        run_id: format!("{conversation}#{turn}"),
        turn,
        landings: 0,
        repeated_call: String::new(),
        repeats: Vec::new(),
        prior_turn_evidence: String::new(),
        answer,
        grounded_count: None,
        latest_prior_turn: None,
        tool_results_this_turn: None,
        schema_attempts: Vec::new(),
    };
    r.settle(&[]);
    r
}

/// The tau2 corpus writer.
pub(crate) struct Tau2Writer {
    seed: u64,
    rates: Rates,
    clock: u64,
}

impl Tau2Writer {
    pub fn new(opts: &GenOptions) -> Tau2Writer {
        Tau2Writer {
            seed: opts.seed,
            rates: opts.rates.clone(),
            clock: EPOCH_MS,
        }
    }
}

fn uuid(rng: &mut Rng) -> String {
    format!(
        "{}-{}-{}-{}-{}",
        rng.chars(HEX, 8),
        rng.chars(HEX, 4),
        rng.chars(HEX, 4),
        rng.chars(HEX, 4),
        rng.chars(HEX, 12)
    )
}

impl Writer for Tau2Writer {
    fn file_name(&self, shard: usize) -> String {
        format!("tau2-{shard:04}.json")
    }

    fn header(&mut self, shard: usize) -> Vec<u8> {
        let mut rng = Rng::derive(self.seed, STREAM_FILES, shard as u64);
        let tasks: Vec<Value> = (0..TASKS_PER_FILE)
            .map(|k| {
                obj(vec![
                    ("id", json!(k.to_string())),
                    (
                        "description",
                        json!({"purpose": "Handle a customer request about an order or a device.",
                               "relevant_policies": null, "notes": null}),
                    ),
                    (
                        "user_scenario",
                        json!({"persona": null, "instructions": {
                            "domain": "support",
                            "reason_for_call": "You want an update on your order and your devices.",
                            "known_info": "You know your customer id and your order id.",
                            "unknown_info": null,
                            "task_instructions": "Ask follow-up questions; end with ###STOP###."}}),
                    ),
                    ("initial_state", Value::Null),
                    (
                        "evaluation_criteria",
                        json!({"actions": [], "env_assertions": null,
                                                   "communicate_info": [], "nl_assertions": null}),
                    ),
                ])
            })
            .collect();
        let info = obj(vec![
            ("git_commit", json!(rng.chars(HEX, 40))),
            ("num_trials", json!(4)),
            ("max_steps", json!(200)),
            ("max_errors", json!(10)),
            (
                "user_info",
                json!({"implementation": "user_simulator", "llm": "gen/user-model",
                       "llm_args": {"temperature": 0.0}, "global_simulation_guidelines": GUIDELINES}),
            ),
            (
                "agent_info",
                json!({"implementation": "llm_agent", "llm": "gen/agent-model",
                       "llm_args": {"temperature": 0.0}}),
            ),
            (
                "environment_info",
                json!({"domain_name": "support", "policy": POLICY, "tool_defs": null}),
            ),
            ("seed", json!(self.seed)),
        ]);
        let mut out = String::from("{\n  \"timestamp\": ");
        py_string(&mut out, &iso_time(self.clock, 0));
        out.push_str(",\n  \"info\": ");
        py_pretty(&mut out, &info, 1);
        out.push_str(",\n  \"tasks\": ");
        py_pretty(&mut out, &Value::Array(tasks), 1);
        out.push_str(",\n  \"simulations\": [\n");
        out.into_bytes()
    }

    fn separator(&self) -> &'static [u8] {
        b",\n"
    }

    fn footer(&self) -> &'static [u8] {
        b"\n  ]\n}"
    }

    fn unit(&mut self, ordinal: u64) -> Unit {
        let mut plan_rng = Rng::derive(self.seed, STREAM_PLANS, ordinal);
        let plan = plan_conversation(&mut plan_rng, &self.rates, GenFormat::Tau2);
        let mut rng = Rng::derive(self.seed, STREAM_RENDER, ordinal);
        let id = uuid(&mut rng);
        let task = rng.below(TASKS_PER_FILE);
        let trial = rng.below(4);
        self.clock += rng.range(1_000, 60_000);
        let start = self.clock;
        let mut sim = Sim {
            rng,
            rates: &self.rates,
            id: id.clone(),
            now_ms: start,
            turn_idx: 0,
            messages: Vec::new(),
            used_ids: Vec::new(),
            stats: Stats::default(),
        };
        let mut runs = vec![bare_run(&id, 0, AnswerKind::NoValues)];
        sim.chat("assistant", "Hi! How can I help you today?", None, (0, 1));
        for turn in &plan.turns {
            runs.push(sim.turn(turn, format!("{id}#{}", turn.turn)));
        }
        sim.chat(
            "user",
            "Thanks, that is all I needed. ###STOP###",
            None,
            (2_000, 20_000),
        );
        let last_turn = plan.turns.len() as u32 + 1;
        runs.push(bare_run(&id, last_turn, AnswerKind::NoAnswer));
        let end = sim.now_ms;
        let reward = if sim.rng.chance(0.6) { 1.0 } else { 0.0 };
        let agent_cost = sim.rng.range(1_000, 900_000) as f64 / 1_000_000.0;
        let user_cost = sim.rng.range(1_000, 200_000) as f64 / 1_000_000.0;
        let seed = sim.rng.range(1, 999_999);
        let stats = sim.stats.clone();
        let messages = std::mem::take(&mut sim.messages);
        let simulation = obj(vec![
            ("id", json!(id)),
            ("task_id", json!(task.to_string())),
            ("timestamp", json!(iso_time(end, 0))),
            ("start_time", json!(iso_time(start, 0))),
            ("end_time", json!(iso_time(end, 0))),
            ("duration", json!((end - start) as f64 / 1000.0)),
            ("termination_reason", json!("user_stop")),
            ("agent_cost", json!(agent_cost)),
            ("user_cost", json!(user_cost)),
            (
                "reward_info",
                json!({"reward": reward, "db_check": {"db_match": reward > 0.5, "db_reward": reward},
                       "env_assertions": null, "action_checks": [], "nl_assertions": null,
                       "communicate_checks": null, "reward_basis": ["DB"],
                       "reward_breakdown": {"DB": reward},
                       "info": {"env": null, "nl": null, "communicate": null, "action": null}}),
            ),
            ("messages", Value::Array(messages)),
            ("trial", json!(trial)),
            ("seed", json!(seed)),
        ]);
        self.clock = end;
        let mut text = String::from("    ");
        py_pretty(&mut text, &simulation, 2);
        Unit {
            bytes: text.into_bytes(),
            conversations: 1,
            runs,
            stats,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_dumps() {
        let v = json!({"a": [1, 2.5, 3.0], "b": {}, "c": "é\"\n", "d": null, "e": []});
        let mut s = String::new();
        py_compact(&mut s, &v);
        assert_eq!(
            s,
            r#"{"a": [1, 2.5, 3.0], "b": {}, "c": "\u00e9\"\n", "d": null, "e": []}"#
        );
        let mut p = String::new();
        py_pretty(&mut p, &json!({"a": [1, {"b": true}], "c": {}}), 0);
        assert_eq!(
            p,
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": true\n    }\n  ],\n  \"c\": {}\n}"
        );
        let mut astral = String::new();
        py_string(&mut astral, "😀");
        assert_eq!(astral, r#""\ud83d\ude00""#);
    }
}
