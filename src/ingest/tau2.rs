//! tau2-bench simulations. Three top-level shapes occur in real files:
//! - a results document `{timestamp, info{agent_info, user_info, environment_info}, tasks[],
//!   simulations[]}`;
//! - a wrapper `{domain, agent, model, ..., simulations[]}`;
//! - a bare list of simulations.
//!
//! A simulation is `{id, task_id, trial, termination_reason, reward_info, messages[]}`; its `id`
//! is the conversation id, and a simulation repeated inside one file is stored once (the first
//! stored copy wins, the repeats are dropped). Assistant tool calls are `{id, name, arguments,
//! requestor}` with `arguments` a JSON object; tool messages answer with `{id, content,
//! requestor, error}`. The simulated user's own device (telecom) shows up as user messages with
//! tool calls and as tool messages with `requestor: "user"`: the latter are flagged
//! `by_user_device`, and [`trajectory::build`] keeps both out of the agent's runs.
//!
//! Files reach hundreds of MB upstream, so the document is streamed: the top-level object is
//! walked key by key (`tasks` and other bulky keys are skipped unbuilt, one element at a time),
//! `info` is read when it comes before `simulations` (it always does in files tau2 writes) to
//! name the agent and model, and each simulation is parsed, built and handed to the sink before
//! the next one is read. A `json_scan::Scanner` reads the file in large chunks and hands each
//! simulation over as bytes in memory, parsed with the `json_pick` seeds; messages are mapped by
//! `chat`, as tau-bench's are.

use std::cell::Cell;
use std::collections::HashMap;
use std::io::{self, Read, Seek};
use std::marker::PhantomData;

use serde::de::MapAccess;
use serde_json::Value;

use crate::ingest::chat::{chat_messages, RawMessage};
use crate::ingest::json_pick::{
    broken_at, dropped, kind_of, non_empty_str, partial, python_note, scalar_text, skip,
    whole_file, ListOf, Pick, Picked, Shape, Tracked,
};
use crate::ingest::json_scan::{ScanError, Scanner};
use crate::ingest::trajectory::{self, RunTemplate};
use crate::ingest::{Input, Locator, Sink};

const FORMAT: &str = "tau2";

/// Read one tau2 simulations file.
pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    let mut scan = match Scanner::open(input.path, &input.limits)? {
        Ok(scan) => scan,
        Err(not_json) => {
            let reason = not_json.reason("only whitespace", "a JSON list or object");
            whole_file(input, sink, FORMAT, reason);
            return Ok(());
        }
    };
    let mut state = State {
        input,
        sink,
        current: Cell::new(None),
        next: 0,
        seen: HashMap::new(),
        info_model: None,
        info_agent: None,
        wrapper_model: None,
        wrapper_agent: None,
        simulations: Simulations::Absent,
        python_outside: 0,
    };
    let outcome = state.document(&mut scan).and_then(|()| scan.end());
    if let Some(sha256) = scan.file_digest() {
        state.sink.file_digest(sha256);
    }
    state.python_outside += scan.take_python_numbers();
    if state.python_outside > 0 {
        state.sink.quarantine(partial(
            input,
            FORMAT,
            Locator::File,
            python_note(state.python_outside, "outside the simulations"),
        ));
    }
    if let Err(err) = outcome {
        let (err, offset) = scan.describe(err)?;
        broken_at(
            input,
            state.sink,
            FORMAT,
            ["record", "document"],
            &err,
            state.current.get(),
            offset,
        );
        return Ok(());
    }
    match state.simulations {
        Simulations::Read => {}
        Simulations::Absent => whole_file(
            input,
            state.sink,
            FORMAT,
            "the document is a JSON object without a simulations list",
        ),
        Simulations::Not(what) => whole_file(
            input,
            state.sink,
            FORMAT,
            format!("the document's simulations is {what}, not a list"),
        ),
    }
    Ok(())
}

