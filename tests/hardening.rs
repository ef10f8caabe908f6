//! The command line as a careless user and an unlucky operator meet it: outputs that are not
//! ours, outputs that overlap inputs, pipes, FIFOs, links, absurd thread counts, inputs of which
//! nothing can be read, interrupted runs. Every data-loss case plants a canary file that must
//! survive.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const NDJSON: &str = "testdata/agentfootprint/ndjson";

/// The binary under test; `TRACEAUDIT_BIN` points these tests at another build (to show that
/// they fail on a build without the fixes).
fn bin() -> Command {
    let exe = std::env::var_os("TRACEAUDIT_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_traceaudit")));
    let mut c = Command::new(exe);
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("traceaudit runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// One small agentfootprint NDJSON file of the bundled sample.
fn sample_file() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(NDJSON);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ndjson"))
        .collect();
    files.sort();
    files.into_iter().next().expect("a sample NDJSON file")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

/// Wait for a child at most `limit`; kill it past that. True when it ended by itself.
fn wait_bounded(child: &mut std::process::Child, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

#[test]
fn a_folder_with_its_own_manifest_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let webapp = dir.path().join("webapp");
    std::fs::create_dir(&webapp).unwrap();
    std::fs::write(webapp.join("manifest.json"), r#"{"name":"pwa"}"#).unwrap();
    std::fs::write(webapp.join("important.txt"), "canary").unwrap();
    let o = run(&["audit", s(&sample_file()), "--quiet", "--out", s(&webapp)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("webapp"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(webapp.join("important.txt")).unwrap(),
        "canary"
    );
    // The same with ingest.
    let o = run(&["ingest", s(&sample_file()), "--quiet", "--out", s(&webapp)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(webapp.join("important.txt").exists());
}

#[test]
fn a_corpus_the_user_added_a_file_to_is_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    let o = run(&["audit", s(&sample_file()), "--quiet", "--out", s(&corpus)]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Ours: a second run replaces it.
    let o = run(&["audit", s(&sample_file()), "--quiet", "--out", s(&corpus)]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::write(corpus.join("my-notes.md"), "canary").unwrap();
    let o = run(&["audit", s(&sample_file()), "--quiet", "--out", s(&corpus)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("my-notes.md"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(corpus.join("my-notes.md")).unwrap(),
        "canary"
    );
}

#[test]
fn an_audit_never_writes_over_its_own_input() {
    let dir = tempfile::tempdir().unwrap();
    // Raw recordings audited into their own folder, or into a folder inside it.
    let recs = dir.path().join("recs");
    std::fs::create_dir(&recs).unwrap();
    std::fs::copy(sample_file(), recs.join("run.ndjson")).unwrap();
    for out in [recs.clone(), recs.join("corpus"), recs.join(".")] {
        let o = run(&["audit", s(&recs), "--quiet", "--out", s(&out)]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("input"), "{}", stderr(&o));
    }
    assert!(recs.join("run.ndjson").exists());
    assert!(!recs.join("corpus").exists());

    // A store audited into itself.
    let store = dir.path().join("mystore");
    let o = run(&["ingest", s(&recs), "--quiet", "--out", s(&store)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["audit", s(&store), "--quiet", "--out", s(&store)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(store.join("runs/part-00000.parquet").exists());

    // The store a corpus holds, audited into that corpus.
    let corp = dir.path().join("corp");
    let o = run(&["audit", s(&recs), "--quiet", "--out", s(&corp)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let inner = corp.join("store");
    let o = run(&["audit", s(&inner), "--quiet", "--out", s(&corp)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(inner.join("runs/part-00000.parquet").exists());
}

#[test]
fn a_pipe_is_read_once_and_whole() {
    let file = sample_file();
    let bytes = std::fs::read(&file).unwrap();
    let dir = tempfile::tempdir().unwrap();

    let from_file = dir.path().join("from-file");
    let o = run(&["ingest", s(&file), "--quiet", "--out", s(&from_file)]);
    assert!(o.status.success(), "{}", stderr(&o));

    // Standard input, named `-`.
    let from_stdin = dir.path().join("from-stdin");
    let mut child = bin()
        .args(["ingest", "-", "--quiet", "--out", s(&from_stdin)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feed = bytes.clone();
    // Written in small pieces, as a slow producer would.
    let writer = std::thread::spawn(move || {
        for chunk in feed.chunks(997) {
            stdin.write_all(chunk).unwrap();
        }
    });
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));

    let a = manifest(&from_file);
    let b = manifest(&from_stdin);
    assert_eq!(a["counts"]["records_read"], b["counts"]["records_read"]);
    assert_eq!(a["counts"]["runs"], b["counts"]["runs"]);
    assert_eq!(a["counts"]["events"], b["counts"]["events"]);
    assert_eq!(b["inputs"][0]["path"], "<stdin>");
    assert_eq!(b["inputs"][0]["size"], bytes.len() as u64);
    assert_eq!(a["inputs"][0]["sha256"], b["inputs"][0]["sha256"]);
    assert_ne!(b["inputs"][0]["sha256"], "");
    // Nothing of the copy is left in the store.
    assert!(!from_stdin.join(".spool").exists());
}

#[cfg(unix)]
fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo");
}

#[cfg(unix)]
#[test]
fn a_named_fifo_is_read_as_a_pipe_when_given_and_passed_over_in_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let file = sample_file();
    let bytes = std::fs::read(&file).unwrap();

    // Given on the command line: read once, whole.
    let fifo = dir.path().join("feed");
    mkfifo(&fifo);
    let out = dir.path().join("store");
    let mut child = bin()
        .args(["ingest", s(&fifo), "--quiet", "--out", s(&out)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let feed = bytes.clone();
    let fifo_path = fifo.clone();
    let writer = std::thread::spawn(move || {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&fifo_path)
            .unwrap()
            .write_all(&feed)
            .unwrap();
    });
    assert!(wait_bounded(&mut child, Duration::from_secs(60)), "hung");
    writer.join().unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(manifest(&out)["inputs"][0]["size"], bytes.len() as u64);

    // Inside a folder: passed over with a note, never waited on.
    let recs = dir.path().join("recs");
    std::fs::create_dir(&recs).unwrap();
    std::fs::copy(&file, recs.join("a.ndjson")).unwrap();
    mkfifo(&recs.join("b-fifo"));
    let out = dir.path().join("store2");
    let mut child = bin()
        .args(["ingest", s(&recs), "--quiet", "--out", s(&out)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_bounded(&mut child, Duration::from_secs(60)),
        "blocked on a FIFO found in a folder"
    );
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("skipped inputs   1"));
    let quarantine = std::fs::read_to_string(out.join("quarantine.jsonl")).unwrap();
    assert!(
        quarantine.contains("b-fifo") && quarantine.contains("\"skipped\""),
        "{quarantine}"
    );
    assert_eq!(manifest(&out)["counts"]["skipped_inputs"], 1);
}

#[cfg(unix)]
#[test]
fn linked_folders_are_walked_once_and_dangling_links_noted() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::copy(sample_file(), real.join("a.ndjson")).unwrap();
    let recs = dir.path().join("recs");
    std::fs::create_dir(&recs).unwrap();
    std::os::unix::fs::symlink(&real, recs.join("linked")).unwrap();
    // A loop back to the top, and a link to nowhere.
    std::os::unix::fs::symlink(&recs, recs.join("loop")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("gone"), recs.join("dangling")).unwrap();
    let out = dir.path().join("store");
    let o = run(&["ingest", s(&recs), "--quiet", "--out", s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let m = manifest(&out);
    assert_eq!(m["counts"]["files"], 1, "{m}");
    assert!(m["counts"]["runs"].as_u64().unwrap() > 0);
    assert_eq!(m["counts"]["skipped_inputs"], 2, "{m}");
    let quarantine = std::fs::read_to_string(out.join("quarantine.jsonl")).unwrap();
    assert!(
        quarantine.contains("dangling symbolic link"),
        "{quarantine}"
    );
    assert!(quarantine.contains("link loop"), "{quarantine}");
}

#[test]
fn absurd_thread_counts_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c");
    let o = run(&[
        "audit",
        s(&sample_file()),
        "--quiet",
        "--threads",
        "5000",
        "--out",
        s(&out),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--threads 5000 capped at"),
        "{}",
        stderr(&o)
    );
    let threads = manifest(&out)["threads"].as_u64().unwrap();
    let cores = std::thread::available_parallelism().unwrap().get() as u64;
    assert!(threads <= cores, "{threads} threads on {cores} cores");
}

#[test]
fn nothing_readable_exits_2_and_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk");
    std::fs::create_dir(&junk).unwrap();
    std::fs::write(junk.join("a.txt"), "hello").unwrap();
    std::fs::write(junk.join("b.csv"), "x,y\n1,2\n").unwrap();
    std::fs::write(junk.join("c.json"), r#"{"rows": [1, 2], "name": "n"}"#).unwrap();
    std::fs::write(junk.join("d.json"), "[1, 2]").unwrap();
    for command in ["audit", "ingest"] {
        let out = dir.path().join(format!("out-{command}"));
        let o = run(&[command, s(&junk), "--quiet", "--out", s(&out)]);
        assert_eq!(o.status.code(), Some(2), "{command}: {}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("nothing could be read: no adapter recognised 4 of 4 file(s): "),
            "{err}"
        );
        // The first three, each with why.
        assert!(
            err.contains(r#"a.txt (text that no format starts like (it starts with "hello"))"#),
            "{err}"
        );
        assert!(
            err.contains("b.csv (text that no format starts like"),
            "{err}"
        );
        assert!(
            err.contains(r#"c.json (a JSON object whose keys ("rows", "name") are no format's)"#),
            "{err}"
        );
        assert!(err.ends_with(", and 1 more\n"), "{err}");
        assert!(!out.exists(), "{command} left {}", out.display());
    }
}

/// Files no format recognises beside readable ones: the batch goes on, and each is listed
/// (`skipped`, with why) and counted apart from the records, so a misplaced folder is visible
/// and an unrelated file does not fail `--strict`.
#[test]
fn unrecognised_files_beside_readable_ones_are_listed_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    std::fs::copy(sample_file(), inputs.join("runs.ndjson")).unwrap();
    std::fs::write(inputs.join("notes.md"), "# notes\n").unwrap();
    let out = dir.path().join("store");
    let o = run(&[
        "ingest",
        s(&inputs),
        "--quiet",
        "--strict",
        "--out",
        s(&out),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(text.contains("not recognised   1 file(s)"), "{text}");
    let counts = &manifest(&out)["counts"];
    assert_eq!(counts["unrecognised_files"], 1);
    assert_eq!(counts["records_quarantined"], 0);
    let quarantine = std::fs::read_to_string(out.join("quarantine.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = quarantine
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{quarantine}");
    assert_eq!(lines[0]["severity"], "skipped");
    assert!(lines[0]["file"].as_str().unwrap().ends_with("notes.md"));
    assert_eq!(
        lines[0]["reason"],
        r##"not a recognised recording format: text that no format starts like (it starts with "# notes\n")"##
    );
}

#[test]
fn an_unwritable_output_is_named_in_the_error() {
    // /sys refuses new entries even to root.
    if std::fs::create_dir("/sys/traceaudit-probe").is_ok() {
        let _ = std::fs::remove_dir("/sys/traceaudit-probe");
        return;
    }
    let o = run(&[
        "audit",
        s(&sample_file()),
        "--quiet",
        "--out",
        "/sys/traceaudit-out",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/sys/"), "{}", stderr(&o));
}

#[test]
fn hostile_file_names_reach_the_terminal_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let name = "evil\u{1b}[2J\u{061c}\u{e0041}.ndjson";
    let path = dir.path().join(name);
    std::fs::write(&path, "not json at all\n").unwrap();
    let o = run(&[
        "audit",
        s(&path),
        "--quiet",
        "--out",
        s(&dir.path().join("c")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("evil\\u{1b}[2J\\u{61c}\\u{e0041}"), "{err}");
    assert!(
        !err.contains('\u{1b}') && !err.contains('\u{061c}'),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn an_interrupted_run_leaves_no_staging_behind() {
    // A generated input large enough that the audit is still running when interrupted.
    let dir = tempfile::tempdir().unwrap();
    let generated = dir.path().join("gen");
    let mut opts = traceaudit_gen::GenOptions::new(traceaudit_gen::GenFormat::Agentfootprint, 1);
    opts.bytes = Some(60_000_000);
    traceaudit_gen::generate(&opts, &generated).expect("generate");
    let out = dir.path().join("corpus");
    for signal in ["INT", "TERM"] {
        let mut child = bin()
            .args([
                "audit",
                s(&generated.join("input")),
                "--quiet",
                "--out",
                s(&out),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let staging = dir.path().join(format!("corpus.tmp-{}", child.id()));
        let start = Instant::now();
        while !staging.exists() && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(staging.exists(), "no staging directory appeared");
        std::thread::sleep(Duration::from_millis(200));
        let sent = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        assert!(wait_bounded(&mut child, Duration::from_secs(60)));
        let status = child.wait().unwrap();
        if status.success() {
            // Finished before the signal arrived: nothing to see on this machine.
            std::fs::remove_dir_all(&out).unwrap();
            continue;
        }
        assert_eq!(status.code(), Some(130), "SIG{signal}");
        assert!(!staging.exists(), "SIG{signal} left {}", staging.display());
        assert!(!out.exists());
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "gen")
            .collect();
        assert!(left.is_empty(), "SIG{signal} left {left:?}");
    }
}

#[test]
fn the_record_limit_is_set_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    // The sample file, with one line padded past 1 MiB.
    let text = std::fs::read_to_string(sample_file()).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let last = lines.pop().unwrap();
    let padded = format!(
        "{}, \"pad\": \"{}\"}}",
        last.trim_end().trim_end_matches('}'),
        "x".repeat(1_200_000)
    );
    lines.push(padded);
    let file = dir.path().join("big.ndjson");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let read = |mib: &str, out: &str| {
        let out = dir.path().join(out);
        let o = run(&[
            "ingest",
            s(&file),
            "--quiet",
            "--max-record-mib",
            mib,
            "--out",
            s(&out),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::read_to_string(out.join("quarantine.jsonl")).unwrap()
    };
    let strict = read("1", "one");
    assert!(strict.contains("over the 1 MiB record limit"), "{strict}");
    let default = read("32", "default");
    assert!(!default.contains("record limit"), "{default}");
    // Nonsense is refused by the command line itself.
    let o = run(&["ingest", s(&file), "--max-record-mib", "0", "--out", "x"]);
    assert_eq!(o.status.code(), Some(2));
}

/// A corpus of the bundled sample, audited into `dir/name`.
fn sample_corpus(dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let o = run(&[
        "audit",
        "testdata",
        "--config",
        "testdata/traceaudit.toml",
        "--quiet",
        "--out",
        s(&out),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    out
}

#[test]
fn a_damaged_corpus_table_is_named_by_every_report() {
    // Polars' own words ("The file must end with PAR1") name no file; every report must say
    // which of the corpus's files it could not read, and exit 2.
    let dir = tempfile::tempdir().unwrap();
    let good = sample_corpus(dir.path(), "good");
    let corpus = sample_corpus(dir.path(), "cut");
    let findings = corpus.join("findings.parquet");
    let bytes = std::fs::read(&findings).unwrap();
    std::fs::write(&findings, &bytes[..bytes.len() / 2]).unwrap();
    let nights = dir.path().join("nights");
    std::fs::create_dir(&nights).unwrap();
    let night = |name: &str, from: &Path| {
        let to = nights.join(name);
        let o = Command::new("cp")
            .arg("-r")
            .arg(from)
            .arg(&to)
            .output()
            .unwrap();
        assert!(o.status.success());
    };
    night("2026-12-01", &good);
    night("2026-12-02", &corpus);
    let out = dir.path().join("out");
    for args in [
        vec!["report", s(&corpus), "--format", "html"],
        vec!["report", s(&corpus), "--by", "tool"],
        vec!["diff", s(&good), s(&corpus)],
        vec!["trend", s(&nights)],
    ] {
        let mut args = args.clone();
        args.extend(["--out", s(&out)]);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains("findings.parquet is unreadable"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn a_page_that_panics_the_reports_parquet_reader_is_refused_by_name() {
    // A store's runs file with 46 bytes of one page zeroed (from a mutation run over our
    // outputs): Polars' reader asserts on it in a worker task and panics where the task is
    // awaited. The report refuses the file by name, exit 2, and prints no panic.
    let dir = tempfile::tempdir().unwrap();
    let corpus = sample_corpus(dir.path(), "corpus");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/corpus/runs-zeroed-page.parquet");
    std::fs::copy(fixture, corpus.join("store/runs/part-00000.parquet")).unwrap();
    let out = dir.path().join("report.html");
    let o = run(&["report", s(&corpus), "--format", "html", "--out", s(&out)]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("store/runs/part-00000.parquet is unreadable: the Parquet reader gave up"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.exists());
}
