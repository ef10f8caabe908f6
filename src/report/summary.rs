//! `traceaudit report`: what a corpus says, for people. The disposition table per check (and
//! per group with `--by`), with `checked-fail` among `checked` runs as the headline rate and its
//! 95% Wilson interval; the top findings (the tools that loop most, the conversations with the
//! most stale answers, findings by kind); the agreement with recorded framework verdicts.
//! Every number comes from the corpus Parquet files, read a slice at a time
//! ([`CorpusDir::for_each_slice`]) and added up here.

use crate::corpus::CHECK_COLUMN;
use crate::report::corpus::{f64s, str_column, strings, strs, u64s, CorpusDir};
use crate::report::groups::id_digest;
use crate::report::groups::{checks_without_tools, group_counts, GroupBy, GroupCounts, ALL};
use crate::report::stats::{rate, wilson};
use crate::report::table::{Cell, Column, Row, Shown, Table};
use crate::report::text::{duration, fit, interval, md_text, pct, trim_lines, wrap};
use hashbrown::{HashMap, HashSet};
use polars::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io;

/// One check (over one group of runs) with its rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateRow {
    pub check: String,
    pub group: String,
    pub runs: u64,
    pub checked_pass: u64,
    pub checked_fail: u64,
    pub not_applicable: u64,
    pub unreachable: u64,
    /// `checked_pass + checked_fail`.
    pub checked: u64,
    pub findings: u64,
    /// `checked_fail / checked`; null when nothing was checked.
    pub fail_rate: Option<f64>,
    /// 95% Wilson score interval of `fail_rate`.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
}

impl RateRow {
    pub fn from_counts(c: &GroupCounts) -> RateRow {
        let checked = c.checked();
        let ci = wilson(c.checked_fail, checked);
        RateRow {
            check: c.check.clone(),
            group: c.group.clone(),
            runs: c.runs,
            checked_pass: c.checked_pass,
            checked_fail: c.checked_fail,
            not_applicable: c.not_applicable,
            unreachable: c.unreachable,
            checked,
            findings: c.findings,
            fail_rate: rate(c.checked_fail, checked),
            ci_low: ci.map(|c| c.0),
            ci_high: ci.map(|c| c.1),
        }
    }

    pub fn ci(&self) -> Option<(f64, f64)> {
        self.ci_low.zip(self.ci_high)
    }
}

/// A tool that landed again with identical arguments (repeated-call findings).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoopRow {
    pub tool: String,
    pub findings: u64,
    pub runs: u64,
    pub conversations: u64,
    /// Landings after the first, summed over the findings.
    pub wasted_landings: u64,
    /// Tool time of those landings, summed over the findings that timed every one.
    pub wasted_ms: Option<f64>,
    /// Findings whose wasted time is unknown (some landing untimed).
    pub untimed: u64,
    /// The most landings of one key in one run.
    pub max_occurrences: u64,
}

/// A conversation whose answers were grounded only by earlier turns (prior-turn-evidence).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StaleRow {
    pub conversation_id: String,
    pub source: String,
    pub stale_answers: u64,
    pub max_turns_back: u64,
}

/// Findings of one check and kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KindRow {
    pub check: String,
    pub kind: String,
    pub findings: u64,
    pub runs: u64,
    pub advisory: u64,
}

/// Agreement of the engine with the recorded framework verdicts, per check.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AgreementSummary {
    pub check: String,
    /// Runs whose recording carries the framework's own verdicts.
    pub runs: u64,
    pub agrees: u64,
    pub differs: u64,
    pub engine_only: u64,
    pub recorded_only: u64,
}

/// One key where the engine and the framework disagree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Disagreement {
    pub check: String,
    pub run_id: String,
    pub key: String,
    pub status: String,
    pub detail: Option<String>,
}

/// Everything `traceaudit report` shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub engine_version: String,
    pub conversations: u64,
    pub runs: u64,
    pub findings: u64,
    pub by: Option<GroupBy>,
    /// One row per check over every run.
    pub checks: Vec<RateRow>,
    /// One row per check and group (with `--by`).
    pub groups: Vec<RateRow>,
    pub loops: Vec<LoopRow>,
    pub stale: Vec<StaleRow>,
    pub kinds: Vec<KindRow>,
    pub agreement: Vec<AgreementSummary>,
    pub disagreements: Vec<Disagreement>,
    /// What the report left out or could not compute, in words.
    pub notes: Vec<String>,
}

