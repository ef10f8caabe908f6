//! `traceaudit report`: what a corpus says, for people. The disposition table per check (and
//! per group with `--by`), with `checked-fail` among `checked` runs as the headline rate and its
//! 95% Wilson interval; the top findings (the tools that loop most, the conversations with the
//! most stale answers, findings by kind); the agreement with recorded framework verdicts.
//! Every number comes from lazy Polars scans over the corpus Parquet files.

use crate::corpus::CHECK_COLUMN;
use crate::report::corpus::{counts, f64s, pl, strings, CorpusDir};
use crate::report::groups::{checks_without_tools, group_counts, GroupBy, GroupCounts, ALL};
use crate::report::stats::{rate, wilson};
use crate::report::table::{Cell, Column, Row, Shown, Table};
use crate::report::text::{duration, fit, interval, md_text, pct, trim_lines, wrap};
use polars::prelude::*;
use serde::Serialize;
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
    let findings = corpus.table("findings")?;
    let mut schema_probe = findings.clone();
    let names = crate::report::corpus::columns(&mut schema_probe)?;
    let has = |c: &str| names.iter().any(|n| n == c);
    let loops = if has("wasted_landings") {
        loops(findings.clone(), opts.top)?
    } else {
        Vec::new()
    };
    let stale = if has("turns_back") {
        stale(findings.clone(), opts.top)?
    } else {
        Vec::new()
    };
    let kinds = kinds(findings, corpus.checks())?;
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

fn loops(findings: LazyFrame, top: usize) -> io::Result<Vec<LoopRow>> {
    let df = findings
        .filter(col("wasted_landings").is_not_null())
        .group_by([col("tool_name")])
        .agg([
            len().cast(DataType::UInt64).alias("findings"),
            col("run_id")
                .n_unique()
                .cast(DataType::UInt64)
                .alias("runs"),
            col("conversation_id")
                .n_unique()
                .cast(DataType::UInt64)
                .alias("conversations"),
            col("wasted_landings")
                .cast(DataType::UInt64)
                .sum()
                .alias("wasted_landings"),
            col("wasted_ms").sum().alias("wasted_ms"),
            col("wasted_ms")
                .null_count()
                .cast(DataType::UInt64)
                .alias("untimed"),
            col("occurrences")
                .cast(DataType::UInt64)
                .max()
                .alias("max_occurrences"),
        ])
        .collect()
        .map_err(pl)?;
    let tool = strings(&df, "tool_name")?;
    let n = counts(&df, "findings")?;
    let runs = counts(&df, "runs")?;
    let convs = counts(&df, "conversations")?;
    let wasted = counts(&df, "wasted_landings")?;
    let ms = f64s(&df, "wasted_ms")?;
    let untimed = counts(&df, "untimed")?;
    let maxocc = counts(&df, "max_occurrences")?;
    let mut rows: Vec<LoopRow> = (0..df.height())
        .map(|i| LoopRow {
            tool: tool[i].clone(),
            findings: n[i],
            runs: runs[i],
            conversations: convs[i],
            wasted_landings: wasted[i],
            // Polars sums an all-null column to 0; only report time that was measured.
            wasted_ms: (untimed[i] < n[i]).then(|| ms[i].unwrap_or(0.0)),
            untimed: untimed[i],
            max_occurrences: maxocc[i],
        })
        .collect();
    rows.sort_by(|a, b| {
        (b.wasted_landings, b.findings, &a.tool).cmp(&(a.wasted_landings, a.findings, &b.tool))
    });
    rows.truncate(top);
    Ok(rows)
}

