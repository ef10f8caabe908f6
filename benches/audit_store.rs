//! Auditing an existing store: every registered pass over the bundled sample data (ingested
//! once, outside the timed loop), at one and at two threads.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::path::PathBuf;
use traceaudit::{audit, AuditOptions};
use traceaudit::{ingest, IngestOptions};

fn sample_store(dir: &std::path::Path) -> PathBuf {
    let testdata = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let store = dir.join("store");
    let summary = ingest(
        &[
            testdata.join("agentfootprint/ndjson"),
            testdata.join("tau-bench"),
            testdata.join("tau2"),
        ],
        &store,
        &IngestOptions {
            threads: 2,
            ..IngestOptions::default()
        },
    )
    .expect("ingest the sample");
    eprintln!(
        "sample store: {} runs, {} events",
        summary.manifest.counts.runs, summary.manifest.counts.events
    );
    store
}

fn audit_store(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let runs = traceaudit::Store::open(&store)
        .unwrap()
        .runs()
        .unwrap()
        .len() as u64;
    let mut group = c.benchmark_group("audit_store");
    group.throughput(Throughput::Elements(runs));
    group.sample_size(20);
    for threads in [1usize, 2] {
        group.bench_function(format!("threads_{threads}"), |b| {
            let out = dir.path().join(format!("corpus-{threads}"));
            b.iter(|| {
                audit(
                    std::slice::from_ref(&store),
                    &out,
                    &AuditOptions {
                        threads,
                        ..AuditOptions::default()
                    },
                )
                .unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, audit_store);
criterion_main!(benches);
