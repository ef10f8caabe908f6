//! Byte-level helpers of the scanner: finding the next byte that matters a word at a time, and
//! the lengths of tokens.

/// The index of the first byte from `from` on that matters to a scan: a quote or a backslash in
/// a string, a quote, a bracket or the first letter of Python's `NaN` and `Infinity` outside
/// one. Eight bytes are looked at a time.
#[inline]
pub(super) fn find_mark(buf: &[u8], from: usize, in_string: bool) -> Option<usize> {
    let mut i = from;
    while let Some(eight) = buf.get(i..i + 8) {
        let word = u64::from_le_bytes(eight.try_into().expect("eight bytes"));
        let marks = if in_string {
            bytes_equal(word, b'"') | bytes_equal(word, b'\\')
        } else {
            // `[` and `{` differ by one bit, as do `]` and `}`.
            let folded = word | repeat(0x20);
            bytes_equal(word, b'"')
                | bytes_equal(folded, b'{')
                | bytes_equal(folded, b'}')
                | bytes_equal(word, b'N')
                | bytes_equal(word, b'I')
        };
        if marks != 0 {
            return Some(i + marks.trailing_zeros() as usize / 8);
        }
        i += 8;
    }
    buf[i..]
        .iter()
        .position(|&byte| {
            if in_string {
                byte == b'"' || byte == b'\\'
            } else {
                matches!(byte, b'"' | b'[' | b']' | b'{' | b'}' | b'N' | b'I')
            }
        })
        .map(|k| i + k)
}

/// `byte` in each byte of a word.
pub(super) const fn repeat(byte: u8) -> u64 {
    u64::from_le_bytes([byte; 8])
}

/// The high bit of each byte of `word` that equals `byte`. The lowest one marked is exact (a
/// borrow can mark bytes above a true match, never below one), which is all [`find_mark`] uses.
#[inline]
pub(super) fn bytes_equal(word: u64, byte: u8) -> u64 {
    let zero_where_equal = word ^ repeat(byte);
    zero_where_equal.wrapping_sub(repeat(0x01)) & !zero_where_equal & repeat(0x80)
}

/// JSON's blanks.
pub(super) fn is_blank(byte: u8) -> bool {
    matches!(byte, b' ' | b'\n' | b'\t' | b'\r')
}

/// A byte that cannot continue a number or a literal.
pub(super) fn is_delimiter(byte: u8) -> bool {
    is_blank(byte) || matches!(byte, b',' | b':' | b'[' | b']' | b'{' | b'}' | b'"')
}

/// How many bytes of `token` a number or literal that serde_json parsed took: the longest
/// beginning that is a JSON number (`-`, digits, fraction, exponent), or the literal.
pub(super) fn token_len(token: &[u8]) -> usize {
    let digits = |from: usize| {
        from + token[from.min(token.len())..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    match token.first() {
        Some(b'n' | b't') => 4,
        Some(b'f') => 5,
        _ => {
            let mut i = usize::from(token.first() == Some(&b'-'));
            i = if token.get(i) == Some(&b'0') {
                i + 1
            } else {
                digits(i)
            };
            if token.get(i) == Some(&b'.') {
                i = digits(i + 1);
            }
            if matches!(token.get(i), Some(b'e' | b'E')) {
                i += 1;
                if matches!(token.get(i), Some(b'+' | b'-')) {
                    i += 1;
                }
                i = digits(i);
            }
            i
        }
    }
}
