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

use crate::error::Error;
use std::cell::Cell;
use std::collections::HashMap;
use std::io::{self, Read, Seek};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::de::DeserializeSeed;

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

/// Read one tau2 simulations file: a results document (with, in the dir layout, the simulation
/// files beside it), a wrapper, a bare list, or one simulation saved on its own.
pub fn read(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
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
        index: None,
        single: false,
        member: false,
    };
    if is_single_simulation(&crate::ingest::read_head(input.path)?) {
        // `simulations/<id>.json` read on its own: the run's agent and model are in the
        // `results.json` beside its folder.
        if let Some(results) = set_results(input.path) {
            state.take_results_info(&results);
        }
        state.single = true;
        state.read_single()?;
        return Ok(());
    }
    let set = companions(input.path);
    if !state.read_document()? {
        return Ok(());
    }
    match (&state.simulations, &set) {
        (Simulations::Read, _) | (Simulations::Absent, Some(_)) => {}
        (Simulations::Absent, None) => whole_file(
            input,
            state.sink,
            FORMAT,
            "the document is a JSON object without a simulations list",
        ),
        (Simulations::Not(what), _) => whole_file(
            input,
            state.sink,
            FORMAT,
            format!("the document's simulations is {what}, not a list"),
        ),
    }
    if let Some(files) = set {
        state.read_set(&files)?;
    }
    Ok(())
}

/// Does a file's head hold one simulation (tau2 writes `id` first, then `task_id`)?
fn is_single_simulation(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let text = text.trim_start_matches('\u{feff}');
    crate::ingest::json_pick::first_key(text) == Some("id")
        && text.contains("\"task_id\"")
        && (text.contains("\"messages\"") || text.contains("\"ticks\""))
}

/// The simulation files of a dir-layout results document: `results.json` with a `simulations/`
/// folder beside it (tau2 writes the dir layout so, and reads a results file with that folder
/// beside it as one). Sorted by name, as tau2 loads them.
pub(crate) fn companions(path: &Path) -> Option<Vec<PathBuf>> {
    if path.file_name()? != "results.json" {
        return None;
    }
    let folder = path.parent()?.join("simulations");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
        .collect();
    files.sort();
    Some(files)
}

/// The `results.json` whose set a simulation file belongs to (`<dir>/simulations/<id>.json`
/// beside `<dir>/results.json`).
fn set_results(path: &Path) -> Option<PathBuf> {
    let folder = path.parent()?;
    if folder.file_name()? != "simulations" {
        return None;
    }
    let results = folder.parent()?.join("results.json");
    results.is_file().then_some(results)
}