/// Options of `build`.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    pub by: Option<GroupBy>,
    /// Rows of each top-findings table.
    pub top: usize,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions { by: None, top: 10 }
    }
}

/// Read a corpus into a [`Report`].
pub fn build(corpus: &CorpusDir, opts: ReportOptions) -> io::Result<Report> {
    let mut notes = Vec::new();
    let checks: Vec<RateRow> = group_counts(corpus, None)?
        .iter()
        .map(RateRow::from_counts)
        .collect();
    let groups = match &opts.by {
        None => Vec::new(),
        Some(by) => {
            if *by == GroupBy::Tool {
                let left_out = checks_without_tools(corpus)?;
                if !left_out.is_empty() {
                    notes.push(format!(
                        "--by tool leaves out {}: its findings name no tool",
                        left_out.join(", ")
                    ));
                }
                notes.push(
                    "--by tool: a run counts under every tool it landed; it failed for a tool \
                     when a finding names that tool"
                        .to_string(),
                );
            }
            group_counts(corpus, Some(by))?
                .iter()
                .map(RateRow::from_counts)
                .collect()
        }
    };
    let mut findings = corpus.table("findings")?;
    let names = crate::report::corpus::columns(&mut findings)?;
    let has = |c: &str| names.iter().any(|n| n == c);
    let loops = if has("wasted_landings") {
        loops(corpus, opts.top)?
    } else {
        Vec::new()
    };
    let stale = if has("turns_back") {
        stale(corpus, opts.top)?
    } else {
        Vec::new()
    };
    let kinds = kinds(corpus)?;
    let (agreement, disagreements) = agreement(corpus, opts.top)?;
    Ok(Report {
        engine_version: corpus.str_field("engine_version"),
        conversations: corpus.count("conversations"),
        runs: corpus.count("runs"),
        findings: corpus.count("findings"),
        by: opts.by,
        checks,
        groups,
        loops,
        stale,
        kinds,
        agreement,
        disagreements,
        notes,
    })
}

/// A sum of floats with Neumaier's compensation. Tool times are recorded to the microsecond
/// (0.659369 ms), and a plain running sum of such values depends on their order and ends a
/// unit in the last place off (4.297276999999999 for 4.297277, on the shared recordings): the
/// compensated sum is the exact one's nearest float in practice, whichever slices the values
/// come in.
#[derive(Debug, Default, Clone, Copy)]
struct CompensatedSum {
    sum: f64,
    carry: f64,
}

impl CompensatedSum {
    fn add(&mut self, x: f64) {
        let t = self.sum + x;
        self.carry += if self.sum.abs() >= x.abs() {
            (self.sum - t) + x
        } else {
            (x - t) + self.sum
        };
        self.sum = t;
    }

    fn value(self) -> f64 {
        self.sum + self.carry
    }
}

/// Repeated-call findings per tool, the most wasted first. Read a slice of findings at a time;
/// runs and conversations are counted as digests of their ids.
fn loops(corpus: &CorpusDir, top: usize) -> io::Result<Vec<LoopRow>> {
    #[derive(Default)]
    struct Tool {
        findings: u64,
        runs: HashSet<u128>,
        conversations: HashSet<u128>,
        wasted_landings: u64,
        wasted_ms: CompensatedSum,
        untimed: u64,
        max_occurrences: u64,
    }
    let mut tools: BTreeMap<String, Tool> = BTreeMap::new();
    let read = [
        col("tool_name"),
        col("run_id"),
        col("conversation_id"),
        col("wasted_landings").cast(DataType::UInt64),
        col("wasted_ms").cast(DataType::Float64),
        col("occurrences").cast(DataType::UInt64),
    ];
    corpus.for_each_slice("findings", &read, |df| {
        let tool = strs(&df, "tool_name")?;
        let run = str_column(&df, "run_id")?;
        let conversation = str_column(&df, "conversation_id")?;
        let wasted = u64s(&df, "wasted_landings")?;
        let ms = f64s(&df, "wasted_ms")?;
        let occurrences = u64s(&df, "occurrences")?;
        for (i, (run, conversation)) in run.iter().zip(conversation.iter()).enumerate() {
            let Some(w) = wasted[i] else { continue };
            let t = tools
                .entry(tool[i].clone().unwrap_or_default())
                .or_default();
            t.findings += 1;
            t.runs.insert(id_digest(run.unwrap_or_default()));
            t.conversations
                .insert(id_digest(conversation.unwrap_or_default()));
            t.wasted_landings += w;
            match ms[i] {
                Some(ms) => t.wasted_ms.add(ms),
                None => t.untimed += 1,
            }
            t.max_occurrences = t.max_occurrences.max(occurrences[i].unwrap_or(0));
        }
        Ok(())
    })?;
    let mut rows: Vec<LoopRow> = tools
        .into_iter()
        .map(|(tool, t)| LoopRow {
            tool,
            findings: t.findings,
            runs: t.runs.len() as u64,
            conversations: t.conversations.len() as u64,
            wasted_landings: t.wasted_landings,
            // Only time that was measured is reported.
            wasted_ms: (t.untimed < t.findings).then(|| t.wasted_ms.value()),
            untimed: t.untimed,
            max_occurrences: t.max_occurrences,
        })
        .collect();
    rows.sort_by(|a, b| {
        (b.wasted_landings, b.findings, &a.tool).cmp(&(a.wasted_landings, a.findings, &b.tool))
    });
    rows.truncate(top);
    Ok(rows)
}

