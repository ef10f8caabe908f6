//! The nightly diff as a page: the gate's verdict at the top (each rule that fired, linking to
//! its row), the rate changes drawn with their intervals against the threshold, the finding keys
//! that appeared or vanished, and the runs present in only one corpus.

use crate::report::diff::{Diff, DiffRows, RateChange};
use crate::report::html::chart::change_chart;
use crate::report::html::{foot, head, nav};
use crate::report::table::Table;
use crate::report::text::{html, html_bounded};

fn code(s: &str, max: usize) -> String {
    format!("<code>{}</code>", html_bounded(s, max))
}

/// A key table with the count of keys it leaves out.
fn key_section(t: &Table, total: u64) -> String {
    if t.is_empty() && total == 0 {
        return "<p>None.</p>\n".into();
    }
    let mut o = t.html();
    let more = total.saturating_sub(t.rows.len() as u64);
    if more > 0 {
        o.push_str(&format!(
            "<p class=\"note\">… and {more} more (<code>--top N</code> lists more; \
             <code>--format json</code> counts them all).</p>\n"
        ));
    }
    o
}

/// The diff as one HTML document.
pub fn render_html(d: &Diff) -> String {
    let rows = DiffRows::of(d);
    let mut o = head("traceaudit diff");
    o.push_str("<h1>traceaudit diff</h1>\n");
    o.push_str(&verdict(d, &rows));
    o.push_str(&format!(
        "<p class=\"muted\">Baseline {} ({} runs, {} findings) vs candidate {} ({} runs, {} \
         findings). Runs in both: {}; only in the baseline: {}; only in the candidate: {}.</p>\n",
        code(&d.baseline.name, 80),
        d.baseline.runs,
        d.baseline.findings,
        code(&d.candidate.name, 80),
        d.candidate.runs,
        d.candidate.findings,
        d.runs.both,
        d.runs.only_baseline,
        d.runs.only_candidate
    ));
    let mut links = vec![("rates", "Rate changes".to_string())];
    if let Some((label, _)) = &rows.groups {
        links.push(("groups", format!("Per {label}")));
    }
    links.push((
        "appeared",
        format!("Keys only in the candidate ({})", d.appeared_total),
    ));
    links.push((
        "vanished",
        format!("Keys only in the baseline ({})", d.vanished_total),
    ));
    links.push(("runs", "Runs in one corpus".into()));
    o.push_str(&nav(&links));

    o.push_str("<h2 id=\"rates\">Fail rate per check</h2>\n");
    let charted: Vec<&RateChange> = d.checks.iter().collect();
    o.push_str(&change_chart(&charted, d.rules.rate_pp, |i| {
        format!("c-{}", i + 1)
    }));
    o.push_str(&rows.checks.html());
    o.push_str(&format!(
        "<p class=\"note\">fail % = checked-fail among checked runs. Dots show the change \
         (candidate minus baseline, in percentage points), whiskers its interval: {}. The dashed \
         line is the <code>rate</code> rule's threshold: a rise past it whose interval lies \
         above zero is a regression (red).</p>\n",
        html(d.interval)
    ));
    if let Some((label, groups)) = &rows.groups {
        o.push_str(&format!(
            "<h2 id=\"groups\">Per {}</h2>\n",
            html_bounded(label, 60)
        ));
        let charted: Vec<&RateChange> = d.groups.iter().collect();
        o.push_str(&change_chart(&charted, d.rules.rate_pp, |i| {
            format!("g-{}", i + 1)
        }));
        o.push_str(&groups.html());
    }
    o.push_str(&format!(
        "<h2 id=\"appeared\">Finding keys only in the candidate ({})</h2>\n",
        d.appeared_total
    ));
    o.push_str(&key_section(&rows.appeared, d.appeared_total));
    o.push_str(&format!(
        "<h2 id=\"vanished\">Finding keys only in the baseline ({})</h2>\n",
        d.vanished_total
    ));
    o.push_str(&key_section(&rows.vanished, d.vanished_total));
    o.push_str(
        "<p class=\"note\">Keys: <code>tool:argsFingerprint</code> for findings about a tool \
         call (compared across the whole corpus), the run id for other findings (compared over \
         runs in both corpora).</p>\n",
    );
    o.push_str(&runs_and_notes(d));
    o.push_str(&foot());
    o
}

/// The gate's verdict: each rule that fired, linking to what fired it. `diff::build` words the
/// rate rule's regressions first, in row order (checks, then groups), then the new-keys rule.
fn verdict(d: &Diff, rows: &DiffRows) -> String {
    if !d.is_regression() {
        return format!(
            "<div class=\"verdict good\"><strong>No regression</strong> under \
             <code>--fail-on {}</code> (exit status 0)</div>\n",
            html(&d.rules.describe())
        );
    }
    let flagged = rows.flagged_ids();
    let mut o = format!(
        "<div class=\"verdict bad\"><strong>REGRESSION</strong>: {} rule{} fired under \
         <code>--fail-on {}</code> (exit status 1)<ul>",
        d.regressions.len(),
        if d.regressions.len() == 1 { "" } else { "s" },
        html(&d.rules.describe())
    );
    for (j, text) in d.regressions.iter().enumerate() {
        let target = flagged.get(j).copied().unwrap_or("appeared");
        o.push_str(&format!(
            "<li><a href=\"#{target}\">{}</a></li>",
            html_bounded(text, 400)
        ));
    }
    o.push_str("</ul></div>\n");
    o
}

