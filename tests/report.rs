//! `report`, `diff` and `explain` end to end on corpora built from testdata: snapshots of each
//! format, a diff that catches injected loops, identical corpora, and recorded text that tries
//! to inject markup (checked in the HTML itself, and in headless Chromium when it is installed).

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Run a command in-process (the working directory is the crate directory, so recorded source
/// paths are relative and stable) with `--out` to a temporary file; its exit status and output.
/// In-process rather than through the binary: a build elsewhere cannot swap the binary under a
/// running test.
fn run(args: &[&str]) -> (u8, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut full = vec!["traceaudit"];
    full.extend_from_slice(args);
    let writes =
        matches!(args[0], "report" | "diff" | "explain" | "trend") && !args.contains(&"--out");
    if writes {
        full.extend_from_slice(&["--out", path_str(&out)]);
    }
    // clap's own usage errors exit 2, as from the binary.
    let code = traceaudit::run_command_line(full);
    let status = [0u8, 1, 2]
        .into_iter()
        .find(|&c| ExitCode::from(c) == code)
        .expect("exit status 0, 1 or 2");
    let text = if writes {
        std::fs::read_to_string(&out).unwrap_or_default()
    } else {
        String::new()
    };
    (status, text)
}

fn ok(args: &[&str]) -> String {
    let (status, text) = run(args);
    assert_eq!(status, 0, "{args:?}");
    text
}

/// `trend`'s output, its exit status held to the gate: 1 exactly when the last night is flagged
/// (as the JSON of the same nights and rules says), else 0.
fn trend_out(args: &[&str]) -> String {
    let (status, text) = run(args);
    let mut json: Vec<&str> = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
        } else if *a == "--format" {
            skip = true;
        } else {
            json.push(a);
        }
    }
    json.extend(["--format", "json"]);
    let (json_status, json_text) = run(&json);
    let v: Value = serde_json::from_str(&json_text).unwrap();
    let last_flagged = v["nights"]
        .as_array()
        .unwrap()
        .last()
        .is_some_and(|n| n["flagged"] == Value::Bool(true));
    let expected = u8::from(last_flagged);
    assert_eq!((status, json_status), (expected, expected), "{args:?}");
    text
}

/// Audit `inputs` (relative to the crate directory) with the sample configuration into `out`.
fn audit(inputs: &[&str], out: &Path) {
    let mut args = vec!["audit"];
    args.extend_from_slice(inputs);
    args.extend_from_slice(&[
        "--config",
        "testdata/traceaudit.toml",
        "--quiet",
        "--out",
        path_str(out),
    ]);
    ok(&args);
}

/// The README's sample corpus.
fn sample(dir: &Path) -> PathBuf {
    let out = dir.join("sample");
    audit(&["testdata"], &out);
    out
}

#[test]
fn report_formats() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = sample(dir.path());
    let c = path_str(&corpus);
    let table = ok(&["report", c]);
    assert!(
        table.lines().all(|l| l.chars().count() <= 100),
        "a line is wider than 100 columns:\n{table}"
    );
    insta::assert_snapshot!("report_table", table);
    insta::assert_snapshot!(
        "report_markdown",
        ok(&["report", c, "--format", "markdown"])
    );
    insta::assert_snapshot!("report_json", ok(&["report", c, "--format", "json"]));
    for by in ["agent", "model", "source", "day", "tool"] {
        let t = ok(&["report", c, "--by", by]);
        assert!(
            t.lines().all(|l| l.chars().count() <= 100),
            "--by {by}:\n{t}"
        );
        insta::assert_snapshot!(format!("report_by_{by}"), t);
    }
    // JSON is one document with the headline rate per check.
    let v: Value = serde_json::from_str(&ok(&["report", c, "--format", "json"])).unwrap();
    let rc = &v["checks"][0];
    assert_eq!(rc["check"], "repeated-call");
    assert_eq!(
        rc["fail_rate"].as_f64().unwrap(),
        rc["checked_fail"].as_f64().unwrap() / rc["checked"].as_f64().unwrap()
    );
}

#[test]
fn report_reads_a_corpus_whose_store_is_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ok(&[
        "ingest",
        "testdata/agentfootprint",
        "--quiet",
        "--out",
        path_str(&store),
    ]);
    let corpus = dir.path().join("corpus");
    ok(&[
        "audit",
        path_str(&store),
        "--quiet",
        "--out",
        path_str(&corpus),
    ]);
    assert!(!corpus.join("store").exists());
    let t = ok(&["report", path_str(&corpus), "--by", "day"]);
    assert!(t.contains("Per day"), "{t}");
    let page = ok(&["report", path_str(&corpus), "--format", "html"]);
    assert!(
        page.contains("<section class=\"run\""),
        "the runs are told from the store"
    );
    // Without its store the page still lists the findings, and says why no run is told.
    std::fs::rename(&store, dir.path().join("moved")).unwrap();
    let page = ok(&["report", path_str(&corpus), "--format", "html"]);
    assert!(
        page.contains("run stories left out: the store of"),
        "{page}"
    );
    assert!(page.contains("<tr id=\"l-1\">"));
    assert!(!page.contains("<section class=\"run\""));
    assert_links_resolve(&page);
}

