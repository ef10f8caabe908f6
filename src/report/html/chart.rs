//! The inline SVG charts of the pages: fail rates with their Wilson intervals (report), rate
//! changes with their Newcombe intervals against the gate's threshold (diff), and fail rates per
//! night (trend). Labels are recorded or user-given text: escaped, and cut to fit.

use crate::report::diff::RateChange;
use crate::report::summary::{label, RateRow};
use crate::report::text::{fit, html, html_bounded, pct};
use crate::report::trend::{CheckTrend, Night};

/// A scale for rates whose quarter ticks are round percentages, at least 4%.
fn rate_scale(max: f64) -> f64 {
    [0.04, 0.08, 0.2, 0.4, 0.6, 0.8, 1.0]
        .into_iter()
        .find(|s| max <= *s)
        .unwrap_or(1.0)
}

/// At most `max` of `n` rows: every row `must` keeps first, then the largest by `size`, in
/// their original order; and how many were left out.
pub fn choose(
    n: usize,
    max: usize,
    must: impl Fn(usize) -> bool,
    size: impl Fn(usize) -> u64,
) -> (Vec<usize>, usize) {
    if n <= max {
        return ((0..n).collect(), 0);
    }
    let mut by_rank: Vec<usize> = (0..n).collect();
    by_rank.sort_by_key(|&i| (!must(i), std::cmp::Reverse(size(i))));
    let mut keep: Vec<usize> = by_rank[..max].to_vec();
    keep.sort_unstable();
    (keep, n - max)
}

/// Most bars one chart draws; the rest are listed in the table below it.
const MAX_BARS: usize = 40;

/// A horizontal bar chart of fail rates with 95% interval whiskers, as inline SVG.
pub fn rate_chart(rows: &[&RateRow]) -> String {
    // Keep the groups with the most checked runs.
    let (keep, omitted) = choose(rows.len(), MAX_BARS, |_| false, |i| rows[i].checked);
    let rows: Vec<&RateRow> = keep.into_iter().map(|i| rows[i]).collect();
    let label_w = 240.0;
    let bar_w = 440.0;
    let row_h = 24.0;
    let top = 22.0;
    let width = 860.0;
    let max = rows
        .iter()
        .filter_map(|r| r.ci_high.or(r.fail_rate))
        .fold(0.0f64, f64::max);
    let scale = rate_scale(max);
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
             {omitted} more are left out of it (see the table).</p>\n"
        ));
    }
    s
}

