//! The findings a report page lists, and the runs it tells: per check and kind the worst and
//! newest findings first (a finding that contradicts before an advisory one, then the most
//! wasted landings or turns back, then the most recently started run), bounded per kind with
//! the count of the rest, and each listed finding's run told as `explain` tells it.

use crate::corpus::CHECK_COLUMN;
use crate::report::corpus::{columns, pl, str_column, strings, strs, u64s, CorpusDir};
use crate::report::explain::{self, ExplainOptions, Explanation};
use crate::report::groups::id_digest;
use crate::report::text::Preview;
use hashbrown::HashSet;
use polars::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::io;

/// Bounds of the listing.
#[derive(Debug, Clone, Copy)]
pub struct FindingsOptions {
    /// Findings listed per check and kind.
    pub per_kind: usize,
    /// How each listed finding's run is told.
    pub story: ExplainOptions,
}

impl Default for FindingsOptions {
    fn default() -> Self {
        FindingsOptions {
            per_kind: 20,
            story: ExplainOptions {
                preview: 160,
                max_steps: 30,
            },
        }
    }
}

/// One listed finding.
#[derive(Debug, Clone, PartialEq)]
pub struct FindingRow {
    pub finding_id: String,
    pub run_id: String,
    pub conversation_id: String,
    pub advisory: bool,
    pub tool: Option<String>,
    /// The finding's `key` column (repeated-call: `tool:argsFp:resultFp`).
    pub key: Option<String>,
    pub message: Preview,
    /// The run's start, as `explain` shows it.
    pub started_at: Option<String>,
    /// What ranks it within its kind: wasted landings (repeated-call) or turns back
    /// (prior-turn-evidence).
    pub weight: Option<u64>,
}

/// The findings of one check and kind.
#[derive(Debug, Clone, PartialEq)]
pub struct FindingGroup {
    pub check: String,
    pub kind: String,
    /// Findings of this kind in the corpus.
    pub total: u64,
    /// The first `per_kind` of them, worst and newest first.
    pub shown: Vec<FindingRow>,
}

/// The findings section of a report page.
#[derive(Debug, Clone, PartialEq)]
pub struct Findings {
    pub groups: Vec<FindingGroup>,
    /// The runs of the listed findings, in order of first listing.
    pub runs: Vec<Explanation>,
    /// What could not be shown, in words.
    pub notes: Vec<String>,
    /// The bounds it was built with.
    pub per_kind: usize,
    pub preview: usize,
    pub max_steps: usize,
}

/// Longest message kept for the listing (the page shows less).
const MESSAGE_CHARS: usize = 600;

/// `(run_id, started_at)` of the runs that have findings, one row a run (its first in the
/// store's runs files), the start as RFC 3339 text.
fn finding_run_starts(corpus: &CorpusDir, runs_files: &[LazyFrame]) -> io::Result<DataFrame> {
    let mut wanted: HashSet<u128> = HashSet::new();
    corpus.for_each_slice("findings", &[col("run_id")], |slice| {
        wanted.extend(
            str_column(&slice, "run_id")?
                .iter()
                .flatten()
                .map(id_digest),
        );
        Ok(())
    })?;
    // Each file's rows of those runs (a run's first row is its start: `remove` takes it off
    // the list); only they are formatted.
    let mut picked = Vec::new();
    for runs in runs_files {
        let df = runs
            .clone()
            .select([col("run_id"), col("started_at")])
            .collect()
            .map_err(pl)?;
        let rows: Vec<IdxSize> = str_column(&df, "run_id")?
            .iter()
            .enumerate()
            .filter(|(_, id)| id.is_some_and(|id| wanted.remove(&id_digest(id))))
            .map(|(i, _)| i as IdxSize)
            .collect();
        picked.push(
            df.take(&IdxCa::from_vec("rows".into(), rows))
                .map_err(pl)?
                .lazy(),
        );
    }
    if picked.is_empty() {
        return Err(io::Error::other("the store lists no runs file"));
    }
    let runs = concat(picked, UnionArgs::default()).map_err(pl)?;
    runs.select([
        col("run_id"),
        col("started_at")
            .dt()
            .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
            .alias("started_at"),
    ])
    .collect()
    .map_err(pl)
}