#[test]
fn errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(run(&["report", path_str(dir.path())]).0, 2);
    assert_eq!(
        run(&["diff", path_str(dir.path()), path_str(dir.path())]).0,
        2
    );
    let corpus = sample(dir.path());
    assert_eq!(run(&["explain", path_str(&corpus), "no-such-run"]).0, 2);
    let c = path_str(&corpus);
    assert_eq!(run(&["diff", c, c, "--fail-on", "loops=3"]).0, 2);
    // `--fail-on "$RULES"` with the variable unset: refused, not a gate turned off.
    assert_eq!(run(&["diff", c, c, "--fail-on", ""]).0, 2);
    assert_eq!(run(&["trend", c, "--fail-on", ""]).0, 2);
    assert_eq!(run(&["diff", c, c, "--fail-on", "none"]).0, 0);
}

#[test]
fn corpus_paths_are_taken_literally() {
    // A corpus whose name reads as a pattern: `night*` beside `night-2`, and `run[1]`.
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    let star = dir.path().join("night*");
    let bracket = dir.path().join("run[1]");
    for out in [&plain, &star, &bracket] {
        audit(&["testdata/agentfootprint"], out);
    }
    audit(&["testdata/tau-bench"], &dir.path().join("night-2"));
    let checks = |corpus: &Path| -> Value {
        let v: Value =
            serde_json::from_str(&ok(&["report", path_str(corpus), "--format", "json"])).unwrap();
        v["checks"].clone()
    };
    let expected = checks(&plain);
    assert_eq!(checks(&star), expected, "night* read its sibling's tables");
    assert_eq!(checks(&bracket), expected);
    for by in ["agent", "tool"] {
        assert_eq!(
            ok(&["report", path_str(&star), "--by", by]),
            ok(&["report", path_str(&plain), "--by", by]).replace("plain", "night*"),
        );
    }
}

/// Rewrite `table` of `corpus` as a notebook might, its `disposition` values passed through
/// `edit` (`None` writes a null).
fn rewrite_dispositions(corpus: &Path, edit: impl Fn(&str) -> Option<String>) {
    use arrow::array::{Array, AsArray, StringArray};
    use arrow::record_batch::RecordBatch;
    let path = corpus.join("dispositions.parquet");
    let file = std::fs::File::open(&path).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader
        .map(|b| {
            let b = b.unwrap();
            let i = b.schema().index_of("disposition").unwrap();
            let old = b.column(i).as_string::<i32>();
            let new: StringArray = (0..old.len()).map(|r| edit(old.value(r))).collect();
            let mut fields: Vec<arrow::datatypes::Field> = b
                .schema()
                .fields()
                .iter()
                .map(|f| f.as_ref().clone())
                .collect();
            fields[i] = fields[i].clone().with_nullable(true);
            let mut columns = b.columns().to_vec();
            columns[i] = std::sync::Arc::new(new);
            RecordBatch::try_new(
                std::sync::Arc::new(arrow::datatypes::Schema::new(fields)),
                columns,
            )
            .unwrap()
        })
        .collect();
    let out = std::fs::File::create(&path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(out, batches[0].schema(), None).unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
}

#[test]
fn dispositions_this_engine_does_not_write_stop_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    audit(&["testdata/agentfootprint"], &base);
    let b = path_str(&base);
    for (name, edit) in [
        (
            "newer",
            (|d: &str| Some(d.replace("checked-fail", "checked-regressed")))
                as fn(&str) -> Option<String>,
        ),
        ("nulls", |d: &str| {
            (d != "checked-fail").then(|| d.to_string())
        }),
    ] {
        let corpus = dir.path().join(name);
        audit(&["testdata/agentfootprint"], &corpus);
        rewrite_dispositions(&corpus, edit);
        let c = path_str(&corpus);
        // Before, the unknown values counted as zero of everything and the gate passed.
        assert_eq!(run(&["diff", b, c]).0, 2, "{name}: diff");
        assert_eq!(run(&["diff", c, b]).0, 2, "{name}: diff");
        assert_eq!(run(&["report", c]).0, 2, "{name}: report");
        assert_eq!(run(&["trend", b, c]).0, 2, "{name}: trend");
    }
    assert_eq!(run(&["diff", b, b]).0, 0);
}

/// Rename column `from` to `to` in every table of `corpus` (an older corpus's layout).
fn rename_table_columns(corpus: &Path, from: &str, to: &str) {
    for entry in std::fs::read_dir(corpus).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "parquet") {
            continue;
        }
        let file = std::fs::File::open(&path).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        let batches: Vec<arrow::record_batch::RecordBatch> = reader.map(|b| b.unwrap()).collect();
        let schema = batches[0].schema();
        let fields: Vec<arrow::datatypes::Field> = schema
            .fields()
            .iter()
            .map(|f| match f.name() == from {
                true => f.as_ref().clone().with_name(to),
                false => f.as_ref().clone(),
            })
            .collect();
        let renamed = std::sync::Arc::new(arrow::datatypes::Schema::new(fields));
        let out = std::fs::File::create(&path).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(out, renamed.clone(), None).unwrap();
        for b in &batches {
            let b =
                arrow::record_batch::RecordBatch::try_new(renamed.clone(), b.columns().to_vec());
            w.write(&b.unwrap()).unwrap();
        }
        w.close().unwrap();
    }
}