/// The runs present in one corpus only, and the notes.
fn runs_and_notes(d: &Diff) -> String {
    let mut o = String::from("<h2 id=\"runs\">Runs in only one corpus</h2>\n");
    if d.runs.only_baseline + d.runs.only_candidate == 0 {
        o.push_str("<p>None: both corpora hold the same runs.</p>\n");
    } else {
        o.push_str("<ul>\n");
        for (what, n, sample) in [
            (
                "only in the baseline",
                d.runs.only_baseline,
                &d.runs.only_baseline_sample,
            ),
            (
                "only in the candidate",
                d.runs.only_candidate,
                &d.runs.only_candidate_sample,
            ),
        ] {
            if n == 0 {
                continue;
            }
            let ids: Vec<String> = sample.iter().map(|s| code(s, 80)).collect();
            o.push_str(&format!(
                "<li>{what}: {n} ({}{})</li>\n",
                ids.join(", "),
                if n > sample.len() as u64 { ", …" } else { "" }
            ));
        }
        o.push_str("</ul>\n");
    }
    if !d.notes.is_empty() {
        o.push_str("<ul class=\"note\">\n");
        for n in &d.notes {
            o.push_str(&format!("<li>note: {}</li>\n", html_bounded(n, 400)));
        }
        o.push_str("</ul>\n");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::diff::{CorpusInfo, KeyChange, Rules, RunPresence, Side};
    use crate::report::html::testing::{links_resolve, only_our_elements, ALLOWED, HOSTILE};

    fn change(check: &str, group: &str, regression: bool) -> RateChange {
        RateChange {
            check: check.into(),
            group: group.into(),
            baseline: Side {
                checked: 100,
                fail: 2,
                rate: Some(0.02),
            },
            candidate: Side {
                checked: 100,
                fail: 12,
                rate: Some(0.12),
            },
            change: Some(0.10),
            ci_low: Some(0.03),
            ci_high: Some(0.18),
            regression,
        }
    }

    fn hostile_diff() -> Diff {
        let info = CorpusInfo {
            name: HOSTILE.into(),
            engine_version: HOSTILE.into(),
            config_hash: HOSTILE.into(),
            conversations: 1,
            runs: 100,
            findings: 3,
        };
        let key = KeyChange {
            check: HOSTILE.into(),
            key: HOSTILE.into(),
            scope: HOSTILE.into(),
            findings: 1,
            runs: 1,
            wasted_landings: Some(2),
        };
        Diff {
            baseline: info.clone(),
            candidate: info,
            by: Some(crate::report::groups::GroupBy::Model),
            rules: Rules::parse("rate=2,new-keys=1").unwrap(),
            interval: crate::report::diff::INTERVAL,
            checks: vec![change("a", "all", false), change(HOSTILE, "all", true)],
            groups: vec![change(HOSTILE, HOSTILE, true)],
            appeared: vec![key.clone()],
            vanished: vec![key],
            appeared_total: 5,
            vanished_total: 1,
            runs: RunPresence {
                both: 1,
                only_baseline: 7,
                only_candidate: 0,
                only_baseline_sample: vec![HOSTILE.into()],
                only_candidate_sample: vec![],
            },
            regressions: vec![HOSTILE.into(), HOSTILE.into(), HOSTILE.into()],
            notes: vec![HOSTILE.into()],
        }
    }

    #[test]
    fn recorded_text_cannot_inject_markup() {
        let page = render_html(&hostile_diff());
        only_our_elements(&page, ALLOWED);
        links_resolve(&page);
        assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
    }

    #[test]
    fn the_verdict_comes_first_and_links_to_what_fired() {
        let page = render_html(&hostile_diff());
        let verdict = page.find("<div class=\"verdict bad\">").expect("a verdict");
        assert!(verdict < page.find("<h2").unwrap());
        // Rate rules in row order (the second check, then the first group), then new-keys.
        let links: Vec<&str> = page[verdict..]
            .split("</div>")
            .next()
            .unwrap()
            .match_indices("<li><a href=\"#")
            .map(|(i, m)| {
                let rest = &page[verdict + i + m.len()..];
                &rest[..rest.find('"').unwrap()]
            })
            .collect();
        assert_eq!(links, ["c-2", "g-1", "appeared"]);
        assert!(page.contains("<tr id=\"c-2\" class=\"flag\">"));
        assert!(page.contains("… and 4 more"));
        let mut calm = hostile_diff();
        calm.regressions.clear();
        let page = render_html(&calm);
        assert!(page.contains("<div class=\"verdict good\"><strong>No regression</strong>"));
    }
}
