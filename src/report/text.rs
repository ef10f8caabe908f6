//! Recorded text is untrusted: it can be megabytes long, carry terminal escape sequences,
//! bidirectional overrides or markup. Everything a report shows passes through here: bounded
//! previews that say how much they cut, and one escaper per output medium (terminal, Markdown,
//! HTML).

use serde::Serialize;

/// A bounded piece of recorded text: the first characters, and how many were cut.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Preview {
    /// The kept prefix, as recorded (escaping happens when it is rendered).
    pub text: String,
    /// Characters of the recorded text that were left out.
    pub cut_chars: usize,
}

impl Preview {
    /// The first `max` characters of `s`.
    pub fn of(s: &str, max: usize) -> Preview {
        match s.char_indices().nth(max) {
            None => Preview {
                text: s.to_string(),
                cut_chars: 0,
            },
            Some((at, _)) => Preview {
                text: s[..at].to_string(),
                cut_chars: s[at..].chars().count(),
            },
        }
    }

    /// One terminal line: control characters shown as escapes, the cut said in words.
    pub fn terminal(&self) -> String {
        let mut out = terminal(&self.text);
        if self.cut_chars > 0 {
            out.push_str(&format!("… (cut {} chars)", self.cut_chars));
        }
        out
    }
}

pub use crate::terminal::terminal;

/// `terminal(s)` cut to `max` characters with the cut said in words.
pub fn bounded(s: &str, max: usize) -> String {
    Preview::of(s, max).terminal()
}

/// Cut `s` to `width` display characters for a fixed-width column, ending in `…` when cut.
pub fn fit(s: &str, width: usize) -> String {
    let clean = terminal(s);
    if clean.chars().count() <= width {
        clean
    } else {
        let mut out: String = clean.chars().take(width.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Recorded text as a Markdown code span, safe inside a table cell: backticks become `'`,
/// pipes are escaped, controls shown as escapes, and the text is bounded to `max` characters.
pub fn md_code(s: &str, max: usize) -> String {
    let p = Preview::of(s, max);
    let body: String = terminal(&p.text).replace('`', "'").replace('|', "\\|");
    let mut out = format!("`{body}`");
    if p.cut_chars > 0 {
        out.push_str(&format!("… (cut {} chars)", p.cut_chars));
    }
    out
}

/// Text of our own that may contain recorded fragments (messages, reasons) for Markdown prose:
/// markup characters are escaped so nothing renders as HTML, a link or a table break.
pub fn md_text(s: &str, max: usize) -> String {
    let p = Preview::of(s, max);
    let mut out = String::new();
    for c in terminal(&p.text).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '#' | '~' | '!' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    if p.cut_chars > 0 {
        out.push_str(&format!("… (cut {} chars)", p.cut_chars));
    }
    out
}

/// Text escaped for HTML element content and attribute values. Control characters are shown
/// as escapes as on the terminal, so they cannot confuse a parser either.
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in terminal(s).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `html(s)` bounded to `max` characters.
pub fn html_bounded(s: &str, max: usize) -> String {
    let p = Preview::of(s, max);
    let mut out = html(&p.text);
    if p.cut_chars > 0 {
        out.push_str(&format!("… (cut {} chars)", p.cut_chars));
    }
    out
}

/// `terminal(s)` bounded to `max` characters and wrapped at spaces into lines of at most
/// `width` characters, the first starting with `first`, the rest with `rest`.
pub fn wrap(s: &str, max: usize, width: usize, first: &str, rest: &str) -> String {
    let mut out = String::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in bounded(s, max).split(' ') {
        let len = line.chars().count();
        if !empty && len + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line = rest.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(&fit(word, width - rest.chars().count()));
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// A rate as a percentage with one decimal, `-` when there is nothing to divide by.
pub fn pct(rate: Option<f64>) -> String {
    rate.map(|r| format!("{:.1}", r * 100.0))
        .unwrap_or_else(|| "-".into())
}

/// A 95% interval as `[lo, hi]` in percent.
pub fn interval(ci: Option<(f64, f64)>) -> String {
    ci.map(|(lo, hi)| format!("[{:.1}, {:.1}]", lo * 100.0, hi * 100.0))
        .unwrap_or_else(|| "-".into())
}

/// Milliseconds for people.
pub fn duration(ms: Option<f64>) -> String {
    match ms {
        None => "-".into(),
        Some(ms) if ms < 10.0 => format!("{ms:.1} ms"),
        Some(ms) if ms < 1000.0 => format!("{ms:.0} ms"),
        Some(ms) if ms < 120_000.0 => format!("{:.1} s", ms / 1000.0),
        Some(ms) => format!("{:.1} min", ms / 60_000.0),
    }
}

/// `s` without trailing spaces on any line.
pub fn trim_lines(s: &str) -> String {
    let mut out: String = s
        .lines()
        .map(|l| l.trim_end())
        .collect::<Vec<_>>()
        .join("\n");
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_say_what_they_cut() {
        let p = Preview::of("abcdef", 4);
        assert_eq!(p.text, "abcd");
        assert_eq!(p.cut_chars, 2);
        assert_eq!(p.terminal(), "abcd… (cut 2 chars)");
        assert_eq!(Preview::of("héllo", 10).cut_chars, 0);
        assert_eq!(Preview::of("ééé", 1).text, "é");
    }

    #[test]
    fn terminal_text_cannot_drive_the_terminal() {
        let t = terminal("a\u{1b}[31mred\u{7}\nnext\u{202e}x");
        assert!(!t.chars().any(|c| c.is_control()));
        assert_eq!(t, "a\\u{1b}[31mred\\u{7}⏎next\\u{202e}x");
    }

    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            html("<script>alert('x')</script>&"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;"
        );
        assert_eq!(md_code("a|b`c", 10), "`a\\|b'c`");
        assert_eq!(md_text("<b>*x*</b>", 20), "&lt;b&gt;\\*x\\*&lt;/b&gt;");
    }

    #[test]
    fn wrap_keeps_lines_short() {
        let w = wrap("aaa bbb ccc ddd", 100, 9, "- ", "  ");
        assert_eq!(w, "- aaa bbb\n  ccc ddd\n");
        assert!(wrap(&"x".repeat(50), 100, 10, "", "")
            .lines()
            .all(|l| l.chars().count() <= 10));
    }

    #[test]
    fn fit_cuts_to_width() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
    }
}