/// Conversations by their answers grounded only in earlier turns, the most first. Read a
/// slice of findings at a time.
fn stale(corpus: &CorpusDir, top: usize) -> io::Result<Vec<StaleRow>> {
    let mut conversations: HashMap<String, StaleRow> = HashMap::new();
    let read = [
        col("conversation_id"),
        col("source"),
        col("turns_back").cast(DataType::UInt64),
    ];
    corpus.for_each_slice("findings", &read, |df| {
        let conversation = strings(&df, "conversation_id")?;
        let source = strs(&df, "source")?;
        let back = u64s(&df, "turns_back")?;
        for (i, id) in conversation.into_iter().enumerate() {
            let Some(back) = back[i] else { continue };
            let row = conversations.entry(id).or_insert_with_key(|id| StaleRow {
                conversation_id: id.clone(),
                // The conversation's first finding names its source.
                source: source[i].clone().unwrap_or_default(),
                stale_answers: 0,
                max_turns_back: 0,
            });
            row.stale_answers += 1;
            row.max_turns_back = row.max_turns_back.max(back);
        }
        Ok(())
    })?;
    let mut rows: Vec<StaleRow> = conversations.into_values().collect();
    rows.sort_by(|a, b| {
        (b.stale_answers, b.max_turns_back, &a.conversation_id).cmp(&(
            a.stale_answers,
            a.max_turns_back,
            &b.conversation_id,
        ))
    });
    rows.truncate(top);
    Ok(rows)
}

/// Findings per check and kind, with the runs they fall in. Read a slice at a time.
fn kinds(corpus: &CorpusDir) -> io::Result<Vec<KindRow>> {
    let mut kinds: BTreeMap<(String, String), (KindRow, HashSet<u128>)> = BTreeMap::new();
    let read = [
        col(CHECK_COLUMN),
        col("kind"),
        col("run_id"),
        col("advisory").cast(DataType::UInt64),
    ];
    corpus.for_each_slice("findings", &read, |df| {
        let check = strings(&df, CHECK_COLUMN)?;
        let kind = strings(&df, "kind")?;
        let run = str_column(&df, "run_id")?;
        let advisory = u64s(&df, "advisory")?;
        for (i, run) in run.iter().enumerate() {
            let (row, runs) = kinds
                .entry((check[i].clone(), kind[i].clone()))
                .or_insert_with(|| {
                    let row = KindRow {
                        check: check[i].clone(),
                        kind: kind[i].clone(),
                        findings: 0,
                        runs: 0,
                        advisory: 0,
                    };
                    (row, HashSet::new())
                });
            row.findings += 1;
            row.advisory += advisory[i].unwrap_or(0);
            runs.insert(id_digest(run.unwrap_or_default()));
        }
        Ok(())
    })?;
    let mut rows: Vec<KindRow> = kinds
        .into_values()
        .map(|(mut row, runs)| {
            row.runs = runs.len() as u64;
            row
        })
        .collect();
    let checks = corpus.checks();
    let order = |c: &str| checks.iter().position(|x| x == c).unwrap_or(usize::MAX);
    rows.sort_by(|a, b| (order(&a.check), &a.kind).cmp(&(order(&b.check), &b.kind)));
    Ok(rows)
}

