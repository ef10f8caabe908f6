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
//! walked key by key (`tasks` and other bulky keys are skipped unread), `info` is read when it
//! comes before `simulations` (it always does in files tau2 writes) to name the agent and model,
//! and each simulation is parsed, built and handed to the sink before the next one is read.
//! The streaming plumbing is shared with [`super::tau_bench`].

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::io;

use serde::de::{
    self, DeserializeSeed, Deserializer as _, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::Value;

use crate::ingest::tau_bench::{
    broken, chat_messages, drain_map, dropped, non_empty_str, open, other_values, partial,
    scalar_text, whole_file, ListSeed, ObjectSeed, Opened, Pick, RawMessage, Shape, Tracked,
};
use crate::ingest::trajectory::{self, RunTemplate};
use crate::ingest::{Input, Locator, Sink};

const FORMAT: &str = "tau2";

/// Read one tau2 simulations file.
pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    let mut doc = match open(input)? {
        Opened::Doc(doc) => doc,
        Opened::Unreadable(reason) => {
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
    };
    let outcome = (&mut doc.de)
        .deserialize_any(Top(&mut state))
        .and_then(|()| doc.de.end());
    if let Err(err) = outcome {
        return broken(
            input,
            state.sink,
            FORMAT,
            err,
            state.current.get(),
            doc.offset(),
        );
    }
    match state.simulations {
        Simulations::Read => {}
        Simulations::Absent => whole_file(
            input,
            state.sink,
            FORMAT,
            "the document is a JSON object without a simulations list".into(),
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
            "messages" => self.messages = Some(map.next_value_seed(ListSeed::new())?),
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
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
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
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
}

impl State<'_, '_> {
    /// Read a list of simulations, one at a time.
    fn simulations<'de, A: SeqAccess<'de>>(&mut self, mut seq: A) -> Result<(), A::Error> {
        self.simulations = Simulations::Read;
        loop {
            let index = self.next;
            let item = seq.next_element_seed(Tracked {
                current: &self.current,
                index,
                inner: ObjectSeed::<RawSimulation>::new(),
            })?;
            let Some(item) = item else { break };
            self.next += 1;
            self.simulation(index, item);
        }
        Ok(())
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

    fn simulation(&mut self, index: u64, simulation: Shape<RawSimulation>) {
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

/// The document's top level: a list of simulations, or an object holding one.
struct Top<'s, 'a, 'b>(&'s mut State<'a, 'b>);

impl<'de> Visitor<'de> for Top<'_, '_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a tau2 results document or a list of simulations")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        self.0.simulations(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let state = self.0;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "info" => {
                    let info = map.next_value_seed(ObjectSeed::<RunInfo>::new())?;
                    state.take_info(info);
                }
                "model" => {
                    state.wrapper_model = map.next_value::<Value>()?.as_str().map(str::to_string)
                }
                "agent" => {
                    state.wrapper_agent = map.next_value::<Value>()?.as_str().map(str::to_string)
                }
                "simulations" => {
                    if let Err(what) = map.next_value_seed(SimulationList(&mut *state))? {
                        state.simulations = Simulations::Not(what);
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// The value of a document's `simulations` key, streamed into the state.
struct SimulationList<'s, 'a, 'b>(&'s mut State<'a, 'b>);

impl<'de> DeserializeSeed<'de> for SimulationList<'_, '_, '_> {
    type Value = Shape<()>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Shape<()>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for SimulationList<'_, '_, '_> {
    type Value = Shape<()>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of simulations")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.simulations(seq).map(Ok)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map)?;
        Ok(Err("an object"))
    }

    other_values!();
}
