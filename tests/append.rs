//! The nightly job, incremental: seven nights of generated agentfootprint logs, whose sessions
//! go on past midnight, appended to one store (`ingest --append`) and audited a generation at a
//! time (`audit --generation last`), against one ingest and audit of all the logs at once.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use traceaudit::{append, audit, compact, ingest, AuditOptions, Config, GenerationPick};
use traceaudit::{IngestOptions, Store};
use traceaudit_gen::{self as gen, GenFormat, GenOptions};

const NIGHTS: usize = 7;

/// A generated agentfootprint corpus of `runs` runs, its lines split into seven nights by run:
/// each run's lines go to the night of its place among the runs, so a session of several runs
/// goes on into the next nights. Night 5 also holds a copy of night 3's file, delivered again.
/// Returns each night's folder and the audit configuration.
fn nights(dir: &Path, runs: u64, seed: u64) -> (Vec<PathBuf>, PathBuf) {
    let corpus = dir.join("generated");
    let mut opts = GenOptions::new(GenFormat::Agentfootprint, seed);
    opts.runs = Some(runs);
    opts.rates.result_bytes_max = 2_000;
    gen::generate(&opts, &corpus).expect("generate");
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus.join(gen::INPUT_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut lines: Vec<(String, String)> = Vec::new();
    for file in files {
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            let run = serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|v| v["meta"]["runId"].as_str().map(str::to_string))
                .unwrap_or_default();
            lines.push((run, line.to_string()));
        }
    }
    let mut order: Vec<String> = Vec::new();
    for (run, _) in &lines {
        if !run.is_empty() && !order.contains(run) {
            order.push(run.clone());
        }
    }
    let night_of = |run: &str| {
        let at = order.iter().position(|r| r == run).unwrap_or(0);
        at * NIGHTS / order.len()
    };
    let mut texts = vec![String::new(); NIGHTS];
    let mut last = 0;
    for (run, line) in &lines {
        if !run.is_empty() {
            last = night_of(run);
        }
        texts[last].push_str(line);
        texts[last].push('\n');
    }
    let mut folders = Vec::new();
    for (n, text) in texts.iter().enumerate() {
        let folder = dir.join(format!("logs/day={:02}", n + 1));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(format!("night-{}.ndjson", n + 1)), text).unwrap();
        folders.push(folder);
    }
    std::fs::copy(
        folders[2].join("night-3.ndjson"),
        folders[4].join("night-3-again.ndjson"),
    )
    .unwrap();
    (folders, corpus.join(gen::CONFIG_FILE))
}

fn audit_opts(config: &Path, generation: Option<GenerationPick>) -> AuditOptions {
    let (config, text) = Config::load(config).unwrap();
    AuditOptions {
        config,
        config_text: Some(text),
        threads: 2,
        generation,
        ..AuditOptions::default()
    }
}

fn ingest_opts() -> IngestOptions {
    IngestOptions {
        threads: 2,
        // Small parts, so a night's store has several and conversations move between them.
        part_bytes: 40_000,
        ..IngestOptions::default()
    }
}

/// Audit the store at `store` (generation `generation` of it, when given) into `out`.
fn audit_store(
    store: &Path,
    out: &Path,
    config: &Path,
    generation: Option<GenerationPick>,
) -> std::io::Result<traceaudit::AuditSummary> {
    audit(&[store.to_path_buf()], out, &audit_opts(config, generation))
}

/// A corpus's dispositions: (run, check) -> disposition.
fn dispositions(corpus: &Path) -> BTreeMap<(String, String), String> {
    use arrow::array::AsArray;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let file = std::fs::File::open(corpus.join("dispositions.parquet")).unwrap();
    let mut out = BTreeMap::new();
    for batch in ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
    {
        let batch = batch.unwrap();
        let text = |name: &str| {
            arrow::compute::cast(
                batch.column_by_name(name).unwrap(),
                &arrow::datatypes::DataType::Utf8,
            )
            .unwrap()
        };
        let (run, check, disposition) = (
            text("run_id"),
            text(traceaudit::tables::CHECK_COLUMN),
            text("disposition"),
        );
        for i in 0..batch.num_rows() {
            let key = (
                run.as_string::<i32>().value(i).to_string(),
                check.as_string::<i32>().value(i).to_string(),
            );
            let value = disposition.as_string::<i32>().value(i).to_string();
            assert!(
                out.insert(key.clone(), value).is_none(),
                "{key:?} twice in {}",
                corpus.display()
            );
        }
    }
    out
}

