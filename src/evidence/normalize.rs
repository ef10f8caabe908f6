//! Section 4.1: how one raw token becomes the form both sides of the comparison use, and how a
//! text is cut into such forms.
//!
//! Everything here is hand-written character scanning rather than regular expressions: the
//! patterns of the spec are small and anchored, and the tests at the bottom of this file check
//! each scanner against the equivalent `regex` pattern over generated inputs.

use crate::js;

/// Numbers with more digits than this are kept as written: a double cannot hold them exactly,
/// and a long serial is a value to compare as text, not a quantity.
const MAX_CANONICAL_DIGITS: usize = 15;

/// White space as JavaScript's `String.prototype.trim` sees it (the `WhiteSpace` and
/// `LineTerminator` productions). Unlike Rust's `char::is_whitespace` it includes U+FEFF and
/// leaves out U+0085.
pub fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\u{09}'..='\u{0D}'
            | ' '
            | '\u{A0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200A}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202F}'
            | '\u{205F}'
            | '\u{3000}'
            | '\u{FEFF}'
    )
}

/// `String.prototype.trim`.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_space)
}

/// Characters removed from the front of a token, as a run.
fn is_leading_decoration(c: char) -> bool {
    matches!(
        c,
        '$' | '#' | '@' | '+' | '\'' | '"' | '`' | '(' | '[' | '{' | '<'
    )
}

/// Characters removed from the end of a token, as a run.
fn is_trailing_decoration(c: char) -> bool {
    matches!(
        c,
        '.' | ',' | ';' | ':' | '!' | '?' | '%' | '\'' | '"' | '`' | ')' | ']' | '}' | '>'
    )
}

/// Is `text` one token as it stands: nothing but token characters, and no comma to cut at?
/// Its only token is then `text` itself, normalised.
pub(crate) fn is_single_token(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| is_token_byte(b) && b != b',')
}

/// What a byte is to the tokeniser, by value: [`SEPARATOR`], [`LETTER`], [`DIGIT`] or [`PUNCT`].
/// The tokeniser reads every byte of every text a check digests, so a byte's class is one load;
/// the classes are bits, so a piece's classes or'ed say what kinds of byte it holds.
const BYTE_CLASS: [u8; 256] = {
    let mut class = [SEPARATOR; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphabetic() {
            class[b] = LETTER;
        } else if c.is_ascii_digit() {
            class[b] = DIGIT;
        } else if matches!(
            c,
            b':' | b'_' | b'-' | b'/' | b'.' | b',' | b'%' | b'+' | b'@' | b'#' | b'$'
        ) {
            class[b] = PUNCT;
        }
        b += 1;
    }
    class
};
/// A byte that separates tokens.
const SEPARATOR: u8 = 0;
/// An ASCII letter.
const LETTER: u8 = 1;
/// A token byte that is not a letter or digit (`:_-/.,%+@#$`).
const PUNCT: u8 = 2;
/// An ASCII digit.
const DIGIT: u8 = 4;

/// Characters a token may contain; every other character separates tokens.
pub(crate) fn is_token_byte(b: u8) -> bool {
    BYTE_CLASS[b as usize] != SEPARATOR
}

/// How many ASCII digits `s` holds.
pub fn count_digits(s: &str) -> usize {
    s.bytes().filter(u8::is_ascii_digit).count()
}

/// Length of the run of ASCII digits at the start of `b`.
fn digit_run(b: &[u8]) -> usize {
    b.iter().take_while(|c| c.is_ascii_digit()).count()
}

/// Length of the longest prefix of `b` of the form `\d+(\.\d+)?`, or 0 when `b` does not start
/// with a digit. A dot not followed by a digit is left out of the prefix.
pub(crate) fn unsigned_number_prefix(b: &[u8]) -> usize {
    let int = digit_run(b);
    if int == 0 {
        return 0;
    }
    if b.get(int) == Some(&b'.') {
        let frac = digit_run(&b[int + 1..]);
        if frac > 0 {
            return int + 1 + frac;
        }
    }
    int
}

/// `^[-+]?\d+(\.\d+)?$`: an optionally signed plain decimal.
pub fn is_plain_number(s: &str) -> bool {
    let b = s.as_bytes();
    let body = match b.first() {
        Some(b'-' | b'+') => &b[1..],
        _ => b,
    };
    let n = unsigned_number_prefix(body);
    n > 0 && n == body.len()
}