/// Agreement with the recorded verdicts per check, and the first `top` disagreements in table
/// order. Read a slice at a time.
fn agreement(
    corpus: &CorpusDir,
    top: usize,
) -> io::Result<(Vec<AgreementSummary>, Vec<Disagreement>)> {
    let mut checks: BTreeMap<String, (AgreementSummary, HashSet<u128>)> = BTreeMap::new();
    let mut disagreements = Vec::new();
    let read = [
        col(CHECK_COLUMN),
        col("run_id"),
        col("key"),
        col("status"),
        col("detail"),
    ];
    corpus.for_each_slice("agreement", &read, |df| {
        let check = strings(&df, CHECK_COLUMN)?;
        let run = strings(&df, "run_id")?;
        let key = strings(&df, "key")?;
        let status = strs(&df, "status")?;
        let detail = strs(&df, "detail")?;
        for i in 0..df.height() {
            let (summary, runs) = checks.entry(check[i].clone()).or_insert_with(|| {
                let summary = AgreementSummary {
                    check: check[i].clone(),
                    ..AgreementSummary::default()
                };
                (summary, HashSet::new())
            });
            runs.insert(id_digest(&run[i]));
            let Some(status) = &status[i] else { continue };
            match status.as_str() {
                "agrees" => summary.agrees += 1,
                "differs" => summary.differs += 1,
                "engine-only" => summary.engine_only += 1,
                "recorded-only" => summary.recorded_only += 1,
                _ => {}
            }
            if status != "agrees" && disagreements.len() < top {
                disagreements.push(Disagreement {
                    check: check[i].clone(),
                    run_id: run[i].clone(),
                    key: key[i].clone(),
                    status: status.clone(),
                    detail: detail[i].clone(),
                });
            }
        }
        Ok(())
    })?;
    let mut summary: Vec<AgreementSummary> = checks
        .into_values()
        .map(|(mut s, runs)| {
            s.runs = runs.len() as u64;
            s
        })
        .collect();
    let order_of = corpus.checks();
    let order = |c: &str| order_of.iter().position(|x| x == c).unwrap_or(usize::MAX);
    summary.sort_by(|a, b| (order(&a.check), &a.check).cmp(&(order(&b.check), &b.check)));
    Ok((summary, disagreements))
}

fn loop_time(l: &LoopRow) -> String {
    let t = duration(l.wasted_ms);
    if l.untimed > 0 && l.wasted_ms.is_some() {
        format!("≥{t}")
    } else {
        t
    }
}

const RATE_NOTE: &str =
    "fail % = checked-fail among checked runs (pass + fail); 95% CI = Wilson score interval";

/// The tables of a report, every cell computed once: the terminal table, Markdown and the
/// HTML page lay these out (JSON is the [`Report`] itself).
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRows {
    /// A row per check over every run.
    pub checks: Table,
    /// With `--by`: the grouping's name, and a row per row of [`Report::groups`].
    pub groups: Option<(String, Table)>,
    pub loops: Table,
    /// Some loop's wasted time leaves out landings that were not timed.
    pub loops_lower_bound: bool,
    pub stale: Table,
    pub kinds: Table,
    pub agreement: Table,
    /// The last column, the detail, goes on a line of its own on the terminal.
    pub disagreements: Table,
}

/// The column of [`ReportRows::groups`] that names the check.
pub const GROUP_CHECK_COLUMN: usize = 1;
/// The column of [`ReportRows::kinds`] that names the kind.
pub const KIND_COLUMN: usize = 1;
/// The column of [`ReportRows::disagreements`] with the detail.
const DETAIL_COLUMN: usize = 3;

fn rate_cells(fail_rate: Option<f64>, ci: Option<(f64, f64)>) -> [Cell; 2] {
    [Cell::Value(pct(fail_rate)), Cell::Value(interval(ci))]
}

impl ReportRows {
    pub fn of(r: &Report) -> ReportRows {
        ReportRows {
            checks: check_table(&r.checks),
            groups: r
                .by
                .as_ref()
                .map(|by| (by.label(), group_table(&by.label(), &r.groups))),
            loops: loop_table(&r.loops),
            loops_lower_bound: r
                .loops
                .iter()
                .any(|l| l.untimed > 0 && l.wasted_ms.is_some()),
            stale: stale_table(&r.stale),
            kinds: kind_table(&r.kinds),
            agreement: agreement_table(&r.agreement),
            disagreements: disagreement_table(&r.disagreements),
        }
    }
}

