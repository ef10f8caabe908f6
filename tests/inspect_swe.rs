//! Inspect AI and SWE-agent ingest on real files: the excerpts in `testdata/`, and (when the
//! shared data set sits beside the checkout) every file of its two folders.

mod common;

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};

use traceaudit::checks::RepeatedCall;
use traceaudit::checks::{Pass, PassContext};
use traceaudit::model::{Conversation, LandingFlags};
use traceaudit::read::{read_head, read_path, Collect, Severity};
use traceaudit::Format;

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn detected(path: &Path) -> Option<Format> {
    Format::detect(&read_head(path).unwrap())
}

fn dropped(sink: &Collect) -> Vec<String> {
    sink.quarantined
        .iter()
        .filter(|q| q.severity == Severity::Dropped)
        .map(|q| q.reason.clone())
        .collect()
}

fn conversation<'a>(sink: &'a Collect, id_suffix: &str) -> &'a Conversation {
    &sink
        .conversations
        .iter()
        .find(|(c, _)| c.id.ends_with(id_suffix))
        .unwrap_or_else(|| panic!("no conversation {id_suffix}"))
        .0
}

#[test]
fn inspect_excerpts() {
    let dir = common::testdata("inspect-ai");
    for path in files_under(&dir) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.ends_with(".json") || name.ends_with(".eval")) {
            continue;
        }
        // Logs without samples are one dropped record each (`inspect_logs_without_samples`).
        if path.parent().unwrap().ends_with("no-samples") {
            continue;
        }
        assert_eq!(detected(&path), Some(Format::InspectAi), "{name}");
        let sink = read_path(&path, None).unwrap();
        assert!(dropped(&sink).is_empty(), "{name}: {:?}", sink.quarantined);
        assert!(!sink.conversations.is_empty(), "{name}");
        for (c, _) in &sink.conversations {
            assert!(c.runs.iter().all(|r| r.format == "inspect-ai"));
        }
    }

    // The browser agent: one sample, four web-browser calls, each timed by its tool event.
    let sink = read_path(&dir.join("2025-05-12T20-27-36-04-00_browser.json"), None).unwrap();
    assert_eq!(sink.records, 1);
    assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
    let conv = &sink.conversations[0].0;
    assert_eq!(conv.id, "browser/ZB2vu5GNujYaBdPSReCeop/1/1");
    assert_eq!(conv.runs.len(), 1);
    let run = &conv.runs[0];
    assert_eq!(run.model.as_deref(), Some("openai/gpt-4o-mini"));
    assert!(run
        .user_message
        .as_deref()
        .unwrap()
        .starts_with("Use the web browser tool"));
    assert!(run
        .answer
        .as_deref()
        .unwrap()
        .starts_with("The AI Security Institute"));
    let landings: Vec<_> = run.landings().collect();
    let tools: Vec<_> = landings
        .iter()
        .map(|l| l.tool_name.as_deref().unwrap())
        .collect();
    assert_eq!(
        tools,
        vec![
            "web_browser_go",
            "web_browser_click",
            "web_browser_click",
            "web_browser_click"
        ]
    );
    assert_eq!(
        landings[1].arguments.as_deref(),
        Some(r#"{"element_id":151}"#)
    );
    assert!(landings
        .iter()
        .all(|l| !l.has_flag(LandingFlags::UNANSWERED) && l.duration_ms.unwrap() > 0.0));
    // First call: 20:27:39.762 to 20:27:44.080.
    assert_eq!(landings[0].duration_ms, Some(4318.0));

    // A finished archive names its model in header.json.
    let sink = read_path(&dir.join("log_read_sample.eval"), None).unwrap();
    assert_eq!(sink.records, 1);
    let conv = &sink.conversations[0].0;
    assert_eq!(conv.id, "popularity/C3pqnFnsCUx6ZpmsRU9Ape/1/1");
    assert_eq!(conv.runs[0].model.as_deref(), Some("ollama/gemma3"));
    assert_eq!(conv.runs[0].answer.as_deref(), Some("Yes\n"));

    // An older archive without eval_id: ten samples, named by task_id.
    let sink = read_path(
        &dir.join("2025-02-11T15-18-04-05-00_popularity_mj7khqpMM4GBCfVQozKgzB.eval"),
        None,
    )
    .unwrap();
    assert_eq!((sink.records, sink.conversations.len()), (10, 10));
    assert!(conversation(&sink, "/10/1").runs[0].model.is_some());

    // A cancelled JSON log still carries its three samples.
    let sink = read_path(&dir.join("2025-05-12T20-28-13-04-00_popularity.json"), None).unwrap();
    assert_eq!((sink.records, sink.conversations.len()), (3, 3));
}