/// One simulation, reduced to the keys the adapter uses.
#[derive(Default)]
struct RawSimulation {
    id: Option<Value>,
    termination_reason: Option<Value>,
    messages: Option<Shape<Vec<Shape<RawMessage>>>>,
}

impl Pick for RawSimulation {
    fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "id" => self.id = Some(map.next_value()?),
            "termination_reason" => self.termination_reason = Some(map.next_value()?),
            "messages" => self.messages = Some(map.next_value_seed(ListOf::new())?),
            _ => skip(map)?,
        }
        Ok(())
    }
}

/// The part of a results document's `info` that names the agent.
#[derive(Default)]
struct RunInfo {
    agent_info: Option<Value>,
}

impl Pick for RunInfo {
    fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "agent_info" => self.agent_info = Some(map.next_value()?),
            _ => skip(map)?,
        }
        Ok(())
    }
}

/// Whether the document's simulations were found.
enum Simulations {
    Absent,
    Read,
    Not(&'static str),
}

struct State<'a, 'b> {
    input: &'a Input<'b>,
    sink: &'a mut dyn Sink,
    /// The simulation being parsed, while it is parsed.
    current: Cell<Option<u64>>,
    next: u64,
    /// Simulation ids already stored, with the record that stored them.
    seen: HashMap<String, u64>,
    /// `info.agent_info.llm` / `.implementation` of a results document.
    info_model: Option<String>,
    info_agent: Option<String>,
    /// `model` / `agent` of a wrapper document.
    wrapper_model: Option<String>,
    wrapper_agent: Option<String>,
    simulations: Simulations,
    /// Python's special numbers read as `null` outside any simulation.
    python_outside: u64,
}

impl State<'_, '_> {
    /// The document's top level: a list of simulations, or an object holding one.
    fn document<R: Read + Seek>(&mut self, scan: &mut Scanner<R>) -> Result<(), ScanError> {
        if scan.peek()? == Some(b'[') {
            return self.simulations(scan);
        }
        let mut object = scan.enter();
        while let Some(key) = scan.next_key(&mut object)? {
            match key.as_str() {
                "info" => {
                    if let Some(info) =
                        self.optional("info", scan.parse(Picked(RunInfo::default())))?
                    {
                        self.take_info(info);
                    }
                }
                "model" => {
                    let model = self.optional("model", scan.parse(PhantomData::<Value>))?;
                    self.wrapper_model = model.and_then(|m| m.as_str().map(str::to_string));
                }
                "agent" => {
                    let agent = self.optional("agent", scan.parse(PhantomData::<Value>))?;
                    self.wrapper_agent = agent.and_then(|a| a.as_str().map(str::to_string));
                }
                "simulations" => match scan.peek()? {
                    Some(b'[') => self.simulations(scan)?,
                    Some(b'{') => {
                        scan.drain_object()?;
                        self.simulations = Simulations::Not("an object");
                    }
                    _ => {
                        let value = scan.parse(PhantomData::<Value>)?;
                        self.simulations = Simulations::Not(kind_of(&value));
                    }
                },
                _ => scan.skip()?,
            }
        }
        Ok(())
    }

