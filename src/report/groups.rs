//! Disposition counts per check, optionally per group of runs. The groups come from run
//! attributes the corpus does not carry: `agent`, `model` and `day` (UTC date of `started_at`)
//! are joined from the store's runs files; `tool` pairs runs with the tools they landed
//! (store events) and counts a run as failed for a tool when one of the check's findings names
//! that tool.

use crate::corpus::CHECK_COLUMN;
use crate::error::Error;
use crate::report::corpus::{counts, pl, str_column, strings, strs, CorpusDir};
use hashbrown::HashMap;
use polars::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
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

/// The group labels of runs, keyed by a digest of the run id: built from the store's runs (or
/// events) a file at a time, then looked up for each row of a corpus slice. A run has one
/// label for an attribute of the run, and one for each tool it landed.
struct RunLabels {
    labels: Vec<String>,
    /// (run digest, label index), sorted, each pair once.
    pairs: Vec<(u128, u32)>,
}

impl RunLabels {
    /// The labels of `(run_id, group)` frames (null groups left out).
    fn build(frames: impl Iterator<Item = io::Result<DataFrame>>) -> io::Result<RunLabels> {
        let mut index: HashMap<String, u32> = HashMap::new();
        let mut labels = Vec::new();
        let mut pairs = Vec::new();
        for df in frames {
            let df = df?;
            let groups = str_column(&df, "group")?;
            for (run, group) in str_column(&df, "run_id")?.iter().zip(groups.iter()) {
                let (Some(run), Some(group)) = (run, group) else {
                    continue;
                };
                let at = match index.get(group) {
                    Some(at) => *at,
                    None => {
                        labels.push(group.to_string());
                        index.insert(group.to_string(), labels.len() as u32 - 1);
                        labels.len() as u32 - 1
                    }
                };
                pairs.push((id_digest(run), at));
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        Ok(RunLabels { labels, pairs })
    }

    /// The labels of run `digest`.
    fn of(&self, digest: u128) -> impl Iterator<Item = &str> {
        let from = self.pairs.partition_point(|p| p.0 < digest);
        self.pairs[from..]
            .iter()
            .take_while(move |p| p.0 == digest)
            .map(|p| self.labels[p.1 as usize].as_str())
    }
}

/// An id (a run's or a conversation's) as 128 bits: a report holds the ids of a corpus as these
/// (16 bytes each) rather than as strings. Two SipHash-1-3 values of the id under two prefixes,
/// fixed keys: a digest is only compared with others made by the same build, and SipHash is
/// several times cheaper than SHA-256 here (a digest is made for every disposition row); two
/// ids of one digest are not expected in practice.
pub fn id_digest(id: &str) -> u128 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let half = |prefix: u8| {
        let mut h = DefaultHasher::new();
        prefix.hash(&mut h);
        id.hash(&mut h);
        h.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

/// The labels of the runs for the groupings joined from the store's runs (agent, model, day,
/// partition); `None` for source and no grouping (the corpus tables carry `source`).
fn run_groups(corpus: &CorpusDir, by: &GroupBy) -> io::Result<Option<RunLabels>> {
    let expr = match by {
        GroupBy::Agent => col("agent"),
        GroupBy::Model => col("model"),
        GroupBy::Day => col("started_at").dt().strftime("%Y-%m-%d"),
        GroupBy::Partition(key) => return partition_groups(corpus, key).map(Some),
        GroupBy::Source | GroupBy::Tool => return Ok(None),
    };
    let files = corpus.runs_by_file()?;
    let frames = files.into_iter().map(|runs| {
        runs.select([
            col("run_id"),
            expr.clone().cast(DataType::String).alias("group"),
        ])
        .collect()
        .map_err(pl)
    });
    RunLabels::build(frames).map(Some)
}

/// The value of the partition `key` of each run whose path has one. Refused when the store
/// predates partition values, and when no run has the key (a mistyped key would otherwise put
/// every run in one unrecorded group), naming the keys there are.
fn partition_groups(corpus: &CorpusDir, key: &str) -> io::Result<RunLabels> {
    let files = corpus.runs_by_file()?;
    let mut keys: BTreeSet<String> = BTreeSet::new();
    let mut frames = Vec::new();
    for runs in files {
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
                    .cast(DataType::String)
                    .alias("group"),
            ])
            .collect()
            .map_err(pl)?;
        keys.extend(strs(&pairs, "key")?.into_iter().flatten());
        frames.push(
            pairs
                .lazy()
                .filter(col("key").eq(lit(key.to_string())))
                .select([col("run_id"), col("group")])
                .collect()
                .map_err(pl),
        );
    }
    if !keys.contains(key) {
        let found = if keys.is_empty() {
            "no run's input path has any `key=value` folder".to_string()
        } else {
            let keys: Vec<String> = keys.into_iter().collect();
            format!("the keys there are: {}", keys.join(", "))
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--by partition:{key}: no run's input path has a `{key}=` folder; {found}"),
        ));
    }
    RunLabels::build(frames.into_iter())
}

