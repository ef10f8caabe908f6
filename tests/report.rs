//! `report`, `diff` and `explain` end to end on corpora built from testdata: snapshots of each
//! format, a diff that catches injected loops, identical corpora, and recorded text that tries
//! to inject markup (checked in the HTML itself, and in headless Chromium when it is installed).

mod common;

use clap::Parser;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use traceaudit::cli::Cli;

/// Run a command in-process (the working directory is the crate directory, so recorded source
/// paths are relative and stable) with `--out` to a temporary file; its exit status and output.
/// In-process rather than through the binary: a build elsewhere cannot swap the binary under a
/// running test.
fn run(args: &[&str]) -> (u8, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut full = vec!["traceaudit"];
    full.extend_from_slice(args);
    let writes = matches!(args[0], "report" | "diff" | "explain") && !args.contains(&"--out");
    if writes {
        full.extend_from_slice(&["--out", path_str(&out)]);
    }
    let code = match Cli::try_parse_from(full) {
        Ok(cli) => traceaudit::cli::run(cli),
        // clap's own usage errors exit 2 from the binary.
        Err(_) => return (2, String::new()),
    };
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
        "testdata/tau-bench",
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

/// A corpus whose recorded tool name is hostile markup, looping so it reaches every table.
fn hostile_corpus(dir: &Path) -> PathBuf {
    let input = dir.join("hostile-input");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(
        input.join("hostile.json"),
        injected_loop(Some(HOSTILE_TOOL)),
    )
    .unwrap();
    let out = dir.join("hostile");
    audit(&[path_str(&input)], &out);
    out
}

fn assert_no_markup_from_recordings(page: &str) {
    let lower = page.to_lowercase();
    assert!(!lower.contains("<script"), "a script element got through");
    assert!(!lower.contains("<img"), "an img element got through");
    assert!(!page.contains('\u{1b}'), "an escape character got through");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
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

/// Open the hostile HTML report in headless Chromium: the parsed DOM has no element that
/// recorded text put there, and a screenshot renders. Skipped when Chromium is not installed.
#[test]
fn html_report_in_headless_chromium() {
    let chromium = Path::new("/usr/bin/chromium");
    if !chromium.exists() {
        eprintln!("skipped: /usr/bin/chromium is not installed (apt-get install chromium)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let corpus = hostile_corpus(dir.path());
    let page = dir.path().join("report.html");
    ok(&[
        "report",
        path_str(&corpus),
        "--by",
        "tool",
        "--format",
        "html",
        "--out",
        path_str(&page),
    ]);
    let url = format!("file://{}", page.display());
    let chrome = |extra: &[&str], profile: &str| {
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
                &format!("--user-data-dir={}", dir.path().join(profile).display()),
            ])
            .args(extra)
            .arg(&url)
            .output()
            .expect("run chromium");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let dom = chrome(&["--dump-dom"], "profile-dom");
    assert!(dom.contains("<svg"), "{dom}");
    assert_no_markup_from_recordings(&dom);
    let shot = dir.path().join("report.png");
    chrome(
        &[
            "--window-size=1100,1600",
            &format!("--screenshot={}", shot.display()),
        ],
        "profile-shot",
    );
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    assert!(png.len() > 10_000, "a blank page? {} bytes", png.len());
}