/// `findings` (with `advisory`, `weight` and `started_at`) in the listing's order: a finding
/// that contradicts before an advisory one, then the heaviest, the most recently started run,
/// and by id. The order is total (`finding_id` is unique).
fn in_listing_order(findings: LazyFrame) -> LazyFrame {
    findings.sort_by_exprs(
        [
            col("advisory"),
            col("weight"),
            col("started_at"),
            col("run_id"),
            col("finding_id"),
        ],
        SortMultipleOptions::default()
            .with_order_descending_multi([false, true, true, false, false])
            .with_nulls_last(true),
    )
}

/// Read the findings to list and tell their runs.
pub fn build(corpus: &CorpusDir, opts: FindingsOptions) -> io::Result<Findings> {
    let mut notes = Vec::new();
    let mut lf = corpus.table("findings")?;
    let names = columns(&mut lf)?;
    let has = |n: &str| names.iter().any(|x| x == n);
    let pick = |n: &str, t: DataType| {
        if has(n) {
            col(n).cast(t)
        } else {
            lit(NULL).cast(t).alias(n)
        }
    };
    let read = [
        col("finding_id"),
        col(CHECK_COLUMN),
        col("kind"),
        col("advisory").cast(DataType::UInt64).alias("advisory"),
        col("run_id"),
        col("conversation_id"),
        pick("tool_name", DataType::String),
        pick("key", DataType::String),
        col("message"),
        pick("wasted_landings", DataType::UInt64)
            .fill_null(pick("turns_back", DataType::UInt64))
            .alias("weight"),
    ];
    // The run's start comes from the store; a corpus whose store is gone still lists its
    // findings, without run stories. Of the store's runs, only the findings' are kept, read a
    // runs file at a time.
    let store = corpus.runs_by_file();
    let starts = match &store {
        Ok(files) => Some(finding_run_starts(corpus, files)?),
        Err(e) => {
            notes.push(format!("run stories left out: {e}"));
            None
        }
    };
    // The findings are read a slice at a time; of each check and kind, the first `per_kind`
    // in the listing's order are kept (the order is total: `finding_id` is unique), and the
    // others only counted.
    let mut totals: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut kept: Option<DataFrame> = None;
    corpus.for_each_slice("findings", &read, |slice| {
        for key in strings(&slice, CHECK_COLUMN)?
            .into_iter()
            .zip(strings(&slice, "kind")?)
        {
            *totals.entry(key).or_default() += 1;
        }
        let lf = match &starts {
            Some(starts) => {
                slice
                    .lazy()
                    .left_join(starts.clone().lazy(), col("run_id"), col("run_id"))
            }
            None => slice
                .lazy()
                .with_column(lit(NULL).cast(DataType::String).alias("started_at")),
        };
        let lf = match kept.take() {
            Some(k) => concat([k.lazy(), lf], UnionArgs::default()).map_err(pl)?,
            None => lf,
        };
        let sorted = in_listing_order(lf).collect().map_err(pl)?;
        let mut taken: BTreeMap<(String, String), usize> = BTreeMap::new();
        let mut rows: Vec<IdxSize> = Vec::new();
        for (i, key) in strings(&sorted, CHECK_COLUMN)?
            .into_iter()
            .zip(strings(&sorted, "kind")?)
            .enumerate()
        {
            let n = taken.entry(key).or_default();
            if *n < opts.per_kind {
                *n += 1;
                rows.push(i as IdxSize);
            }
        }
        let rows = IdxCa::from_vec("rows".into(), rows);
        kept = Some(sorted.take(&rows).map_err(pl)?);
        Ok(())
    })?;
    let mut groups: BTreeMap<(String, String), FindingGroup> = totals
        .into_iter()
        .map(|((check, kind), total)| {
            let group = FindingGroup {
                check: check.clone(),
                kind: kind.clone(),
                total,
                shown: Vec::new(),
            };
            ((check, kind), group)
        })
        .collect();
    // No finding, no slice: nothing to list.
    if let Some(df) = kept {
        let id = strings(&df, "finding_id")?;
        let check = strings(&df, CHECK_COLUMN)?;
        let kind = strings(&df, "kind")?;
        let advisory = u64s(&df, "advisory")?;
        let run = strings(&df, "run_id")?;
        let conversation = strings(&df, "conversation_id")?;
        let tool = strs(&df, "tool_name")?;
        let key = strs(&df, "key")?;
        let message = strings(&df, "message")?;
        let weight = u64s(&df, "weight")?;
        let started = strs(&df, "started_at")?;
        for i in 0..df.height() {
            let Some(g) = groups.get_mut(&(check[i].clone(), kind[i].clone())) else {
                continue;
            };
            g.shown.push(FindingRow {
                finding_id: id[i].clone(),
                run_id: run[i].clone(),
                conversation_id: conversation[i].clone(),
                advisory: advisory[i] == Some(1),
                tool: tool[i].clone(),
                key: key[i].clone(),
                message: Preview::of(&message[i], MESSAGE_CHARS),
                started_at: started[i].clone(),
                weight: weight[i],
            });
        }
    }
    let checks = corpus.checks();
    let order = |c: &str| checks.iter().position(|x| x == c).unwrap_or(usize::MAX);
    let mut groups: Vec<FindingGroup> = groups.into_values().collect();
    groups.sort_by(|a, b| {
        (order(&a.check), &a.check, &a.kind).cmp(&(order(&b.check), &b.check, &b.kind))
    });

    let mut seen = BTreeSet::new();
    let run_ids: Vec<String> = groups
        .iter()
        .flat_map(|g| &g.shown)
        .filter(|f| seen.insert(f.run_id.as_str()))
        .map(|f| f.run_id.clone())
        .collect();
    let runs = if store.is_ok() {
        explain::build_many(corpus, &run_ids, opts.story)?
    } else {
        Vec::new()
    };
    if store.is_ok() && runs.len() < run_ids.len() {
        notes.push(format!(
            "{} run(s) of listed findings are not in the store and are not told",
            run_ids.len() - runs.len()
        ));
    }
    Ok(Findings {
        groups,
        runs,
        notes,
        per_kind: opts.per_kind,
        preview: opts.story.preview,
        max_steps: opts.story.max_steps,
    })
}