fn check_table(rows: &[RateRow]) -> Table {
    let columns = vec![
        Column::text("check", 22).code(40, 60),
        Column::number("runs", 7),
        Column::number("pass", 7),
        Column::number("fail", 7),
        Column::number("n/a", 7),
        Column::number("unreach", 7).long("unreachable"),
        Column::number("findings", 8),
        Column::number("fail %", 6),
        Column::text("95% CI", 14).gap(2),
    ];
    let rows = rows
        .iter()
        .map(|c| {
            let mut cells = vec![
                Cell::recorded(&c.check),
                Cell::value(c.runs),
                Cell::value(c.checked_pass),
                Cell::value(c.checked_fail),
                Cell::value(c.not_applicable),
                Cell::value(c.unreachable),
                Cell::value(c.findings),
            ];
            cells.extend(rate_cells(c.fail_rate, c.ci()));
            Row::of(cells)
        })
        .collect();
    Table::new(columns, rows)
}

fn group_table(label: &str, rows: &[RateRow]) -> Table {
    let columns = vec![
        Column::text(label, 24).code(60, 120).long_max(60),
        Column::text("check", 20).code(40, 60),
        Column::number("checked", 7),
        Column::number("fail", 6),
        Column::number("fail %", 6),
        Column::text("95% CI", 14).gap(2),
        Column::number("n/a", 6),
        Column::number("unreach", 7).long("unreachable"),
    ];
    let rows = rows
        .iter()
        .map(|g| {
            let mut cells = vec![
                Cell::recorded(&g.group),
                Cell::recorded(&g.check),
                Cell::value(g.checked),
                Cell::value(g.checked_fail),
            ];
            cells.extend(rate_cells(g.fail_rate, g.ci()));
            cells.extend([Cell::value(g.not_applicable), Cell::value(g.unreachable)]);
            Row::of(cells)
        })
        .collect();
    Table::new(columns, rows)
}

fn loop_table(rows: &[LoopRow]) -> Table {
    let columns = vec![
        Column::text("tool", 32).code(60, 80),
        Column::number("findings", 8),
        Column::number("runs", 6),
        Column::number("convs", 6).long("conversations"),
        Column::number("wasted landings", 15),
        Column::number("wasted time", 12),
        Column::number("max rep", 7).long("max repeats"),
    ];
    let rows = rows
        .iter()
        .map(|l| {
            Row::of(vec![
                Cell::recorded(&l.tool),
                Cell::value(l.findings),
                Cell::value(l.runs),
                Cell::value(l.conversations),
                Cell::value(l.wasted_landings),
                Cell::Value(loop_time(l)),
                Cell::value(l.max_occurrences),
            ])
        })
        .collect();
    Table::new(columns, rows)
}

fn stale_table(rows: &[StaleRow]) -> Table {
    let columns = vec![
        Column::text("conversation", 56).code(80, 120),
        Column::text("source", 14).shown(Shown::Code(30), Shown::Text(40)),
        Column::number("answers", 8).long("stale answers"),
        Column::number("max back", 10).long("max turns back"),
    ];
    let rows = rows
        .iter()
        .map(|s| {
            Row::of(vec![
                Cell::recorded(&s.conversation_id),
                Cell::recorded(&s.source),
                Cell::value(s.stale_answers),
                Cell::value(s.max_turns_back),
            ])
        })
        .collect();
    Table::new(columns, rows)
}

fn kind_table(rows: &[KindRow]) -> Table {
    let columns = vec![
        Column::text("check", 22).code(40, 60),
        Column::text("kind", 26).code(40, 60),
        Column::number("findings", 9),
        Column::number("runs", 7),
        Column::number("advisory", 9),
    ];
    let rows = rows
        .iter()
        .map(|k| {
            Row::of(vec![
                Cell::recorded(&k.check),
                Cell::recorded(&k.kind),
                Cell::value(k.findings),
                Cell::value(k.runs),
                Cell::value(k.advisory),
            ])
        })
        .collect();
    Table::new(columns, rows)
}

