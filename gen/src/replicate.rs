//! Real-shaped corpora: real recordings copied with fresh conversation ids until a size is
//! reached, so the engine can be timed on the shapes users feed it (long tau2 simulations, the
//! event mix of real agentfootprint sessions, OTLP exports) and not only on the generator's.
//!
//! A unit is what one copy repeats, with its conversation ids rewritten for copy `k`:
//!
//! | shape | source files | unit | ids rewritten |
//! |---|---|---|---|
//! | `tau2` | results documents `{timestamp, info, tasks, simulations}` | one simulation | its `id` |
//! | `tau-bench` | trajectory lists `[{task_id, trial, traj, ...}]` | one record | `trial` |
//! | `agentfootprint` | NDJSON event logs | one source file (its sessions may interleave) | `meta.sessionId`, `meta.runId` |
//! | `otel` | OTLP JSON documents, collector JSONL | one export request | trace and span ids, `gen_ai.conversation.id`, `session.id`, `gen_ai.agent.call.id` (per source file and copy) |
//!
//! Units are taken round-robin over the sources (in path order) and written into `files` input
//! files of about `bytes / files` each, in the source's own format (tau2: one results document
//! per file carrying the tasks of the simulations it holds; tau-bench: a JSON list; the others:
//! one line per event or request). Copy 0 is the source as recorded, with ids still rewritten so
//! every copy is alike. The corpus holds no `expected.json` of findings (nothing was injected);
//! `replicated.json` says what was copied and how often.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeSet, HashMap};
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;
use traceaudit::output::{write_file, AtomicDir, Layout};

use crate::{CONFIG_FILE, INPUT_DIR};

/// The corpus's own description, written in place of `expected.json`.
pub const REPLICATED_FILE: &str = "replicated.json";

/// The configuration written beside a replicated corpus: none of the sources needs one, so it
/// only says where the corpus came from.
const CONFIG_TEXT: &str =
    "# Written by `traceaudit-gen replicate`: real recordings with fresh ids.\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RealShape {
    Tau2,
    TauBench,
    Agentfootprint,
    Otel,
}

impl RealShape {
    pub fn name(self) -> &'static str {
        match self {
            RealShape::Tau2 => "tau2",
            RealShape::TauBench => "tau-bench",
            RealShape::Agentfootprint => "agentfootprint",
            RealShape::Otel => "otel",
        }
    }

    fn extension(self) -> &'static str {
        match self {
            RealShape::Tau2 | RealShape::TauBench => "json",
            RealShape::Agentfootprint => "ndjson",
            RealShape::Otel => "jsonl",
        }
    }

    /// Whether the engine-side baseline parses this shape's files line by line (else whole).
    pub fn line_delimited(self) -> bool {
        matches!(self, RealShape::Agentfootprint | RealShape::Otel)
    }
}

#[derive(Debug, Clone)]
pub struct ReplicateOptions {
    pub shape: RealShape,
    /// Files or folders of real recordings (folders are read recursively).
    pub sources: Vec<PathBuf>,
    /// Stop once about this many bytes were written.
    pub bytes: u64,
    /// How many input files to spread them over.
    pub files: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Replicated {
    pub generator: String,
    pub shape: RealShape,
    pub sources: Vec<String>,
    /// Distinct units found in the sources.
    pub units: u64,
    /// Units written (all copies).
    pub copies_written: u64,
    /// Whole passes over the units (the last one may be partial).
    pub copies_per_unit: u64,
    pub bytes: u64,
    pub files: Vec<String>,
}

fn layout() -> Layout {
    Layout {
        what: "replicated corpus",
        manifest: REPLICATED_FILE,
        claims: |m| {
            m.get("generator")
                .and_then(Value::as_str)
                .is_some_and(|g| g.starts_with("traceaudit"))
        },
        entries: vec![
            REPLICATED_FILE.into(),
            CONFIG_FILE.into(),
            format!("{INPUT_DIR}/"),
            format!("{INPUT_DIR}/replica-*.json"),
            format!("{INPUT_DIR}/replica-*.ndjson"),
            format!("{INPUT_DIR}/replica-*.jsonl"),
        ],
    }
}

/// One unit of a source, parsed once and rewritten per copy.
enum Unit {
    /// A tau2 simulation and the task it ran, by id (when the source lists it; shared by the
    /// source's simulations of that task).
    Simulation {
        sim: Value,
        task: Option<(String, Rc<Value>)>,
    },
    Record(Value),
    /// The lines of an agentfootprint log, or one OTLP request, with the index of the source
    /// file it came from: the same recording is often exported more than once (one scenario
    /// under several SDK versions, with the same conversation and call ids), so OTLP ids are
    /// made fresh per source file and copy.
    Lines(Vec<Value>, usize),
}

/// What every tau2 output document starts with, taken from the first source.
struct Tau2Header {
    timestamp: Value,
    info: Value,
}

fn source_files(sources: &[PathBuf]) -> io::Result<Vec<PathBuf>> {
    fn walk(path: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
        if path.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?
                .map(|e| e.map(|e| e.path()))
                .collect::<io::Result<_>>()?;
            entries.sort();
            for e in entries {
                walk(&e, out)?;
            }
        } else {
            out.push(path.to_path_buf());
        }
        Ok(())
    }
    let mut out = Vec::new();
    for s in sources {
        walk(s, &mut out)?;
    }
    Ok(out)
}

