//! The facade for engines that distribute the work (the Python module, Ray): the audit of a
//! store's tables in memory, of one part at a time, and the ingest in shards give what the
//! command line's jobs give. Only crate-root items are used, as those callers use them.

use arrow::array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use traceaudit::distributed::{
    audit_batches, audit_part, finish_corpus, ingest_shard, join_keys, merge_part, merge_shards,
    plan_ingest, shard_duplicates,
};
use traceaudit::{audit, ingest, AuditOptions, Config, IngestOptions};

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(rel)
}

fn options() -> AuditOptions {
    let (config, text) = Config::load(&testdata("traceaudit.toml")).unwrap();
    AuditOptions {
        config,
        config_text: Some(text),
        threads: 2,
        ..AuditOptions::default()
    }
}

fn read(path: &Path) -> Vec<RecordBatch> {
    ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A table's rows as `column=value` text, comparable whatever the batching (timestamps as
/// their milliseconds: naming time zones would need chrono-tz).
fn rows(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for b in batches {
        let columns: Vec<arrow::array::ArrayRef> = b
            .columns()
            .iter()
            .map(|c| match c.data_type() {
                arrow::datatypes::DataType::Timestamp(..) => {
                    arrow::compute::cast(c, &arrow::datatypes::DataType::Int64).unwrap()
                }
                _ => c.clone(),
            })
            .collect();
        let formatters: Vec<_> = columns
            .iter()
            .map(|c| {
                arrow::util::display::ArrayFormatter::try_new(c.as_ref(), &Default::default())
                    .unwrap()
            })
            .collect();
        for i in 0..b.num_rows() {
            let schema = b.schema();
            out.push(
                formatters
                    .iter()
                    .zip(schema.fields())
                    .map(|(f, field)| format!("{}={}", field.name(), f.value(i)))
                    .collect(),
            );
        }
    }
    out
}

fn part_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    files
}

fn store_tables(store: &Path) -> (Vec<RecordBatch>, Vec<RecordBatch>) {
    let events = part_files(&store.join("events"))
        .iter()
        .flat_map(|f| read(f))
        .collect();
    let runs = part_files(&store.join("runs"))
        .iter()
        .flat_map(|f| read(f))
        .collect();
    (events, runs)
}

const TABLES: [&str; 4] = ["findings", "dispositions", "agreement", "attempts"];

/// The command line's store and corpus of testdata.
fn cli_corpus(dir: &Path) -> (PathBuf, PathBuf) {
    let store = dir.join("store");
    ingest(
        &[testdata("")],
        &store,
        &IngestOptions {
            threads: 2,
            part_bytes: 400_000,
            ..IngestOptions::default()
        },
    )
    .unwrap();
    let corpus = dir.join("corpus");
    audit(std::slice::from_ref(&store), &corpus, &options()).unwrap();
    (store, corpus)
}