#[cfg(test)]
mod tests {
    //! Unit tests read the findings five at a time, so the sample's 15 findings come in three
    //! slices and the first of each check and kind must survive the merge of the slices.
    use super::*;

    #[test]
    fn the_listing_read_in_slices_is_the_whole_tables_sorted() {
        let dir = tempfile::tempdir().unwrap();
        let corpus = CorpusDir::open(&crate::report::groups::tests::audited(
            &["testdata"],
            dir.path(),
        ))
        .unwrap();
        let per_kind = 2;
        let opts = FindingsOptions {
            per_kind,
            ..FindingsOptions::default()
        };
        let got = build(&corpus, opts).unwrap();
        // The whole table at once: each finding's run start, the listing's order, the first
        // `per_kind` of each check and kind.
        let starts = corpus.runs().unwrap().select([
            col("run_id"),
            col("started_at")
                .dt()
                .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
                .alias("started_at"),
        ]);
        let whole = corpus
            .table("findings")
            .unwrap()
            .with_columns([
                col("advisory").cast(DataType::UInt64),
                col("wasted_landings")
                    .cast(DataType::UInt64)
                    .fill_null(col("turns_back").cast(DataType::UInt64))
                    .alias("weight"),
            ])
            .left_join(starts, col("run_id"), col("run_id"));
        let whole = in_listing_order(whole).collect().unwrap();
        let mut want: BTreeMap<(String, String), (u64, Vec<String>)> = BTreeMap::new();
        for ((check, kind), id) in strings(&whole, CHECK_COLUMN)
            .unwrap()
            .into_iter()
            .zip(strings(&whole, "kind").unwrap())
            .zip(strings(&whole, "finding_id").unwrap())
        {
            let e = want.entry((check, kind)).or_default();
            e.0 += 1;
            if e.1.len() < per_kind {
                e.1.push(id);
            }
        }
        let have: BTreeMap<(String, String), (u64, Vec<String>)> = got
            .groups
            .iter()
            .map(|g| {
                let ids = g.shown.iter().map(|f| f.finding_id.clone()).collect();
                ((g.check.clone(), g.kind.clone()), (g.total, ids))
            })
            .collect();
        assert!(
            have.values().any(|(total, _)| *total > per_kind as u64),
            "some kind has more findings than are listed: {have:?}"
        );
        assert_eq!(have, want);
        assert_eq!(got.groups.iter().map(|g| g.total).sum::<u64>(), 15);
    }
}
