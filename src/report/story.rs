//! One run's story as its renderers share it: `explain`'s text here, and the report page's
//! runs ([`crate::report::html::story`]). The steps are the [`Explanation`]'s own; what both
//! renderers derive from them (a tool call's facts, the dispositions table, what was not told
//! or cut) is computed once in [`StoryRows`].

use crate::report::explain::{Explanation, FindingView, Step};
use crate::report::table::{Cell, Column, Cut, Row, Shown, Table};
use crate::report::text::{bounded, duration, terminal, trim_lines};

/// What the renderers of a run's story show beyond its steps, computed once.
#[derive(Debug, Clone, PartialEq)]
pub struct StoryRows {
    /// How long the run took, in words.
    pub took: String,
    /// Per step, in step order: a tool call's facts (how long it took, an error, its landing
    /// flags) joined by ` · `; empty when there are none.
    pub facts: Vec<String>,
    /// A row per check.
    pub dispositions: Table,
    /// The events not told as steps, counted by kind.
    pub not_told: Option<String>,
    /// What was cut to bound the story, a line each.
    pub cut: Vec<String>,
}

impl StoryRows {
    pub fn of(e: &Explanation) -> StoryRows {
        StoryRows {
            took: duration(e.duration_ms),
            facts: e.steps.iter().map(facts).collect(),
            dispositions: disposition_table(e),
            not_told: (!e.not_shown.is_empty()).then(|| {
                let parts: Vec<String> = e
                    .not_shown
                    .iter()
                    .map(|(k, n)| format!("{n} {k}{}", if *n == 1 { "" } else { "s" }))
                    .collect();
                format!("not told: {}", parts.join(", "))
            }),
            cut: e.cut.iter().map(|c| format!("cut: {c}")).collect(),
        }
    }
}

fn facts(step: &Step) -> String {
    let Step::ToolCall {
        duration_ms,
        error,
        flags,
        ..
    } = step
    else {
        return String::new();
    };
    let mut facts = Vec::new();
    if let Some(ms) = duration_ms {
        facts.push(format!("took {}", duration(Some(*ms))));
    }
    if *error {
        facts.push("error".to_string());
    }
    facts.extend(flags.iter().cloned());
    facts.join(" · ")
}

fn disposition_table(e: &Explanation) -> Table {
    let columns = vec![
        Column::text("check", 22)
            .cut(Cut::Bounded(22))
            .shown(Shown::Code(40), Shown::Code(40)),
        Column::text("disposition", 15)
            .cut(Cut::Whole)
            .shown(Shown::Text(30), Shown::Text(30)),
        Column::text("reason", 0)
            .cut(Cut::Bounded(200))
            .shown(Shown::Text(200), Shown::Text(200)),
    ];
    let rows = e
        .dispositions
        .iter()
        .map(|d| {
            Row::of(vec![
                Cell::recorded(&d.check),
                Cell::recorded(&d.disposition),
                Cell::recorded(&d.reason),
            ])
        })
        .collect();
    Table::new(columns, rows)
}

/// A finding's kind when it says more than its check.
pub fn kind_beyond_check(f: &FindingView) -> Option<&str> {
    (f.kind != f.check).then_some(f.kind.as_str())
}

/// What a finding's title says of it beyond its name.
pub fn advisory_note(f: &FindingView) -> &'static str {
    if f.advisory {
        " (advisory)"
    } else {
        ""
    }
}

fn finding_lines(o: &mut String, findings: &[FindingView], indent: &str) {
    for f in findings {
        let name = match kind_beyond_check(f) {
            None => terminal(&f.check),
            Some(kind) => format!("{} {}", terminal(&f.check), terminal(kind)),
        };
        o.push_str(&format!(
            "{indent}▲ {}{}: {}\n",
            name,
            advisory_note(f),
            f.message.terminal()
        ));
        o.push_str(&format!("{indent}  finding {}\n", terminal(&f.finding_id)));
        for w in &f.witnesses {
            o.push_str(&format!(
                "{indent}  witness {} {} {} = {}   [{}]\n",
                bounded(&w.subject_kind, 30),
                bounded(&w.subject_id, 60),
                bounded(&w.predicate, 40),
                w.value.terminal(),
                bounded(&w.provenance, 120)
            ));
        }
    }
}