fn agreement_table(rows: &[AgreementSummary]) -> Table {
    let columns = vec![
        Column::text("check", 22).code(40, 60),
        Column::number("runs", 7),
        Column::number("agrees", 8),
        Column::number("differs", 8),
        Column::number("engine-only", 12),
        Column::number("recorded-only", 14),
    ];
    let rows = rows
        .iter()
        .map(|a| {
            Row::of(vec![
                Cell::recorded(&a.check),
                Cell::value(a.runs),
                Cell::value(a.agrees),
                Cell::value(a.differs),
                Cell::value(a.engine_only),
                Cell::value(a.recorded_only),
            ])
        })
        .collect();
    Table::new(columns, rows)
}

fn disagreement_table(rows: &[Disagreement]) -> Table {
    let columns = vec![
        Column::text("status", 14).shown(Shown::Code(20), Shown::Text(20)),
        Column::text("run", 40).code(80, 120),
        Column::text("key", 40).code(80, 120),
        Column::text("detail", 94).shown(Shown::Text(200), Shown::Text(300)),
    ];
    let rows = rows
        .iter()
        .map(|d| {
            Row::of(vec![
                Cell::recorded(&d.status),
                Cell::recorded(&d.run_id),
                Cell::recorded(&d.key),
                d.detail.as_deref().map_or(Cell::Missing, Cell::recorded),
            ])
        })
        .collect();
    Table::new(columns, rows)
}

/// The report as a terminal table, at most 100 columns wide.
pub fn render_table(r: &Report) -> String {
    let rows = ReportRows::of(r);
    let mut o = String::new();
    o.push_str(&format!(
        "traceaudit report: {} runs in {} conversations, {} findings (engine {})\n\n",
        r.runs,
        r.conversations,
        r.findings,
        fit(&r.engine_version, 20)
    ));
    o.push_str("Dispositions per check\n");
    o.push_str(&rows.checks.terminal());
    o.push_str(RATE_NOTE);
    o.push('\n');
    if let Some((label, groups)) = &rows.groups {
        o.push_str(&format!("\nPer {label}\n"));
        o.push_str(&groups.terminal());
    }
    if !rows.loops.is_empty() {
        o.push_str("\nTools that loop most (repeated-call: identical arguments landing again)\n");
        o.push_str(&rows.loops.terminal());
        if rows.loops_lower_bound {
            o.push_str("≥: some wasted landings were not timed; the time is a lower bound\n");
        }
    }
    if !rows.stale.is_empty() {
        o.push_str(
            "\nConversations with the most stale answers (prior-turn-evidence: every grounded \
             value\nwas served in an earlier turn)\n",
        );
        o.push_str(&rows.stale.terminal());
    }
    if !rows.kinds.is_empty() {
        o.push_str("\nFindings by kind\n");
        o.push_str(&rows.kinds.terminal());
    }
    table_agreement(&rows, &mut o);
    for n in &r.notes {
        o.push_str(&wrap(n, 400, 100, "note: ", "      "));
    }
    trim_lines(&o)
}

/// The terminal table's agreement with recorded framework verdicts: the counts per check, then
/// each disagreement on a line with its detail below.
fn table_agreement(rows: &ReportRows, o: &mut String) {
    o.push_str("\nAgreement with recorded framework verdicts\n");
    if rows.agreement.is_empty() {
        o.push_str("no run in this corpus records the framework's own verdicts\n");
        return;
    }
    o.push_str(&rows.agreement.terminal());
    let lines = rows.disagreements.subset(
        &(0..rows.disagreements.rows.len()).collect::<Vec<_>>(),
        &[DETAIL_COLUMN],
    );
    for (line, row) in lines.rows.iter().zip(&rows.disagreements.rows) {
        o.push_str(&format!("  {}", lines.terminal_row(line)));
        if let Cell::Recorded(detail) = &row.cells[DETAIL_COLUMN] {
            o.push_str(&format!("    {}\n", fit(detail, 94)));
        }
    }
}