/// The messages a full-duplex simulation's ticks hold, in tau2's message shape, in tick order.
/// Each tick holds what each side said in it (`agent_chunk`, `user_chunk`: a piece of an
/// utterance, or nothing while it is silent), the tool calls each side made and their results.
/// Consecutive pieces of one side's speech are joined into one message (with a space where the
/// utterance changes); a tool call ends its side's message (tau2 files the calls on the message
/// that is speaking) and its results follow. `Err` when no tick holds text or a call: the run was
/// saved without transcripts and there is nothing to audit.
fn tick_messages(id: &str, ticks: Value) -> crate::error::Result<Vec<Shape<RawMessage>>> {
    let Value::Array(ticks) = ticks else {
        return Err(Error::Malformed(format!(
            "simulation {id}: ticks is {}, not a list",
            kind_of(&ticks)
        )));
    };
    let count = ticks.len();
    let mut out: Vec<Value> = Vec::new();
    // The speech being gathered: role, text, timestamp, utterance ids of its last piece.
    let mut open: Option<(&'static str, String, Value, Value)> = None;
    let flush = |open: &mut Option<(&'static str, String, Value, Value)>, out: &mut Vec<Value>| {
        if let Some((role, text, timestamp, _)) = open.take() {
            out.push(serde_json::json!({"role": role, "content": text, "timestamp": timestamp}));
        }
    };
    for tick in &ticks {
        for (role, chunk, calls, results) in [
            (
                "assistant",
                "agent_chunk",
                "agent_tool_calls",
                "agent_tool_results",
            ),
            ("user", "user_chunk", "user_tool_calls", "user_tool_results"),
        ] {
            let chunk = tick.get(chunk);
            let text = chunk
                .and_then(|c| c.get("content"))
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty());
            let timestamp = chunk
                .and_then(|c| c.get("timestamp"))
                .filter(|t| !t.is_null())
                .or_else(|| tick.get("timestamp"))
                .cloned()
                .unwrap_or(Value::Null);
            let utterances = chunk
                .and_then(|c| c.get("utterance_ids"))
                .cloned()
                .unwrap_or(Value::Null);
            if let Some(text) = text {
                match &mut open {
                    Some((r, gathered, _, last)) if *r == role => {
                        if *last != utterances && !gathered.ends_with(' ') && !text.starts_with(' ')
                        {
                            gathered.push(' ');
                        }
                        gathered.push_str(text);
                        *last = utterances;
                    }
                    _ => {
                        flush(&mut open, &mut out);
                        open = Some((role, text.to_string(), timestamp.clone(), utterances));
                    }
                }
            }
            let calls = match tick.get(calls) {
                Some(Value::Array(calls)) if !calls.is_empty() => Some(calls.clone()),
                _ => None,
            };
            if let Some(calls) = calls {
                let (content, at) = match open.take() {
                    Some((r, gathered, at, _)) if r == role => (Value::String(gathered), at),
                    other => {
                        open = other;
                        flush(&mut open, &mut out);
                        (Value::Null, timestamp.clone())
                    }
                };
                out.push(serde_json::json!({"role": role, "content": content,
                                            "tool_calls": calls, "timestamp": at}));
            }
            if let Some(Value::Array(results)) = tick.get(results) {
                if !results.is_empty() {
                    flush(&mut open, &mut out);
                    out.extend(results.iter().cloned());
                }
            }
        }
    }
    flush(&mut open, &mut out);
    if out.is_empty() {
        return Err(Error::Malformed(format!(
            "simulation {id} is a full-duplex run of {count} tick(s), and no tick holds text, a \
             tool call or a tool result (it was saved without transcripts); there is nothing to \
             audit"
        )));
    }
    out.into_iter()
        .map(|m| {
            Picked(RawMessage::default()).deserialize(m).map_err(|e| {
                Error::Malformed(format!(
                    "simulation {id}: a tick's message cannot be read: {e}"
                ))
            })
        })
        .collect()
}

/// One simulation, reduced to the keys the adapter uses.
#[derive(Default)]
struct RawSimulation {
    id: Option<Value>,
    termination_reason: Option<Value>,
    messages: Option<Shape<Vec<Shape<RawMessage>>>>,
    /// Full-duplex (voice) runs: what happened in each tick, instead of `messages`.
    ticks: Option<Value>,
}

impl Pick for RawSimulation {
    fn pick<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "id" => self.id = Some(map.next_value()?),
            "termination_reason" => self.termination_reason = Some(map.next_value()?),
            "messages" => self.messages = Some(map.next_value_seed(ListOf::new())?),
            "ticks" => self.ticks = Some(map.next_value()?),
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
    /// The ids a results document's `simulation_index` lists (the dir layout), in order.
    index: Option<Vec<String>>,
    /// The file is one simulation (a dir layout's `simulations/<id>.json`): quarantine entries
    /// name the whole file.
    single: bool,
    /// The file is a member of the set its index reads (a dir layout's simulation): its digest
    /// is not the input's, which the manifest names by its index file's.
    member: bool,
}