#[test]
fn tables_in_memory_give_the_corpus_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (store, corpus) = cli_corpus(dir.path());
    let (events, runs) = store_tables(&store);
    let (tables, counted) = audit_batches(&events, &runs, &options()).unwrap();
    let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "findings",
            "dispositions",
            "agreement",
            "ledger",
            "attempts"
        ]
    );
    for table in &tables {
        let expected = read(&corpus.join(format!("{}.parquet", table.name)));
        assert_eq!(rows(&table.batches), rows(&expected), "{}", table.name);
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(corpus.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(counted.findings, manifest["findings"].as_u64().unwrap());
    assert!(counted.findings > 0);
}

fn refusal(events: &[RecordBatch], runs: &[RecordBatch]) -> String {
    match audit_batches(events, runs, &options()) {
        Ok(_) => panic!("incomplete tables were audited"),
        Err(e) => {
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
            e.to_string()
        }
    }
}

/// Keep the rows of `batches` for which `keep(column value)` holds.
fn filter(batches: &[RecordBatch], column: &str, keep: impl Fn(&str) -> bool) -> Vec<RecordBatch> {
    use arrow::array::{AsArray, BooleanArray};
    batches
        .iter()
        .map(|b| {
            let values = b.column_by_name(column).unwrap().as_string::<i32>();
            let mask: BooleanArray = values.iter().map(|v| Some(keep(v.unwrap()))).collect();
            arrow::compute::filter_record_batch(b, &mask).unwrap()
        })
        .collect()
}

#[test]
fn incomplete_tables_are_refused_naming_the_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = cli_corpus(dir.path());
    let (events, runs) = store_tables(&store);
    // A conversation of several runs; its first run's row left out, then half its events.
    let mut by_conversation: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for row in rows(&runs) {
        let field = |name: &str| {
            row.iter()
                .find_map(|c| c.strip_prefix(&format!("{name}=")))
                .unwrap()
                .to_string()
        };
        by_conversation
            .entry(field("conversation_id"))
            .or_default()
            .push(field("run_id"));
    }
    let (conversation, its_runs) = by_conversation
        .iter()
        .find(|(_, runs)| runs.len() >= 2)
        .unwrap();
    let first = its_runs[0].clone();
    let without_run = filter(&runs, "run_id", |r| r != first);
    let reason = refusal(&events, &without_run);
    assert!(
        reason.contains(&format!("conversation {conversation:?} is incomplete"))
            && reason.contains("has no row in the runs table"),
        "{reason}"
    );
    let seen = std::cell::Cell::new(0);
    let half = filter(&events, "run_id", |r| {
        if r != first {
            return true;
        }
        seen.set(seen.get() + 1);
        seen.get() % 2 == 0
    });
    let reason = refusal(&half, &runs);
    assert!(
        reason.contains(&format!(
            "conversation {conversation:?} is incomplete: run {first:?} has"
        )),
        "{reason}"
    );
    let no_seq: Vec<RecordBatch> = events
        .iter()
        .map(|b| {
            let i = b.schema().index_of("seq").unwrap();
            let mut b = b.clone();
            b.remove_column(i);
            b
        })
        .collect();
    assert!(refusal(&no_seq, &runs).contains("the events table has no column `seq`"));
}

#[test]
fn parts_audited_apart_make_the_command_line_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let (store, corpus) = cli_corpus(dir.path());
    let manifest = std::fs::read_to_string(store.join("manifest.json")).unwrap();
    let parts = part_files(&store.join("events")).len() as u32;
    assert!(parts >= 3, "{parts} parts");
    let out = dir.path().join("parts");
    // In reverse, and one part twice: files depend on the part only.
    let mut counted: Vec<_> = (0..parts)
        .rev()
        .map(|p| (p, audit_part(&store, p, &out, &options()).unwrap()))
        .collect();
    audit_part(&store, 1, &out, &options()).unwrap();
    counted.sort_by_key(|(p, _)| *p);
    let jsonl: Vec<u8> = counted
        .iter()
        .flat_map(|(_, c)| c.findings_jsonl.iter().copied())
        .collect();
    assert!(!jsonl.is_empty());
    assert_eq!(jsonl, std::fs::read(corpus.join("findings.jsonl")).unwrap());
    let counted: Vec<_> = counted.into_iter().map(|(_, c)| c.counted).collect();
    for table in TABLES {
        let got: Vec<RecordBatch> = part_files(&out.join(table))
            .iter()
            .flat_map(|f| read(f))
            .collect();
        let expected = read(&corpus.join(format!("{table}.parquet")));
        assert_eq!(rows(&got), rows(&expected), "{table}");
    }
    let made = finish_corpus(&out, "store", &manifest, &counted, &options(), 1.0).unwrap();
    let cli: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(corpus.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(serde_json::to_value(&made.counts).unwrap(), cli["counts"]);
    assert_eq!(
        std::fs::read(out.join("ledger.parquet")).unwrap(),
        std::fs::read(corpus.join("ledger.parquet")).unwrap()
    );
    let gone = audit_part(&store, parts, &out, &options()).unwrap_err();
    assert_eq!(gone.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn a_folder_of_other_files_is_not_written_into() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = cli_corpus(dir.path());
    let manifest = std::fs::read_to_string(store.join("manifest.json")).unwrap();
    let theirs = dir.path().join("theirs");
    std::fs::create_dir_all(theirs.join("findings")).unwrap();
    std::fs::write(theirs.join("notes.txt"), "keep").unwrap();
    let refused = audit_part(&store, 0, &theirs, &options()).unwrap_err();
    assert_eq!(refused.kind(), io::ErrorKind::AlreadyExists);
    assert!(refused.to_string().contains("notes.txt"), "{refused}");
    let refused = finish_corpus(&theirs, "store", &manifest, &[], &options(), 1.0).unwrap_err();
    assert_eq!(refused.kind(), io::ErrorKind::AlreadyExists);
    let mut left: Vec<String> = std::fs::read_dir(&theirs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["findings", "notes.txt"]);
    assert_eq!(
        std::fs::read_dir(theirs.join("findings")).unwrap().count(),
        0
    );
}

#[test]
fn the_drivers_unfinished_findings_file_is_expected() {
    // traceaudit.ray writes findings.jsonl under a hidden name while later parts are audited.
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = cli_corpus(dir.path());
    let out = dir.path().join("parts");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join(".findings.jsonl.4242-17.partial"), "").unwrap();
    audit_part(&store, 0, &out, &options()).unwrap();
    std::fs::write(out.join(".findings.jsonl.bak"), "").unwrap();
    let refused = audit_part(&store, 0, &out, &options()).unwrap_err();
    assert_eq!(refused.kind(), io::ErrorKind::AlreadyExists);
    assert!(
        refused.to_string().contains(".findings.jsonl.bak"),
        "{refused}"
    );
}