/// The members of a real archive, decompressed.
fn members(path: &Path) -> Vec<(String, Vec<u8>)> {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    (0..zip.len())
        .map(|i| {
            let mut member = zip.by_index(i).unwrap();
            let mut bytes = Vec::new();
            member.read_to_end(&mut bytes).unwrap();
            (member.name().to_string(), bytes)
        })
        .collect()
}

fn rezip(members: &[(String, Vec<u8>)], method: zip::CompressionMethod) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    let mut w = zip::ZipWriter::new(&mut out);
    for (name, bytes) in members {
        let opts = zip::write::SimpleFileOptions::default().compression_method(method);
        w.start_file(name.as_str(), opts).unwrap();
        w.write_all(bytes).unwrap();
    }
    w.finish().unwrap();
    out.into_inner()
}

#[test]
fn real_samples_in_zstd_and_deflate_archives() {
    let original = common::testdata("inspect-ai")
        .join("2025-02-11T15-18-04-05-00_popularity_mj7khqpMM4GBCfVQozKgzB.eval");
    let expected = read_path(&original, None).unwrap();
    let parts = members(&original);
    let dir = tempfile::tempdir().unwrap();
    for (name, method) in [
        ("zstd.eval", zip::CompressionMethod::Zstd),
        ("deflate.eval", zip::CompressionMethod::Deflated),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, rezip(&parts, method)).unwrap();
        assert_eq!(detected(&path), Some(Format::InspectAi), "{name}");
        let sink = read_path(&path, None).unwrap();
        assert!(
            sink.quarantined.is_empty(),
            "{name}: {:?}",
            sink.quarantined
        );
        assert_eq!(sink.records, expected.records, "{name}");
        let got: Vec<_> = sink.conversations.iter().map(|(c, _)| c).collect();
        let want: Vec<_> = expected
            .conversations
            .iter()
            .map(|(c, _)| {
                let mut c = c.clone();
                for r in &mut c.runs {
                    r.source = path.display().to_string();
                }
                c
            })
            .collect();
        assert_eq!(got, want.iter().collect::<Vec<_>>(), "{name}");
    }

    // A broken copy: truncated inside the central directory. One dropped record, no panic.
    let bytes = std::fs::read(&original).unwrap();
    let path = dir.path().join("cut.eval");
    std::fs::write(&path, &bytes[..bytes.len() - 40]).unwrap();
    let sink = read_path(&path, None).unwrap();
    assert_eq!(sink.records, 1);
    assert_eq!(dropped(&sink).len(), 1);
}

