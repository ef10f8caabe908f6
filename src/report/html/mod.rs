//! The HTML pages: the report ([`report`], with the runs it tells in [`story`]), the nightly
//! diff ([`diff`]) and the trend over nights ([`trend`]). Each is one self-contained file:
//! inline CSS and inline SVG charts ([`chart`]); no script, no font, no image from anywhere, and
//! a Content-Security-Policy that forbids them anyway. Every recorded string (tool names,
//! conversation and run ids, group labels, messages, previews) goes through
//! [`crate::report::text::html`] or one of its bounded forms, so recorded text cannot inject
//! markup. Element ids are the page's own (`run-3`, `f-12`), never recorded text, so every
//! in-page link names an id the page wrote.

pub mod chart;
pub mod diff;
pub mod report;
pub mod story;
pub mod trend;

pub use report::render_html;

use crate::report::text::{html, Preview};

const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:980px;color:#1d2330;padding:0 1em}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #d8dce4;padding-bottom:.2em}
h3{font-size:1em;margin:1.4em 0 .3em}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}
th,td{padding:3px 9px;border-bottom:1px solid #e6e9ef;text-align:left;vertical-align:top}
th{background:#f3f5f8;font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#f3f5f8;padding:0 3px;border-radius:3px;word-break:break-all}
table.list{width:100%;table-layout:fixed}table.list th.num{width:2.2em}table.list th.id{width:15em}
a{color:#2b5cad}a:target,tr:target,div:target{outline:2px solid #e0a526}
nav{font-size:13px;margin:.8em 0}nav a{margin-right:.9em}
.muted{color:#5b6474}.note{color:#5b6474;font-size:12.5px}
.verdict{padding:.6em 1em;border-radius:6px;margin:1em 0;font-size:15px}
.verdict.bad{background:#fbe7e6;border:1px solid #d9534f}.verdict.good{background:#e6f4ea;border:1px solid #4a9d5b}
.verdict ul{margin:.3em 0 0;padding-left:1.3em;font-size:13px}
tr.flag td{background:#fdf1f0}.flagword{color:#b3261e;font-weight:600}
section.run{border:1px solid #e0e4ea;border-radius:6px;padding:.2em 1em .8em;margin:1.2em 0}
ol.story{list-style:none;padding-left:0;margin:.5em 0}ol.story>li{margin:.35em 0;padding-left:.6em;border-left:3px solid #e0e4ea}
ol.story>li.iteration{border-left-color:#4a78c2;font-weight:600;margin-top:.8em}
ol.story>li.answer{border-left-color:#4a9d5b}ol.story>li.omitted{color:#5b6474;border-left-style:dashed}
.finding{background:#fdf6e3;border:1px solid #ecd9a0;border-radius:4px;padding:.3em .6em;margin:.3em 0}
.finding ul{margin:.2em 0;padding-left:1.3em;font-size:12.5px}
svg{display:block;margin:.5em 0 1em}svg text{font:12px system-ui,sans-serif;fill:#1d2330}
svg .axis{stroke:#c5cbd6}svg .zero{stroke:#5b6474}svg .bar{fill:#4a78c2}svg .ci{stroke:#1d2330;stroke-width:1.4}
svg .band{fill:#4a78c2;fill-opacity:.18}svg .line{stroke:#4a78c2;stroke-width:1.6;fill:none}
svg .dot{fill:#4a78c2}svg .bad{fill:#d9534f;stroke:#d9534f}svg .threshold{stroke:#d9534f;stroke-dasharray:4 3}
svg .flagband{fill:#d9534f;fill-opacity:.12}
svg .tick{fill:#5b6474;font-size:11px}
";

/// The opening of a page titled `title` (plain text of our own), up to the open `<body>`.
pub fn head(title: &str) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    o.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'\">\n",
    );
    o.push_str("<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n");
    o.push_str(&format!("<title>{}</title>\n<style>", html(title)));
    o.push_str(STYLE);
    o.push_str("</style></head><body>\n");
    o
}

/// The end of a page.
pub fn foot() -> String {
    format!(
        "<p class=\"note\">Written by traceaudit {}. This file is self-contained: it loads \
         nothing and runs no script.</p>\n</body></html>\n",
        html(env!("CARGO_PKG_VERSION"))
    )
}

/// A line of links to the page's sections: `(id, label)`.
pub fn nav(links: &[(&str, String)]) -> String {
    let mut o = String::from("<nav>");
    for (id, label) in links {
        o.push_str(&format!("<a href=\"#{id}\">{}</a>", html(label)));
    }
    o.push_str("</nav>\n");
    o
}

/// A bounded preview as HTML: the kept text escaped, the cut said in words.
pub fn preview(p: &Preview) -> String {
    let mut out = html(&p.text);
    if p.cut_chars > 0 {
        out.push_str(&format!("… (cut {} chars)", p.cut_chars));
    }
    out
}

#[cfg(test)]
pub(crate) mod testing {
    /// Recorded text that tries everything: markup, an attribute break-out, a terminal escape.
    pub const HOSTILE: &str =
        "<script>alert('x')</script><img src=x onerror=alert(1)>\"'&\u{1b}[31m";

    /// The elements the pages write.
    pub const ALLOWED: &[&str] = &[
        "!doctype", "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p",
        "table", "tr", "th", "td", "code", "ul", "ol", "li", "nav", "a", "section", "div", "span",
        "br", "strong", "svg", "line", "text", "g", "rect", "circle", "polygon", "polyline",
    ];

    /// Every element of `page` is one of `allowed`, no script or image came through, and no
    /// control character either.
    pub fn only_our_elements(page: &str, allowed: &[&str]) {
        let lower = page.to_lowercase();
        assert!(!lower.contains("<script"), "a script element got through");
        assert!(!lower.contains("<img"), "an img element got through");
        assert!(!lower.contains("\u{1b}"), "a control character got through");
        for tag in page.split('<').skip(1) {
            let name: String = tag
                .trim_start_matches('/')
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '!')
                .collect::<String>()
                .to_lowercase();
            assert!(
                allowed.contains(&name.as_str()),
                "unexpected element <{name}"
            );
        }
    }

    /// Every `href="#id"` of `page` names an `id="id"` of `page`, and no id is written twice.
    pub fn links_resolve(page: &str) {
        let ids: Vec<&str> = page
            .match_indices(" id=\"")
            .map(|(i, m)| {
                let rest = &page[i + m.len()..];
                &rest[..rest.find('"').unwrap()]
            })
            .collect();
        let unique: std::collections::BTreeSet<&str> = ids.iter().copied().collect();
        assert_eq!(unique.len(), ids.len(), "an id is written twice");
        for (i, m) in page.match_indices("href=\"#") {
            let rest = &page[i + m.len()..];
            let target = &rest[..rest.find('"').unwrap()];
            assert!(unique.contains(target), "link to #{target} has no element");
        }
    }
}