/// A round span in percentage points for a change axis that reaches `max` either side.
fn pp_scale(max: f64) -> f64 {
    [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        .into_iter()
        .find(|s| max <= *s)
        .unwrap_or(100.0)
}

/// The diff's rate changes as inline SVG: per row the change in percentage points (a dot) with
/// its 95% Newcombe interval (a whisker) on an axis centred on zero, the `rate=PP` threshold as
/// a dashed line, and rows where the rule fired drawn in red. `anchor(i)` is the id of row `i`'s
/// line in the table below, which each row links to.
pub fn change_chart(
    rows: &[&RateChange],
    rate_pp: Option<f64>,
    anchor: impl Fn(usize) -> String,
) -> String {
    let (keep, omitted) = choose(
        rows.len(),
        MAX_BARS,
        |i| rows[i].regression,
        |i| rows[i].candidate.checked.min(rows[i].baseline.checked),
    );
    let label_w = 240.0;
    let plot_w = 400.0;
    let row_h = 24.0;
    let top = 22.0;
    let width = 860.0;
    let reach = keep
        .iter()
        .filter_map(|&i| rows[i].ci_low.zip(rows[i].ci_high))
        .map(|(lo, hi)| lo.abs().max(hi.abs()) * 100.0)
        .fold(rate_pp.unwrap_or(0.0), f64::max);
    let span = pp_scale(reach);
    let height = top + row_h * keep.len() as f64 + 10.0;
    let x = |pp: f64| label_w + plot_w * (0.5 + (pp / span).clamp(-1.0, 1.0) / 2.0);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"change of fail rate per check\">\n"
    );
    for i in 0..=4 {
        let v = span * (i as f64 / 2.0 - 1.0);
        let xx = x(v);
        s.push_str(&format!(
            "<line class=\"{}\" x1=\"{xx:.1}\" y1=\"{:.1}\" x2=\"{xx:.1}\" y2=\"{:.1}\"/>\
             <text class=\"tick\" x=\"{xx:.1}\" y=\"12\" text-anchor=\"middle\">{:+} pp</text>\n",
            if i == 2 { "zero" } else { "axis" },
            top - 4.0,
            height - 6.0,
            v
        ));
    }
    if let Some(pp) = rate_pp.filter(|pp| *pp > 0.0) {
        s.push_str(&format!(
            "<g><title>rate={pp}: a rise past this line whose interval lies above zero is a \
             regression</title><line class=\"threshold\" x1=\"{0:.1}\" y1=\"{1:.1}\" x2=\"{0:.1}\" y2=\"{2:.1}\"/></g>\n",
            x(pp),
            top - 4.0,
            height - 6.0
        ));
    }
    for (n, &i) in keep.iter().enumerate() {
        let r = rows[i];
        let y = top + row_h * n as f64;
        let cy = y + row_h / 2.0;
        let name = if r.group == crate::report::groups::ALL {
            r.check.clone()
        } else {
            format!("{} · {}", r.group, r.check)
        };
        s.push_str(&format!(
            "<a href=\"#{}\"><g><title>{}</title><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            anchor(i),
            html_bounded(&name, 200),
            label_w - 8.0,
            y + 15.0,
            html(&fit(&name, 30))
        ));
        let class = if r.regression { " bad" } else { "" };
        match (r.change, r.ci_low.zip(r.ci_high)) {
            (Some(d), Some((lo, hi))) => {
                s.push_str(&format!(
                    "<line class=\"ci{class}\" x1=\"{:.1}\" y1=\"{cy:.1}\" x2=\"{:.1}\" y2=\"{cy:.1}\"/>\
                     <line class=\"ci{class}\" x1=\"{0:.1}\" y1=\"{2:.1}\" x2=\"{0:.1}\" y2=\"{3:.1}\"/>\
                     <line class=\"ci{class}\" x1=\"{1:.1}\" y1=\"{2:.1}\" x2=\"{1:.1}\" y2=\"{3:.1}\"/>\
                     <circle class=\"dot{class}\" cx=\"{4:.1}\" cy=\"{cy:.1}\" r=\"4\"/>",
                    x(lo * 100.0),
                    x(hi * 100.0),
                    cy - 5.0,
                    cy + 5.0,
                    x(d * 100.0)
                ));
                s.push_str(&format!(
                    "<text x=\"{:.1}\" y=\"{:.1}\">{}% → {}% ({:+.1} pp){}</text>",
                    label_w + plot_w + 10.0,
                    y + 15.0,
                    pct(r.baseline.rate),
                    pct(r.candidate.rate),
                    d * 100.0,
                    if r.regression { " regression" } else { "" }
                ));
            }
            _ => s.push_str(&format!(
                "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\">not compared: nothing checked in {}</text>",
                label_w + 6.0,
                y + 15.0,
                match (r.baseline.checked, r.candidate.checked) {
                    (0, 0) => "either corpus",
                    (0, _) => "the baseline",
                    _ => "the candidate",
                }
            )),
        }
        s.push_str("</g></a>\n");
    }
    s.push_str("</svg>\n");
    if omitted > 0 {
        s.push_str(&format!(
            "<p class=\"note\">The chart shows every regression and the groups with the most runs \
             checked on both sides, {MAX_BARS} in all; {omitted} more are left out of it (see \
             the table).</p>\n"
        ));
    }
    s
}

/// Most night labels written under a trend chart; past it every k-th night is labelled.
const MAX_NIGHT_LABELS: usize = 16;

