//! tau-bench and tau2 ingest: the excerpts under `testdata/` (always), and the full real data
//! sets under `/work/shared/data` (or `$TRACEAUDIT_SHARED_DATA`) when they are present.

use std::path::{Path, PathBuf};
use std::time::Instant;

use traceaudit::model::{EventKind, LandingFlags, Role};
use traceaudit::read::{read_head, read_path, Collect, Severity};
use traceaudit::Format;

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(rel)
}

/// The shared real data sets, when this machine has them.
fn shared_data() -> Option<PathBuf> {
    let dir = std::env::var_os("TRACEAUDIT_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/shared/data"));
    if dir.is_dir() {
        Some(dir)
    } else {
        println!(
            "note: {} not found; skipping the full real-data test",
            dir.display()
        );
        None
    }
}

/// The `.json` files of a folder, sorted.
fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

#[derive(Debug, Default, PartialEq)]
struct Counts {
    conversations: usize,
    /// Runs answering a user message (turn >= 1).
    user_turn_runs: usize,
    /// Landing events, answered or not.
    landings: usize,
    /// Landings that got a result.
    answered: usize,
    dropped: usize,
    partial: usize,
    records: u64,
}

impl Counts {
    fn add(&mut self, c: &Collect) {
        self.conversations += c.conversations.len();
        for (conv, _) in &c.conversations {
            self.user_turn_runs += conv.runs.iter().filter(|r| r.turn >= 1).count();
            for run in &conv.runs {
                for l in run.landings() {
                    self.landings += 1;
                    if !l.has_flag(LandingFlags::UNANSWERED) {
                        self.answered += 1;
                    }
                }
            }
        }
        self.dropped += c
            .quarantined
            .iter()
            .filter(|q| q.severity == Severity::Dropped)
            .count();
        self.partial += c
            .quarantined
            .iter()
            .filter(|q| q.severity == Severity::Partial)
            .count();
        self.records += c.records;
    }
}

fn count_files(files: &[PathBuf], format: Option<Format>) -> (Counts, Vec<Collect>) {
    let mut counts = Counts::default();
    let mut all = Vec::new();
    for f in files {
        let c = read_path(f, format).unwrap();
        counts.add(&c);
        all.push(c);
    }
    (counts, all)
}

/// Read an excerpt with format detection, check detection picked `expect`, and check the
/// reconciliation rule: every record is stored or dropped.
fn read_excerpt(rel: &str, expect: Format) -> Collect {
    let path = testdata(rel);
    let head = read_head(&path).unwrap();
    assert_eq!(Format::detect(&head), Some(expect), "{rel}");
    let c = read_path(&path, None).unwrap();
    let dropped = c
        .quarantined
        .iter()
        .filter(|q| q.severity == Severity::Dropped)
        .count();
    assert_eq!(c.records, (c.conversations.len() + dropped) as u64, "{rel}");
    c
}

fn counts(c: &Collect) -> Counts {
    let mut n = Counts::default();
    n.add(c);
    n
}

/// Names of the tools a conversation's landings called.
fn landing_tools(c: &Collect) -> Vec<String> {
    c.conversations
        .iter()
        .flat_map(|(conv, _)| conv.runs.iter())
        .flat_map(|r| r.landings())
        .map(|l| l.tool_name.clone().unwrap_or_default())
        .collect()
}