impl State<'_, '_> {
    /// Walk the file as a results document, a wrapper or a list, storing its simulations.
    /// `false` when it broke off (what broke is quarantined).
    fn read_document(&mut self) -> io::Result<bool> {
        let input = self.input;
        let mut scan = match Scanner::open(input.path, &input.limits)? {
            Ok(scan) => scan,
            Err(not_json) => {
                let reason = not_json.reason("only whitespace", "a JSON list or object");
                whole_file(input, self.sink, FORMAT, reason);
                return Ok(false);
            }
        };
        let outcome = self.document(&mut scan).and_then(|()| scan.end());
        if let Some(sha256) = scan.file_digest() {
            self.sink.file_digest(sha256);
        }
        self.python_outside += scan.take_python_numbers();
        if self.python_outside > 0 {
            self.sink.quarantine(partial(
                input,
                FORMAT,
                Locator::File,
                python_note(self.python_outside, "outside the simulations"),
            ));
        }
        if let Err(err) = outcome {
            let (err, offset) = scan.describe(err)?;
            broken_at(
                input,
                self.sink,
                FORMAT,
                ["record", "document"],
                &err,
                self.current.get(),
                offset,
            );
            return Ok(false);
        }
        Ok(true)
    }

    /// The file is one simulation: one record, numbered `self.next`.
    fn read_single(&mut self) -> io::Result<()> {
        let input = self.input;
        let index = self.next;
        self.next += 1;
        let mut scan = match Scanner::open(input.path, &input.limits)? {
            Ok(scan) => scan,
            Err(not_json) => {
                let reason = not_json.reason("only whitespace", "a JSON object");
                whole_file(input, self.sink, FORMAT, reason);
                return Ok(());
            }
        };
        let parsed = scan
            .parse(Picked(RawSimulation::default()))
            .and_then(|sim| scan.end().map(|()| sim));
        if let Some(sha256) = scan.file_digest().filter(|_| !self.member) {
            self.sink.file_digest(sha256);
        }
        match parsed {
            Ok(simulation) => {
                let python = scan.take_python_numbers();
                self.simulation(index, simulation, python);
            }
            Err(ScanError::Skipped(reason)) => {
                self.sink.records_read(1);
                let reason = format!("the simulation {reason}; it was passed over");
                self.sink
                    .quarantine(dropped(input, FORMAT, Locator::File, reason));
            }
            Err(err) => {
                let (err, offset) = scan.describe(err)?;
                broken_at(
                    input,
                    self.sink,
                    FORMAT,
                    ["record", "document"],
                    &err,
                    None,
                    offset,
                );
            }
        }
        Ok(())
    }