#[test]
fn the_check_column_is_named_for_sql_and_older_corpora_read_the_same() {
    // `check` is reserved in DuckDB, PostgreSQL and Spark SQL; every table names the column
    // `check_name`, and a corpus written with `check` reads exactly as before.
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("new");
    let old = dir.path().join("old");
    audit(&["testdata"], &new);
    audit(&["testdata"], &old);
    for table in ["findings", "dispositions", "ledger", "agreement"] {
        let path = new.join(format!("{table}.parquet"));
        let file = std::fs::File::open(&path).unwrap();
        let builder =
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        let names: Vec<String> = builder
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert!(
            names.contains(&"check_name".to_string()),
            "{table}: {names:?}"
        );
        assert!(!names.contains(&"check".to_string()), "{table}: {names:?}");
    }
    let line = std::fs::read_to_string(new.join("findings.jsonl")).unwrap();
    let first: Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    assert!(first.get("check_name").is_some() && first.get("check").is_none());
    rename_table_columns(&old, "check_name", "check");
    let (n, o) = (path_str(&new), path_str(&old));
    for args in [
        vec!["report"],
        vec!["report", "--format", "json"],
        vec!["report", "--by", "tool"],
        vec!["report", "--format", "html"],
    ] {
        let with = |c: &str| {
            let mut a = vec![args[0], c];
            a.extend_from_slice(&args[1..]);
            ok(&a).replace("/old", "/new").replace("old", "new")
        };
        assert_eq!(with(o), with(n), "{args:?}");
    }
    // A nights folder may mix the two.
    assert_eq!(run(&["diff", o, n]).0, 0);
    assert_eq!(run(&["trend", o, n]).0, 0);
}

#[test]
fn a_corpus_takes_only_the_store_it_was_audited_from() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ok(&[
        "ingest",
        "testdata/agentfootprint",
        "--quiet",
        "--out",
        path_str(&store),
    ]);
    let corpus = dir.path().join("corpus");
    ok(&[
        "audit",
        path_str(&store),
        "--quiet",
        "--out",
        path_str(&corpus),
    ]);
    let c = path_str(&corpus);
    let by_agent = ok(&["report", c, "--by", "agent"]);
    // Another night's store now lies where this one was.
    std::fs::rename(&store, dir.path().join("moved")).unwrap();
    ok(&[
        "ingest",
        "testdata/tau-bench",
        "--quiet",
        "--out",
        path_str(&store),
    ]);
    assert_eq!(
        run(&["report", c, "--by", "agent"]).0,
        2,
        "another store's agents"
    );
    let page = ok(&["report", c, "--format", "html"]);
    assert!(
        page.contains("is not the one"),
        "the page says why no run is told"
    );
    assert!(!page.contains("<section class=\"run\""));
    // Its own store back: read as before.
    std::fs::remove_dir_all(&store).unwrap();
    std::fs::rename(dir.path().join("moved"), &store).unwrap();
    assert_eq!(ok(&["report", c, "--by", "agent"]), by_agent);
}

#[test]
fn an_impossible_recorded_time_is_stored_as_absent_and_reports_go_on() {
    // Wall clocks in nanoseconds where agentfootprint writes milliseconds.
    let dir = tempfile::tempdir().unwrap();
    let recordings = dir.path().join("ns");
    std::fs::create_dir(&recordings).unwrap();
    let original =
        std::fs::read_to_string("testdata/agentfootprint/ndjson/a_repeated_identical_call.ndjson")
            .unwrap();
    let mut shifted = String::new();
    for line in original.lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        if let Some(ms) = v["meta"]["wallClockMs"].as_i64() {
            v["meta"]["wallClockMs"] = Value::from(ms * 1_000_000);
        }
        shifted.push_str(&v.to_string());
        shifted.push('\n');
    }
    std::fs::write(recordings.join("a.ndjson"), shifted).unwrap();
    let corpus = dir.path().join("corpus");
    audit(&[path_str(&recordings)], &corpus);
    let notes = std::fs::read_to_string(corpus.join("store/quarantine.jsonl")).unwrap();
    assert!(notes.contains("outside the years 1990 to 2200"), "{notes}");
    assert!(notes.contains("\"partial\""), "{notes}");
    let c = path_str(&corpus);
    ok(&["report", c, "--format", "html"]);
    let days = ok(&["report", c, "--by", "day"]);
    assert!(days.contains("(unrecorded)"), "{days}");
    let json: Value = serde_json::from_str(&ok(&["report", c, "--format", "json"])).unwrap();
    assert_eq!(json["checks"][0]["runs"], 1);
    let runs = traceaudit::Store::open(&corpus.join("store"))
        .unwrap()
        .runs()
        .unwrap();
    assert!(runs.iter().all(|r| r.run.started_ms.is_none()));
    ok(&["explain", c, &runs[0].run.run_id]);
}

#[test]
fn identical_corpora_are_no_regression() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("baseline");
    let cand = dir.path().join("candidate");
    audit(&["testdata"], &base);
    audit(&["testdata"], &cand);
    let (status, md) = run(&["diff", path_str(&base), path_str(&cand)]);
    assert_eq!(status, 0, "{md}");
    insta::assert_snapshot!("diff_identical", md);
    let (status, json) = run(&[
        "diff",
        path_str(&base),
        path_str(&cand),
        "--format",
        "json",
        "--by",
        "source",
    ]);
    assert_eq!(status, 0);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["appeared_total"], 0);
    assert_eq!(v["runs"]["only_candidate"], 0);
    assert!(!v["groups"].as_array().unwrap().is_empty());
}

