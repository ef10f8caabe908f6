//! The nightly job's costs: appending a night's logs to a large store against ingesting the
//! night alone, and auditing the new generation against auditing the night alone.
//!
//! ```text
//! cargo bench --bench append
//! TRACEAUDIT_APPEND_BASE=2GB TRACEAUDIT_APPEND_NIGHT=64MB cargo bench --bench append
//! ```
//!
//! Environment (all optional):
//! - `TRACEAUDIT_APPEND_BASE`    the store's size before the night (default `256MB`)
//! - `TRACEAUDIT_APPEND_NIGHT`   the night's size (default `16MB`)
//! - `TRACEAUDIT_BENCH_FORMATS`  `agentfootprint,tau2` (default both)
//! - `TRACEAUDIT_BENCH_REPEATS`  timings per measurement; the median is reported (default 3)
//! - `TRACEAUDIT_BENCH_DIR`      where corpora and stores are kept (default
//!   `<target>/bench-corpora`)
//!
//! One generated corpus of BASE + 2 NIGHT bytes is written in files of NIGHT bytes: the last
//! whole file is the night, the others are the store's history. For agentfootprint, the later
//! half of each session's runs in the file before the night moves into the night too, so
//! those conversations continue stored ones and the append copies their earlier rows. Every
//! command is the release `traceaudit` binary at 2 threads, as a child process (its own wall
//! time and peak RSS). Repetitions alternate the two commands compared. Each append is made to
//! the same store: after it, its generation's folder is removed and the manifest put back.

use std::path::{Path, PathBuf};
use std::process::Command;
use traceaudit_gen::{self as gen, GenFormat, GenOptions};

mod common;
use common::{env_list, median, target_dir, timed, Sample};