    /// Read the list of simulations [`Scanner::peek`] just found, one at a time.
    fn simulations<R: Read + Seek>(&mut self, scan: &mut Scanner<R>) -> Result<(), ScanError> {
        self.simulations = Simulations::Read;
        let mut list = scan.enter();
        while scan.next_element(&mut list)? {
            let index = self.next;
            self.python_outside += scan.take_python_numbers();
            let item = scan.parse(Tracked {
                current: &self.current,
                index,
                inner: Picked(RawSimulation::default()),
            });
            match item {
                Ok(item) => {
                    self.next += 1;
                    let python = scan.take_python_numbers();
                    self.simulation(index, item, python);
                }
                Err(ScanError::Skipped(reason)) => {
                    self.next += 1;
                    self.current.set(None);
                    self.sink.records_read(1);
                    self.sink.quarantine(dropped(
                        self.input,
                        FORMAT,
                        Locator::Record(index),
                        format!("simulation {index} {reason}; it was passed over"),
                    ));
                }
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// A value outside the simulations that was passed over (too large or too deep) is noted
    /// and read as absent.
    fn optional<T>(
        &mut self,
        key: &str,
        parsed: Result<T, ScanError>,
    ) -> Result<Option<T>, ScanError> {
        match parsed {
            Ok(value) => Ok(Some(value)),
            Err(ScanError::Skipped(reason)) => {
                self.sink.quarantine(partial(
                    self.input,
                    FORMAT,
                    Locator::File,
                    format!("the document's {key} {reason}; it was passed over and is not used"),
                ));
                Ok(None)
            }
            Err(err) => Err(err),
        }
    }

    fn take_info(&mut self, info: Shape<RunInfo>) {
        let Some(Value::Object(agent)) = info.ok().and_then(|i| i.agent_info) else {
            return;
        };
        self.info_model = agent.get("llm").and_then(non_empty_str);
        self.info_agent = agent.get("implementation").and_then(non_empty_str);
    }

    fn template(&self) -> RunTemplate {
        RunTemplate {
            format: FORMAT.to_string(),
            source: self.input.display.to_string(),
            agent: self
                .info_agent
                .clone()
                .or_else(|| self.wrapper_agent.clone()),
            model: self
                .info_model
                .clone()
                .or_else(|| self.wrapper_model.clone()),
        }
    }

    fn simulation(&mut self, index: u64, simulation: Shape<RawSimulation>, python: u64) {
        self.sink.records_read(1);
        let simulation = match self.prepare(index, simulation) {
            Ok(s) => s,
            Err(reason) => {
                self.sink
                    .quarantine(dropped(self.input, FORMAT, Locator::Record(index), reason));
                return;
            }
        };
        let (id, messages, termination) = simulation;
        if python > 0 {
            self.sink.quarantine(partial(
                self.input,
                FORMAT,
                Locator::Record(index),
                python_note(python, &format!("in simulation {id}")),
            ));
        }
        if messages.is_empty() {
            // Real files hold simulations that failed before any message (for example
            // `termination_reason: infrastructure_error`): stored, with nothing to audit.
            self.sink.quarantine(partial(
                self.input,
                FORMAT,
                Locator::Record(index),
                format!(
                    "simulation {id} has no messages{}; stored as a conversation without runs",
                    termination
                        .map(|t| format!(" (termination_reason {t:?})"))
                        .unwrap_or_default()
                ),
            ));
        }
        let conversation = trajectory::build(
            &id,
            messages,
            &self.template(),
            &mut *self.sink,
            Locator::Record(index),
        );
        self.seen.insert(id, index);
        self.sink.conversation(conversation, index);
    }

    /// Check a simulation and map its messages; `Err` is the reason it is dropped.
    #[allow(clippy::type_complexity)]
    fn prepare(
        &self,
        index: u64,
        simulation: Shape<RawSimulation>,
    ) -> Result<(String, Vec<trajectory::ChatMessage>, Option<String>), String> {
        let simulation =
            simulation.map_err(|what| format!("simulation {index} is {what}, not an object"))?;
        let id = simulation
            .id
            .as_ref()
            .and_then(scalar_text)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| format!("simulation {index} has no id"))?;
        if let Some(first) = self.seen.get(&id) {
            return Err(format!(
                "simulation id {id} repeats record {first} of this file; the first copy is kept"
            ));
        }
        let list = match simulation.messages {
            None => return Err(format!("simulation {id} has no messages list")),
            Some(Err(what)) => {
                return Err(format!("simulation {id}: messages is {what}, not a list"))
            }
            Some(Ok(list)) => list,
        };
        let messages = chat_messages(list).map_err(|e| format!("simulation {id}: {e}"))?;
        let termination = simulation
            .termination_reason
            .as_ref()
            .and_then(non_empty_str);
        Ok((id, messages, termination))
    }
}

/// tau2-bench simulations (a results document, a wrapped list, or a bare list).
pub struct Tau2Adapter;

impl crate::ingest::Adapter for Tau2Adapter {
    fn name(&self) -> &'static str {
        "tau2"
    }
    fn family(&self) -> &'static str {
        "tau2"
    }
    fn about(&self) -> &'static str {
        "tau2-bench simulations (a results document, a wrapped list, or a bare list)"
    }
    fn detect(&self, head: &crate::ingest::Head<'_>) -> crate::ingest::Match {
        let t = head.text;
        let object = t.starts_with('{')
            && (t.contains("\"simulations\"")
                // A results document whose task list pushes `simulations` past the head.
                || (t.contains("\"agent_info\"")
                    && t.contains("\"user_info\"")
                    && t.contains("\"environment_info\"")));
        let list = t.starts_with('[')
            && t.contains("\"messages\"")
            && (t.contains("\"termination_reason\"") || t.contains("\"task_id\""));
        crate::ingest::Match::strong_if(object || list)
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> std::io::Result<()> {
        read(input, sink)
    }
}

impl crate::ingest::Format {
    #[allow(non_upper_case_globals)]
    pub const Tau2: crate::ingest::Format = crate::ingest::Format(&Tau2Adapter);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::{Collect, Severity};
    use crate::model::{EventKind, LandingFlags, Role};
    use std::io::Write;