/// The report as Markdown (GitHub-flavoured tables).
pub fn render_markdown(r: &Report) -> String {
    let rows = ReportRows::of(r);
    let mut o = String::new();
    o.push_str(&format!(
        "## traceaudit report\n\n{} runs in {} conversations, {} findings (engine {}).\n\n",
        r.runs,
        r.conversations,
        r.findings,
        md_text(&r.engine_version, 20)
    ));
    o.push_str("### Dispositions per check\n\n");
    o.push_str(&rows.checks.markdown());
    o.push_str(&format!("\n{RATE_NOTE}.\n"));
    if let Some((label, groups)) = &rows.groups {
        o.push_str(&format!("\n### Per {label}\n\n"));
        o.push_str(&groups.markdown());
    }
    if !rows.loops.is_empty() {
        o.push_str("\n### Tools that loop most\n\nrepeated-call: a tool landing again with identical arguments.\n\n");
        o.push_str(&rows.loops.markdown());
        if rows.loops_lower_bound {
            o.push_str("\n≥: some wasted landings were not timed; the time is a lower bound.\n");
        }
    }
    if !rows.stale.is_empty() {
        o.push_str("\n### Conversations with the most stale answers\n\nprior-turn-evidence: every grounded value of the answer was served in an earlier turn.\n\n");
        o.push_str(&rows.stale.markdown());
    }
    if !rows.kinds.is_empty() {
        o.push_str("\n### Findings by kind\n\n");
        o.push_str(&rows.kinds.markdown());
    }
    o.push_str("\n### Agreement with recorded framework verdicts\n\n");
    if rows.agreement.is_empty() {
        o.push_str("No run in this corpus records the framework's own verdicts.\n");
    } else {
        o.push_str(&rows.agreement.markdown());
        if !rows.disagreements.is_empty() {
            o.push('\n');
            o.push_str(&rows.disagreements.markdown());
        }
    }
    if !r.notes.is_empty() {
        o.push('\n');
        for n in &r.notes {
            o.push_str(&format!("- {}\n", md_text(n, 300)));
        }
    }
    o
}

/// The group label of a report row, for charts: the check when there is no grouping.
pub fn label(row: &RateRow) -> &str {
    if row.group == ALL {
        &row.check
    } else {
        &row.group
    }
}

#[cfg(test)]
mod tests {
    //! Unit tests read corpus tables five rows at a time: the sample's findings and agreement
    //! rows come in several slices, and what is counted across slices (runs, conversations,
    //! maxima, first sources) must be what Polars gives over the whole table.
    use super::*;
    use crate::report::corpus::{counts, u64s};

    fn whole(corpus: &CorpusDir, table: &str, by: &[&str], agg: Vec<Expr>) -> DataFrame {
        corpus
            .table(table)
            .unwrap()
            .group_by(by.iter().map(|c| col(*c)).collect::<Vec<_>>())
            .agg(agg)
            .sort(by.to_vec(), SortMultipleOptions::default())
            .collect()
            .unwrap()
    }

