//! Section 4.2: which tokens of an answer are values the gate must find in the evidence.

use super::normalize::{count_digits, for_each_token, normalize_token, unsigned_number_prefix};
use super::CompiledEvidence;
use serde::Serialize;

/// Shape name of a value judged by its digits.
pub const SHAPE_NUMBER: &str = "number";
/// Shape name of a distinctive mixed token (`fc1/3`, `2024-05-01`, `ucsb-b200-m5`).
pub const SHAPE_IDENTIFIER: &str = "identifier";

/// One value an answer states: its normalised spelling and the rule that made it a value
/// (`number`, `identifier`, or the name of a declared shape).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Candidate {
    pub value: String,
    pub shape: String,
}

impl Candidate {
    fn new(value: impl Into<String>, shape: &str) -> Candidate {
        Candidate {
            value: value.into(),
            shape: shape.to_string(),
        }
    }
}

/// `^\d{1,2}/\d{1,2}$`: a small ratio such as `24/7`, read as prose.
fn is_prose_ratio(token: &str) -> bool {
    let b = token.as_bytes();
    let left = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if !(1..=2).contains(&left) || b.get(left) != Some(&b'/') {
        return false;
    }
    let right = &b[left + 1..];
    (1..=2).contains(&right.len()) && right.iter().all(u8::is_ascii_digit)
}

/// Length of the run of lower-case ASCII letters at the start of `b`.
fn letter_run(b: &[u8]) -> usize {
    b.iter().take_while(|c| c.is_ascii_lowercase()).count()
}

/// `^([-+]?\d+(?:\.\d+)?)[-/]?[a-z]{1,5}(?:/[a-z]{1,5})?$`: a number with a short unit or word
/// glued to it (`32g`, `48-port`, `41200iops`, `20/month`, `100mb/s`). Returns the number part.
///
/// The pattern has a single way to match: the number part must be the longest numeric prefix
/// (a shorter one would leave a digit or a dot where a separator or letter is needed), a
/// separator is taken when present, and each letter run must end where the letters end.
pub(crate) fn number_with_unit(token: &str) -> Option<&str> {
    let b = token.as_bytes();
    let sign = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    let digits = unsigned_number_prefix(&b[sign..]);
    if digits == 0 {
        return None;
    }
    let number_end = sign + digits;
    let mut i = number_end;
    if matches!(b.get(i), Some(b'-' | b'/')) {
        i += 1;
    }
    let unit = letter_run(&b[i..]);
    if !(1..=5).contains(&unit) {
        return None;
    }
    i += unit;
    if i < b.len() {
        if b[i] != b'/' {
            return None;
        }
        let per = letter_run(&b[i + 1..]);
        if !(1..=5).contains(&per) || i + 1 + per != b.len() {
            return None;
        }
    }
    Some(&token[..number_end])
}

/// Judge one normalised token (spec 4.2, in its order): empty or declared exempt, no value; a
/// declared shape, a value of that shape; no digit, none; a small ratio, none; a number (bare or
/// with a glued unit), a `number` value when its normalised digits reach `min_digits` and
/// nothing otherwise; else an `identifier` when it is at least 4 characters long and carries a
/// letter or one of `: _ - / .`.
///
/// "Digits" are the ASCII digits of the normalised number text, so `98304.0` counts 5 (it is
/// `98304`), `1,234.5` counts 5 and `0.001` counts 4.
pub fn classify_token(token: &str, cfg: &CompiledEvidence) -> Option<Candidate> {
    if token.is_empty() || cfg.is_declared_exempt(token) {
        return None;
    }
    if let Some(name) = cfg.shape_of(token) {
        return Some(Candidate::new(token, name));
    }
    if count_digits(token) == 0 || is_prose_ratio(token) {
        return None;
    }
    let numeric = match number_with_unit(token) {
        Some(number) => Some(normalize_token(number)),
        None if super::normalize::is_plain_number(token) => Some(token.to_string()),
        None => None,
    };
    if let Some(number) = numeric {
        return (count_digits(&number) >= cfg.min_digits)
            .then(|| Candidate::new(number, SHAPE_NUMBER));
    }
    // Length in UTF-16 units, as JavaScript measures it (tokens from `tokenize` are ASCII).
    if token.encode_utf16().count() < 4 {
        return None;
    }
    let mixed = token
        .bytes()
        .any(|b| b.is_ascii_lowercase() || matches!(b, b':' | b'_' | b'-' | b'/' | b'.'));
    mixed.then(|| Candidate::new(token, SHAPE_IDENTIFIER))
}

/// The values an answer states (spec 4.2): its tokens judged one by one, at most
/// `max_answer_tokens` tokens read, each value kept once, in the order first seen. De-duplication
/// is by value alone, so `41,200` then `41200iops` is one value.
///
/// Declared exemptions (`exempt_values`, `exempt_patterns`) are applied here and such tokens are
/// never values. Values the run itself supplied (user and system text) are still returned: the
/// reading skips them, and the gate's recorded `candidates` count includes them.
pub fn answer_values(answer: &str, cfg: &CompiledEvidence) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::new();
    let mut seen = hashbrown::HashSet::new();
    let mut budget = cfg.max_answer_tokens;
    for_each_token(answer, |token| {
        if budget == 0 {
            return false;
        }
        budget -= 1;
        if let Some(c) = classify_token(token, cfg) {
            if seen.insert(c.value.clone()) {
                out.push(c);
            }
        }
        true
    });
    out
}