    fn read_text(text: &str) -> Collect {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        let mut sink = Collect::default();
        read(&Input::new(file.path(), "sims.json"), &mut sink).unwrap();
        sink
    }

    /// An airline-like simulation: greeting, one question, one call with an object argument.
    fn sim(id: &str) -> String {
        format!(
            r#"{{"id": "{id}", "task_id": "3", "trial": 0, "termination_reason": "user_stop",
            "reward_info": {{"reward": 1.0}},
            "messages": [
              {{"role": "assistant", "content": "Hi! How can I help you today?", "tool_calls": null,
                "turn_idx": 0, "timestamp": "2025-10-05T07:52:53.000"}},
              {{"role": "user", "content": "Cancel my trip.", "tool_calls": null, "turn_idx": 1,
                "timestamp": "2025-10-05T07:52:54.000"}},
              {{"role": "assistant", "content": null, "turn_idx": 2, "timestamp": "2025-10-05T07:52:55.000",
                "tool_calls": [{{"id": "call_1", "name": "get_reservation_details",
                  "arguments": {{"reservation_id": "ABC123", "a": [1, 2.5]}}, "requestor": "assistant"}}]}},
              {{"role": "tool", "id": "call_1", "content": "{{\"status\": \"ok\"}}", "requestor": "assistant",
                "error": false, "turn_idx": 3, "timestamp": "2025-10-05T07:52:55.250"}},
              {{"role": "assistant", "content": "Done.", "tool_calls": null, "turn_idx": 4,
                "timestamp": "2025-10-05T07:52:56.000"}},
              {{"role": "user", "content": "Thanks ###STOP###", "tool_calls": null, "turn_idx": 5,
                "timestamp": "2025-10-05T07:52:57.000"}}
            ]}}"#
        )
    }

    fn results_doc(sims: &[String]) -> String {
        format!(
            r#"{{"timestamp": "2025-10-05T07:52:52.930199",
            "info": {{"git_commit": "abc", "num_trials": 1,
                     "user_info": {{"implementation": "user_simulator", "llm": "xai/grok-3"}},
                     "agent_info": {{"implementation": "llm_agent", "llm": "xai/grok-4",
                                    "llm_args": {{"temperature": 0.0}}}},
                     "environment_info": {{"domain_name": "airline"}}}},
            "tasks": [{{"id": "3", "user_scenario": {{"instructions": "{}"}}}}],
            "simulations": [{}]}}"#,
            "long text ".repeat(2000),
            sims.join(",\n")
        )
    }

    fn dropped_at(sink: &Collect) -> Vec<Locator> {
        sink.quarantined
            .iter()
            .filter(|q| q.severity == Severity::Dropped)
            .map(|q| q.locator.clone())
            .collect()
    }

    #[test]
    fn python_numbers_and_oversized_simulations_cost_one_record_at_most() {
        let nan = sim("s-1").replace("\"reward\": 1.0", "\"reward\": NaN");
        let inf = sim("s-3").replace("\"trial\": 0", "\"trial\": 0, \"cost\": Infinity");
        let big = sim("s-2").replace("Cancel my trip.", &"Cancel my trip. ".repeat(2000));
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(results_doc(&[nan, big, inf, sim("s-4")]).as_bytes())
            .unwrap();
        let mut sink = Collect::default();
        let mut input = Input::new(file.path(), "sims.json");
        input.limits.record_bytes = 8192;
        read(&input, &mut sink).unwrap();
        assert_eq!(sink.records, 4);
        let ids: Vec<_> = sink
            .conversations
            .iter()
            .map(|(c, _)| c.id.as_str())
            .collect();
        assert_eq!(ids, vec!["s-1", "s-3", "s-4"]);
        assert_eq!(dropped_at(&sink), vec![Locator::Record(1)]);
        let reasons: Vec<_> = sink.quarantined.iter().map(|q| q.reason.as_str()).collect();
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert!(reasons[0].starts_with("1 number(s) in simulation s-1 written as NaN"));
        assert!(
            reasons[1].starts_with("simulation 1 is 32.") && reasons[1].contains("over the 8 KiB"),
            "{}",
            reasons[1]
        );
        assert!(reasons[2].starts_with("1 number(s) in simulation s-3"));
    }

    #[test]
    fn results_document() {
        let sink = read_text(&results_doc(&[sim("s-1"), sim("s-2")]));
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        assert_eq!(sink.records, 2);
        let ids: Vec<_> = sink
            .conversations
            .iter()
            .map(|(c, at)| (c.id.as_str(), *at))
            .collect();
        assert_eq!(ids, vec![("s-1", 0), ("s-2", 1)]);
        let conv = &sink.conversations[0].0;
        // The greeting is turn 0; the cancel request is turn 1; the STOP message is turn 2.
        let turns: Vec<u32> = conv.runs.iter().map(|r| r.turn).collect();
        assert_eq!(turns, vec![0, 1, 2]);
        let run = &conv.runs[1];
        assert_eq!(run.format, "tau2");
        assert_eq!(run.source, "sims.json");
        assert_eq!(run.model.as_deref(), Some("xai/grok-4"));
        assert_eq!(run.agent.as_deref(), Some("llm_agent"));
        assert_eq!(run.answer.as_deref(), Some("Done."));
        let landing = run.landings().next().unwrap();
        assert_eq!(
            landing.tool_name.as_deref(),
            Some("get_reservation_details")
        );
        // Object arguments become JSON text in recorded key order.
        assert_eq!(
            landing.arguments.as_deref(),
            Some(r#"{"reservation_id":"ABC123","a":[1,2.5]}"#)
        );
        assert_eq!(landing.text.as_deref(), Some(r#"{"status": "ok"}"#));
        assert_eq!(landing.duration_ms, Some(250.0));
        assert!(!landing.error);
        assert_eq!(
            run.started_ms,
            trajectory::parse_iso_ms("2025-10-05T07:52:54")
        );
        assert_eq!(run.duration_ms, Some(2000.0));
    }

    #[test]
    fn bare_list_of_simulations() {
        let sink = read_text(&format!("[{}, {}]", sim("a"), sim("b")));
        assert!(sink.quarantined.is_empty());
        assert_eq!(sink.conversations.len(), 2);
        let run = &sink.conversations[1].0.runs[1];
        assert_eq!((run.model.as_deref(), run.agent.as_deref()), (None, None));
        assert_eq!(run.landings().count(), 1);
    }

    #[test]
    fn wrapper_document() {
        let text = format!(
            r#"{{"domain": "airline", "agent": "adaptive_agent", "model": "claude-opus-4-6",
                "total_tasks": 1, "passed": 1, "pass_rate": 100.0, "simulations": [{}]}}"#,
            sim("w")
        );
        let sink = read_text(&text);
        assert!(sink.quarantined.is_empty());
        let run = &sink.conversations[0].0.runs[1];
        assert_eq!(run.model.as_deref(), Some("claude-opus-4-6"));
        assert_eq!(run.agent.as_deref(), Some("adaptive_agent"));
    }

    #[test]
    fn info_after_simulations_is_not_applied_to_them() {
        // Streaming: a simulation is emitted before later keys are read.
        let text = format!(
            r#"{{"simulations": [{}], "info": {{"agent_info": {{"llm": "late"}}}}}}"#,
            sim("x")
        );
        let sink = read_text(&text);
        assert_eq!(sink.conversations.len(), 1);
        assert_eq!(sink.conversations[0].0.runs[0].model, None);
    }

    #[test]
    fn reused_tool_call_ids_pair_in_order() {
        let text = r#"[{"id": "r", "messages": [
            {"role": "user", "content": "go", "tool_calls": null},
            {"role": "assistant", "content": null, "tool_calls": [
               {"id": "t", "name": "one", "arguments": {}, "requestor": "assistant"},
               {"id": "t", "name": "two", "arguments": {}, "requestor": "assistant"}]},
            {"role": "tool", "id": "t", "content": "first", "requestor": "assistant", "error": false},
            {"role": "tool", "id": "t", "content": "second", "requestor": "assistant", "error": false},
            {"role": "assistant", "content": null, "tool_calls": [
               {"id": "t", "name": "three", "arguments": {"n": 3}, "requestor": "assistant"}]},
            {"role": "tool", "id": "t", "content": "third", "requestor": "assistant", "error": false},
            {"role": "assistant", "content": "done", "tool_calls": null}]}]"#;
        let sink = read_text(text);
        assert!(sink.quarantined.is_empty());
        let pairs: Vec<_> = sink.conversations[0].0.runs[0]
            .landings()
            .map(|l| (l.tool_name.clone().unwrap(), l.text.clone().unwrap()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("one".to_string(), "first".to_string()),
                ("two".to_string(), "second".to_string()),
                ("three".to_string(), "third".to_string())
            ]
        );
    }

    #[test]
    fn user_device_calls_are_not_the_agents() {
        // Telecom: the simulated user toggles airplane mode on its own phone.
        let text = r#"{"info": {"agent_info": {"llm": "gpt-4o"}}, "simulations": [{"id": "tel",
          "messages": [
            {"role": "assistant", "content": "Hi! How can I help you today?", "tool_calls": null},
            {"role": "user", "content": "My data does not work.", "tool_calls": null},
            {"role": "assistant", "content": "Please check airplane mode.", "tool_calls": null},
            {"role": "user", "content": null, "tool_calls": [
              {"id": "call_d", "name": "toggle_airplane_mode", "arguments": {}, "requestor": "user"}]},
            {"role": "tool", "id": "call_d", "content": "Airplane mode is now OFF.", "requestor": "user",
             "error": false},
            {"role": "user", "content": "I turned it off.", "tool_calls": null},
            {"role": "assistant", "content": null, "tool_calls": [
              {"id": "call_a", "name": "get_customer_by_phone", "arguments": {"phone_number": "555"},
               "requestor": "assistant"}]},
            {"role": "tool", "id": "call_a", "content": "{\"customer_id\": \"C1\"}",
             "requestor": "assistant", "error": false},
            {"role": "assistant", "content": "Thanks, all set.", "tool_calls": null}]}]}"#;
        let sink = read_text(text);
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        let conv = &sink.conversations[0].0;
        let turns: Vec<u32> = conv.runs.iter().map(|r| r.turn).collect();
        assert_eq!(turns, vec![0, 1, 2]);
        assert_eq!(conv.runs[1].landings().count(), 0);
        let landings: Vec<_> = conv.runs[2].landings().collect();
        assert_eq!(landings.len(), 1);
        assert_eq!(
            landings[0].tool_name.as_deref(),
            Some("get_customer_by_phone")
        );
        for i in 0..conv.runs.len() {
            assert!(conv
                .history_for(i)
                .iter()
                .all(|m| !m.text.contains("Airplane mode is now OFF")));
        }
    }

    #[test]
    fn tool_errors_are_kept() {
        let text = r#"[{"id": "e", "messages": [
            {"role": "user", "content": "book it", "tool_calls": null},
            {"role": "assistant", "content": null, "tool_calls": [
               {"id": "b", "name": "book_reservation", "arguments": {"x": 1}, "requestor": "assistant"}]},
            {"role": "tool", "id": "b", "content": "Error: payment method not found", "requestor": "assistant",
             "error": true},
            {"role": "assistant", "content": "That failed.", "tool_calls": null}]}]"#;
        let sink = read_text(text);
        let run = &sink.conversations[0].0.runs[0];
        let landing = run.landings().next().unwrap();
        assert!(landing.error);
        assert!(!landing.has_flag(LandingFlags::UNANSWERED));
        let tool_message = run
            .events_of(EventKind::Message)
            .find(|e| e.role == Some(Role::Tool))
            .unwrap();
        assert!(tool_message.error);
    }

    #[test]
    fn repeated_simulation_id_keeps_the_first() {
        let second = sim("dup").replace("Done.", "Second copy.");
        let sink = read_text(&results_doc(&[sim("dup"), sim("other"), second]));
        assert_eq!(sink.records, 3);
        let ids: Vec<_> = sink
            .conversations
            .iter()
            .map(|(c, _)| c.id.as_str())
            .collect();
        assert_eq!(ids, vec!["dup", "other"]);
        assert_eq!(
            sink.conversations[0].0.runs[1].answer.as_deref(),
            Some("Done.")
        );
        assert_eq!(dropped_at(&sink), vec![Locator::Record(2)]);
        assert!(sink.quarantined[0].reason.contains("simulation id dup"));
        assert!(sink.quarantined[0].reason.contains("record 0"));
    }

    #[test]
    fn a_dropped_copy_does_not_block_a_later_good_one() {
        let text = format!(r#"[{{"id": "same", "messages": 3}}, {}]"#, sim("same"));
        let sink = read_text(&text);
        assert_eq!(dropped_at(&sink), vec![Locator::Record(0)]);
        assert_eq!(sink.conversations.len(), 1);
        assert_eq!(sink.conversations[0].1, 1);
    }

    #[test]
    fn garbage_among_good_simulations() {
        let text = results_doc(&[
            sim("g1"),
            "null".into(),
            r#"{"messages": []}"#.into(),
            r#"{"id": "no-messages"}"#.into(),
            r#"{"id": "bad-role", "messages": [{"role": 5}]}"#.into(),
            r#"{"id": "bad-calls", "messages": [{"role": "assistant", "tool_calls": {"id": 1}}]}"#
                .into(),
            r#"[{"id": "in-a-list"}]"#.into(),
            sim("g2"),
        ]);
        let sink = read_text(&text);
        assert_eq!(sink.records, 8);
        let ids: Vec<_> = sink
            .conversations
            .iter()
            .map(|(c, at)| (c.id.as_str(), *at))
            .collect();
        assert_eq!(ids, vec![("g1", 0), ("g2", 7)]);
        assert_eq!(
            dropped_at(&sink),
            (1..=6).map(Locator::Record).collect::<Vec<_>>()
        );
        let reasons: Vec<&str> = sink.quarantined.iter().map(|q| q.reason.as_str()).collect();
        assert!(reasons[0].contains("simulation 1 is null"));
        assert!(reasons[1].contains("simulation 2 has no id"));
        assert!(reasons[2].contains("no-messages has no messages list"));
        assert!(reasons[3].contains("bad-role: message 0: role is a number"));
        assert!(reasons[4].contains("tool_calls is an object"));
        assert!(reasons[5].contains("is a list"));
        assert!(sink.quarantined.iter().all(|q| q.format == Some("tau2")));
    }

    #[test]
    fn simulation_without_messages_is_stored_empty() {
        let text =
            r#"[{"id": "infra", "termination_reason": "infrastructure_error", "messages": []}]"#;
        let sink = read_text(text);
        assert_eq!(sink.records, 1);
        assert_eq!(sink.conversations.len(), 1);
        assert!(sink.conversations[0].0.runs.is_empty());
        assert_eq!(sink.quarantined.len(), 1);
        assert_eq!(sink.quarantined[0].severity, Severity::Partial);
        assert!(sink.quarantined[0].reason.contains("infrastructure_error"));
    }

    #[test]
    fn truncated_inside_a_simulation_keeps_the_earlier_ones() {
        let full = results_doc(&[sim("t1"), sim("t2"), sim("t3")]);
        let cut = full.find(r#""id": "t3""#).unwrap() + 40;
        let sink = read_text(&full[..cut]);
        let ids: Vec<_> = sink
            .conversations
            .iter()
            .map(|(c, _)| c.id.as_str())
            .collect();
        assert_eq!(ids, vec!["t1", "t2"]);
        assert_eq!(sink.records, 3);
        assert_eq!(dropped_at(&sink), vec![Locator::Record(2)]);
        assert!(sink.quarantined[0].reason.contains("EOF while parsing"));
    }

    #[test]
    fn syntax_error_before_the_simulations_names_a_byte() {
        let full = results_doc(&[sim("t1")]);
        let at = full.find("long text").unwrap() + 5;
        let broken = format!("{}\u{1}{}", &full[..at], &full[at..]);
        let sink = read_text(&broken);
        assert!(sink.conversations.is_empty());
        assert_eq!(sink.records, 1);
        let [Locator::Byte(byte)] = dropped_at(&sink)[..] else {
            panic!("{:?}", sink.quarantined)
        };
        assert!(
            (at as u64..=at as u64 + 2).contains(&byte),
            "{byte} vs {at}"
        );
        assert!(sink.quarantined[0].reason.contains("control character"));
    }

    #[test]
    fn empty_and_non_json_files_are_one_dropped_record() {
        for (text, expect) in [
            ("", "empty"),
            ("not json at all", "not a JSON list or object"),
            ("12", "not a JSON list or object"),
            (
                r#"{"timestamp": "x", "info": {}}"#,
                "without a simulations list",
            ),
            (r#"{"simulations": null}"#, "simulations is null"),
            (r#"{"simulations": {"a": 1}}"#, "simulations is an object"),
        ] {
            let sink = read_text(text);
            assert!(sink.conversations.is_empty());
            assert_eq!(sink.records, 1, "{text}");
            assert_eq!(dropped_at(&sink), vec![Locator::File], "{text}");
            assert!(
                sink.quarantined[0].reason.contains(expect),
                "{:?}",
                sink.quarantined
            );
        }
    }

    #[test]
    fn empty_simulation_list_reads_nothing() {
        let sink = read_text(&results_doc(&[]));
        assert_eq!((sink.records, sink.conversations.len()), (0, 0));
        assert!(sink.quarantined.is_empty());
    }
}
