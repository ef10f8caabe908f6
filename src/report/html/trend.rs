//! The trend as a page: which nights the diff rules flagged (at the top, each linking to its
//! night), then per check a chart of the fail rate with its interval per night and the table
//! behind it, then the nights themselves.

use crate::report::html::chart::trend_chart;
use crate::report::html::{foot, head, nav};
use crate::report::text::{html, html_bounded};
use crate::report::trend::{Trend, TrendRows};

fn code(s: &str, max: usize) -> String {
    format!("<code>{}</code>", html_bounded(s, max))
}

/// The trend as one HTML document.
pub fn render_html(t: &Trend) -> String {
    let mut o = head("traceaudit trend");
    o.push_str("<h1>traceaudit trend</h1>\n");
    let flagged = t.flagged();
    if flagged > 0 {
        o.push_str(&format!(
            "<div class=\"verdict bad\"><strong>{flagged} of {} nights flagged</strong>: the \
             diff against the night before is a regression under <code>--fail-on {}</code><ul>",
            t.nights.len(),
            html(&t.rules.describe())
        ));
        for (i, n) in t.nights.iter().enumerate().filter(|(_, n)| n.flagged) {
            o.push_str(&format!(
                "<li><a href=\"#night-{}\">{}</a>: {}</li>",
                i + 1,
                code(&n.name, 80),
                html_bounded(&n.regressions.join("; "), 600)
            ));
        }
        o.push_str("</ul></div>\n");
    } else {
        o.push_str(&format!(
            "<div class=\"verdict good\"><strong>No night flagged</strong> among {} under \
             <code>--fail-on {}</code></div>\n",
            t.nights.len(),
            html(&t.rules.describe())
        ));
    }
    if let (Some(first), Some(last)) = (t.nights.first(), t.nights.last()) {
        o.push_str(&format!(
            "<p class=\"muted\">{} nights, from {} to {}, {} checks.</p>\n",
            t.nights.len(),
            code(&first.name, 80),
            code(&last.name, 80),
            t.checks.len()
        ));
    }
    let mut links: Vec<(String, String)> = t
        .checks
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("check-{}", i + 1), c.check.clone()))
        .collect();
    links.push(("nights".into(), "Nights".into()));
    let links: Vec<(&str, String)> = links.iter().map(|(a, b)| (a.as_str(), b.clone())).collect();
    o.push_str(&nav(&links));

    let rows = TrendRows::of(t);
    for (ci, (c, (check, points))) in t.checks.iter().zip(&rows.checks).enumerate() {
        let k = ci + 1;
        o.push_str(&format!("<h2 id=\"check-{k}\">{}</h2>\n", code(check, 80)));
        o.push_str(&trend_chart(c, &t.nights, |n| format!("c{k}-n{}", n + 1)));
        o.push_str(
            &points.html_linking(|night, column| {
                (column == 0).then(|| format!("night-{}", night + 1))
            }),
        );
    }
    o.push_str(&format!(
        "<p class=\"note\">fail % = checked-fail among checked runs; the line is the rate, the \
         band and whiskers its {}. Change = this night minus the night before ({}). Red: the \
         diff's <code>rate</code> rule fired for this check; a shaded stripe: the night was \
         flagged by any rule.</p>\n",
        html(t.interval),
        html(t.change_interval)
    ));

    o.push_str("<h2 id=\"nights\">Nights</h2>\n");
    o.push_str("<table><tr><th>night</th><th class=\"n\">runs</th><th class=\"n\">findings</th><th>engine</th><th>config</th><th class=\"n\">keys new</th><th class=\"n\">keys gone</th><th>gate</th></tr>\n");
    for (i, n) in t.nights.iter().enumerate() {
        let gate = if i == 0 {
            "<span class=\"muted\">first night</span>".to_string()
        } else if n.flagged {
            format!(
                "<span class=\"flagword\">flagged</span>: {}",
                html_bounded(&n.regressions.join("; "), 600)
            )
        } else {
            "no regression".to_string()
        };
        let count = |c: Option<u64>| c.map(|c| c.to_string()).unwrap_or_else(|| "-".into());
        o.push_str(&format!(
            "<tr id=\"night-{}\"{}><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{gate}</td></tr>\n",
            i + 1,
            if n.flagged { " class=\"flag\"" } else { "" },
            code(&n.name, 80),
            n.runs,
            n.findings,
            html_bounded(&n.engine_version, 20),
            code(&n.config_hash.chars().take(12).collect::<String>(), 12),
            count(n.appeared_keys),
            count(n.vanished_keys),
        ));
    }
    o.push_str("</table>\n");
    let notes: Vec<String> = t
        .nights
        .iter()
        .flat_map(|n| n.notes.iter().map(move |x| format!("{}: {x}", n.name)))
        .collect();
    if !notes.is_empty() {
        o.push_str("<ul class=\"note\">\n");
        for n in &notes {
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
    use crate::report::diff::Rules;
    use crate::report::html::testing::{links_resolve, only_our_elements, ALLOWED, HOSTILE};
    use crate::report::trend::{CheckTrend, Night, Point};

    fn trend(nights: usize) -> Trend {
        let night = |i: usize| Night {
            name: format!("{HOSTILE}{i}"),
            engine_version: HOSTILE.into(),
            config_hash: HOSTILE.into(),
            runs: 10,
            findings: 1,
            flagged: i == 2,
            regressions: if i == 2 { vec![HOSTILE.into()] } else { vec![] },
            appeared_keys: (i > 0).then_some(1),
            vanished_keys: (i > 0).then_some(0),
            notes: vec![HOSTILE.into()],
        };
        let point = |i: usize| Point {
            ran: i != 1,
            checked: if i == 1 { 0 } else { 50 },
            fail: (i % 5) as u64,
            rate: (i != 1).then(|| (i % 5) as f64 / 50.0),
            ci_low: (i != 1).then_some(0.0),
            ci_high: (i != 1).then_some(0.2),
            change: None,
            change_ci_low: None,
            change_ci_high: None,
            regression: i == 2,
        };
        Trend {
            rules: Rules::parse("rate=2").unwrap(),
            interval: crate::report::stats::WILSON,
            change_interval: crate::report::diff::INTERVAL,
            nights: (0..nights).map(night).collect(),
            checks: vec![CheckTrend {
                check: HOSTILE.into(),
                points: (0..nights).map(point).collect(),
            }],
        }
    }

    #[test]
    fn recorded_text_cannot_inject_markup() {
        for n in [1, 3, 40] {
            let page = render_html(&trend(n));
            only_our_elements(&page, ALLOWED);
            links_resolve(&page);
        }
    }

    #[test]
    fn flagged_nights_are_marked() {
        let page = render_html(&trend(3));
        assert!(
            page.contains("<strong>1 of 3 nights flagged</strong>"),
            "{page}"
        );
        assert!(page.contains("<li><a href=\"#night-3\">"));
        assert_eq!(page.matches("<rect class=\"flagband\"").count(), 1);
        assert_eq!(page.matches("<circle class=\"dot bad\"").count(), 1);
        assert!(page.contains("<tr id=\"c1-n3\" class=\"flag\">"));
        assert!(page.contains("not run that night"));
        // Forty nights: every night is a point, one in three is labelled (16 labels at most).
        let page = render_html(&trend(40));
        assert_eq!(page.matches("<a href=\"#c1-n").count(), 40);
        assert!(page.matches("transform=\"rotate(-35").count() <= 17);
    }
}
