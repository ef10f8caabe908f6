//! Comparing an audit corpus with a generated corpus's `expected.json`: every run's
//! repeated-call and prior-turn-evidence dispositions, every repeated-call finding (key, call,
//! occurrences, iteration, mode), every prior-turn-evidence finding's columns, and, where the
//! recording carries the framework's own repeated-call verdicts, that the engine agrees with
//! all of them.

use super::Expected;
use arrow::array::{Array, StringArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, BufRead};
use std::path::Path;
use traceaudit::Finding;

/// The outcome of a comparison.
#[derive(Debug, Default, Clone)]
pub struct Report {
    pub runs_expected: u64,
    pub runs_found: u64,
    pub repeated_call_expected: u64,
    pub repeated_call_found: u64,
    pub prior_turn_fail_expected: u64,
    pub prior_turn_fail_found: u64,
    /// Agreement statuses of the repeated-call check with recorded framework verdicts.
    pub repeated_call_agreement: BTreeMap<String, u64>,
    /// Every difference, one line each (the first 50 are kept, `differences` counts all).
    pub lines: Vec<String>,
    pub differences: u64,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.differences == 0
    }

    fn differ(&mut self, line: String) {
        self.differences += 1;
        if self.lines.len() < 50 {
            self.lines.push(line);
        }
    }

    /// A one-paragraph summary.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} runs ({} expected); repeated-call findings {} ({} expected); prior-turn-evidence \
             fails {} ({} expected); repeated-call agreement {:?}; {} difference(s)",
            self.runs_found,
            self.runs_expected,
            self.repeated_call_found,
            self.repeated_call_expected,
            self.prior_turn_fail_found,
            self.prior_turn_fail_expected,
            self.repeated_call_agreement,
            self.differences
        );
        for l in &self.lines {
            s.push_str("\n  ");
            s.push_str(l);
        }
        s
    }
}

/// `(run_id, check) -> disposition` from a corpus's `dispositions.parquet`.
pub fn read_dispositions(corpus: &Path) -> io::Result<HashMap<(String, String), String>> {
    let file = std::fs::File::open(corpus.join("dispositions.parquet"))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(io::Error::other)?;
    let mut out = HashMap::new();
    for batch in reader {
        let batch = batch.map_err(io::Error::other)?;
        let column = |name: &str| -> io::Result<StringArray> {
            let c = batch
                .column_by_name(name)
                .ok_or_else(|| io::Error::other(format!("dispositions has no {name}")))?;
            c.as_any()
                .downcast_ref::<StringArray>()
                .cloned()
                .ok_or_else(|| io::Error::other(format!("dispositions.{name} is not text")))
        };
        let (runs, checks, dispositions) = (
            column("run_id")?,
            column(traceaudit::tables::CHECK_COLUMN)?,
            column("disposition")?,
        );
        for i in 0..batch.num_rows() {
            out.insert(
                (runs.value(i).to_string(), checks.value(i).to_string()),
                dispositions.value(i).to_string(),
            );
        }
    }
    Ok(out)
}

/// Every finding of a corpus's `findings.jsonl`.
pub fn read_findings(corpus: &Path) -> io::Result<Vec<Finding>> {
    let file = std::fs::File::open(corpus.join("findings.jsonl"))?;
    let mut out = Vec::new();
    for line in io::BufReader::new(file).lines() {
        let line = line?;
        if !line.trim().is_empty() {
            out.push(serde_json::from_str(&line).map_err(io::Error::other)?);
        }
    }
    Ok(out)
}

type RepeatRow = (
    String,
    String,
    String,
    u32,
    Option<u32>,
    Option<String>,
    u32,
);
type PriorRow = (String, Option<u32>, Option<u32>, Option<u32>, Option<u32>);

