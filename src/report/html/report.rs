//! The report page: rates with their intervals, the top-findings tables, the findings listed
//! per check and kind (worst and newest first, bounded) and the runs of those findings told
//! as `explain` tells them.

use crate::report::findings::Findings;
use crate::report::html::chart::{choose, rate_chart};
use crate::report::html::story::{self, Anchors};
use crate::report::html::{foot, head, nav};
use crate::report::summary::{RateRow, Report, ReportRows, GROUP_CHECK_COLUMN, KIND_COLUMN};
use crate::report::text::html_bounded;

/// Most rows of a group table (`--by`); past it the groups with the most checked runs are kept.
const MAX_GROUP_ROWS: usize = 200;

/// The report as one HTML document; with `findings`, the findings listed per check and kind,
/// each linking to its run told below.
pub fn render_html(r: &Report, findings: Option<&Findings>) -> String {
    let rows = ReportRows::of(r);
    let mut o = head("traceaudit report");
    o.push_str("<h1>traceaudit report</h1>\n");
    o.push_str(&format!(
        "<p class=\"muted\">{} runs in {} conversations, {} findings (engine {}).</p>\n",
        r.runs,
        r.conversations,
        r.findings,
        html_bounded(&r.engine_version, 20)
    ));
    o.push_str(&nav(&sections(r, &rows, findings)));
    o.push_str("<h2 id=\"rates\">Fail rate per check</h2>\n");
    let charted: Vec<&RateRow> = r.checks.iter().collect();
    o.push_str(&rate_chart(&charted));
    o.push_str(&rows.checks.html());
    o.push_str("<p class=\"note\">fail % = checked-fail among checked runs (pass + fail). Bars show the rate, whiskers its 95% Wilson score interval.</p>\n");
    html_groups(r, &rows, &mut o);
    if !rows.loops.is_empty() {
        o.push_str("<h2 id=\"loops\">Tools that loop most</h2>\n<p class=\"note\">repeated-call: a tool landing again in one run with identical arguments (and result). Wasted landings are the landings after the first; wasted time their tool time.</p>\n");
        o.push_str(&rows.loops.html());
    }
    if !rows.stale.is_empty() {
        o.push_str("<h2 id=\"stale\">Conversations with the most stale answers</h2>\n<p class=\"note\">prior-turn-evidence: every grounded value of the answer was served by a tool in an earlier turn.</p>\n");
        o.push_str(&rows.stale.html());
    }
    html_kinds(r, &rows, findings, &mut o);
    if let Some(f) = findings {
        let anchors = Anchors::of(f);
        o.push_str(&story::listing(f, &anchors));
        o.push_str(&story::runs(f, &anchors));
    }
    o.push_str("<h2 id=\"agreement\">Agreement with recorded framework verdicts</h2>\n");
    if rows.agreement.is_empty() {
        o.push_str("<p>No run in this corpus records the framework's own verdicts.</p>\n");
    } else {
        o.push_str(&rows.agreement.html());
        if !rows.disagreements.is_empty() {
            o.push_str(&rows.disagreements.html());
        }
    }
    if !r.notes.is_empty() {
        o.push_str("<ul class=\"note\">\n");
        for n in &r.notes {
            o.push_str(&format!("<li>{}</li>\n", html_bounded(n, 400)));
        }
        o.push_str("</ul>\n");
    }
    o.push_str(&foot());
    o
}

/// The page's sections that have something to show, as `(id, label)` for its links.
fn sections(
    r: &Report,
    rows: &ReportRows,
    findings: Option<&Findings>,
) -> Vec<(&'static str, String)> {
    let mut links = vec![("rates", "Fail rates".to_string())];
    if let Some((label, _)) = rows.groups.as_ref().filter(|_| !r.groups.is_empty()) {
        links.push(("groups", format!("Per {label}")));
    }
    if !rows.loops.is_empty() {
        links.push(("loops", "Tools that loop".into()));
    }
    if !rows.stale.is_empty() {
        links.push(("stale", "Stale answers".into()));
    }
    if !rows.kinds.is_empty() {
        links.push(("kinds", "Findings by kind".into()));
    }
    if let Some(f) = findings.filter(|f| !f.groups.is_empty()) {
        links.push(("findings", "Findings".into()));
        if !f.runs.is_empty() {
            links.push(("runs", "Runs told".into()));
        }
    }
    links.push(("agreement", "Agreement".into()));
    links
}