#[test]
fn swe_agent_excerpts() {
    let dir = common::testdata("swe-agent");
    for path in files_under(&dir) {
        if path.extension().and_then(|e| e.to_str()) != Some("traj") {
            continue;
        }
        assert_eq!(
            detected(&path),
            Some(Format::SweAgent),
            "{}",
            path.display()
        );
        let sink = read_path(&path, None).unwrap();
        assert_eq!(sink.records, 1);
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        assert_eq!(sink.conversations.len(), 1);
    }

    // Function calling, history only.
    let sink = read_path(
        &dir.join("demonstrations/function_calling_simple.traj"),
        None,
    )
    .unwrap();
    let conv = &sink.conversations[0].0;
    assert_eq!(conv.id, "demonstrations/function_calling_simple");
    assert_eq!(conv.runs.len(), 1);
    let run = &conv.runs[0];
    assert_eq!(run.agent.as_deref(), Some("main"));
    let tools: Vec<_> = run
        .landings()
        .map(|l| l.tool_name.clone().unwrap())
        .collect();
    assert_eq!(tools, vec!["find_file", "open", "edit", "bash", "submit"]);
    assert!(run
        .landings()
        .all(|l| !l.has_flag(LandingFlags::UNANSWERED)));

    // Text-mode actions from trajectory[]: the tool is the command's first word.
    let sink = read_path(&dir.join("misc/networking_1.traj"), None).unwrap();
    let run = &sink.conversations[0].0.runs[0];
    let tools: Vec<_> = run
        .landings()
        .map(|l| l.tool_name.clone().unwrap())
        .collect();
    assert_eq!(tools, vec!["tshark", "tshark", "tshark", "submit"]);
    assert!(run.user_message.as_deref().unwrap().contains("CTF"));

    // Function calling with trajectory timings and a replay config naming the model.
    let sink = read_path(
        &dir.join(
            "gpt4__swe-agent-test-repo__default_from_url__t-0.00__p-0.95__c-3.00__install-1/\
             6e44b9__sweagenttestrepo-1c2844.traj",
        ),
        None,
    )
    .unwrap();
    let run = &sink.conversations[0].0.runs[0];
    assert_eq!(run.model.as_deref(), Some("gpt-4o"));
    let landings: Vec<_> = run.landings().collect();
    let tools: Vec<_> = landings
        .iter()
        .map(|l| l.tool_name.as_deref().unwrap())
        .collect();
    // The history stops before the final submit; the trajectory's last step supplies it.
    assert_eq!(tools, vec!["find_file", "open", "edit", "bash", "submit"]);
    assert_eq!(
        landings[4].arguments.as_deref(),
        Some(r#"{"action":"submit"}"#)
    );
    assert!(landings[4].text.as_deref().unwrap().contains("diff --git"));
    assert_eq!(
        landings[0].arguments.as_deref(),
        Some(r#"{"file_name":"missing_colon.py"}"#)
    );
    assert!(landings.iter().all(|l| l.duration_ms.is_some()));
}

#[derive(Default, Debug)]
struct Tally {
    files: u64,
    records: u64,
    conversations: u64,
    runs: u64,
    landings: u64,
    unanswered: u64,
    timed: u64,
    partial_notes: u64,
    repeated: Vec<String>,
}

/// Sample ids holding `/` nest the archive's members (`samples/suite/task/issue_3603/457f8_epoch_1.json`,
/// as Inspect names a member after the id it is given): archives written by Inspect 0.3.60
/// (DEFLATE) and 0.3.285 (zstd) are read whole, sample by sample.
#[test]
fn inspect_sample_ids_with_slashes() {
    let files = files_under(&common::testdata("inspect-ai/slash-ids"));
    assert_eq!(files.len(), 2);
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let sink = read_path(&path, None).unwrap();
        assert!(
            sink.quarantined.is_empty(),
            "{name}: {:?}",
            sink.quarantined
        );
        assert_eq!((sink.records, sink.conversations.len()), (2, 2), "{name}");
        for (id, key) in [
            ("/suite/task/issue_3603/457f8/1", "alpha"),
            ("/plain-2/1", "beta"),
        ] {
            let conv = conversation(&sink, id);
            assert!(conv.id.starts_with("slashy/"), "{}", conv.id);
            assert_eq!(conv.runs.len(), 1, "{name} {id}");
            let run = &conv.runs[0];
            assert_eq!(run.model.as_deref(), Some("mockllm/model"));
            let expected_answer = format!("{key} is 48213.");
            assert_eq!(run.answer.as_deref(), Some(expected_answer.as_str()));
            let landings: Vec<_> = run.landings().collect();
            assert_eq!(landings.len(), 1, "{name} {id}");
            assert_eq!(landings[0].tool_name.as_deref(), Some("lookup"));
            let expected_args = format!(r#"{{"key":"{key}"}}"#);
            assert_eq!(
                landings[0].arguments.as_deref(),
                Some(expected_args.as_str())
            );
            let expected_text = format!("value of {key} is 48213");
            assert_eq!(landings[0].text.as_deref(), Some(expected_text.as_str()));
        }
    }
}

/// Logs without samples, as Inspect 0.3.60 and 0.3.285 write them (an eval that failed, was
/// cancelled, never finished, or was logged without samples; `.eval` and JSON alike): each is
/// one dropped record whose reason names the log's status, never a silent empty file.
#[test]
fn inspect_logs_without_samples() {
    let files = files_under(&common::testdata("inspect-ai/no-samples"));
    assert_eq!(files.len(), 10);
    let mut seen = BTreeMap::new();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(detected(&path), Some(Format::InspectAi), "{name}");
        let sink = read_path(&path, None).unwrap();
        assert!(sink.conversations.is_empty(), "{name}");
        assert_eq!(sink.records, 1, "{name}");
        let reasons = dropped(&sink);
        assert_eq!(reasons.len(), 1, "{name}: {:?}", sink.quarantined);
        assert_eq!(sink.quarantined.len(), 1, "{name}: {:?}", sink.quarantined);
        let reason = &reasons[0];
        assert!(
            reason.starts_with("the log holds no samples ("),
            "{name}: {reason}"
        );
        let kind = name.split('_').nth(1).unwrap().to_string();
        let status = ["\"started\"", "\"success\"", "\"cancelled\"", "\"error\""]
            .into_iter()
            .find(|s| reason.contains(&format!("status {s}")))
            .unwrap_or_else(|| panic!("{name}: no status in {reason}"));
        *seen.entry((kind, status)).or_insert(0) += 1;
        if status == "\"error\"" {
            assert!(
                reason.ends_with("RuntimeError('sandbox failed to start'))"),
                "{name}: {reason}"
            );
        }
    }
    assert_eq!(
        seen,
        BTreeMap::from([
            (("cancelled".to_string(), "\"cancelled\""), 2),
            (("cancelled".to_string(), "\"started\""), 2),
            (("erroring".to_string(), "\"error\""), 2),
            (("nosamples".to_string(), "\"success\""), 4),
        ])
    );
}

/// SWE-bench experiments' layout, `evaluation/<split>/<submission>/trajs/<instance>.traj`: two
/// submissions' trajectories of one instance are two conversations, named by split, submission
/// and instance, however the path to them is written.
#[test]
fn swe_bench_submissions_do_not_collide() {
    let root = common::testdata("swe-agent/experiments");
    let files = files_under(&root);
    assert_eq!(files.len(), 2);
    let mut ids = Vec::new();
    for path in &files {
        let sink = read_path(path, None).unwrap();
        assert!(sink.quarantined.is_empty(), "{:?}", sink.quarantined);
        let conv = &sink.conversations[0].0;
        assert_eq!(conv.runs.len(), 1);
        let tools: Vec<_> = conv.runs[0]
            .landings()
            .map(|l| l.tool_name.clone().unwrap())
            .collect();
        assert_eq!(
            tools,
            [
                "create",
                "edit",
                "python",
                "ls",
                "find_file",
                "open",
                "edit",
                "edit",
                "python",
                "rm",
                "submit"
            ]
        );
        // The same file reached through another spelling of its path names the same conversation.
        let trajs = path.parent().unwrap();
        let roundabout = trajs
            .join("..")
            .join("trajs")
            .join(path.file_name().unwrap());
        let again = read_path(&roundabout, None).unwrap();
        assert_eq!(again.conversations[0].0.id, conv.id);
        ids.push(conv.id.clone());
    }
    let sub = |config: &str| {
        format!(
            "lite/replay__marshmallow-code__marshmallow-1867__{config}__t-0.20__p-0.95__c-2.00__\
             install-1/marshmallow-code__marshmallow-1867"
        )
    };
    assert_eq!(
        ids,
        [
            sub("default_sys-env_window100"),
            sub("xml_sys-env_window100")
        ]
    );
    // Through the command line, from the experiments root and from one submission: nothing is
    // a duplicate, and the submission's conversation keeps its id.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("all");
    let out = common::traceaudit(&[
        "ingest",
        common::path_str(&root),
        "--out",
        common::path_str(&store),
        "-q",
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(store.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["counts"]["conversations"], 2);
    assert_eq!(manifest["counts"]["duplicate_runs"], 0);
}

/// mini-swe-agent trajectories as 1.17.5 (text actions in ```bash blocks) and 2.4.6 (text
/// actions, tool calls, Responses items) write them: one run per task, one landing per command
/// run, named by the command's first word; a message mini-swe-agent rejected (two commands at
/// once) runs nothing, and its format-error reply is no new user turn.
#[test]
fn mini_swe_agent_trajectories() {
    let dir = common::testdata("mini-swe-agent");
    let files: Vec<PathBuf> = files_under(&dir)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".traj.json"))
        .collect();
    assert_eq!(files.len(), 4);
    let ctx = PassContext::default();
    for path in files {
        let run_folder = path
            .parent()
            .and_then(Path::parent)
            .and_then(Path::file_name)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert_eq!(detected(&path), Some(Format::MiniSweAgent), "{run_folder}");
        let sink = read_path(&path, None).unwrap();
        assert!(
            sink.quarantined.is_empty(),
            "{run_folder}: {:?}",
            sink.quarantined
        );
        assert_eq!((sink.records, sink.conversations.len()), (1, 1));
        let conv = &sink.conversations[0].0;
        assert_eq!(conv.id, format!("{run_folder}/calc__calc-1"));
        assert_eq!(conv.runs.len(), 1, "{run_folder}");
        let run = &conv.runs[0];
        assert_eq!(run.format, "mini-swe-agent");
        assert!(run
            .user_message
            .as_deref()
            .unwrap()
            .starts_with("Please solve this issue: calc.py's add() subtracts"));
        let landings: Vec<_> = run.landings().collect();
        let tools: Vec<_> = landings
            .iter()
            .map(|l| l.tool_name.as_deref().unwrap())
            .collect();
        assert_eq!(tools, ["cat", "grep", "cat", "sed", "echo"], "{run_folder}");
        assert_eq!(
            landings[0].arguments.as_deref(),
            Some(r#"{"command":"cat calc.py"}"#)
        );
        assert!(
            landings[0]
                .text
                .as_deref()
                .unwrap()
                .contains("return a - b"),
            "{run_folder}"
        );
        assert!(
            landings[3]
                .text
                .as_deref()
                .unwrap()
                .contains("return a + b"),
            "{run_folder}"
        );
        assert!(
            landings
                .iter()
                .all(|l| !l.has_flag(LandingFlags::UNANSWERED)),
            "{run_folder}"
        );
        // The file read twice with the same content is a repeated call.
        let outcomes = RepeatedCall.check(conv, &ctx);
        let repeated: Vec<_> = outcomes[0]
            .findings
            .iter()
            .map(|f| f.columns.tool_name.clone().unwrap_or_default())
            .collect();
        assert_eq!(repeated, ["cat"], "{run_folder}");
    }
}

/// Every file of a shared folder: none may fail. Trajectory files are read in their format with
/// nothing dropped; the folder's other files (licence, notes, predictions) are reported as
/// unrecognised.
fn tally_shared(folder: &str, format: Format) -> Option<Tally> {
    let dir = common::shared_data(folder)?;
    let mut tally = Tally::default();
    let ctx = PassContext::default();
    for path in files_under(&dir) {
        let name = path.strip_prefix(&dir).unwrap().display().to_string();
        let sink = read_path(&path, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        let Some(found) = detected(&path) else {
            assert!(
                !(name.ends_with(".traj") || name.ends_with(".eval") || name.ends_with(".json")),
                "{name} was not recognised"
            );
            assert_eq!(dropped(&sink).len(), 1, "{name}");
            continue;
        };
        assert_eq!(found, format, "{name}");
        assert!(dropped(&sink).is_empty(), "{name}: {:?}", sink.quarantined);
        tally.files += 1;
        tally.records += sink.records;
        tally.partial_notes += sink.quarantined.len() as u64;
        for (conversation, _) in &sink.conversations {
            tally.conversations += 1;
            tally.runs += conversation.runs.len() as u64;
            for run in &conversation.runs {
                for l in run.landings() {
                    tally.landings += 1;
                    tally.unanswered += l.has_flag(LandingFlags::UNANSWERED) as u64;
                    tally.timed += l.duration_ms.is_some() as u64;
                }
            }
            let outcomes = RepeatedCall.check(conversation, &ctx);
            assert_eq!(outcomes.len(), conversation.runs.len());
            for (run, outcome) in conversation.runs.iter().zip(outcomes) {
                for f in outcome.findings {
                    tally.repeated.push(format!(
                        "{} [{}]: '{}' x{}",
                        name,
                        run.run_id,
                        f.columns.tool_name.unwrap_or_default(),
                        f.columns.occurrences.unwrap_or(0)
                    ));
                }
            }
        }
    }
    println!("{folder}: {tally:#?}");
    Some(tally)
}

#[test]
#[ignore = "needs ../shared/data; CI runs it with --ignored"]
fn shared_inspect_logs() {
    let Some(t) = tally_shared("inspect-ai", Format::InspectAi) else {
        return;
    };
    let counts = BTreeMap::from([
        ("files", t.files),
        ("records", t.records),
        ("conversations", t.conversations),
        ("runs", t.runs),
        ("landings", t.landings),
        ("unanswered", t.unanswered),
        ("timed", t.timed),
        ("partial notes", t.partial_notes),
        ("repeated-call findings", t.repeated.len() as u64),
    ]);
    println!("{counts:?}");
    // Five logs (two archives, three JSON logs), one conversation and one run per sample; only
    // the browser agent calls tools, and every call has its tool event's timing.
    assert_eq!(
        counts,
        BTreeMap::from([
            ("files", 5),
            ("records", 18),
            ("conversations", 18),
            ("runs", 18),
            ("landings", 4),
            ("unanswered", 0),
            ("timed", 4),
            ("partial notes", 0),
            ("repeated-call findings", 0),
        ])
    );
}

#[test]
#[ignore = "needs ../shared/data; CI runs it with --ignored"]
fn shared_swe_agent_trajectories() {
    let Some(t) = tally_shared("swe-agent", Format::SweAgent) else {
        return;
    };
    let counts = BTreeMap::from([
        ("files", t.files),
        ("records", t.records),
        ("conversations", t.conversations),
        ("runs", t.runs),
        ("landings", t.landings),
        ("unanswered", t.unanswered),
        ("timed", t.timed),
        ("partial notes", t.partial_notes),
        ("repeated-call findings", t.repeated.len() as u64),
    ]);
    println!("{counts:?}");
    // 22 trajectories, one task each. Every action got its observation (the last submit of a
    // function-calling history comes from the trajectory), and the 40 steps that recorded an
    // execution_time gave their landing a duration.
    assert_eq!(
        counts,
        BTreeMap::from([
            ("files", 22),
            ("records", 22),
            ("conversations", 22),
            ("runs", 22),
            ("landings", 232),
            ("unanswered", 0),
            ("timed", 40),
            ("partial notes", 0),
            ("repeated-call findings", 3),
        ])
    );
    // The same failing edit retried, a file reopened unchanged, a wrong flag submitted four
    // times in a row.
    let found: Vec<&str> = t
        .repeated
        .iter()
        .map(|f| f.rsplit(": ").next().unwrap())
        .collect();
    assert_eq!(found, vec!["'edit' x2", "'open' x2", "'submit' x4"]);
}