/// One check's fail rate per night as inline SVG: the rate as a line, its 95% Wilson interval
/// as a band and a whisker per night, nights the diff rules flagged as a red stripe (and the
/// check's point in red where its rate rule fired). Each night links to its row in the table
/// below (`anchor(night)`).
pub fn trend_chart(t: &CheckTrend, nights: &[Night], anchor: impl Fn(usize) -> String) -> String {
    let left = 60.0;
    let plot_w = 760.0;
    let top = 14.0;
    let plot_h = 150.0;
    let bottom = 64.0;
    let width = left + plot_w + 30.0;
    let height = top + plot_h + bottom;
    let n = t.points.len();
    let max = t
        .points
        .iter()
        .filter_map(|p| p.ci_high.or(p.rate))
        .fold(0.0f64, f64::max);
    let scale = rate_scale(max);
    // The first and last nights sit inside the plot, clear of the axis labels.
    let inset = 18.0;
    let step = if n > 1 {
        (plot_w - 2.0 * inset) / (n - 1) as f64
    } else {
        0.0
    };
    let x = |i: usize| {
        if n > 1 {
            left + inset + step * i as f64
        } else {
            left + plot_w / 2.0
        }
    };
    let y = |v: f64| top + plot_h * (1.0 - (v / scale).clamp(0.0, 1.0));
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"fail rate per night\">\n"
    );
    // Flagged nights behind everything.
    let stripe = if n > 1 { step.clamp(4.0, 40.0) } else { 40.0 };
    for (i, night) in nights.iter().enumerate().take(n) {
        if night.flagged {
            s.push_str(&format!(
                "<rect class=\"flagband\" x=\"{:.1}\" y=\"{top:.1}\" width=\"{stripe:.1}\" height=\"{plot_h:.1}\"/>\n",
                x(i) - stripe / 2.0
            ));
        }
    }
    for k in 0..=4 {
        let v = scale * k as f64 / 4.0;
        let yy = y(v);
        s.push_str(&format!(
            "<line class=\"axis\" x1=\"{left:.1}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\"/>\
             <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{:.0}%</text>\n",
            left + plot_w,
            left - 6.0,
            yy + 4.0,
            v * 100.0
        ));
    }
    // The interval band and the rate line, broken where a night checked nothing.
    let mut segment: Vec<usize> = Vec::new();
    let mut segments: Vec<Vec<usize>> = Vec::new();
    for (i, p) in t.points.iter().enumerate() {
        if p.rate.is_some() && p.ci_low.is_some() {
            segment.push(i);
        } else if !segment.is_empty() {
            segments.push(std::mem::take(&mut segment));
        }
    }
    if !segment.is_empty() {
        segments.push(segment);
    }
    for seg in &segments {
        if seg.len() > 1 {
            let upper: Vec<String> = seg
                .iter()
                .map(|&i| format!("{:.1},{:.1}", x(i), y(t.points[i].ci_high.unwrap_or(0.0))))
                .collect();
            let lower: Vec<String> = seg
                .iter()
                .rev()
                .map(|&i| format!("{:.1},{:.1}", x(i), y(t.points[i].ci_low.unwrap_or(0.0))))
                .collect();
            s.push_str(&format!(
                "<polygon class=\"band\" points=\"{} {}\"/>\n",
                upper.join(" "),
                lower.join(" ")
            ));
            let line: Vec<String> = seg
                .iter()
                .map(|&i| format!("{:.1},{:.1}", x(i), y(t.points[i].rate.unwrap_or(0.0))))
                .collect();
            s.push_str(&format!(
                "<polyline class=\"line\" points=\"{}\"/>\n",
                line.join(" ")
            ));
        }
    }
    let every = n.div_ceil(MAX_NIGHT_LABELS).max(1);
    for (i, p) in t.points.iter().enumerate() {
        let name = nights.get(i).map(|n| n.name.as_str()).unwrap_or("");
        s.push_str(&format!("<a href=\"#{}\"><g>", anchor(i)));
        match (p.rate, p.ci_low.zip(p.ci_high)) {
            (Some(rate), Some((lo, hi))) => {
                let class = if p.regression { " bad" } else { "" };
                let (px, radius) = (x(i), if p.regression { 5.0 } else { 3.5 });
                s.push_str(&format!(
                    "<title>{}: {}% [{}, {}] ({}/{}){}</title>\
                     <line class=\"ci{class}\" x1=\"{px:.1}\" y1=\"{:.1}\" x2=\"{px:.1}\" y2=\"{:.1}\"/>\
                     <circle class=\"dot{class}\" cx=\"{px:.1}\" cy=\"{:.1}\" r=\"{radius}\"/>",
                    html_bounded(name, 80),
                    pct(Some(rate)),
                    pct(Some(lo)),
                    pct(Some(hi)),
                    p.fail,
                    p.checked,
                    if p.regression { ", flagged by the rate rule" } else { "" },
                    y(hi),
                    y(lo),
                    y(rate),
                ));
            }
            _ => s.push_str(&format!(
                "<title>{}: nothing checked</title><circle class=\"axis\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\"/>",
                html_bounded(name, 80),
                x(i),
                y(0.0)
            )),
        }
        if i % every == 0 || i + 1 == n {
            let (lx, ly) = (x(i), top + plot_h + 14.0);
            s.push_str(&format!(
                "<text class=\"tick\" x=\"{lx:.1}\" y=\"{ly:.1}\" text-anchor=\"end\" \
                 transform=\"rotate(-35 {lx:.1} {ly:.1})\">{}</text>",
                html(&fit(name, 18))
            ));
        }
        s.push_str("</g></a>\n");
    }
    s.push_str("</svg>\n");
    s
}
