//! Generated corpora at small scale: the engine must find exactly what the generator injected
//! (repeated calls, stale answers), read every generated record without quarantine, and the
//! generator must be reproducible byte for byte.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use traceaudit::Config;
use traceaudit::{audit, AuditOptions};
use traceaudit_gen::{self as gen, GenFormat, GenOptions};

/// Small options for tests: small shards (several files are written and read), results up to
/// 3 KB (the benchmark covers 20 KB at scale), polls and re-renders often enough to occur.
fn small(format: GenFormat, seed: u64, runs: u64) -> GenOptions {
    let mut opts = GenOptions::new(format, seed);
    opts.runs = Some(runs);
    opts.shard_bytes = match format {
        GenFormat::Agentfootprint => 2_000_000,
        GenFormat::Tau2 => 300_000,
    };
    opts.rates.result_bytes_max = 3_000;
    opts.rates.poll = 0.3;
    opts.rates.arguments_mode_repeat = 0.3;
    opts
}

fn generate(format: GenFormat, seed: u64, runs: u64, dir: &Path) -> gen::GenSummary {
    gen::generate(&small(format, seed, runs), dir).expect("generate")
}

fn audit_generated(corpus: &Path, out: &Path, threads: usize) -> traceaudit::AuditSummary {
    let (config, text) = Config::load(&corpus.join(gen::CONFIG_FILE)).unwrap();
    audit(
        &[corpus.join(gen::INPUT_DIR)],
        out,
        &AuditOptions {
            config,
            config_text: Some(text),
            threads,
            ..AuditOptions::default()
        },
    )
    .expect("audit")
}

fn check_format(format: GenFormat) {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    let summary = generate(format, 7, 200, &corpus);
    let expected = &summary.expected;
    let t = &expected.totals;
    assert!(t.runs >= 200, "{t:?}");
    assert!(t.files >= 2, "several shards: {t:?}");
    // The injected behaviour is there to be found.
    assert!(t.repeated_call_findings >= 5, "{t:?}");
    assert!(t.prior_turn_evidence.checked_fail >= 5, "{t:?}");
    assert!(t.prior_turn_evidence.checked_pass >= 5, "{t:?}");
    assert!(t.parallel_batches > 0 && t.tool_errors > 0, "{t:?}");
    assert!(t.injected.polls > 0 && t.injected.rerenders > 0, "{t:?}");

    let out = dir.path().join("audit");
    let result = audit_generated(&corpus, &out, 2);
    let c = &result.manifest.store_manifest.counts;
    assert_eq!(c.files, t.files);
    assert_eq!(c.records_quarantined, 0, "every generated record is read");
    assert_eq!(c.partial_notes, 0, "no orphan results");
    assert_eq!(c.runs, t.runs);
    assert_eq!(c.conversations, t.conversations);
    assert_eq!(c.landings, t.landings);
    let report = gen::verify::verify(expected, &out).unwrap();
    assert!(report.ok(), "{}", report.summary());
    assert_eq!(report.repeated_call_found, t.repeated_call_findings);
}

#[test]
fn agentfootprint_corpus_audits_to_its_expected_findings() {
    check_format(GenFormat::Agentfootprint);
}

#[test]
fn tau2_corpus_audits_to_its_expected_findings() {
    check_format(GenFormat::Tau2);
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn the_same_seed_gives_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    for format in [GenFormat::Agentfootprint, GenFormat::Tau2] {
        let a = dir.path().join(format!("{}-a", format.name()));
        let b = dir.path().join(format!("{}-b", format.name()));
        let c = dir.path().join(format!("{}-c", format.name()));
        generate(format, 11, 60, &a);
        generate(format, 11, 60, &b);
        generate(format, 12, 60, &c);
        let (fa, fb, fc) = (files(&a), files(&b), files(&c));
        assert!(fa == fb, "{} differs for one seed", format.name());
        assert!(fa != fc, "{} ignores the seed", format.name());
    }
}

/// The framework's own verdicts are written as the framework would write them: every
/// `agent.output_schema_retry` hash is the unpadded FNV-1a of a `[schema check` message of the
/// run's history, and every run's schema ledger counts match the events.
#[test]
fn schema_retries_carry_the_hash_of_their_correction() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    let mut opts = small(GenFormat::Agentfootprint, 5, 300);
    opts.rates.schema = 0.6;
    let summary = gen::generate(&opts, &corpus).unwrap();
    let mut retry_hashes: Vec<(String, String)> = Vec::new();
    let mut frame_hashes: std::collections::HashSet<(String, String)> = Default::default();
    let mut unmet = 0u64;
    for f in &summary.expected.files {
        let text = std::fs::read_to_string(corpus.join(&f.path)).unwrap();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let run = v["meta"]["runId"].as_str().unwrap().to_string();
            match v["type"].as_str().unwrap() {
                "agentfootprint.agent.output_schema_retry" => retry_hashes.push((
                    run,
                    v["payload"]["correctiveMessageHash"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                )),
                "agentfootprint.agent.output_contract_unmet" => unmet += 1,
                "agentfootprint.agent.iteration_end" => {
                    for m in v["payload"]["history"].as_array().into_iter().flatten() {
                        let content = m["content"].as_str().unwrap_or("");
                        if m["role"] == "user" && content.starts_with("[schema check") {
                            frame_hashes
                                .insert((run.clone(), traceaudit::fingerprint::hash_hex(content)));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let t = &summary.expected.totals.schema;
    assert!(t.retried > 10 && t.exhausted > 0 && t.passed > 10, "{t:?}");
    assert_eq!(retry_hashes.len() as u64, t.retry_events);
    assert_eq!(t.retry_events, t.retried);
    assert_eq!(unmet, t.contract_unmet_events);
    assert_eq!(unmet, t.exhausted);
    for rh in &retry_hashes {
        assert!(frame_hashes.contains(rh), "no correction hashes to {rh:?}");
    }
    // expected.json lists the same hashes, run by run.
    let listed: usize = summary
        .expected
        .runs
        .iter()
        .flat_map(|r| &r.schema_attempts)
        .filter(|a| a.corrective_message_hash.is_some())
        .count();
    assert_eq!(listed, retry_hashes.len());
}
