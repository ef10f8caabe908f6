//! Disposition counts per check, optionally per group of runs. The groups come from run
//! attributes the corpus does not carry: `agent`, `model` and `day` (UTC date of `started_at`)
//! are joined from the store's runs files; `tool` pairs runs with the tools they landed
//! (store events) and counts a run as failed for a tool when one of the check's findings names
//! that tool.

use crate::corpus::CHECK_COLUMN;
use crate::error::Error;
use crate::report::corpus::{counts, pl, strings, CorpusDir};
use polars::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io;

/// How to group runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupBy {
    Agent,
    Model,
    Source,
    Day,
    Tool,
    /// One partition value of the runs' input paths (`day` of `.../day=2026-12-01/...`), from
    /// the store's `partitions`.
    Partition(String),
}

impl GroupBy {
    /// The names of the groupings without a value, as `--by` takes them.
    pub const NAMES: [&'static str; 5] = ["agent", "model", "source", "day", "tool"];

    /// How `--by` and the reports name it: `agent`, ..., `partition:KEY`.
    pub fn label(&self) -> String {
        match self {
            GroupBy::Agent => "agent".into(),
            GroupBy::Model => "model".into(),
            GroupBy::Source => "source".into(),
            GroupBy::Day => "day".into(),
            GroupBy::Tool => "tool".into(),
            GroupBy::Partition(key) => format!("partition:{key}"),
        }
    }

    /// The grouping a `--by` value names, or why it names none.
    pub fn parse(text: &str) -> crate::error::Result<GroupBy> {
        if let Some(key) = text.strip_prefix("partition:") {
            if key.is_empty() || key.contains(['/', '=']) {
                return Err(Error::Config(format!(
                    "`{text}`: a partition key is the part before `=` in a folder name, such \
                     as `day` in `day=2026-12-01`"
                )));
            }
            return Ok(GroupBy::Partition(key.to_string()));
        }
        Ok(match text {
            "agent" => GroupBy::Agent,
            "model" => GroupBy::Model,
            "source" => GroupBy::Source,
            "day" => GroupBy::Day,
            "tool" => GroupBy::Tool,
            _ => {
                return Err(Error::Config(format!(
                    "`{text}` is not a grouping: one of {}, or partition:KEY",
                    Self::NAMES.join(", ")
                )))
            }
        })
    }
}

impl Serialize for GroupBy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.label())
    }
}

/// The group label of runs that do not record the attribute.
pub const UNRECORDED: &str = "(unrecorded)";
/// The group label when there is no grouping.
pub const ALL: &str = "all";

/// Disposition counts of one check over one group of runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GroupCounts {
    pub check: String,
    pub group: String,
    pub runs: u64,
    pub checked_pass: u64,
    pub checked_fail: u64,
    pub not_applicable: u64,
    pub unreachable: u64,
    /// Finding rows filed in this group.
    pub findings: u64,
}

impl GroupCounts {
    pub fn checked(&self) -> u64 {
        self.checked_pass + self.checked_fail
    }
}

/// Run id to group label, as a lazy frame `(run_id, group)`; `None` for source and no grouping
/// (the corpus tables carry `source` themselves).
fn run_groups(corpus: &CorpusDir, by: &GroupBy) -> io::Result<Option<LazyFrame>> {
    let expr = match by {
        GroupBy::Agent => col("agent"),
        GroupBy::Model => col("model"),
        GroupBy::Day => col("started_at").dt().strftime("%Y-%m-%d"),
        GroupBy::Partition(key) => return partition_groups(corpus, key).map(Some),
        GroupBy::Source | GroupBy::Tool => return Ok(None),
    };
    Ok(Some(corpus.runs()?.select([
        col("run_id"),
        expr.cast(DataType::String).alias("group"),
    ])))
}