/// A copy of the tau-bench sample's first trajectory as a new task whose `get_user_details`
/// call (with its result) lands three more times: an injected loop.
fn injected_loop(tool_rename: Option<&str>) -> String {
    let text = std::fs::read_to_string(testdata("tau-bench/gpt-4o-airline.first3.json")).unwrap();
    let list: Vec<Value> = serde_json::from_str(&text).unwrap();
    let mut record = list[0].clone();
    record["task_id"] = Value::from(9000);
    let traj = record["traj"].as_array_mut().unwrap();
    let call_at = traj
        .iter()
        .position(|m| m.get("tool_calls").is_some_and(|t| t.is_array()))
        .expect("an assistant message with tool calls");
    let call = traj[call_at].clone();
    let result = traj[call_at + 1].clone();
    for k in 0..3 {
        let mut c = call.clone();
        let mut r = result.clone();
        let id = format!("call_injected_{k}");
        c["tool_calls"][0]["id"] = Value::from(id.clone());
        r["tool_call_id"] = Value::from(id);
        traj.insert(call_at + 2 + 2 * k, c);
        traj.insert(call_at + 3 + 2 * k, r);
    }
    if let Some(name) = tool_rename {
        for m in traj.iter_mut() {
            if let Some(calls) = m.get_mut("tool_calls").and_then(|t| t.as_array_mut()) {
                for c in calls {
                    c["function"]["name"] = Value::from(name);
                }
            }
            if m.get("role").and_then(|r| r.as_str()) == Some("tool") {
                m["name"] = Value::from(name);
            }
        }
    }
    serde_json::to_string(&vec![record]).unwrap()
}

#[test]
fn injected_loops_are_a_regression_and_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let extra = dir.path().join("extra");
    std::fs::create_dir(&extra).unwrap();
    std::fs::write(extra.join("injected.json"), injected_loop(None)).unwrap();
    let base = dir.path().join("baseline");
    let cand = dir.path().join("candidate");
    audit(&["testdata"], &base);
    audit(&["testdata", path_str(&extra)], &cand);
    let (status, md) = run(&["diff", path_str(&base), path_str(&cand)]);
    assert_eq!(status, 1, "{md}");
    assert!(md.contains("`get_user_details:"), "{md}");
    assert!(md.contains("REGRESSION"), "{md}");
    // The new task's run ids are `9000-0#N` wherever the test runs: a stable snapshot.
    insta::assert_snapshot!("diff_injected", md);

    // The same candidate under a rule set that only looks at rates (which a handful of runs
    // cannot move significantly) is no regression.
    let (status, md) = run(&[
        "diff",
        path_str(&base),
        path_str(&cand),
        "--fail-on",
        "rate=2",
    ]);
    assert_eq!(status, 0, "{md}");

    // And the reverse direction: the loop vanished, which is not a regression.
    let (status, json) = run(&["diff", path_str(&cand), path_str(&base), "--format", "json"]);
    assert_eq!(status, 0, "{json}");
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["vanished_total"], 1);
    assert!(v["vanished"][0]["key"]
        .as_str()
        .unwrap()
        .starts_with("get_user_details:"));
    assert!(v["runs"]["only_baseline"].as_u64().unwrap() >= 1);
}

#[test]
fn explain_tells_runs() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = sample(dir.path());
    let c = path_str(&corpus);
    // A repeated call, a stale answer, and a tau2 run with long texts cut short.
    let repeated = ok(&["explain", c, "run-1795968647240-1"]);
    assert!(repeated.contains("▲ repeated-call"), "{repeated}");
    insta::assert_snapshot!("explain_repeated_call", repeated);
    insta::assert_snapshot!(
        "explain_prior_turn",
        ok(&["explain", c, "run-1795968650406-2"])
    );
    let tau2 = ok(&[
        "explain",
        c,
        "05368b82-723a-4066-b191-bbab732f0b85#2",
        "--preview",
        "60",
        "--max-steps",
        "4",
    ]);
    assert!(tau2.contains("(cut "), "{tau2}");
    assert!(tau2.contains("steps not shown"), "{tau2}");
    insta::assert_snapshot!("explain_tau2_bounded", tau2);
    let v: Value = serde_json::from_str(&ok(&[
        "explain",
        c,
        "run-1795968647240-1",
        "--format",
        "json",
    ]))
    .unwrap();
    let placed: Vec<&Value> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["findings"].as_array().is_some_and(|f| !f.is_empty()))
        .collect();
    assert_eq!(placed.len(), 1);
    assert_eq!(placed[0]["step"], "tool_call");
    assert_eq!(placed[0]["call_id"], "call-a2");
    insta::assert_json_snapshot!("explain_json", v);
}

const HOSTILE_TOOL: &str = "<script>alert(1)</script><img src=x onerror=alert(2)>\u{1b}[2J";
/// What the hostile recording's arguments, results and messages say.
const HOSTILE_TEXT: &str =
    "<script>alert(3)</script><img src=x onerror=alert(4)><a href=\"javascript:alert(5)\">x</a>\"'&\u{1b}]8;;";

/// The injected loop with every recorded text hostile: the tool's name, the calls' arguments,
/// the tool results, the user's messages and the assistant's.
fn hostile_recording() -> String {
    let mut list: Vec<Value> = serde_json::from_str(&injected_loop(Some(HOSTILE_TOOL))).unwrap();
    let arguments = serde_json::json!({ "q": HOSTILE_TEXT }).to_string();
    for m in list[0]["traj"].as_array_mut().unwrap() {
        if let Some(calls) = m.get_mut("tool_calls").and_then(|t| t.as_array_mut()) {
            for c in calls {
                c["function"]["arguments"] = Value::from(arguments.clone());
            }
        }
        let role = m["role"].as_str().unwrap_or("").to_string();
        if role == "tool" || (m["content"].is_string() && role != "system") {
            m["content"] = Value::from(format!(
                "{HOSTILE_TEXT} {}",
                m["content"].as_str().unwrap_or("")
            ));
        }
    }
    serde_json::to_string(&list).unwrap()
}