#[test]
fn tau_bench_excerpt() {
    let c = read_excerpt("tau-bench/gpt-4o-airline.first3.json", Format::TauBench);
    assert!(c.quarantined.is_empty(), "{:?}", c.quarantined);
    let ids: Vec<_> = c.conversations.iter().map(|(k, _)| k.id.as_str()).collect();
    assert_eq!(ids, vec!["0-0", "1-0", "2-0"]);
    let n = counts(&c);
    assert_eq!((n.user_turn_runs, n.landings, n.answered), (19, 15, 15));
    let conv = &c.conversations[0].0;
    // tau-bench opens with the system prompt, then the user: no turn-0 run.
    assert_eq!(conv.runs[0].turn, 1);
    assert_eq!(conv.runs[0].format, "tau-bench");
    assert_eq!(conv.runs[0].model, None);
    let first = conv.runs.iter().flat_map(|r| r.landings()).next().unwrap();
    assert_eq!(first.tool_name.as_deref(), Some("get_user_details"));
    assert_eq!(
        first.call_id.as_deref(),
        Some("call_oIHazX6yQrB8hUwl4cRilFKj")
    );
    assert_eq!(
        first.arguments.as_deref(),
        Some(r#"{"user_id":"mia_li_3668"}"#)
    );
    assert!(first
        .text_or_empty()
        .starts_with(r#"{"name": {"first_name": "Mia""#));
    assert_eq!(conv.history_for(0)[0].role, Role::System);
}

#[test]
fn tau2_grok_telecom_excerpt_keeps_device_calls_out() {
    let c = read_excerpt(
        "tau2/grok/2025-10-05T07-52-52_telecom_grok-3.excerpt.json",
        Format::Tau2,
    );
    assert!(c.quarantined.is_empty(), "{:?}", c.quarantined);
    assert_eq!(c.conversations.len(), 1);
    let conv = &c.conversations[0].0;
    assert_eq!(conv.id, "05368b82-723a-4066-b191-bbab732f0b85");
    let n = counts(&c);
    assert_eq!((n.user_turn_runs, n.landings, n.answered), (8, 7, 7));
    // The greeting comes before any user message: turn 0.
    assert_eq!(conv.runs[0].turn, 0);
    assert_eq!(conv.runs[1].model.as_deref(), Some("xai/grok-3"));
    assert_eq!(conv.runs[1].agent.as_deref(), Some("llm_agent"));
    let tools = landing_tools(&c);
    assert!(!tools
        .iter()
        .any(|t| t == "reboot_device" || t == "run_speed_test"));
    for i in 0..conv.runs.len() {
        for m in conv.history_for(i) {
            assert!(
                !m.text.starts_with("Speed Test Result"),
                "device result in history"
            );
            assert!(!m.text.starts_with("Restarting network services"));
        }
    }
    let refuel = conv
        .runs
        .iter()
        .flat_map(|r| r.landings())
        .find(|l| l.tool_name.as_deref() == Some("refuel_data"))
        .unwrap();
    assert_eq!(
        refuel.arguments.as_deref(),
        Some(r#"{"customer_id":"C1001","line_id":"L1002","gb_amount":2.0}"#)
    );
    assert!(refuel.timestamp_ms.is_some() && refuel.duration_ms.is_some());
}

#[test]
fn tau2_grok_airline_excerpt_keeps_tool_errors() {
    let c = read_excerpt(
        "tau2/grok/2025-10-12T22-50-14_airline_grok-3.excerpt.json",
        Format::Tau2,
    );
    assert!(c.quarantined.is_empty(), "{:?}", c.quarantined);
    let ids: Vec<_> = c
        .conversations
        .iter()
        .map(|(k, i)| (k.id.as_str(), *i))
        .collect();
    assert_eq!(
        ids,
        vec![
            ("e323e282-a036-4d44-9381-5bb8445aad6d", 0),
            ("60e8484b-06cc-4f30-aee5-14c385fb7992", 1)
        ]
    );
    let n = counts(&c);
    assert_eq!((n.user_turn_runs, n.landings, n.answered), (6, 4, 4));
    let failed: Vec<_> = c.conversations[1]
        .0
        .runs
        .iter()
        .flat_map(|r| r.landings())
        .filter(|l| l.error)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].tool_name.as_deref(), Some("get_flight_status"));
    assert_eq!(
        failed[0].arguments.as_deref(),
        Some(r#"{"flight_number":"HAT039","date":""}"#)
    );
    assert!(failed[0]
        .text_or_empty()
        .starts_with("Error: Flight HAT039 not found"));
}

#[test]
fn tau2_leaderboard_excerpts_in_each_shape() {
    // Results document (official tau2 telecom run), with user device calls.
    let c = read_excerpt(
        "tau2/leaderboard/95433ae7_telecom_gpt-4o.excerpt.json",
        Format::Tau2,
    );
    assert!(c.quarantined.is_empty(), "{:?}", c.quarantined);
    let n = counts(&c);
    assert_eq!((n.conversations, n.user_turn_runs, n.landings), (1, 6, 2));
    assert_eq!(
        c.conversations[0].0.runs[1].model.as_deref(),
        Some("gpt-4o")
    );

    // Wrapper {domain, agent, model, ..., simulations}.
    let c = read_excerpt(
        "tau2/leaderboard/2294ddca_medical_triage_opus46_wrapper.excerpt.json",
        Format::Tau2,
    );
    assert!(c.quarantined.is_empty(), "{:?}", c.quarantined);
    let n = counts(&c);
    assert_eq!((n.conversations, n.user_turn_runs, n.landings), (1, 3, 1));
    let run = &c.conversations[0].0.runs[1];
    assert_eq!(run.model.as_deref(), Some("claude-opus-4-6"));
    assert_eq!(run.agent.as_deref(), Some("adaptive_agent"));
    assert_eq!(
        c.conversations[0].0.id,
        "90a5aaf4-0336-45f3-9bb9-5ae70fa45470"
    );

    // Bare list: no model recorded.
    let c = read_excerpt(
        "tau2/leaderboard/11ac24cd_medical_opus46_bare-list.excerpt.json",
        Format::Tau2,
    );
    assert!(c.quarantined.is_empty(), "{:?}", c.quarantined);
    let n = counts(&c);
    assert_eq!((n.conversations, n.user_turn_runs, n.landings), (1, 4, 2));
    let conv = &c.conversations[0].0;
    assert_eq!(conv.runs[1].model, None);
    let errors = conv
        .runs
        .iter()
        .flat_map(|r| r.landings())
        .filter(|l| l.error)
        .count();
    assert_eq!(errors, 2);
    // Messages are kept in order as Message events.
    assert!(conv
        .runs
        .iter()
        .all(|r| r.events_of(EventKind::Message).next().is_some()));
}

/// `Format::detect` on the first 64 KiB of every real file, including tau2 results documents
/// whose `tasks` list pushes `"simulations"` past 64 KiB.
#[test]
#[ignore = "needs ../shared/data; CI runs it with --ignored"]
fn detection_on_every_real_file() {
    let Some(data) = shared_data() else { return };
    let mut misses = Vec::new();
    let mut files: Vec<(PathBuf, Format)> =
        vec![(data.join("tau-bench/gpt-4o-airline.json"), Format::TauBench)];
    for dir in ["tau2-grok", "tau2-leaderboard"] {
        files.extend(
            json_files(&data.join(dir))
                .into_iter()
                .map(|f| (f, Format::Tau2)),
        );
    }
    for (file, expect) in &files {
        let got = Format::detect(&read_head(file).unwrap());
        if got != Some(*expect) {
            misses.push(format!("{} -> {got:?}", file.display()));
        }
    }
    assert!(
        misses.is_empty(),
        "{} of {} files misdetected:\n{}",
        misses.len(),
        files.len(),
        misses.join("\n")
    );
}

#[test]
#[ignore = "needs ../shared/data; CI runs it with --ignored"]
fn real_tau_bench_full_file() {
    let Some(data) = shared_data() else { return };
    let file = data.join("tau-bench/gpt-4o-airline.json");
    let start = Instant::now();
    let (counts, _) = count_files(&[file], None);
    println!("tau-bench: {counts:?} in {:?}", start.elapsed());
    assert_eq!(counts.conversations, 200);
    assert_eq!(counts.user_turn_runs, 1490);
    assert_eq!(counts.landings, 1164);
    assert_eq!(counts.answered, 1164);
    assert_eq!((counts.dropped, counts.partial), (0, 0));
    assert_eq!(counts.records, 200);
}

#[test]
#[ignore = "needs ../shared/data; CI runs it with --ignored"]
fn real_tau2_grok_folder() {
    let Some(data) = shared_data() else { return };
    let files = json_files(&data.join("tau2-grok"));
    let start = Instant::now();
    let (counts, _) = count_files(&files, None);
    println!(
        "tau2-grok ({} files): {counts:?} in {:?}",
        files.len(),
        start.elapsed()
    );
    assert_eq!(counts.conversations, 586);
    assert_eq!(counts.user_turn_runs, 3388);
    assert_eq!(counts.landings, 3440);
    assert_eq!(counts.answered, 3440);
    assert_eq!((counts.dropped, counts.partial), (0, 0));
}

#[test]
#[ignore = "needs ../shared/data; CI runs it with --ignored"]
fn real_tau2_leaderboard_folder() {
    let Some(data) = shared_data() else { return };
    let files = json_files(&data.join("tau2-leaderboard"));
    let start = Instant::now();
    let (counts, all) = count_files(&files, None);
    println!(
        "tau2-leaderboard ({} files): {counts:?} in {:?}",
        files.len(),
        start.elapsed()
    );
    for c in &all {
        for q in &c.quarantined {
            println!("  {:?} {}: {}", q.severity, q.file, q.reason);
        }
    }
    // No file of this folder repeats a simulation inside itself, so nothing is dropped.
    assert_eq!(counts.dropped, 0);
    assert_eq!(counts.conversations, 697);
    assert_eq!(counts.records, 697);
    assert_eq!(counts.user_turn_runs, 3913);
    assert_eq!(counts.landings, 4701);
    assert_eq!(counts.answered, 4701);
    // Two simulations ended in an infrastructure error before any message: stored without
    // runs, each reported as a partial entry.
    assert_eq!(counts.partial, 2);
    let empty: Vec<_> = all
        .iter()
        .flat_map(|c| c.conversations.iter())
        .filter(|(conv, _)| conv.runs.is_empty())
        .map(|(conv, _)| conv.id.as_str())
        .collect();
    assert_eq!(
        empty,
        vec![
            "fdc1446c-4424-4ee8-8599-d6f92dcaf292",
            "c7c2fb25-8634-4bd3-b30b-78e52e9c192e"
        ]
    );
    // Files are read one at a time, so a simulation repeated in another file is not a
    // duplicate here: 65 ids appear in two files (identical copies).
    let mut ids: Vec<&str> = all
        .iter()
        .flat_map(|c| c.conversations.iter())
        .map(|(conv, _)| conv.id.as_str())
        .collect();
    ids.sort_unstable();
    let total = ids.len();
    ids.dedup();
    println!("  distinct simulation ids: {}", ids.len());
    assert_eq!(total - ids.len(), 65);
}

/// A sink that only counts, so that memory use reflects the reader alone.
#[derive(Default)]
struct CountingSink {
    conversations: u64,
    landings: u64,
    quarantined: u64,
    records: u64,
}

impl traceaudit::read::Sink for CountingSink {
    fn conversation(&mut self, conversation: traceaudit::model::Conversation, _record: u64) {
        self.conversations += 1;
        self.landings += conversation
            .runs
            .iter()
            .map(|r| r.landings().count() as u64)
            .sum::<u64>();
    }
    fn quarantine(&mut self, _item: traceaudit::read::Quarantined) {
        self.quarantined += 1;
    }
    fn records_read(&mut self, n: u64) {
        self.records += n;
    }
}

/// Peak and current resident memory of this process in KiB (Linux only).
fn memory_kib() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()
    };
    Some((field("VmHWM:")?, field("VmRSS:")?))
}

/// Upstream tau2 files reach hundreds of MB: reading one must not hold it in memory. Writes a
/// ~200 MB results document (a 40 MB `tasks` list, then 5,000 copies of the telecom excerpt's
/// simulation under new ids) and checks that the reader's peak memory stays far below the file
/// size. Run alone (`--ignored --exact`), since the peak is per process.
#[test]
#[ignore = "writes a 200 MB temporary file; run alone to measure peak memory"]
fn large_tau2_document_is_streamed() {
    use std::io::Write;
    let excerpt: serde_json::Value = serde_json::from_slice(
        &std::fs::read(testdata(
            "tau2/grok/2025-10-05T07-52-52_telecom_grok-3.excerpt.json",
        ))
        .unwrap(),
    )
    .unwrap();
    let sim = excerpt["simulations"][0].to_string();
    let old_id = excerpt["simulations"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.json");
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        write!(
            w,
            r#"{{"timestamp": "2025-10-05T07:52:52", "info": {}, "tasks": ["#,
            excerpt["info"]
        )
        .unwrap();
        let task = excerpt["tasks"][0].to_string();
        let copies = 40_000_000 / task.len();
        for i in 0..copies {
            w.write_all(if i == 0 { b"" } else { b"," }).unwrap();
            w.write_all(task.as_bytes()).unwrap();
        }
        w.write_all(br#"], "simulations": ["#).unwrap();
        for i in 0..5000 {
            w.write_all(if i == 0 { b"" } else { b"," }).unwrap();
            w.write_all(sim.replace(&old_id, &format!("sim-{i}")).as_bytes())
                .unwrap();
        }
        w.write_all(b"]}").unwrap();
    }
    let size = std::fs::metadata(&path).unwrap().len();
    let before = memory_kib();
    let mut sink = CountingSink::default();
    let display = path.display().to_string();
    let start = Instant::now();
    traceaudit::read::read_file(
        traceaudit::Format::Tau2,
        &traceaudit::read::Input::new(&path, &display),
        &mut sink,
    )
    .unwrap();
    let elapsed = start.elapsed();
    assert_eq!(
        (sink.records, sink.conversations, sink.quarantined),
        (5000, 5000, 0)
    );
    assert_eq!(sink.landings, 5000 * 7);
    println!(
        "read {} MB in {elapsed:?} ({:.0} MB/s)",
        size / 1_000_000,
        size as f64 / 1e6 / elapsed.as_secs_f64()
    );
    if let (Some((_, rss_before)), Some((peak_after, _))) = (before, memory_kib()) {
        let grown = peak_after.saturating_sub(rss_before);
        println!("resident memory before {rss_before} KiB, peak grew by at most {grown} KiB");
        assert!(
            grown * 1024 < size / 10,
            "peak memory grew by {grown} KiB reading a {size}-byte file"
        );
    }
}

/// What a test compares of a conversation: id, model, and per run the user message, the
/// landings (tool, arguments, result) and the answer.
type Shape = (
    String,
    Option<String>,
    Vec<(
        Option<String>,
        Vec<(String, String, String)>,
        Option<String>,
    )>,
);

fn shapes(c: &Collect) -> Vec<Shape> {
    c.conversations
        .iter()
        .map(|(conv, _)| {
            let runs = conv
                .runs
                .iter()
                .map(|r| {
                    let landings = r
                        .landings()
                        .map(|l| {
                            (
                                l.tool_name.clone().unwrap_or_default(),
                                l.arguments.clone().unwrap_or_default(),
                                l.text.clone().unwrap_or_default(),
                            )
                        })
                        .collect();
                    (r.user_message.clone(), landings, r.answer.clone())
                })
                .collect();
            (conv.id.clone(), conv.runs[0].model.clone(), runs)
        })
        .collect()
}

fn ingest_counts(input: &Path) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_traceaudit"))
        .args(["ingest", input.to_str().unwrap(), "-q", "--out"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(store.join("manifest.json")).unwrap())
            .unwrap();
    manifest["counts"].clone()
}

/// tau2's dir layout (`results.json` with a `simulation_index`, each simulation in
/// `simulations/<id>.json`, as tau2 saves it with `format="dir"`) yields the conversations the
/// single-file layout of the same simulations yields, whichever of its files the ingest is given,
/// and each simulation once.
#[test]
fn tau2_dir_layout_reads_as_the_single_file_layout() {
    let dir = testdata("tau2/dir-layout/2025-10-12T22-50-14_airline_grok-3");
    let results = dir.join("results.json");
    assert_eq!(
        Format::detect(&read_head(&results).unwrap()),
        Some(Format::Tau2)
    );
    // The single-file layout of the same data: the simulations back inside the document.
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(&results).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let index = doc
        .as_object_mut()
        .unwrap()
        .remove("simulation_index")
        .unwrap();
    let sims: Vec<serde_json::Value> = index
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            let name = format!("{}.json", entry["id"].as_str().unwrap());
            let text = std::fs::read_to_string(dir.join("simulations").join(name)).unwrap();
            serde_json::from_str(&text).unwrap()
        })
        .collect();
    doc["simulations"] = serde_json::Value::Array(sims);
    let single = tmp.path().join("single.json");
    std::fs::write(&single, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let expected = read_path(&single, None).unwrap();
    assert_eq!((expected.records, expected.conversations.len()), (2, 2));
    let expected = shapes(&expected);
    assert_eq!(expected[0].1.as_deref(), Some("xai/grok-3"));

    // The index read as its set.
    let set = read_path(&results, None).unwrap();
    assert!(set.quarantined.is_empty(), "{:?}", set.quarantined);
    assert_eq!(set.records, 2);
    assert_eq!(shapes(&set), expected);

    // Each simulation file on its own: the agent and model come from the results beside it.
    let mut alone = Vec::new();
    for file in json_files(&dir.join("simulations")) {
        assert_eq!(
            Format::detect(&read_head(&file).unwrap()),
            Some(Format::Tau2)
        );
        let c = read_path(&file, None).unwrap();
        assert!(c.quarantined.is_empty(), "{:?}", c.quarantined);
        assert_eq!(c.records, 1);
        alone.extend(shapes(&c));
    }
    // (Read file by file, in file-name order.)
    alone.sort();
    let mut by_id = expected.clone();
    by_id.sort();
    assert_eq!(alone, by_id);

    // Through the command line: the folder (results.json and the simulation files both
    // inputs), the index alone, the simulations alone: two records, no duplicate.
    for input in [dir.clone(), results.clone(), dir.join("simulations")] {
        let counts = ingest_counts(&input);
        assert_eq!(counts["records_read"], 2, "{}: {counts}", input.display());
        assert_eq!(counts["records_stored"], 2, "{}: {counts}", input.display());
        assert_eq!(counts["duplicate_runs"], 0, "{}: {counts}", input.display());
        assert_eq!(counts["conversations"], 2, "{}: {counts}", input.display());
    }
}

/// A voice (full-duplex) run in the dir layout, from tau2-bench's own voice test data: its
/// simulations hold `ticks` instead of `messages`, and these ticks carry timing and speech
/// flags but no transcript. Each such simulation is one dropped record that says so.
#[test]
fn tau2_voice_ticks_without_transcripts_are_dropped_with_the_reason() {
    let dir = testdata("tau2/voice/experiment");
    let results = dir.join("results.json");
    assert_eq!(
        Format::detect(&read_head(&results).unwrap()),
        Some(Format::Tau2)
    );
    let sink = read_path(&results, None).unwrap();
    assert_eq!(sink.records, 1);
    assert!(sink.conversations.is_empty());
    assert_eq!(sink.quarantined.len(), 1, "{:?}", sink.quarantined);
    let q = &sink.quarantined[0];
    assert_eq!(q.severity, Severity::Dropped);
    assert!(
        q.file
            .ends_with("simulations/49b22f0c-4a56-41c5-922f-bc2a56e53a23.json"),
        "{}",
        q.file
    );
    assert_eq!(
        q.reason,
        "simulation 49b22f0c-4a56-41c5-922f-bc2a56e53a23 is a full-duplex run of 40 tick(s), and \
         no tick holds text, a tool call or a tool result (it was saved without transcripts); \
         there is nothing to audit"
    );
}