/// The store's live runs: each run id once, with its conversation.
fn live_runs(store: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for row in Store::open(store).unwrap().runs().unwrap() {
        let id = row.run.run_id.clone();
        assert!(
            out.insert(id.clone(), row.run.conversation_id).is_none(),
            "run {id} is read twice from {}",
            store.display()
        );
    }
    out
}

#[test]
fn seven_nights_appended_equal_one_audit_of_everything() {
    let dir = tempfile::tempdir().unwrap();
    let (folders, config) = nights(dir.path(), 240, 11);

    // Everything at once.
    let whole = dir.path().join("whole-store");
    ingest(&folders, &whole, &ingest_opts()).unwrap();
    let whole_corpus = dir.path().join("whole-corpus");
    audit_store(&whole, &whole_corpus, &config, None).unwrap();
    let expected = dispositions(&whole_corpus);
    let expected_runs = live_runs(&whole);

    // Night by night.
    let store = dir.path().join("store");
    let mut latest: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut superseded = 0;
    for (n, folder) in folders.iter().enumerate() {
        let summary = append(std::slice::from_ref(folder), &store, &ingest_opts()).unwrap();
        let generation = summary.generation.expect("each night adds a generation");
        assert_eq!(generation.number, n as u32);
        assert_eq!(summary.created, n == 0);
        assert_eq!(
            summary.skipped_as_ingested,
            u64::from(n == 4),
            "night {}",
            n + 1
        );
        superseded += generation.superseded_conversations;
        let night = dir.path().join(format!("nights/2026-12-{:02}", n + 1));
        let s = audit_store(&store, &night, &config, Some(GenerationPick::Last)).unwrap();
        assert_eq!(s.manifest.store_generation, Some(n as u32));
        latest.extend(dispositions(&night));
    }
    assert!(
        superseded >= 3,
        "sessions must cross midnight for this test to mean anything ({superseded})"
    );
    assert_eq!(
        latest, expected,
        "latest dispositions across nights vs one audit"
    );

    // No run counted twice, and the store's counts are the whole store's.
    assert_eq!(live_runs(&store), expected_runs);
    let grown = Store::open(&store).unwrap().manifest;
    let once = Store::open(&whole).unwrap().manifest;
    for (what, a, b) in [
        (
            "conversations",
            grown.counts.conversations,
            once.counts.conversations,
        ),
        ("runs", grown.counts.runs, once.counts.runs),
        ("events", grown.counts.events, once.counts.events),
        ("landings", grown.counts.landings, once.counts.landings),
        (
            "user turns",
            grown.counts.user_turn_runs,
            once.counts.user_turn_runs,
        ),
    ] {
        assert_eq!(a, b, "{what}");
    }
    assert_eq!(grown.generations.as_ref().unwrap().len(), NIGHTS);

    // An audit of the whole grown store is the audit of everything.
    let all = dir.path().join("all-of-store");
    let s = audit_store(&store, &all, &config, None).unwrap();
    assert_eq!(dispositions(&all), expected);
    assert_eq!(s.manifest.runs, expected_runs.len() as u64);

    // The same nights again change nothing: every input is skipped.
    for folder in &folders {
        let again = append(std::slice::from_ref(folder), &store, &ingest_opts()).unwrap();
        assert!(again.generation.is_none(), "{}", folder.display());
        assert_eq!(
            again.skipped_as_ingested,
            std::fs::read_dir(folder).unwrap().count() as u64
        );
        assert_eq!(again.manifest.counts, grown.counts);
    }

    // Compaction: one generation, no superseded rows, the same results.
    let compacted = compact(&store, &ingest_opts()).unwrap();
    assert_eq!(compacted.generations_before, NIGHTS as u32);
    assert!(compacted.superseded_dropped >= superseded, "{compacted:?}");
    assert_eq!(compacted.manifest.generations.as_ref().unwrap().len(), 1);
    assert_eq!(compacted.manifest.counts, grown.counts);
    assert_eq!(live_runs(&store), expected_runs);
    let after = dir.path().join("after-compaction");
    audit_store(&store, &after, &config, None).unwrap();
    assert_eq!(dispositions(&after), expected);
    // The retired generations are still there for readers that opened the store before; the
    // next write removes them.
    assert!(store.join("generations/00001").is_dir());
    let nothing = append(&folders[..1], &store, &ingest_opts()).unwrap();
    assert!(nothing.generation.is_none());
    let left: BTreeSet<String> = std::fs::read_dir(store.join("generations"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, BTreeSet::from(["00007".to_string()]), "{left:?}");
    assert!(!store.join("runs").exists() && !store.join("events").exists());
    compact(&store, &ingest_opts()).unwrap();
    let again = dir.path().join("after-two-compactions");
    audit_store(&store, &again, &config, None).unwrap();
    assert_eq!(dispositions(&again), expected);
}

#[test]
fn a_night_corpus_finds_its_store_after_the_store_grew() {
    let dir = tempfile::tempdir().unwrap();
    let (folders, config) = nights(dir.path(), 60, 5);
    let store = dir.path().join("store");
    append(&folders[..1], &store, &ingest_opts()).unwrap();
    let first = dir.path().join("night-1");
    audit_store(&store, &first, &config, Some(GenerationPick::Last)).unwrap();
    for folder in &folders[1..] {
        append(std::slice::from_ref(folder), &store, &ingest_opts()).unwrap();
    }
    let out = common::traceaudit(&["report", common::path_str(&first), "--by", "agent"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    // A generation the store does not have is refused by number.
    let err = audit_store(
        &store,
        &dir.path().join("none"),
        &config,
        Some(GenerationPick::Number(99)),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("has no generation 99"), "{err}");
    // A corpus given as the store to grow is refused as one, and left as it was.
    let before = std::fs::read(first.join("manifest.json")).unwrap();
    let err = append(&folders[..1], &first, &ingest_opts())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("is not a traceaudit store: it is a corpus's manifest"),
        "{err}"
    );
    assert_eq!(std::fs::read(first.join("manifest.json")).unwrap(), before);
    assert!(!first.join("generations").exists());
    // --generation needs a store.
    let err = audit(
        &folders[..1],
        &dir.path().join("raw"),
        &audit_opts(&config, Some(GenerationPick::Last)),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("not a store"), "{err}");
}

/// An append killed at seeded moments leaves a store that audits as before it, and the next
/// append cleans up after it and succeeds.
#[test]
fn a_killed_append_leaves_the_store_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let (folders, config) = nights(dir.path(), 400, 3);
    let store = dir.path().join("store");
    append(&folders[..3], &store, &ingest_opts()).unwrap();
    let before = dir.path().join("before");
    audit_store(&store, &before, &config, None).unwrap();
    let expected = dispositions(&before);
    let manifest_before = std::fs::read(store.join("manifest.json")).unwrap();

    let bin = env!("CARGO_BIN_EXE_traceaudit");
    let rest: Vec<&str> = folders[3..].iter().map(|f| common::path_str(f)).collect();
    let args = |store: &Path| -> Vec<String> {
        let mut a = vec!["ingest".to_string()];
        a.extend(rest.iter().map(|s| s.to_string()));
        a.extend([
            "--out".into(),
            common::path_str(store).into(),
            "--append".into(),
            "--quiet".into(),
            "--threads".into(),
            "2".into(),
        ]);
        a
    };
    // How long a whole append takes, on a copy of the store.
    let probe = dir.path().join("probe");
    common::copy_dir(&store, &probe);
    let started = std::time::Instant::now();
    let out = std::process::Command::new(bin)
        .args(args(&probe))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let whole = started.elapsed().as_micros().max(1000) as u64;

    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut killed_early = 0;
    for _ in 0..6 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let at = std::time::Duration::from_micros(seed % whole);
        let mut child = std::process::Command::new(bin)
            .args(args(&store))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(at);
        child.kill().ok();
        child.wait().unwrap();
        if std::fs::read(store.join("manifest.json")).unwrap() != manifest_before {
            // It committed before the kill: put the store back as it was for the next round
            // (the generation it wrote is then named by no manifest).
            std::fs::write(store.join("manifest.json"), &manifest_before).unwrap();
            continue;
        }
        killed_early += 1;
        let check = dir.path().join("after-kill");
        let _ = std::fs::remove_dir_all(&check);
        audit_store(&store, &check, &config, None).unwrap();
        assert_eq!(dispositions(&check), expected, "killed at {at:?}");
    }
    assert!(
        killed_early >= 3,
        "the kills came too late ({killed_early} of 6 in time)"
    );
    // The next append removes what the killed ones left and adds the nights.
    let out = std::process::Command::new(bin)
        .args(args(&store))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("generation       1:"), "{text}");
    let left: BTreeSet<String> = std::fs::read_dir(store.join("generations"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, BTreeSet::from(["00001".to_string()]));
}