/// The spans of an OTLP JSON export dealt over `pieces` files, so each trace is split.
fn split_spans(source: &Path, into: &Path, pieces: usize) {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(source).unwrap()).unwrap();
    let spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    let stem = source.file_stem().unwrap().to_string_lossy();
    for k in 0..pieces {
        let mut piece = doc.clone();
        let dealt: Vec<serde_json::Value> = spans.iter().skip(k).step_by(pieces).cloned().collect();
        piece["resourceSpans"][0]["scopeSpans"][0]["spans"] = serde_json::Value::Array(dealt);
        std::fs::write(into.join(format!("{stem}.{k}.json")), piece.to_string()).unwrap();
    }
}

#[test]
fn an_ingest_in_shards_equals_the_whole_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("inputs");
    std::fs::create_dir_all(&inputs).unwrap();
    split_spans(
        &testdata("otel/pydantic-ai-v5-content/s3_followup_from_history.json"),
        &inputs,
        3,
    );
    for f in [
        "s1_repeated_identical_call.json",
        "s1_repeated_identical_call.jsonl",
    ] {
        let from = testdata("otel/pydantic-ai-v5-content").join(f);
        std::fs::copy(from, inputs.join(f)).unwrap();
    }
    let tau = "gpt-4o-airline.first3.json";
    std::fs::copy(testdata("tau-bench").join(tau), inputs.join(tau)).unwrap();
    // The same runs in a second file, read by another shard: kept from the earlier input.
    std::fs::copy(testdata("tau-bench").join(tau), inputs.join("z-again.json")).unwrap();
    let part_bytes = 30_000;
    let opts = IngestOptions {
        threads: 2,
        part_bytes,
        ..IngestOptions::default()
    };
    let whole = ingest(
        std::slice::from_ref(&inputs),
        &dir.path().join("whole"),
        &opts,
    )
    .unwrap();

    let plan = plan_ingest(&[inputs], part_bytes).unwrap();
    assert!(plan.parts >= 3, "{} parts", plan.parts);
    // Files sharing a trace id are read together; the others one by one.
    let mut group_of: HashMap<String, usize> = HashMap::new();
    let mut groups: Vec<Vec<u32>> = Vec::new();
    for (i, input) in plan.inputs.iter().enumerate() {
        let keys = join_keys(&input.path, None).unwrap();
        let joined = keys.iter().find_map(|k| group_of.get(k).copied());
        let g = joined.unwrap_or_else(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(i as u32);
        for k in keys {
            group_of.insert(k, g);
        }
    }
    assert!(groups.iter().any(|g| g.len() == 3), "{groups:?}");
    assert!(groups.len() >= 3, "{groups:?}");
    let mut shards = Vec::new();
    for (s, files) in groups.iter().enumerate().rev() {
        let out = dir.path().join(format!("shard-{s}"));
        ingest_shard(&plan, files, &out, &opts).unwrap();
        shards.push((out, files.clone()));
    }
    shards.reverse();
    let merged =
        merge_shards(&plan, &shards, &dir.path().join("merged"), &opts, 0.0, None).unwrap();
    // The same store from parts merged one at a time (as tasks of their own would).
    let dropped = shard_duplicates(&plan, &shards, None).unwrap();
    assert!(dropped.iter().any(|d| !d.is_empty()));
    // Surveyed in buckets of run ids, the duplicates are the same, shard by shard.
    let mut in_buckets = vec![Vec::new(); shards.len()];
    for bucket in 0..3 {
        for (s, ids) in shard_duplicates(&plan, &shards, Some((bucket, 3)))
            .unwrap()
            .into_iter()
            .enumerate()
        {
            in_buckets[s].extend(ids);
        }
    }
    for d in &mut in_buckets {
        d.sort();
    }
    assert_eq!(in_buckets, dropped);
    let dirs: Vec<PathBuf> = shards.iter().map(|(d, _)| d.clone()).collect();
    let merging = dir.path().join("merging");
    for part in (0..plan.parts).rev() {
        merge_part(&dirs, &dropped, part, &merging).unwrap();
    }
    let by_part = dir.path().join("by-part");
    let apart = merge_shards(&plan, &shards, &by_part, &opts, 0.0, Some(&merging)).unwrap();
    assert_eq!(apart.manifest.counts, whole.manifest.counts);
    for folder in ["events", "runs"] {
        for part in part_files(&merged.store.join(folder)) {
            let name = part.file_name().unwrap();
            assert_eq!(
                std::fs::read(by_part.join(folder).join(name)).unwrap(),
                std::fs::read(&part).unwrap(),
                "{folder}/{name:?}"
            );
        }
    }
    assert_eq!(
        std::fs::read(by_part.join("quarantine.jsonl")).unwrap(),
        std::fs::read(merged.store.join("quarantine.jsonl")).unwrap()
    );
    let (a, b) = (&merged.manifest, &whole.manifest);
    assert_eq!(a.counts, b.counts);
    assert_eq!(a.inputs, b.inputs);
    assert_eq!(a.parts, b.parts);
    assert!(a.counts.duplicate_runs > 0);
    let sorted_lines = |store: &Path| {
        let mut lines: Vec<String> = std::fs::read_to_string(store.join("quarantine.jsonl"))
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(sorted_lines(&merged.store), sorted_lines(&whole.store));
    let sorted_rows = |batches: &[RecordBatch]| {
        let mut r = rows(batches);
        r.sort();
        r
    };
    for folder in ["events", "runs"] {
        for part in part_files(&whole.store.join(folder)) {
            let name = part.file_name().unwrap();
            assert_eq!(
                sorted_rows(&read(&merged.store.join(folder).join(name))),
                sorted_rows(&read(&part)),
                "{folder}/{name:?}"
            );
        }
    }
    // Audited, the two stores give one corpus.
    let opts = AuditOptions {
        threads: 2,
        ..AuditOptions::default()
    };
    audit(
        std::slice::from_ref(&whole.store),
        &dir.path().join("a"),
        &opts,
    )
    .unwrap();
    audit(
        std::slice::from_ref(&merged.store),
        &dir.path().join("b"),
        &opts,
    )
    .unwrap();
    for table in TABLES {
        let name = format!("{table}.parquet");
        assert_eq!(
            rows(&read(&dir.path().join("b").join(&name))),
            rows(&read(&dir.path().join("a").join(&name))),
            "{table}"
        );
    }
}

/// Each part's conversation ids, from the runs table (its `part` column) and from the events
/// part files, which must agree.
fn conversations_by_part(store: &Path) -> Vec<Vec<String>> {
    use arrow::array::AsArray;
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(store.join("manifest.json")).unwrap())
            .unwrap();
    let parts = manifest["parts"].as_array().unwrap().len();
    let mut from_runs = vec![std::collections::BTreeSet::new(); parts];
    for b in part_files(&store.join("runs")).iter().flat_map(|f| read(f)) {
        let ids = b
            .column_by_name("conversation_id")
            .unwrap()
            .as_string::<i32>();
        let part = b
            .column_by_name("part")
            .unwrap()
            .as_primitive::<arrow::datatypes::UInt32Type>();
        for i in 0..b.num_rows() {
            from_runs[part.value(i) as usize].insert(ids.value(i).to_string());
        }
    }
    for (p, name) in manifest["parts"].as_array().unwrap().iter().enumerate() {
        let mut from_events = std::collections::BTreeSet::new();
        for b in read(&store.join(name.as_str().unwrap())) {
            let ids = b
                .column_by_name("conversation_id")
                .unwrap()
                .as_string::<i32>();
            from_events.extend((0..b.num_rows()).map(|i| ids.value(i).to_string()));
        }
        assert_eq!(from_events, from_runs[p], "part {p} of {}", store.display());
    }
    from_runs
        .into_iter()
        .map(|s| s.into_iter().collect())
        .collect()
}

