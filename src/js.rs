//! JavaScript-faithful helpers: the only place that imitates how the recording framework (a
//! JavaScript library) writes values and hashes text. Every check that must agree with the
//! framework bit for bit goes through these functions, and nothing else re-implements them.
//!
//! - [`stable_string`]: the arguments text of the repeated-call detector (keys sorted by UTF-16
//!   code units at every depth, scalars as `JSON.stringify` writes them).
//! - [`stringify`]: `JSON.stringify` of a parsed value, keys in JavaScript property order.
//! - [`number_to_string`]: `String(n)` / `Number.prototype.toString()` for a double.
//! - [`fnv1a`]: 32-bit FNV-1a over UTF-16 code units; [`fingerprint`] writes it as 8 zero-padded
//!   hex digits, [`hash_hex`] without padding (the schema-check message hash).
//!
//! Lone surrogates: JavaScript strings may hold unpaired UTF-16 surrogates, Rust strings may not.
//! [`parse_json`] accepts JSON text whose `\uD800`-style escapes are unpaired by mapping each
//! such unit onto a reserved code point of Supplementary Private Use Area-B
//! (`U+10F800 + (unit - 0xD800)`, see [`LONE_SURROGATE_BASE`]); [`utf16_units`] maps it back, so
//! hashing and escaping see the same code unit JavaScript would. Recorded text that genuinely
//! contains one of those 2,048 private-use code points is read as the surrogate it stands for;
//! that is the documented cost of the mapping.

use serde_json::{Map, Value};
use std::fmt::Write as _;

/// First code point of the block that stands in for lone surrogates (see the module docs).
pub const LONE_SURROGATE_BASE: u32 = 0x10F800;

const FNV_OFFSET: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 0x0100_0193;

/// The UTF-16 code units of `s`, as JavaScript sees the string (lone surrogates restored).
pub fn utf16_units(s: &str) -> impl Iterator<Item = u16> + '_ {
    s.chars().flat_map(|c| {
        let cp = c as u32;
        let mut buf = [0u16; 2];
        let n = if (LONE_SURROGATE_BASE..LONE_SURROGATE_BASE + 0x800).contains(&cp) {
            buf[0] = (0xD800 + (cp - LONE_SURROGATE_BASE)) as u16;
            1
        } else {
            c.encode_utf16(&mut buf).len()
        };
        buf.into_iter().take(n)
    })
}

/// 32-bit FNV-1a over the UTF-16 code units of `text`.
pub fn fnv1a(text: &str) -> u32 {
    let bytes = text.as_bytes();
    let mut hash = FNV_OFFSET;
    // ASCII is one code unit per byte; only fall back to decoding when a byte is not ASCII.
    let ascii_prefix = bytes
        .iter()
        .position(|b| !b.is_ascii())
        .unwrap_or(bytes.len());
    for &b in &bytes[..ascii_prefix] {
        hash ^= b as u32;
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    if ascii_prefix < bytes.len() {
        // The prefix is ASCII, so it ends on a char boundary.
        for unit in utf16_units(&text[ascii_prefix..]) {
            hash ^= unit as u32;
            hash = hash.wrapping_mul(FNV_PRIME);
        }
    }
    hash
}

/// The repeated-call fingerprint: FNV-1a written as 8 lower-case hex digits, zero-padded.
pub fn fingerprint(text: &str) -> String {
    format!("{:08x}", fnv1a(text))
}

/// FNV-1a written as lower-case hex WITHOUT zero padding (`hash.toString(16)`), the form of the
/// output-schema corrective message hash.
pub fn hash_hex(text: &str) -> String {
    format!("{:x}", fnv1a(text))
}

/// `Number.prototype.toString()` for a finite double; `NaN`, `Infinity`, `-Infinity` otherwise.
pub fn number_to_string(n: f64) -> String {
    let mut out = String::new();
    write_number(&mut out, n);
    out
}

/// [`number_to_string`] appended to a buffer the caller reuses.
pub fn write_number(out: &mut String, n: f64) {
    if n.is_nan() {
        out.push_str("NaN");
    } else if n.is_infinite() {
        out.push_str(if n > 0.0 { "Infinity" } else { "-Infinity" });
    } else if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        // Integers below 2^53 print as their digits (and -0 as 0); skip the shortest-digits
        // search for them.
        let _ = write!(out, "{}", n as i64);
    } else {
        let mut buf = ryu_js::Buffer::new();
        out.push_str(buf.format_finite(n));
    }
}