/// The report page's rates per group (`--by`): per check a chart and a table of its groups, the
/// table bounded to the groups with the most checked runs.
fn html_groups(r: &Report, rows: &ReportRows, o: &mut String) {
    let Some((label, table)) = &rows.groups else {
        return;
    };
    let mut first = true;
    for c in &r.checks {
        let of_check: Vec<usize> = (0..r.groups.len())
            .filter(|&i| r.groups[i].check == c.check)
            .collect();
        if of_check.is_empty() {
            continue;
        }
        o.push_str(&format!(
            "<h2{}>{} per {}</h2>\n",
            if std::mem::take(&mut first) {
                " id=\"groups\""
            } else {
                ""
            },
            html_bounded(&c.check, 60),
            html_bounded(label, 60)
        ));
        let charted: Vec<&RateRow> = of_check.iter().map(|&i| &r.groups[i]).collect();
        o.push_str(&rate_chart(&charted));
        let (keep, _) = choose(
            of_check.len(),
            MAX_GROUP_ROWS,
            |_| false,
            |i| charted[i].checked,
        );
        let shown: Vec<usize> = keep.into_iter().map(|i| of_check[i]).collect();
        o.push_str(&table.subset(&shown, &[GROUP_CHECK_COLUMN]).html());
        if shown.len() < of_check.len() {
            o.push_str(&format!(
                "<p class=\"note\">The table lists the {} groups with the most checked runs; \
                 {} more are left out (the JSON report has them all).</p>\n",
                shown.len(),
                of_check.len() - shown.len()
            ));
        }
    }
}