fn bad(path: &Path, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {what}", path.display()),
    )
}

fn read_json(path: &Path) -> io::Result<Value> {
    let bytes = std::fs::read(path)?;
    serde_json::from_slice(&bytes).map_err(|e| bad(path, e))
}

fn read_lines(path: &Path) -> io::Result<Vec<Value>> {
    let reader = io::BufReader::new(std::fs::File::open(path)?);
    let mut out = Vec::new();
    for line in reader.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(serde_json::from_str(&line).map_err(|e| bad(path, e))?);
    }
    Ok(out)
}

/// Read the units of every source; `Err` names a file that is not of the shape.
fn load(
    shape: RealShape,
    files: &[PathBuf],
) -> io::Result<(Vec<Unit>, Option<Tau2Header>, Vec<String>)> {
    let mut units = Vec::new();
    let mut header = None;
    let mut used = Vec::new();
    let ext = |p: &Path| p.extension().and_then(|e| e.to_str()).map(str::to_owned);
    let stems_with_jsonl: BTreeSet<PathBuf> = files
        .iter()
        .filter(|p| ext(p).as_deref() == Some("jsonl"))
        .map(|p| p.with_extension(""))
        .collect();
    for path in files {
        let e = ext(path);
        match shape {
            RealShape::Tau2 => {
                if e.as_deref() != Some("json") {
                    continue;
                }
                let mut doc = read_json(path)?;
                let Some(sims) = doc.get_mut("simulations").map(Value::take) else {
                    continue;
                };
                let Value::Array(sims) = sims else {
                    return Err(bad(path, "`simulations` is not a list"));
                };
                let tasks: HashMap<String, Rc<Value>> = match doc.get_mut("tasks").map(Value::take)
                {
                    Some(Value::Array(t)) => t
                        .into_iter()
                        .filter_map(|t| Some((t.get("id")?.to_string(), Rc::new(t))))
                        .collect(),
                    _ => HashMap::new(),
                };
                if header.is_none() {
                    header = Some(Tau2Header {
                        timestamp: doc.get("timestamp").cloned().unwrap_or(Value::Null),
                        info: doc.get("info").cloned().unwrap_or(Value::Null),
                    });
                }
                for sim in sims {
                    let task = sim.get("task_id").and_then(|id| {
                        let id = id.to_string();
                        tasks.get(&id).map(|t| (id, Rc::clone(t)))
                    });
                    units.push(Unit::Simulation { sim, task });
                }
            }
            RealShape::TauBench => {
                if e.as_deref() != Some("json") {
                    continue;
                }
                match read_json(path)? {
                    Value::Array(records) => units.extend(records.into_iter().map(Unit::Record)),
                    _ => continue,
                }
            }
            RealShape::Agentfootprint => {
                if !matches!(e.as_deref(), Some("ndjson" | "jsonl")) {
                    continue;
                }
                units.push(Unit::Lines(read_lines(path)?, used.len()));
            }
            RealShape::Otel => match e.as_deref() {
                Some("jsonl") => {
                    let source = used.len();
                    units.extend(
                        read_lines(path)?
                            .into_iter()
                            .map(|v| Unit::Lines(vec![v], source)),
                    )
                }
                // A folder may hold the same export as `x.json` and `x.jsonl`: the lines win.
                Some("json") if !stems_with_jsonl.contains(&path.with_extension("")) => {
                    let doc = read_json(path)?;
                    if doc.get("resourceSpans").is_none() {
                        continue;
                    }
                    units.push(Unit::Lines(vec![doc], used.len()));
                }
                _ => continue,
            },
        }
        used.push(path.display().to_string());
    }
    Ok((units, header, used))
}