/// `^-?\d{1,3}(,\d{3})+(\.\d+)?$`: a number written with thousands separators.
fn is_thousands_form(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    let lead = digit_run(&b[i..]);
    if !(1..=3).contains(&lead) {
        return false;
    }
    i += lead;
    let mut groups = 0;
    while b.get(i) == Some(&b',') {
        if digit_run(&b[i + 1..]) != 3 {
            return false;
        }
        i += 4;
        groups += 1;
    }
    if groups == 0 {
        return false;
    }
    if i == b.len() {
        return true;
    }
    b[i] == b'.' && {
        let frac = digit_run(&b[i + 1..]);
        frac > 0 && i + 1 + frac == b.len()
    }
}

/// Reduce one raw token to its comparison form (spec 4.1). The result is empty when the token
/// was nothing but decoration; callers drop empty forms.
///
/// Steps, in the framework's order: lower-case; trim; drop the leading run of decoration
/// characters, then the trailing run (each side once, as a run, so `"($5)."` gives `5`);
/// remove the commas of a thousands-separated number; and rewrite a plain decimal of at most
/// 15 digits as JavaScript prints the double it denotes. A leading `+` is decoration, so `+5`
/// is already `5` before the number rule sees it; `-0` reaches the number rule and prints as
/// `0`. No second trim follows the stripping: a JSON string leaf such as `"( a )"` keeps its
/// inner spaces (` a `).
pub fn normalize_token(raw: &str) -> String {
    let mut out = String::new();
    normalize_into(raw, &mut out);
    out
}

/// [`normalize_token`] into a buffer the caller reuses (cleared first).
pub fn normalize_into(raw: &str, out: &mut String) {
    normalize_known(raw, is_alnum(raw), out);
}

/// Is `raw` a non-empty run of ASCII letters and digits?
fn is_alnum(raw: &str) -> bool {
    !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// [`normalize_into`] of a token for which the caller knows [`is_alnum`] (`alnum`).
fn normalize_known(raw: &str, alnum: bool, out: &mut String) {
    out.clear();
    // Most tokens are plain words and identifiers: ASCII letters and digits, nothing to trim or
    // strip. They only need lower-casing, unless all digits, where the number rule may apply
    // (leading zeros, more than 15 digits): those take the full path.
    if alnum {
        let b = raw.as_bytes();
        let canonical_number = b.len() <= MAX_CANONICAL_DIGITS && (b.len() == 1 || b[0] != b'0');
        if canonical_number || !b.iter().all(u8::is_ascii_digit) {
            out.push_str(raw);
            out.make_ascii_lowercase();
            return;
        }
    }
    normalize_slow(raw, out);
}

fn normalize_slow(raw: &str, out: &mut String) {
    let mut strip = |s: &str| {
        let core = js_trim(s)
            .trim_start_matches(is_leading_decoration)
            .trim_end_matches(is_trailing_decoration);
        if is_thousands_form(core) {
            out.extend(core.chars().filter(|&c| c != ','));
        } else {
            out.push_str(core);
        }
    };
    // For ASCII text, lower-casing commutes with trimming and stripping (it touches neither
    // white space nor decoration), so lower-case only the part that is kept.
    if raw.is_ascii() {
        strip(raw);
        out.make_ascii_lowercase();
    } else {
        strip(&raw.to_lowercase());
    }
    if out.is_empty() {
        return;
    }
    if is_plain_number(out) && count_digits(out) <= MAX_CANONICAL_DIGITS {
        // Rust's float parser accepts the sign and leading zeros and rounds to nearest, as
        // JavaScript's Number() does for this grammar.
        if let Ok(n) = out.parse::<f64>() {
            if n.is_finite() {
                out.clear();
                js::write_number(out, n);
            }
        }
    }
}

/// Call `f` with every normalised, non-empty token of `text`, in order, until it returns
/// `false`. Tokens are ASCII by construction: every non-ASCII character is a separator.
///
/// Cutting rules (spec 4.1): any character outside `[A-Za-z0-9:_\-/.,%+@#$]` separates; inside
/// a piece, a comma splits unless it has a digit on both sides (`41,200` stays whole,
/// `fc1/3,fc1/4` and `done,` split).
pub fn for_each_token(text: &str, mut f: impl FnMut(&str) -> bool) {
    scan_tokens::<false>(text, |token| f(token.expect("every token is normalised")));
}

/// [`for_each_token`] for a caller that keeps only the forms holding a digit: a token without a
/// digit (a word) comes as `None`, its form not made, since nothing in normalising adds a
/// digit. The tokens that come, made or not, are the ones [`for_each_token`] gives (a word
/// whose form would be empty does not come), in the same order.
pub fn for_each_token_or_word(text: &str, f: impl FnMut(Option<&str>) -> bool) {
    scan_tokens::<true>(text, f);
}

/// Is `raw` an ASCII text without a digit whose form is not empty? Its form then holds no digit
/// either (normalising adds none), and is not needed by a caller that keeps only forms with
/// one. For ASCII text, lower-casing changes no length, and the thousands and number rules
/// need digits, so the form is empty exactly when trimming and stripping leave nothing.
pub(crate) fn is_ascii_word(raw: &str) -> bool {
    raw.is_ascii()
        && !raw.bytes().any(|b| b.is_ascii_digit())
        && !js_trim(raw)
            .trim_start_matches(is_leading_decoration)
            .trim_end_matches(is_trailing_decoration)
            .is_empty()
}

/// The tokeniser of [`for_each_token`]; with `WORDS_UNMADE`, a token without a digit is handed
/// over as `None` instead of normalised.
fn scan_tokens<const WORDS_UNMADE: bool>(text: &str, mut f: impl FnMut(Option<&str>) -> bool) {
    // `alnum`: the caller saw that `part` is nothing but letters and digits.
    fn emit(
        part: &str,
        alnum: bool,
        norm: &mut String,
        f: &mut impl FnMut(Option<&str>) -> bool,
    ) -> bool {
        normalize_known(part, alnum || is_alnum(part), norm);
        norm.is_empty() || f(Some(norm))
    }
    let mut norm = String::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if BYTE_CLASS[bytes[i] as usize] == SEPARATOR {
            i += 1;
            continue;
        }
        let start = i;
        // The piece's classes, or'ed: without PUNCT there is no comma to cut at and nothing
        // to strip.
        let mut classes = 0;
        while i < bytes.len() {
            let class = BYTE_CLASS[bytes[i] as usize];
            if class == SEPARATOR {
                break;
            }
            classes |= class;
            i += 1;
        }
        if WORDS_UNMADE && classes & DIGIT == 0 {
            // No digit beside any comma, so every comma cuts; a token is a word unless
            // decoration is all it holds.
            if classes == LETTER {
                if !f(None) {
                    return;
                }
                continue;
            }
            for token in text[start..i].split(',') {
                if is_ascii_word(token) && !f(None) {
                    return;
                }
            }
            continue;
        }
        if classes & PUNCT == 0 {
            if !emit(&text[start..i], true, &mut norm, &mut f) {
                return;
            }
            continue;
        }
        // `piece` is ASCII, so byte offsets are char offsets.
        let piece = &bytes[start..i];
        let mut from = 0;
        for (k, &b) in piece.iter().enumerate() {
            if b != b',' {
                continue;
            }
            let digit_before = k > 0 && piece[k - 1].is_ascii_digit();
            let digit_after = piece.get(k + 1).is_some_and(u8::is_ascii_digit);
            if digit_before && digit_after {
                continue;
            }
            if !emit(&text[start + from..start + k], false, &mut norm, &mut f) {
                return;
            }
            from = k + 1;
        }
        if !emit(&text[start + from..i], false, &mut norm, &mut f) {
            return;
        }
    }
}

