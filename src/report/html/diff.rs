//! The nightly diff as a page: the gate's verdict at the top (each rule that fired, linking to
//! its row), the rate changes drawn with their intervals against the threshold, the finding keys
//! that appeared or vanished, and the runs present in only one corpus.

use crate::report::diff::{pp_interval, Diff, KeyChange, RateChange};
use crate::report::html::chart::change_chart;
use crate::report::html::{foot, head, nav};
use crate::report::text::{html, html_bounded};

fn code(s: &str, max: usize) -> String {
    format!("<code>{}</code>", html_bounded(s, max))
}

fn side(s: &crate::report::diff::Side) -> String {
    match s.rate {
        Some(r) => format!("{:.1}% ({}/{})", r * 100.0, s.fail, s.checked),
        None => format!("- (0/{})", s.checked),
    }
}

/// A table of rate changes whose rows are `{prefix}-{i}`.
fn change_table(rows: &[RateChange], prefix: &str, group: Option<&str>) -> String {
    let mut o = String::from("<table><tr>");
    if let Some(g) = group {
        o.push_str(&format!("<th>{}</th>", html(g)));
    }
    o.push_str("<th>check</th><th class=\"n\">baseline fail %</th><th class=\"n\">candidate fail %</th><th class=\"n\">change (pp)</th><th>95% CI (pp)</th><th></th></tr>\n");
    for (i, r) in rows.iter().enumerate() {
        o.push_str(&format!(
            "<tr id=\"{prefix}-{}\"{}>",
            i + 1,
            if r.regression { " class=\"flag\"" } else { "" }
        ));
        if group.is_some() {
            o.push_str(&format!("<td>{}</td>", code(&r.group, 120)));
        }
        o.push_str(&format!(
            "<td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>\n",
            code(&r.check, 60),
            side(&r.baseline),
            side(&r.candidate),
            r.change
                .map(|d| format!("{:+.1}", d * 100.0))
                .unwrap_or_else(|| "-".into()),
            pp_interval(r.ci_low.zip(r.ci_high)),
            if r.regression {
                "<span class=\"flagword\">regression</span>"
            } else {
                ""
            }
        ));
    }
    o.push_str("</table>\n");
    o
}

fn key_table(list: &[KeyChange], total: u64) -> String {
    if list.is_empty() && total == 0 {
        return "<p>None.</p>\n".into();
    }
    let mut o = String::from("<table><tr><th>check</th><th>key</th><th>scope</th><th class=\"n\">findings</th><th class=\"n\">runs</th><th class=\"n\">wasted landings</th></tr>\n");
    for k in list {
        o.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>\n",
            code(&k.check, 60),
            code(&k.key, 160),
            html(&k.scope),
            k.findings,
            k.runs,
            k.wasted_landings
                .map(|w| w.to_string())
                .unwrap_or_else(|| "-".into())
        ));
    }
    o.push_str("</table>\n");
    let more = total.saturating_sub(list.len() as u64);
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
    let mut o = head("traceaudit diff");
    o.push_str("<h1>traceaudit diff</h1>\n");
    // The verdict. `diff::build` words the rate rule's regressions first, in row order (checks,
    // then groups), then the new-keys rule: each links to what fired it.
    let flagged: Vec<String> = d
        .checks
        .iter()
        .enumerate()
        .filter(|(_, r)| r.regression)
        .map(|(i, _)| format!("c-{}", i + 1))
        .chain(
            d.groups
                .iter()
                .enumerate()
                .filter(|(_, r)| r.regression)
                .map(|(i, _)| format!("g-{}", i + 1)),
        )
        .collect();
    if d.is_regression() {
        o.push_str(&format!(
            "<div class=\"verdict bad\"><strong>REGRESSION</strong>: {} rule{} fired under \
             <code>--fail-on {}</code> (exit status 1)<ul>",
            d.regressions.len(),
            if d.regressions.len() == 1 { "" } else { "s" },
            html(&d.rules.describe())
        ));
        for (j, text) in d.regressions.iter().enumerate() {
            let target = flagged.get(j).map(String::as_str).unwrap_or("appeared");
            o.push_str(&format!(
                "<li><a href=\"#{target}\">{}</a></li>",
                html_bounded(text, 400)
            ));
        }
        o.push_str("</ul></div>\n");
    } else {
        o.push_str(&format!(
            "<div class=\"verdict good\"><strong>No regression</strong> under \
             <code>--fail-on {}</code> (exit status 0)</div>\n",
            html(&d.rules.describe())
        ));
    }
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
    if let Some(by) = &d.by {
        links.push(("groups", format!("Per {}", by.label())));
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
    let rows: Vec<&RateChange> = d.checks.iter().collect();
    o.push_str(&change_chart(&rows, d.rules.rate_pp, |i| {
        format!("c-{}", i + 1)
    }));
    o.push_str(&change_table(&d.checks, "c", None));
    o.push_str(&format!(
        "<p class=\"note\">fail % = checked-fail among checked runs. Dots show the change \
         (candidate minus baseline, in percentage points), whiskers its interval: {}. The dashed \
         line is the <code>rate</code> rule's threshold: a rise past it whose interval lies \
         above zero is a regression (red).</p>\n",
        html(d.interval)
    ));
    if let Some(by) = &d.by {
        o.push_str(&format!(
            "<h2 id=\"groups\">Per {}</h2>\n",
            html_bounded(&by.label(), 60)
        ));
        let rows: Vec<&RateChange> = d.groups.iter().collect();
        o.push_str(&change_chart(&rows, d.rules.rate_pp, |i| {
            format!("g-{}", i + 1)
        }));
        o.push_str(&change_table(&d.groups, "g", Some(&by.label())));
    }
    o.push_str(&format!(
        "<h2 id=\"appeared\">Finding keys only in the candidate ({})</h2>\n",
        d.appeared_total
    ));
    o.push_str(&key_table(&d.appeared, d.appeared_total));
    o.push_str(&format!(
        "<h2 id=\"vanished\">Finding keys only in the baseline ({})</h2>\n",
        d.vanished_total
    ));
    o.push_str(&key_table(&d.vanished, d.vanished_total));
    o.push_str(
        "<p class=\"note\">Keys: <code>tool:argsFingerprint</code> for findings about a tool \
         call (compared across the whole corpus), the run id for other findings (compared over \
         runs in both corpora).</p>\n",
    );
    o.push_str("<h2 id=\"runs\">Runs in only one corpus</h2>\n");
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
    o.push_str(&foot());
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::diff::{CorpusInfo, Rules, RunPresence, Side};
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