/// Audit `inputs` plus the hostile recording into `out`.
fn with_hostile(dir: &Path, inputs: &[&str], out: &Path) {
    let input = dir.join("hostile-input");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("hostile.json"), hostile_recording()).unwrap();
    let mut all = inputs.to_vec();
    all.push(path_str(&input));
    audit(&all, out);
}

/// A corpus of the hostile recording alone: its tool name, arguments, results and messages are
/// hostile markup, and its tool loops so it reaches every table.
fn hostile_corpus(dir: &Path) -> PathBuf {
    let out = dir.join("hostile");
    with_hostile(dir, &[], &out);
    out
}

fn assert_no_markup_from_recordings(page: &str) {
    let lower = page.to_lowercase();
    assert!(!lower.contains("<script"), "a script element got through");
    assert!(!lower.contains("<img"), "an img element got through");
    assert!(
        !lower.contains("javascript:alert(5)\">"),
        "an injected link got through"
    );
    assert!(!page.contains('\u{1b}'), "an escape character got through");
    assert!(
        page.contains("&lt;script&gt;alert(1)"),
        "the hostile text is not shown"
    );
}

/// The elements the pages write; anything else came from a recording.
const ELEMENTS: &[&str] = &[
    "!doctype", "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "table",
    "tr", "th", "td", "tbody", "code", "ul", "ol", "li", "nav", "a", "section", "div", "span",
    "br", "strong", "svg", "line", "text", "g", "rect", "circle", "polygon", "polyline",
];

/// Every element of an HTML text (a page, or the DOM a browser parsed from it) is one the
/// renderer writes, no element carries an event handler, and every link stays in the page.
fn assert_only_our_elements(page: &str) {
    for tag in page.split('<').skip(1) {
        let tag = &tag[..tag.find('>').unwrap_or(tag.len())];
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '!')
            .collect::<String>()
            .to_lowercase();
        assert!(
            ELEMENTS.contains(&name.as_str()),
            "unexpected element <{tag}>"
        );
        let lower = tag.to_lowercase();
        for (i, _) in lower.match_indices(" on") {
            let attr: String = lower[i + 1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            assert!(
                !lower[i + 1 + attr.len()..].starts_with('='),
                "an event handler attribute: <{tag}>"
            );
        }
        if let Some(at) = lower.find("href=\"") {
            assert!(
                lower[at + 6..].starts_with('#'),
                "a link out of the page: <{tag}>"
            );
        }
    }
}

/// Every in-page link (`href="#id"`) names an element id, and no id is used twice.
fn assert_links_resolve(page: &str) -> usize {
    let value = |at: usize, len: usize| {
        let rest = &page[at + len..];
        rest[..rest.find('"').unwrap()].to_string()
    };
    let ids: Vec<String> = page
        .match_indices(" id=\"")
        .map(|(i, m)| value(i, m.len()))
        .collect();
    let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "an id is used twice");
    let links: Vec<String> = page
        .match_indices("href=\"#")
        .map(|(i, m)| value(i, m.len()))
        .collect();
    for l in &links {
        assert!(unique.contains(l), "a link to #{l} names no element");
    }
    links.len()
}

/// A page's text for review: no style, each chart reduced to its element count, block
/// elements on lines of their own, ids as `{#id}`, in-page links as `[text](#id)`, cells
/// separated by `|`.
fn outline(page: &str) -> String {
    let mut out = String::new();
    let mut rest = page;
    let mut link_stack: Vec<Option<String>> = Vec::new();
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let end = rest.find('>').unwrap() + 1;
        let tag = &rest[1..end - 1];
        let name: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '/' || *c == '!')
            .collect();
        let attr = |a: &str| {
            tag.find(&format!(" {a}=\"")).map(|i| {
                let v = &tag[i + a.len() + 3..];
                v[..v.find('"').unwrap()].to_string()
            })
        };
        let skip_to = |rest: &str, close: &str| rest.find(close).unwrap() + close.len();
        match name.as_str() {
            "style" | "title" => {
                rest = &rest[skip_to(rest, &format!("</{name}>"))..];
                continue;
            }
            "svg" => {
                let len = skip_to(rest, "</svg>");
                let elements = rest[..len].matches('<').filter(|_| true).count()
                    - rest[..len].matches("</").count();
                let links = rest[..len].matches("<a href").count();
                out.push_str(&format!("\n[chart: {elements} elements, {links} links]\n"));
                rest = &rest[len..];
                continue;
            }
            "a" => {
                link_stack.push(attr("href"));
                out.push('[');
            }
            "/a" => {
                if let Some(Some(h)) = link_stack.pop() {
                    out.push_str(&format!("]({h})"));
                }
            }
            "td" | "th" => out.push_str(" | "),
            "br" => out.push_str(" / "),
            "h1" | "h2" | "h3" | "p" | "tr" | "li" | "nav" | "section" | "div" | "table"
            | "/h1" | "/h2" | "/h3" | "/p" | "/tr" | "/li" | "/nav" | "/section" | "/div"
            | "/table" | "ol" | "/ol" | "ul" | "/ul" => out.push('\n'),
            _ => {}
        }
        if let Some(id) = attr("id") {
            out.push_str(&format!("{{#{id}}} "));
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    let mut lines: Vec<String> = Vec::new();
    for l in out.lines() {
        let l = l.split_whitespace().collect::<Vec<_>>().join(" ");
        if !l.is_empty() {
            lines.push(l);
        }
    }
    lines.join("\n") + "\n"
}