    #[test]
    fn tallies_read_in_slices_are_those_of_the_whole_tables() {
        let dir = tempfile::tempdir().unwrap();
        let corpus = CorpusDir::open(&crate::report::groups::tests::audited(
            &["testdata"],
            dir.path(),
        ))
        .unwrap();
        let report = build(&corpus, ReportOptions { by: None, top: 100 }).unwrap();
        let n_unique = |c: &str| col(c).n_unique().cast(DataType::UInt64).alias(c);

        let df = whole(
            &corpus,
            "findings",
            &[CHECK_COLUMN, "kind"],
            vec![
                len().cast(DataType::UInt64).alias("n"),
                n_unique("run_id"),
                col("advisory")
                    .cast(DataType::UInt64)
                    .sum()
                    .alias("advisory"),
            ],
        );
        let mut have: Vec<_> = report
            .kinds
            .iter()
            .map(|k| {
                (
                    k.check.clone(),
                    k.kind.clone(),
                    k.findings,
                    k.runs,
                    k.advisory,
                )
            })
            .collect();
        have.sort();
        let want: Vec<_> = (0..df.height())
            .map(|i| {
                (
                    strings(&df, CHECK_COLUMN).unwrap()[i].clone(),
                    strings(&df, "kind").unwrap()[i].clone(),
                    counts(&df, "n").unwrap()[i],
                    counts(&df, "run_id").unwrap()[i],
                    counts(&df, "advisory").unwrap()[i],
                )
            })
            .collect();
        assert_eq!(have, want);

        let loops = corpus
            .table("findings")
            .unwrap()
            .filter(col("wasted_landings").is_not_null())
            .group_by([col("tool_name")])
            .agg([
                len().cast(DataType::UInt64).alias("n"),
                n_unique("run_id"),
                n_unique("conversation_id"),
                col("occurrences").cast(DataType::UInt64).max().alias("max"),
            ])
            .sort(["tool_name"], SortMultipleOptions::default())
            .collect()
            .unwrap();
        let mut have: Vec<_> = report
            .loops
            .iter()
            .map(|l| {
                (
                    l.tool.clone(),
                    l.findings,
                    l.runs,
                    l.conversations,
                    l.max_occurrences,
                )
            })
            .collect();
        have.sort();
        let want: Vec<_> = (0..loops.height())
            .map(|i| {
                (
                    strings(&loops, "tool_name").unwrap()[i].clone(),
                    counts(&loops, "n").unwrap()[i],
                    counts(&loops, "run_id").unwrap()[i],
                    counts(&loops, "conversation_id").unwrap()[i],
                    counts(&loops, "max").unwrap()[i],
                )
            })
            .collect();
        assert!(!want.is_empty());
        assert_eq!(have, want);

        let stale = corpus
            .table("findings")
            .unwrap()
            .filter(col("turns_back").is_not_null())
            .group_by([col("conversation_id")])
            .agg([
                col("source").first().alias("source"),
                len().cast(DataType::UInt64).alias("n"),
                col("turns_back").cast(DataType::UInt64).max().alias("max"),
            ])
            .sort(["conversation_id"], SortMultipleOptions::default())
            .collect()
            .unwrap();
        let mut have: Vec<_> = report
            .stale
            .iter()
            .map(|s| {
                (
                    s.conversation_id.clone(),
                    s.source.clone(),
                    s.stale_answers,
                    s.max_turns_back,
                )
            })
            .collect();
        have.sort();
        let want: Vec<_> = (0..stale.height())
            .map(|i| {
                (
                    strings(&stale, "conversation_id").unwrap()[i].clone(),
                    strings(&stale, "source").unwrap()[i].clone(),
                    counts(&stale, "n").unwrap()[i],
                    u64s(&stale, "max").unwrap()[i].unwrap(),
                )
            })
            .collect();
        assert!(!want.is_empty());
        assert_eq!(have, want);

        let is = |s: &str| {
            col("status")
                .eq(lit(s))
                .cast(DataType::UInt64)
                .sum()
                .alias(s)
        };
        let agreement = whole(
            &corpus,
            "agreement",
            &[CHECK_COLUMN],
            vec![
                n_unique("run_id"),
                is("agrees"),
                is("differs"),
                is("engine-only"),
            ],
        );
        let mut have: Vec<_> = report
            .agreement
            .iter()
            .map(|a| (a.check.clone(), a.runs, a.agrees, a.differs, a.engine_only))
            .collect();
        have.sort();
        let want: Vec<_> = (0..agreement.height())
            .map(|i| {
                (
                    strings(&agreement, CHECK_COLUMN).unwrap()[i].clone(),
                    counts(&agreement, "run_id").unwrap()[i],
                    counts(&agreement, "agrees").unwrap()[i],
                    counts(&agreement, "differs").unwrap()[i],
                    counts(&agreement, "engine-only").unwrap()[i],
                )
            })
            .collect();
        assert!(!want.is_empty());
        assert_eq!(have, want);
        // Disagreements in table order, the first of them.
        let table = corpus.table("agreement").unwrap().collect().unwrap();
        let first: Vec<(String, String)> = strings(&table, "status")
            .unwrap()
            .into_iter()
            .zip(strings(&table, "key").unwrap())
            .filter(|(s, _)| s != "agrees")
            .collect();
        let listed: Vec<(String, String)> = report
            .disagreements
            .iter()
            .map(|d| (d.status.clone(), d.key.clone()))
            .collect();
        assert_eq!(listed, first);
    }

    #[test]
    fn tool_times_add_up_to_their_exact_sum_in_any_order() {
        // The wasted times of one tool's findings in the shared recordings (otel and
        // openinference spans, agentfootprint), in table order.
        let ms = [1.0, 0.659369, 0.5184, 0.494404, 0.506963, 0.57233, 0.545811];
        assert_eq!(
            ms.iter().sum::<f64>(),
            4.297276999999999,
            "a running sum is a unit off"
        );
        let sum = |values: &mut dyn Iterator<Item = &f64>| {
            let mut s = CompensatedSum::default();
            values.for_each(|&x| s.add(x));
            s.value()
        };
        assert_eq!(sum(&mut ms.iter()), 4.297277);
        assert_eq!(sum(&mut ms.iter().rev()), 4.297277);
        let mut sorted = ms;
        sorted.sort_by(f64::total_cmp);
        assert_eq!(sum(&mut sorted.iter()), 4.297277);
    }
}