/// Disposition counts and finding rows per (check, group), as they are added up: keyed by
/// check, then group, so a row is counted without making its key's strings.
#[derive(Default)]
struct Tally(HashMap<String, HashMap<String, GroupCounts>>);

impl Tally {
    fn entry(&mut self, check: &str, group: &str) -> &mut GroupCounts {
        self.0
            .entry_ref(check)
            .or_default()
            .entry_ref(group)
            .or_insert_with(|| GroupCounts {
                check: check.to_string(),
                group: group.to_string(),
                ..GroupCounts::default()
            })
    }

    fn get_mut(&mut self, check: &str, group: &str) -> Option<&mut GroupCounts> {
        self.0.get_mut(check)?.get_mut(group)
    }

    /// Count `n` runs of `check` in `group` with `disposition`.
    fn add_disposition(&mut self, check: &str, group: &str, disposition: &str, n: u64) {
        let total = self.entry(check, group);
        total.runs += n;
        match disposition {
            "checked-pass" => total.checked_pass += n,
            "checked-fail" => total.checked_fail += n,
            "not-applicable" => total.not_applicable += n,
            "unreachable" => total.unreachable += n,
            _ => {}
        }
    }

    fn rows(self, checks: &[String]) -> Vec<GroupCounts> {
        let mut rows: Vec<GroupCounts> =
            self.0.into_values().flat_map(|g| g.into_values()).collect();
        sort_rows(&mut rows, checks);
        rows
    }
}

/// The group labels of a row for `by`: `source` is the row's, `labels` the runs' (for the
/// joined groupings); a run without one is unrecorded.
fn labels_of<'a>(
    by: Option<&GroupBy>,
    labels: Option<&'a RunLabels>,
    run: Option<&str>,
    source: Option<&'a str>,
    out: &mut Vec<&'a str>,
) {
    out.clear();
    match (by, labels) {
        (None, _) => out.push(ALL),
        (Some(_), Some(labels)) => out.extend(labels.of(id_digest(run.unwrap_or_default()))),
        (Some(_), None) => out.extend(source),
    }
    if out.is_empty() {
        out.push(UNRECORDED);
    }
}

