//! `traceaudit diff BASELINE CANDIDATE`: the nightly regression report. Per check (and per
//! group with `--by`) the fail rate in each corpus, the change in percentage points with a 95%
//! interval (Newcombe's hybrid score interval from the two Wilson intervals), the finding keys
//! that appear or vanish, and the runs present in only one corpus. `--fail-on` rules decide the
//! exit status: 0 no regression, 1 regression, 2 error.

use crate::corpus::CHECK_COLUMN;
use crate::error::Error;
use crate::report::corpus::{str_column, strings, strs, u64s, CorpusDir};
use crate::report::groups::{group_counts, id_digest, GroupBy, GroupCounts, ALL};
use crate::report::stats::{newcombe, rate};
use crate::report::table::{md_cell, Cell, Column, Row, Table};
use crate::report::text::{fit, md_code, md_text};
use polars::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io;

/// The rules that make a diff a regression.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rules {
    /// A check's fail rate rose by more than this many percentage points and the 95% interval
    /// of the change lies above zero.
    pub rate_pp: Option<f64>,
    /// At least this many finding keys are present only in the candidate.
    pub new_keys: Option<u64>,
}

/// The default `--fail-on`.
pub const DEFAULT_RULES: &str = "rate=2,new-keys=1";

impl Rules {
    /// Parse `rate=PP,new-keys=N`; `none` turns every rule off. An empty text is refused: it is
    /// what `--fail-on "$RULES"` becomes when the variable is unset, and taking it as "no
    /// rules" would turn the gate off without anyone saying so.
    pub fn parse(text: &str) -> crate::error::Result<Rules> {
        if text.split(',').all(|p| p.trim().is_empty()) {
            return Err(Error::Config(format!(
                "{text:?} names no rule; give rules such as {DEFAULT_RULES}, or none to report \
                 without gating"
            )));
        }
        let mut rules = Rules {
            rate_pp: None,
            new_keys: None,
        };
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if part == "none" {
                continue;
            }
            let (name, value) = part.split_once('=').ok_or_else(|| {
                Error::Config(format!(
                    "rule {part:?} is not NAME=VALUE (rate=PP, new-keys=N, none)"
                ))
            })?;
            match name.trim() {
                "rate" => {
                    let pp: f64 = value.trim().trim_end_matches("pp").parse().map_err(|_| {
                        Error::Config(format!(
                            "rate={value}: expected percentage points, e.g. rate=2"
                        ))
                    })?;
                    if !(0.0..=100.0).contains(&pp) {
                        return Err(Error::Config(format!(
                            "rate={value}: between 0 and 100 percentage points"
                        )));
                    }
                    rules.rate_pp = Some(pp);
                }
                "new-keys" => {
                    let n: u64 = value.trim().parse().map_err(|_| {
                        Error::Config(format!(
                            "new-keys={value}: expected a count, e.g. new-keys=1"
                        ))
                    })?;
                    rules.new_keys = (n > 0).then_some(n);
                }
                other => {
                    return Err(Error::Config(format!(
                        "unknown rule {other:?}: the rules are rate=PP and new-keys=N (or none)"
                    )))
                }
            }
        }
        Ok(rules)
    }

    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(pp) = self.rate_pp {
            parts.push(format!("rate={pp}"));
        }
        if let Some(n) = self.new_keys {
            parts.push(format!("new-keys={n}"));
        }
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(",")
        }
    }
}

/// What the diff says about one corpus.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CorpusInfo {
    /// The directory's name.
    pub name: String,
    pub engine_version: String,
    pub config_hash: String,
    pub conversations: u64,
    pub runs: u64,
    pub findings: u64,
}

/// One side of a rate comparison.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Side {
    pub checked: u64,
    pub fail: u64,
    pub rate: Option<f64>,
}

impl Side {
    fn of(c: Option<&GroupCounts>) -> Side {
        let (fail, checked) = c.map(|c| (c.checked_fail, c.checked())).unwrap_or((0, 0));
        Side {
            checked,
            fail,
            rate: rate(fail, checked),
        }
    }
}

/// A check's fail rate in both corpora.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateChange {
    pub check: String,
    pub group: String,
    pub baseline: Side,
    pub candidate: Side,
    /// Candidate minus baseline, as a fraction (0.01 = one percentage point).
    pub change: Option<f64>,
    /// 95% Newcombe interval of the change.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// The `rate` rule fired here.
    pub regression: bool,
}