/// Parts over the row limit are split by conversation, alike whether the store was ingested
/// whole or merged from shards, and the audit finds the same rows as in the store not split.
#[test]
fn parts_over_the_row_limit_are_split_alike_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = [
        testdata("tau-bench"),
        testdata("tau2"),
        testdata("agentfootprint"),
    ];
    let with_rows = |part_rows: u64| IngestOptions {
        threads: 2,
        part_bytes: 1 << 30,
        part_rows,
        ..IngestOptions::default()
    };
    let plain = ingest(&inputs, &dir.path().join("plain"), &with_rows(0)).unwrap();
    assert_eq!(plain.manifest.parts.len(), 1);
    let split = ingest(&inputs, &dir.path().join("split"), &with_rows(300)).unwrap();
    let parts = conversations_by_part(&split.store);
    assert!(parts.len() >= 4, "{} parts", parts.len());
    assert_eq!(split.manifest.counts, plain.manifest.counts);
    let mut all: Vec<String> = parts.iter().flatten().cloned().collect();
    let listed = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), listed, "a conversation in two parts");
    assert_eq!(all, conversations_by_part(&plain.store)[0]);
    // Rows per part: at most the limit, unless the part is one conversation.
    let store = traceaudit::Store::open(&split.store).unwrap();
    for p in 0..parts.len() as u32 {
        let conversations = store.read_part(p).unwrap();
        let rows: usize = conversations
            .iter()
            .flat_map(|c| &c.runs)
            .map(|r| 1 + r.events.len())
            .sum();
        assert!(
            rows <= 300 || conversations.len() == 1,
            "part {p}: {rows} rows"
        );
    }

    // The audit reads the same rows, in parts of their own.
    let audited = |store: &Path, name: &str| {
        let corpus = dir.path().join(name);
        audit(&[store.to_path_buf()], &corpus, &options()).unwrap();
        TABLES.map(|t| {
            let mut r = rows(&read(&corpus.join(format!("{t}.parquet"))));
            r.sort();
            r
        })
    };
    assert_eq!(
        audited(&split.store, "split-corpus"),
        audited(&plain.store, "plain-corpus")
    );

    // Shards merged split their parts as the whole ingest did.
    let plan = plan_ingest(&inputs, 1 << 30).unwrap();
    let mut shards = Vec::new();
    for (i, _) in plan.inputs.iter().enumerate() {
        let out = dir.path().join(format!("shard-{i}"));
        ingest_shard(&plan, &[i as u32], &out, &with_rows(300)).unwrap();
        shards.push((out, vec![i as u32]));
    }
    let merged = merge_shards(
        &plan,
        &shards,
        &dir.path().join("merged"),
        &with_rows(300),
        0.0,
        None,
    )
    .unwrap();
    assert_eq!(merged.manifest.counts, split.manifest.counts);
    assert_eq!(conversations_by_part(&merged.store), parts);
}
