//! The findings of a report page and the runs they fired in. The listing names each finding's
//! run, tool, key and message, and links to the run's section and to the finding where it fired
//! there; a run's section tells it as `explain` does (iterations, tool landings with argument
//! fingerprints and bounded previews, the answer, each finding where it fired, dispositions).
//! Anchors are numbers the page gives (`kind-2`, `l-7`, `run-3`, `f-7`), never recorded text.

use crate::report::explain::{Explanation, FindingView, Step};
use crate::report::findings::Findings;
use crate::report::html::preview;
use crate::report::story::{advisory_note, kind_beyond_check, StoryRows};
use crate::report::text::{html, html_bounded, Preview};
use std::collections::{HashMap, HashSet};

/// Findings shown in full in one run's section; past it they are counted (listed findings are
/// always shown).
const MAX_STORY_FINDINGS: usize = 20;
/// Witnesses shown per finding.
const MAX_WITNESSES: usize = 5;

/// The page's numbers for runs and findings.
pub struct Anchors {
    /// Run id -> its section (`run-N`).
    run: HashMap<String, usize>,
    /// Finding id -> its listing row (`l-N`) and its place in the story (`f-N`).
    listed: HashMap<String, usize>,
    /// Listed findings that a told run shows.
    in_story: HashSet<String>,
}

impl Anchors {
    pub fn of(f: &Findings) -> Anchors {
        let run = f
            .runs
            .iter()
            .enumerate()
            .map(|(i, e)| (e.run_id.clone(), i + 1))
            .collect();
        let mut listed = HashMap::new();
        for (n, row) in f.groups.iter().flat_map(|g| &g.shown).enumerate() {
            listed.entry(row.finding_id.clone()).or_insert(n + 1);
        }
        let in_story = f
            .runs
            .iter()
            .flat_map(story_findings)
            .map(|v| v.finding_id.clone())
            .filter(|id| listed.contains_key(id))
            .collect();
        Anchors {
            run,
            listed,
            in_story,
        }
    }
}

/// Every finding a told run carries, in story order.
fn story_findings(e: &Explanation) -> impl Iterator<Item = &FindingView> {
    e.steps
        .iter()
        .flat_map(|s| match s {
            Step::ToolCall { findings, .. } | Step::Answer { findings, .. } => findings.as_slice(),
            _ => &[],
        })
        .chain(&e.unplaced)
}

fn code(s: &str, max: usize) -> String {
    format!("<code>{}</code>", html_bounded(s, max))
}

/// The findings section: per check and kind, the listed findings and how many more there are.
pub fn listing(f: &Findings, a: &Anchors) -> String {
    let mut o = String::new();
    if f.groups.is_empty() {
        return o;
    }
    o.push_str("<h2 id=\"findings\">Findings</h2>\n");
    o.push_str(&format!(
        "<p class=\"note\">Per check and kind, worst first: findings that contradict before \
         advisory ones, then the most wasted landings (repeated-call) or turns back \
         (prior-turn-evidence), then the newest run; at most {} of each kind. Each links to its \
         run below, told as <code>traceaudit explain</code> tells it, and to the place where it \
         fired. Key: the finding's <code>key</code> column (repeated-call: \
         <code>tool:argsFingerprint:resultFingerprint</code>).</p>\n",
        f.per_kind
    ));
    let mut n = 0;
    for (gi, g) in f.groups.iter().enumerate() {
        o.push_str(&format!(
            "<h3 id=\"kind-{}\">{} · {}: {} finding{}</h3>\n",
            gi + 1,
            code(&g.check, 60),
            code(&g.kind, 60),
            g.total,
            if g.total == 1 { "" } else { "s" }
        ));
        o.push_str("<table class=\"list\"><tr><th class=\"n num\">#</th><th class=\"id\">run, started</th><th class=\"id\">tool, key</th><th>message</th></tr>\n");
        for row in &g.shown {
            n += 1;
            let run = match a.run.get(&row.run_id) {
                Some(k) => format!("<a href=\"#run-{k}\">{}</a>", code(&row.run_id, 120)),
                None => code(&row.run_id, 120),
            };
            let fired = match a.listed.get(&row.finding_id) {
                Some(&k) if a.in_story.contains(&row.finding_id) => {
                    format!(" <a href=\"#f-{k}\">where it fired</a>")
                }
                _ => String::new(),
            };
            o.push_str(&format!(
                "<tr id=\"l-{n}\"><td class=\"n\">{n}</td><td>{run}<br><span class=\"muted\">{}</span></td><td>{}<br>{}</td><td>{}{}{fired}</td></tr>\n",
                row.started_at.as_deref().map(html).unwrap_or_else(|| "-".into()),
                row.tool.as_deref().map(|t| code(t, 80)).unwrap_or_else(|| "-".into()),
                row.key.as_deref().map(|k| code(k, 120)).unwrap_or_else(|| "-".into()),
                preview(&row.message),
                if row.advisory { " <span class=\"muted\">(advisory)</span>" } else { "" },
            ));
        }
        o.push_str("</table>\n");
        let more = g.total - g.shown.len() as u64;
        if more > 0 {
            o.push_str(&format!(
                "<p class=\"note\">… and {more} more finding{} of this kind, not listed \
                 (<code>findings.parquet</code> has them all; <code>--findings N</code> lists \
                 more).</p>\n",
                if more == 1 { "" } else { "s" }
            ));
        }
    }
    for note in &f.notes {
        o.push_str(&format!(
            "<p class=\"note\">{}</p>\n",
            html_bounded(note, 400)
        ));
    }
    o
}