/// A finding key present in only one corpus.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyChange {
    pub check: String,
    /// `tool:argsFp` for findings about a tool call (compared across the whole corpus), else
    /// the run id (compared over runs present in both corpora).
    pub key: String,
    /// `corpus` or `run`.
    pub scope: String,
    pub findings: u64,
    pub runs: u64,
    pub wasted_landings: Option<u64>,
}

/// Runs present in only one corpus.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunPresence {
    pub both: u64,
    pub only_baseline: u64,
    pub only_candidate: u64,
    /// Up to five of each, in id order.
    pub only_baseline_sample: Vec<String>,
    pub only_candidate_sample: Vec<String>,
}

/// Everything `traceaudit diff` shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    pub baseline: CorpusInfo,
    pub candidate: CorpusInfo,
    pub by: Option<GroupBy>,
    pub rules: Rules,
    pub interval: &'static str,
    pub checks: Vec<RateChange>,
    pub groups: Vec<RateChange>,
    pub appeared: Vec<KeyChange>,
    pub vanished: Vec<KeyChange>,
    pub appeared_total: u64,
    pub vanished_total: u64,
    pub runs: RunPresence,
    /// Each rule that fired, in words.
    pub regressions: Vec<String>,
    pub notes: Vec<String>,
}

impl Diff {
    pub fn is_regression(&self) -> bool {
        !self.regressions.is_empty()
    }
}

/// How the interval of a change is computed, in words.
pub const INTERVAL: &str = "Newcombe hybrid score interval (from Wilson intervals), 95%";

fn info(c: &CorpusDir) -> CorpusInfo {
    CorpusInfo {
        name: c
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| c.dir.display().to_string()),
        engine_version: c.str_field("engine_version"),
        config_hash: c.str_field("config_hash"),
        conversations: c.count("conversations"),
        runs: c.count("runs"),
        findings: c.count("findings"),
    }
}

fn changes(
    base: &[GroupCounts],
    cand: &[GroupCounts],
    checks: &[String],
    rules: &Rules,
) -> Vec<RateChange> {
    let index = |rows: &[GroupCounts]| -> BTreeMap<(String, String), GroupCounts> {
        rows.iter()
            .map(|r| ((r.check.clone(), r.group.clone()), r.clone()))
            .collect()
    };
    let b = index(base);
    let c = index(cand);
    let keys: BTreeSet<&(String, String)> = b.keys().chain(c.keys()).collect();
    let mut out: Vec<RateChange> = keys
        .into_iter()
        .map(|k| {
            let bs = Side::of(b.get(k));
            let cs = Side::of(c.get(k));
            let change = bs.rate.zip(cs.rate).map(|(x, y)| y - x);
            let ci = newcombe(bs.fail, bs.checked, cs.fail, cs.checked);
            let regression = match (rules.rate_pp, change, ci) {
                (Some(pp), Some(d), Some((lo, _))) => d * 100.0 > pp && lo > 0.0,
                _ => false,
            };
            RateChange {
                check: k.0.clone(),
                group: k.1.clone(),
                baseline: bs,
                candidate: cs,
                change,
                ci_low: ci.map(|c| c.0),
                ci_high: ci.map(|c| c.1),
                regression,
            }
        })
        .collect();
    let order = |c: &str| checks.iter().position(|x| x == c).unwrap_or(usize::MAX);
    out.sort_by(|a, b| {
        (order(&a.check), &a.check, &a.group).cmp(&(order(&b.check), &b.check, &b.group))
    });
    out
}