/// The explanation as terminal text.
pub fn render_text(e: &Explanation) -> String {
    let rows = StoryRows::of(e);
    let mut o = String::new();
    o.push_str(&format!("run {}\n", bounded(&e.run_id, 120)));
    o.push_str(&format!(
        "  conversation {}, turn {} (run {} of {} in the conversation)\n",
        bounded(&e.conversation_id, 120),
        e.turn,
        e.position,
        e.conversation_runs
    ));
    o.push_str(&format!(
        "  {} from {}\n",
        terminal(&e.format),
        bounded(&e.source, 160)
    ));
    let or_dash = |s: &Option<String>| s.as_deref().map(|a| bounded(a, 60)).unwrap_or("-".into());
    o.push_str(&format!(
        "  agent {} · model {} · started {} · took {}\n",
        or_dash(&e.agent),
        or_dash(&e.model),
        e.started_at.as_deref().unwrap_or("-"),
        rows.took
    ));
    o.push_str(&format!(
        "  {} events, {} tool landings\n",
        e.events, e.landings
    ));
    if let Some(u) = &e.user_message {
        o.push_str(&format!("\nuser: {}\n", u.terminal()));
    }
    o.push('\n');
    for (s, facts) in e.steps.iter().zip(&rows.facts) {
        step_lines(s, facts, &mut o);
    }
    if !e.unplaced.is_empty() {
        o.push_str("\nfindings not tied to an event of the run\n");
        finding_lines(&mut o, &e.unplaced, "  ");
    }
    o.push_str("\ndispositions\n");
    for row in &rows.dispositions.rows {
        o.push_str(&format!("  {}", rows.dispositions.terminal_row(row)));
    }
    if let Some(n) = &rows.not_told {
        o.push_str(&format!("\n{n}\n"));
    }
    for c in &rows.cut {
        o.push_str(&format!("{c}\n"));
    }
    trim_lines(&o)
}

/// One step of the story as terminal lines, `facts` its facts line.
fn step_lines(s: &Step, facts: &str, o: &mut String) {
    match s {
        Step::Iteration { iteration } => o.push_str(&format!("iteration {iteration}\n")),
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
                "  #{seq} tool {}  args fp {}{}\n",
                bounded(tool, 60),
                args_fingerprint,
                call_id
                    .as_deref()
                    .map(|c| format!("  call {}", bounded(c, 60)))
                    .unwrap_or_default()
            ));
            o.push_str(&format!("      args   {}\n", arguments.terminal()));
            match result {
                Some(r) => o.push_str(&format!("      result {}\n", r.terminal())),
                None => o.push_str("      result (none recorded)\n"),
            }
            if !facts.is_empty() {
                o.push_str(&format!("      {facts}\n"));
            }
            finding_lines(o, findings, "      ");
        }
        Step::Message { seq, role, text } => {
            o.push_str(&format!("  #{seq} {role}: {}\n", text.terminal()));
        }
        Step::Verdict { seq, name, tool } => o.push_str(&format!(
            "  #{seq} recorded verdict {}{}\n",
            bounded(name, 60),
            tool.as_deref()
                .map(|t| format!(" on tool {}", bounded(t, 60)))
                .unwrap_or_default()
        )),
        Step::Answer {
            seq,
            text,
            findings,
        } => {
            o.push_str(&format!(
                "answer{}: {}\n",
                seq.map(|s| format!(" (#{s})")).unwrap_or_default(),
                text.terminal()
            ));
            finding_lines(o, findings, "      ");
        }
        Step::Omitted { steps } => {
            o.push_str(&format!("  … {steps} step(s) not shown\n"));
        }
    }
}