fn size_of(name: &str, default: &str) -> (String, u64) {
    let text = std::env::var(name).unwrap_or_else(|_| default.to_string());
    let bytes = gen::parse_size(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    (text.to_uppercase(), bytes)
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("input dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    files
}

/// The corpus, split into the history folder and the night folder (made once, then reused).
fn corpus(dir: &Path, format: GenFormat, base: u64, night: u64) -> (PathBuf, PathBuf, PathBuf) {
    let root = dir.join(format!(
        "append-{}-{base}-{night}-v{}-2",
        format.name(),
        gen::GENERATOR_VERSION
    ));
    let (history, tonight) = (root.join("history"), root.join("night"));
    let config = root.join("corpus").join(gen::CONFIG_FILE);
    if tonight.is_dir() && history.is_dir() {
        eprintln!("reusing {}", root.display());
        return (history, tonight, config);
    }
    let _ = std::fs::remove_dir_all(&root);
    let mut opts = GenOptions::new(format, 7);
    opts.bytes = Some(base + 2 * night);
    opts.shard_bytes = night;
    eprintln!("generating {} ...", root.display());
    gen::generate(&opts, &root.join("corpus")).expect("generate");
    let files = files_in(&root.join("corpus").join(gen::INPUT_DIR));
    assert!(files.len() >= 3, "the corpus has {} file(s)", files.len());
    std::fs::create_dir_all(&history).unwrap();
    std::fs::create_dir_all(&tonight).unwrap();
    // The night is the last whole file (the very last one holds what was left over); for
    // agentfootprint, the later half of each session's runs in the file before it goes on
    // into the night, so those conversations continue stored ones.
    let night_at = files.len() - 2;
    for (i, file) in files.iter().enumerate() {
        let name = file.file_name().unwrap();
        if i == night_at {
            std::fs::rename(file, tonight.join(name)).unwrap();
        } else if i + 1 == night_at && format == GenFormat::Agentfootprint {
            let (kept, moved) = split_sessions(&std::fs::read_to_string(file).unwrap());
            std::fs::write(history.join(name), kept).unwrap();
            std::fs::write(tonight.join("continued.ndjson"), moved).unwrap();
            std::fs::remove_file(file).unwrap();
        } else {
            std::fs::rename(file, history.join(name)).unwrap();
        }
    }
    (history, tonight, config)
}

/// The lines of agentfootprint NDJSON split by run: the first half of each session's runs,
/// and the rest (a line without a run goes with the line before it).
fn split_sessions(text: &str) -> (String, String) {
    let key = |line: &str| -> Option<(String, String)> {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let meta = v.get("meta")?;
        Some((
            meta.get("sessionId")?.as_str()?.to_string(),
            meta.get("runId")?.as_str()?.to_string(),
        ))
    };
    let mut runs_of: std::collections::HashMap<String, Vec<String>> = Default::default();
    let keys: Vec<Option<(String, String)>> = text.lines().map(key).collect();
    for (session, run) in keys.iter().flatten() {
        let runs = runs_of.entry(session.clone()).or_default();
        if !runs.contains(run) {
            runs.push(run.clone());
        }
    }
    let (mut kept, mut moved) = (String::new(), String::new());
    let mut later = false;
    for (line, key) in text.lines().zip(&keys) {
        if let Some((session, run)) = key {
            let runs = &runs_of[session];
            later =
                runs.iter().position(|r| r == run).unwrap_or(0) * 2 >= runs.len() && runs.len() > 1;
        }
        let to = if later { &mut moved } else { &mut kept };
        to.push_str(line);
        to.push('\n');
    }
    (kept, moved)
}

fn engine(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_traceaudit"));
    cmd.args(args).args(["--threads", "2", "--quiet"]);
    cmd
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 bench directory")
}

fn bytes_in(dir: &Path) -> u64 {
    files_in(dir)
        .iter()
        .map(|f| f.metadata().map(|m| m.len()).unwrap_or(0))
        .sum()
}

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

struct Stat {
    median: f64,
    min: f64,
    max: f64,
    rss_mb: f64,
}

fn stat(samples: &[Sample]) -> Stat {
    let mut secs: Vec<f64> = samples.iter().map(|s| s.seconds).collect();
    let min = secs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = secs.iter().copied().fold(0.0, f64::max);
    Stat {
        median: median(&mut secs),
        min,
        max,
        rss_mb: samples.iter().map(|s| s.max_rss_kb).max().unwrap_or(0) as f64 / 1024.0,
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let (base_label, base) = size_of("TRACEAUDIT_APPEND_BASE", "256MB");
    let (night_label, night) = size_of("TRACEAUDIT_APPEND_NIGHT", "16MB");
    let repeats: usize = std::env::var("TRACEAUDIT_BENCH_REPEATS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3usize)
        .max(1);
    let dir = std::env::var_os("TRACEAUDIT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("bench-corpora"));
    let mut report = String::new();
    for format in env_list("TRACEAUDIT_BENCH_FORMATS", "agentfootprint,tau2") {
        let format = match format.as_str() {
            "agentfootprint" => GenFormat::Agentfootprint,
            "tau2" => GenFormat::Tau2,
            other => panic!("unknown format {other:?}"),
        };
        let (history, tonight, config) = corpus(&dir, format, base, night);
        let work = dir.join(format!("append-work-{}", format.name()));
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).unwrap();
        let log = work.join("log.txt");
        let store = work.join("store");
        let first = timed(
            &mut engine(&["ingest", path(&history), "--out", path(&store)]),
            &log,
        );
        let manifest_before = std::fs::read(store.join("manifest.json")).unwrap();
        let night_store = work.join("night-store");
        let generation = store.join("generations/00001");
        let (mut ingests, mut appends) = (Vec::new(), Vec::new());
        let (mut night_audits, mut generation_audits) = (Vec::new(), Vec::new());
        for round in 0..repeats {
            let _ = std::fs::remove_dir_all(&night_store);
            ingests.push(timed(
                &mut engine(&["ingest", path(&tonight), "--out", path(&night_store)]),
                &log,
            ));
            appends.push(timed(
                &mut engine(&["ingest", path(&tonight), "--out", path(&store), "--append"]),
                &log,
            ));
            let corpus_of = |name: &str| work.join(format!("{name}-{round}"));
            night_audits.push(timed(
                &mut engine(&[
                    "audit",
                    path(&night_store),
                    "--config",
                    path(&config),
                    "--out",
                    path(&corpus_of("night")),
                ]),
                &log,
            ));
            generation_audits.push(timed(
                &mut engine(&[
                    "audit",
                    path(&store),
                    "--generation",
                    "last",
                    "--config",
                    path(&config),
                    "--out",
                    path(&corpus_of("generation")),
                ]),
                &log,
            ));
            if round + 1 < repeats {
                std::fs::remove_dir_all(&generation).unwrap();
                std::fs::write(store.join("manifest.json"), &manifest_before).unwrap();
            }
        }
        let grown = manifest(&store);
        let added = &grown["generations"][1];
        let whole = timed(
            &mut engine(&[
                "audit",
                path(&store),
                "--config",
                path(&config),
                "--out",
                path(&work.join("whole")),
            ]),
            &log,
        );
        let rows = [
            ("ingest the night alone", stat(&ingests)),
            ("append the night to the store", stat(&appends)),
            ("audit the night's store", stat(&night_audits)),
            ("audit --generation last", stat(&generation_audits)),
            ("audit the whole grown store", stat(&[whole])),
        ];
        report.push_str(&format!(
            "\n{}: store of {} MB ({base_label} asked, first ingest {:.2} s), night of {} MB \
             ({night_label} asked); the generation: {} new conversation(s), {} continued \
             ({} runs copied), {} runs of its own\n\n",
            format.name(),
            bytes_in(&history) / 1_000_000,
            first.seconds,
            bytes_in(&tonight) / 1_000_000,
            added["new_conversations"],
            added["superseded_conversations"],
            added["copied_runs"],
            added["counts"]["runs"],
        ));
        report.push_str("| step | median s | min-max s | peak RSS MB | x its pair |\n");
        report.push_str("|---|---|---|---|---|\n");
        for (i, (name, s)) in rows.iter().enumerate() {
            let pair = match i {
                1 => format!("{:.2}", s.median / rows[0].1.median),
                3 => format!("{:.2}", s.median / rows[2].1.median),
                4 => format!("{:.2}", s.median / rows[2].1.median),
                _ => "1".into(),
            };
            report.push_str(&format!(
                "| {name} | {:.2} | {:.2}-{:.2} | {:.0} | {pair} |\n",
                s.median, s.min, s.max, s.rss_mb
            ));
        }
    }
    println!("{report}");
    let results = target_dir().join("bench-results");
    std::fs::create_dir_all(&results).unwrap();
    let file = results.join(format!("append-{base_label}-{night_label}.md"));
    std::fs::write(&file, &report).unwrap();
    eprintln!("written to {}", file.display());
}