    /// The dir layout: every simulation file of the set, in the index's order, each one record
    /// of this input, then the simulations the index lists that have no file. The index only summarises
    /// simulations, so a simulation it lists and a file holds is read once, from the file; a
    /// simulation the document itself also holds is stored once (the first copy).
    fn read_set(&mut self, files: &[PathBuf]) -> io::Result<()> {
        let listed: Vec<String> = self.index.clone().unwrap_or_default();
        let stem_of = |p: &PathBuf| p.file_stem().map(|s| s.to_string_lossy().into_owned());
        // The index's order (the run's), then the files it does not list, by name; looked up by
        // stem, so a set of many simulations costs time linear in its files.
        let mut by_stem: HashMap<String, usize> = HashMap::with_capacity(files.len());
        for (at, path) in files.iter().enumerate() {
            if let Some(stem) = stem_of(path) {
                by_stem.entry(stem).or_insert(at);
            }
        }
        let mut taken = vec![false; files.len()];
        let mut ordered: Vec<&PathBuf> = Vec::with_capacity(files.len());
        let mut missing: Vec<&String> = Vec::new();
        for id in &listed {
            // An id listed twice is read twice, as the index says (its second copy is then a
            // duplicate simulation).
            match by_stem.get(id) {
                Some(&at) => {
                    taken[at] = true;
                    ordered.push(&files[at]);
                }
                None => missing.push(id),
            }
        }
        let unlisted_from = ordered.len();
        ordered.extend(
            files
                .iter()
                .enumerate()
                .filter(|(at, _)| !taken[*at])
                .map(|(_, p)| p),
        );
        for (n, path) in ordered.into_iter().enumerate() {
            let display = match Path::new(self.input.display).parent() {
                Some(dir) => dir
                    .join("simulations")
                    .join(path.file_name().unwrap_or_default())
                    .display()
                    .to_string(),
                None => path.display().to_string(),
            };
            let member = Input {
                limits: self.input.limits,
                ..Input::new(path, &display)
            };
            if n >= unlisted_from && self.index.is_some() {
                self.sink.quarantine(partial(
                    &member,
                    FORMAT,
                    Locator::File,
                    "this simulation file is not listed in results.json's simulation_index; \
                     it is read as the listed ones are",
                ));
            }
            let mut state = State {
                input: &member,
                sink: &mut *self.sink,
                current: Cell::new(None),
                next: self.next,
                seen: std::mem::take(&mut self.seen),
                info_model: self.info_model.clone(),
                info_agent: self.info_agent.clone(),
                wrapper_model: None,
                wrapper_agent: None,
                simulations: Simulations::Absent,
                python_outside: 0,
                index: None,
                single: true,
                member: true,
            };
            state.read_single()?;
            self.next = state.next;
            self.seen = std::mem::take(&mut state.seen);
        }
        for id in missing {
            self.sink.records_read(1);
            let index = self.next;
            self.next += 1;
            self.sink.quarantine(dropped(
                self.input,
                FORMAT,
                Locator::Record(index),
                format!(
                    "simulation {id} is listed in the simulation_index, but simulations/{id}.json \
                     is missing"
                ),
            ));
        }
        Ok(())
    }

    /// Name the agent and model from the `info` of the results document a simulation file
    /// belongs to (read up to its `info`, which tau2 writes near the start).
    fn take_results_info(&mut self, results: &Path) {
        let Ok(Ok(mut scan)) = Scanner::open(results, &self.input.limits) else {
            return;
        };
        if scan.peek().ok().flatten() != Some(b'{') {
            return;
        }
        let mut object = scan.enter();
        while let Ok(Some(key)) = scan.next_key(&mut object) {
            if key == "info" {
                if let Ok(info) = scan.parse(Picked(RunInfo::default())) {
                    self.take_info(info);
                }
                return;
            }
            if scan.skip().is_err() {
                return;
            }
        }
    }

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
                "simulation_index" => {
                    let index =
                        self.optional("simulation_index", scan.parse(PhantomData::<Value>))?;
                    self.index = index.and_then(|v| match v {
                        Value::Array(entries) => Some(
                            entries
                                .iter()
                                .filter_map(|e| e.get("id").and_then(scalar_text))
                                .collect(),
                        ),
                        _ => None,
                    });
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

    /// Where a simulation's quarantine entries point: its record, or the whole file when the
    /// file is the simulation.
    fn at(&self, index: u64) -> Locator {
        if self.single {
            Locator::File
        } else {
            Locator::Record(index)
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
                let at = self.at(index);
                self.sink
                    .quarantine(dropped(self.input, FORMAT, at, reason.to_string()));
                return;
            }
        };
        let (id, messages, termination) = simulation;
        if python > 0 {
            self.sink.quarantine(partial(
                self.input,
                FORMAT,
                self.at(index),
                python_note(python, &format!("in simulation {id}")),
            ));
        }
        if messages.is_empty() {
            // Real files hold simulations that failed before any message (for example
            // `termination_reason: infrastructure_error`): stored, with nothing to audit.
            self.sink.quarantine(partial(
                self.input,
                FORMAT,
                self.at(index),
                format!(
                    "simulation {id} has no messages{}; stored as a conversation without runs",
                    termination
                        .map(|t| format!(" (termination_reason {t:?})"))
                        .unwrap_or_default()
                ),
            ));
        }
        let at = self.at(index);
        let conversation = trajectory::build(&id, messages, &self.template(), &mut *self.sink, at);
        self.seen.insert(id, index);
        self.sink.conversation(conversation, index);
    }