/// Finding keys of a corpus: (check, key) -> (scope, findings, the runs they fall in,
/// wasted landings). A corpus has a finding key per run with findings, so what a key holds is
/// most of `diff`'s memory on a large night: its runs are only counted, and are held as
/// [`RunSet`].
type KeyTable = BTreeMap<(String, String), (&'static str, u64, RunSet, Option<u64>)>;

/// The distinct runs of a finding key, as [`id_digest`]s. Most keys fall in one run (a
/// run-scoped key is its run's id), which is held without a set: a set of one takes a whole
/// tree node.
#[derive(Debug, Default)]
enum RunSet {
    #[default]
    Empty,
    One(u128),
    Many(BTreeSet<u128>),
}

impl RunSet {
    fn insert(&mut self, run: u128) {
        match self {
            RunSet::Empty => *self = RunSet::One(run),
            RunSet::One(first) if *first == run => {}
            RunSet::One(first) => *self = RunSet::Many(BTreeSet::from([*first, run])),
            RunSet::Many(set) => {
                set.insert(run);
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            RunSet::Empty => 0,
            RunSet::One(_) => 1,
            RunSet::Many(set) => set.len(),
        }
    }
}

fn keys(c: &CorpusDir) -> io::Result<KeyTable> {
    let mut lf = c.table("findings")?;
    let names = crate::report::corpus::columns(&mut lf)?;
    let pick = |n: &str| {
        if names.iter().any(|x| x == n) {
            col(n)
        } else {
            lit(NULL).cast(DataType::String).alias(n)
        }
    };
    let read = [
        col(CHECK_COLUMN),
        col("run_id"),
        pick("tool_name"),
        pick("args_fingerprint"),
        pick("wasted_landings"),
    ];
    let mut table = KeyTable::new();
    c.for_each_slice("findings", &read, |df| {
        let check = strings(&df, CHECK_COLUMN)?;
        let run = strings(&df, "run_id")?;
        let tool = strs(&df, "tool_name")?;
        let args = strs(&df, "args_fingerprint")?;
        let wasted = u64s(&df, "wasted_landings")?;
        for i in 0..df.height() {
            let (key, scope) = match (&tool[i], &args[i]) {
                (Some(t), Some(a)) => (format!("{t}:{a}"), "corpus"),
                _ => (run[i].clone(), "run"),
            };
            let e = table
                .entry((check[i].clone(), key))
                .or_insert_with(|| (scope, 0, RunSet::Empty, None));
            e.1 += 1;
            e.2.insert(id_digest(&run[i]));
            if let Some(w) = wasted[i] {
                e.3 = Some(e.3.unwrap_or(0) + w);
            }
        }
        Ok(())
    })?;
    Ok(table)
}

/// The digests of the runs of a corpus's dispositions, sorted, each once (read a slice at a
/// time).
fn id_digests(c: &CorpusDir) -> io::Result<Vec<u128>> {
    let mut out = Vec::new();
    c.for_each_slice("dispositions", &[col("run_id")], |slice| {
        // A run's rows (one per check) are mostly in one slice: dropping repeats there keeps
        // the list near one digest a run until the sort at the end.
        let mut digests: Vec<u128> = str_column(&slice, "run_id")?
            .iter()
            .map(|id| id_digest(id.unwrap_or_default()))
            .collect();
        digests.sort_unstable();
        digests.dedup();
        out.extend(digests);
        Ok(())
    })?;
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// How many digests sorted `a` and sorted `b` share.
fn shared_digests(a: &[u128], b: &[u128]) -> u64 {
    let (mut i, mut j, mut both) = (0, 0, 0u64);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Equal => {
                both += 1;
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
        }
    }
    both
}

/// The first `n` run ids of corpus `c` (in string order) that `other` (sorted digests) lacks.
fn first_runs_missing(c: &CorpusDir, other: &[u128], n: usize) -> io::Result<Vec<String>> {
    let mut first: BTreeSet<String> = BTreeSet::new();
    c.for_each_slice("dispositions", &[col("run_id")], |slice| {
        for id in str_column(&slice, "run_id")?.iter().flatten() {
            if other.binary_search(&id_digest(id)).is_err() {
                first.insert(id.to_string());
                if first.len() > n {
                    first.pop_last();
                }
            }
        }
        Ok(())
    })?;
    Ok(first.into_iter().collect())
}

/// Keys of `a` that `b` lacks. Run-scoped keys count only for runs present in both corpora.
fn only_in(a: &KeyTable, b: &KeyTable, shared_run: &dyn Fn(&str) -> bool) -> Vec<KeyChange> {
    let mut out: Vec<KeyChange> = a
        .iter()
        .filter(|(k, v)| !b.contains_key(*k) && (v.0 == "corpus" || shared_run(&k.1)))
        .map(|((check, key), (scope, n, runs, wasted))| KeyChange {
            check: check.clone(),
            key: key.clone(),
            scope: scope.to_string(),
            findings: *n,
            runs: runs.len() as u64,
            wasted_landings: *wasted,
        })
        .collect();
    out.sort_by(|x, y| {
        (y.wasted_landings, y.findings, &x.check, &x.key).cmp(&(
            x.wasted_landings,
            x.findings,
            &y.check,
            &y.key,
        ))
    });
    out
}

/// Options of `build`.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    pub by: Option<GroupBy>,
    pub rules: Rules,
    /// Keys listed in each direction.
    pub top: usize,
}

/// Compare two corpora.
pub fn build(base: &CorpusDir, cand: &CorpusDir, opts: &DiffOptions) -> io::Result<Diff> {
    let mut notes = Vec::new();
    let mut checks = base.checks();
    for c in cand.checks() {
        if !checks.contains(&c) {
            checks.push(c);
        }
    }
    for c in &checks {
        match (base.checks().contains(c), cand.checks().contains(c)) {
            (true, false) => notes.push(format!("check {c} ran only in the baseline")),
            (false, true) => notes.push(format!("check {c} ran only in the candidate")),
            _ => {}
        }
    }
    let (bi, ci) = (info(base), info(cand));
    if bi.config_hash != ci.config_hash {
        notes.push(
            "the two corpora were audited with different configurations (config_hash differs)"
                .into(),
        );
    }
    if bi.engine_version != ci.engine_version {
        notes.push(format!(
            "engine versions differ: {} vs {}",
            bi.engine_version, ci.engine_version
        ));
    }
    let rows = changes(
        &group_counts(base, None)?,
        &group_counts(cand, None)?,
        &checks,
        &opts.rules,
    );
    let groups = match &opts.by {
        None => Vec::new(),
        Some(by) => changes(
            &group_counts(base, Some(by))?,
            &group_counts(cand, Some(by))?,
            &checks,
            &opts.rules,
        ),
    };
    let (base_runs, cand_runs) = (id_digests(base)?, id_digests(cand)?);
    let both = shared_digests(&base_runs, &cand_runs);
    let runs = RunPresence {
        both,
        only_baseline: base_runs.len() as u64 - both,
        only_candidate: cand_runs.len() as u64 - both,
        only_baseline_sample: if base_runs.len() as u64 > both {
            first_runs_missing(base, &cand_runs, 5)?
        } else {
            Vec::new()
        },
        only_candidate_sample: if cand_runs.len() as u64 > both {
            first_runs_missing(cand, &base_runs, 5)?
        } else {
            Vec::new()
        },
    };
    if both == 0 {
        notes.push(
            "no run is in both corpora: findings keyed by run (not by tool call) are not \
             compared"
                .into(),
        );
    }
    let (bk, ck) = (keys(base)?, keys(cand)?);
    let shared_run = |id: &str| {
        let d = id_digest(id);
        base_runs.binary_search(&d).is_ok() && cand_runs.binary_search(&d).is_ok()
    };
    let mut appeared = only_in(&ck, &bk, &shared_run);
    let mut vanished = only_in(&bk, &ck, &shared_run);
    let (appeared_total, vanished_total) = (appeared.len() as u64, vanished.len() as u64);
    appeared.truncate(opts.top);
    vanished.truncate(opts.top);

    let mut regressions = Vec::new();
    for r in rows.iter().chain(&groups).filter(|r| r.regression) {
        let what = if r.group == ALL {
            r.check.clone()
        } else {
            format!("{} in {}", r.check, r.group)
        };
        regressions.push(format!(
            "{what}: fail rate {} -> {} ({:+.1} pp, 95% CI {}), past rate={}",
            crate::report::text::pct(r.baseline.rate) + "%",
            crate::report::text::pct(r.candidate.rate) + "%",
            r.change.unwrap_or(0.0) * 100.0,
            pp_interval(r.ci_low.zip(r.ci_high)),
            opts.rules.rate_pp.unwrap_or(0.0)
        ));
    }
    if let Some(n) = opts.rules.new_keys {
        if appeared_total >= n {
            regressions.push(format!(
                "{appeared_total} finding key(s) only in the candidate, past new-keys={n}"
            ));
        }
    }
    Ok(Diff {
        baseline: bi,
        candidate: ci,
        by: opts.by.clone(),
        rules: opts.rules.clone(),
        interval: INTERVAL,
        checks: rows,
        groups,
        appeared,
        vanished,
        appeared_total,
        vanished_total,
        runs,
        regressions,
        notes,
    })
}

/// An interval of a change, in signed percentage points.
pub fn pp_interval(ci: Option<(f64, f64)>) -> String {
    ci.map(|(lo, hi)| format!("[{:+.1}, {:+.1}]", lo * 100.0, hi * 100.0))
        .unwrap_or_else(|| "-".into())
}

/// A change of a rate in signed percentage points, `-` when either side has no rate.
pub fn pp_change(change: Option<f64>) -> String {
    change
        .map(|d| format!("{:+.1}", d * 100.0))
        .unwrap_or_else(|| "-".into())
}

fn side(s: &Side) -> String {
    match s.rate {
        Some(r) => format!("{:.1}% ({}/{})", r * 100.0, s.fail, s.checked),
        None => format!("- (0/{})", s.checked),
    }
}

/// The diff's tables, every cell computed once: Markdown and the HTML page lay these out (JSON
/// is the [`Diff`] itself).
#[derive(Debug, Clone, PartialEq)]
pub struct DiffRows {
    /// A row per check, `c-N` on the page, flagged where the rate rule fired.
    pub checks: Table,
    /// With `--by`: the grouping's name, and a row per check and group (`g-N`).
    pub groups: Option<(String, Table)>,
    /// The finding keys only in the candidate, and only in the baseline (the first `--top`).
    pub appeared: Table,
    pub vanished: Table,
}

impl DiffRows {
    pub fn of(d: &Diff) -> DiffRows {
        DiffRows {
            checks: change_table(&d.checks, None, "c"),
            groups: d.by.as_ref().map(|by| {
                let label = by.label();
                let table = change_table(&d.groups, Some(&label), "g");
                (label, table)
            }),
            appeared: key_table(&d.appeared),
            vanished: key_table(&d.vanished),
        }
    }

    /// The ids of the rows the rate rule flagged, checks first: the order `build` words those
    /// regressions in.
    pub fn flagged_ids(&self) -> Vec<&str> {
        let groups = self.groups.iter().flat_map(|(_, t)| &t.rows);
        self.checks
            .rows
            .iter()
            .chain(groups)
            .filter(|r| r.flagged)
            .filter_map(|r| r.id.as_deref())
            .collect()
    }
}

/// Rate changes as rows `{prefix}-N`, led by their group under `group`'s header when grouped.
fn change_table(rows: &[RateChange], group: Option<&str>, prefix: &str) -> Table {
    let mut columns = Vec::new();
    if let Some(g) = group {
        columns.push(Column::text(g, 0).code(60, 120));
    }
    columns.extend([
        Column::text("check", 0).code(40, 60),
        Column::number("baseline fail %", 0),
        Column::number("candidate fail %", 0),
        Column::number("change (pp)", 0),
        Column::text("95% CI (pp)", 0),
        Column::text("", 0),
    ]);
    let rows = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut cells = Vec::new();
            if group.is_some() {
                cells.push(Cell::recorded(&r.group));
            }
            cells.extend([
                Cell::recorded(&r.check),
                Cell::Value(side(&r.baseline)),
                Cell::Value(side(&r.candidate)),
                Cell::Value(pp_change(r.change)),
                Cell::Value(pp_interval(r.ci_low.zip(r.ci_high))),
                match r.regression {
                    true => Cell::Mark {
                        plain: "regression",
                        html: "<span class=\"flagword\">regression</span>",
                    },
                    false => Cell::Missing,
                },
            ]);
            Row {
                cells,
                id: Some(format!("{prefix}-{}", i + 1)),
                flagged: r.regression,
                rest: None,
            }
        })
        .collect();
    Table::new(columns, rows)
}

