//! Python's special numbers (`NaN`, `Infinity`, `-Infinity`), which Python's `json` module
//! writes and serde_json refuses: found, read as `null` in a patched copy, and errors placed back
//! where the original text has them.

use crate::error::Error;
use serde::de::DeserializeSeed;

use super::bytes::is_delimiter;

/// Parse a whole JSON document held in memory with a seed from `make`, reading Python's special
/// numbers as `null`: the value, and how many were read so. `Err` is what is wrong, in
/// serde_json's words, at the line and column of `text` where it is (a value nested too deep is
/// said so).
pub(crate) fn parse_python_lenient<S, V>(
    text: &[u8],
    make: impl Fn() -> S,
) -> crate::error::Result<(V, u64)>
where
    S: for<'de> DeserializeSeed<'de, Value = V>,
{
    let whole = |bytes: &[u8]| {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let value = make().deserialize(&mut de)?;
        de.end()?;
        Ok::<V, serde_json::Error>(value)
    };
    let err = match whole(text) {
        Ok(value) => return Ok((value, 0)),
        Err(err) => err,
    };
    // Parsed again only when it failed: Python's numbers are rare.
    let Some(patched) = Patched::new(text) else {
        return Err(Error::Malformed(crate::ingest::limits::json_error(&err)));
    };
    match whole(&patched.bytes) {
        Ok(value) => Ok((value, patched.count())),
        Err(err) => {
            let (what, index) = locate(&err, &patched.bytes);
            let what = match what.strip_prefix("recursion limit exceeded") {
                Some(rest) => format!("the value {}{rest}", crate::ingest::limits::too_deep()),
                None => what,
            };
            let Some(index) = index else {
                return Err(Error::Malformed(what));
            };
            let index = patched.original(index).min(text.len());
            let line_start = text[..index]
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1);
            Err(Error::Malformed(format!(
                "{what} at line {} column {}",
                err.line(),
                index - line_start
            )))
        }
    }
}

/// serde_json's description of an error without its position, and the index in `bytes` that
/// its line and column name (`None` when it names none).
pub(super) fn locate(err: &serde_json::Error, bytes: &[u8]) -> (String, Option<usize>) {
    let (line, column) = (err.line(), err.column());
    let mut what = err.to_string();
    if line == 0 {
        return (what, None);
    }
    let suffix = format!(" at line {line} column {column}");
    if what.ends_with(&suffix) {
        what.truncate(what.len() - suffix.len());
    }
    let line_start = if line == 1 {
        0
    } else {
        bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(line - 2)
            .map_or(bytes.len(), |(newline, _)| newline + 1)
    };
    (what, Some(line_start + column))
}

/// Whether serde_json gave up on a value nested past its recursion limit.
pub(super) fn is_too_deep(err: &serde_json::Error) -> bool {
    err.to_string().starts_with("recursion limit exceeded")
}

/// The numbers Python's `json` module writes for IEEE specials, which JSON does not have.
pub(super) const PYTHON_NUMBERS: [&[u8]; 3] = [b"NaN", b"Infinity", b"-Infinity"];

/// The length of the Python number a token is, when it is one (followed by a delimiter or by
/// nothing).
pub(super) fn python_token(token: &[u8]) -> Option<usize> {
    PYTHON_NUMBERS
        .iter()
        .find(|n| token.starts_with(n) && token.get(n.len()).is_none_or(|b| is_delimiter(*b)))
        .map(|n| n.len())
}

/// The length of the Python number that starts at `text[i]` (outside a string), when one does:
/// a token of its own, with a delimiter (or nothing) on either side, as it stands alone.
pub(super) fn python_number_at(text: &[u8], i: usize) -> Option<usize> {
    if i > 0 && !is_delimiter(text[i - 1]) {
        return None;
    }
    python_token(&text[i..])
}

/// A value's bytes with each of Python's special numbers outside its strings replaced by `null`.
pub(super) struct Patched {
    pub(super) bytes: Vec<u8>,
    /// Each replacement: where its number starts and ends in the original, and where its `null`
    /// starts in `bytes`.
    pub(super) replaced: Vec<(usize, usize, usize)>,
}

/// Where each replacement sits: its start and end in the original, its start in the copy.
type Replacements = Vec<(usize, usize, usize)>;

/// `text` with each of Python's numbers outside its strings replaced by `with(its length)`, and
/// each replacement as (start and end in `text`, start in the copy); `None` when it holds none.
pub(super) fn replace_python_numbers(
    text: &[u8],
    with: impl Fn(usize) -> &'static [u8],
) -> Option<(Vec<u8>, Replacements)> {
    let mut bytes = Vec::with_capacity(text.len() + 16);
    let mut replaced = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    let mut i = 0;
    while i < text.len() {
        let byte = text[i];
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
        } else if byte == b'"' {
            in_string = true;
        } else if let Some(len) = python_number_at(text, i) {
            replaced.push((i, i + len, bytes.len()));
            bytes.extend_from_slice(with(len));
            i += len;
            continue;
        }
        bytes.push(byte);
        i += 1;
    }
    (!replaced.is_empty()).then_some((bytes, replaced))
}

impl Patched {
    /// `None` when the value holds none of Python's numbers.
    pub(super) fn new(text: &[u8]) -> Option<Patched> {
        replace_python_numbers(text, |_| b"null")
            .map(|(bytes, replaced)| Patched { bytes, replaced })
    }

    pub(super) fn count(&self) -> u64 {
        self.replaced.len() as u64
    }

    /// The index in the original of `index` in the patched bytes.
    pub(super) fn original(&self, index: usize) -> usize {
        let mut shift = 0isize;
        for &(from, to, at) in &self.replaced {
            if index < at {
                break;
            }
            if index < at + 4 {
                // Inside the `null`: as far into the number (serde_json places some errors
                // after the byte it stopped on).
                return from + (index - at).min(to - from);
            }
            shift = to as isize - (at + 4) as isize;
        }
        index.saturating_add_signed(shift)
    }
}

/// Where serde_json's stream reader would have placed an error its slice reader found at
/// `index` of `bytes`. They agree but for two errors the slice reader places a byte earlier: a
/// control character in a skipped string (on the character rather than after it), and a number
/// out of range found once the number has ended (before the byte that ended it rather than
/// after).
pub(super) fn as_streamed(what: &str, bytes: &[u8], index: usize) -> usize {
    let control = |i: usize| bytes.get(i).is_some_and(|b| *b < 0x20);
    if what.starts_with("control character") && control(index) && !control(index.wrapping_sub(1)) {
        return index + 1;
    }
    if what == "number out of range" {
        let ended = bytes.get(index).is_some_and(|b| !b.is_ascii_digit());
        if ended && !exponent_overflows(&bytes[..index]) {
            return index + 1;
        }
    }
    index
}

/// Whether the number `text` ends with has an exponent beyond `i32`: serde_json stops on such
/// a number at the digit that overflows, not after the number.
pub(super) fn exponent_overflows(text: &[u8]) -> bool {
    let digits = text.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    let (head, exponent) = text.split_at(text.len() - digits);
    let head = head
        .strip_suffix(b"+")
        .or_else(|| head.strip_suffix(b"-"))
        .unwrap_or(head);
    if !matches!(head.last(), Some(b'e' | b'E')) {
        return false;
    }
    exponent
        .iter()
        .try_fold(0u64, |value, digit| {
            value.checked_mul(10)?.checked_add(u64::from(digit - b'0'))
        })
        .is_none_or(|value| value > i32::MAX as u64)
}