/// The double JavaScript's `JSON.parse` would give for a JSON number.
pub fn number_value(n: &serde_json::Number) -> f64 {
    if let Some(f) = n.as_f64() {
        return f;
    }
    // Unreachable without arbitrary_precision; keep a defined answer anyway.
    n.to_string().parse::<f64>().unwrap_or(f64::NAN)
}

/// Write `s` as `JSON.stringify` writes a string: quotes, and escapes for `"`, `\`, control
/// characters (`\b \f \n \r \t` by name, the rest as lower-case `\u00xx`) and lone surrogates.
pub fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (LONE_SURROGATE_BASE..LONE_SURROGATE_BASE + 0x800).contains(&(c as u32)) => {
                let unit = 0xD800 + (c as u32 - LONE_SURROGATE_BASE);
                let _ = write!(out, "\\u{unit:04x}");
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_scalar(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let f = number_value(n);
            // JSON.stringify writes non-finite numbers as null.
            if f.is_finite() {
                out.push_str(&number_to_string(f));
            } else {
                out.push_str("null");
            }
        }
        Value::String(s) => write_json_string(out, s),
        Value::Array(_) | Value::Object(_) => unreachable!("not a scalar"),
    }
}

/// Compare two strings by UTF-16 code units, as JavaScript's `<` does.
pub fn cmp_utf16(a: &str, b: &str) -> std::cmp::Ordering {
    // UTF-8 byte order equals code point order, which equals UTF-16 order except where a
    // supplementary character (4 UTF-8 bytes, surrogate pair in UTF-16) meets a BMP character
    // at or above U+E000. Take the fast path when either side is ASCII.
    if a.is_ascii() || b.is_ascii() {
        return a.as_bytes().cmp(b.as_bytes());
    }
    utf16_units(a).cmp(utf16_units(b))
}

/// The repeated-call detector's arguments text: keys sorted by UTF-16 code units at every depth,
/// arrays in order, no spaces, scalars as `JSON.stringify` writes them. (`undefined` members
/// cannot occur in parsed JSON; a recorded `undefined` is simply absent.)
pub fn stable_string(v: &Value) -> String {
    let mut out = String::with_capacity(64);
    write_stable(&mut out, v);
    out
}

fn write_stable(out: &mut String, v: &Value) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_stable(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| cmp_utf16(a.0, b.0));
            out.push('{');
            for (i, (k, val)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(out, k);
                out.push(':');
                write_stable(out, val);
            }
            out.push('}');
        }
        scalar => write_scalar(out, scalar),
    }
}

/// Is `key` an array index as JavaScript orders properties (a canonical integer below 2^32 - 1)?
fn is_array_index(key: &str) -> Option<u32> {
    if key.is_empty() || key.len() > 10 || (key.len() > 1 && key.starts_with('0')) {
        return None;
    }
    if !key.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    key.parse::<u64>()
        .ok()
        .filter(|&n| n < u32::MAX as u64)
        .map(|n| n as u32)
}

/// An object's entries in JavaScript property order: integer-like keys ascending, then the
/// others in insertion order.
pub fn js_property_order(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut indexed: Vec<(u32, &String, &Value)> = Vec::new();
    let mut named: Vec<(&String, &Value)> = Vec::with_capacity(map.len());
    for (k, v) in map {
        match is_array_index(k) {
            Some(n) => indexed.push((n, k, v)),
            None => named.push((k, v)),
        }
    }
    if indexed.is_empty() {
        return named;
    }
    indexed.sort_by_key(|e| e.0);
    indexed
        .into_iter()
        .map(|(_, k, v)| (k, v))
        .chain(named)
        .collect()
}

/// `JSON.stringify(value)` of a parsed value: no spaces, keys in JavaScript property order.
pub fn stringify(v: &Value) -> String {
    let mut out = String::with_capacity(128);
    write_stringify(&mut out, v);
    out
}

fn write_stringify(out: &mut String, v: &Value) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_stringify(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, val)) in js_property_order(map).into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(out, k);
                out.push(':');
                write_stringify(out, val);
            }
            out.push('}');
        }
        scalar => write_scalar(out, scalar),
    }
}

/// A JSON object's fields named in `.0`, as values in their order; the others are skipped as
/// the text is parsed, not built.
#[derive(Clone, Copy)]
pub struct Fields(pub &'static [&'static str]);