#[test]
fn html_report_escapes_recorded_text() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = hostile_corpus(dir.path());
    let c = path_str(&corpus);
    for by in [None, Some("tool")] {
        let mut args = vec!["report", c, "--format", "html"];
        if let Some(by) = by {
            args.extend_from_slice(&["--by", by]);
        }
        let page = ok(&args);
        assert!(page.contains("<svg"), "charts are inline SVG");
        assert!(
            !page.contains("http://")
                || page.matches("http://").count()
                    == page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count(),
            "the page refers to nothing on the network"
        );
        assert!(!page.contains("https://"));
        assert_no_markup_from_recordings(&page);
        assert_only_our_elements(&page);
        assert!(assert_links_resolve(&page) > 0);
        // The loop is listed and its run told, arguments and results included (escaped).
        assert!(
            page.contains("<section class=\"run\" id=\"run-1\">"),
            "{page}"
        );
        assert!(page.contains("&lt;script&gt;alert(3)&lt;/script&gt;"));
    }
    let md = ok(&["report", c, "--format", "markdown", "--by", "tool"]);
    for (i, part) in md.split('`').enumerate() {
        if i % 2 == 0 {
            assert!(!part.contains('<'), "markup outside a code span: {part}");
        }
    }
    let table = ok(&["report", c, "--by", "tool"]);
    assert!(!table.contains('\u{1b}'));
    // The run where the loop fired.
    let findings = std::fs::read_to_string(corpus.join("findings.jsonl")).unwrap();
    let first: Value = serde_json::from_str(findings.lines().next().unwrap()).unwrap();
    let run_id = first["run_id"].as_str().unwrap();
    let story = ok(&["explain", c, run_id]);
    assert!(!story.contains('\u{1b}'), "{story}");
    assert!(story.contains("\\u{1b}[2J"), "{story}");
}

#[test]
fn html_report_lists_findings_and_tells_their_runs() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = sample(dir.path());
    let c = path_str(&corpus);
    let page = ok(&["report", c, "--format", "html"]);
    assert_only_our_elements(&page);
    assert_links_resolve(&page);
    // Every finding of the sample is listed (15, under the default 20 per kind), each run told
    // once, and each finding shown where it fired.
    assert_eq!(page.matches("<tr id=\"l-").count(), 15);
    assert_eq!(page.matches("where it fired</a>").count(), 15);
    assert_eq!(page.matches("<section class=\"run\"").count(), 15);
    insta::assert_snapshot!("report_html_outline", outline(&page));
    // Bounded: one finding per kind, the rest counted.
    let page = ok(&["report", c, "--format", "html", "--findings", "1"]);
    assert_links_resolve(&page);
    assert_eq!(page.matches("<tr id=\"l-").count(), 3);
    assert!(
        page.contains("… and 9 more findings of this kind"),
        "{page}"
    );
    assert!(
        page.contains("… and 2 more findings of this kind"),
        "{page}"
    );
    assert!(page.contains("… and 1 more finding of this kind"), "{page}");
    assert_eq!(page.matches("<section class=\"run\"").count(), 3);
    // A kind's list is reached from the kind table; the text formats do not change.
    assert!(page.contains("<a href=\"#kind-1\">"));
    assert_eq!(ok(&["report", c, "--findings", "1"]), ok(&["report", c]));
}

#[test]
fn diff_as_a_page() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("baseline");
    let cand = dir.path().join("candidate");
    audit(&["testdata"], &base);
    with_hostile(dir.path(), &["testdata"], &cand);
    let (status, page) = run(&[
        "diff",
        path_str(&base),
        path_str(&cand),
        "--format",
        "html",
        "--by",
        "source",
    ]);
    assert_eq!(status, 1, "the hostile loop is a new key");
    assert_no_markup_from_recordings(&page);
    assert_only_our_elements(&page);
    assert!(assert_links_resolve(&page) > 0);
    // The verdict comes first, and names the rule.
    let verdict = page
        .find("<div class=\"verdict bad\"><strong>REGRESSION</strong>")
        .unwrap();
    assert!(verdict < page.find("<h2").unwrap());
    assert!(page.contains("<a href=\"#appeared\">1 finding key(s) only in the candidate"));
    insta::assert_snapshot!("diff_html_outline", outline(&page));
    let (status, page) = run(&["diff", path_str(&base), path_str(&base), "--format", "html"]);
    assert_eq!(status, 0);
    assert!(page.contains("<div class=\"verdict good\"><strong>No regression</strong>"));
    assert_links_resolve(&page);
}

/// The last night's directory name: a name is shown on the pages, so it is hostile too (a
/// file name holds no `/`, so no closing tag).
const HOSTILE_NIGHT: &str = "2025-06-06<script>alert(1)<img src=x onerror=alert(2)>";

/// Nights built from testdata: parts of it, all of it, all of it with an injected loop, then
/// (under a hostile name) all of it with the hostile recording.
fn testdata_nights(dir: &Path) -> PathBuf {
    let nights = dir.join("nights");
    let loop_dir = dir.join("loop-input");
    std::fs::create_dir_all(&loop_dir).unwrap();
    std::fs::write(loop_dir.join("injected.json"), injected_loop(None)).unwrap();
    let l = path_str(&loop_dir);
    audit(
        &["testdata/tau-bench", "testdata/tau2", "testdata/swe-agent"],
        &nights.join("2025-06-01"),
    );
    audit(
        &[
            "testdata/tau-bench",
            "testdata/tau2",
            "testdata/swe-agent",
            "testdata/cassettes",
            "testdata/inspect-ai",
        ],
        &nights.join("2025-06-02"),
    );
    audit(&["testdata"], &nights.join("2025-06-03"));
    audit(&["testdata", l], &nights.join("2025-06-04"));
    audit(
        &["testdata/agentfootprint", "testdata/otel"],
        &nights.join("2025-06-05"),
    );
    with_hostile(dir, &["testdata"], &nights.join(HOSTILE_NIGHT));
    nights
}