/// Adding a store of the night's inputs (what the distributed ingest writes) gives the
/// generation an append of the inputs gives: the same entry, counts and audit rows.
#[test]
fn a_night_ingested_apart_and_added_equals_the_night_appended() {
    let dir = tempfile::tempdir().unwrap();
    let (folders, config) = nights(dir.path(), 120, 8);
    let (by_inputs, by_store) = (dir.path().join("a"), dir.path().join("b"));
    for store in [&by_inputs, &by_store] {
        append(&folders[..2], store, &ingest_opts()).unwrap();
    }
    // Night 3, with a file of runs the store holds already under another name.
    let resent = folders[2].join("night-1-resent.ndjson");
    let mut text = std::fs::read_to_string(folders[0].join("night-1.ndjson")).unwrap();
    text.push('\n');
    std::fs::write(&resent, text).unwrap();
    let want = append(&folders[2..3], &by_inputs, &ingest_opts()).unwrap();
    let night = dir.path().join("night-store");
    ingest(&folders[2..3], &night, &ingest_opts()).unwrap();
    let got = traceaudit::append_store(&night, &by_store, 0, &ingest_opts()).unwrap();
    let (a, b) = (got.generation.unwrap(), want.generation.unwrap());
    assert!(
        b.superseded_conversations > 0 && b.counts.duplicate_runs > 0,
        "{b:?}"
    );
    assert_eq!(
        (a.number, &a.dir, a.first_input, a.inputs, a.parts),
        (b.number, &b.dir, b.first_input, b.inputs, b.parts)
    );
    assert_eq!(
        (a.new_conversations, a.superseded_conversations),
        (b.new_conversations, b.superseded_conversations)
    );
    assert_eq!(
        (a.copied_runs, a.copied_events),
        (b.copied_runs, b.copied_events)
    );
    assert_eq!(a.counts, b.counts);
    assert_eq!(got.manifest.counts, want.manifest.counts);
    assert_eq!(got.manifest.inputs, want.manifest.inputs);
    assert_eq!(live_runs(&by_store), live_runs(&by_inputs));
    for pick in [None, Some(GenerationPick::Last)] {
        let corpus = |store: &Path, name: &str| {
            let out = dir.path().join(format!("{name}-{}", pick.is_some()));
            audit_store(store, &out, &config, pick).unwrap();
            dispositions(&out)
        };
        assert_eq!(corpus(&by_store, "b"), corpus(&by_inputs, "a"), "{pick:?}");
    }
    // The night is read as it is: a store it does not match is refused, nothing written.
    let before = std::fs::read(by_store.join("manifest.json")).unwrap();
    let err = traceaudit::append_store(&dir.path().join("missing"), &by_store, 0, &ingest_opts())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("missing"), "{err}");
    assert_eq!(
        std::fs::read(by_store.join("manifest.json")).unwrap(),
        before
    );
}