/// Per check and group: disposition counts and finding rows, checks in registry order, groups
/// by label. The dispositions and findings are read a slice at a time; the store's runs are
/// held as digests with their labels.
pub fn group_counts(corpus: &CorpusDir, by: Option<&GroupBy>) -> io::Result<Vec<GroupCounts>> {
    if by == Some(&GroupBy::Tool) {
        return tool_counts(corpus);
    }
    let labels = match by {
        Some(by) => run_groups(corpus, by)?,
        None => None,
    };
    let mut tally = Tally::default();
    if by.is_none() {
        // Counted when the corpus was opened.
        for ((check, disposition), n) in corpus.disposition_counts() {
            tally.add_disposition(check, ALL, disposition, *n);
        }
    } else {
        let read = [
            col("run_id"),
            col("source"),
            col(CHECK_COLUMN),
            col("disposition"),
        ];
        corpus.for_each_slice("dispositions", &read, |slice| {
            let runs = str_column(&slice, "run_id")?;
            let sources = str_column(&slice, "source")?;
            let checks = str_column(&slice, CHECK_COLUMN)?;
            let dispositions = str_column(&slice, "disposition")?;
            let mut groups = Vec::new();
            let rows = runs
                .iter()
                .zip(sources.iter())
                .zip(checks.iter())
                .zip(dispositions.iter());
            for (((run, source), check), disposition) in rows {
                labels_of(by, labels.as_ref(), run, source, &mut groups);
                for group in &groups {
                    let (check, disposition) =
                        (check.unwrap_or_default(), disposition.unwrap_or_default());
                    tally.add_disposition(check, group, disposition, 1);
                }
            }
            Ok(())
        })?;
    }
    let read = [col("run_id"), col("source"), col(CHECK_COLUMN)];
    corpus.for_each_slice("findings", &read, |slice| {
        let runs = str_column(&slice, "run_id")?;
        let sources = str_column(&slice, "source")?;
        let checks = str_column(&slice, CHECK_COLUMN)?;
        let mut groups = Vec::new();
        for ((run, source), check) in runs.iter().zip(sources.iter()).zip(checks.iter()) {
            labels_of(by, labels.as_ref(), run, source, &mut groups);
            for group in &groups {
                // Findings count where their runs have dispositions (every run has one per
                // check).
                if let Some(total) = tally.get_mut(check.unwrap_or_default(), group) {
                    total.findings += 1;
                }
            }
        }
        Ok(())
    })?;
    Ok(tally.rows(&corpus.checks()))
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
    let mut named: BTreeMap<String, u64> = BTreeMap::new();
    corpus.for_each_slice(
        "findings",
        &[col(CHECK_COLUMN), col("tool_name")],
        |slice| {
            let df = slice
                .lazy()
                .group_by([col(CHECK_COLUMN)])
                .agg([col("tool_name")
                    .is_not_null()
                    .cast(DataType::UInt64)
                    .sum()
                    .alias("named")])
                .collect()
                .map_err(pl)?;
            for (check, n) in strings(&df, CHECK_COLUMN)?
                .into_iter()
                .zip(counts(&df, "named")?)
            {
                *named.entry(check).or_default() += n;
            }
            Ok(())
        },
    )?;
    let (with, without): (Vec<_>, Vec<_>) = named.into_iter().partition(|(_, n)| *n > 0);
    Ok((
        with.into_iter().map(|(c, _)| c).collect(),
        without.into_iter().map(|(c, _)| c).collect(),
    ))
}

/// The checks `--by tool` leaves out: they filed findings but none names a tool.
pub fn checks_without_tools(corpus: &CorpusDir) -> io::Result<Vec<String>> {
    let mut without = tool_scoped_checks(corpus)?.1;
    let checks = corpus.checks();
    without.sort_by_key(|c| checks.iter().position(|x| x == c));
    Ok(without)
}