#[test]
fn trend_over_nights() {
    let dir = tempfile::tempdir().unwrap();
    let nights = testdata_nights(dir.path());
    let n = path_str(&nights);
    let table = trend_out(&["trend", n]);
    assert!(
        table.lines().all(|l| l.chars().count() <= 100),
        "a line is wider than 100 columns:\n{table}"
    );
    assert!(!table.contains('\u{1b}'));
    insta::assert_snapshot!("trend_table", table);
    let json = trend_out(&["trend", n, "--format", "json"]);
    let v: Value = serde_json::from_str(&json).unwrap();
    insta::assert_json_snapshot!("trend_json", v);
    // A night is flagged exactly when `diff` of the night before against it fails the gate,
    // and a check's point exactly where the diff's rate rule fired.
    let names: Vec<String> = v["nights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names.len(), 6);
    assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
    for rules in ["rate=2,new-keys=1", "rate=0.1", "new-keys=2"] {
        let v: Value = serde_json::from_str(&trend_out(&[
            "trend",
            n,
            "--format",
            "json",
            "--fail-on",
            rules,
        ]))
        .unwrap();
        for i in 1..names.len() {
            let (prev, this) = (nights.join(&names[i - 1]), nights.join(&names[i]));
            let (status, d) = run(&[
                "diff",
                path_str(&prev),
                path_str(&this),
                "--format",
                "json",
                "--fail-on",
                rules,
            ]);
            let d: Value = serde_json::from_str(&d).unwrap();
            assert_eq!(
                v["nights"][i]["flagged"],
                Value::from(status == 1),
                "{rules} night {i}"
            );
            assert_eq!(v["nights"][i]["regressions"], d["regressions"]);
            for c in v["checks"].as_array().unwrap() {
                let row = d["checks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["check"] == c["check"])
                    .unwrap();
                assert_eq!(c["points"][i]["regression"], row["regression"]);
                assert_eq!(c["points"][i]["change"], row["change"]);
            }
        }
    }
    // Nights named one by one keep the order given.
    let (a, b) = (nights.join("2025-06-03"), nights.join("2025-06-01"));
    let v: Value = serde_json::from_str(&trend_out(&[
        "trend",
        path_str(&a),
        path_str(&b),
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(v["nights"][0]["name"], "2025-06-03");
    assert_eq!(v["nights"][1]["name"], "2025-06-01");

    let page = trend_out(&["trend", n, "--format", "html"]);
    assert_no_markup_from_recordings(&page);
    assert_only_our_elements(&page);
    assert!(assert_links_resolve(&page) > 0);
    insta::assert_snapshot!("trend_html_outline", outline(&page));
}

/// Three generated nights, the last with many more repeated calls: the rate rule flags that
/// night on repeated-call, exactly as `diff` of the two nights does.
#[test]
fn trend_marks_a_rate_regression() {
    let dir = tempfile::tempdir().unwrap();
    let nights = dir.path().join("nights");
    for (i, repeat) in [(1u64, 0.05), (2, 0.05), (3, 0.9)] {
        let mut opts =
            traceaudit_gen::GenOptions::new(traceaudit_gen::GenFormat::Agentfootprint, i);
        opts.runs = Some(150);
        opts.rates.repeat = repeat;
        opts.rates.result_bytes_max = 2_000;
        let generated = dir.path().join(format!("gen-{i}"));
        traceaudit_gen::generate(&opts, &generated).expect("generate");
        ok(&[
            "audit",
            path_str(&generated.join("input")),
            "--config",
            path_str(&generated.join("traceaudit.toml")),
            "--quiet",
            "--out",
            path_str(&nights.join(format!("night-{i}"))),
        ]);
    }
    let v: Value = serde_json::from_str(&trend_out(&[
        "trend",
        path_str(&nights),
        "--format",
        "json",
    ]))
    .unwrap();
    let rc = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "repeated-call")
        .unwrap();
    assert_eq!(rc["points"][1]["regression"], false, "{rc}");
    assert_eq!(rc["points"][2]["regression"], true, "{rc}");
    assert_eq!(v["nights"][2]["flagged"], true);
    let (status, d) = run(&[
        "diff",
        path_str(&nights.join("night-2")),
        path_str(&nights.join("night-3")),
        "--format",
        "json",
    ]);
    assert_eq!(status, 1);
    let d: Value = serde_json::from_str(&d).unwrap();
    assert_eq!(v["nights"][2]["regressions"], d["regressions"]);
    // The nightly gate: the last night is flagged, exit 1; without it (night 2 has no rate
    // regression), 0; with no rules, 0.
    assert_eq!(run(&["trend", path_str(&nights)]).0, 1);
    let (one, two) = (nights.join("night-1"), nights.join("night-2"));
    let (one, two) = (path_str(&one), path_str(&two));
    assert_eq!(run(&["trend", one, two, "--fail-on", "rate=2"]).0, 0);
    assert_eq!(
        run(&["trend", path_str(&nights), "--fail-on", "rate=2"]).0,
        1
    );
    assert_eq!(run(&["trend", path_str(&nights), "--fail-on", "none"]).0, 0);
    let table = trend_out(&["trend", path_str(&nights)]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("night-3") && l.trim_end().ends_with("rate")),
        "{table}"
    );
    let page = trend_out(&["trend", path_str(&nights), "--format", "html"]);
    assert!(
        page.contains("<circle class=\"dot bad\""),
        "the flagged point is drawn red"
    );
    assert_links_resolve(&page);
}

#[test]
fn trend_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        run(&["trend", path_str(dir.path())]).0,
        2,
        "a folder without corpora"
    );
    assert_eq!(run(&["trend", path_str(&dir.path().join("none"))]).0, 2);
    let corpus = sample(dir.path());
    assert_eq!(
        run(&["trend", path_str(&corpus), "--fail-on", "loops=3"]).0,
        2
    );
    // One night: nothing to compare, nothing flagged.
    let v: Value = serde_json::from_str(&trend_out(&[
        "trend",
        path_str(&corpus),
        "--format",
        "json",
    ]))
    .unwrap();
    assert_eq!(v["nights"][0]["flagged"], false);
    assert_eq!(v["nights"][0]["appeared_keys"], Value::Null);
}

/// `/usr/bin/chromium`, or why there is none: in CI (`CI` set) a missing browser fails.
fn chromium() -> Option<&'static Path> {
    let chromium = Path::new("/usr/bin/chromium");
    if chromium.exists() {
        return Some(chromium);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set and /usr/bin/chromium is missing: .ci/run installs it (apt-get install chromium)"
    );
    eprintln!("skipped: /usr/bin/chromium is not installed (apt-get install chromium)");
    None
}