/// Every input of `testdata/` appended again is skipped as held, a tau2 dir layout (a
/// `results.json` read with the simulation files beside it) included: the manifest names it by
/// its index file's SHA-256.
#[test]
fn testdata_appended_twice_adds_nothing_the_second_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let first = append(std::slice::from_ref(&testdata), &store, &ingest_opts()).unwrap();
    assert!(first.created);
    let layout = testdata.join("tau2/dir-layout/2025-10-12T22-50-14_airline_grok-3/results.json");
    let entry = first
        .manifest
        .inputs
        .iter()
        .find(|i| {
            i.path
                .ends_with("dir-layout/2025-10-12T22-50-14_airline_grok-3/results.json")
        })
        .expect("the dir layout is an input");
    use sha2::Digest;
    let sha = sha2::Sha256::digest(std::fs::read(&layout).unwrap());
    let hex: String = sha.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(entry.sha256, hex);
    let again = append(std::slice::from_ref(&testdata), &store, &ingest_opts()).unwrap();
    assert!(again.generation.is_none(), "{:?}", again.generation);
    assert_eq!(
        again.skipped_as_ingested,
        first.manifest.inputs.len() as u64
    );
    assert_eq!(again.manifest.counts, first.manifest.counts);
}

/// A log read while it was still being written, then whole: night 1 holds the first half of
/// every file (its last run cut off), night 2 the same files whole. The whole copies of the
/// cut-off runs replace the stored ones, by either way of appending, and the latest dispositions
/// are one audit of the whole files.
#[test]
fn a_log_read_cut_off_then_whole_keeps_the_whole_runs() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("generated");
    let mut opts = GenOptions::new(GenFormat::Agentfootprint, 5);
    opts.runs = Some(80);
    opts.rates.result_bytes_max = 2_000;
    gen::generate(&opts, &corpus).expect("generate");
    let config = corpus.join(gen::CONFIG_FILE);
    let (half, whole) = (dir.path().join("night-1"), dir.path().join("night-2"));
    std::fs::create_dir_all(&half).unwrap();
    std::fs::create_dir_all(&whole).unwrap();
    for entry in std::fs::read_dir(corpus.join(gen::INPUT_DIR)).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let cut: String = lines[..lines.len() / 2]
            .iter()
            .map(|l| format!("{l}\n"))
            .collect();
        let name = path.file_name().unwrap();
        std::fs::write(half.join(name), cut).unwrap();
        std::fs::write(whole.join(name), &text).unwrap();
    }

    let once = dir.path().join("once");
    ingest(std::slice::from_ref(&whole), &once, &ingest_opts()).unwrap();
    let once_corpus = dir.path().join("once-corpus");
    audit_store(&once, &once_corpus, &config, None).unwrap();
    let expected = dispositions(&once_corpus);
    let once_counts = Store::open(&once).unwrap().manifest.counts;

    // By inputs (`ingest --append`), and by a night's store (the distributed ingest's way).
    let (by_inputs, by_store) = (dir.path().join("a"), dir.path().join("b"));
    for store in [&by_inputs, &by_store] {
        append(std::slice::from_ref(&half), store, &ingest_opts()).unwrap();
    }
    let first = dispositions_of(&by_inputs, &config, dir.path(), "first");
    let got = append(std::slice::from_ref(&whole), &by_inputs, &ingest_opts()).unwrap();
    let night = dir.path().join("night-2-store");
    ingest(std::slice::from_ref(&whole), &night, &ingest_opts()).unwrap();
    let by_night = traceaudit::append_store(&night, &by_store, 0, &ingest_opts()).unwrap();

    let generation = got.generation.clone().unwrap();
    assert!(generation.replaced_runs > 0, "{generation:?}");
    assert_eq!((generation.replaced_runs, generation.copied_runs), {
        let g = by_night.generation.clone().unwrap();
        (g.replaced_runs, g.copied_runs)
    });
    for store in [&by_inputs, &by_store] {
        let counts = Store::open(store).unwrap().manifest.counts;
        assert_eq!(
            (
                counts.runs,
                counts.events,
                counts.landings,
                counts.user_turn_runs
            ),
            (
                once_counts.runs,
                once_counts.events,
                once_counts.landings,
                once_counts.user_turn_runs
            ),
            "{}",
            store.display()
        );
        assert_eq!(live_runs(store), live_runs(&once));
        let mut latest = first.clone();
        latest.extend(dispositions_of(store, &config, dir.path(), "last"));
        assert_eq!(latest, expected, "{}", store.display());
        // Compaction keeps the whole copies (its own count check included).
        compact(store, &ingest_opts()).unwrap();
        assert_eq!(
            dispositions_of(store, &config, dir.path(), "compacted"),
            expected
        );
    }
}