/// Run id to the value of the partition `key`, for the runs whose path has one. Refused when
/// the store predates partition values, and when no run has the key (a mistyped key would
/// otherwise put every run in one unrecorded group), naming the keys there are.
fn partition_groups(corpus: &CorpusDir, key: &str) -> io::Result<LazyFrame> {
    let runs = corpus.runs()?;
    let schema = runs.clone().collect_schema().map_err(pl)?;
    if schema.get("partitions").is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--by partition: the corpus's store predates partition values (store schema \
             version 7); ingest its inputs again to group by them",
        ));
    }
    let pairs = runs
        .select([col("run_id"), col("partitions")])
        .explode(
            cols(["partitions"]),
            ExplodeOptions {
                empty_as_null: false,
                keep_nulls: false,
            },
        )
        .select([
            col("run_id"),
            col("partitions")
                .struct_()
                .field_by_name("key")
                .alias("key"),
            col("partitions")
                .struct_()
                .field_by_name("value")
                .alias("group"),
        ]);
    let keys = pairs
        .clone()
        .select([col("key").unique().sort(Default::default())])
        .collect()
        .map_err(pl)?;
    let keys = strings(&keys, "key")?;
    if !keys.iter().any(|k| k == key) {
        let found = if keys.is_empty() {
            "no run's input path has any `key=value` folder".to_string()
        } else {
            format!("the keys there are: {}", keys.join(", "))
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--by partition:{key}: no run's input path has a `{key}=` folder; {found}"),
        ));
    }
    Ok(pairs
        .filter(col("key").eq(lit(key.to_string())))
        .select([col("run_id"), col("group").cast(DataType::String)]))
}

/// `lf` (which has `run_id` and `source`) with a `group` column for `by`.
pub fn with_group(
    corpus: &CorpusDir,
    lf: LazyFrame,
    by: Option<&GroupBy>,
) -> io::Result<LazyFrame> {
    let lf = match by {
        None => lf.with_column(lit(ALL).alias("group")),
        Some(GroupBy::Source) => lf.with_column(col("source").alias("group")),
        Some(GroupBy::Tool) => lf.with_column(col("tool_name").alias("group")),
        Some(by) => {
            let groups = run_groups(corpus, by)?.expect("joined attribute");
            lf.left_join(groups, col("run_id"), col("run_id"))
        }
    };
    Ok(lf.with_column(col("group").fill_null(lit(UNRECORDED))))
}

fn disposition_sums() -> [Expr; 5] {
    let is = |d: &str| col("disposition").eq(lit(d)).cast(DataType::UInt64).sum();
    [
        len().cast(DataType::UInt64).alias("runs"),
        is("checked-pass").alias("checked_pass"),
        is("checked-fail").alias("checked_fail"),
        is("not-applicable").alias("not_applicable"),
        is("unreachable").alias("unreachable"),
    ]
}

/// Per check and group: disposition counts and finding rows, checks in registry order, groups
/// by label.
pub fn group_counts(corpus: &CorpusDir, by: Option<&GroupBy>) -> io::Result<Vec<GroupCounts>> {
    if by == Some(&GroupBy::Tool) {
        return tool_counts(corpus);
    }
    let disp = with_group(corpus, corpus.table("dispositions")?, by)?
        .group_by([col(CHECK_COLUMN), col("group")])
        .agg(disposition_sums())
        .collect()
        .map_err(pl)?;
    let finds = with_group(
        corpus,
        corpus
            .table("findings")?
            .select([col("run_id"), col("source"), col(CHECK_COLUMN)]),
        by,
    )?
    .group_by([col(CHECK_COLUMN), col("group")])
    .agg([len().cast(DataType::UInt64).alias("findings")])
    .collect()
    .map_err(pl)?;
    let mut finding_rows: BTreeMap<(String, String), u64> = BTreeMap::new();
    for ((check, group), n) in strings(&finds, CHECK_COLUMN)?
        .into_iter()
        .zip(strings(&finds, "group")?)
        .zip(counts(&finds, "findings")?)
    {
        finding_rows.insert((check, group), n);
    }
    let mut rows = rows_of(&disp)?;
    for r in &mut rows {
        r.findings = finding_rows
            .get(&(r.check.clone(), r.group.clone()))
            .copied()
            .unwrap_or(0);
    }
    sort_rows(&mut rows, &corpus.checks());
    Ok(rows)
}