/// Run headless Chromium on `page` with `extra` flags; its standard output.
fn chrome(chromium: &Path, profile: &Path, page: &Path, extra: &[&str]) -> String {
    // Bounded in time: a browser that hangs fails the test instead of the whole run.
    let out = Command::new("timeout")
        .arg("120")
        .arg(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            &format!("--user-data-dir={}", profile.display()),
        ])
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Each page kind in a real browser. Built with the hostile recording, the DOM Chromium parsed
/// holds only the renderer's elements; built from testdata alone, every in-page link of the DOM
/// resolves and a screenshot renders (written to `$TRACEAUDIT_SCREENSHOTS/KIND.png` when that
/// is set: `TRACEAUDIT_SCREENSHOTS=docs` refreshes the README's). Never skipped in CI.
#[test]
fn pages_in_headless_chromium() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let nights = testdata_nights(d);
    let night = |n: &str| nights.join(n);
    let pages = d.join("pages");
    std::fs::create_dir_all(&pages).unwrap();
    let page = |name: &str| pages.join(format!("{name}.html"));
    let write = |args: &[&str], out: &Path| {
        let mut full = args.to_vec();
        full.extend_from_slice(&["--out", path_str(out)]);
        let (status, _) = run(&full);
        assert!(status <= 1, "{args:?}");
    };
    let clean = night("2025-06-03");
    let hostile = night(HOSTILE_NIGHT);
    write(
        &["report", path_str(&clean), "--format", "html"],
        &page("report"),
    );
    write(
        &[
            "report",
            path_str(&hostile),
            "--format",
            "html",
            "--by",
            "tool",
        ],
        &page("report-hostile"),
    );
    write(
        &[
            "diff",
            path_str(&clean),
            path_str(&night("2025-06-04")),
            "--format",
            "html",
        ],
        &page("diff"),
    );
    write(
        &[
            "diff",
            path_str(&clean),
            path_str(&hostile),
            "--format",
            "html",
            "--by",
            "tool",
        ],
        &page("diff-hostile"),
    );
    let first_five: Vec<PathBuf> = ["01", "02", "03", "04", "05"]
        .iter()
        .map(|d| night(&format!("2025-06-{d}")))
        .collect();
    let mut args = vec!["trend"];
    args.extend(first_five.iter().map(|p| path_str(p)));
    args.extend_from_slice(&["--format", "html"]);
    write(&args, &page("trend"));
    write(
        &["trend", path_str(&nights), "--format", "html"],
        &page("trend-hostile"),
    );
    let shots = std::env::var_os("TRACEAUDIT_SCREENSHOTS").map(PathBuf::from);
    for (kind, size) in [
        ("report", "1100,1500"),
        ("diff", "1100,1000"),
        ("trend", "1100,1250"),
    ] {
        let hostile_dom = chrome(
            chromium,
            &d.join("p1"),
            &page(&format!("{kind}-hostile")),
            &["--dump-dom"],
        );
        assert!(hostile_dom.contains("<svg"), "{kind}: {hostile_dom}");
        assert_only_our_elements(&hostile_dom);
        assert_no_markup_from_recordings(&hostile_dom);
        assert_links_resolve(&hostile_dom);
        let dom = chrome(chromium, &d.join("p2"), &page(kind), &["--dump-dom"]);
        assert_only_our_elements(&dom);
        assert!(assert_links_resolve(&dom) > 0, "{kind}: no in-page link");
        let shot = d.join(format!("{kind}.png"));
        chrome(
            chromium,
            &d.join("p3"),
            &page(kind),
            &[
                &format!("--window-size={size}"),
                &format!("--screenshot={}", shot.display()),
            ],
        );
        let png = std::fs::read(&shot).expect("a screenshot");
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        assert!(png.len() > 10_000, "a blank page? {} bytes", png.len());
        if let Some(to) = &shots {
            std::fs::create_dir_all(to).unwrap();
            std::fs::copy(&shot, to.join(format!("{kind}.png"))).unwrap();
        }
    }
}