/// The columns of a key table that Markdown's key lines name.
const KEY_CHECK: usize = 0;
const KEY_KEY: usize = 1;
const KEY_FINDINGS: usize = 3;
const KEY_RUNS: usize = 4;
const KEY_WASTED: usize = 5;

fn key_table(list: &[KeyChange]) -> Table {
    let columns = vec![
        Column::text("check", 0).code(40, 60),
        Column::text("key", 0).code(100, 160),
        Column::text("scope", 0),
        Column::number("findings", 0),
        Column::number("runs", 0),
        Column::number("wasted landings", 0),
    ];
    let rows = list
        .iter()
        .map(|k| {
            Row::of(vec![
                Cell::recorded(&k.check),
                Cell::recorded(&k.key),
                Cell::Value(k.scope.clone()),
                Cell::value(k.findings),
                Cell::value(k.runs),
                Cell::count(k.wasted_landings),
            ])
        })
        .collect();
    Table::new(columns, rows)
}

/// A key of a key table as a Markdown line.
fn key_line(t: &Table, row: &Row) -> String {
    let cell = |k: usize| md_cell(&t.columns[k], &row.cells[k]);
    let wasted = match &row.cells[KEY_WASTED] {
        Cell::Value(w) => format!(", {w} wasted landings"),
        _ => String::new(),
    };
    format!(
        "{} {}: {} finding(s) in {} run(s){wasted}",
        cell(KEY_CHECK),
        cell(KEY_KEY),
        cell(KEY_FINDINGS),
        cell(KEY_RUNS)
    )
}

