//! The hot functions of the prior-turn-evidence check: tokenising text, the digests the ingest
//! stores of messages and tool results, extracting an answer's values, and the evidence index (building it from a conversation's tool results, growing it
//! message by message, keeping only the answers' values, and reading an answer against it).
//! Inputs are tool results from the corpus generator, so their shape is that of the generated
//! corpora.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use traceaudit::evidence::{
    answer_values, build_index, build_watching_index, digest_result, digest_text, normalize_token,
    read_answer, tokenize, CompiledEvidence, EvidenceIndex,
};
use traceaudit::model::{HistoryMessage, Role};
use traceaudit_gen::plan::{plan_conversation, Outcome};
use traceaudit_gen::rng::Rng;
use traceaudit_gen::{GenFormat, Rates};

/// Tool results (JSON text) and user messages of a few generated conversations, in order.
fn messages(conversations: u64) -> Vec<(Role, String)> {
    let rates = Rates::default();
    let mut out = Vec::new();
    for i in 0..conversations {
        let mut rng = Rng::new(1000 + i);
        let plan = plan_conversation(&mut rng, &rates, GenFormat::Agentfootprint);
        for turn in &plan.turns {
            out.push((Role::User, turn.user.clone()));
            for call in turn.calls() {
                let text = match &call.outcome {
                    Outcome::Json(v) => traceaudit::fingerprint::stringify(v),
                    Outcome::Text(t) | Outcome::Error(t) => t.clone(),
                };
                out.push((Role::Tool, text));
            }
            out.push((Role::Assistant, turn.answer.text.clone()));
        }
    }
    out
}

/// A tool result of about `bytes` bytes.
fn result_of_size(msgs: &[(Role, String)], bytes: usize) -> String {
    msgs.iter()
        .filter(|(r, t)| *r == Role::Tool && t.starts_with('{'))
        .min_by_key(|(_, t)| t.len().abs_diff(bytes))
        .map(|(_, t)| t.clone())
        .expect("a tool result")
}

fn history(msgs: &[(Role, String)]) -> Vec<HistoryMessage<'_>> {
    msgs.iter()
        .map(|(role, text)| HistoryMessage {
            role: *role,
            text,
            tool_name: None,
            call_id: None,
        })
        .collect()
}

fn tokenising(c: &mut Criterion) {
    let msgs = messages(20);
    let mut group = c.benchmark_group("tokenize");
    for size in [100usize, 2_000, 20_000] {
        let text = result_of_size(&msgs, size);
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(BenchmarkId::new("tool_result", size), &text, |b, t| {
            b.iter(|| tokenize(black_box(t)))
        });
    }
    let answer = "Array SHPMAXDLVAP001 holds 41,200 GB; port fc1/3 (0xEF0101) had 892 CRC \
                  errors, 24/7 uptime, 32G links, 48-port switch, 41200iops, po1, UCSB-B200-M5, \
                  v7.0.3, 2024-05-01, 08:15, 98304.0, $20/month, 1234 and 12345678901234567890.";
    group.throughput(Throughput::Bytes(answer.len() as u64));
    group.bench_function("answer", |b| b.iter(|| tokenize(black_box(answer))));
    group.finish();
    let cfg = CompiledEvidence::default();
    c.bench_function("answer_values/spec_vector", |b| {
        b.iter(|| answer_values(black_box(answer), &cfg))
    });
    c.bench_function("normalize_token/number_with_commas", |b| {
        b.iter(|| normalize_token(black_box("$41,200.00,")))
    });
}

/// The digests the ingest makes for the store: of every person's message and answer
/// (`digest_text`) and of every tool result (`digest_result`), over a conversation's worth.
fn digesting(c: &mut Criterion) {
    let msgs = messages(20);
    let mut group = c.benchmark_group("digest");
    for (name, tool) in [("texts", false), ("tool_results", true)] {
        let texts: Vec<&str> = msgs
            .iter()
            .filter(|(r, _)| (*r == Role::Tool) == tool)
            .map(|(_, t)| t.as_str())
            .collect();
        group.throughput(Throughput::Bytes(
            texts.iter().map(|t| t.len() as u64).sum(),
        ));
        group.bench_function(name, |b| {
            b.iter(|| {
                for t in &texts {
                    black_box(match tool {
                        true => digest_result(black_box(t)),
                        false => digest_text(black_box(t)),
                    });
                }
            })
        });
    }
    group.finish();
}

fn evidence_index(c: &mut Criterion) {
    let cfg = CompiledEvidence::default();
    let mut group = c.benchmark_group("evidence_index");
    for conversations in [1u64, 8] {
        let msgs = messages(conversations);
        let hist = history(&msgs);
        let bytes: usize = msgs
            .iter()
            .filter(|(r, _)| *r == Role::Tool)
            .map(|(_, t)| t.len())
            .sum();
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_with_input(
            BenchmarkId::new("build", format!("{}KB", bytes / 1000)),
            &hist,
            |b, h| b.iter(|| build_index(black_box(h), &[], &cfg)),
        );
        // What the check builds: an index keeping only the values the conversation's answers
        // state (they are extracted once per conversation, so that is timed too).
        group.bench_with_input(
            BenchmarkId::new("build_watching", format!("{}KB", bytes / 1000)),
            &(&hist, &msgs),
            |b, (h, msgs)| {
                b.iter(|| {
                    let values: Vec<String> = msgs
                        .iter()
                        .filter(|(r, _)| *r == Role::Assistant)
                        .flat_map(|(_, t)| answer_values(t, &cfg))
                        .map(|c| c.value)
                        .collect();
                    build_watching_index(black_box(h), &[], &cfg, values.iter().map(String::as_str))
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("push_each", format!("{}KB", bytes / 1000)),
            &hist,
            |b, h| {
                b.iter(|| {
                    let mut index = EvidenceIndex::new(&cfg);
                    for m in h {
                        index.push(m);
                    }
                    index
                })
            },
        );
        let index = build_index(&hist, &[], &cfg);
        let answer = msgs
            .iter()
            .rev()
            .find(|(r, t)| *r == Role::Assistant && t.chars().any(|c| c.is_ascii_digit()))
            .map(|(_, t)| t.clone())
            .unwrap_or_else(|| "nothing".into());
        group.throughput(Throughput::Bytes(answer.len() as u64));
        group.bench_function(
            BenchmarkId::new("read_answer", format!("{}KB", bytes / 1000)),
            |b| b.iter(|| read_answer(black_box(&answer), &index, &cfg)),
        );
    }
    group.finish();
}

criterion_group!(benches, tokenising, digesting, evidence_index);
criterion_main!(benches);