/// Per check and tool: runs that landed the tool, by disposition; a run counts as failed for
/// the tool when one of the check's findings in it names the tool. The store's landings are
/// held as run digests with their tools; the dispositions read a slice at a time.
fn tool_counts(corpus: &CorpusDir) -> io::Result<Vec<GroupCounts>> {
    let excluded = tool_scoped_checks(corpus)?.1;
    let files = corpus.events_by_file()?;
    let landings = RunLabels::build(files.into_iter().map(|events| {
        events
            .filter(
                col("kind")
                    .eq(lit("landing"))
                    .and(col("tool_name").is_not_null()),
            )
            .select([col("run_id"), col("tool_name").alias("group")])
            .collect()
            .map_err(pl)
    }))?;
    let mut tally = Tally::default();
    let read = [col("run_id"), col(CHECK_COLUMN), col("disposition")];
    corpus.for_each_slice("dispositions", &read, |slice| {
        let runs = str_column(&slice, "run_id")?;
        let checks = str_column(&slice, CHECK_COLUMN)?;
        let dispositions = str_column(&slice, "disposition")?;
        for ((run, check), disposition) in runs.iter().zip(checks.iter()).zip(dispositions.iter()) {
            let check = check.unwrap_or_default();
            if excluded.iter().any(|c| c == check) {
                continue;
            }
            // Runs that landed no tool are in no group.
            for tool in landings.of(id_digest(run.unwrap_or_default())) {
                tally.add_disposition(check, tool, disposition.unwrap_or_default(), 1);
            }
        }
        Ok(())
    })?;
    // Finding rows per check and tool, and the runs they fall in (a run is counted once
    // whichever slices its findings are read in).
    let mut findings: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut failed: BTreeSet<(String, String, String)> = BTreeSet::new();
    let read = [col(CHECK_COLUMN), col("tool_name"), col("run_id")];
    corpus.for_each_slice("findings", &read, |slice| {
        for ((check, tool), run) in strings(&slice, CHECK_COLUMN)?
            .into_iter()
            .zip(strs(&slice, "tool_name")?)
            .zip(strings(&slice, "run_id")?)
        {
            let Some(tool) = tool else { continue };
            *findings.entry((check.clone(), tool.clone())).or_default() += 1;
            failed.insert((check, tool, run));
        }
        Ok(())
    })?;
    let mut failed_runs: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (check, tool, _) in failed {
        *failed_runs.entry((check, tool)).or_default() += 1;
    }
    let mut rows = tally.rows(&corpus.checks());
    for r in &mut rows {
        let checked = r.checked();
        let key = (r.check.clone(), r.group.clone());
        r.findings = findings.get(&key).copied().unwrap_or(0);
        r.checked_fail = failed_runs.get(&key).copied().unwrap_or(0).min(checked);
        r.checked_pass = checked - r.checked_fail;
    }
    Ok(rows)
}

#[cfg(test)]
pub(crate) mod tests {
    //! Unit tests read corpus tables five rows at a time ([`crate::report::corpus::SLICE_ROWS`]),
    //! so the sample corpus (534 disposition rows) is read in over a hundred slices.
    use super::*;
    use crate::report::corpus::u64s;
    use std::path::{Path, PathBuf};

    pub(crate) fn audited(inputs: &[&str], dir: &Path) -> PathBuf {
        let (config, text) = crate::Config::load(Path::new("testdata/traceaudit.toml")).unwrap();
        let opts = crate::AuditOptions {
            config,
            config_text: Some(text),
            threads: 2,
            ..crate::AuditOptions::default()
        };
        let out = dir.join("corpus");
        let inputs: Vec<PathBuf> = inputs.iter().map(PathBuf::from).collect();
        crate::audit(&inputs, &out, &opts).unwrap();
        out
    }