/// The report page's findings by kind, each kind linked to its list when the page lists it.
fn html_kinds(r: &Report, rows: &ReportRows, findings: Option<&Findings>, o: &mut String) {
    if rows.kinds.is_empty() {
        return;
    }
    o.push_str("<h2 id=\"kinds\">Findings by kind</h2>\n");
    let listed = |row: usize| {
        let k = &r.kinds[row];
        findings.and_then(|f| {
            f.groups
                .iter()
                .position(|g| g.check == k.check && g.kind == k.kind)
        })
    };
    o.push_str(&rows.kinds.html_linking(|row, column| {
        (column == KIND_COLUMN)
            .then(|| listed(row))
            .flatten()
            .map(|i| format!("kind-{}", i + 1))
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::explain::{DispositionView, Explanation, FindingView, Step, WitnessView};
    use crate::report::findings::{FindingGroup, FindingRow};
    use crate::report::html::testing::{links_resolve, only_our_elements, ALLOWED, HOSTILE};
    use crate::report::summary::*;
    use crate::report::text::Preview;

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

    fn hostile_finding(id: &str) -> FindingView {
        FindingView {
            finding_id: id.into(),
            check: HOSTILE.into(),
            kind: HOSTILE.into(),
            seam: "tool-result".into(),
            advisory: true,
            iteration: Some(1),
            message: Preview::of(HOSTILE, 1000),
            witnesses: vec![
                WitnessView {
                    subject_kind: HOSTILE.into(),
                    subject_id: HOSTILE.into(),
                    predicate: HOSTILE.into(),
                    value: Preview::of(HOSTILE, 120),
                    provenance: HOSTILE.into(),
                };
                7
            ],
        }
    }

    /// A run whose every recorded text is hostile, carrying `listed` and `extra` more findings
    /// on one landing.
    fn hostile_story(listed: &str, extra: usize) -> Explanation {
        let p = Preview::of(HOSTILE, 40);
        let mut on_call = vec![hostile_finding(listed)];
        on_call.extend((0..extra).map(|i| hostile_finding(&format!("extra-{i}"))));
        Explanation {
            run_id: HOSTILE.into(),
            conversation_id: HOSTILE.into(),
            turn: 1,
            conversation_runs: 1,
            position: 1,
            format: HOSTILE.into(),
            source: HOSTILE.into(),
            agent: Some(HOSTILE.into()),
            model: Some(HOSTILE.into()),
            started_at: Some(HOSTILE.into()),
            duration_ms: Some(3.0),
            events: 4,
            landings: 2,
            user_message: Some(p.clone()),
            steps: vec![
                Step::Iteration { iteration: 1 },
                Step::ToolCall {
                    seq: 2,
                    iteration: Some(1),
                    tool: HOSTILE.into(),
                    call_id: Some(HOSTILE.into()),
                    args_fingerprint: HOSTILE.into(),
                    arguments: p.clone(),
                    result: Some(p.clone()),
                    error: true,
                    duration_ms: Some(1.0),
                    flags: vec![HOSTILE.into()],
                    findings: on_call,
                },
                Step::Message {
                    seq: 3,
                    role: HOSTILE.into(),
                    text: p.clone(),
                },
                Step::Verdict {
                    seq: 4,
                    name: HOSTILE.into(),
                    tool: Some(HOSTILE.into()),
                },
                Step::Omitted { steps: 3 },
                Step::Answer {
                    seq: Some(5),
                    text: p.clone(),
                    findings: vec![],
                },
            ],
            unplaced: vec![hostile_finding("unplaced")],
            dispositions: vec![DispositionView {
                check: HOSTILE.into(),
                disposition: HOSTILE.into(),
                reason: HOSTILE.into(),
            }],
            not_shown: vec![(HOSTILE.into(), 2)],
            cut: vec![HOSTILE.into()],
        }
    }

    fn hostile_findings(extra: usize) -> Findings {
        let row = |id: &str| FindingRow {
            finding_id: id.into(),
            run_id: HOSTILE.into(),
            conversation_id: HOSTILE.into(),
            advisory: true,
            tool: Some(HOSTILE.into()),
            key: Some(HOSTILE.into()),
            message: Preview::of(HOSTILE, 300),
            started_at: Some(HOSTILE.into()),
            weight: Some(2),
        };
        Findings {
            groups: vec![FindingGroup {
                check: HOSTILE.into(),
                kind: HOSTILE.into(),
                total: 9,
                // One listed finding whose run is told, one whose run is not.
                shown: vec![
                    row("listed"),
                    FindingRow {
                        run_id: "not-told".into(),
                        ..row("elsewhere")
                    },
                ],
            }],
            runs: vec![hostile_story("listed", extra)],
            notes: vec![HOSTILE.into()],
            per_kind: 2,
            preview: 40,
            max_steps: 30,
        }
    }

    #[test]
    fn recorded_text_cannot_inject_markup() {
        let page = render_html(&hostile_report(), Some(&hostile_findings(2)));
        assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
        only_our_elements(&page, ALLOWED);
        links_resolve(&page);
        let bare = render_html(&hostile_report(), None);
        only_our_elements(&bare, ALLOWED);
        links_resolve(&bare);
    }

    #[test]
    fn findings_link_to_their_runs_and_back() {
        let page = render_html(&hostile_report(), Some(&hostile_findings(0)));
        links_resolve(&page);
        // The kind table links to the kind's list, the list to the run and to the finding, the
        // finding back to its row.
        assert!(page.contains("<a href=\"#kind-1\">"), "{page}");
        assert!(page.contains("<tr id=\"l-1\">"));
        assert!(page.contains("<a href=\"#run-1\">"));
        assert!(page.contains("<a href=\"#f-1\">where it fired</a>"));
        assert!(page.contains("<div class=\"finding\" id=\"f-1\">"));
        assert!(page.contains("<a href=\"#l-1\">listed</a>"));
        // The finding whose run is not told links nowhere.
        assert!(!page.contains("#f-2"));
        assert!(page.contains("… and 7 more findings of this kind"));
        // The story: iteration, landing with its fingerprint, omitted steps, dispositions.
        assert!(page.contains("<li class=\"iteration\">iteration 1</li>"));
        assert!(page.contains("<li class=\"omitted\">… 3 steps not shown</li>"));
        assert!(page.contains("… 2 more witnesses"));
    }

    #[test]
    fn a_run_section_is_bounded() {
        let page = render_html(&hostile_report(), Some(&hostile_findings(40)));
        links_resolve(&page);
        // The listed finding, then 19 of the 40 others; the rest and the unplaced one counted.
        assert_eq!(page.matches("<div class=\"finding\"").count(), 20);
        assert!(
            page.contains("22 more findings of this run not shown"),
            "{page}"
        );
    }

    #[test]
    fn group_tables_and_charts_are_bounded() {
        let mut r = hostile_report();
        let row = r.groups[0].clone();
        r.groups = (0..250)
            .map(|i| RateRow {
                group: format!("g{i:03}"),
                checked: i,
                ..row.clone()
            })
            .collect();
        let page = render_html(&r, None);
        links_resolve(&page);
        assert!(page.contains("The table lists the 200 groups with the most checked runs; 50 more"));
        assert!(page.contains("The chart shows the 40 groups with the most checked runs; 210 more"));
        // The smallest groups are the ones left out.
        assert!(page.contains("<code>g249</code>") && page.contains("<code>g050</code>"));
        assert!(!page.contains("<code>g049</code>"));
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