/// Every normalised, non-empty token of `text`, in order (spec 4.1).
pub fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_token(text, |t| {
        out.push(t.to_string());
        true
    });
    out
}

/// The spellings under which a normalised value is stored and looked up: the value itself, and
/// for a `0x`-prefixed value longer than the prefix also the value without it (`0xef0101` and
/// `ef0101`). Both sides expand, so either party may drop the prefix.
pub fn lookup_forms(normalized: &str) -> impl Iterator<Item = &str> {
    let bare = normalized
        .strip_prefix("0x")
        .filter(|rest| !rest.is_empty());
    std::iter::once(normalized).chain(bare)
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    #[test]
    fn spec_normalising_examples() {
        assert_eq!(normalize_token("98304.0"), "98304");
        assert_eq!(normalize_token("+5"), "5");
        assert_eq!(normalize_token("-0"), "0");
        assert_eq!(normalize_token("41,200"), "41200");
        assert_eq!(normalize_token("1,234,567.50"), "1234567.5");
        for decoration in [
            "", "  ", "$", "...", "\"'`", "([{<>}])", "+#@$", ":", ";!?%",
        ] {
            assert_eq!(normalize_token(decoration), "", "{decoration:?}");
        }
    }

    #[test]
    fn normalising_details() {
        // Case and the two decoration runs.
        assert_eq!(normalize_token("  SHPMAXDLVAP001, "), "shpmaxdlvap001");
        assert_eq!(normalize_token("($5)."), "5");
        assert_eq!(normalize_token("\"0xEF0101\""), "0xef0101");
        // A leading colon is not decoration (the JSON-answer quirk), a trailing one is.
        assert_eq!(normalize_token(":41200"), ":41200");
        assert_eq!(normalize_token("41200:"), "41200");
        // Minus is not decoration; plus is, and goes before the number rule looks.
        assert_eq!(normalize_token("-42.50"), "-42.5");
        assert_eq!(normalize_token("+0041200"), "41200");
        assert_eq!(normalize_token("-0.0"), "0");
        // Fifteen digits are canonicalised, sixteen and more are kept verbatim.
        assert_eq!(normalize_token("000000000000001"), "1");
        assert_eq!(normalize_token("9007199254740993"), "9007199254740993");
        assert_eq!(
            normalize_token("12345678901234567890"),
            "12345678901234567890"
        );
        assert_eq!(normalize_token("1,234,567,890,123,456"), "1234567890123456");
        // JavaScript's exponent form for tiny values.
        assert_eq!(normalize_token("0.0000001"), "1e-7");
        // Not a thousands form: the commas stay.
        assert_eq!(normalize_token("1234,567"), "1234,567");
        assert_eq!(normalize_token("1,23"), "1,23");
        // No trim after stripping; JavaScript white space includes U+FEFF.
        assert_eq!(normalize_token("( a )"), " a ");
        assert_eq!(normalize_token("\u{FEFF}Abc\u{3000}"), "abc");
        assert_eq!(normalize_token("\u{85}x"), "\u{85}x");
    }

    #[test]
    fn tokenising() {
        assert_eq!(
            tokenize("Port fc1/3,fc1/4 holds 41,200 GB; done, (ok)."),
            ["port", "fc1/3", "fc1/4", "holds", "41200", "gb", "done", "ok"]
        );
        assert_eq!(tokenize("a,,b 1,,2 ,5"), ["a", "b", "1", "2", "5"]);
        assert_eq!(
            tokenize("x\u{e9}y 8\u{2009}000 **bold**|cell|"),
            ["x", "y", "8", "0", "bold", "cell"]
        );
        assert_eq!(
            tokenize(r#"{"array":"SHPMAXDLVAP001","capacity_gb":41200,"healthy":true}"#),
            [
                "array",
                "shpmaxdlvap001",
                "capacity_gb",
                ":41200",
                "healthy",
                ":true"
            ]
        );
        assert!(tokenize(" \t\n.,;").is_empty());
        // Tokens of letters and digits only are lower-cased as they stand, but the number rule
        // still applies to those of digits only (leading zeros, more than 15 digits), alone
        // or cut at a comma.
        assert_eq!(
            tokenize("007 0 10 000000000000001 9007199254740993 ABC123 a,007 007,x"),
            [
                "7",
                "0",
                "10",
                "1",
                "9007199254740993",
                "abc123",
                "a",
                "7",
                "7",
                "x"
            ]
        );
    }

    #[test]
    fn normalising_a_token_twice_changes_nothing() {
        let text = "98304.0 +5 -0 41,200 1,234.50 0.0000001 :41200 $20/month 12345678901234567890 \
                    -0012 1e5 0xEF0101 v7.0.3 08:15 ($5). 1,234,567,890,123,456 -+5 +-5";
        for token in tokenize(text) {
            assert_eq!(normalize_token(&token), token);
        }
    }

    #[test]
    fn zero_x_forms() {
        assert_eq!(
            lookup_forms("0xef0101").collect::<Vec<_>>(),
            ["0xef0101", "ef0101"]
        );
        assert_eq!(lookup_forms("0x").collect::<Vec<_>>(), ["0x"]);
        assert_eq!(lookup_forms("ef0101").collect::<Vec<_>>(), ["ef0101"]);
    }

    /// Every string of length <= 6 over a small alphabet: enough to reach each branch of the
    /// scanners above.
    fn all_strings(alphabet: &[u8], max_len: usize) -> Vec<String> {
        let mut out = vec![String::new()];
        let mut layer = vec![String::new()];
        for _ in 0..max_len {
            let mut next = Vec::new();
            for s in &layer {
                for &c in alphabet {
                    let mut t = s.clone();
                    t.push(c as char);
                    next.push(t);
                }
            }
            out.extend(next.iter().cloned());
            layer = next;
        }
        out
    }

    #[test]
    fn scanners_agree_with_the_spec_patterns() {
        let plain = Regex::new(r"^[-+]?[0-9]+(\.[0-9]+)?$").unwrap();
        let thousands = Regex::new(r"^-?[0-9]{1,3}(,[0-9]{3})+(\.[0-9]+)?$").unwrap();
        for s in all_strings(b"01-+.,", 6)
            .into_iter()
            .chain(all_strings(b"1,.", 9))
        {
            assert_eq!(is_plain_number(&s), plain.is_match(&s), "plain {s:?}");
            assert_eq!(
                is_thousands_form(&s),
                thousands.is_match(&s),
                "thousands {s:?}"
            );
        }
    }
}