    #[test]
    fn counts_read_in_slices_are_the_ledgers_and_every_grouping_adds_up_to_them() {
        let dir = tempfile::tempdir().unwrap();
        let corpus = CorpusDir::open(&audited(&["testdata"], dir.path())).unwrap();
        let ledger = corpus.table("ledger").unwrap().collect().unwrap();
        let checks = strings(&ledger, CHECK_COLUMN).unwrap();
        let column = |name: &str| counts(&ledger, name).unwrap();
        let (checked, passed) = (column("checked"), column("passed"));
        let (na, unreachable, findings) = (
            column("not_applicable"),
            column("unreachable"),
            column("finding_rows"),
        );
        let all = group_counts(&corpus, None).unwrap();
        assert_eq!(all.len(), 3);
        for (i, check) in checks.iter().enumerate() {
            let row = all.iter().find(|r| &r.check == check).unwrap();
            assert_eq!(row.group, ALL);
            assert_eq!(row.runs, 178, "{check}");
            assert_eq!(row.checked_pass, passed[i], "{check}");
            assert_eq!(row.checked_fail, checked[i] - passed[i], "{check}");
            assert_eq!(row.not_applicable, na[i], "{check}");
            assert_eq!(row.unreachable, unreachable[i], "{check}");
            assert_eq!(row.findings, findings[i], "{check}");
        }
        // A run has one agent, model, day and source (or none recorded): each grouping splits
        // the same totals.
        for by in [
            GroupBy::Source,
            GroupBy::Agent,
            GroupBy::Model,
            GroupBy::Day,
        ] {
            let rows = group_counts(&corpus, Some(&by)).unwrap();
            assert!(rows.len() > 3, "{by:?} makes more than one group");
            for total in &all {
                let of = rows.iter().filter(|r| r.check == total.check);
                let sum = of.fold(GroupCounts::default(), |mut s, r| {
                    s.runs += r.runs;
                    s.checked_pass += r.checked_pass;
                    s.checked_fail += r.checked_fail;
                    s.not_applicable += r.not_applicable;
                    s.unreachable += r.unreachable;
                    s.findings += r.findings;
                    s
                });
                let got = (
                    sum.runs,
                    sum.checked_pass,
                    sum.checked_fail,
                    sum.not_applicable,
                    sum.unreachable,
                    sum.findings,
                );
                let want = (
                    total.runs,
                    total.checked_pass,
                    total.checked_fail,
                    total.not_applicable,
                    total.unreachable,
                    total.findings,
                );
                assert_eq!(got, want, "{by:?} {}", total.check);
            }
        }
    }

    #[test]
    fn tool_counts_read_in_slices_are_those_of_the_whole_tables() {
        let dir = tempfile::tempdir().unwrap();
        let corpus = CorpusDir::open(&audited(&["testdata"], dir.path())).unwrap();
        let got = group_counts(&corpus, Some(&GroupBy::Tool)).unwrap();
        // The same counts from the whole tables at once, joined by Polars.
        let run_tools = corpus
            .events()
            .unwrap()
            .filter(
                col("kind")
                    .eq(lit("landing"))
                    .and(col("tool_name").is_not_null()),
            )
            .select([col("run_id"), col("tool_name").alias("group")])
            .unique(None, UniqueKeepStrategy::Any);
        let is = |d: &str| col("disposition").eq(lit(d)).cast(DataType::UInt64).sum();
        let whole = corpus
            .table("dispositions")
            .unwrap()
            .inner_join(run_tools, col("run_id"), col("run_id"))
            .group_by([col(CHECK_COLUMN), col("group")])
            .agg([len().alias("runs"), is("not-applicable").alias("na")])
            .sort([CHECK_COLUMN, "group"], SortMultipleOptions::default())
            .collect()
            .unwrap();
        let excluded = checks_without_tools(&corpus).unwrap();
        let mut want: Vec<(String, String, u64, u64)> = strings(&whole, CHECK_COLUMN)
            .unwrap()
            .into_iter()
            .zip(strings(&whole, "group").unwrap())
            .zip(u64s(&whole, "runs").unwrap())
            .zip(u64s(&whole, "na").unwrap())
            .filter(|(((c, _), _), _)| !excluded.contains(c))
            .map(|(((c, g), n), na)| (c, g, n.unwrap(), na.unwrap()))
            .collect();
        let mut have: Vec<(String, String, u64, u64)> = got
            .iter()
            .map(|r| (r.check.clone(), r.group.clone(), r.runs, r.not_applicable))
            .collect();
        want.sort();
        have.sort();
        assert!(have.len() > 5, "the sample lands several tools: {have:?}");
        assert_eq!(have, want);
    }
}