/// The runs section: each told run of the listed findings.
pub fn runs(f: &Findings, a: &Anchors) -> String {
    let mut o = String::new();
    if f.runs.is_empty() {
        return o;
    }
    o.push_str("<h2 id=\"runs\">Runs of the listed findings</h2>\n");
    o.push_str(&format!(
        "<p class=\"note\">Each run as <code>traceaudit explain CORPUS RUN</code> tells it, with \
         at most {} steps (the first and last ones, and every step with a finding) and recorded \
         texts cut at {} characters; at most {MAX_STORY_FINDINGS} findings per run and \
         {MAX_WITNESSES} witnesses per finding are shown. <code>explain</code> shows more.</p>\n",
        f.max_steps, f.preview
    ));
    let mut emitted = HashSet::new();
    for (i, e) in f.runs.iter().enumerate() {
        o.push_str(&run_section(e, i + 1, a, &mut emitted));
    }
    o
}

/// What a finding block says, and how many were left out.
struct FindingBudget<'a> {
    anchors: &'a Anchors,
    /// Listed findings already given their `f-N` id.
    emitted: &'a mut HashSet<usize>,
    shown: usize,
    hidden: usize,
}

impl FindingBudget<'_> {
    fn blocks(&mut self, list: &[FindingView]) -> String {
        let mut o = String::new();
        for f in list {
            let listed = self.anchors.listed.get(&f.finding_id).copied();
            if listed.is_none() && self.shown >= MAX_STORY_FINDINGS {
                self.hidden += 1;
                continue;
            }
            self.shown += 1;
            o.push_str(&finding_block(
                f,
                listed.filter(|k| self.emitted.insert(*k)),
            ));
        }
        o
    }
}

fn finding_block(f: &FindingView, listed: Option<usize>) -> String {
    let mut o = match listed {
        Some(k) => format!("<div class=\"finding\" id=\"f-{k}\">"),
        None => "<div class=\"finding\">".to_string(),
    };
    let name = match kind_beyond_check(f) {
        None => code(&f.check, 60),
        Some(kind) => format!("{} {}", code(&f.check, 60), code(kind, 60)),
    };
    o.push_str(&format!(
        "▲ {name}{}: {}",
        advisory_note(f),
        preview(&f.message)
    ));
    if let Some(k) = listed {
        o.push_str(&format!(" <a href=\"#l-{k}\">listed</a>"));
    }
    o.push_str(&format!(
        "<br><span class=\"muted\">finding {}</span>",
        code(&f.finding_id, 40)
    ));
    if !f.witnesses.is_empty() {
        o.push_str("<ul>");
        for w in f.witnesses.iter().take(MAX_WITNESSES) {
            o.push_str(&format!(
                "<li>witness {} {} {} = {} <span class=\"muted\">[{}]</span></li>",
                html_bounded(&w.subject_kind, 30),
                code(&w.subject_id, 60),
                html_bounded(&w.predicate, 40),
                format_args!("<code>{}</code>", preview(&w.value)),
                html_bounded(&w.provenance, 120)
            ));
        }
        if f.witnesses.len() > MAX_WITNESSES {
            o.push_str(&format!(
                "<li class=\"muted\">… {} more witnesses</li>",
                f.witnesses.len() - MAX_WITNESSES
            ));
        }
        o.push_str("</ul>");
    }
    o.push_str("</div>\n");
    o
}

fn text_line(p: &Preview) -> String {
    format!("<code>{}</code>", preview(p))
}

