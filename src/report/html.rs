//! The HTML report: one self-contained file. Inline CSS and inline SVG charts; no script, no
//! font, no image from anywhere, and a Content-Security-Policy that forbids them anyway. Every
//! recorded string (tool names, conversation and run ids, group labels, details) goes through
//! [`html`] / [`html_bounded`], so recorded text cannot inject markup.

use crate::report::summary::{duration, label, RateRow, Report};
use crate::report::text::{fit, html, html_bounded, interval, pct};

const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:980px;color:#1d2330;padding:0 1em}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #d8dce4;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}
th,td{padding:3px 9px;border-bottom:1px solid #e6e9ef;text-align:left;vertical-align:top}
th{background:#f3f5f8;font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#f3f5f8;padding:0 3px;border-radius:3px;word-break:break-all}
.muted{color:#5b6474}.note{color:#5b6474;font-size:12.5px}
svg{display:block;margin:.5em 0 1em}svg text{font:12px system-ui,sans-serif;fill:#1d2330}
svg .axis{stroke:#c5cbd6}svg .bar{fill:#4a78c2}svg .ci{stroke:#1d2330;stroke-width:1.4}
svg .tick{fill:#5b6474;font-size:11px}
";

/// The report as one HTML document.
pub fn render_html(r: &Report) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    o.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'\">\n",
    );
    o.push_str("<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n");
    o.push_str("<title>traceaudit report</title>\n<style>");
    o.push_str(STYLE);
    o.push_str("</style></head><body>\n");
    o.push_str("<h1>traceaudit report</h1>\n");
    o.push_str(&format!(
        "<p class=\"muted\">{} runs in {} conversations, {} findings (engine {}).</p>\n",
        r.runs,
        r.conversations,
        r.findings,
        html_bounded(&r.engine_version, 20)
    ));

    o.push_str("<h2>Fail rate per check</h2>\n");
    let rows: Vec<&RateRow> = r.checks.iter().collect();
    o.push_str(&rate_chart(&rows));
    o.push_str("<table><tr><th>check</th><th class=\"n\">runs</th><th class=\"n\">pass</th><th class=\"n\">fail</th><th class=\"n\">n/a</th><th class=\"n\">unreachable</th><th class=\"n\">findings</th><th class=\"n\">fail %</th><th>95% CI</th></tr>\n");
    for c in &r.checks {
        o.push_str(&format!(
            "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>\n",
            html_bounded(&c.check, 60),
            c.runs,
            c.checked_pass,
            c.checked_fail,
            c.not_applicable,
            c.unreachable,
            c.findings,
            pct(c.fail_rate),
            interval(c.ci())
        ));
    }
    o.push_str("</table>\n<p class=\"note\">fail % = checked-fail among checked runs (pass + fail). Bars show the rate, whiskers its 95% Wilson score interval.</p>\n");

    if let Some(by) = r.by {
        for c in &r.checks {
            let rows: Vec<&RateRow> = r.groups.iter().filter(|g| g.check == c.check).collect();
            if rows.is_empty() {
                continue;
            }
            o.push_str(&format!(
                "<h2>{} per {}</h2>\n",
                html_bounded(&c.check, 60),
                by.as_str()
            ));
            o.push_str(&rate_chart(&rows));
            o.push_str(&format!(
                "<table><tr><th>{}</th><th class=\"n\">checked</th><th class=\"n\">fail</th><th class=\"n\">fail %</th><th>95% CI</th><th class=\"n\">n/a</th><th class=\"n\">unreachable</th></tr>\n",
                by.as_str()
            ));
            for g in rows {
                o.push_str(&format!(
                    "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
                    html_bounded(&g.group, 120),
                    g.checked,
                    g.checked_fail,
                    pct(g.fail_rate),
                    interval(g.ci()),
                    g.not_applicable,
                    g.unreachable
                ));
            }
            o.push_str("</table>\n");
        }
    }

    if !r.loops.is_empty() {
        o.push_str("<h2>Tools that loop most</h2>\n<p class=\"note\">repeated-call: a tool landing again in one run with identical arguments (and result). Wasted landings are the landings after the first; wasted time their tool time.</p>\n");
        o.push_str("<table><tr><th>tool</th><th class=\"n\">findings</th><th class=\"n\">runs</th><th class=\"n\">conversations</th><th class=\"n\">wasted landings</th><th class=\"n\">wasted time</th><th class=\"n\">max repeats</th></tr>\n");
        for l in &r.loops {
            let time = duration(l.wasted_ms);
            let time = if l.untimed > 0 && l.wasted_ms.is_some() {
                format!("≥{time}")
            } else {
                time
            };
            o.push_str(&format!(
                "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
                html_bounded(&l.tool, 80),
                l.findings,
                l.runs,
                l.conversations,
                l.wasted_landings,
                html(&time),
                l.max_occurrences
            ));
        }
        o.push_str("</table>\n");
    }
    if !r.stale.is_empty() {
        o.push_str("<h2>Conversations with the most stale answers</h2>\n<p class=\"note\">prior-turn-evidence: every grounded value of the answer was served by a tool in an earlier turn.</p>\n");
        o.push_str("<table><tr><th>conversation</th><th>source</th><th class=\"n\">stale answers</th><th class=\"n\">max turns back</th></tr>\n");
        for s in &r.stale {
            o.push_str(&format!(
                "<tr><td><code>{}</code></td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
                html_bounded(&s.conversation_id, 120),
                html_bounded(&s.source, 40),
                s.stale_answers,
                s.max_turns_back
            ));
        }
        o.push_str("</table>\n");
    }
    if !r.kinds.is_empty() {
        o.push_str("<h2>Findings by kind</h2>\n<table><tr><th>check</th><th>kind</th><th class=\"n\">findings</th><th class=\"n\">runs</th><th class=\"n\">advisory</th></tr>\n");
        for k in &r.kinds {
            o.push_str(&format!(
                "<tr><td><code>{}</code></td><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
                html_bounded(&k.check, 60),
                html_bounded(&k.kind, 60),
                k.findings,
                k.runs,
                k.advisory
            ));
        }
        o.push_str("</table>\n");
    }
    o.push_str("<h2>Agreement with recorded framework verdicts</h2>\n");
    if r.agreement.is_empty() {
        o.push_str("<p>No run in this corpus records the framework's own verdicts.</p>\n");
    } else {
        o.push_str("<table><tr><th>check</th><th class=\"n\">runs</th><th class=\"n\">agrees</th><th class=\"n\">differs</th><th class=\"n\">engine-only</th><th class=\"n\">recorded-only</th></tr>\n");
        for a in &r.agreement {
            o.push_str(&format!(
                "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
                html_bounded(&a.check, 60),
                a.runs,
                a.agrees,
                a.differs,
                a.engine_only,
                a.recorded_only
            ));
        }
        o.push_str("</table>\n");
        if !r.disagreements.is_empty() {
            o.push_str("<table><tr><th>status</th><th>run</th><th>key</th><th>detail</th></tr>\n");
            for d in &r.disagreements {
                o.push_str(&format!(
                    "<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td></tr>\n",
                    html_bounded(&d.status, 20),
                    html_bounded(&d.run_id, 120),
                    html_bounded(&d.key, 120),
                    html_bounded(d.detail.as_deref().unwrap_or(""), 300)
                ));
            }
            o.push_str("</table>\n");
        }
    }
    if !r.notes.is_empty() {
        o.push_str("<ul class=\"note\">\n");
        for n in &r.notes {
            o.push_str(&format!("<li>{}</li>\n", html_bounded(n, 400)));
        }
        o.push_str("</ul>\n");
    }
    o.push_str(&format!(
        "<p class=\"note\">Written by traceaudit {}. This file is self-contained: it loads \
         nothing and runs no script.</p>\n</body></html>\n",
        html(env!("CARGO_PKG_VERSION"))
    ));
    o
}

/// Most bars one chart draws; the rest are listed in the table below it.
const MAX_BARS: usize = 40;

/// A horizontal bar chart of fail rates with 95% interval whiskers, as inline SVG.
pub fn rate_chart(rows: &[&RateRow]) -> String {
    let mut rows: Vec<&RateRow> = rows.to_vec();
    let mut omitted = 0;
    if rows.len() > MAX_BARS {
        // Keep the groups with the most checked runs, shown in their original order.
        let mut by_size: Vec<usize> = (0..rows.len()).collect();
        by_size.sort_by_key(|&i| std::cmp::Reverse(rows[i].checked));
        let mut keep: Vec<usize> = by_size[..MAX_BARS].to_vec();
        keep.sort_unstable();
        omitted = rows.len() - MAX_BARS;
        rows = keep.into_iter().map(|i| rows[i]).collect();
    }
    let label_w = 240.0;
    let bar_w = 440.0;
    let row_h = 24.0;
    let top = 22.0;
    let width = 860.0;
    let max = rows
        .iter()
        .filter_map(|r| r.ci_high.or(r.fail_rate))
        .fold(0.0f64, f64::max);
    // A scale whose quarter ticks are round percentages, at least 4%.
    let scale = [0.04, 0.08, 0.2, 0.4, 0.6, 0.8, 1.0]
        .into_iter()
        .find(|s| max <= *s)
        .unwrap_or(1.0);
    let height = top + row_h * rows.len() as f64 + 10.0;
    let x = |v: f64| label_w + bar_w * (v / scale).clamp(0.0, 1.0);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"fail rate per group\">\n"
    );
    for i in 0..=4 {
        let v = scale * i as f64 / 4.0;
        let xx = x(v);
        s.push_str(&format!(
            "<line class=\"axis\" x1=\"{xx:.1}\" y1=\"{:.1}\" x2=\"{xx:.1}\" y2=\"{:.1}\"/>\
             <text class=\"tick\" x=\"{xx:.1}\" y=\"12\" text-anchor=\"middle\">{:.0}%</text>\n",
            top - 4.0,
            height - 6.0,
            v * 100.0
        ));
    }
    for (i, r) in rows.iter().enumerate() {
        let y = top + row_h * i as f64;
        let name = label(r);
        s.push_str(&format!(
            "<g><title>{}</title><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            html_bounded(name, 200),
            label_w - 8.0,
            y + 15.0,
            html(&fit(name, 30))
        ));
        if let Some(rate) = r.fail_rate {
            s.push_str(&format!(
                "<rect class=\"bar\" x=\"{label_w:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\"/>",
                y + 4.0,
                (x(rate) - label_w).max(0.5),
                row_h - 8.0
            ));
            if let Some((lo, hi)) = r.ci() {
                let cy = y + row_h / 2.0;
                s.push_str(&format!(
                    "<line class=\"ci\" x1=\"{:.1}\" y1=\"{cy:.1}\" x2=\"{:.1}\" y2=\"{cy:.1}\"/>\
                     <line class=\"ci\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\"/>\
                     <line class=\"ci\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\"/>",
                    x(lo),
                    x(hi),
                    x(lo),
                    cy - 5.0,
                    x(lo),
                    cy + 5.0,
                    x(hi),
                    cy - 5.0,
                    x(hi),
                    cy + 5.0
                ));
            }
            s.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{:.1}\">{}% ({}/{})</text>",
                label_w + bar_w + 10.0,
                y + 15.0,
                pct(Some(rate)),
                r.checked_fail,
                r.checked
            ));
        } else {
            s.push_str(&format!(
                "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\">nothing checked</text>",
                label_w + 6.0,
                y + 15.0
            ));
        }
        s.push_str("</g>\n");
    }
    s.push_str("</svg>\n");
    if omitted > 0 {
        s.push_str(&format!(
            "<p class=\"note\">The chart shows the {MAX_BARS} groups with the most checked runs; \
             {omitted} more are in the table.</p>\n"
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summary::*;

    const HOSTILE: &str = "<script>alert('x')</script><img src=x onerror=alert(1)>\"'&\u{1b}[31m";

    fn hostile_report() -> Report {
        let row = RateRow {
            check: HOSTILE.into(),
            group: HOSTILE.into(),
            runs: 3,
            checked_pass: 2,
            checked_fail: 1,
            not_applicable: 0,
            unreachable: 0,
            checked: 3,
            findings: 1,
            fail_rate: Some(1.0 / 3.0),
            ci_low: Some(0.06),
            ci_high: Some(0.79),
        };
        Report {
            engine_version: HOSTILE.into(),
            conversations: 1,
            runs: 3,
            findings: 1,
            by: Some(crate::report::groups::GroupBy::Model),
            checks: vec![row.clone()],
            groups: vec![row],
            loops: vec![LoopRow {
                tool: HOSTILE.into(),
                findings: 1,
                runs: 1,
                conversations: 1,
                wasted_landings: 2,
                wasted_ms: Some(10.0),
                untimed: 0,
                max_occurrences: 3,
            }],
            stale: vec![StaleRow {
                conversation_id: HOSTILE.into(),
                source: HOSTILE.into(),
                stale_answers: 1,
                max_turns_back: 2,
            }],
            kinds: vec![KindRow {
                check: HOSTILE.into(),
                kind: HOSTILE.into(),
                findings: 1,
                runs: 1,
                advisory: 1,
            }],
            agreement: vec![AgreementSummary {
                check: HOSTILE.into(),
                runs: 1,
                agrees: 0,
                differs: 1,
                engine_only: 0,
                recorded_only: 0,
            }],
            disagreements: vec![Disagreement {
                check: HOSTILE.into(),
                run_id: HOSTILE.into(),
                key: HOSTILE.into(),
                status: HOSTILE.into(),
                detail: Some(HOSTILE.into()),
            }],
            notes: vec![HOSTILE.into()],
        }
    }

    #[test]
    fn recorded_text_cannot_inject_markup() {
        let page = render_html(&hostile_report());
        let lower = page.to_lowercase();
        assert!(!lower.contains("<script"), "a script element got through");
        assert!(!lower.contains("<img"), "an img element got through");
        assert!(!lower.contains("\u{1b}"), "a control character got through");
        assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
        // The only elements are the ones the renderer writes.
        let allowed = [
            "!doctype", "html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "table",
            "tr", "th", "td", "code", "svg", "line", "text", "g", "rect", "ul", "li",
        ];
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

    #[test]
    fn markdown_and_terminal_escape_too() {
        let r = hostile_report();
        let md = render_markdown(&r);
        // Recorded text is either inside a code span (shown literally) or entity-escaped.
        for (i, part) in md.split('`').enumerate() {
            if i % 2 == 0 {
                assert!(!part.contains('<'), "markup outside a code span: {part}");
            }
        }
        assert!(!md.contains('\u{1b}'));
        let table = render_table(&r);
        assert!(!table.contains('\u{1b}'));
    }
}