/// The dispositions of an audit of `store`'s last generation (`what` names its corpus), or
/// of all of it once compacted.
fn dispositions_of(
    store: &Path,
    config: &Path,
    dir: &Path,
    what: &str,
) -> BTreeMap<(String, String), String> {
    let name = store.file_name().unwrap().to_string_lossy();
    let out = dir.join(format!("corpus-{name}-{what}"));
    let pick = (what != "compacted").then_some(GenerationPick::Last);
    audit_store(store, &out, config, pick).unwrap();
    dispositions(&out)
}

/// `store` (written whole by this engine) rewritten as store schema 9 laid it out: one
/// `runs.parquet`, a row group per part, and a manifest without `runs_by_part`.
fn as_schema_9(store: &Path) {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let path = store.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let parts = manifest["parts"].as_array().unwrap().len();
    let schema = ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(store.join("runs/part-00000.parquet")).unwrap(),
    )
    .unwrap()
    .schema()
    .clone();
    let file = std::fs::File::create(store.join("runs.parquet")).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema, None).unwrap();
    for p in 0..parts {
        let part = store.join(format!("runs/part-{p:05}.parquet"));
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(part).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            writer.write(&batch.unwrap()).unwrap();
        }
        writer.flush().unwrap();
    }
    writer.close().unwrap();
    std::fs::remove_dir_all(store.join("runs")).unwrap();
    manifest["store_schema_version"] = 9.into();
    for g in manifest["generations"].as_array_mut().unwrap() {
        g.as_object_mut().unwrap().remove("runs_by_part");
    }
    std::fs::write(&path, manifest.to_string()).unwrap();
}