/// One run told: `run-K`.
fn run_section(e: &Explanation, k: usize, a: &Anchors, emitted: &mut HashSet<usize>) -> String {
    let rows = StoryRows::of(e);
    let mut o = format!("<section class=\"run\" id=\"run-{k}\">\n");
    o.push_str(&format!("<h3>run {}</h3>\n", code(&e.run_id, 120)));
    o.push_str(&format!(
        "<p class=\"muted\">conversation {}, turn {} (run {} of {} in the conversation) · {} from \
         {}<br>agent {} · model {} · started {} · took {} · {} events, {} tool landings</p>\n",
        code(&e.conversation_id, 120),
        e.turn,
        e.position,
        e.conversation_runs,
        html_bounded(&e.format, 40),
        code(&e.source, 160),
        e.agent
            .as_deref()
            .map(|s| code(s, 60))
            .unwrap_or_else(|| "-".into()),
        e.model
            .as_deref()
            .map(|s| code(s, 60))
            .unwrap_or_else(|| "-".into()),
        e.started_at
            .as_deref()
            .map(html)
            .unwrap_or_else(|| "-".into()),
        html(&rows.took),
        e.events,
        e.landings
    ));
    if let Some(u) = &e.user_message {
        o.push_str(&format!("<p>user: {}</p>\n", text_line(u)));
    }
    let mut budget = FindingBudget {
        anchors: a,
        emitted,
        shown: 0,
        hidden: 0,
    };
    o.push_str("<ol class=\"story\">\n");
    for (s, facts) in e.steps.iter().zip(&rows.facts) {
        o.push_str(&step_item(s, facts, &mut budget));
    }
    o.push_str("</ol>\n");
    if !e.unplaced.is_empty() {
        o.push_str("<p>Findings not tied to an event of the run:</p>\n");
        o.push_str(&budget.blocks(&e.unplaced));
    }
    if budget.hidden > 0 {
        o.push_str(&format!(
            "<p class=\"note\">{} more finding{} of this run not shown here \
             (<code>explain</code> shows them all).</p>\n",
            budget.hidden,
            if budget.hidden == 1 { "" } else { "s" }
        ));
    }
    if !rows.dispositions.is_empty() {
        o.push_str(&rows.dispositions.html());
    }
    for t in rows.not_told.iter().chain(&rows.cut) {
        o.push_str(&format!("<p class=\"note\">{}</p>\n", html_bounded(t, 400)));
    }
    o.push_str("</section>\n");
    o
}

/// One step of a run's story as a list item, `facts` its facts line, its findings' blocks
/// within the page's budget.
fn step_item(s: &Step, facts: &str, budget: &mut FindingBudget<'_>) -> String {
    let mut o = String::new();
    match s {
        Step::Iteration { iteration } => o.push_str(&format!(
            "<li class=\"iteration\">iteration {iteration}</li>\n"
        )),
        Step::ToolCall {
            seq,
            tool,
            call_id,
            args_fingerprint,
            arguments,
            result,
            findings,
            ..
        } => {
            o.push_str(&format!(
                "<li><span class=\"muted\">#{seq}</span> tool {} · args fp {}{}<br>args {}<br>result {}",
                code(tool, 80),
                code(args_fingerprint, 20),
                call_id
                    .as_deref()
                    .map(|c| format!(" · call {}", code(c, 60)))
                    .unwrap_or_default(),
                text_line(arguments),
                result
                    .as_ref()
                    .map(text_line)
                    .unwrap_or_else(|| "<span class=\"muted\">(none recorded)</span>".into())
            ));
            if !facts.is_empty() {
                o.push_str(&format!("<br><span class=\"muted\">{}</span>", html(facts)));
            }
            o.push('\n');
            o.push_str(&budget.blocks(findings));
            o.push_str("</li>\n");
        }
        Step::Message { seq, role, text } => o.push_str(&format!(
            "<li><span class=\"muted\">#{seq}</span> {}: {}</li>\n",
            html_bounded(role, 20),
            text_line(text)
        )),
        Step::Verdict { seq, name, tool } => o.push_str(&format!(
            "<li><span class=\"muted\">#{seq}</span> recorded verdict {}{}</li>\n",
            code(name, 60),
            tool.as_deref()
                .map(|t| format!(" on tool {}", code(t, 60)))
                .unwrap_or_default()
        )),
        Step::Answer {
            seq,
            text,
            findings,
        } => {
            o.push_str(&format!(
                "<li class=\"answer\">answer{}: {}\n",
                seq.map(|s| format!(" <span class=\"muted\">#{s}</span>"))
                    .unwrap_or_default(),
                text_line(text)
            ));
            o.push_str(&budget.blocks(findings));
            o.push_str("</li>\n");
        }
        Step::Omitted { steps } => o.push_str(&format!(
            "<li class=\"omitted\">… {steps} step{} not shown</li>\n",
            if *steps == 1 { "" } else { "s" }
        )),
    }
    o
}