    /// Check a simulation and map its messages; `Err` is the reason it is dropped.
    #[allow(clippy::type_complexity)]
    fn prepare(
        &self,
        index: u64,
        simulation: Shape<RawSimulation>,
    ) -> crate::error::Result<(String, Vec<trajectory::ChatMessage>, Option<String>)> {
        let simulation = simulation.map_err(|what| {
            Error::Malformed(format!("simulation {index} is {what}, not an object"))
        })?;
        let id = simulation
            .id
            .as_ref()
            .and_then(scalar_text)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| Error::Malformed(format!("simulation {index} has no id")))?;
        if let Some(first) = self.seen.get(&id) {
            return Err(Error::Malformed(format!(
                "simulation id {id} repeats record {first} of this file; the first copy is kept"
            )));
        }
        let list = match (simulation.messages, simulation.ticks) {
            (Some(Ok(list)), _) => list,
            // A full-duplex run keeps its ticks and leaves `messages` out (or null).
            (None | Some(Err("null")), Some(ticks)) if !ticks.is_null() => {
                tick_messages(&id, ticks)?
            }
            (None, _) => {
                return Err(Error::Malformed(format!(
                    "simulation {id} has no messages list"
                )))
            }
            (Some(Err(what)), _) => {
                return Err(Error::Malformed(format!(
                    "simulation {id}: messages is {what}, not a list"
                )))
            }
        };
        let messages =
            chat_messages(list).map_err(|e| Error::Malformed(format!("simulation {id}: {e}")))?;
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
        crate::ingest::Match::strong_if(object || list || is_single_simulation(head.bytes))
    }
    fn read(&self, input: &Input<'_>, sink: &mut dyn Sink) -> std::io::Result<()> {
        read(input, sink)
    }
    fn companions(&self, path: &Path) -> Vec<PathBuf> {
        let Some(files) = companions(path) else {
            return Vec::new();
        };
        let head = crate::ingest::read_head(path).unwrap_or_default();
        if crate::ingest::Format::detect(&head) == Some(crate::ingest::Format::Tau2) {
            files
        } else {
            Vec::new()
        }
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

    /// A full-duplex simulation in tau2's tick shape: speech arrives in pieces, tool calls and
    /// results sit on the tick they happened in.
    #[test]
    fn ticks_become_messages() {
        let chunk = |role: &str, text: Option<&str>, utt: &str| {
            serde_json::json!({"role": role, "content": text, "utterance_ids": [utt],
                               "contains_speech": text.is_some()})
        };
        let tick = |i: u32, agent: Value, user: Value| {
            serde_json::json!({"tick_id": i, "timestamp": format!("2026-06-30T11:40:{:02}.000", i),
                               "agent_chunk": agent, "user_chunk": user})
        };
        let mut ticks = vec![
            tick(
                0,
                chunk("assistant", Some("Hello, how "), "a1"),
                chunk("user", None, ""),
            ),
            tick(
                1,
                chunk("assistant", Some("can I help?"), "a1"),
                chunk("user", None, ""),
            ),
            tick(
                2,
                chunk("assistant", None, ""),
                chunk("user", Some("Cancel my"), "u1"),
            ),
            tick(
                3,
                chunk("assistant", None, ""),
                chunk("user", Some(" order."), "u1"),
            ),
            tick(
                4,
                chunk("assistant", Some("Let me check."), "a2"),
                chunk("user", None, ""),
            ),
        ];
        ticks[4]["agent_tool_calls"] = serde_json::json!([{"id": "c1", "name": "get_order",
            "arguments": {"order_id": "W123"}, "requestor": "assistant"}]);
        ticks.push(tick(
            5,
            chunk("assistant", None, ""),
            chunk("user", None, ""),
        ));
        ticks[5]["agent_tool_results"] = serde_json::json!([{"id": "c1", "role": "tool",
            "content": "{\"status\": \"pending\"}", "requestor": "assistant", "error": false}]);
        ticks.push(tick(
            6,
            chunk("assistant", Some("It is pending."), "a3"),
            chunk("user", None, ""),
        ));
        let sim = serde_json::json!({"id": "v1", "task_id": "1", "termination_reason": "user_stop",
                                     "mode": "full_duplex", "messages": null, "ticks": ticks});
        let sink = read_text(&serde_json::to_string(&sim).unwrap());
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        assert_eq!(sink.records, 1);
        let conv = &sink.conversations[0].0;
        // The greeting is turn 0, the request turn 1.
        assert_eq!(conv.runs.len(), 2);
        assert_eq!(
            conv.runs[0].answer.as_deref(),
            Some("Hello, how can I help?")
        );
        let run = &conv.runs[1];
        assert_eq!(run.user_message.as_deref(), Some("Cancel my order."));
        let landings: Vec<_> = run.landings().collect();
        assert_eq!(landings.len(), 1);
        assert_eq!(landings[0].tool_name.as_deref(), Some("get_order"));
        assert_eq!(
            landings[0].text.as_deref(),
            Some("{\"status\": \"pending\"}")
        );
        assert_eq!(run.answer.as_deref(), Some("It is pending."));
    }

    /// The dir layout: a simulation the index lists without its file is a dropped record; a
    /// file the index does not list is read, with a note.
    #[test]
    fn dir_layout_index_and_files_reconcile() {
        let dir = tempfile::tempdir().unwrap();
        let sims = dir.path().join("simulations");
        std::fs::create_dir(&sims).unwrap();
        std::fs::write(sims.join("s1.json"), sim("s1")).unwrap();
        std::fs::write(sims.join("s3.json"), sim("s3")).unwrap();
        let index = r#"[{"id": "s1", "task_id": "3", "trial": 0}, {"id": "s2", "task_id": "3", "trial": 0}]"#;
        let doc = results_doc(&[]).replace(
            "\"simulations\": []",
            &format!("\"simulation_index\": {index}"),
        );
        let results = dir.path().join("results.json");
        std::fs::write(&results, doc).unwrap();
        let mut sink = Collect::default();
        read(&Input::new(&results, "run/results.json"), &mut sink).unwrap();
        assert_eq!(sink.records, 3);
        let ids: Vec<_> = sink
            .conversations
            .iter()
            .map(|(c, at)| (c.id.as_str(), *at))
            .collect();
        assert_eq!(ids, vec![("s1", 0), ("s3", 1)]);
        assert_eq!(
            sink.conversations[0].0.runs[0].model.as_deref(),
            Some("xai/grok-4")
        );
        let notes: Vec<_> = sink
            .quarantined
            .iter()
            .map(|q| (q.severity, q.file.as_str(), q.reason.as_str()))
            .collect();
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert_eq!(notes[0].0, Severity::Partial);
        assert_eq!(notes[0].1, "run/simulations/s3.json");
        assert!(notes[0]
            .2
            .contains("not listed in results.json's simulation_index"));
        assert_eq!(notes[1].0, Severity::Dropped);
        assert_eq!(notes[1].1, "run/results.json");
        assert_eq!(
            notes[1].2,
            "simulation s2 is listed in the simulation_index, but simulations/s2.json is missing"
        );
    }

    #[test]
    fn empty_simulation_list_reads_nothing() {
        let sink = read_text(&results_doc(&[]));
        assert_eq!((sink.records, sink.conversations.len()), (0, 0));
        assert!(sink.quarantined.is_empty());
    }
}