/// [`answer_values`] from the answer's [`digest_text`](super::digest_text) digest, without its
/// text; `None` when the digest cannot stand for the text. It can unless a declared shape may
/// make a token without a digit a value (the digest keeps only tokens with one), or the answer
/// has more tokens than `max_answer_tokens` (the digest does not say which of its forms lie
/// within the tokens read). Every token of the answer without a digit is then no value, and
/// the digest's forms are the others, in order: judged one by one they give the same values.
pub fn answer_values_from_digest(
    digest: &crate::model::digest::EvidenceDigest,
    cfg: &CompiledEvidence,
) -> Option<Vec<Candidate>> {
    if cfg.has_shapes() || digest.offered as usize > cfg.max_answer_tokens {
        return None;
    }
    let mut out: Vec<Candidate> = Vec::new();
    let mut seen = hashbrown::HashSet::new();
    for token in digest.listed() {
        if let Some(c) = classify_token(token, cfg) {
            if seen.insert(c.value.clone()) {
                out.push(c);
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{digest_text, EvidenceConfig, ShapeDecl};
    use regex::Regex;

    const ANSWERS: &[&str] = &[
        "Array SHPMAXDLVAP001 holds 41,200 GB (41200iops peak) on fc1/3; see 2024-05-01.",
        "Your order #A-1042 totals $1,250.00, paid 24/7 support, 0x5F2A91 and 5f2a91.",
        "Nothing numeric here at all.",
        "",
        "1234 1234 12345 -98304.0 +7 0.001 3.14159 1e21 48-port 100mb/s 20/month",
        "caf\u{e9} 99 r\u{e9}sum\u{e9}-2024 \u{1F600} 123456789012345678901234567890",
        "tokens, with, commas,1,2 and 1,234,567.80 and ,,, 12,34,56",
    ];

    /// The values from an answer's digest are its text's, under every configuration the
    /// digest can stand for; under the others it declines.
    #[test]
    fn values_from_a_digest_are_the_texts() {
        let configs = [
            EvidenceConfig::default(),
            EvidenceConfig {
                min_digits: 1,
                ..EvidenceConfig::default()
            },
            EvidenceConfig {
                min_digits: 6,
                exempt_values: vec!["41200".into(), "0x5f2a91".into()],
                exempt_patterns: vec!["20[0-9]{2}-.*".into()],
                ..EvidenceConfig::default()
            },
            EvidenceConfig {
                max_answer_tokens: 12,
                ..EvidenceConfig::default()
            },
        ];
        let mut compared = 0;
        for cfg in &configs {
            let cfg = cfg.compile().unwrap();
            for answer in ANSWERS {
                let digest = digest_text(answer);
                match answer_values_from_digest(&digest, &cfg) {
                    Some(values) => {
                        assert_eq!(values, answer_values(answer, &cfg), "{answer:?}");
                        compared += 1;
                    }
                    None => assert!(
                        digest.offered as usize > cfg.max_answer_tokens,
                        "declined only past the token ceiling: {answer:?}"
                    ),
                }
            }
        }
        assert!(compared > 20, "{compared}");
        // A declared shape can make a token without a digit a value: the digest declines.
        let shaped = EvidenceConfig {
            shapes: vec![ShapeDecl {
                name: "site".into(),
                pattern: "[a-z]{4}".into(),
            }],
            ..EvidenceConfig::default()
        }
        .compile()
        .unwrap();
        assert_eq!(
            answer_values_from_digest(&digest_text("site abcd"), &shaped),
            None
        );
    }

    #[test]
    fn unit_scanner_agrees_with_the_spec_pattern() {
        let re =
            Regex::new(r"^([-+]?[0-9]+(?:\.[0-9]+)?)[-/]?[a-z]{1,5}(?:/[a-z]{1,5})?$").unwrap();
        let ratio = Regex::new(r"^[0-9]{1,2}/[0-9]{1,2}$").unwrap();
        let alphabet = b"1a-/.+";
        let mut layer = vec![String::new()];
        let mut checked = 0;
        for _ in 0..7 {
            let mut next = Vec::new();
            for s in &layer {
                for &c in alphabet {
                    let mut t = s.clone();
                    t.push(c as char);
                    let want = re
                        .captures(&t)
                        .map(|m| m.get(1).unwrap().as_str().to_string());
                    assert_eq!(number_with_unit(&t).map(str::to_string), want, "{t:?}");
                    assert_eq!(is_prose_ratio(&t), ratio.is_match(&t), "{t:?}");
                    checked += 1;
                    next.push(t);
                }
            }
            layer = next;
        }
        for t in [
            "41200iops",
            "20/month",
            "100mb/s",
            "32g",
            "48-port",
            "1.5abcdef",
            "12/34",
            "123/4",
        ] {
            let want = re
                .captures(t)
                .map(|m| m.get(1).unwrap().as_str().to_string());
            assert_eq!(number_with_unit(t).map(str::to_string), want, "{t:?}");
            assert_eq!(is_prose_ratio(t), ratio.is_match(t), "{t:?}");
        }
        assert!(checked > 300_000);
    }
}