/// The diff as Markdown for a pull request or a chat message.
pub fn render_markdown(d: &Diff) -> String {
    let rows = DiffRows::of(d);
    let mut o = String::new();
    let verdict = if d.is_regression() {
        "REGRESSION"
    } else {
        "no regression"
    };
    o.push_str(&format!(
        "## traceaudit diff: {verdict}\n\nBaseline {} ({} runs, {} findings) vs candidate {} ({} runs, {} findings). Runs in both: {}; only in the baseline: {}; only in the candidate: {}.\n\n",
        md_code(&d.baseline.name, 60),
        d.baseline.runs,
        d.baseline.findings,
        md_code(&d.candidate.name, 60),
        d.candidate.runs,
        d.candidate.findings,
        d.runs.both,
        d.runs.only_baseline,
        d.runs.only_candidate,
    ));
    if d.is_regression() {
        o.push_str("**Regressions**\n\n");
        for r in &d.regressions {
            o.push_str(&format!("- {}\n", md_text(r, 300)));
        }
        o.push('\n');
    }
    o.push_str("### Fail rate per check\n\n");
    o.push_str(&rows.checks.markdown());
    if let Some((label, groups)) = &rows.groups {
        o.push_str(&format!("\n### Per {label}\n\n"));
        o.push_str(&groups.markdown());
    }
    o.push_str(&format!(
        "\nfail % = checked-fail among checked runs. Change = candidate minus baseline, in percentage points; interval: {}. Rules: `{}` (rate=PP: a rise of more than PP points whose interval lies above zero; new-keys=N: N or more finding keys only in the candidate).\n",
        d.interval,
        d.rules.describe()
    ));
    let keys = |o: &mut String, title: &str, t: &Table, total: u64| {
        o.push_str(&format!("\n### {title} ({total})\n\n"));
        if t.is_empty() {
            o.push_str("None.\n");
        }
        for row in &t.rows {
            o.push_str(&format!("- {}\n", key_line(t, row)));
        }
        if total > t.rows.len() as u64 {
            o.push_str(&format!("- … and {} more\n", total - t.rows.len() as u64));
        }
    };
    keys(
        &mut o,
        "Finding keys only in the candidate",
        &rows.appeared,
        d.appeared_total,
    );
    keys(
        &mut o,
        "Finding keys only in the baseline",
        &rows.vanished,
        d.vanished_total,
    );
    o.push_str("\nKeys: `tool:argsFingerprint` for repeated calls (compared across the whole corpus), the run id for other findings (compared over runs in both corpora).\n");
    md_runs_and_notes(d, &mut o);
    o
}