fn rows_of(df: &DataFrame) -> io::Result<Vec<GroupCounts>> {
    let check = strings(df, CHECK_COLUMN)?;
    let group = strings(df, "group")?;
    let runs = counts(df, "runs")?;
    let pass = counts(df, "checked_pass")?;
    let fail = counts(df, "checked_fail")?;
    let na = counts(df, "not_applicable")?;
    let unreachable = counts(df, "unreachable")?;
    Ok((0..df.height())
        .map(|i| GroupCounts {
            check: check[i].clone(),
            group: group[i].clone(),
            runs: runs[i],
            checked_pass: pass[i],
            checked_fail: fail[i],
            not_applicable: na[i],
            unreachable: unreachable[i],
            findings: 0,
        })
        .collect())
}

/// Checks in registry order (unknown ones after, by name), then groups by label.
pub fn sort_rows(rows: &mut [GroupCounts], checks: &[String]) {
    let order = |c: &str| checks.iter().position(|x| x == c).unwrap_or(usize::MAX);
    rows.sort_by(|a, b| {
        (order(&a.check), &a.check, &a.group).cmp(&(order(&b.check), &b.check, &b.group))
    });
}

/// The checks whose findings name a tool, and those that filed findings without one.
fn tool_scoped_checks(corpus: &CorpusDir) -> io::Result<(Vec<String>, Vec<String>)> {
    let df = corpus
        .table("findings")?
        .group_by([col(CHECK_COLUMN)])
        .agg([col("tool_name")
            .is_not_null()
            .cast(DataType::UInt64)
            .sum()
            .alias("named")])
        .collect()
        .map_err(pl)?;
    let mut with = Vec::new();
    let mut without = Vec::new();
    for (check, named) in strings(&df, CHECK_COLUMN)?
        .into_iter()
        .zip(counts(&df, "named")?)
    {
        if named > 0 {
            with.push(check);
        } else {
            without.push(check);
        }
    }
    Ok((with, without))
}

/// The checks `--by tool` leaves out: they filed findings but none names a tool.
pub fn checks_without_tools(corpus: &CorpusDir) -> io::Result<Vec<String>> {
    let mut without = tool_scoped_checks(corpus)?.1;
    let checks = corpus.checks();
    without.sort_by_key(|c| checks.iter().position(|x| x == c));
    Ok(without)
}

/// Per check and tool: runs that landed the tool, by disposition; a run counts as failed for
/// the tool when one of the check's findings in it names the tool.
fn tool_counts(corpus: &CorpusDir) -> io::Result<Vec<GroupCounts>> {
    let excluded = tool_scoped_checks(corpus)?.1;
    let run_tools = corpus
        .events()?
        .filter(
            col("kind")
                .eq(lit("landing"))
                .and(col("tool_name").is_not_null()),
        )
        .select([col("run_id"), col("tool_name").alias("group")])
        .unique(None, UniqueKeepStrategy::Any);
    let disp = corpus
        .table("dispositions")?
        .select([col("run_id"), col(CHECK_COLUMN), col("disposition")])
        .inner_join(run_tools, col("run_id"), col("run_id"))
        .group_by([col(CHECK_COLUMN), col("group")])
        .agg(disposition_sums())
        .collect()
        .map_err(pl)?;
    let findings = corpus
        .table("findings")?
        .filter(col("tool_name").is_not_null())
        .group_by([col(CHECK_COLUMN), col("tool_name").alias("group")])
        .agg([
            len().cast(DataType::UInt64).alias("findings"),
            col("run_id")
                .n_unique()
                .cast(DataType::UInt64)
                .alias("failed_runs"),
        ])
        .collect()
        .map_err(pl)?;
    let mut failed: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for (((check, group), n), runs) in strings(&findings, CHECK_COLUMN)?
        .into_iter()
        .zip(strings(&findings, "group")?)
        .zip(counts(&findings, "findings")?)
        .zip(counts(&findings, "failed_runs")?)
    {
        failed.insert((check, group), (n, runs));
    }
    let mut rows: Vec<GroupCounts> = rows_of(&disp)?
        .into_iter()
        .filter(|r| !excluded.contains(&r.check))
        .map(|mut r| {
            let checked = r.checked();
            let (n, runs) = failed
                .get(&(r.check.clone(), r.group.clone()))
                .copied()
                .unwrap_or((0, 0));
            r.findings = n;
            r.checked_fail = runs.min(checked);
            r.checked_pass = checked - r.checked_fail;
            r
        })
        .collect();
    sort_rows(&mut rows, &corpus.checks());
    Ok(rows)
}