/// A store written before runs were kept by part is audited as it is, grows by appends
/// (its first generation keeps its one runs file, the new ones have a file per part), and
/// compacts into the new layout: every audit the audit of all the logs at once.
#[test]
fn a_store_of_schema_9_grows_and_compacts_into_runs_by_part() {
    let dir = tempfile::tempdir().unwrap();
    let (folders, config) = nights(dir.path(), 120, 3);
    let whole = dir.path().join("whole-store");
    ingest(&folders, &whole, &ingest_opts()).unwrap();
    let whole_corpus = dir.path().join("whole-corpus");
    audit_store(&whole, &whole_corpus, &config, None).unwrap();
    let expected = dispositions(&whole_corpus);

    let store = dir.path().join("store");
    ingest(&folders[..3], &store, &ingest_opts()).unwrap();
    let first = dir.path().join("first");
    audit_store(&store, &first, &config, None).unwrap();
    as_schema_9(&store);
    assert!(store.join("runs.parquet").is_file() && !store.join("runs").exists());
    let old = dir.path().join("old");
    audit_store(&store, &old, &config, None).unwrap();
    assert_eq!(dispositions(&old), dispositions(&first));
    for folder in &folders[3..] {
        let grown = append(std::slice::from_ref(folder), &store, &ingest_opts()).unwrap();
        assert_eq!(grown.manifest.store_schema_version, 10);
    }
    assert!(store.join("runs.parquet").is_file());
    assert!(store
        .join("generations/00001/runs/part-00000.parquet")
        .is_file());
    let all = dir.path().join("all");
    audit_store(&store, &all, &config, None).unwrap();
    assert_eq!(dispositions(&all), expected);
    compact(&store, &ingest_opts()).unwrap();
    let compacted = dir.path().join("compacted");
    audit_store(&store, &compacted, &config, None).unwrap();
    assert_eq!(dispositions(&compacted), expected);
    // The next write removes the retired files, the root's runs.parquet among them.
    append(&folders[..1], &store, &ingest_opts()).unwrap();
    assert!(!store.join("runs.parquet").exists());
}

/// A compaction knows its rows (the manifest counts every live one), so it makes the parts
/// the row limit needs from the start, an eighth to spare, where counting by input bytes
/// alone made too few parts and then read each back to split it.
#[test]
fn a_compaction_makes_the_parts_its_rows_need() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("generated");
    let mut opts = GenOptions::new(GenFormat::Tau2, 7);
    opts.runs = Some(2_000);
    gen::generate(&opts, &corpus).expect("generate");
    let store = dir.path().join("store");
    let ingested = ingest(
        &[corpus.join(gen::INPUT_DIR)],
        &store,
        &IngestOptions::default(),
    )
    .unwrap();
    let rows = ingested.manifest.counts.runs + ingested.manifest.counts.events;
    // By bytes one part; by rows four (three would leave less than an eighth to spare).
    let part_rows = rows / 3;
    let opts = IngestOptions {
        part_rows,
        ..IngestOptions::default()
    };
    let compacted = compact(&store, &opts).unwrap();
    assert_eq!(compacted.parts_after, 4, "{rows} rows");
    assert_eq!(compacted.manifest.counts, ingested.manifest.counts);
    // Made as four parts, not one split in four: each conversation is in the part an ingest
    // into four parts (by bytes) puts it in, where a split moves conversations by its own plan.
    let four = dir.path().join("four");
    let by_bytes = IngestOptions {
        part_bytes: ingested.manifest.counts.bytes.div_ceil(4),
        ..IngestOptions::default()
    };
    ingest(&[corpus.join(gen::INPUT_DIR)], &four, &by_bytes).unwrap();
    let parts = |store: &Path| -> BTreeMap<String, u32> {
        let runs = Store::open(store).unwrap().runs().unwrap();
        runs.into_iter()
            .map(|r| (r.run.conversation_id, r.part))
            .collect()
    };
    let (compacted, four) = (parts(&store), parts(&four));
    assert_eq!(four.values().max(), Some(&3));
    assert_eq!(compacted.len(), four.len());
    let moved = four.iter().filter(|(id, p)| compacted.get(*id) != Some(p));
    assert_eq!(
        moved.count(),
        0,
        "conversations in another part than by hash"
    );
}