/// An object key, read without copying it: its index in the names wanted, or `None`.
#[derive(Clone, Copy)]
pub struct Key<'a>(pub &'a [&'a str]);

impl<'de> serde::de::DeserializeSeed<'de> for Key<'_> {
    type Value = Option<usize>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl serde::de::Visitor<'_> for Key<'_> {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|k| *k == key))
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Fields {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Fields {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        // At most every name wanted is kept: room for them all, so the map is not grown
        // member by member.
        let mut kept = Map::with_capacity(self.0.len());
        while let Some(index) = map.next_key_seed(Key(self.0))? {
            match index {
                Some(i) => {
                    kept.insert(self.0[i].to_string(), map.next_value()?);
                }
                None => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(kept))
    }
}

/// The members of the JSON object `text` named in `names`, as [`parse_json`] would read them
/// (of a name given twice, the last): the other members are skipped as the text is parsed,
/// not built. `None` when the text is not a JSON object. Text the one-pass parse refuses (a
/// lone surrogate, say) is parsed whole instead; a member skipped unbuilt may hold what
/// serde_json would not build (a number beyond f64, nesting deeper than 127), as
/// JavaScript's `JSON.parse` takes it.
pub fn parse_members(text: &str, names: &'static [&'static str]) -> Option<Map<String, Value>> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(text);
    let skimmed = Fields(names)
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    match skimmed {
        Ok(Value::Object(kept)) => Some(kept),
        _ => match parse_json(text).ok()? {
            Value::Object(mut all) => {
                all.retain(|k, _| names.contains(&k.as_str()));
                Some(all)
            }
            _ => None,
        },
    }
}

/// The members named in `inner` of the object member `outer` of the JSON object `text` (of a
/// name given twice, the last), as [`parse_json`] would read them: every other member, at
/// either level, is skipped as the text is parsed, not built. `None` when the text is not a
/// JSON object, or its `outer` member is missing or not an object. Text the one-pass parse
/// refuses is parsed whole instead, as in [`parse_members`]. Of
/// `{"payload":{"content":"...","stopReason":"end"}}`, `payload` and `["stopReason"]` give
/// `{"stopReason":"end"}`, the content passed over unbuilt.
pub fn parse_member_members(
    text: &str,
    outer: &'static str,
    inner: &'static [&'static str],
) -> Option<Map<String, Value>> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(text);
    let skimmed = Member { outer, inner }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    match skimmed {
        Ok(found) => found,
        Err(_) => match parse_json(text).ok()? {
            Value::Object(mut all) => match all.swap_remove(outer)? {
                Value::Object(mut kept) => {
                    kept.retain(|k, _| inner.contains(&k.as_str()));
                    Some(kept)
                }
                _ => None,
            },
            _ => None,
        },
    }
}

/// The object member `outer` of an object, with only its members named in `inner` built
/// ([`parse_member_members`]); `None` when it is missing or not an object.
#[derive(Clone, Copy)]
struct Member {
    outer: &'static str,
    inner: &'static [&'static str],
}

