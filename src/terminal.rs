//! Recorded text made safe for a terminal: a file name, a reason or a preview can carry escape
//! sequences, bidirectional overrides, invisible tag characters or zero-width marks that move
//! the cursor, recolour the screen or make the text read differently from what it is.

/// Is `c` a character that can move the cursor, change colours, reorder text on display, or
/// hide text (invisible formatting characters)?
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00ad}'
                | '\u{061c}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{e0000}'..='\u{e007f}'
        )
}

/// Recorded text made safe for a terminal line: newlines become `⏎`, tabs a space, every
/// other control, bidirectional, invisible or zero-width character its `\u{..}` escape.
pub fn terminal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push('⏎'),
            '\t' => out.push(' '),
            c if is_unsafe(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// `terminal(s)`, at most `max` characters of it, saying how many were cut.
pub fn line(s: &str, max: usize) -> String {
    let clean = terminal(s);
    match clean.char_indices().nth(max) {
        None => clean,
        Some((at, _)) => format!(
            "{}… (cut {} chars)",
            &clean[..at],
            clean[at..].chars().count()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invisible_and_reordering_characters_are_escaped() {
        let hostile = "a\u{1b}[2Jb\u{061c}c\u{e0041}\u{e007f}d\u{202e}e\u{180e}f";
        let safe = terminal(hostile);
        assert_eq!(
            safe,
            "a\\u{1b}[2Jb\\u{61c}c\\u{e0041}\\u{e007f}d\\u{202e}e\\u{180e}f"
        );
        assert!(safe.chars().all(|c| !is_unsafe(c)));
        // Ordinary text, accents and other scripts pass unchanged.
        assert_eq!(terminal("café مرحبا 東京"), "café مرحبا 東京");
    }

    #[test]
    fn a_line_is_bounded_and_says_so() {
        assert_eq!(line("abcdef", 3), "abc… (cut 3 chars)");
        assert_eq!(line("abc", 3), "abc");
    }
}