fn stale(findings: LazyFrame, top: usize) -> io::Result<Vec<StaleRow>> {
    let df = findings
        .filter(col("turns_back").is_not_null())
        .group_by([col("conversation_id")])
        .agg([
            col("source").first().alias("source"),
            len().cast(DataType::UInt64).alias("stale_answers"),
            col("turns_back")
                .cast(DataType::UInt64)
                .max()
                .alias("max_turns_back"),
        ])
        .collect()
        .map_err(pl)?;
    let conv = strings(&df, "conversation_id")?;
    let source = strings(&df, "source")?;
    let n = counts(&df, "stale_answers")?;
    let back = counts(&df, "max_turns_back")?;
    let mut rows: Vec<StaleRow> = (0..df.height())
        .map(|i| StaleRow {
            conversation_id: conv[i].clone(),
            source: source[i].clone(),
            stale_answers: n[i],
            max_turns_back: back[i],
        })
        .collect();
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

fn kinds(findings: LazyFrame, checks: Vec<String>) -> io::Result<Vec<KindRow>> {
    let df = findings
        .group_by([col(CHECK_COLUMN), col("kind")])
        .agg([
            len().cast(DataType::UInt64).alias("findings"),
            col("run_id")
                .n_unique()
                .cast(DataType::UInt64)
                .alias("runs"),
            col("advisory")
                .cast(DataType::UInt64)
                .sum()
                .alias("advisory"),
        ])
        .collect()
        .map_err(pl)?;
    let check = strings(&df, CHECK_COLUMN)?;
    let kind = strings(&df, "kind")?;
    let n = counts(&df, "findings")?;
    let runs = counts(&df, "runs")?;
    let advisory = counts(&df, "advisory")?;
    let mut rows: Vec<KindRow> = (0..df.height())
        .map(|i| KindRow {
            check: check[i].clone(),
            kind: kind[i].clone(),
            findings: n[i],
            runs: runs[i],
            advisory: advisory[i],
        })
        .collect();
    let order = |c: &str| checks.iter().position(|x| x == c).unwrap_or(usize::MAX);
    rows.sort_by(|a, b| (order(&a.check), &a.kind).cmp(&(order(&b.check), &b.kind)));
    Ok(rows)
}

fn agreement(
    corpus: &CorpusDir,
    top: usize,
) -> io::Result<(Vec<AgreementSummary>, Vec<Disagreement>)> {
    let table = corpus.table("agreement")?;
    let is = |s: &str| col("status").eq(lit(s)).cast(DataType::UInt64).sum();
    let df = table
        .clone()
        .group_by([col(CHECK_COLUMN)])
        .agg([
            col("run_id")
                .n_unique()
                .cast(DataType::UInt64)
                .alias("runs"),
            is("agrees").alias("agrees"),
            is("differs").alias("differs"),
            is("engine-only").alias("engine_only"),
            is("recorded-only").alias("recorded_only"),
        ])
        .collect()
        .map_err(pl)?;
    let check = strings(&df, CHECK_COLUMN)?;
    let runs = counts(&df, "runs")?;
    let agrees = counts(&df, "agrees")?;
    let differs = counts(&df, "differs")?;
    let engine_only = counts(&df, "engine_only")?;
    let recorded_only = counts(&df, "recorded_only")?;
    let mut summary: Vec<AgreementSummary> = (0..df.height())
        .map(|i| AgreementSummary {
            check: check[i].clone(),
            runs: runs[i],
            agrees: agrees[i],
            differs: differs[i],
            engine_only: engine_only[i],
            recorded_only: recorded_only[i],
        })
        .collect();
    let checks = corpus.checks();
    let order = |c: &str| checks.iter().position(|x| x == c).unwrap_or(usize::MAX);
    summary.sort_by(|a, b| (order(&a.check), &a.check).cmp(&(order(&b.check), &b.check)));

    let df = table
        .filter(col("status").neq(lit("agrees")))
        .select([
            col(CHECK_COLUMN),
            col("run_id"),
            col("key"),
            col("status"),
            col("detail"),
        ])
        .limit(top as IdxSize)
        .collect()
        .map_err(pl)?;
    let check = strings(&df, CHECK_COLUMN)?;
    let run = strings(&df, "run_id")?;
    let key = strings(&df, "key")?;
    let status = strings(&df, "status")?;
    let detail = crate::report::corpus::strs(&df, "detail")?;
    let disagreements = (0..df.height())
        .map(|i| Disagreement {
            check: check[i].clone(),
            run_id: run[i].clone(),
            key: key[i].clone(),
            status: status[i].clone(),
            detail: detail[i].clone(),
        })
        .collect();
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