/// Copy `k`'s version of an id. Copy 0 keeps a suffix too, so no copy shares an id with another
/// corpus made from the same sources at another size.
fn fresh(id: &str, k: u64) -> String {
    format!("{id}~r{k}")
}

/// A hex id of the recorded id's length (32 digits for a trace, 16 for a span) for copy `k` of
/// source `source`: the length and alphabet OTLP readers expect, and no two copies share one.
fn fresh_hex_id(id: &str, source: usize, k: u64) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes().chain((source as u64).to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    if id.len() <= 16 {
        format!("{:016x}", h ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    } else {
        format!("{h:016x}{k:016x}")
    }
}

fn rewrite_str(slot: Option<&mut Value>, k: u64) {
    if let Some(Value::String(s)) = slot {
        *s = fresh(s, k);
    }
}

/// Rewrite the ids of an OTLP request in place: trace and span ids, and the conversation and
/// agent-call keys among the attributes (`{key, value: {stringValue}}`).
fn rewrite_otel(v: &mut Value, source: usize, k: u64) {
    match v {
        Value::Object(map) => {
            for key in ["traceId", "spanId", "parentSpanId"] {
                if let Some(Value::String(t)) = map.get_mut(key) {
                    if !t.is_empty() {
                        *t = fresh_hex_id(t, source, k);
                    }
                }
            }
            let is_id_key = map.get("key").and_then(Value::as_str).is_some_and(|key| {
                matches!(
                    key,
                    "gen_ai.conversation.id" | "session.id" | "gen_ai.agent.call.id"
                )
            });
            if is_id_key {
                if let Some(Value::String(s)) =
                    map.get_mut("value").and_then(|v| v.get_mut("stringValue"))
                {
                    *s = format!("{s}~f{source}r{k}");
                }
            }
            for (_, child) in map.iter_mut() {
                rewrite_otel(child, source, k);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| rewrite_otel(i, source, k)),
        _ => {}
    }
}

/// The bytes of copy `k` of a unit (for tau2 and tau-bench, one list element without
/// separators).
fn render(unit: &Unit, k: u64, shape: RealShape) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    match unit {
        Unit::Simulation { sim, .. } => {
            let mut sim = sim.clone();
            rewrite_str(sim.get_mut("id"), k);
            serde_json::to_writer(&mut out, &sim)?;
        }
        Unit::Record(r) => {
            let mut r = r.clone();
            if let Some(trial) = r.get_mut("trial") {
                let t = trial.as_u64().unwrap_or(0);
                *trial = Value::from(t + k * 1_000_000);
            }
            serde_json::to_writer(&mut out, &r)?;
        }
        Unit::Lines(lines, source) => {
            for line in lines {
                let mut line = line.clone();
                match shape {
                    RealShape::Otel => rewrite_otel(&mut line, *source, k),
                    _ => {
                        if let Some(meta) = line.get_mut("meta") {
                            rewrite_str(meta.get_mut("sessionId"), k);
                            rewrite_str(meta.get_mut("runId"), k);
                        }
                    }
                }
                serde_json::to_writer(&mut out, &line)?;
                out.push(b'\n');
            }
        }
    }
    Ok(out)
}

/// One output file being filled.
struct OutFile {
    name: String,
    writer: io::BufWriter<std::fs::File>,
    bytes: u64,
    elements: u64,
    /// tau2: the tasks of the simulations written, by id, in first-written order.
    tasks: Vec<Value>,
    task_ids: BTreeSet<String>,
}

impl OutFile {
    fn open(dir: &Path, shape: RealShape, index: usize) -> io::Result<OutFile> {
        let name = format!("replica-{index:04}.{}", shape.extension());
        let file = std::fs::File::create(dir.join(&name))?;
        let mut writer = io::BufWriter::with_capacity(1 << 20, file);
        let opening: &[u8] = match shape {
            RealShape::Tau2 => b"{\"simulations\":[",
            RealShape::TauBench => b"[",
            _ => b"",
        };
        writer.write_all(opening)?;
        Ok(OutFile {
            name,
            writer,
            bytes: opening.len() as u64,
            elements: 0,
            tasks: Vec::new(),
            task_ids: BTreeSet::new(),
        })
    }

    fn push(&mut self, bytes: &[u8], shape: RealShape) -> io::Result<()> {
        if self.elements > 0 && matches!(shape, RealShape::Tau2 | RealShape::TauBench) {
            self.writer.write_all(b",")?;
            self.bytes += 1;
        }
        self.writer.write_all(bytes)?;
        self.bytes += bytes.len() as u64;
        self.elements += 1;
        Ok(())
    }

    /// Close the document. A tau2 document lists its simulations first and its header after:
    /// JSON objects are unordered, and the engine streams simulations whatever comes first.
    fn finish(
        mut self,
        shape: RealShape,
        header: Option<&Tau2Header>,
    ) -> io::Result<(String, u64)> {
        match shape {
            RealShape::Tau2 => {
                let mut tail = Map::new();
                if let Some(h) = header {
                    tail.insert("timestamp".into(), h.timestamp.clone());
                    tail.insert("info".into(), h.info.clone());
                }
                tail.insert(
                    "tasks".into(),
                    Value::Array(std::mem::take(&mut self.tasks)),
                );
                let text = serde_json::to_string(&Value::Object(tail))?;
                // `{"a":..}` -> `],"a":..}`
                let rest = format!("],{}", &text[1..]);
                self.writer.write_all(rest.as_bytes())?;
                self.bytes += rest.len() as u64;
            }
            RealShape::TauBench => {
                self.writer.write_all(b"]")?;
                self.bytes += 1;
            }
            _ => {}
        }
        self.writer.flush()?;
        Ok((self.name, self.bytes))
    }
}

/// Write a replicated corpus into `out` (replacing an earlier replicated corpus there, never
/// anything else).
pub fn replicate(opts: &ReplicateOptions, out: &Path) -> io::Result<(Replicated, f64)> {
    let started = Instant::now();
    if opts.bytes == 0 || opts.files == 0 {
        return Err(io::Error::other(
            "say how much to write: a size and at least one file",
        ));
    }
    let files = source_files(&opts.sources)?;
    let (units, header, used) = load(opts.shape, &files)?;
    if units.is_empty() {
        return Err(io::Error::other(format!(
            "no {} recordings found in {}",
            opts.shape.name(),
            opts.sources
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let staging = AtomicDir::create(out, &layout())?;
    let input = staging.path().join(INPUT_DIR);
    std::fs::create_dir_all(&input)?;
    let per_file = opts.bytes.div_ceil(opts.files as u64);
    let mut written: Vec<(String, u64)> = Vec::new();
    let mut current = OutFile::open(&input, opts.shape, 0)?;
    let mut total = 0u64;
    let mut copies = 0u64;
    'fill: for k in 0.. {
        for unit in &units {
            if total + current.bytes >= opts.bytes {
                break 'fill;
            }
            if current.bytes >= per_file && written.len() + 1 < opts.files {
                let next = OutFile::open(&input, opts.shape, written.len() + 1)?;
                let (name, bytes) =
                    std::mem::replace(&mut current, next).finish(opts.shape, header.as_ref())?;
                total += bytes;
                written.push((name, bytes));
            }
            let bytes = render(unit, k, opts.shape)?;
            current.push(&bytes, opts.shape)?;
            if let Unit::Simulation {
                task: Some((id, task)),
                ..
            } = unit
            {
                if current.task_ids.insert(id.clone()) {
                    current.tasks.push(Value::clone(task));
                }
            }
            copies += 1;
        }
    }
    let (name, bytes) = current.finish(opts.shape, header.as_ref())?;
    total += bytes;
    written.push((name, bytes));
    let summary = Replicated {
        generator: format!("traceaudit-gen {}", env!("CARGO_PKG_VERSION")),
        shape: opts.shape,
        sources: used,
        units: units.len() as u64,
        copies_written: copies,
        copies_per_unit: copies.div_ceil(units.len() as u64),
        bytes: total,
        files: written
            .iter()
            .map(|(n, _)| format!("{INPUT_DIR}/{n}"))
            .collect(),
    };
    write_file(&staging.path().join(CONFIG_FILE), CONFIG_TEXT.as_bytes())?;
    write_file(
        &staging.path().join(REPLICATED_FILE),
        &serde_json::to_vec_pretty(&summary)?,
    )?;
    staging.commit()?;
    Ok((summary, started.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn tau2_copies_get_fresh_ids_and_carry_their_tasks() {
        let tmp = tempfile::tempdir().unwrap();
        let src = write(
            tmp.path(),
            "r.json",
            r#"{"timestamp":"t","info":{"x":1},"tasks":[{"id":"7","d":1},{"id":"8"}],
               "simulations":[{"id":"s1","task_id":"7","messages":[]},{"id":"s2","task_id":"9","messages":[]}]}"#,
        );
        let out = tmp.path().join("corpus");
        let opts = ReplicateOptions {
            shape: RealShape::Tau2,
            sources: vec![src],
            bytes: 400,
            files: 2,
        };
        let (summary, _) = replicate(&opts, &out).unwrap();
        assert_eq!(summary.units, 2);
        assert!(summary.copies_written >= 4, "{summary:?}");
        let mut ids = BTreeSet::new();
        for f in &summary.files {
            let doc: Value = serde_json::from_slice(&std::fs::read(out.join(f)).unwrap()).unwrap();
            assert_eq!(doc["info"], serde_json::json!({"x": 1}));
            let tasks = doc["tasks"].as_array().unwrap();
            assert_eq!(tasks.len(), 1, "only task 7 is listed in the source");
            for sim in doc["simulations"].as_array().unwrap() {
                assert!(
                    ids.insert(sim["id"].as_str().unwrap().to_string()),
                    "ids repeat"
                );
            }
        }
        assert_eq!(ids.len() as u64, summary.copies_written);
        assert!(ids.contains("s1~r0") && ids.contains("s2~r1"));
    }

    #[test]
    fn agentfootprint_and_otel_lines_are_rewritten_per_copy() {
        let tmp = tempfile::tempdir().unwrap();
        let af = write(
            tmp.path(),
            "a.ndjson",
            "{\"type\":\"x\",\"payload\":{},\"meta\":{\"runId\":\"r\",\"sessionId\":\"s\"}}\n\n",
        );
        let out = tmp.path().join("af");
        let opts = ReplicateOptions {
            shape: RealShape::Agentfootprint,
            sources: vec![af],
            bytes: 250,
            files: 1,
        };
        let (summary, _) = replicate(&opts, &out).unwrap();
        let text = std::fs::read_to_string(out.join(&summary.files[0])).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len() as u64, summary.copies_written);
        assert_eq!(lines[1]["meta"]["sessionId"], "s~r1");
        assert_eq!(lines[1]["meta"]["runId"], "r~r1");

        let otel = tmp.path().join("o");
        std::fs::create_dir(&otel).unwrap();
        let span = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0123456789abcdef0123456789abcdef","spanId":"01","attributes":[{"key":"gen_ai.conversation.id","value":{"stringValue":"c"}}]}]}]}]}"#;
        write(&otel, "x.json", span);
        write(&otel, "x.jsonl", &format!("{span}\n"));
        let out = tmp.path().join("otel-out");
        let opts = ReplicateOptions {
            shape: RealShape::Otel,
            sources: vec![otel],
            bytes: 600,
            files: 1,
        };
        let (summary, _) = replicate(&opts, &out).unwrap();
        assert_eq!(
            summary.units, 1,
            "x.json duplicates x.jsonl and is passed over"
        );
        let text = std::fs::read_to_string(out.join(&summary.files[0])).unwrap();
        let traces: BTreeSet<String> = text
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                let span = &v["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
                let conv = span["attributes"][0]["value"]["stringValue"]
                    .as_str()
                    .unwrap();
                assert!(conv.starts_with("c~f0r"));
                span["traceId"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(
            traces.len() as u64,
            summary.copies_written,
            "a trace id per copy"
        );
        assert!(traces
            .iter()
            .all(|t| t.len() == 32 && t.chars().all(|c| c.is_ascii_hexdigit())));
    }

    #[test]
    fn a_folder_it_did_not_write_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let src = write(
            tmp.path(),
            "t.json",
            r#"[{"task_id":1,"trial":0,"traj":[]}]"#,
        );
        let out = tmp.path().join("mine");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("notes.txt"), "keep").unwrap();
        let opts = ReplicateOptions {
            shape: RealShape::TauBench,
            sources: vec![src],
            bytes: 100,
            files: 1,
        };
        assert!(replicate(&opts, &out).is_err());
        assert_eq!(
            std::fs::read_to_string(out.join("notes.txt")).unwrap(),
            "keep"
        );
    }
}
