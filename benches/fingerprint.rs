//! The hot functions of the repeated-call detector: FNV-1a over UTF-16 code units, the
//! JavaScript-faithful arguments text, and a whole call key.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use traceaudit::fingerprint as js;
use traceaudit::fingerprint::call_key;
use traceaudit::RepeatedWhen;

fn tool_result(bytes: usize, ascii: bool) -> String {
    let unit = if ascii {
        r#"{"flight_number":"HAT141","origin":"MSP","price":1234.5,"status":"available"},"#
    } else {
        r#"{"ville":"Zürich","prix":"12 €","note":"très bien","emoji":"✈️"},"#
    };
    let mut s = String::from("[");
    while s.len() < bytes {
        s.push_str(unit);
    }
    s.push(']');
    s
}

fn fnv(c: &mut Criterion) {
    let mut group = c.benchmark_group("fnv1a");
    for (name, ascii) in [("ascii", true), ("non_ascii", false)] {
        for size in [100usize, 20_000] {
            let text = tool_result(size, ascii);
            group.throughput(Throughput::Bytes(text.len() as u64));
            group.bench_with_input(BenchmarkId::new(name, size), &text, |b, t| {
                b.iter(|| js::fnv1a(black_box(t)))
            });
        }
    }
    group.finish();
}

fn arguments_text(c: &mut Criterion) {
    let args = serde_json::json!({
        "user_id": "mia_li_3668",
        "flights": [{"flight_number": "HAT136", "date": "2024-05-20"}, {"flight_number": "HAT039", "date": "2024-05-20"}],
        "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
        "payment_methods": [{"payment_id": "certificate_7504069", "amount": 250.0}],
        "total_baggages": 3, "nonfree_baggages": 0, "insurance": "no", "cabin": "economy"
    });
    let text = args.to_string();
    c.bench_function("stable_string/parsed", |b| {
        b.iter(|| js::stable_string(black_box(&args)))
    });
    c.bench_function("call_key/from_text", |b| {
        let result = tool_result(2_000, true);
        b.iter(|| {
            call_key(
                black_box("book_reservation"),
                Some(black_box(text.as_str())),
                black_box(&result),
                RepeatedWhen::ArgumentsAndResult,
            )
        })
    });
}

criterion_group!(benches, fnv, arguments_text);
criterion_main!(benches);
