//! The JavaScript-faithful writers and hashes on arbitrary JSON text.
//!
//! Checked: `stringify` and `stable_string` write JSON that reads back to a value they write
//! the same way; `stable_string` does not depend on key order; the fingerprint is eight
//! lower-case hex digits and `hash_hex` the same number unpadded; FNV-1a's ASCII fast path gives
//! what hashing every UTF-16 unit gives; `cmp_utf16` orders as the UTF-16 units do.
#![no_main]
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use traceaudit::fingerprint as js;

fn fnv1a_units(text: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for unit in js::utf16_units(text) {
        hash ^= unit as u32;
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// Does a string of `v` hold the stand-in of a lone high surrogate right before that of a lone
/// low one? JavaScript would read those two units as one pair, so written out they read back as
/// a different character: the cost of the stand-ins that the `js` module documents.
fn has_adjacent_stand_ins(v: &Value) -> bool {
    let adjacent = |s: &str| {
        let base = js::LONE_SURROGATE_BASE;
        let cps: Vec<u32> = s.chars().map(|c| c as u32).collect();
        cps.windows(2).any(|w| {
            (base..base + 0x400).contains(&w[0]) && (base + 0x400..base + 0x800).contains(&w[1])
        })
    };
    match v {
        Value::String(s) => adjacent(s),
        Value::Array(items) => items.iter().any(has_adjacent_stand_ins),
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| adjacent(k) || has_adjacent_stand_ins(v)),
        _ => false,
    }
}

/// The same value with every object's keys in reverse order.
fn reversed(v: &Value) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.iter().map(reversed).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .rev()
                .map(|(k, v)| (k.clone(), reversed(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);

    let fp = js::fingerprint(&text);
    assert_eq!(fp.len(), 8);
    assert!(fp.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
    let hash = js::fnv1a(&text);
    assert_eq!(hash, fnv1a_units(&text), "ASCII fast path");
    assert_eq!(js::hash_hex(&text), format!("{hash:x}"));
    assert_eq!(u32::from_str_radix(&fp, 16).unwrap(), hash);

    if let Some((a, b)) = text.split_once('\n') {
        assert_eq!(
            js::cmp_utf16(a, b),
            js::utf16_units(a).cmp(js::utf16_units(b)),
            "{a:?} vs {b:?}"
        );
    }

    let Ok(value) = js::parse_json(&text) else {
        return;
    };
    let written = js::stringify(&value);
    let back = js::parse_json(&written).expect("stringify writes JSON");
    let stable = js::stable_string(&value);
    assert_eq!(
        js::stable_string(&reversed(&value)),
        stable,
        "depends on key order"
    );
    if has_adjacent_stand_ins(&value) {
        return;
    }
    assert_eq!(
        js::stringify(&back),
        written,
        "stringify does not read back"
    );
    let back = js::parse_json(&stable).expect("stable_string writes JSON");
    assert_eq!(
        js::stable_string(&back),
        stable,
        "stable_string does not read back"
    );
});
