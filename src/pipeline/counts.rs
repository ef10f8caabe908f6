//! What the audit of one conversation contributes to a corpus, and the counts per check made
//! of contributions: the audit a whole store at a time, the audit a part at a time and the
//! corpus tables all build on these.

use crate::corpus::layout::TableFiles;
use crate::corpus::{AgreementRow, Disposition, Finding};
use crate::passes::Pass;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;

/// Counts per check, for the manifest and the terminal table.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CheckCounts {
    pub check: String,
    pub runs: u64,
    pub checked_pass: u64,
    pub checked_fail: u64,
    pub not_applicable: u64,
    pub unreachable: u64,
    pub findings: u64,
    pub agreement: BTreeMap<String, u64>,
}

impl CheckCounts {
    pub fn fail_rate(&self) -> Option<f64> {
        let checked = self.checked_pass + self.checked_fail;
        (checked > 0).then(|| self.checked_fail as f64 / checked as f64)
    }
}

/// Everything one conversation contributes to the corpus. Serialisable: an audit of raw inputs
/// checks conversations while they are ingested and files these by store part until the
/// corpus is written.
#[derive(Default, Serialize, Deserialize)]
pub(super) struct Contribution {
    pub(super) conversation_id: String,
    /// The conversation's runs, in its order.
    pub(super) runs: Vec<RunKey>,
    /// Per check, in the order the checks were run, each run's disposition and reason (the
    /// dispositions table's rows, which repeat the run's and conversation's keys).
    pub(super) dispositions: Vec<Vec<(Disposition, String)>>,
    pub(super) findings: Vec<Finding>,
    pub(super) agreement: Vec<AgreementRow>,
    /// Rows of the checks' own tables: (table, row).
    pub(super) rows: Vec<(String, serde_json::Value)>,
}

/// What the corpus tables say of a run beside each of its rows.
#[derive(Default, Serialize, Deserialize)]
pub(super) struct RunKey {
    pub(super) run_id: String,
    pub(super) turn: u32,
    /// The source family ([`source_family`]).
    pub(super) source: String,
}

/// Add one conversation's rows to the counts per check (`counts` in the order the checks
/// were run, as the contribution's dispositions are).
pub(super) fn count(counts: &mut [CheckCounts], r: &Contribution) {
    debug_assert_eq!(counts.len(), r.dispositions.len());
    for (c, outcomes) in counts.iter_mut().zip(&r.dispositions) {
        for (disposition, _) in outcomes {
            c.runs += 1;
            match disposition {
                Disposition::CheckedPass => c.checked_pass += 1,
                Disposition::CheckedFail => c.checked_fail += 1,
                Disposition::NotApplicable => c.not_applicable += 1,
                Disposition::Unreachable => c.unreachable += 1,
            }
        }
        c.findings += r.findings.iter().filter(|f| f.check == c.check).count() as u64;
        for a in r.agreement.iter().filter(|a| a.check == c.check) {
            *c.agreement
                .entry(a.status.as_str().to_string())
                .or_default() += 1;
        }
    }
}

/// What the audit of one part (or of tables in memory) counted, for [`finish_corpus`](super::parts::finish_corpus).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PartAudit {
    pub conversations: u64,
    pub runs: u64,
    pub findings: u64,
    /// Per check, in the order of the checks run.
    pub counts: Vec<CheckCounts>,
    /// The files a part's audit wrote, one per table in the corpus's table order, for the
    /// manifest's list of them (none from an audit that hands its tables back in memory).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<TableFiles>,
}

impl PartAudit {
    pub(super) fn new(passes: &[&'static dyn Pass]) -> PartAudit {
        PartAudit {
            counts: passes
                .iter()
                .map(|p| CheckCounts {
                    check: p.name().to_string(),
                    ..CheckCounts::default()
                })
                .collect(),
            ..PartAudit::default()
        }
    }

    pub(super) fn add(&mut self, r: &Contribution) {
        self.conversations += 1;
        self.runs += r.runs.len() as u64;
        self.findings += r.findings.len() as u64;
        count(&mut self.counts, r);
    }

    /// Add another part's counts (the checks must be the same, in the same order).
    pub(super) fn merge(&mut self, other: &PartAudit) -> io::Result<()> {
        let same = self.counts.len() == other.counts.len()
            && self
                .counts
                .iter()
                .zip(&other.counts)
                .all(|(a, b)| a.check == b.check);
        if !same {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the parts were audited with different checks",
            ));
        }
        self.conversations += other.conversations;
        self.runs += other.runs;
        self.findings += other.findings;
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            a.runs += b.runs;
            a.checked_pass += b.checked_pass;
            a.checked_fail += b.checked_fail;
            a.not_applicable += b.not_applicable;
            a.unreachable += b.unreachable;
            a.findings += b.findings;
            for (status, n) in &b.agreement {
                *a.agreement.entry(status.clone()).or_default() += n;
            }
        }
        Ok(())
    }
}