/// Compare the corpus at `corpus` with `expected`.
pub fn verify(expected: &Expected, corpus: &Path) -> io::Result<Report> {
    let dispositions = read_dispositions(corpus)?;
    let findings = read_findings(corpus)?;
    let mut report = Report {
        runs_expected: expected.runs.len() as u64,
        ..Report::default()
    };
    let mut runs_in_corpus: BTreeSet<&str> = BTreeSet::new();
    for (run, _) in dispositions.keys() {
        runs_in_corpus.insert(run);
    }
    report.runs_found = runs_in_corpus.len() as u64;
    let mut known: BTreeSet<&str> = BTreeSet::new();
    for run in &expected.runs {
        known.insert(&run.run_id);
        for (check, want) in [
            ("repeated-call", &run.repeated_call),
            ("prior-turn-evidence", &run.prior_turn_evidence),
        ] {
            match dispositions.get(&(run.run_id.clone(), check.to_string())) {
                Some(got) if got == want => {}
                Some(got) => report.differ(format!(
                    "{} turn {} {check}: expected {want}, corpus {got} ({:?} answer)",
                    run.run_id, run.turn, run.answer
                )),
                None => report.differ(format!("{} {check}: not in the corpus", run.run_id)),
            }
        }
    }
    for run in runs_in_corpus {
        if !known.contains(run) {
            report.differ(format!("{run}: in the corpus, not expected"));
        }
    }

    let want_repeats: BTreeSet<RepeatRow> = expected
        .runs
        .iter()
        .flat_map(|r| {
            r.repeats.iter().map(move |x| {
                (
                    r.run_id.clone(),
                    x.key.clone(),
                    x.tool_call_id.clone(),
                    x.occurrences,
                    x.iteration,
                    x.mode.clone(),
                    r.turn,
                )
            })
        })
        .collect();
    let got_repeats: BTreeSet<RepeatRow> = findings
        .iter()
        .filter(|f| f.check == "repeated-call")
        .map(|f| {
            (
                f.run_id.clone(),
                f.columns.key.clone().unwrap_or_default(),
                f.columns.tool_call_id.clone().unwrap_or_default(),
                f.columns.occurrences.unwrap_or(0),
                f.iteration,
                f.columns.mode.clone(),
                f.turn,
            )
        })
        .collect();
    report.repeated_call_expected = want_repeats.len() as u64;
    report.repeated_call_found = got_repeats.len() as u64;
    for missing in want_repeats.difference(&got_repeats) {
        report.differ(format!("repeated-call finding missing: {missing:?}"));
    }
    for extra in got_repeats.difference(&want_repeats) {
        report.differ(format!("repeated-call finding not expected: {extra:?}"));
    }

    let want_prior: BTreeSet<PriorRow> = expected
        .runs
        .iter()
        .filter(|r| r.prior_turn_evidence == "checked-fail")
        .map(|r| {
            (
                r.run_id.clone(),
                r.grounded_count,
                r.latest_prior_turn,
                Some(r.turn),
                r.tool_results_this_turn,
            )
        })
        .collect();
    let got_prior: BTreeSet<PriorRow> = findings
        .iter()
        .filter(|f| f.check == "prior-turn-evidence")
        .map(|f| {
            (
                f.run_id.clone(),
                f.columns.grounded_count,
                f.columns.latest_prior_turn,
                f.columns.current_turn,
                f.columns.tool_results_this_turn,
            )
        })
        .collect();
    report.prior_turn_fail_expected = want_prior.len() as u64;
    report.prior_turn_fail_found = got_prior.len() as u64;
    for missing in want_prior.difference(&got_prior) {
        report.differ(format!("prior-turn-evidence finding missing: {missing:?}"));
    }
    for extra in got_prior.difference(&want_prior) {
        report.differ(format!(
            "prior-turn-evidence finding not expected: {extra:?}"
        ));
    }

    // Agreement with the framework's own verdicts, when the corpus recorded any.
    if let Ok(text) = std::fs::read_to_string(corpus.join("manifest.json")) {
        let manifest: serde_json::Value = serde_json::from_str(&text).map_err(io::Error::other)?;
        if let Some(counts) = manifest["counts"].as_array() {
            for c in counts.iter().filter(|c| c["check"] == "repeated-call") {
                if let Some(map) = c["agreement"].as_object() {
                    for (status, n) in map {
                        report
                            .repeated_call_agreement
                            .insert(status.clone(), n.as_u64().unwrap_or(0));
                    }
                }
            }
        }
    }
    let disagreements: u64 = report
        .repeated_call_agreement
        .iter()
        .filter(|(status, _)| status.as_str() != "agrees")
        .map(|(_, n)| n)
        .sum();
    if disagreements > 0 {
        report.differ(format!(
            "repeated-call disagrees with recorded framework verdicts: {:?}",
            report.repeated_call_agreement
        ));
    }
    Ok(report)
}