impl<'de> serde::de::DeserializeSeed<'de> for Member {
    type Value = Option<Map<String, Value>>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Member {
    type Value = Option<Map<String, Value>>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(index) = map.next_key_seed(Key(std::slice::from_ref(&self.outer)))? {
            match index {
                Some(_) => found = map.next_value_seed(ObjectOrNot(Fields(self.inner)))?,
                None => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }
}

/// A value read as [`Fields`] when it is an object, and skipped (`None`) when it is not.
#[derive(Clone, Copy)]
struct ObjectOrNot(Fields);

impl<'de> serde::de::DeserializeSeed<'de> for ObjectOrNot {
    type Value = Option<Map<String, Value>>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for ObjectOrNot {
    type Value = Option<Map<String, Value>>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any value")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        match serde::de::Visitor::visit_map(self.0, map)? {
            Value::Object(kept) => Ok(Some(kept)),
            _ => Ok(None),
        }
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// Whether JSON text `text` may hold the string `s` (which holds no `"` or `\`) anywhere, as
/// a key or a value: `false` only when it cannot, as `s` does not occur in it and no escape
/// does either (an escape could spell `s`'s characters). A scan for this costs far less than a
/// parse, so a reader that looks for one name can pass over texts without it.
pub fn may_hold_string(text: &str, s: &str) -> bool {
    text.contains(s) || text.contains('\\')
}

/// Parse JSON text as JavaScript's `JSON.parse` would, including unpaired surrogate escapes
/// (mapped as the module docs say). Returns serde_json's error when the text is not JSON.
pub fn parse_json(text: &str) -> Result<Value, serde_json::Error> {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => Ok(v),
        Err(e) => match map_lone_surrogates(text) {
            Some(mapped) => serde_json::from_str::<Value>(&mapped),
            None => Err(e),
        },
    }
}

/// Rewrite unpaired `\uD800`..`\uDFFF` escapes to escapes of their stand-in code points.
/// Returns `None` when there is nothing to rewrite.
fn map_lone_surrogates(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let hex4 = |i: usize| -> Option<u16> {
        let s = text.get(i..i + 4)?;
        u16::from_str_radix(s, 16).ok()
    };
    let mut out = String::with_capacity(text.len() + 16);
    let mut changed = false;
    let mut i = 0;
    let mut last = 0;
    while i + 1 < b.len() {
        if b[i] == b'\\' {
            if b[i + 1] == b'u' {
                if let Some(unit) = hex4(i + 2) {
                    let is_high = (0xD800..0xDC00).contains(&unit);
                    let is_low = (0xDC00..0xE000).contains(&unit);
                    let paired_low = is_high
                        && b.get(i + 6) == Some(&b'\\')
                        && b.get(i + 7) == Some(&b'u')
                        && hex4(i + 8).is_some_and(|u| (0xDC00..0xE000).contains(&u));
                    if paired_low {
                        i += 12;
                        continue;
                    }
                    if is_high || is_low {
                        out.push_str(&text[last..i]);
                        let cp = LONE_SURROGATE_BASE + (unit as u32 - 0xD800);
                        // Escape the stand-in as its own surrogate pair.
                        let c = char::from_u32(cp).expect("valid code point");
                        let mut pair = [0u16; 2];
                        c.encode_utf16(&mut pair);
                        let _ = write!(out, "\\u{:04x}\\u{:04x}", pair[0], pair[1]);
                        i += 6;
                        last = i;
                        changed = true;
                        continue;
                    }
                }
                i += 2;
                continue;
            }
            i += 2;
            continue;
        }
        i += 1;
    }
    if !changed {
        return None;
    }
    out.push_str(&text[last..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fp_args(v: &Value) -> String {
        fingerprint(&stable_string(v))
    }

    /// The members kept are what a whole parse holds under those names, whatever the text;
    /// only a member skipped unbuilt may hold what a whole parse refuses.
    #[test]
    fn members_are_the_whole_parses() {
        const NAMES: &[&str] = &["payload", "type"];
        let texts = [
            r#"{"type":"a.b","payload":{"chosen":"x","n":[1,2.5,{"k":null}]},"meta":{"p":["s",1]}}"#,
            r#"{"payload":1,"payload":{"late":true},"type":"t","type":"u"}"#,
            r#"{"meta":{"deep":[[[]]]}}"#,
            r#"{}"#,
            r#"{"payload":"\ud800 alone","other":"\udc00"}"#,
            r#"{"other":"\udfff"}"#,
            r#"[{"payload":1}]"#,
            r#""payload""#,
            r#"{"payload":1} trailing"#,
            r#"{"payload":1,"#,
            r#"{"payload": 1e400}"#,
            "",
        ];
        for text in texts {
            let whole = match parse_json(text) {
                Ok(Value::Object(mut all)) => {
                    all.retain(|k, _| NAMES.contains(&k.as_str()));
                    Some(all)
                }
                _ => None,
            };
            assert_eq!(parse_members(text, NAMES), whole, "{text}");
        }
        let kept = parse_members(r#"{"payload":1,"payload":{"late":true}}"#, NAMES).unwrap();
        assert_eq!(kept["payload"], json!({"late": true}));
        let lone = parse_members(r#"{"payload":"\ud800"}"#, NAMES).unwrap();
        assert_eq!(
            utf16_units(lone["payload"].as_str().unwrap()).collect::<Vec<_>>(),
            [0xD800]
        );
        // Beyond f64 or past serde_json's nesting limit in a member skipped: JSON.parse takes it.
        let deep = format!(
            r#"{{"meta":{}1{}, "payload":2}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        for text in [r#"{"meta":1e400,"payload":2}"#, deep.as_str()] {
            assert!(parse_json(text).is_err());
            assert_eq!(parse_members(text, NAMES).unwrap()["payload"], json!(2));
        }
    }

    /// A member's members kept are what a whole parse holds of that member under those names,
    /// whatever the text: a member given twice is its last, and one that is not an object is
    /// none.
    #[test]
    fn member_members_are_the_whole_parses() {
        const INNER: &[&str] = &["stopReason", "toolCallCount"];
        let texts = [
            r#"{"type":"x","payload":{"content":"long","toolCallCount":2,"stopReason":"end"}}"#,
            r#"{"payload":{"stopReason":"a"},"payload":{"toolCallCount":1}}"#,
            r#"{"payload":{"stopReason":"a"},"payload":[1,{"stopReason":"b"}]}"#,
            r#"{"payload":[1],"payload":{"stopReason":"b","stopReason":"c"}}"#,
            r#"{"payload":"text"}"#,
            r#"{"payload":null}"#,
            r#"{"payload":true,"meta":{"payload":{"stopReason":"deep"}}}"#,
            r#"{"payload":-1.5e3}"#,
            r#"{"payload":{}}"#,
            r#"{"meta":{}}"#,
            r#"{"payload":{"stopReason":"\ud800 alone"}}"#,
            r#"{"payload":{"content":"\udc00","stopReason":"s"}}"#,
            r#"[{"payload":{"stopReason":"a"}}]"#,
            r#"{"payload":{"stopReason":"a"}} trailing"#,
            r#"{"payload":{"stopReason":"a"},"#,
            "",
        ];
        for text in texts {
            let whole = match parse_json(text) {
                Ok(Value::Object(mut all)) => match all.swap_remove("payload") {
                    Some(Value::Object(mut kept)) => {
                        kept.retain(|k, _| INNER.contains(&k.as_str()));
                        Some(kept)
                    }
                    _ => None,
                },
                _ => None,
            };
            assert_eq!(
                parse_member_members(text, "payload", INNER),
                whole,
                "{text}"
            );
        }
        let first = r#"{"payload":{"content":"c","toolCallCount":0,"stopReason":"end"}}"#;
        let kept = parse_member_members(first, "payload", INNER).unwrap();
        assert_eq!(kept.len(), 2);
        assert_eq!(kept["toolCallCount"], json!(0));
        // Beyond f64 or past serde_json's nesting limit in a member skipped: JSON.parse takes it.
        let deep = format!(
            r#"{{"payload":{{"content":{}1{},"stopReason":"s"}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        for text in [r#"{"payload":{"n":1e400,"stopReason":"s"}}"#, deep.as_str()] {
            assert!(parse_json(text).is_err());
            let kept = parse_member_members(text, "payload", INNER).unwrap();
            assert_eq!(kept["stopReason"], json!("s"));
        }
    }

    #[test]
    fn fnv_vectors() {
        assert_eq!(fingerprint("a"), "e40c292c");
        assert_eq!(fingerprint(""), "811c9dc5");
        // Padded versus unpadded forms of the same hash.
        assert_eq!(fingerprint("x2"), "0f630cef");
        assert_eq!(hash_hex("x2"), "f630cef");
    }

    #[test]
    fn repeated_call_vectors_from_spec() {
        assert_eq!(fp_args(&json!({"q": "Q3", "n": 1})), "c4eac9d1");
        assert_eq!(fp_args(&json!({"n": 1, "q": "Q3"})), "c4eac9d1");
        assert_eq!(fingerprint("rows"), "2a37b398");
        assert_eq!(fp_args(&json!({"q": "Q3"})), "73aa928e");
        assert_eq!(fingerprint("the same 40 rows"), "e922c5fb");
        assert_eq!(fingerprint("running"), "147eb74c");
        assert_eq!(fingerprint("done"), "26f38071");
        assert_eq!(fp_args(&json!({})), "5465b825");
        assert_eq!(fingerprint("status: step 1"), "327f0e5c");
        assert_eq!(fp_args(&json!({"f": {"x": 1, "y": 2}})), "f3af8fb7");
        assert_eq!(fingerprint("r"), "f70c4715");
        assert_eq!(fp_args(&json!({"list": [1, 2]})), "0a5984fc");
        assert_eq!(fp_args(&json!({"list": [2, 1]})), "f36640f4");
        assert_eq!(fp_args(&json!({"view": "home"})), "2a1ba70f");
        assert_eq!(fingerprint("rendered home @v1"), "0e91c57a");
        assert_eq!(fingerprint("rendered home @v2"), "0d91c3e7");
        // {a: undefined, b: null}: undefined members are dropped, so only b remains.
        assert_eq!(fp_args(&json!({"b": null})), "307f4b12");
    }

    #[test]
    fn javascript_number_text() {
        let cases: &[(&str, &str)] = &[
            ("1.0", "1"),
            ("1e21", "1e+21"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("5e-7", "5e-7"),
            ("0.000001", "0.000001"),
            ("1.5e300", "1.5e+300"),
            ("12345678901234567890", "12345678901234567000"),
            ("9007199254740993", "9007199254740992"),
            ("123456789012345680000", "123456789012345680000"),
            ("0.1", "0.1"),
            ("100", "100"),
            ("-42.50", "-42.5"),
        ];
        for (input, want) in cases {
            let v: Value = parse_json(input).unwrap();
            assert_eq!(stable_string(&v), *want, "input {input}");
        }
    }

    #[test]
    fn string_escapes() {
        let v = parse_json(r#""a\"b\\c\u0001\u001f\b\f\n\r\t\u2028\u007f é 😀""#).unwrap();
        assert_eq!(
            stable_string(&v),
            "\"a\\\"b\\\\c\\u0001\\u001f\\b\\f\\n\\r\\t\u{2028}\u{7f} é 😀\""
        );
    }

    #[test]
    fn lone_surrogates_survive_and_hash_as_units() {
        let v = parse_json(r#"{"k":"x\ud800y"}"#).unwrap();
        assert_eq!(stable_string(&v), r#"{"k":"x\ud800y"}"#);
        // FNV over the code units x, D800, y.
        let mut h = FNV_OFFSET;
        for u in [b'x' as u16, 0xD800, b'y' as u16] {
            h ^= u as u32;
            h = h.wrapping_mul(FNV_PRIME);
        }
        let s = v["k"].as_str().unwrap();
        assert_eq!(fnv1a(s), h);
        // A proper pair stays a pair.
        let pair = parse_json(r#""\ud83d\ude00""#).unwrap();
        assert_eq!(pair.as_str().unwrap(), "😀");
        // A low surrogate alone too.
        let low = parse_json(r#""\udc00""#).unwrap();
        assert_eq!(stable_string(&low), r#""\udc00""#);
    }

    #[test]
    fn non_bmp_hashes_as_two_units() {
        let mut h = FNV_OFFSET;
        for u in "😀".encode_utf16() {
            h ^= u as u32;
            h = h.wrapping_mul(FNV_PRIME);
        }
        assert_eq!(fnv1a("😀"), h);
        assert_eq!(fnv1a("é"), {
            let mut h = FNV_OFFSET;
            h ^= 0xE9;
            h.wrapping_mul(FNV_PRIME)
        });
    }

    #[test]
    fn keys_sort_by_utf16_not_utf8() {
        // U+FF5E (one UTF-16 unit 0xFF5E) versus U+1F600 (units 0xD83D 0xDE00): UTF-8 puts the
        // emoji last, UTF-16 puts it first.
        let v = json!({"\u{ff5e}": 1, "😀": 2});
        assert_eq!(stable_string(&v), "{\"😀\":2,\"\u{ff5e}\":1}");
        let v = json!({"b": 1, "a": {"d": 1, "c": [3, {"z": 0, "y": 0}]}});
        assert_eq!(
            stable_string(&v),
            r#"{"a":{"c":[3,{"y":0,"z":0}],"d":1},"b":1}"#
        );
    }

    /// A text that holds the string, as written or spelled by escapes, is never passed over.
    #[test]
    fn a_string_held_is_never_missed() {
        let name = "prior-turn-evidence";
        for text in [
            r#"{"rows":[{"check":"prior-turn-evidence","checked":1}]}"#,
            r#"{"rows":[{"check":"prior\u002dturn-evidence"}]}"#,
            r#"{"kind":"\u0070rior-turn-evidence"}"#,
            r#"{"prior-turn-evidence":1}"#,
        ] {
            assert!(may_hold_string(text, name), "{text}");
            let holds = |v: &Value| v.to_string().contains(name);
            assert!(holds(&parse_json(text).unwrap()), "{text}");
        }
        assert!(!may_hold_string(
            r#"{"rows":[{"check":"unsupported-claim","checked":0}]}"#,
            name
        ));
        // An escape that spells something else still cannot be ruled out by a scan.
        assert!(may_hold_string(r#"{"check":"\n"}"#, name));
    }

    #[test]
    fn stringify_uses_property_order() {
        let v = parse_json(r#"{"b":1,"2":true,"a":null,"1":"x","01":2}"#).unwrap();
        assert_eq!(stringify(&v), r#"{"1":"x","2":true,"b":1,"a":null,"01":2}"#);
    }
}