/// Markdown's runs present in one corpus only, and the notes.
fn md_runs_and_notes(d: &Diff, o: &mut String) {
    if d.runs.only_baseline + d.runs.only_candidate > 0 {
        o.push_str("\n### Runs in only one corpus\n\n");
        let list = |v: &[String]| {
            v.iter()
                .map(|s| md_code(s, 80))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if d.runs.only_baseline > 0 {
            o.push_str(&format!(
                "- only in the baseline: {} ({}{})\n",
                d.runs.only_baseline,
                list(&d.runs.only_baseline_sample),
                if d.runs.only_baseline > 5 {
                    ", …"
                } else {
                    ""
                }
            ));
        }
        if d.runs.only_candidate > 0 {
            o.push_str(&format!(
                "- only in the candidate: {} ({}{})\n",
                d.runs.only_candidate,
                list(&d.runs.only_candidate_sample),
                if d.runs.only_candidate > 5 {
                    ", …"
                } else {
                    ""
                }
            ));
        }
    }
    if !d.notes.is_empty() {
        o.push('\n');
        for n in &d.notes {
            o.push_str(&format!("- note: {}\n", md_text(n, 300)));
        }
    }
}

/// A one-line verdict for stderr.
pub fn verdict_line(d: &Diff) -> String {
    if d.is_regression() {
        format!(
            "traceaudit diff: regression ({} rule(s) fired: {})",
            d.regressions.len(),
            fit(&d.regressions.join("; "), 300)
        )
    } else {
        "traceaudit diff: no regression".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key's runs are counted once each, whether it falls in one run or in many.
    #[test]
    fn a_run_set_counts_distinct_runs() {
        let mut runs = RunSet::default();
        assert_eq!(runs.len(), 0);
        for (run, len) in [(7, 1), (7, 1), (3, 2), (7, 2), (9, 3), (3, 3)] {
            runs.insert(run);
            assert_eq!(runs.len(), len, "after {run}");
        }
    }

    #[test]
    fn rules_parse() {
        let r = Rules::parse(DEFAULT_RULES).unwrap();
        assert_eq!(r.rate_pp, Some(2.0));
        assert_eq!(r.new_keys, Some(1));
        assert_eq!(Rules::parse("none").unwrap().describe(), "none");
        assert_eq!(Rules::parse("rate=0.5pp").unwrap().rate_pp, Some(0.5));
        assert!(Rules::parse("rate=abc").is_err());
        assert!(Rules::parse("loops=3").is_err());
        assert_eq!(Rules::parse("new-keys=0").unwrap().new_keys, None);
        // An unset variable is not "no rules": only `none` turns the gate off.
        for empty in ["", " ", ",", " , "] {
            let err = Rules::parse(empty).expect_err(empty).to_string();
            assert!(err.contains("names no rule"), "{err}");
        }
    }

    #[test]
    fn runs_compared_as_digests_in_slices_are_those_of_the_id_sets() {
        let dir = tempfile::tempdir().unwrap();
        let whole = crate::report::groups::tests::audited(&["testdata"], &dir.path().join("a"));
        let some = crate::report::groups::tests::audited(
            &[
                "testdata/tau2",
                "testdata/agentfootprint",
                "testdata/swe-agent",
            ],
            &dir.path().join("b"),
        );
        let (base, cand) = (
            CorpusDir::open(&whole).unwrap(),
            CorpusDir::open(&some).unwrap(),
        );
        let ids = |c: &CorpusDir| -> BTreeSet<String> {
            let df = c.table("dispositions").unwrap().collect().unwrap();
            strings(&df, "run_id").unwrap().into_iter().collect()
        };
        let (b, c) = (ids(&base), ids(&cand));
        let opts = DiffOptions {
            by: None,
            rules: Rules::parse("none").unwrap(),
            top: 20,
        };
        let d = build(&base, &cand, &opts).unwrap();
        assert!(d.runs.both > 0 && d.runs.only_baseline > 0, "{:?}", d.runs);
        assert_eq!(d.runs.both, b.intersection(&c).count() as u64);
        assert_eq!(d.runs.only_baseline, b.difference(&c).count() as u64);
        assert_eq!(d.runs.only_candidate, c.difference(&b).count() as u64);
        let first: Vec<String> = b.difference(&c).take(5).cloned().collect();
        assert_eq!(d.runs.only_baseline_sample, first);
        assert!(d.runs.only_candidate_sample.is_empty());
        // The other way round.
        let d = build(&cand, &base, &opts).unwrap();
        assert_eq!(d.runs.only_candidate_sample, first);
        assert_eq!(d.runs.only_candidate, b.difference(&c).count() as u64);
    }
}
